"""Execute every notebook in ``notebooks/`` (jupytext py:percent) the way CI does."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbclient
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("SIMCORE_SPECS", raising=False)
    nb = jupytext.read(path)
    ipynb = tmp_path / f"{path.stem}.ipynb"
    nbformat.write(nb, ipynb)
    nb = nbformat.read(ipynb, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no .py notebooks"
