"""Failures and goodput (simcore.system.reliability): Young/Daly by hand, the Llama 3 16K-GPU case."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simcore
from simcore.errors import SimcoreError
from simcore.specs.resolve import load_scenario
from simcore.specs.system import ReliabilitySpec, failure_record
from simcore.system.checkpoint import CheckpointResult
from simcore.system.reliability import goodput, goodput_fraction, job_mtbf, young_daly_interval

DAY = 86400.0


def test_llama3_record_rates() -> None:
    rec = failure_record("llama3-16k-h100")
    # 54 days x 16,384 GPUs / 419 interruptions
    assert rec.gpu_mtbf == pytest.approx(54 * DAY * 16384 / 419)
    m, basis = job_mtbf(ReliabilitySpec(), 16384, 2048)
    assert m == pytest.approx(54 * DAY / 419)  # 3.09 h for the whole job
    assert "419" in basis


def test_rates_add() -> None:
    m, _ = job_mtbf(ReliabilitySpec(mtbf=1000 * 3600, node_mtbf=2000 * 3600, failures_per_day=2), 80, 10)
    assert 1 / m == pytest.approx(80 / 3.6e6 + 10 / 7.2e6 + 2 / DAY)


def test_young_daly_by_hand() -> None:
    # C = 60 s, M = 3 h: tau = sqrt(2 x 60 x 10800) = 1138.4 s
    assert young_daly_interval(60.0, 10800.0) == pytest.approx(math.sqrt(2 * 60 * 10800))
    # goodput at tau = 1200 s, C = 60, L = 0, R = 600: (1 - (630 + 600) / 10800) / (1 + 60 / 1200)
    assert goodput_fraction(1200, 60, 0, 600, 10800) == pytest.approx((1 - 1230 / 10800) / 1.05)


@given(c=st.floats(1.0, 300.0), m=st.floats(3600.0, 1e6))
def test_young_daly_is_near_the_optimum(c: float, m: float) -> None:
    tau = young_daly_interval(c, m)
    g = goodput_fraction(tau, c, 0.0, 0.0, m)
    # first-order optimum: within a small margin of the best over a grid of intervals
    best = max(goodput_fraction(tau * f, c, 0.0, 0.0, m) for f in (0.25, 0.5, 0.8, 1.25, 2.0, 4.0))
    assert g >= best - 0.01


def _ckpt(stall: float, lag: float, restore: float) -> CheckpointResult:
    return CheckpointResult("sync", "fs", False, 1e12, 1e10, 100, 13, 0.0, stall, stall, lag, restore)


def test_goodput_rounds_to_steps_and_refuses_hopeless_jobs() -> None:
    spec = ReliabilitySpec(failures_per_day=1.0)
    r = goodput(spec, 8, 1, step_s=7.0, checkpoint=_ckpt(20.0, 0.0, 30.0))
    assert r.interval_s == pytest.approx(r.interval_steps * 7.0)
    assert abs(r.interval_s - math.sqrt(2 * 20 * DAY)) <= 3.5
    assert r.goodput == pytest.approx(goodput_fraction(r.interval_s, 20.0, 0.0, 30.0, DAY))
    # an asynchronous save (tiny stall) still waits for its write: tau >= the lag
    fast = goodput(spec, 8, 1, step_s=1.0, checkpoint=_ckpt(0.001, 60.0, 30.0))
    assert fast.interval_s == pytest.approx(60.0)
    with pytest.raises(SimcoreError, match="never finishes"):
        goodput(ReliabilitySpec(failures_per_day=500.0), 8, 1, 7.0, _ckpt(20.0, 0.0, 300.0))


def test_goodput_in_predict_and_a_real_time_to_train() -> None:
    sets = [
        "cluster.storage=llama3-tectonic",
        "runtime.checkpoint.mode=distributed",
        "reliability.restart_time=10 min",
    ]
    r = simcore.predict(load_scenario("llama3-405b-h100", overrides=sets))
    rel = r.system_effects.reliability
    assert rel.optimal and 0.9 < rel.goodput < 1.0
    assert r.system_effects.time_to_train_s == pytest.approx(r.time_to_train_s / rel.goodput)
    hourly = simcore.predict(
        load_scenario("llama3-405b-h100", overrides=[*sets, "runtime.checkpoint.interval=1 h"])
    )
    assert hourly.system_effects.reliability.goodput < rel.goodput  # every hour loses more than the optimum


def test_reliability_needs_checkpoints_and_training() -> None:
    with pytest.raises(SimcoreError, match="runtime.checkpoint"):
        simcore.predict(load_scenario("default", overrides=["reliability.restart_time=60"]))
    with pytest.raises(SimcoreError, match="training scenarios"):
        load_scenario("llama3-8b-decode-h200", overrides=["reliability.restart_time=60"])
