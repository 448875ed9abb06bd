"""A trace of one profiled step without ``ProfilerStep`` annotations (the most common thing users send):
simcore validate reads the same run the same way as its annotated twin.

The one-step traces are cut from committed annotated ones at test time: the last step's CPU events,
and the GPU events its runtime calls launched, without the step annotations."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.validation.trace_report import one_step_trace
from simcore.validation.traces import validate

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests" / "data" / "trace_scenarios"


@pytest.mark.parametrize(
    ("trace", "scenario", "sync"),
    [
        # a loop that runs ahead: the step's first kernels waited ~37 ms behind the previous step's
        ("round46/hf_train_qwen2_L8_h2048_b2.json.gz", "h200_r46_train_qwen2_l8_h2048_b2", False),
        # a host-bound loop that ran ahead into the step and spent its lead there (~20 ms)
        ("round52/hf_train_gpt2_L12_b16_s512.json.gz", "h200_r52_train_gpt2_l12_b16_s512", False),
        # loss.item() every step: the host waits in it
        ("round31/hf_train_gpt2_L12_b4_item.json.gz", "h200_r31_train_gpt2_l12_b4_item", True),
        # GradScaler's found_inf read: a wait inside the step, though its first kernels were queued
        (
            "round53/hf_train_qwen2_L6_h1536_b2_fp16_clip_foreach.json.gz",
            "h200_r53_train_qwen2_l6_h1536_b2_fp16_clip_foreach",
            True,
        ),
    ],
)
def test_one_unannotated_step(tmp_path: Path, trace: str, scenario: str, sync: bool) -> None:
    src = REPO / "traces" / "h200" / trace
    dst = tmp_path / Path(trace).name
    assert one_step_trace(src, dst)
    both = validate([str(src)], SC / f"{scenario}.yaml"), validate([str(dst)], SC / f"{scenario}.yaml")
    ann, single = both
    assert single.step_source == "single" and ann.step_source == "annotation"
    assert single.to_dict()["runtime"]["step_sync"] is sync
    # what is measured differs (the loop's period, one step's kernel span): both within the target
    assert abs(single.error_pct) < 10.0 and abs(ann.error_pct) < 10.0


def test_one_unannotated_inference_step_counts_its_waits(tmp_path: Path) -> None:
    """A prefill + 8 decode steps that waits once (for the last token): the decode loop runs ahead, as
    in the annotated trace."""
    src = REPO / "traces" / "h200" / "round52" / "hf_infer_llama_L8_h2048_b32.json.gz"
    dst = tmp_path / "one.json.gz"
    assert one_step_trace(src, dst)
    sc = SC / "h200_r52_infer_llama_l8_h2048_b32.yaml"
    ann, single = validate([str(src)], sc), validate([str(dst)], sc)
    assert (
        single.to_dict()["runtime"]["decode_sync_every"] == ann.to_dict()["runtime"]["decode_sync_every"] == 8
    )
    assert abs(single.error_pct - ann.error_pct) < 5.0


def test_one_unannotated_cuda_graph_step_counts_its_waits(tmp_path: Path) -> None:
    """CUDA-graph replays profiled without CPU ops: the cut step's 8 replays are found as steps by
    repeats and its one cudaDeviceSynchronize waits for all 8, over the runtime calls' range (it had
    priced a sync a replay: +54.8 %)."""
    src = REPO / "traces" / "h200" / "profile_decode_cuda_graphs.json.gz"
    dst = tmp_path / "one.json.gz"
    assert one_step_trace(src, dst)
    sc = SC / "h200_decode_cuda_graphs.yaml"
    ann, single = validate([str(src)], sc), validate([str(dst)], sc)
    assert (
        single.to_dict()["runtime"]["decode_sync_every"] == ann.to_dict()["runtime"]["decode_sync_every"] == 8
    )
    assert abs(single.error_pct) < 10.0 and abs(ann.error_pct) < 10.0


def test_sdpa_math_fallback_is_eager_attention() -> None:
    """fp32 grouped-query attention runs SDPA's math fallback (round 60's Mistral): the same ops as
    transformers' eager attention, and no fused kernel's op, so validate prices it as eager (review: a
    wider test for "fused" had taken the SDPA wrapper for a fused kernel)."""
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze
    from simcore.validation.traces import sdpa_backend

    a = analyze(
        read_trace(REPO / "traces" / "h200" / "round60" / "hf_train_mistral_L6_h2048_b1_fp32.json.gz")
    )
    assert sdpa_backend([a]) == "eager"
    b = analyze(read_trace(REPO / "traces" / "h200" / "round60" / "hf_train_gpt2_L12_b8_fp32.json.gz"))
    assert sdpa_backend([b]) == "efficient"


def test_single_step_report_takes_unannotated_traces_as_they_are(tmp_path: Path) -> None:
    """``trace_report --single-step`` cuts annotated traces and takes one recorded without marks as is."""
    from simcore.validation.trace_report import TraceCase, run

    one = REPO / "traces" / "h200" / "round62" / "hf_train_gpt2_L12_b8_item_onestep.json.gz"
    assert not one_step_trace(one, tmp_path / "cut.json.gz")
    assert not (tmp_path / "cut.json.gz").exists()
    case = TraceCase(SC / "h200_r62_train_gpt2_l12_b8_item_onestep.yaml", (one,), "62", True, "")
    (row,) = run([case], single_step=True)
    assert row["error_pct"] == pytest.approx(validate([str(one)], case.scenario).error_pct)


def test_one_step_trace_reports_a_broken_file(tmp_path: Path) -> None:
    """A truncated trace gets one clear error naming the file, not a traceback."""
    from simcore.errors import SimcoreError

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(SimcoreError, match="bad.json.*cannot read the trace"):
        one_step_trace(bad, tmp_path / "out.json.gz")


def test_probe_window_what_if() -> None:
    """``trace_report --probe-window N``: an inference trace's pace over N-call windows (0: one median),
    a training trace's unchanged; a negative window is one clear error."""
    from simcore.calibration.host_trace import PROBE_WINDOW, op_speed
    from simcore.cli.validation import main
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze
    from simcore.validation.trace_report import TraceCase, run

    gen = REPO / "traces" / "h200" / "round82" / "hf_generate_gpt2_L12_b2_topp.json.gz"
    train = REPO / "traces" / "h200" / "round82" / "hf_train_gpt2_L8_b8_s512.json.gz"
    cases = [
        TraceCase(SC / "h200_r82_generate_gpt2_l12_b2_topp.yaml", (gen,), "82", True, ""),
        TraceCase(SC / "h200_r82_train_gpt2_l8_b8_s512.yaml", (train,), "82", True, ""),
    ]
    default, median, wide = (run(cases, probe_window=w) for w in (None, 0, 32))
    assert default[0]["cpu_op_time_s"] == run(cases[:1], probe_window=PROBE_WINDOW)[0]["cpu_op_time_s"]
    # one median over the trace, and windows of 32 calls, read other paces of the same trace
    a = analyze(read_trace(gen))
    s0, s16 = op_speed(a, 0), op_speed(a, PROBE_WINDOW)
    assert s0 is not None and s16 is not None and s0.empty_main_s != s16.empty_main_s
    assert median[0]["cpu_op_time_s"] != default[0]["cpu_op_time_s"] != wide[0]["cpu_op_time_s"]
    assert median[0]["error_pct"] != default[0]["error_pct"]
    assert default[1] == median[1] == wide[1]  # training traces keep one median
    assert main(["traces", "--probe-window", "-1"]) == 2


def test_one_unannotated_static_generate_step(tmp_path: Path) -> None:
    """A compiled static-cache generate() call cut to one unannotated step: its decode graph's record is
    counted over the whole trace (the step has no host range), as in the annotated steps (round 98's
    Qwen2 at batch 768: one step's prediction had left the record out, -12.8 %)."""
    from simcore.calibration.host_trace import graph_records_per_step
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze

    src = REPO / "traces" / "h200" / "round98" / "hf_generate_qwen2_L10_h1536_b768_static.json.gz"
    dst = tmp_path / "one.json.gz"
    assert one_step_trace(src, dst)
    assert graph_records_per_step(analyze(read_trace(dst))) == [1]
    sc = SC / "h200_r98_generate_qwen2_l10_h1536_b768_static.yaml"
    ann, single = validate([str(src)], sc), validate([str(dst)], sc)
    assert (
        single.to_dict()["runtime"]["decode_graph_records"]
        == ann.to_dict()["runtime"]["decode_graph_records"]
        == 1
    )
    assert abs(single.error_pct) < 10.0 and abs(ann.error_pct) < 10.0


def test_one_unannotated_inference_step_is_not_split_into_its_passes(tmp_path: Path) -> None:
    """A user's nanoGPT prefill + 8 decode passes cut to one step repeats its 165 kernels every pass:
    found by repetition those were nine 'steps' of one pass each (measured 6.1 ms against the step's 55),
    which the step's composition (a prefill and eight decode steps) cannot price. Taken as one step."""
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze

    src = REPO / "traces" / "h200" / "round78" / "user_infer_nanogpt_L12_h1024_b32_p128.json.gz"
    dst = tmp_path / "one.json.gz"
    assert one_step_trace(src, dst)
    a = analyze(read_trace(dst))
    assert a.step_source == "repeat" and len(a.steps) == 9
    one = a.as_one_step()
    assert one.step_source == "single" and len(one.steps) == 1 and len(one.steps[0].kernels) == len(a.kernels)
    assert one.step_time_s == pytest.approx(
        max(k.ev.ts + k.ev.dur for k in a.kernels) - min(k.ev.ts for k in a.kernels)
    )
    sc = SC / "h200_r78_nanogpt_l12_h1024_b32_p128.yaml"
    ann, single = validate([str(src)], sc), validate([str(dst)], sc)
    assert single.step_source == "single" and single.measured_step_time_s == pytest.approx(one.step_time_s)
    assert single.phases is not None and (single.phases["prefills"], single.phases["decode_steps"]) == (
        1.0,
        8.0,
    )
    assert abs(single.error_pct - ann.error_pct) < 5.0 and abs(single.error_pct) < 10.0
    # and says so
    assert any("repeats its kernels every forward pass" in n for n in single.notes)
