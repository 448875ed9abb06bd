"""``python -m simcore.validation hybrid``: every published Nemotron 3 Nano row runs, held out."""

from __future__ import annotations

import csv

import pytest

from simcore.validation.hybrid import PUBLISHED_HYBRID_CSV, compare, report, scenario


def test_rows_become_scenarios_of_their_layout() -> None:
    with open(PUBLISHED_HYBRID_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 20 and all(r["release"] for r in rows)
    h100 = next(r for r in rows if r["system"] == "DGX-H100")
    sc = scenario(h100)
    assert sc["cluster"] == {"system": "hgx-h100", "gpus": 16}
    assert sc["training"]["precision"] == "fp8_current"
    assert sc["training"]["recompute_modules"] == ["layernorm"]
    assert sc["parallel"]["ep"] == 8 and sc["model"]["preset"] == "nemotron3-nano"


def test_every_row_is_predicted() -> None:
    rows = compare()
    assert len(rows) == 20
    for r in rows:
        assert r["error"] is not None, r
        assert r["error"] == pytest.approx(r["predicted"] / r["published"] - 1.0)
    assert "median |error|" in report()
