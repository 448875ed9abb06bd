"""Shared CLI plumbing: the typer app, global options, JSON output, one-line errors and output paths.

Every message that carries user or library text goes through :func:`esc` before rich prints it, so
brackets survive (``pip install 'simcore[dask]'``, ``runs/[dask]/x.yaml``) instead of being read as
rich markup. Every command that writes a file checks its path first with :func:`output_file`, before
any work, so a typo in ``-o`` costs one line and exit status 2, not a traceback after a long run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simcore import __version__
from simcore.errors import SimcoreError

app = typer.Typer(
    name="simcore",
    help="Predict step time, throughput, memory, cost and energy of AI training and inference on GPU "
    "clusters.\n\nStart with simcore predict (the built-in default scenario); simcore scenarios lists "
    "the built-in scenarios and simcore hw list the hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# (no :emoji: codes: values are printed literally, and rich's emoji table costs start-up time)
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)

SpecsOpt = Annotated[
    list[Path] | None,
    typer.Option("--specs", help="Extra spec folder(s) (devices/, links/, systems/, models/, calibration/)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

TRACE_FORMATS = (".json", ".json.gz")
"""Suffixes of Chrome/Perfetto trace files simcore writes."""
YAML_FORMATS = (".yaml", ".yml")
"""Suffixes of the YAML files simcore writes (calibration profiles)."""
JSON_FORMATS = (".json",)


def _show_version(value: bool) -> None:
    if value:
        console.print(f"simcore {__version__}", highlight=False, markup=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    specs: SpecsOpt = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """simcore command line."""
    # (the registry is imported only when needed: a run without --specs resets what an earlier
    # in-process run set, if any)
    if specs or "simcore.specs.registry" in sys.modules:
        from simcore.specs.registry import set_user_dirs

        set_user_dirs(specs or [])


def _flags_without_type() -> None:
    """Show on/off flags in ``--help`` as ``--json``, not ``--json <bool>``.

    typer's rich help prints a value type after every option, flags included, as if ``--json`` took a
    value; click's plain help (and older typer) prints none for flags. The type column stays for
    options that take a value.
    """
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - other typer layouts print flags without a type
        return
    orig = getattr(TyperOption, "display_type_rich", None)
    if orig is None or getattr(orig, "_simcore_flags", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False):
            return None
        result: str | None = orig(self, ctx)
        return result

    display_type_rich._simcore_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_type()


def esc(text: object) -> str:
    """``text`` as rich prints it literally (brackets are not markup)."""
    return escape(str(text))


def note(message: object) -> None:
    """Print ``note: MESSAGE`` (the message printed literally)."""
    console.print(f"[yellow]note:[/] {esc(message)}")


def say(message: object) -> None:
    """Print ``message`` literally on one logical line (a path in it is never broken across lines)."""
    console.print(esc(message), soft_wrap=True)


def add_row(table: Table, *cells: object) -> None:
    """Add a row whose cells are printed literally (no rich markup in values, names or paths)."""
    table.add_row(*(esc(c) for c in cells))


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


def _print_error(message: object) -> None:
    err_console.print(f"[bold red]error:[/] {esc(message)}", highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Print a one-line user error and exit with status 2."""
    _print_error(message)
    raise SystemExit(2)


def _one_of(items: Sequence[str]) -> str:
    """``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _has_format(name: str, formats: Sequence[str]) -> bool:
    low = name.lower()
    return any(low.endswith(f) and len(low) > len(f) for f in formats)


def output_file(
    path: Path | None,
    option: str,
    formats: Sequence[str] | None = None,
    *,
    make_parents: bool = False,
) -> Path | None:
    """Check an output path before any work, so that writing it later cannot fail on the path.

    ``formats``: the suffixes the command writes (``(".json", ".json.gz")``; ``None`` for any name).
    The path must not be a folder; its suffix must be one of ``formats``; its folder must exist (or be
    created, with ``make_parents``, once the rest checks out), be a folder and be writable; an existing
    file must be writable.
    Anything else raises a :class:`~simcore.errors.SimcoreError` naming the option and the path.
    """
    if path is None:
        return None
    where = f"{option} {path}"
    if not str(path).strip():
        raise SimcoreError("empty file name", field=option)
    if path.is_dir():
        raise SimcoreError("is a folder; give a file name", field=where)
    if formats is not None and not _has_format(path.name, formats):
        given = "".join(path.suffixes[-2:]) or "no suffix"
        raise SimcoreError(f"unsupported format ({given}); use {_one_of(formats)}", field=where)
    parent = path.parent
    if not parent.exists():
        if not make_parents:
            raise SimcoreError(f"folder {parent} does not exist", field=where)
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SimcoreError(f"cannot create folder {parent}: {e.strerror or e}", field=where) from None
    elif not parent.is_dir():
        raise SimcoreError(f"{parent} is not a folder", field=where)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SimcoreError(f"cannot write in folder {parent} (permission denied)", field=where)
    if path.exists() and not os.access(path, os.W_OK):
        raise SimcoreError("cannot overwrite the file (permission denied)", field=where)
    return path


def image_file(path: Path | None, option: str) -> Path | None:
    """:func:`output_file` for a figure: the formats are those matplotlib can write (png, svg, pdf, ...)."""
    if path is None:
        return None
    from simcore.report.plots import image_formats

    return output_file(path, option, ["." + f for f in image_formats()])


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn an OS error while writing ``path`` (disk full, removed folder) into one user error line."""
    try:
        yield
    except OSError as e:
        raise SimcoreError(f"cannot write: {e.strerror or e}", field=f"{option} {path}") from None


@contextmanager
def of_scenario(path: str) -> Iterator[None]:
    """Work on the scenario file ``path``: a user error raised by the model code (a value the file's
    validation passed but the prediction cannot honour) that names no file is re-raised naming ``path``."""
    try:
        yield
    except SimcoreError as e:
        if e.file is not None:
            raise
        from simcore.specs.resolve import find_scenario

        raise type(e)(e.problem, file=str(find_scenario(path)), field=e.field) from None


def run_app(argv: list[str]) -> int:
    """Run the app, turning user errors into one line on stderr and exit status 2."""
    try:
        app(args=argv, prog_name="simcore", standalone_mode=True)
    except SimcoreError as e:
        _print_error(e)
        return 2
    except SystemExit as e:
        if e.code is None:
            return 0
        return e.code if isinstance(e.code, int) else 2
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    return 0
