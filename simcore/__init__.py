"""simcore: performance simulator for AI training and inference on GPU clusters.

Public API (stable names): :func:`load_scenario`, :func:`predict`, :func:`predict_jobs`, :func:`op_time`,
:func:`collective_time`, :func:`moe_layer_time`, :func:`load_hardware`, :func:`transfer_time`,
:func:`occupancy`.

Every public name but the errors is imported on first use (module ``__getattr__``), so ``import
simcore`` and the command line start without numpy, pydantic and the specs (docs/architecture.md, Speed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simcore.errors import SimcoreError, SpecError

if TYPE_CHECKING:
    from simcore.specs.hardware import Device, Link, System
    from simcore.specs.resolve import load_scenario as load_scenario

__version__ = "0.1.0"


def load_hardware(name: str) -> Device | System | Link:
    """A built-in (or user) device, system or link spec by name or alias (e.g. ``"h200"``)."""
    from simcore.specs.registry import default_registry

    if not isinstance(name, str):
        raise SpecError(f"expected a device, system or link name, got {type(name).__name__}", field="name")
    return default_registry().find(name)[1]


_LAZY = {
    "Device": "simcore.specs.hardware",
    "Link": "simcore.specs.hardware",
    "System": "simcore.specs.hardware",
    "load_scenario": "simcore.specs.resolve",
    "predict": "simcore.prediction",
    "predict_jobs": "simcore.planning.multijob",
    "op_time": "simcore.compute.ops",
    "moe_layer_time": "simcore.prediction",
    "collective_time": "simcore.comm.collectives",
    "plan": "simcore.planning.plan",
    "serve": "simcore.serving",
    "transfer_time": "simcore.comm.host",
    "occupancy": "simcore.compute.occupancy",
}


def __getattr__(name: str) -> Any:
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
    "predict_jobs",
    "serve",
    "transfer_time",
]
