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
