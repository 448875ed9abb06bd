"""Round 59: the elementwise kernels of written-out attention and norms, timed like ``tools/bench_elementwise.py``.

``transformers``' eager attention and its norms issue ops that no earlier round measured: a scale by a
Python scalar (one tensor read, one written), the additive causal mask ``[b, 1, q, k]`` broadcast over
the heads (in the residual stream's dtype: fp32 under AMP, so bf16 scores promote), RMSNorm's products
with a per-row statistic ``[rows, 1]`` and a per-column weight ``[W]``, and softmax / log-softmax over
rows of every width (the attention's over ``k`` keys in fp32, the loss's over a 32,000-152,000-token
vocabulary). Round 52's eager-attention trace showed the broadcast mixed-dtype add at ~1 TB/s, and a
softmax backward over 2048-wide fp32 rows launching a product kernel before its own.

Rows in ``bench_ops.py``'s CSV layout (``kind=memory``; ``name`` the simcore variant; ``bytes`` read +
written over the full-size operands, the broadcast operand not counted; ``dtype`` the full-size
input's; ``m`` rows and ``n`` width for the row-wise ops), eager calls and, below 50 us a call,
CUDA-graph replays:

* ``add_bcast_mixed``: bf16 ``[b, h, q, k]`` + fp32 ``[b, 1, q, k]`` -> fp32 (``6 N`` bytes);
* ``add_bcast``: the same with a mask of the scores' dtype, bf16 or fp32 (``2 e N``);
* ``mul_scalar``: ``x * 0.125`` (``2 e N``);
* ``mul_bcast``: ``x [rows, W] * r [rows, 1]`` (``2 e N``); ``mul_bcast_row``: ``w [W] * x [rows, W]`` (``2 e N``);
* ``softmax`` / ``log_softmax`` (forward ``2 e N``; ``backward`` 1: ``_softmax_backward_data``, ``3 e N``),
  fp32 and bf16 rows of width ``n`` (``softmax(x, dtype=float32)`` of bf16 scores is a cast, then an fp32
  softmax: PyTorch's CUDA softmax converts in the kernel only from fp16).

The kernels each variant launches are logged (one call each under the profiler).

  python tools/bench_eager_ops.py --out eager_ops.csv [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_elementwise import COLS, record  # noqa: E402  (eager calls, CUDA-graph replays below 50 us)
from benchutil import CsvOut, env_info, log  # noqa: E402

ELT = {torch.bfloat16: 2, torch.float32: 4}
TAG = {torch.bfloat16: "bf16", torch.float32: "fp32"}


def attention_variants(dev, b: int, h: int, s: int):
    """(name, dtype tag, fn, bytes, row extras) of the score-sized ops at ``[b, h, s, s]``."""
    bf, f32 = torch.bfloat16, torch.float32
    n = b * h * s * s
    s16 = torch.randn(b, h, s, s, device=dev, dtype=bf)
    s32 = torch.randn(b, h, s, s, device=dev, dtype=f32)
    m32 = torch.randn(b, 1, s, s, device=dev, dtype=f32)
    m16 = m32.to(bf)
    ex = dict(batch=b, heads=h, seq=s, kv_seq=s)
    return [
        ("add_bcast_mixed", "fp32", lambda: s16 + m32, 6 * n, ex),
        ("add_bcast", "bf16", lambda: s16 + m16, 4 * n, ex),
        ("add_bcast", "fp32", lambda: s32 + m32, 8 * n, ex),
        ("mul_scalar", "bf16", lambda: s16 * 0.125, 4 * n, ex),
        ("mul_scalar", "fp32", lambda: s32 * 0.125, 8 * n, ex),
    ]


def norm_variants(dev, rows: int, w: int):
    bf, f32 = torch.bfloat16, torch.float32
    out = []
    for dt in (f32, bf):
        x = torch.randn(rows, w, device=dev, dtype=dt)
        r = torch.randn(rows, 1, device=dev, dtype=dt)
        wt = torch.randn(w, device=dev, dtype=dt)
        e = ELT[dt]
        ex = dict(m=rows, n=w)
        out.append(("mul_bcast", TAG[dt], (lambda x=x, r=r: x * r), 2 * e * rows * w, ex))
        out.append(("mul_bcast_row", TAG[dt], (lambda x=x, wt=wt: wt * x), 2 * e * rows * w, ex))
    return out


def softmax_variants(dev, rows: int, w: int):
    bf, f32 = torch.bfloat16, torch.float32
    aten = torch.ops.aten
    out = []
    for dt in (f32, bf):
        x = torch.randn(rows, w, device=dev, dtype=dt)
        e = ELT[dt]
        n = rows * w
        ex = dict(m=rows, n=w)
        y = torch.softmax(x, -1)
        ly = torch.log_softmax(x, -1)
        g = torch.randn_like(x)
        out += [
            ("softmax", TAG[dt], (lambda x=x: aten._softmax(x, -1, False)), 2 * e * n, dict(ex, backward=0)),
            ("softmax", TAG[dt], (lambda g=g, y=y, dt=dt: aten._softmax_backward_data(g, y, -1, dt)), 3 * e * n,
             dict(ex, backward=1)),
            ("log_softmax", TAG[dt], (lambda x=x: aten._log_softmax(x, -1, False)), 2 * e * n, dict(ex, backward=0)),
            ("log_softmax", TAG[dt], (lambda g=g, y=ly, dt=dt: aten._log_softmax_backward_data(g, y, -1, dt)),
             3 * e * n, dict(ex, backward=1)),
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=150.0)
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    out = CsvOut(args.out, COLS)
    log("env", env_info(dev))
    t0 = time.time()
    jobs = []
    # score-sized ops: b*h = 32 at s 128..4096 (bf16 scores 1 MB .. 1 GB), and two other head counts
    attn = [(2, 16, 64), (2, 16, 128)] if args.smoke else [
        (2, 16, 128), (2, 16, 256), (2, 16, 512), (2, 16, 1024), (2, 16, 2048), (1, 32, 4096), (4, 8, 1024),
        (1, 64, 1024), (8, 12, 1024),
    ]
    jobs += [("attn", a) for a in attn]
    # norm-like broadcasts: rows x W (W 768..8192), 1 MB .. 512 MB of fp32
    norms = [(64, 256)] if args.smoke else [
        (128, 2048), (1024, 2048), (4096, 2048), (16384, 2048), (65536, 2048), (1024, 768), (8192, 768),
        (32768, 768), (4096, 4096), (16384, 8192),
    ]
    jobs += [("norm", a) for a in norms]
    # row-wise ops: widths 128 .. 152064 at about 4, 64 and 512 MB of fp32
    widths = [64, 1024] if args.smoke else [128, 512, 1024, 2048, 4096, 8192, 32000, 50257, 152064]
    sizes = [1 << 16] if args.smoke else [1 << 20, 16 << 20, 128 << 20]  # elements
    jobs += [("softmax", (max(1, n // w), w)) for w in widths for n in sizes]
    variants = {"attn": attention_variants, "norm": norm_variants, "softmax": softmax_variants}
    run_jobs(out, dev, jobs, variants, args.smoke, args.budget, t0)
    # which kernels each variant launches: one call each under the profiler
    if dev.type == "cuda":
        probes = attention_variants(dev, 2, 16, 512) + norm_variants(dev, 1024, 2048)
        for w in (512, 1024, 2048, 4096, 50257):
            probes += [(f"{nm} w{w}", dt, fn, nb, ex) for nm, dt, fn, nb, ex in softmax_variants(dev, max(1, (1 << 20) // w), w)]
        log_kernels(probes, lambda e: e.name[:110])
    log(f"done {out.n} rows in {time.time() - t0:.0f} s")


def run_jobs(out: CsvOut, dev, jobs, variants, smoke: bool, budget: float, t0: float) -> None:
    """Record every variant of each job ``(kind, args)`` (``variants[kind](dev, *args)``: (name, dtype tag,
    fn, bytes, row extras) each) into ``out`` until ``budget`` seconds from ``t0`` have passed; a job that
    runs out of memory is logged and skipped. Closes ``out``."""
    for n_job, (kind, a) in enumerate(jobs):
        if time.time() - t0 > budget:
            log("budget reached")
            break
        try:
            vs = variants[kind](dev, *a)
            for name, dt, fn, nbytes, ex in vs:
                record(out, dev, fn, smoke, dtype=dt, name=name, bytes=nbytes, **ex)
            del vs
            log(f"{n_job + 1}/{len(jobs)} {kind} {a} ({time.time() - t0:.0f} s)")
        except torch.cuda.OutOfMemoryError as e:
            log("OOM at", kind, a, repr(e)[:200])
        finally:
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    out.close()


def log_kernels(probes, describe) -> None:
    """Log the kernels each probe variant launches (one call under the profiler; ``describe``: a
    kernel event's text)."""
    from torch.profiler import ProfilerActivity, profile

    for name, dt, fn, _nb, ex in probes:
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        ks = [describe(e) for e in p.events() if e.device_type.name == "CUDA"]
        log("kernels", name, dt, "bwd" if ex.get("backward") else "fwd", "|", " || ".join(ks))


if __name__ == "__main__":
    main()
