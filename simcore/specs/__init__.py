"""Specs: pure data (pydantic v2, frozen, unknown fields rejected) loaded from YAML."""

from simcore.specs.hardware import DTYPE_BYTES, Device, FabricSpec, Link, System
from simcore.specs.registry import Registry, default_registry, registry
from simcore.specs.resolve import ClusterInfo, cluster_for, load_scenario, resolve_cluster, scenario_from_dict
from simcore.specs.scenario import (
    ClusterSpec,
    InferenceSpec,
    ModelSpec,
    MoESpec,
    ParallelSpec,
    RuntimeSpec,
    Scenario,
    TrainingSpec,
)

__all__ = [
    "DTYPE_BYTES",
    "ClusterInfo",
    "ClusterSpec",
    "Device",
    "FabricSpec",
    "InferenceSpec",
    "Link",
    "ModelSpec",
    "MoESpec",
    "ParallelSpec",
    "Registry",
    "RuntimeSpec",
    "Scenario",
    "System",
    "TrainingSpec",
    "cluster_for",
    "default_registry",
    "load_scenario",
    "registry",
    "resolve_cluster",
    "scenario_from_dict",
]
