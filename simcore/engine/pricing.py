"""Pricing: turn lowered ops into seconds with the compute and communication cost models.

One :class:`Pricer` holds what pricing needs (device, calibration profiles, cluster, communicator
placements, framework) and evaluates an :class:`~simcore.workload.lowering.Op` over numpy grids.
Both engines price through it, so a formula lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simcore.comm.collectives import collective_cost
from simcore.comm.dispatch import dispatch_time
from simcore.comm.groups import GroupPlacement, megatron_groups, placement
from simcore.compute import ops as C
from simcore.errors import SpecError
from simcore.specs.comm_profile import load_profile as load_comm_profile
from simcore.specs.hardware import DTYPE_BYTES, Device
from simcore.specs.memo import SpecMemo
from simcore.specs.profile import ComputeProfile, load_profile, load_ssd
from simcore.specs.resolve import ClusterInfo
from simcore.workload.lowering import LOW_PRECISION, Op
from simcore.workload.lowering import backward as backward_ops

Num = Any

_GROUP_MEMO = SpecMemo()
"""Seconds and FLOPs of one-layout op groups, pinned to the device and the compute profile they read."""
_COMM_MEMO = SpecMemo()
"""Seconds of one-layout collectives, pinned to the cluster's specs and the comm profile they read."""
_LOWERED_MEMO = SpecMemo()
"""Priced op lists of one-layout lowerings (:meth:`Pricer.price_of`), pinned to the model, the lowering
function and the pricer's specs."""
_GROUPS_MEMO = SpecMemo(256)
"""Communicator placements of one-layout pricers (frozen), pinned to the system."""


def _cluster_pins(c: ClusterInfo) -> tuple[Any, ...] | None:
    """The specs a collective's seconds read of a cluster, as memo pins (its size goes in the key); ``None``
    (no memo) where the system has no comm profile: a collective raises that, a step without one does not."""
    try:
        comm = load_comm_profile(c.system.name)
    except SpecError:
        return None
    return (c.system, c.device, c.fabric, c.nic, c.fabric_link, c.nvswitch, comm)


_PLAIN = frozenset((float, int, bool, str, type(None), np.float64))


def _plain(v: Any) -> Any:
    """A one-layout number as a plain hashable value (``None`` for an array over layouts, or anything
    else that is not a number: no memo then)."""
    if type(v) in _PLAIN:
        return v
    try:
        return float(v) if np.ndim(v) == 0 else None
    except (TypeError, ValueError):
        return None


def _plain_items(a: dict[str, Any]) -> tuple[Any, ...] | None:
    """``(name, value)`` pairs as plain hashable values, or ``None`` where a value is an array over layouts
    (or a list: only an op's backward chain, which pricing does not read, is left out)."""
    if all(type(v) in _PLAIN for v in a.values()):
        return tuple(a.items())
    out = []
    for k, v in a.items():
        if k in ("bwd_chain", "bwd_ops"):
            continue
        p = _plain(v)
        if p is None and v is not None:
            return None
        out.append((k, p))
    return tuple(out)


def _scalar_key(key: tuple[Any, ...], ops: list[Op], ctx: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The memo key of a group of one-layout ops: the pricer's options, the group's kind and each op's
    plain arguments; ``None`` when an argument is an array over layouts."""
    args = []
    for o in ops:
        a = _plain_items(o.args)
        if a is None:
            return None
        args.append(a)
    return (ctx, key, tuple(args))


@dataclass
class Priced:
    """Seconds, FLOPs and bytes of a list of ops, by category (arrays over layouts)."""

    time: dict[str, Num] = field(default_factory=dict)
    flops: Num = 0.0
    kernels: Num = 0.0
    wgrad: Num = 0.0
    """Seconds of weight-gradient GEMMs among them (zero-bubble schedules defer these)."""
    attention_flops: Num = 0.0

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
    contention: dict[str, Num] = field(default_factory=dict)
    """Per communicator, the flow model's slowdown of its network flows on the fabric
    (:func:`simcore.comm.collectives.link_rates`); a communicator not listed: the oversubscription rule."""
    profile: ComputeProfile | None = None
    calibration: str | None = None
    per_op_host: bool = True
    """Bound each kernel by its op's host dispatch time; off when the engine models host time per
    layer from measured whole-layer host overheads."""
    kernel_floor: float = 0.0
    """Least seconds any kernel takes (a small kernel replayed in a CUDA graph)."""
    kernel_gap: float = 0.0
    """Device idle after each kernel (between the kernels of a replayed CUDA graph); the floor, measured
    per kernel of a replay, already holds it."""
    block_format: str | None = None
    """The block-scaled format of the low-precision GEMMs (the precision recipe's, e.g. ``mxfp8``), priced
    at the device's ``block_gemm_rate`` for it; ``None``: per-tensor scaled."""
    per_tensor: bool = False
    """The low-precision GEMMs run the per-tensor kernel family (per-tensor FP8: Transformer Engine's delayed and
    current scaling, TensorRT-LLM's FP8 linears; Blackwell's block-scaled MXFP8/NVFP4): priced with the profile's
    ``fp8_tensor`` parameters, else the row-wise ``fp8`` ones (:meth:`ComputeProfile.gemm_params`)."""
    expert_per_tensor: bool | None = None
    """Whether the MoE expert GEMMs (ops ``expert_*``) run the per-tensor family; ``None``: as ``per_tensor``. Serving
    engines' fused MoE kernels are CUTLASS grouped GEMMs with per-expert scales, not cuBLASLt's per-tensor
    kernel: ``False`` prices them with the row-wise (CUTLASS) family (docs/compute.md, "FP8 GEMMs by scaling")."""
    l2_reuse: bool = False
    """Whether a GEMM's operands may stay in L2 between calls (true in a micro-benchmark that repeats
    one GEMM; false in a model step, where every layer reads its own weights from HBM)."""
    kernel_gemms: bool = False
    """Price GEMMs at their kernels' own in-step rate (the profile's ``gemm_kernel``), as compiled code's are:
    a serving engine's decode step, one CUDA-graph replay without launch gaps (``ServingSpec.decode_gemms``)."""

    def __post_init__(self) -> None:
        if self.profile is None:
            self.profile = load_profile(self.cluster.device, self.calibration)
        self.launch_s = C.launch_overhead(self.profile, self.framework)
        self._comm_cache: dict[tuple[Any, ...], Any] = {}
        self._layout_key: tuple[Any, Any] = (None, None)

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
        per_op_host: bool = True,
        profile: ComputeProfile | None = None,
        etp: Num | None = None,
        dp_contention: Num | None = None,
    ) -> Pricer:
        """A pricer with Megatron rank placement (tp fastest, then cp, dp, pp; ep inside dp, or, given
        ``etp``, Megatron-Core's parallel folding: ep ranks ``etp`` apart over tp x cp x dp; ``edp``: the
        ``tp cp dp / (ep etp)`` ranks that hold the same experts, ``ep`` groups apart). ``dp_contention``:
        the data-parallel groups' network slowdown from the flow model (:attr:`contention`)."""
        sizes = (tp, cp, dp, pp, ep, -1.0 if etp is None else etp)
        # one layout: the placements depend only on the cluster's shape and the degrees
        key = (
            (cluster.gpus, cluster.nodes, *map(float, sizes)) if all(np.ndim(x) == 0 for x in sizes) else None
        )
        groups: dict[str, GroupPlacement] | None = _GROUPS_MEMO.get((cluster.system,), key) if key else None
        if groups is None:
            groups = megatron_groups(cluster, tp, cp, dp, pp)
            stride = np.asarray(tp, dtype=float) * np.asarray(cp, dtype=float) if etp is None else etp
            groups["ep"] = placement(cluster, ep, stride)
            # expert data parallelism: the ranks of tp x cp x dp holding the same experts, ep x stride apart
            e_tp = np.asarray(tp, dtype=float) if etp is None else np.asarray(etp, dtype=float)
            edp = np.maximum(
                np.asarray(tp, dtype=float)
                * np.asarray(cp, dtype=float)
                * np.asarray(dp, dtype=float)
                / (np.asarray(ep, dtype=float) * e_tp),
                1.0,
            )
            groups["edp"] = placement(cluster, edp, np.asarray(ep, dtype=float) * stride)
            if key is not None:
                _GROUPS_MEMO.put((cluster.system,), key, groups)
        return Pricer(
            cluster,
            framework,
            dict(groups),
            {} if dp_contention is None else {"dp": dp_contention},
            profile=profile,
            calibration=calibration,
            per_op_host=per_op_host,
        )

    def comm_time(
        self, op: str, nbytes: Num, group: str, dtype: str = "bf16", fanout: tuple[str, int, int] | None = None
    ) -> Num:
        """Seconds of a collective over the named communicator (0 where the group has one rank);
        ``fanout`` (dispatcher, top_k, experts): an MoE dispatch or combine of a hierarchical dispatcher
        (:func:`simcore.comm.dispatch.dispatch_time`) instead of the NCCL collective ``op``."""
        g = self.groups.get(group)
        if g is None:
            return 0.0
        size = g.size
        if np.all(size <= 1):
            return 0.0 * np.asarray(nbytes, dtype=float)
        nb = np.maximum(np.asarray(nbytes, dtype=float), 1.0)
        slow = self.contention.get(group)
        key = (op, group, dtype, fanout, nb.shape, nb.tobytes())
        hit = self._comm_cache.get(key)
        if hit is not None:
            return hit
        # one layout: a pure function of the cluster's specs, the system's comm profile, the group's
        # placement and the message sizes, kept across calls (docs/architecture.md, Speed)
        c = self.cluster
        plain = _plain(slow)
        one = np.ndim(size) == 0 and nb.size <= 64 and (slow is None or plain is not None)
        pins = _cluster_pins(c) if one else None
        if pins is not None:
            sizes = (float(size), float(g.per_domain), float(g.domains))
            mkey = (op, dtype, c.nodes, c.gpus, *sizes, plain, key[3:])
            hit = _COMM_MEMO.get(pins, mkey)
        if hit is None:
            if fanout is None:
                t = collective_cost(op, nb, g, self.cluster, dtype=dtype, contention=slow).time_s
            else:
                t = dispatch_time(nb, fanout[1], fanout[2], g, self.cluster, fanout[0])
            hit = np.where(size > 1, t, 0.0)
            if pins is not None:
                _COMM_MEMO.put(pins, mkey, hit)
        self._comm_cache[key] = hit
        return hit

    def optimizer_time(
        self,
        params: Num,
        optimizer: str,
        fused: bool,
        master_weights: bool,
        param_dtype: str,
        grad_bytes: float = 4.0,
        moment_bytes: float = 4.0,
    ) -> Num:
        """Seconds of one optimizer update over ``params`` parameters per GPU
        (:func:`simcore.compute.ops.optimizer_step`); for one layout a pure function of the device, the
        profile and these arguments, kept across calls like :meth:`times`."""
        pins = (self.cluster.device, self.prof)
        p = _plain(params)
        key = (
            None
            if p is None
            else ("optimizer", p, optimizer, fused, master_weights, param_dtype, grad_bytes, moment_bytes)
        )
        if key is not None and (hit := _GROUP_MEMO.get(pins, key)) is not None:
            return hit
        t = C.optimizer_step(*pins, params, optimizer, fused, master_weights, param_dtype, grad_bytes, moment_bytes).time_s
        return t if key is None else _GROUP_MEMO.put(pins, key, t)

    def times(self, ops: list[Op]) -> tuple[list[Num], list[Num]]:
        """Seconds of one invocation and FLOPs of each op, priced in batches: ops of the same kind
        (and dtype, direction, memory-op name or communicator) are stacked on a leading axis and
        costed in one vectorised call, so a layer costs a handful of numpy passes."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, op in enumerate(ops):
            a = op.args
            bwd = op.name.endswith(("_bwd", "_dgrad", "_wgrad"))
            if op.kind == "gemm":
                # (ops that say their operands' alignment are priced apart from those that leave it to k, n)
                key: tuple[Any, ...] = ("gemm", a["dtype"], bwd, "misaligned" in a, "splits" in a,
                                        op.name.startswith("expert_"))  # fmt: skip
            elif op.kind == "attention":
                key = (
                    "attention",
                    bool(a.get("causal", True)),
                    bool(a.get("backward", False)),
                    a.get("attn_dtype", "bf16" if a["dtype"] == "fp8" else a["dtype"]),
                    a.get("kv_seq") is None,
                    a.get("kv_heads") is None,
                    bwd,
                    a.get("backend", "flash"),
                    bool(a.get("mask", False)),
                    float(a.get("dropout", 0.0)),
                )
            elif op.kind == "memory":
                # (ops with and without a row count are priced apart: rows change a row-wise op's time)
                key = ("memory", a["name"], bwd, "rows" in a)
            elif op.kind == "ssd":
                key = ("ssd", a["cls"], bwd)
            else:
                fan = (a["dispatcher"], a["top_k"], a["experts"]) if "dispatcher" in a else None
                key = ("comm", a["op"], a["group"], fan)
            groups.setdefault(key, []).append(i)
        t_out: list[Num] = [0.0] * len(ops)
        f_out: list[Num] = [0.0] * len(ops)
        pins = (self.cluster.device, self.prof)
        ctx = self._options()
        for key, idx in groups.items():
            sel = [ops[i] for i in idx]
            # one layout: the group's seconds and FLOPs are a pure function of the device, the profile,
            # the pricer's options and the ops' arguments, kept across calls (docs/architecture.md, Speed)
            mkey = _scalar_key(key, sel, ctx)
            common: tuple[int, ...] = ()
            if mkey is None:
                # every array of the group shares one layout shape; ops are stacked in front of it
                common = np.broadcast_shapes(
                    *(
                        np.shape(v)
                        for o in sel
                        for v in o.args.values()
                        # (a composite's backward chain travels with its first kernel as a list)
                        if not isinstance(v, (str, list)) and v is not None
                    )
                )
            elif key[0] == "comm":  # (collectives: memoized by comm_time, with the cluster's specs)
                mkey = None
            hit = _GROUP_MEMO.get(pins, mkey) if mkey is not None else None
            if hit is None:
                t, fl = self._group(key, sel, common)
                hit = (np.asarray(t, dtype=float), np.asarray(fl, dtype=float))
                if mkey is not None:
                    _GROUP_MEMO.put(pins, mkey, hit)
            t_arr, f_arr = hit
            for j, i in enumerate(idx):
                t_out[i] = t_arr[j] if t_arr.ndim else float(t_arr)
                f_out[i] = f_arr[j] if f_arr.ndim else float(f_arr)
        return t_out, f_out

    def _group(self, key: tuple[Any, ...], sel: list[Op], common: tuple[int, ...]) -> tuple[Num, Num]:
        """Seconds of one invocation and FLOPs of a group of same-kind ops (stacked on a leading axis)."""
        dev, prof = self.cluster.device, self.prof

        def stack(name: str, default: Any = None) -> Any:
            raw = [o.args.get(name, default) for o in sel]
            if not common:  # one layout: plain numbers, one small vector
                return np.array([float(v) for v in raw])
            vals = [np.asarray(v, dtype=float) for v in raw]
            shape = np.broadcast_shapes(*(v.shape for v in vals))
            out = np.stack([np.broadcast_to(v, shape) for v in vals])
            return out.reshape((len(sel),) + (1,) * (len(common) - len(shape)) + shape)

        kind = key[0]
        calls: Num = 1.0
        if kind == "comm":
            nb = stack("nbytes")
            g = self.groups.get(key[2])
            if g is not None and not common and np.ndim(g.size):
                # the layouts differ only in the communicator's size: the ops in front of its shape
                nb = nb.reshape(nb.shape + (1,) * np.ndim(g.size))
            return self.comm_time(key[1], nb, key[2], fanout=key[3]), 0.0
        if kind == "gemm":
            m, n, k, b = stack("m"), stack("n"), stack("k"), stack("batch", 1)
            misaligned = stack("misaligned") > 0.5 if key[3] else None
            if compiled := self.framework == "compiled":
                # inductor pads a matmul's dimensions to 16-byte rows (shape_padding): a
                # 50257-word vocabulary runs as 50264, without the misaligned kernels
                q = 16.0 / DTYPE_BYTES.get(key[1], 2.0)
                m, n, k = (np.ceil(x / q) * q for x in (m, n, k))
                misaligned = None
            # in a model step each layer's weights stream from HBM: no L2 reuse across calls.
            # Compiled code: the GEMM kernels' own in-step rate (the call-timed rate's excess stands in
            # for memory-bound kernels the eager lowering leaves out; inductor's fused kernels are all
            # priced: docs/compute.md, "torch.compile")
            expert = key[5]  # the MoE expert GEMMs may run another kernel family (``expert_per_tensor``)
            per_tensor = self.expert_per_tensor if expert and self.expert_per_tensor is not None else self.per_tensor
            kw: dict[str, Any] = {
                "l2_reuse": self.l2_reuse, "misaligned": misaligned, "kernel_rate": compiled or self.kernel_gemms,
                "block_format": self.block_format if key[1] in LOW_PRECISION else None, "per_tensor": per_tensor,
            }  # fmt: skip
            t = C.gemm(dev, prof, m, n, k, key[1], b, **kw).time_s
            if key[4]:
                # where TP overlap's ring exchange runs it, ``splits`` kernels of ``m / splits`` rows (priced on
                # the layouts' own shapes, then chosen per layout)
                sp, on = stack("splits"), stack("split_on") > 0.5
                t = np.where(on, C.gemm(dev, prof, m / sp, n, k, key[1], b, **kw).time_s, t)
                calls = np.where(on, sp, 1.0)
            fl = 2.0 * m * n * k * b
            family: str | None = "gemm"
            backward = key[2]
        elif kind == "attention":
            kvh = None if key[5] else stack("kv_heads")
            kvs = None if key[4] else stack("kv_seq")
            r = C.attention(
                dev,
                prof,
                stack("batch"),
                stack("heads"),
                stack("seq"),
                stack("head_dim"),
                key[1],
                key[2],
                kvh,
                kvs,
                key[3],
                backend=key[7],
                mask=key[8],
                dropout=key[9],
            )
            t, fl = r.time_s, r.flops
            family = "attention_bwd" if key[2] else "attention_fwd"
            backward = key[6]
        elif kind == "ssd":
            # mamba_ssm's Triton kernels: fitted rates of their own (docs/compute.md, Mamba-2)
            r = C.ssd_kernel(dev, load_ssd(dev), key[1], stack("nbytes"), stack("flops", 0.0))
            t, fl = r.time_s, r.flops
            family = "memory"
            backward = key[2]
        else:
            # row-wise ops (norms) say their row count: few long rows run on few SMs
            rows = stack("rows") if key[3] else None
            # (a row's work counts elements: the row-wise time needs the element size)
            elt = stack("elt", 2.0) if rows is not None else 2.0
            t = C.memory_op(
                dev, prof, key[1], stack("nbytes"), stack("flops", 0.0), rows=rows, elt_bytes=elt
            ).time_s
            fl = 0.0
            family = "memory"
            backward = key[2]
        if self.per_op_host:
            t = C.stream_time(prof, t, self.framework, None if backward else family)
        else:
            # host time is modelled per layer by the engine: the kernel plus its launch gap
            t = C.with_launch(t, 0.0, "max", prof.gap.get(self.framework, 0.0))
        if self.kernel_floor > 0.0 or self.kernel_gap > 0.0:
            t = np.maximum(t + self.kernel_gap, self.kernel_floor)
        return t * calls, fl

    def price(self, ops: list[Op], count: Num = 1.0) -> Priced:
        """Seconds by category of running ``ops`` (each ``op.count`` times), ``count`` times."""
        out = Priced()
        ts, fs = self.times(ops)
        for op, t, f in zip(ops, ts, fs, strict=True):
            out.add(op.category, t * op.count * count)
            if op.kind != "comm":
                out.flops = out.flops + f * op.count * count
                out.kernels = out.kernels + op.count * count
            if op.name.endswith("_wgrad"):
                out.wgrad = out.wgrad + t * op.count * count
            if op.kind == "attention":
                out.attention_flops = out.attention_flops + f * op.count * count
        return out

    def price_of(
        self,
        lowerings: tuple[Callable[..., list[Op]], ...],
        model: Any,
        lw: Any,
        *args: Any,
        backward: bool = False,
    ) -> Priced:
        """The ops the lowering functions give for ``model`` on layout ``lw`` (``f(model, lw, *args)`` for
        each, in order; with ``backward``, their backward ops), priced. Lowering is a pure function of its
        arguments, so for one layout the priced result is kept across calls, pinned to the model, the
        functions and the pricer's specs (docs/architecture.md, Speed)."""

        def priced() -> Priced:
            ops = [op for f in lowerings for op in f(model, lw, *args)]
            return self.price(backward_ops(ops) if backward else ops)

        key = self._lowering_key(lowerings, model, lw, (*args, backward))
        if key is None:
            return priced()
        hit: Priced | None = _LOWERED_MEMO.get(*key)
        if hit is None:
            hit = _LOWERED_MEMO.put(*key, priced())
        return replace(hit, time=dict(hit.time))  # (a copy: callers add to what they get)

    def _lowering_key(
        self, lowerings: tuple[Callable[..., list[Op]], ...], model: Any, lw: Any, args: tuple[Any, ...]
    ) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
        """Memo pins and key of :meth:`price_of`, or ``None`` where the layout or a communicator holds
        arrays over layouts."""
        if self._layout_key[0] is not lw:  # (a step prices several lowerings of one layout)
            self._layout_key = (lw, _plain_items(vars(lw)))
        layout = self._layout_key[1]
        plain = tuple(map(_plain, args))
        if (
            layout is None
            or any(p is None and a is not None for p, a in zip(plain, args, strict=True))
            or any(np.ndim(g.size) for g in self.groups.values())
        ):
            return None
        c = self.cluster
        cluster_pins = _cluster_pins(c)
        if cluster_pins is None:
            return None
        places = tuple(
            (k, float(g.size), float(g.per_domain), float(g.domains)) for k, g in self.groups.items()
        )
        return (*cluster_pins, self.prof, model, *lowerings), (
            self._options(),
            c.nodes,
            c.gpus,
            places,
            layout,
            plain,
        )

    def _options(self) -> tuple[Any, ...]:
        """The pricer's options that change an op's seconds (beside the device and the profile)."""
        return (
            self.framework, self.per_op_host, self.kernel_floor, self.kernel_gap, self.l2_reuse, self.block_format,
            self.kernel_gemms, self.per_tensor, self.expert_per_tensor,
        )  # fmt: skip


_POWER_IDLE = ("pipeline_bubble", "host_overhead", "host_launch", "idle", "power_cap", "graph_sync")


def power_family(category: str) -> str:
    """The power family of a breakdown category: ``gemm``, ``attention``, ``idle`` or ``memory``
    (memory-bound kernels, optimizer, communication, copies)."""
    c = category.removeprefix("recompute_")
    if c in ("gemm", "moe_router"):
        return "gemm"
    if c == "attention":
        return "attention"
    if c in _POWER_IDLE:
        return "idle"
    return "memory"


def breakdown_power_cap(
    dev: Device, prof: ComputeProfile, breakdown: dict[str, Num], gemm_dtype: str = "bf16"
) -> Num:
    """:func:`power_cap_time` of a step given as seconds by breakdown category; ``gemm_dtype``: its GEMMs'
    dtype (fp32 GEMMs, CUDA-core FFMA kernels, draw ``power_fraction["gemm_fp32"]`` where measured; on a device
    with a sustained GEMM rate, ``Device.sustained_gemm``, the dtype picks its fraction)."""
    fams: dict[str, Num] = {}
    idle: Num = 0.0
    fp32 = gemm_dtype == "fp32" and "gemm_fp32" in prof.power_fraction
    for k, v in breakdown.items():
        f = power_family(k)
        if f == "gemm" and fp32:
            f = "gemm_fp32"
        if f == "idle":
            idle = idle + v
        else:
            fams[f] = fams.get(f, 0.0) + v
    return C.power_cap_time(dev, prof, fams, idle, gemm_dtype)
