"""Hierarchical MoE dispatchers (runtime.moe_dispatcher: deepep, hybridep): a token crosses the fabric once
per destination NVLink domain and NVLink once per other GPU holding one of its experts, at the kernels'
published bandwidths (docs/parallelism.md, "The MoE dispatcher")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.comm.collectives import collective_cost, link_rates
from simcore.comm.dispatch import dispatch_time, hit_probability
from simcore.comm.groups import GroupPlacement
from simcore.errors import SimcoreError
from simcore.prediction import predict
from simcore.specs.dispatcher import load_dispatcher
from simcore.specs.resolve import cluster_for


def test_hit_probability_by_hand() -> None:
    # 4 experts in 2 halves, top-2: a half is missed only when both picks land in the other, 1 of C(4,2)=6
    assert float(hit_probability(4, 2, 2)) == pytest.approx(5 / 6)
    # one part holds every expert; as many parts as experts: each holds one, hit k/E of the time
    assert float(hit_probability(256, 8, 1)) == 1.0
    assert float(hit_probability(16, 2, 16)) == pytest.approx(2 / 16)
    with pytest.raises(SimcoreError, match="top_k"):
        hit_probability(4, 5, 2)


def test_dispatch_time_by_hand() -> None:
    """32 ranks as 4 nodes of 8 on B200: the network leg (3 other nodes x p_node) bounds the time."""
    cl = cluster_for("dgx-b200", gpus=32)
    g = GroupPlacement.of(32, 8)
    nbytes = 4096 * 8 * 7168 * 2.0  # tokens x top_k x hidden x bf16: one micro-batch's routed bytes
    s = nbytes / 8
    spec = load_dispatcher("deepep")
    rates = link_rates(cl, g)
    net = s * 3 * float(hit_probability(256, 8, 4)) / (float(rates.network) * spec.network_efficiency)
    nv = s * 28 * float(hit_probability(256, 8, 32)) / (float(rates.nvlink) * spec.nvlink_efficiency)
    lat = float(collective_cost("all_to_all", 1.0, g, cl).time_s)
    assert float(dispatch_time(nbytes, 8, 256, g, cl, "deepep")) == pytest.approx(lat + max(net, nv))
    # NCCL's all-to-all sends every routed copy over the fabric (6 per token here against 2.7)
    assert float(collective_cost("all_to_all", nbytes, g, cl).time_s) > 1.5 * float(
        dispatch_time(nbytes, 8, 256, g, cl, "deepep")
    )
    assert float(dispatch_time(nbytes, 8, 256, GroupPlacement.of(1), cl, "deepep")) == 0.0


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 6), st.integers(0, 6))
def test_more_nodes_never_faster(a: int, b: int) -> None:
    """The same 64-rank group spread over more NVLink domains moves more bytes over the slower fabric."""
    cl = cluster_for("dgx-b200", gpus=64)
    few, many = sorted((a, b))
    t = [float(dispatch_time(64e6, 8, 256, GroupPlacement.of(64, 64 >> x), cl, "hybridep")) for x in (few, many)]
    assert t[0] <= t[1] * (1 + 1e-9)


def test_unknown_dispatcher_is_one_error() -> None:
    with pytest.raises(SimcoreError, match="unknown MoE dispatcher"):
        load_dispatcher("nccl-ep")


def _ds(**runtime: Any) -> dict[str, Any]:
    return {
        "kind": "training",
        "cluster": {"system": "dgx-b200", "gpus": 256},
        "model": {"preset": "deepseek-v3"},
        "training": {"micro_batch": 1, "global_batch": 2048, "precision": "mxfp8"},
        "parallel": {"tp": 1, "pp": 8, "dp": 32, "vp": 2, "ep": 32, "etp": 1},
        "runtime": {"stack": "megatron", **runtime},
    }


def test_deepep_and_overlap_in_a_step() -> None:
    """DeepSeek-V3 with EP 32 over 4 B200 nodes: DeepEP's once-per-node dispatch and the 1F1B A2A overlap
    each shorten the expert all-to-all; the megatron stack's default is the all-to-all."""
    base = predict(_ds())
    deepep = predict(_ds(moe_dispatcher="deepep"))
    both = predict(_ds(moe_dispatcher="deepep", moe_a2a_overlap=True))
    ep = [r.breakdown["ep_comm"] for r in (base, deepep, both)]
    assert ep[0] > 1.5 * ep[1] > 0 and ep[2] < ep[1]
    assert base.step_time_s > deepep.step_time_s > both.step_time_s
    assert np.isfinite(both.step_time_s)


def test_mtp_adds_a_layer_a_projection_and_a_head_on_the_last_stage() -> None:
    """DeepSeek-V3's preset carries one MTP module (config.json num_nextn_predict_layers 1); on one
    pipeline stage it costs one more MoE layer, the 2h -> h projection and a second LM head and loss."""
    from simcore.specs.registry import default_registry
    from simcore.workload import lowering as L

    assert default_registry().models["deepseek-v3"]["mtp_layers"] == 1
    sc = _ds() | {"parallel": {"tp": 1, "pp": 1, "dp": 8, "ep": 8, "etp": 1}, "cluster": {"system": "dgx-b200", "gpus": 8}}
    sc["training"] = {"micro_batch": 1, "global_batch": 8, "precision": "mxfp8", "recompute": "full"}
    on, off = predict(sc), predict(sc | {"model": {"preset": "deepseek-v3", "mtp_layers": 0}})
    # 61 layers + embedding + head: one more layer and head is a few percent, under 1/61 + a head's share
    assert 1.0 < on.step_time_s / off.step_time_s < 1.0 + 2.5 / 61
    from simcore.specs.resolve import as_scenario

    m = as_scenario(sc).model
    lay = L.Layout(micro_batch=1, seq=4096.0, ep=8, etp=1)
    ops = L.mtp_fwd(m, lay)
    assert {"mtp_mtp_proj", "mtp_lm_head", "mtp_ep_dispatch"} <= {o.name for o in ops}
    proj = next(o for o in ops if o.name == "mtp_mtp_proj")
    assert (proj.args["m"], proj.args["n"], proj.args["k"]) == (4096, 7168, 2 * 7168)
    assert L.mtp_fwd(m.model_copy(update={"mtp_layers": 0}), lay) == []


def test_a2a_overlap_leaves_the_schedules_unpaired_passes_exposed() -> None:
    """Megatron-Core's 1F1B A2A overlap pairs a forward with another micro-batch's backward: without pipelining
    the first forward and the last backward run alone (1 - 1/m paired); interleaved, rank 0's warmup of
    2 (pp - 1) + (vp - 1) pp chunk forwards and one extra run alone, as many backwards in the cooldown."""
    from simcore.engine.training import a2a_paired_share

    assert a2a_paired_share(5, 1, 1) == pytest.approx(0.8)
    # pp 2, vp 8, 32 micro-batches: 2 + 14 + 1 = 17 of 256 chunk passes alone
    assert a2a_paired_share(32, 2, 8) == pytest.approx(1 - 17 / 256)
    assert a2a_paired_share(1, 1, 1) == 0.0
    assert a2a_paired_share(2, 8, 4) == 0.0  # all warmup: nothing to pair
    shares = a2a_paired_share(np.array([2.0, 8.0, 64.0]), 4, 2)
    assert np.all(np.diff(shares) > 0)  # more micro-batches, more of them paired
    # a one-micro-batch step hides nothing: the overlap changes no exposed all-to-all time
    one = _ds(moe_dispatcher="deepep") | {"parallel": {"tp": 1, "pp": 1, "dp": 256, "ep": 32, "etp": 1}}
    one["training"] = {**one["training"], "global_batch": 256}
    a, b = predict(one), predict({**one, "runtime": {**one["runtime"], "moe_a2a_overlap": True}})
    assert b.breakdown["ep_comm"] == pytest.approx(a.breakdown["ep_comm"])
