"""Drawing of a layout search (:func:`simcore.planning.plan.plan`): the time-vs-cost cloud of valid
layouts and its Pareto front (matplotlib, Agg)."""

from __future__ import annotations

import numpy as np

from simcore.planning.plan import PlanResult
from simcore.report.plots import save


def plot_pareto(res: PlanResult, path: str, title: str | None = None, cost_unit: str | None = None) -> None:
    """Draw the time-vs-cost cloud of valid layouts and its Pareto front (matplotlib, to ``path``).

    ``cost_unit``: the currency of the scenario's prices; ``None`` when it has none (the planner then
    prices a layout in GPU-seconds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    if res.cloud.get("seconds_per_token"):
        ct = np.asarray(res.cloud["seconds_per_token"])
        cc = np.asarray(res.cloud["cost_per_token"])
        cg = np.asarray(res.cloud["gpus"])
        for g in sorted(set(cg.tolist())):
            s = cg == g
            ax.scatter(ct[s] * 1e6, cc[s] * 1e6, s=4, alpha=0.35, label=f"{int(g)} GPUs")
    if res.pareto:
        ft = np.asarray([p["seconds_per_token"] for p in res.pareto]) * 1e6
        fc = np.asarray([p["cost_per_token"] for p in res.pareto]) * 1e6
        ax.plot(ft, fc, "k.-", lw=1.5, label="Pareto front")
        for p, x, y in zip(res.pareto[:8], ft, fc, strict=False):
            ax.annotate(f"{p['gpus']}: {p['summary'].split(' mb')[0]}", (x, y), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per million tokens (s)")
    ax.set_ylabel(f"cost per million tokens ({cost_unit})" if cost_unit else "GPU-seconds per million tokens")
    ax.set_title(title or f"{res.scenario}: time vs cost of valid layouts")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path, dpi=130)


__all__ = ["plot_pareto"]
