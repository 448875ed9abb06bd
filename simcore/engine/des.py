"""Discrete-event engine for one training step of a pipeline-parallel data-parallel job.

Each pipeline rank runs its schedule's task order (:mod:`simcore.engine.schedules`) on a compute
stream; activations and gradients between consecutive virtual stages travel over point-to-point
links (one per directed rank pair, first in first out, so concurrent transfers on the same link queue
behind each other); each rank's data-parallel gradient reduction runs on its own communication stream
in buckets released as the last backward pass of each chunk proceeds, and the optimizer step follows.
Every event is recorded so the step can be written as a Chrome trace.

Tasks of a rank run in list order, except weight-gradient (``W``) tasks of zero-bubble schedules,
which a rank runs whenever the next task in its order is not ready yet.

Three engines run this one model: :func:`simulate_pipeline_simpy` (simpy processes; the reference),
:func:`replay_pipeline` (fixed task orders, no event queue) and :func:`simulate_queued` (a plain event
heap in simpy's order); :func:`simulate_pipeline` picks the fast one for the schedule. They give the
same times to the last bit (docs/parallelism.md, "DES speed").

Scope: collectives inside a stage's work are priced by the analytic models (no link sharing between
concurrent collectives here; see :mod:`simcore.comm.flow` for that) and there are no stragglers, so
on a single job the DES reproduces the analytic closed forms (see docs/decisions.md).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

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
    events: Sequence[Event]
    """The timeline, in the order the events were recorded (a rank's in its own order)."""
    busy_s: list[float]
    """Compute-busy seconds per pipeline rank."""
    sim_events: int
    compute_end_s: float | None = None
    """When the last compute-stream event ends (seconds; ``None``: read it from ``events``)."""

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the compute streams over the pipeline phase (before the DP tail)."""
        end = self.compute_end_s
        if end is None:
            end = max((e.end for e in self.events if e.stream == "compute"), default=0.0)
        if end <= 0:
            return 0.0
        busy = sum(self.busy_s)
        return 1.0 - busy / (end * len(self.busy_s))


QUEUED_SCHEDULES = ("zero_bubble", "dualpipe")
"""Schedules whose ranks choose between task queues as dependencies arrive (:func:`simulate_queued`)."""


Key = int
"""A completion flag: the end of a task or the arrival of a transfer, numbered by :func:`_queues`."""

_FLAG_KINDS = {("arr", "F"): 0, ("arr", "B"): 1, ("done", "F"): 2, ("done", "B"): 3, ("done", "W"): 4}
"""Completion flags by what raised them: activations or gradients arrived, a task of a kind ended."""

QueuedTask = tuple[str, int, int, int, float, tuple[Key, ...], Key, Key, int]
"""A task in a rank's queue: (kind, chunk, micro-batch, virtual stage, seconds, the flags it waits for in
the order they are checked, the flag its end raises, the flag its output raises at the next stage (-1:
none), the rank it sends that output to)."""


def _flag_count(job: PipelineJob) -> int:
    """How many completion flags a step has (:func:`_queues` numbers them from 0)."""
    return len(_FLAG_KINDS) * job.pp * chunks(job.schedule, job.vp) * job.microbatches


def _queues(job: PipelineJob, r: int, chain: int) -> list[deque[QueuedTask]]:
    """Rank ``r``'s task queues (:func:`~simcore.engine.schedules.rank_queues`), each task with what it
    waits for: a forward the previous stage's activations, a backward its own forward and the next
    stage's gradients, a weight gradient its backward; and what it produces: activations (forward) or
    gradients (backward) for the next stage along the chain, none at the chain's end."""
    split_w = job.schedule in QUEUED_SCHEDULES
    p, m, nchunk = job.pp, job.microbatches, chunks(job.schedule, job.vp)
    owner = {virtual_stage(job.schedule, p, rank, c): rank for rank in range(p) for c in range(nchunk)}

    def flag(what: str, kind: str, vs: int) -> Key:
        """The flag of micro-batch 0 (micro-batch ``mb``'s is this plus ``mb``)."""
        return (_FLAG_KINDS[what, kind] * p * nchunk + vs) * m

    # per (kind, chunk): stage, seconds, the flags waited for, raised at the end, raised at the next stage
    shapes: dict[tuple[str, int], tuple[int, float, tuple[Key, ...], Key, Key, int]] = {}
    for c in range(nchunk):
        vs = virtual_stage(job.schedule, p, r, c)
        pos = vs % chain
        first, last = pos == 0, pos == chain - 1
        shapes["F", c] = (
            vs, _task_seconds(job.stages[vs], "F", split_w), () if first else (flag("arr", "F", vs),),
            flag("done", "F", vs), -1 if last else flag("arr", "F", vs + 1), -1 if last else owner[vs + 1],
        )
        shapes["B", c] = (
            vs, _task_seconds(job.stages[vs], "B", split_w),
            (flag("done", "F", vs),) + (() if last else (flag("arr", "B", vs),)),
            flag("done", "B", vs), -1 if first else flag("arr", "B", vs - 1), -1 if first else owner[vs - 1],
        )
        shapes["W", c] = (vs, _task_seconds(job.stages[vs], "W", split_w), (flag("done", "B", vs),), flag("done", "W", vs), -1, -1)
    out = []
    for q in rank_queues(job.schedule, p, m, r, job.vp):
        tasks: deque[QueuedTask] = deque()
        for kind, c, mb in q:
            vs, secs, deps, done, nxt, dst = shapes[kind, c]
            if len(deps) == 1:
                deps = (deps[0] + mb,)
            elif deps:
                deps = (deps[0] + mb, deps[1] + mb)
            tasks.append((kind, c, mb, vs, secs, deps, done + mb, nxt + mb if nxt >= 0 else -1, dst))
        out.append(tasks)
    return out


def _missing(flags: bytearray, deps: tuple[Key, ...]) -> Key:
    """The first of ``deps`` not raised yet (-1 when the task can run)."""
    for key in deps:
        if not flags[key]:
            return key
    return -1


def _choose(
    job: PipelineJob, r: int, queues: list[deque[QueuedTask]], w_outstanding: int, flags: bytearray
) -> tuple[int, list[Key]]:
    """The queue whose head rank ``r`` runs now (the first, in priority order, whose dependencies are met),
    or -1 and one unmet dependency of each head. Zero-bubble ranks take weight gradients first once
    ``p - r`` are deferred (no more than 1F1B keeps micro-batches in flight, ZB-H1)."""
    order: Iterable[int] = range(len(queues))
    if job.schedule == "zero_bubble" and w_outstanding >= job.pp - r and len(queues) > 1 and queues[1]:
        order = reversed(range(len(queues)))  # weight gradients first
    for qi in order:
        q = queues[qi]
        if q and _missing(flags, q[0][5]) < 0:
            return qi, []
    keys = [_missing(flags, q[0][5]) for q in queues if q]
    return -1, [k for k in keys if k >= 0]


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


def _checked_chunks(job: PipelineJob) -> int:
    """Chunks per rank of ``job``'s schedule, once its stage list is checked to hold ``pp * chunks``."""
    nchunk = chunks(job.schedule, job.vp)
    if len(job.stages) != job.pp * nchunk:
        raise ValueError(f"expected {job.pp * nchunk} stage times, got {len(job.stages)}")
    return nchunk


def _rank_tail(job: PipelineJob, r: int, now: float, last_b_start: float, split_w: bool) -> tuple[float, list[Event]]:
    """When rank ``r`` ends its step, and the events of its tail, after its last task ended at ``now``
    (its last backward began at ``last_b_start``): the data-parallel gradient reduction (buckets released
    during the last backward, :func:`_bucketed_reduction`), the optimizer step, then the exposed tail."""
    events: list[Event] = []
    dp = job.dp_time[r] if job.dp_time else 0.0
    if dp > 0:
        if job.dp_window:
            # the rank's whole backward of its last micro-batch (all of its chunks) ends now
            last_b = job.dp_window[r]
            start = now - last_b
        else:
            st = job.stages[virtual_stage(job.schedule, job.pp, r, 0)]
            last_b = _task_seconds(st, "B", split_w) + _task_seconds(st, "W", split_w)
            start = last_b_start
        comm_start, t = _bucketed_reduction(now, start, last_b, dp, max(job.buckets, 1), job.dp_overlap)
        now += max(t - now, 0.0)
        events.append(Event(r, "dp_comm", "grad reduce", comm_start, t))
    # the optimizer step, then what the next step's forward cannot hide
    for times, stream, name in (
        (job.optimizer_time, "compute", "optimizer"),
        (job.tail_time, "dp_comm", "param gather (exposed)"),
    ):
        secs = times[r] if times else 0.0
        if secs > 0:
            t0 = now
            now += secs
            events.append(Event(r, stream, name, t0, now))
    return now, events


def simulate_pipeline(job: PipelineJob) -> DESResult:
    """One step's time and timeline.

    Schedules whose ranks run one fixed task order (GPipe, 1F1B, interleaved 1F1B) are replayed without
    an event queue (:func:`replay_pipeline`); zero-bubble and DualPipe, whose ranks pick between queues
    as dependencies arrive, run on a plain event heap (:func:`simulate_queued`). Both give the times and
    events of the simpy reference (:func:`simulate_pipeline_simpy`) to the last bit. See
    docs/parallelism.md, "DES speed".
    """
    if job.schedule in QUEUED_SCHEDULES:
        return simulate_queued(job)
    return replay_pipeline(job)


def step_lower_bound(job: PipelineJob) -> float:
    """Seconds no schedule of ``job`` can beat: the busiest rank's tasks one after another on its compute
    stream (no idle time), then its optimizer step and exposed tail (its gradient reduction can only
    add). The simulated step is at least this, to rounding; a cheap test of whether simulating can
    matter (the planner's re-check of its baseline)."""
    split_w = job.schedule in QUEUED_SCHEDULES
    bound = 0.0
    for r in range(job.pp):
        secs: dict[tuple[str, int], float] = {}
        busy = 0.0
        for q in rank_queues(job.schedule, job.pp, job.microbatches, r, job.vp):
            for kind, c, _mb in q:
                d = secs.get((kind, c))
                if d is None:
                    st = job.stages[virtual_stage(job.schedule, job.pp, r, c)]
                    d = secs[kind, c] = max(_task_seconds(st, kind, split_w), 0.0)
                busy += d
        for times in (job.optimizer_time, job.tail_time):
            busy += max(times[r], 0.0) if times else 0.0
        bound = max(bound, busy)
    return bound


Record = tuple[Any, ...]
"""An event in the making: (seconds when recorded, what, ...) -- see :func:`_event`."""


class _Timeline(Sequence[Event]):
    """A step's events, made on first use (a 4,096-GPU step records a quarter of a million)
    and ordered by the time each was recorded (ties: rank, then the rank's own order)."""

    def __init__(self, records: list[list[Record]], count: int) -> None:
        self._records: list[list[Record]] | None = records
        self._count = count
        self._events: list[Event] = []

    def _made(self) -> list[Event]:
        if self._records is not None:
            recs = [x for rank in self._records for x in rank]
            self._records = None
            recs.sort(key=lambda x: x[0])  # stable: ranks in order, each in its own order
            self._events = [_event(x) for x in recs]
        return self._events

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | Sequence[Event]:
        return self._made()[i]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._made())


def _event(x: Record) -> Event:
    """The event of a record: ``(end, 0, rank, start, kind, chunk, mb, stage)`` a compute task,
    ``(recorded, 1, rank, start, end, dst, kind, mb)`` a transfer, ``(recorded, 2, event)`` the tail's."""
    if x[1] == 0:
        _, _, r, t0, kind, c, mb, vs = x
        return Event(r, "compute", f"{kind}{c} mb{mb}", t0, x[0], {"stage": vs, "microbatch": mb})
    if x[1] == 1:
        _, _, r, t0, t1, dst, kind, mb = x
        return Event(r, f"send_to_{dst}", f"{'act' if kind == 'F' else 'grad'} mb{mb}", t0, t1)
    ev: Event = x[2]
    return ev


def replay_pipeline(job: PipelineJob) -> DESResult:
    """One step of a schedule whose ranks run one fixed task order, without an event queue: the ranks'
    tasks are taken in dependency order, each starting at ``max(its rank's previous end, its input's
    arrival)``; a transfer starts at ``max(sender's end, its link's previous transfer end)`` (the link's
    transfers come from one rank, in that rank's order, so the FIFO is this running maximum). Every sum
    is the one simpy forms (an arrival at ``now + (t1 - now)``), so the times equal
    :func:`simulate_pipeline_simpy`'s to the last bit; a rank blocked on a missing input waits in a
    table keyed by that input and resumes when it is produced. Raises ``ValueError`` for a schedule of
    several queues (:data:`QUEUED_SCHEDULES`)."""
    if job.schedule in QUEUED_SCHEDULES:
        raise ValueError(f"{job.schedule} ranks pick between task queues: use simulate_queued")
    p, m = job.pp, job.microbatches
    nstage = p * _checked_chunks(job)
    fwd = [st.fwd for st in job.stages]
    bwd = [st.bwd for st in job.stages]
    c = job.p2p_time
    nb = nstage * m  # arrivals: forward inputs of (stage, mb) at vs*m + mb, backward ones at nb + vs*m + mb
    arrived: list[float | None] = [None] * (2 * nb)
    blocked: dict[int, int] = {}
    orders = [rank_queues(job.schedule, p, m, r, job.vp)[0] for r in range(p)]
    pos = [0] * p
    now = [0.0] * p
    busy = [0.0] * p
    last_b = [-1.0] * p
    compute_end = [0.0] * p
    link_free: list[dict[int, float]] = [{} for _ in range(p)]
    records: list[list[Record]] = [[] for _ in range(p)]
    count = 0
    ready = list(range(p - 1, -1, -1))
    while ready:
        r = ready.pop()
        order, i, t, rec, links = orders[r], pos[r], now[r], records[r], link_free[r]
        n = len(order)
        while i < n:
            kind, ch, mb = order[i]
            vs = ch * p + r  # (the placement of these schedules: virtual stage c*p + r on rank r)
            if kind == "F":
                # (its forward precedes its backward in the rank's order: a backward's own-forward
                # dependency always holds here)
                if vs > 0:
                    a = arrived[vs * m + mb]
                    if a is None:
                        blocked[vs * m + mb] = r
                        break
                    if a > t:
                        t = a
                d = fwd[vs]
                out = (vs + 1) * m + mb if vs < nstage - 1 else -1
                dst_vs = vs + 1
            else:
                if vs < nstage - 1:
                    a = arrived[nb + vs * m + mb]
                    if a is None:
                        blocked[nb + vs * m + mb] = r
                        break
                    if a > t:
                        t = a
                d = bwd[vs]
                last_b[r] = t
                out = nb + (vs - 1) * m + mb if vs > 0 else -1
                dst_vs = vs - 1
            if d > 0:
                t0 = t
                t += d
                busy[r] += d
                rec.append((t, 0, r, t0, kind, ch, mb, vs))
                compute_end[r] = t
            count += 1
            i += 1
            if out < 0:
                continue
            dst = dst_vs % p
            if dst == r or c <= 0:
                arrived[out] = t
            else:
                s0 = links.get(dst, 0.0)
                s0 = t if t >= s0 else s0
                s1 = s0 + c
                links[dst] = s1
                arrived[out] = t + (s1 - t)
                rec.append((t, 1, r, s0, s1, dst, kind, mb))
                count += 1
            w = blocked.pop(out, None)
            if w is not None:
                ready.append(w)
        pos[r], now[r] = i, t
        if i == n:
            now[r], tail = _rank_tail(job, r, t, last_b[r] if last_b[r] >= 0 else t, False)
            rec.extend((t, 2, e) for e in tail)
            count += len(tail)
            compute_end[r] = max([compute_end[r]] + [e.end for e in tail if e.stream == "compute"])
    if blocked:
        raise RuntimeError(f"{job.schedule} schedule deadlocked at ranks {sorted(set(blocked.values()))}")
    timeline = _Timeline(records, sum(len(x) for x in records))
    return DESResult(max(now), timeline, busy, count, max(compute_end))


def simulate_queued(job: PipelineJob) -> DESResult:
    """One step of any schedule on a plain event heap: simpy's engine without its generators and event
    objects, taking the same decisions in the same order.

    Entries are ``(seconds, priority, sequence)`` like simpy's (a rank's start is urgent; everything else
    normal, in the order it was scheduled), so events at the same instant are handled in simpy's order
    and a rank choosing between queues (:func:`_choose`) sees the same completion flags: a task's end,
    a transfer's arrival (at ``now + (t1 - now)``), a waited-for flag's wake-up, and -- where a rank waits
    for any of several flags -- the second hop simpy's ``AnyOf`` takes. The times and events equal
    :func:`simulate_pipeline_simpy`'s to the last bit (tests/engine/test_des_replay.py)."""
    p = job.pp
    _checked_chunks(job)
    chain = chain_length(job.schedule, p, job.vp)
    split_w = job.schedule in QUEUED_SCHEDULES
    queues = [_queues(job, r, chain) for r in range(p)]
    heap: list[tuple[float, int, int, int, int, Key]] = []
    seq = itertools.count()
    push = heapq.heappush
    flags = bytearray(_flag_count(job))
    waiters: dict[Key, int] = {}  # flags a rank waits for -> the rank
    waiting: list[tuple[list[Key], bool] | None] = [None] * p  # (flags, woken) while a rank waits
    running: list[tuple[QueuedTask, float]] = [(("", 0, 0, 0, 0.0, (), -1, -1, -1), 0.0)] * p
    w_outstanding = [0] * p
    last_b_start: dict[int, float] = {}
    link_free: dict[tuple[int, int], float] = {}
    records: list[Record] = []
    busy = [0.0] * p
    finish = [0.0] * p
    compute_end = [0.0] * p
    count = 0
    resume, task_end, arrive, wake = 0, 1, 2, 3

    def mark(key: Key, now: float) -> None:
        flags[key] = 1
        r = waiters.pop(key, -1)
        if r >= 0:
            w = waiting[r]
            if w is not None and not w[1] and key in w[0]:  # (else the wake-up would find nothing to do)
                push(heap, (now, 1, next(seq), wake, r, key))

    def complete(r: int, now: float) -> None:
        nonlocal count
        (kind, c, mb, vs, dur, _deps, done, nxt, dst), t0 = running[r]
        if dur > 0:
            busy[r] += dur
            records.append((now, 0, r, t0, kind, c, mb, vs))
            compute_end[r] = now
        count += 1
        mark(done, now)
        if nxt < 0:
            return
        if dst == r or job.p2p_time <= 0:
            mark(nxt, now)
            return
        t0 = max(now, link_free.get((r, dst), 0.0))
        t1 = t0 + job.p2p_time
        link_free[(r, dst)] = t1
        records.append((now, 1, r, t0, t1, dst, kind, mb))
        count += 1
        push(heap, (now + (t1 - now), 1, next(seq), arrive, r, nxt))

    def run(r: int, now: float) -> None:
        """Rank ``r`` at ``now``: run tasks until one takes time or none is ready."""
        nonlocal count
        qs = queues[r]
        while any(qs):
            pick, keys = _choose(job, r, qs, w_outstanding[r], flags)
            if pick < 0:
                for k in keys:
                    waiters[k] = r
                waiting[r] = (keys, False)
                return
            task = qs[pick].popleft()
            kind, dur = task[0], task[4]
            if kind == "B":
                last_b_start[r] = now
                w_outstanding[r] += 1 if split_w else 0
            if kind == "W":
                w_outstanding[r] -= 1
            running[r] = (task, now)
            if dur > 0:
                push(heap, (now + dur, 1, next(seq), task_end, r, -1))
                return
            complete(r, now)
        finish[r], tail = _rank_tail(job, r, now, last_b_start.get(r, now), split_w)
        records.extend((now, 2, e) for e in tail)
        count += len(tail)
        compute_end[r] = max([compute_end[r]] + [e.end for e in tail if e.stream == "compute"])

    for r in range(p):
        push(heap, (0.0, 0, next(seq), resume, r, -1))  # urgent, like simpy's process start
    while heap:
        now, _, _, what, r, key = heapq.heappop(heap)
        if what == task_end:
            complete(r, now)
            run(r, now)
        elif what == arrive:
            mark(key, now)
        elif what == wake:
            w = waiting[r]
            if w is None or key not in w[0] or w[1]:
                continue  # a flag this rank no longer waits for, or one of several that already woke it
            if len(w[0]) == 1:
                waiting[r] = None
                run(r, now)
            else:  # simpy's AnyOf: the first flag triggers the condition, which wakes the rank next
                waiting[r] = (w[0], True)
                push(heap, (now, 1, next(seq), resume, r, -1))
        else:
            waiting[r] = None
            run(r, now)
    timeline = _Timeline([records], len(records))
    return DESResult(max(finish), timeline, busy, count, max(compute_end))


def simulate_pipeline_simpy(job: PipelineJob) -> DESResult:
    """Run one step in simpy and return its time and timeline: the reference engine (one process per
    rank, a simpy event where a rank waits for a flag) that :func:`simulate_pipeline`'s fast paths
    reproduce."""
    env = simpy.Environment()
    p = job.pp
    _checked_chunks(job)
    chain = chain_length(job.schedule, p, job.vp)
    split_w = job.schedule in QUEUED_SCHEDULES
    # Completion flags (task ends, transfer arrivals); simpy events only where a rank waits.
    flags = bytearray(_flag_count(job))
    waiters: dict[Key, simpy.Event] = {}

    def mark(key: Key) -> None:
        flags[key] = 1
        ev = waiters.pop(key, None)
        if ev is not None:
            ev.succeed()

    def wait_for(key: Key) -> simpy.Event:
        found = waiters.get(key)
        if found is None:
            found = waiters[key] = env.event()
        return found

    link_free: dict[tuple[int, int], float] = {}
    events: list[Event] = []
    busy = [0.0] * p
    counter = [0]

    def send(src: int, dst: int, key: Key, kind: str, mb: int) -> None:
        """Queue the transfer raising ``key`` on the directed link src->dst (FIFO: one at a time)."""
        if src == dst or job.p2p_time <= 0:
            mark(key)
            return
        t0 = max(env.now, link_free.get((src, dst), 0.0))
        t1 = t0 + job.p2p_time
        link_free[(src, dst)] = t1
        events.append(Event(src, f"send_to_{dst}", f"{'act' if kind == 'F' else 'grad'} mb{mb}", t0, t1))
        counter[0] += 1
        env.timeout(t1 - env.now).callbacks.append(lambda _ev: mark(key))

    finish = [0.0] * p
    last_b_start: dict[int, float] = {}

    def rank_proc(r: int) -> simpy.events.ProcessGenerator:
        queues = _queues(job, r, chain)
        w_outstanding = 0
        while any(queues):
            pick, keys = _choose(job, r, queues, w_outstanding, flags)
            if pick < 0:
                # wait for one unmet dependency of each head, then look again
                waits = [wait_for(k) for k in keys]
                yield waits[0] if len(waits) == 1 else env.any_of(waits)
                continue
            kind, c, mb, vs, dur, _deps, done, nxt, dst = queues[pick].popleft()
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
            mark(done)
            if nxt >= 0:
                send(r, dst, nxt, kind, mb)
        finish[r], tail = _rank_tail(job, r, env.now, last_b_start.get(r, env.now), split_w)
        events.extend(tail)
        counter[0] += len(tail)

    for r in range(p):
        env.process(rank_proc(r))
    env.run()
    end = max((e.end for e in events if e.stream == "compute"), default=0.0)
    return DESResult(max(finish), events, busy, counter[0], end)
