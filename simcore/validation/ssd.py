"""Mamba-2's kernels one by one: simcore's price of each row of ``tools/bench_ssd.py`` and, once measured, the
error, beside the price pre-registered before the measurement.

A row names an op of mamba_ssm and a per-rank shape (``op, case, batch, seq, heads, head_dim, state,
groups, chunk, channels, width``); its ops are the Mamba layer's lowering for that shape on one GPU
(:func:`simcore.calibration.fit_ssd.row_ops`: ``scan`` the SSD kernels and their backward, ``conv1d`` the
convolution, ``gated_rmsnorm`` the group norm, ``state_update`` one decode step's state update), priced
as a training step prices them: each kernel's device time plus the eager launch gap (no host bound).

The bench times eager calls back to back, which its host bounds below some size (a Triton launch there
costs ``host_launch``, fitted with the rates: ``hardware_specs/calibration/ssd-<device>.yaml``); the eager
price compared to ``fwd_s`` and ``fwd_bwd_s`` is ``max(kernels x host_launch, device time)``; the graphed
decode (``graph_s``) is compared to the device time. ``conv1d`` rows time PyTorch's ``nn.Conv1d``
fallback, not causal_conv1d's kernels that Megatron-Core runs (and simcore prices): their error is shown,
not fitted.

``python -m simcore.validation ssd CSV`` prints the prices of a planned CSV (``tools/bench_ssd.py
--plan-only``) or the errors of a measured one (``predicted / measured - 1``); ``--out`` writes the prices.
``data/ssd_predicted_h100.csv`` holds the prices of the plan written before any measurement.
See docs/compute.md, "Mamba-2 layers and hybrid models".
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from simcore.calibration.fit_ssd import SHAPE, read_rows, row_ops
from simcore.engine.pricing import Pricer
from simcore.specs.profile import load_ssd
from simcore.specs.resolve import cluster_for

PREDICTED_H100_CSV = Path(__file__).resolve().parent / "data" / "ssd_predicted_h100.csv"


def predict(row: dict[str, str], system: str = "hgx-h100") -> dict[str, Any]:
    """Seconds of the row's forward, forward + backward (device time, as a step prices it), the eager
    calls' (with the bench's host floor), and each op's seconds (``name: s``), on one GPU of ``system``."""
    cluster = cluster_for(system, gpus=1)
    pricer = Pricer.for_layout(cluster, per_op_host=False)
    host = load_ssd(cluster.device).host_launch
    fwd, bwd = row_ops(row)
    tf, _ = pricer.times(fwd)
    tb, _ = pricer.times(bwd)
    per = [(o.name, float(t) * o.count) for o, t in zip([*fwd, *bwd], [*tf, *tb], strict=True)]
    f = sum(t for _, t in per[: len(fwd)])
    fb = f + sum(t for _, t in per[len(fwd) :]) if bwd else None

    def eager(ops: list[Any], t: float) -> float:
        return max(t, host * sum(float(o.count) for o in ops if o.kind == "ssd"))

    # a graphed decode step replays the kernels without the eager launch gap
    graph = Pricer.for_layout(cluster, per_op_host=False, framework="cuda_graphs")
    return {
        "pred_fwd_s": f,
        "pred_graph_s": sum(float(t) * o.count for o, t in zip(fwd, graph.times(fwd)[0], strict=True)),
        "pred_fwd_bwd_s": fb,
        "eager_fwd_s": eager(fwd, f),
        "eager_fwd_bwd_s": eager(fwd + bwd, fb) if fb is not None else None,
        "pred_ops": ";".join(f"{n}={t:.4g}" for n, t in per),
    }


def _preregistered() -> dict[tuple[str, str], dict[str, str]]:
    with open(PREDICTED_H100_CSV, newline="") as fh:
        return {(r["op"], r["case"]): r for r in csv.DictReader(fh)}


def compare(path: str | Path, system: str = "hgx-h100") -> list[dict[str, Any]]:
    """One dict per row: its shape, the prices and, where the row has times, ``err_fwd``, ``err_fwd_bwd``
    (eager prices) and ``err_graph`` (device price): ``predicted / measured - 1``; on ``hgx-h100`` also
    ``pre_fwd`` / ``pre_fwd_bwd`` / ``pre_graph``, the pre-registered prices' errors."""
    pre = _preregistered() if system == "hgx-h100" else {}
    out: list[dict[str, Any]] = []
    for r in read_rows(path):
        rec: dict[str, Any] = {k: r.get(k, "") for k in SHAPE}
        rec.update(predict(r, system))
        old = pre.get((r["op"], r["case"]), {})
        for col, pred, err, was in (
            ("fwd_s", "eager_fwd_s", "err_fwd", "pred_fwd_s"),
            ("fwd_bwd_s", "eager_fwd_bwd_s", "err_fwd_bwd", "pred_fwd_bwd_s"),
            ("graph_s", "pred_graph_s", "err_graph", "pred_fwd_s"),
        ):
            meas = float(r[col]) if r.get(col) else None
            if meas is not None and rec[pred] is not None:
                rec[col], rec[err] = meas, rec[pred] / meas - 1.0
                if old.get(was):
                    rec["pre_" + err.removeprefix("err_")] = float(old[was]) / meas - 1.0
        out.append(rec)
    return out


def write(rows: list[dict[str, Any]], path: str | Path) -> None:
    cols = [*SHAPE, "pred_fwd_s", "pred_fwd_bwd_s", "eager_fwd_s", "eager_fwd_bwd_s", "pred_ops"]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items() if k in cols})


def report(path: str | Path, system: str = "hgx-h100", out: str | Path | None = None) -> str:
    """A table of the rows of ``path``: device prices in microseconds and, where measured, the measured
    times and the errors in % (``pre``: the pre-registered price's; ``now``: the fitted model's, eager
    rows with the bench's host floor)."""
    rows = compare(path, system)
    if out is not None:
        write(rows, out)

    def us(v: Any) -> str:
        return "" if v is None or v == "" else f"{v * 1e6:.1f}"

    def pct(v: Any) -> str:
        return "" if v is None else f"{100 * v:+.0f}%"

    lines = [
        f"{'op':<14}{'case':<27}{'dev fwd':>9}{'meas':>9}{'pre':>6}{'now':>6}{'dev f+b':>9}{'meas':>9}{'pre':>6}"
        f"{'now':>6}{'graph':>8}{'pre':>6}{'now':>6}"
    ]
    for r in rows:
        lines.append(
            f"{r['op']:<14}{r['case']:<27}{us(r['pred_fwd_s']):>9}{us(r.get('fwd_s')):>9}{pct(r.get('pre_fwd')):>6}"
            f"{pct(r.get('err_fwd')):>6}{us(r['pred_fwd_bwd_s']):>9}{us(r.get('fwd_bwd_s')):>9}"
            f"{pct(r.get('pre_fwd_bwd')):>6}{pct(r.get('err_fwd_bwd')):>6}{us(r.get('graph_s')):>8}"
            f"{pct(r.get('pre_graph')):>6}{pct(r.get('err_graph')):>6}"
        )
    lines.append(
        f"(microseconds; {system}, one GPU; dev: device time as a step prices it; error = predicted / measured - 1, "
        "eager calls with the bench's host floor; pre: the prices pre-registered in data/ssd_predicted_h100.csv; "
        "conv1d rows time PyTorch's fallback, not the causal_conv1d kernels priced)"
    )
    return "\n".join(lines)
