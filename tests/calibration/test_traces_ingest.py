"""Trace ingest at scale: the step and optimizer ranges found by bisection give what the plain
search gives, and a profiled step's CPU ops are found per step, not by scanning the whole trace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.traces.classify import _in_ranges, _range_finder

_ranges = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 30)).map(lambda t: (float(t[0]), float(t[0] + t[1]), "r")),
    max_size=12,
).map(sorted)


@settings(max_examples=300, deadline=None)
@given(rs=_ranges, ts=st.lists(st.integers(-5, 240).map(float), min_size=1, max_size=20))
def test_range_finder_answers_as_in_ranges(rs: list[tuple[float, float, str]], ts: list[float]) -> None:
    """Disjoint, touching, nested and overlapping ranges, points on their ends and between them."""
    find = _range_finder(rs)
    for t in ts:
        assert find(t) == _in_ranges(t, rs)
    # half-step points: inside ranges, not only on their ends
    for t in ts:
        assert find(t + 0.5) == _in_ranges(t + 0.5, rs)


def test_range_finder_on_disjoint_ranges_uses_bisection() -> None:
    rs = [(float(10 * i), float(10 * i + 5), f"s{i}") for i in range(1000)]
    find = _range_finder(rs)
    assert find.__name__ == "find"  # not the fallback lambda
    assert [find(t) for t in (-1.0, 0.0, 5.0, 5.5, 9999.0, 9995.0, 12.0)] == [-1, 0, 0, -1, -1, 999, 1]


def test_step_windows_are_each_steps_ops() -> None:
    """host_trace's per-step CPU ops (bisected on the sorted op times) are the ops inside each
    step's range, for a trace with several annotated steps."""
    import tempfile
    from pathlib import Path

    from simcore.calibration.host_trace import _step_windows
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze
    from simcore.traces.synth import SynthConfig, write_trace

    p = Path(tempfile.mkdtemp()) / "t.json"
    write_trace(p, SynthConfig(layers=2, steps=5))
    a = analyze(read_trace(p))
    ops = sorted(a.trace.cpu_ops.values(), key=lambda o: o.ts)
    got = list(_step_windows(a))
    assert len(got) == 5
    for st_, lo, hi, win in got:
        assert win == [o for o in ops if lo <= o.ts <= hi] and win
        assert (lo, hi) == (st_.cpu_start, st_.cpu_end)
