"""``python -m simcore.validation serving``: published engine rows replayed by simcore serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.validation import serving as S

HEADER = (
    "source,system,gpu,num_gpus,model,precision,framework,tp,pp,ep,dp,input_len,output_len,"
    "batch_or_concurrency,metric,value,unit,notes\n"
)
TRT = '"NVIDIA/TensorRT-LLM@x perf-overview",DGX,{gpu},{n},{model},{prec},"TensorRT-LLM (trtllm-bench)",{n},1,,,{isl},{osl},offline max-throughput,total_output_throughput,{value},tok/s,\n'


def _table(tmp_path: Path, *rows: dict[str, object]) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "".join(TRT.format(**r) for r in rows), encoding="utf-8")
    return p


def test_rows_run_with_stated_settings_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "OFFLINE_REQUESTS", 200)
    p = _table(
        tmp_path,
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP8", "isl": 1000, "osl": 1000, "value": 15000},
        {"gpu": "B200 180GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP4", "isl": 1000, "osl": 1000, "value": 30000},
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP4", "isl": 1000, "osl": 1000, "value": 1},
        {"gpu": "H100 SXM 80GB", "n": 4, "model": "Llama 4 Scout", "prec": "FP8", "isl": 128, "osl": 128, "value": 1},
    )  # fmt: skip
    doc = S.report(p)
    h100, b200, h100_fp4, scout = doc["rows"]
    assert h100["predicted"] > 0 and h100["error"] == pytest.approx(h100["predicted"] / 15000 - 1)
    assert h100["settings"]["kv_cache_dtype"] == "fp8" and h100["settings"]["reserve_output_kv"] is True
    # FP4 runs on Blackwell, faster than FP8 on the H100; is refused on the H100 with the reason
    assert b200["precision"] == "fp4" and b200["predicted"] > h100["predicted"]
    assert h100_fp4["predicted"] is None and "FP4 tensor cores" in h100_fp4["problem"]
    assert scout["problem"] == "no simcore preset of Llama 4 Scout"
    assert doc["overall"]["rows"] == 2 and doc["overall"]["published_rows"] == 4
    errs = sorted(abs(r["error"]) for r in (h100, b200))
    assert doc["overall"]["median_abs_error"] == pytest.approx(sum(errs) / 2)
    assert set(doc["groups"]) == {"TensorRT-LLM | H100 SXM 80GB | fp8", "TensorRT-LLM | B200 180GB | fp4"}
    text = S.format_report(doc)
    assert "not run: no simcore preset of Llama 4 Scout" in text and "2 of 4 rows ran" in text


def test_a_longer_published_row_than_the_context_is_reported_not_clipped(tmp_path: Path) -> None:
    row = S.read_rows(
        _table(tmp_path, {"gpu": "H100", "n": 1, "model": "Llama 3 8B", "prec": "FP8", "isl": 9000, "osl": 10, "value": 1})
    )[0]  # fmt: skip
    S.run_row(row)
    assert row.predicted is None and "context of 8192" in (row.problem or "")


def test_cli_serving_bad_table_is_one_line(tmp_path: Path) -> None:
    from simcore.cli.validation import main

    assert main(["serving", "--csv", str(tmp_path / "missing.csv")]) == 2
