"""Drawings of trace studies (matplotlib, Agg): the studies return data, these draw it."""

from __future__ import annotations

from pathlib import Path

from simcore.report.plots import save
from simcore.validation.traces import CLASS_ORDER, ValidationReport


def plot_validation(report: ValidationReport, path: str | Path) -> None:
    """Bar chart of a :func:`~simcore.validation.traces.validate` report's predicted vs measured
    milliseconds per op class, and the step, written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(report.classes, key=lambda r: CLASS_ORDER.index(r["class"]))
    names = [r["class"] for r in rows] + ["step"]
    meas = [r["measured_s"] * 1e3 for r in rows] + [report.measured_step_time_s * 1e3]
    pred = [r["predicted_s"] * 1e3 for r in rows] + [report.predicted_step_time_s * 1e3]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names)), 4.0))
    x = list(range(len(names)))
    ax.bar([i - 0.2 for i in x], meas, 0.4, label="measured", color="#4c72b0")
    ax.bar([i + 0.2 for i in x], pred, 0.4, label="simcore", color="#dd8452")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("ms per step")
    ax.set_title(f"{report.scenario}: step {report.error_pct:+.1f}%")
    ax.legend()
    fig.tight_layout()
    save(fig, path)
