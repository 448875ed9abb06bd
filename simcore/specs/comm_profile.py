"""Collectives as data: the op names simcore knows, nccl-tests' bus-bandwidth convention, and the schema
of a communication calibration profile (``hardware_specs/calibration/comm-<system>.yaml``) with its loader.

The cost model that reads a profile is :mod:`simcore.comm.collectives`; the fitter that writes one is
:mod:`simcore.calibration.fit_comm`; the nccl-tests reader is :mod:`simcore.traces.nccl`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field

from simcore.errors import SimcoreError, SpecError
from simcore.specs.loader import read_yaml, validate
from simcore.specs.quantities import Bandwidth, Bytes, Seconds, Spec
from simcore.specs.registry import Registry, default_registry

FloatArray = NDArray[np.float64]

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"]
OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
)
_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
    "bcast": "broadcast",
    "p2p": "send_recv",
}


def normalize_op(op: str) -> str:
    """Canonical op name (``"AllReduce"``, ``"all-reduce"``, ``"all_reduce_perf"`` all give ``all_reduce``)."""
    key = op.strip().lower().replace("-", "_")
    key = key.removesuffix("_perf")
    key = _OP_ALIASES.get(key.replace("_", ""), key)
    if key not in OPS:
        raise SimcoreError(f"unknown collective {op!r}; known: {', '.join(OPS)}", field="op")
    return key


def busbw_factor(op: str, n: ArrayLike) -> FloatArray:
    """nccl-tests bus-bandwidth factor: busbw = algbw * factor (n = ranks)."""
    op = normalize_op(op)
    nn = np.asarray(n, dtype=np.float64)
    if op == "all_reduce":
        return 2.0 * (nn - 1.0) / nn
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (nn - 1.0) / nn
    return np.ones_like(nn)


class ProtoTimes(Spec):
    """Seconds per protocol (``LL``, ``LL128``, ``Simple``); a missing protocol is not offered."""

    LL: Seconds | None = None
    LL128: Seconds | None = None
    Simple: Seconds | None = None

    def get(self, proto: str) -> float | None:
        v: float | None = getattr(self, proto)
        return v


class LinkCurve(Spec):
    """Achieved fraction of a link class's spec bandwidth as a function of the per-port load."""

    efficiency: float = Field(default=1.0, gt=0, le=1.5)
    """Plateau fraction of spec bandwidth reached by very large messages."""
    ramp_bytes: Bytes = 0.0
    """Load (bytes per port) at which half of the plateau is reached (0: no ramp)."""
    ramp_exponent: float = Field(default=1.0, gt=0, le=1.0)
    """Shape of the ramp: 1 is alpha-beta, smaller approaches the plateau more slowly."""


class Channels(Spec):
    """NCCL channel (SM) limits: each protocol moves at most ``count * per_channel`` bytes/s."""

    count: int = Field(default=32, gt=0)
    per_channel: dict[str, Bandwidth] = {}
    """Bytes/s per channel and protocol (e.g. LL128 is capped per channel); missing = no cap."""


class CommProfile(Spec):
    """Calibrated collective-cost parameters of one system (``comm-<system>.yaml``)."""

    system: str
    provisional: bool = False
    """True while nothing was fitted: spec bandwidths, neutral efficiencies, NCCL's default latencies."""
    source: str = ""
    fitted_on: str | None = None
    """Measurement file(s) the fitted numbers come from."""
    fit_report: dict[str, Any] = {}
    """Held-out errors written by the fit (for people; not used by the model)."""
    base_latency: dict[str, ProtoTimes]
    """Fixed cost per algorithm (ring, tree, nvls, hierarchical, p2p) and protocol."""
    hop_latency: dict[str, ProtoTimes]
    """Cost per step per link class (nvlink, network) and protocol."""
    protocol_bandwidth: dict[str, float]
    """Fraction of link bandwidth a protocol carries (LL ~1/4, LL128 ~0.92, Simple 1)."""
    links: dict[str, LinkCurve]
    algorithms: dict[str, float] = {}
    """Bandwidth multiplier per algorithm (default 1)."""
    ops: dict[str, float] = {}
    """Bandwidth multiplier per op (default 1)."""
    dtypes: dict[str, float] = {}
    """Bandwidth multiplier per dtype for reductions (default 1)."""
    compute_slowdown: float = Field(default=1.0, ge=1.0)
    """Factor on compute kernels while a collective of this system runs beside them on another
    stream (NCCL's kernels take SMs and HBM bandwidth): the median over GEMMs and memory-bound ops of
    their time beside a stream of all-reduces over their time alone (two NVLinked H200s: 1.36; docs/compute.md, compute beside overlapped collectives)."""
    op_overhead: dict[str, Seconds] = {}
    """Per-call floor of an op, seconds: back-to-back calls cannot be issued faster than the host
    launch path (torch.distributed + NCCL enqueue), so time = max(floor, latency + wire); default 0."""
    peer_latency_fraction: float = Field(default=1.0, ge=0)
    """All-to-all: fraction of a hop latency paid per peer."""
    channels: Channels = Channels()
    notes: list[str] = []


@dataclass(frozen=True)
class LoadedProfile:
    """A profile plus where it came from."""

    profile: CommProfile
    path: Path | None
    transferred_from: str | None
    """System whose profile was borrowed (``None`` when the system has its own)."""


def profile_path(system: str, reg: Registry | None = None) -> Path | None:
    reg = reg or default_registry()
    return reg.calibration_path(f"comm-{system}")


def read_profile(path: str | Path) -> CommProfile:
    """Load a ``comm-*.yaml`` profile (one-line :class:`SpecError` when malformed)."""
    return validate(CommProfile, read_yaml(path), str(path))


def _nearest(system: str, reg: Registry) -> str | None:
    target = reg.system(system)
    tdev = reg.device(target.device)
    best: tuple[int, str] | None = None
    for key in sorted(reg.calibration_files):
        if not key.startswith("comm-"):
            continue
        name = key[len("comm-") :]
        try:
            other = reg.system(name)
        except SpecError:
            continue
        score = 0
        score += 4 * (other.nvswitch == target.nvswitch)
        score += 2 * (reg.device(other.device).architecture == tdev.architecture)
        score += 1 * (other.fabric.link == target.fabric.link)
        score += 1 * (other.nvlink_domain == target.nvlink_domain)
        if best is None or score > best[0]:
            best = (score, name)
    return None if best is None else best[1]


@lru_cache(maxsize=64)
def _load_cached(system: str, reg_id: int) -> LoadedProfile:
    reg = default_registry()
    canonical = reg.system(system).name
    path = profile_path(canonical, reg)
    if path is not None:
        return LoadedProfile(read_profile(path), path, None)
    near = _nearest(canonical, reg)
    if near is None:
        raise SpecError(
            f"no comm calibration profile for {canonical!r} and none to transfer from "
            "(expected hardware_specs/calibration/comm-<system>.yaml)"
        )
    npath = profile_path(near, reg)
    assert npath is not None
    return LoadedProfile(read_profile(npath), npath, near)


def load_profile(system: str) -> LoadedProfile:
    """The comm profile of ``system`` or, failing that, of the nearest system that has one."""
    return _load_cached(system, id(default_registry()))


