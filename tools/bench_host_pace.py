"""Host pace of a real training step: what sets the CPU time per layer in the forward and backward.

The committed profiler traces issue a backward layer in 1-3x the time the host micro-benchmarks
(GPU-trivial width, one process, ``bench_host.py`` / ``bench_compiled_host.py``) measure, while their
forward layers agree with them. This script takes one GPT-2-small-shaped model (12 layers, h 768,
GELU, LayerNorm, fp32 params + autocast bf16, fused AdamW: the recipe of ``bench_steps.py``) and
changes one thing at a time, in one process, interleaved over passes:

* ``mb``: micro-batch 1 / 2 / 8 at seq 1024 (the GPU from far ahead of the host to behind it);
* ``vocab``: 50304 or 512 (the LM head and fp32 loss, GPU-heavy, or trivial);
* ``sync``: a device synchronize between forward and backward (the backward starts on an idle GPU);
* ``steps``: whole training steps (with the optimizer) or forward + backward only.

Each point is profiled (CPU + CUDA, ``record_shapes=True`` as the traces) for 2 steps; from the
profiler's events: host seconds per layer of the forward (spacing of the outermost
``aten::layer_norm`` calls, two per layer) and of the backward (spacing of the
``NativeLayerNormBackward0`` autograd nodes), median ``aten::t`` / ``aten::view`` duration on each
thread (a per-op host speed probe). The column ``bwd_lag_s`` stays empty (round 23 wrote NaN): the
in-process profiler events carry no kernel start times to measure a launch-to-start lag from.
Unprofiled, the host wall time of the forward and backward calls (no synchronize inside) and the
step's wall time.

  python tools/bench_host_pace.py --out pace.csv [--passes 3] [--smoke]
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

COLS = ["pass", "mb", "vocab", "sync", "optimizer", "profiled", "fwd_layer_s", "bwd_layer_s", "fwd_call_s",
        "bwd_call_s", "step_wall_s", "t_main_us", "t_bwd_us", "view_main_us", "view_bwd_us", "bwd_lag_s",
        "n_steps"]

FWD_NORMS = ("aten::layer_norm", "aten::rms_norm")
BWD_NODE = "autograd::engine::evaluate_function: "


def build(vocab, dev, smoke):
    cfg = GPTConfig(layers=2 if smoke else 12, hidden=64 if smoke else 768, heads=4 if smoke else 12, vocab=vocab)
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=dev.type == "cuda")
    except Exception:  # noqa: BLE001
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    return model, cfg, opt


def one_step(model, x, ac, opt, do_sync, dev, use_opt):
    a = time.perf_counter()
    with ac:
        loss = model(x, x)
    b = time.perf_counter()
    if do_sync:
        sync(dev)
    b2 = time.perf_counter()
    loss.backward()
    c = time.perf_counter()
    if use_opt:
        opt.step()
    opt.zero_grad(set_to_none=True)
    return b - a, c - b2


def spacing(ts, per_layer_count=2):
    """Seconds per layer from sorted start times of the per-layer norm calls (2 per layer + final)."""
    if len(ts) < 5:
        return float("nan")
    ts = sorted(ts)
    d = [b - a for a, b in zip(ts[::per_layer_count], ts[per_layer_count::per_layer_count])]
    return statistics.median(d)


def paces(events):
    """Host seconds per layer of the forward and backward, and the per-op speed probes (median
    ``aten::t`` microseconds on the main and on the backward thread), from a profiler's events of
    two steps. Forward: outermost layer/RMS norm calls (two per layer, then the final norm);
    backward: the norm-backward autograd nodes."""
    fwd, bwd, t_by, v_by = [], [], {}, {}
    main_tid = None
    for e in events:
        if e.name in FWD_NORMS:
            fwd.append((e.time_range.start, e.time_range.end, e.thread))
            main_tid = e.thread
        elif e.name.startswith(BWD_NODE) and "NormBackward" in e.name:
            bwd.append(e.time_range.start)
        elif e.name in ("aten::t", "aten::view"):
            (t_by if e.name == "aten::t" else v_by).setdefault(e.thread, []).append(e.time_range.elapsed_us())
    fwd.sort()
    outer, end = [], -1.0
    for s0, t1, _ in fwd:
        if s0 >= end:
            outer.append(s0)
            end = t1
    half_f, half_b = len(outer) // 2, len(bwd) // 2
    bwd.sort()
    fwd_layer = statistics.median([spacing(outer[:half_f]), spacing(outer[half_f:])]) * 1e-6
    bwd_layer = statistics.median([spacing(bwd[:half_b]), spacing(bwd[half_b:])]) * 1e-6
    nan = [float("nan")]
    t_main = statistics.median(t_by.get(main_tid, nan))
    t_bwd = statistics.median([x for tid, xs in t_by.items() if tid != main_tid for x in xs] or nan)
    v_main = statistics.median(v_by.get(main_tid, nan))
    v_bwd = statistics.median([x for tid, xs in v_by.items() if tid != main_tid for x in xs] or nan)
    return fwd_layer, bwd_layer, t_main, t_bwd, v_main, v_bwd


def profiled_point(model, x, ac, opt, do_sync, dev, use_opt, acts):
    from torch.profiler import profile

    for _ in range(2):
        one_step(model, x, ac, opt, do_sync, dev, use_opt)
    sync(dev)
    with profile(activities=acts, record_shapes=True) as prof:
        for _ in range(2):
            one_step(model, x, ac, opt, do_sync, dev, use_opt)
        sync(dev)
    return paces(prof.events())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    log("env", env_info(dev))
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    seq = 64 if args.smoke else 1024
    models = {v: build(v, dev, args.smoke) for v in ((512,) if args.smoke else (50304, 512))}
    points = []
    for vocab in models:
        for mb in ((1, 2) if args.smoke else (1, 2, 8)):
            for do_sync in (False, True):
                for use_opt in (True, False):
                    if vocab == 512 and (do_sync or not use_opt):
                        continue  # the vocab contrast at the default recipe only
                    if do_sync and not use_opt:
                        continue
                    points.append((vocab, mb, do_sync, use_opt))
    out = CsvOut(args.out, COLS)
    t0 = time.time()
    for p in range(args.passes):
        for vocab, mb, do_sync, use_opt in points:
            if time.time() - t0 > args.budget:
                log("budget reached")
                out.close()
                return
            model, cfg, opt = models[vocab]
            g = torch.Generator(device=dev).manual_seed(1234)
            x = torch.randint(0, cfg.vocab, (mb, seq), device=dev, generator=g)
            # unprofiled: host wall of the calls, and the steps' wall time
            for _ in range(2):
                one_step(model, x, ac, opt, do_sync, dev, use_opt)
            sync(dev)
            fw, bw = [], []
            w0 = time.perf_counter()
            for _ in range(args.steps):
                f, b = one_step(model, x, ac, opt, do_sync, dev, use_opt)
                fw.append(f)
                bw.append(b)
            sync(dev)
            wall = (time.perf_counter() - w0) / args.steps
            L = cfg.layers
            out.row(**{"pass": p}, mb=mb, vocab=vocab, sync=int(do_sync), optimizer=int(use_opt), profiled=0,
                    fwd_call_s=statistics.median(fw), bwd_call_s=statistics.median(bw), step_wall_s=wall,
                    fwd_layer_s="", bwd_layer_s="", t_main_us="", t_bwd_us="", view_main_us="", view_bwd_us="",
                    bwd_lag_s="", n_steps=args.steps)
            fl, bl, tm, tb, vm, vb = profiled_point(model, x, ac, opt, do_sync, dev, use_opt, acts)
            out.row(**{"pass": p}, mb=mb, vocab=vocab, sync=int(do_sync), optimizer=int(use_opt), profiled=1,
                    fwd_layer_s=fl, bwd_layer_s=bl, fwd_call_s="", bwd_call_s="", step_wall_s="", t_main_us=tm,
                    t_bwd_us=tb, view_main_us=vm, view_bwd_us=vb, bwd_lag_s="", n_steps=2)
            log(f"pass {p} vocab {vocab} mb {mb} sync {int(do_sync)} opt {int(use_opt)}: unprofiled fwd "
                f"{statistics.median(fw) * 1e3:.2f} ms bwd {statistics.median(bw) * 1e3:.2f} ms wall {wall * 1e3:.2f} ms;"
                f" profiled per layer fwd {fl * 1e3:.3f} bwd {bl * 1e3:.3f} ms, aten::t main {tm:.1f} bwd {tb:.1f} us")
    out.close()
    log(f"done {out.n} rows in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
