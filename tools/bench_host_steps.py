"""Whole profiled steps, for the host's time outside the layers and for steps that do not synchronize.

Rounds 23-24 measured a profiled eager layer's host time in units of the CPU's per-op speed
(``aten::t``). A whole step also issues the embedding, the LM head and loss, the embedding backward,
the optimizer and ``zero_grad``, and the traces' training loops never synchronize, so the GPU's tail of
one step overlaps the host's next forward. This writes profiled steps (Chrome traces, the recipe of
``bench_steps.py`` profiles: fp32 parameters + autocast bf16, fused AdamW, ``zero_grad(set_to_none)``,
``torch.profiler`` with ``record_shapes=True`` and schedule wait 1 / warm-up 1 / active 2) at layer
counts 2 and 8 (the per-step part is what does not scale with layers), widths 768 and 2048, GPT and
Llama blocks, and a few held-apart variations (a 128k vocabulary, a ``loss.item()`` every step, heavier
micro-batches); and eager inference steps (one prefill, then 8 decode steps) at 4 and 16 layers.

simcore reads the traces (``python -m simcore.calibration.host_trace --steps``); nothing is measured here
beyond what the profiler records.

  python tools/bench_host_steps.py --outdir DIR [--passes 2] [--smoke]
  SIMCORE_SDPA=default python tools/bench_host_steps.py --set r40 --passes 1 --outdir DIR
  python tools/bench_host_steps.py --set r42 --passes 2 --outdir DIR
  python tools/bench_host_steps.py --set r47 --passes 2 --outdir DIR

Round 47 (``--set r47``): round 25's fit points at h 768 (GPT) and h 2048 (Llama), 2 and 8 layers, with
``torch.optim``'s default optimizers (``AdamW`` and ``SGD`` with momentum, both ``foreach``): the profiled
host of their ``step()`` over the parameter tensors; and once each with other profiler options
(``record_shapes=False, with_stack=True, profile_memory=True``, and ``with_stack=True`` with shapes):
the host a layer takes under them, in the same CPU-speed units. Round 48 (``--set r48``): the same fit
points under each profiler option set, once more (with Holistic Trace Analysis' three together, and
memory events alone).
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
from benchutil import env_info, log, save_trace  # noqa: E402
from gpt import GPT, SDPA_STATE, GPTConfig, make_kv_caches, probe_sdpa  # noqa: E402


def cfg_of(arch: str, layers: int, hidden: int, vocab: int, smoke: bool, tied: bool = False) -> GPTConfig:
    heads = 4 if smoke else hidden // 64 if hidden <= 1024 else hidden // 128
    kw = dict(
        layers=layers, hidden=64 if smoke else hidden, heads=heads, vocab=512 if smoke else vocab, tied=tied
    )
    if arch == "llama":
        kw.update(kv_heads=max(heads // 4, 1), activation="swiglu", norm="rmsnorm")
    return GPTConfig(**kw)


# (name, arch, layers, hidden, vocab, micro_batch, sync, tied, passes_role)
TRAIN = [
    *[
        (f"{a}_L{L}_h{h}", a, L, h, 50304, 2, False, False, "fit")
        for a in ("gpt", "llama")
        for L in (2, 8)
        for h in (768, 2048)
    ],
    ("gpt_L8_h768_v128k", "gpt", 8, 768, 128256, 2, False, False, "held"),
    ("llama_L8_h2048_v128k_tied", "llama", 8, 2048, 128256, 2, False, True, "held"),
    ("gpt_L8_h768_item", "gpt", 8, 768, 50304, 2, True, False, "held"),
    ("llama_L8_h768_item", "llama", 8, 768, 50304, 2, True, False, "held"),
    ("gpt_L6_h1024_b8", "gpt", 6, 1024, 50304, 8, False, False, "held"),
    ("llama_L4_h2048_b4_item", "llama", 4, 2048, 50304, 4, True, False, "held"),
]
# (name, arch, layers, hidden, batch, prompt, role)
INFER = [
    *[
        (f"{a}_L{L}_h{h}_b1", a, L, h, 1, 512, "fit")
        for a, h in (("gpt", 768), ("llama", 2048))
        for L in (4, 16)
    ],
    ("llama_L8_h3072_b4", "llama", 8, 3072, 4, 1024, "held"),
]


# round 40 (``--set r40``, run with SIMCORE_SDPA=default): held-apart runs of the same models with
# PyTorch's own attention backend (cuDNN on an H200), the common plain-PyTorch setup
R40_TRAIN = [
    ("gpt_L12_h768_b8", "gpt", 12, 768, 50304, 8, False, False, "held"),
    ("llama_L8_h2048_b2", "llama", 8, 2048, 50304, 2, False, False, "held"),
    ("gpt_L12_h1024_b4_item", "gpt", 12, 1024, 50304, 4, True, False, "held"),
]
R40_INFER = [("llama_L16_h2048_b2", "llama", 16, 2048, 2, 1024, "held")]
# round 47 (``--set r47``): torch.optim's default optimizers at the fit points (the profiled host of their
# step over the tensor count), and the fit points once under other profiler options
_R47_BASE = [(f"{a}_L{L}_h{h}", a, L, h) for a, h in (("gpt", 768), ("llama", 2048)) for L in (2, 8)]
_NO_SHAPES = {"record_shapes": False, "with_stack": True, "profile_memory": True}
R47_TRAIN = [
    *[
        (f"{n}_{o}", a, L, h, 50304, 2, False, False, {"optim": o}, "fit")
        for o in ("foreach", "sgd")
        for n, a, L, h in _R47_BASE
    ],
    *[
        (f"{n}_{tag}", a, L, h, 50304, 2, False, False, {"prof": po}, "held")
        for tag, po in (("stack_noshapes", _NO_SHAPES), ("stack", {"with_stack": True}))
        for n, a, L, h in _R47_BASE
    ],
]
# round 48 (``--set r48``): the fit points under each profiler option set (a second pass of round 47's
# two, Holistic Trace Analysis' three together, memory events alone): their host in CPU-speed units
_HTA = {"with_stack": True, "profile_memory": True}
R48_TRAIN = [
    (f"{n}_{tag}", a, L, h, 50304, 2, False, False, {"prof": po}, "fit")
    for tag, po in (
        ("stack_noshapes", _NO_SHAPES),
        ("stack", {"with_stack": True}),
        ("stack_memory", _HTA),
        ("memory", {"profile_memory": True}),
    )
    for n, a, L, h in _R47_BASE
]

# round 42 (``--set r42``): the prefill passes' host beside the decode passes' (round 25's inference fit
# points and two longer prompts; ``host_trace --decode --prefill``), for a loop that never waits, whose
# decode steps are issued while the GPU still runs the prefill
R42_INFER = [
    *INFER[:4],
    ("gpt_L8_h768_b4_p1024", "gpt", 8, 768, 4, 1024, "fit"),
    ("llama_L8_h2048_b2_p2048", "llama", 8, 2048, 2, 2048, "fit"),
]


def train_point(dev, acts, spec, seq, smoke, path):
    from torch.profiler import profile, schedule

    _, arch, L, h, vocab, mb, do_item, tied = spec[:8]
    opts = spec[8] if len(spec) > 9 else {}  # round 47: the optimizer, the profiler's options
    cfg = cfg_of(arch, L, h, vocab, smoke, tied)
    cfg.seq_len = seq
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    optim = opts.get("optim", "fused")
    if optim == "foreach":  # torch.optim's default implementation on CUDA
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    elif optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda" else {}))
    x = torch.randint(0, cfg.vocab, (mb, seq), device=dev)
    ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    prof_opts = {"record_shapes": True, **opts.get("prof", {})}
    with profile(
        activities=acts, schedule=schedule(wait=1, warmup=1, active=2, repeat=1), **prof_opts
    ) as prof:
        for _ in range(4):
            with ac:
                loss = model(x, x)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if do_item:
                loss.item()  # a logging loop: the host waits for the step's GPU work
            prof.step()
    save_trace(prof, path)
    meta = {
        **cfg.asdict(),
        "mode": "train",
        "seq_len": seq,
        "micro_batch": mb,
        "loss_item": do_item,
        "precision": "fp32 params + autocast bf16",
        "optimizer": {"fused": "AdamW fused", "foreach": "AdamW (foreach)", "sgd": "SGD momentum 0.9 (foreach)"}[optim],
        "profiler": prof_opts,
    }
    del model, opt
    return meta


def infer_point(dev, acts, spec, smoke, path, decode_steps=8):
    from torch.profiler import profile, schedule

    _, arch, L, h, b, P, _ = spec
    cfg = cfg_of(arch, L, h, 50304, smoke, tied=arch == "llama")
    P = 32 if smoke else P
    cfg.seq_len = P + decode_steps
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    model.to(torch.bfloat16).eval()
    caches = make_kv_caches(cfg, b, P + decode_steps, dev)
    x = torch.randint(0, cfg.vocab, (b, P), device=dev)
    with (
        torch.no_grad(),
        profile(
            activities=acts, record_shapes=True, schedule=schedule(wait=1, warmup=1, active=2, repeat=1)
        ) as prof,
    ):
        for _ in range(4):
            tok = model(x, kv_caches=caches, pos=0, last_only=True).argmax(-1)
            for i in range(decode_steps):
                tok = model(tok, kv_caches=caches, pos=P + i, last_only=True).argmax(-1)
            prof.step()
    save_trace(prof, path)
    meta = {
        **cfg.asdict(),
        "mode": "prefill+decode",
        "batch": b,
        "prompt": P,
        "decode_steps": decode_steps,
        "precision": "bf16 params",
    }
    del model, caches
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument(
        "--passes", type=int, default=2, help="passes over the fit points (held-apart points run once)"
    )
    ap.add_argument("--budget", type=float, default=360.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--set", choices=("r25", "r40", "r42", "r47", "r48"), default="r25", help="round 25's points or a later round's")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    os.makedirs(args.outdir, exist_ok=True)
    seq = 64 if args.smoke else 1024
    train, infer = {"r25": (TRAIN, INFER), "r40": (R40_TRAIN, R40_INFER), "r42": ([], R42_INFER), "r47": (R47_TRAIN, []), "r48": (R48_TRAIN, [])}[args.set]
    jobs = []
    for p in range(args.passes):
        jobs += [("train", s, p) for s in train if s[-1] == "fit" or p == 0]
        jobs += [("infer", s, p) for s in infer if s[-1] == "fit" or p == 0]
    meta = {"env": env_info(dev), "points": {}}
    t0 = time.time()
    for kind, spec, p in jobs:
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        name = f"{args.set}_{kind}_{spec[0]}_p{p}"
        path = os.path.join(args.outdir, name + ".json.gz")
        try:
            a = time.time()
            m = (
                train_point(dev, acts, spec, seq, args.smoke, path)
                if kind == "train"
                else infer_point(dev, acts, spec, args.smoke, path)
            )
            meta["points"][name] = {**m, "role": spec[-1], "pass": p}
            log(f"{name}: {os.path.getsize(path) / 1e6:.2f} MB in {time.time() - a:.1f} s")
        except Exception as e:  # noqa: BLE001
            log(f"ERROR {name}: {repr(e)[:300]}")
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    meta["sdpa"] = "flash forced" if SDPA_STATE["force_flash"] else "default"
    with open(os.path.join(args.outdir, f"{args.set}_points.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"done {len(meta['points'])} traces in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
