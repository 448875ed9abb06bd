"""collective_time("all_to_all", ..., skew=...): the busiest rank sets the pace of the exchange (hand
case: the time at nbytes x skew; a monotonic property; bad skews are one-line errors)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.errors import SimcoreError


def test_skew_prices_the_busiest_ranks_bytes() -> None:
    skewed = simcore.collective_time("all_to_all", "64 MB", 64, "hgx-h100", skew=1.5)
    busiest = simcore.collective_time("all_to_all", "96 MB", 64, "hgx-h100")
    assert skewed.time_s == pytest.approx(busiest.time_s)
    assert skewed.nbytes == 64e6  # bandwidths stay relative to the mean message
    assert simcore.collective_time("all_to_all", "64 MB", 64, "hgx-h100", skew=1.0).time_s < skewed.time_s


@settings(max_examples=20, deadline=None)
@given(st.floats(1.0, 4.0), st.floats(1.0, 4.0))
def test_more_skew_is_never_faster(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    t = [simcore.collective_time("all_to_all", "8 MB", 16, "hgx-h100", skew=x).time_s for x in (lo, hi)]
    assert t[0] <= t[1] * (1 + 1e-12)


@pytest.mark.parametrize(("op", "skew", "msg"), [("all_reduce", 1.5, "all_to_all only"), ("all_to_all", 0.5, ">= 1")])
def test_bad_skew_is_one_error(op: str, skew: float, msg: str) -> None:
    with pytest.raises(SimcoreError, match=msg) as e:
        simcore.collective_time(op, "8 MB", 16, "hgx-h100", skew=skew)
    assert e.value.field == "skew"


def test_moe_imbalance_reaches_the_all_to_all() -> None:
    from simcore.prediction import predict
    from simcore.specs.resolve import scenario_from_dict

    def ep_comm(imbalance: float) -> float:
        sc = scenario_from_dict(
            {
                "kind": "training",
                "cluster": {"system": "hgx-h100", "gpus": 16},
                "model": {"preset": "mixtral-8x7b", "layers": 4, "moe": {"imbalance": imbalance}},
                "parallel": {"ep": 8},
            }
        )
        return float(predict(sc).breakdown["ep_comm"])

    assert ep_comm(2.0) > ep_comm(1.0)
