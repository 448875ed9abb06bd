"""Cooling (``cluster.cooling``): the board power limit a GPU sustains air- or liquid-cooled, priced as
the power cap's clock solve against that limit (docs/system.md, "Cooling")."""

from __future__ import annotations

import pytest

import simcore
from simcore.prediction import TrainingResult
from simcore.specs.resolve import load_scenario
from simcore.specs.system import cooling_table
from simcore.system.power import board_limit

B200 = simcore.load_hardware("b200")


def _predict(*sets: str) -> TrainingResult:
    r = simcore.predict(load_scenario("default", overrides=list(sets)))
    assert isinstance(r, TrainingResult)
    return r


def test_cooling_tables() -> None:
    assert cooling_table("b200").limit("air") == 1000.0 and cooling_table("b200").limit("liquid") == 1200.0
    assert cooling_table("h200").limit("air") == cooling_table("h200").limit("liquid") == 700.0
    with pytest.raises(simcore.SimcoreError, match="not sold air-cooled"):
        cooling_table("gb200").limit("air")


def test_board_limit_is_the_cap_within_the_cooled_limit() -> None:
    assert board_limit(B200, None, None, None) is None  # type: ignore[arg-type]
    assert board_limit(B200, None, "liquid", 1200.0) == 1200.0  # type: ignore[arg-type]
    assert board_limit(B200, 1100.0, "liquid", 1200.0) == 1100.0  # type: ignore[arg-type]
    with pytest.raises(simcore.SimcoreError, match="air-cooled limit"):
        board_limit(B200, 1100.0, "air", 1000.0)  # type: ignore[arg-type]
    with pytest.raises(simcore.SimcoreError, match="TDP"):
        board_limit(B200, 1100.0, None, None)  # type: ignore[arg-type]


def test_hopper_liquid_changes_no_clock() -> None:
    base = _predict()
    for cooling in ("air", "liquid"):
        r = _predict(f"cluster.cooling={cooling}")
        assert r.step_time_s == pytest.approx(base.step_time_s, rel=1e-9)
        assert r.system_effects is not None and r.system_effects.power is not None
        assert r.system_effects.power.cooling == cooling


def test_b200_liquid_holds_a_higher_clock() -> None:
    air = _predict("cluster.system=dgx-b200", "cluster.cooling=air")
    liquid = _predict("cluster.system=dgx-b200", "cluster.cooling=liquid")
    pa, pl = air.system_effects.power, liquid.system_effects.power  # type: ignore[union-attr]
    assert pa is not None and pl is not None
    assert pa.clock_hz == pa.uncapped_clock_hz  # air is the B200's 1000 W TDP
    assert pl.clock_hz > pa.clock_hz and pl.clock_hz <= B200.boost_clock  # type: ignore[union-attr]
    assert liquid.step_time_s < air.step_time_s
    # compute-bound time shrinks at most by the clock ratio; memory-bound time not at all
    assert liquid.step_time_s > air.step_time_s * pa.clock_hz / pl.clock_hz
    # the board draws up to 1200 W instead of 1000: more energy per token, a bigger system budget
    assert liquid.energy_per_token_j > air.energy_per_token_j
    assert pl.system_power_max_w == pytest.approx(14300.0 + 8 * 200.0)
    # a cap of the air figure under liquid cooling is the air-cooled board again
    capped = _predict("cluster.system=dgx-b200", "cluster.cooling=liquid", "cluster.power_cap=1000")
    assert capped.step_time_s == pytest.approx(air.step_time_s, rel=1e-9)
