"""Held-out check of the hybrid Mamba-Transformer model against published pre-training throughput.

``python -m simcore.validation hybrid`` predicts the rows of a hybrid model (a built-in preset with a
``hybrid_pattern``) of the Megatron-Bridge performance tables (``data/published_training_mbridge.csv``, each
row naming its NeMo container release: Nemotron 3 Nano 30B-A3B, Nemotron 3.5 Lightning, Nemotron 3 Super
120B-A12B and Nemotron 3 Ultra 550B-A55B (LatentMoE) on DGX-H100, DGX-B200/B300 and GB200/GB300 NVL72), as ``python -m simcore.validation
published`` builds and predicts them (:func:`simcore.validation.published.build_row`: the preset, the row's
layout and precision, dispatcher, recompute and bf16 gradients as the release's performance recipes set them,
the Megatron stack's other defaults), and prints the error of tokens/s per GPU, ``predicted / published -
1``. Nothing is fitted to these rows (docs/compute.md, "Mamba-2 layers and hybrid models").
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from simcore.validation.published import DATA_DIR, load_published, predict_rows

MBRIDGE_CSV = DATA_DIR / "published_training_mbridge.csv"


def compare(path: str | Path | None = None) -> list[dict[str, Any]]:
    """One dict per published row of a hybrid model: its model, release, system, GPUs, precision, published and
    predicted tokens/s per GPU, whether the prediction fits in memory, and the error (``predicted /
    published - 1``), or the reason it could not be predicted."""
    rows = [r for r in load_published(path or MBRIDGE_CSV) if "hybrid_pattern" in r.scenario.get("model", {})]
    out: list[dict[str, Any]] = []
    for r in predict_rows(rows):
        rec: dict[str, Any] = {
            "model": r.model,
            "release": r.release.removeprefix("Megatron-Bridge ").strip(),
            "system": r.system,
            "gpus": r.gpus,
            "precision": r.precision,
            "published": r.published,
        }
        if r.problem is not None:
            rec.update(predicted=None, error=None, reason=r.problem)
        else:
            rec.update(predicted=r.predicted, error=r.error, fits=r.fits_in_memory)
        out.append(rec)
    return out


def report(path: str | Path | None = None) -> str:
    """The table of :func:`compare` and the median and worst |error|."""
    rows = compare(path)
    lines = [
        "Hybrid Mamba-Transformer pre-training (Nemotron 3 Nano, 3.5 Lightning, Super, Ultra), Megatron-Bridge "
        "performance summaries (held out, not fitted)",
        f"{'model':22s} {'release':9s} {'system':12s} {'gpus':>4s} {'prec':12s} {'published':>10s} {'predicted':>10s} {'error':>7s}",
    ]
    errs = []
    for r in rows:
        head = f"{r['model']:22s} {r['release']:9s} {r['system']:12s} {r['gpus']:>4d} {r['precision']:12s}"
        if r["error"] is None:
            lines.append(f"{head} not run: {r['reason']}")
            continue
        errs.append(abs(r["error"]))
        mem = "" if r["fits"] else "  (memory over the GPU's)"
        lines.append(f"{head} {r['published']:10,.0f} {r['predicted']:10,.0f} {r['error']:+7.1%}{mem}")
    if errs:
        lines.append(f"rows {len(errs)} of {len(rows)}: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    return "\n".join(lines)
