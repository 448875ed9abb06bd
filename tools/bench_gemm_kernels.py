"""The GEMM sweep of ``ops.csv.gz`` again, timed by the kernels' own durations (round 19).

Round 18 found that CUDA events around back-to-back GEMMs on a power-capped H200 include gaps
between the kernels (8192 x 16384 x 2048: 838 µs per call by events, 718 µs per kernel by the
profiler), while inside a training step the same kernel takes 711 µs with 1.6 µs gaps. simcore
prices a GEMM as a kernel inside a step, so its efficiencies should come from kernel durations.

For every non-fp8 GEMM row of the given ops CSV (unique dtype, m, n, k, batch), the operands are
built as ``bench_ops.py`` builds them (contiguous ``A[m,k] @ B[k,n]``, ``torch.matmul``/``bmm``), a few
calls warm up, then ``--calls`` calls run under the PyTorch profiler inside ``record_function``
ranges; the row's time is the median over calls of the summed durations of the GEMM's own kernels
(cuBLAS's workspace memsets excluded). Output rows are in the ops-CSV layout with ``framework``
empty (device time, no launch gaps).

  python tools/bench_gemm_kernels.py --ops traces/h200/ops.csv.gz --out gemm_kernels.csv

``--grid DTYPES:MS:NxK,...`` times an explicit grid instead of (or beside) the sweep's shapes, e.g. the
weight-bound decode GEMMs of a served model: ``--grid bf16,fp8:1,64,256:57344x8192,8192x28672``. fp8 rows
are ``torch._scaled_mm`` with e4m3 operands and row-wise fp32 scales (``scaled_mm_e4m3_rowwise``, bf16 out),
``fp8_tensor`` the same with one scale per tensor (``scaled_mm_e4m3_tensorwise``: cuBLASLt's per-tensor FP8
GEMM), built as ``bench_ops.py`` builds them; ``--ops`` may then be omitted.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, fp8_gemm, log, sync  # noqa: E402

TDT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
ESZ = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1, "fp8_tensor": 1}
COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal",
        "backward", "name", "bytes", "time_s", "flops", "framework"]


def shapes(path):
    seen, out = set(), []
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        for r in csv.DictReader(f):
            if r["kind"] != "gemm" or r["dtype"] not in TDT:
                continue
            key = (r["dtype"], int(float(r["m"])), int(float(r["n"])), int(float(r["k"])),
                   int(float(r["batch"])) if r["batch"] else 0)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


def grid(specs):
    out = []
    for spec in specs:
        dts, ms, nks = spec.split(":")
        for nk in nks.split(","):
            n, k = (int(x) for x in nk.split("x"))
            for m in ms.split(","):
                for dt in dts.split(","):
                    out.append((dt, int(m), n, k, 0))
    return out


def operands(dt, m, n, k, batch, dev):
    """The GEMM's call and its kernel family's name: fp8 as torch._scaled_mm (``fp8`` row-wise scales,
    ``fp8_tensor`` one per tensor: :func:`benchutil.fp8_gemm`), others as torch.matmul."""
    if dt in ("fp8", "fp8_tensor"):
        return fp8_gemm(m, n, k, dev, "row" if dt == "fp8" else "tensor")
    tdt = TDT[dt]
    if batch:
        a = torch.randn(batch, m, k, device=dev, dtype=tdt)
        b = torch.randn(batch, k, n, device=dev, dtype=tdt)
    else:
        a = torch.randn(m, k, device=dev, dtype=tdt)
        b = torch.randn(k, n, device=dev, dtype=tdt)
    return (lambda: torch.matmul(a, b)), "bmm" if batch else "matmul"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=None)
    ap.add_argument("--grid", action="append", default=[], help="DTYPES:MS:NxK,... (repeatable)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--budget", type=float, default=420.0)
    args = ap.parse_args(argv)
    if not args.ops and not args.grid:
        ap.error("give --ops (an ops CSV's GEMM shapes) or --grid (an explicit grid), or both")
    dev = torch.device("cuda")
    log("env", env_info(dev))
    out = CsvOut(args.out, COLS)
    t0 = time.time()
    todo = (shapes(args.ops) if args.ops else []) + grid(args.grid)
    log(f"{len(todo)} GEMM shapes")
    for i, (dt, m, n, k, batch) in enumerate(todo):
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        try:
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            fn, name = operands(dt, m, n, k, batch, dev)
            for _ in range(3):
                fn()
            sync(dev)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for c in range(args.calls):
                    with record_function(f"call{c}"):
                        fn()
                sync(dev)
            # each kernel belongs to the op that launched it (aten::mm); sum them per call range
            calls: dict[int, float] = {}
            for ev in prof.events():
                ks = [kk.duration for kk in (getattr(ev, "kernels", None) or []) if not kk.name.startswith("Memset")]
                if not ks:
                    continue
                p = ev
                while p is not None and not p.name.startswith("call"):
                    p = p.cpu_parent
                if p is not None:
                    calls[p.id] = calls.get(p.id, 0.0) + sum(ks)
            per_call = list(calls.values())
            if not per_call:
                raise RuntimeError("no kernels recorded")
            t = statistics.median(per_call) * 1e-6
            bt = batch or 1
            fp8 = dt.startswith("fp8")
            out_sz = 2 if fp8 else ESZ[dt]
            out.row(kind="gemm", dtype="fp8" if fp8 else dt, m=m, n=n, k=k, batch=batch or "", name=name,
                    bytes=bt * ((m * k + k * n) * ESZ[dt] + m * n * out_sz), time_s=t, flops=2 * bt * m * n * k,
                    framework="", backward=0)
            if i % 25 == 0:
                log(f"{i}/{len(todo)} {dt} {m}x{n}x{k} b{batch}: {t * 1e6:.1f} us")
            del fn
        except torch.cuda.OutOfMemoryError:
            log("OOM", dt, m, n, k, batch)
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            log("ERROR", dt, m, n, k, batch, repr(e)[:200])
    torch.backends.cuda.matmul.allow_tf32 = False
    out.close()
    log(f"done {out.n} rows in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
