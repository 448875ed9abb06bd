"""MIG slices: a GPU instance of a MIG profile as a device of its own (docs/system.md, "MIG").

A profile of ``g`` compute slices of 7 and ``m`` memory slices of 8 (NVIDIA's MIG user guide tables,
``hardware_specs/mig``) owns ``floor(sm_count x g / 7)`` SMs, hence that share of every peak rate, and
``m / 8`` of the memory capacity, of the memory bandwidth (the slices own their memory controllers) and
of the L2 cache. The kernel models then price ops on it as on any device (waves over its SMs, streaming
at its bandwidth). A slice has no NVLink: MIG instances do not reach each other's memory.
"""

from __future__ import annotations

import math

from simcore.specs.hardware import Device
from simcore.specs.system import MigProfile, mig_table


def mig_profile(device: Device, name: str) -> MigProfile:
    """The MIG profile ``name`` of ``device`` (``hardware_specs/mig/DEVICE.yaml``)."""
    return mig_table(device.name).find(name)


def mig_slice(device: Device, name: str) -> Device:
    """``device`` cut down to one instance of MIG profile ``name``: SMs and peak rates by the SM
    fraction, memory capacity, bandwidth and L2 by the memory fraction, no NVLink."""
    p = mig_profile(device, name)
    sms = max(1, math.floor(device.sm_count * p.sm_fraction + 1e-9))
    share = sms / device.sm_count
    mem = device.memory.model_copy(
        update={
            "capacity": device.memory.capacity * p.memory_fraction,
            "bandwidth": device.memory.bandwidth * p.memory_fraction,
        }
    )
    return device.model_copy(
        update={
            "display_name": f"{device.display_name} MIG {p.name}",
            "sm_count": sms,
            "peak": {k: v * share for k, v in device.peak.items()},
            "memory": mem,
            "l2_cache": device.l2_cache * p.memory_fraction,
            "nvlink": None,
        }
    )


__all__ = ["mig_profile", "mig_slice"]
