"""Annotated float types that accept unit strings in YAML and store SI floats."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel as _PydanticBase
from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer

from simcore import units


def _conv(dim: units.Dimension) -> BeforeValidator:
    def f(v: Any) -> Any:
        try:
            return units.parse(v, dim)
        except units.UnitError as e:
            raise ValueError(str(e)) from None

    return BeforeValidator(f)


def integer_value(v: Any) -> Any:
    """A count: an int (or a float with an integral value, as YAML writes ``2.0``); never a bool or a
    string, which pydantic's lax mode would turn into 1 or parse."""
    if isinstance(v, bool):
        raise ValueError(f"expected an integer, got {str(v).lower()}")
    if isinstance(v, str):
        raise ValueError(f"expected an integer, got the string {v!r}")
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"expected an integer, got {v!r}")
    return v


_ser = PlainSerializer(lambda v: v, return_type=float)

Bytes = Annotated[float, _conv("bytes"), Field(ge=0), _ser]
"""Bytes; YAML may say ``"141 GB"`` or ``"50 MiB"``."""
PosBytes = Annotated[float, _conv("bytes"), Field(gt=0), _ser]
Bandwidth = Annotated[float, _conv("bandwidth"), Field(gt=0), _ser]
"""Bytes per second; YAML may say ``"4.8 TB/s"`` or ``"400 Gb/s"``."""
FlopRate = Annotated[float, _conv("flop_rate"), Field(gt=0), _ser]
"""FLOP per second; YAML may say ``"989 TFLOP/s"``."""
Seconds = Annotated[float, _conv("time"), Field(ge=0), _ser]
"""Seconds; YAML may say ``"1.5 us"``."""
Int = Annotated[int, BeforeValidator(integer_value)]
"""An integer field: ``micro_batch: true`` or ``tp: "2"`` is an error, not 1 or 2."""
Watts = Annotated[float, _conv("power"), Field(ge=0), _ser]
Hertz = Annotated[float, _conv("frequency"), Field(gt=0), _ser]


class Spec(_PydanticBase):
    """Base of every spec: frozen, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
