"""The figures and traces the command line writes: the Gantt legend sits off the bars, and a file that
cannot be written is one SimcoreError naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.engine.des import DESResult, Event
from simcore.errors import SimcoreError
from simcore.report.chrome_trace import gantt, gantt_figure, write_trace
from simcore.report.plots import image_formats


def _result(ranks: int) -> DESResult:
    events = []
    for r in range(ranks):
        t = 0.1 * r
        for mb in range(4):
            events.append(Event(r, "compute", f"F{mb}", t, t + 1.0))
            events.append(Event(r, "compute", f"B{mb}", t + 1.0, t + 3.0))
            t += 3.0
        events.append(Event(r, "dp_comm", "allreduce", t - 1.0, t + 0.5))
    return DESResult(step_time_s=12.5, events=events, busy_s=[12.0] * ranks, sim_events=len(events))


@pytest.mark.parametrize("ranks", [1, 2, 8, 32])
def test_gantt_legend_does_not_cover_the_bars(ranks: int) -> None:
    fig = gantt_figure(_result(ranks), "a title")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    (ax,) = fig.axes
    assert ax.get_legend() is None
    (leg,) = fig.legends
    labels = [t.get_text() for t in leg.get_texts()]
    assert labels[:2] == ["forward", "backward"] and "DP reduce" in labels
    lb, ab = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert not lb.overlaps(ab), (lb, ab)
    # and off the title too
    tb = ax.title.get_window_extent(renderer)
    assert not lb.overlaps(tb), (lb, tb)


def test_gantt_writes_formats_and_names_a_bad_file(tmp_path: Path) -> None:
    res = _result(2)
    for suffix in ("png", "svg", "pdf"):
        p = gantt(res, tmp_path / f"g.{suffix}")
        assert p.stat().st_size > 1000
    with pytest.raises(SimcoreError, match="missing"):
        gantt(res, tmp_path / "missing" / "g.png")
    with pytest.raises(SimcoreError, match="xyz"):
        gantt(res, tmp_path / "g.xyz")


def test_write_trace_names_a_bad_file(tmp_path: Path) -> None:
    res = _result(1)
    with pytest.raises(SimcoreError, match="cannot write the trace"):
        write_trace(res, tmp_path / "missing" / "t.json")
    with pytest.raises(SimcoreError, match="cannot write the trace"):
        write_trace(res, tmp_path)


def test_image_formats_are_matplotlibs() -> None:
    f = image_formats()
    assert {"png", "svg", "pdf"} <= set(f) and "xyz" not in f
    assert all(isinstance(v, str) and v for v in f.values())
