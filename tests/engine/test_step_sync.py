"""Unsynchronized training loops and the CPU speed (``runtime.step_sync``, ``runtime.cpu_op_time``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario
from simcore.specs.scenario import CpuOpTime, Scenario
from simcore.workload.model import weight_tensors

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests/data/trace_scenarios/h200_train_gpt_gelu_ln.yaml"  # 4 x 1024 GPT, profiled, eager
# the hand totals below take bf16 weights and the fused AdamW's host entries (not the pytorch stack's defaults)
PINNED = ["training.param_dtype=bf16", "training.optimizer_impl=fused"]


def _with(sc: Scenario, **runtime: object) -> Scenario:
    return sc.model_copy(update={"runtime": sc.runtime.model_copy(update=runtime)})


def _host_total(main: float, bwd: float, layers: int) -> float:
    """One micro-batch's host seconds, by hand from the profile's entries at that CPU speed."""
    p = load_profile(default_registry().device("h200")).at_cpu_speed(main, bwd)

    def h(n: str) -> float:
        return p.host(n, True)

    per_layer = h("train_fwd_gelu") + h("train_bwd_gelu")
    # the host outside the layers grows with them (gradient accumulation, zero_grad, the graph)
    outside = (
        h("step_fwd_gelu")
        + h("step_bwd_gelu")
        + layers * (h("step_fwd_layer_gelu") + h("step_bwd_layer_gelu"))
    )
    sc = load_scenario(str(SC), PINNED)
    opt = h("adamw_fused_fixed") + h("adamw_fused_per_tensor") * weight_tensors(sc.model, layers)
    return layers * per_layer + outside + opt + h("step_end") + layers * h("step_end_layer")


def test_unsynchronized_host_bound_step_is_the_host_total() -> None:
    sc = load_scenario(str(SC), PINNED)
    slow = CpuOpTime(main=20e-6, backward=20e-6)  # a slow CPU: the host bounds everything
    r = simcore.predict(_with(sc, step_sync=False, cpu_op_time=slow))
    assert r.step_time_s == pytest.approx(_host_total(20e-6, 20e-6, sc.model.layers), rel=1e-9)
    # the breakdown still tiles the step; the optimizer row is the GPU's
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    synced = simcore.predict(_with(sc, step_sync=True, cpu_op_time=slow))
    assert synced.step_time_s >= r.step_time_s * (1 - 1e-12)  # host-bound: the GPU never holds the host back


def test_unsynchronized_gpu_bound_step_is_the_gpu_total() -> None:
    sc = load_scenario(str(SC), PINNED)
    fast = CpuOpTime(main=0.1e-6, backward=0.1e-6)  # host nearly free: the GPU's sum sets the pace
    r = simcore.predict(_with(sc, step_sync=False, cpu_op_time=fast))
    assert r.breakdown["host_overhead"] == 0.0
    assert r.step_time_s <= simcore.predict(_with(sc, step_sync=True, cpu_op_time=fast)).step_time_s


def test_cpu_speed_scales_only_the_probe_share() -> None:
    """A CPU twice as slow per op: entries with a measured probe share s grow by 1 - s + 2 s."""
    base = load_profile(default_registry().device("h200"))
    ref_m, ref_b = base.host_layer["probe_main"], base.host_layer["probe_backward"]
    p = base.at_cpu_speed(2 * ref_m, 3 * ref_b)
    s_f = base.host_layer["probe_share_train_fwd"]
    s_b = base.host_layer["probe_share_train_bwd"]
    assert 0 < s_f <= 1 and 0 < s_b <= 1
    assert p.host("train_fwd_gelu", True) == pytest.approx(base.host("train_fwd_gelu", True) * (1 + s_f))
    assert p.host("train_bwd_gelu", True) == pytest.approx(base.host("train_bwd_gelu", True) * (1 + 2 * s_b))
    # entries without a measured share follow the probe fully (the backward thread's DDP hooks)
    assert p.host("ddp_param", True) == pytest.approx(base.host("ddp_param", True) * 3)
    # inference has its own reference (a no-grad op is cheaper); at that reference nothing moves
    q = base.at_cpu_speed(base.host_layer["probe_infer"], inference=True)
    assert q.host("infer_decode_swiglu", True) == pytest.approx(base.host("infer_decode_swiglu", True))


@settings(max_examples=25, deadline=None)
@given(a=st.floats(1e-6, 2e-5), b=st.floats(1e-6, 2e-5), sync=st.booleans())
def test_a_slower_cpu_is_never_faster(a: float, b: float, sync: bool) -> None:
    sc = load_scenario(str(SC), PINNED)
    lo, hi = min(a, b), max(a, b)
    t_lo = simcore.predict(_with(sc, step_sync=sync, cpu_op_time=CpuOpTime(main=lo, backward=lo))).step_time_s
    t_hi = simcore.predict(_with(sc, step_sync=sync, cpu_op_time=CpuOpTime(main=hi, backward=hi))).step_time_s
    assert t_hi >= t_lo * (1 - 1e-12)
    # nothing synchronizing never takes longer than a loop that waits every step
    other = simcore.predict(_with(sc, step_sync=True, cpu_op_time=CpuOpTime(main=lo, backward=lo)))
    if not sync:
        assert t_lo <= other.step_time_s * (1 + 1e-12)


@pytest.mark.parametrize("value", ["-1", "0", "abc", "5 kg", "1"])
def test_bad_cpu_speed_is_one_clear_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from simcore.cli import main

    with pytest.raises(SystemExit) as e:
        main(["predict", str(SC), "--set", f"runtime.cpu_op_time.main={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runtime.cpu_op_time.main" in err[0]


def test_cpu_speed_takes_units() -> None:
    a = load_scenario(str(SC), ["runtime.cpu_op_time.main=5 us", "runtime.cpu_op_time.backward=4us"])
    c = a.runtime.cpu_op_time
    assert c is not None and c.main == pytest.approx(5e-6) and c.backward == pytest.approx(4e-6)


@pytest.mark.parametrize("name", ["h200x2_fsdp_llama8l", "h200x2_tp_llama8l", "h200_train_gpt_gelu_ln"])
def test_engines_agree_on_profiled_synchronized_steps(name: str) -> None:
    """The host after the optimizer (zero_grad, a wrapper's end-of-step work) is in both engines."""
    sc = load_scenario(str(REPO / f"tests/data/trace_scenarios/{name}.yaml"))
    a = simcore.predict(sc).step_time_s
    d = simcore.predict(sc, engine="des").step_time_s
    assert d == pytest.approx(a, rel=0.01)


def test_des_takes_the_steady_state_of_an_unsynchronized_single_stage() -> None:
    sc = _with(load_scenario(str(SC), PINNED), step_sync=False)
    des = simcore.predict(sc, engine="des")
    assert des.step_time_s == pytest.approx(simcore.predict(sc).step_time_s)
    assert any("step_sync: false" in n for n in des.notes)


@pytest.mark.parametrize(
    ("name", "wrapper"),
    [("h200x2_fsdp_llama8l", "fsdp"), ("h200x2_tp_llama8l", "tp"), ("h200x2_ddp_gpt125m", "ddp")],
)
def test_a_wrappers_host_outside_the_layers(tmp_path: Path, name: str, wrapper: str) -> None:
    """Host-bound and unsynchronized, a profiled distributed step pays its wrapper's measured host
    outside the layers (per micro-batch on each thread, once after the optimizer) exactly."""
    import yaml

    from simcore.specs.registry import builtin_dir

    sc = _with(
        load_scenario(str(REPO / f"tests/data/trace_scenarios/{name}.yaml")),
        step_sync=False,
        cpu_op_time=CpuOpTime(main=30e-6, backward=30e-6),
    )
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())
    hl = shipped["host_layer"]
    extra = {p: hl[f"profiled_{wrapper}_step_{p}"] for p in ("fwd", "bwd", "end")}
    for p in extra:
        hl[f"profiled_{wrapper}_step_{p}"] = 0.0
    off = tmp_path / "no_extra.yaml"
    off.write_text(yaml.safe_dump(shipped))
    base = load_profile(default_registry().device("h200"))
    r_m, r_b = 30e-6 / base.host_layer["probe_main"], 30e-6 / base.host_layer["probe_backward"]
    m = sc.training.global_batch / (sc.training.micro_batch * sc.parallel.dp)  # type: ignore[union-attr, operator]
    want = m * (extra["fwd"] * r_m + extra["bwd"] * r_b) + extra["end"] * r_m
    assert want > 0
    with_x = simcore.predict(sc).step_time_s
    without = simcore.predict(sc.model_copy(update={"calibration": str(off)})).step_time_s
    assert with_x - without == pytest.approx(want, rel=1e-6)


def test_cuda_graph_decode_pays_the_launch_after_each_wait() -> None:
    """Under CUDA graphs a decode step waits for the host's graph launch once per synchronize: the
    profile's fixed + per-kernel cost, spread over the steps between waits."""
    from simcore.engine import inference as I

    sc = load_scenario(str(REPO / "tests/data/trace_scenarios/h200_decode_cuda_graphs.yaml"))
    prof = load_profile(default_registry().device("h200"))
    from simcore.specs.resolve import resolve_cluster

    cl = resolve_cluster(sc.cluster, default_registry())
    assert sc.inference is not None

    def dec(every: int | None) -> I.InferenceEval:
        return I.evaluate(sc.model, sc.inference, cl, framework="cuda_graphs", profiler=True, gate_up="fused",
                          decode_sync_every=every)  # fmt: skip

    never, each, eight = dec(None), dec(1), dec(8)
    sync = prof.host("graph_sync_fixed", True) + prof.host("graph_sync_per_kernel", True) * float(
        never.decode.kernels
    )
    assert sync > 0
    assert float(each.decode_step_time_s) - float(never.decode_step_time_s) == pytest.approx(sync, rel=1e-6)
    assert float(eight.decode_step_time_s) - float(never.decode_step_time_s) == pytest.approx(
        sync / 8, rel=1e-6
    )
    # every kernel of a replayed decode step is followed by the device's gap: with it taken out of the
    # profile the step is shorter by at most kernels x gap (kernels at the in-graph floor absorb it)
    gap = prof.host_layer["profiled_graph_kernel_gap"]
    no_gap = prof.model_copy(update={"host_layer": {**prof.host_layer, "profiled_graph_kernel_gap": 0.0}})
    import simcore.engine.inference as mod

    orig = mod.load_profile
    mod.load_profile = lambda *a, **k: no_gap  # type: ignore[assignment]
    try:
        without = dec(None)
    finally:
        mod.load_profile = orig
    diff = float(never.decode_step_time_s) - float(without.decode_step_time_s)
    assert 0 < diff <= float(never.decode.kernels) * gap * (1 + 1e-9)
    # the prefill is not a replayed graph here: no gap, no sync
    assert float(never.prefill_time_s) == pytest.approx(float(without.prefill_time_s))
    # eager decode has no graph launch to wait for: the setting changes nothing
    e1 = I.evaluate(
        sc.model, sc.inference, cl, framework="eager", profiler=True, gate_up="fused", decode_sync_every=1
    )
    en = I.evaluate(
        sc.model, sc.inference, cl, framework="eager", profiler=True, gate_up="fused", decode_sync_every=None
    )
    assert float(e1.decode_step_time_s) == float(en.decode_step_time_s)
    # a profile whose kernel fits carry the CUDA-graph gap already (h200-kernels) adds none of its own
    assert "cuda_graphs" in load_profile(default_registry().device("h200"), "h200-kernels").gap


def test_decode_sampling_is_a_row_wise_argmax(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each decode step samples with an argmax over each sequence's vocabulary-wide row: the engine
    passes the row count (the sequences), which makes a few long rows slow."""
    from simcore.engine import inference as I

    seen: list[dict] = []
    orig = I.L.mem_op

    def spy(name, numel, elt, category="elementwise", count=1.0, rows=None):  # type: ignore[no-untyped-def]
        if name == "argmax":
            seen.append({"rows": rows, "category": category})
        return orig(name, numel, elt, category, count=count, rows=rows)

    monkeypatch.setattr(I.L, "mem_op", spy)
    sc = simcore.load_scenario("tests/data/trace_scenarios/h200_r66_generate_gpt2_l12_b8.yaml")
    simcore.predict(sc)
    assert seen and all(s["rows"] is not None and s["category"] == "elementwise" for s in seen)
