"""Whole profiled training steps under the distributed wrappers, on every rank, for the host time of
a layer and of the work outside the layers in CPU-speed units (round 25's method on 2 GPUs).

Per point (``bench_parallel.py``'s builders: a plain replica per rank, PyTorch DDP, FSDP2
``fully_shard`` per block and root, Megatron-style tensor parallel over the 2 ranks; GPT and Llama-like
blocks at 2 and 8 layers (default width 1024, 16 heads, seq 1024, micro-batch 2); fp32 parameters + autocast bf16,
fused AdamW), ``torch.profiler`` (CPU + CUDA, ``record_shapes=True``, schedule wait 1 / warm-up 1 /
active 2, ``prof.step()`` per step) writes one Chrome trace per rank (``<strategy>_<model>_rank<r>.json.gz``)
for ``python -m simcore.calibration.host_trace --steps --strategy``.

  torchrun --nproc_per_node=2 tools/bench_dist_steps.py --outdir DIR [--hidden H --seq S --mb B --tag T]
      [--budget S] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_host_pace_dist import build  # noqa: E402
from bench_parallel import Ctx  # noqa: E402
from benchutil import log, save_trace  # noqa: E402
from gpt import GPTConfig, probe_sdpa  # noqa: E402


def config(arch, layers, hidden, smoke):
    kw = dict(
        layers=2 if smoke else layers,
        hidden=64 if smoke else hidden,
        heads=4 if smoke else hidden // 64,
        vocab=512 if smoke else 50304,
    )
    if arch == "llama":
        kw.update(kv_heads=2 if smoke else 4, activation="swiglu", norm="rmsnorm")
    return GPTConfig(**kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--mb", type=int, default=2)
    ap.add_argument("--tag", default="", help="suffix of the trace names")
    ap.add_argument(
        "--rank0-only", action="store_true", help="profile rank 0 only (as bench_parallel.py does)"
    )
    ap.add_argument("--strategies", default="ddp,fsdp,tp,single")
    args = ap.parse_args()
    C = Ctx(args.smoke)
    probe_sdpa(C.dev)
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if C.cuda else [])
    seq, mb = (64, 1) if args.smoke else (args.seq, args.mb)
    os.makedirs(args.outdir, exist_ok=True)
    points = [(s, a, L) for s in args.strategies.split(",") for a in ("gpt", "llama") for L in (2, 8)]
    t0 = time.time()
    stop = torch.zeros(1, device=C.dev)
    done = {}
    for strategy, arch, L in points:
        stop.fill_(1.0 if (C.rank == 0 and time.time() - t0 > args.budget) else 0.0)
        dist.broadcast(stop, 0)
        if stop.item() > 0:
            log(f"rank{C.rank} budget reached")
            break
        name = f"{strategy}_{arch}_L{L}_h{args.hidden}{args.tag}"
        cfg = config(arch, L, args.hidden, args.smoke)
        cfg.seq_len = seq
        try:
            step, _total, _local, impl, model = build(C, strategy, cfg, mb, seq)
            for _ in range(2):
                step()
            C.sync()
            dist.barrier()
            if args.rank0_only and C.rank != 0:
                for _ in range(4):
                    step()
                C.sync()
                prof = None
            else:
                with profile(
                    activities=acts,
                    record_shapes=True,
                    schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                ) as prof:
                    for _ in range(4):
                        step()
                        prof.step()
                    C.sync()
                save_trace(prof, os.path.join(args.outdir, f"{name}_rank{C.rank}.json.gz"))
            done[name] = {
                **cfg.asdict(),
                "strategy": strategy,
                "impl": impl,
                "seq_len": seq,
                "micro_batch": mb,
            }
            log(f"rank{C.rank} {name} ({impl}) done at {time.time() - t0:.0f} s")
            del step, model, prof
        except Exception as e:  # noqa: BLE001
            log(f"rank{C.rank} ERROR {name}: {repr(e)[:300]}")
        gc.collect()
        if C.cuda:
            torch.cuda.empty_cache()
        dist.barrier()
    if C.rank == 0:
        with open(os.path.join(args.outdir, f"r28_points{args.tag}.json"), "w") as f:
            json.dump(done, f, indent=1)
    log(f"rank{C.rank} done {len(done)} points in {time.time() - t0:.0f} s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
