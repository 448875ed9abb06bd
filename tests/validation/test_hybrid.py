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
    assert sc["training"]["grad_reduce_in_fp32"] is False  # perf_recipes/_common.py _benchmark_common


def test_bf16_gradients_halve_the_gradient_memory() -> None:
    """The megatron stack's default (fp32 gradients, the pre-training recipes') against the performance
    recipes' bf16 gradients the rows are run with."""
    from simcore.prediction import predict

    with open(PUBLISHED_HYBRID_CSV, newline="") as fh:
        sc = scenario(next(csv.DictReader(fh)))
    bf16 = predict(sc).memory_breakdown["gradients"]
    sc["training"].pop("grad_reduce_in_fp32")
    res = predict(sc)
    assert res.memory_breakdown["gradients"] == pytest.approx(2 * bf16)
    assert "training.grad_reduce_in_fp32=true" in " ".join(res.notes)


def test_every_row_is_predicted() -> None:
    rows = compare()
    assert len(rows) == 20
    for r in rows:
        assert r["error"] is not None, r
        assert r["error"] == pytest.approx(r["predicted"] / r["published"] - 1.0)
    assert "median |error|" in report()
