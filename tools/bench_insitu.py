"""Kernels as they run inside a step rather than in a back-to-back sweep (round 17).

Two effects the op sweep (bench_ops.py) cannot see, measured on their own:

* ``gemm_duty``: a GEMM's time when it shares the stream with memory-bound work. The sweep runs one
  GEMM back to back for tens of ms, which holds a 700 W card at its power-capped clock; in a step
  GEMMs alternate with memory-bound kernels and the clock rises. Pattern: [GEMM, r x copy of a
  256 MB buffer] repeated for ``--seconds``; CUDA events around every GEMM; the median over the second
  half (steady state) per filler count r, i.e. per GEMM duty (share of the stream's time in GEMMs).
* ``mem``: memory-bound kernels of eager training in their in-step form: SiLU, the SwiGLU product and
  their backward on the strided halves of a fused gate/up output vs contiguous tensors; fp32 -> bf16
  weight casts with the weights cold in L2 (a 1 GiB buffer streamed in between) vs warm; RMSNorm and
  LayerNorm forward and backward. Events around each call, median of ``--reps``.

  python tools/bench_insitu.py --out insitu.csv [--seconds 1.5] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, sync  # noqa: E402

COLS = ["kind", "name", "m", "n", "k", "filler", "duty", "time_s", "time_p10_s", "time_p90_s", "bytes", "flops",
        "variant", "n_samples"]


def ev_pair():
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def gemm_duty(out, dev, seconds, smoke):
    shapes = [(256, 256, 256)] if smoke else [(8192, 8192, 2048), (8192, 3072, 768), (4096, 4096, 4096)]
    fill_n = (1 << 16) if smoke else (128 << 20)  # bf16 elements: 256 MB
    src = torch.randn(fill_n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    for m, n, k in shapes:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        for r in (0, 1, 2, 4, 8):
            times, wall0 = [], time.perf_counter()
            pairs = []
            # launch in chunks so the event lists stay small; read them after each chunk
            while time.perf_counter() - wall0 < seconds:
                for _ in range(50):
                    s, e = ev_pair()
                    s.record()
                    torch.mm(a, b)
                    e.record()
                    pairs.append((s, e))
                    for _ in range(r):
                        dst.copy_(src)
                sync(dev)
                times.extend(s.elapsed_time(e) / 1e3 for s, e in pairs)
                pairs = []
            steady = sorted(times[len(times) // 2:])
            med = statistics.median(steady)
            # the filler's own time, to state the duty
            s, e = ev_pair()
            s.record()
            for _ in range(10):
                dst.copy_(src)
            e.record()
            sync(dev)
            t_fill = s.elapsed_time(e) / 1e3 / 10
            duty = med / (med + r * t_fill)
            out.row(kind="gemm_duty", name="mm_bf16", m=m, n=n, k=k, filler=r, duty=duty, time_s=med,
                    time_p10_s=steady[len(steady) // 10], time_p90_s=steady[(9 * len(steady)) // 10],
                    flops=2 * m * n * k, n_samples=len(steady), variant=f"copy {2 * fill_n * 2} B x {r}")
            log(f"gemm {m}x{n}x{k} filler {r}: {med * 1e6:.1f} us ({2 * m * n * k / med / 1e12:.0f} TFLOP/s), "
                f"duty {duty:.2f}")
        del a, b


def timed(fn, reps, dev, before=None):
    ts = []
    for _ in range(reps):
        if before is not None:
            before()
        s, e = ev_pair()
        s.record()
        fn()
        e.record()
        sync(dev)
        ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)


def mem_ops(out, dev, reps, smoke):
    flush_buf = torch.empty((64 << 20) if smoke else (1 << 29), device=dev, dtype=torch.float16)  # 1 GiB

    def flush():
        flush_buf.zero_()

    dt = torch.bfloat16
    sizes = [(64, 128)] if smoke else [(8192, 8192), (8192, 2816), (8192, 3072), (4096, 4096)]
    for T, f in sizes:
        fused = torch.randn(T, 2 * f, device=dev, dtype=dt)
        gate, up = fused[:, :f], fused[:, f:]
        gc, uc = gate.contiguous(), up.contiguous()
        e = T * f
        for variant, g, u in (("strided", gate, up), ("contiguous", gc, uc)):
            t = timed(lambda g=g: F.silu(g), reps, dev)
            out.row(kind="mem", name="silu", m=T, n=f, time_s=t, bytes=4 * e, variant=variant, n_samples=reps)
            sg = F.silu(g)
            t = timed(lambda sg=sg, u=u: sg * u, reps, dev)
            out.row(kind="mem", name="mul", m=T, n=f, time_s=t, bytes=6 * e, variant=variant, n_samples=reps)
            go = torch.randn(T, f, device=dev, dtype=dt)
            t = timed(lambda g=g, go=go: torch.ops.aten.silu_backward(go, g), reps, dev)
            out.row(kind="mem", name="silu_bwd", m=T, n=f, time_s=t, bytes=6 * e, variant=variant, n_samples=reps)
            log(f"swiglu parts {T}x{f} {variant} done")
        del fused, gate, up, gc, uc, go, sg
    # weight casts, cold vs warm
    for rows, cols in ([(64, 64)] if smoke else [(768, 3072), (2048, 2048), (2048, 8192), (4096, 14336)]):
        w = torch.randn(rows, cols, device=dev, dtype=torch.float32)
        for variant, before in (("warm", None), ("cold", flush)):
            t = timed(lambda w=w: w.to(torch.bfloat16), reps, dev, before)
            out.row(kind="mem", name="cast_fp32_bf16", m=rows, n=cols, time_s=t, bytes=6 * rows * cols,
                    variant=variant, n_samples=reps)
        log(f"cast {rows}x{cols} done")
        del w
    # norms forward / backward (autograd, bf16 activations, fp32 weight as under autocast)
    for T, h in ([(64, 64)] if smoke else [(8192, 768), (8192, 1024), (8192, 2048), (8192, 4096)]):
        for name in ("rms_norm", "layer_norm"):
            x = torch.randn(T, h, device=dev, dtype=dt, requires_grad=True)
            w = torch.ones(h, device=dev, dtype=dt, requires_grad=True)
            if name == "rms_norm":
                def fn(x=x, w=w, h=h):
                    return F.rms_norm(x, (h,), w)
            else:
                bias = torch.zeros(h, device=dev, dtype=dt, requires_grad=True)

                def fn(x=x, w=w, h=h, bias=bias):
                    return F.layer_norm(x, (h,), w, bias)
            t = timed(fn, reps, dev)
            out.row(kind="mem", name=name, m=T, n=h, time_s=t, bytes=4 * T * h, variant="fwd", n_samples=reps)
            y = fn()
            go = torch.randn_like(y)

            def bwd(y=y, go=go, x=x, w=w):
                return torch.autograd.grad(y, (x, w), go, retain_graph=True)

            t = timed(bwd, reps, dev)
            out.row(kind="mem", name=name, m=T, n=h, time_s=t, bytes=6 * T * h, variant="bwd", n_samples=reps)
        log(f"norms {T}x{h} done")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        log("needs a GPU")
        return
    dev = torch.device("cuda")
    log("env", env_info(dev))
    out = CsvOut(args.out, COLS)
    t0 = time.time()
    mem_ops(out, dev, args.reps, args.smoke)
    gemm_duty(out, dev, 0.05 if args.smoke else args.seconds, args.smoke)
    out.close()
    log(f"done {out.n} rows in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
