"""YAML loading with one-line errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from simcore.errors import SpecError

M = TypeVar("M", bound=BaseModel)

MAX_YAML_BYTES = 2_000_000
"""The largest scenario or spec YAML file read: 2 MB (the shipped ones are under 50 kB; parsing YAML costs
about a second per MB). A bigger one is refused at once instead of being parsed for minutes."""

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when built with it


def read_yaml(path: str | Path, max_bytes: int | None = None) -> dict[str, Any]:
    """Read a YAML mapping (safe loader: plain data only) of at most ``max_bytes`` (default
    :data:`MAX_YAML_BYTES`); missing, oversized or malformed files raise :class:`SpecError`."""
    p = Path(path)
    if "\x00" in str(p):
        raise SpecError("not a valid path (it holds a NUL character)", file=repr(str(p)))
    limit = MAX_YAML_BYTES if max_bytes is None else max_bytes
    try:
        with p.open("rb") as fh:
            raw = fh.read(limit + 1)  # bounded: a huge file or a device never reads past the limit
        if len(raw) > limit:
            raise SpecError(
                f"larger than the {limit / 1e6:g} MB limit for scenario and spec YAML files", file=str(p)
            )
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise SpecError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise SpecError("is a directory, expected a YAML file", file=str(p)) from None
    except UnicodeDecodeError as e:
        raise SpecError(f"cannot read: not UTF-8 text ({e.reason} at byte {e.start})", file=str(p)) from None
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)
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


def manifest_field(path: str | Path, key: str) -> Any:
    """``key`` of the JSON object in ``path`` (a collection's manifest), ``None`` where the file is absent or has no
    such key; one :class:`SpecError` naming the file where it is there but not a JSON object."""
    import json

    p = Path(path)
    if not p.is_file():
        return None
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SpecError(f"not a readable JSON manifest: {e}", file=str(p)) from None
    if not isinstance(obj, dict):
        raise SpecError(f"a manifest is a JSON object, not {type(obj).__name__}", file=str(p))
    return obj.get(key)


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
    errors = e.errors(include_url=False, include_context=False)
    err = errors[0]
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
    more = len(errors) - 1
    if more:
        msg += f" (+{more} more problem{'s' if more > 1 else ''})"
    return SpecError(msg, file=file, field=field or None)


def _unknown_keys(cls: type[BaseModel], data: dict[str, Any], file: str | None, prefix: str) -> None:
    """Unknown top-level fields of a model that forbids them, named at once (the first three of them), before
    validation builds one error for each."""
    if cls.model_config.get("extra") != "forbid":
        return
    known = set(cls.model_fields)
    known.update(f.alias for f in cls.model_fields.values() if f.alias)
    unknown = [str(k) for k in data if k not in known]
    if not unknown:
        return
    msg = "unknown field"
    if len(unknown) > 1:
        also = ", ".join(repr(k) for k in unknown[1:3]) + (", ..." if len(unknown) > 3 else "")
        msg += f" (+{len(unknown) - 1} more: {also})"
    raise SpecError(msg, file=file, field=f"{prefix}.{unknown[0]}" if prefix else unknown[0])


def validate(cls: type[M], data: dict[str, Any], file: str | None = None, prefix: str = "") -> M:
    """``cls.model_validate(data)`` with errors turned into :class:`SpecError`."""
    if not isinstance(data, dict):
        where = f" for {prefix}" if prefix else ""
        raise SpecError(f"expected a mapping of fields{where}, got {type(data).__name__}", file=file)
    _unknown_keys(cls, data, file, prefix)
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, file, prefix) from None


def load_file(cls: type[M], path: str | Path) -> M:
    return validate(cls, read_yaml(path), str(path))
