"""Figures of serving studies: the throughput-interactivity curve. Like :mod:`simcore.report.plots`,
each function draws data a study returned and writes one figure; nothing here computes a prediction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simcore.report.plots import pyplot, save

if TYPE_CHECKING:
    from simcore.serving.curve import CurvePoint


def curve(points: Sequence[CurvePoint], title: str, path: str | Path) -> None:
    """Output tokens/s per GPU (y) against tokens/s per user (x), one point per concurrency (labelled),
    joined in order of concurrency."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    xs = [p.tokens_per_s_per_user for p in points]
    ys = [p.tokens_per_s_per_gpu for p in points]
    ax.plot(xs, ys, "o-")
    for p, x, y in zip(points, xs, ys, strict=True):
        ax.annotate(str(p.concurrency), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("interactivity: output tokens/s per user (1 / mean TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{title}: throughput vs interactivity (labels: concurrency)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    save(fig, path)


__all__ = ["curve"]
