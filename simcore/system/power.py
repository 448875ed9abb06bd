"""Power caps: the SM clock a GPU holds under a board power limit below its TDP, and what it does to a
training step (docs/system.md, "Power caps").

The calibration profile measured each kernel family's board power at the clock it ran at
(``power_fraction`` x TDP watts, ``clock_fraction`` x boost clock). :func:`simcore.compute.ops.sustained_clock`
solves for the highest clock whose time-averaged draw fits a limit, each family drawing
``P_idle + (P_k - P_idle) (f / f_k)^3`` and its compute-bound time scaling with ``1 / f``. A cap is the
same solve against the cap instead of the TDP (the measured watts kept: the profile's fractions
rescaled by ``TDP / cap``). Compute-bound seconds (GEMM, attention) then grow by ``f_TDP / f_cap``,
the ratio of the clocks the step holds at the TDP and at the cap; memory-bound kernels keep their time
(the HBM clock is not capped) and only lower their draw. The energy model's linear power then runs
between the idle draw and the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simcore.compute.ops import sustained_clock
from simcore.engine.pricing import power_family
from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.profile import ComputeProfile

COMPUTE_FAMILIES = ("gemm", "attention")
"""Families whose kernels' time scales with the SM clock."""


@dataclass(frozen=True)
class PowerCapResult:
    """The effect of a board power cap on one step."""

    cap_w: float
    tdp_w: float
    clock_hz: float
    """SM clock the step sustains under the cap."""
    uncapped_clock_hz: float
    """SM clock the step sustains at the TDP."""
    slowdown_s: float
    """Seconds the cap adds to the step (compute-bound kernels at the lower clock)."""


def family_seconds(breakdown: Mapping[str, float]) -> dict[str, float]:
    """Seconds of a step breakdown by power family (``gemm``, ``attention``, ``memory``, ``idle``)."""
    out: dict[str, float] = {}
    for k, v in breakdown.items():
        f = power_family(k)
        out[f] = out.get(f, 0.0) + float(v)
    return out


def capped(device: Device, prof: ComputeProfile, cap_w: float) -> tuple[Device, ComputeProfile]:
    """``device`` and ``prof`` restated for a board limit of ``cap_w`` watts: the device's TDP becomes
    the cap, the profile's power fractions are rescaled so that each family keeps its measured watts."""
    if cap_w > device.tdp:
        raise SpecError(
            f"power cap {cap_w:g} W is above {device.name}'s {device.tdp:g} W TDP (the board limit's maximum)",
            field="cluster.power_cap",
        )
    scale = device.tdp / cap_w
    pf = {k: v * scale for k, v in prof.power_fraction.items()}
    return device.model_copy(update={"tdp": cap_w}), prof.model_copy(update={"power_fraction": pf})


def power_cap_effect(
    device: Device, prof: ComputeProfile, breakdown: Mapping[str, float], cap_w: float
) -> PowerCapResult:
    """The clock a step of ``breakdown`` (seconds by category) holds under a ``cap_w`` W board limit and
    the seconds it adds: ``sum_k t_k (f_TDP / f_cap - 1)`` over the compute-bound families."""
    fams = family_seconds(breakdown)
    f_tdp = sustained_clock(device, prof, fams)
    dev_c, prof_c = capped(device, prof, cap_w)
    f_cap = sustained_clock(dev_c, prof_c, fams)
    ratio = f_tdp / f_cap
    slow = sum(fams.get(k, 0.0) for k in COMPUTE_FAMILIES) * (ratio - 1.0)
    return PowerCapResult(
        cap_w=cap_w, tdp_w=device.tdp, clock_hz=f_cap, uncapped_clock_hz=f_tdp, slowdown_s=slow
    )


__all__ = ["COMPUTE_FAMILIES", "PowerCapResult", "capped", "family_seconds", "power_cap_effect"]
