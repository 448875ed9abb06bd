"""Autoscaling what-if: how many replicas a diurnal day of load needs, and what a million output tokens
costs, autoscaled against provisioned for the peak. See docs/serving.md, "Autoscaling over a day".

The day's arrival rate (requests/s) at hour ``h`` is a cosine between the trough and the peak::

    rate(h) = peak x (f + (1 - f) (1 + cos(2 pi (h - h_peak) / 24)) / 2)

(``f`` the trough's fraction of the peak). One replica's capacity under the SLOs is the highest Poisson rate at
which it still completes what arrives (not saturated) with ``attainment`` of its requests meeting every SLO,
found by bisection over simulated runs of the scenario with one replica; an hour then needs
``ceil(rate(h) / capacity)`` replicas (at least ``min_replicas``). Scaling is taken as instant at the hour
(no cold start, no warm-up of caches); each replica is billed ``attention_dp x tp x pp`` GPU-hours an hour at
``cost.price_per_gpu_hour``.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict

from simcore.errors import SpecError
from simcore.serving.sim import SATURATED, simulate
from simcore.serving.spec import ServingSpec
from simcore.specs.scenario import Scenario

BISECTIONS = 10
"""Bisection steps of the capacity search (the rate found within 0.1 % of the bracket)."""


class DayPlan(BaseModel):
    """An autoscaled day against a peak-provisioned one (rates in requests/s, money in ``currency``)."""

    model_config = ConfigDict(frozen=True)

    capacity_per_replica: float
    """Requests/s one replica serves within the SLOs."""
    output_tokens_per_request: float
    gpus_per_replica: int
    hours: list[float]
    rates: list[float]
    replicas: list[int]
    static_replicas: int
    gpu_hours: float
    static_gpu_hours: float
    output_tokens: float
    cost: float | None
    static_cost: float | None
    cost_per_million_tokens: float | None
    static_cost_per_million_tokens: float | None
    currency: str


def _ok(sc: Scenario, spec: ServingSpec, rate: float, requests: int, attainment: float) -> tuple[bool, float]:
    res = simulate(sc, spec.model_copy(update={"rate": rate, "requests": requests, "replicas": 1})).result
    saturated = any(n.startswith(SATURATED) for n in res.notes)
    return (not saturated and res.slo_attainment >= attainment), res.output_tokens_per_s / res.requests_per_s


def replica_capacity(
    sc: Scenario, spec: ServingSpec, attainment: float = 0.99, requests: int = 600
) -> tuple[float, float]:
    """(requests/s one replica serves within the SLOs, output tokens a request): bisection between a rate it
    serves and one it does not (module docstring)."""
    lo, hi = 0.0, 1.0
    tokens = 0.0
    while True:
        ok, tok = _ok(sc, spec, hi, requests, attainment)
        if not ok:
            break
        lo, tokens = hi, tok
        hi *= 2.0
        if hi > 1e6:
            raise SpecError("no rate saturates one replica: check the SLOs", field="serving.slo")
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok, tok = _ok(sc, spec, mid, requests, attainment)
        if ok:
            lo, tokens = mid, tok
        else:
            hi = mid
    if lo <= 0.0:
        raise SpecError("one replica cannot meet the SLOs at any rate", field="serving.slo")
    return lo, tokens


def diurnal_day(
    sc: Scenario,
    spec: ServingSpec,
    peak_rate: float,
    trough_fraction: float = 0.25,
    peak_hour: float = 14.0,
    attainment: float = 0.99,
    min_replicas: int = 1,
    requests: int = 600,
) -> DayPlan:
    """Replicas hour by hour over a diurnal day peaking at ``peak_rate`` requests/s, GPU-hours and cost per
    million output tokens, against a fleet sized for the peak all day (module docstring). ``requests``: requests
    a capacity probe simulates."""
    if peak_rate <= 0 or not 0.0 <= trough_fraction <= 1.0:
        raise SpecError("needs a positive peak rate and a trough fraction in [0, 1]", field="autoscale")
    cap, tokens = replica_capacity(sc, spec, attainment, requests)
    hours = np.arange(24, dtype=float)
    rates = peak_rate * (
        trough_fraction + (1 - trough_fraction) * (1 + np.cos(2 * np.pi * (hours - peak_hour) / 24)) / 2
    )
    reps = [max(min_replicas, math.ceil(r / cap)) for r in rates]
    static = max(min_replicas, math.ceil(peak_rate / cap))
    per = spec.attention_dp * sc.parallel.tp * sc.parallel.pp
    gh, sgh = float(sum(reps) * per), float(24 * static * per)
    out = float(np.sum(rates) * 3600.0 * tokens)
    price = sc.cost.price_per_gpu_hour
    cost = None if price is None else gh * price
    scost = None if price is None else sgh * price
    return DayPlan(
        capacity_per_replica=cap,
        output_tokens_per_request=tokens,
        gpus_per_replica=per,
        hours=[float(h) for h in hours],
        rates=[float(r) for r in rates],
        replicas=reps,
        static_replicas=static,
        gpu_hours=gh,
        static_gpu_hours=sgh,
        output_tokens=out,
        cost=cost,
        static_cost=scost,
        cost_per_million_tokens=None if cost is None else cost / out * 1e6,
        static_cost_per_million_tokens=None if scost is None else scost / out * 1e6,
        currency=sc.cost.currency,
    )


__all__ = ["DayPlan", "diurnal_day", "replica_capacity"]
