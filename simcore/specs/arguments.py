"""Checks of the public Python API's arguments: a wrong type or value is one :class:`SimcoreError` naming the
argument, never a raw TypeError or AttributeError from deeper down."""

from __future__ import annotations

from typing import Any

import numpy as np

from simcore import units
from simcore.errors import SimcoreError


def show(v: Any) -> str:
    """A value as a message shows it: its ``repr``, cut to 40 characters."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def byte_size(value: Any, field: str, what: str) -> float:
    """Bytes from a number or a string with a unit (``"256 MB"``, through :func:`simcore.units.parse`);
    ``what`` names the quantity in the message when it is not positive (``"copy size"``)."""
    if not isinstance(value, str | int | float | np.integer | np.floating) or isinstance(value, bool):
        raise SimcoreError(
            f"expected a number of bytes or a string such as '256 MB', got {type(value).__name__} {show(value)}",
            field=field,
        )
    if isinstance(value, np.integer | np.floating):
        value = value.item()
    try:
        size = units.parse(value, "bytes")
    except units.UnitError as e:
        raise SimcoreError(str(e), field=field) from None
    if size <= 0:
        raise SimcoreError(f"{what} must be positive", field=field)
    return size
