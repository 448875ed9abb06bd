"""Operator micro-benchmarks for calibrating simcore's compute / memory / launch models.

Writes one CSV (gzip it afterwards) with the columns
  kind,dtype,m,n,k,batch,heads,kv_heads,seq,kv_seq,head_dim,causal,backward,name,bytes,time_s,flops,framework
kind: gemm | attention | memory | launch.  Conventions are in traces/README.md.

  python tools/bench_ops.py --out ops.csv                 # on a GPU
  python tools/bench_ops.py --smoke --out /tmp/ops.csv    # tiny sizes on CPU (tests the script)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, fp8_gemm, log, measure, sync, time_eager, time_graph  # noqa: E402

COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim",
        "causal", "backward", "name", "bytes", "time_s", "flops", "framework"]

ESZ = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4, "fp8": 1}
TDT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
GRAPH_BELOW = 50e-6  # also time with a CUDA graph when eager time per call is below this


class Bench:
    def __init__(self, args):
        self.args = args
        self.smoke = args.smoke
        self.dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
        self.out = CsvOut(args.out, COLS)
        self.errors = 0
        self.target = 0.002 if self.smoke else 0.01

    # ------------------------------------------------------------------ helpers
    def record(self, fn, graph_ok=True, **row):
        """Time fn eagerly (and in a CUDA graph when it is short) and write rows."""
        t, n, spread = time_eager(fn, self.dev, target=self.target, reps=3 if self.smoke else 5)
        self.out.row(time_s=t, framework="eager", **row)
        if graph_ok and self.dev.type == "cuda" and t < GRAPH_BELOW:
            try:
                n_inner = int(min(200, max(20, 2e-3 / t)))
                tg = time_graph(fn, self.dev, n_inner)
                self.out.row(time_s=tg, framework="cuda_graphs", **row)
            except Exception as e:  # noqa: BLE001
                log("  graph timing failed:", repr(e)[:200])
        return t

    def guarded(self, label, f, *a, **kw):
        try:
            return f(*a, **kw)
        except torch.cuda.OutOfMemoryError as e:
            log("OOM", label, repr(e)[:120])
        except Exception as e:  # noqa: BLE001
            self.errors += 1
            log("ERROR", label, repr(e)[:300])
        finally:
            pass
        gc.collect()
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()
        return None

    def rand(self, *shape, dtype=torch.bfloat16, requires_grad=False):
        x = torch.randn(*shape, device=self.dev, dtype=torch.float32 if dtype.itemsize == 1 else dtype)
        if dtype.itemsize == 1:
            x = x.to(dtype)
        if requires_grad:
            x.requires_grad_(True)
        return x

    # ------------------------------------------------------------------ GEMM
    def gemm_point(self, dt, m, n, k, batch=None, scaling="tensor"):
        dev = self.dev
        if dt == "fp8":
            fn, name = fp8_gemm(m, n, k, dev, scaling)
            out_sz = 2
        else:
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            tdt = TDT[dt]
            if batch:
                a = self.rand(batch, m, k, dtype=tdt)
                b = self.rand(batch, k, n, dtype=tdt)
                name = "bmm"
            else:
                a = self.rand(m, k, dtype=tdt)
                b = self.rand(k, n, dtype=tdt)
                name = "matmul"

            def fn():
                return torch.matmul(a, b)

            out_sz = ESZ[dt]
        fn()
        bt = batch or 1
        nbytes = bt * ((m * k + k * n) * ESZ[dt] + m * n * out_sz)
        self.record(fn, kind="gemm", dtype=dt, m=m, n=n, k=k, batch=batch, name=name, bytes=nbytes,
                    flops=2 * bt * m * n * k, backward=0)
        torch.backends.cuda.matmul.allow_tf32 = False

    def gemm_points(self):
        pts = []  # (dtype, m, n, k, batch, scaling)
        if self.smoke:
            for dt in ["bf16", "fp16", "tf32", "fp32", "fp8"]:
                pts += [(dt, 64, 64, 64, None, "tensor"), (dt, 32, 48, 64, None, "row")]
            pts += [("bf16", 33, 65, 17, None, "tensor"), ("bf16", 32, 32, 32, 4, "tensor")]
            return pts
        squares = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
        # 1. squares, all dtypes
        for s in squares:
            for dt in ["bf16", "fp16", "fp8", "tf32", "fp32"]:
                if dt == "fp32" and s > 8192:
                    continue  # fp32 (no tf32) at 16k^3 takes ~0.2 s per call; 8k is enough for the curve
                pts.append((dt, s, s, s, None, "tensor"))
            pts.append(("fp8", s, s, s, None, "row"))
        # 2. transformer shapes: (n, k) for qkv / proj / fc1 / fc2 of common hidden sizes
        nk = []
        for h, f in [(1024, 4096), (2048, 8192), (4096, 14336), (5120, 13824), (8192, 28672)]:
            nk += [(3 * h, h), (h, h), (f, h), (h, f)]
        nk += [(2 * 14336, 4096), (6144, 4096), (4096 + 2 * 1024, 4096), (32000, 4096), (128256, 4096),
               (50304, 2048)]
        for m in [512, 2048, 8192, 32768]:
            for n, k in nk:
                if m * n > 32768 * 32768:
                    continue
                pts.append(("bf16", m, n, k, None, "tensor"))
                if m in (2048, 8192):
                    pts.append(("fp8", m, n, k, None, "row"))
                    pts.append(("fp16", m, n, k, None, "tensor"))
        for m in [1024, 4096, 16384]:  # extra token counts on a couple of shapes for the m-curve
            for n, k in [(4096, 4096), (14336, 4096), (4096, 14336)]:
                pts.append(("bf16", m, n, k, None, "tensor"))
        # 3. skinny decode shapes
        for m in [1, 2, 4, 8, 16, 32, 64, 128, 256]:
            for n, k in [(4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (28672, 4096),
                         (8192, 8192), (128256, 4096)]:
                pts.append(("bf16", m, n, k, None, "tensor"))
            for n, k in [(4096, 4096), (14336, 4096)]:
                pts.append(("fp8", m, n, k, None, "row"))
        # 4. awkward sizes
        odd = [(1000, 1000, 1000), (3001, 3001, 3001), (4095, 4095, 4095), (4097, 4097, 4097),
               (1000, 4096, 4096), (2047, 5120, 5120), (8191, 8191, 8191), (4096, 4096, 4000),
               (4096, 11008, 4096), (3000, 12288, 4096), (1023, 1023, 1023), (5000, 5000, 5000)]
        for m, n, k in odd:
            for dt in ["bf16", "fp16", "tf32"]:
                pts.append((dt, m, n, k, None, "tensor"))
        # 5. batched
        for b in [8, 32, 64]:
            for s in [512, 1024, 2048]:
                pts.append(("bf16", s, s, s, b, "tensor"))
        # 6. a few fp32 transformer shapes
        for m in [2048, 8192]:
            for n, k in [(4096, 4096), (14336, 4096)]:
                pts.append(("fp32", m, n, k, None, "tensor"))
                pts.append(("tf32", m, n, k, None, "tensor"))
        return pts

    def run_gemm(self, deadline):
        pts = self.gemm_points()
        log(f"gemm: {len(pts)} points")
        for i, (dt, m, n, k, b, sc) in enumerate(pts):
            if time.time() > deadline:
                log(f"gemm: deadline reached after {i} points")
                return
            self.guarded(f"gemm {dt} {m}x{n}x{k} b={b}", self.gemm_point, dt, m, n, k, b, sc)
            if i % 50 == 0:
                log(f"gemm {i}/{len(pts)} rows={self.out.n}")

    # ------------------------------------------------------------------ attention
    def attn_point(self, b, h, kvh, s, skv, d, causal, bwd):
        from gpt import SDPA_STATE, sdpa_ctx

        dt = torch.bfloat16
        q = self.rand(b, h, s, d, dtype=dt)
        k = self.rand(b, kvh, skv, d, dtype=dt)
        v = self.rand(b, kvh, skv, d, dtype=dt)
        gqa = kvh != h
        name = "sdpa_flash" if self.dev.type == "cuda" else "sdpa_cpu"
        if gqa and SDPA_STATE["gqa_mode"] == "repeat":
            name += "_gqa_repeat"
            k = k.repeat_interleave(h // kvh, dim=1)
            v = v.repeat_interleave(h // kvh, dim=1)
            gqa = False
        kw = {"enable_gqa": True} if gqa else {}
        frac = 0.5 if causal else 1.0
        fl = 4 * b * h * s * skv * d * frac
        row = dict(kind="attention", dtype="bf16", batch=b, heads=h, kv_heads=kvh, seq=s, kv_seq=skv,
                   head_dim=d, causal=int(causal))
        qo_bytes = 2 * b * h * s * d * 2
        kv_bytes = 2 * b * kvh * skv * d * 2
        with sdpa_ctx():
            def fwd():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)

            fwd()
            self.record(fwd, backward=0, name=name, bytes=qo_bytes + kv_bytes, flops=fl, **row)
            if bwd:
                for t in (q, k, v):
                    t.requires_grad_(True)
                out = fwd()
                go = torch.randn_like(out)

                def bwdfn():
                    return torch.autograd.grad(out, (q, k, v), go, retain_graph=True)

                # backward: reads q,k,v,o,dO (+lse), writes dq,dk,dv
                self.record(bwdfn, graph_ok=False, backward=1, name=name, bytes=2 * qo_bytes + 2 * kv_bytes,
                            flops=2.5 * fl, **row)

    def attn_points(self):
        P = []  # (b, h, kvh, s, skv, d, causal, bwd)
        if self.smoke:
            P += [(1, 4, 4, 64, 64, 32, c, True) for c in (False, True)]
            P += [(2, 4, 2, 64, 64, 32, True, True), (2, 4, 2, 1, 128, 32, False, False)]
            return P
        # seq sweep at roughly constant tokens, per head_dim
        for d, hs in [(128, (16, 32)), (64, (32, 64)), (256, (8, 16))]:
            for s in [256, 512, 1024, 2048, 4096, 8192, 16384]:
                b = max(1, min(32, 16384 // s))
                for h in hs:
                    for c in (True, False):
                        P.append((b, h, h, s, s, d, c, True))
        # batch sweep
        for b in [1, 2, 4, 8, 16, 32]:
            P.append((b, 32, 32, 2048, 2048, 128, True, True))
        # heads sweep
        for h in [8, 16, 48, 64]:
            P.append((4, h, h, 4096, 4096, 128, True, True))
        # GQA
        for kvh in [8, 4, 1]:
            for s, b in [(1024, 8), (4096, 2), (8192, 1)]:
                P.append((b, 32, kvh, s, s, 128, True, True))
        P.append((1, 64, 8, 16384, 16384, 128, True, True))
        # decode: one query over a kv cache
        for kvh in [32, 8]:
            for skv in [256, 1024, 4096, 8192, 16384, 32768]:
                for b in [1, 8, 32, 128, 256]:
                    if b * skv * kvh * 128 * 2 * 2 > 8e9:
                        continue
                    P.append((b, 32, kvh, 1, skv, 128, False, False))
        return P

    def run_attention(self, deadline):
        pts = self.attn_points()
        log(f"attention: {len(pts)} points")
        for i, p in enumerate(pts):
            if time.time() > deadline:
                log(f"attention: deadline reached after {i} points")
                return
            self.guarded(f"attn {p}", self.attn_point, *p)
            if i % 25 == 0:
                log(f"attention {i}/{len(pts)} rows={self.out.n}")

    # ------------------------------------------------------------------ memory-bound
    def mem_sizes(self):
        if self.smoke:
            return [64 << 10, 256 << 10]
        return [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 2 << 30]

    def mem_row(self, name, dt, fn, nbytes, m, n, k=None, batch=None, bwd=None, bwd_bytes=None, graph_ok=True,
                kind="memory"):
        base = dict(kind=kind, dtype=dt, m=m, n=n, k=k, batch=batch, name=name)
        fn()
        self.record(fn, graph_ok=graph_ok, backward=0, bytes=nbytes, **base)
        if bwd is not None:
            bwd()
            self.record(bwd, graph_ok=False, backward=1, bytes=bwd_bytes, **base)

    def _fwd_bwd(self, f, inputs):
        """Return (fwd, bwd) closures; bwd = autograd.grad over one retained forward graph."""
        def fwd():
            with torch.no_grad():
                return f(*inputs)

        for t in inputs:
            if t.is_floating_point():
                t.requires_grad_(True)
        out = f(*inputs)
        go = torch.randn_like(out) if out.dim() > 0 else torch.ones_like(out)
        req = [t for t in inputs if t.requires_grad]

        def bwd():
            return torch.autograd.grad(out, req, go, retain_graph=True)

        return fwd, bwd

    def run_memory(self, deadline):
        sizes = self.mem_sizes()
        W = 4096 if not self.smoke else 256
        ops = []  # closures that each run one point

        def elementwise(name, dtname, nbytes):
            dt = TDT[dtname]
            e = ESZ[dtname]
            N = nbytes // e
            rows = N // W
            a = self.rand(rows, W, dtype=dt)
            if name == "add":
                b = self.rand(rows, W, dtype=dt)
                self.mem_row(name, dtname, lambda: a + b, 3 * N * e, rows, W)
            elif name == "mul":
                b = self.rand(rows, W, dtype=dt)
                self.mem_row(name, dtname, lambda: a * b, 3 * N * e, rows, W)
            elif name in ("gelu", "silu"):
                f = F.gelu if name == "gelu" else F.silu
                fwd, bwd = self._fwd_bwd(f, [a])
                self.mem_row(name, dtname, fwd, 2 * N * e, rows, W, bwd=bwd, bwd_bytes=3 * N * e)
            elif name == "swiglu":
                b = self.rand(rows, W, dtype=dt)
                fwd, bwd = self._fwd_bwd(lambda x, y: F.silu(x) * y, [a, b])
                self.mem_row("swiglu_eager", dtname, fwd, 3 * N * e, rows, W, bwd=bwd, bwd_bytes=5 * N * e)
            elif name == "dropout":
                self.mem_row("dropout_p0.1", dtname, lambda: F.dropout(a, 0.1, training=True), 2 * N * e + N,
                             rows, W)
            elif name == "copy":
                b = torch.empty_like(a)
                self.mem_row("copy", dtname, lambda: b.copy_(a), 2 * N * e, rows, W)
            elif name == "cast_to_bf16":
                b = torch.empty(rows, W, device=self.dev, dtype=torch.bfloat16)
                self.mem_row("copy_cast_fp32_to_bf16", dtname, lambda: b.copy_(a), N * (e + 2), rows, W)

        for nbytes in sizes:
            for name, dts in [("add", ["bf16", "fp32"]), ("mul", ["bf16"]), ("gelu", ["bf16"]),
                              ("silu", ["bf16"]), ("swiglu", ["bf16"]), ("dropout", ["bf16"]),
                              ("copy", ["bf16", "fp32"]), ("cast_to_bf16", ["fp32"])]:
                for dtname in dts:
                    ops.append((f"{name} {dtname} {nbytes}", elementwise, (name, dtname, nbytes)))

        def rowwise(name, nbytes, H):
            dt = torch.bfloat16
            rows = max(1, nbytes // (2 * H))
            N = rows * H
            x = self.rand(rows, H, dtype=dt)
            w = torch.ones(H, device=self.dev, dtype=dt)
            if name == "softmax":
                fwd, bwd = self._fwd_bwd(lambda t: torch.softmax(t, dim=-1), [x])
            elif name == "layer_norm":
                bb = torch.zeros(H, device=self.dev, dtype=dt)
                fwd, bwd = self._fwd_bwd(lambda t, ww, b2: F.layer_norm(t, (H,), ww, b2), [x, w, bb])
            else:
                if hasattr(F, "rms_norm"):
                    f = lambda t, ww: F.rms_norm(t, (H,), ww, 1e-5)  # noqa: E731
                    name = "rms_norm"
                else:
                    f = lambda t, ww: (t.float() * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + 1e-5)  # noqa: E731
                                       ).to(t.dtype) * ww
                    name = "rms_norm_manual"
                fwd, bwd = self._fwd_bwd(f, [x, w])
            self.mem_row(name, "bf16", fwd, 2 * N * 2, rows, H, bwd=bwd, bwd_bytes=3 * N * 2)

        for nbytes in sizes:
            for name in ["softmax", "layer_norm", "rms_norm"]:
                ops.append((f"{name} {nbytes}", rowwise, (name, nbytes, W)))

        def xent(dtname, V, T):
            dt = TDT[dtname]
            e = ESZ[dtname]
            x = self.rand(T, V, dtype=dt)
            tgt = torch.randint(0, V, (T,), device=self.dev)
            fwd, bwd = self._fwd_bwd(lambda t: F.cross_entropy(t, tgt), [x])
            self.mem_row("cross_entropy", dtname, fwd, T * V * e + T * 8, T, V, bwd=bwd,
                         bwd_bytes=2 * T * V * e + T * 8)

        toks = [1, 4, 16, 64, 256, 1024, 4096, 8192] if not self.smoke else [1, 8]
        vocabs = [("bf16", 32000), ("bf16", 50304), ("bf16", 128256), ("fp32", 50304)]
        if self.smoke:
            vocabs = [("bf16", 1000), ("fp32", 500)]
        for T in toks:
            for dtname, V in vocabs:
                if T * V * ESZ[dtname] > (2 << 30) + (64 << 20):
                    continue
                ops.append((f"xent {dtname} V={V} T={T}", xent, (dtname, V, T)))

        def embed(dtname, V, H, T, bwd):
            dt = TDT[dtname]
            e = ESZ[dtname]
            table = self.rand(V, H, dtype=dt)
            idx = torch.randint(0, V, (T,), device=self.dev)
            if bwd:
                fwd, bwdf = self._fwd_bwd(lambda w: F.embedding(idx, w), [table])
                # fwd: gather T rows + indices; bwd (dense): zero-fill the V x H grad, read dY, scatter-add
                self.mem_row("embedding", dtname, fwd, 2 * T * H * e + 8 * T, T, H, k=V, bwd=bwdf,
                             bwd_bytes=V * H * e + 2 * T * H * e + 8 * T)
            else:
                self.mem_row("embedding", dtname, lambda: F.embedding(idx, table), 2 * T * H * e + 8 * T, T, H,
                             k=V)

        etoks = [1, 16, 256, 2048, 8192, 32768] if not self.smoke else [4, 64]
        for T in etoks:
            if self.smoke:
                ops.append((f"embed {T}", embed, ("bf16", 1000, 64, T, False)))
                ops.append((f"embed bwd {T}", embed, ("fp32", 1000, 64, T, True)))
            else:
                ops.append((f"embed {T}", embed, ("bf16", 128256, 4096, T, False)))
                ops.append((f"embed bwd {T}", embed, ("fp32", 50304, 2048, T, True)))

        def adamw(P, impl):
            chunk = 16 << 20 if not self.smoke else 1 << 14
            shapes = []
            left = P
            while left > 0:
                shapes.append(min(chunk, left))
                left -= shapes[-1]
            params = [torch.nn.Parameter(torch.randn(s, device=self.dev)) for s in shapes]
            for p in params:
                p.grad = torch.randn_like(p)
            kw = {"fused": True} if impl == "fused" else {"foreach": True}
            opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, **kw)
            opt.step()
            # reads p, g, m, v and writes p, m, v: 7 x 4 bytes per fp32 parameter
            self.mem_row(f"adamw_{impl}", "fp32", opt.step, 28 * P, P, None, batch=len(params), graph_ok=False,
                         kind="optimizer")

        pcs = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30] if not self.smoke else [1 << 12, 1 << 16]
        for P in pcs:
            for impl in ["fused", "foreach"]:
                ops.append((f"adamw {impl} {P}", adamw, (P, impl)))

        log(f"memory: {len(ops)} points")
        for i, (label, f, a) in enumerate(ops):
            if time.time() > deadline:
                log(f"memory: deadline reached after {i} points")
                return
            self.guarded(label, f, *a)
            gc.collect()
            if i % 25 == 0:
                log(f"memory {i}/{len(ops)} rows={self.out.n}")

    # ------------------------------------------------------------------ launch overhead
    def run_launch(self, deadline):
        dev = self.dev
        x = torch.zeros(1, device=dev)
        y = torch.zeros(1, device=dev)
        a16 = torch.randn(16, 16, device=dev)
        N = 5000 if not self.smoke else 200
        cases = [
            ("add_1elem_inplace", lambda: x.add_(1.0)),
            ("add_1elem_outofplace", lambda: torch.add(x, y)),
            ("matmul_16x16_fp32", lambda: torch.matmul(a16, a16)),
        ]
        import statistics

        for name, fn in cases:
            for _ in range(100):
                fn()
            sync(dev)
            walls = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(N):
                    fn()
                sync(dev)
                walls.append((time.perf_counter() - t0) / N)
            self.out.row(kind="launch", dtype="fp32", m=1, name=name, time_s=statistics.median(walls),
                         framework="eager", batch=N)
            # eager GPU-side time per op by CUDA events (= host issue rate when launch-bound)
            if dev.type == "cuda":
                ev = statistics.median(measure(fn, N, dev) for _ in range(5))
                self.out.row(kind="launch", dtype="fp32", m=1, name=name + "_events", time_s=ev,
                             framework="eager", batch=N)
                for n_inner in (100, 1000):
                    tg = time_graph(fn, dev, n_inner)
                    self.out.row(kind="launch", dtype="fp32", m=1, name=name, time_s=tg,
                                 framework="cuda_graphs", batch=n_inner)
        if dev.type == "cuda":
            # host cost of one graph replay (1 tiny kernel), and of synchronize on an idle device
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                x.add_(1.0)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                x.add_(1.0)
            for _ in range(100):
                g.replay()
            sync(dev)
            walls = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(1000):
                    g.replay()
                sync(dev)
                walls.append((time.perf_counter() - t0) / 1000)
            self.out.row(kind="launch", dtype="fp32", m=1, name="graph_replay_1kernel_wall",
                         time_s=statistics.median(walls), framework="cuda_graph_replay", batch=1000)
            walls = []
            for _ in range(200):
                t0 = time.perf_counter()
                torch.cuda.synchronize()
                walls.append(time.perf_counter() - t0)
            self.out.row(kind="launch", m=0, name="synchronize_idle_wall", time_s=statistics.median(walls),
                         framework="host_sync", batch=200)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="launch,gemm,attention,memory")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for all sections together")
    ap.add_argument("--env-json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    B = Bench(args)
    from gpt import probe_sdpa

    st = probe_sdpa(B.dev)
    info = env_info(B.dev)
    info["sdpa"] = dict(st)
    log("env", json.dumps(info))
    if args.env_json:
        with open(args.env_json, "w") as f:
            json.dump(info, f, indent=1)
    t0 = time.time()
    # share of the budget per section (a section that finishes early leaves time to the next ones)
    shares = {"launch": 0.03, "gemm": 0.35, "attention": 0.30, "memory": 0.32}
    secs = [s for s in args.only.split(",") if s]
    for i, s in enumerate(secs):
        rest = sum(shares[x] for x in secs[i:])
        left = args.budget - (time.time() - t0)
        deadline = time.time() + left * shares[s] / rest
        log(f"== {s} (until +{deadline - t0:.0f}s)")
        B.guarded(s, getattr(B, f"run_{s}"), deadline)
        gc.collect()
        if B.dev.type == "cuda":
            torch.cuda.empty_cache()
    B.out.close()
    log(f"done: {B.out.n} rows, {B.errors} errors, {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
