"""``simcore validate``: predicted vs measured per step, per class and per op."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import simcore
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.traces import read_trace
from simcore.traces.classify import analyze
from simcore.validation.trace_report import read_index, summary
from simcore.validation.traces import predicted_class, validate
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests" / "data" / "trace_scenarios"
HOST_OPS = load_profile(default_registry().device("h200")).host_ops
"""The shipped H200 profile's host op tables: what the calibrated code issues (``ComputeProfile.host_ops``)."""
# every committed trace and its scenario (traces/validate.csv, also read by the trace report)
CASES = {c.name: [str(t.relative_to(REPO)) for t in c.traces] for c in read_index()}


def test_index_lists_every_committed_trace_and_scenario() -> None:
    listed = {t for files in CASES.values() for t in files}
    for p in sorted((REPO / "traces").rglob("profile_*.json.gz")):
        if "profile_moe_" in p.name:  # round 15's MoE layer traces are diagnostic (no scenario)
            continue
        assert str(p.relative_to(REPO)) in listed, f"traces/validate.csv does not list {p.name}"
    assert set(CASES) == {p.stem for p in SC.glob("*.yaml")}


def _launch_probes(ans: list, host: dict[str, float]) -> list:  # type: ignore[type-arg]
    """The launch-paced CPU speeds (host_trace.compiled_launch_speed over the profile's probe_launch_ratio_*) of the
    traces of a compiled training step whose compiled regions call no aten::transpose."""
    from simcore.calibration.host_trace import OpSpeed, compiled_launch_speed, compiled_op_speed

    out = []
    for a in ans:
        if compiled_op_speed(a) is not None:
            return []
        launch = compiled_launch_speed(a)
        if launch is not None and launch.main_s and launch.backward_s:
            out.append(
                OpSpeed(
                    main_s=launch.main_s / host["probe_launch_ratio_main"],
                    backward_s=launch.backward_s / host["probe_launch_ratio_backward"],
                )
            )
    return out


FAST_SAMPLE = set(sorted(CASES)[::8])
"""Every 8th committed trace runs with the README's test command; the rest are the slow validation sweep
(``-m slow``, a step of its own in ``.ci/run``)."""


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in FAST_SAMPLE else pytest.mark.slow) for n in sorted(CASES)]
)
def test_validate_real_traces(name: str) -> None:
    files = [str(REPO / f) for f in CASES[name]]
    rep = validate(files, SC / f"{name}.yaml")
    d = rep.to_dict()
    # measured: the slowest rank's median step, over the steps that captured no CUDA graph where others did
    from simcore.calibration.host_trace import graph_capture_steps

    raw = [analyze(read_trace(f)) for f in files]
    warm = sorted({i for a in raw for i in graph_capture_steps(a)})
    if warm and len(warm) < min(len(a.steps) for a in raw):
        raw = [a.without_steps(set(warm)) for a in raw]
        assert any("captured a CUDA graph" in n for n in d["notes"])
    measured = max(a.step_time_s for a in raw)
    assert d["measured_step_time_s"] == pytest.approx(measured)
    # the prediction is the scenario's, with the runtime the trace showed (profiler, CPU speed, sync)
    from simcore.specs.resolve import load_scenario
    from simcore.specs.scenario import RuntimeSpec

    sc = load_scenario(str(SC / f"{name}.yaml"))
    # what validate read from the traces, checked against the traces directly
    from simcore.calibration.host_trace import PROBE_WINDOW, op_speed, step_synchronized

    ans = [analyze(read_trace(f)) for f in files]
    from simcore.validation.traces import _as_t, _profile_of, _train_gemm_code, decode_layer_key

    host = _profile_of(load_scenario(str(SC / f"{name}.yaml"))).host_layer
    # the scenario with the code validate read from the traces (whose probe ratios pace an inference run, whose
    # GEMM ops' ratios a training step of transformers' fit code)
    read = {k: d["runtime"][k] for k in ("implementation", "decode_loop", "attention_backend", "framework")}
    ran = sc.model_copy(update={"runtime": sc.runtime.model_copy(update=read)})
    if sc.training is not None:
        ran = ran.model_copy(update={"training": sc.training.model_copy(update=d["training"])})
    # aten::t, or aten::empty where a thread calls aten::t too rarely (GPT-2's Conv1D layers)
    speeds = [
        s
        for s in (
            _as_t(
                op_speed(a, PROBE_WINDOW if sc.kind == "inference" else 0),
                sc.kind == "inference",
                host,
                f"{'hf_' if ran.runtime.implementation == 'huggingface' else ''}"
                + decode_layer_key(ran, _profile_of(ran))
                if sc.kind == "inference"
                else _train_gemm_code(ans, ran, decode_layer_key(ran, _profile_of(ran))),
            )
            for a in ans
        )
        if s is not None and s.main_s
    ]
    cpu = d["runtime"]["cpu_op_time"]
    if cpu is not None and sc.kind != "inference":
        assert cpu.pop("decode") is None  # a training step has no decode passes
    if sc.kind == "inference":
        assert cpu is None if not speeds else cpu["main"] == max(s.main_s for s in speeds)
        # a compiled decode's passes are paced by their loop's aten::empty alone (no aten::linear outside
        # their graphs), its eager prefill by its aten::linear
        if cpu is not None and d["runtime"].get("compiled_decode"):
            dec = [_as_t(op_speed(a, PROBE_WINDOW), True, host, empty_only=True) for a in ans]
            assert cpu["decode"] == max(s.main_s for s in dec if s is not None and s.main_s)
        elif cpu is not None:
            assert cpu.get("decode") is None
    elif launched := _launch_probes(ans, host):
        # compiled code without compiled-region transposes (transformers'): its kernel launches' pace, stated as aten::t
        slow = max(launched, key=lambda s: s.main_s + s.backward_s)  # type: ignore[operator]
        assert cpu == {"main": slow.main_s, "backward": slow.backward_s}
    elif any(s.backward_s for s in speeds) and sc.runtime.framework != "compiled":
        slow = max((s for s in speeds if s.backward_s), key=lambda s: s.main_s + s.backward_s)  # type: ignore[operator]
        assert cpu == {"main": slow.main_s, "backward": slow.backward_s}
    elif sc.runtime.framework == "compiled":
        # no aten::t: the compiled regions' aten::transpose, at the profile's compiled / eager probe ratio
        from simcore.calibration.host_trace import compiled_op_speed

        comp = [s for s in (compiled_op_speed(a) for a in ans) if s is not None and s.main_s and s.backward_s]
        if not comp:  # too few compiled-region transposes to time: the eager probes, if any
            both = [s for s in speeds if s.backward_s]
            slow_e = max(both, key=lambda s: s.main_s + s.backward_s) if both else None  # type: ignore[operator]
            assert cpu == (None if slow_e is None else {"main": slow_e.main_s, "backward": slow_e.backward_s})
            return
        slow = max(comp, key=lambda s: s.main_s + s.backward_s)  # type: ignore[operator]
        assert cpu == pytest.approx(
            {
                "main": slow.main_s * host["probe_main"] / host["probe_compiled_main"],  # type: ignore[operator]
                "backward": slow.backward_s * host["probe_backward"] / host["probe_compiled_backward"],  # type: ignore[operator]
            }
        )
    else:
        assert cpu is None
    never_syncs = sc.kind == "training" and all(step_synchronized(a) is False for a in ans)
    single_stage = sc.parallel.pp == 1 and d["runtime"]["framework"] != "cuda_graphs"
    assert d["runtime"]["step_sync"] is not (never_syncs and single_stage)
    sc = sc.model_copy(update={"runtime": RuntimeSpec(**d["runtime"])})
    if sc.training is not None:
        from simcore.specs.scenario import TrainingSpec

        sc = sc.model_copy(update={"training": TrainingSpec(**d["training"])})
    if sc.inference is not None:
        from simcore.specs.scenario import InferenceSpec

        sc = sc.model_copy(update={"inference": InferenceSpec(**d["inference"])})
    r = simcore.predict(sc).model_dump()
    # inference: one profiled step = the prefills and decode steps counted in the trace (the eager
    # trace: 1 + 8; the CUDA-graph one: 0 + 8)
    if "step_time_s" in r:
        from simcore.validation.traces import single_step_lead

        # one unannotated step of a loop that ran ahead: its kernels' span, the host's spent lead off
        lead = single_step_lead(analyze(read_trace(files[0])), sc)
        want = r["step_time_s"] - min(lead, r["breakdown"]["host_overhead"])
    else:
        from simcore.specs.resolve import load_scenario
        from simcore.validation.traces import inference_composition

        layers = float(load_scenario(str(SC / f"{name}.yaml")).model.layers)
        comp = inference_composition(analyze(read_trace(files[0])), layers)
        assert comp is not None
        serial = comp[0] * r["prefill_time_s"] + comp[1] * r["decode_step_time_s"]
        from simcore.validation.traces import inference_step_time

        every = d["runtime"]["decode_sync_every"]
        ahead = every is None or every >= comp[1]
        want, saved = inference_step_time(r, comp[0], comp[1], ahead)
        assert want + saved == pytest.approx(serial)
        # a loop that waits for its tokens inside a step runs prefill and decode steps back to back
        assert saved == 0.0 or ahead
    assert d["predicted_step_time_s"] == pytest.approx(want)
    assert d["error_pct"] == pytest.approx(100 * (want / measured - 1))
    errs = [abs(c["error_s"]) for c in d["classes"]]
    assert errs == sorted(errs, reverse=True)
    # the measured classes tile the step
    assert sum(c["measured_s"] for c in d["classes"]) == pytest.approx(measured, rel=1e-6)
    # per-op rows need recorded shapes, which CUDA-graph replays and a trace recorded with
    # record_shapes=False do not have
    assert d["kernels"] or name in ("h200_decode_cuda_graphs", "h200_r46_train_llama_l4_h1024_b4_stack")
    assert all(k["measured_s"] > 0 and k["predicted_s"] > 0 for k in d["kernels"])


def test_trace_report_summary_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"error_pct": 4.0, "held_apart": False},
        {"error_pct": -12.0, "held_apart": True},
        {"error_pct": 8.0, "held_apart": True},
    ]
    s = summary(rows)
    assert s["all"] == {"n": 3, "median_abs_error_pct": 8.0, "worst_abs_error_pct": 12.0, "within_10pct": 2}
    assert s["held_apart"]["n"] == 2 and s["held_apart"]["median_abs_error_pct"] == pytest.approx(10.0)
    from simcore.cli.validation import main as validation
    from simcore.validation import trace_report

    # one case through the CLI: its row is the validate report's numbers
    idx = tmp_path / "validate.csv"
    gelu = REPO / CASES["h200_train_gpt_gelu_ln"][0]
    idx.write_text(f"scenario,traces,round,held_apart,what\nh200_train_gpt_gelu_ln,{gelu},1,0,x\n")
    assert validation(["traces", "--index", str(idx), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rep = validate([str(gelu)], SC / "h200_train_gpt_gelu_ln.yaml").to_dict()
    assert out["rows"][0]["error_pct"] == pytest.approx(rep["error_pct"])
    assert out["summary"]["all"]["n"] == 1
    # what the prediction took from the trace: its CPU probe, and a loop that never waits for the GPU
    assert out["rows"][0]["cpu_op_time_s"] == rep["runtime"]["cpu_op_time"]
    assert out["rows"][0]["step_sync"] is False
    # a training step has no inference phases
    assert rep["phases"] is None and rep["inference"] is None
    # per class and per memory-bound op over the traces: the validate report's sums
    totals = trace_report.class_totals(out["rows"])
    gemm = next(c for c in rep["classes"] if c["class"] == "gemm")
    assert totals["gemm"] == pytest.approx((gemm["measured_s"], gemm["predicted_s"]))
    assert "idle" not in totals
    per, ratio, med = trace_report.memory_op_totals(out["rows"])
    assert per and 0.5 < ratio < 1.5 and 0.0 <= med < 1.0
    assert validation(["traces", "--index", str(idx), "--ops"]) == 0
    assert "memory-bound kernels at the traces' own shapes" in capsys.readouterr().out
    # a missing index: one line naming the file, exit 2
    assert validation(["traces", "--index", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.csv" in err[0]


def test_trace_report_replays_each_case_on_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from simcore.cli.validation import main as validation

    # two ranks whose traces started 19.6 ms apart: replayed with their own durations, the measured step
    tp = [REPO / "traces" / "h200x2" / "round44" / f"profile_tp_llama8l_rank{r}.json.gz" for r in (0, 1)]
    idx = tmp_path / "validate.csv"
    idx.write_text(f"scenario,traces,round,held_apart,what\nh200x2_r44_tp_llama8l,{tp[0]} {tp[1]},44,1,x\n")
    assert validation(["traces", "--index", str(idx), "--replay", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["rows"][0]
    assert abs(row["error_pct"]) < 1.0 and row["measured_step_time_s"] > 0
    assert out["summary"] == {
        "n": 1,
        "median_abs_error_pct": pytest.approx(abs(row["error_pct"])),
        "worst_abs_error_pct": pytest.approx(abs(row["error_pct"])),
        "within_1pct": 1,
    }
    assert validation(["traces", "--index", str(idx), "--replay"]) == 0
    assert "replayed on the source: n=1" in capsys.readouterr().out
    # a missing index: one line naming the file, exit 2
    assert validation(["traces", "--index", str(tmp_path / "none.csv"), "--replay"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.csv" in err[0]


def test_breakdown_categories_fold_onto_classes() -> None:
    assert predicted_class("recompute_gemm") == "gemm"
    assert predicted_class("dp_comm") == "communication"
    assert predicted_class("amp_cast") == "elementwise"
    assert predicted_class("pipeline_bubble") == "idle"
    assert predicted_class("host_overhead") == "idle"
    assert predicted_class("something_new") == "other"
    assert predicted_class("loss_cast") == "elementwise"  # the logits' fp32 upcast is a copy kernel
    assert predicted_class("dp_copy") == "memcpy/memset"


def test_cli_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tr = str(REPO / CASES["h200x2_ddp_gpt"][0]), str(REPO / CASES["h200x2_ddp_gpt"][1])
    png = tmp_path / "v.png"
    code, out, err = run_cli(
        capsys, "validate", *tr, "--scenario", str(SC / "h200x2_ddp_gpt.yaml"), "--plot", str(png)
    )
    assert code == 0, err
    first_table = out.split("per op")[0]
    lines = [ln for ln in first_table.splitlines() if "│" in ln]
    assert "step" in lines[-1]  # the step-level error is the class table's last row
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    code, out, err = run_cli(
        capsys, "validate", *tr, "--scenario", str(SC / "h200x2_ddp_gpt.yaml"), "--json", "--kernels", "3"
    )
    d = json.loads(out)
    assert {"measured_step_time_s", "predicted_step_time_s", "error_pct", "classes"} <= set(d)
    assert len(d["kernels"]) == 3
    assert any(c["class"] == "communication" for c in d["classes"])
    assert d["collectives_measured_s"]["all_reduce"] > 0


def test_set_override_changes_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    tr = str(REPO / CASES["h200_train_gpt_gelu_ln"][0])
    sc = str(SC / "h200_train_gpt_gelu_ln.yaml")
    _, a, _ = run_cli(capsys, "validate", tr, "--scenario", sc, "--json")
    _, b, _ = run_cli(
        capsys,
        "validate",
        tr,
        "--scenario",
        sc,
        "--json",
        "--set",
        "training.micro_batch=8",
        "--set",
        "training.global_batch=8",
    )
    da, db = json.loads(a), json.loads(b)
    assert da["measured_step_time_s"] == db["measured_step_time_s"]
    assert db["predicted_step_time_s"] > da["predicted_step_time_s"]


def test_serving_scenario_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text("kind: serving\ncluster: {system: hgx-h200, gpus: 1}\nmodel: {preset: llama3-8b}\n")
    code, _out, err = run_cli(
        capsys, "validate", str(REPO / CASES["h200_train_gpt_gelu_ln"][0]), "--scenario", str(sc)
    )
    assert code == 2 and "serving" in err and "Traceback" not in err


def test_mixed_runs_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = (
        str(REPO / CASES[n][0])
        for n in ("h200_train_gpt_gelu_ln", "h200_train_llama_swiglu_rms_gqa_selective")
    )
    code, _out, err = run_cli(capsys, "validate", a, b, "--scenario", str(SC / "h200_train_gpt_gelu_ln.yaml"))
    assert code == 2 and "different runs" in err and "Traceback" not in err


def test_gpu_busy_and_device_mismatch_note(capsys: pytest.CaptureFixture[str]) -> None:
    tr = str(REPO / CASES["h200x2_tp_gpt350m"][0])
    sc = str(SC / "h200x2_tp_gpt350m.yaml")
    _, out, _ = run_cli(capsys, "validate", tr, "--scenario", sc, "--json")
    d = json.loads(out)
    idle = {c["class"]: c for c in d["classes"]}["idle"]
    assert d["measured_gpu_busy_s"] == pytest.approx(d["measured_step_time_s"] - idle["measured_s"])
    assert d["predicted_gpu_busy_s"] == pytest.approx(d["predicted_step_time_s"] - idle["predicted_s"])
    assert not any("scenario's system" in n for n in d["notes"])
    _, out, _ = run_cli(
        capsys, "validate", tr, "--scenario", sc, "--json", "--set", "cluster.system=hgx-h100"
    )
    assert any("ran on 'NVIDIA H200' (h200)" in n for n in json.loads(out)["notes"])


def test_inference_step_composition_from_the_trace(tmp_path: Path) -> None:
    from simcore.validation.traces import inference_composition

    a = analyze(read_trace(REPO / CASES["h200_infer_prefill_decode"][0]))
    # traces/README.md: each profiled step = one prefill + 8 decode steps of a 4-layer model
    assert inference_composition(a, 4) == (1.0, 8.0)
    # no attention shapes recorded: nothing to count
    from simcore.traces.synth import SynthConfig, write_trace

    p = tmp_path / "t.json"
    write_trace(p, SynthConfig(steps=1))
    b = analyze(read_trace(p))
    for k in b.kernels:
        k.shape = None
        k.ev.args.pop("grid", None)
    assert inference_composition(b, 2) is None


def test_pipeline_p2p_waiting_counts_as_idle() -> None:
    from simcore.validation.traces import p2p_wait

    a = analyze(read_trace(REPO / CASES["h200x2_pp_gpt350m"][0]))
    sr = [k for k in a.steps[0].kernels if k.cls == "comm:send_recv"]
    shortest = min(k.ev.dur for k in sr)
    # every send/recv of this trace moves the same activation size: the wait is the excess over the shortest
    assert len({(k.shape or {}).get("nbytes") for k in sr}) == 1
    waits = [sum(k.ev.dur - shortest for k in s.kernels if k.cls == "comm:send_recv") for s in a.steps]
    assert p2p_wait(a) == pytest.approx(sorted(waits)[len(waits) // 2] if len(waits) % 2 else sum(waits) / 2)
    rep = validate([str(REPO / CASES["h200x2_pp_gpt350m"][0])], SC / "h200x2_pp_gpt350m.yaml")
    assert any("waiting for the peer" in n for n in rep.notes)
    assert sum(c["measured_s"] for c in rep.classes) == pytest.approx(rep.measured_step_time_s, rel=1e-6)


def test_profiled_run_is_assumed_for_pytorch_profiler_traces_only() -> None:
    import yaml

    from simcore.specs.resolve import scenario_from_dict
    from simcore.workload.replay import load_analyses

    name = "h200_train_gpt_gelu_ln"
    data = yaml.safe_load((SC / f"{name}.yaml").read_text())
    data["runtime"] = {"framework": "eager"}  # says nothing about the profiler
    sc = scenario_from_dict(data)
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    kineto = validate(files, sc, analyses=ans)
    assert any("runtime.profiler: true" in n for n in kineto.notes)
    explicit = validate(files, sc, ["runtime.profiler=false"], analyses=ans)
    assert not any("runtime.profiler: true" in n for n in explicit.notes)
    assert explicit.predicted_step_time_s < kineto.predicted_step_time_s  # the profiler's host time
    for a in ans:
        a.trace.format = "nsys"  # an Nsight Systems capture has no PyTorch profiler overhead
    nsys = validate(files, sc, analyses=ans)
    assert nsys.predicted_step_time_s == pytest.approx(explicit.predicted_step_time_s)


def test_host_speed_of_the_trace_is_reported() -> None:
    gelu = validate(
        [str(REPO / f) for f in CASES["h200_train_gpt_gelu_ln"]], SC / "h200_train_gpt_gelu_ln.yaml"
    )
    assert gelu.host_speed_ratio is not None and 0.5 < gelu.host_speed_ratio < 2.0
    assert any("issued each layer" in n for n in gelu.notes)
    assert gelu.to_dict()["host_speed_ratio"] == gelu.host_speed_ratio
    tp = validate([str(REPO / f) for f in CASES["h200x2_tp_gpt350m"]], SC / "h200x2_tp_gpt350m.yaml")
    assert tp.host_speed_ratio is None  # a distributed trace: its layers include the wrapper's work


def test_compiled_run_is_assumed_for_traces_of_inductor_kernels() -> None:
    import yaml

    from simcore.specs.resolve import scenario_from_dict
    from simcore.validation.traces import inductor_kernels
    from simcore.workload.replay import load_analyses

    name = "h200_train_gpt_gelu_ln_compiled"
    data = yaml.safe_load((SC / f"{name}.yaml").read_text())
    data["runtime"] = {"profiler": True}  # says nothing about the framework
    sc = scenario_from_dict(data)
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert inductor_kernels(ans[0]) > 0
    assumed = validate(files, sc, analyses=ans)
    assert any("runtime.framework: compiled" in n for n in assumed.notes)
    stated = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert assumed.predicted_step_time_s == pytest.approx(stated.predicted_step_time_s)
    eager = validate(files, sc, ["runtime.framework=eager"], analyses=ans)
    assert not any("runtime.framework: compiled" in n for n in eager.notes)
    assert eager.predicted_step_time_s > assumed.predicted_step_time_s
    # an eager trace has none of inductor's kernels
    assert inductor_kernels(load_analyses([str(REPO / CASES["h200_train_gpt_gelu_ln"][0])])[0]) == 0


def test_cuda_graph_run_is_assumed_for_traces_of_graph_replays() -> None:
    """A scenario that says nothing of the framework, for a trace whose kernels run inside
    cudaGraphLaunch replays, is predicted as the stated cuda_graphs scenario (the decode loop's
    synchronisation included), not as eager decode (several times slower)."""
    import yaml

    from simcore.specs.resolve import scenario_from_dict
    from simcore.validation.traces import graph_framework
    from simcore.workload.replay import load_analyses

    name = "h200_decode_cuda_graphs"
    data = yaml.safe_load((SC / f"{name}.yaml").read_text())
    del data["runtime"]["framework"]
    sc = scenario_from_dict(data)
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert graph_framework(ans)
    assumed = validate(files, sc, analyses=ans)
    assert any("runtime.framework: cuda_graphs" in n for n in assumed.notes)
    assert any("runtime.decode_sync_every" in n for n in assumed.notes)
    stated = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert assumed.predicted_step_time_s == pytest.approx(stated.predicted_step_time_s)
    eager = validate(files, sc, ["runtime.framework=eager"], analyses=ans)
    assert eager.predicted_step_time_s > 2 * assumed.predicted_step_time_s
    # an eager or compiled trace launches no graph
    for other in ("h200_infer_prefill_decode", "h200_train_gpt_gelu_ln_compiled"):
        assert not graph_framework(load_analyses([str(REPO / CASES[other][0])]))


@pytest.mark.parametrize(
    ("name", "fp32"),
    [
        ("h200_train_llama1b_eager", True),  # AMP: float weights, autocast per GEMM
        ("h200_train_gpt125m_compiled", True),  # compiled: read from AccumulateGrad's float gradients
        ("h200_infer_llama1b_b8", False),  # bf16 weights, no backward
        # recorded without shapes: the optimizer kernels' element type (FusedAdamMathFunctor<float, ...>)
        ("h200_r46_train_llama_l4_h1024_b4_stack", True),
        ("h200_r38_train_llama_l8_h2048_b2_bf16", False),  # bf16 weights, no autocast
    ],
)
def test_fp32_weights_are_read_from_the_trace(name: str, fp32: bool) -> None:
    import yaml

    from simcore.specs.resolve import scenario_from_dict
    from simcore.validation.traces import fp32_weights
    from simcore.workload.replay import load_analyses

    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert fp32_weights(ans) is fp32
    data = yaml.safe_load((SC / f"{name}.yaml").read_text())
    if data["kind"] != "training" or not fp32:
        return
    data["training"].pop("param_dtype", None)  # the default is bf16 weights
    assumed = validate(files, scenario_from_dict(data), analyses=ans)
    assert any("training.param_dtype: fp32" in n for n in assumed.notes)
    stated = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert assumed.predicted_step_time_s == pytest.approx(stated.predicted_step_time_s)


def test_graph_replayed_attention_counts_by_launch_grid() -> None:
    """Kernels replayed from a CUDA graph have no op with shapes: a forward attention kernel with one
    block of query rows in its grid is a decode layer (FlashAttention's split-KV decode: grid [1, 3,
    16]); the split-combine kernel is not a pass. 8 replays x 4 layers = 8 decode steps per step."""
    from simcore.validation.traces import inference_composition
    from simcore.workload.replay import load_analyses

    (a,) = load_analyses([str(REPO / CASES["h200_decode_cuda_graphs"][0])])
    assert inference_composition(a, 4.0) == (0.0, 8.0)
    # the eager trace with shapes: one prefill and 8 decode steps, the same either way
    (e,) = load_analyses([str(REPO / CASES["h200_infer_prefill_decode"][0])])
    assert inference_composition(e, 4.0) == (1.0, 8.0)


def test_inference_power_cap_is_the_profiled_steps() -> None:
    """With a profile whose kernels can exceed the TDP, a profiled inference step (one prefill, then
    host-bound decode steps) is stretched as a whole: less than the per-phase stretches summed, which
    would treat the prefill as if prefills ran back to back."""
    name = "h200_infer_llama1b_b8"
    files = [str(REPO / f) for f in CASES[name]]
    # a loop that reads its tokens every step (the trace's never waits: its decode steps would be
    # issued during the prefill, test_validate_real_traces)
    over = ["calibration=h200-kernels", "runtime.decode_sync_every=1"]
    rep = validate(files, SC / f"{name}.yaml", overrides=over).to_dict()
    from simcore.specs.resolve import load_scenario
    from simcore.specs.scenario import RuntimeSpec
    from simcore.validation.traces import inference_composition

    sc = load_scenario(str(SC / f"{name}.yaml"), over)
    sc = sc.model_copy(update={"runtime": RuntimeSpec(**rep["runtime"])})
    r = simcore.predict(sc).model_dump()
    n_pre, n_dec = inference_composition(analyze(read_trace(files[0])), float(sc.model.layers)) or (1.0, 8.0)
    per_phase = n_pre * r["prefill_time_s"] + n_dec * r["decode_step_time_s"]
    caps = n_pre * r["breakdown_prefill"].get("power_cap", 0.0) + n_dec * r["breakdown_decode"].get(
        "power_cap", 0.0
    )
    assert caps > 0
    assert per_phase - caps <= rep["predicted_step_time_s"] < per_phase


def test_validate_reads_cpu_speed_and_sync_from_the_trace() -> None:
    free = ["h200_r25_train_gpt_l8_h768_v128k", "h200_r25_train_gpt_l8_h768_item"]
    reps = {n: validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict() for n in free}
    a, b = reps[free[0]], reps[free[1]]
    # no step waits for the GPU in the first; loss.item() every step in the second
    assert a["runtime"]["step_sync"] is False and b["runtime"]["step_sync"] is True
    assert any("runtime.step_sync: false" in n for n in a["notes"])
    assert not any("runtime.step_sync" in n for n in b["notes"])
    # the CPU probe the prediction used is the trace's, on both threads
    cpu = a["runtime"]["cpu_op_time"]
    assert cpu.pop("decode") is None and "decode" not in a["cpu_op_speed_s"]
    assert cpu == {"main": a["cpu_op_speed_s"]["main"], "backward": a["cpu_op_speed_s"]["backward"]}
    assert 1e-6 < cpu["main"] < 2e-5 and 1e-6 < cpu["backward"] < 2e-5
    # what the scenario or --set says wins over the trace
    n = free[0]
    over = validate(
        [str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml", overrides=["runtime.step_sync=true"]
    ).to_dict()
    assert over["runtime"]["step_sync"] is True
    assert over["predicted_step_time_s"] >= a["predicted_step_time_s"]


def test_validate_counts_decode_steps_per_wait() -> None:
    n = "h200_decode_cuda_graphs"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    # 8 replays, then one synchronize, per profiled step
    assert rep["runtime"]["decode_sync_every"] == 8
    assert any("decode_sync_every: 8" in x for x in rep["notes"])
    # an eager loop that never waits (argmax feeds the next step on the GPU): its decode steps are
    # issued while the GPU still runs the prefill
    e = "h200_r41_infer_llama1b_b4_p2048"
    eager = validate([str(REPO / f) for f in CASES[e]], SC / f"{e}.yaml").to_dict()
    assert eager["runtime"]["decode_sync_every"] is None
    assert any("decode_sync_every: null" in x for x in eager["notes"])
    assert any("issued while the GPU still runs the prefill" in x for x in eager["notes"])
    waits = validate(
        [str(REPO / f) for f in CASES[e]], SC / f"{e}.yaml", ["runtime.decode_sync_every=1"]
    ).to_dict()
    assert waits["predicted_step_time_s"] > 1.15 * eager["predicted_step_time_s"]


def test_prefill_logits_are_read_from_the_trace() -> None:
    """A plain transformers forward runs the LM head over every prompt token (round 31's prefill:
    1 x 256 x 768 into 50,257); generate() over each sequence's last (round 34)."""
    n = "h200_r31_infer_gpt2_l12_b1"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    assert rep["inference"]["prefill_logits"] == "all"
    assert any("prefill_logits: all" in x for x in rep["notes"])
    last = validate(
        [str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml", ["inference.prefill_logits=last"]
    ).to_dict()
    # (a host-bound step: the GEMM shows in the GPU's busy time)
    assert last["predicted_gpu_busy_s"] < rep["predicted_gpu_busy_s"]
    g = "h200_r34_generate_gpt2_l12_b1"
    gen = validate([str(REPO / f) for f in CASES[g]], SC / f"{g}.yaml").to_dict()
    assert gen["inference"]["prefill_logits"] == "last"
    assert not any("prefill_logits" in x for x in gen["notes"])


def test_layer_ops_of_the_calibrated_code_and_of_users_code() -> None:
    """tools/gpt.py's layers issue the ops the host model was measured on (no scaling); a user's
    nn.TransformerEncoder layers issue 35 forward ops and 66 backward nodes (round 74), read and used."""
    from simcore.calibration.host_trace import layer_op_counts

    CALIBRATED_LAYER_OPS = HOST_OPS.layer_ops

    for name, act in (("h200_train_gpt125m_eager", "gelu"), ("h200_train_llama1b_eager", "swiglu")):
        a = analyze(read_trace(REPO / CASES[name][0]))
        assert layer_op_counts(a) == CALIBRATED_LAYER_OPS[act]
        assert validate([str(REPO / f) for f in CASES[name]], SC / f"{name}.yaml").to_dict()["runtime"]["layer_ops"] is None
    n = "h200_r74_encoder_l12_h1024_b4"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    assert rep["runtime"]["layer_ops"] == {"fwd": 35.0, "bwd": 66.0}
    assert any("runtime.layer_ops: {fwd: 35, bwd: 66}" in x for x in rep["notes"])
    plain = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml", ["runtime.layer_ops=null"]).to_dict()
    assert plain["predicted_step_time_s"] < 0.8 * rep["predicted_step_time_s"]  # host-bound: its host per layer


def test_layer_ops_of_transformers_training_layers() -> None:
    """Stops 31-32: transformers' fit steps (round 104: a Llama's separate projections, GPT-2's Conv1D) issue 62 / 93
    and 46 / 62 ops a layer, of the calibrated host weight (HostOps.hf_layer_weights); a Qwen2 layer's
    biased q / k / v six more, cheap, backward nodes (99 of them, 1.05 of the Llama's weight), read and used, and a
    Phi-3 layer's fused projections more ops (72 / 83) of about the Llama's weight (0.94 / 0.95)."""
    from simcore.calibration.host_trace import layer_op_counts

    CALIBRATED_HF_LAYER_OPS, CALIBRATED_HF_LAYER_WEIGHTS = HOST_OPS.hf_layer_ops, HOST_OPS.hf_layer_weights
    calibrated_layer_ops = HOST_OPS.calibrated_layer_ops

    for act, fam in (("swiglu", "llama"), ("gelu", "gpt2")):
        for layers in (4, 12):
            a = analyze(read_trace(REPO / f"traces/h200/round104/hf_fit3_train_{fam}_L{layers}_p0.json.gz"))
            assert layer_op_counts(a) == CALIBRATED_HF_LAYER_OPS[act]
            w = layer_op_counts(a, HOST_OPS)
            assert w == CALIBRATED_HF_LAYER_WEIGHTS[act] == calibrated_layer_ops("huggingface", act)
    llama = "h200_r108_train_llama_l6_h2048_b4_s512"
    assert validate([str(REPO / f) for f in CASES[llama]], SC / f"{llama}.yaml").to_dict()["runtime"]["layer_ops"] is None
    ref_f, ref_b = CALIBRATED_HF_LAYER_WEIGHTS["swiglu"]
    phi = analyze(read_trace(REPO / CASES["h200_r52_train_phi3_l8_h2048_b2"][0]))
    assert layer_op_counts(phi) == (72.0, 83.0)
    pf, pb = layer_op_counts(phi, HOST_OPS) or (0.0, 0.0)
    assert 0.9 < pf / ref_f < 0.97 and 0.9 < pb / ref_b < 0.97
    n = "h200_r108_train_qwen2_l8_h1536_b2_s1024"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    lo = rep["runtime"]["layer_ops"]
    assert lo["fwd"] == pytest.approx(ref_f) and 1.03 < lo["bwd"] / ref_b < 1.06
    assert any("runtime.layer_ops: {fwd: " in x and "aten::t units" in x and "fit steps'" in x for x in rep["notes"])
    plain = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml", ["runtime.layer_ops=null"]).to_dict()
    assert plain["predicted_step_time_s"] < rep["predicted_step_time_s"]  # host-bound: more backward host
    # an MoE layer has host entries of its own: not scaled
    moe = "h200_r50_train_mixtral_l4_h1024_e8_b4"
    assert validate([str(REPO / f) for f in CASES[moe]], SC / f"{moe}.yaml").to_dict()["runtime"]["layer_ops"] is None


def test_decode_layer_ops_of_the_calibrated_code_and_of_users_code() -> None:
    """tools/gpt.py's decode layers issue the calibrated 25 (GPT block, round 77) and 27 (Llama block) ops;
    a hand-written Llama with a torch.cat KV cache 36 (round 76), read and used."""
    from simcore.calibration.host_trace import decode_layer_op_count

    CALIBRATED_DECODE_LAYER_OPS = HOST_OPS.decode_layer_ops

    for path, act in (
        ("traces/h200/round77/profile_infer_gpt_gelu_decode.json.gz", "gelu"),
        ("traces/h200/profile_infer_prefill_decode.json.gz", "swiglu"),
    ):
        assert decode_layer_op_count(analyze(read_trace(REPO / path))) == CALIBRATED_DECODE_LAYER_OPS[act]
    ref = "h200_infer_prefill_decode"
    assert validate([str(REPO / f) for f in CASES[ref]], SC / f"{ref}.yaml").to_dict()["runtime"]["layer_ops"] is None
    n = "h200_r76_llama_l16_h1024_b1_p512"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    assert rep["runtime"]["layer_ops"] == {"fwd": 36.0, "bwd": None}
    plain = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml", ["runtime.layer_ops=null"]).to_dict()
    assert plain["predicted_step_time_s"] < 0.85 * rep["predicted_step_time_s"]  # host-bound decode


def test_pass_ops_of_generate_without_an_end_of_sequence_id() -> None:
    """Round 55's Qwen2 generate() (no end-of-sequence id: no aten::isin, no aten::where) is read as
    generate() with its own weight a pass outside the layers (host_trace.decode_pass_op_count, its ops
    at HostOps.loop_op_weights), against the calibrated generate()'s (HostOps.pass_ops); the
    calibrated code's own traces get no pass_ops."""
    from simcore.calibration.host_trace import decode_pass_op_count

    n = "h200_r55_generate_qwen2_l8_h2048_b8"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    assert rep["runtime"]["decode_loop"] == "generate"
    w = decode_pass_op_count(analyze(read_trace(REPO / CASES[n][0])), HOST_OPS)
    assert w is not None and rep["runtime"]["pass_ops"] == pytest.approx(w)
    ref = HOST_OPS.pass_ops["huggingface"]["generate"]["swiglu"]
    assert w < 0.75 * ref
    assert any(f"runtime.pass_ops: {w:g}" in x and f"issuing {ref:g}" in x for x in rep["notes"])
    for ref in ("h200_r34_generate_llama_l8_h2048_b4", "h200_infer_prefill_decode", "h200_r31_infer_gpt2_l12_b1"):
        assert validate([str(REPO / f) for f in CASES[ref]], SC / f"{ref}.yaml").to_dict()["runtime"]["pass_ops"] is None


def test_a_written_out_rmsnorm_alone_is_not_transformers_code() -> None:
    """transformers' Llama writes RMSNorm out of elementwise ops and computes its rotary cos / sin every
    pass; a user's Llama with the same norm and precomputed tables (round 78) is priced as its own code."""
    from simcore.calibration.host_trace import hf_layers

    for name, hf in (("h200_r31_infer_llama_l8_h2048_b4", True), ("h200_r78_llama_manualnorm_l8_h2048_b2_p512", False)):
        ops = list(analyze(read_trace(REPO / CASES[name][0])).trace.cpu_ops.values())
        assert hf_layers(ops) is hf
    n = "h200_r78_llama_manualnorm_l8_h2048_b2_p512"
    rep = validate([str(REPO / f) for f in CASES[n]], SC / f"{n}.yaml").to_dict()
    assert rep["runtime"]["implementation"] == "reference" and rep["runtime"]["layer_ops"]["fwd"] > 45


def test_layer_ops_of_one_unannotated_step(tmp_path: Path) -> None:
    """What users send, one profiled step without ProfilerStep marks, is counted whole."""
    from simcore.calibration.host_trace import layer_op_counts, unannotated_step
    from simcore.validation.trace_report import one_step_trace

    n = "h200_r75_llama_l16_h1024_b4"
    cut = tmp_path / "one.json.gz"
    assert one_step_trace(REPO / CASES[n][0], cut)
    a = analyze(read_trace(cut))
    assert unannotated_step(a)
    assert layer_op_counts(a) == layer_op_counts(analyze(read_trace(REPO / CASES[n][0])))


def test_attention_backend_mask_and_dropout_are_read_from_the_trace() -> None:
    """Round 40: PyTorch's default SDPA backend on the H200 is cuDNN (simcore's own traces forced
    flash); transformers' compiled GPT-2 passes a [b, 1, s, s] mask and dropout 0.1 to it."""
    from simcore.traces.classify import attention_shape
    from simcore.validation.traces import dropout_p, sdpa_backend
    from simcore.workload.replay import load_analyses

    own = load_analyses([str(REPO / CASES["h200_train_gpt_gelu_ln"][0])])
    assert sdpa_backend(own) == "flash"
    name = "h200_r31_train_gpt2_l12_b8_compiled"
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert sdpa_backend(ans) == "cudnn"
    assert dropout_p(ans) == pytest.approx(0.1)  # compiled: no native_dropout, the attention's dropout_p
    shapes = [
        attention_shape(o)
        for o in ans[0].trace.cpu_ops.values()
        if o.name.startswith("aten::_cudnn_attention")
    ]
    assert shapes and all(s is not None for s in shapes)
    for s in shapes:
        assert s is not None
        assert (s["backend"], s["mask"], s["dropout"], s["causal"]) == (
            "cudnn",
            True,
            pytest.approx(0.1),
            False,
        )
    report = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert any("runtime.attention_backend: cudnn" in n for n in report.notes)
    flash = validate(files, SC / f"{name}.yaml", ["runtime.attention_backend=flash"], analyses=ans)
    nodrop = validate(files, SC / f"{name}.yaml", ["training.dropout=0"], analyses=ans)
    att = {c["class"]: c for c in report.to_dict()["classes"]}["attention"]
    # the masked dropout cuDNN kernels priced within 15 % (the flash-priced or dropout-free ones 20 % short)
    assert abs(att["predicted_s"] / att["measured_s"] - 1) < 0.15
    for other in (flash, nodrop):
        o = {c["class"]: c for c in other.to_dict()["classes"]}["attention"]
        assert o["predicted_s"] < 0.85 * att["measured_s"]


def test_inference_cpu_speed_is_read_from_the_gemm_op() -> None:
    """Rounds 42-43: a no-grad pass is timed by its median GEMM op (aten::linear; GPT-2's Conv1D
    addmm), stated as aten::t at the fitted ratio of its code and block (simcore's Llama 8.9, GPT 10.7,
    transformers' Llama 8.8), beside its aten::empty at its code's own ratio (stop 29: the geometric mean of
    the two, fit_host.gemm_pace)."""
    from simcore.calibration.fit_host import gemm_pace
    from simcore.calibration.host_trace import PROBE_WINDOW, op_speed
    from simcore.validation.traces import _profile_of
    from simcore.workload.replay import load_analyses

    own = "h200_r40_infer_llama_l16_h2048_b2"
    rep = validate([str(REPO / f) for f in CASES[own]], SC / f"{own}.yaml").to_dict()
    host = _profile_of(simcore.load_scenario(str(SC / f"{own}.yaml"))).host_layer
    s = op_speed(load_analyses([str(REPO / CASES[own][0])])[0], PROBE_WINDOW)
    assert s is not None and s.linear_main_s and s.main_s
    ratio = host["probe_linear_ratio_infer_swiglu"]
    assert 7.0 < ratio < host["probe_linear_ratio_infer_gelu"] < 13.0
    e_ratio = host["probe_empty_ratio_infer_swiglu"]
    assert 0.6 < host["probe_empty_ratio_infer_hf_swiglu"] < e_ratio < host["probe_empty_ratio_infer_gelu"] < 1.0
    want = math.sqrt(s.linear_main_s / ratio * (s.empty_main_s or 0.0) / e_ratio)
    assert rep["runtime"]["cpu_op_time"]["main"] == pytest.approx(want)
    assert gemm_pace(s.linear_main_s, ratio, s.empty_main_s or 0.0, e_ratio) == pytest.approx(want)
    # one probe alone: the one it has
    assert gemm_pace(s.linear_main_s, ratio, 0.0, e_ratio) == pytest.approx(s.linear_main_s / ratio)
    assert gemm_pace(0.0, ratio, 4e-6, 0.8) == pytest.approx(5e-6) and gemm_pace(0.0, None, 0.0, 0.8) == 0.0
    hf = "h200_r31_infer_llama_l8_h2048_b4"
    rep_hf = validate([str(REPO / f) for f in CASES[hf]], SC / f"{hf}.yaml").to_dict()
    s_hf = op_speed(load_analyses([str(REPO / CASES[hf][0])])[0], PROBE_WINDOW)
    assert s_hf is not None and s_hf.linear_main_s
    r_hf = host["probe_linear_ratio_infer_hf_swiglu"]
    e_hf = host["probe_empty_ratio_infer_hf_swiglu"]
    assert rep_hf["runtime"]["cpu_op_time"]["main"] == pytest.approx(
        math.sqrt(s_hf.linear_main_s / r_hf * (s_hf.empty_main_s or 0.0) / e_hf)
    )
    # GPT-2's Conv1D layers issue addmm, not linear: that op times them
    g2 = "h200_r38_infer_gpt2_l12_b8"
    s_g2 = op_speed(load_analyses([str(REPO / CASES[g2][0])])[0], PROBE_WINDOW)
    assert s_g2 is not None and s_g2.main_s is None and s_g2.linear_main_s


def test_optimizer_implementation_and_loss_scaling_are_read_from_the_trace() -> None:
    """Round 46: torch.optim's default AdamW is the foreach update (~3x a fused one's traffic: 13.1 ms
    against 5.4 for 617M fp32 parameters); fp16 with a GradScaler waits for found_inf before the
    update, which exposes its host time."""
    from simcore.validation.traces import optimizer_impl
    from simcore.workload.replay import load_analyses

    name = "h200_r46_train_llama_l8_h2048_b2_foreach"
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert optimizer_impl(ans) == "foreach"
    assert optimizer_impl(load_analyses([str(REPO / CASES["h200_r31_train_gpt2_l12_b8"][0])])) == "fused"
    report = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert any("training.optimizer_impl: foreach" in n for n in report.notes)
    fused = validate(files, SC / f"{name}.yaml", ["training.optimizer_impl=fused"], analyses=ans)
    opt = {c["class"]: c for c in report.to_dict()["classes"]}["optimizer"]
    opt_fused = {c["class"]: c for c in fused.to_dict()["classes"]}["optimizer"]
    assert abs(opt["predicted_s"] / opt["measured_s"] - 1) < 0.15
    assert opt_fused["predicted_s"] < 0.5 * opt["measured_s"]
    assert abs(report.error_pct) < abs(fused.error_pct)
    # fp16: the GradScaler's wait exposes the foreach update's host time
    name = "h200_r46_train_gpt2_l12_b8_fp16_scaler"
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    fp16 = validate(files, SC / f"{name}.yaml", analyses=ans)
    bf16 = validate(files, SC / f"{name}.yaml", ["training.precision=bf16"], analyses=ans)
    assert fp16.predicted_step_time_s > bf16.predicted_step_time_s + 3e-3
    assert abs(fp16.error_pct) < 10


def test_profiler_options_are_read_from_the_trace() -> None:
    """Round 46's trace recorded Python stacks and memory events without shapes: the host per op of
    each kind changes by its measured ratio (rounds 47-48's fit points of simcore's layers: +22 % on a
    forward layer; round 54's of transformers' layers: +5 % over the base fitted with round 102's rows, +14 % over
    round 32's alone, and +30 % outside the layers over the geometric-mean probes of stop 29)."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    prof = load_profile(default_registry().device("h200"))
    assert prof.profiler_factor(["stack", "memory"], "train_fwd") > 1.15
    assert 1.0 < prof.profiler_factor(["stack", "memory"], "train_fwd", "huggingface") < 1.2
    assert prof.profiler_factor(["stack", "memory"], "step_fwd", "huggingface") > 1.25
    assert prof.profiler_factor(["shapes"], "train_fwd") == 1.0
    name = "h200_r46_train_llama_l4_h1024_b4_stack"
    files = [str(REPO / f) for f in CASES[name]]
    report = validate(files, SC / f"{name}.yaml")
    assert any("runtime.profiler_record: [stack, memory]" in n for n in report.notes)
    plain = validate(files, SC / f"{name}.yaml", ["runtime.profiler_record=[shapes]"])
    # a host-bound step: the options' host time shows in the step
    assert report.predicted_step_time_s > 1.02 * plain.predicted_step_time_s
    assert abs(report.error_pct) < abs(plain.error_pct)


def test_host_runs_at_most_a_launch_queue_ahead() -> None:
    """A loop that does not wait inside its step issues decode steps while the GPU runs the prefill,
    but only a launch queue's worth of kernels ahead (round 52: 1022 pending at most, then each launch
    blocks): hand-computed with a 60 ms GPU prefill, 8 decode steps of 10 ms host / 2 ms GPU."""
    from simcore.engine.inference import LAUNCH_QUEUE_KERNELS
    from simcore.validation.traces import inference_step_time

    res = {
        "prefill_time_s": 0.060, "decode_step_time_s": 0.010, "prefill_host_s": 0.005, "decode_host_s": 0.010,
        "breakdown_prefill": {}, "breakdown_decode": {"host_overhead": 0.008},
    }  # fmt: skip
    serial = 0.060 + 8 * 0.010
    # no cap (kernels unknown): the host issues 55 ms of decode steps behind the prefill
    t, saved = inference_step_time(res, 1, 8, True)
    assert t == pytest.approx(max(0.005 + 0.080 + 0.002, 0.060 + 8 * 0.002)) and saved == pytest.approx(
        serial - t
    )
    # 400 kernels a step: 2.56 steps (25.6 ms of host) fit the queue
    k = 400.0
    t_cap, _ = inference_step_time({**res, "decode_kernels": k}, 1, 8, True)
    during = 0.010 * LAUNCH_QUEUE_KERNELS / k
    assert t_cap == pytest.approx(0.060 + 0.080 - during + 0.002)
    assert t < t_cap < serial
    # a loop that waits for each token: back to back
    assert inference_step_time(res, 1, 8, False) == (pytest.approx(serial), 0.0)


def test_eager_attention_is_read_from_the_trace() -> None:
    """Round 52: transformers' Llama with attn_implementation="eager": no fused attention op, softmaxes
    over 4-D scores; priced as its ops instead of a fused kernel (the first prediction −47.6 %)."""
    from simcore.validation.traces import sdpa_backend
    from simcore.workload.replay import load_analyses

    name = "h200_r52_train_llama_l8_h2048_b2_eager_attn"
    files = [str(REPO / f) for f in CASES[name]]
    ans = load_analyses(files)
    assert sdpa_backend(ans) == "eager"
    report = validate(files, SC / f"{name}.yaml", analyses=ans)
    assert any("runtime.attention_backend: eager" in n for n in report.notes)
    fused = validate(files, SC / f"{name}.yaml", ["runtime.attention_backend=cudnn"], analyses=ans)
    assert report.predicted_step_time_s > 1.4 * fused.predicted_step_time_s
    assert abs(report.error_pct) < abs(fused.error_pct)


def test_transformers_decode_layer_ops_scale_its_decode_host_alone() -> None:
    """transformers' dynamic-cache decode layers issue the calibrated 54 (Llama), 38 (GPT-2), 67 (eager
    attention) top-level ops; a static cache's eager decode layer 63 (round 84), read and used for the
    decode passes only (its prefill's layers issue the same 62 as the dynamic cache's)."""
    from simcore.calibration.host_trace import decode_layer_op_count

    CALIBRATED_HF_DECODE_LAYER_OPS = HOST_OPS.hf_decode_layer_ops

    for name, key in (
        ("h200_r31_infer_llama_l8_h2048_b4", "swiglu"),
        ("h200_r31_infer_gpt2_l12_b1", "gelu"),
        ("h200_r60_infer_llama_l8_h2048_b4_eager_attn", "swiglu_eager"),
    ):
        assert decode_layer_op_count(analyze(read_trace(REPO / CASES[name][0]))) == CALIBRATED_HF_DECODE_LAYER_OPS[key]
        assert validate([str(REPO / f) for f in CASES[name]], SC / f"{name}.yaml").to_dict()["runtime"]["layer_ops"] is None
    n = "h200_r84_generate_llama_l8_h2048_b4_static_eager"
    files = [str(REPO / f) for f in CASES[n]]
    rep = validate(files, SC / f"{n}.yaml")
    d = rep.to_dict()
    assert d["runtime"]["layer_ops"] == {"fwd": 63.0, "bwd": None}
    assert any("runtime.layer_ops: {fwd: 63}" in x and "{fwd: 54} a decode layer" in x for x in d["notes"])
    from simcore.prediction import predict
    from simcore.specs.resolve import load_scenario

    # the same runtime with and without the count: the decode host scales by 63 / 54, the prefill's does not
    rt = {k: v for k, v in d["runtime"].items() if v is not None}
    sc = load_scenario(str(SC / f"{n}.yaml")).model_copy(
        update={"runtime": load_scenario(str(SC / f"{n}.yaml")).runtime.model_validate(rt)}
    )
    plain = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"layer_ops": None})})
    a, b = predict(sc), predict(plain)
    assert a.prefill_host_s == pytest.approx(b.prefill_host_s)
    assert a.decode_host_s > b.decode_host_s
    # by its 8 layers' share alone: 8 x the profile's layer at the trace's pace x (63 / 54 - 1)
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    prof = load_profile(default_registry().device("h200")).at_cpu_speed(rt["cpu_op_time"]["main"], inference=True)
    layer = prof.host_of("infer_decode_swiglu", True, "huggingface")
    assert a.decode_host_s - b.decode_host_s == pytest.approx(8 * layer * (63.0 / 54.0 - 1.0), rel=1e-9)


def test_training_cpu_speed_is_read_from_the_gemm_ops_of_the_fit_code() -> None:
    """Stop 31: a training step of the code the transformers fit steps ran (separate projections, fp32
    weights under autocast, no recompute, one GPU) is paced by the mean of its GEMM ops on each thread
    (aten::linear, GPT-2's addmm; the backward's aten::mm) at the fit steps' ratios to aten::t; a code
    whose GEMM ops cost otherwise (Phi-3's fused projections, a recomputed forward, bf16 weights without
    autocast, fp32 without autocast) keeps aten::t and aten::empty."""
    from simcore.calibration.fit_host import thread_probe, train_gemm_ratios
    from simcore.calibration.host_trace import gemm_ops_per_step, op_speed
    from simcore.validation.traces import _profile_of
    from simcore.workload.replay import load_analyses

    llama = "h200_r108_train_llama_l6_h2048_b4_s512"
    host = _profile_of(simcore.load_scenario(str(SC / f"{llama}.yaml"))).host_layer
    ratios = train_gemm_ratios(host, "hf_swiglu")
    assert ratios is not None and 10.0 < ratios[0] < 20.0 and 5.0 < ratios[1] < 12.0
    assert train_gemm_ratios(host, "hf_gelu") is not None and train_gemm_ratios(host, "swiglu") is None
    a = load_analyses([str(REPO / CASES[llama][0])])[0]
    assert gemm_ops_per_step(a) == 7 * 6 + 1  # seven projections a layer and the LM head
    s = op_speed(a)
    assert s is not None and s.gemm_mean_main_s and s.mm_mean_backward_s
    rep = validate([str(REPO / f) for f in CASES[llama]], SC / f"{llama}.yaml").to_dict()
    assert rep["runtime"]["cpu_op_time"]["main"] == pytest.approx(s.gemm_mean_main_s / ratios[0])
    assert rep["runtime"]["cpu_op_time"]["backward"] == pytest.approx(s.mm_mean_backward_s / ratios[1])
    assert any("mean of its GEMM ops" in n for n in rep["notes"])
    for other in (
        "h200_r105_train_phi3_l6_h1536_b2_s1024",  # 4 GEMM ops a layer
        "h200_r46_train_llama_l8_h2048_b1_s4096_gc",  # recompute
        "h200_r60_train_gpt2_l12_b8_fp32",  # no autocast
    ):
        a = load_analyses([str(REPO / CASES[other][0])])[0]
        s = op_speed(a)
        assert s is not None
        rep = validate([str(REPO / f) for f in CASES[other]], SC / f"{other}.yaml").to_dict()
        main = thread_probe(s.main_s or 0.0, s.empty_main_s or 0.0, host["probe_empty_ratio_main"], training=True)
        assert rep["runtime"]["cpu_op_time"]["main"] == pytest.approx(main), other
        assert not any("mean of its GEMM ops" in n for n in rep["notes"]), other
    phi3 = load_analyses([str(REPO / CASES["h200_r105_train_phi3_l6_h1536_b2_s1024"][0])])[0]
    assert gemm_ops_per_step(phi3) == 4 * 6 + 1
