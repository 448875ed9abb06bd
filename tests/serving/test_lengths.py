"""Request-length distributions: the lognormal's ``max`` truncation."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from simcore.specs.serving import LengthDist


def test_lognormal_max_truncates_and_keeps_the_rest() -> None:
    free = LengthDist(dist="lognormal", mean=1000, sigma=1.0)
    capped = LengthDist(dist="lognormal", mean=1000, sigma=1.0, max=2000)
    a = free.sample(np.random.default_rng(0), 5000)
    b = capped.sample(np.random.default_rng(0), 5000)
    assert a.max() > 2000 and b.max() == 2000
    # the same draws: below the cap nothing moves, above it every length is the cap
    assert np.array_equal(b, np.minimum(a, 2000))


def test_max_only_for_lognormal() -> None:
    with pytest.raises(ValidationError, match="does not take 'max'"):
        LengthDist(dist="uniform", low=1, high=10, max=5)
