"""The gradient reduction dtype (``training.grad_reduce_in_fp32``): Megatron's ``main_grad`` buffers and the
data-parallel collectives that reduce them are in that dtype, so bf16 halves both the gradient memory and
the bytes the reduce-scatter / all-reduce moves (docs/parallelism.md, "Gradient reduction dtype")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.prediction import evaluate_training, predict
from simcore.specs.resolve import scenario_from_dict


def _scenario(dp: int, zero: int, ep: int, grads_fp32: bool | None, gpus_per_dp: int = 1) -> dict[str, Any]:
    moe = {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024} if ep > 1 else None
    return {
        "name": "grad dtype",
        "kind": "training",
        "cluster": {"system": "hgx-h100", "gpus": dp * gpus_per_dp},
        "model": {
            "name": "m",
            "layers": 4,
            "hidden": 1024,
            "heads": 8,
            "ffn_hidden": 4096,
            "vocab": 32000,
            "seq_len": 1024,
            **({"moe": moe} if moe else {}),
        },
        "training": {
            "micro_batch": 1,
            "global_batch": 2 * dp,
            "precision": "bf16",
            **({} if grads_fp32 is None else {"grad_reduce_in_fp32": grads_fp32}),
        },
        "parallel": {"tp": gpus_per_dp, "dp": dp, "zero": zero, "ep": ep, "sequence_parallel": gpus_per_dp > 1},
        "runtime": {"stack": "megatron"},
    }


def _busy(sc: dict[str, Any]) -> float:
    """Seconds per step the data-parallel collectives move bytes, exposed or not."""
    return float(evaluate_training(scenario_from_dict(sc))[2].stage_times["dp_busy_s"])


def test_bf16_gradients_halve_the_buffers_and_the_reduce_scatter() -> None:
    fp32, bf16 = _scenario(8, 1, 1, True), _scenario(8, 1, 1, False)
    a, b = predict(scenario_from_dict(fp32)), predict(scenario_from_dict(bf16))
    assert b.memory_breakdown["gradients"] == pytest.approx(a.memory_breakdown["gradients"] / 2)
    assert a.memory_breakdown["weights"] == b.memory_breakdown["weights"]
    assert a.memory_breakdown["optimizer"] == b.memory_breakdown["optimizer"]  # the master copy stays fp32
    assert _busy(bf16) < _busy(fp32)


def test_the_megatron_stack_reduces_in_fp32_unless_told() -> None:
    assert _busy(_scenario(8, 1, 1, None)) == _busy(_scenario(8, 1, 1, True))


@settings(max_examples=12, deadline=None)
@given(
    dp=st.sampled_from([2, 4, 8, 16]),
    zero=st.sampled_from([0, 1, 2]),
    ep=st.sampled_from([1, 2]),
    tp=st.sampled_from([1, 2]),
)
def test_bf16_reduction_never_moves_more_bytes(dp: int, zero: int, ep: int, tp: int) -> None:
    """Property: reducing gradients in bf16 never takes the data-parallel collectives longer, nor the
    gradients more memory, than fp32, on any layout (DDP, ZeRO-1/2, expert data parallelism)."""
    fp32, bf16 = _scenario(dp, zero, ep, True, tp), _scenario(dp, zero, ep, False, tp)
    assert _busy(bf16) <= _busy(fp32)
    a, b = predict(scenario_from_dict(fp32)), predict(scenario_from_dict(bf16))
    assert b.memory_breakdown["gradients"] < a.memory_breakdown["gradients"]


def test_the_distributed_optimizer_shards_dense_state_over_dp_cp_and_experts_over_their_data_parallel_group() -> None:
    """Megatron's dense optimizer shards over ``dp x cp``, the MoE optimizer over the expert-data-parallel
    ranks ``tp cp dp / (ep etp)`` (``get_megatron_optimizer``): by hand, on the layout's numbers."""
    from simcore.engine.training import TrainingLayout, sharding_groups

    lay = TrainingLayout(tp=2, pp=1, dp=4, cp=2, ep=4, micro_batch=1, global_batch=8)
    assert sharding_groups(lay) == (8, 2)  # dense 4 x 2; experts 2 x 2 x 4 / (4 x 2)
    lay = TrainingLayout(tp=1, pp=1, dp=8, cp=1, ep=8, etp=1, micro_batch=1, global_batch=8)
    assert sharding_groups(lay) == (8, 1)  # EP 8 over 8 ranks: each holds its own experts' whole state
    # a dense model with context parallelism: ZeRO-1's optimizer state halves from cp 1 to cp 2 on as many
    # data-parallel ranks
    sc = _scenario(4, 1, 1, True)
    one = predict(scenario_from_dict(sc)).memory_breakdown["optimizer"]
    sc = {**sc, "cluster": {**sc["cluster"], "gpus": 8}, "parallel": {**sc["parallel"], "cp": 2}}
    two = predict(scenario_from_dict(sc)).memory_breakdown["optimizer"]
    assert two == pytest.approx(one / 2)


def test_bf16_moments_in_a_scenario() -> None:
    fp32 = _scenario(8, 1, 1, False)
    bf16 = {**fp32, "training": {**fp32["training"], "optimizer_moments_dtype": "bf16"}}
    a, b = predict(scenario_from_dict(fp32)), predict(scenario_from_dict(bf16))
    assert b.memory_breakdown["optimizer"] == pytest.approx(a.memory_breakdown["optimizer"] * 8 / 12)
    assert b.breakdown["optimizer"] <= a.breakdown["optimizer"]  # (this small update is launch-bound)
