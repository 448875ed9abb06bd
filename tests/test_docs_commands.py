"""The commands and files that docs/validation.md tells a reader to use exist.

Fast checks only: every ``python -m MODULE`` named in the page is importable and answers ``--help``,
every report of ``python -m simcore.validation REPORT`` is registered and answers ``--help``, every
``simcore COMMAND`` is a registered CLI command, and every trace and scenario path it names is in the
repository. No report is run here (they have their own tests).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "validation.md"


def _code_text() -> str:
    """Inline and fenced code of the page (where commands are written)."""
    text = DOC.read_text(encoding="utf-8")
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(fenced + inline)


def _modules() -> list[str]:
    return sorted(set(re.findall(r"python -m ([\w.]+)", _code_text())))


def _cli_commands() -> list[str]:
    return sorted(set(re.findall(r"(?:^|\s|;)simcore ([a-z][\w-]*)", _code_text(), flags=re.M)))


def _paths() -> list[str]:
    code = _code_text()
    found = set(
        re.findall(
            r"\b((?:traces|tests/data|simcore|docs|notebooks|hardware_specs)/[\w./{},-]+)(?![\w./{},$-])",
            code,
        )
    )
    out: set[str] = set()
    for p in found:
        p = p.rstrip(".,")
        if "$" in p or "{" in p or "*" in p or p.endswith("/NAME.yaml"):
            continue
        out.add(p)
    return sorted(out)


def _reports() -> list[str]:
    """The reports the page names as ``python -m simcore.validation REPORT...`` (or ``a | b | ...``)."""
    named: set[str] = set()
    for args in re.findall(r"python -m simcore\.validation ([a-z |]+)", _code_text()):
        named.update(w for w in re.split(r"[ |]+", args) if w)
    return sorted(named)


def test_the_page_names_commands() -> None:
    assert DOC.is_file()
    assert "steps" in _reports()
    assert "validate" in _cli_commands()
    assert any(p.startswith("tests/data/trace_scenarios/") for p in _paths())


def _entry(module: str) -> object:
    """The module ``python -m`` runs: the package's ``__main__`` or the module itself."""
    mod = importlib.import_module(module)
    if hasattr(mod, "__path__"):
        mod = importlib.import_module(module + ".__main__")
    return mod


@pytest.mark.parametrize("module", _modules())
def test_python_m_module_exists(module: str) -> None:
    main = getattr(_entry(module), "main", None)
    assert callable(main), f"{module} has no main()"


def _help(main: Callable[[list[str]], object], args: list[str]) -> str:
    """What ``main(args + ["--help"])`` prints; it must exit with status 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main([*args, "--help"])
        except SystemExit as e:
            code = e.code
    assert code in (0, None), f"{args} --help exited {code}"
    return out.getvalue()


@pytest.mark.parametrize("module", _modules())
def test_python_m_module_answers_help(module: str) -> None:
    main = _entry(module).main  # type: ignore[attr-defined]
    assert "usage" in _help(main, []).lower()


@pytest.mark.parametrize("report", _reports())
def test_named_validation_report_answers_help(report: str) -> None:
    """``python -m simcore.validation REPORT``: the report is registered and answers ``--help``."""
    from simcore.cli.validation import REPORTS, main

    assert report in REPORTS or report == "all", f"unknown report named: {report}"
    assert "usage" in _help(main, [report]).lower()


@pytest.mark.parametrize("command", _cli_commands())
def test_cli_command_is_registered(command: str) -> None:
    from simcore.cli import main

    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0, f"`simcore {command} --help` exited {exc.value.code}"


@pytest.mark.parametrize("path", _paths())
def test_named_path_exists(path: str) -> None:
    assert (ROOT / path).exists(), f"docs/validation.md names {path}, which is not in the repository"


def test_every_committed_trace_scenario_is_listed() -> None:
    listed = DOC.read_text(encoding="utf-8")
    for sc in sorted((ROOT / "tests" / "data" / "trace_scenarios").glob("*.yaml")):
        assert sc.name in listed, f"docs/validation.md does not list {sc.name}"
