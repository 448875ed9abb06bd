"""Pricing: turn lowered ops into seconds with the compute and communication cost models.

One :class:`Pricer` holds what pricing needs (device, calibration profiles, cluster, communicator
placements, framework) and evaluates an :class:`~simcore.workload.lowering.Op` over numpy grids.
Both engines price through it, so a formula lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcore.calibration.profile import ComputeProfile, load_profile
from simcore.comm.collectives import collective_cost
from simcore.comm.groups import GroupPlacement, megatron_groups, placement
from simcore.compute import ops as C
from simcore.specs.resolve import ClusterInfo
from simcore.workload.lowering import Op

Num = Any


@dataclass
class Priced:
    """Seconds, FLOPs and bytes of a list of ops, by category (arrays over layouts)."""

    time: dict[str, Num] = field(default_factory=dict)
    flops: Num = 0.0
    kernels: Num = 0.0

    def add(self, category: str, t: Num) -> None:
        self.time[category] = self.time.get(category, 0.0) + t

    def total(self, exclude: tuple[str, ...] = ()) -> Num:
        out: Num = 0.0
        for k, v in self.time.items():
            if k not in exclude:
                out = out + v
        return out

    def scaled(self, factor: Num) -> Priced:
        return Priced(
            {k: v * factor for k, v in self.time.items()}, self.flops * factor, self.kernels * factor
        )

    def merged(self, other: Priced) -> Priced:
        out = Priced(dict(self.time), self.flops + other.flops, self.kernels + other.kernels)
        for k, v in other.time.items():
            out.add(k, v)
        return out


@dataclass
class Pricer:
    """Prices ops for one device, cluster and framework over numpy grids of layouts."""

    cluster: ClusterInfo
    framework: str = "eager"
    groups: dict[str, GroupPlacement] = field(default_factory=dict)
    profile: ComputeProfile | None = None
    calibration: str | None = None

    def __post_init__(self) -> None:
        if self.profile is None:
            self.profile = load_profile(self.cluster.device, self.calibration)
        self.launch_s = C.launch_overhead(self.profile, self.framework)

    @property
    def prof(self) -> ComputeProfile:
        assert self.profile is not None
        return self.profile

    @staticmethod
    def for_layout(
        cluster: ClusterInfo,
        tp: Num = 1,
        cp: Num = 1,
        dp: Num = 1,
        pp: Num = 1,
        ep: Num = 1,
        framework: str = "eager",
        calibration: str | None = None,
    ) -> Pricer:
        """A pricer with Megatron rank placement (tp fastest, then cp, dp, pp; ep inside dp)."""
        groups = megatron_groups(cluster, tp, cp, dp, pp)
        groups["ep"] = placement(cluster, ep, np.asarray(tp, dtype=float) * np.asarray(cp, dtype=float))
        return Pricer(cluster, framework, groups, calibration=calibration)

    def kernel_time(self, op: Op) -> Num:
        """Seconds of one invocation of ``op``: the kernel, or the host's dispatch of it when that is
        longer (eager forward ops pay their measured per-family host time in Python; backward ops are
        dispatched by the C++ autograd engine at the generic per-kernel cost)."""
        a = op.args
        dev, prof = self.cluster.device, self.prof
        backward = op.name.endswith(("_bwd", "_dgrad", "_wgrad"))
        if op.kind == "gemm":
            t = C.gemm(dev, prof, a["m"], a["n"], a["k"], a["dtype"], a.get("batch", 1)).time_s
            family = "gemm"
        elif op.kind == "attention":
            t = C.attention(
                dev,
                prof,
                a["batch"],
                a["heads"],
                a["seq"],
                a["head_dim"],
                a.get("causal", True),
                a.get("backward", False),
                a.get("kv_heads"),
                a.get("kv_seq"),
                "bf16" if a["dtype"] == "fp8" else a["dtype"],
            ).time_s
            family = "attention_bwd" if a.get("backward") else "attention_fwd"
        elif op.kind == "memory":
            t = C.memory_op(dev, prof, a["name"], a["nbytes"], a.get("flops", 0.0)).time_s
            family = "memory"
        else:
            return self.comm_time(a["op"], a["nbytes"], a["group"])
        return C.stream_time(prof, t, self.framework, None if backward else family)

    def flops(self, op: Op) -> Num:
        a = op.args
        if op.kind == "gemm":
            return 2.0 * a["m"] * a["n"] * a["k"] * a.get("batch", 1)
        if op.kind == "attention":
            dev, prof = self.cluster.device, self.prof
            return C.attention(
                dev,
                prof,
                a["batch"],
                a["heads"],
                a["seq"],
                a["head_dim"],
                a.get("causal", True),
                a.get("backward", False),
                a.get("kv_heads"),
                a.get("kv_seq"),
                "bf16",
            ).flops
        return 0.0

    def comm_time(self, op: str, nbytes: Num, group: str, dtype: str = "bf16") -> Num:
        """Seconds of a collective over the named communicator (0 where the group has one rank)."""
        g = self.groups.get(group)
        if g is None:
            return 0.0
        size = g.size
        if np.all(size <= 1):
            return 0.0 * np.asarray(nbytes, dtype=float)
        nb = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        t = collective_cost(op, nb, g, self.cluster, dtype=dtype).time_s
        return np.where(size > 1, t, 0.0)

    def price(self, ops: list[Op], count: Num = 1.0) -> Priced:
        """Seconds by category of running ``ops`` (each ``op.count`` times), ``count`` times."""
        out = Priced()
        for op in ops:
            t = self.kernel_time(op) * op.count * count
            out.add(op.category, t)
            if op.kind != "comm":
                out.flops = out.flops + self.flops(op) * op.count * count
                out.kernels = out.kernels + op.count * count
        return out
