"""Round 72: the embedding's dense backward, kernel by kernel, under the PyTorch profiler.

``aten::embedding_dense_backward`` launches ~30 kernels: a zero fill of the table's gradient (vocab x
hidden), a radix sort of the token ids (cub, eight passes with a memset each), a unique-by-key and scans,
then ``compute_grad_weight`` and ``sum_and_scatter`` over the tokens' gradient rows. Round 65 timed whole
eager calls (launch gaps included, ``traces/h200/round65/embedding_ops.csv.gz``); a profiler trace of a
training step classifies the fill as a fill, the memsets as memsets and the rest as the embedding's
backward, so this records each group's kernel time apart.

Rows (``op,dtype,tokens,hidden,vocab,fill_s,memset_s,sort_s,segment_s,other_s,kernels``; medians of 5
profiled calls): ``sort_s`` cub's radix-sort kernels, ``segment_s`` ``compute_grad_weight`` +
``sum_and_scatter``, ``other_s`` the rest (index, unique-by-key, scans, partial-segment offsets).

  python tools/bench_embedding_bwd.py --out embedding_bwd.csv [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import env_info, log  # noqa: E402

COLS = ["op", "dtype", "tokens", "hidden", "vocab", "fill_s", "memset_s", "sort_s", "segment_s", "other_s", "kernels"]


def group(name: str) -> str:
    if "Memset" in name:
        return "memset_s"
    if "FillFunctor" in name:
        return "fill_s"
    if "radix_sort" in name or "RadixSort" in name:
        return "sort_s"
    if "compute_grad_weight" in name or "sum_and_scatter" in name:
        return "segment_s"
    return "other_s"


def one(dev: torch.device, dtype: torch.dtype, t: int, h: int, v: int) -> dict[str, float]:
    g = torch.randn(t, h, device=dev, dtype=dtype)
    idx = torch.randint(0, v, (t,), device=dev)
    fn = lambda: torch.ops.aten.embedding_dense_backward(g, idx, v, -1, False)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    runs: list[dict[str, float]] = []
    for _ in range(5):
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        acc = {c: 0.0 for c in COLS[5:10]}
        n = 0
        for e in p.events():
            if e.device_type.name == "CUDA":
                acc[group(e.name)] += e.device_time_total * 1e-6
                n += 1
        acc["kernels"] = n
        runs.append(acc)
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=90.0)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU (the kernels are CUDA's)")
    dev = torch.device("cuda")
    log("env", env_info(dev))
    t0 = time.time()
    vocab = [1000] if args.smoke else [32000, 50304, 128256, 151936]
    hidden = [64] if args.smoke else [768, 2048, 4096]
    toks = [256] if args.smoke else [1024, 2048, 4096, 8192, 16384, 32768]
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        for dt, tag in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for v in vocab:
                for h in hidden:
                    for t in toks:
                        if time.time() - t0 > args.budget:
                            log("budget reached")
                            break
                        r = one(dev, dt, t, h, v)
                        w.writerow(["embedding_bwd", tag, t, h, v, *(f"{r[c]:.4g}" for c in COLS[5:10]), int(r["kernels"])])
                    torch.cuda.empty_cache()
            log(f"{tag} done ({time.time() - t0:.0f} s)")
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
