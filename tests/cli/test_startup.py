"""The command line starts with what its command needs (docs/architecture.md, Speed): every command is
in the table that says which module registers it, and a run imports only that module; ``import simcore``
and ``simcore --help`` load neither numpy nor pydantic. (Start-up times are measured by
benchmarks/bench_predict.py, not here.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcore.cli import _COMMANDS, _command_of

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "pydantic", "yaml", "simpy", "networkx", "matplotlib")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (from the checkout)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_every_command_is_in_the_table() -> None:
    from simcore.cli import _register
    from simcore.cli.common import app

    _register()
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback is not None}
    names |= {g.name for g in app.registered_groups if g.name}
    assert names == set(_COMMANDS)


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["predict", "x.yaml"], "predict"),
        (["--specs", "predict", "hw", "list"], "hw"),
        (["--specs=d", "topo"], "topo"),
        (["--help"], None),
        ([], None),
    ],
)
def test_command_of(argv: list[str], name: str | None) -> None:
    assert _command_of(argv) == name


def test_import_simcore_is_light() -> None:
    loaded = _modules_after("import simcore")
    assert not [m for m in HEAVY if m in loaded]


def test_help_is_light() -> None:
    loaded = _modules_after(
        "import contextlib, io\nfrom simcore.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main(['--help'])"
    )
    assert not [m for m in HEAVY if m in loaded]
    assert "simcore.cli.topo" in loaded  # every command is listed


def test_predict_imports_only_its_command() -> None:
    loaded = _modules_after(
        "import contextlib, io\nfrom simcore.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['predict', 'default', '--json'])"
    )
    assert "simcore.prediction" in loaded
    others = {m for m in set(_COMMANDS.values()) if m != "simcore.cli.predict"}
    assert not others & loaded
    assert not [m for m in ("simpy", "networkx", "matplotlib", "numpy.ma") if m in loaded]


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("4", "4")])
def test_one_blas_thread_unless_set(
    monkeypatch: pytest.MonkeyPatch, given: str | None, expected: str
) -> None:
    from simcore.cli import main

    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == expected
