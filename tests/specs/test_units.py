import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcore import units


@pytest.mark.parametrize(
    "text,dim,expected",
    [
        ("4.8 TB/s", "bandwidth", 4.8e12),
        ("400 Gb/s", "bandwidth", 50e9),
        ("141 GB", "bytes", 141e9),
        ("50 MiB", "bytes", 50 * 2**20),
        ("989 TFLOP/s", "flop_rate", 989e12),
        ("1.5 us", "time", 1.5e-6),
        ("300 ns", "time", 3e-7),
        ("700 W", "power", 700.0),
        ("10.2 kW", "power", 10200.0),
        ("1.98 GHz", "frequency", 1.98e9),
        (12, "bytes", 12.0),
    ],
)
def test_parse(text: str, dim: units.Dimension, expected: float) -> None:
    assert math.isclose(units.parse(text, dim), expected, rel_tol=1e-12)


@pytest.mark.parametrize(
    "text,dim",
    [
        ("4.8 TB", "bandwidth"),
        ("fast", "bandwidth"),
        ("141 GB/s", "bytes"),
        ("3 parsecs", "time"),
        (True, "bytes"),
    ],
)
def test_parse_rejects_wrong_units(text: object, dim: units.Dimension) -> None:
    with pytest.raises(units.UnitError):
        units.parse(text, dim)


@given(st.floats(min_value=1e-3, max_value=1e18, allow_nan=False))
def test_fmt_roundtrip(x: float) -> None:
    assert math.isclose(units.parse(units.fmt(x, "bandwidth", digits=12), "bandwidth"), x, rel_tol=1e-9)
