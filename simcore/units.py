"""Unit parsing and formatting.

Inside simcore every quantity is an SI float (seconds, bytes, FLOP, bytes/s, FLOP/s, watts,
joules, hertz). Strings such as ``"4.8 TB/s"``, ``"141 GB"``, ``"400 Gb/s"`` or ``"989 TFLOP/s"``
are converted exactly once, at the edge (YAML files, CLI options), by :func:`parse`.

Decimal prefixes (k, M, G, T, P) are powers of 1000; binary prefixes (Ki, Mi, Gi, Ti) are powers
of 1024. A lower-case ``b`` means bits (converted to bytes), an upper-case ``B`` means bytes.
"""

from __future__ import annotations

import math
import re
from typing import Literal

Dimension = Literal["bytes", "bandwidth", "flops", "flop_rate", "time", "power", "frequency", "energy"]

_PREFIX: dict[str, float] = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
    "Pi": 1024.0**5,
}
_TIME_PREFIX: dict[str, float] = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9, "p": 1e-12}

_NUM = r"(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_RE = re.compile(r"^\s*" + _NUM + r"\s*(?P<unit>[^\s].*?)?\s*$")


class UnitError(ValueError):
    """A value could not be read as a quantity of the expected dimension."""


def _split(text: str) -> tuple[float, str]:
    m = _RE.match(text)
    if not m:
        raise UnitError(f"cannot read {text!r} as a number with a unit")
    return float(m.group("num")), (m.group("unit") or "").strip()


def _prefixed(unit: str, bases: dict[str, float], prefixes: dict[str, float]) -> float | None:
    for base, scale in bases.items():
        if unit.endswith(base):
            pre = unit[: len(unit) - len(base)]
            if pre in prefixes:
                return prefixes[pre] * scale
    return None


_BYTES = {"B": 1.0, "b": 0.125, "bytes": 1.0, "byte": 1.0, "bit": 0.125, "bits": 0.125}
_BANDWIDTH = {"B/s": 1.0, "Bps": 1.0, "b/s": 0.125, "bps": 0.125}
_FLOPS = {"FLOP": 1.0, "FLOPs": 1.0, "flop": 1.0, "flops": 1.0}
_FLOP_RATE = {"FLOP/s": 1.0, "FLOPS": 1.0, "flop/s": 1.0, "OP/s": 1.0, "OPS": 1.0, "ops": 1.0}
_POWER = {"W": 1.0}
_FREQ = {"Hz": 1.0}
_ENERGY = {"J": 1.0, "Wh": 3600.0}
_TIME = {"s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0, "hr": 3600.0, "hours": 3600.0, "d": 86400.0}

_TABLE: dict[str, dict[str, float]] = {
    "bytes": _BYTES,
    "bandwidth": _BANDWIDTH,
    "flops": _FLOPS,
    "flop_rate": _FLOP_RATE,
    "power": _POWER,
    "frequency": _FREQ,
    "energy": _ENERGY,
}

_EXAMPLE: dict[str, str] = {
    "bytes": "'141 GB'",
    "bandwidth": "'4.8 TB/s' or '400 Gb/s'",
    "flops": "'3.5 TFLOP'",
    "flop_rate": "'989 TFLOP/s'",
    "time": "'1.5 us'",
    "power": "'700 W'",
    "frequency": "'1.98 GHz'",
    "energy": "'1.2 kWh'",
}


def parse(value: object, dim: Dimension) -> float:
    """Convert ``value`` (a number in SI base units, or a string with a unit) to an SI float.

    Raises :class:`UnitError` with a message naming the expected dimension when the unit does not
    match, the value is not finite, or the text is not a number.
    """
    if isinstance(value, bool):
        raise UnitError(f"expected a {dim} quantity such as {_EXAMPLE[dim]}, got {value!r}")
    if isinstance(value, int | float):
        out = float(value)
    elif isinstance(value, str):
        num, unit = _split(value)
        if unit == "":
            out = num
        elif dim == "time":
            scale = _TIME.get(unit)
            if scale is None:
                scale = _prefixed(unit, {"s": 1.0}, _TIME_PREFIX)
            if scale is None:
                raise UnitError(f"unit {unit!r} in {value!r} is not a time (e.g. {_EXAMPLE['time']})")
            out = num * scale
        else:
            prefixes = dict(_PREFIX)
            if dim in ("power", "energy"):
                prefixes["m"] = 1e-3
            scale = _prefixed(unit, _TABLE[dim], prefixes)
            if scale is None:
                raise UnitError(f"unit {unit!r} in {value!r} is not a {dim} unit (e.g. {_EXAMPLE[dim]})")
            out = num * scale
    else:
        raise UnitError(f"expected a {dim} quantity such as {_EXAMPLE[dim]}, got {value!r}")
    if not math.isfinite(out):
        raise UnitError(f"{value!r} is not a finite number")
    return out


_FMT_UNIT: dict[str, str] = {
    "bytes": "B",
    "bandwidth": "B/s",
    "flops": "FLOP",
    "flop_rate": "FLOP/s",
    "power": "W",
    "frequency": "Hz",
    "energy": "J",
}


def fmt(value: float, dim: Dimension, digits: int = 3) -> str:
    """Format an SI float for people: ``fmt(4.8e12, "bandwidth") == "4.8 TB/s"``."""
    if dim == "time":
        a = abs(value)
        for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if a >= scale or unit == "ns":
                return f"{value / scale:.{digits}g} {unit}"
    unit = _FMT_UNIT[dim]
    a = abs(value)
    for pre, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{value / scale:.{digits}g} {pre}{unit}"
    return f"{value:.{digits}g} {unit}"
