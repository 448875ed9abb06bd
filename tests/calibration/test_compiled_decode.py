"""Static-cache ``generate()`` traces (rounds 84-86): decode passes replayed from CUDA graphs of
torch.compile's fused kernels beside an eager prefill (``runtime.compiled_decode``)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
import yaml

from simcore.calibration.fit_host import compiled_decode_costs
from simcore.calibration.host_trace import compiled_decode_calls
from simcore.errors import TraceError
from simcore.specs.profile import HostOps, load_profile
from simcore.specs.registry import builtin_dir, default_registry
from simcore.traces import read_trace
from simcore.traces.classify import analyze, class_of
from simcore.validation.traces import compiled_decode_graphs, inference_composition, validate
from tests.cli_runner import exit_status

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "traces" / "h200"
STATIC = H200 / "round84" / "hf_generate_llama_L8_h2048_b4_static.json.gz"
CSV = H200 / "host_compiled_decode.csv.gz"


def _rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt") as f:
        return list(csv.DictReader(f))


def test_inductor_kernels_named_after_sdpa_or_a_gemm_are_neither() -> None:
    # inductor's pointwise kernel that prepares SDPA's inputs, and one fused after a matmul's output
    assert (
        class_of("triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_0", "kernel", "")[0]
        == "elementwise"
    )
    assert class_of("triton_red_fused_mm_sum_3", "kernel", "")[0] == "elementwise"
    # the attention kernel itself, replayed from a graph without an op
    assert (
        class_of("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16", "kernel", "")[0] == "attention"
    )


def test_static_cache_generate_is_one_prefill_and_its_decode_replays() -> None:
    a = analyze(read_trace(STATIC))
    assert compiled_decode_graphs([a])
    # 16 new tokens: the eager prefill makes the first, 15 graph replays of the decode forward the rest
    assert inference_composition(a, 8) == (1.0, 15.0)
    # an eager static cache and tools/gpt.py's captured eager decode are not compiled decode passes
    eager = analyze(read_trace(H200 / "round84" / "hf_generate_llama_L8_h2048_b4_static_eager.json.gz"))
    graphs = analyze(read_trace(H200 / "profile_decode_cuda_graphs.json.gz"))
    assert not compiled_decode_graphs([eager]) and not compiled_decode_graphs([graphs])


def test_validate_reads_the_compiled_decode() -> None:
    rep = validate(
        [str(STATIC)],
        REPO / "tests" / "data" / "trace_scenarios" / "h200_r84_generate_llama_l8_h2048_b4_static.yaml",
    )
    notes = " ".join(rep.notes)
    assert "runtime.compiled_decode: true" in notes and "1 prefill + 15 decode steps" in notes
    # the decode passes are host-bound: the GPU idles most of the step, measured and predicted
    idle = {c["class"]: c for c in rep.to_dict()["classes"]}["idle"]
    assert (
        idle["measured_s"] > 0.5 * rep.measured_step_time_s
        and idle["predicted_s"] > 0.5 * rep.predicted_step_time_s
    )
    # the step's phases: one prefill and 15 decode steps, host-bound both: each phase takes its host
    ph = rep.to_dict()["phases"]
    assert (ph["prefills"], ph["decode_steps"]) == (1.0, 15.0)
    assert ph["decode_step_s"] == pytest.approx(ph["decode_host_s"]) and ph["prefill_host_s"] > 0
    assert ph["prefill_s"] == pytest.approx(ph["prefill_host_s"])
    # the loop waits for every token: the step is its phases back to back
    assert ph["overlap_saved_s"] == 0.0
    assert rep.predicted_step_time_s == pytest.approx(ph["prefill_s"] + 15 * ph["decode_step_s"])


def test_compiled_decode_calls_reproduce_the_committed_csv(tmp_path: Path) -> None:
    rows = _rows(CSV)
    traces = [REPO / r["trace"] for r in rows]
    # round 85's four host-bound fit traces, round 96's three GPU-bound ones, round 100's eight host-bound, round
    # 106's eight that wait 0.8-2.8 ms
    assert len(traces) == 23 and sum("round100/" in str(t) for t in traces) == 8
    assert sum("round106/" in str(t) for t in traces) == 8
    for r, t in zip(rows, traces, strict=True):
        c = compiled_decode_calls(analyze(read_trace(t)))
        assert c is not None and c.calls == int(r["calls"])
        assert c.kernels_per_replay == pytest.approx(float(r["kernels_per_replay"]))
        assert c.call_s == pytest.approx(float(r["call_s"]), rel=1e-5)
        assert c.lead_s == pytest.approx(float(r["lead_s"]), rel=1e-5)
        assert c.wait_s == pytest.approx(float(r["wait_s"]), rel=1e-5)
        assert c.act == r["act"] and c.prefill_layer_s == pytest.approx(float(r["prefill_layer_s"]), rel=1e-5)
        assert c.prefill_outside_s == pytest.approx(float(r["prefill_outside_s"]), rel=1e-5, abs=1e-9)
        assert c.pass_weight == pytest.approx(float(r["pass_weight"]), rel=1e-5)
    out = tmp_path / "cd.csv"
    assert exit_status("host-trace", *["--compiled-decode", str(traces[0]), "-o", str(out)]) == 0
    assert out.read_text().startswith("trace,calls,kernels_per_replay,call_s")
    # a trace without compiled decode calls: one line, exit 2
    assert (
        exit_status(
            "host-trace",
            *["--compiled-decode", str(H200 / "profile_train_gpt_gelu_ln.json.gz"), "-o", str(out)],
        )
        == 2
    )
    assert compiled_decode_calls(analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))) is None


def test_compiled_call_fit_is_the_shipped_profiles() -> None:
    prof = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())
    shipped, host_ops = prof["host_layer"], HostOps.model_validate(prof["host_ops"])
    fit = compiled_decode_costs(_rows(CSV), CSV, shipped, host_ops)
    for k in ("compiled_decode_call_fixed", "compiled_decode_call_per_kernel"):
        assert fit[k] == pytest.approx(shipped[k], rel=1e-4)
        assert fit[f"profiled_{k}"] == fit[k]
    # the eager prefill beside a compiled decode: its layers cost 6-23 % more host than a plain eager
    # run's at the same aten::linear pace (round 85's four traces; the median is the shipped ratio)
    assert fit["compiled_decode_prefill_layer_ratio"] == pytest.approx(
        shipped["compiled_decode_prefill_layer_ratio"], rel=1e-6
    )
    assert 1.05 < fit["compiled_decode_prefill_layer_ratio"] < 1.25
    # and its ops outside the layers (embedding, final norm, LM head, the loop on its token) 1.0-1.5x the
    # generate() entry at the pass's weight (rounds 85 and 100; the median is the shipped ratio)
    assert fit["compiled_decode_prefill_fixed_ratio"] == pytest.approx(
        shipped["compiled_decode_prefill_fixed_ratio"], rel=1e-6
    )
    assert 1.1 < fit["compiled_decode_prefill_fixed_ratio"] < 1.5
    # it is stated against the calibrated passes' weights: without the host op tables, not fitted
    assert "compiled_decode_prefill_fixed_ratio" not in compiled_decode_costs(_rows(CSV), CSV, shipped)
    rows = _rows(CSV)
    assert all(r["act"] == "swiglu" and float(r["prefill_layer_s"]) > 0 for r in rows)
    # rows written before the prefill column (no act, no layer time) fit the call alone
    old = [{k: v for k, v in r.items() if k not in ("act", "prefill_layer_s")} for r in rows]
    assert "compiled_decode_prefill_layer_ratio" not in compiled_decode_costs(old, CSV, shipped)
    # a call of more kernels costs more: the line has a positive slope, and the 4 fit traces span it
    assert fit["compiled_decode_call_per_kernel"] > 0 and fit["compiled_decode_call_fixed"] > 0
    with pytest.raises(TraceError):
        compiled_decode_costs(_rows(CSV)[:1], CSV, shipped)
    with pytest.raises(TraceError):
        compiled_decode_costs(_rows(CSV), CSV, {})


def test_compiled_decode_pass_prices_no_layer_host_and_fused_kernels() -> None:
    from simcore.prediction import predict
    from simcore.specs.resolve import load_scenario

    path = str(
        REPO / "tests" / "data" / "trace_scenarios" / "h200_r84_generate_llama_l8_h2048_b4_static.yaml"
    )
    base = ["runtime.profiler=true", "runtime.implementation=huggingface", "runtime.decode_loop=generate"]
    eager = predict(load_scenario(path, base)).model_dump()
    comp = predict(load_scenario(path, [*base, "runtime.compiled_decode=true"])).model_dump()
    deep = predict(
        load_scenario(path, [*base, "runtime.compiled_decode=true", "model.layers=16"])
    ).model_dump()
    # the prefill is the same eager one but for generate()'s call (a static cache's is reset each call)
    # and its layers' host, at the compiled-decode run's ratio; a compiled pass has fewer kernels and less
    # host than an eager one
    hl = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    reset = hl["profiled_hf_compiled_decode_generate_call"] - hl["profiled_hf_infer_generate_call"]
    layers = 8 * hl["profiled_hf_infer_prefill_swiglu"] * (hl["compiled_decode_prefill_layer_ratio"] - 1.0)
    outside = hl["profiled_hf_infer_generate_fixed_swiglu"] * (
        hl["compiled_decode_prefill_fixed_ratio"] - 1.0
    )
    assert comp["prefill_host_s"] == pytest.approx(eager["prefill_host_s"] + reset + layers + outside)
    assert comp["prefill_time_s"] > eager["prefill_time_s"]
    assert comp["decode_kernels"] < eager["decode_kernels"]
    assert 0 < comp["decode_host_s"] < eager["decode_host_s"]
    # its host grows only through the compiled call's kernels (the layers run inside the graph): 8 more
    # layers add their graph kernels at the profile's per-kernel cost (the calibration CPU's speed)
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    extra = deep["decode_host_s"] - comp["decode_host_s"]
    dk = deep["decode_kernels"] - comp["decode_kernels"]
    assert dk > 0 and extra == pytest.approx(
        dk * shipped["profiled_compiled_decode_call_per_kernel"], rel=1e-6
    )


def test_generate_call_rows_and_fit_reproduce_the_shipped_profile(tmp_path: Path) -> None:
    from simcore.calibration.fit_host import generate_call_costs
    from simcore.calibration.host_trace import generate_call

    path = H200 / "host_generate_call.csv.gz"
    rows = _rows(path)
    assert len(rows) == 20 and sum(r["compiled_decode"] == "True" for r in rows) == 12
    for r in rows[:2] + rows[-2:]:
        g = generate_call(analyze(read_trace(REPO / r["trace"])))
        assert g is not None and g.setup_s == pytest.approx(float(r["setup_s"]), rel=1e-5)
        assert str(g.compiled_decode) == r["compiled_decode"]
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    fit = generate_call_costs(rows, path, shipped)
    for k in ("hf_infer_generate_call", "hf_compiled_decode_generate_call"):
        assert fit[k] == pytest.approx(shipped[k], rel=1e-6) and fit[f"profiled_{k}"] == fit[k]
    # a static cache's call also resets the cache: it costs more than a dynamic one's, both 1.5-3 ms
    assert 1.5e-3 < fit["hf_infer_generate_call"] < fit["hf_compiled_decode_generate_call"] < 3e-3
    # a decode loop of forward passes is no generate() call: one line, exit 2
    loop = H200 / "round84" / "hf_infer_llama_L8_h2048_b8_p256.json.gz"
    assert generate_call(analyze(read_trace(loop))) is None
    assert exit_status("host-trace", *["--generate", str(loop), "-o", str(tmp_path / "g.csv")]) == 2
    with pytest.raises(TraceError):
        generate_call_costs(rows, path, {})


def test_generate_call_is_priced_once_before_the_prefill() -> None:
    from simcore.prediction import predict
    from simcore.specs.resolve import load_scenario

    path = str(
        REPO / "tests" / "data" / "trace_scenarios" / "h200_r84_generate_llama_l8_h2048_b4_static.yaml"
    )
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    base = ["runtime.profiler=true", "runtime.implementation=huggingface"]
    gen = predict(load_scenario(path, [*base, "runtime.decode_loop=generate"])).model_dump()
    loop = predict(load_scenario(path, [*base, "runtime.decode_loop=manual"])).model_dump()
    comp = predict(
        load_scenario(path, [*base, "runtime.decode_loop=generate", "runtime.compiled_decode=true"])
    )
    # serial before any kernel: the prefill takes it whole even where its GPU time exceeds its host
    assert gen["breakdown_prefill"]["host_overhead"] >= shipped["profiled_hf_infer_generate_call"]
    assert loop["breakdown_prefill"].get("host_overhead", 0.0) < gen["breakdown_prefill"]["host_overhead"]
    assert (
        comp.model_dump()["breakdown_prefill"]["host_overhead"]
        >= shipped["profiled_hf_compiled_decode_generate_call"]
    )
    # the decode passes do not pay it
    assert gen["decode_host_s"] == pytest.approx(
        predict(load_scenario(path, [*base, "runtime.decode_loop=generate"])).model_dump()["decode_host_s"]
    )


def test_a_step_that_recorded_a_graph_is_left_out_of_the_measured_steps() -> None:
    from simcore.calibration.host_trace import graph_capture_steps
    from simcore.validation.traces import validate

    # round 86's 16-layer Llama re-recorded its decode graph in its second profiled step (a 20.7 ms
    # compiled region: cudaGraphInstantiateWithFlags, a device sync): a one-off, not a steady step
    path = H200 / "round86" / "hf_generate_llama_L16_h2048_b1_static.json.gz"
    a = analyze(read_trace(path))
    assert len(a.steps) == 2 and graph_capture_steps(a) == [1]
    steady = a.without_steps({1})
    assert [s.name for s in steady.steps] == [a.steps[0].name]
    assert steady.step_time_s == a.steps[0].time_s < a.steps[1].time_s
    # the dropped step's kernels belong to no step; the kept one's keep theirs
    assert {k.step for k in steady.kernels} <= {-1, 0}
    assert sum(k.step == 0 for k in steady.kernels) == sum(k.step == 0 for k in a.kernels)
    assert all(k.step == 0 for k in steady.steps[0].kernels)
    scen = REPO / "tests" / "data" / "trace_scenarios" / "h200_r86_generate_llama_l16_h2048_b1_static.yaml"
    rep = validate([str(path)], scen, analyses=[a])
    assert rep.measured_step_time_s == pytest.approx(a.steps[0].time_s)
    assert rep.step_times_s == [a.steps[0].time_s]
    assert any("step 1 of the trace captured a CUDA graph" in n for n in rep.notes)
    # a trace whose every step (or none) captured one keeps them all
    assert (
        graph_capture_steps(
            analyze(read_trace(H200 / "round86" / "hf_generate_mistral_L8_h4096_b2_static.json.gz"))
        )
        == []
    )


def test_decode_passes_take_their_own_cpu_pace() -> None:
    from simcore.prediction import predict
    from simcore.specs.resolve import load_scenario

    path = str(
        REPO / "tests" / "data" / "trace_scenarios" / "h200_r84_generate_llama_l8_h2048_b4_static.yaml"
    )
    base = [
        "runtime.profiler=true",
        "runtime.implementation=huggingface",
        "runtime.decode_loop=generate",
        "runtime.compiled_decode=true",
        "runtime.cpu_op_time.main=4e-6",
    ]
    same = predict(load_scenario(path, base)).model_dump()
    slow = predict(load_scenario(path, [*base, "runtime.cpu_op_time.decode=8e-6"])).model_dump()
    # the prefill's host is the main pace's; the decode pass's host doubles with its own pace's
    assert slow["prefill_host_s"] == pytest.approx(same["prefill_host_s"])
    assert slow["decode_host_s"] == pytest.approx(2.0 * same["decode_host_s"])
    assert slow["decode_step_time_s"] > same["decode_step_time_s"]
    # a pace of the decode equal to the main one is no pace of its own
    eq = predict(load_scenario(path, [*base, "runtime.cpu_op_time.decode=4e-6"])).model_dump()
    assert eq["decode_host_s"] == pytest.approx(same["decode_host_s"])


def test_a_gpu_bound_compiled_decode_exposes_the_host_before_its_launch() -> None:
    """Round 91: at batch 512 the decode graph outlasts the host, and each step the GPU idles from the
    loop's wait for its tokens to the next graph's first kernel: the loop's ops before the compiled call,
    the call and the launch, a line over the graph's kernels fitted on rounds 96's and 106's GPU-bound traces (the
    rows whose host waits longer than it leads; round 85's and 100's host-bound ones fit the call)."""
    from simcore.prediction import predict
    from simcore.specs.resolve import load_scenario

    rows = _rows(CSV)
    assert all(float(r["lead_s"]) > float(r["call_s"]) > 0 for r in rows)
    bound = [r for r in rows if float(r["wait_s"]) > float(r["lead_s"])]
    # round 96's three and six of round 106's (its two at batch 96 wait about as long as they lead: neither)
    assert len(bound) == 9 and sum("round96" in r["trace"] for r in bound) == 3
    balanced = [r for r in rows if r not in bound and float(r["wait_s"]) > 0.5 * float(r["lead_s"])]
    assert len(balanced) == 2 and all("round106" in r["trace"] for r in balanced)
    # the host-bound rows wait microseconds (round 100's Qwen2 L6 0.15 ms), the GPU-bound ones milliseconds
    assert all(float(r["wait_s"]) < 0.2 * float(r["lead_s"]) for r in rows if r not in bound + balanced)
    assert all(float(r["wait_s"]) > 1e-3 for r in bound)
    hl = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    fit = compiled_decode_costs(rows, CSV, hl)
    for k in ("compiled_decode_lead_fixed", "compiled_decode_lead_per_kernel"):
        assert fit[k] == pytest.approx(hl[k], rel=1e-6)
    assert 2e-4 < hl["compiled_decode_lead_fixed"] < 2e-3
    # the call from the host-bound rows alone: the GPU-bound and balanced rows leave it as it was
    alone = compiled_decode_costs([r for r in rows if r not in bound + balanced], CSV, hl)
    assert alone["compiled_decode_call_fixed"] == fit["compiled_decode_call_fixed"]
    # without GPU-bound rows the lead comes from the host-bound ones
    assert alone["compiled_decode_lead_fixed"] != fit["compiled_decode_lead_fixed"]
    path = str(
        REPO / "tests" / "data" / "trace_scenarios" / "h200_r91_generate_llama_l8_h4096_b512_static.yaml"
    )
    base = [
        "runtime.profiler=true",
        "runtime.implementation=huggingface",
        "runtime.decode_loop=generate",
        "runtime.compiled_decode=true",
    ]
    r = predict(load_scenario(path, base)).model_dump()
    dec = r["breakdown_decode"]
    gpu = sum(v for k, v in dec.items() if k != "host_overhead")
    exposed = (
        hl["profiled_compiled_decode_lead_fixed"]
        + hl["profiled_compiled_decode_lead_per_kernel"] * r["decode_kernels"]
    )
    assert gpu > r["decode_host_s"]  # GPU-bound
    assert dec["host_overhead"] == pytest.approx(exposed)
    assert r["decode_step_time_s"] == pytest.approx(gpu + exposed)
    # a loop that never waits hides it
    free = predict(load_scenario(path, [*base, "runtime.decode_sync_every=null"])).model_dump()
    assert free["breakdown_decode"]["host_overhead"] == 0.0


def test_a_static_cache_decode_walks_every_slot_with_its_heads_repeated() -> None:
    """transformers' static cache passes SDPA a mask over every slot (prompt + new tokens) and the keys
    and values repeated to every query head: one repeat_kv copy each a layer, and the attention over the
    expanded heads, masked."""
    from simcore.specs.scenario import ModelSpec
    from simcore.workload import lowering as L

    m = ModelSpec(layers=2, hidden=2048, heads=16, kv_heads=4, ffn_hidden=5632, vocab=32000, seq_len=2048,
                  activation="swiglu", norm="rmsnorm")  # fmt: skip
    extra = {"kv_cache": True, "kv_elt": 2.0, "fused": True, "implementation": "huggingface", "attention_backend": "cudnn",
             "kv_seq": 300.0}  # fmt: skip
    plain = L.Layout(micro_batch=8.0, seq=1.0, tp=1, dtype="bf16", act_bytes=2.0, **extra)
    static = L.Layout(micro_batch=8.0, seq=1.0, tp=1, dtype="bf16", act_bytes=2.0,
                      static_cache=272.0, **extra)  # fmt: skip
    att = {lay.static_cache: next(o for o in L.attention_block_fwd(m, lay) if o.kind == "attention").args
           for lay in (plain, static)}  # fmt: skip
    assert att[None]["kv_heads"] == 4 and att[None]["kv_seq"] == 300.0 and not att[None]["mask"]
    assert att[272.0]["kv_heads"] == 16 and att[272.0]["kv_seq"] == 272.0 and att[272.0]["mask"]
    copies = [o for o in L.attention_block_fwd(m, static) if o.category == "elementwise" and o.count == 2.0]
    assert len(copies) == 1 and copies[0].name == "copy"
    # each reads the 4 cached heads and writes 16: 8 x 16 x 272 x 128 elements of 2 bytes, x 1.25
    assert copies[0].args["nbytes"] == pytest.approx(8 * 16 * 272 * 128 * 2 * 1.25)


def test_a_static_cache_decode_graph_runs_transformers_separate_projections() -> None:
    """Inside a compiled static-cache decode graph (round 97's: 17 kernels a Llama layer) the q / k / v and
    gate / up projections are transformers' separate GEMMs, and the queries' rotary embedding and the
    mask two more kernels before SDPA; the same model elsewhere prices each group as one GEMM."""
    from simcore.specs.scenario import ModelSpec
    from simcore.workload import lowering as L

    m = ModelSpec(layers=2, hidden=2048, heads=16, kv_heads=4, ffn_hidden=5632, vocab=32000, seq_len=2048,
                  activation="swiglu", norm="rmsnorm")  # fmt: skip
    extra = {"kv_cache": True, "kv_elt": 2.0, "fused": True, "implementation": "huggingface", "attention_backend": "cudnn",
             "kv_seq": 48.0}  # fmt: skip
    plain = L.Layout(micro_batch=8.0, seq=1.0, tp=1, dtype="bf16", act_bytes=2.0, **extra)
    static = L.Layout(micro_batch=8.0, seq=1.0, tp=1, dtype="bf16", act_bytes=2.0,
                      static_cache=47.0, **extra)  # fmt: skip

    def kernels(lay: L.Layout) -> float:
        return sum(float(o.count) for o in L.layer_fwd(m, lay, False) if o.kind != "comm")

    def gemms(lay: L.Layout) -> list[tuple[str, float]]:
        return [(o.name, float(o.args["n"])) for o in L.layer_fwd(m, lay, False) if o.kind == "gemm"]

    # (elsewhere inductor's one fused rotary kernel on the queries and keys, lowering.rotary_ops)
    assert kernels(static) == 17.0 and kernels(plain) == 11.0
    assert gemms(static)[:3] == [("q_proj", 2048.0), ("k_proj", 512.0), ("v_proj", 512.0)]
    assert ("gate_proj", 5632.0) in gemms(static) and ("up_proj", 5632.0) in gemms(static)
    assert gemms(plain)[0] == ("qkv", 3072.0) and ("mlp_in", 2 * 5632.0) in gemms(plain)
    # the same FLOPs either way
    flops = {lay.static_cache: sum(2 * 8 * n * 2048 for nm, n in gemms(lay) if nm != "mlp_out" and nm != "attn_out")
             for lay in (plain, static)}  # fmt: skip
    assert flops[None] == flops[47.0]
    # GPT-2 (one c_attn GEMM) keeps its fused projection
    g = m.model_copy(update={"activation": "gelu", "norm": "layernorm", "kv_heads": 16})
    assert [o.name for o in L.layer_fwd(g, static, False) if o.kind == "gemm"][0] == "qkv"


def test_cudnn_one_query_masked_attention_is_its_own_kernel_family() -> None:
    """Round 92: cuDNN's one-query call over a masked cache with the heads repeated (transformers' static
    cache) runs an sm80 kernel of 64 x 64 tiles, fitted on its own; other calls keep the cuDNN fit."""
    import numpy as np

    from simcore.compute import ops as O
    from simcore.specs.profile import ONE_QUERY_ATTENTION, load_profile
    from simcore.specs.registry import default_registry

    dev = default_registry().device("h200")
    prof = load_profile(dev)
    one = prof.attention[ONE_QUERY_ATTENTION]
    assert (one.block_rows, one.block_cols) == (64, 64)
    rows = _rows(H200 / "round92" / "attention_masked_decode.csv.gz")
    assert rows and all(
        r["seq"] == "1" and r["kv_heads"] == r["heads"] and r["name"] == "sdpa_cudnn_mask" for r in rows
    )
    errs = []
    for r in rows:
        if r["framework"] != "eager":
            continue
        b, h, kv, d = (int(float(r[k])) for k in ("batch", "heads", "kv_seq", "head_dim"))
        c = O.attention(
            dev, prof, b, h, 1, d, causal=False, kv_heads=h, kv_seq=kv, backend="cudnn", mask=True
        )
        errs.append(float(c.time_s) / float(r["time_s"]) - 1.0)
    assert float(np.median(np.abs(errs))) < 0.15
    # selected per element: masked one-query calls over repeated heads only
    b = np.array([512.0, 512.0, 512.0])
    kvh = np.array([32.0, 8.0, 32.0])
    mask = np.array([1.0, 1.0, 0.0])
    both = O.attention(
        dev, prof, b, 32, 1, 128, causal=False, kv_heads=kvh, kv_seq=48, backend="cudnn", mask=mask
    )
    for i in range(3):
        single = O.attention(dev, prof, 512, 32, 1, 128, causal=False, kv_heads=kvh[i], kv_seq=48, backend="cudnn",
                             mask=bool(mask[i]))  # fmt: skip
        assert float(both.time_s[i]) == pytest.approx(float(single.time_s))
    plain = prof.model_copy(
        update={"attention": {k: v for k, v in prof.attention.items() if k != ONE_QUERY_ATTENTION}}
    )
    assert float(O.attention(dev, prof, 512, 32, 1, 128, causal=False, kv_heads=32, kv_seq=48, backend="cudnn",
                             mask=True).time_s) > float(O.attention(dev, plain, 512, 32, 1, 128, causal=False,
                                                                    kv_heads=32, kv_seq=48, backend="cudnn",
                                                                    mask=True).time_s)  # fmt: skip
    # the grouped call and the flash backend are untouched
    g = O.attention(
        dev, prof, 512, 32, 1, 128, causal=False, kv_heads=8, kv_seq=48, backend="cudnn", mask=True
    )
    g0 = O.attention(
        dev, plain, 512, 32, 1, 128, causal=False, kv_heads=8, kv_seq=48, backend="cudnn", mask=True
    )
    assert float(g.time_s) == float(g0.time_s)


def test_cudnn_one_query_over_an_odd_slot_count_is_its_own_family() -> None:
    """Round 96: the one-query kernel over an odd number of slots (transformers' static cache holds
    ``max_length - 1``) walks them about twice up to ~128 and a fixed extra beyond: 512 sequences x 32 heads
    over 47 slots measured 390 us against 262 at 48 (round 95's captured inputs)."""
    import numpy as np

    from simcore.compute import ops as O
    from simcore.specs.profile import (
        ONE_QUERY_ATTENTION,
        ONE_QUERY_ODD_ATTENTION,
        load_profile,
        one_query_family,
    )
    from simcore.specs.registry import default_registry

    assert list(one_query_family([47, 48, 31.0, 1040])) == [
        ONE_QUERY_ODD_ATTENTION, ONE_QUERY_ATTENTION, ONE_QUERY_ODD_ATTENTION, ONE_QUERY_ATTENTION
    ]  # fmt: skip
    dev = default_registry().device("h200")
    prof = load_profile(dev)
    assert prof.attention[ONE_QUERY_ODD_ATTENTION].odd_cols is not None
    assert prof.attention[ONE_QUERY_ATTENTION].odd_cols is None

    def t(kv: object, p: object = prof) -> np.ndarray:
        return np.asarray(O.attention(dev, p, 512, 32, 1, 128, causal=False, kv_heads=32, kv_seq=kv, backend="cudnn",
                                      mask=True).time_s)  # fmt: skip

    odd, even = float(t(47)), float(t(48))
    assert odd == pytest.approx(390e-6, rel=0.15) and even == pytest.approx(262e-6, rel=0.15)
    assert odd > 1.2 * even
    # elementwise over the slot counts, and more slots never cheaper within a parity
    both = t(np.array([47.0, 48.0]))
    assert both == pytest.approx([odd, even])
    assert np.all(np.diff(t(np.arange(31.0, 1040.0, 32.0))) >= 0) and np.all(
        np.diff(t(np.arange(32.0, 1040.0, 32.0))) >= 0
    )
    # a profile without the odd entry prices odd counts with the even family
    plain = prof.model_copy(
        update={"attention": {k: v for k, v in prof.attention.items() if k != ONE_QUERY_ODD_ATTENTION}}
    )
    assert float(t(47, plain)) < odd
    # the held-out odd rows of round 96 (fitted on the others): median |error| within 15 %
    rows = [r for r in _rows(H200 / "round96" / "attention_kvlen.csv.gz") if r["framework"] == "eager"]
    errs = [
        float(O.attention(dev, prof, int(float(r["batch"])), int(float(r["heads"])), 1, int(float(r["head_dim"])),
                          causal=False, kv_heads=int(float(r["kv_heads"])), kv_seq=int(float(r["kv_seq"])),
                          backend="cudnn", mask=True).time_s) / float(r["time_s"]) - 1.0
        for r in rows if int(float(r["kv_seq"])) % 2 == 1
    ]  # fmt: skip
    assert len(errs) > 20 and float(np.median(np.abs(errs))) < 0.15


def test_a_static_cache_holds_max_length_minus_one_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' static cache of a ``generate()`` holds ``max_length - 1`` slots (the last new token is
    never fed back): a compiled decode's attention walks prompt + output - 1 of them (round 95's SDPA inputs)."""
    from simcore.engine import inference as I
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import load_scenario, resolve_cluster

    sc = load_scenario(
        str(REPO / "tests/data/trace_scenarios/h200_r91_generate_llama_l8_h4096_b512_static.yaml")
    )
    assert sc.inference is not None
    seen: list[float] = []
    real = I.L.Layout

    def spy(*a: object, **k: object) -> object:
        lay = real(*a, **k)  # type: ignore[arg-type]
        if lay.static_cache is not None:
            seen.append(lay.static_cache)
        return lay

    monkeypatch.setattr(I.L, "Layout", spy)
    I.evaluate(sc.model, sc.inference, resolve_cluster(sc.cluster, default_registry()), framework="cuda_graphs",
               attention_backend="cudnn", compiled_decode=True)  # fmt: skip
    assert seen and set(seen) == {float(sc.inference.prompt_len + sc.inference.output_len - 1)} == {47.0}


RFIT = H200 / "round96"


def test_graph_records_of_a_trace_that_re_records_its_decode_graph(tmp_path: Path) -> None:
    """Round 96: a large-batch compiled generate() records its decode graph again; the recording region's
    GPU idle beyond a steady call is the record's cost."""
    from simcore.calibration.host_trace import graph_records, graph_records_per_step

    a = analyze(read_trace(RFIT / "hf_rfit_generate_llama_L4_h4096_b512_static.json.gz"))
    # the first profiled call records, the second does not
    assert graph_records_per_step(a) == [1, 0]
    gr = graph_records(a)
    assert gr is not None and gr.records == 1 and gr.kernels_per_replay == 75
    # a 16.8 ms region, 4.1 ms of it the GPU busy, less the steady 0.76 ms call
    assert 11e-3 < gr.record_s < 13e-3 and gr.record_s < 16.9e-3 - 4.0e-3 - gr.call_s + 1e-4
    # a trace without compiled decode calls: no row, and the CLI says so
    out = tmp_path / "gr.csv"
    assert (
        exit_status(
            "host-trace",
            *["--graph-records", str(H200 / "profile_train_gpt_gelu_ln.json.gz"), "-o", str(out)],
        )
        == 2
    )
    assert (
        exit_status(
            "host-trace",
            *[
                "--graph-records",
                str(RFIT / "hf_rfit_generate_llama_L4_h4096_b512_static.json.gz"),
                "-o",
                str(out),
            ],
        )
        == 0
    )
    assert _rows_plain(out)[0]["records"] == "1"


def _rows_plain(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_graph_record_fit_hand_computed_and_shipped() -> None:
    from simcore.calibration.fit_host import graph_record_costs

    ref = {"probe_infer": 4e-6, "probe_empty_ratio_infer": 0.5}  # the reference aten::empty: 2 us
    rows = [
        # at the reference pace 10 ms + 20 us a kernel; the second trace's CPU twice as slow
        {"records": "1", "kernels_per_replay": "100", "record_s": "0.012", "empty_main_s": "2e-6"},
        {"records": "2", "kernels_per_replay": "200", "record_s": "0.028", "empty_main_s": "4e-6"},
        {"records": "0", "kernels_per_replay": "300", "record_s": "0", "empty_main_s": "2e-6"},
    ]
    fit = graph_record_costs(rows, "x.csv", ref)
    assert fit["compiled_decode_record_fixed"] == pytest.approx(0.010)
    assert fit["compiled_decode_record_per_kernel"] == pytest.approx(20e-6)
    assert fit["profiled_compiled_decode_record_fixed"] == fit["compiled_decode_record_fixed"]
    with pytest.raises(TraceError, match="two traces"):
        graph_record_costs(rows[:1], "x.csv", ref)
    with pytest.raises(TraceError, match="probe"):
        graph_record_costs(rows, "x.csv", {})
    csv_path = H200 / "host_graph_record.csv.gz"
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())["host_layer"]
    got = graph_record_costs(_rows(csv_path), csv_path, shipped)
    for k in ("compiled_decode_record_fixed", "compiled_decode_record_per_kernel"):
        assert got[k] == pytest.approx(shipped[k], rel=1e-4) and got[k] > 0


def test_a_call_that_records_its_graph_pays_it_once_serially() -> None:
    from simcore.engine import inference as I
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import load_scenario, resolve_cluster

    sc = load_scenario(
        str(REPO / "tests/data/trace_scenarios/h200_r91_generate_llama_l8_h4096_b512_static.yaml")
    )
    assert sc.inference is not None
    cl = resolve_cluster(sc.cluster, default_registry())
    kw = {"framework": "eager", "attention_backend": "cudnn", "compiled_decode": True, "profiler": True,
          "decode_loop": "generate", "implementation": "huggingface"}  # fmt: skip
    base = I.evaluate(sc.model, sc.inference, cl, **kw)  # type: ignore[arg-type]
    two = I.evaluate(sc.model, sc.inference, cl, decode_graph_records=2.0, **kw)  # type: ignore[arg-type]
    prof = load_profile(default_registry().device("h200"))
    one = prof.host("compiled_decode_record_fixed", True) + prof.host(
        "compiled_decode_record_per_kernel", True
    ) * float(base.decode.kernels)
    # at the calibration machine's pace, once a call, in the prefill's phase; the decode step unchanged
    assert float(two.prefill_time_s - base.prefill_time_s) == pytest.approx(2 * one, rel=1e-9)
    assert float(two.decode_step_time_s) == float(base.decode_step_time_s)
    assert 5e-3 < one < 20e-3


def test_validate_reads_the_records_from_the_trace() -> None:
    """Round 91's calls record their decode graph in every profiled step; round 97's Mistral in none."""
    rec = validate(
        [H200 / "round91" / "hf_generate_llama_L8_h4096_b512_static.json.gz"],
        REPO / "tests/data/trace_scenarios/h200_r91_generate_llama_l8_h4096_b512_static.yaml",
    )
    assert any("decode_graph_records: 1" in n for n in rec.notes)
    none = validate(
        [H200 / "round97" / "hf_generate_mistral_L12_h2048_b384_static.json.gz"],
        REPO / "tests/data/trace_scenarios/h200_r97_generate_mistral_l12_h2048_b384_static.yaml",
    )
    assert not any("decode_graph_records" in n for n in none.notes)


def test_cudnn_prompts_tile_each_query_head_on_its_own() -> None:
    """Round 92: cuDNN's fprop over short causal prompts costs the same per sequence and query head at 16-128
    tokens (~22 ns a sequence and head at 512-1536 sequences): one CTA a query head's rows, walking at least
    one key block (``AttentionParams.per_head_tiles``); its one-query calls still pack a group's heads."""
    import numpy as np

    from simcore.compute import ops as O
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    dev = default_registry().device("h200")
    prof = load_profile(dev)
    assert prof.attention["fwd_cudnn"].per_head_tiles and not prof.attention["fwd"].per_head_tiles

    def t(b: int, h: int, kvh: int, s: int, p: object = prof) -> float:
        return float(O.attention(dev, p, b, h, s, 128, causal=s > 1, kv_heads=kvh, kv_seq=s if s > 1 else 48,
                                 backend="cudnn").time_s)  # fmt: skip

    # flat over the prompt's length, proportional to the query heads (not the KV groups)
    assert t(512, 32, 8, 16) == pytest.approx(t(512, 32, 8, 64), rel=0.25)
    assert t(512, 32, 8, 16) == pytest.approx(2 * t(512, 16, 8, 16), rel=0.2)
    packed = prof.model_copy(
        update={
            "attention": {
                **prof.attention,
                "fwd_cudnn": prof.attention["fwd_cudnn"].model_copy(update={"per_head_tiles": False}),
            }
        }  # fmt: skip
    )
    assert t(512, 32, 8, 16) > 2 * t(512, 32, 8, 16, packed)
    # one query a sequence: the grouped heads packed either way
    assert t(512, 32, 8, 1) == t(512, 32, 8, 1, packed)
    # round 92's causal prompts (not fitted on): median |error| within 25 %
    errs = [
        t(int(float(r["batch"])), int(float(r["heads"])), int(float(r["kv_heads"])), int(float(r["seq"])))
        / float(r["time_s"])
        - 1.0
        for r in _rows(H200 / "round92" / "attention_short.csv.gz")
        if r["framework"] == "eager" and r["name"] == "sdpa_cudnn" and r["causal"] == "1"
    ]
    assert len(errs) == 24 and float(np.median(np.abs(errs))) < 0.25


def test_compiled_prefill_pass_weight_adds_what_the_graph_holds() -> None:
    ops = load_profile(default_registry().device("h200")).host_ops
    calibrated_pass_ops, compiled_prefill_pass_weight = (
        ops.calibrated_pass_ops,
        ops.compiled_prefill_pass_weight,
    )
    ref = ops.pass_ops["huggingface"]["generate"]["swiglu"]
    comp = ops.pass_ops["huggingface"]["compiled_generate"]["swiglu"]
    # the calibrated compiled loop's prefill is the calibrated generate() pass: 92.04 typical ops
    assert compiled_prefill_pass_weight(None, "huggingface", True, "swiglu", False) == pytest.approx(ref)
    # a shorter loop (Qwen2 without an end-of-sequence id, 47.9) keeps the embedding, norm and head's 11.1
    assert compiled_prefill_pass_weight(47.9, "huggingface", True, "swiglu", False) == pytest.approx(
        47.9 + ref - comp
    )
    assert ref - comp == pytest.approx(11.12, abs=0.01)
    # the engine's decode pass weighs the loop alone: the calibrated compiled loop where none is given
    assert calibrated_pass_ops("huggingface", True, "swiglu", False, compiled_decode=True) == comp
    # a code without a calibrated compiled loop: unknown
    assert compiled_prefill_pass_weight(None, "huggingface", True, "gelu", False) is None
