"""CUDA-graph decode loops: what a host synchronization every R replays costs, and the device idle
between the kernels of one replay.

A serving loop replays a captured decode step and waits for its tokens (a synchronize, a ``.cpu()``)
every step or every few steps; after each wait the GPU idles until the host has launched the next
graph. Inside a replay the kernels follow each other with a small device-side gap. Per model (decode
steps of ``tools/gpt.py`` models in bf16 with a KV cache, captured with ``benchutil.capture_graph``):

* ``bb``: 64 replays back to back, then one synchronize: device time per replay (the GPU is the
  bottleneck, so the wall time per replay is the replay's device time, gaps included);
* ``R`` in 1, 2, 8: R replays then a synchronize, repeated: wall time per iteration; the exposed cost of
  one synchronize is ``wall - R x bb``;
* each of these with and without ``torch.profiler`` (CPU + CUDA, ``record_shapes=True``), and one
  Chrome trace per model of two profiled iterations at R = 8 (``graph_<model>.json.gz``) from which the
  kernels' durations and gaps inside a replay are read.

  python tools/bench_graph_sync.py --outdir DIR [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, capture_graph, env_info, log, save_trace, sync  # noqa: E402
from gpt import GPT, GPTConfig, make_kv_caches, probe_sdpa  # noqa: E402

COLS = [
    "model",
    "layers",
    "hidden",
    "batch",
    "ctx",
    "profiled",
    "replays_per_sync",
    "iters",
    "wall_per_iter_s",
    "bb_per_replay_s",
]

# (name, arch, layers, hidden, batch, ctx)
MODELS = [
    ("gpt_L4_h768_b1", "gpt", 4, 768, 1, 256),
    ("gpt_L16_h768_b1", "gpt", 16, 768, 1, 256),
    ("llama_L8_h2048_b8", "llama", 8, 2048, 8, 1024),
]


def build(arch, layers, hidden, batch, ctx, dev, smoke):
    heads = 4 if smoke else hidden // 64 if hidden <= 1024 else hidden // 128
    kw = dict(layers=layers, hidden=64 if smoke else hidden, heads=heads, vocab=512 if smoke else 50304)
    if arch == "llama":
        kw.update(kv_heads=max(heads // 4, 1), activation="swiglu", norm="rmsnorm", tied=True)
    cfg = GPTConfig(**kw)
    cfg.seq_len = ctx + 1
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    model.to(torch.bfloat16).eval()
    caches = make_kv_caches(cfg, batch, ctx + 1, dev)
    for kc, vc in caches:
        kc.normal_()
        vc.normal_()
    tok = torch.randint(0, cfg.vocab, (batch, 1), device=dev)

    def step():
        with torch.no_grad():
            return model(tok, kv_caches=caches, pos=ctx, last_only=True).argmax(-1)

    return step


def timed(run, dev, R, iters):
    """Wall seconds per iteration of R replays and a synchronize."""
    for _ in range(3):
        for _ in range(R):
            run()
        sync(dev)
    t = time.perf_counter()
    for _ in range(iters):
        for _ in range(R):
            run()
        sync(dev)
    return (time.perf_counter() - t) / iters


def back_to_back(run, dev, n=64):
    sync(dev)
    t = time.perf_counter()
    for _ in range(n):
        run()
    sync(dev)
    return (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    os.makedirs(args.outdir, exist_ok=True)
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    out = CsvOut(os.path.join(args.outdir, "graph_sync.csv"), COLS)
    log("env", env_info(dev))
    for name, arch, L, h, b, ctx in MODELS:
        step = build(arch, 2 if args.smoke else L, h, b, 16 if args.smoke else ctx, dev, args.smoke)
        run = capture_graph(step).replay if dev.type == "cuda" else step
        iters = 5 if args.smoke else 40
        for profiled in (False, True):
            for passno in range(2):
                if profiled:
                    with profile(activities=acts, record_shapes=True):
                        bb = back_to_back(run, dev)
                        walls = {R: timed(run, dev, R, iters) for R in (1, 2, 8)}
                else:
                    bb = back_to_back(run, dev)
                    walls = {R: timed(run, dev, R, iters) for R in (1, 2, 8)}
                for R, w in walls.items():
                    out.row(
                        model=name,
                        layers=L,
                        hidden=h,
                        batch=b,
                        ctx=ctx,
                        profiled=int(profiled),
                        replays_per_sync=R,
                        iters=iters,
                        wall_per_iter_s=w,
                        bb_per_replay_s=bb,
                    )
                log(
                    f"{name} profiled={int(profiled)} pass {passno}: bb {bb * 1e6:.1f} us/replay; "
                    + ", ".join(
                        f"R={R}: {w * 1e6:.1f} us (sync {(w - R * bb) * 1e6:+.1f})" for R, w in walls.items()
                    )
                )
        # one trace: two profiled iterations of 8 replays + a synchronize
        with profile(
            activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2, repeat=1)
        ) as prof:
            for _ in range(4):
                for _ in range(8):
                    run()
                sync(dev)
                prof.step()
        save_trace(prof, os.path.join(args.outdir, f"graph_{name}.json.gz"))
        del run, step
        torch.cuda.empty_cache() if dev.type == "cuda" else None
    out.close()
    log("done")


if __name__ == "__main__":
    main()
