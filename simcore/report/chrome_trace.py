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
from typing import Any

from simcore.engine.des import DESResult


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
    """Write the trace as JSON (``.json``) or gzipped JSON (``.json.gz``)."""
    p = Path(path)
    data = json.dumps(trace_events(res, device_name))
    if p.suffix == ".gz":
        with gzip.open(p, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        p.write_text(data, encoding="utf-8")
    return p


def gantt(res: DESResult, path: str | Path, title: str = "") -> Path:
    """A pipeline Gantt chart (matplotlib PNG): one row per rank, forward/backward/W coloured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = sorted({e.rank for e in res.events})
    fig, ax = plt.subplots(figsize=(12, 0.5 + 0.45 * len(ranks)))
    colors = {"F": "#4C72B0", "B": "#DD8452", "W": "#55A868", "o": "#8172B3"}
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
            ax.broken_barh([(e.start, e.end - e.start)], (e.rank + 0.3, 0.15), facecolors="#C44E52")
    ax.set_yticks(ranks)
    ax.set_yticklabels([f"stage {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(title or f"simulated step {res.step_time_s:.3f} s, bubble {res.bubble_fraction:.1%}")
    from matplotlib.patches import Patch

    ax.legend(
        handles=[
            Patch(color=colors["F"], label="forward"),
            Patch(color=colors["B"], label="backward"),
            Patch(color=colors["W"], label="weight grad"),
            Patch(color="#C44E52", label="DP reduce"),
        ],
        loc="upper right",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
