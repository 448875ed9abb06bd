"""One pipeline formula: the closed forms of ``engine.schedules`` (``pipeline_time``, the analytic
engine's pipeline phase, and ``bubble_fraction``) against the discrete-event engine on cases without
contention (free or small point-to-point transfers, no data parallelism), within 1 %."""

import pytest

from simcore.engine.des import PipelineJob, StageTimes, simulate_pipeline
from simcore.engine.schedules import bubble_fraction, chunks, pipeline_time

CASES = [(p, p * k) for p in (2, 3, 4, 8) for k in (1, 2, 4)]
WORK = [(1.0, 2.0, 0.0), (1.0, 2.0, 1.0), (0.5, 1.5, 0.5)]  # (F, B, W of B) of a stage's layers


def _des(
    schedule: str, p: int, m: int, v: int, fbw: tuple[float, float, float], emb: float = 0.0,
    head: float = 0.0, c: float = 0.0,
) -> tuple[float, float]:
    """(step seconds, idle share) of the DES with uniform layers split over the ``v`` chunks; the
    first virtual stage adds ``emb`` and the last ``head`` seconds (40 % forward)."""
    n = chunks(schedule, v)
    f, b, w = (x / n for x in fbw)
    stages = [StageTimes(f, b, w) for _ in range(p * n)]
    stages[0] = StageTimes(f + 0.4 * emb, b + 0.6 * emb, w)
    last = stages[-1]
    stages[-1] = StageTimes(last.fwd + 0.4 * head, last.bwd + 0.6 * head, w)
    res = simulate_pipeline(PipelineJob(schedule, p, m, v, stages, c, [0.0] * p))
    return res.step_time_s, res.bubble_fraction


def _closed(
    schedule: str, p: int, m: int, v: int, fbw: tuple[float, float, float], emb: float = 0.0,
    head: float = 0.0, c: float = 0.0,
) -> float:
    f, b, w = fbw
    stage_max = max(f + b + emb, f + b + head)
    stage_sum = p * (f + b) + emb + head
    return float(pipeline_time(schedule, p, m, v, stage_max, stage_sum, f, b, w, c))


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zero_bubble"])
@pytest.mark.parametrize("fbw", WORK)
def test_pipeline_time_matches_des(schedule: str, fbw: tuple[float, float, float]) -> None:
    for p, m in CASES:
        # uniform stages, free transfers
        assert _des(schedule, p, m, 1, fbw)[0] == pytest.approx(_closed(schedule, p, m, 1, fbw), rel=0.01)
        # embedding on the first stage, LM head and loss on the last, small transfers between stages
        for c in (0.0, 0.02):
            des = _des(schedule, p, m, 1, fbw, 0.3, 0.8, c)[0]
            assert des == pytest.approx(_closed(schedule, p, m, 1, fbw, 0.3, 0.8, c), rel=0.01)


@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("fbw", WORK)
def test_interleaved_pipeline_time_matches_des(v: int, fbw: tuple[float, float, float]) -> None:
    for p, m in CASES:
        assert _des("interleaved", p, m, v, fbw)[0] == pytest.approx(
            _closed("interleaved", p, m, v, fbw), rel=0.01
        )


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 4)])
def test_bubble_fraction_matches_des(schedule: str, v: int) -> None:
    for p, m in CASES:
        idle = _des(schedule, p, m, v, (1.0, 2.0, 0.0))[1]
        assert idle == pytest.approx(float(bubble_fraction(schedule, p, m, v)), rel=0.01)


def test_bubble_fraction_is_pipeline_time_idle_share() -> None:
    """For uniform stages ``bubble_fraction`` is ``pipeline_time``'s idle share (one formula)."""
    for schedule, v in (("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("interleaved", 3)):
        for p, m in CASES:
            t = _closed(schedule, p, m, v, (1.0, 2.0, 0.0))
            assert float(bubble_fraction(schedule, p, m, v)) == pytest.approx((t - 3.0 * m) / t, rel=1e-12)
