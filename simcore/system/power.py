"""Power caps: the SM clock a GPU holds under a board power limit below its TDP, and what it does to a
training step (docs/system.md, "Power caps").

The calibration profile measured each kernel family's board power at the clock it ran at
(``power_fraction`` x TDP watts, ``clock_fraction`` x boost clock). :func:`simcore.compute.ops.sustained_clock`
solves for the highest clock whose time-averaged draw fits a limit, each family drawing
``P_idle + (P_k - P_idle) (f / f_k)^3`` and its compute-bound time scaling with ``1 / f``. A cap is the
same solve against the cap instead of the TDP (the measured watts kept: the profile's fractions
rescaled by ``TDP / cap``). The step is then priced again on the device with every peak rate times
``f_cap / f_TDP``, the ratio of the clocks the step holds at the cap and at the TDP: each kernel's
roofline slows its compute-bound part by the clock, its bandwidth-bound part not at all (the HBM
clock is not capped). The energy model's linear power then runs between the idle draw and the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simcore.compute.ops import LOWEST_CLOCK, sustained_clock
from simcore.engine.pricing import power_family
from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.profile import ComputeProfile


@dataclass(frozen=True)
class PowerCapResult:
    """The effect of a board power cap on one step."""

    cap_w: float
    tdp_w: float
    clock_hz: float
    """SM clock the step sustains under the cap."""
    uncapped_clock_hz: float
    """SM clock the step sustains at the TDP."""
    slowdown_s: float = 0.0
    """Seconds the cap adds to the step (the step re-priced at the lower clock, less the uncapped one)."""
    system_power_max_w: float | None = None
    """The system's (node's or rack's) maximum power under the limit: its ``power_max`` less each GPU's
    headroom ``TDP - limit`` (what a power budget provisions per system; more than ``power_max`` under
    a liquid-cooled limit above the TDP)."""
    cooling: str | None = None
    """``cluster.cooling`` when it set (or bounded) the limit: ``air`` or ``liquid``."""


def family_seconds(breakdown: Mapping[str, float]) -> dict[str, float]:
    """Seconds of a step breakdown by power family (``gemm``, ``attention``, ``memory``, ``idle``)."""
    out: dict[str, float] = {}
    for k, v in breakdown.items():
        f = power_family(k)
        out[f] = out.get(f, 0.0) + float(v)
    return out


def capped(device: Device, prof: ComputeProfile, cap_w: float) -> tuple[Device, ComputeProfile]:
    """``device`` and ``prof`` restated for a board limit of ``cap_w`` watts (below the TDP: a power cap;
    above it: a liquid-cooled board's higher limit, :func:`board_limit`): the device's TDP becomes the
    limit, the profile's power fractions are rescaled so that each family keeps its measured watts."""
    scale = device.tdp / cap_w
    pf = {k: v * scale for k, v in prof.power_fraction.items()}
    return device.model_copy(update={"tdp": cap_w}), prof.model_copy(update={"power_fraction": pf})


def cap_clocks(
    device: Device,
    prof: ComputeProfile,
    breakdown: Mapping[str, float],
    cap_w: float,
    gemm_dtype: str = "bf16",
) -> PowerCapResult:
    """The SM clocks a step of ``breakdown`` (seconds by category) sustains at the TDP and under a
    ``cap_w`` W board limit (:func:`simcore.compute.ops.sustained_clock` against each limit; ``gemm_dtype``:
    the step's GEMMs, for a device with a sustained GEMM rate, ``Device.sustained_gemm``)."""
    fams = family_seconds(breakdown)
    dev_c, prof_c = capped(device, prof, cap_w)
    idle = prof.power_fraction.get("idle", 0.0) * device.tdp
    f_cap = sustained_clock(dev_c, prof_c, fams, gemm_dtype=gemm_dtype)
    if cap_w <= idle or f_cap <= LOWEST_CLOCK * device.boost_clock:
        raise SpecError(
            f"power cap {cap_w:g} W is too low for {device.name}: it idles at {idle:.0f} W and the step does not fit "
            f"the cap above {LOWEST_CLOCK:.0%} of the boost clock",
            field="cluster.power_cap",
        )
    return PowerCapResult(
        cap_w=cap_w,
        tdp_w=device.tdp,
        clock_hz=f_cap,
        uncapped_clock_hz=sustained_clock(device, prof, fams, gemm_dtype=gemm_dtype),
    )


def board_limit(
    device: Device, cap_w: float | None, cooling: str | None, cooled_w: float | None
) -> float | None:
    """The board power limit (W) a GPU runs at: the power cap ``cap_w`` (``nvidia-smi -pl``), at most
    the limit ``cooled_w`` its cooling sustains (``hardware_specs/cooling``; else the TDP); the cooled
    limit itself without a cap; ``None`` with neither (the TDP)."""
    top = device.tdp if cooled_w is None else cooled_w
    if cap_w is not None and cap_w > top:
        what = f"{cooling}-cooled limit" if cooled_w is not None else "TDP (the board limit's maximum)"
        raise SpecError(
            f"power cap {cap_w:g} W is above {device.name}'s {top:g} W {what}", field="cluster.power_cap"
        )
    return cap_w if cap_w is not None else cooled_w


def clock_scaled(device: Device, ratio: float) -> Device:
    """``device`` with every peak rate times ``ratio`` (an SM clock ``ratio`` times the one the step holds
    at the TDP): priced on it, compute-bound kernels slow by ``1 / ratio``, bandwidth-bound ones keep
    their time (the HBM clock is not capped), the roofline mixes the two."""
    return device.model_copy(update={"peak": {k: v * ratio for k, v in device.peak.items()}})


__all__ = ["PowerCapResult", "board_limit", "cap_clocks", "capped", "clock_scaled", "family_seconds"]
