"""``simcore op`` through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli


def test_gemm_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "op", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["flops"] == 2 * 4096**3 and d["bound"] == "compute" and d["time_s"] > 0
    assert d["device"] == "h200"


def test_attention_decode_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "roof.png"
    args = ["op", "attention", "--batch", "8", "--heads", "32", "--kv-heads", "8", "--seq", "1",
            "--kv-seq", "8192", "--head-dim", "128", "--no-causal", "--json", "--plot", str(png)]  # fmt: skip
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and json.loads(out)["bound"] == "memory"
    assert png.stat().st_size > 1000


def test_elementwise_table_and_units(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, *["op", "elementwise", "--name", "rmsnorm", "--bytes", "64 MB", "--framework", "cuda_graphs"]
    )
    assert code == 0 and "memory" in out and "64 MB" in out


def test_optimizer_and_transfer_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "op", "optimizer", "--params", "7B", "--device", "b200", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["transferred_from"] == "h200" and d["shape"]["params"] == 7e9


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["op", "gemm", "--m", "1", "--heads", "2"], "--heads not an option of gemm"),
        (["op", "conv"], "unknown op kind"),
        (["op", "gemm", "--m", "1", "--n", "1", "--k", "1", "--device", "tpu9"], "unknown device"),
        (["op", "elementwise", "--name", "add", "--bytes", "12 parsecs"], "bytes"),
        (["op", "optimizer", "--params", "lots"], "count"),
    ],
)
def test_errors_one_line_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert needle in err and err.strip().count("\n") == 0


def test_clock_and_cold_cache_options(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["op", "gemm", "--m", "8192", "--n", "8192", "--k", "8192", "--json"]
    _, out, _ = run_cli(capsys, *base)
    _, fast, _ = run_cli(capsys, *base, "--clock", "1.98 GHz")
    assert json.loads(fast)["kernel_time_s"] < json.loads(out)["kernel_time_s"]
    code, _, err = run_cli(capsys, *base, "--clock", "fast")
    assert code == 2 and "clock" in err
    dec = ["op", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--json"]
    _, warm, _ = run_cli(capsys, *dec)
    _, cold, _ = run_cli(capsys, *dec, "--cold-cache")
    assert json.loads(cold)["kernel_time_s"] > json.loads(warm)["kernel_time_s"]


def test_attention_backend_mask_and_dropout_options(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["op", "attention", "--batch", "8", "--heads", "12", "--seq", "1024", "--head-dim", "64", "--json"]
    times = {}
    for extra in (
        [],
        ["--backend", "flash"],
        ["--backend", "cudnn"],
        ["--backend", "cudnn", "--no-causal", "--mask", "--dropout", "0.1"],
    ):
        code, out, _ = run_cli(capsys, *base, *extra)
        assert code == 0
        d = json.loads(out)
        times[" ".join(extra)] = d["time_s"]
    # cuDNN's causal kernels beat FlashAttention-2's, and no backend is PyTorch's own choice on the H200
    # (cuDNN); transformers' compiled GPT-2 call (a materialised mask and dropout) costs several times the
    # causal one
    assert times["--backend cudnn"] < times["--backend flash"]
    assert times[""] == times["--backend cudnn"]
    assert times["--backend cudnn --no-causal --mask --dropout 0.1"] > 3 * times["--backend cudnn"]
    code, _, err = run_cli(capsys, *base, "--backend", "xformers")
    assert code == 2 and "unknown attention backend" in err
