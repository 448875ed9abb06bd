"""Host<->GPU copies: ``time = latency + bytes / (host link bandwidth per direction x efficiency)``.

The host link is the system's PCIe generation (``pcie``) or, on Grace systems, NVLink-C2C
(``host_link``). Latency and efficiency per direction (host-to-GPU, GPU-to-host) and host memory kind
(pinned; pageable, which the driver stages through a pinned bounce buffer) are fitted numbers of the
compute profile's ``host_copy`` section (:class:`simcore.specs.profile.HostCopies`, fitted by
:mod:`simcore.calibration.fit_copy`), or stated defaults with their source where no copy was measured.
The modelled time is the copy's duration on the GPU as the profiler records it (Kineto ``gpu_memcpy``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simcore.errors import SimcoreError, SpecError
from simcore.specs import default_registry
from simcore.specs.arguments import byte_size, show
from simcore.specs.hardware import Device, Link, System
from simcore.specs.profile import ComputeProfile, CopyParams, HostCopies, load_profile

_PLACES = {"host": "host", "cpu": "host", "gpu": "gpu", "device": "gpu", "cuda": "gpu"}


def copy_time(nbytes: ArrayLike, bandwidth: ArrayLike, latency: ArrayLike, eff: ArrayLike) -> NDArray[np.float64]:
    """Seconds of host<->GPU copies of ``nbytes`` over a link of ``bandwidth`` bytes/s per direction
    achieving ``eff`` of it after ``latency`` seconds (numpy-broadcasting over every argument)."""
    b = np.asarray(nbytes, dtype=np.float64)
    out: NDArray[np.float64] = np.asarray(latency, dtype=np.float64) + b / (
        np.asarray(bandwidth, dtype=np.float64) * np.asarray(eff, dtype=np.float64)
    )
    return out


@dataclass(frozen=True)
class TransferResult:
    """Predicted time of one host<->GPU copy."""

    nbytes: float
    src: str
    dst: str
    pinned: bool
    system: str
    link: str
    """The host link spec that carries the copy (``pcie5``, ``nvlink-c2c``, ...)."""
    time_s: float
    latency_s: float
    efficiency: float
    """Achieved fraction of the link's bandwidth per direction."""
    link_bandwidth: float
    """The link's raw bandwidth per direction (bytes/s)."""
    bandwidth: float
    """Achieved bytes/s of this copy (``nbytes / time_s``)."""
    basis: str
    """Where latency and efficiency come from (fitted copies, or a stated default and its source)."""
    notes: list[str] = field(default_factory=list)


def host_link(system: System) -> Link:
    """The link spec joining ``system``'s GPUs to host memory (``host_link``, else ``pcie``)."""
    name = system.host_link or system.pcie
    kind, spec = default_registry().find(name)
    if not isinstance(spec, Link):
        raise SpecError(f"host link {name!r} of system {system.name} is a {kind}, not a link", field="system")
    return spec


def _copy_profile(system: System) -> tuple[HostCopies, str | None]:
    """The host-copy parameters for ``system``'s device and, when they were measured on another
    device, that device's name."""
    reg = default_registry()
    device = reg.find(system.device)[1]
    if not isinstance(device, Device):
        raise SpecError(f"device {system.device!r} of system {system.name} is not a device spec", field="system")
    own: ComputeProfile = load_profile(device)
    if own.host_copy is not None:
        return own.host_copy, own.transferred_from
    for name in sorted(reg.calibration_files):
        try:
            other = load_profile(device, name)
        except SimcoreError:
            continue  # not a compute profile (a comm profile)
        if other.host_copy is not None:
            return other.host_copy, other.transferred_from or name
    raise SpecError(f"no calibration profile has host-copy parameters (host_copy) for {system.name}")


def pinned_copy_time(system: System, nbytes: ArrayLike, direction: str) -> NDArray[np.float64]:
    """Seconds of copies of ``nbytes`` between pinned host memory and one GPU of ``system``, ``direction``
    ``d2h`` or ``h2d``, over its host link (:func:`host_link`) at the profile's latency and efficiency
    (numpy-broadcasting over ``nbytes``): what an offload stream moves (docs/parallelism.md, Offload)."""
    copies, _ = _copy_profile(system)
    p = copies.params(direction, True)
    return copy_time(nbytes, host_link(system).bandwidth, p.latency, p.eff)


def transfer_time(
    nbytes: float | int | str,
    src: str = "host",
    dst: str = "gpu",
    pinned: bool = True,
    system: str = "hgx-h200",
) -> TransferResult:
    """Predicted time of one copy of ``nbytes`` (a number or a string such as ``"256 MB"``) from ``src``
    to ``dst`` (``"host"`` and ``"gpu"``, either way round) between pinned (page-locked) or pageable host
    memory and a GPU of ``system``, over the system's host link. Returns seconds in ``time_s`` with the
    link, efficiency, latency and achieved bandwidth beside them, and ``basis``: where the numbers come from.
    """
    for name, v in (("src", src), ("dst", dst), ("system", system)):
        if not isinstance(v, str):
            raise SimcoreError(f"expected a string, got {type(v).__name__} {show(v)}", field=name)
    ends = []
    for name, v in (("src", src), ("dst", dst)):
        place = _PLACES.get(v.strip().lower())
        if place is None:
            raise SimcoreError(f"unknown place {v!r}; known: host, gpu", field=name)
        ends.append(place)
    if ends[0] == ends[1]:
        raise SimcoreError(
            f"a copy from {ends[0]} to {ends[1]} does not cross the host link; one end must be host, the other gpu",
            field="dst",
        )
    if not isinstance(pinned, bool | np.bool_):
        raise SimcoreError(f"expected True or False, got {type(pinned).__name__} {show(pinned)}", field="pinned")
    size = byte_size(nbytes, "nbytes", "copy size")
    try:
        kind, spec = default_registry().find(system)
    except SpecError as e:
        raise SimcoreError(e.problem, field="system") from None
    if not isinstance(spec, System):
        raise SimcoreError(f"{system!r} is a {kind}, not a system (e.g. hgx-h200, gb200-nvl72)", field="system")
    link = host_link(spec)
    copies, measured_on = _copy_profile(spec)
    direction = "h2d" if ends[0] == "host" else "d2h"
    p: CopyParams = copies.params(direction, bool(pinned))
    t = float(copy_time(size, link.bandwidth, p.latency, p.eff))
    notes: list[str] = []
    if measured_on:
        notes.append(f"host-copy parameters measured on {measured_on}, applied to {spec.device}")
    if link.name != copies.link:
        notes.append(
            f"efficiency measured over {copies.link}, applied to {link.name} ({link.bandwidth / 1e9:g} GB/s per direction)"
        )
    return TransferResult(
        nbytes=size,
        src=ends[0],
        dst=ends[1],
        pinned=bool(pinned),
        system=spec.name,
        link=link.name,
        time_s=t,
        latency_s=p.latency,
        efficiency=p.eff,
        link_bandwidth=link.bandwidth,
        bandwidth=size / t,
        basis=p.basis,
        notes=notes,
    )


__all__ = ["TransferResult", "copy_time", "host_link", "pinned_copy_time", "transfer_time"]
