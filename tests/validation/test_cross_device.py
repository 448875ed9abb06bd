"""The H100 SXM beside the H200: its shipped profile reproduced from its committed sweeps on top of the
H200's, and the cross-device report's facts (each GPU's own profile beats the other's transferred, on
rows neither profile was fitted on; a GPU-bound run replayed across lands on the other GPU's trace)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from simcore.calibration.calibrate import calibrate
from simcore.cli.validation import main as validation
from simcore.report import validation_plots
from simcore.specs.profile import ComputeProfile, load_profile
from simcore.specs.registry import builtin_dir, default_registry
from simcore.validation import cross_device as X
from simcore.validation.inputs import report_inputs
from tests.calibration.test_traces_calibrate import _assert_same_fit
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
H100_INPUTS = [f"traces/{p}" for p in report_inputs()["calibration"]["h100"]]
# the sweep's GEMM shapes timed by their kernels' own durations: the gemm_kernel block (--kernel-gemms-apart)
H100_KERNEL_GEMMS = [f"traces/{p}" for p in report_inputs()["kernel_gemms"]["h100"]]


@pytest.fixture(scope="module")
def h100_fit() -> ComputeProfile:
    with contextlib.chdir(REPO):
        prof = calibrate(
            [*H100_INPUTS, *H100_KERNEL_GEMMS], "h100", fit_comm_profile=False, base="h200", kernel_gemms_apart=True
        ).compute_profile
    assert prof is not None
    return prof


def test_reproduces_shipped_h100_profile(h100_fit: ComputeProfile) -> None:
    shipped = ComputeProfile.model_validate(
        yaml.safe_load((builtin_dir() / "calibration" / "h100.yaml").read_text())
    )
    # the shipped profile is the sweeps' fit (the kernel-timed GEMMs apart) on the h200 base, then the one-GPU
    # distributed host units fitted on top of it (`simcore calibrate traces/h100/dist_units --base h100`,
    # docs/parallelism.md)
    assert h100_fit.source == shipped.source[:-1]
    assert shipped.source[-2] == "base: h200"
    assert shipped.source[-1] == "traces/h100/dist_units/host_dist_units_rank0.csv.gz"
    _assert_same_fit(
        h100_fit,
        shipped,
        H100_INPUTS,
        ("gemm", "gemm_kernel", "attention", "memory", "optimizer", "launch", "host_overhead"),
        device="h100",
    )


def test_kernel_timed_gemms_fit_their_own_block(h100_fit: ComputeProfile) -> None:
    """The H100's kernel-duration GEMMs (checked on shapes held out by hash) price compiled code's GEMMs faster
    than the call-timed block: back-to-back calls under the power cap hold gaps between the kernels."""
    assert h100_fit.gemm_kernel["bf16"].eff_peak > 1.1 * h100_fit.gemm["bf16"].eff_peak
    check = h100_fit.fit_report["held_out"]["gemm_kernel"]
    assert check["n_check"] > 50 and check["median_abs_err"] < 0.08


def test_base_keeps_what_no_sweep_measures(h100_fit: ComputeProfile) -> None:
    h200 = load_profile(default_registry().device("h200"))
    # the host model (no op sweep times a layer's Python) is the H200 machine's, and the notes say so
    assert h100_fit.host_layer == h200.host_layer
    assert any("fitted on top of the h200 profile" in n and "host_layer" in n for n in h100_fit.notes)
    # what the H100's sweeps measure is its own: GEMM rates, the clock under sustained GEMMs
    assert h100_fit.gemm["bf16"].eff_peak != h200.gemm["bf16"].eff_peak
    assert h100_fit.device == "h100" and h100_fit.transferred_from is None


def test_h100_predictions_use_its_own_profile() -> None:
    prof = load_profile(default_registry().device("h100"))
    assert prof.device == "h100" and prof.transferred_from is None
    # a GPU without measurements still transfers, and says from where
    b200 = load_profile(default_registry().device("b200"))
    assert b200.transferred_from in ("h200", "h100")


def test_calibrate_base_unknown_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys, "calibrate", str(REPO / H100_INPUTS[0]), "--device", "h100", "--base", "nope", "--no-comm"
    )
    assert code == 2
    assert "unknown calibration profile 'nope'" in err + out
    assert "Traceback" not in err + out


def test_own_profile_beats_the_transferred_one_on_held_out_kernels() -> None:
    res = X.kernels()
    for dev, other in (("h200", "h100"), ("h100", "h200")):
        own, moved = res[dev][dev]["all"], res[dev][other]["all"]
        assert own["n"] > 500 and moved["n"] > own["n"]
        assert own["median_abs_error_pct"] < moved["median_abs_error_pct"]
        # memory-bound kernels move worst between HBM3 and HBM3e (fractions of peak bandwidth differ by op)
        assert (
            res[dev][other]["memory"]["median_abs_error_pct"]
            > res[dev][dev]["memory"]["median_abs_error_pct"]
        )


def test_gpu_bound_twin_replays_across_within_ten_percent() -> None:
    rows = {r["scenario"]: r for r in X.replay(only={"h100_r117_train_llama1b_eager"})}
    r = rows["h100_r117_train_llama1b_eager"]
    assert min(r["gpu_busy"].values()) > 0.9
    assert abs(r["h200_to_h100_error_pct"]) < 10.0
    assert abs(r["h100_to_h200_error_pct"]) < 10.0


def test_report_cli_rejects_unknown_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert validation(["devices", "--parts", "kernels,bogus"]) == 2
    assert "unknown part 'bogus'" in capsys.readouterr().err


def test_plot_writes_a_figure(tmp_path: Path) -> None:
    fam = {"n": 3, "median_abs_error_pct": 5.0, "bias_pct": 1.0, "within_10pct": 3}
    fams = {f: fam for f in ("gemm", "attention_fwd", "attention_bwd", "memory", "memory_bwd", "optimizer", "all")}
    res = {
        "kernels": {d: {p: fams for p in X.DEVICES} for d in X.DEVICES},
        "traces": {"rows": {"a": {"measured_step_time_s": 0.1, "h100": 2.0, "h200": 8.0}}, "summary": {}},
    }
    out = tmp_path / "x.png"
    validation_plots.cross_device(res, out)
    assert out.stat().st_size > 10_000


def test_plot_needs_its_parts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert validation(["devices", "--parts", "steps", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot needs the kernels and traces parts" in capsys.readouterr().err


def test_streams_scale_with_hbm_and_strided_ops_do_not() -> None:
    rows = {r["op"]: r for r in X.memory_ops()}
    ratio = 4.8 / 3.35  # the two GPUs' peak bandwidths
    for op in ("copy", "add", "mul"):  # pure streams keep their fraction of peak
        assert rows[op]["h100_over_h200"] == pytest.approx(ratio, rel=0.05)
    for op in ("cat_strided", "copy_strided", "add_bcast"):  # bound by their arithmetic and access, not HBM
        assert rows[op]["h100_over_h200"] < 1.1
        assert rows[op]["h100_fraction_of_peak"] > rows[op]["h200_fraction_of_peak"] * 1.2
