"""Round 36: PyTorch's slower elementwise kernels, timed like ``tools/bench_ops.py``'s memory section.

PyTorch runs an elementwise op with its vectorised kernel only when every operand is contiguous and of
one dtype. Mixed dtypes (an fp32 residual plus a bf16 branch under autocast, a bf16 -> fp32 upcast)
take the unrolled kernel with dynamic casts; non-contiguous operands (the halves of a fused gate/up
output, a transposed view made contiguous, the KV-cache ``cat`` of transposed keys) take the strided
kernel with an offset calculator. Profiler traces show both far slower than the plain ops that
``tools/bench_ops.py`` measured (round 1), which is most of the elementwise time simcore missed.

Rows in ``bench_ops.py``'s CSV layout (``kind=memory``, ``name`` the simcore variant, ``bytes`` read +
written, ``dtype`` the input's), eager calls and, below 50 us a call, CUDA-graph replays:

* ``cast_up``: bf16 -> fp32 copy (``x.float()``);
* ``add_mixed`` / ``mul_mixed``: fp32 tensor with a bf16 tensor, fp32 out;
* ``mul_strided`` / ``silu_strided``: on one half of a ``[rows, 2 W]`` tensor (row stride 2 W);
* ``copy_strided`` / ``copy_strided_fp32``: ``x.view(b, s, h, d).transpose(1, 2).contiguous()`` (bf16 /
  fp32: the strided loop is bound by elements, not bytes; round 36's run wrote both as ``copy_strided``,
  the committed CSV names the fp32 rows as this script now does);
* ``cat_strided``: ``torch.cat([empty(b, h, 0, d), x.transpose(1, 2)], 2)`` (transformers' KV cache).

``--ref OUT2`` also writes the plain ops (copy, cast fp32 -> bf16, add, mul, silu) measured in the same
run, for same-run ratios (not a calibration input: round 1's rows are). Round 36's is committed as
``traces/h200/round36/elementwise_plain.csv.gz``, its columns renamed (``op,dtype,rows,width,bytes,
seconds,timing``) so that ``simcore calibrate traces/h200`` does not take it for an op sweep. (Its
``add fp32`` rows add a tensor to itself: they read one tensor, not two.)

  python tools/bench_elementwise.py --out elementwise.csv [--ref elementwise_ref.csv] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, time_eager, time_graph  # noqa: E402

COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim",
        "causal", "backward", "name", "bytes", "time_s", "flops", "framework"]
GRAPH_BELOW = 50e-6


def record(out: CsvOut, dev: torch.device, fn, smoke: bool, **row) -> None:
    """One memory-bound call ``fn``: its eager time and, below 50 us, its CUDA-graph replay time, as
    rows of ``out`` (``backward`` 0 unless ``row`` says)."""
    row = {"backward": 0, **row}
    fn()
    t, _n, _spread = time_eager(fn, dev, target=0.002 if smoke else 0.01, reps=3 if smoke else 5)
    out.row(time_s=t, framework="eager", kind="memory", **row)
    if dev.type == "cuda" and t < GRAPH_BELOW:
        tg = time_graph(fn, dev, int(min(200, max(20, 2e-3 / t))))
        out.row(time_s=tg, framework="cuda_graphs", kind="memory", **row)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=150.0)
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    out = CsvOut(args.out, COLS)
    ref = CsvOut(args.ref, COLS) if args.ref else None
    log("env", env_info(dev))
    bf, f32 = torch.bfloat16, torch.float32
    W = 256 if args.smoke else 4096
    H, D, B = 16, 64, 4  # the [b, s, h, d] views: hidden 1024
    sizes = [64 << 10, 256 << 10] if args.smoke else [256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    t0 = time.time()
    for nb in sizes:  # bytes of one bf16 input
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        N = nb // 2
        rows = N // W
        S = max(N // (B * H * D), 1)

        def r(*shape, dt=bf):
            return torch.randn(*shape, device=dev, dtype=dt)

        try:
            a16, b16 = r(rows, W), r(rows, W)
            a32 = r(rows, W, dt=f32)
            wide = r(rows, 2 * W)
            half = wide[:, W:]
            x4 = r(B, S, H, D)
            x4f = r(B, S, H, D, dt=f32)
            empty = torch.empty(B, H, 0, D, device=dev, dtype=bf)
            c32 = torch.empty(rows, W, device=dev, dtype=f32)
            common = dict(m=rows, n=W)
            variants = [
                ("cast_up", "bf16", lambda: c32.copy_(a16), N * 6),
                ("add_mixed", "fp32", lambda: a32 + b16, N * 10),
                ("mul_mixed", "fp32", lambda: a32 * b16, N * 10),
                ("mul_strided", "bf16", lambda: a16 * half, N * 6),
                ("silu_strided", "bf16", lambda: F.silu(half), N * 4),
                ("copy_strided", "bf16", lambda: x4.transpose(1, 2).contiguous(), N * 4),
                ("copy_strided_fp32", "fp32", lambda: x4f.transpose(1, 2).contiguous(), N * 8),
                ("cat_strided", "bf16", lambda: torch.cat([empty, x4.transpose(1, 2)], 2), N * 4),
            ]
            for name, dt, fn, nbytes in variants:
                record(out, dev, fn, args.smoke, dtype=dt, name=name, bytes=nbytes, **common)
            if ref is not None:
                c16 = torch.empty_like(a16)
                plain = [
                    ("copy", "bf16", lambda: c16.copy_(a16), N * 4),
                    ("cast", "fp32", lambda: c16.copy_(a32), N * 6),
                    ("add", "bf16", lambda: a16 + b16, N * 6),
                    ("add", "fp32", lambda: a32 + a32, N * 12),
                    ("mul", "bf16", lambda: a16 * b16, N * 6),
                    ("silu", "bf16", lambda: F.silu(a16), N * 4),
                ]
                for name, dt, fn, nbytes in plain:
                    record(ref, dev, fn, args.smoke, dtype=dt, name=name, bytes=nbytes, **common)
            log(f"{nb >> 10} KiB done ({time.time() - t0:.0f} s)")
        except torch.cuda.OutOfMemoryError as e:
            log("OOM at", nb, repr(e)[:200])
        finally:
            torch.cuda.empty_cache() if dev.type == "cuda" else None
    # which kernels the variants launch (one call each under the profiler)
    if dev.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _name, _dt, fn, _nb in variants:
                fn()
            torch.cuda.synchronize()
        for e in p.events():
            if e.device_type.name == "CUDA":
                log("kernel", e.name[:160])
    out.close()
    if ref is not None:
        ref.close()
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
