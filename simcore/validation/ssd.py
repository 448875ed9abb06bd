"""Mamba-2's kernels one by one: simcore's price of each row of ``tools/bench_ssd.py`` and, once measured, the
error.

A row names an op of mamba_ssm and a per-rank shape (``op, case, batch, seq, heads, head_dim, state,
groups, chunk, channels, width``). The ops priced are the ones the Mamba layer's lowering
(:mod:`simcore.workload.hybrid`) gives for that shape on one GPU, kernel time plus the launch gap as a
training step prices them (no host bound):

* ``scan``: :func:`~simcore.workload.hybrid.ssd_fwd` without the convolution (the cumsum, chunk states,
  state passing, ``C B^T``, the intra-chunk and incoming-state products, the ``D`` skip and gate); the
  backward its recompute and gradient kernels, the convolution's left out;
* ``conv1d``: the convolution and its backward from the same lowering;
* ``gated_rmsnorm``: :func:`~simcore.workload.hybrid.group_norm` and its backward;
* ``state_update``: :func:`~simcore.workload.hybrid.mamba_decode_fwd`'s state update of one decode step.

``python -m simcore.validation ssd CSV`` prints the prices of a planned CSV (``tools/bench_ssd.py
--plan-only``) or the errors of a measured one (``predicted / measured - 1``); ``--out`` writes the prices.
``data/ssd_predicted_h100.csv`` holds the prices of the plan written before any measurement.
See docs/compute.md, "Mamba-2 layers and hybrid models".
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any

from simcore.engine.pricing import Pricer
from simcore.errors import SpecError
from simcore.specs.loader import validate
from simcore.specs.registry import default_registry
from simcore.specs.resolve import cluster_for, resolve_scenario_dict
from simcore.specs.scenario import MambaSpec, ModelSpec
from simcore.workload import hybrid
from simcore.workload import lowering as L
from simcore.workload.lowering import Layout, Op

PREDICTED_H100_CSV = Path(__file__).resolve().parent / "data" / "ssd_predicted_h100.csv"
SHAPE = ("op", "case", "batch", "seq", "heads", "head_dim", "state", "groups", "chunk", "channels", "width")
OPS = ("scan", "conv1d", "gated_rmsnorm", "state_update")


def _int(row: dict[str, str], k: str, default: int | None = None) -> int:
    v = row.get(k) or ""
    if v == "":
        if default is None:
            raise SpecError(f"row {row.get('case')!r} has no {k}", field=k)
        return default
    return int(float(v))


def _model(row: dict[str, str]) -> ModelSpec:
    """A hybrid model whose Mamba mixer has the row's per-rank shape (the rest of the model is unused)."""
    raw = resolve_scenario_dict({"model": {"preset": "nemotron-h-8b"}}, default_registry())["model"]
    raw.pop("preset", None)
    m = validate(ModelSpec, raw, None, "model")
    mamba = MambaSpec(
        heads=_int(row, "heads"),
        head_dim=_int(row, "head_dim"),
        state_dim=_int(row, "state"),
        groups=_int(row, "groups"),
        conv_kernel=_int(row, "width", 4),
        chunk_size=_int(row, "chunk", 128),
    )
    return m.model_copy(update={"mamba": mamba})


def _strip(op: Op) -> Op:
    return Op(op.name, op.kind, op.category, {k: v for k, v in op.args.items() if k != "bwd_ops"}, op.count)


def row_ops(row: dict[str, str]) -> tuple[list[Op], list[Op]]:
    """(forward ops, backward ops) simcore prices for one row."""
    op = row["op"]
    if op not in OPS:
        raise SpecError(f"row {row.get('case')!r}: unknown op {op!r} (one of {', '.join(OPS)})", field="op")
    m = _model(row)
    b = _int(row, "batch")
    if op == "state_update":
        lay = Layout(micro_batch=b, seq=1, kv_seq=1)
        return [o for o in hybrid.mamba_decode_fwd(m, lay) if o.name == "ssm_state_update"], []
    lay = Layout(micro_batch=b, seq=_int(row, "seq"))
    if op == "gated_rmsnorm":
        fwd = [hybrid.group_norm(m, lay)]
        return fwd, L.backward(fwd)
    conv, *scan = hybrid.ssd_fwd(m, lay)  # (the convolution first, carrying the backward's kernels)
    bwd = list(conv.args["bwd_ops"])
    if op == "conv1d":
        return [_strip(conv)], [o for o in bwd if o.name == "ssm_conv1d_bwd"]
    return [_strip(o) for o in scan], [o for o in bwd if not o.name.startswith("ssm_conv1d")]


def predict(row: dict[str, str], system: str = "hgx-h100") -> dict[str, Any]:
    """Seconds of the row's forward, forward + backward, and each op's seconds (``name: s``, the
    forward's then the backward's), on one GPU of ``system`` with its shipped profile."""
    pricer = Pricer.for_layout(cluster_for(system, gpus=1), per_op_host=False)
    fwd, bwd = row_ops(row)
    tf, _ = pricer.times(fwd)
    tb, _ = pricer.times(bwd)
    per = [(o.name, float(t) * o.count) for o, t in zip([*fwd, *bwd], [*tf, *tb], strict=True)]
    f = sum(t for _, t in per[: len(fwd)])
    return {
        "pred_fwd_s": f,
        "pred_fwd_bwd_s": f + sum(t for _, t in per[len(fwd) :]) if bwd else None,
        "pred_ops": ";".join(f"{n}={t:.4g}" for n, t in per),
    }


def read_rows(path: str | Path) -> list[dict[str, str]]:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such file")
    with (gzip.open(p, "rt", newline="") if p.suffix == ".gz" else open(p, newline="")) as fh:
        rows = list(csv.DictReader(fh))
    missing = [k for k in SHAPE if rows and k not in rows[0]]
    if not rows or missing:
        raise SpecError(f"{p}: not a bench_ssd.py CSV (missing columns: {', '.join(missing) or 'all rows'})")
    return rows


def compare(path: str | Path, system: str = "hgx-h100") -> list[dict[str, Any]]:
    """One dict per row: its shape, the prices and, where the row has times, ``err_fwd``, ``err_fwd_bwd``
    and (graphed decode) ``err_graph``: ``predicted / measured - 1``."""
    out: list[dict[str, Any]] = []
    for r in read_rows(path):
        rec: dict[str, Any] = {k: r.get(k, "") for k in SHAPE}
        rec.update(predict(r, system))
        for col, pred, err in (
            ("fwd_s", "pred_fwd_s", "err_fwd"),
            ("fwd_bwd_s", "pred_fwd_bwd_s", "err_fwd_bwd"),
            ("graph_s", "pred_fwd_s", "err_graph"),
        ):
            meas = float(r[col]) if r.get(col) else None
            if meas is not None and rec[pred] is not None:
                rec[col], rec[err] = meas, rec[pred] / meas - 1.0
        out.append(rec)
    return out


def write(rows: list[dict[str, Any]], path: str | Path) -> None:
    cols = [*SHAPE, "pred_fwd_s", "pred_fwd_bwd_s", "pred_ops"]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items() if k in cols})


def report(path: str | Path, system: str = "hgx-h100", out: str | Path | None = None) -> str:
    """A table of the rows of ``path``: prices in microseconds and, where measured, the errors in %."""
    rows = compare(path, system)
    if out is not None:
        write(rows, out)

    def us(v: Any) -> str:
        return "" if v is None or v == "" else f"{v * 1e6:.1f}"

    def pct(v: Any) -> str:
        return "" if v is None else f"{100 * v:+.0f}%"

    lines = [f"{'op':<14}{'case':<28}{'pred fwd':>10}{'meas':>10}{'err':>7}{'pred f+b':>10}{'meas':>10}"
             f"{'err':>7}{'graph':>9}{'err':>7}"]
    for r in rows:
        lines.append(
            f"{r['op']:<14}{r['case']:<28}{us(r['pred_fwd_s']):>10}{us(r.get('fwd_s')):>10}"
            f"{pct(r.get('err_fwd')):>7}{us(r['pred_fwd_bwd_s']):>10}{us(r.get('fwd_bwd_s')):>10}"
            f"{pct(r.get('err_fwd_bwd')):>7}{us(r.get('graph_s')):>9}{pct(r.get('err_graph')):>7}"
        )
    lines.append(f"(microseconds; {system}, one GPU; error = predicted / measured - 1)")
    return "\n".join(lines)
