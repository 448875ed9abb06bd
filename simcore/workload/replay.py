"""Measured trace -> task graph -> the same run on other hardware.

A classified trace (:func:`simcore.traces.classify.analyze`) becomes a graph of GPU tasks per
rank: every kernel, memcpy and memset on its stream in its measured order, the host launch time of
each (so host launch gaps and CPU-bound stretches stay what they were), the host synchronisations
(the host waits for the GPU there), cross-stream waits seen in the measurement (a kernel that
started as soon as a kernel on another stream ended, later than its own stream and launch allowed),
and collectives matched across ranks (by process group and sequence number, else by order within
the group), which start together when the last rank arrives.

Each task is priced on the target by the ratio of simcore's cost models, target over source,
times the measured duration: from the op's shape when the trace recorded it (GEMM, attention,
memory-bound ops, optimizer), from the collective's metadata for NCCL kernels, and otherwise from
the hardware ratio of its class (dense peak FLOP/s for GEMM/attention, HBM bandwidth for the rest).
Host time is kept: the same software drives the new GPU.

The list-scheduling simulation processes tasks in measured start order, which respects every
dependency of the graph (a task's predecessors started before it in the measurement).
"""

from __future__ import annotations

import math
import re
import statistics
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcore.errors import SimcoreError, TraceError
from simcore.specs.hardware import Device
from simcore.specs.profile import ComputeProfile, load_profile
from simcore.specs.registry import Registry, default_registry
from simcore.traces import expand_paths, read_trace
from simcore.traces.classify import Analysis, Kernel, Step, analyze, step_class_times
from simcore.traces.model import GpuEvent, Trace

_SYNC = re.compile(r"Synchronize|cudaMemcpy(?!Async)|cudaMemcpy2D(?!Async)|cudaFree\b|cudaMalloc\b")
_MEMORY_CLASSES = {"elementwise", "norm", "loss", "embedding", "optimizer", "memcpy", "memset"}


# ---------------------------------------------------------------------------------------------
# hardware of a trace


def device_from_trace(trace: Trace, reg: Registry | None = None) -> Device:
    """The registry device a trace ran on, from ``deviceProperties`` (Kineto) or the GPU table
    (Nsight). Raises :class:`TraceError` naming the file when the GPU is unknown or not recorded."""
    reg = reg or default_registry()
    name = trace.device_name
    if not name:
        raise TraceError(
            "the trace does not say which GPU it ran on (no deviceProperties); pass --source-device",
            file=trace.path,
        )
    key = match_device_name(name, reg)
    if key is None:
        raise TraceError(
            f"unknown GPU {name!r} (simcore knows {', '.join(sorted(reg.devices))}); "
            "add a device spec with --specs or pass --source-device",
            file=trace.path,
        )
    return reg.device(key)


def match_device_name(name: str, reg: Registry | None = None) -> str | None:
    """Registry key of a GPU name as CUDA reports it (``NVIDIA H200`` -> ``h200``), or None."""
    reg = reg or default_registry()
    low = name.lower()
    words = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", low)) | set(re.findall(r"[a-z0-9]+", low))
    best: str | None = None
    for key, dev in reg.devices.items():
        parts = key.split("-")
        if all(p in words or p in low.replace(" ", "") for p in parts) and parts[0] in words:
            if best is None or len(key) > len(best):
                best = key
        elif dev.display_name.lower() == low:
            return key
    if best == "h100" and "pcie" in low and "h100-pcie" in reg.devices:
        best = "h100-pcie"
    return best


def default_system(device: str, reg: Registry | None = None) -> str:
    """The first built-in system made of ``device`` GPUs (``h200`` -> ``hgx-h200``)."""
    reg = reg or default_registry()
    names = sorted(k for k, s in reg.systems.items() if s.device == device)
    if not names:
        raise SimcoreError(f"no system of {device} GPUs is known; pass --system")
    hgx = [n for n in names if n.startswith(("hgx", "dgx"))]
    return (hgx or names)[0]


# ---------------------------------------------------------------------------------------------
# pricing one op


def price_shape(
    shape: dict[str, Any], dev: Device, prof: ComputeProfile, kernel_rate: bool = False
) -> float | None:
    """Kernel seconds of an op with a recovered shape on ``dev`` (no launch overhead), or None
    when simcore has no model for it; ``kernel_rate``: a GEMM at its kernel's in-step rate, as compiled
    code's are priced (``ComputeProfile.gemm_kernel``)."""
    from simcore.compute import ops as C

    kind = shape.get("kind")
    try:
        if kind == "gemm":
            return float(
                C.gemm(
                    dev,
                    prof,
                    shape["m"],
                    shape["n"],
                    shape["k"],
                    shape["dtype"],
                    shape["batch"],
                    misaligned=shape.get("misaligned"),
                    kernel_rate=kernel_rate,
                ).time_s
            )
        if kind == "attention":
            # fp32 attention runs the memory-efficient kernels (their own fp32 fit); fp8 is priced as bf16
            dt = shape["dtype"] if shape["dtype"] in ("bf16", "fp16", "fp32") else "bf16"
            return float(
                C.attention(
                    dev, prof, shape["batch"], shape["heads"], shape["seq"], shape["head_dim"], shape["causal"],
                    shape["backward"], shape["kv_heads"], shape["kv_seq"], dt,
                    backend=shape.get("backend", "flash"), mask=shape.get("mask", False),
                    dropout=shape.get("dropout", 0.0),
                ).time_s
            )  # fmt: skip
        if kind == "memory":
            return float(
                C.memory_op(
                    dev,
                    prof,
                    shape["name"],
                    shape["nbytes"],
                    rows=shape.get("rows"),
                    elt_bytes=4.0 if shape.get("dtype") == "fp32" else 2.0,
                ).time_s
            )
        if kind == "optimizer":
            return float(
                C.optimizer_step(dev, prof, shape["params"], shape["optimizer"], shape["fused"], False).time_s
            )
    except (SimcoreError, KeyError, TypeError, ValueError):
        return None
    return None


@lru_cache(maxsize=4096)
def _coll_time(
    op: str, nbytes: float, gpus: int, system: str, dtype: str, nodes: int | None = None
) -> float | None:
    from simcore.comm.collectives import collective_time

    try:
        return float(
            collective_time(
                op, nbytes, gpus, system, nodes=nodes,
                dtype=dtype if dtype in ("bf16", "fp16", "fp32", "fp8") else "bf16",
            ).time_s
        )  # fmt: skip
    except (SimcoreError, ValueError, KeyError):
        return None


# ---------------------------------------------------------------------------------------------
# the task graph


@dataclass(slots=True)
class Task:
    """One GPU activity of one rank."""

    id: int
    rank: int
    stream: tuple[int, int]
    """(device, stream)."""
    kernel: Kernel
    dur: float
    """Seconds it takes (measured, or the pure time of a collective: its shortest rank)."""
    launch: float | None
    """Measured host launch time (seconds), None when the trace has no runtime call for it."""
    gap: float = 0.0
    """Measured idle before it on its stream (used when there is no launch time)."""
    wait: float = 0.0
    """Measured delay beyond everything the graph explains (stream, launch, dependencies): kept as
    an external wait."""
    deps: list[int] = field(default_factory=list)
    coll: int = -1
    """Index of its cross-rank collective group (-1: none)."""


@dataclass
class RankInfo:
    """Per-rank facts the simulation needs."""

    rank: int
    analysis: Analysis
    syncs: list[tuple[float, float, float, list[int]]]
    """(measured start, duration, host time of its own, tasks it waited for) of host calls that
    may wait for the GPU; the rest of the duration was the wait, which the replay recomputes. The
    tasks are, per stream, the last one launched before the call that ended before it returned."""
    launch_latency: float
    queue_gap: float = 0.0
    """Median idle between back-to-back kernels already queued on a stream (device front-end)."""


@dataclass
class TaskGraph:
    """Tasks of every rank, in measured start order, with collective groups."""

    tasks: list[Task]
    ranks: dict[int, RankInfo]
    collectives: list[list[int]]


def _coll_key(k: Kernel, ordinal: dict[tuple[Any, str], int]) -> tuple[Any, ...]:
    s = k.shape or {}
    pg = s.get("pg") or str(s.get("ranks"))
    seq = s.get("seq")
    if seq is not None:
        return (pg, "seq", seq)
    key = (pg, str(s.get("op")))
    n = ordinal.get(key, 0)
    ordinal[key] = n + 1
    return (pg, s.get("op"), n)


def build_graph(analyses: list[Analysis]) -> TaskGraph:
    """The task graph of one or more ranks' classified traces."""
    tasks: list[Task] = []
    ranks: dict[int, RankInfo] = {}
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for a in analyses:
        r = a.trace.rank
        if r in ranks:
            raise TraceError(f"two traces claim rank {r}", file=a.trace.path)
        in_steps = [k for k in a.kernels if k.step >= 0]
        lats = [k.ev.ts - k.launch_ts for k in in_steps if k.launch_ts is not None and k.ev.ts >= k.launch_ts]
        lat = min(lats) if lats else 0.0
        raw_syncs = sorted((c.ts, c.dur) for c in a.trace.host_calls if _SYNC.search(c.name))
        info = RankInfo(r, a, [], min(lat, 50e-6))
        ranks[r] = info
        queued: list[float] = []
        last_end: dict[tuple[int, int], float] = {}
        last_cat: dict[tuple[int, int], str] = {}
        ordinal: dict[tuple[Any, str], int] = {}
        # per stream, ends (non-decreasing: a stream runs one kernel at a time) and task ids
        s_ends: dict[tuple[int, int], list[float]] = defaultdict(list)
        s_ids: dict[tuple[int, int], list[int]] = defaultdict(list)
        for k in sorted(in_steps, key=lambda k: k.ev.ts):
            e = k.ev
            st = (e.device, e.stream)
            prev = last_end.get(st)
            t = Task(len(tasks), r, st, k, e.dur, k.launch_ts)
            t.gap = max(0.0, e.ts - prev) if prev is not None else 0.0
            ready = max(
                prev if prev is not None else -math.inf,
                (k.launch_ts + lat) if k.launch_ts is not None else -math.inf,
            )
            # the device's queue gap, from work launched before the work ahead of it ended; not beside a
            # copy, whose start is paced by its staging and the copy engine (a synchronous cudaMemcpy from
            # pageable memory returns once its data is staged, and the next copy waits for that staging)
            if (
                prev is not None
                and k.launch_ts is not None
                and k.launch_ts + lat < prev - 5e-6
                and e.cat != "gpu_memcpy"
                and last_cat.get(st) != "gpu_memcpy"
            ):
                queued.append(e.ts - prev)
            if e.ts - ready > 2e-6:
                # it waited for something else: the latest end on another stream just before it
                best, best_id = -math.inf, -1
                for st2, lst in s_ends.items():
                    if st2 == st:
                        continue
                    j = bisect_right(lst, e.ts + 0.5e-6) - 1
                    if j >= 0 and lst[j] > best:
                        best, best_id = lst[j], s_ids[st2][j]
                if best_id >= 0 and e.ts - best < 20e-6:
                    t.deps.append(best_id)
            if k.cls.startswith("comm"):
                groups[_coll_key(k, ordinal)].append(t.id)
            tasks.append(t)
            last_end[st] = max(prev or -math.inf, e.ts + e.dur)
            last_cat[st] = e.cat
            s_ends[st].append(e.ts + e.dur)
            s_ids[st].append(t.id)
        if queued:
            info.queue_gap = max(0.0, float(statistics.median(queued)))
        mine = [t for t in tasks if t.rank == r]
        # unexplained delays, with the device's queue gap known
        prev_end: dict[tuple[int, int], float] = {}
        for t in mine:
            e = t.kernel.ev
            pe = prev_end.get(t.stream)
            if pe is not None:
                ready = pe + info.queue_gap
                if t.launch is not None:
                    ready = max(ready, t.launch + info.launch_latency)
                for d in t.deps:
                    ready = max(ready, tasks[d].kernel.ev.ts + tasks[d].kernel.ev.dur)
                if t.kernel.base != "comm" and e.ts - ready > 2e-6:
                    t.wait = e.ts - ready
            prev_end[t.stream] = max(pe if pe is not None else -math.inf, e.ts + e.dur)
        # the host's own time in calls that can block on the GPU, and what each waited for
        per_stream: dict[tuple[int, int], list[Task]] = defaultdict(list)
        for t in mine:
            if t.launch is not None:
                per_stream[t.stream].append(t)
        keys: dict[tuple[int, int], tuple[list[float], list[float]]] = {
            st: ([x.launch for x in v if x.launch is not None], [x.kernel.ev.ts + x.kernel.ev.dur for x in v])
            for st, v in per_stream.items()
        }
        for ts, sd in raw_syncs:
            awaited: list[int] = []
            done = -math.inf
            for st, v in per_stream.items():
                lts, ens = keys[st]
                j = min(bisect_right(lts, ts), bisect_right(ens, ts + sd + 1e-6)) - 1
                if j >= 0:
                    awaited.append(v[j].id)
                    done = max(done, ens[j])
            waited = min(sd, max(0.0, done - ts))
            info.syncs.append((ts, sd, sd - waited, awaited))
    colls: list[list[int]] = []
    for members in groups.values():
        if len(members) > 1:
            pure = min(tasks[i].dur for i in members)
            for i in members:
                tasks[i].coll = len(colls)
                tasks[i].dur = pure
            colls.append(members)
    return TaskGraph(tasks, ranks, colls)


@dataclass
class Schedule:
    """Start and end of every task (seconds), and per-rank step times."""

    start: list[float]
    end: list[float]
    step_times: dict[int, list[float]]

    @property
    def step_time_s(self) -> float:
        """The slowest rank's median step time (seconds)."""
        return max(statistics.median(v) for v in self.step_times.values())


def simulate(g: TaskGraph, durations: list[float] | None = None) -> Schedule:
    """Run the graph with the given task durations (default: the measured ones)."""
    dur = durations if durations is not None else [t.dur for t in g.tasks]
    n = len(g.tasks)
    start = [0.0] * n
    end = [0.0] * n
    off = clock_offsets(g)
    order = sorted(range(n), key=lambda i: g.tasks[i].kernel.ev.ts + off[g.tasks[i].rank])
    stream_end: dict[tuple[int, tuple[int, int]], float] = {}
    shift: dict[int, float] = {r: 0.0 for r in g.ranks}
    sync_i: dict[int, int] = {r: 0 for r in g.ranks}
    coll_ready: dict[int, list[float]] = defaultdict(list)
    coll_start: dict[int, float] = {}
    processed = [False] * n

    def host(r: int, launch: float) -> float:
        info = g.ranks[r]
        while sync_i[r] < len(info.syncs) and info.syncs[sync_i[r]][0] < launch:
            ts, d, own, awaited = info.syncs[sync_i[r]]
            sync_i[r] += 1
            gpu_done = max((end[j] for j in awaited if processed[j]), default=-math.inf)
            after = max(ts + shift[r], gpu_done) + own
            shift[r] = after - (ts + d)
        return launch + shift[r]

    for i in order:
        t = g.tasks[i]
        key = (t.rank, t.stream)
        prev = stream_end.get(key)
        qg = g.ranks[t.rank].queue_gap
        if prev is None:
            # the first task of a stream keeps its measured start (work from before the profiled
            # steps may still have occupied the GPU)
            ready = t.kernel.ev.ts
        elif t.launch is not None:
            ready = max(prev + qg, host(t.rank, t.launch) + g.ranks[t.rank].launch_latency)
        else:
            ready = prev + max(t.gap, qg)
        for d in t.deps:
            if processed[d]:
                ready = max(ready, end[d])
        ready += t.wait
        if t.coll >= 0:
            members = g.collectives[t.coll]
            # (ready times compared on the ranks' common clock, ``off``)
            if t.coll in coll_start:
                ready = max(ready, coll_start[t.coll] - off[t.rank])
            else:
                coll_ready[t.coll].append(ready + off[t.rank])
                # the collective starts when its last member is ready; members processed earlier
                # are moved to that start
                if len(coll_ready[t.coll]) == len(members):
                    s0 = max(coll_ready[t.coll])
                    coll_start[t.coll] = s0
                    for j in members:
                        if processed[j] and j != i:
                            rj = g.tasks[j].rank
                            start[j] = s0 - off[rj]
                            end[j] = start[j] + dur[j]
                            stream_end[(rj, g.tasks[j].stream)] = max(
                                stream_end.get((rj, g.tasks[j].stream), -math.inf), end[j]
                            )
                    ready = s0 - off[t.rank]
        start[i] = ready
        end[i] = ready + dur[i]
        stream_end[key] = max(prev if prev is not None else -math.inf, end[i])
        processed[i] = True
    steps: dict[int, list[float]] = {}
    for r, info in g.ranks.items():
        steps[r] = _step_times(g, info, start, end)
    return Schedule(start, end, steps)


def clock_offsets(g: TaskGraph) -> dict[int, float]:
    """Seconds to add to each rank's trace times to put them on one clock: a trace's times count from its
    own first event, so two ranks' traces started apart are apart by their epoch starts
    (``Trace.t0_ns``; two TP ranks' traces measured 19.6 ms apart). Zeros where a rank's trace has no epoch clock."""
    t0 = {r: info.analysis.trace.t0_ns for r, info in g.ranks.items()}
    if any(v is None for v in t0.values()):
        return {r: 0.0 for r in g.ranks}
    base = min(float(v) for v in t0.values() if v is not None)
    return {r: (float(v) - base) * 1e-9 for r, v in t0.items() if v is not None}


def _step_times(g: TaskGraph, info: RankInfo, start: list[float], end: list[float]) -> list[float]:
    a = info.analysis
    per: dict[int, list[int]] = defaultdict(list)
    for t in g.tasks:
        if t.rank == info.rank:
            per[t.kernel.step].append(t.id)
    idx = sorted(per)
    out = []
    for j, s in enumerate(idx):
        s0 = min(start[i] for i in per[s])
        s1 = max(end[i] for i in per[s])
        meas = a.steps[s]
        if j + 1 < len(idx):
            nxt = min(start[i] for i in per[idx[j + 1]])
            out.append(max(nxt - s0, s1 - s0))
        else:
            # the last step keeps its measured tail beyond its GPU span (host work after it)
            out.append((s1 - s0) + max(0.0, meas.time_s - (meas.gpu_end - meas.gpu_start)))
    return out


# ---------------------------------------------------------------------------------------------
# replay on other hardware


@dataclass
class Hardware:
    """One side of a replay: device, system and compute profile."""

    device: Device
    system: str
    profile: ComputeProfile


def _factor(
    k: Kernel, src: Hardware, dst: Hardware, op_factor: dict[tuple[int, int], float], rank: int
) -> tuple[float, str]:
    """Duration multiplier of one kernel on ``dst`` relative to ``src`` and how it was obtained."""
    cls = k.base
    if cls == "comm":
        s = k.shape or {}
        nb, gs = s.get("nbytes"), s.get("group_size")
        if nb and gs and gs > 1:
            dt = str(s.get("dtype", "bf16"))
            ranks = s.get("ranks")
            a = _coll_time(str(s["op"]), float(nb), int(gs), src.system, dt, group_nodes(ranks, src.system))
            b = _coll_time(str(s["op"]), float(nb), int(gs), dst.system, dt, group_nodes(ranks, dst.system))
            if a and b:
                return b / a, "collective model"
        bw_a = default_registry().system(src.system)
        bw_b = default_registry().system(dst.system)
        ra = bw_a.nvlink_bandwidth or src.device.memory.bandwidth
        rb = bw_b.nvlink_bandwidth or dst.device.memory.bandwidth
        return float(ra / rb), "link bandwidth ratio"
    key = (rank, k.ev.ext_id)
    if k.ev.ext_id >= 0 and key in op_factor:
        return op_factor[key], "shape"
    if cls in ("gemm", "attention"):
        dt = (k.shape or {}).get("dtype", "bf16")
        pa = src.device.peak.get(dt) or src.device.peak_flops("bf16")
        pb = dst.device.peak.get(dt) or dst.device.peak_flops("bf16")
        return float(pa / pb), "peak FLOP/s ratio"
    return float(src.device.memory.bandwidth / dst.device.memory.bandwidth), "HBM bandwidth ratio"


def group_nodes(ranks: list[int] | None, system: str) -> int | None:
    """Systems a process group spans when global ranks fill ``system``'s GPUs in order (ranks
    0..g-1 on the first system, ...); None when the trace did not record the group's ranks."""
    if not ranks:
        return None
    per = default_registry().system(system).gpus
    return len({int(r) // per for r in ranks})


@dataclass
class ReplayResult:
    """A measured run replayed on other hardware."""

    traces: list[str]
    source: dict[str, str]
    target: dict[str, str]
    measured_step_time_s: float
    replayed_source_step_time_s: float
    """The graph run with measured durations (how faithfully replay reproduces the measurement)."""
    predicted_step_time_s: float
    speedup: float
    classes: list[dict[str, Any]]
    how: dict[str, int]
    """Kernels priced per method (shape, collective model, hardware ratios)."""
    notes: list[str]
    graph: TaskGraph | None = None
    schedule: Schedule | None = None
    written: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "source": self.source,
            "target": self.target,
            "measured_step_time_s": self.measured_step_time_s,
            "replayed_source_step_time_s": self.replayed_source_step_time_s,
            "predicted_step_time_s": self.predicted_step_time_s,
            "speedup": self.speedup,
            "classes": self.classes,
            "how": self.how,
            "notes": self.notes,
            "written": self.written,
        }


def load_analyses(paths: list[str]) -> list[Analysis]:
    """Read and classify trace files (folders expand to the traces inside)."""
    files = expand_paths(paths)
    if not files:
        raise SimcoreError("no trace files given")
    return [analyze(read_trace(p)) for p in files]


def _hardware(device: Device, system: str | None, reg: Registry, calibration: str | None = None) -> Hardware:
    sysname = system or default_system(device.name, reg)
    return Hardware(device, sysname, load_profile(device, calibration))


def replay(
    paths: list[str],
    device: str,
    system: str | None = None,
    source_device: str | None = None,
    source_system: str | None = None,
    analyses: list[Analysis] | None = None,
    trace_out: str | None = None,
) -> ReplayResult:
    """Replay measured traces (one per rank) on ``device`` (and ``system``) and compare.

    ``trace_out``: write the replayed timeline of every rank as a PyTorch-profiler (Kineto) trace
    (``{rank}`` in the name is replaced by the rank; otherwise ``.rankN`` is inserted for several
    ranks), readable by simcore, Perfetto and HTA beside the measured one."""
    reg = default_registry()
    ans = analyses if analyses is not None else load_analyses(paths)
    src_dev = reg.device(source_device) if source_device else device_from_trace(ans[0].trace, reg)
    src = _hardware(src_dev, source_system, reg)
    dst = _hardware(reg.device(device), system, reg)
    g = build_graph(ans)
    base = simulate(g)
    # op-level factors from shapes: one per (rank, External id)
    op_factor: dict[tuple[int, int], float] = {}
    for a in ans:
        for k in a.kernels:
            key = (a.trace.rank, k.ev.ext_id)
            if k.shape is None or k.base == "comm" or k.ev.ext_id < 0 or key in op_factor:
                continue
            ta, tb = (
                price_shape(k.shape, src.device, src.profile),
                price_shape(k.shape, dst.device, dst.profile),
            )
            if ta and tb and ta > 0:
                op_factor[key] = tb / ta
    how: dict[str, int] = defaultdict(int)
    new = []
    for t in g.tasks:
        f, why = _factor(t.kernel, src, dst, op_factor, t.rank)
        how[why] += 1
        new.append(t.dur * f)
    pred = simulate(g, new)
    measured = max(a.step_time_s for a in ans)
    classes = _class_table(g, base, pred)
    notes = []
    if src.profile.provisional or dst.profile.provisional:
        notes.append("a calibration profile in use is provisional (not fitted on measurements)")
    if dst.profile.transferred_from:
        notes.append(
            f"{dst.device.name} has no measured profile: curves transferred from {dst.profile.transferred_from}"
        )
    written = []
    if trace_out:
        for r in sorted(g.ranks):
            path = _rank_path(trace_out, r, len(g.ranks))
            write_kineto(
                g,
                pred,
                r,
                path,
                dst.device,
                f"simcore replay of {g.ranks[r].analysis.trace.path} on {dst.device.name}",
            )
            written.append(path)
    return ReplayResult(
        traces=[a.trace.path for a in ans],
        source={"device": src.device.name, "system": src.system},
        target={"device": dst.device.name, "system": dst.system},
        measured_step_time_s=measured,
        replayed_source_step_time_s=base.step_time_s,
        predicted_step_time_s=pred.step_time_s,
        speedup=base.step_time_s / pred.step_time_s if pred.step_time_s > 0 else math.nan,
        classes=classes,
        how=dict(how),
        notes=notes,
        graph=g,
        schedule=pred,
        written=written,
    )


def _rank_path(template: str, rank: int, n: int) -> str:
    if "{rank}" in template:
        return template.replace("{rank}", str(rank))
    if n == 1:
        return template
    p = Path(template)
    name = p.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext):
            return str(p.with_name(f"{name[: -len(ext)]}.rank{rank}{ext}"))
    return f"{template}.rank{rank}"


def write_kineto(
    g: TaskGraph, sched: Schedule, rank: int, path: str | Path, device: Device, name: str = ""
) -> None:
    """Write one rank's scheduled tasks as a Chrome trace in PyTorch profiler (Kineto) layout:
    ``kernel``/``gpu_memcpy``/``gpu_memset`` events on ``pid`` = device, ``tid`` = stream, with
    ``correlation``, ``External id`` and collective metadata, and ``ProfilerStep#N`` ranges."""
    import gzip
    import json

    evs: list[dict[str, Any]] = []
    devices = sorted({t.stream[0] for t in g.tasks if t.rank == rank})
    for d in devices:
        evs.append({"ph": "M", "name": "process_labels", "pid": d, "tid": 0, "args": {"labels": f"GPU {d}"}})
    per_step: dict[int, list[float]] = defaultdict(list)
    for t in g.tasks:
        if t.rank != rank:
            continue
        e = t.kernel.ev
        st, en = sched.start[t.id], sched.end[t.id]
        per_step[t.kernel.step].append(st)
        args: dict[str, Any] = {
            "External id": e.ext_id,
            "device": e.device,
            "stream": e.stream,
            "correlation": e.correlation,
        }
        args.update(e.args)
        evs.append({"ph": "X", "cat": e.cat, "name": e.name, "pid": e.device, "tid": e.stream,
                    "ts": round(st * 1e6, 3), "dur": round((en - st) * 1e6, 3), "args": args})  # fmt: skip
    steps = sorted(per_step)
    times = sched.step_times.get(rank, [])
    for j, s_ in enumerate(steps):
        t0 = min(per_step[s_])
        dur = times[j] if j < len(times) else 0.0
        label = (
            g.ranks[rank].analysis.steps[s_].name if s_ < len(g.ranks[rank].analysis.steps) else f"step#{s_}"
        )
        if not label.startswith("ProfilerStep#"):
            label = f"ProfilerStep#{j}"
        for cat, pid, tid in (("user_annotation", 1_000_000, 1), ("gpu_user_annotation", devices[0], 0)):
            evs.append({"ph": "X", "cat": cat, "name": label, "pid": pid, "tid": tid,
                        "ts": round(t0 * 1e6, 3), "dur": round(dur * 1e6, 3), "args": {}})  # fmt: skip
    trace = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": d,
                "name": device.display_name,
                "numSms": device.sm_count,
                "totalGlobalMem": device.memory.capacity,
            }
            for d in devices
        ],
        "distributedInfo": {"rank": rank, "world_size": len(g.ranks), "backend": "nccl"},
        "traceEvents": evs,
        "traceName": name or "simcore replay",
        "displayTimeUnit": "ms",
    }
    p = Path(path)
    text = json.dumps(trace)
    if p.name.endswith(".gz"):
        with gzip.open(p, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        p.write_text(text, encoding="utf-8")


def _retimed_steps(g: TaskGraph, sched: Schedule, rank: int) -> list[Step]:
    per: dict[int, list[Kernel]] = defaultdict(list)
    for t in g.tasks:
        if t.rank != rank:
            continue
        e = t.kernel.ev
        ev = GpuEvent(
            e.name, e.cat, sched.start[t.id], sched.end[t.id] - sched.start[t.id], e.device, e.stream
        )
        per[t.kernel.step].append(Kernel(ev, t.kernel.cls, t.kernel.op, t.kernel.shape, t.kernel.step))
    steps = []
    times = sched.step_times[rank]
    for j, s in enumerate(sorted(per)):
        ks = per[s]
        st = Step(
            f"step{s}", ks, gpu_start=min(k.ev.ts for k in ks), gpu_end=max(k.ev.ts + k.ev.dur for k in ks)
        )
        st.time_s = times[j]
        steps.append(st)
    return steps


def _class_table(g: TaskGraph, base: Schedule, pred: Schedule) -> list[dict[str, Any]]:
    rank = min(g.ranks)
    rows: dict[str, dict[str, float]] = defaultdict(lambda: {"source_s": 0.0, "target_s": 0.0})
    for which, sched in (("source_s", base), ("target_s", pred)):
        steps = _retimed_steps(g, sched, rank)
        per = [step_class_times(s) for s in steps]
        for c in {c for d in per for c in d}:
            rows[c][which] = float(statistics.median(d.get(c, 0.0) for d in per))
    out: list[dict[str, Any]] = []
    for c, v in rows.items():
        out.append({"class": c, **v, "change_s": v["target_s"] - v["source_s"]})
    out.sort(key=lambda r: -abs(float(r["change_s"])))
    return out
