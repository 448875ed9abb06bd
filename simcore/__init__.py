"""simcore: performance simulator for AI training and inference on GPU clusters.

Public API (stable names): :func:`load_scenario`, :func:`predict`, :func:`op_time`,
:func:`collective_time`, :func:`moe_layer_time`, :func:`load_hardware`, :func:`transfer_time`,
:func:`occupancy`.
"""

from __future__ import annotations

from typing import Any

from simcore.errors import SimcoreError, SpecError
from simcore.specs import default_registry
from simcore.specs.hardware import Device, Link, System
from simcore.specs.resolve import load_scenario

__version__ = "0.1.0"


def load_hardware(name: str) -> Device | System | Link:
    """A built-in (or user) device, system or link spec by name or alias (e.g. ``"h200"``)."""
    if not isinstance(name, str):
        raise SpecError(f"expected a device, system or link name, got {type(name).__name__}", field="name")
    return default_registry().find(name)[1]


_LAZY = {
    "predict": "simcore.prediction",
    "op_time": "simcore.compute.ops",
    "moe_layer_time": "simcore.prediction",
    "collective_time": "simcore.comm.collectives",
    "plan": "simcore.planning.plan",
    "serve": "simcore.serving",
    "transfer_time": "simcore.comm.host",
    "occupancy": "simcore.compute.occupancy",
}


def __getattr__(name: str) -> Any:
    # Heavier entry points are imported lazily so ``import simcore`` stays fast.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simcore' has no attribute {name!r}")


__all__ = [
    "Device",
    "Link",
    "SimcoreError",
    "SpecError",
    "System",
    "__version__",
    "collective_time",
    "load_hardware",
    "load_scenario",
    "occupancy",
    "moe_layer_time",
    "op_time",
    "plan",
    "predict",
    "serve",
    "transfer_time",
]
