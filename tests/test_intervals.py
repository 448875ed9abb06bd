"""Prediction intervals: conformal bounds, the fit/check split, class fallback, and their use in predict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore import predict
from simcore.specs.intervals import IntervalClass, Intervals, class_key, load_intervals, lookup, parents
from simcore.validation.intervals import Row, conformal_bounds, coverage, fit, half, to_yaml
from tests.cli_runner import run_cli


def test_conformal_bounds_by_hand() -> None:
    # n = 9, level 0.8: a = 0.1, floor(10 * 0.1) = 1st and ceil(10 * 0.9) = 9th smallest
    assert conformal_bounds([5, 3, 1, 2, 4, 9, 8, 7, 6], 0.8) == (1.0, 9.0)
    # n = 19: floor(20 * 0.1) = 2nd and ceil(20 * 0.9) = 18th smallest
    assert conformal_bounds(list(range(1, 20)), 0.8) == (2.0, 18.0)
    # n = 1: the one value is both ends
    assert conformal_bounds([1.3], 0.8) == (1.3, 1.3)


@given(st.lists(st.floats(0.1, 10.0), min_size=1, max_size=60), st.floats(0.05, 0.95))
@settings(max_examples=60, deadline=None)
def test_conformal_bounds_ordered_and_inside_sample(values: list[float], level: float) -> None:
    lo, hi = conformal_bounds(values, level)
    assert min(values) <= lo <= hi <= max(values)
    # at least `level` of the sample itself lies inside (where the order statistics exist)
    inside = sum(lo <= v <= hi for v in values)
    assert inside >= math.floor(level * len(values)) - 1


def test_half_is_stable_and_balanced() -> None:
    assert half("steps", "a") == half("steps", "a")
    fits = sum(half("traces", f"case{i}") == "fit" for i in range(2000))
    assert 900 < fits < 1100


def test_class_keys_and_fallback() -> None:
    assert class_key(True, 1, "training") == "calibrated/single/training"
    assert class_key(False, 8, "inference") == "transferred/node/inference"
    assert class_key(False, 9, "training") == "transferred/cluster/training"
    assert parents("transferred/cluster/training") == [
        "transferred/cluster/training",
        "cluster/training",
        "training",
        "all",
    ]
    c = IntervalClass(n=3, low=0.5, high=2.0, median=1.0)
    pooled = IntervalClass(n=40, low=0.9, high=1.1, median=1.0)
    iv = Intervals(
        level=0.8,
        min_n=10,
        split="x",
        sources={},
        classes={"calibrated/single/training": c, "training": pooled},
    )
    # too few rows in the class itself: the first pooled class with enough is used
    assert lookup(iv, "calibrated/single/training") == ("training", pooled)
    assert lookup(iv, "calibrated/single/inference") is None


def _rows(n: int, sigma: float, seed: int) -> list[Row]:
    rng = np.random.default_rng(seed)
    return [
        Row("synthetic", f"r{i}", "calibrated/single/training", float(x))
        for i, x in enumerate(np.exp(rng.normal(0.02, sigma, n)))
    ]


def test_fit_then_check_covers_at_the_stated_rate() -> None:
    rows = _rows(2000, 0.08, 1)
    iv = fit(rows)
    c = iv.classes["calibrated/single/training"]
    # lognormal(0.02, 0.08): the 10th/90th percentiles are exp(0.02 -+ 1.2816 * 0.08)
    assert c.low == pytest.approx(math.exp(0.02 - 1.2816 * 0.08), rel=0.02)
    assert c.high == pytest.approx(math.exp(0.02 + 1.2816 * 0.08), rel=0.02)
    cov = coverage(iv, rows)["all"]
    assert cov["n"] == sum(r.half == "check" for r in rows)
    assert 0.76 <= cov["coverage"] <= 0.84
    # only fit-half rows were counted in the fit
    assert iv.sources == {"synthetic": sum(r.half == "fit" for r in rows)}


def test_yaml_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    iv = fit(_rows(200, 0.1, 2))
    p = tmp_path / "iv.yaml"
    p.write_text(to_yaml(iv))
    assert load_intervals(p) == iv


def test_predict_carries_the_shipped_interval() -> None:
    if load_intervals() is None:
        pytest.skip("no intervals shipped")
    r = predict("default")
    if r.kind == "training":
        assert r.step_time_s_low is not None and r.step_time_s_high is not None
        assert r.step_time_s_low < r.step_time_s_high
        assert r.step_time_s_low <= r.step_time_s * 1.2 and r.step_time_s_high >= r.step_time_s * 0.8
    assert r.interval and r.interval.startswith("80%")


def test_calibrate_needs_inputs_or_intervals(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "calibrate")
    assert code != 0
    assert "Traceback" not in err and "--intervals" in err
    code, _out, err = run_cli(capsys, "calibrate", "x.csv", "--intervals", "iv.yaml")
    assert code != 0 and "takes no measurement inputs" in err
