"""The fast engines give simpy's step to the last bit: the event-free replay of fixed-order schedules
(times, busy seconds, counts and every event) and the plain event heap of every schedule (the same, with
the events in simpy's order); hypothesis over schedules, pipeline sizes, chunks, micro-batches, stage
times (uniform ones tie at every step), transfers and the data-parallel tail."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.des import (
    QUEUED_SCHEDULES,
    DESResult,
    PipelineJob,
    StageTimes,
    replay_pipeline,
    simulate_pipeline,
    simulate_pipeline_simpy,
    simulate_queued,
    step_lower_bound,
)
from simcore.engine.schedules import SCHEDULES, chunks

_secs = st.floats(0.0, 3.0, allow_nan=False)


def _events(res: DESResult) -> list[tuple[object, ...]]:
    return sorted((e.rank, e.stream, e.name, e.start, e.end, tuple(sorted(e.args.items()))) for e in res.events)


def _same(job: PipelineJob) -> None:
    ref = simulate_pipeline_simpy(job)
    heap = simulate_queued(job)
    fast = [heap] if job.schedule in QUEUED_SCHEDULES else [heap, replay_pipeline(job)]
    for res in fast:
        assert res.step_time_s == ref.step_time_s
        assert res.busy_s == ref.busy_s
        assert res.sim_events == ref.sim_events
        assert len(res.events) == len(ref.events)
        assert res.bubble_fraction == ref.bubble_fraction
        assert _events(res) == _events(ref)
    assert list(heap.events) == list(ref.events)  # the same decisions in the same order
    # no schedule beats the busiest rank's work done back to back
    assert step_lower_bound(job) <= ref.step_time_s * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(
    schedule=st.sampled_from(SCHEDULES),
    p=st.integers(1, 8),
    vp=st.integers(1, 4),
    k=st.integers(1, 4),
    uniform=st.booleans(),
    times=st.lists(st.tuples(_secs, _secs, _secs), min_size=32, max_size=32),
    wgrad=st.sampled_from([0.0, 0.5, 1.0]),
    p2p=st.sampled_from([0.0, 0.05, 0.5, 2.0]),
    dp=st.sampled_from([0.0, 0.7, 5.0]),
    overlap=st.booleans(),
    buckets=st.integers(1, 4),
    window=st.booleans(),
    tail=st.sampled_from([0.0, 0.3]),
)
def test_fast_engines_equal_simpy(
    schedule: str, p: int, vp: int, k: int, uniform: bool, times: list[tuple[float, float, float]],
    wgrad: float, p2p: float, dp: float, overlap: bool, buckets: int, window: bool, tail: float,
) -> None:
    v = vp if schedule == "interleaved" else 1
    m = p * k if v > 1 else k + p - 1  # interleaving takes whole groups of p micro-batches
    n = p * chunks(schedule, v)
    # a stage's weight gradients are a share of its backward
    stages = [StageTimes(1.0, 2.0, wgrad) if uniform else StageTimes(f, b, min(w, b)) for f, b, w in times[:n]]
    job = PipelineJob(
        schedule, p, m, v, stages, p2p, [dp] * p, overlap, buckets, [0.2] * p,
        [1.5] * p if window else [], [tail] * p,
    )
    _same(job)


@pytest.mark.parametrize(
    "schedule, v", [("1f1b", 1), ("interleaved", 2), ("interleaved", 4), ("zero_bubble", 1), ("dualpipe", 1)]
)
def test_fast_engines_on_contended_links(schedule: str, v: int) -> None:
    """Transfers slower than the stages queue on their links: the FIFO is the same as simpy's."""
    n = 4 * chunks(schedule, v)
    stages = [StageTimes(0.1 * (1 + i % 3), 0.25, 0.1) for i in range(n)]
    _same(PipelineJob(schedule, 4, 16, v, stages, 0.4, [1.0] * 4))


def test_simulate_pipeline_dispatches() -> None:
    """Fixed orders are replayed (events made on first use); queued schedules run on the event heap."""
    stages = [StageTimes(1.0, 2.0, 0.5)] * 4
    fast = simulate_pipeline(PipelineJob("1f1b", 4, 8, 1, stages, 0.1, [0.0] * 4))
    assert type(fast.events).__name__ == "_Timeline" and isinstance(fast.events[0].start, float)
    zb = PipelineJob("zero_bubble", 4, 8, 1, stages, 0.1, [0.0] * 4)
    assert simulate_pipeline(zb).events[-1] == simulate_queued(zb).events[-1]
    with pytest.raises(ValueError, match="simulate_queued"):
        replay_pipeline(zb)
    with pytest.raises(ValueError, match="expected 8 stage times"):
        replay_pipeline(PipelineJob("interleaved", 4, 8, 2, stages, 0.1, [0.0] * 4))


def test_step_lower_bound_is_tight_without_a_pipeline() -> None:
    """One rank, no data parallelism: the step is its tasks back to back, then the optimizer and the tail."""
    for schedule in ("1f1b", "zero_bubble"):
        job = PipelineJob(schedule, 1, 6, 1, [StageTimes(0.3, 0.7, 0.2)], 0.0, [0.0], optimizer_time=[0.4], tail_time=[0.1])
        assert step_lower_bound(job) == pytest.approx(6 * 1.0 + 0.5, rel=1e-12)
        assert simulate_pipeline(job).step_time_s == pytest.approx(step_lower_bound(job), rel=1e-12)
