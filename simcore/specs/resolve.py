"""Scenario loading (overrides, model presets) and resolution of names against the registry."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from simcore.errors import SpecError
from simcore.specs.hardware import Device, FabricSpec, Link, System
from simcore.specs.loader import read_yaml, validate
from simcore.specs.memo import SpecMemo
from simcore.specs.registry import Registry, builtin_dir, default_registry
from simcore.specs.scenario import ClusterSpec, Scenario


def apply_overrides(
    data: dict[str, Any], overrides: list[str] | tuple[str, ...], file: str | None = None
) -> None:
    """Apply ``key.path=value`` overrides in place; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected key.path=value", file=file)
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise SpecError(f"--set {item!r}: empty key", file=file)
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node: Any = data
        for p in parts[:-1]:
            if not isinstance(node, dict):
                raise SpecError(f"--set {item!r}: {p!r} is not a section", file=file)
            if node.get(p) is None:  # absent, or an empty section (``training:`` with nothing under it)
                node[p] = {}
            node = node[p]
        if not isinstance(node, dict):
            raise SpecError(f"--set {item!r}: cannot set a field inside a value", file=file)
        node[parts[-1]] = value


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s fields on top, section by section (a nested section given beside a preset,
    such as ``moe: {imbalance: 1.5}``, overrides only the fields it names)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve_scenario_dict(data: dict[str, Any], reg: Registry, file: str | None = None) -> dict[str, Any]:
    """Fill ``model`` from its preset (explicit fields override the preset's, nested sections field by
    field)."""
    data = copy.deepcopy(data)
    model = data.get("model")
    if isinstance(model, dict) and model.get("preset"):
        try:
            preset = reg.model_preset(str(model["preset"]))
        except SpecError as e:
            raise SpecError(e.problem, file=file, field="model.preset") from None
        preset.pop("aliases", None)
        merged = _deep_merge(preset, model)
        data["model"] = merged
    return data


def find_scenario(name: str | Path) -> Path:
    """A scenario path, or the name of a built-in scenario (``scenarios/NAME.yaml``)."""
    p = Path(name)
    if p.exists():
        return p
    try:
        builtin = builtin_dir("scenarios")
    except SpecError:
        return p
    for cand in (builtin / f"{name}.yaml", builtin / str(name)):
        if cand.is_file():
            return cand
    return p


def _overrides(overrides: Any) -> tuple[str, ...]:
    if isinstance(overrides, str):
        return (overrides,)
    if not isinstance(overrides, list | tuple) or not all(isinstance(o, str) for o in overrides):
        raise SpecError(
            f"expected a list of 'key.path=value' strings, got {type(overrides).__name__}", field="overrides"
        )
    return tuple(overrides)


def load_scenario(
    path: str | os.PathLike[str] | dict[str, Any],
    overrides: list[str] | tuple[str, ...] = (),
    reg: Registry | None = None,
) -> Scenario:
    """Load and validate a scenario: a YAML file, a built-in scenario name, or a dict of the file's
    fields (validated the same way), with ``--set``-style ``key.path=value`` overrides."""
    reg = reg or default_registry()
    todo = _overrides(overrides)
    if isinstance(path, dict):
        data = copy.deepcopy(path)
        apply_overrides(data, todo)
        return scenario_from_dict(data, reg)
    if not isinstance(path, str | os.PathLike):
        raise SpecError(
            "expected a scenario file path, a built-in scenario name or a dict of its fields, "
            f"got {type(path).__name__}",
            field="path",
        )
    p = find_scenario(os.fspath(path))
    # a file already loaded, unchanged since (same size and modification time), with the same overrides
    # and registry: the same (frozen) Scenario, without parsing and validating again
    try:
        st = p.stat()
        key: tuple[Any, ...] | None = (os.path.abspath(p), st.st_mtime_ns, st.st_size, todo)
    except (OSError, ValueError):
        key = None  # (read_yaml names the problem)
    hit: Scenario | None = _LOADED.get((reg,), key) if key is not None else None
    if hit is not None:
        return hit
    data = read_yaml(p)
    apply_overrides(data, todo, str(p))
    sc = scenario_from_dict(data, reg, str(p))
    if key is not None:
        _LOADED.put((reg,), key, sc)
    return sc


_LOADED = SpecMemo(256)
"""Scenarios loaded from files, by path, size, modification time and overrides, pinned to the registry."""


def as_scenario(scenario: Any) -> Scenario:
    """A :class:`Scenario` from what the public API takes for one: a Scenario, a path or built-in
    name, or a dict of its fields; anything else is a :class:`SpecError` naming ``scenario``."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, str | os.PathLike | dict):
        return load_scenario(scenario)
    raise SpecError(
        "expected a Scenario, a scenario file path or built-in name, or a dict of its fields, "
        f"got {type(scenario).__name__}",
        field="scenario",
    )


def scenario_from_dict(
    data: dict[str, Any], reg: Registry | None = None, file: str | None = None
) -> Scenario:
    reg = reg or default_registry()
    if not isinstance(data, dict):
        raise SpecError(f"expected a mapping of scenario fields, got {type(data).__name__}", file=file)
    data = resolve_scenario_dict(data, reg, file)
    sc = validate(Scenario, data, file)
    resolve_cluster(sc.cluster, reg, file)  # name and size checks
    return sc


@dataclass(frozen=True)
class ClusterInfo:
    """A cluster spec resolved against the registry."""

    system: System
    device: Device
    nodes: int
    """Systems used (a subset of one system counts as one)."""
    gpus: int
    """GPUs used in total."""
    fabric: FabricSpec
    nic: Link
    fabric_link: Link
    nvswitch: Link | None

    @property
    def gpus_per_node(self) -> int:
        """GPUs used in each system (all systems use the same number)."""
        return self.gpus // max(self.nodes, 1)

    @property
    def nvlink_bandwidth(self) -> float:
        """Bytes/s per GPU per direction inside the NVLink domain."""
        if self.system.nvlink_bandwidth is not None:
            return self.system.nvlink_bandwidth
        if self.device.nvlink is not None:
            return self.device.nvlink.bandwidth
        return self.device.pcie_bandwidth

    @property
    def nics_per_node(self) -> int:
        return self.fabric.nics_per_node or self.system.nics

    @property
    def nic_bandwidth(self) -> float:
        """Bytes/s per NIC per direction."""
        return self.fabric.nic_bandwidth or self.fabric_link.bandwidth


def _spread(gpus: int, system: System) -> int | None:
    """Fewest systems that hold ``gpus`` GPUs evenly in whole trays (``None`` if the system has no
    trays or no such count exists)."""
    tray = system.tray_gpus
    if tray is None or gpus % tray:
        return None
    for n in range(-(-gpus // system.gpus), gpus // tray + 1):
        if gpus % n == 0 and (gpus // n) % tray == 0:
            return n
    return None


def resolve_cluster(c: ClusterSpec, reg: Registry, file: str | None = None) -> ClusterInfo:
    try:
        system = reg.system(c.system)
    except SpecError as e:
        raise SpecError(e.problem, file=file, field="cluster.system") from None
    per = system.gpus
    if c.nodes is not None and c.gpus is not None:
        if c.gpus > c.nodes * per:
            raise SpecError(
                f"{c.gpus} GPUs exceed what {c.nodes} x {system.name} hold ({c.nodes * per})",
                file=file,
                field="cluster.gpus",
            )
        if c.gpus % c.nodes:
            raise SpecError(
                f"{c.gpus} GPUs do not spread evenly over {c.nodes} x {system.name} ({per} GPUs each)",
                file=file,
                field="cluster.gpus",
            )
        nodes, gpus = c.nodes, c.gpus
    elif c.gpus is not None:
        gpus = c.gpus
        nodes = -(-gpus // per)
    elif c.nodes is not None:
        nodes, gpus = c.nodes, c.nodes * per
    else:
        nodes, gpus = 1, per
    if gpus > per and gpus % per != 0 and c.nodes is None:
        spread = _spread(gpus, system)
        if spread is None:
            raise SpecError(
                f"{gpus} GPUs do not fill whole {system.name} systems ({per} GPUs each); give "
                "cluster.nodes to spread them over that many systems",
                file=file,
                field="cluster.gpus",
            )
        nodes = spread
    fabric = c.fabric or system.fabric
    try:
        fabric_link = reg.link(fabric.link)
    except SpecError as e:
        raise SpecError(e.problem, file=file, field="cluster.fabric.link") from None
    if fabric_link.kind not in ("infiniband", "ethernet"):
        raise SpecError(
            f"{fabric.link!r} is a {fabric_link.kind} link, expected infiniband or ethernet",
            file=file,
            field="cluster.fabric.link",
        )
    return ClusterInfo(
        system=system,
        device=reg.device(system.device),
        nodes=nodes,
        gpus=gpus,
        fabric=fabric,
        nic=reg.link(system.nic),
        fabric_link=fabric_link,
        nvswitch=reg.link(system.nvswitch) if system.nvswitch else None,
    )


def cluster_for(
    system: str, gpus: int | None = None, nodes: int | None = None, reg: Registry | None = None
) -> ClusterInfo:
    """Resolve a cluster from a system name and a size (for the CLI and API)."""
    reg = reg or default_registry()
    spec = validate(ClusterSpec, {"system": system, "gpus": gpus, "nodes": nodes}, None, "cluster")
    return resolve_cluster(spec, reg)


__all__ = [
    "ClusterInfo",
    "apply_overrides",
    "as_scenario",
    "cluster_for",
    "find_scenario",
    "load_scenario",
    "resolve_cluster",
    "scenario_from_dict",
]
