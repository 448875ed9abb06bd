"""--set overrides and scenario-level checks."""

from pathlib import Path

import pytest

from simcore.cost import busy_fraction
from simcore.errors import SpecError
from simcore.specs.resolve import load_scenario


def test_set_into_an_empty_section(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(
        "kind: training\ncluster: {system: hgx-h200, gpus: 1}\nmodel: {preset: gpt2-small}\ntraining:\n"
    )
    sc = load_scenario(p, ["training.micro_batch=4", "parallel.tp=1"])
    assert sc.training is not None and sc.training.micro_batch == 4


def test_serving_and_mixed_sections_rejected(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("kind: serving\ncluster: {system: hgx-h200, gpus: 1}\nmodel: {preset: gpt2-small}\n")
    with pytest.raises(SpecError, match="serving"):
        load_scenario(p)  # a serving scenario needs its serving section
    p.write_text(
        "kind: inference\ncluster: {system: hgx-h200, gpus: 1}\nmodel: {preset: gpt2-small}\n"
        "training: {micro_batch: 2}\n"
    )
    with pytest.raises(SpecError, match="inference"):
        load_scenario(p)


def test_gpus_must_spread_evenly_over_nodes(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(
        "kind: training\ncluster: {system: hgx-h200, nodes: 2, gpus: 9}\nmodel: {preset: gpt2-small}\n"
    )
    with pytest.raises(SpecError, match="evenly"):
        load_scenario(p)


def test_waiting_for_the_host_is_not_busy() -> None:
    bd = {"gemm": 1.0, "host_overhead": 1.0, "tp_comm": 1.0, "pipeline_bubble": 1.0}
    assert busy_fraction(bd, 4.0) == pytest.approx(0.25)
