"""Chrome / Perfetto trace export of simulated timelines, in the PyTorch profiler's JSON layout.

Each pipeline rank is a process (``pid`` = rank, named ``rank N``); each stream (compute, the
sends to a neighbour, the data-parallel communicator) is a thread. Events are complete events
(``ph: X``) with microsecond ``ts``/``dur``; kernels carry ``cat: kernel`` and communication
``cat: kernel`` with an ``nccl`` name prefix, as in real PyTorch traces, so tools that read measured
traces (and simcore's own reader) read simulated ones too.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcore.engine.des import DESResult
from simcore.errors import SimcoreError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def trace_events(res: DESResult, device_name: str = "") -> dict[str, Any]:
    """The trace as a JSON-ready dict."""
    streams: dict[tuple[int, str], int] = {}
    out: list[dict[str, Any]] = []
    ranks = sorted({e.rank for e in res.events})
    for r in ranks:
        out.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
    for e in res.events:
        key = (e.rank, e.stream)
        if key not in streams:
            tid = 7 if e.stream == "compute" else 20 + len([k for k in streams if k[0] == e.rank])
            streams[key] = tid
            label = "stream 7 (compute)" if e.stream == "compute" else f"stream {tid} ({e.stream})"
            out.append({"ph": "M", "name": "thread_name", "pid": e.rank, "tid": tid, "args": {"name": label}})
        comm = e.stream != "compute"
        name = e.name
        if comm:
            name = (
                "ncclDevKernel_SendRecv " if e.stream.startswith("send") else "ncclDevKernel_AllReduce "
            ) + name
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": e.rank,
                "tid": streams[key],
                "ts": e.start * 1e6,
                "dur": max(e.end - e.start, 0.0) * 1e6,
                "args": {**e.args, "stream": streams[key], "simulated": True},
            }
        )
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device_name}] if device_name else [],
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "traceName": "simcore simulated step",
    }


def write_trace(res: DESResult, path: str | Path, device_name: str = "") -> Path:
    """Write the trace as JSON (``.json``) or gzipped JSON (``.json.gz``); a file that cannot be written
    is a :class:`~simcore.errors.SimcoreError` naming it."""
    p = Path(path)
    data = json.dumps(trace_events(res, device_name))
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "wt", encoding="utf-8") as f:
                f.write(data)
        else:
            p.write_text(data, encoding="utf-8")
    except OSError as e:
        raise SimcoreError(f"cannot write the trace: {e.strerror or e}", file=str(p)) from None
    return p


GANTT_COLORS = {"F": "#4C72B0", "B": "#DD8452", "W": "#55A868", "o": "#8172B3", "dp": "#C44E52"}
"""Bar colours of the Gantt chart: forward, backward, weight gradient, other compute, DP reduce."""


def gantt_figure(res: DESResult, title: str = "") -> Figure:
    """The pipeline Gantt chart as a matplotlib figure: one row per rank, forward/backward/W coloured,
    data-parallel reductions as thin red bars; the legend sits above the axes, off the bars."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    ranks = sorted({e.rank for e in res.events})
    fig = Figure(figsize=(12, 1.1 + 0.45 * max(len(ranks), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    colors = GANTT_COLORS
    for e in res.events:
        if e.stream == "compute":
            c = colors.get(e.name[0], "#999999")
            ax.broken_barh(
                [(e.start, e.end - e.start)],
                (e.rank - 0.4, 0.8),
                facecolors=c,
                edgecolor="white",
                linewidth=0.2,
            )
        elif e.stream == "dp_comm":
            ax.broken_barh([(e.start, e.end - e.start)], (e.rank + 0.3, 0.15), facecolors=colors["dp"])
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"stage {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(title or f"simulated step {res.step_time_s:.3f} s, bubble {res.bubble_fraction:.1%}")
    fig.legend(
        handles=[
            Patch(color=colors["F"], label="forward"),
            Patch(color=colors["B"], label="backward"),
            Patch(color=colors["W"], label="weight grad"),
            Patch(color=colors["o"], label="optimizer"),
            Patch(color=colors["dp"], label="DP reduce"),
        ],
        loc="outside upper right",
        ncols=5,
        fontsize=8,
        frameon=False,
    )
    return fig


def gantt(res: DESResult, path: str | Path, title: str = "") -> Path:
    """Draw :func:`gantt_figure` to ``path`` (PNG, SVG, PDF, ... by suffix); a file that cannot be
    written is a :class:`~simcore.errors.SimcoreError` naming it."""
    fig = gantt_figure(res, title)
    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as e:
        raise SimcoreError(f"cannot write the chart: {e}", file=str(path)) from None
    return Path(path)
