"""Compute kernels beside NCCL collectives on another stream (round 21, 2 GPUs).

DDP and FSDP overlap gradient all-reduces / reduce-scatters with the backward: NCCL's kernels take
SMs and HBM bandwidth while the compute kernels run. For each compute op (GEMMs of training shapes,
memory-bound ops on training-size tensors), on every rank: its time alone (CUDA events around 20
back-to-back calls, after warm-up) and while a stream of all-reduces of ``--comm-mb`` MB keeps NCCL
busy on a second stream (the all-reduces are launched first, enough of them to cover the window);
and the all-reduce's own time alone and beside the compute op. Rank 0 writes the CSV.

  torchrun --nproc_per_node=2 tools/bench_overlap.py --out overlap.csv [--comm-mb 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log  # noqa: E402

COLS = ["op", "shape", "comm_op", "comm_bytes", "alone_s", "overlapped_s", "comm_alone_s", "comm_overlapped_s",
        "calls", "world"]


def timed(fn, n, stream):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        s.record()
        for _ in range(n):
            fn()
        e.record()
    return s, e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--comm-mb", type=float, default=64.0)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", 0))
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    world = dist.get_world_size()
    out = CsvOut(args.out, COLS) if rank == 0 else None
    comp = torch.cuda.current_stream()
    comm = torch.cuda.Stream()
    buf = torch.randn(int(args.comm_mb * 2**20 / 2), device=dev, dtype=torch.bfloat16)

    def allreduce():
        dist.all_reduce(buf)

    # the all-reduce alone
    for _ in range(3):
        allreduce()
    torch.cuda.synchronize()
    s, e = timed(allreduce, 10, comm)
    torch.cuda.synchronize()
    comm_alone = s.elapsed_time(e) / 1e3 / 10

    ops = {}
    for m, n, k in ((8192, 8192, 2048), (4096, 4096, 1024), (1024, 4096, 4096), (8192, 3072, 768)):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        ops[("mm", f"{m}x{n}x{k}")] = (lambda a=a, b=b: torch.mm(a, b))
    x = torch.randn(8192, 4096, device=dev, dtype=torch.bfloat16)
    y = torch.randn_like(x)
    w = torch.ones(4096, device=dev, dtype=torch.bfloat16)
    ops[("add", "8192x4096")] = lambda: x + y
    ops[("gelu", "8192x4096")] = lambda: F.gelu(x)
    ops[("layer_norm", "8192x4096")] = lambda: F.layer_norm(x, (4096,), w)
    for (name, shape), fn in ops.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = timed(fn, args.calls, comp)
        torch.cuda.synchronize()
        alone = s.elapsed_time(e) / 1e3 / args.calls
        # enough all-reduces to outlast the compute window (and a margin)
        n_comm = max(3, int(2.0 * alone * args.calls / max(comm_alone, 1e-6)) + 2)
        # every rank must launch the same number of collectives: agree on the largest
        nt = torch.tensor([n_comm], device=dev)
        dist.all_reduce(nt, op=dist.ReduceOp.MAX)
        n_comm = int(nt.item())
        dist.barrier()
        torch.cuda.synchronize()
        cs, ce = timed(allreduce, n_comm, comm)
        s, e = timed(fn, args.calls, comp)
        torch.cuda.synchronize()
        overl = s.elapsed_time(e) / 1e3 / args.calls
        comm_over = cs.elapsed_time(ce) / 1e3 / n_comm
        if out is not None:
            out.row(op=name, shape=shape, comm_op="all_reduce", comm_bytes=buf.numel() * 2, alone_s=alone,
                    overlapped_s=overl, comm_alone_s=comm_alone, comm_overlapped_s=comm_over, calls=args.calls,
                    world=world)
            log(f"{name} {shape}: alone {alone * 1e6:.1f} us, beside all-reduce {overl * 1e6:.1f} us "
                f"(x{overl / alone:.2f}); all-reduce {comm_alone * 1e3:.3f} -> {comm_over * 1e3:.3f} ms")
        time.sleep(0.2)
    if out is not None:
        out.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
