"""Decode-regime micro-benchmarks: skinny GEMMs and decode attention with *cold* operands.

In a decode step every layer's weights (and its KV cache) were last touched a whole step ago, so
they stream from HBM; the sweep of ``bench_ops.py`` repeats one call on the same tensors, which a
60 MiB L2 keeps resident. Here each point is timed both ways, inside one CUDA graph of back-to-back
calls (the decode situation with CUDA graphs: no host launch gaps):

* ``hot``: every call reads the same operands (``cold=0``);
* ``cold``: the calls cycle through R copies of the streamed operand (weights for GEMMs, the KV cache
  for attention), R chosen so the copies together are >= 4 x the L2 size (``cold=1``).

GEMMs are ``F.linear(x[m,k], W[n,k])`` in bf16, as ``nn.Linear`` calls them in a model (the weight is
stored [n, k]: cuBLAS sees a transposed operand). Decode attention is
``F.scaled_dot_product_attention`` forced to the flash backend with ``enable_gqa=True`` over
``cache[:, :, :ctx]`` slices of a preallocated [batch, kv_heads, max_ctx, head_dim] cache, exactly as
``tools/gpt.py`` does in a decode step. Small decode-shaped memory-bound kernels (norms, SwiGLU halves
on chunked views, residual adds, KV-cache writes, argmax over logits) are timed hot in graphs.

Columns as ``ops.csv`` (traces/README.md) plus ``cold`` and ``reps`` (R); ``time_s`` is device time
per call (graph replay time / calls).

  python tools/bench_cold.py --out cold.csv            # on a GPU
  python tools/bench_cold.py --smoke --out /tmp/c.csv  # tiny sizes, CPU (tests the script)
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log  # noqa: E402

COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim",
        "causal", "backward", "name", "bytes", "time_s", "flops", "framework", "cold", "reps"]

# (name, n, k) of the Linear layers of real decoder models (weights [n, k])
LINEARS = [
    ("gpt1024_qkv", 3072, 1024), ("gpt1024_proj", 1024, 1024), ("gpt1024_fc1", 4096, 1024),
    ("gpt1024_fc2", 1024, 4096),
    ("l1b_qkv", 3072, 2048), ("l1b_o", 2048, 2048), ("l1b_gateup", 16384, 2048), ("l1b_down", 2048, 8192),
    ("l1b_lmhead", 128256, 2048),
    ("l3b_qkv", 5120, 3072), ("l3b_o", 3072, 3072), ("l3b_gateup", 16384, 3072), ("l3b_down", 3072, 8192),
    ("l3b_lmhead", 128256, 3072),
    ("l8b_qkv", 6144, 4096), ("l8b_o", 4096, 4096), ("l8b_gateup", 28672, 4096), ("l8b_down", 4096, 14336),
    ("l70b_qkv", 10240, 8192), ("l70b_o", 8192, 8192), ("l70b_down", 8192, 28672),
    ("odd_small", 1000, 1000), ("tiny", 512, 512), ("wide_k", 256, 16384),
]
M_ALL = [1, 2, 4, 8, 16, 32, 64, 128, 256]
M_FEW = [1, 4, 32, 256]
# (name, heads, kv_heads, head_dim)
ATTN = [("l1b", 32, 8, 64), ("l3b", 24, 8, 128), ("l8b", 32, 8, 128), ("mha16", 16, 16, 64)]
ATTN_B = [1, 4, 16, 64, 256]
ATTN_CTX = [256, 1024, 4096, 8192]


class Bench:
    def __init__(self, args):
        self.args = args
        self.smoke = args.smoke
        self.dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
        self.out = CsvOut(args.out, COLS)
        self.t_end = time.time() + args.budget
        self.l2 = 60 * 2**20
        if self.dev.type == "cuda":
            self.l2 = torch.cuda.get_device_properties(self.dev).L2_cache_size
        self.cold_bytes = (1 if self.smoke else 4) * self.l2
        self.errors = 0

    def left(self) -> float:
        return self.t_end - time.time()

    def reps_for(self, nbytes: int) -> int:
        """Copies needed so that they together exceed the cold threshold (at least 2)."""
        return int(max(2, min(512, -(-self.cold_bytes // max(nbytes, 1)))))

    def time_calls(self, calls, target: float = 3e-3) -> float:
        """Seconds per call of a list of closures run round-robin: in one CUDA graph on a GPU
        (median over 5 replays), plain loop on CPU."""
        n_calls = len(calls)
        if self.dev.type != "cuda":
            t0 = time.perf_counter()
            for c in calls:
                c()
            return (time.perf_counter() - t0) / n_calls
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for c in calls[: min(n_calls, 3)]:
                c()
        torch.cuda.current_stream().wait_stream(s)
        # estimate one pass, then repeat the list so a replay lasts ~target seconds
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for c in calls:
            c()
        b.record()
        b.synchronize()
        per_pass = max(a.elapsed_time(b) / 1e3, 1e-6)
        passes = int(max(1, min(64, target / per_pass)))
        if n_calls * passes > 4000:
            passes = max(1, 4000 // n_calls)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(passes):
                for c in calls:
                    c()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3 / (passes * n_calls))
        del g
        return statistics.median(ts)

    def guarded(self, label, f, *a):
        try:
            f(*a)
        except torch.cuda.OutOfMemoryError as e:
            log("OOM", label, repr(e)[:120])
        except Exception as e:  # noqa: BLE001
            self.errors += 1
            log("ERROR", label, repr(e)[:300])
        gc.collect()
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ GEMM
    def gemm_point(self, name: str, m: int, n: int, k: int) -> None:
        dt = torch.bfloat16
        w_bytes = n * k * 2
        r = self.reps_for(w_bytes)
        ws = [torch.randn(n, k, device=self.dev, dtype=dt) for _ in range(r)]
        x = torch.randn(m, k, device=self.dev, dtype=dt)
        nbytes = (m * k + n * k + m * n) * 2
        base = dict(kind="gemm", dtype="bf16", m=m, n=n, k=k, batch=1, name=f"linear_{name}", bytes=nbytes,
                    flops=2 * m * n * k, framework="cuda_graphs")
        hot = self.time_calls([lambda: F.linear(x, ws[0])] * r)
        self.out.row(time_s=hot, cold=0, reps=1, **base)
        cold = self.time_calls([lambda w=w: F.linear(x, w) for w in ws])
        self.out.row(time_s=cold, cold=1, reps=r, **base)
        del ws

    def gemms(self) -> None:
        lins = LINEARS if not self.smoke else [("tiny", 64, 32), ("wide_k", 16, 256)]
        for i, (name, n, k) in enumerate(lins):
            ms = M_ALL if (i % 2 == 0 or name.startswith("l1b")) else M_FEW
            for m in ms if not self.smoke else [1, 4]:
                if self.left() < self.args.reserve:
                    log("gemm: budget reached")
                    return
                self.guarded(f"gemm {name} m={m}", self.gemm_point, name, m, n, k)
            log(f"gemm {name} done ({self.left():.0f} s left)")

    # ------------------------------------------------------------------ decode attention
    def attn_point(self, name: str, b: int, h: int, kvh: int, d: int, ctx: int) -> None:
        dt = torch.bfloat16
        max_ctx = ctx + 64
        cache_bytes = 2 * b * kvh * max_ctx * d * 2
        r = self.reps_for(cache_bytes)
        caches = [(torch.randn(b, kvh, max_ctx, d, device=self.dev, dtype=dt),
                   torch.randn(b, kvh, max_ctx, d, device=self.dev, dtype=dt)) for _ in range(r)]
        q = torch.randn(b, h, 1, d, device=self.dev, dtype=dt)
        def ctxm():  # a fresh context manager per call (they are single-use)
            if self.dev.type == "cuda":
                return torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.FLASH_ATTENTION])
            return torch.enable_grad()

        def call(kc, vc):
            with ctxm():
                return F.scaled_dot_product_attention(q, kc[:, :, :ctx], vc[:, :, :ctx], enable_gqa=True)

        nbytes = (2 * b * h * d + 2 * b * kvh * ctx * d) * 2
        base = dict(kind="attention", dtype="bf16", batch=b, heads=h, kv_heads=kvh, seq=1, kv_seq=ctx,
                    head_dim=d, causal=0, backward=0, name=f"decode_{name}", bytes=nbytes,
                    flops=4 * b * h * ctx * d, framework="cuda_graphs")
        hot = self.time_calls([lambda: call(*caches[0])] * r)
        self.out.row(time_s=hot, cold=0, reps=1, **base)
        cold = self.time_calls([lambda c=c: call(*c) for c in caches])
        self.out.row(time_s=cold, cold=1, reps=r, **base)
        del caches

    def attention(self) -> None:
        cfgs = ATTN if not self.smoke else [("t", 4, 2, 16)]
        for name, h, kvh, d in cfgs:
            for b in ATTN_B if not self.smoke else [1, 2]:
                for ctx in ATTN_CTX if not self.smoke else [16]:
                    if b * ctx > 256 * 4096 and d == 128:
                        continue
                    if self.left() < self.args.reserve:
                        log("attention: budget reached")
                        return
                    self.guarded(f"attn {name} b={b} ctx={ctx}", self.attn_point, name, b, h, kvh, d, ctx)
            log(f"attention {name} done ({self.left():.0f} s left)")

    # ------------------------------------------------------------------ decode-sized memory ops
    def memops(self) -> None:
        dt = torch.bfloat16
        hiddens = [1024, 2048, 4096] if not self.smoke else [64]
        for hdim in hiddens:
            ffn = 4 * hdim
            for b in [1, 4, 16, 64, 256] if not self.smoke else [1, 2]:
                if self.left() < self.args.reserve:
                    log("memops: budget reached")
                    return
                x = torch.randn(b, 1, hdim, device=self.dev, dtype=dt)
                y = torch.randn(b, 1, hdim, device=self.dev, dtype=dt)
                wn = torch.ones(hdim, device=self.dev, dtype=dt)
                gu = torch.randn(b, 1, 2 * ffn, device=self.dev, dtype=dt)
                a, g = gu.chunk(2, dim=-1)
                kc = torch.zeros(b, 8, 512, 128, device=self.dev, dtype=dt)
                kv = torch.randn(b, 1, 8, 128, device=self.dev, dtype=dt).transpose(1, 2)
                e = 2
                ops = {
                    "rms_norm": (lambda: F.rms_norm(x, (hdim,), wn, 1e-5), 2 * b * hdim * e, b, hdim),
                    "layer_norm": (lambda: F.layer_norm(x, (hdim,), wn), 2 * b * hdim * e, b, hdim),
                    "add": (lambda: x + y, 3 * b * hdim * e, b, hdim),
                    "silu_chunk": (lambda: F.silu(a), 2 * b * ffn * e, b, ffn),
                    "mul_chunk": (lambda: a * g, 3 * b * ffn * e, b, ffn),
                    "gelu": (lambda: F.gelu(a), 2 * b * ffn * e, b, ffn),
                    "kv_write": (lambda: kc[:, :, 100:101].copy_(kv), 2 * b * 8 * 128 * e, b, 8 * 128),
                }
                for oname, (fn, nb, rows, rowlen) in ops.items():
                    def one(fn=fn, oname=oname, nb=nb, rows=rows, rowlen=rowlen):
                        t = self.time_calls([fn] * 50)
                        self.out.row(kind="memory", dtype="bf16", m=rows, n=rowlen, name=f"decode_{oname}",
                                     bytes=nb, time_s=t, framework="cuda_graphs", cold=0, reps=1)
                    self.guarded(f"mem {oname} h={hdim} b={b}", one)
        for vocab in [32000, 50304, 128256] if not self.smoke else [100]:
            for b in [1, 8, 64, 256] if not self.smoke else [1]:
                lg = torch.randn(b, vocab, device=self.dev, dtype=dt)

                def am(lg=lg, b=b, vocab=vocab):
                    t = self.time_calls([lambda: lg.argmax(-1)] * 20)
                    self.out.row(kind="memory", dtype="bf16", m=b, n=vocab, name="decode_argmax",
                                 bytes=b * vocab * 2 + 8 * b, time_s=t, framework="cuda_graphs", cold=0, reps=1)
                self.guarded(f"argmax {vocab} b={b}", am)
        log(f"memops done ({self.left():.0f} s left)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="gemm,attention,memory")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds for all sections together")
    ap.add_argument("--reserve", type=float, default=5.0, help="stop a section with this many seconds left")
    args = ap.parse_args()
    b = Bench(args)
    log("device", b.dev, "L2", b.l2, "cold set", b.cold_bytes)
    t0 = time.time()
    for sec in args.only.split(","):
        {"gemm": b.gemms, "attention": b.attention, "memory": b.memops}[sec]()
    b.out.close()
    log(f"done: {b.out.n} rows, {b.errors} errors, {time.time() - t0:.0f} s")
    return 1 if b.errors and b.out.n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
