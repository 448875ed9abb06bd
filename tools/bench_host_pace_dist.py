"""Host pace of real profiled training steps under the distributed wrappers, with the CPU speed probe.

Round 23 (``bench_host_pace.py``) found a profiled eager layer's host time = a fixed number of
``aten::t`` durations (the CPU's per-op speed of the moment): backward 332, forward 152 for a GPT block.
This measures that number for each wrapper simcore models, on every rank, so that the wrappers' host
cost can be expressed in CPU-speed units (free of the machine's speed of the day):

* ``single``: a plain replica per rank (no communication); ``ddp``: DistributedDataParallel (25 MB
  buckets); ``fsdp``: FSDP2 ``fully_shard`` per block and root (bf16 params, fp32 reduce); ``tp``:
  Megatron-style tensor parallel over the 2 ranks (``tools/gpt.py``), all built by ``bench_parallel.py``;
* GPT (GELU, LayerNorm) and Llama-like (SwiGLU with fused gate/up, RMSNorm, GQA) blocks, 8 layers of
  width 1024, seq 1024, micro-batch 2, vocab 50304; fp32 params + autocast bf16, fused AdamW.

Each point: 2 warm-up steps, then 2 steps under the profiler (CPU + CUDA, ``record_shapes=True``) on
every rank; per rank the forward / backward host seconds per layer and the median ``aten::t`` /
``aten::view`` on the main and the backward thread (``bench_host_pace.paces``). Points interleave over
passes.

  torchrun --nproc_per_node=2 tools/bench_host_pace_dist.py --out pace_dist.csv [--passes 3] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_host_pace import paces  # noqa: E402
from bench_parallel import Ctx, build_fsdp, build_single_or_ddp, build_tp  # noqa: E402
from benchutil import CsvOut, log  # noqa: E402
from gpt import GPTConfig, probe_sdpa  # noqa: E402

COLS = ["pass", "rank", "arch", "strategy", "layers", "hidden", "seq_len", "micro_batch", "fwd_layer_s",
        "bwd_layer_s", "t_main_us", "t_bwd_us", "view_main_us", "view_bwd_us", "impl"]


def config(arch, smoke):
    kw = dict(layers=2 if smoke else 8, hidden=64 if smoke else 1024, heads=4 if smoke else 16,
              vocab=512 if smoke else 50304)
    if arch == "llama":
        kw.update(kv_heads=2 if smoke else 4, activation="swiglu", norm="rmsnorm")
    return GPTConfig(**kw)


def build(C, strategy, cfg, mb, seq):
    torch.manual_seed(0)
    if strategy in ("single", "ddp"):
        return build_single_or_ddp(C, cfg, mb, seq, strategy == "ddp")
    if strategy == "tp":
        return build_tp(C, cfg, mb, seq)
    return build_fsdp(C, cfg, mb, seq)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--budget", type=float, default=200.0)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    C = Ctx(args.smoke)
    probe_sdpa(C.dev)
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if C.cuda else [])
    seq, mb = (64, 1) if args.smoke else (1024, 2)
    out = CsvOut(args.out.replace(".csv", f"_rank{C.rank}.csv"), COLS)
    points = [(a, s) for a in ("gpt", "llama") for s in ("single", "ddp", "fsdp", "tp")]
    t0 = time.time()
    stop = torch.zeros(1, device=C.dev)
    for p in range(args.passes):
        for arch, strategy in points:
            stop.fill_(1.0 if (C.rank == 0 and time.time() - t0 > args.budget) else 0.0)
            dist.broadcast(stop, 0)
            if stop.item() > 0:
                log(f"rank{C.rank} budget reached")
                out.close()
                dist.destroy_process_group()
                return
            cfg = config(arch, args.smoke)
            cfg.seq_len = seq
            try:
                step, _total, _local, impl, model = build(C, strategy, cfg, mb, seq)
                for _ in range(2):
                    step()
                C.sync()
                dist.barrier()
                with profile(activities=acts, record_shapes=True) as prof:
                    for _ in range(2):
                        step()
                    C.sync()
                fl, bl, tm, tb, vm, vb = paces(prof.events())
                out.row(**{"pass": p}, rank=C.rank, arch=arch, strategy=strategy, layers=cfg.layers,
                        hidden=cfg.hidden, seq_len=seq, micro_batch=mb, fwd_layer_s=fl, bwd_layer_s=bl,
                        t_main_us=tm, t_bwd_us=tb, view_main_us=vm, view_bwd_us=vb, impl=impl)
                log(f"rank{C.rank} pass {p} {arch} {strategy}: per layer fwd {fl * 1e3:.3f} bwd {bl * 1e3:.3f} ms, "
                    f"aten::t main {tm:.1f} bwd {tb:.1f} us ({bl * 1e6 / tb:.0f} / {fl * 1e6 / tm:.0f} probes)")
                del step, model, prof
            except Exception as e:  # noqa: BLE001
                log(f"rank{C.rank} ERROR {arch} {strategy}: {repr(e)[:300]}")
            gc.collect()
            if C.cuda:
                torch.cuda.empty_cache()
            dist.barrier()
    out.close()
    log(f"rank{C.rank} done {out.n} rows in {time.time() - t0:.0f}s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
