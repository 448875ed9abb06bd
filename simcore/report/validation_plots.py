"""Figures of the accuracy reports (``python -m simcore.validation REPORT --plot FILE``): predicted against
measured, from the data the reports in :mod:`simcore.validation` return (see docs/validation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import SimcoreError
from simcore.report.plots import pyplot, save
from simcore.validation.published import RowResult, summarize


def steps(result: dict[str, Any], path: str | Path) -> None:
    """Whole steps, predicted against measured seconds (log-log) per mode, with the ±10 % band, from
    :func:`simcore.validation.steps.validate`'s result."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 6))
    for mode, c in (("train", "#4C72B0"), ("prefill", "#DD8452"), ("decode", "#55A868")):
        pts = [(r["measured_s"], r["predicted_s"]) for r in result["rows"] if r["mode"] == mode]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.scatter(x, y, label=mode, color=c, s=18)
    lo = min(min(r["measured_s"], r["predicted_s"]) for r in result["rows"])
    hi = max(max(r["measured_s"], r["predicted_s"]) for r in result["rows"])
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    for f in (0.9, 1.1):
        ax.plot([lo, hi], [lo * f, hi * f], ":", color="grey", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"measured seconds ({result.get('device', 'h200').upper()})")
    ax.set_ylabel("predicted seconds")
    ax.set_title("whole steps, held out (dotted: ±10 %)")
    ax.legend()
    fig.tight_layout()
    save(fig, path)


def published(results: list[RowResult], path: str | Path, title: str = "simcore vs published") -> None:
    """Predicted vs published per-GPU throughput (TFLOP/s in each paper's convention), one point
    per configuration, with the 10 % and 25 % bands (:func:`simcore.validation.published.predict_rows`)."""
    prim = [r for r in results if r.primary and r.problem is None]
    if not prim:
        raise SimcoreError("nothing to plot: no row was predicted", field="--plot")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 6))
    markers = "osD^v<>"
    for i, src in enumerate(sorted({r.source for r in prim})):
        rs = [r for r in prim if r.source == src]
        ax.scatter(
            [r.published_tflops_per_gpu for r in rs],
            [r.predicted_tflops_per_gpu for r in rs],
            marker=markers[i % len(markers)],
            label=src,
            alpha=0.8,
        )
    vals = [v for r in prim for v in (r.published_tflops_per_gpu, r.predicted_tflops_per_gpu)]
    lo, hi = min(vals) / 1.3, max(vals) * 1.3
    xs = [lo, hi]
    ax.plot(xs, xs, "k-", lw=1)
    for band, ls in ((0.10, "--"), (0.25, ":")):
        ax.plot(xs, [x * (1 + band) for x in xs], "k" + ls, lw=0.7)
        ax.plot(xs, [x * (1 - band) for x in xs], "k" + ls, lw=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published TFLOP/s per GPU (paper's FLOP formula)")
    ax.set_ylabel("simcore predicted TFLOP/s per GPU (same formula)")
    s = summarize(results)["configurations"]
    ax.set_title(
        f"{title}\nmedian |err| {100 * s['median_abs_error']:.1f}%, worst {100 * s['worst_abs_error']:.1f}%"
    )
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save(fig, path)


def cross_device(res: dict[str, Any], path: str | Path) -> None:
    """Left: each GPU's kernels, median |error| per family by its own profile and by the other's transferred;
    right: the H100 traces' step, predicted against measured, with each profile (from
    :func:`simcore.validation.cross_device.report` with its kernels and traces parts)."""
    from simcore.validation.cross_device import DEVICES

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    fams = ("gemm", "attention_fwd", "attention_bwd", "memory", "memory_bwd", "optimizer", "all")
    x = np.arange(len(fams))
    width = 0.2
    bars = [
        (dev, prof, "own" if prof == dev else f"{prof} transferred")
        for dev in DEVICES
        for prof in (dev, next(d for d in DEVICES if d != dev))
    ]
    for i, (dev, prof, label) in enumerate(bars):
        per = res["kernels"][dev][prof]
        ys = [per[f].get("median_abs_error_pct", np.nan) for f in fams]
        ax1.bar(
            x + (i - 1.5) * width,
            ys,
            width,
            label=f"{dev} kernels, {label}",
            hatch="" if prof == dev else "//",
        )
    ax1.set_xticks(x, fams, rotation=30, ha="right")
    ax1.set_ylabel("median |error| %")
    ax1.set_title("kernels (own profile: held-out rows)")
    ax1.legend(fontsize=8)
    rows = res["traces"]["rows"]
    for prof, marker, label in (("h100", "o", "H100 profile"), ("h200", "x", "H200 profile transferred")):
        meas = np.array([r["measured_step_time_s"] for r in rows.values()]) * 1e3
        pred = meas * (1 + np.array([r[prof] for r in rows.values()]) / 100)
        ax2.scatter(meas, pred, marker=marker, label=label)
    lo, hi = ax2.get_xlim()
    ax2.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    for f in (0.9, 1.1):
        ax2.plot([lo, hi], [lo * f, hi * f], ":", color="grey", lw=0.6)
    ax2.set_xlabel("measured step on the H100 (ms)")
    ax2.set_ylabel("predicted (ms)")
    ax2.set_title("H100 profiler traces, held apart (dotted: ±10 %)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)
