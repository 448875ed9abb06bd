"""The registry of specs: built-in ones shipped with simcore plus user folders.

User folders come from ``--specs DIR`` on the CLI, ``SIMCORE_SPECS`` (``os.pathsep``-separated) in
the environment, or :func:`registry(extra_dirs=...)`. A user folder has the same layout as the
built-in ``hardware_specs/``: ``devices/``, ``links/``, ``systems/``, ``models/``, ``calibration/``.
A user spec with the same name as a built-in one replaces it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcore.errors import SpecError
from simcore.specs.hardware import Device, Link, System
from simcore.specs.loader import load_file, read_yaml

ENV_VAR = "SIMCORE_SPECS"
_PKG = Path(__file__).resolve().parent.parent


REPO_ENV_VAR = "SIMCORE_REPO"


def _installed_from() -> Path | None:
    """The folder ``pip install`` read this package from (PEP 610 ``direct_url.json``), if local."""
    # (imported here: urllib.request pulls in http and ssl, which a checkout never needs)
    import importlib.metadata
    import json
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    try:
        raw = importlib.metadata.distribution("simcore").read_text("direct_url.json")
        url = json.loads(raw or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        return None
    return Path(url2pathname(urlparse(url).path)) if url.startswith("file:") else None


def checkout_dir() -> Path:
    """The simcore source checkout (the folder holding ``traces/`` and ``tests/``), whatever the working
    directory: ``$SIMCORE_REPO``; else the folder above the imported package (a checkout or an editable
    install); else the folder a non-editable ``pip install PATH`` was run on."""
    env = os.environ.get(REPO_ENV_VAR)
    if env:
        if not (Path(env) / "traces").is_dir():
            raise SpecError(f"{REPO_ENV_VAR}={env} is not a simcore checkout (it has no traces/ folder)")
        return Path(env).resolve()
    for cand in (_PKG.parent, _installed_from()):
        if cand is not None and (cand / "traces").is_dir():
            return cand
    raise SpecError(
        f"the simcore checkout (with traces/) was not found beside {_PKG}: set {REPO_ENV_VAR} to the clone"
    )


def builtin_dir(kind: str = "hardware_specs") -> Path:
    """Folder of built-in data: inside the installed package, or the repository in a checkout (also the
    one a non-editable install came from, :func:`checkout_dir`)."""
    for cand in (_PKG / "_data" / kind, _PKG.parent / kind):
        if cand.is_dir():
            return cand
    try:
        if (checkout_dir() / kind).is_dir():
            return checkout_dir() / kind
    except SpecError:
        pass
    raise SpecError(
        f"built-in {kind}/ folder not found (looked in {_PKG / '_data'} and {_PKG.parent}; "
        f"set {REPO_ENV_VAR} to the simcore clone)"
    )


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@dataclass
class Registry:
    """Specs by canonical name; aliases resolve to canonical names."""

    devices: dict[str, Device] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)
    systems: dict[str, System] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    calibration_files: dict[str, Path] = field(default_factory=dict)
    aliases: dict[tuple[str, str], str] = field(default_factory=dict)
    origin: dict[tuple[str, str], Path] = field(default_factory=dict)

    def _lookup(self, kind: str, table: dict[str, Any], name: str) -> str:
        key = _norm(name)
        key = self.aliases.get((kind, key), key)
        if key not in table:
            known = ", ".join(sorted(table))
            raise SpecError(f"unknown {kind} {name!r}; known: {known}")
        return key

    def device(self, name: str) -> Device:
        return self.devices[self._lookup("device", self.devices, name)]

    def link(self, name: str) -> Link:
        return self.links[self._lookup("link", self.links, name)]

    def system(self, name: str) -> System:
        return self.systems[self._lookup("system", self.systems, name)]

    def model_preset(self, name: str) -> dict[str, Any]:
        return dict(self.models[self._lookup("model preset", self.models, name)])

    def calibration_path(self, name: str) -> Path | None:
        key = _norm(name)
        return self.calibration_files.get(key)

    def find(self, name: str) -> tuple[str, Device | Link | System]:
        """Look a name up among devices, systems and links (in that order)."""
        key = _norm(name)
        for kind, table in (("device", self.devices), ("system", self.systems), ("link", self.links)):
            k = self.aliases.get((kind, key), key)
            if k in table:
                return kind, table[k]
        known = ", ".join(sorted([*self.devices, *self.systems, *self.links]))
        raise SpecError(f"unknown device, system or link {name!r}; known: {known}")

    def _add(self, kind: str, table: dict[str, Any], spec: Any, path: Path) -> None:
        key = _norm(spec.name)
        if key in table and self.origin.get((kind, key), path).parent == path.parent:
            raise SpecError(
                f"duplicate {kind} name {spec.name!r} (also in {self.origin[(kind, key)]})", file=str(path)
            )
        table[key] = spec
        self.origin[(kind, key)] = path
        for a in spec.aliases:
            self.aliases[(kind, _norm(a))] = key

    def load_dir(self, root: Path) -> None:
        if not root.is_dir():
            raise SpecError("spec folder not found", file=str(root))
        for path in sorted((root / "devices").glob("*.yaml")):
            self._add("device", self.devices, load_file(Device, path), path)
        for path in sorted((root / "links").glob("*.yaml")):
            self._add("link", self.links, load_file(Link, path), path)
        for path in sorted((root / "systems").glob("*.yaml")):
            self._add("system", self.systems, load_file(System, path), path)
        for path in sorted((root / "models").glob("*.yaml")):
            data = read_yaml(path)
            name = _norm(str(data.get("name", path.stem)))
            self.models[name] = data
            for a in data.pop("aliases", []) or []:
                self.aliases[("model preset", _norm(a))] = name
        for path in sorted((root / "calibration").glob("*.yaml")):
            self.calibration_files[_norm(path.stem)] = path

    def check_references(self) -> None:
        """Every system names a known device, NIC, switch and PCIe link."""
        for s in self.systems.values():
            where = str(self.origin[("system", _norm(s.name))])
            for fld, kind, table, value in (
                ("device", "device", self.devices, s.device),
                ("nic", "link", self.links, s.nic),
                ("pcie", "link", self.links, s.pcie),
                ("nvswitch", "link", self.links, s.nvswitch),
                ("fabric.link", "link", self.links, s.fabric.link),
            ):
                if value is None:
                    continue
                try:
                    self._lookup(kind, table, value)
                except SpecError as e:
                    raise SpecError(e.problem, file=where, field=fld) from None


def spec_dirs(extra_dirs: Iterable[str | Path] = ()) -> tuple[Path, ...]:
    return _spec_dirs(os.environ.get(ENV_VAR, ""), tuple(str(p) for p in extra_dirs))


@lru_cache(maxsize=32)
def _spec_dirs(env: str, extra: tuple[str, ...]) -> tuple[Path, ...]:
    paths = [p for p in env.split(os.pathsep) if p]
    return (builtin_dir(), *(Path(p) for p in paths), *(Path(p) for p in extra))


@lru_cache(maxsize=8)
def _cached(dirs: tuple[Path, ...]) -> Registry:
    reg = Registry()
    for d in dirs:
        reg.load_dir(d)
    reg.check_references()
    return reg


def registry(extra_dirs: Iterable[str | Path] = ()) -> Registry:
    """The registry of built-in specs plus ``$SIMCORE_SPECS`` and ``extra_dirs`` (later ones win)."""
    return _cached(spec_dirs(extra_dirs))


_default_extra: list[Path] = []


def set_user_dirs(dirs: Iterable[str | Path]) -> None:
    """Set folders that :func:`default_registry` adds (the CLI's ``--specs``)."""
    _default_extra[:] = [Path(d) for d in dirs]


def user_dirs() -> tuple[Path, ...]:
    """Folders :func:`set_user_dirs` added (the CLI's ``--specs``), e.g. to hand to sweep workers."""
    return tuple(_default_extra)


def default_registry() -> Registry:
    return registry(tuple(_default_extra))
