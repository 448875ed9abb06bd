"""Host (CPU) time per transformer layer of a training step under torch.compile, beside eager.

By default a GPU-trivial model (width 64, vocab 512, micro-batch 1, 64 tokens) keeps every kernel far
shorter than its launch, so the wall time of a call is the host's time to issue it. ``--widths``
adds wider models (``HIDDEN:SEQ:MICROBATCH``, vocab 512): the host's calls are still timed alone (the
device is synchronized between steps, outside the timed calls), so a wider layer's host time shows
whether issuing it depends on the tensor sizes (inductor picks other kernels: split reductions, other
GEMM paths). For each architecture
(GPT: GELU + LayerNorm; Llama-like: SwiGLU + RMSNorm + GQA) and framework (eager, compiled), the
forward (with loss) and the backward are timed separately at 2 and 8 layers, interleaved over
several passes; the slope over layers is the host time per layer, the intercept the embedding/head/
loss part. Each point is also timed under torch.profiler (CPU+CUDA activities, record_shapes=True)
for the profiler's host inflation. Kernels per layer come from a profiled step's kernel count.

  python tools/bench_compiled_host.py --out compiled_host.csv [--passes 5] [--widths 64:64:1,1024:1024:4]
      [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, sync  # noqa: E402
from gpt import GPT, GPTConfig, probe_sdpa  # noqa: E402

COLS = ["arch", "framework", "profiled", "layers", "pass", "fwd_host_s", "bwd_host_s", "step_wall_s",
        "kernels_per_step", "n", "hidden", "seq_len", "micro_batch"]


def build(arch: str, layers: int, dev, hidden: int = 64, seq: int = 64):
    heads = max(hidden // 64, 4) if hidden > 64 else 4
    kw = dict(layers=layers, hidden=hidden, heads=heads, vocab=512)
    if arch == "llama":
        kw.update(kv_heads=max(heads // 4, 1) if hidden > 64 else 2, activation="swiglu", norm="rmsnorm")
    cfg = GPTConfig(**kw)
    cfg.seq_len = seq
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    return model, cfg


def timed_steps(run_model, x, n, ac, dev, sync_each=False):
    """Median host seconds of forward(+loss) and backward calls, and wall seconds per step. With
    ``sync_each`` the device is synchronized after each step (outside the timed calls), so a long
    device queue never blocks a launch; the wall time then includes the device's time."""
    fw, bw = [], []
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(n):
        a = time.perf_counter()
        with ac:
            loss = run_model(x, x)
        b = time.perf_counter()
        loss.backward()
        c = time.perf_counter()
        fw.append(b - a)
        bw.append(c - b)
        if sync_each:
            sync(dev)
    sync(dev)
    wall = (time.perf_counter() - t0) / n
    return statistics.median(fw), statistics.median(bw), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=400)
    ap.add_argument("--widths", default="64:64:1", help="comma-separated HIDDEN:SEQ:MICROBATCH")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    widths = [tuple(int(v) for v in w.split(":")) for w in args.widths.split(",")]
    if args.smoke:
        widths = [(w, min(s, 64), mb) for w, s, mb in widths if w <= 128] or [(64, 64, 1)]
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    log("env", env_info(dev))
    out = CsvOut(args.out, COLS)
    t_start = time.time()
    ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    layer_counts = (2, 8)
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    # one group per (width, arch): its eager and compiled models at 2 and 8 layers, timed in interleaved
    # passes; dynamo is reset between groups, so a compiled forward never checks the guards of more than
    # the group's two compiled graphs (and never reaches dynamo's recompile limit and falls back to eager)
    groups = [(w, a) for w in widths for a in ("gpt", "llama")]
    for gi, ((hidden, seq, mb), arch) in enumerate(groups):
        if dev.type == "cuda":
            torch._dynamo.reset()
        runs = {}
        for L in layer_counts:
            for fw in ("eager", "compiled"):
                model, cfg = build(arch, L, dev, hidden, seq)
                x = torch.randint(0, cfg.vocab, (mb, cfg.seq_len), device=dev)
                rm = torch.compile(model) if fw == "compiled" else model
                t = time.time()
                for _ in range(3):
                    with ac:
                        rm(x, x).backward()
                sync(dev)
                log(f"ready {arch} h={hidden} L={L} {fw} ({time.time() - t:.0f}s)")
                runs[(arch, fw, L, hidden, seq, mb)] = (rm, x)
        kernels = {}
        for key, (rm, x) in runs.items():
            for _ in range(2):  # the second count is the steady one (a first profiled call may recompile)
                with profile(activities=acts, record_shapes=True) as prof:
                    with ac:
                        loss = rm(x, x)
                    loss.backward()
                    sync(dev)
                kernels[key] = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
            log("kernels", key, kernels[key])
        budget = t_start + args.budget * (gi + 1) / len(groups)
        for p in range(args.passes):
            if time.time() > budget:
                log("group budget reached")
                break
            for key, (rm, x) in runs.items():
                arch, fw, L, hidden, seq, mb = key
                wide = hidden > 64
                for profiled in (False, True):
                    if profiled:
                        with profile(activities=acts, record_shapes=True):
                            f, b, w = timed_steps(rm, x, max(args.steps // 4, 3), ac, dev, wide)
                    else:
                        f, b, w = timed_steps(rm, x, args.steps, ac, dev, wide)
                    out.row(arch=arch, framework=fw, profiled=profiled, layers=L, **{"pass": p}, fwd_host_s=f,
                            bwd_host_s=b, step_wall_s=w, kernels_per_step=kernels[key],
                            n=args.steps if not profiled else max(args.steps // 4, 3), hidden=hidden,
                            seq_len=seq, micro_batch=mb)
            log(f"{arch} h={hidden} pass {p} done")
        del runs
    out.close()
    log(f"done {out.n} rows in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
