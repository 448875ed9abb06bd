"""``python -m simcore.validation steps``: the attention backend a steps set ran, and a planned run's
predictions written down before it runs (``--predict``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from simcore.cli.validation import main
from simcore.validation.steps import attention_backend_for, format_report, validate

REPO = Path(__file__).resolve().parents[2]
PLANNED = REPO / "scenarios" / "compiled-llama" / "planned_steps.csv"


def test_attention_backend_from_the_configs_beside(tmp_path: Path) -> None:
    csv = tmp_path / "steps.csv"
    csv.write_text("mode\n")
    assert attention_backend_for(csv) == "flash"  # nothing recorded: tools/gpt.py's forced flash
    cfg = tmp_path / "steps_configs.json"
    cfg.write_text(json.dumps({"env": {"sdpa": {"force_flash": True}}}))
    assert attention_backend_for(csv) == "flash"
    cfg.write_text(json.dumps({"env": {"sdpa": {"force_flash": False}}}))  # SIMCORE_SDPA=default
    assert attention_backend_for(csv) == "auto"
    # the committed sweeps forced flash
    assert attention_backend_for(REPO / "traces" / "h200" / "compiled_steps.csv.gz") == "flash"


def test_planned_rows_are_predicted_and_match_the_committed_predictions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = validate(PLANNED, predict_only=True)
    assert res["system"] == "hgx-h200" and res["attention_backend"] == "auto"
    assert res["summary"] == {}
    rows = {(r["name"], r["framework"]): r for r in res["rows"]}
    assert len(rows) == 8 and all("measured_s" not in r for r in rows.values())
    for name in ("llama-1b-s8k", "llama-3b-l12-s8k", "llama-8b-l8", "llama-8b-l8-s8k"):
        # inductor's fusion and the kernels' in-step GEMM rate: the compiled step is the faster one
        assert rows[(name, "compiled")]["predicted_s"] < 0.95 * rows[(name, "eager")]["predicted_s"]
        assert rows[(name, "compiled")]["predicted_mem"] < 80 * 2**30  # sized for one H100
    committed = json.loads((PLANNED.parent / "predicted_h200.json").read_text())
    got = {(r["name"], r["framework"]): r["predicted_s"] for r in committed["rows"]}
    # the committed file is what was predicted before the run (never rewritten); later refits of the H200 profile
    # (the per-tensor FP8 family and the kernel-rate block) moved these bf16 steps by < 1e-5 eager and < 0.1 %
    # compiled, so a model change above 0.2 % shows here
    for k, r in rows.items():
        assert r["predicted_s"] == pytest.approx(got[k], rel=2e-3), k
    text = format_report(res)
    assert "llama-8b-l8-s8k" in text
    # without --predict the rows (no measured time) are skipped; with it the CLI prints them
    copy = tmp_path / "planned_steps.csv"
    shutil.copy(PLANNED, copy)
    assert validate(copy)["rows"] == []
    assert main(["steps", str(PLANNED), "--predict"]) == 0
    assert "llama-1b-s8k" in capsys.readouterr().out
