"""The ``simcore`` command line (typer + rich).

Each command group lives in its own module under ``simcore/cli/`` and registers itself on ``app``
when imported; the list of modules is ``_COMMAND_MODULES`` below. User errors
(:class:`~simcore.errors.SimcoreError`) print one line and exit with status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

from simcore.cli.common import app, run_app

# Modules that register commands on ``app`` (one line each; keep sorted).
_COMMAND_MODULES = [
    "simcore.cli.collective",
    "simcore.cli.host_trace",
    "simcore.cli.hw",
    "simcore.cli.predict",
    "simcore.cli.op",
    "simcore.cli.plan",
    "simcore.cli.scenario",
    "simcore.cli.serve",
    "simcore.cli.topo",
    "simcore.cli.traces",
]


def _register() -> None:
    for mod in _COMMAND_MODULES:
        importlib.import_module(mod)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``simcore`` console script."""
    _register()
    code = run_app(argv if argv is not None else sys.argv[1:])
    raise SystemExit(code)


__all__ = ["app", "main"]
