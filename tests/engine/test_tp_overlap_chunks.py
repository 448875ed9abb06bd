"""TP communication overlap runs its ring-exchange GEMMs as ``tp`` chunks of ``tokens / tp`` rows
(Transformer Engine's ``CommOverlapP2PBase``; docs/parallelism.md, "TP overlap runs its GEMMs in chunks")."""

from __future__ import annotations

import numpy as np
import pytest

import simcore
from simcore.compute import ops as C
from simcore.engine.pricing import Pricer
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario, resolve_cluster
from simcore.specs.scenario import ModelSpec
from simcore.workload import lowering as L

SC = "scenarios/llama3-70b-h100.yaml"


def _llama() -> ModelSpec:
    return ModelSpec(
        name="t", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, seq_len=4096,
        activation="swiglu",
    )  # fmt: skip


def _splits(ops: list[L.Op]) -> dict[str, float]:
    return {o.name: float(o.args["splits"]) if o.args.get("split_on") else 1.0 for o in ops if o.kind == "gemm"}


def test_layer_lowering_marks_the_ring_exchange_gemms() -> None:
    m = _llama()
    on = L.Layout(micro_batch=1, seq=4096, tp=4, sp=True, tp_overlap=True)
    fwd = L.layer_fwd(m, on, False)
    # forward: the four linear layers (qkv_fprop, proj_fprop, fc1_fprop, fc2_fprop)
    assert _splits(fwd) == {"qkv": 4.0, "attn_out": 4.0, "mlp_in": 4.0, "mlp_out": 4.0}
    bwd = _splits(L.backward(fwd))
    # backward: the out-projections' input gradients (proj_dgrad, fc2_dgrad) are ring exchanges; the
    # other input gradients and every weight gradient are bulk overlaps beside one GEMM
    assert bwd["attn_out_dgrad"] == bwd["mlp_out_dgrad"] == 4.0
    assert bwd["qkv_dgrad"] == bwd["mlp_in_dgrad"] == 1.0
    assert all(v == 1.0 for k, v in bwd.items() if k.endswith("_wgrad"))
    # no overlap, or overlap without sequence parallelism (Megatron needs it): whole GEMMs
    for lay in (
        L.Layout(micro_batch=1, seq=4096, tp=4, sp=True),
        L.Layout(micro_batch=1, seq=4096, tp=4, sp=False, tp_overlap=True),
    ):
        assert set(_splits(L.layer_fwd(m, lay, False)).values()) == {1.0}
    # arrays of layouts: per element
    arr = L.Layout(micro_batch=1, seq=4096, tp=np.array([2.0, 8.0]), sp=np.array([True, True]),
                   tp_overlap=np.array([True, False]))  # fmt: skip
    chunks = arr.tp_chunks
    assert chunks is not None and np.array_equal(chunks[0], [2.0, 8.0]) and np.array_equal(chunks[1], [True, False])
    assert L.Layout(micro_batch=1, seq=4096, tp=1, sp=True, tp_overlap=True).tp_chunks is None


def test_a_split_gemm_costs_its_chunks() -> None:
    """Hand check: ``splits`` calls of the ``m / splits``-row GEMM, the same FLOPs."""
    reg = default_registry()
    cl = resolve_cluster(load_scenario(SC, []).cluster, reg)
    dev = reg.device("h100")
    prof = load_profile(dev)
    pricer = Pricer(cl, "eager", profile=prof, per_op_host=False)
    whole = L._gemm("qkv", 4096.0, 2304.0, 16384.0, "bf16")
    split = L._gemm("qkv", 4096.0, 2304.0, 16384.0, "bf16", chunks=(8.0, True))
    (t_w, t_s), (f_w, f_s) = pricer.times([whole, split])
    gap = prof.gap.get("eager", 0.0)  # each kernel's launch gap

    def kernel(rows: float) -> float:
        return float(C.gemm(dev, prof, rows, 2304.0, 16384.0, "bf16", l2_reuse=False).time_s) + gap

    assert float(t_s) == pytest.approx(8.0 * kernel(512.0), rel=1e-9)
    assert float(t_w) == pytest.approx(kernel(4096.0), rel=1e-9)
    assert float(f_s) == float(f_w) == 2.0 * 4096 * 2304 * 16384
    # 512-row chunks over 132 SMs: each call fills fewer tiles, so the chunks take longer than the whole
    assert float(t_s) > float(t_w)


def test_overlap_prices_chunked_gemms_in_the_step() -> None:
    """Llama 3 70B on 64 H100 (TP 4, CP 2, sequence parallel): with the overlap the GEMM class grows by the
    chunks' cost (1024-row chunks of the 4096 tokens a rank holds), the model FLOPs do not change."""
    on = simcore.predict(load_scenario(SC, []))
    off = simcore.predict(load_scenario(SC, ["parallel.tp_overlap=false"]))
    assert on.breakdown["gemm"] > 1.01 * off.breakdown["gemm"]
    assert on.model_tflops_per_gpu * on.step_time_s == pytest.approx(off.model_tflops_per_gpu * off.step_time_s)


def test_sequence_parallel_gathers_move_the_quantized_inputs() -> None:
    """Under a low-precision recipe TE all-gathers the quantized GEMM input (forward) and output gradient
    (backward); the reduce-scatters stay bf16. An MoE block's gathers (the dispatcher's tokens) stay bf16."""
    m = _llama()
    q = 0.5 + 1.0 / 16  # NVFP4: E2M1 values and an E4M3 scale per 16
    lay = L.Layout(micro_batch=1, seq=4096, tp=4, sp=True, dtype="fp4", gather_bytes=q)
    full = 4096 * 4096
    fwd = {o.name: o for o in L.tp_comm_fwd(m, lay)}
    assert fwd["tp_allgather"].args["nbytes"] == pytest.approx(full * q)
    assert fwd["tp_reducescatter"].args["nbytes"] == pytest.approx(full * 2.0)
    bwd = {o.name: o for o in L.backward(list(fwd.values()))}
    # the all-gather's backward is the bf16 reduce-scatter of the input gradient, the reduce-scatter's the
    # quantized all-gather of the output gradient
    assert bwd["tp_allgather_bwd"].args["op"] == "reduce_scatter"
    assert bwd["tp_allgather_bwd"].args["nbytes"] == pytest.approx(full * 2.0)
    assert bwd["tp_reducescatter_bwd"].args["op"] == "all_gather"
    assert bwd["tp_reducescatter_bwd"].args["nbytes"] == pytest.approx(full * q)
    plain = {o.name: o for o in L.tp_comm_fwd(m, lay, quantized=False)}
    assert plain["tp_allgather"].args["nbytes"] == pytest.approx(full * 2.0)
    # bf16 (no recipe): every collective in the activation dtype
    bf = {o.name: o for o in L.tp_comm_fwd(m, L.Layout(micro_batch=1, seq=4096, tp=4, sp=True))}
    assert bf["tp_allgather"].args["nbytes"] == bf["tp_reducescatter"].args["nbytes"] == pytest.approx(full * 2.0)
    # a step: the quantized gathers make NVFP4's exposed TP time (no overlap) smaller than bf16's layout
    # a step (Llama 3 70B on 64 H100, no overlap): FP8's exposed TP time is three quarters of bf16's (half
    # the collectives at half the bytes)
    fp8 = simcore.predict(load_scenario(SC, ["parallel.tp_overlap=false", "training.precision=fp8_current"]))
    bf16 = simcore.predict(load_scenario(SC, ["parallel.tp_overlap=false"]))
    assert 0.6 < fp8.exposed_comm["tp_comm"] / bf16.exposed_comm["tp_comm"] < 0.85


def test_column_parallel_backward_gathers_its_input_again() -> None:
    """Under sequence parallelism a column-parallel layer keeps only its input shard: its backward all-gathers
    the input once more (the forward's bytes: quantized under a recipe, bf16 without) for the weight gradient,
    asynchronously beside the input-gradient GEMM. An MoE block's gathers (the dispatcher's) have none."""
    m = _llama()
    q = 0.5 + 1.0 / 16
    full = 4096 * 4096
    for lay, nbytes in (
        (L.Layout(micro_batch=1, seq=4096, tp=4, sp=True, dtype="fp4", gather_bytes=q), full * q),
        (L.Layout(micro_batch=1, seq=4096, tp=4, sp=True), full * 2.0),
    ):
        bwd = {o.name: o for o in L.backward(L.tp_comm_fwd(m, lay))}
        rg = bwd["tp_allgather_regather"]
        assert (rg.args["op"], rg.category, rg.count) == ("all_gather", "tp_comm_async", 2)
        assert rg.args["nbytes"] == pytest.approx(nbytes)
        # the input gradient's reduce-scatter: beside the weight-gradient GEMM; the row-parallel layers'
        # output-gradient all-gather stays on the critical path
        assert bwd["tp_allgather_bwd"].category == "tp_comm_async"
        assert bwd["tp_reducescatter_bwd"].category == "tp_comm"
    moe_block = L.backward(L.tp_comm_fwd(m, L.Layout(micro_batch=1, seq=4096, tp=4, sp=True), quantized=False))
    assert not any(o.category == "tp_comm_async" for o in moe_block)
    assert not any(o.category == "tp_comm_async" for o in L.backward(L.tp_comm_fwd(m, L.Layout(micro_batch=1, seq=4096, tp=4))))


def test_the_async_collectives_hide_behind_the_backward_gemms() -> None:
    """Hand check of the exposure: what the layer's backward GEMMs do not cover shows, and the hidden part
    slows the GEMMs by the system's overlap factor; reported as TP communication."""
    from simcore.engine.pricing import Priced
    from simcore.engine.training import _exposed

    for rg, gemm, shown in ((0.2, 0.5, 0.0), (0.8, 0.25, 0.3)):
        p = Priced({"tp_comm": 0.5, "tp_comm_async": rg, "gemm": 2.0 * gemm})
        out = _exposed(p, 0.0, 2.0 * gemm, False, 4, "1f1b", 2.0, slowdown=1.1)
        hidden = rg - shown
        assert "tp_comm_async" not in out.time
        assert out.time["tp_comm"] == pytest.approx(0.5 + shown + 0.1 * hidden)
