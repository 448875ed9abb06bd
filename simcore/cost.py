"""Cost and energy of a training run: pure, vectorised functions (numpy arrays or scalars).

The model, per GPU and then for the job:

* utilisation ``u`` (``busy_fraction``): the share of the step a GPU spends in kernels that keep it
  busy (compute categories of the step breakdown; exposed communication, pipeline bubbles and idle
  waits count as not busy);
* device power ``P = P_idle + (P_tdp - P_idle) * u`` (linear between the idle draw and the board
  power limit, the usual first-order model of GPU power against SM activity);
* facility power ``P * gpus * PUE`` (cooling and power-delivery overhead of the data centre);
* energy per step ``E_step = P * gpus * PUE * t_step``, per token ``E_step / tokens_per_step``, for
  the run ``E_step * steps`` with ``steps = tokens / tokens_per_step``;
* GPU-hours ``gpus * t_run / 3600`` and cost ``GPU-hours * price_per_gpu_hour`` (plus the energy
  bill when a price per kWh is given).

All quantities are SI (seconds, watts, joules); money is in the currency of the price given.
:func:`cost_energy` is what the planner evaluates over millions of layouts and what
``simcore.predict`` uses for one scenario, so the formulas live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simcore.specs.hardware import Device
from simcore.specs.resolve import ClusterInfo

Num = Any

IDLE_FRACTION_FALLBACK = 0.15
"""Idle draw as a fraction of TDP for devices whose spec gives no ``idle_power`` (energy only)."""

NOT_BUSY = ("pipeline_bubble", "dp_comm", "host_overhead", "host_launch")
"""Breakdown categories during which the GPU waits (for peers or for the host) rather than computes
(besides ``*_comm``)."""

JOULES_PER_KWH = 3.6e6


def busy_fraction(breakdown: Mapping[str, Num], step_time_s: Num) -> Num:
    """Share of the step (0..1) spent in compute kernels: the breakdown's seconds outside
    communication (``*_comm``) and the pipeline bubble, over the step time (seconds)."""
    busy: Num = 0.0
    for k, v in breakdown.items():
        if k in NOT_BUSY or k.endswith("_comm"):
            continue
        busy = busy + np.asarray(v, dtype=float)
    step = np.maximum(np.asarray(step_time_s, dtype=float), 1e-30)
    return np.clip(busy / step, 0.0, 1.0)


def idle_power_w(device: Device) -> float:
    """Idle draw of one device in watts (the spec's ``idle_power``, else a fraction of TDP)."""
    if device.idle_power is not None:
        return float(device.idle_power)
    return IDLE_FRACTION_FALLBACK * float(device.tdp)


def gpu_power_w(device: Device, busy: Num) -> Num:
    """Average power of one device (watts) at utilisation ``busy`` (0..1): linear between idle and TDP."""
    idle = idle_power_w(device)
    u = np.clip(np.asarray(busy, dtype=float), 0.0, 1.0)
    return idle + (float(device.tdp) - idle) * u


def _get(spec: Any, name: str, default: Any = None) -> Any:
    if spec is None:
        return default
    v = spec.get(name, default) if isinstance(spec, Mapping) else getattr(spec, name, default)
    return default if v is None else v


def cost_energy(
    cluster: ClusterInfo,
    step_time_s: Num,
    busy_fraction: Num,
    tokens_per_step: Num,
    gpus: Num,
    cost_spec: Any = None,
    tokens: float | None = None,
) -> dict[str, Num]:
    """Power, energy, time-to-train, GPU-hours and cost (numpy broadcasting over all array inputs).

    Args:
        cluster: resolved cluster (its device gives TDP and idle power).
        step_time_s: seconds per optimizer step.
        busy_fraction: utilisation 0..1 (see :func:`busy_fraction`).
        tokens_per_step: tokens processed per step (global batch x sequence length).
        gpus: GPUs in the job.
        cost_spec: a :class:`~simcore.specs.scenario.CostSpec` or mapping with ``price_per_gpu_hour``
            (currency per GPU-hour), ``pue`` (>= 1; default 1.0 when absent) and optionally
            ``price_per_kwh`` (currency per kWh of facility energy, added to the cost).
        tokens: tokens to train on (for run totals); ``None`` leaves the run totals out.

    Returns:
        ``power_per_gpu_w`` (W), ``facility_power_w`` (W, all GPUs x PUE), ``energy_per_step_j``,
        ``energy_per_token_j`` (J), ``gpu_seconds_per_step``, ``cost_per_step`` (``None`` without a
        price), and with ``tokens``: ``steps``, ``time_to_train_s``, ``gpu_hours``, ``energy_run_j``,
        ``energy_run_kwh``, ``cost`` (``None`` without a price).
    """
    step = np.asarray(step_time_s, dtype=float)
    g = np.asarray(gpus, dtype=float)
    tps = np.asarray(tokens_per_step, dtype=float)
    pue = float(_get(cost_spec, "pue", 1.0))
    price = _get(cost_spec, "price_per_gpu_hour")
    kwh_price = _get(cost_spec, "price_per_kwh")

    power = gpu_power_w(cluster.device, busy_fraction)
    facility = power * g * pue
    e_step = facility * step
    gpu_s = g * step
    cost_step: Num = None
    if price is not None or kwh_price is not None:
        cost_step = gpu_s / 3600.0 * float(price or 0.0) + e_step / JOULES_PER_KWH * float(kwh_price or 0.0)
    out: dict[str, Num] = {
        "power_per_gpu_w": power,
        "facility_power_w": facility,
        "energy_per_step_j": e_step,
        "energy_per_token_j": e_step / np.maximum(tps, 1e-30),
        "gpu_seconds_per_step": gpu_s,
        "cost_per_step": cost_step,
    }
    if tokens is not None:
        steps = float(tokens) / np.maximum(tps, 1e-30)
        ttt = steps * step
        e_run = e_step * steps
        out.update(
            steps=steps,
            time_to_train_s=ttt,
            gpu_hours=ttt * g / 3600.0,
            energy_run_j=e_run,
            energy_run_kwh=e_run / JOULES_PER_KWH,
            cost=None if cost_step is None else cost_step * steps,
        )
    return out


__all__ = ["busy_fraction", "cost_energy", "gpu_power_w", "idle_power_w"]
