"""Megatron-Core layouts as users write them: the pipeline split that counts the embedding and the loss
as layers, explicit per-stage layer lists, MoE parallel folding (EP beyond DP), squared ReLU, and fields
beside a preset overriding it deeply."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.training import chunk_layer_counts, stage_layer_counts
from simcore.errors import SpecError
from simcore.prediction import predict
from simcore.specs.resolve import scenario_from_dict
from simcore.workload.model import param_counts


@pytest.mark.parametrize(
    ("layers", "pp", "vp", "emb", "loss", "want"),
    [
        (126, 8, 1, False, False, (16, 15, 16)),  # 6 stages of 16, then 15s
        (128, 8, 1, False, False, (16, 16, 16)),
        (126, 16, 8, True, True, (7, 7, 8)),  # Llama 3.1 405B: 126 + 2 on 128 chunks of one
        (126, 8, 4, True, True, (15, 15, 16)),  # 128 units on 32 chunks of 4
        (5, 2, 1, False, False, (3, 2, 0)),  # no middle stage
        (12, 1, 1, True, True, (12, 0, 0)),  # one stage holds everything
    ],
)
def test_stage_layer_counts_by_hand(
    layers: int, pp: int, vp: int, emb: bool, loss: bool, want: tuple[int, int, int]
) -> None:
    got = tuple(float(x) for x in stage_layer_counts(layers, pp, vp, emb, loss))
    assert got == want


def test_explicit_stage_layers() -> None:
    assert stage_layer_counts(10, 3, 1, stage_layers=(2, 5, 3)) == (2.0, 3.0, 5.0)
    with pytest.raises(SpecError, match="pipeline_layers"):
        stage_layer_counts(10, 3, 1, stage_layers=(2, 5, 2))


def _sc(model: dict[str, Any], parallel: dict[str, Any], gpus: int, **training: Any) -> Any:
    return scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h100", "gpus": gpus},
            "model": model,
            "training": {"micro_batch": 1, "global_batch": 64, **training},
            "parallel": parallel,
        }
    )


SMALL = {"layers": 14, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 32000, "seq_len": 2048}


def test_405b_style_split_is_accepted_and_priced() -> None:
    # 14 layers on pp 4 x vp 4 = 16 chunks: rejected unless the embedding and loss count as layers
    par = {"tp": 1, "pp": 4, "vp": 4}
    with pytest.raises(SpecError, match="fewer than pp\\*vp"):
        predict(_sc(SMALL, par, 8))
    both = {**par, "account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}
    assert predict(_sc(SMALL, both, 8)).step_time_s > 0


def test_lighter_first_stage_does_not_slow_the_step() -> None:
    par = {"tp": 1, "pp": 2}
    even = predict(_sc(SMALL, {**par, "pipeline_layers": [7, 7]}, 8)).step_time_s
    skew = predict(_sc(SMALL, {**par, "pipeline_layers": [11, 3]}, 8)).step_time_s
    assert skew > even
    with pytest.raises(SpecError, match="pipeline_layers"):
        predict(_sc(SMALL, {**par, "pipeline_layers": [7, 7, 0]}, 8))


MOE = {**SMALL, "layers": 4, "moe": {"experts": 16, "top_k": 2, "expert_ffn_hidden": 1024}}


def test_ep_larger_than_dp_is_folded_over_tp() -> None:
    # tp 4 x dp 2: EP 8 spans the tensor-parallel ranks too (Megatron-Core's parallel folding)
    r = predict(_sc(MOE, {"tp": 4, "ep": 8, "etp": 1, "sequence_parallel": True}, 8))
    assert r.step_time_s > 0
    with pytest.raises(SpecError, match=r"ep\*etp \(8\*4\) must divide"):
        predict(_sc(MOE, {"tp": 4, "ep": 8, "sequence_parallel": True}, 8))


def test_squared_relu_is_two_matrices() -> None:
    sc = _sc({**SMALL, "activation": "squared_relu"}, {"tp": 1}, 8)
    gelu = _sc(SMALL, {"tp": 1}, 8)
    assert param_counts(sc.model).total == param_counts(gelu.model).total
    assert predict(sc).step_time_s > 0


def test_a_field_beside_a_preset_overrides_deeply() -> None:
    sc = scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h100", "gpus": 8},
            "model": {"preset": "mixtral-8x7b", "moe": {"imbalance": 1.5}},
        }
    )
    assert sc.model.moe is not None
    assert sc.model.moe.imbalance == 1.5 and sc.model.moe.experts == 8 and sc.model.moe.top_k == 2


@settings(max_examples=200, deadline=None)
@given(
    pp=st.integers(1, 16),
    vp=st.integers(1, 8),
    extra=st.integers(0, 100),
    emb=st.booleans(),
    loss=st.booleans(),
)
def test_chunk_layer_counts_agree_with_stage_counts(pp: int, vp: int, extra: int, emb: bool, loss: bool) -> None:
    """Megatron's split chunk by chunk (:func:`chunk_layer_counts`) and rank by rank over arrays
    (:func:`stage_layer_counts`): the same first, last and fullest middle rank."""
    layers = pp * vp + 2 + extra
    n = chunk_layer_counts(layers, pp, vp, emb, loss)
    assert len(n) == pp * vp and sum(n) == layers and min(n) >= 0
    first, last, mid = (float(x) for x in stage_layer_counts(layers, pp, vp, emb, loss))
    ranks = [sum(n[i::pp]) for i in range(pp)]  # rank i holds chunks i, i + pp, ...
    assert (first, last if pp > 1 else 0.0, mid) == (
        ranks[0] if pp > 1 else layers, ranks[-1] if pp > 1 else 0.0, max(ranks[1:-1], default=0)
    )


def test_explicit_chunk_layers_are_checked() -> None:
    assert chunk_layer_counts(10, 3, 1, stage_layers=(2, 5, 3)) == [2, 5, 3]
    with pytest.raises(SpecError, match=r"pp \(4\) entries"):
        chunk_layer_counts(10, 4, 1, stage_layers=(2, 5, 3))


def test_des_follows_the_split_and_the_bf16_layers() -> None:
    """The DES prices the same stages as the analytic engine: the embedding/loss split moves layers off
    the first and last rank, and the bf16 first/last layers slow those ranks."""
    base = {"tp": 1, "pp": 4, "vp": 1}
    plain = _sc(SMALL, base, 4)
    split = _sc(SMALL, {**base, "account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}, 4)
    for sc in (plain, split):
        a, d = predict(sc), predict(sc, engine="des")
        assert d.step_time_s == pytest.approx(a.step_time_s, rel=0.05)
    fp8 = _sc(SMALL, base, 4, precision="fp8")
    fp8_bf16 = _sc(SMALL, base, 4, precision="fp8", bf16_layers_start=1, bf16_layers_end=1)
    assert predict(fp8_bf16, engine="des").step_time_s > predict(fp8, engine="des").step_time_s
