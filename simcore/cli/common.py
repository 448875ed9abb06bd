"""Shared CLI plumbing: the typer app, global options, JSON output and one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simcore.errors import SimcoreError
from simcore.specs.registry import set_user_dirs

app = typer.Typer(
    name="simcore",
    help="Predict step time, throughput, memory, cost and energy of AI training and inference on GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

SpecsOpt = Annotated[
    list[Path] | None,
    typer.Option("--specs", help="Extra spec folder(s) (devices/, links/, systems/, models/, calibration/)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@app.callback()
def _root(
    specs: SpecsOpt = None,
) -> None:
    """simcore command line."""
    set_user_dirs(specs or [])


def emit_json(obj: Any) -> None:
    """Print one JSON object on one line (JSON lines)."""
    sys.stdout.write(json.dumps(obj, default=_default) + "\n")
    sys.stdout.flush()


def _default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if hasattr(o, "model_dump"):
        return o.model_dump()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def fail(message: str) -> None:
    """Print a one-line user error and exit with status 2."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise SystemExit(2)


def run_app(argv: list[str]) -> int:
    """Run the app, turning user errors into one line on stderr and exit status 2."""
    try:
        app(args=argv, prog_name="simcore", standalone_mode=True)
    except SimcoreError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    except SystemExit as e:
        if e.code is None:
            return 0
        return e.code if isinstance(e.code, int) else 2
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    return 0
