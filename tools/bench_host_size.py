"""Does eager PyTorch host time per layer depend on the layer's width? (round 9)

`bench_host.py` measures host time per layer as the slope between 1- and 4-layer models of width 64
(the GPU then never bounds the step). This script measures the same slope at widths 64, 1536 and
4096 *in one process, interleaved* (each repeat visits every configuration in a shuffled order), so
process-to-process host speed differences (round 6: 2x) cancel in the comparison. Run it several
times (separate processes) for the spread between processes.

Configurations (tools/gpt.py, vocab 512 so the LM head stays small, batch 1):
* decode: bf16 parameters, eval, torch.no_grad() per call, one token at position 128 of a 256-slot
  KV cache, last_only logits + argmax (as bench_host.py / bench_steps.py decode);
* train: fp32 parameters, autocast bf16, forward + .float().sum().backward() over 8 tokens (as
  bench_host.py's per-layer training rows; no optimizer);
each at 1 and 4 layers, llama-like (swiglu, RMSNorm, GQA) and GPT-like (gelu, LayerNorm), with and
without the PyTorch profiler recording (CPU + CUDA activities, record_shapes=True).

Per point: host wall seconds per call = (perf_counter over n back-to-back calls, synchronize before
and after) / n, and the CUDA-event span of the same calls (equal to it when the host bounds the
loop). CSV columns: run,rep,mode,arch,hidden,layers,profiled,pinned,calls,host_s,event_s.

  python tools/bench_host_size.py --out host_size.csv --run 1 [--reps 5] [--budget 40]
  python tools/bench_host_size.py --smoke --out /tmp/hs.csv      # CPU, tiny
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log  # noqa: E402
from gpt import GPT, GPTConfig, make_kv_caches, probe_sdpa  # noqa: E402

COLS = ["run", "rep", "mode", "arch", "hidden", "layers", "profiled", "pinned", "calls", "host_s", "event_s"]
ARCH = {
    "llama": dict(activation="swiglu", norm="rmsnorm"),
    "gpt": dict(activation="gelu", norm="layernorm"),
}
# hidden -> (heads, kv_heads); head_dim 16 at width 64, 128 otherwise
HEADS = {64: (4, 2), 1024: (8, 2), 1536: (12, 4), 4096: (32, 8)}


def build(mode: str, arch: str, hidden: int, layers: int, dev: torch.device):
    heads, kvh = HEADS[hidden]
    extra = dict(ARCH[arch])
    if arch == "gpt":
        kvh = heads
    torch.manual_seed(0)
    cfg = GPTConfig(layers=layers, hidden=hidden, heads=heads, kv_heads=kvh, vocab=512, seq_len=256, **extra)
    m = GPT(cfg).to(dev)
    if mode == "decode":
        m = m.to(torch.bfloat16).eval()
        caches = make_kv_caches(cfg, 1, 256, dev)
        tok = torch.randint(0, 512, (1, 1), device=dev)

        def fn():
            with torch.no_grad():
                return m(tok, kv_caches=caches, pos=128, last_only=True).argmax(-1)

        return fn
    m.train()
    x = torch.randint(0, 512, (1, 8), device=dev)
    ac = dict(device_type=dev.type, dtype=torch.bfloat16)

    def fn():
        with torch.autocast(**ac):
            out = m(x)
        out.float().sum().backward()

    return fn


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--budget", type=float, default=40.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--pinned", default="", help="the CPU list the run was pinned to (taskset), recorded")
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    if dev.type == "cuda":
        probe_sdpa(dev)
    t_end = time.time() + args.budget
    out = CsvOut(args.out, COLS)
    widths = {"decode": [64, 1536, 4096], "train": [64, 1024]} if not args.smoke else {"decode": [64], "train": [64]}
    configs = []
    for mode, ws in widths.items():
        for arch in ("llama", "gpt"):
            for w in ws:
                for L in (1, 4):
                    for prof in (False, True):
                        if prof and w == 4096:
                            continue
                        configs.append((mode, arch, w, L, prof))
    fns = {}
    for c in configs:
        key = c[:4]
        if key not in fns:
            fns[key] = build(*key, dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    for fn in fns.values():  # warm-up: allocator, cuBLAS handles, autotuning
        for _ in range(3):
            fn()
    sync()
    rng = random.Random(args.run)
    n = args.calls if not args.smoke else 3
    for rep in range(args.reps):
        order = list(configs)
        rng.shuffle(order)
        for mode, arch, w, L, prof in order:
            if time.time() > t_end:
                log(f"budget reached in rep {rep}")
                out.close()
                return 0
            fn = fns[(mode, arch, w, L)]
            p = profile(activities=acts, record_shapes=True, with_stack=False) if prof else None
            if p is not None:
                p.__enter__()
            try:
                fn()
                sync()
                if dev.type == "cuda":
                    a = torch.cuda.Event(enable_timing=True)
                    b = torch.cuda.Event(enable_timing=True)
                    a.record()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                if dev.type == "cuda":
                    b.record()
                sync()
                host = (time.perf_counter() - t0) / n
                gpu = a.elapsed_time(b) / 1e3 / n if dev.type == "cuda" else ""
            finally:
                if p is not None:
                    p.__exit__(None, None, None)
            out.row(run=args.run, rep=rep, mode=mode, arch=arch, hidden=w, layers=L, profiled=prof, calls=n,
                    host_s=host, event_s=gpu, pinned=args.pinned)
        log(f"rep {rep} done ({t_end - time.time():.0f} s left)")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
