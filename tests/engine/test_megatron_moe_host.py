"""Megatron-Core's MoE host costs: Transformer Engine's per-expert GEMM calls and the dropless
dispatcher's host sync in every MoE layer's forward (docs/parallelism.md, "MoE host costs")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simcore.engine.runtime import with_stack
from simcore.prediction import predict
from simcore.specs.resolve import as_scenario


def _qwen(ep: int = 8, mb: int = 1, **runtime: Any) -> dict[str, Any]:
    return {
        "kind": "training",
        "cluster": {"system": "dgx-b200", "gpus": 8},
        "model": {"preset": "qwen3-30b-a3b", "seq_len": 4096},
        "training": {"micro_batch": mb, "global_batch": 64, "precision": "mxfp8"},
        "parallel": {"tp": 1, "pp": 1, "dp": 8, "ep": ep, "etp": 1},
        "runtime": {"stack": "megatron", **runtime},
    }


def test_megatron_defaults_issue_experts_one_by_one_and_sync() -> None:
    sc, chosen = with_stack(as_scenario(_qwen()))
    assert sc.runtime.moe_expert_calls == "per_expert" and sc.runtime.moe_host_sync
    assert {"runtime.moe_expert_calls", "runtime.moe_host_sync"} <= {c.key for c in chosen}
    # on a dense model the MoE defaults are not worth a note
    dense = _qwen() | {"model": {"preset": "llama3-8b"}, "parallel": {"tp": 1, "dp": 8}}
    assert not any(c.key.startswith("runtime.moe_") for c in with_stack(as_scenario(dense))[1])


def test_per_expert_host_is_hand_computed() -> None:
    """A per-expert call costs one op of the calibrated eager layer: 2 projections x (GEMM + quantize)
    forward, 2 x (two GEMMs + quantize) backward, per local expert and MoE layer."""
    import simcore.engine.training as T

    seen: list[tuple[Any, Any, Any]] = []
    orig = T._moe_expert_host

    def spy(s: Any, ht: Any) -> tuple[Any, Any]:
        out = orig(s, ht)
        seen.append((s, ht, out))
        return out

    T._moe_expert_host = spy  # type: ignore[assignment]
    try:
        predict(_qwen(ep=8))
    finally:
        T._moe_expert_host = orig  # type: ignore[assignment]
    s, ht, (e_f, e_b) = seen[-1]
    ops_f, ops_b = s.prof.host_ops.calibrated_layer_ops("reference", "swiglu")
    per_f = ht.wrapped("train_fwd_swiglu", "fwd") / ops_f
    per_b = ht.wrapped("train_bwd_swiglu", "bwd") / ops_b
    calls = 48 * 128 / 8  # MoE layers on the rank x local experts
    assert float(e_f) == pytest.approx(calls * 2 * 2 * float(per_f))
    assert float(e_b) == pytest.approx(calls * 2 * 3 * float(per_b))


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_fewer_local_experts_cost_less_host(ep: int) -> None:
    """The per-expert host grows with the local experts (128 / ep): more expert parallelism, less host."""
    step = {e: predict(_qwen(ep=e)).step_time_s for e in (ep, 8)}
    assert step[8] <= step[ep] + 1e-12


def test_grouped_calls_and_no_sync_are_the_old_model() -> None:
    """``grouped`` calls without a sync price the step as before (the GPU-bound pricing): never slower."""
    old = predict(_qwen(moe_expert_calls="grouped", moe_host_sync=False))
    new = predict(_qwen())
    assert new.step_time_s > 1.2 * old.step_time_s  # micro-batch 1, 16 local experts: host-bound
    assert new.breakdown["host_overhead"] > old.breakdown["host_overhead"]


def test_sync_only_costs_where_a_phase_is_host_bound() -> None:
    """The sync stops the forward's host excess hiding behind the backward's GPU time: it never makes a
    step faster, and at a large micro-batch (GPU-bound forward and backward) it changes nothing."""
    for mb in (1, 8):
        free = predict(_qwen(mb=mb, moe_host_sync=False)).step_time_s
        sync = predict(_qwen(mb=mb, moe_host_sync=True)).step_time_s
        assert sync >= free - 1e-12
    big_free = predict(_qwen(mb=8, moe_host_sync=False)).step_time_s
    big_sync = predict(_qwen(mb=8, moe_host_sync=True)).step_time_s
    assert np.isclose(big_sync, big_free, rtol=1e-9)


def test_expert_data_parallel_group_is_placed_and_priced() -> None:
    """Parallel folding on 64 B200s (8 a node), tp 1, ep 8: the 8 ranks holding the same experts are 8
    apart, one per node, so their gradient reduce-scatter crosses the fabric; at ep 64 nobody shares
    experts and nothing is reduced."""
    from simcore.engine.pricing import Pricer
    from simcore.specs.resolve import cluster_for

    c = cluster_for("dgx-b200", gpus=64)
    g = Pricer.for_layout(c, tp=1, cp=1, dp=64, pp=1, ep=8, etp=1).groups["edp"]
    assert (float(g.size), float(g.per_domain), float(g.domains)) == (8.0, 1.0, 8.0)
    p64 = Pricer.for_layout(c, tp=1, cp=1, dp=64, pp=1, ep=64, etp=1)
    assert float(p64.groups["edp"].size) == 1.0
    assert float(p64.comm_time("reduce_scatter", 1e9, "edp")) == 0.0
    # the same bytes over the cross-node group cost more than over an in-node group of the same size
    p8 = Pricer.for_layout(cluster_for("dgx-b200", gpus=64), tp=1, cp=1, dp=64, pp=1, ep=8, etp=1)
    inside = Pricer.for_layout(cluster_for("dgx-b200", gpus=8), tp=1, cp=1, dp=8, pp=1, ep=1, etp=1)
    assert float(p8.comm_time("reduce_scatter", 1e9, "edp")) > float(
        inside.comm_time("reduce_scatter", 1e9, "edp")
    )
