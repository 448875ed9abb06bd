"""Profiled torch.compile training steps beside the same model's eager steps: the host time of a
compiled layer in whole profiled steps.

A compiled trace has no ``aten::t`` (the per-op probe of eager traces, rounds 23-25): inductor calls
its kernels from generated code, and its few ``aten::empty_strided`` allocations (3-24 per step) are too
few to stand in. simcore takes the compiled regions' host time per layer as measured here (round 27);
the eager steps, a minute before in the same process, show the CPU's probe at the time. Per model (``tools/gpt.py``, the recipe of ``bench_steps.py``: fp32 parameters +
autocast bf16, fused AdamW, ``zero_grad(set_to_none=True)``; GPT and Llama-like blocks, 2 and 8 layers,
width 768, and 8 layers at width 2048; seq 1024, micro-batch 2), the eager steps and then the
``torch.compile``'d steps are profiled (``record_shapes=True``, schedule wait 1 / warm-up 1 / active 2)
in one process, one after the other, and written as Chrome traces (``compiled_<model>.json.gz``,
``eager_<model>.json.gz``) for ``simcore`` to read.

Round 30 (``--set r30``) runs more layer counts and keeps every trace: a compiled trace's CPU speed is
its own ``aten::transpose`` (inductor's generated code calls it 100-300 times a step, on both threads),
over the ``aten::transpose`` / ``aten::t`` ratio of eager traces.

  python tools/bench_compiled_steps.py --outdir DIR [--set r27|r30] [--budget S] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import env_info, log, save_trace, sync  # noqa: E402
from gpt import GPT, GPTConfig, probe_sdpa  # noqa: E402

# (name, arch, layers, hidden)
MODELS = [
    ("gpt_L2_h768", "gpt", 2, 768),
    ("gpt_L8_h768", "gpt", 8, 768),
    ("llama_L2_h768", "llama", 2, 768),
    ("llama_L8_h768", "llama", 8, 768),
    ("gpt_L8_h2048", "gpt", 8, 2048),
    ("llama_L8_h2048", "llama", 8, 2048),
]
# round 30: 2 / 4 / 8 layers at widths 768 and 1024, and 8 at 2048 (intercept and slope per block)
MODELS_R30 = [
    (f"{arch}_L{L}_h{h}", arch, L, h)
    for h, counts in ((768, (2, 4, 8)), (1024, (2, 8)), (2048, (8,)))
    for L in counts
    for arch in ("gpt", "llama")
]


def cfg_of(arch, layers, hidden, smoke):
    heads = 4 if smoke else hidden // 64 if hidden <= 1024 else hidden // 128
    kw = dict(layers=layers, hidden=64 if smoke else hidden, heads=heads, vocab=512 if smoke else 50304)
    if arch == "llama":
        kw.update(kv_heads=max(heads // 4, 1), activation="swiglu", norm="rmsnorm")
    return GPTConfig(**kw)


def profiled_steps(run_model, opt, x, ac, acts, path):
    from torch.profiler import profile, schedule

    with profile(
        activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2, repeat=1)
    ) as prof:
        for _ in range(4):
            with ac:
                loss = run_model(x, x)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    save_trace(prof, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--budget", type=float, default=400.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--set", choices=("r27", "r30"), default="r27", help="which models (round 27 or 30)")
    args = ap.parse_args()
    models = MODELS_R30 if args.set == "r30" else MODELS
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    os.makedirs(args.outdir, exist_ok=True)
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    seq, mb = (64, 1) if args.smoke else (1024, 2)
    meta = {"env": env_info(dev), "models": {}}
    t0 = time.time()
    for name, arch, L, h in models[:2] if args.smoke else models:
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        try:
            cfg = cfg_of(arch, L, h, args.smoke)
            cfg.seq_len = seq
            torch.manual_seed(0)
            with torch.device(dev):
                model = GPT(cfg)
            opt = torch.optim.AdamW(
                model.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda" else {})
            )
            x = torch.randint(0, cfg.vocab, (mb, seq), device=dev)
            ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
            a = time.time()
            profiled_steps(model, opt, x, ac, acts, os.path.join(args.outdir, f"eager_{name}.json.gz"))
            compiled = torch.compile(model)
            for _ in range(3):  # compile outside the profiled steps
                with ac:
                    compiled(x, x).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            sync(dev)
            profiled_steps(compiled, opt, x, ac, acts, os.path.join(args.outdir, f"compiled_{name}.json.gz"))
            meta["models"][name] = {**cfg.asdict(), "seq_len": seq, "micro_batch": mb}
            log(f"{name}: {time.time() - a:.1f} s")
            del model, compiled, opt
            torch._dynamo.reset()
        except Exception as e:  # noqa: BLE001
            log(f"ERROR {name}: {repr(e)[:300]}")
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    with open(os.path.join(args.outdir, f"{args.set}_models.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
