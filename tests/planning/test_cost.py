"""Cost and energy model: hand-computed values, broadcasting, edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from simcore.cost import busy_fraction, cost_energy, gpu_power_w
from simcore.specs.resolve import cluster_for
from simcore.specs.scenario import CostSpec


def test_hand_computed_run() -> None:
    cl = cluster_for("hgx-h100", gpus=16)
    tdp, idle = cl.device.tdp, cl.device.idle_power
    assert idle is not None
    out = cost_energy(cl, 2.0, 0.5, 1e6, 16, CostSpec(price_per_gpu_hour=3.0, pue=1.25), tokens=1e9)
    p = idle + (tdp - idle) * 0.5
    assert out["power_per_gpu_w"] == pytest.approx(p)
    assert out["energy_per_step_j"] == pytest.approx(p * 16 * 1.25 * 2.0)
    assert out["energy_per_token_j"] == pytest.approx(p * 16 * 1.25 * 2.0 / 1e6)
    assert out["steps"] == pytest.approx(1000)
    assert out["time_to_train_s"] == pytest.approx(2000.0)
    assert out["gpu_hours"] == pytest.approx(2000.0 * 16 / 3600)
    assert out["cost"] == pytest.approx(2000.0 * 16 / 3600 * 3.0)
    assert out["energy_run_kwh"] == pytest.approx(p * 16 * 1.25 * 2000.0 / 3.6e6)


def test_energy_price_adds_to_cost_and_no_price_gives_none() -> None:
    cl = cluster_for("hgx-h100", gpus=8)
    none = cost_energy(cl, 1.0, 1.0, 1000, 8, CostSpec())
    assert none["cost_per_step"] is None and "cost" not in none
    e = cost_energy(cl, 1.0, 1.0, 1000, 8, {"price_per_gpu_hour": 0.0, "price_per_kwh": 0.1, "pue": 1.0})
    assert e["cost_per_step"] == pytest.approx(cl.device.tdp * 8 / 3.6e6 * 0.1)


def test_broadcasting_and_bounds() -> None:
    cl = cluster_for("dgx-b200", gpus=64)
    busy = np.linspace(-0.5, 1.5, 9)
    p = gpu_power_w(cl.device, busy)
    assert p.shape == (9,)
    assert p.min() == pytest.approx(cl.device.idle_power) and p.max() == pytest.approx(cl.device.tdp)
    assert np.all(np.diff(p) >= 0)
    out = cost_energy(
        cl, np.array([[1.0], [2.0]]), np.array([0.2, 0.8]), 5e5, 64, CostSpec(price_per_gpu_hour=2)
    )
    assert out["energy_per_step_j"].shape == (2, 2)
    assert out["cost_per_step"][1, 0] == pytest.approx(2 * out["cost_per_step"][0, 0])


def test_busy_fraction_excludes_comm_and_bubble() -> None:
    bd = {
        "gemm": np.array([3.0, 1.0]),
        "tp_comm": 1.0,
        "dp_comm": 1.0,
        "pipeline_bubble": 1.0,
        "optimizer": 1.0,
    }
    assert busy_fraction(bd, np.array([8.0, 4.0])) == pytest.approx([0.5, 0.5])
