"""NCCL collective sweep through torch.distributed (one process per GPU).

  torchrun --nproc_per_node=2 tools/bench_comm.py --out nccl.csv
  torchrun --nproc_per_node=2 tools/bench_comm.py --smoke --out /tmp/nccl.csv   # gloo on CPU

Columns: op,dtype,nbytes,gpus,time_s,time_max_s,algbw,busbw,iters,reps,spread
nbytes follows nccl-tests: the larger of the send and receive buffer per rank (all_gather: the
gathered output; reduce_scatter: the input; send_recv: the message in one direction).
time_s: median over `reps` repeats of (CUDA-event time of `iters` back-to-back calls / iters), on rank 0,
after a barrier. time_max_s: the largest of the ranks' medians.
algbw = nbytes / time_s; busbw = algbw * factor, with nccl-tests' factors: all_reduce 2(n-1)/n;
all_gather, reduce_scatter and all_to_all (n-1)/n; broadcast, reduce, send_recv 1 (send_recv_bidir:
nbytes and busbw count one direction; both directions move twice that).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log  # noqa: E402

COLS = ["op", "dtype", "nbytes", "gpus", "time_s", "time_max_s", "algbw", "busbw", "iters", "reps", "spread"]
DT = {"bf16": torch.bfloat16, "fp32": torch.float32}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--max-bytes", type=float, default=4 * 2**30)
    args = ap.parse_args()

    cuda = torch.cuda.is_available() and not args.smoke
    rank = int(os.environ.get("RANK", 0))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    n = dist.get_world_size()
    peer = (rank + 1) % n
    prev = (rank - 1) % n
    out = CsvOut(args.out, COLS) if rank == 0 else None
    if rank == 0 and cuda:
        log("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "world", n)

    if args.smoke:
        sizes = [1 << 10, 1 << 14, 1 << 18]
    else:
        sizes = [1 << i for i in range(10, 29)] + [1 << 30, 1 << 32]  # 1 KiB..256 MiB, then 1 GiB, 4 GiB
    sizes = [s for s in sizes if s <= args.max_bytes]
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
           "send_recv", "send_recv_bidir"]
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
              "all_to_all": (n - 1) / n}

    def make(op, nbytes, dt):
        e = torch.tensor([], dtype=dt).element_size()
        N = nbytes // e
        N -= N % n
        if op == "all_reduce":
            x = torch.ones(N, device=dev, dtype=dt)
            return lambda: dist.all_reduce(x)
        if op == "all_gather":
            o = torch.empty(N, device=dev, dtype=dt)
            i = torch.ones(N // n, device=dev, dtype=dt)
            return lambda: dist.all_gather_into_tensor(o, i)
        if op == "reduce_scatter":
            i = torch.ones(N, device=dev, dtype=dt)
            o = torch.empty(N // n, device=dev, dtype=dt)
            return lambda: dist.reduce_scatter_tensor(o, i)
        if op == "broadcast":
            x = torch.ones(N, device=dev, dtype=dt)
            return lambda: dist.broadcast(x, src=0)
        if op == "reduce":
            x = torch.ones(N, device=dev, dtype=dt)
            return lambda: dist.reduce(x, dst=0)
        if op == "all_to_all":
            i = torch.ones(N, device=dev, dtype=dt)
            o = torch.empty(N, device=dev, dtype=dt)
            return lambda: dist.all_to_all_single(o, i)
        if op == "send_recv":  # rank 0 -> 1 (ring for n > 2: each rank sends to next, receives from prev)
            s = torch.ones(N, device=dev, dtype=dt)
            r = torch.empty(N, device=dev, dtype=dt)
            if n == 2:
                if rank == 0:
                    return lambda: dist.isend(s, 1).wait()
                return lambda: dist.irecv(r, 0).wait()

            def ring():
                for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer), dist.P2POp(dist.irecv, r, prev)]):
                    w.wait()
            return ring
        if op == "send_recv_bidir":
            s = torch.ones(N, device=dev, dtype=dt)
            r = torch.empty(N, device=dev, dtype=dt)

            def bidir():
                ws = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer), dist.P2POp(dist.irecv, r, prev)])
                for w in ws:
                    w.wait()
            return bidir
        raise ValueError(op)

    def timeit(fn, iters, reps):
        ts = []
        for _ in range(reps):
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()
            if cuda:
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(iters):
                    fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b) / 1e3 / iters)
            else:
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                ts.append((time.perf_counter() - t0) / iters)
        return ts

    t0 = time.time()
    stop = torch.zeros(1, device=dev)
    for op in ops:
        for dtn in ["bf16", "fp32"]:
            for nbytes in sizes:
                # rank 0 decides on the deadline so all ranks stop together
                stop.fill_(1.0 if (rank == 0 and time.time() - t0 > args.budget) else 0.0)
                dist.broadcast(stop, 0)
                if stop.item() > 0:
                    if rank == 0:
                        log("budget reached")
                    break
                if nbytes <= 1 << 20:
                    iters, reps, warm = 50, 7, 10
                elif nbytes <= 64 << 20:
                    iters, reps, warm = 20, 5, 5
                elif nbytes <= 1 << 30:
                    iters, reps, warm = 5, 5, 2
                else:
                    iters, reps, warm = 3, 3, 1
                if args.smoke:
                    iters, reps, warm = 3, 3, 1
                try:
                    fn = make(op, nbytes, DT[dtn])
                    for _ in range(warm):
                        fn()
                    ts = timeit(fn, iters, reps)
                    med = statistics.median(ts)
                    mx = torch.tensor([med], device=dev, dtype=torch.float64)
                    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
                    if rank == 0:
                        alg = nbytes / med
                        out.row(op=op, dtype=dtn, nbytes=nbytes, gpus=n, time_s=med, time_max_s=mx.item(),
                                algbw=alg, busbw=alg * factor.get(op, 1.0), iters=iters, reps=reps,
                                spread=(max(ts) - min(ts)) / med)
                        if nbytes in (1 << 10, 1 << 20, 1 << 26, 1 << 30) or args.smoke:
                            log(f"{op} {dtn} {nbytes} {med * 1e6:.1f}us busbw {alg * factor.get(op, 1) / 1e9:.1f}GB/s")
                except Exception as e:  # noqa: BLE001
                    log(f"rank{rank} ERROR {op} {dtn} {nbytes}: {repr(e)[:200]}")
                fn = None
                if cuda:
                    torch.cuda.empty_cache()
            else:
                continue
            break
    if out:
        out.close()
        log(f"done {out.n} rows in {time.time() - t0:.0f}s")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
