"""One MoE layer on one H200 (``traces/h200/moe.csv.gz``): measured vs simcore's MoE lowering.

``python -m simcore.validation moe`` prints, per layer shape and token count, the measured forward and
forward+backward times of ``tools/bench_moe.py``'s grouped-GEMM layer (with the host sync of the expert
counts) beside simcore's price of the same layer (one GPU, EP 1), and, where the kernel traces beside it
are present (``traces/h200/profile_moe_<layer>_t<tokens>.json.gz``), the measured time of the grouped
GEMM kernels beside simcore's expert GEMMs. A diagnostic: nothing is fitted to it.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path
from typing import Any

from simcore.errors import TraceError
from simcore.validation.steps import traces_dir

GROUPED_GEMM_KERNEL = "cutlass"
"""Name fragment of the grouped GEMM kernels (``torch._grouped_mm`` runs CUTLASS on Hopper)."""


def compare(path: str | Path | None = None) -> list[dict[str, Any]]:
    """One dict per measured grouped-GEMM row (with the sync): shapes, measured and predicted seconds."""
    from simcore.prediction import moe_layer_time
    from simcore.specs.scenario import ModelSpec, MoESpec

    p = Path(path) if path else traces_dir() / "h200" / "moe.csv.gz"
    out: list[dict[str, Any]] = []
    for r in _rows(p):
        if r["grouped"] != "1" or r["sync"] != "1":
            continue
        h, experts, k, f, tokens = (int(r[c]) for c in ("hidden", "experts", "top_k", "expert_ffn", "tokens"))
        model = ModelSpec(
            layers=1, hidden=h, heads=16, ffn_hidden=f, vocab=128, seq_len=tokens, activation="swiglu",
            norm="rmsnorm", moe=MoESpec(experts=experts, top_k=k, expert_ffn_hidden=f),
        )  # fmt: skip
        t = moe_layer_time(model, tokens, "hgx-h200")
        row: dict[str, Any] = {
            "layer": r["layer"],
            "tokens": tokens,
            "fwd_s": float(r["fwd_s"]),
            "fwd_bwd_s": float(r["fwd_bwd_s"]),
            "pred_fwd_s": t["fwd_s"],
            "pred_fwd_bwd_s": t["total_s"],
            "pred_expert_gemm_s": t["by_category"].get("gemm", 0.0),
        }
        trace = p.parent / f"profile_moe_{r['layer']}_t{tokens}.json.gz"
        if trace.is_file():
            row["grouped_gemm_s"] = grouped_gemm_seconds(trace)
        out.append(row)
    return out


def _rows(p: Path) -> list[dict[str, str]]:
    try:
        with gzip.open(p, "rt") if p.suffix == ".gz" else open(p) as f:  # noqa: SIM115
            rows = list(csv.DictReader(io.StringIO(f.read())))
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TraceError(f"cannot read: {e}", file=str(p)) from None
    if not rows or not {"grouped", "sync", "tokens", "fwd_bwd_s"} <= set(rows[0]):
        raise TraceError(
            "not a tools/bench_moe.py CSV (columns grouped, sync, tokens, fwd_bwd_s)", file=str(p)
        )
    return rows


def grouped_gemm_seconds(trace: Path) -> float:
    """Device seconds of the grouped GEMM kernels per forward+backward call (the trace holds 3)."""
    from simcore.traces import read_trace

    t = read_trace(trace)
    return sum(e.dur for e in t.gpu_events if GROUPED_GEMM_KERNEL in e.name) / 3.0


def format_table(rows: list[dict[str, Any]]) -> str:
    """:func:`compare`'s rows as text: measured and predicted forward and forward+backward (ms), the
    error of the latter (%), and the grouped GEMM kernels' time where a trace gave it beside simcore's."""
    lines = [
        f"{'layer':22} {'tokens':>6} {'fwd ms':>8} {'pred':>8} {'fwd+bwd ms':>11} {'pred':>8} {'err%':>6}"
        f" {'grouped GEMM ms':>16} {'pred':>7}"
    ]
    for r in rows:
        g = f"{r['grouped_gemm_s'] * 1e3:16.2f}" if "grouped_gemm_s" in r else f"{'':16}"
        lines.append(
            f"{r['layer']:22} {r['tokens']:6d} {r['fwd_s'] * 1e3:8.3f} {r['pred_fwd_s'] * 1e3:8.3f} "
            f"{r['fwd_bwd_s'] * 1e3:11.3f} {r['pred_fwd_bwd_s'] * 1e3:8.3f} "
            f"{100 * (r['pred_fwd_bwd_s'] / r['fwd_bwd_s'] - 1):+6.0f} {g} {r['pred_expert_gemm_s'] * 1e3:7.2f}"
        )
    return "\n".join(lines)
