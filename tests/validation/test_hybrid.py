"""``python -m simcore.validation hybrid``: the Megatron-Bridge table's Nemotron 3 Nano rows run, held out, built
as ``python -m simcore.validation published`` builds them (one table)."""

from __future__ import annotations

import pytest

from simcore.validation.hybrid import MBRIDGE_CSV, compare, report
from simcore.validation.published import load_published, predict_rows


def _nano() -> list:  # type: ignore[type-arg]
    return [r for r in load_published(MBRIDGE_CSV) if r.model == "Nemotron_3_Nano"]


def test_the_nano_rows_use_the_hybrid_preset_and_the_recipes_settings() -> None:
    rows = _nano()
    assert len(rows) == 20 and all(r.problem is None and r.release for r in rows)
    h100 = next(r for r in rows if r.system == "hgx-h100")
    sc = h100.scenario
    assert sc["cluster"] == {"system": "hgx-h100", "gpus": 16}
    assert sc["model"]["hybrid_pattern"].count("M") == 23 and sc["model"]["mamba"]["heads"] == 64
    assert sc["training"]["precision"] == "fp8_current"
    assert sc["training"]["recompute"] == "selective" and sc["training"]["recompute_modules"] == ["layernorm"]
    assert sc["parallel"]["ep"] == 8
    assert sc["training"]["grad_reduce_in_fp32"] is False  # perf_recipes/_common.py _benchmark_common
    gb = next(r for r in rows if r.system == "gb300-nvl72").scenario
    assert gb["training"]["recompute"] == "none" and gb["training"]["precision"] == "mxfp8"


def test_bf16_gradients_halve_the_gradient_memory() -> None:
    """The megatron stack's default (fp32 gradients, the pre-training recipes') against the performance
    recipes' bf16 gradients the rows are run with."""
    from simcore.prediction import predict

    sc = _nano()[0].scenario
    bf16 = predict(sc).memory_breakdown["gradients"]
    sc = {**sc, "training": {k: v for k, v in sc["training"].items() if k != "grad_reduce_in_fp32"}}
    res = predict(sc)
    assert res.memory_breakdown["gradients"] == pytest.approx(2 * bf16)


def test_every_row_is_predicted_and_equals_the_published_report() -> None:
    rows = compare()
    assert len(rows) == 20
    pub = {(r.release, r.system): r for r in predict_rows(_nano())}
    for r in rows:
        assert r["error"] is not None, r
        assert r["error"] == pytest.approx(r["predicted"] / r["published"] - 1.0)
        assert r["predicted"] == pytest.approx(pub[("Megatron-Bridge " + r["release"], r["system"])].predicted)
    assert "median |error|" in report()
