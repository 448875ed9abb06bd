"""Synthetic op measurements generated from a known profile (for fitter tests)."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import numpy as np

from simcore.calibration import fit_compute as FC
from simcore.specs.hardware import Device
from simcore.specs.profile import (
    AttentionParams,
    ComputeProfile,
    GemmParams,
    MemoryOpParams,
    MemoryParams,
    OptimizerParams,
)

COLS = [
    "kind",
    "dtype",
    "m",
    "n",
    "k",
    "batch",
    "heads",
    "kv_heads",
    "seq",
    "kv_seq",
    "head_dim",
    "causal",
    "backward",
    "name",
    "bytes",
    "time_s",
    "flops",
    "framework",
]


def true_profile(dev: Device) -> ComputeProfile:
    base = FC.neutral_profile(dev)
    g = GemmParams(eff_peak=0.72, k_overhead=180.0, load_cost=6.0, eff_bw=0.82, sharpness=2.5, t0=4.5e-6)
    g8 = g.model_copy(update={"eff_peak": 0.6, "k_overhead": 300.0})
    af = AttentionParams(
        eff_peak=0.55, head_dim_overhead=40.0, kv_overhead=300.0, eff_bw=0.7, sharpness=3.0, t0=6e-6
    )
    ab = af.model_copy(update={"eff_peak": 0.45, "head_dim_overhead": 25.0, "t0": 1.2e-5, "block_cols": 64})
    mem = MemoryParams(
        eff_bw=0.88, t0=2.5e-6, l2_speedup=1.8, l2_fraction=0.4, eff_compute=0.4,
        ops={"softmax": MemoryOpParams(eff=0.8, t0=4e-6)},
    )  # fmt: skip
    return base.model_copy(
        update={
            "provisional": False,
            "launch": {"eager": 6e-6, "cuda_graphs": 2e-6, "compiled": 2e-6},
            "host_overhead": {"gemm": 1.2e-5, "attention_fwd": 3e-5, "attention_bwd": 9e-5, "memory": 7e-6},
            "gemm": {"bf16": g, "fp8": g8},
            "attention": {"fwd": af, "bwd": ab},
            "memory": mem,
            "optimizer": {
                "adamw_fused": OptimizerParams(traffic=1.1, t0=2e-5),
                "adamw_unfused": OptimizerParams(traffic=3.5, t0=2e-4),
            },
        }
    )


def rows(seed: int = 0) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    out: list[dict[str, object]] = []
    sizes = [1, 8, 32, 64, 128, 256, 512, 1024, 2048, 3072, 4096, 8192, 12288, 16384]
    for dtype, count in (("bf16", 160), ("fp8", 60)):
        for _ in range(count):
            m, n, k = (int(rng.choice(sizes)) for _ in range(3))
            n, k = max(n, 128), max(k, 128)
            out.append({"kind": "gemm", "dtype": dtype, "m": m, "n": n, "k": k, "batch": 1})
    for bwd in (0, 1):
        for _ in range(70):
            b = int(rng.choice([1, 2, 4, 8, 16]))
            h = int(rng.choice([8, 16, 32, 64]))
            s = int(rng.choice([128, 512, 1024, 2048, 4096, 8192]))
            d = int(rng.choice([64, 128, 256]))
            c = int(rng.integers(0, 2))
            out.append({"kind": "attention", "dtype": "bf16", "batch": b, "heads": h, "kv_heads": h, "seq": s,
                        "kv_seq": s, "head_dim": d, "causal": c, "backward": bwd})  # fmt: skip
    for _ in range(30):  # decode
        b = int(rng.choice([1, 8, 32, 128]))
        s = int(rng.choice([256, 1024, 4096, 16384]))
        out.append({"kind": "attention", "dtype": "bf16", "batch": b, "heads": 32, "kv_heads": 8, "seq": 1,
                    "kv_seq": s, "head_dim": 128, "causal": 1, "backward": 0})  # fmt: skip
    for name in ("copy", "add", "softmax", "gelu"):
        for e in np.arange(12, 32, 0.5):
            out.append({"kind": "elementwise", "name": name, "bytes": float(2**e), "dtype": "bf16"})
    for name in ("adamw_fused", "adamw_unfused"):
        for e in range(16, 31, 2):
            out.append({"kind": "optimizer", "name": name, "params": float(2**e), "bytes": 28.0 * 2**e})
    # every kernel row measured eagerly; the short ones also inside a CUDA graph (kernel time)
    both = []
    for r in out:
        both.append(r | {"framework": "eager"})
        if r["kind"] != "optimizer":
            both.append(r | {"framework": "cuda_graphs"})
    for fw in ("eager", "cuda_graphs"):
        for name in ("add_1elem", "matmul_16"):
            both.append({"kind": "launch", "name": name, "framework": fw, "m": 1})
    return both


def write_csv(path: Path, dev: Device, prof: ComputeProfile, noise: float = 0.02, seed: int = 0) -> Path:
    rs = rows(seed)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*COLS, "params"])
    w.writeheader()
    for r in rs:
        w.writerow({c: r.get(c, "") for c in [*COLS, "params"]} | {"time_s": 1.0})
    tmp = path.with_suffix(".tmp.csv")
    tmp.write_text(buf.getvalue())
    t = FC.read_ops([tmp])
    tmp.unlink()
    pred = FC.predict_rows(dev, prof, t)
    fam = np.array([FC.family_of(t, i) for i in range(len(t))])
    pred = np.where(fam == "launch", np.array([prof.launch.get(f, 0.0) for f in t.framework]), pred)
    rng = np.random.default_rng(seed + 1)
    pred = pred * np.exp(rng.normal(0.0, noise, pred.size))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*COLS, "params"])
    w.writeheader()
    for r, tm in zip(rs, pred, strict=True):
        w.writerow({c: r.get(c, "") for c in [*COLS, "params"]} | {"time_s": f"{tm:.6e}"})
    path.write_bytes(gzip.compress(buf.getvalue().encode()))
    return path
