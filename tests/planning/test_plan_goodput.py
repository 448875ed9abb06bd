"""The planner's goodput objective (wall-clock time per token with failures) and its ties (layouts within
the winner's prediction interval); docs/planning.md, "Goodput and ties"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simcore.errors import SpecError
from simcore.planning import SearchOptions, plan
from simcore.planning.plan import _mark_ties
from simcore.specs.resolve import scenario_from_dict
from tests.cli_runner import run_cli

OPTS = SearchOptions(max_cp=1, max_micro_batch=2, recompute=["selective"])


def _scenario(**extra: Any) -> Any:
    return scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h100", "gpus": 64, "storage": "llama3-tectonic"},
            "model": {"preset": "gpt3-13b"},
            "training": {"global_batch": 256, "tokens": 1e10},
            "runtime": {"checkpoint": {"mode": "distributed"}},
            "cost": {"price_per_gpu_hour": 2.0},
            **extra,
        }
    )


# one failure per 200 GPU-hours and a 2.5-hour restart: 64 GPUs fail every 3.1 h and lose most of it,
# 32 GPUs every 6.25 h: half the GPUs train faster in wall-clock time
FLAKY = {"reliability": {"mtbf": "200 h", "restart_time": "2.5 h"}}


def test_goodput_objective_ranks_by_wall_clock_time() -> None:
    sc = _scenario(**FLAKY)
    by_time = plan(sc, [32, 64], "time", top=3, options=OPTS, des_top=0)
    by_goodput = plan(sc, [32, 64], "goodput", top=3, options=OPTS, des_top=0)
    assert by_time.top[0]["gpus"] == 64 and by_goodput.top[0]["gpus"] == 32
    tokens = 1e10
    for e in by_goodput.top:
        # the search's value is the re-predicted wall time per token: failure-free time over the goodput
        assert 0 < e["goodput"] < 1
        assert e["objective_value"] * tokens == pytest.approx(e["wall_time_to_train_s"], rel=1e-9)
        assert e["wall_time_to_train_s"] == pytest.approx(e["time_to_train_s"] / e["goodput"], rel=1e-9)
    vals = [e["objective_value"] for e in by_goodput.top]
    assert vals == sorted(vals)
    w64 = min(e["wall_time_to_train_s"] for e in by_time.top if e["gpus"] == 64)
    assert by_goodput.top[0]["wall_time_to_train_s"] < w64


def test_goodput_objective_needs_reliability_and_checkpoints() -> None:
    with pytest.raises(SpecError, match="objective goodput needs"):
        plan(_scenario(), [32], "goodput", options=OPTS, des_top=0)


def test_ties_are_the_runners_up_within_the_winners_interval() -> None:
    entries = [
        {"objective_value": 1.0, "step_time_s": 10.0, "step_time_s_high": 11.0},
        {"objective_value": 1.1, "step_time_s": 11.0, "step_time_s_high": 12.1},  # at the edge: a tie
        {"objective_value": 1.1001, "step_time_s": 11.0, "step_time_s_high": 12.1},
    ]
    _mark_ties(entries)
    assert [e["tie"] for e in entries] == [False, True, False]
    no_interval = [
        {"objective_value": 1.0, "step_time_s": 1.0, "step_time_s_high": None},
        {"objective_value": 1.0},
    ]
    _mark_ties(no_interval)
    assert [e["tie"] for e in no_interval] == [False, False]


def test_plan_entries_carry_the_interval_and_ties() -> None:
    res = plan(_scenario(), [64], "time", top=4, options=OPTS, des_top=0)
    best = res.top[0]
    assert best["step_time_s_low"] < best["step_time_s"] < best["step_time_s_high"]
    factor = best["step_time_s_high"] / best["step_time_s"]
    for e in res.top[1:]:
        assert e["tie"] == (e["objective_value"] <= best["objective_value"] * factor)


def test_cli_plan_goodput_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    sets = ["--set", "reliability.mtbf=200 h", "--set", "reliability.restart_time=2.5 h"]
    args = ["plan", "default", "--gpus", "8", "--top", "2", "--des", "0", "--objective", "goodput"]
    sets += ["--set", "cluster.storage=llama3-tectonic", "--set", "runtime.checkpoint.mode=async"]
    code, out, _ = run_cli(capsys, *args, *sets, "--json")
    assert code == 0
    res = json.loads(out)
    assert res["objective"] == "goodput"
    assert all(0 < e["goodput"] < 1 and "tie" in e for e in res["top"])
    code, out, _ = run_cli(capsys, *args, *sets)
    assert code == 0
    assert "best layouts by goodput" in out and "#2 within #1's prediction interval" in out
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "objective" in err and len(err.strip().splitlines()) == 1
