"""``simcore calibrate`` says what it is doing on stderr; stdout keeps its report alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.calibration.calibrate import calibrate
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
H100_OPS = REPO / "traces/h100/round117/ops.csv.gz"


def test_calibrate_reports_its_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.yaml"
    code, text, err = run_cli(capsys, "calibrate", str(H100_OPS), "--device", "h100", "--no-comm", "-o", str(out))
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("calibrate: ")]
    assert lines[0] == "calibrate: inputs: 1 op CSV(s), 0 profiler trace(s), 0 collective log(s)"
    assert any("fitting the compute profile for h100 on 1 table(s)" in ln for ln in lines)
    assert "calibrate:" not in text


def test_progress_is_a_callback_and_optional() -> None:
    seen: list[str] = []
    res = calibrate([str(H100_OPS)], "h100", fit_comm_profile=False, progress=seen.append)
    assert res.compute_profile is not None
    assert seen[0].startswith("inputs: 1 op CSV(s)")
    assert len(seen) == 2
