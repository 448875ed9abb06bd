"""The fitter recovers known parameters from synthetic measurements and reports held-out errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcore.calibration import fit_compute as FC
from simcore.specs.profile import ComputeProfile, load_profile, save_profile
from simcore.specs.registry import default_registry
from tests.compute.synth import true_profile, write_csv


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[ComputeProfile, ComputeProfile, dict, Path]:
    dev = default_registry().device("h200")
    truth = true_profile(dev)
    path = write_csv(tmp_path_factory.mktemp("synth") / "ops.csv.gz", dev, truth, noise=0.02)
    prof, report = FC.fit([path], dev)
    return truth, prof, report, path


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a / b - 1.0) <= rel


def test_recovers_gemm_parameters(fitted: tuple) -> None:
    truth, prof, _, _ = fitted
    for d in ("bf16", "fp8"):
        t, p = truth.gemm[d], prof.gemm[d]
        assert _close(p.eff_peak, t.eff_peak, 0.05), (d, p.eff_peak, t.eff_peak)
        assert _close(p.eff_bw, t.eff_bw, 0.08), (d, p.eff_bw, t.eff_bw)
        assert _close(p.t0, t.t0, 0.1), (d, p.t0, t.t0)
        assert _close(p.k_overhead, t.k_overhead, 0.25), (d, p.k_overhead, t.k_overhead)


def test_recovers_attention_memory_optimizer_and_host(fitted: tuple) -> None:
    truth, prof, _, _ = fitted
    for key in ("fwd", "bwd"):
        t, p = truth.attention[key], prof.attention[key]
        assert _close(p.eff_peak, t.eff_peak, 0.06), (key, p, t)
        assert _close(p.head_dim_overhead, t.head_dim_overhead, 0.3), (key, p, t)
    assert _close(prof.memory.eff_bw, truth.memory.eff_bw, 0.05)
    assert _close(prof.memory.t0, truth.memory.t0, 0.1)
    assert _close(prof.memory.l2_speedup, truth.memory.l2_speedup, 0.15)
    assert _close(prof.memory.ops["softmax"].eff, 0.8, 0.06)
    assert _close(prof.optimizer["adamw_unfused"].traffic, truth.optimizer["adamw_unfused"].traffic, 0.08)
    for fam in ("gemm", "attention_fwd", "attention_bwd", "memory"):
        assert _close(prof.host_overhead[fam], truth.host_overhead[fam], 0.1), fam
    assert _close(prof.launch["eager"], truth.launch["eager"], 0.05)
    assert _close(prof.launch["cuda_graphs"], truth.launch["cuda_graphs"], 0.05)


def test_held_out_report(fitted: tuple) -> None:
    _, prof, report, _ = fitted
    fams = report["families"]
    for g in ("gemm", "attention_fwd", "attention_bwd", "memory"):
        chk = fams[g]["check"]
        assert chk["n"] >= 10
        assert chk["median_abs_err"] < 0.03, (g, chk)  # noise is 2 %
        assert fams[g]["fit"]["n"] > chk["n"]  # 70/30 split
    assert not prof.provisional and prof.source


def test_split_is_deterministic_and_near_70_percent() -> None:
    keys = [f"gemm|bf16||{m}|{n}" for m in range(60) for n in range(60)]
    flags = [FC.is_fit_row(k) for k in keys]
    assert flags == [FC.is_fit_row(k) for k in keys]
    assert 0.66 < np.mean(flags) < 0.74


def test_profile_roundtrip_and_cli(fitted: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, prof, _, path = fitted
    out = tmp_path / "h200.yaml"
    save_profile(prof, out)
    dev = default_registry().device("h200")
    again = load_profile(dev, str(out))
    assert again.gemm["bf16"] == prof.gemm["bf16"]
    assert again.host_overhead == prof.host_overhead
    from simcore.cli.validation import main as validation

    rc = validation(["kernels", str(path), "-o", str(tmp_path / "b.yaml")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "attention_bwd" in text and (tmp_path / "b.yaml").exists()


def test_bad_input_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    from simcore.cli.validation import main as validation

    assert validation(["kernels", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not an ops CSV" in err and err.count("\n") == 1


def test_dmon_sidecar_clock(tmp_path: Path) -> None:
    """A measurement file's SM clock: the median busy-sample pclk of GPU 0 in its dmon sidecar."""
    (tmp_path / "cold.dmon.txt").write_text(
        "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk     fb   bar1   ccpm \n"
        "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz     MB     MB     MB \n"
        "    0     77     39     38      0      0      0      0      0      0   3201    345      0      1      0 \n"
        "    0    130     41     39      8      2      0      0      0      0   3201   1980   2057   2058      0 \n"
        "    1    300     41     39     90      2      0      0      0      0   3201   1500   2057   2058      0 \n"
        "    0    240     48     45     13     15      0      0      0      0   3201   1815   1879   1880      0 \n"
        "    0    200     43     41     10      3      0      0      0      0   3201   1965   2059   2060      0 \n"
    )
    csv_path = tmp_path / "cold.csv.gz"
    assert FC.file_clock(csv_path) == 1965e6  # GPU 0's busy samples 1980, 1815, 1965; idle and GPU 1 out
    assert FC.file_clock(csv_path, gpu=1) == 1500e6
    assert FC.file_clock(tmp_path / "ops.csv.gz") is None  # no sidecar: the sweep clocks apply
