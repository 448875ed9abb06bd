"""Activation offload and CPU optimizer offload (docs/parallelism.md, Offload): the closed form of the
offload stream against a step-by-step replay of Transformer Engine's schedule, hand-computed memory and
optimizer seconds, monotonic laws, and the scenario's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.comm.host import host_link
from simcore.engine import training as T
from simcore.engine.offload import (
    CPU_UPDATE_BYTES,
    host_bandwidth_per_gpu,
    host_memory_copy_time,
    layered_copy_exposed,
    optimizer_offload_time,
)
from simcore.errors import SimcoreError
from simcore.prediction import predict
from simcore.specs.hardware import System
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario, scenario_from_dict
from simcore.specs.scenario import ModelSpec, TrainingSpec
from tests.cli_runner import run_cli

H100 = "hgx-h100"


def _system(name: str = H100) -> System:
    s = default_registry().find(name)[1]
    assert isinstance(s, System)
    return s


def _replay(n: int, layers: int, c: float, t: float) -> float:
    """One pass as Transformer Engine's OffloadSynchronizer runs it, layer by layer: copy ``i < n`` starts
    when layer ``i``'s compute ends (and the stream is free) and must end before layer ``L - n + i``
    starts; returns the pass's seconds over ``layers * c``."""
    now = 0.0
    stream_free = 0.0
    done: dict[int, float] = {}
    for layer in range(layers):
        for i in range(n):  # copies due before this layer starts
            if layers - n + i == layer:
                now = max(now, done[i])
        now += c
        if layer < n:
            stream_free = max(stream_free, now) + t
            done[layer] = stream_free
    return now - layers * c


def test_exposed_by_hand() -> None:
    # L 4, n 2, c 1, t 3: copies end at 4 and 7; layer 2 waits for copy 0 (4 > 2), layer 3 for copy 1
    # (7 > 5): the pass ends at 8, 4 s over the compute
    assert float(layered_copy_exposed(2, 4, 1.0, 3.0)) == pytest.approx(4.0)
    assert _replay(2, 4, 1.0, 3.0) == pytest.approx(4.0)
    # L 3, n 2, c 1, t 1: copy 0 ends at 2, layer 1 waits for it (ends 3), copy 1 runs 3-4, layer 2
    # waits for it and ends at 5: 2 s over the compute (a stall delays the next copy's start)
    assert float(layered_copy_exposed(2, 3, 1.0, 1.0)) == pytest.approx(2.0)
    # a copy shorter than the layers after it hides completely
    assert float(layered_copy_exposed(2, 8, 1.0, 0.5)) == 0.0
    assert float(layered_copy_exposed(0, 8, 1.0, 100.0)) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    layers=st.integers(2, 40),
    frac=st.floats(0.0, 1.0),
    c=st.floats(0.01, 10.0),
    t=st.floats(0.0, 30.0),
)
def test_closed_form_matches_replay(layers: int, frac: float, c: float, t: float) -> None:
    n = min(int(frac * layers), layers - 1)
    assert float(layered_copy_exposed(n, layers, c, t)) == pytest.approx(
        _replay(n, layers, c, t), abs=1e-9, rel=1e-9
    )
    # nothing shows while each copy, and the queue of them, fits behind the layers before its deadline
    if t <= (layers - 1 - n) * c and n * t <= (layers - 2) * c:
        assert float(layered_copy_exposed(n, layers, c, t)) == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(
    layers=st.integers(2, 40),
    n=st.integers(0, 39),
    c=st.floats(0.01, 10.0),
    t=st.floats(0.0, 30.0),
    k=st.floats(1.0, 10.0),
)
def test_faster_link_never_slower(layers: int, n: int, c: float, t: float, k: float) -> None:
    n = min(n, layers - 1)
    assert (
        float(layered_copy_exposed(n, layers, c, t / k))
        <= float(layered_copy_exposed(n, layers, c, t)) + 1e-12
    )


def test_optimizer_offload_by_hand() -> None:
    sysm = _system("hgx-h200")  # the H200 profile holds the measured host copies
    cp = load_profile(default_registry().device(sysm.device)).host_copy
    assert cp is not None
    bw = host_link(sysm).bandwidth
    params = 1e9
    d2h = cp.d2h_pinned.latency + params * 4.0 / (bw * cp.d2h_pinned.eff)
    h2d = cp.h2d_pinned.latency + params * 4.0 / (bw * cp.h2d_pinned.eff)
    cpu = params * 28.0 / (614.4e9 / 8)  # 2 x 8 channels of DDR5-4800 shared by 8 GPUs
    total, a, b, c = optimizer_offload_time(sysm, params, 1.0, "adamw", 4.0, 4.0, overlap=False)
    assert (float(a), float(b), float(c)) == pytest.approx((d2h, cpu, h2d))
    assert float(total) == pytest.approx(d2h + cpu + h2d)
    assert float(
        optimizer_offload_time(sysm, params, 1.0, "adamw", 4.0, 4.0, overlap=True)[0]
    ) == pytest.approx(max(d2h, cpu, h2d))
    # half the state offloaded: half the bytes (the latencies stay)
    assert float(optimizer_offload_time(sysm, params, 0.5, "adamw", 4.0, 4.0, False)[2]) == pytest.approx(
        cpu / 2
    )
    assert CPU_UPDATE_BYTES["sgd"] < CPU_UPDATE_BYTES["adamw"]


def test_cpu_update_at_stream_triad_where_cited() -> None:
    # GB200 NVL72: 36 Graces at the Grace benchmarking guide's STREAM triad (315 GB/s each, the midpoint of
    # its 480 GB row) over 72 GPUs, not the 512 GB/s LPDDR5X peak; an x86 system without a cited figure
    # keeps its peak (2 x 8 channels of DDR5-4800 over 8 GPUs)
    gb = _system("gb200-nvl72")
    assert host_bandwidth_per_gpu(gb) == pytest.approx(36 * 315e9 / 72)
    assert gb.host_memory_stream is not None and gb.host_memory_bandwidth is not None
    assert gb.host_memory_stream < gb.host_memory_bandwidth
    assert host_bandwidth_per_gpu(_system("hgx-h200")) == pytest.approx(614.4e9 / 8)


def test_activation_copies_share_the_host_memory() -> None:
    """Every GPU's offload stream copies at once: on GB200 / GB300 each Grace's LPDDR5X (STREAM triad 315 GB/s)
    serves two GPUs, 158 GB/s each, below NVLink-C2C's measured one-way ~370 GB/s, so the memory bounds a
    layer's copy; on an x86 HGX the PCIe link does (55 GB/s against 77 GB/s of DDR5 a GPU)."""
    from simcore.comm.host import pinned_copy_time

    nbytes = 3.9e9  # one Llama 3 70B layer's activations at mb 2, seq 8192
    for name in ("gb200-nvl72", "gb300-nvl72"):
        sysm = _system(name)
        assert float(host_memory_copy_time(sysm, nbytes)) == pytest.approx(nbytes / (36 * 315e9 / 72), rel=0.05)
        assert float(host_memory_copy_time(sysm, nbytes)) > float(pinned_copy_time(sysm, nbytes, "d2h"))
    h200 = _system("hgx-h200")
    assert float(host_memory_copy_time(h200, nbytes)) < float(pinned_copy_time(h200, nbytes, "d2h"))


@settings(max_examples=50, deadline=None)
@given(bw=st.floats(1e10, 1e13), k=st.floats(1.0, 10.0), frac=st.floats(0.01, 1.0), overlap=st.booleans())
def test_more_host_bandwidth_never_slower(bw: float, k: float, frac: float, overlap: bool) -> None:
    base = _system()
    slow = base.model_copy(update={"host_memory_bandwidth": bw})
    fast = base.model_copy(update={"host_memory_bandwidth": bw * k})
    t_slow = float(optimizer_offload_time(slow, 2e9, frac, "adamw", 4.0, 4.0, overlap)[0])
    t_fast = float(optimizer_offload_time(fast, 2e9, frac, "adamw", 4.0, 4.0, overlap)[0])
    assert t_fast <= t_slow * (1 + 1e-12)


def _memory(n: int, frac: float) -> dict[str, Any]:
    model = ModelSpec(layers=8, hidden=1024, heads=8, ffn_hidden=4096, vocab=32000, seq_len=2048)
    tr = TrainingSpec(activation_offload_layers=n, optimizer_offload_fraction=frac, master_weights=True)
    lay = T.TrainingLayout(dp=4, zero=1, global_batch=4)
    return T.training_memory(model, tr, lay, 1e8, 9e7, 1.0, "bf16")


def test_memory_by_hand() -> None:
    base, off = _memory(0, 0.0), _memory(6, 0.75)
    per_layer = float(base["activations"]) / 8
    assert float(off["activations"]) == pytest.approx(2 * per_layer)
    assert float(off["host_activations"]) == pytest.approx(6 * per_layer)
    assert float(off["optimizer"]) == pytest.approx(0.25 * float(base["optimizer"]))
    assert float(off["host_optimizer"]) == pytest.approx(0.75 * float(base["optimizer"]))
    assert "host_activations" not in base and "host_optimizer" not in base


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 7), frac=st.floats(0.0, 1.0))
def test_offload_never_raises_gpu_memory(n: int, frac: float) -> None:
    assert float(_memory(n, frac)["total"]) <= float(_memory(0, 0.0)["total"]) * (1 + 1e-12)


SC: dict[str, Any] = {
    "kind": "training",
    "cluster": {"system": H100, "gpus": 8},
    "model": {"preset": "llama3-8b", "seq_len": 8192},
    "training": {"micro_batch": 1, "global_batch": 8},
    "parallel": {"zero": 1},
    "runtime": {"stack": "megatron"},
}


def _predict(**training: Any) -> Any:
    return predict(scenario_from_dict({**SC, "training": {**SC["training"], **training}}))


def test_predict_offload() -> None:
    base = _predict()
    act = _predict(activation_offload_layers=16)
    opt = _predict(optimizer_offload_fraction=1.0)
    assert act.memory_per_gpu_bytes < base.memory_per_gpu_bytes
    assert opt.memory_per_gpu_bytes < base.memory_per_gpu_bytes
    assert act.step_time_s >= base.step_time_s
    assert act.breakdown["activation_offload"] > 0
    assert opt.breakdown["optimizer"] > base.breakdown["optimizer"]
    assert any(n.startswith("activation offload: 16 of 32 layers") for n in act.notes)
    assert any(n.startswith("optimizer offload: 100%") for n in opt.notes)
    # the discrete-event engine carries both (the optimizer's seconds, the offload stream's stalls)
    sc = scenario_from_dict({**SC, "training": {**SC["training"], "activation_offload_layers": 16}})
    des_on, des_off = predict(sc, engine="des"), predict(scenario_from_dict(SC), engine="des")
    assert des_on.step_time_s - des_off.step_time_s == pytest.approx(
        act.step_time_s - base.step_time_s, rel=0.05
    )
    # GB200 moves the same activations ~3x faster than PCIe Gen5 (NVLink-C2C, bounded by its Grace's memory
    # shared by two GPUs): nothing left exposed here
    gb = scenario_from_dict(
        {
            **SC,
            "cluster": {"system": "gb200-nvl72", "gpus": 8},
            "training": {**SC["training"], "activation_offload_layers": 16},
        }
    )
    assert predict(gb).breakdown.get("activation_offload", 0.0) < act.breakdown["activation_offload"]


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["training.activation_offload_layers=32"], "at most 31"),
        (["training.activation_offload_layers=4", "parallel.pp=2"], "pipeline"),
        (["training.activation_offload_layers=4", "training.recompute=full"], "recompute"),
        (["training.optimizer_offload_fraction=1.5"], "optimizer_offload_fraction"),
    ],
)
def test_bad_offload_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Any, sets: list[str], needle: str
) -> None:
    import yaml

    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(SC))
    args = [a for s in sets for a in ("--set", s)]
    code, _out, err = run_cli(capsys, "predict", str(p), *args)
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err


def test_scenario_error_names_field() -> None:
    with pytest.raises(SimcoreError, match="activation_offload_layers"):
        predict(load_scenario("default", ["training.activation_offload_layers=1000"]))
    assert np.isfinite(_predict(optimizer_offload_fraction=0.5).step_time_s)


def test_megatron_fsdp() -> None:
    """Megatron-FSDP: ZeRO-3 (``optim_grads_params``) unless ``zero`` is given, the megatron stack's ZeRO-1
    default left out, gradients kept in the bf16 weights' dtype (half of fp32's), no FSDP2 copies."""
    base = {**SC, "cluster": {"system": H100, "gpus": 16}, "training": {"micro_batch": 1, "global_batch": 32}}
    mf = predict(scenario_from_dict({**base, "parallel": {"megatron_fsdp": True}}))
    z3 = predict(scenario_from_dict({**base, "parallel": {"zero": 3}}))
    fsdp2 = predict(scenario_from_dict({**base, "parallel": {"fsdp": True}}))
    assert mf.layout["zero"] == 3 and mf.layout["megatron_fsdp"] is True
    assert mf.memory_breakdown["gradients"] == pytest.approx(z3.memory_breakdown["gradients"] / 2)
    assert mf.memory_breakdown["weights"] == pytest.approx(z3.memory_breakdown["weights"])
    assert "fsdp_copy" in fsdp2.breakdown and "fsdp_copy" not in mf.breakdown
    assert mf.step_time_s < z3.step_time_s < fsdp2.step_time_s
    one = predict(scenario_from_dict({**base, "parallel": {"megatron_fsdp": True, "zero": 1}}))
    assert one.layout["zero"] == 1
    with pytest.raises(SimcoreError, match="two implementations"):
        scenario_from_dict({**base, "parallel": {"megatron_fsdp": True, "fsdp": True}})


def test_plan_keeps_offload_layouts_megatron_allows() -> None:
    from simcore.planning.plan import plan

    sc = scenario_from_dict({**SC, "training": {**SC["training"], "activation_offload_layers": 8}})
    r = plan(sc, top=5, des_top=0)
    assert r.top
    assert all(t["layout"]["pp"] == 1 and t["layout"]["recompute"] == "none" for t in r.top)
