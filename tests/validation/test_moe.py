"""The measured MoE layer (``traces/h200/moe.csv.gz``) against simcore's MoE lowering (a diagnostic report)."""

from __future__ import annotations

import pytest

from simcore.cli.validation import main as validation
from simcore.validation import moe


def test_moe_report_prices_every_measured_layer_and_the_grouped_gemms() -> None:
    rows = moe.compare()
    assert len(rows) == 18  # 3 shapes x 6 token counts
    assert all(r["pred_fwd_bwd_s"] > r["pred_fwd_s"] > 0 for r in rows)
    traced = [r for r in rows if "grouped_gemm_s" in r]
    assert {r["layer"] for r in traced} == {"qwen3-30b-a3b", "deepseek-v3-ep8-rank", "mixtral-8x7b"}
    for r in traced:  # the expert GEMMs as batched GEMMs of the mean load (traces/README.md)
        assert r["pred_expert_gemm_s"] == pytest.approx(r["grouped_gemm_s"], rel=0.15)


def test_moe_cli_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert validation(["moe"]) == 0
    assert "grouped GEMM" in capsys.readouterr().out


def test_moe_cli_bad_file_is_one_line(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert validation(["moe", str(tmp_path / "missing.csv")]) == 2
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    assert validation(["moe", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not a tools/bench_moe.py CSV" in err
