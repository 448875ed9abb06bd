"""One MoE feed-forward layer on one GPU, Megatron-style, timed at several token counts.

The layer (bf16, as in Megatron-Core's MoE with the all-to-all token dispatcher, without the
all-to-all since all experts are local): router GEMM -> fp32 softmax -> top-k -> tokens per expert
(optionally copied to the host, the device-to-host sync Megatron's dispatcher makes for its split
sizes) -> permutation (argsort of the expert ids, gather of the token rows) -> grouped GEMM (gate+up,
torch._grouped_mm) -> SwiGLU -> grouped GEMM (down) -> weighted un-permutation (index_add_) ->
output. Forward and forward+backward are timed with CUDA events (median of repeated calls), and
the host time of the forward call with perf_counter. Shapes: Qwen3-30B-A3B's MoE layer (h 2048,
128 experts, top 8, expert width 768), a DeepSeek-V3 rank at EP 8 (h 7168, 32 local experts of
width 2048, each token sending 1 of its 8 choices here on average: top 1 of 32), Mixtral's (h 4096,
8 experts, top 2, width 14336).

  python tools/bench_moe.py --out moe.csv [--smoke]
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
from benchutil import CsvOut, env_info, log, measure, sync  # noqa: E402

COLS = ["layer", "hidden", "experts", "top_k", "expert_ffn", "tokens", "sync", "grouped",
        "fwd_s", "fwd_bwd_s", "fwd_host_s", "n"]

LAYERS = {
    "qwen3-30b-a3b": (2048, 128, 8, 768),
    "deepseek-v3-ep8-rank": (7168, 32, 1, 2048),
    "mixtral-8x7b": (4096, 8, 2, 14336),
}


class MoE(torch.nn.Module):
    def __init__(self, h, experts, top_k, ffn, grouped, sync_counts, dev):
        super().__init__()
        self.E, self.k, self.f = experts, top_k, ffn
        self.grouped, self.sync_counts = grouped, sync_counts
        kw = dict(device=dev, dtype=torch.bfloat16)
        self.router = torch.nn.Parameter(torch.randn(h, experts, **kw) * 0.02)
        # stored [E, N, K] (each expert's weight as nn.Linear keeps it); the grouped GEMM takes the
        # [E, K, N] view, column-major per expert, as torch._grouped_mm wants it on Hopper
        self.w1 = torch.nn.Parameter(torch.randn(experts, 2 * ffn, h, **kw) * 0.02)
        self.w2 = torch.nn.Parameter(torch.randn(experts, h, ffn, **kw) * 0.02)

    def forward(self, x):
        T, h = x.shape
        logits = x @ self.router
        probs = torch.softmax(logits.float(), dim=-1)
        topv, topi = torch.topk(probs, self.k, dim=-1)
        flat = topi.reshape(-1)
        counts = torch.bincount(flat, minlength=self.E)
        if self.sync_counts:
            counts.cpu()  # Megatron's dispatcher needs the split sizes on the host
        order = torch.argsort(flat, stable=True)
        rows = order // self.k
        xp = x.index_select(0, rows)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        if self.grouped:
            a = torch._grouped_mm(xp, self.w1.transpose(-2, -1), offs=offs)
            g, u = a.chunk(2, dim=-1)
            y = torch._grouped_mm((F.silu(g) * u).contiguous(), self.w2.transpose(-2, -1), offs=offs)
        else:
            outs, start = [], 0
            for e, c in enumerate(counts.tolist()):
                a = xp[start:start + c] @ self.w1[e].t()
                g, u = a.chunk(2, dim=-1)
                outs.append((F.silu(g) * u) @ self.w2[e].t())
                start += c
            y = torch.cat(outs)
        w = topv.reshape(-1).index_select(0, order).to(y.dtype)
        out = torch.zeros_like(x).index_add_(0, rows, y * w[:, None])
        return out


def timed(fn, n, dev):
    sync(dev)
    return measure(fn, n, dev)


def profile_layers(args, dev):
    import gzip
    import shutil

    from torch.profiler import ProfilerActivity, profile

    os.makedirs(args.profile_dir, exist_ok=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    layers = {"tiny": (64, 8, 2, 32)} if args.smoke else LAYERS
    T = 256 if args.smoke else args.profile_tokens
    for name, (h, E, k, f) in layers.items():
        torch.manual_seed(0)
        m = MoE(h, E, k, f, dev.type == "cuda", True, dev)
        x = torch.randn(T, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
        for _ in range(2):
            m(x).sum().backward()
        sync(dev)
        with profile(activities=acts, record_shapes=True) as prof:
            for _ in range(3):
                m(x).sum().backward()
            sync(dev)
        path = os.path.join(args.profile_dir, f"profile_moe_{name}_t{T}.json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as a, gzip.open(path + ".gz", "wb", compresslevel=9) as b:
            shutil.copyfileobj(a, b)
        os.remove(path)
        log("trace", path + ".gz", os.path.getsize(path + ".gz"))
        del m, x
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--profile-dir", default=None,
                    help="only record a profiler trace of 3 forward+backward calls per layer "
                         "(grouped, with the sync) at --profile-tokens, then stop")
    ap.add_argument("--profile-tokens", type=int, default=8192)
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    log("env", env_info(dev))
    if args.profile_dir:
        profile_layers(args, dev)
        return
    out = CsvOut(args.out, COLS)
    t0 = time.time()
    token_counts = (256, 1024) if args.smoke else (1024, 2048, 4096, 8192, 16384, 32768)
    layers = {"tiny": (64, 8, 2, 32)} if args.smoke else LAYERS
    for name, (h, E, k, f) in layers.items():
        for grouped in (True, False):
            for sync_counts in ((True, False) if grouped else (True,)):
                torch.manual_seed(0)
                try:
                    m = MoE(h, E, k, f, grouped and dev.type == "cuda", sync_counts, dev)
                except Exception as e:  # noqa: BLE001
                    log("ERROR build", name, repr(e)[:200])
                    continue
                for T in token_counts:
                    if time.time() - t0 > args.budget:
                        log("budget reached")
                        out.close()
                        return
                    try:
                        x = torch.randn(T, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

                        def fwd():
                            with torch.no_grad():
                                return m(x)

                        def fwd_bwd():
                            m(x).sum().backward()

                        for _ in range(2):
                            fwd_bwd()
                        n = 3 if args.smoke else 10
                        tf = statistics.median(timed(fwd, n, dev) for _ in range(3))
                        tb = statistics.median(timed(fwd_bwd, n, dev) for _ in range(3))
                        hs = []
                        for _ in range(n):
                            sync(dev)
                            a = time.perf_counter()
                            fwd()
                            hs.append(time.perf_counter() - a)
                        sync(dev)
                        out.row(layer=name, hidden=h, experts=E, top_k=k, expert_ffn=f, tokens=T,
                                sync=sync_counts, grouped=grouped, fwd_s=tf, fwd_bwd_s=tb,
                                fwd_host_s=statistics.median(hs), n=n)
                        log(f"{name} T={T} grouped={grouped} sync={sync_counts}: fwd {tf * 1e3:.3f} ms "
                            f"fwd+bwd {tb * 1e3:.3f} ms host {statistics.median(hs) * 1e3:.3f} ms")
                        del x
                    except Exception as e:  # noqa: BLE001
                        log("ERROR", name, T, grouped, repr(e)[:300])
                        if dev.type == "cuda":
                            torch.cuda.empty_cache()
                del m
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
    out.close()
    log(f"done {out.n} rows in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
