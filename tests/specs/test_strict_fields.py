"""Scenario fields are read strictly: counts are integers (not booleans or strings), a kind's section is
a mapping (not null)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcore.errors import SpecError
from simcore.specs.resolve import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def _base() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "scenarios" / "default.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _with(path: str, value: Any, data: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(data if data is not None else _base())
    node = out
    *parents, last = path.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        ("training.micro_batch", True, "expected an integer, got true"),
        ("training.micro_batch", False, "expected an integer, got false"),
        ("training.micro_batch", "8", "expected an integer, got the string '8'"),
        ("training.micro_batch", 2.5, "expected an integer, got 2.5"),
        ("parallel.tp", True, "expected an integer"),
        ("parallel.zero", True, "expected an integer, got true"),
        ("cluster.gpus", "8", "expected an integer"),
        ("model.layers", True, "expected an integer"),
    ],
)
def test_counts_are_integers(path: str, value: Any, words: str) -> None:
    with pytest.raises(SpecError) as e:
        scenario_from_dict(_with(path, value), file="s.yaml")
    assert str(e.value).startswith(f"s.yaml: {path}: ")
    assert words in str(e.value)


def test_integral_float_is_an_integer() -> None:
    sc = scenario_from_dict(_with("training.micro_batch", 2.0))
    assert sc.training is not None
    assert sc.training.micro_batch == 2
    assert isinstance(sc.training.micro_batch, int)


@pytest.mark.parametrize("section", ["training", "inference", "serving"])
def test_null_section_is_an_error(section: str) -> None:
    data = _base()
    data[section] = None
    with pytest.raises(SpecError, match=rf"^s\.yaml: {section}: expected a section of fields, got null"):
        scenario_from_dict(data, file="s.yaml")


def test_absent_section_still_defaults() -> None:
    data = _base()
    data.pop("training", None)
    sc = scenario_from_dict(data)
    assert sc.training is not None
    assert sc.training.micro_batch == 1
