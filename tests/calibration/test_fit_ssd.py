"""The SSD kernels' rates: the cost function, the fit (recovers known rates, splits the rows), the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.calibration import fit_ssd as F
from simcore.compute.ops import ssd_kernel
from simcore.specs.loader import validate
from simcore.specs.profile import SsdParams, load_ssd
from simcore.specs.registry import default_registry
from tests.cli_runner import run_cli

SSD = Path(__file__).resolve().parents[2] / "traces" / "h100" / "ssd"
H100 = default_registry().device("h100")
PARAMS = SsdParams(
    device="h100",
    eff_bw={"scan": 0.8, "state_update": 0.5, "norm_fwd": 0.9, "norm_bwd": 0.4},
    eff_mma=0.3,
    t0=2e-6,
)


def test_a_kernel_is_t0_plus_bytes_at_the_fitted_bandwidth_plus_flops_at_the_fitted_rate() -> None:
    bw, peak = H100.memory.bandwidth, H100.peak_flops("bf16")
    t = ssd_kernel(H100, PARAMS, "scan", 1e9, 3e10).time_s
    assert t == pytest.approx(2e-6 + 1e9 / (0.8 * bw) + 3e10 / (0.3 * peak))
    assert ssd_kernel(H100, PARAMS, "state_update", 1e9, 0.0).time_s == pytest.approx(2e-6 + 1e9 / (0.5 * bw))


@settings(max_examples=30, deadline=None)
@given(st.floats(1e3, 1e10), st.floats(0, 1e11), st.floats(1.01, 4.0))
def test_more_bytes_or_flops_never_take_less_time(nbytes: float, flops: float, k: float) -> None:
    t = float(ssd_kernel(H100, PARAMS, "scan", nbytes, flops).time_s)
    assert float(ssd_kernel(H100, PARAMS, "scan", nbytes * k, flops).time_s) > t
    assert float(ssd_kernel(H100, PARAMS, "scan", nbytes, flops * k + 1.0).time_s) > t


def test_other_gpus_take_the_fractions_at_their_own_bandwidth() -> None:
    b200 = default_registry().device("b200")
    assert load_ssd(b200) == load_ssd(H100)
    ratio = H100.memory.bandwidth / b200.memory.bandwidth
    nb = 1e10
    t_h, t_b = (ssd_kernel(d, PARAMS, "scan", nb, 0.0).time_s - PARAMS.t0 for d in (H100, b200))
    assert t_b == pytest.approx(t_h * ratio)


def test_the_fit_recovers_rates_it_generated() -> None:
    truth = {"scan": 0.75, "state_update": 0.45, "norm_fwd": 0.85, "norm_bwd": 0.35, "eff_mma": 0.25,
             "t0": 2.5e-6, "host_launch": 1e-4}
    obs = []
    for i in range(1, 6):
        for cls in ("scan", "state_update", "norm_fwd", "norm_bwd"):
            by = {c: (4e8 * i if c == cls else 0.0) for c in truth if c in PARAMS.eff_bw}
            fl = 2e10 * (6 - i) if cls == "scan" else 0.0
            o = F.Obs("x", f"c{i}", "kernel", 1.0, by, fl, 1.0, False)
            o.measured = F.predict_obs(o, truth, H100, 0.0)
            obs.append(o)
    small = F.Obs("x", "tiny", "kernel", 1.0, {"scan": 1e5}, 0.0, 3.0, False)
    small.measured = F.predict_obs(small, truth, H100, 0.0)
    got = F.fit_params([*obs, small], H100, 0.0, F.DEVICE_PARAMS)
    for k in F.DEVICE_PARAMS:
        assert got[k] == pytest.approx(truth[k], rel=0.05), k


def test_eager_calls_are_bounded_by_the_host() -> None:
    p = {**PARAMS.eff_bw, "eff_mma": 0.3, "t0": 2e-6, "host_launch": 1e-4}
    o = F.Obs("scan", "c", "fwd", 1.0, {"scan": 1e6}, 0.0, 5.0, True)
    assert F.predict_obs(o, p, H100, 1e-6) == pytest.approx(5e-4)
    big = F.Obs("scan", "c", "fwd", 1.0, {"scan": 1e10}, 0.0, 5.0, True)
    assert F.predict_obs(big, p, H100, 1e-6) == pytest.approx(2e-6 * 5 + 1e10 / (0.8 * H100.memory.bandwidth) + 5e-6)


def test_the_split_keeps_the_profiled_case_in_the_fit_half_and_leaves_the_fallback_conv_out() -> None:
    obs, manifest = F.observations(SSD)
    assert manifest["suite"] == "ssd" and not any(o.op == "conv1d" for o in obs)
    prof = [o for o in obs if o.case == "nemotron-h-8b-s8192"]
    assert all(o.fit for o in prof if not o.what.startswith("kernel:"))
    kernels = [o for o in prof if o.what.startswith("kernel:")]
    assert 0 < sum(o.fit for o in kernels) < len(kernels)  # the scan's kernels split by name
    scans = {o.case: o.fit for o in obs if o.op == "scan" and o.what == "fwd"}
    assert 0 < sum(scans.values()) < len(scans)


def test_calibrate_writes_the_rates_and_the_held_out_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ssd-h100.yaml"
    code, stdout, _err = run_cli(capsys, "calibrate", str(SSD), "-o", str(out))
    assert code == 0 and "held out" in stdout
    p = validate(SsdParams, yaml.safe_load(out.read_text()), str(out), "ssd")
    assert p.device == "h100" and 0.5 < p.eff_bw["scan"] <= 1.0 and p.eff_bw["norm_bwd"] < p.eff_bw["norm_fwd"]
    ho = p.fit_report["held_out"]
    assert {"scan kernel", "scan fwd", "state_update graph"} <= set(ho)
    assert ho["state_update graph"]["median_abs_err"] < 0.1
    assert all(math.isfinite(v["median_abs_err"]) for v in ho.values())
    # the shipped file is what this fit writes
    shipped = default_registry().calibration_path("ssd-h100")
    assert shipped is not None and yaml.safe_load(shipped.read_text())["eff_bw"] == p.eff_bw
