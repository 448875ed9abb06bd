"""Every scenario's prediction and the validation reports stay as recorded (``tests/golden/record.py``).

A refactoring must leave these unchanged; a change of behaviour re-records them in the same commit and
says why.
"""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import pytest

from tests.golden.record import PREDICTIONS, VALIDATION, predict_one, scenario_files, validation_output

REL_TOL = 1e-9
ABS_TOL = 1e-15


def _differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` departs from ``expected``: numbers beyond floating-point noise, anything else at all."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{path}/{k}: missing" for k in expected if k not in actual]
        out += [f"{path}/{k}: new" for k in actual if k not in expected]
        for k in expected.keys() & actual.keys():
            out += _differences(expected[k], actual[k], f"{path}/{k}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} items, now {len(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in _differences(e, a, f"{path}[{i}]")]
    if isinstance(expected, float | int) and isinstance(actual, float | int) and not isinstance(expected, bool):
        if math.isclose(expected, actual, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return []
        return [f"{path}: {expected!r} -> {actual!r}"]
    return [] if expected == actual else [f"{path}: {expected!r} -> {actual!r}"]


def test_differences_sees_a_change() -> None:
    assert _differences({"a": [1.0, "x"]}, {"a": [1.0 + 1e-13, "x"]}) == []
    assert _differences({"a": [1.0, "x"]}, {"a": [1.001, "x"]}) == ["/a[0]: 1.0 -> 1.001"]
    assert _differences({"a": 1}, {"b": 1}) == ["/a: missing", "/b: new"]


def test_every_scenario_predicts_as_recorded() -> None:
    with gzip.open(PREDICTIONS, "rt", encoding="utf-8") as f:
        golden = json.load(f)
    files = scenario_files()
    assert sorted(golden) == sorted(str(p) for p in files), "scenario set changed: re-record the golden file"
    failures = []
    for rel in files:
        diffs = _differences(golden[str(rel)], predict_one(rel))
        if diffs:
            failures.append(f"{rel}: " + "; ".join(diffs[:3]))
    assert not failures, f"{len(failures)} scenarios changed:\n" + "\n".join(failures[:20])


@pytest.mark.slow
def test_validation_reports_as_recorded() -> None:
    with gzip.open(VALIDATION, "rt", encoding="utf-8") as f:
        golden = f.read().splitlines()
    now = validation_output().splitlines()
    changed = [f"{i}: {g!r} -> {n!r}" for i, (g, n) in enumerate(zip(golden, now, strict=False)) if g != n]
    assert len(golden) == len(now) and not changed, "\n".join(changed[:30])
