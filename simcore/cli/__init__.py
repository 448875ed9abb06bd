"""The ``simcore`` command line (typer + rich).

Each command group lives in its own module under ``simcore/cli/`` and registers itself on ``app``
when imported; ``_COMMANDS`` below says which module registers each command. User errors
(:class:`~simcore.errors.SimcoreError`) print one line and exit with status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

from simcore.cli.common import app, run_app

# The module that registers each command on ``app`` (keep sorted by module). A run that names a command
# imports only its module, and typer builds only its commands; ``--help``, no command or a name not here
# registers them all (docs/architecture.md, Speed).
_COMMANDS = {
    "collective": "simcore.cli.collective",
    "host-trace": "simcore.cli.host_trace",
    "hw": "simcore.cli.hw",
    "op": "simcore.cli.op",
    "plan": "simcore.cli.plan",
    "sweep": "simcore.cli.plan",
    "predict": "simcore.cli.predict",
    "timeline": "simcore.cli.predict",
    "check": "simcore.cli.scenario",
    "schema": "simcore.cli.scenario",
    "scenarios": "simcore.cli.scenario",
    "serve": "simcore.cli.serve",
    "topo": "simcore.cli.topo",
    "calibrate": "simcore.cli.traces",
    "replay": "simcore.cli.traces",
    "validate": "simcore.cli.traces",
}
_COMMAND_MODULES = sorted(set(_COMMANDS.values()))


def _command_of(argv: list[str]) -> str | None:
    """The command an argument list names: its first word after the global options (``--specs DIR``)."""
    args = iter(argv)
    for a in args:
        if a == "--specs":
            next(args, None)
        elif not a.startswith("-"):
            return a
    return None


def _register(argv: list[str] | None = None) -> None:
    """Import the modules that register the command ``argv`` names (all of them without one)."""
    name = None if argv is None else _command_of(argv)
    for mod in [_COMMANDS[name]] if name in _COMMANDS else _COMMAND_MODULES:
        importlib.import_module(mod)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``simcore`` console script."""
    # simcore's arrays are elementwise (no BLAS work worth threads): one OpenBLAS thread spares the
    # thread pool that numpy's import starts (about 0.05 s of CPU per run on 2 cores); an explicit
    # setting wins (docs/architecture.md, Speed)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = argv if argv is not None else sys.argv[1:]
    _register(args)
    code = run_app(args)
    raise SystemExit(code)


__all__ = ["app", "main"]
