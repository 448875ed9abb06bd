"""Profiler traces of decode steps replayed from CUDA graphs (the kernels of a captured graph are
launched by one cudaGraphLaunch): the 4-layer Llama-like model of the committed inference trace
(h 1024, 16 q / 4 kv heads, SwiGLU 4096, RMSNorm, tied embeddings, vocab 128256, bf16), batch 4,
context 512: each profiled step is 8 decode steps, each one graph replay of one decode step (the
graph of position 512 replayed; the KV positions do not advance, as in a fixed-shape graph).

  python tools/bench_graph_trace.py --out-dir DIR [--smoke]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import capture_graph, log, sync  # noqa: E402
from gpt import GPT, GPTConfig, make_kv_caches, probe_sdpa  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    small = dict(layers=2 if args.smoke else 4, hidden=64 if args.smoke else 1024, heads=4 if args.smoke else 16)
    cfg = GPTConfig(**small, vocab=512 if args.smoke else 128256, kv_heads=small["heads"] // 4,
                    ffn_hidden=4 * small["hidden"], activation="swiglu", norm="rmsnorm", tied=True)
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    model.to(torch.bfloat16).eval()
    b, ctx, D = (2, 32, 4) if args.smoke else (4, 512, 8)
    caches = make_kv_caches(cfg, b, ctx + 1, dev)
    for kc, vc in caches:
        kc.normal_()
        vc.normal_()
    tok = torch.randint(0, cfg.vocab, (b, 1), device=dev)

    def step():
        with torch.no_grad():
            return model(tok, kv_caches=caches, pos=ctx, last_only=True).argmax(-1)

    if dev.type == "cuda":
        run = capture_graph(step).replay
    else:
        run = step
    for _ in range(3):
        run()
    sync(dev)
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(4):
            for _ in range(D):
                run()
            sync(dev)
            prof.step()
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "profile_decode_cuda_graphs.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as a, gzip.open(path + ".gz", "wb", compresslevel=9) as z:
        shutil.copyfileobj(a, z)
    os.remove(path)
    log("trace", path + ".gz", os.path.getsize(path + ".gz"))


if __name__ == "__main__":
    main()
