"""The notebooks in ``notebooks/`` (jupytext py:percent) run as shipped, from any working directory.

The slow test executes each one the way CI does, with the kernel started in an empty temporary folder
(not the repository root, not ``notebooks/``), so a notebook that opens ``traces/...`` or
``scenarios/...`` relative to the working directory fails here. The fast tests check the helper that
finds the checkout (:func:`simcore.specs.registry.checkout_dir`), the ``notebooks`` extra, and that no
notebook hard-codes a working directory.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import tomllib
from pathlib import Path

import jupytext
import nbclient
import nbformat
import pytest

from simcore.errors import SpecError
from simcore.specs.registry import REPO_ENV_VAR, builtin_dir, checkout_dir

reg_mod = importlib.import_module("simcore.specs.registry")
ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))


def _code(path: Path) -> str:
    """The notebook's code cells, joined (markdown cells left out)."""
    nb = jupytext.read(path)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("SIMCORE_SPECS", raising=False)
    monkeypatch.delenv(REPO_ENV_VAR, raising=False)
    # the kernel imports this checkout's simcore (not another install's) and nothing else from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    nb = jupytext.read(path)
    ipynb = tmp_path / f"{path.stem}.ipynb"
    nbformat.write(nb, ipynb)
    nb = nbformat.read(ipynb, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(run_dir)}}
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
    assert not any(run_dir.iterdir()), "a notebook wrote into its working directory"


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no .py notebooks"
    names = {p.stem for p in NOTEBOOKS}
    assert "06_serving" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_assumes_no_working_directory(path: Path) -> None:
    """Data is found through the package (built-in scenario names, ``checkout_dir()``), never through a
    path relative to the working directory, and nothing changes directory."""
    code = _code(path)
    ast.parse(code)
    assert "chdir" not in code
    relative = re.findall(r"""["'](?:\./)?(?:traces|scenarios|tests|hardware_specs)/[^"']*["']""", code)
    assert not relative, f"{path.name} opens {relative[0]} relative to the working directory"
    assert "jupytext" in path.read_text().split("# ---", 2)[1], f"{path.name} lacks the jupytext header"


def test_notebooks_extra_runs_jupytext_execute() -> None:
    """``pip install '.[notebooks]'`` brings what ``jupytext --execute`` and nbmake need."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in extra["notebooks"]}
    assert {"jupytext", "nbconvert", "nbclient", "nbformat", "ipykernel", "nbmake"} <= names


def test_checkout_dir_from_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPO_ENV_VAR, raising=False)
    assert checkout_dir() == ROOT
    assert builtin_dir("traces") == ROOT / "traces"


def test_checkout_dir_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    monkeypatch.setenv(REPO_ENV_VAR, str(tmp_path))
    assert checkout_dir() == tmp_path.resolve()
    monkeypatch.setenv(REPO_ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(SpecError, match=rf"{REPO_ENV_VAR}=.*nope is not a simcore checkout"):
        checkout_dir()


def _installed(monkeypatch: pytest.MonkeyPatch, site: Path, direct_url: dict[str, object] | None) -> None:
    """Pretend simcore is a non-editable install in ``site`` made from ``direct_url``."""
    pkg = site / "simcore"
    (pkg / "_data" / "hardware_specs").mkdir(parents=True)
    monkeypatch.setattr(reg_mod, "_PKG", pkg)
    monkeypatch.delenv(REPO_ENV_VAR, raising=False)

    class Dist:
        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return None if direct_url is None else json.dumps(direct_url)

    import importlib.metadata  # (the registry imports it only when asked where it was installed from)

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())


def test_checkout_dir_of_a_non_editable_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``pip install .`` records the folder it read (PEP 610): the traces are found there."""
    clone = tmp_path / "my clone"
    (clone / "traces").mkdir(parents=True)
    _installed(monkeypatch, tmp_path / "site", {"url": clone.as_uri(), "dir_info": {}})
    assert checkout_dir() == clone
    assert builtin_dir("traces") == clone / "traces"
    assert builtin_dir() == tmp_path / "site" / "simcore" / "_data" / "hardware_specs"


@pytest.mark.parametrize(
    "direct_url",
    [None, {"url": "https://example.org/simcore-0.1.0.whl", "archive_info": {}}, {"url": "file:///gone"}],
    ids=["none", "from-an-archive", "clone-gone"],
)
def test_checkout_dir_not_found_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, direct_url: dict[str, object] | None
) -> None:
    _installed(monkeypatch, tmp_path / "site", direct_url)
    with pytest.raises(SpecError, match=f"checkout .* not found.*set {REPO_ENV_VAR}"):
        checkout_dir()
    with pytest.raises(SpecError, match=f"traces/ folder not found.*{REPO_ENV_VAR}"):
        builtin_dir("traces")
