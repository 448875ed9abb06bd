"""Megatron's ``overlap_param_gather`` off (``parallel.param_gather_overlap: false``): the distributed
optimizer's parameter all-gather runs whole after the optimizer step."""

from __future__ import annotations

import pytest

import simcore
from simcore.specs.resolve import load_scenario

_INTERLEAVED = [
    "parallel.pp=4",
    "parallel.tp=8",
    "parallel.vp=24",
    "training.micro_batch=6",
    "parallel.schedule=interleaved",
    "parallel.dp=32",
]


def _dp(over: list[str], engine: str = "analytic") -> tuple[float, float]:
    p = simcore.predict(load_scenario("gpt3-175b-1024xh100", _INTERLEAVED + over), engine=engine)
    return p.step_time_s, p.breakdown["dp_comm"]


def test_the_gather_shows_between_the_overlapped_and_the_serial_step() -> None:
    """ZeRO-1: exposing the all-gather costs more than the overlapped step and less than turning every
    data-parallel overlap off (the gradient reduce-scatter still hides); both engines agree."""
    on, dp_on = _dp(["parallel.zero=1"])
    off, dp_off = _dp(["parallel.zero=1", "parallel.param_gather_overlap=false"])
    serial, dp_serial = _dp(["parallel.zero=1", "parallel.dp_overlap=false"])
    assert on < off < serial and dp_on < dp_off < dp_serial
    des, _ = _dp(["parallel.zero=1", "parallel.param_gather_overlap=false"], engine="des")
    assert des == pytest.approx(off, rel=0.01)


@pytest.mark.parametrize("over", [["parallel.zero=0"], ["parallel.zero=1", "parallel.dp_overlap=false"]])
def test_no_effect_without_an_overlapped_distributed_optimizer(over: list[str]) -> None:
    """DDP has no parameter gather; with dp_overlap off the gather is already exposed."""
    assert _dp(over + ["parallel.param_gather_overlap=false"]) == _dp(over)
