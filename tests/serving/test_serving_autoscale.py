"""Autoscaling what-if over a diurnal day (``simcore.serving.autoscale``)."""

from __future__ import annotations

import math

import pytest

from simcore.serving import load_serving
from simcore.serving.autoscale import _ok, diurnal_day

FAST = ["cost.price_per_gpu_hour=4.0", "serving.slo.ttft_s=0.5", "serving.slo.tpot_s=0.05"]


def test_a_day_follows_the_load_and_costs_less_than_the_peak_fleet() -> None:
    sc, spec = load_serving("serve_llama3_8b_h200", FAST)
    d = diurnal_day(sc, spec, peak_rate=50.0, trough_fraction=0.2, requests=300)
    cap = d.capacity_per_replica
    assert d.replicas == [max(1, math.ceil(r / cap)) for r in d.rates]
    assert d.static_replicas == math.ceil(50.0 / cap) == max(d.replicas)
    assert max(d.rates) == pytest.approx(50.0) and min(d.rates) == pytest.approx(10.0)
    assert d.gpu_hours <= d.static_gpu_hours and d.gpu_hours == sum(d.replicas) * d.gpus_per_replica
    assert d.cost == pytest.approx(4.0 * d.gpu_hours)
    assert d.cost_per_million_tokens == pytest.approx(d.cost / d.output_tokens * 1e6)
    assert d.cost_per_million_tokens <= d.static_cost_per_million_tokens  # type: ignore[operator]
    # the capacity found is served within the SLOs; twice it is not
    assert _ok(sc, spec, cap, 300, 0.99)[0] and not _ok(sc, spec, 2 * cap, 300, 0.99)[0]
