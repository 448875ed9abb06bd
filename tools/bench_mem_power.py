"""Board power of memory-bound kernels streaming from HBM (round 20).

The op sweep's memory family drew 335 W (``dmon`` during ``bench_ops.py``'s memory section, whose
ops are mostly small and L2-resident). A training step's memory-bound kernels stream tensors of tens
to hundreds of MB from HBM. Each op here runs back to back on 256 MB-class bf16 tensors for
``--seconds`` while ``nvidia-smi dmon -o T -s pucm -d 1`` records (started by the collection script);
the log gives each op's start and end (wall clock), so the power per op is the median of the samples
inside its window (first second dropped).

Round 67 (``--set gemm_dtypes``): the same for GEMMs of each dtype back to back (bf16 and fp16 on the
tensor cores, fp32 at PyTorch's default ``highest`` precision: CUDA-core FFMA kernels, and tf32), each
call's mean seconds logged beside its window: does an fp32 GEMM stream reach the TDP as a bf16 one does?

  python tools/bench_mem_power.py --seconds 6 [--set memory|gemm_dtypes]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import log, sync  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--set", default="memory", choices=["memory", "gemm_dtypes"])
    args = ap.parse_args()
    dev = torch.device("cuda")
    if args.set == "gemm_dtypes":
        run(gemm_ops(dev), args.seconds, dev)
        return
    n = 128 << 20  # bf16 elements: 256 MB
    x = torch.randn(n, device=dev, dtype=torch.bfloat16)
    y = torch.randn(n, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    x2 = x.view(-1, 4096)
    w = torch.ones(4096, device=dev, dtype=torch.bfloat16)
    xr = x2.detach().requires_grad_(True)
    wr = w.detach().requires_grad_(True)
    yl = F.layer_norm(xr, (4096,), wr)
    go = torch.randn_like(yl)
    a = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 8192, device=dev, dtype=torch.bfloat16)
    ops = {
        "copy": lambda: out.copy_(x),
        "add": lambda: torch.add(x, y, out=out),
        "mul": lambda: torch.mul(x, y, out=out),
        "gelu": lambda: F.gelu(x),
        "silu": lambda: F.silu(x),
        "cast_fp32": lambda: x.float(),
        "layer_norm_fwd": lambda: F.layer_norm(x2, (4096,), w),
        "layer_norm_bwd": lambda: torch.autograd.grad(yl, (xr, wr), go, retain_graph=True),
        "softmax": lambda: torch.softmax(x2, -1),
        "idle": None,
        "gemm_8192x8192x4096": lambda: torch.mm(a, b),
    }
    run(ops, args.seconds, dev)


def gemm_ops(dev: torch.device) -> dict:
    """Back-to-back GEMMs of each dtype (``allow_tf32`` set per call: fp32 runs FFMA, tf32 the tensor cores)."""
    def mm(a, b, tf32: bool = False):
        def f():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            return torch.mm(a, b)
        return f

    ops: dict = {"idle": None}
    for dt, tag, tf32 in ((torch.bfloat16, "bf16", False), (torch.float16, "fp16", False),
                          (torch.float32, "fp32", False), (torch.float32, "tf32", True)):
        for m, n, k in ((8192, 8192, 4096), (4096, 4096, 4096)):
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(k, n, device=dev, dtype=dt)
            ops[f"gemm_{tag}_{m}x{n}x{k}"] = mm(a, b, tf32)
    return ops


def run(ops: dict, seconds: float, dev: torch.device) -> None:
    """Each op back to back for ``seconds`` between START / END log lines (its mean call time with them)."""
    for name, fn in ops.items():
        t0 = time.time()
        log(f"START {name} {t0:.3f}")
        calls = 0
        while time.time() - t0 < seconds:
            if fn is None:
                time.sleep(0.05)
                continue
            for _ in range(20):
                fn()
            calls += 20
            sync(dev)
        t1 = time.time()
        log(f"END {name} {t1:.3f} calls {calls} mean_call_s {(t1 - t0) / max(calls, 1):.6g}")
        time.sleep(1.0)
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
