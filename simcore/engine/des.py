"""Discrete-event engine (simpy) for one training step of a pipeline-parallel data-parallel job.

Each pipeline rank runs its schedule's task order (:mod:`simcore.engine.schedules`) on a compute
stream; activations and gradients between consecutive virtual stages travel over point-to-point
links modelled as simpy resources (one per directed rank pair, so concurrent transfers on the same
link queue behind each other); each rank's data-parallel gradient reduction runs on its own
communication stream in buckets released as the last backward pass of each chunk proceeds, and
the optimizer step follows. Every event is recorded so the step can be written as a Chrome trace.

Tasks of a rank run in list order, except weight-gradient (``W``) tasks of zero-bubble schedules,
which a rank runs whenever the next task in its order is not ready yet.

Scope: collectives inside a stage's work are priced by the analytic models (no link sharing between
concurrent collectives here; see :mod:`simcore.comm.flow` for that) and there are no stragglers, so
on a single job the DES reproduces the analytic closed forms (see docs/decisions.md).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import simpy

from simcore.engine.schedules import chain_length, chunks, rank_queues, virtual_stage


@dataclass(frozen=True)
class StageTimes:
    """Seconds of work of one virtual stage for one micro-batch."""

    fwd: float
    bwd: float
    """Backward including weight gradients (and recomputation)."""
    wgrad: float = 0.0
    """Share of ``bwd`` that is weight gradients (split out by zero-bubble schedules)."""


@dataclass(frozen=True)
class PipelineJob:
    """Inputs of a DES step: per virtual stage times, transfers and the data-parallel tail."""

    schedule: str
    pp: int
    microbatches: int
    vp: int
    stages: list[StageTimes]
    """One per virtual stage, in model order (``pp * chunks``)."""
    p2p_time: float
    """Seconds to send one micro-batch's activations (or gradients) between adjacent stages."""
    dp_time: list[float]
    """Per pipeline rank: seconds of its data-parallel gradient reduction (0 without DP)."""
    dp_overlap: bool = True
    buckets: int = 1
    """Gradient buckets per rank (released in order during the last backward)."""
    optimizer_time: list[float] = field(default_factory=list)
    dp_window: list[float] = field(default_factory=list)
    """Per rank: seconds of compute before the end of its last backward during which gradient buckets
    become ready (default: the last backward task)."""
    tail_time: list[float] = field(default_factory=list)
    """Per rank: exposed seconds after the optimizer (e.g. a parameter all-gather the next step's
    forward cannot hide)."""


@dataclass
class Event:
    rank: int
    stream: str
    name: str
    start: float
    end: float
    args: dict[str, float | int | str] = field(default_factory=dict)


@dataclass
class DESResult:
    step_time_s: float
    events: list[Event]
    busy_s: list[float]
    """Compute-busy seconds per pipeline rank."""
    sim_events: int

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the compute streams over the pipeline phase (before the DP tail)."""
        end = max((e.end for e in self.events if e.stream == "compute"), default=0.0)
        if end <= 0:
            return 0.0
        busy = sum(self.busy_s)
        return 1.0 - busy / (end * len(self.busy_s))


Key = tuple[str, str, int, int]
"""A completion flag: ("done", task kind, virtual stage, micro-batch) or ("arr", ...) for a transfer."""


def _missing(flags: set[Key], chain: int, kind: str, vs: int, mb: int) -> Key | None:
    """The first unmet dependency of task ``kind`` of virtual stage ``vs`` for micro-batch ``mb`` (None
    when it can run): a forward needs the previous stage's activations, a backward its own forward and
    the next stage's gradients, a weight gradient its backward."""
    if kind == "F":
        key = ("arr", "F", vs, mb)
        return key if vs % chain > 0 and key not in flags else None
    if kind == "B":
        key = ("done", "F", vs, mb)
        if key not in flags:
            return key
        key = ("arr", "B", vs, mb)
        return key if vs % chain < chain - 1 and key not in flags else None
    key = ("done", "B", vs, mb)
    return key if key not in flags else None


def _task_seconds(st: StageTimes, kind: str, split_w: bool) -> float:
    """Seconds of a task of a stage: its forward; its backward (less the weight gradients where the
    schedule splits them out, ``split_w``); its weight gradients (none unless split)."""
    if kind == "F":
        return st.fwd
    if kind == "B":
        return st.bwd - st.wgrad if split_w else st.bwd
    return st.wgrad if split_w else 0.0


def _bucketed_reduction(now: float, start: float, window: float, dp: float, buckets: int, overlap: bool) -> tuple[float, float]:
    """(start, end) seconds of a rank's data-parallel gradient reduction of ``dp`` seconds in ``buckets``
    buckets. Overlapped: bucket ``j`` is ready ``(j+1)/buckets`` of the way through the ``window``
    seconds of backward that began at ``start`` and is reduced after the previous one, ending no
    earlier than ``now`` (the last backward's end); else the whole reduction runs from ``now``."""
    if not overlap:
        return now, now + dp
    t = start
    for j in range(buckets):
        ready_at = start + (j + 1) * window / buckets
        t = max(t, ready_at) + dp / buckets
    return start + window / buckets, max(t, now)


def simulate_pipeline(job: PipelineJob) -> DESResult:
    """Run one step in simpy and return its time and timeline."""
    env = simpy.Environment()
    p, m = job.pp, job.microbatches
    nchunk = chunks(job.schedule, job.vp)
    nstage = p * nchunk
    if len(job.stages) != nstage:
        raise ValueError(f"expected {nstage} stage times, got {len(job.stages)}")
    chain = chain_length(job.schedule, p, job.vp)
    split_w = job.schedule in ("zero_bubble", "dualpipe")
    # Completion flags ("done" for tasks, "arr" for transfers); simpy events only where a rank waits.
    flags: set[Key] = set()
    waiters: dict[Key, simpy.Event] = {}

    def mark(key: Key) -> None:
        flags.add(key)
        ev = waiters.pop(key, None)
        if ev is not None:
            ev.succeed()

    def wait_for(key: Key) -> simpy.Event:
        if key in flags:
            done_ev = env.event()
            done_ev.succeed()
            return done_ev
        found = waiters.get(key)
        if found is None:
            found = waiters[key] = env.event()
        return found

    link_free: dict[tuple[int, int], float] = {}
    events: list[Event] = []
    busy = [0.0] * p
    counter = [0]
    owner = {}
    for r in range(p):
        for c in range(nchunk):
            owner[virtual_stage(job.schedule, p, r, c)] = r

    def send(kind: str, src_vs: int, dst_vs: int, mb: int) -> None:
        """Queue a transfer on the directed link src->dst (FIFO: a link carries one at a time)."""
        src, dst = owner[src_vs], owner[dst_vs]
        key = ("arr", kind, dst_vs, mb)
        if src == dst or job.p2p_time <= 0:
            mark(key)
            return
        t0 = max(env.now, link_free.get((src, dst), 0.0))
        t1 = t0 + job.p2p_time
        link_free[(src, dst)] = t1
        events.append(Event(src, f"send_to_{dst}", f"{'act' if kind == 'F' else 'grad'} mb{mb}", t0, t1))
        counter[0] += 1
        env.timeout(t1 - env.now).callbacks.append(lambda _ev: mark(key))

    def duration(kind: str, vs: int) -> float:
        return _task_seconds(job.stages[vs], kind, split_w)

    finish = [0.0] * p
    last_b_start: dict[int, float] = {}

    def rank_proc(r: int) -> simpy.events.ProcessGenerator:
        queues = [deque(q) for q in rank_queues(job.schedule, p, m, r, job.vp)]
        w_outstanding = 0
        w_limit = p - r  # zero-bubble H1: no more deferred weight gradients than 1F1B's in-flight count
        while any(queues):
            pick = -1
            heads: list[tuple[str, int, int, int]] = []
            for qi, q in enumerate(queues):
                if q:
                    kind, c, mb = q[0]
                    heads.append((kind, virtual_stage(job.schedule, p, r, c), mb, qi))
            if job.schedule == "zero_bubble" and w_outstanding >= w_limit and len(queues) > 1 and queues[1]:
                order = sorted(heads, key=lambda h: -h[3])  # weight gradients first
            else:
                order = heads
            for kind, vs, mb, qi in order:
                if _missing(flags, chain, kind, vs, mb) is None:
                    pick = qi
                    break
            if pick < 0:
                # wait for one unmet dependency of each head, then look again
                keys = [_missing(flags, chain, kind, vs, mb) for kind, vs, mb, _ in heads]
                waits = [wait_for(k) for k in keys if k is not None]
                yield waits[0] if len(waits) == 1 else env.any_of(waits)
                continue
            kind, c, mb = queues[pick].popleft()
            vs = virtual_stage(job.schedule, p, r, c)
            dur = duration(kind, vs)
            t0 = env.now
            if kind == "B":
                last_b_start[r] = t0
                w_outstanding += 1 if split_w else 0
            if kind == "W":
                w_outstanding -= 1
            if dur > 0:
                yield env.timeout(dur)
                busy[r] += dur
                events.append(
                    Event(r, "compute", f"{kind}{c} mb{mb}", t0, env.now, {"stage": vs, "microbatch": mb})
                )
            counter[0] += 1
            mark(("done", kind, vs, mb))
            if kind == "F" and vs % chain < chain - 1:
                send("F", vs, vs + 1, mb)
            if kind == "B" and vs % chain > 0:
                send("B", vs, vs - 1, mb)
        finish[r] = env.now
        # data-parallel gradient reduction: buckets released during the last backward
        dp = job.dp_time[r] if job.dp_time else 0.0
        if dp > 0:
            if job.dp_window:
                # the rank's whole backward of its last micro-batch (all of its chunks) ends now
                last_b = job.dp_window[r]
                start = env.now - last_b
            else:
                vs0 = virtual_stage(job.schedule, p, r, 0)
                last_b = duration("B", vs0) + duration("W", vs0)
                start = last_b_start.get(r, env.now)
            comm_start, t = _bucketed_reduction(env.now, start, last_b, dp, max(job.buckets, 1), job.dp_overlap)
            yield env.timeout(max(t - env.now, 0.0))
            events.append(Event(r, "dp_comm", "grad reduce", comm_start, t))
            counter[0] += 1
        # the optimizer step, then what the next step's forward cannot hide
        for times, stream, name in (
            (job.optimizer_time, "compute", "optimizer"),
            (job.tail_time, "dp_comm", "param gather (exposed)"),
        ):
            secs = times[r] if times else 0.0
            if secs > 0:
                t0 = env.now
                yield env.timeout(secs)
                events.append(Event(r, stream, name, t0, env.now))
                counter[0] += 1
        finish[r] = env.now

    for r in range(p):
        env.process(rank_proc(r))
    env.run()
    return DESResult(step_time_s=max(finish), events=events, busy_s=busy, sim_events=counter[0])
