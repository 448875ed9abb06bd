"""Fit host<->GPU copy latency and efficiency (``host_copy`` of a compute profile) from profiler traces.

The copies are the Kineto ``gpu_memcpy`` events ``Memcpy HtoD (Pinned -> Device)``, ``... (Pageable ->
Device)``, ``Memcpy DtoH (Device -> Pinned)`` and ``(Device -> Pageable)`` with ``args.bytes`` and ``dur``.
:func:`extract_copies` reads them from traces (kept as a CSV, ``traces/h200/memcpy_host_gpu.csv.gz``);
:func:`fit_copies` fits ``dur = latency + bytes / (link bandwidth x eff)`` per direction and memory kind
on every trace but every fourth (sorted by path) and reports the median absolute relative error on the
copies of the held-apart traces. ``eff`` is the stated number of :data:`DEFAULT_EFF` with its source
(measured 1 GiB copies for pinned memory; assumed for pageable, where nothing large was measured) and
the latency is the median of ``dur - bytes / (bandwidth x eff)``: the committed H200 copies are at most
1 MB, where a free fit of ``eff`` (reported beside it in ``basis``) does worse on the held-apart copies
(11.8 % against 8.8 % median for pinned host-to-GPU) and does not reach the bandwidth-bound sizes.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from simcore.specs.profile import CopyParams, HostCopies
from simcore.traces.kineto import read_kineto

COLUMNS = ("trace", "direction", "memory", "nbytes", "dur_s")
KINDS = ("h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable")

DEFAULT_EFF = {
    "h2d_pinned": (
        0.866,
        "55.43 GB/s measured host-to-device on H200 PCIe Gen5 x16 (nvbandwidth, stas00/ml-engineering network "
        "benchmarks, S2 of the hardware reference) / 64 GB/s raw",
    ),
    "d2h_pinned": (
        0.860,
        "55.06 GB/s measured device-to-host on H200 PCIe Gen5 x16 (nvbandwidth, stas00/ml-engineering network "
        "benchmarks, S2 of the hardware reference) / 64 GB/s raw",
    ),
    "h2d_pageable": (
        0.43,
        "ASSUMED half of the pinned 0.866: pageable copies are staged by the driver through a pinned bounce "
        "buffer ('pageable host memory transfers ~half as fast', NVIDIA bandwidthTest guidance); no large "
        "pageable copy measured",
    ),
    "d2h_pageable": (
        0.43,
        "ASSUMED half of the pinned 0.860: pageable copies are staged by the driver through a pinned bounce "
        "buffer ('pageable host memory transfers ~half as fast', NVIDIA bandwidthTest guidance); no large "
        "pageable copy measured",
    ),
}
"""Efficiency where no copy large enough to fit it was measured: (value, source)."""


def kind_of(name: str) -> str | None:
    """``h2d_pinned`` ... for a Kineto memcpy name, ``None`` for others (device-to-device, peer)."""
    if name.startswith("Memcpy HtoD"):
        direction = "h2d"
    elif name.startswith("Memcpy DtoH"):
        direction = "d2h"
    else:
        return None
    if "Pinned" in name:
        return f"{direction}_pinned"
    if "Pageable" in name:
        return f"{direction}_pageable"
    return None


def extract_copies(paths: Iterable[str | Path], root: str | Path = ".") -> list[dict[str, object]]:
    """The host<->GPU copies of Kineto traces: rows of :data:`COLUMNS` (``trace``: the path relative to ``root``)."""
    rows: list[dict[str, object]] = []
    for path in paths:
        trace = read_kineto(path, keep_cpu_op=lambda _n: False)
        rel = Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()
        for ev in trace.gpu_events:
            if ev.cat != "gpu_memcpy":
                continue
            kind = kind_of(ev.name)
            nbytes = ev.args.get("bytes")
            if kind is None or not isinstance(nbytes, int | float) or nbytes <= 0:
                continue
            d, m = kind.split("_")
            rows.append({"trace": rel, "direction": d, "memory": m, "nbytes": int(nbytes), "dur_s": ev.dur})
    return rows


def write_copies(rows: Sequence[dict[str, object]], path: str | Path) -> None:
    """Write extracted copies as (gzipped when the name ends in .gz) CSV."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, "dur_s": f"{float(r['dur_s']):.9g}"})  # type: ignore[arg-type]
    data = buf.getvalue().encode()
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    Path(path).write_bytes(data)


def read_copies(path: str | Path) -> list[dict[str, object]]:
    """Rows written by :func:`write_copies`."""
    raw = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        raw = gzip.decompress(raw)
    out: list[dict[str, object]] = []
    for r in csv.DictReader(io.StringIO(raw.decode())):
        out.append({**r, "nbytes": int(r["nbytes"]), "dur_s": float(r["dur_s"])})
    return out


def _free_eff(b: np.ndarray, t: np.ndarray, bandwidth: float) -> float | None:
    """Efficiency of a free two-parameter fit (least absolute relative error, by reweighted least
    squares), ``None`` when the copies are too small for their bytes to matter."""
    if float(np.max(b)) / bandwidth < 0.1 * float(np.median(t)):
        return None
    w = np.ones_like(t)
    c = 0.0
    for _ in range(50):
        A = np.stack([1.0 / t, b / t], axis=1) * w[:, None]
        (a, c), *_ = np.linalg.lstsq(A, w, rcond=None)
        w = 1.0 / np.sqrt(np.maximum(np.abs(a + c * b - t) / t, 1e-3))
    return 1.0 / (float(c) * bandwidth) if c > 0 else None


def fit_copies(rows: Sequence[dict[str, object]], link: str, bandwidth: float, source: Sequence[str] = ()) -> HostCopies:
    """Fit :class:`HostCopies` for copies measured over ``link`` (``bandwidth`` bytes/s per direction)."""
    traces = sorted({str(r["trace"]) for r in rows})
    held = {t for i, t in enumerate(traces) if i % 4 == 3}
    params: dict[str, CopyParams] = {}
    report: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        d, m = kind.split("_")
        sel = [r for r in rows if r["direction"] == d and r["memory"] == m]
        fit = [r for r in sel if r["trace"] not in held] or sel
        test = [r for r in sel if r["trace"] in held]
        if not fit:
            raise ValueError(f"no {kind} copies to fit")
        b = np.array([float(r["nbytes"]) for r in fit])  # type: ignore[arg-type]
        t = np.array([float(r["dur_s"]) for r in fit])  # type: ignore[arg-type]
        eff, src = DEFAULT_EFF[kind]
        lat = max(float(np.median(t - b / (bandwidth * eff))), 0.0)
        n_tr = len({r["trace"] for r in fit})
        what = f"{len(fit)} copies of {int(b.min())}-{int(b.max())} B in {n_tr} traces"
        free = _free_eff(b, t, bandwidth)
        basis = f"latency fitted (median) on {what} at eff {eff}: {src}"
        if free is not None:
            basis += f"; a free fit of both on these copies gives eff {free:.3f}"
        params[kind] = CopyParams(latency=round(lat, 10), eff=round(eff, 4), basis=basis)
        if test:
            tb = np.array([float(r["nbytes"]) for r in test])  # type: ignore[arg-type]
            tt = np.array([float(r["dur_s"]) for r in test])  # type: ignore[arg-type]
            pred = params[kind].latency + tb / (bandwidth * params[kind].eff)
            err = np.abs(pred - tt) / tt
            report[kind] = {
                "n": float(len(test)),
                "median_abs_err": round(float(np.median(err)), 4),
                "max_bytes": float(tb.max()),
            }
    return HostCopies(link=link, source=list(source), held_out=report, **params)


def write_section(host_copy: HostCopies, path: str | Path) -> None:
    """Replace (or append) the top-level ``host_copy:`` block of a calibration YAML, leaving the rest as is."""
    import yaml

    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.startswith("host_copy:")), None)
    if start is not None:
        end = next((j for j in range(start + 1, len(lines)) if lines[j][:1] not in (" ", "-", "\n", "")), len(lines))
        lines = lines[:start] + lines[end:]
    block = yaml.safe_dump({"host_copy": host_copy.model_dump(mode="json")}, sort_keys=False, width=110)
    body = "".join(lines)
    if body and not body.endswith("\n"):
        body += "\n"
    Path(path).write_text(body + block, encoding="utf-8")


__all__ = ["COLUMNS", "DEFAULT_EFF", "KINDS", "extract_copies", "fit_copies", "kind_of", "read_copies", "write_copies", "write_section"]
