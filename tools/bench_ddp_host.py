"""Host time of PyTorch DDP's backward at real widths, from the profiler's CPU timeline (round 11).

`bench_host.py --dist` times DDP per layer as wall time, which at real widths includes the gradient
buckets' all-reduces. Here the host's own pace is read from the CPU timestamps of a profiler trace
(eager PyTorch never waits for the GPU inside a step): the same 6-layer GPT (tools/gpt.py, GELU,
LayerNorm, vocab 512, fp32 parameters, autocast bf16, 512 tokens, loss = logits.float().sum()), plain
and wrapped in DistributedDataParallel (defaults: 25 MB buckets, gradient_as_bucket_view=False),
at widths 1024, 1536 and 2048, each profiled for 2 steps (CPU + CUDA activities, record_shapes=True,
as the committed traces) after 3 warm-up steps. Rank 0 writes one Kineto trace per (width, variant):
`ddp_host_w<width>_<plain|ddp>.json.gz`.

  torchrun --nproc_per_node=2 tools/bench_ddp_host.py --out-dir OUT
  torchrun --nproc_per_node=2 tools/bench_ddp_host.py --smoke --out-dir /tmp/d      # gloo, CPU
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import log  # noqa: E402
from gpt import GPT, GPTConfig, probe_sdpa  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--widths", default="1024,1536,2048")
    args = ap.parse_args()
    cuda = torch.cuda.is_available() and not args.smoke
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=dev)
        probe_sdpa(dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    os.makedirs(args.out_dir, exist_ok=True)
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    widths = [int(w) for w in args.widths.split(",")] if not args.smoke else [64]
    seq = 512 if not args.smoke else 8
    for w in widths:
        for variant in ("plain", "ddp"):
            torch.manual_seed(0)
            cfg = GPTConfig(layers=6, hidden=w, heads=max(w // 128, 4), vocab=512, seq_len=seq)
            m = GPT(cfg).to(dev).train()
            if variant == "ddp":
                m = DDP(m, device_ids=[local] if cuda else None)
            x = torch.randint(0, 512, (1, seq), device=dev)

            def step() -> None:
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                    out = m(x)
                out.float().sum().backward()
                for p in m.parameters():
                    p.grad = None

            for _ in range(3):
                step()
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()
            with profile(activities=acts, record_shapes=True,
                         schedule=schedule(wait=0, warmup=1, active=2, repeat=1)) as prof:
                for _ in range(3):
                    step()
                    prof.step()
            if cuda:
                torch.cuda.synchronize()
            if rank == 0:
                tmp = os.path.join(args.out_dir, f"ddp_host_w{w}_{variant}.json")
                prof.export_chrome_trace(tmp)
                with open(tmp, "rb") as fi, gzip.open(tmp + ".gz", "wb", compresslevel=9) as fo:
                    shutil.copyfileobj(fi, fo)
                os.remove(tmp)
                log(f"width {w} {variant}: trace written")
            dist.barrier()
            del m
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
