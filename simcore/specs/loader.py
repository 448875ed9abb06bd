"""YAML loading with one-line errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from simcore.errors import SpecError

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping with ``yaml.safe_load``; malformed files raise :class:`SpecError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise SpecError("is a directory, expected a YAML file", file=str(p)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read: {e}", file=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"malformed YAML{where}: {problem}", file=str(p)) from None
    if data is None:
        raise SpecError("file is empty", file=str(p))
    if not isinstance(data, dict):
        raise SpecError(f"expected a mapping at the top level, got {type(data).__name__}", file=str(p))
    return data


def loc_str(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def validation_error(e: ValidationError, file: str | None, prefix: str = "") -> SpecError:
    """Turn the first pydantic error into a one-line :class:`SpecError`."""
    err = e.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = loc_str(loc)
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "required field is missing"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err["type"] not in ("missing", "extra_forbidden") and "input" in err:
        inp = err["input"]
        if isinstance(inp, str | int | float) and not isinstance(inp, bool) and repr(inp) not in msg:
            msg = f"{msg} (got {inp!r})"
    more = len(e.errors()) - 1
    if more:
        msg += f" (+{more} more problem{'s' if more > 1 else ''})"
    return SpecError(msg, file=file, field=field or None)


def validate(cls: type[M], data: dict[str, Any], file: str | None = None, prefix: str = "") -> M:
    """``cls.model_validate(data)`` with errors turned into :class:`SpecError`."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, file, prefix) from None


def load_file(cls: type[M], path: str | Path) -> M:
    return validate(cls, read_yaml(path), str(path))
