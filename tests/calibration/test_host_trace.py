"""Host speed from the CPU timeline of profiler traces (``simcore.calibration.host_trace``)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest

from simcore.calibration.calibrate import calibrate
from simcore.calibration.host_trace import host_scale, layer_host_times
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.traces import read_trace
from simcore.traces.classify import analyze
from simcore.workload.replay import load_analyses
from tests.cli_runner import exit_status

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "traces" / "h200"
HOST_OPS = load_profile(default_registry().device("h200")).host_ops
"""The shipped H200 profile's host op tables (``ComputeProfile.host_ops``)."""
LAYER_WEIGHT_FIT_TRACES = tuple(
    f"traces/h200/round104/hf_fit3_train_{m}_L{n}_p{p}.json.gz"
    for m in ("gpt2", "llama")
    for n in (4, 12)
    for p in (0, 1)
)
"""The traces ``HostOps.layer_op_weights`` were fitted on."""


@pytest.fixture(scope="module")
def prof():  # type: ignore[no-untyped-def]
    return load_profile(default_registry().device("h200"))


def test_training_trace_layers_and_activation(prof) -> None:  # type: ignore[no-untyped-def]
    xs = layer_host_times(load_analyses([str(H200 / "profile_train_gpt_gelu_ln.json.gz")])[0], prof)
    assert [(x.mode, x.act, x.layers) for x in xs] == [("train", "gelu", 4)] * 2  # two profiled steps
    # the profile's expectation is its profiled forward + backward per layer
    want = prof.host("train_fwd_gelu", True) + prof.host("train_bwd_gelu", True)
    assert all(x.expected_s == pytest.approx(want) for x in xs)
    # the CPU timeline: forward norms 0.23 ... 5.88 ms, backward norm nodes 7.33 ... 11.61 ms (4 layers)
    assert 1.5e-3 < xs[0].measured_s < 3.5e-3


def test_recompute_steps_are_left_out(prof) -> None:  # type: ignore[no-untyped-def]
    # the Llama trace checkpoints its attention (selective recompute): a flash forward reruns inside
    # the backward, and the checkpointing host model would be measured instead of the host's speed
    path = H200 / "profile_train_llama_swiglu_rms_gqa_selective.json.gz"
    assert layer_host_times(load_analyses([str(path)])[0], prof) == []


def test_decode_passes_and_distributed_traces(prof) -> None:  # type: ignore[no-untyped-def]
    xs = layer_host_times(load_analyses([str(H200 / "profile_infer_prefill_decode.json.gz")])[0], prof)
    # 2 profiled steps x 8 decode steps of a 4-layer model; the prefill passes (512 tokens) are not decode
    assert len(xs) == 16 and all(x.mode == "decode" and x.layers == 4 for x in xs)
    tp = REPO / "traces" / "h200x2" / "profile_tp_rank0.json.gz"
    assert layer_host_times(load_analyses([str(tp)])[0], prof) == []  # NCCL kernels: skipped
    scale, found = host_scale(load_analyses([str(tp)]), prof)
    assert scale is None and found == []


def test_calibrate_sets_the_host_scale(prof) -> None:  # type: ignore[no-untyped-def]
    res = calibrate([str(H200 / "profile_train_gpt_gelu_ln.json.gz")], "h200", fit_comm_profile=False)
    assert res.compute_profile is not None
    s = res.compute_profile.host_scale
    ratios = [h["ratio"] for h in res.host]
    assert len(ratios) == 2 and s == pytest.approx(sorted(ratios)[0] / 2 + sorted(ratios)[1] / 2)
    # every host_layer entry the engines read is scaled
    assert res.compute_profile.host("train_fwd_gelu") == pytest.approx(s * prof.host("train_fwd_gelu"))
    assert res.to_dict()["host_scale"] == s
    # the host model borrowed from the shipped profile comes with its host op tables (the trace refits none)
    assert res.compute_profile.host_ops == HOST_OPS
    assert "host model (host_layer, host_ops) taken from the h200 profile" in res.notes


def test_ddp_hooks_reproduce_the_committed_csv(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import csv
    import gzip

    from simcore.calibration.host_trace import ddp_hooks

    ranks = [f"traces/h200x2/profile_ddp_rank{r}.json.gz" for r in (0, 1)]
    h = ddp_hooks(analyze(read_trace(REPO / ranks[0])))
    assert h is not None
    # 4 layers x 6 weights + embedding, LM head and final norm; the trace's 8 bucket all-reduces
    assert (h.params_per_step, h.buckets_per_step, h.steps) == (27, 8, 2)
    assert 10e-6 < h.per_param_s < 200e-6 and 50e-6 < h.per_bucket_s < 500e-6
    out = tmp_path / "hooks.csv.gz"
    old = os.getcwd()
    os.chdir(REPO)
    try:
        assert exit_status("host-trace", *["--ddp", *ranks, "-o", str(out)]) == 0
    finally:
        os.chdir(old)
    with gzip.open(out, "rt") as a, gzip.open(REPO / "traces/h200x2/host_ddp_hooks.csv.gz", "rt") as b:
        assert list(csv.DictReader(a)) == list(csv.DictReader(b))
    # a trace without DDP: one line, exit 2
    assert (
        exit_status(
            "host-trace",
            *["--ddp", str(REPO / "traces/h200/profile_train_gpt_gelu_ln.json.gz"), "-o", str(out)],
        )
        == 2
    )
    # an output that cannot be written: one line, exit 2
    assert (
        exit_status("host-trace", *["--ddp", str(REPO / ranks[0]), "-o", str(tmp_path / "no_dir" / "x.csv")])
        == 2
    )


def test_ddp_gradient_and_bucket_counts_match_the_traces() -> None:
    from simcore.calibration.host_trace import ddp_hooks
    from simcore.engine.training import ddp_gradients_and_buckets
    from simcore.specs.resolve import load_scenario

    sc_dir = REPO / "tests/data/trace_scenarios"
    for name, trace in (
        ("h200x2_ddp_gpt", "traces/h200x2/profile_ddp_rank0.json.gz"),
        ("h200x2_ddp_gpt125m", "traces/h200x2/round22/profile_ddp_gpt125m_rank0.json.gz"),
    ):
        h = ddp_hooks(analyze(read_trace(REPO / trace)))
        assert h is not None
        grads, buckets = ddp_gradients_and_buckets(load_scenario(str(sc_dir / f"{name}.yaml")).model, 1, 4.0)
        assert float(grads) == h.params_per_step
        assert abs(float(buckets) - h.buckets_per_step) <= 1  # the 4-layer model: 9 predicted, 8 measured


def test_profiled_ddp_step_pays_the_hooks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    import simcore
    from simcore.engine.training import ddp_gradients_and_buckets
    from simcore.specs.registry import builtin_dir
    from simcore.specs.resolve import load_scenario

    sc = load_scenario(str(REPO / "tests/data/trace_scenarios/h200x2_ddp_gpt.yaml"))
    # host-bound: a tiny sequence keeps the GPU short, so the hooks' host time shows in full in the step
    small = sc.model_copy(update={"model": sc.model.model_copy(update={"seq_len": 64})})
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())
    hl = shipped["host_layer"]
    per_param, per_bucket = hl["profiled_ddp_param"], hl["profiled_ddp_bucket"]
    hl["profiled_ddp_param"] = hl["profiled_ddp_bucket"] = 0.0
    off = tmp_path / "no_hooks.yaml"
    off.write_text(yaml.safe_dump(shipped))
    grads, buckets = ddp_gradients_and_buckets(small.model, 1, 4.0)
    with_hooks = simcore.predict(small).step_time_s
    without = simcore.predict(small.model_copy(update={"calibration": str(off)})).step_time_s
    assert with_hooks - without == pytest.approx(
        float(grads) * per_param + float(buckets) * per_bucket, rel=0.01
    )
    # without the profiler the hooks are within the per-layer DDP ratio: no extra term
    off_rt = small.runtime.model_copy(update={"profiler": False})
    unprof = small.model_copy(update={"runtime": off_rt})
    assert with_hooks > simcore.predict(unprof).step_time_s
    assert simcore.predict(unprof).step_time_s == pytest.approx(
        simcore.predict(unprof.model_copy(update={"calibration": str(off)})).step_time_s
    )


def test_windowed_pace() -> None:
    """The pace of a run: the mean over consecutive windows (in time order) of each window's median; a
    lone preempted call moves nothing, a slow stretch moves it by its share of the run; too few calls
    for two windows: the plain median."""
    from simcore.calibration.host_trace import _windowed

    calls = [(float(i), 1.0) for i in range(64)]
    assert _windowed(calls, 16) == 1.0
    calls[5] = (5.0, 50.0)  # one call preempted
    assert _windowed(calls, 16) == 1.0
    slow = [(float(i), 2.0 if 16 <= i < 32 else 1.0) for i in range(64)]  # a quarter of the run at half pace
    assert _windowed(slow, 16) == pytest.approx(1.25)
    assert _windowed(slow, 0) == 1.0  # one median does not see it
    assert _windowed(list(reversed(slow)), 16) == pytest.approx(1.25)  # time order, not list order
    assert _windowed([(0.0, 3.0), (1.0, 1.0), (2.0, 2.0)], 16) == 2.0
    # a trailing partial window is left out
    assert _windowed([(float(i), 1.0) for i in range(36)] + [(36.0 + i, 9.0) for i in range(8)], 16) == 1.0


def test_op_speed_probe_per_thread() -> None:
    from simcore.calibration.host_trace import op_speed

    s = op_speed(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz")))
    assert s is not None and s.main_s is not None and s.backward_s is not None
    # a transposed view: microseconds on either thread (round 1: 2.7 us backward, 9.4 us under autocast)
    assert 1e-6 < s.backward_s < 20e-6 and 1e-6 < s.main_s < 20e-6
    inf = op_speed(analyze(read_trace(H200 / "profile_infer_prefill_decode.json.gz")))
    assert inf is not None and inf.backward_s is None and inf.main_s is not None
    assert op_speed(analyze(read_trace(H200 / "profile_decode_cuda_graphs.json.gz"))) is None


R25 = H200 / "round25"


def test_training_step_hosts_segments() -> None:
    from simcore.calibration.host_trace import step_synchronized, training_step_hosts

    a = analyze(read_trace(R25 / "profile_train_gpt_L8_h768_v128k.json.gz"))
    xs = training_step_hosts(a)
    assert len(xs) == 2 and all(x.layers == 8 and x.act == "gelu" and not x.synchronized for x in xs)
    for x in xs:
        parts = (x.pre_s + x.head_s + x.bhead_s + x.tail_s + x.optimizer_s + x.post_s
                 + x.layers * (x.fwd_layer_s + x.bwd_layer_s))  # fmt: skip
        # the segments tile the step's CPU range (the last norms' spacing is counted per layer)
        assert parts == pytest.approx(x.step_s, rel=1e-9)
        # a backward layer issues ~2.2x the ops of a forward one (probe units, round 23)
        assert 1.5 < (x.bwd_layer_s / x.probe_bwd_s) / (x.fwd_layer_s / x.probe_main_s) < 3.5
    assert step_synchronized(a) is False
    # loss.item() every step: the host waits for the GPU (a cudaStreamSynchronize in each step)
    b = analyze(read_trace(R25 / "profile_train_llama_L8_h768_item.json.gz"))
    assert step_synchronized(b) is True
    assert all(x.synchronized and x.act == "swiglu" for x in training_step_hosts(b))
    # recomputation is left out (norms rerun in the backward), inference traces have no training step
    assert training_step_hosts(analyze(read_trace(H200 / "profile_infer_prefill_decode.json.gz"))) == []


def test_decode_step_hosts() -> None:
    from simcore.calibration.host_trace import decode_step_hosts

    xs = decode_step_hosts(analyze(read_trace(R25 / "profile_infer_llama_L8_h3072_b4.json.gz")))
    # 2 profiled steps x 8 decode passes of 8 layers (the prefill passes are 1024 tokens: not decode)
    assert len(xs) == 16 and all(x.layers == 8 and x.act == "swiglu" for x in xs)
    assert all(x.pass_s > x.layers * x.layer_s > 0 for x in xs)
    # a decode layer is ~150-190 aten::t of host (round 25 fit: 153-162)
    assert all(100 < x.layer_s / x.probe_main_s < 250 for x in xs)


def test_generate_decode_passes_run_batched_experts() -> None:
    """Round 109: transformers' generate() of a Mixtral runs its prefill's experts as the grouped GEMM and
    its decode passes' as batched GEMMs over gathered weights (``aten::index`` of the stacked experts, one
    ``aten::bmm`` by ``[tokens, in, 1]``); each pass is labelled by its own ops. A hand-written loop's
    decode passes keep the grouped GEMM; the rotary embedding's bmm is not an expert's."""
    from simcore.calibration.host_trace import batched_experts, decode_step_hosts

    r109 = H200 / "round109"
    gen = decode_step_hosts(
        analyze(read_trace(r109 / "hf_fit2_generate_mixtral_L4_b2.json.gz")), prefill=True
    )
    assert {(x.seq, x.act, x.loop) for x in gen} == {
        (128, "swiglu_moe_native", "generate"),
        (1, "swiglu_moe_batched", "generate"),
    }
    # 2 profiled steps x 7 decode passes (the prefill makes the first of 8 tokens)
    assert sum(x.seq == 1 for x in gen) == 14
    loop = decode_step_hosts(analyze(read_trace(r109 / "hf_fit2_infer_mixtral_L2_b4_p0.json.gz")))
    assert loop and {x.act for x in loop} == {"swiglu_moe_native"}
    # per probe a batched decode layer costs ~27 % less host than a grouped one (337-342 vs 446-511 aten::t)
    per = [statistics.median(x.layer_s / x.probe_main_s for x in xs if x.seq == 1) for xs in (gen, loop)]
    assert 0.6 < per[0] / per[1] < 0.85
    ops = list(analyze(read_trace(r109 / "hf_fit2_generate_mixtral_L4_b2.json.gz")).trace.cpu_ops.values())
    rotary = [o for o in ops if o.name == "aten::bmm" and o.input_dims and o.input_dims[0][2] == 1]
    assert rotary and not batched_experts(rotary)


def test_steps_and_decode_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from simcore.calibration.fit_host import _csv_rows, decode_host_costs, step_host_costs

    out = tmp_path / "steps.csv.gz"
    assert (
        exit_status(
            "host-trace", *["--steps", str(R25 / "profile_train_gpt_L6_h1024_b8.json.gz"), "-o", str(out)]
        )
        == 0
    )
    rows = _csv_rows(out)
    assert len(rows) == 2 and rows[0]["layers"] == "6"
    assert step_host_costs(rows, out)["profiled_train_bwd_gelu"] > 0
    dec = tmp_path / "decode.csv"
    assert (
        exit_status(
            "host-trace", *["--decode", str(R25 / "profile_infer_llama_L8_h3072_b4.json.gz"), "-o", str(dec)]
        )
        == 0
    )
    assert decode_host_costs(_csv_rows(dec), dec)["profiled_infer_decode_swiglu"] > 0
    # a trace without what the flag reads: one line, exit 2
    assert (
        exit_status(
            "host-trace", *["--steps", str(R25 / "profile_infer_llama_L8_h3072_b4.json.gz"), "-o", str(out)]
        )
        == 2
    )
    assert (
        exit_status(
            "host-trace", *["--decode", str(R25 / "profile_train_gpt_L6_h1024_b8.json.gz"), "-o", str(dec)]
        )
        == 2
    )


MEANS = ("gemm_mean_main_s", "mm_mean_bwd_s")  # columns since stop 31


def test_committed_step_csvs_reproduce() -> None:
    """The committed CSVs are what the CLI reads from the held-apart traces' siblings: same columns,
    and every row's segments positive."""
    from simcore.calibration.fit_host import _csv_rows
    from simcore.calibration.host_trace import DECODE_HOST_COLUMNS, STEP_HOST_COLUMNS

    steps = _csv_rows(H200 / "host_steps.csv.gz")
    # round 25's rows predate the GEMM-op columns (round 45) and the optimizer column (round 47)
    cols = tuple(
        c
        for c in STEP_HOST_COLUMNS
        if c not in ("linear_main_s", "mm_bwd_s", "optimizer", "profiler", "weights", *MEANS)
    )
    assert tuple(steps[0]) == cols and len(steps) == 32
    assert all(float(r[k]) > 0 for r in steps for k in ("fwd_layer_s", "bwd_layer_s", "probe_main_s"))
    # round 47's: torch.optim's foreach AdamW and SGD, told apart by their Optimizer.step ranges
    r47 = _csv_rows(H200 / "host_steps_r47.csv.gz")
    assert tuple(r47[0]) == tuple(c for c in STEP_HOST_COLUMNS if c not in MEANS) and len(r47) == 32
    assert {r["optimizer"] for r in r47} == {"adamw_foreach", "sgd_foreach"}
    assert all(("sgd" in r["trace"]) == (r["optimizer"] == "sgd_foreach") for r in r47)
    assert {r["profiler"] for r in r47} == {""}
    # rounds 47-48's fit points under the profiler's other options, told apart by what the traces hold
    opts = _csv_rows(H200 / "host_steps_profiler.csv.gz")
    assert {r["profiler"] for r in opts} == {"", "stack", "memory", "stack_memory", "noshapes_stack_memory"}
    assert all(("noshapes" in r["trace"]) == r["profiler"].startswith("noshapes") for r in opts)
    # round 58's transformers fit runs with bf16 weights (no autocast), told apart by their gradients' dtype
    assert all((r["weights"] == "bf16") == ("bf16" in r["trace"]) for r in opts)
    assert all(r["profiler"] == "" for r in opts if r["weights"] == "bf16")
    # rounds 102 and 104's transformers fit steps time their GEMM ops' means (a training step's pace): a
    # Llama's or GPT-2's mean GEMM op on the main thread costs 15-30 aten::empty, an aten::mm on the backward's 6-12
    for name in ("host_steps_hf_r102.csv.gz", "host_steps_hf_r104.csv.gz"):
        rows = _csv_rows(H200 / name)
        assert tuple(rows[0]) == STEP_HOST_COLUMNS and len(rows) == 16
        assert all(15 < float(r["gemm_mean_main_s"]) / float(r["empty_main_s"]) < 30 for r in rows)
        assert all(6 < float(r["mm_mean_bwd_s"]) / float(r["empty_bwd_s"]) < 12 for r in rows)
    dec = _csv_rows(H200 / "host_decode.csv.gz")
    # round 25's rows predate the aten::linear probe (round 42's have it, and prefill passes)
    old = tuple(c for c in DECODE_HOST_COLUMNS if c != "linear_main_s")
    assert tuple(dec[0]) == old and {r["layers"] for r in dec} == {"4", "16"}
    r42 = _csv_rows(H200 / "host_decode_r42.csv.gz")
    assert tuple(r42[0]) == DECODE_HOST_COLUMNS and {r["seq"] != "1" for r in r42} == {True, False}
    assert all(float(r["linear_main_s"]) > 5 * float(r["probe_main_s"]) > 0 for r in r42)


def test_step_csv_errors_are_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from simcore.calibration.fit_host import _csv_rows, step_host_costs
    from simcore.errors import TraceError

    rows = _csv_rows(H200 / "host_steps.csv.gz")
    with pytest.raises(TraceError, match="synchronized"):
        step_host_costs([{**rows[0], "synchronized": "yes"}, *rows[1:]], "x.csv")
    with pytest.raises(TraceError, match="finite"):
        step_host_costs([{**rows[0], "step_s": "nan"}, *rows[1:]], "x.csv")
    # a distributed row without a probe is left out, not divided by
    bad = {**rows[0], "strategy": "ddp", "probe_main_s": "0", "empty_main_s": "0"}
    assert "profiled_ddp_step_fwd" not in step_host_costs([*rows, bad], "x.csv")
    # --strategy labels --steps rows only
    out = str(tmp_path / "x.csv")
    assert (
        exit_status(
            "host-trace",
            *[
                "--decode",
                str(R25 / "profile_infer_llama_L8_h3072_b4.json.gz"),
                "--strategy",
                "tp",
                "-o",
                out,
            ],
        )
        == 2
    )
    # and --prefill the --decode rows only
    assert (
        exit_status(
            "host-trace",
            *["--steps", str(R25 / "profile_train_gpt_L8_h768_item.json.gz"), "--prefill", "-o", out],
        )
        == 2
    )


def test_ddp_reducer_work_outside_the_layers_is_counted_apart() -> None:
    """The DDP rank's tail holds the copies back from the buckets and the bucket calls, which the hook
    model prices: ``hooks_s`` carries them so the wrapper's extra does not count them twice."""
    from simcore.calibration.host_trace import training_step_hosts

    ddp = training_step_hosts(analyze(read_trace(REPO / "traces/h200x2/profile_ddp_rank0.json.gz")), "ddp")
    assert ddp and all(0 < x.hooks_s < x.bhead_s + x.tail_s for x in ddp)
    single = training_step_hosts(analyze(read_trace(R25 / "profile_train_gpt_L6_h1024_b8.json.gz")))
    assert all(x.hooks_s == 0.0 and x.strategy == "single" for x in single)


def test_graph_replays_of_the_committed_traces() -> None:
    from simcore.calibration.host_trace import graph_replays

    g = graph_replays(analyze(read_trace(H200 / "profile_decode_cuda_graphs.json.gz")))
    # 2 profiled steps x 8 replays of a 4-layer decode step's graph
    assert g is not None and g.replays == 16 and g.kernels_per_replay == 65
    assert 0.1e-6 < g.gap_per_kernel_s < 2e-6 and g.span_per_replay_s > g.busy_per_replay_s
    # back-to-back replays ~4.8 us apart; each profiled step (8 replays, one synchronize) idles ~0.2 ms
    # at its ends: 33-46 us of loop before the first launch, the launch call, the wait's return
    assert 2e-6 < g.replay_gap_s < 10e-6 and g.syncs_per_step == 1
    assert g.graph_launch_s < g.step_exposed_s < 0.5e-3
    assert graph_replays(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))) is None


def test_compiled_step_hosts_and_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from simcore.calibration.host_trace import compiled_step_hosts

    p = H200 / "profile_train_gpt-125m_s1024_b8_compiled.json.gz"
    xs = compiled_step_hosts(analyze(read_trace(p)))
    assert len(xs) == 2 and all(0 < x.fwd_region_s < x.step_s and 0 < x.bwd_region_s < x.step_s for x in xs)
    assert compiled_step_hosts(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))) == []
    out = str(tmp_path / "c.csv")
    assert exit_status("host-trace", *["--compiled", str(p), "-o", out]) == 0
    assert (
        exit_status("host-trace", *["--compiled", str(H200 / "profile_train_gpt_gelu_ln.json.gz"), "-o", out])
        == 2
    )


def test_compiled_probe_is_the_compiled_regions_transpose(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A compiled trace's CPU speed: the median aten::transpose its compiled forward regions' thread
    and the autograd thread call (none in an eager trace's compiled regions: it has none); the CLI
    reads the eager probe from an eager_<name> twin beside compiled_<name>."""
    import csv
    import shutil
    import statistics

    from simcore.calibration.host_trace import compiled_op_speed, compiled_step_hosts, op_speed

    p = H200 / "profile_train_gpt-125m_s1024_b8_compiled.json.gz"
    a = analyze(read_trace(p))
    sp = compiled_op_speed(a)
    assert sp is not None and sp.backward_s is not None
    fwd_tids = {o.tid for o in a.trace.cpu_ops.values() if o.name == "CompiledFunction"}
    main_tr = [o.dur for o in a.trace.cpu_ops.values() if o.name == "aten::transpose" and o.tid in fwd_tids]
    assert sp.main_s == statistics.median(main_tr)
    eager_probe = op_speed(a)
    assert 1e-6 < sp.backward_s < 1e-5 and eager_probe is not None
    assert eager_probe.main_s is None and eager_probe.backward_s is None  # no aten::t in a compiled trace
    assert compiled_op_speed(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))) is None
    xs = compiled_step_hosts(a)
    assert all(x.probe_main_s > 0 and x.probe_bwd_s > 0 and x.eager_probe_main_s == 0 for x in xs)
    # a twin eager trace of the same (pretend) process
    shutil.copy(p, tmp_path / "compiled_gpt_L12_h768.json.gz")
    shutil.copy(
        H200 / "profile_train_gpt-125m_s1024_b8_eager.json.gz", tmp_path / "eager_gpt_L12_h768.json.gz"
    )
    out = tmp_path / "c.csv"
    assert (
        exit_status(
            "host-trace", *["--compiled", str(tmp_path / "compiled_gpt_L12_h768.json.gz"), "-o", str(out)]
        )
        == 0
    )
    rows = list(csv.DictReader(out.open()))
    # the fitted units' probe: the twin's plain median (a windowed pace is for inference predictions)
    eager = op_speed(analyze(read_trace(H200 / "profile_train_gpt-125m_s1024_b8_eager.json.gz")))
    assert eager is not None
    assert all(float(r["eager_probe_main_s"]) == pytest.approx(eager.main_s) for r in rows)


def test_hugging_face_layers_and_the_empty_probe() -> None:
    """Hugging Face's GPT-2 (Conv1D: one aten::t per pass, in the LM head) is timed by aten::empty on
    its main thread; its layers are found by their LayerNorms, Llama's by the written-out RMSNorm's
    rsqrt, and both rows say whose code they ran."""
    from simcore.calibration.host_trace import decode_step_hosts, hf_layers, training_step_hosts

    r31 = H200 / "round31"
    gpt2 = analyze(read_trace(r31 / "hf_train_gpt2_L6_b2.json.gz"))
    rows = training_step_hosts(gpt2)
    assert rows and all(r.layers == 6 and r.impl == "huggingface" for r in rows)
    assert all(r.probe_main_s == 0 and r.empty_main_s > 0 and r.probe_bwd_s > 0 for r in rows)
    llama = analyze(read_trace(r31 / "hf_train_llama_L4_h1024_b2_item.json.gz"))
    assert [r.layers for r in training_step_hosts(llama)] == [4, 4]
    dec = decode_step_hosts(analyze(read_trace(r31 / "hf_infer_llama_L8_h2048_b4.json.gz")))
    assert len(dec) == 16 and all(d.layers == 8 and d.impl == "huggingface" for d in dec)
    # tools/gpt.py's layers are not Hugging Face's
    assert not hf_layers(
        list(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz")).trace.cpu_ops.values())
    )


def test_generate_loops_and_prefill_rows() -> None:
    """transformers' generate() is told by its stopping criteria's aten::isin; --prefill keeps the
    prefill passes (seq = the prompt)."""
    from simcore.calibration.host_trace import decode_step_hosts, generate_loop

    gen = analyze(read_trace(H200 / "round34" / "hf_generate_gpt2_L12_b1.json.gz"))
    manual = analyze(read_trace(H200 / "round31" / "hf_infer_gpt2_L12_b1.json.gz"))
    assert generate_loop(list(gen.trace.cpu_ops.values()))
    assert not generate_loop(list(manual.trace.cpu_ops.values()))
    rows = decode_step_hosts(gen, prefill=True)
    assert {r.loop for r in rows} == {"generate"} and {r.seq for r in rows} == {1, 256}
    assert all(r.seq == 1 for r in decode_step_hosts(gen))


def test_generate_without_an_end_of_sequence_id() -> None:
    """A config with no end-of-sequence id gives generate() no aten::isin (round 55's Qwen2), but it still
    folds the stopping criteria into its unfinished sequences every token (unfinished & ~done)."""
    from simcore.calibration.host_trace import generate_loop

    ops = list(
        analyze(read_trace(H200 / "round55" / "hf_generate_qwen2_L8_h2048_b8.json.gz")).trace.cpu_ops.values()
    )
    names = {o.name for o in ops}
    assert "aten::isin" not in names
    assert generate_loop(ops)


def test_decode_pass_op_counts() -> None:
    """The ops a decode pass issues outside its layers and their stream launches beyond one each:
    tools/gpt.py's loop 5 (the Llama block's a copy more), transformers' GPT-2 and Llama forwards 11 and
    31, their greedy generate() 56 and 72 with aten::isin's 12 extra launches, generate() without an
    end-of-sequence id 58 + 3; a hand-written loop 7; a compiled decode's loop between its graph's
    launches 72 + 14 (Qwen2's 55 + 4). decode_pass_op_count weighs them by HostOps.pass_op_weight: the
    calibrated codes' weights are the shipped profile's host_ops.pass_ops."""
    from simcore.calibration.host_trace import decode_pass_counts, decode_pass_op_count

    ref, hf = HOST_OPS.pass_ops["reference"], HOST_OPS.pass_ops["huggingface"]
    for path, n, w in (
        ("profile_infer_prefill_decode.json.gz", (5.0, 1.0), ref["manual"]["swiglu"]),
        ("round77/profile_infer_gpt_gelu_decode.json.gz", (5.0, 0.0), ref["manual"]["gelu"]),
        ("round31/hf_infer_gpt2_L12_b1.json.gz", (11.0, 0.0), hf["manual"]["gelu"]),
        ("round31/hf_infer_llama_L8_h2048_b4.json.gz", (31.0, 0.0), hf["manual"]["swiglu"]),
        ("round34/hf_generate_gpt2_L12_b1.json.gz", (56.0, 12.0), hf["generate"]["gelu"]),
        ("round34/hf_generate_llama_L8_h2048_b4.json.gz", (72.0, 12.0), hf["generate"]["swiglu"]),
        (
            "round60/hf_infer_llama_L8_h2048_b4_eager_attn.json.gz",
            (56.0, 1.0),
            hf["manual_eager_attention"]["swiglu"],
        ),
        (
            "round85/hf_sfit_generate_llama_L12_h2048_b2_static.json.gz",
            (72.0, 14.0),
            hf["compiled_generate"]["swiglu"],
        ),
        ("round55/hf_generate_qwen2_L8_h2048_b8.json.gz", (58.0, 3.0), None),
        ("round85/hf_sfit_generate_qwen2_L4_h1536_b4_static.json.gz", (55.0, 4.0), None),
        ("round76/user_infer_llama_L8_h2048_b4_p1024.json.gz", (7.0, 0.0), None),
    ):
        a = analyze(read_trace(H200 / path))
        assert decode_pass_counts(a) == n, path
        if w is not None:
            assert decode_pass_op_count(a, HOST_OPS) == pytest.approx(w, abs=0.006), path
    # a training trace has no decode pass
    assert (
        decode_pass_op_count(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz")), HOST_OPS)
        is None
    )
    assert decode_pass_counts(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))) is None


def test_pass_op_weight() -> None:
    """Each op weighs its name's HostOps.loop_op_weights; a name not there one op plus
    HostOps.extra_launch_ops a launch beyond its first (tables empty: each op one)."""
    from simcore.specs.profile import HostOps

    w = HOST_OPS.loop_op_weights
    assert HOST_OPS.pass_op_weight([]) == 0.0
    assert HOST_OPS.pass_op_weight([("aten::isin", 4), ("aten::view", 0)]) == pytest.approx(
        w["aten::isin"] + w["aten::view"]
    )
    assert HOST_OPS.pass_op_weight([("my::op", 0), ("my::op", 10)]) == pytest.approx(
        2.0 + 10 * HOST_OPS.extra_launch_ops
    )
    assert HostOps().pass_op_weight([("aten::isin", 4), ("my::op", 10)]) == 2.0


def test_loop_op_weights_reproduced() -> None:
    """The shipped loop_op_weights are what host_trace.fit_loop_op_weights gives on traces/h200/round80's decode
    loops: views cost a fraction of a typical op, the stopping test's aten::isin and aten::where several, a
    sampler's sort, top-k and multinomial over ten."""
    from simcore.calibration.host_trace import fit_loop_op_weights

    w = HOST_OPS.loop_op_weights
    ans = [analyze(read_trace(p)) for p in sorted((H200 / "round80").glob("*.json.gz"))]
    assert fit_loop_op_weights(ans) == w
    assert w["aten::view"] < 0.5 < 1.0 < w["aten::where"] < w["aten::isin"]
    assert min(w[k] for k in ("aten::sort", "aten::topk", "aten::multinomial")) > 10.0


def test_layer_op_weights_reproduced() -> None:
    """The shipped layer_op_weights are what host_trace.fit_layer_op_weights gives on traces/h200/round104's
    transformers fit steps (in aten::t units): views cost a fraction of a one-kernel op, the forward's linear (cast +
    GEMM) and SDPA several; an op not in the table is priced by its launches (HostOps.layer_op_weight)."""
    from simcore.calibration.host_trace import fit_layer_op_weights

    layer_op_weight = HOST_OPS.layer_op_weight
    ans = [analyze(read_trace(REPO / p)) for p in LAYER_WEIGHT_FIT_TRACES]
    assert fit_layer_op_weights(ans) == HOST_OPS.layer_op_weights
    # calibrate fits them from such traces (fit_host_ops); no decode loop among them: the loop weights are kept
    from simcore.calibration.calibrate import fit_host_ops

    ops, notes = fit_host_ops(ans, HOST_OPS.model_copy(update={"layer_op_weights": {}}))
    assert ops == HOST_OPS and notes[0] == "host_ops.layer_op_weights fitted on 8 profiled trace(s)"
    w = HOST_OPS.layer_op_weights
    assert w["aten::view"] < w["aten::mul"] < w["aten::linear"] < w["aten::scaled_dot_product_attention"]
    assert w["ViewBackward0"] < w["MulBackward0"] < w["MmBackward0"]
    node = "autograd::engine::evaluate_function: "
    assert layer_op_weight([("aten::view", 0), (node + "MmBackward0", 2)]) == pytest.approx(
        w["aten::view"] + w["MmBackward0"]
    )
    assert layer_op_weight([("my::op", 1), (node + "MyBackward0", 0)]) == pytest.approx(
        w["class|1"] + w["node|0"]
    )


def test_extra_launch_weight_reproduced() -> None:
    """The shipped extra_launch_ops is what host_trace.fit_extra_launch_ops gives on traces/h200/round80's loops
    (each sampler beside greedy on the same model); with it the host outside a pass's layers is within
    ~7 % RMS of each code's per-op cost, counting ops alone it misses by over twice that; one trace of a
    code alone cannot fit it."""
    from simcore.calibration.host_trace import fit_extra_launch_ops

    ans = [analyze(read_trace(p)) for p in sorted((H200 / "round80").glob("*.json.gz"))]
    assert len(ans) == 16
    w, rms, rms0 = fit_extra_launch_ops(ans)
    assert w == HOST_OPS.extra_launch_ops
    # calibrate fits both from such traces (fit_host_ops) and keeps the rest of the tables it starts from
    from simcore.calibration.calibrate import fit_host_ops

    start = HOST_OPS.model_copy(update={"loop_op_weights": {}, "extra_launch_ops": 0.0})
    ops, notes = fit_host_ops(ans, start)
    assert ops == HOST_OPS
    assert "host_ops.loop_op_weights fitted on 16 profiled trace(s)" in notes
    assert any(n.startswith("host_ops: layer_ops, hf_layer_ops") and "kept" in n for n in notes)
    assert rms < 0.08 and rms0 > 2.0 * rms
    with pytest.raises(ValueError, match="two or more traces of one code"):
        fit_extra_launch_ops(ans[:1])
