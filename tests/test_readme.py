"""README's promises: its accuracy table is docs/accuracy.md's (whose multi-node all-reduce row is what
``python -m simcore.validation comm`` reports), and each placeholder of the tour (``TRACE.json``,
``SCENARIO``, ``MY_SWEEPS/``) has a runnable example beside it, on committed files."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
ACCURACY = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8")


def _rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading``."""
    part = text.split(heading, 1)[1]
    rows: list[list[str]] = []
    for line in part.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def test_readme_accuracy_table_is_docs_accuracy() -> None:
    readme = [r[:3] for r in _rows(README, "## How accurate")]
    source = [r[:3] for r in _rows(ACCURACY, "# How accurate is simcore")]
    assert readme and readme == source


def test_multi_node_all_reduce_rows_are_the_comm_reports() -> None:
    from simcore.calibration.fit_comm import published_check

    multi = sorted(
        (r for r in published_check() if r["nodes"] > 1 and r["nbytes"] >= 256e6), key=lambda r: r["nodes"]
    )
    assert [r["nodes"] for r in multi] == [2, 4]
    shown = " / ".join(f"{100 * r['error']:+.0f} %" for r in multi)
    worst = f"{100 * max(abs(r['error']) for r in multi):.0f} %"
    for table in (_rows(README, "## How accurate"), _rows(ACCURACY, "# How accurate is simcore")):
        row = next(r for r in table if "multi-node all-reduce" in r[0])
        assert row[1].startswith(shown) and row[2] == worst, (row, shown, worst)


def _tour() -> list[str]:
    block = README.split("## A tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [
        line.split("  #", 1)[0].strip()
        for line in block.splitlines()
        if line.startswith(("simcore", "python"))
    ]


@pytest.mark.parametrize("placeholder", ["TRACE.json", "SCENARIO", "MY_SWEEPS/", "MY_TRACE.json"])
def test_each_placeholder_has_an_example_on_committed_files(placeholder: str) -> None:
    lines = _tour()
    at = [i for i, line in enumerate(lines) if placeholder in line.split()]
    assert at, placeholder
    for i in at:
        cmd = lines[i].split()[:2]
        example = lines[i + 1]
        assert example.split()[:2] == cmd, (lines[i], example)  # the same command, next line
        paths = [a for a in shlex.split(example) if "/" in a and not a.startswith("-")]
        assert paths and all((ROOT / a).exists() for a in paths), example


def test_the_validate_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    example = next(line for line in _tour() if line.startswith("simcore validate traces/"))
    code, out, err = run_cli(capsys, *shlex.split(example)[1:], "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert abs(rep["predicted_step_time_s"] / rep["measured_step_time_s"] - 1) < 0.10
    assert re.search(r"h200", rep["device"], re.I)
