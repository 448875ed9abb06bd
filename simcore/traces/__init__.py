"""Measured traces in: PyTorch profiler (Kineto) JSON and Nsight Systems SQLite readers.

:func:`read_trace` picks the reader from the file's content and returns a
:class:`~simcore.traces.model.Trace`; a file that cannot be read raises
:class:`~simcore.errors.TraceError` with one line naming it.
"""

from __future__ import annotations

from pathlib import Path

from simcore.errors import TraceError
from simcore.traces.model import Annotation, CpuOp, GpuEvent, RuntimeCall, Trace

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".db")


def is_trace_file(path: str | Path) -> bool:
    """True for the file names simcore reads as traces (``.json``, ``.json.gz``, ``.sqlite``)."""
    n = Path(path).name.lower()
    return n.endswith(TRACE_SUFFIXES)


def read_trace(path: str | Path) -> Trace:
    """Read one trace file (Kineto ``.json``/``.json.gz`` or Nsight Systems ``.sqlite``)."""
    p = Path(path)
    if not p.exists():
        raise TraceError("no such file", file=str(p))
    if p.is_dir():
        raise TraceError("is a folder, expected a trace file", file=str(p))
    with open(p, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3"):
        from simcore.traces import nsys

        tr: Trace = nsys.read_nsys(p)
        return tr
    from simcore.traces.kineto import read_kineto

    return read_kineto(p)


def expand_paths(paths: list[str] | list[Path]) -> list[Path]:
    """Files named and trace files inside named folders (sorted), in order."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and is_trace_file(q)))
        else:
            out.append(p)
    return out


def read_kineto(path: str | Path) -> Trace:
    """Read a PyTorch profiler (Kineto) trace; see :func:`simcore.traces.kineto.read_kineto`."""
    from simcore.traces import kineto

    tr: Trace = kineto.read_kineto(path)
    return tr


def read_nsys(path: str | Path) -> Trace:
    """Read an Nsight Systems SQLite export; see :func:`simcore.traces.nsys.read_nsys`."""
    from simcore.traces import nsys

    tr: Trace = nsys.read_nsys(path)
    return tr


__all__ = [
    "Annotation",
    "CpuOp",
    "GpuEvent",
    "RuntimeCall",
    "Trace",
    "TraceError",
    "expand_paths",
    "read_kineto",
    "read_nsys",
    "read_trace",
]
