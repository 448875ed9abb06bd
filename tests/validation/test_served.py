"""Served models under load (issue 41): the summary of a run, the harness's requests against simcore's own, the
comparison on a small synthetic measurement, the CLI, and tools/bench_serving.py's plan (no torch, no GPU)."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.serving.sim import simulate
from simcore.serving.spec import load_serving
from simcore.validation import served as V

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench_serving.py"
REF = V.SERVED_DIR / "served-ref-poisson-fixed.yaml"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("simcore_tools_bench_serving", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _bench()


def test_summarize_by_hand() -> None:
    r = V.Requests(
        arrival=np.array([0.0, 1.0, 2.0]),
        first=np.array([0.5, 1.25, 2.1]),
        finish=np.array([1.5, 2.25, 4.0]),
        prompt=np.array([10, 10, 10]),
        output=np.array([11, 1, 20]),
    )
    s = V.summarize(r)
    assert s["ttft_p50"] == pytest.approx(0.25)  # TTFTs 0.5, 0.25, 0.1
    assert s["ttft_p99"] == pytest.approx(0.25 + 0.98 * 0.25)
    # TPOT: (1.5 - 0.5) / 10 and (4.0 - 2.1) / 19; a single output token has none
    assert s["tpot_p50"] == pytest.approx(0.1)
    assert s["requests_per_s"] == pytest.approx(3 / 4.0)
    assert s["output_tokens_per_s"] == pytest.approx(32 / 4.0)
    assert math.isnan(s["steady_requests_per_s"])  # fewer than 20 requests


@settings(max_examples=25, deadline=None)
@given(k=st.floats(0.01, 100.0), seed=st.integers(0, 2**16))
def test_summary_scales_with_time(k: float, seed: int) -> None:
    """Every time multiplied by k: latencies by k, throughputs by 1 / k."""
    rng = np.random.default_rng(seed)
    a = np.sort(rng.uniform(0, 10, 30))
    first = a + rng.uniform(0.01, 1, 30)
    r = V.Requests(
        a, first, first + rng.uniform(0.1, 5, 30), rng.integers(1, 99, 30), rng.integers(2, 99, 30)
    )
    s = V.summarize(r)
    t = V.summarize(V.Requests(a * k, first * k, r.finish * k, r.prompt, r.output))
    for key in ("ttft_p50", "ttft_p99", "tpot_p90"):
        assert t[key] == pytest.approx(s[key] * k, rel=1e-9)
    for key in ("requests_per_s", "output_tokens_per_s", "steady_requests_per_s"):
        assert t[key] == pytest.approx(s[key] / k, rel=1e-9)


def test_unfinished_requests_do_not_count() -> None:
    r = V.Requests(np.array([0.0, 0.0]), np.array([1.0, np.nan]), np.array([2.0, np.nan]), np.array([5, 5]),
                   np.array([3, 3]))  # fmt: skip
    s = V.summarize(r)
    assert s["finished"] == 1 and s["requests_per_s"] == pytest.approx(0.5)


@pytest.mark.parametrize("path", sorted(V.SERVED_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_harness_draws_simcores_requests(path: Path) -> None:
    """tools/bench_serving.py serves exactly the requests simcore simulates at a rate."""
    sc, spec = load_serving(path)
    raw = bench.load_scenarios(V.SERVED_DIR, bench.ENGINES)
    sv = next(s for s in raw if s["name"] == sc.name)["serving"]
    for rate in (3.0, 50.0):
        log = simulate(sc, spec.model_copy(update={"rate": rate, "requests": 40})).log
        a, p, o = bench.workload({**sv, "requests": 40}, sc.model.seq_len, rate)
        assert (
            np.array_equal(log.arrival, a) and np.array_equal(log.prompt, p) and np.array_equal(log.output, o)
        )


def test_harness_refuses_requests_longer_than_the_context() -> None:
    with pytest.raises(SystemExit, match="exceed seq_len"):
        bench.workload({"prompt": 100, "output": 30, "requests": 3}, 128, 1.0)


def test_committed_predictions_cover_every_scenario() -> None:
    doc = json.loads((V.SERVED_DIR / "predicted.json").read_text())["scenarios"]
    for path in V.scenario_files():
        sc, _ = load_serving(path)
        e = doc[sc.name]
        assert e["rates"] == [float(f"{x * e['capacity_rps']:.3g}") for x in V.LOADS]
        for system in V.SYSTEMS:
            assert [r["rate"] for r in e[system]["runs"]] == e["rates"]


def _write_measurement(
    folder: Path, runs: dict[str, V.Requests], rates: dict[str, float], scale: float
) -> None:
    """A measurement folder in tools/bench_serving.py's layout; every time multiplied by ``scale``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "served_manifest.json").write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "runs": []}))
    with gzip.open(folder / "served_reference.csv.gz", "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench.COLS)
        w.writeheader()
        for run, r in runs.items():
            for i in range(r.arrival.size):
                w.writerow({"scenario": "served-ref-poisson-fixed", "run": run, "offered_rate": rates[run],
                            "request": i, "arrival_s": r.arrival[i] * scale, "first_token_s": r.first[i] * scale,
                            "finish_s": r.finish[i] * scale, "prompt_len": r.prompt[i], "output_len": r.output[i],
                            "generated": r.output[i]})  # fmt: skip


@pytest.fixture(scope="module")
def synthetic() -> dict[str, V.Requests]:
    """simcore's own simulation of a 24-request burst and of 30 requests at 40/s, as if measured."""
    sc, spec = load_serving(REF)
    burst = simulate(sc, spec.model_copy(update={"requests": 24})).log
    at40 = simulate(sc, spec.model_copy(update={"rate": 40.0, "requests": 30})).log
    return {
        "probe": V.simulate_requests(sc, spec, np.zeros(24), burst.prompt, burst.output),
        "r0": V.Requests(at40.arrival, at40.first_token, at40.finish, at40.prompt, at40.output),
    }


def test_compare_a_measurement_that_is_the_prediction(
    tmp_path: Path, synthetic: dict[str, V.Requests]
) -> None:
    _write_measurement(tmp_path, synthetic, {"probe": math.inf, "r0": 40.0}, 1.0)
    res = {s["scenario"]: s for s in V.compare(data=tmp_path)}
    assert res["served-hf-poisson-fixed"] == {
        "scenario": "served-hf-poisson-fixed",
        "status": "no measurement yet",
    }
    s = res["served-ref-poisson-fixed"]
    assert s["system"] == "hgx-h100" and [r["run"] for r in s["runs"]] == ["probe", "r0"]
    for r in s["runs"]:
        for k in ("ttft_p50", "ttft_p99", "tpot_p50", "requests_per_s", "output_tokens_per_s"):
            assert r["predicted"][k] == pytest.approx(r["measured"][k], rel=1e-6), (r["run"], k)
    assert s["saturation"]["error"] == pytest.approx(0.0, abs=1e-6)


def test_compare_a_slower_measurement(tmp_path: Path, synthetic: dict[str, V.Requests]) -> None:
    """Measured twice as slow (every time doubled): the burst's predicted rate is 2x the measured one."""
    _write_measurement(tmp_path, {"probe": synthetic["probe"]}, {"probe": math.inf}, 2.0)
    (s,) = [x for x in V.compare(data=tmp_path) if x["status"] == "measured"]
    assert s["saturation"]["error"] == pytest.approx(1.0, rel=1e-6)
    text = V.format_report([s])
    assert "saturation rate (burst)" in text and "+100.0%" in text


def test_compare_a_run_stopped_at_its_timeout(tmp_path: Path, synthetic: dict[str, V.Requests]) -> None:
    """The harness stopped waiting before the burst's last requests finished (``short``, their rows without times):
    the simulation is cut at the same wall time, so the run it is compared with is the one the rows record."""
    r = synthetic["probe"]
    end = float(r.finish.max())
    cut = 0.5 * (end + float(r.finish[r.finish < end].max()))  # the requests of the last step still running
    rows = V.cut_at(r, cut)
    left = r.finish == end
    assert np.isnan(rows.first[left]).all() and np.isnan(rows.finish[left]).all()
    assert np.isfinite(rows.finish).sum() == 24 - left.sum() > 0
    _write_measurement(tmp_path, {"probe": rows}, {"probe": math.inf}, 1.0)
    entry = {"scenario": "served-ref-poisson-fixed", "run": "probe", "wall_s": cut, "short": int(left.sum())}
    (tmp_path / "served_manifest.json").write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "runs": [entry]}))
    assert V.cut_time({"runs": [entry]}, "served-ref-poisson-fixed", "probe") == cut
    assert V.cut_time({"runs": [{**entry, "short": 0}]}, "served-ref-poisson-fixed", "probe") is None
    (s,) = [x for x in V.compare(data=tmp_path) if x["status"] == "measured"]
    (probe,) = s["runs"]
    assert probe["cut_s"] == cut and probe["predicted"]["finished"] == 24 - left.sum()
    assert s["saturation"]["error"] == pytest.approx(0.0, abs=1e-6)


def test_cli_a_folder_without_measurements_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "simcore.validation", "served", "--data", str(V.SERVED_DIR)],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert (
        out.returncode == 2
        and out.stderr.strip().startswith("error: ")
        and "served_manifest.json" in out.stderr
    )
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_prints_the_comparison(tmp_path: Path, synthetic: dict[str, V.Requests]) -> None:
    _write_measurement(tmp_path, synthetic, {"probe": math.inf, "r0": 40.0}, 1.0)
    out = subprocess.run([sys.executable, "-m", "simcore.validation", "served", "--data", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout  # fmt: skip
    assert "served-hf-bursty-lognormal: no measurement yet" in out
    assert "served-ref-poisson-fixed (reference engine, NVIDIA H100 80GB HBM3" in out
    assert "roofline" in out and "(+0.0%)" in out


def test_choose_rates() -> None:
    committed = [10.0, 20.0, 30.0, 36.0, 48.0]
    loads = list(V.LOADS)
    assert bench.choose_rates(committed, loads, 40.0, "auto") == (committed, "committed")
    rates, source = bench.choose_rates(committed, loads, 100.0, "auto")  # committed never saturate
    assert source == "probe" and rates == [25.0, 50.0, 75.0, 90.0, 120.0]
    assert bench.choose_rates(committed, loads, 100.0, "committed") == (committed, "committed")
    assert bench.choose_rates(committed, loads, 40.0, "probe")[1] == "probe"


def test_run_sizes_fit_their_slot() -> None:
    assert bench.run_requests(400, 10.0, 40.0, 20.0, 40) == 200  # 20 s of arrivals at 10/s
    assert bench.run_requests(400, 100.0, 40.0, 20.0, 40) == 400  # saturated: 20 s at 40/s completed, capped
    assert bench.run_requests(400, 1.0, 40.0, 20.0, 40) == 40  # the floor


def test_dry_run_prints_the_plan_without_torch(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--out", str(tmp_path), "--dry-run", "--budget-s", "300"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout  # fmt: skip
    assert "estimated GPU time" in out and "budget 300 s" in out
    for path in V.scenario_files():
        assert path.stem in out
    assert not list(tmp_path.iterdir())
