"""Whole-step measurements of the GPT in tools/gpt.py: training steps, prefill and decode steps,
plus a few PyTorch-profiler traces. One GPU.

Training recipe: fp32 parameters, forward+loss under torch.autocast(cuda, bfloat16), backward,
torch.optim.AdamW(fused=True, lr=1e-4, weight_decay=0.1), then zero_grad(set_to_none=True).
Inference: bf16 parameters (model.to(bfloat16)), no autocast, torch.no_grad(), preallocated KV cache.

  python tools/bench_steps.py --out steps.csv --configs-json steps_configs.json --profile-dir prof/
  python tools/bench_steps.py --smoke --out /tmp/steps.csv        # tiny models on CPU
  python tools/bench_steps.py --compile --only train,profiles --names gpt-125m,llama-1b --out c.csv
      # the same training steps under torch.compile (default mode), each next to its eager step in the
      # same process (framework column "compiled" / "eager"); profiles named *_compiled
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, capture_graph, env_info, log, measure, sync  # noqa: E402
from gpt import GPT, GPTConfig, make_kv_caches, probe_sdpa  # noqa: E402

COLS = ["mode", "name", "framework", "params", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
        "seq_len", "micro_batch", "activation", "norm", "tied", "recompute", "swiglu_fused", "precision",
        "tokens", "step_time_s", "fwd_time_s", "bwd_time_s", "opt_time_s", "fwd_only_time_s",
        "peak_mem_bytes", "peak_reserved_bytes", "mem_after_init_bytes", "n_timed", "spread", "status"]


def cfgrow(cfg: GPTConfig) -> dict:
    return dict(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, kv_heads=cfg.kv_heads,
                ffn_hidden=cfg.ffn_hidden, vocab=cfg.vocab, activation=cfg.activation, norm=cfg.norm,
                tied=cfg.tied, recompute=cfg.recompute,
                swiglu_fused=cfg.swiglu_fused if cfg.activation == "swiglu" else "")


def train_configs(smoke: bool):
    """(name, cfg, seq_len, micro_batch)."""
    if smoke:
        base = dict(layers=2, hidden=64, heads=4, vocab=512)
        return [
            ("tiny-gelu", GPTConfig(**base), 64, 2),
            ("tiny-gelu-full", GPTConfig(**base, recompute="full"), 64, 2),
            ("tiny-swiglu-sel", GPTConfig(**base, kv_heads=2, activation="swiglu", norm="rmsnorm",
                                          recompute="selective"), 64, 2),
            ("tiny-swiglu-unfused-tied", GPTConfig(**base, activation="swiglu", swiglu_fused=False, tied=True),
             64, 2),
        ]
    gpt125 = dict(layers=12, hidden=768, heads=12, vocab=50304)
    gpt350 = dict(layers=24, hidden=1024, heads=16, vocab=50304)
    gpt760 = dict(layers=24, hidden=1536, heads=16, vocab=50304)
    gpt1300 = dict(layers=24, hidden=2048, heads=16, vocab=50304)
    gpt2700 = dict(layers=32, hidden=2560, heads=32, vocab=50304)
    llama1b = dict(layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=32000,
                   activation="swiglu", norm="rmsnorm")
    llama3b = dict(layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192, vocab=32000,
                   activation="swiglu", norm="rmsnorm")
    C = GPTConfig
    return [
        ("gpt-125m", C(**gpt125), 1024, 8),
        ("gpt-125m", C(**gpt125), 1024, 16),
        ("gpt-125m-full", C(**gpt125, recompute="full"), 2048, 8),
        ("gpt-125m-swiglu-rms", C(**{**gpt125, "activation": "swiglu", "norm": "rmsnorm"}), 1024, 8),
        ("gpt-350m", C(**gpt350), 1024, 8),
        ("gpt-350m-sel", C(**gpt350, recompute="selective"), 2048, 4),
        ("gpt-350m-full", C(**gpt350, recompute="full"), 2048, 8),
        ("gpt-350m-tied", C(**gpt350, tied=True), 2048, 4),
        ("gpt-760m", C(**gpt760), 2048, 4),
        ("gpt-760m-full", C(**gpt760, recompute="full"), 2048, 8),
        ("gpt-1.3b", C(**gpt1300), 2048, 4),
        ("gpt-1.3b-sel", C(**gpt1300, recompute="selective"), 2048, 8),
        ("gpt-1.3b-full", C(**gpt1300, recompute="full"), 4096, 2),
        ("llama-1b", C(**llama1b), 2048, 4),
        ("llama-1b-sel", C(**llama1b, recompute="selective"), 4096, 2),
        ("llama-1b-full", C(**llama1b, recompute="full"), 2048, 8),
        ("llama-1b-unfused", C(**llama1b, swiglu_fused=False), 2048, 4),
        ("gpt-2.7b", C(**gpt2700), 2048, 2),
        ("gpt-2.7b-full", C(**gpt2700, recompute="full"), 2048, 4),
        ("llama-3b", C(**llama3b), 4096, 1),
        ("llama-3b-full", C(**llama3b, recompute="full"), 4096, 4),
        ("llama-3b-sel", C(**llama3b, recompute="selective"), 2048, 4),
    ]


def named_train_configs():
    """Training configs run only when ``--names`` names them (never in the default sweep): issue 42's
    Llama-shaped compiled-step domain (RMSNorm, SwiGLU, GQA; 8-28 layers, hidden 2048-4096, sequences
    2K-8K) beyond the committed llama-1b / llama-3b rows. Sized for one 80 GB H100 (fp32 parameters and
    Adam states: 16 bytes a parameter)."""
    C = GPTConfig
    llama = dict(kv_heads=8, vocab=32000, activation="swiglu", norm="rmsnorm")
    # widest first: a run cut by its budget keeps the configs furthest from the committed ones
    return [
        ("llama-8b-l8", C(layers=8, hidden=4096, heads=32, ffn_hidden=14336, **llama), 2048, 2),
        ("llama-8b-l8-s8k", C(layers=8, hidden=4096, heads=32, ffn_hidden=14336, **llama), 8192, 1),
        ("llama-3b-l12-s8k", C(layers=12, hidden=3072, heads=24, ffn_hidden=8192, **llama), 8192, 1),
        ("llama-1b-s8k", C(layers=16, hidden=2048, heads=32, ffn_hidden=8192, **llama), 8192, 1),
    ]


def infer_models(smoke: bool):
    if smoke:
        return [("tiny-llama", GPTConfig(layers=2, hidden=64, heads=4, kv_heads=2, ffn_hidden=128, vocab=512,
                                         activation="swiglu", norm="rmsnorm", tied=True))]
    # shapes of Llama-3.2-1B / -3B (no RoPE here), tied embeddings, vocab 128256
    return [
        ("llama-1b-infer", GPTConfig(layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=128256,
                                     activation="swiglu", norm="rmsnorm", tied=True)),
        ("llama-3b-infer", GPTConfig(layers=28, hidden=3072, heads=24, kv_heads=8, ffn_hidden=8192, vocab=128256,
                                     activation="swiglu", norm="rmsnorm", tied=True)),
    ]


def prefill_shapes(smoke):
    if smoke:
        return [(1, 32), (2, 16)]
    return [(1, 256), (1, 1024), (1, 4096), (1, 8192), (4, 2048), (8, 1024), (16, 512), (64, 256), (8, 8192)]


def decode_shapes(smoke):
    if smoke:
        return [(1, 32), (4, 16)]
    return [(1, 256), (1, 2048), (1, 8192), (8, 2048), (8, 8192), (32, 1024), (32, 4096), (64, 2048),
            (128, 1024), (256, 256), (256, 1024)]


class Runner:
    def __init__(self, args):
        self.args = args
        self.smoke = args.smoke
        self.dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
        self.out = CsvOut(args.out, COLS)
        self.configs = {"train": [], "infer": []}

    def cleanup(self):
        gc.collect()
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def mem(self):
        if self.dev.type != "cuda":
            return "", ""
        return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()

    # ------------------------------------------------------------------ training
    def train_one(self, name, cfg, seq, mb, compiled=False):
        dev = self.dev
        cfg.seq_len = seq
        torch.manual_seed(0)
        self.cleanup()
        with torch.device(dev):
            model = GPT(cfg)
        model.train()
        run_model = model
        if compiled:
            t_c = time.time()
            run_model = torch.compile(model)
        nparam = sum(p.numel() for p in model.parameters())
        fused = dev.type == "cuda"
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                                **({"fused": True} if fused else {}))
        x = torch.randint(0, cfg.vocab, (mb, seq), device=dev)
        y = torch.randint(0, cfg.vocab, (mb, seq), device=dev)
        ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        mem_init = torch.cuda.memory_allocated() if dev.type == "cuda" else ""

        def step(evs=None):
            if evs:
                evs[0].record()
            with ac:
                loss = run_model(x, y)
            if evs:
                evs[1].record()
            loss.backward()
            if evs:
                evs[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if evs:
                evs[3].record()
            return loss

        nwarm, ntime = (1, 2) if self.smoke else (3, 6)
        if compiled:
            ntime = 2 if self.smoke else 12
        for _ in range(nwarm):
            step()
        sync(dev)
        if compiled:
            log(f"compiled {name} in {time.time() - t_c:.0f}s (first steps included)")
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        phases = []
        for _ in range(ntime):
            if dev.type == "cuda":
                evs = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
                step(evs)
                evs[3].synchronize()
                phases.append([evs[0].elapsed_time(evs[i]) / 1e3 for i in (1, 2, 3)])
            else:
                t0 = time.perf_counter()
                step()
                phases.append([0, 0, time.perf_counter() - t0])
        peak, peak_res = self.mem()
        tot = [p[2] for p in phases]
        fwd = statistics.median(p[0] for p in phases)
        bwd = statistics.median(p[1] - p[0] for p in phases)
        optt = statistics.median(p[2] - p[1] for p in phases)
        # forward only (no autograd) with the same autocast (eager only: another graph to compile)
        model.eval()

        def fwd_only():
            with torch.no_grad(), ac:
                return model(x, y)

        fo = ""
        if not compiled:
            fwd_only()
            fo = statistics.median(measure(fwd_only, 1, dev) for _ in range(3))
        med = statistics.median(tot)
        fw = "compiled" if compiled else "eager"
        self.out.row(mode="train", name=name, framework=fw, params=nparam, seq_len=seq, micro_batch=mb,
                     precision="fp32 params + autocast bf16, AdamW fused", tokens=mb * seq,
                     step_time_s=med, fwd_time_s=fwd if dev.type == "cuda" else "",
                     bwd_time_s=bwd if dev.type == "cuda" else "", opt_time_s=optt if dev.type == "cuda" else "",
                     fwd_only_time_s=fo, peak_mem_bytes=peak, peak_reserved_bytes=peak_res,
                     mem_after_init_bytes=mem_init, n_timed=ntime, spread=(max(tot) - min(tot)) / med,
                     status="ok", **cfgrow(cfg))
        self.configs["train"].append({**cfg.asdict(), "name": name, "params": nparam, "seq_len": seq, "micro_batch": mb})
        log(f"train {fw} {name} seq={seq} mb={mb} params={nparam / 1e6:.0f}M step={med * 1e3:.1f}ms "
            f"(fwd {fwd * 1e3:.1f} bwd {bwd * 1e3:.1f} opt {optt * 1e3:.1f}) "
            f"peak={(peak / 2**30) if peak != '' else 0:.1f}GiB")
        del model, run_model, opt, x, y
        if compiled:
            torch._dynamo.reset()

    def run_train(self, deadline):
        names = [n for n in (self.args.names or "").split(",") if n]
        extra = named_train_configs() if names and not self.smoke else []
        for name, cfg, seq, mb in train_configs(self.smoke) + extra:
            if names and name not in names:
                continue
            if time.time() > deadline:
                log("train: deadline reached")
                break
            try:
                self.train_one(name, cfg, seq, mb)
                if self.args.compile:
                    self.cleanup()
                    self.train_one(name, cfg, seq, mb, compiled=True)
            except torch.cuda.OutOfMemoryError as e:
                log("OOM", name, repr(e)[:150])
                self.out.row(mode="train", name=name, seq_len=seq, micro_batch=mb, status="oom", **cfgrow(cfg))
            except Exception as e:  # noqa: BLE001
                log("ERROR", name, repr(e)[:400])
                self.out.row(mode="train", name=name, seq_len=seq, micro_batch=mb, status="error", **cfgrow(cfg))
            self.cleanup()

    # ------------------------------------------------------------------ inference
    def run_infer(self, deadline):
        dev = self.dev
        for mname, cfg in infer_models(self.smoke):
            if time.time() > deadline:
                break
            torch.manual_seed(0)
            self.cleanup()
            with torch.device(dev):
                model = GPT(cfg)
            model.to(torch.bfloat16).eval()
            nparam = sum(p.numel() for p in model.parameters())
            self.configs["infer"].append({**cfg.asdict(), "name": mname, "params": nparam})
            base = dict(params=nparam, precision="bf16 params, no autocast", **cfgrow(cfg))
            for b, L in prefill_shapes(self.smoke):
                if time.time() > deadline:
                    break
                try:
                    self.prefill_one(model, cfg, mname, b, L, base)
                except Exception as e:  # noqa: BLE001
                    log("ERROR prefill", mname, b, L, repr(e)[:300])
                    self.out.row(mode="prefill", name=mname, seq_len=L, micro_batch=b,
                                 status="oom" if isinstance(e, torch.cuda.OutOfMemoryError) else "error", **base)
                self.cleanup()
            for b, L in decode_shapes(self.smoke):
                if time.time() > deadline:
                    break
                for fw in (["eager", "cuda_graphs"] if dev.type == "cuda" else ["eager"]):
                    try:
                        self.decode_one(model, cfg, mname, b, L, fw, base)
                    except Exception as e:  # noqa: BLE001
                        log("ERROR decode", mname, b, L, fw, repr(e)[:300])
                        self.out.row(mode="decode", name=mname, framework=fw, seq_len=L, micro_batch=b,
                                     status="oom" if isinstance(e, torch.cuda.OutOfMemoryError) else "error",
                                     **base)
                    self.cleanup()
            del model
            self.cleanup()

    def prefill_one(self, model, cfg, mname, b, L, base):
        dev = self.dev
        caches = make_kv_caches(cfg, b, L, dev)
        x = torch.randint(0, cfg.vocab, (b, L), device=dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

        def fn():
            with torch.no_grad():
                return model(x, kv_caches=caches, pos=0, last_only=True)

        fn()
        sync(dev)
        ts = [measure(fn, 1, dev) for _ in range(3 if self.smoke else 5)]
        peak, peak_res = self.mem()
        med = statistics.median(ts)
        self.out.row(mode="prefill", name=mname, framework="eager", seq_len=L, micro_batch=b, tokens=b * L,
                     step_time_s=med, peak_mem_bytes=peak, peak_reserved_bytes=peak_res, n_timed=len(ts),
                     spread=(max(ts) - min(ts)) / med, status="ok", **base)
        log(f"prefill {mname} b={b} L={L} {med * 1e3:.2f}ms peak={peak}")
        del caches

    def decode_one(self, model, cfg, mname, b, L, fw, base):
        """One decode step at context L: token at position L-1 attends over cache[0:L] (L keys)."""
        dev = self.dev
        caches = make_kv_caches(cfg, b, L, dev)
        for kc, vc in caches:  # random cache contents
            kc.normal_()
            vc.normal_()
        tok = torch.randint(0, cfg.vocab, (b, 1), device=dev)
        pos = L - 1
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

        def fn():
            with torch.no_grad():
                logits = model(tok, kv_caches=caches, pos=pos, last_only=True)
                return logits.argmax(-1)

        if fw == "cuda_graphs":
            g = capture_graph(fn)
            run = g.replay
        else:
            run = fn
        for _ in range(3):
            run()
        sync(dev)
        n = 5 if self.smoke else 20
        ts = [measure(run, n, dev) for _ in range(5)]
        peak, peak_res = self.mem()
        med = statistics.median(ts)
        self.out.row(mode="decode", name=mname, framework=fw, seq_len=L, micro_batch=b, tokens=b,
                     step_time_s=med, peak_mem_bytes=peak, peak_reserved_bytes=peak_res, n_timed=n * len(ts),
                     spread=(max(ts) - min(ts)) / med, status="ok", **base)
        log(f"decode {mname} b={b} ctx={L} {fw} {med * 1e3:.3f}ms")
        if fw == "cuda_graphs":
            del g
        del caches

    # ------------------------------------------------------------------ profiler traces
    def run_profiles(self, deadline):
        from torch.profiler import ProfilerActivity, profile, schedule

        outdir = self.args.profile_dir
        if not outdir:
            return
        os.makedirs(outdir, exist_ok=True)
        dev = self.dev
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        small = dict(layers=2 if self.smoke else 4, hidden=64 if self.smoke else 1024,
                     heads=4 if self.smoke else 16, vocab=512 if self.smoke else 50304)
        seq, mb = (64, 2) if self.smoke else (1024, 4)
        # (trace name, config, seq, micro-batch, compiled)
        jobs = [
            ("profile_train_gpt_gelu_ln", GPTConfig(**small), seq, mb, False),
            ("profile_train_llama_swiglu_rms_gqa_selective",
             GPTConfig(**small, kv_heads=small["heads"] // 4, activation="swiglu", norm="rmsnorm",
                       recompute="selective"), seq, mb, False),
        ]
        if self.args.compile:
            jobs = [
                ("profile_train_gpt_gelu_ln_compiled", GPTConfig(**small), seq, mb, True),
                ("profile_train_llama_swiglu_rms_gqa_compiled",
                 GPTConfig(**small, kv_heads=small["heads"] // 4, activation="swiglu", norm="rmsnorm"), seq, mb,
                 True),
            ]
        named = [n for n in (self.args.profile_names or "").split(",") if n]
        if named:
            # full-size training configs of train_configs, eager (and compiled with --compile)
            jobs = []
            for name, cfg, nseq, nmb in train_configs(self.smoke):
                if name in named and not any(j[0].startswith(f"profile_train_{name}_") for j in jobs):
                    for comp in (False, True) if self.args.compile else (False,):
                        tag = "compiled" if comp else "eager"
                        jobs.append((f"profile_train_{name}_s{nseq}_b{nmb}_{tag}", cfg, nseq, nmb, comp))
        meta = {}
        for pname, cfg, seq, mb, compiled in jobs:
            if time.time() > deadline:
                return
            try:
                cfg.seq_len = max(cfg.seq_len, seq)
                torch.manual_seed(0)
                with torch.device(dev):
                    model = GPT(cfg)
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda"
                                                                         else {}))
                x = torch.randint(0, cfg.vocab, (mb, seq), device=dev)
                ac = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
                run_model = model
                if compiled:
                    run_model = torch.compile(model)
                    for _ in range(3):  # compile outside the profiled steps
                        with ac:
                            run_model(x, x).backward()
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                    sync(dev)
                with profile(activities=acts, record_shapes=True,
                             schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
                    for _ in range(4):
                        with ac:
                            loss = run_model(x, x)
                        loss.backward()
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                        prof.step()
                self._save_trace(prof, os.path.join(outdir, pname + ".json.gz"))
                meta[pname] = {**cfg.asdict(), "mode": "train", "seq_len": seq, "micro_batch": mb,
                               "precision": "fp32 params + autocast bf16, AdamW fused",
                               "framework": "compiled" if compiled else "eager"}
                del model, run_model, opt
                if compiled:
                    torch._dynamo.reset()
                self.cleanup()
            except Exception as e:  # noqa: BLE001
                log("ERROR profile", pname, repr(e)[:300])
        # inference: each profiler step = prefill (b=4, 512 tokens) + 8 eager decode steps; with
        # --profile-infer MODEL:BATCH:PROMPT one of infer_models at that batch and prompt instead
        pinf = self.args.profile_infer
        if (self.args.compile or named) and not pinf:
            self.configs["profiles"] = meta
            return
        try:
            cfg = GPTConfig(**{**small, "vocab": 512 if self.smoke else 128256}, kv_heads=small["heads"] // 4,
                            ffn_hidden=4 * small["hidden"], activation="swiglu", norm="rmsnorm", tied=True)
            b, P, D = (2, 32, 4) if self.smoke else (4, 512, 8)
            pname = "profile_infer_prefill_decode"
            if pinf:
                iname, ib, ip = pinf.split(":")
                cfg = dict(infer_models(self.smoke))[iname]
                b, P = int(ib), int(ip) if not self.smoke else 32
                pname = f"profile_infer_{iname}_b{b}_p{P}"
            torch.manual_seed(0)
            with torch.device(dev):
                model = GPT(cfg)
            model.to(torch.bfloat16).eval()
            caches = make_kv_caches(cfg, b, P + D, dev)
            x = torch.randint(0, cfg.vocab, (b, P), device=dev)
            with torch.no_grad(), profile(activities=acts, record_shapes=True,
                                          schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
                for _ in range(4):
                    tok = model(x, kv_caches=caches, pos=0, last_only=True).argmax(-1)
                    for i in range(D):
                        tok = model(tok, kv_caches=caches, pos=P + i, last_only=True).argmax(-1)
                    prof.step()
            self._save_trace(prof, os.path.join(outdir, pname + ".json.gz"))
            meta[pname] = {**cfg.asdict(), "mode": "prefill+decode", "batch": b, "prompt": P, "decode_steps": D,
                           "precision": "bf16 params"}
        except Exception as e:  # noqa: BLE001
            log("ERROR profile infer", repr(e)[:300])
        self.configs["profiles"] = meta

    def _save_trace(self, prof, path):
        tmp = path[:-3]
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as f, gzip.open(path, "wb", compresslevel=9) as g:
            g.write(f.read())
        os.remove(tmp)
        log(f"trace {path}: {os.path.getsize(path) / 1e6:.2f} MB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--configs-json", default=None)
    ap.add_argument("--profile-dir", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="train,infer,profiles")
    ap.add_argument("--budget", type=float, default=420.0)
    ap.add_argument("--compile", action="store_true", help="also time each training config under torch.compile")
    ap.add_argument("--names", default="", help="comma-separated training config names (default: all)")
    ap.add_argument("--profile-names", default="", help="profile these full-size training configs (eager, and "
                    "compiled with --compile) instead of the 4-layer models")
    ap.add_argument("--profile-infer", default="", help="MODEL:BATCH:PROMPT: profile prefill + 8 decode steps of "
                    "this inference model instead of the 4-layer one")
    args = ap.parse_args()
    R = Runner(args)
    st = probe_sdpa(R.dev)
    info = env_info(R.dev)
    info["sdpa"] = dict(st)
    log("env", json.dumps(info))
    t0 = time.time()
    shares = {"train": 0.5, "infer": 0.35, "profiles": 0.15}
    secs = [s for s in args.only.split(",") if s]
    for i, s in enumerate(secs):
        rest = sum(shares[x] for x in secs[i:])
        left = args.budget - (time.time() - t0)
        deadline = time.time() + left * shares[s] / rest
        log(f"== {s} (until +{deadline - t0:.0f}s)")
        try:
            getattr(R, f"run_{s}")(deadline)
        except Exception as e:  # noqa: BLE001
            log("ERROR section", s, repr(e)[:400])
        R.cleanup()
        if args.configs_json:
            with open(args.configs_json, "w") as f:
                json.dump({"env": info, "recipe": {
                    "train": "fp32 params; forward+loss under torch.autocast('cuda', torch.bfloat16); "
                             "loss = F.cross_entropy(logits.float()); backward; AdamW(fused=True, lr=1e-4, "
                             "weight_decay=0.1).step(); zero_grad(set_to_none=True)",
                    "infer": "bf16 params; torch.no_grad(); KV cache preallocated per layer "
                             "[batch, kv_heads, ctx, head_dim] bf16; decode step at context L writes k,v at "
                             "position L-1 and runs SDPA(flash) of 1 query over cache[:, :, :L]; logits of the "
                             "last position only, then argmax"}, **R.configs}, f, indent=1)
    R.out.close()
    log(f"done: {R.out.n} rows, {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
