"""End-to-end CLI: predict and timeline."""

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli


def test_predict_default_no_args(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "predict")
    assert code == 0
    assert "step time" in out and "MFU" in out


def test_predict_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "predict", "default", "llama3-8b-decode-h200", "--json")
    assert code == 0
    lines = [json.loads(x) for x in out.strip().splitlines()]
    assert len(lines) == 2
    tr, inf = lines
    for key in (
        "step_time_s",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "model_tflops_per_gpu",
        "mfu",
        "hfu",
        "memory_per_gpu_bytes",
        "fits_in_memory",
        "breakdown",
    ):
        assert key in tr
    assert sum(tr["breakdown"].values()) == pytest.approx(tr["step_time_s"], rel=1e-6)
    for key in (
        "prefill_time_s",
        "decode_step_time_s",
        "ttft_s",
        "tpot_s",
        "tokens_per_s",
        "memory_per_gpu_bytes",
    ):
        assert key in inf


def test_predict_set_override_changes_result(capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = run_cli(capsys, "predict", "--json")
    _, b, _ = run_cli(capsys, "predict", "--json", "--set", "training.global_batch=128")
    assert json.loads(b)["step_time_s"] > json.loads(a)["step_time_s"]


def test_predict_bad_layout_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "predict", "--set", "parallel.tp=3")
    assert code == 2
    assert "parallel" in err and len(err.strip().splitlines()) == 1


def test_predict_des_engine(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        *[
            "predict",
            "--json",
            "--engine",
            "des",
            "--set",
            "parallel.pp=2",
            "--set",
            "training.global_batch=16",
        ],
    )
    assert code == 0 and json.loads(out)["engine"] == "des"


def test_timeline_writes_trace_and_gantt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, png = tmp_path / "t.json", tmp_path / "g.png"
    code, _, _ = run_cli(
        capsys,
        *[
            "timeline",
            "default",
            "-o",
            str(trace),
            "--png",
            str(png),
            "--set",
            "parallel.pp=4",
            "--set",
            "parallel.tp=2",
            "--set",
            "training.global_batch=16",
        ],
    )
    assert code == 0
    data = json.loads(trace.read_text())
    kernels = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    assert {e["pid"] for e in kernels} == {0, 1, 2, 3}
    assert all(e["dur"] >= 0 for e in kernels)
    assert png.stat().st_size > 1000


def test_inference_memory_rows_show_the_mamba_state_inside_the_kv_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """A hybrid's recurrent state is part of ``kv_cache``: its row sits under it, indented and said to be in it."""
    code, out, err = run_cli(capsys, "predict", "nemotron-h-8b-decode-h100")
    assert code == 0, err
    rows = [line for line in out.splitlines() if "memory " in line]
    kv = next(i for i, line in enumerate(rows) if "memory kv_cache" in line)
    assert "    memory mamba_state (in kv_cache)" in rows[kv + 1]
