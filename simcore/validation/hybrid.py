"""Held-out check of the hybrid Mamba-Transformer model against published pre-training throughput.

``python -m simcore.validation hybrid`` predicts every row of ``data/published_hybrid.csv`` (Megatron-Bridge's
performance summaries, each row naming its NeMo container release: Nemotron 3 Nano 30B-A3B, the only hybrid
model those tables publish, on DGX-H100, DGX-B200/B300 and GB200/GB300 NVL72) with the ``nemotron3-nano``
preset, the row's layout and precision (FP8 = per-tensor current scaling, MXFP8), recompute as the release's
recipe sets it (``perf_recipes/nemotronh``: selective ``layernorm`` on H100, none on Blackwell), bf16
gradients as every performance recipe sets them (``perf_recipes/_common.py`` ``_benchmark_common``,
``nemotronh/common.py``: ``grad_reduce_in_fp32 = False``) and the Megatron stack's other defaults, and prints the error of tokens/s per GPU, ``predicted / published - 1``.
Nothing is fitted to these rows (docs/compute.md, "Mamba-2 layers and hybrid models").
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any

PUBLISHED_HYBRID_CSV = Path(__file__).resolve().parent / "data" / "published_hybrid.csv"

_SYSTEMS = {
    "DGX-H100": "hgx-h100",
    "DGX-B200": "dgx-b200",
    "DGX-B300": "dgx-b300",
    "DGX-GB200": "gb200-nvl72",
    "DGX-GB300": "gb300-nvl72",
}
_PRECISIONS = {"FP8": "fp8_current", "MXFP8": "mxfp8", "BF16": "bf16", "NVFP4": "nvfp4"}


def scenario(row: dict[str, str]) -> dict[str, Any]:
    """The training scenario (a dict of a scenario file's fields) of one published row."""
    mods = [m for m in row["recompute_modules"].split(";") if m]
    return {
        "name": f"nemotron3-nano {row['system']} {row['precision']} ({row['release']})",
        "kind": "training",
        "cluster": {"system": _SYSTEMS[row["system"]], "gpus": int(row["gpus"])},
        "model": {"preset": "nemotron3-nano", "seq_len": int(row["seq_len"])},
        "training": {
            "micro_batch": int(row["micro_batch"]),
            "global_batch": int(row["global_batch"]),
            "precision": _PRECISIONS[row["precision"]],
            "recompute": row["recompute"],
            "recompute_modules": mods,
            "grad_reduce_in_fp32": False,
        },
        "parallel": {
            "tp": int(row["tp"]),
            "pp": int(row["pp"]),
            "cp": int(row["cp"]),
            "ep": int(row["ep"]),
            "zero": 1,
        },
        "runtime": {"stack": "megatron"},
    }


def compare(path: str | Path | None = None) -> list[dict[str, Any]]:
    """One dict per published row: its release, system, precision, published and predicted tokens/s per GPU
    and the error (``predicted / published - 1``), or the reason it could not be predicted."""
    from simcore.errors import SimcoreError
    from simcore.prediction import predict

    with open(path or PUBLISHED_HYBRID_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out: list[dict[str, Any]] = []
    for r in rows:
        rec: dict[str, Any] = {k: r[k] for k in ("release", "system", "gpus", "precision")}
        pub = float(r["tokens_per_s_per_gpu"])
        rec["published"] = pub
        try:
            res = predict(scenario(r))
        except SimcoreError as e:
            rec["error"], rec["reason"] = None, str(e)
        else:
            rec["predicted"] = res.tokens_per_s_per_gpu
            rec["error"] = res.tokens_per_s_per_gpu / pub - 1.0
        out.append(rec)
    return out


def report(path: str | Path | None = None) -> str:
    """The table of :func:`compare` and the median and worst |error|."""
    rows = compare(path)
    lines = [
        "Nemotron 3 Nano 30B-A3B pre-training, Megatron-Bridge performance summaries (held out, not fitted)",
        f"{'release':9s} {'system':10s} {'gpus':>4s} {'prec':6s} {'published':>10s} {'predicted':>10s} {'error':>7s}",
    ]
    errs = []
    for r in rows:
        if r["error"] is None:
            lines.append(f"{r['release']:9s} {r['system']:10s} {r['gpus']:>4s} {r['precision']:6s} not run: {r['reason']}")
            continue
        errs.append(abs(r["error"]))
        lines.append(
            f"{r['release']:9s} {r['system']:10s} {r['gpus']:>4s} {r['precision']:6s} {r['published']:10,.0f} "
            f"{r['predicted']:10,.0f} {r['error']:+7.1%}"
        )
    if errs:
        lines.append(f"rows {len(errs)} of {len(rows)}: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    return "\n".join(lines)
