"""End to end: ``--set training.precision=nvfp4`` on every Blackwell system's scenario predicts; on an
H100 scenario it is one line naming the field and a non-zero exit."""

from __future__ import annotations

import pytest

from tests.cli_runner import run_cli


@pytest.mark.parametrize("system", ["dgx-b200", "dgx-b300", "gb200-nvl72", "gb300-nvl72"])
def test_nvfp4_on_blackwell(capsys: pytest.CaptureFixture[str], system: str) -> None:
    code, out, err = run_cli(
        capsys, "predict", "scenarios/llama3-70b-h100.yaml", "--set", f"cluster.system={system}",
        "--set", "training.precision=nvfp4", "--json",
    )
    assert code == 0, err
    assert "nvfp4" in out


def test_nvfp4_on_h100_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "predict", "scenarios/llama3-70b-h100.yaml", "--set", "training.precision=nvfp4")
    assert code != 0
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and "training.precision" in lines[0] and "fp4" in lines[0]
    assert "Traceback" not in err
