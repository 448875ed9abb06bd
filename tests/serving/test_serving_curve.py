"""Closed-loop load, the throughput-interactivity curve (API and CLI), and two throughput laws as
property tests: below capacity throughput equals the arrival rate; more KV memory never lowers
throughput."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.serving import ServingSpec
from simcore.serving.curve import concurrency_curve, generated_by
from tests.cli_runner import run_cli
from tests.serving.test_serving import run, scen

SCEN = Path(__file__).resolve().parents[2] / "scenarios" / "serve_llama3_8b_h200.yaml"


def test_one_user_sends_each_request_when_the_last_finishes() -> None:
    r = run(rate=None, concurrency=1, requests=5, prompt=256, output=8)
    log = r.log
    assert log.arrival[0] == 0.0
    assert np.array_equal(log.arrival[1:], log.finish[:-1])
    assert r.result.max_in_system == 1


def test_closed_loop_keeps_the_concurrency_in_the_system() -> None:
    r = run(rate=None, concurrency=16, requests=400, prompt=512, output=64).result
    assert r.max_in_system == 16
    # every user is busy until the last request is sent, then the system drains
    assert 14.0 < r.mean_in_system <= 16.0


def test_generated_tokens_by_a_time() -> None:
    log = run(requests=3, prompt=128, output=11).log
    t = float(log.first_token[0] + 0.5 * (log.finish[0] - log.first_token[0]))
    assert generated_by(log, float(log.finish.max())) == pytest.approx(33.0)
    assert generated_by(log, -1.0) == 0.0
    if t < log.first_token[1]:
        assert generated_by(log, t) == pytest.approx(1 + 10 * 0.5)


def test_the_curve_trades_interactivity_for_throughput() -> None:
    spec = ServingSpec.model_validate({"rate": 1.0, "requests": 50, "prompt": 512, "output": 64})
    pts = concurrency_curve(scen(), spec, [32, 1, 8])
    assert [p.concurrency for p in pts] == [1, 8, 32]
    assert [p.requests for p in pts] == [50, 64, 256]  # at least 8 per user
    assert pts[0].tokens_per_s_per_gpu < pts[1].tokens_per_s_per_gpu < pts[2].tokens_per_s_per_gpu
    assert pts[0].tokens_per_s_per_user > pts[1].tokens_per_s_per_user > pts[2].tokens_per_s_per_user
    # one user: throughput is that user's token rate (TTFT aside), interactivity its inverse TPOT
    assert pts[0].tokens_per_s_per_gpu < pts[0].tokens_per_s_per_user


def test_cli_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    code, out, err = run_cli(
        capsys, "serve", str(SCEN), "--set", "serving.requests=40", "--sweep-concurrency", "1,4", "--json"
    )
    assert code == 0, err
    pts = json.loads(out)
    assert [p["concurrency"] for p in pts] == [1, 4]
    code, out, err = run_cli(
        capsys,
        "serve",
        str(SCEN),
        "--set",
        "serving.requests=40",
        "--sweep-concurrency",
        "2",
        "--plot",
        str(png),
    )
    assert code == 0, err
    assert "throughput vs interactivity" in out and png.stat().st_size > 1000
    code, out, err = run_cli(capsys, "serve", str(SCEN), "--sweep-concurrency", "1,x")
    assert code == 2 and "--sweep-concurrency" in err and len(err.strip().splitlines()) == 1


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.floats(0.5, 6.0), seed=st.integers(0, 100))
def test_below_capacity_throughput_equals_the_arrival_rate(rate: float, seed: int) -> None:
    r = run(rate=rate, requests=400, prompt=512, output=64, seed=seed)
    # the steady rate counts completions over the second half of the arrival window: below capacity they
    # match the arrivals of that same window (up to the few requests in flight at its two ends)
    arr = r.log.arrival
    t0, t1 = float(arr.min()), float(arr.max())
    tm = t0 + 0.5 * (t1 - t0)
    empirical = np.count_nonzero((arr > tm) & (arr <= t1)) / (t1 - tm)
    assert r.result.steady_requests_per_s == pytest.approx(empirical, rel=0.12)
    assert not any("saturated" in n for n in r.result.notes)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(util=st.floats(0.14, 0.3), more=st.floats(0.01, 0.3), seed=st.integers(0, 100))
def test_more_kv_memory_never_lowers_throughput(util: float, more: float, seed: int) -> None:
    load = {
        "rate": None,
        "concurrency": 200,
        "requests": 600,
        "prompt": {"dist": "uniform", "low": 500, "high": 3000},
        "output": {"dist": "uniform", "low": 50, "high": 400},
        "seed": seed,
    }
    less = run(**load, memory_utilization=util).result
    bigger = run(**load, memory_utilization=min(util + more, 0.95)).result
    assert bigger.kv_tokens_per_instance["mixed"] >= less.kv_tokens_per_instance["mixed"]
    # up to the drain of a finite closed-loop run: which requests are last to finish moves with the KV size
    # and preemptions, a few per cent of the span at most; beyond that more memory must not cost throughput
    assert bigger.output_tokens_per_s >= less.output_tokens_per_s * 0.97
