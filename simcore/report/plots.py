"""Figures of the command line's results: an op on its roofline, a collective's bus bandwidth over
message sizes, a serving run's latencies and throughput, a sweep's results over its grid.

Every function takes the data a study or a cost model returned and writes one figure (PNG, SVG or PDF,
by the file's extension) with matplotlib's Agg backend; nothing here computes a prediction. A file that
cannot be written is a :class:`~simcore.errors.SimcoreError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simcore import units
from simcore.errors import SimcoreError, SpecError

if TYPE_CHECKING:
    from simcore.comm.collectives import CollectiveResult
    from simcore.compute.ops import OpResult
    from simcore.serving.sim import RequestLog, ServingResult

Measured = tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]], str]
"""Measured message sizes (bytes), their times (seconds) and a legend label."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def image_formats() -> dict[str, str]:
    """The image formats matplotlib writes, by file suffix (``{"png": "Portable Network Graphics", ...}``).

    Every figure function here picks its format from the file's suffix; the command line checks a
    path's suffix against these before any work."""
    from matplotlib.backend_bases import FigureCanvasBase

    return dict(sorted(FigureCanvasBase.get_supported_filetypes().items()))


def save(fig: Any, path: str | Path, dpi: int = 120) -> None:
    """Write ``fig`` to ``path`` and close it; a path that cannot be written is a user error."""
    plt = pyplot()
    try:
        fig.savefig(path, dpi=dpi)
    except (OSError, ValueError) as e:
        raise SimcoreError(f"cannot write plot: {e}", file=str(path)) from None
    finally:
        plt.close(fig)


def roofline(res: OpResult, path: str | Path) -> None:
    """The device's roofline for the op's dtype (``min(peak, bandwidth x intensity)``, FLOP/s against
    FLOP/byte) and the op (:func:`simcore.op_time`'s result) as a point at its achieved rate."""
    plt = pyplot()
    peak = res.peak_flops_per_s
    bw = res.bandwidth_bytes_per_s
    ai = max(res.arithmetic_intensity, 1e-2) if np.isfinite(res.arithmetic_intensity) else 1e4
    ridge = peak / bw
    x = np.logspace(np.log10(min(ai, ridge) / 100), np.log10(max(ai, ridge) * 100), 200)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.loglog(
        x, np.minimum(peak, bw * x) / 1e12, color="k", lw=1.5, label=f"{res.device} {res.dtype} roofline"
    )
    y = max(res.achieved_flops_per_s, bw * ai * res.efficiency if res.flops == 0 else 0.0) / 1e12
    if res.flops == 0:
        y = res.achieved_bytes_per_s * ai / 1e12
    ax.loglog(
        [ai],
        [max(y, 1e-6)],
        "o",
        color="C3",
        ms=8,
        label=f"{res.kind}: {units.fmt(res.time_s, 'time')} ({res.bound})",
    )
    ax.axvline(ridge, color="0.7", ls=":", lw=1)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{res.kind} on {res.device}: {res.efficiency:.0%} of roofline")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save(fig, path)


def collective_busbw(results: list[CollectiveResult], measured: Measured | None, path: str | Path) -> None:
    """Predicted bus bandwidth (GB/s, nccl-tests convention) of a collective over message sizes, with
    measured points where given (their busbw from size / time and the op's bus factor)."""
    from simcore.comm.collectives import busbw_factor

    plt = pyplot()
    r0 = results[0]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = [r.nbytes for r in results]
    ax.plot(x, [r.busbw / 1e9 for r in results], "-", label=f"predicted ({r0.system}, {r0.dtype})")
    if measured is not None:
        s, t, label = measured
        bus = s / t * float(busbw_factor(r0.op, r0.gpus)) / 1e9
        ax.plot(s, bus, "o", ms=4, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size per rank (bytes, nccl-tests convention)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{r0.op} on {r0.gpus} GPUs ({r0.nodes} x {r0.system})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save(fig, path)


def serving(r: ServingResult, log: RequestLog, path: str | Path) -> None:
    """Left: the CDFs of TTFT, TPOT and end-to-end latency (seconds); right: output tokens/s, arrivals/s
    and completions/s over the run (each request's output tokens spread evenly between its first token
    and its finish)."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, x in (("TTFT", log.ttft), ("TPOT", log.tpot), ("end-to-end", log.e2e)):
        v = np.sort(x[np.isfinite(x)])
        if v.size:
            ax1.plot(v, np.arange(1, v.size + 1) / v.size, label=label)
    ax1.set_xscale("log")
    ax1.set_xlabel("seconds")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("latency CDFs")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()
    t0, t1 = float(log.arrival.min()), float(log.finish.max())
    bins = np.linspace(t0, t1, max(min(int(t1 - t0), 200), 10) + 1)
    width = np.diff(bins)
    span = np.maximum(log.finish - log.first_token, 1e-12)
    rate = (log.output - 1) / span
    tok = np.zeros(bins.size - 1)
    for i in range(bins.size - 1):
        lo = np.maximum(log.first_token, bins[i])
        hi = np.minimum(log.finish, bins[i + 1])
        tok[i] = float(np.sum(np.clip(hi - lo, 0.0, None) * rate))
    tok += np.histogram(log.first_token, bins)[0]
    arr = np.histogram(log.arrival, bins)[0] / width
    done = np.histogram(log.finish, bins)[0] / width
    ax2.plot(bins[:-1], tok / width, label="output tokens/s")
    ax2.set_xlabel("time (s)")
    ax2.set_ylabel("output tokens/s")
    ax3 = ax2.twinx()
    ax3.plot(bins[:-1], arr, ":", color="gray", label="arrivals/s")
    ax3.plot(bins[:-1], done, "--", color="tab:red", label="completions/s")
    ax3.set_ylabel("requests/s")
    ax2.set_title("throughput over time")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax3.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower center")
    fig.suptitle(f"{r.name}: {r.gpus} x {r.device}")
    fig.tight_layout()
    save(fig, path)


def sweep(
    rows: Sequence[dict[str, Any]],
    x: str,
    y: str,
    path: str | Path,
    hue: str | None = None,
    kind: str = "line",
    title: str | None = None,
) -> None:
    """Lines of result ``y`` against swept key ``x`` (one line per ``hue`` value), or a heatmap of
    ``y`` over ``x`` x ``hue`` (``kind="heatmap"``), from the rows of
    :func:`~simcore.planning.sweep.run_sweep`: rows with ``status == "ok"`` as lines (or coloured
    cells), those with ``status == "does_not_fit"`` as red crosses (or cells marked "no fit")."""
    plt = pyplot()
    ok = [r for r in rows if r.get("status") == "ok"]
    nofit = [r for r in rows if r.get("status") == "does_not_fit"]
    if not ok and not nofit:
        raise SpecError("nothing to plot: no successful rows", field="--plot")
    for col in (x, y, hue):
        if col is not None and col not in (ok or nofit)[0]:
            raise SpecError(f"no column {col!r}; columns: {', '.join((ok or nofit)[0])}", field="--plot")

    def num(v: Any) -> float:
        try:
            return float(v)
        except (TypeError, ValueError):
            return math.nan

    xs = list(dict.fromkeys(r[x] for r in ok + nofit))
    numeric_x = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs)
    hues = list(dict.fromkeys(r[hue] for r in ok + nofit)) if hue else [None]
    if kind == "heatmap" and hue is None:
        raise SpecError("a heatmap needs --hue (the second swept key)", field="--hue")
    if kind not in ("line", "heatmap"):
        raise SpecError(f"unknown plot kind {kind!r}; use line or heatmap", field="--kind")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if kind == "heatmap" and hue is not None:
        grid = np.full((len(hues), len(xs)), np.nan)
        for r in ok:
            grid[hues.index(r[hue]), xs.index(r[x])] = num(r[y])
        im = ax.imshow(grid, aspect="auto", origin="lower", cmap="viridis")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30, fontsize=7)
        ax.set_yticks(range(len(hues)), [str(v) for v in hues], fontsize=7)
        ax.set_ylabel(hue)
        fig.colorbar(im, ax=ax, label=y)
        for i in range(len(hues)):
            for j in range(len(xs)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=6, color="w")
        for r in nofit:
            ax.text(
                xs.index(r[x]), hues.index(r[hue]), "no fit", ha="center", va="center", fontsize=6, color="r"
            )
    else:
        for h in hues:
            sel = [r for r in ok if hue is None or r[hue] == h]
            px = [r[x] if numeric_x else xs.index(r[x]) for r in sel]
            py = [num(r[y]) for r in sel]
            order = np.argsort(px)
            ax.plot(
                np.asarray(px)[order], np.asarray(py)[order], "o-", label=None if h is None else f"{hue}={h}"
            )
        # points that do not fit: red crosses at their value, or on the x axis where they have none
        # (plan mode: no layout fits)
        nx = [r[x] if numeric_x else xs.index(r[x]) for r in nofit]
        ny = [num(r[y]) for r in nofit]
        at = [(a, b) for a, b in zip(nx, ny, strict=True) if math.isfinite(b)]
        bare = [a for a, b in zip(nx, ny, strict=True) if not math.isfinite(b)]
        label = "does not fit in memory"
        if at:
            ax.plot(*zip(*at, strict=True), "x", color="red", markersize=8, label=label)
            label = "_nolegend_"
        if bare:
            ax.plot(
                bare,
                [0.0] * len(bare),
                "x",
                color="red",
                markersize=8,
                clip_on=False,
                label=label,
                transform=ax.get_xaxis_transform(),
            )
        if not numeric_x:
            ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30, fontsize=7)
        elif all(num(v) > 0 for v in xs) and max(num(v) for v in xs) / min(num(v) for v in xs) >= 16:
            ax.set_xscale("log", base=2)
        if hue or nofit:
            ax.legend(fontsize=7)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    ax.set_xlabel(x)
    ax.set_title(title or f"{y} vs {x}")
    fig.tight_layout()
    save(fig, path, dpi=130)
