"""Host (CPU dispatch) overhead per call of eager PyTorch constructs, with tiny tensors.

  python tools/bench_host.py --out host.csv            # on one GPU
  python tools/bench_host.py --smoke --out /tmp/host.csv   # CPU, few calls (tests the script)
  python tools/bench_host.py --infer --out host_infer.csv  # inference mode (see run_infer)

Every tensor is tiny (Linear 64x64, 8 tokens), so the GPU is never the bottleneck: what is timed is the
host's time to issue the work.

host_s_per_call: per point, warm-up calls, then 5 repeats of n back-to-back calls (n sized to ~0.08 s per
  repeat, 20 <= n <= 2000) timed with time.perf_counter, one torch.cuda.synchronize() before and after each
  repeat; value = median over repeats of (repeat time / n). gc.collect() runs before each point, the
  garbage collector stays on (as in training).
gpu_s_per_call: device time of the same work without launch gaps: torch.cuda._sleep() holds the stream
  while the host queues n (<= 30) calls behind it; CUDA events recorded after the sleep and after the last
  call give the device's busy time per call. Only kept when the host finished queueing before the sleep
  ended (checked with event.query()); empty otherwise (and on CPU).
framework: `eager` = measured; `derived` = a difference of measured rows (the formula is in notes), e.g.
  the extra host time that torch.utils.checkpoint adds per checkpointed region, or a per-tensor slope.
The first row (name `env`) holds the torch / CUDA / GPU versions in notes.

--infer (Bench.run_infer): inference as tools/bench_steps.py runs it (bf16 parameters, model.eval(), no
  autocast, torch.no_grad(), preallocated KV cache, tools/gpt.py GPT with 1, 4 and 8 layers, hidden 64, 4 heads,
  vocab 512, batch 1): a decode step (1 token at pos 8 over a 16-slot cache, last_only logits, argmax), a
  prefill (8 tokens at pos 0, cache written, last_only logits), the decode step captured in a CUDA graph
  (replay), and a torch.profiler count of kernels and aten ops of one eager step. Derived rows: per-layer
  slope between 1 and 4 layers, fixed part = intercept, and the 1-to-8 slope as a linearity check.

--profiled (Bench.run_profiled): the per-layer points of both modes (training: 1 and 4 gpt.py Blocks, recompute
  none, autocast bf16, forward and forward+backward; inference: decode step and prefill of a 1- and 4-layer GPT,
  bf16, no_grad), each measured unprofiled (plain name) and then with torch.profiler recording
  (`profiled_<name>`: profile(activities=[CPU, CUDA], record_shapes=True, with_stack=False), a fresh profiler
  per point, <= 200 calls under it, only calls inside the recording window timed, the profiler's stop not);
  derived per-layer slopes, intercepts and `profiler_extra_*` = profiled - unprofiled.
  `--profiled --merge a.csv.gz b.csv.gz --out m.csv` combines runs (min per point, derived rows recomputed).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, capture_graph, log  # noqa: E402
from gpt import GPT, SDPA_STATE, Block, GPTConfig, RMSNorm, make_kv_caches, probe_sdpa, sdpa  # noqa: E402

COLS = ["name", "framework", "calls", "host_s_per_call", "gpu_s_per_call", "notes"]
H, T = 64, 8  # hidden size, tokens


class Bench:
    def __init__(self, args):
        self.smoke = args.smoke
        self.dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
        self.cuda = self.dev.type == "cuda"
        self.out = CsvOut(args.out, COLS)
        self.res: dict[str, float] = {}
        self.gres: dict[str, float] = {}
        self.deadline = time.time() + args.budget
        self.cycles_per_s = self._calibrate_sleep() if self.cuda else 0.0

    # ------------------------------------------------------------------ timing
    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def _calibrate_sleep(self) -> float:
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        best = 0.0
        for _ in range(3):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(10_000_000)
            b.record()
            b.synchronize()
            best = max(best, 10_000_000 / (a.elapsed_time(b) / 1e3))
        log(f"sleep calibration: {best / 1e9:.2f} G cycles/s")
        return best

    def host_per_call(self, fn, reps: int = 5, target: float = 0.08) -> tuple[float, int, float]:
        warm = 3 if self.smoke else 20
        for _ in range(warm):
            fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(5):
            fn()
        self.sync()
        t1 = (time.perf_counter() - t0) / 5
        n = 10 if self.smoke else max(20, min(2000, int(target / max(t1, 1e-7))))
        reps = 2 if self.smoke else reps
        gc.collect()
        ts = []
        for _ in range(reps):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            self.sync()
            ts.append((time.perf_counter() - t0) / n)
        med = statistics.median(ts)
        return med, n, (max(ts) - min(ts)) / med

    def gpu_per_call(self, fn, host_s: float) -> tuple[float | None, str]:
        if not self.cuda:
            return None, ""
        for n in (30, 8):
            sleep_s = min(0.5, max(0.01, 3.0 * n * host_s))
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(sleep_s * self.cycles_per_s))
            a.record()
            for _ in range(n):
                fn()
            b.record()
            ahead = not a.query()
            b.synchronize()
            if ahead:
                return a.elapsed_time(b) / 1e3 / n, f"gpu over {n} queued calls"
        return None, "gpu: host could not queue ahead of the device"

    # ------------------------------------------------------------------ rows
    def point(self, name: str, fn, notes: str = "", gpu: bool = True) -> None:
        if time.time() > self.deadline:
            log("budget reached, skipping", name)
            return
        try:
            host, n, spread = self.host_per_call(fn)
            g, gnote = self.gpu_per_call(fn, host) if gpu else (None, "")
            self.res[name] = host
            if g is not None:
                self.gres[name] = g
            note = "; ".join(x for x in (notes, f"spread {spread:.3f}", gnote) if x)
            self.out.row(
                name=name, framework="eager", calls=n, host_s_per_call=host, gpu_s_per_call=g, notes=note
            )
            log(
                f"{name:58s} host {host * 1e6:9.2f} us/call  gpu {'' if g is None else f'{g * 1e6:8.2f} us'}"
                f"  n={n} spread={spread:.3f}"
            )
        except Exception as e:  # noqa: BLE001
            self.out.row(name=name, framework="eager", notes=f"error: {repr(e)[:300]}")
            log(f"ERROR {name}: {repr(e)[:300]}")

    def derived(
        self, name: str, terms: list[tuple[float, str]], div: float = 1.0, notes: str = "", gpu: bool = False
    ) -> None:
        """host = (sum of coef * res[name]) / div; with gpu=True also the same formula on gpu_s_per_call."""
        if any(t not in self.res for _, t in terms):
            return
        v = sum(c * self.res[t] for c, t in terms) / div
        self.res[name] = v
        g = None
        if gpu and all(t in self.gres for _, t in terms):
            g = sum(c * self.gres[t] for c, t in terms) / div
            self.gres[name] = g
        formula = " ".join(
            f"{'+' if c > 0 else '-'}{'' if abs(c) == 1 else f'{abs(c):g}'}{t}" for c, t in terms
        )
        formula = f"({formula.lstrip('+')})" + (f" / {div:g}" if div != 1 else "")
        self.out.row(
            name=name,
            framework="derived",
            host_s_per_call=v,
            gpu_s_per_call=g,
            notes="; ".join(x for x in (f"= {formula}", notes) if x),
        )
        log(f"{name:58s} host {v * 1e6:9.2f} us  (derived){'' if g is None else f'  gpu {g * 1e6:8.2f} us'}")

    # ------------------------------------------------------------------ measurements
    def run(self) -> None:
        dev = self.dev
        ver = (
            f"torch {torch.__version__}; cuda {torch.version.cuda}; python {platform.python_version()}; "
            f"device {torch.cuda.get_device_name() if self.cuda else 'cpu'}; "
            f"sdpa {'flash forced' if SDPA_STATE['force_flash'] else 'default'}"
        )
        self.out.row(name="env", framework="", notes=ver)
        log(ver)
        torch.manual_seed(0)
        x0 = torch.randn(T, H, device=dev)

        # ---- reference: a bare op and an empty module call
        xa = x0.clone()
        self.point("bare_add_inplace", lambda: xa.add_(1.0), "x.add_(1.0), x [8,64] fp32, one kernel")
        ident = nn.Identity()
        self.point("module_call_identity", lambda: ident(x0), "nn.Identity()(x): module __call__, no kernel")

        # ---- (a)/(b) checkpoint around a tiny region: one Linear(64,64) + GELU
        lin = nn.Linear(H, H, device=dev)
        xg = torch.randn(T, H, device=dev, requires_grad=True)

        def region(x):
            return F.gelu(lin(x))

        def fwd_plain():
            return region(xg)

        def fb_plain():
            region(xg).sum().backward()

        self.point("region_fwd", fwd_plain, "Linear(64,64)+GELU forward, grad enabled, input requires grad")
        self.point("region_fwd_bwd", fb_plain, "region forward + .sum().backward() (grads accumulate)")
        variants = [
            ("ckpt_nonreentrant", dict(use_reentrant=False)),
            ("ckpt_nonreentrant_norng", dict(use_reentrant=False, preserve_rng_state=False)),
            ("ckpt_reentrant", dict(use_reentrant=True)),
        ]
        for vname, kw in variants:

            def fwd_ck(kw=kw):
                return checkpoint(region, xg, **kw)

            def fb_ck(kw=kw):
                checkpoint(region, xg, **kw).sum().backward()

            self.point(f"{vname}_fwd", fwd_ck, f"torch.utils.checkpoint.checkpoint(region, x, {kw}) forward")
            self.point(f"{vname}_fwd_bwd", fb_ck, "same, forward + .sum().backward()")
            self.derived(
                f"{vname}_extra_fwd",
                [(1, f"{vname}_fwd"), (-1, "region_fwd")],
                notes="extra host time per checkpointed region in forward",
            )
            self.derived(
                f"{vname}_extra_total",
                [(1, f"{vname}_fwd_bwd"), (-1, "region_fwd_bwd")],
                notes="extra host time per checkpointed region, forward + backward (recompute included)",
            )
            self.derived(
                f"{vname}_extra_bwd",
                [(1, f"{vname}_extra_total"), (-1, f"{vname}_extra_fwd")],
                notes="extra host time per region in backward, including the recomputed forward",
            )
            self.derived(
                f"{vname}_extra_bwd_minus_recompute",
                [(1, f"{vname}_extra_bwd"), (-1, "region_fwd")],
                notes="backward machinery alone: extra_bwd minus one plain region forward",
            )

        # ---- (c) autocast cast dispatch on a Linear forward (fp32 weights)
        ac = dict(device_type=dev.type, dtype=torch.bfloat16)
        self.point(
            "linear_fwd_fp32", lambda: lin(x0), "nn.Linear(64,64) fp32 weight, fp32 input, no autocast"
        )
        lin16 = nn.Linear(H, H, device=dev, dtype=torch.bfloat16)
        x16 = x0.to(torch.bfloat16)
        self.point("linear_fwd_bf16_native", lambda: lin16(x16), "bf16 weight and input, no autocast")
        with torch.autocast(**ac, cache_enabled=False):
            self.point(
                "linear_fwd_autocast_nocache",
                lambda: lin(x0),
                "inside one autocast(bf16, cache_enabled=False): casts weight, bias and input every call",
            )
        with torch.autocast(**ac):
            self.point(
                "linear_fwd_autocast_cached",
                lambda: lin(x0),
                "inside one autocast(bf16) context: weight cast cached after the first call, input cast",
            )

        def ac_enter_call():
            with torch.autocast(**ac):
                return lin(x0)

        self.point(
            "linear_fwd_autocast_enter_exit",
            ac_enter_call,
            "autocast context entered and left around every call (cache emptied on exit)",
        )

        def ac_enter_only():
            with torch.autocast(**ac):
                pass

        self.point(
            "autocast_enter_exit_empty",
            ac_enter_only,
            "entering and leaving torch.autocast, no op",
            gpu=False,
        )
        self.derived(
            "autocast_extra_linear_fwd",
            [(1, "linear_fwd_autocast_nocache"), (-1, "linear_fwd_fp32")],
            notes="cast dispatch of one fp32-weight Linear under autocast (weight+bias+input casts)",
        )
        self.derived(
            "autocast_extra_linear_fwd_cached",
            [(1, "linear_fwd_autocast_cached"), (-1, "linear_fwd_fp32")],
            notes="same with the weight cast served from the autocast cache",
        )

        def lin_fb_fp32():
            lin(xg).sum().backward()

        def lin_fb_ac():
            with torch.autocast(**ac, cache_enabled=False):
                y = lin(xg)
            y.float().sum().backward()

        self.point("linear_fwd_bwd_fp32", lin_fb_fp32, "Linear forward + sum().backward(), fp32")
        self.point(
            "linear_fwd_bwd_autocast_nocache",
            lin_fb_ac,
            "same with the forward under autocast(bf16, cache_enabled=False), y.float().sum().backward()",
        )
        self.derived(
            "autocast_extra_linear_fwd_bwd",
            [(1, "linear_fwd_bwd_autocast_nocache"), (-1, "linear_fwd_bwd_fp32")],
            notes="includes the extra .float() of the output and the cast-backward nodes",
        )

        # ---- (d) norms: module call vs functional
        ln = nn.LayerNorm(H, bias=False, device=dev)
        rms = RMSNorm(H).to(dev)
        self.point("layernorm_module_fwd", lambda: ln(xg), "nn.LayerNorm(64, bias=False)(x), grad enabled")
        self.point(
            "layer_norm_functional_fwd",
            lambda: F.layer_norm(xg, (H,), ln.weight),
            "F.layer_norm(x, (64,), weight)",
        )
        self.point("rmsnorm_module_fwd", lambda: rms(xg), "tools/gpt.py RMSNorm module (F.rms_norm inside)")
        if hasattr(F, "rms_norm"):
            self.point(
                "rms_norm_functional_fwd",
                lambda: F.rms_norm(xg, (H,), rms.weight, 1e-5),
                "F.rms_norm(x, (64,), weight, 1e-5)",
            )
        self.derived(
            "module_overhead_layernorm", [(1, "layernorm_module_fwd"), (-1, "layer_norm_functional_fwd")]
        )
        self.derived("module_overhead_rmsnorm", [(1, "rmsnorm_module_fwd"), (-1, "rms_norm_functional_fwd")])
        self.point(
            "linear_functional_fwd_fp32", lambda: F.linear(x0, lin.weight, lin.bias), "F.linear(x, w, b)"
        )
        self.derived("module_overhead_linear", [(1, "linear_fwd_fp32"), (-1, "linear_functional_fwd_fp32")])
        with torch.autocast(**ac, cache_enabled=False):
            self.point(
                "layernorm_module_fwd_autocast",
                lambda: ln(xg),
                "under autocast(bf16): layer_norm runs in fp32 (autocast fp32 list)",
            )
            self.point("rmsnorm_module_fwd_autocast", lambda: rms(xg), "under autocast(bf16)")

        # ---- (e) tiny transformer layers (tools/gpt.py Block), forward+backward, autocast bf16
        layer_variants = [
            ("gpt_ln_gelu", dict()),
            ("llama_rms_swiglu_gqa", dict(activation="swiglu", norm="rmsnorm", kv_heads=2)),
        ]
        for lname, extra in layer_variants:
            recomputes = ["none", "full", "selective"] if lname == "gpt_ln_gelu" else ["none", "full"]
            for rc in recomputes:
                cfg = GPTConfig(layers=4, hidden=H, heads=4, vocab=512, seq_len=T, recompute=rc, **extra)
                blocks = nn.ModuleList([Block(cfg) for _ in range(4)]).to(dev).train()
                xb = torch.randn(1, T, H, device=dev, requires_grad=True)
                for L in (1, 4):

                    def fwd(L=L, blocks=blocks, xb=xb, rc=rc):
                        with torch.autocast(**ac):
                            h = xb
                            for blk in blocks[:L]:
                                h = checkpoint(blk, h, use_reentrant=False) if rc == "full" else blk(h)
                        return h

                    def fb(fwd=fwd):
                        fwd().float().sum().backward()

                    base = f"layers{L}_{lname}_rc_{rc}"
                    desc = (
                        f"{L} x gpt.py Block (h {H}, 4 heads, seq {T}, batch 1, {cfg.activation}, {cfg.norm}, "
                        f"kv_heads {cfg.kv_heads}), recompute={rc}, autocast bf16, fp32 params"
                    )
                    if rc != "selective":
                        self.point(base + "_fwd", fwd, desc + "; forward with grad enabled")
                    self.point(base + "_fwd_bwd", fb, desc + "; forward + .float().sum().backward()")
                for ph in ("fwd", "fwd_bwd"):
                    self.derived(
                        f"per_layer_{lname}_rc_{rc}_{ph}",
                        [(1, f"layers4_{lname}_rc_{rc}_{ph}"), (-1, f"layers1_{lname}_rc_{rc}_{ph}")],
                        3,
                        notes="host time per transformer layer: slope between 1 and 4 layers",
                    )
            self.derived(
                f"per_layer_{lname}_full_ckpt_extra_fwd_bwd",
                [(1, f"per_layer_{lname}_rc_full_fwd_bwd"), (-1, f"per_layer_{lname}_rc_none_fwd_bwd")],
                notes="extra host time of one checkpointed layer (recompute forward included)",
            )
            self.derived(
                f"per_layer_{lname}_full_ckpt_extra_fwd",
                [(1, f"per_layer_{lname}_rc_full_fwd"), (-1, f"per_layer_{lname}_rc_none_fwd")],
                notes="extra host time of one checkpointed layer in forward",
            )
        self.derived(
            "per_layer_gpt_ln_gelu_selective_extra_fwd_bwd",
            [
                (1, "per_layer_gpt_ln_gelu_rc_selective_fwd_bwd"),
                (-1, "per_layer_gpt_ln_gelu_rc_none_fwd_bwd"),
            ],
            notes="extra host time of checkpointing the SDPA call of one layer",
        )

        # a lone SDPA call (flash forced on CUDA), bf16 [1,4,8,16]
        q = torch.randn(1, 4, T, H // 4, device=dev, dtype=torch.bfloat16)
        self.point(
            "sdpa_fwd_bf16", lambda: sdpa(q, q, q, True), "gpt.py sdpa() (sdpa_kernel ctx + SDPA), causal"
        )

        # ---- (f) zero_grad(set_to_none=True) and (g) AdamW(fused).step(), many tiny tensors
        counts = (10, 100) if self.smoke else (10, 100, 1000)
        fused_ok = True
        for P in counts:
            ps = [torch.zeros(H, device=dev, requires_grad=True) for _ in range(P)]
            gs = [torch.randn(H, device=dev) for _ in range(P)]
            try:
                opt = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, fused=True)
            except Exception as e:  # noqa: BLE001
                fused_ok = False
                log("fused AdamW unavailable:", repr(e)[:200])
                opt = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, foreach=True)

            def assign(ps=ps, gs=gs):
                for p, g in zip(ps, gs, strict=True):
                    p.grad = g

            def assign_zero_none(assign=assign, opt=opt):
                assign()
                opt.zero_grad(set_to_none=True)

            def assign_zero_fill(assign=assign, opt=opt):
                assign()
                opt.zero_grad(set_to_none=False)

            d = f"{P} params of [64] fp32"
            self.point(f"grad_assign_{P}", assign, d + "; python loop p.grad = g (the baseline)", gpu=False)
            self.point(
                f"grad_assign_zero_grad_none_{P}",
                assign_zero_none,
                d + "; assign + zero_grad(set_to_none=True)",
                gpu=False,
            )
            self.point(
                f"grad_assign_zero_grad_fill_{P}",
                assign_zero_fill,
                d + "; assign + zero_grad(set_to_none=False) (foreach zero_)",
            )
            self.derived(
                f"zero_grad_none_{P}",
                [(1, f"grad_assign_zero_grad_none_{P}"), (-1, f"grad_assign_{P}")],
                notes=f"optimizer.zero_grad(set_to_none=True) over {P} tensors",
            )
            self.derived(
                f"zero_grad_fill_{P}",
                [(1, f"grad_assign_zero_grad_fill_{P}"), (-1, f"grad_assign_{P}")],
                notes=f"optimizer.zero_grad(set_to_none=False) over {P} tensors",
            )
            assign()
            impl = "fused" if fused_ok else "foreach(fallback)"
            self.point(
                f"adamw_{impl}_step_{P}", opt.step, f"{d}; AdamW({impl}, lr 1e-4, wd 0.1).step(), grads set"
            )
            opt2 = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, foreach=True)
            self.point(f"adamw_foreach_step_{P}", opt2.step, f"{d}; AdamW(foreach=True).step(), grads set")
            del opt, opt2
        a, b = counts[-2], counts[-1]
        impl = "fused" if fused_ok else "foreach(fallback)"
        for stem in (f"adamw_{impl}_step", "adamw_foreach_step", "zero_grad_none", "zero_grad_fill"):
            self.derived(
                f"{stem}_per_tensor",
                [(1, f"{stem}_{b}"), (-1, f"{stem}_{a}")],
                b - a,
                notes=f"host time per parameter tensor: slope between {a} and {b} tensors",
            )
            self.derived(
                f"{stem}_fixed",
                [(1 + a / (b - a), f"{stem}_{a}"), (-a / (b - a), f"{stem}_{b}")],
                notes=f"intercept (0 tensors) of the line through {a} and {b} tensors",
            )
        self.out.close()
        log(f"done: {self.out.n} rows")

    # ------------------------------------------------------------------ inference (--infer)
    def _profile_counts(self, fn) -> tuple[collections.Counter, int, float]:
        """One call of fn under torch.profiler: (kernel-name counter, aten-op count, summed kernel time s)."""
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        for _ in range(3):
            fn()
        self.sync()
        with profile(activities=acts) as prof:
            fn()
            self.sync()
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                evs = json.load(f).get("traceEvents", [])
        finally:
            os.unlink(path)
        kern: collections.Counter = collections.Counter()
        ops = 0
        ktime = 0.0
        for e in evs:
            cat = e.get("cat", "")
            if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
                kern[(cat + ":" if cat != "kernel" else "") + e.get("name", "?")[:60]] += 1
                ktime += float(e.get("dur", 0.0)) * 1e-6
            elif cat == "cpu_op":
                ops += 1
        return kern, ops, ktime

    def count_point(self, stem: str, lname: str, fns: dict[int, object], desc: str) -> None:
        """Rows kernels_<stem>_layers<L>_<lname> (count in `calls`) and the per-layer slope 1 -> 4."""
        if time.time() > self.deadline:
            log("budget reached, skipping counts", stem, lname)
            return
        try:
            got = {L: self._profile_counts(fn) for L, fn in fns.items()}
        except Exception as e:  # noqa: BLE001
            self.out.row(
                name=f"kernels_{stem}_{lname}", framework="profiler", notes=f"error: {repr(e)[:300]}"
            )
            log(f"ERROR counts {stem} {lname}: {repr(e)[:300]}")
            return
        for L, (kern, ops, kt) in got.items():
            n = sum(kern.values())
            self.out.row(
                name=f"kernels_{stem}_layers{L}_{lname}",
                framework="profiler",
                calls=n,
                gpu_s_per_call=kt if self.cuda else None,
                notes=f"{desc}, {L} layers; calls = kernels+memcpy+memset of one step (torch.profiler); "
                f"gpu = their summed durations; aten ops (cpu_op events, nested included) {ops}",
            )
            log(f"kernels {stem} L={L} {lname}: {n} kernels, {ops} aten ops, {kt * 1e6:.1f} us kernel time")
        if 1 in got and 4 in got:
            k1, o1, t1 = got[1]
            k4, o4, t4 = got[4]
            diff = {k: (k4[k] - k1.get(k, 0)) / 3 for k in k4 if k4[k] != k1.get(k, 0)}
            per = (sum(k4.values()) - sum(k1.values())) / 3
            fixed = sum(k1.values()) - per
            names = ", ".join(f"{v:g}x {k}" for k, v in sorted(diff.items(), key=lambda kv: -kv[1]))
            self.out.row(
                name=f"kernels_per_layer_{stem}_{lname}",
                framework="derived",
                calls=round(per),
                gpu_s_per_call=(t4 - t1) / 3 if self.cuda else None,
                notes=f"= (layers4 - layers1) / 3 = {per:g} kernels per layer (calls column, rounded); "
                f"fixed (intercept) {fixed:g} kernels; aten ops per layer {(o4 - o1) / 3:g}, fixed "
                f"{o1 - (o4 - o1) / 3:g}; gpu = summed kernel durations per layer; per layer: {names}"[:1500],
            )
            log(f"kernels per layer {stem} {lname}: {per:g} (fixed {fixed:g}); ops/layer {(o4 - o1) / 3:g}")
            self.res[f"kernels_per_layer_{stem}_{lname}"] = per

    def graph_point(self, name: str, fn, notes: str) -> None:
        """CUDA-graph replay: host_per_call/gpu_per_call rows, plus the host time to issue one replay."""
        self.point(name, fn, notes)
        if not self.cuda or time.time() > self.deadline:
            return
        try:
            n = 50
            ts = []
            for _ in range(5):
                torch.cuda.synchronize()
                a = torch.cuda.Event()
                torch.cuda._sleep(int(0.02 * self.cycles_per_s))
                a.record()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                dt = (time.perf_counter() - t0) / n
                ahead = not a.query()
                torch.cuda.synchronize()
                if ahead:
                    ts.append(dt)
            if ts:
                v = statistics.median(ts)
                self.res[name + "_issue"] = v
                self.out.row(
                    name=name + "_issue",
                    framework="eager",
                    calls=n,
                    host_s_per_call=v,
                    notes="host time to issue one g.replay() while the stream is held by torch.cuda._sleep "
                    f"(median of {len(ts)} repeats of {n} replays)",
                )
                log(f"{name + '_issue':58s} host {v * 1e6:9.2f} us/replay (issue only)")
        except Exception as e:  # noqa: BLE001
            log(f"ERROR issue {name}: {repr(e)[:300]}")

    def _infer_derived(self, lname: str) -> None:
        """Derived rows of one layer variant (from self.res / self.gres; also used by --merge)."""
        for stem in ("decode", "prefill"):
            self.derived(
                f"per_layer_{stem}_{lname}",
                [(1, f"{stem}_layers4_{lname}"), (-1, f"{stem}_layers1_{lname}")],
                3,
                notes="host time per layer: slope between 1 and 4 layers (gpu: eager device time per layer)",
                gpu=True,
            )
            self.derived(
                f"per_layer_{stem}_{lname}_1to8",
                [(1, f"{stem}_layers8_{lname}"), (-1, f"{stem}_layers1_{lname}")],
                7,
                notes="slope between 1 and 8 layers (linearity check)",
                gpu=True,
            )
            self.derived(
                f"{stem}_fixed_{lname}",
                [(4 / 3, f"{stem}_layers1_{lname}"), (-1 / 3, f"{stem}_layers4_{lname}")],
                notes="intercept (0 layers) of the 1-vs-4-layer line: embedding, final norm, LM head on the "
                "last token" + (", argmax" if stem == "decode" else "") + ", no_grad entry",
                gpu=True,
            )
        self.derived(
            f"per_layer_decode_infmode_{lname}",
            [(1, f"decode_infmode_layers4_{lname}"), (-1, f"decode_infmode_layers1_{lname}")],
            3,
            notes="per-layer host time with torch.inference_mode()",
        )
        self.derived(
            f"graph_decode_per_layer_{lname}",
            [(1, f"graph_decode_layers4_{lname}"), (-1, f"graph_decode_layers1_{lname}")],
            3,
            notes="CUDA-graph replay time per layer (slope 1 -> 4 layers): host = wall, gpu = device time",
            gpu=True,
        )
        self.derived(
            f"graph_decode_per_layer_{lname}_1to8",
            [(1, f"graph_decode_layers8_{lname}"), (-1, f"graph_decode_layers1_{lname}")],
            7,
            notes="slope between 1 and 8 layers (linearity check)",
            gpu=True,
        )
        self.derived(
            f"graph_decode_fixed_{lname}",
            [(4 / 3, f"graph_decode_layers1_{lname}"), (-1 / 3, f"graph_decode_layers4_{lname}")],
            notes="intercept of the replay line (0 layers): graph launch + embedding/norm/head/argmax",
            gpu=True,
        )
        kpl = self.res.get(f"kernels_per_layer_decode_{lname}")
        gpl = self.gres.get(f"graph_decode_per_layer_{lname}")
        if kpl and gpl is not None:
            self.out.row(
                name=f"graph_decode_per_kernel_{lname}",
                framework="derived",
                host_s_per_call=self.res[f"graph_decode_per_layer_{lname}"] / kpl,
                gpu_s_per_call=gpl / kpl,
                notes=f"= graph_decode_per_layer / kernels_per_layer_decode ({kpl:g}): in-graph cost per "
                "kernel of tiny kernels (host col: wall-based, gpu col: device-time based)",
            )
            log(f"graph per kernel {lname}: {gpl / kpl * 1e6:.2f} us (gpu)")

    def merge(self, paths: list[str]) -> None:
        """Combine several --infer CSVs: each measured row becomes the minimum over runs (host noise only adds
        time), the per-run rows are kept with a _runK suffix, derived rows are recomputed from the minima."""
        import csv
        import gzip

        runs = []
        for p in paths:
            with gzip.open(p, "rt") if p.endswith(".gz") else open(p) as f:
                runs.append(list(csv.DictReader(f)))
        env = [r for r in runs[0] if r["name"] == "env"]
        self.out.row(
            name="env",
            framework="",
            notes=(env[0]["notes"] if env else "") + f"; merged: minimum over {len(runs)} runs of the same "
            "script on the same machine (tools/bench_host.py --merge)",
        )
        lnames: list[str] = []
        by_name: dict[str, list[dict]] = collections.defaultdict(list)
        for k, rows in enumerate(runs, 1):
            for r in rows:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    by_name[r["name"]].append(dict(r, run=k))
        for name, rs in by_name.items():
            best = min(rs, key=lambda r: float(r["host_s_per_call"]))
            gs = [float(r["gpu_s_per_call"]) for r in rs if r["gpu_s_per_call"]]
            host = float(best["host_s_per_call"])
            self.res[name] = host
            if gs:
                self.gres[name] = min(gs)
            per = ", ".join(f"run{r['run']} {float(r['host_s_per_call']) * 1e6:.1f}" for r in rs)
            base = best["notes"].split("; spread")[0]
            self.out.row(
                name=name,
                framework="eager",
                calls=best["calls"],
                host_s_per_call=host,
                gpu_s_per_call=min(gs) if gs else None,
                notes=f"{base}; min over runs (host us: {per}); gpu = min over runs",
            )
            for lname in ("gpt_ln_gelu", "llama_rms_swiglu_gqa"):
                if name.endswith(lname) and lname not in lnames:
                    lnames.append(lname)
        for r in runs[0]:  # profiler counts are deterministic: take run 1's
            if r["name"].startswith("kernels_"):
                self.out.row(**{c: r[c] for c in COLS})
                if r["name"].startswith("kernels_per_layer_") and r["calls"]:
                    m = r["notes"]
                    per_k = float(m.split("/ 3 = ")[1].split(" ")[0]) if "/ 3 = " in m else float(r["calls"])
                    self.res[r["name"]] = per_k
        for lname in lnames:
            self._infer_derived(lname)
        for k, rows in enumerate(runs, 1):
            for r in rows:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    self.out.row(**dict({c: r[c] for c in COLS}, name=f"{r['name']}_run{k}"))
        self.out.close()
        log(f"merged {len(runs)} runs: {self.out.n} rows")

    def run_infer(self) -> None:
        dev = self.dev
        ver = (
            f"torch {torch.__version__}; cuda {torch.version.cuda}; python {platform.python_version()}; "
            f"device {torch.cuda.get_device_name() if self.cuda else 'cpu'}; "
            f"sdpa {'flash forced' if SDPA_STATE['force_flash'] else 'default'}; gqa {SDPA_STATE['gqa_mode']}; "
            "mode infer"
        )
        self.out.row(name="env", framework="", notes=ver)
        log(ver)
        ctx, pos, tp = 16, 8, T  # cache slots, decode position, prefill tokens
        Ls = (1, 4, 8)
        variants = [
            ("gpt_ln_gelu", dict()),
            ("llama_rms_swiglu_gqa", dict(activation="swiglu", norm="rmsnorm", kv_heads=2)),
        ]
        for lname, extra in variants:
            models, dec, pre, caches_d = {}, {}, {}, {}
            for L in Ls:
                torch.manual_seed(0)
                cfg = GPTConfig(layers=L, hidden=H, heads=4, vocab=512, seq_len=ctx, **extra)
                m = GPT(cfg).to(dev).to(torch.bfloat16).eval()
                models[L] = m
                cd = make_kv_caches(cfg, 1, ctx, dev)
                for kc, vc in cd:
                    kc.normal_()
                    vc.normal_()
                caches_d[L] = cd
                cp = make_kv_caches(cfg, 1, ctx, dev)
                tok = torch.randint(0, cfg.vocab, (1, 1), device=dev)
                xp = torch.randint(0, cfg.vocab, (1, tp), device=dev)

                def dfn(m=m, cd=cd, tok=tok):
                    with torch.no_grad():
                        return m(tok, kv_caches=cd, pos=pos, last_only=True).argmax(-1)

                def pfn(m=m, cp=cp, xp=xp):
                    with torch.no_grad():
                        return m(xp, kv_caches=cp, pos=0, last_only=True)

                dec[L], pre[L] = dfn, pfn
            desc = (
                f"gpt.py GPT (h {H}, 4 heads, kv_heads {cfg.kv_heads}, {cfg.activation}, {cfg.norm}, vocab 512), "
                "bf16 params, eval, no autocast, torch.no_grad() entered per call"
            )
            # (a) decode step, (b) prefill
            for stem, fns, what in (
                (
                    "decode",
                    dec,
                    f"decode step: batch 1, 1 token at pos {pos}, {ctx}-slot KV cache, "
                    "last_only logits + argmax(-1)",
                ),
                (
                    "prefill",
                    pre,
                    f"prefill: batch 1, {tp} tokens at pos 0 (causal), KV cache written, last_only logits",
                ),
            ):
                for L in Ls:
                    self.point(f"{stem}_layers{L}_{lname}", fns[L], f"{desc}; {L} layers; {what}")
            # decode under torch.inference_mode instead of no_grad (1 and 4 layers)
            for L in (1, 4):
                m, cd = models[L], caches_d[L]
                tok = torch.randint(0, 512, (1, 1), device=dev)

                def ifn(m=m, cd=cd, tok=tok):
                    with torch.inference_mode():
                        return m(tok, kv_caches=cd, pos=pos, last_only=True).argmax(-1)

                self.point(
                    f"decode_infmode_layers{L}_{lname}",
                    ifn,
                    f"{desc}; {L} layers; decode step under torch.inference_mode() instead of no_grad",
                    gpu=False,
                )
            # (d) kernels and aten ops per layer
            self.count_point("decode", lname, {L: dec[L] for L in (1, 4)}, "eager decode step")
            self.count_point("prefill", lname, {L: pre[L] for L in (1, 4)}, "eager prefill")
            # (d) CUDA graph of the decode step
            if self.cuda:
                for L in Ls:
                    try:
                        g = capture_graph(dec[L])
                        self.graph_point(
                            f"graph_decode_layers{L}_{lname}",
                            g.replay,
                            f"{desc}; {L} layers; decode step captured in one CUDA graph; host = wall per "
                            "replay (back-to-back replays, so ~device-bound), gpu = device time per replay",
                        )
                    except Exception as e:  # noqa: BLE001
                        self.out.row(
                            name=f"graph_decode_layers{L}_{lname}",
                            framework="eager",
                            notes=f"error: {repr(e)[:300]}",
                        )
                        log(f"ERROR graph {L} {lname}: {repr(e)[:300]}")
            self._infer_derived(lname)
            del models, dec, pre, caches_d
        self.out.close()
        log(f"done: {self.out.n} rows")

    # ------------------------------------------------------------------ profiled (--profiled)
    def host_per_call_profiled(
        self, fn, reps: int = 3, target: float = 0.05, max_calls: int = 200
    ) -> tuple[float, int, float, float]:
        """host_per_call with torch.profiler recording (CPU + CUDA activities, record_shapes=True,
        with_stack=False, no schedule: recording from enter to exit). A fresh profiler per point, at most
        max_calls calls under it; only the repeats are timed (inside the recording window), the profiler's
        stop/processing after the last repeat is not. Returns (median s/call, n, spread, stop seconds)."""
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        warm, est = (2, 2) if self.smoke else (5, 3)
        reps = 2 if self.smoke else reps
        gc.collect()
        self.sync()
        prof = profile(activities=acts, record_shapes=True, with_stack=False)
        prof.__enter__()
        try:
            for _ in range(warm):
                fn()
            self.sync()
            t0 = time.perf_counter()
            for _ in range(est):
                fn()
            self.sync()
            t1 = (time.perf_counter() - t0) / est
            room = (max_calls - warm - est) // reps
            n = 5 if self.smoke else max(5, min(room, int(target / max(t1, 1e-7))))
            ts = []
            for _ in range(reps):
                self.sync()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                self.sync()
                ts.append((time.perf_counter() - t0) / n)
        finally:
            t0 = time.perf_counter()
            prof.__exit__(None, None, None)
            stop_s = time.perf_counter() - t0
            del prof
            gc.collect()
        med = statistics.median(ts)
        return med, n, (max(ts) - min(ts)) / med, stop_s

    def profiled_point(self, name: str, fn, notes: str = "") -> None:
        """Row `name` measured with the profiler recording (see host_per_call_profiled); no gpu column."""
        if time.time() > self.deadline:
            log("budget reached, skipping", name)
            return
        try:
            host, n, spread, stop_s = self.host_per_call_profiled(fn)
            self.res[name] = host
            note = "; ".join(
                x
                for x in (
                    notes,
                    "torch.profiler recording (CPU+CUDA, record_shapes, no stack), fresh profiler per point",
                    f"spread {spread:.3f}",
                    f"profiler stop {stop_s:.2f} s (not timed)",
                )
                if x
            )
            self.out.row(name=name, framework="eager", calls=n, host_s_per_call=host, notes=note)
            log(f"{name:58s} host {host * 1e6:9.2f} us/call  n={n} spread={spread:.3f} stop={stop_s:.2f}s")
        except Exception as e:  # noqa: BLE001
            self.out.row(name=name, framework="eager", notes=f"error: {repr(e)[:300]}")
            log(f"ERROR {name}: {repr(e)[:300]}")

    def pair_point(self, name: str, fn, notes: str) -> None:
        """The same work unprofiled (row `name`) and then with the profiler recording (`profiled_<name>`)."""
        self.point(name, fn, notes, gpu=False)
        self.profiled_point("profiled_" + name, fn, notes)

    def _profiled_derived(self, lnames: list[str]) -> None:
        """Per-layer slopes (1 -> 4 layers) and intercepts, unprofiled and profiled, plus profiler extras."""
        for lname in lnames:
            for pre in ("", "profiled_"):
                for ph in ("fwd", "fwd_bwd"):
                    self.derived(
                        f"{pre}per_layer_{lname}_rc_none_{ph}",
                        [
                            (1, f"{pre}layers4_{lname}_rc_none_{ph}"),
                            (-1, f"{pre}layers1_{lname}_rc_none_{ph}"),
                        ],
                        3,
                        notes="host time per transformer layer (training, autocast): slope between 1 and 4 layers"
                        + (", profiler recording" if pre else ""),
                    )
                    self.derived(
                        f"{pre}train_fixed_{lname}_rc_none_{ph}",
                        [
                            (4 / 3, f"{pre}layers1_{lname}_rc_none_{ph}"),
                            (-1 / 3, f"{pre}layers4_{lname}_rc_none_{ph}"),
                        ],
                        notes="intercept (0 layers): autocast entry"
                        + (" + .float().sum().backward() entry" if ph == "fwd_bwd" else "")
                        + (", profiler recording" if pre else ""),
                    )
                for stem in ("decode", "prefill"):
                    self.derived(
                        f"{pre}per_layer_{stem}_{lname}",
                        [(1, f"{pre}{stem}_layers4_{lname}"), (-1, f"{pre}{stem}_layers1_{lname}")],
                        3,
                        notes="host time per layer (inference): slope between 1 and 4 layers"
                        + (", profiler recording" if pre else ""),
                    )
                    self.derived(
                        f"{pre}{stem}_fixed_{lname}",
                        [(4 / 3, f"{pre}{stem}_layers1_{lname}"), (-1 / 3, f"{pre}{stem}_layers4_{lname}")],
                        notes="intercept (0 layers) of the 1-vs-4-layer line: embedding, final norm, LM head"
                        + (", argmax" if stem == "decode" else "")
                        + ", no_grad entry"
                        + (", profiler recording" if pre else ""),
                    )
            for base in (
                f"per_layer_{lname}_rc_none_fwd",
                f"per_layer_{lname}_rc_none_fwd_bwd",
                f"per_layer_decode_{lname}",
                f"per_layer_prefill_{lname}",
                f"decode_fixed_{lname}",
                f"prefill_fixed_{lname}",
            ):
                a, b = self.res.get("profiled_" + base), self.res.get(base)
                ratio = f"; ratio profiled/unprofiled {a / b:.3f}" if a is not None and b else ""
                self.derived(
                    f"profiler_extra_{base}",
                    [(1, f"profiled_{base}"), (-1, base)],
                    notes="host time the profiler adds (profiled - unprofiled, same run)" + ratio,
                )

    def run_profiled(self) -> None:
        """Per-layer host times with and without torch.profiler recording, training (rc none, autocast) and
        inference (decode / prefill, bf16, no_grad), both layer variants, 1 and 4 layers."""
        from torch.profiler import ProfilerActivity, profile

        dev = self.dev
        ver = (
            f"torch {torch.__version__}; cuda {torch.version.cuda}; python {platform.python_version()}; "
            f"device {torch.cuda.get_device_name() if self.cuda else 'cpu'}; "
            f"sdpa {'flash forced' if SDPA_STATE['force_flash'] else 'default'}; gqa {SDPA_STATE['gqa_mode']}; "
            "mode profiled"
        )
        self.out.row(name="env", framework="", notes=ver)
        log(ver)
        # initialise the profiler (CUPTI) once, outside any timed point
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        xw = torch.randn(T, H, device=dev)
        with profile(activities=acts, record_shapes=True, with_stack=False):
            for _ in range(3):
                xw.add_(1.0)
            self.sync()
        ac = dict(device_type=dev.type, dtype=torch.bfloat16)
        variants = [
            ("gpt_ln_gelu", dict()),
            ("llama_rms_swiglu_gqa", dict(activation="swiglu", norm="rmsnorm", kv_heads=2)),
        ]
        ctx, pos, tp = 16, 8, T
        for lname, extra in variants:
            # training: gpt.py Blocks, recompute none, autocast bf16, fp32 params (as run())
            torch.manual_seed(0)
            cfg = GPTConfig(layers=4, hidden=H, heads=4, vocab=512, seq_len=T, recompute="none", **extra)
            blocks = nn.ModuleList([Block(cfg) for _ in range(4)]).to(dev).train()
            xb = torch.randn(1, T, H, device=dev, requires_grad=True)
            for L in (1, 4):

                def fwd(L=L, blocks=blocks, xb=xb):
                    with torch.autocast(**ac):
                        h = xb
                        for blk in blocks[:L]:
                            h = blk(h)
                    return h

                def fb(fwd=fwd):
                    fwd().float().sum().backward()

                base = f"layers{L}_{lname}_rc_none"
                desc = (
                    f"{L} x gpt.py Block (h {H}, 4 heads, seq {T}, batch 1, {cfg.activation}, {cfg.norm}, "
                    f"kv_heads {cfg.kv_heads}), recompute=none, autocast bf16, fp32 params"
                )
                self.pair_point(base + "_fwd", fwd, desc + "; forward with grad enabled")
                self.pair_point(base + "_fwd_bwd", fb, desc + "; forward + .float().sum().backward()")
            del blocks, xb
            # inference: GPT, bf16 params, eval, no_grad per call (as run_infer())
            for L in (1, 4):
                torch.manual_seed(0)
                icfg = GPTConfig(layers=L, hidden=H, heads=4, vocab=512, seq_len=ctx, **extra)
                m = GPT(icfg).to(dev).to(torch.bfloat16).eval()
                cd = make_kv_caches(icfg, 1, ctx, dev)
                for kc, vc in cd:
                    kc.normal_()
                    vc.normal_()
                cp = make_kv_caches(icfg, 1, ctx, dev)
                tok = torch.randint(0, icfg.vocab, (1, 1), device=dev)
                xp = torch.randint(0, icfg.vocab, (1, tp), device=dev)

                def dfn(m=m, cd=cd, tok=tok):
                    with torch.no_grad():
                        return m(tok, kv_caches=cd, pos=pos, last_only=True).argmax(-1)

                def pfn(m=m, cp=cp, xp=xp):
                    with torch.no_grad():
                        return m(xp, kv_caches=cp, pos=0, last_only=True)

                idesc = (
                    f"gpt.py GPT (h {H}, 4 heads, kv_heads {icfg.kv_heads}, {icfg.activation}, {icfg.norm}, "
                    f"vocab 512), bf16 params, eval, no autocast, torch.no_grad() entered per call; {L} layers"
                )
                self.pair_point(
                    f"decode_layers{L}_{lname}",
                    dfn,
                    f"{idesc}; decode step: batch 1, 1 token at pos {pos}, {ctx}-slot KV cache, last_only "
                    "logits + argmax(-1)",
                )
                self.pair_point(
                    f"prefill_layers{L}_{lname}",
                    pfn,
                    f"{idesc}; prefill: batch 1, {tp} tokens at pos 0 (causal), KV cache written, last_only logits",
                )
                del m, cd, cp
            self._profiled_derived([lname])
        self.out.close()
        log(f"done: {self.out.n} rows")

    def merge_profiled(self, paths: list[str]) -> None:
        """Combine several --profiled CSVs: each measured row becomes the minimum over runs, per-run rows are
        kept with a _runK suffix, derived rows are recomputed from the minima."""
        import csv
        import gzip

        runs = []
        for p in paths:
            with gzip.open(p, "rt") if p.endswith(".gz") else open(p) as f:
                runs.append(list(csv.DictReader(f)))
        env = [r for r in runs[0] if r["name"] == "env"]
        self.out.row(
            name="env",
            framework="",
            notes=(env[0]["notes"] if env else "") + f"; merged: minimum over {len(runs)} runs of the same "
            "script on the same machine (tools/bench_host.py --profiled --merge)",
        )
        by_name: dict[str, list[dict]] = collections.defaultdict(list)
        for k, rows in enumerate(runs, 1):
            for r in rows:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    by_name[r["name"]].append(dict(r, run=k))
        lnames = [ln for ln in ("gpt_ln_gelu", "llama_rms_swiglu_gqa") if any(ln in n for n in by_name)]
        for name, rs in by_name.items():
            best = min(rs, key=lambda r: float(r["host_s_per_call"]))
            host = float(best["host_s_per_call"])
            self.res[name] = host
            per = ", ".join(f"run{r['run']} {float(r['host_s_per_call']) * 1e6:.1f}" for r in rs)
            base = best["notes"].split("; spread")[0]
            self.out.row(
                name=name,
                framework="eager",
                calls=best["calls"],
                host_s_per_call=host,
                notes=f"{base}; min over runs (host us: {per})",
            )
        self._profiled_derived(lnames)
        for k, rows in enumerate(runs, 1):
            for r in rows:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    self.out.row(**dict({c: r[c] for c in COLS}, name=f"{r['name']}_run{k}"))
        self.out.close()
        log(f"merged {len(runs)} runs: {self.out.n} rows")


# ---------------------------------------------------------------------------------------------- --dist (round 5)
class _NullOut:
    """CsvOut stand-in for ranks other than 0 (only rank 0 writes)."""

    n = 0

    def row(self, **kw) -> None:
        pass

    def close(self) -> None:
        pass


class _Stack(nn.Module):
    """L gpt.py Blocks applied in sequence (no embedding / head): the unit FSDP2 wraps per block and at the root."""

    def __init__(self, cfg: GPTConfig, L: int, tp: int = 1, tp_group=None):
        super().__init__()
        self.blocks = nn.ModuleList([Block(cfg, tp, tp_group) for _ in range(L)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


class _Params(nn.Module):
    """P tiny parameters of [64] in one module (fully_shard turns them into FSDP2 DTensor shards of [32])."""

    def __init__(self, P: int, dev: torch.device):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.zeros(H, device=dev)) for _ in range(P)])


class DistBench(Bench):
    """--dist: host time per layer of the distributed wrappers, 2 processes (torchrun --nproc_per_node=2).

    Every rank runs the same points in lock step (the call count n is rank 0's choice, broadcast; a barrier
    before every repeat); only rank 0's host wall time is recorded (its repeat ends with a
    torch.cuda.synchronize()), and only rank 0 writes the CSV. Each point is measured once per pass (--passes,
    default 2, the whole list again); rows `<name>_run<k>` are written as each pass goes, the plain-named row
    is the minimum over passes, and derived rows are computed from those minima at the end."""

    def __init__(self, args):
        import datetime

        import torch.distributed as dist

        self.dist = dist
        self.smoke = args.smoke
        self.rank = int(os.environ.get("RANK", 0))
        local = int(os.environ.get("LOCAL_RANK", 0))
        self.cuda = torch.cuda.is_available() and not args.smoke
        tmo = datetime.timedelta(seconds=args.dist_timeout)
        if self.cuda:
            torch.cuda.set_device(local)
            self.dev = torch.device("cuda", local)
            dist.init_process_group("nccl", device_id=self.dev, timeout=tmo)
        else:
            self.dev = torch.device("cpu")
            dist.init_process_group("gloo", timeout=tmo)
        self.world = dist.get_world_size()
        if self.world != 2:
            raise SystemExit(
                f"--dist needs exactly 2 processes (torchrun --nproc_per_node=2), got {self.world}"
            )
        from torch.distributed.device_mesh import init_device_mesh

        self.mesh = init_device_mesh(self.dev.type, (self.world,))
        probe_sdpa(self.dev)
        self.out = CsvOut(args.out, COLS) if self.rank == 0 else _NullOut()
        self.res = {}
        self.gres = {}
        self.deadline = time.time() + args.budget
        self.cycles_per_s = 0.0
        self.passes = args.passes
        self.runs: dict[str, list[tuple[float, int, float]]] = collections.OrderedDict()
        self.notes: dict[str, str] = {}
        self.failed: dict[str, str] = {}

    def log0(self, *a) -> None:
        if self.rank == 0:
            log(*a)

    def _bcast(self, v: float) -> float:
        t = torch.tensor([v], dtype=torch.float64, device=self.dev)
        self.dist.broadcast(t, 0)
        return float(t.item())

    def _fence(self) -> None:
        self.sync()
        self.dist.barrier()
        self.sync()

    def host_per_call(self, fn, reps: int = 5, target: float = 0.08) -> tuple[float, int, float]:
        """Lock-step version of Bench.host_per_call: n from rank 0 (broadcast), a barrier before each repeat."""
        warm = 2 if self.smoke else 5
        for _ in range(warm):
            fn()
        self._fence()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        self.sync()
        t1 = (time.perf_counter() - t0) / 3
        n = 3 if self.smoke else max(5, min(1000, int(target / max(t1, 1e-7))))
        n = int(self._bcast(float(n)))
        reps = 2 if self.smoke else reps
        gc.collect()
        ts = []
        for _ in range(reps):
            self._fence()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            self.sync()
            ts.append((time.perf_counter() - t0) / n)
        med = statistics.median(ts)
        return med, n, (max(ts) - min(ts)) / med

    def dpoint(self, k: int, name: str, fn, notes: str, profiled: bool = False) -> None:
        """Measure `name` in pass k on every rank (skipped on all ranks once rank 0 is past the budget);
        `profiled`: with torch.profiler recording (CPU + CUDA, shapes) around the timing."""
        if self._bcast(1.0 if time.time() > self.deadline else 0.0) > 0:
            self.log0("budget reached, skipping", name, f"pass {k}")
            return
        if name in self.failed:
            return
        self.notes[name] = notes
        try:
            if profiled:
                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
                with profile(activities=acts, record_shapes=True, with_stack=False):
                    host, n, spread = self.host_per_call(fn)
            else:
                host, n, spread = self.host_per_call(fn)
        except Exception as e:  # noqa: BLE001
            self.failed[name] = repr(e)[:300]
            self.out.row(name=name, framework="eager", notes=f"error: {repr(e)[:300]}")
            log(f"rank{self.rank} ERROR {name}: {repr(e)[:300]}")
            self._fence()
            return
        self.runs.setdefault(name, []).append((host, n, spread))
        self.out.row(
            name=f"{name}_run{k}",
            framework="eager",
            calls=n,
            host_s_per_call=host,
            notes=f"{notes}; pass {k}; spread {spread:.3f}",
        )
        self.log0(f"[pass {k}] {name:52s} host {host * 1e6:9.1f} us/call  n={n} spread={spread:.3f}")

    # ------------------------------------------------------------------ builders
    def _fsdp2(self, m: _Stack, mp: bool) -> _Stack:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError as e:  # torch < 2.6
            raise RuntimeError(f"torch.distributed.fsdp.fully_shard (FSDP2) unavailable: {e!r}") from e
        kw = dict(mesh=self.mesh)
        if mp:
            kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for blk in m.blocks:
            fully_shard(blk, **kw)
        fully_shard(m, **kw)
        return m

    def _ddp(self, m: _Stack) -> nn.Module:
        """torch DDP with its defaults (25 MB buckets, gradient_as_bucket_view=False), as bench_parallel.py's ddp."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(m, device_ids=[self.dev.index] if self.cuda else None)

    def run_dist(self) -> None:
        dev = self.dev
        ver = (
            f"torch {torch.__version__}; cuda {torch.version.cuda}; python {platform.python_version()}; "
            f"device {torch.cuda.get_device_name() if self.cuda else 'cpu'}; "
            f"sdpa {'flash forced' if SDPA_STATE['force_flash'] else 'default'}; mode dist; world {self.world}; "
            f"backend {self.dist.get_backend()}; passes {self.passes}; host time = rank 0's wall time, ranks in "
            "lock step; no gpu column"
        )
        self.out.row(name="env", framework="", notes=ver)
        self.log0(ver)
        ac = dict(device_type=dev.type, dtype=torch.bfloat16)
        lname = "gpt_ln_gelu"
        cfg = GPTConfig(layers=4, hidden=H, heads=4, vocab=512, seq_len=T, recompute="none")
        desc0 = (
            f"gpt.py Block (h {H}, 4 heads, seq {T}, batch 1, gelu, layernorm), recompute=none, autocast bf16, "
            "fp32 params"
        )
        # variant prefix -> (builder, description)
        variants: dict[str, tuple] = {
            "": (lambda L: _Stack(cfg, L).to(dev).train(), "plain model on each rank, no communication"),
            "fsdp2_": (
                lambda L: self._fsdp2(_Stack(cfg, L).to(dev).train(), True),
                "FSDP2: fully_shard(mesh of 2) on every Block and the root, reshard_after_forward=True, "
                "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (as bench_parallel.py)",
            ),
            "tp2_": (
                lambda L: _Stack(cfg, L, tp=self.world, tp_group=self.dist.group.WORLD).to(dev).train(),
                "tensor parallel over 2 ranks (gpt.py tp_group: column/row-parallel Linears, all_reduce after "
                "attention and MLP in forward, before them in backward)",
            ),
            "fsdp2_nomp_": (
                lambda L: self._fsdp2(_Stack(cfg, L).to(dev).train(), False),
                "FSDP2 as fsdp2_ but without MixedPrecisionPolicy (fp32 all-gather / reduce-scatter; autocast "
                "casts)",
            ),
        }
        # --dist-variants (round 7): only the plain model + the named variants, no optimizer points
        sel = [v.strip() for v in (getattr(self, "variant_sel", "") or "").split(",") if v.strip()]
        if sel:
            allv = dict(variants)
            allv["ddp2_"] = (
                lambda L: self._ddp(_Stack(cfg, L).to(dev).train()),
                "DDP: torch.nn.parallel.DistributedDataParallel over 2 ranks with its defaults (bucket_cap_mb 25, "
                "gradient_as_bucket_view=False, find_unused_parameters=False; as bench_parallel.py's ddp); "
                "backward includes DDP's autograd hooks and the bucket all_reduce launches",
            )
            pfx_of = {"ddp": "ddp2_", "plain": ""}
            bad = [v for v in sel if pfx_of.get(v, v + "_") not in allv]
            if bad:
                raise SystemExit(f"--dist-variants: unknown {bad}; known: ddp, fsdp2, tp2, fsdp2_nomp")
            variants = {"": allv[""]} | {pfx_of.get(v, v + "_"): allv[pfx_of.get(v, v + "_")] for v in sel}
        models: dict[tuple[str, int], nn.Module] = {}
        build_err: dict[str, str] = {}
        for pfx, (build, _) in variants.items():
            for L in (1, 4):
                torch.manual_seed(0)
                try:
                    models[(pfx, L)] = build(L)
                except Exception as e:  # noqa: BLE001
                    build_err[pfx] = repr(e)[:300]
                    log(f"rank{self.rank} ERROR building {pfx or 'plain'} L={L}: {repr(e)[:300]}")
                    break
        self._fence()
        torch.manual_seed(0)
        xb = torch.randn(1, T, H, device=dev, requires_grad=True)

        # ---- optimizer inputs: P tiny params, plain and FSDP2 DTensor shards
        counts = (10, 100) if self.smoke else (100, 1000)
        opt_sets: list[tuple[str, int, list, list]] = []  # (kind, P, params, grads)
        for P in counts if not sel else ():
            pl = [torch.zeros(H // 2, device=dev, requires_grad=True) for _ in range(P)]
            opt_sets.append(("plain", P, pl, [torch.randn(H // 2, device=dev) for _ in pl]))
            try:
                from torch.distributed.fsdp import fully_shard
                from torch.distributed.tensor import DTensor

                pm = _Params(P, dev)
                fully_shard(pm, mesh=self.mesh)
                dps = list(pm.parameters())
                if not all(isinstance(p, DTensor) for p in dps):
                    raise RuntimeError("fully_shard left non-DTensor parameters")
                dgs = [
                    DTensor.from_local(torch.randn_like(p.to_local()), p.device_mesh, p.placements)
                    for p in dps
                ]
                opt_sets.append(("dtensor", P, dps, dgs))
            except Exception as e:  # noqa: BLE001
                build_err["dtensor"] = repr(e)[:300]
                log(f"rank{self.rank} ERROR building DTensor params: {repr(e)[:300]}")
        opts: dict[tuple[str, str, int], object] = {}
        for kind, P, ps, _ in opt_sets:
            for impl in ("fused", "foreach"):
                try:
                    kw = {impl: True}
                    o = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, **kw)
                    opts[(kind, impl, P)] = o
                except Exception as e:  # noqa: BLE001
                    build_err[f"adamw_{impl}_{kind}"] = repr(e)[:300]
        for k, v in build_err.items():
            self.out.row(name=f"build_error_{k or 'plain'}", framework="", notes=f"error: {v}")
        self._fence()

        for k in range(1, self.passes + 1):
            # ---- per-layer points, variants interleaved so that drift hits them alike
            for L in (1, 4):
                for ph in ("fwd", "fwd_bwd"):
                    for pfx, (_, vdesc) in variants.items():
                        m = models.get((pfx, L))
                        if m is None:
                            continue

                        def fwd(m=m):
                            with torch.autocast(**ac):
                                return m(xb)

                        def fb(fwd=fwd):
                            fwd().float().sum().backward()

                        what = f"{L} x {desc0}; {vdesc}; " + (
                            "forward with grad enabled" if ph == "fwd" else "forward + .float().sum().backward()"
                        )
                        self.dpoint(k, f"layers{L}_{pfx}{lname}_rc_none_{ph}", fwd if ph == "fwd" else fb, what)
                        if getattr(self, "dist_profiled", False):
                            self.dpoint(
                                k,
                                f"profiled_layers{L}_{pfx}{lname}_rc_none_{ph}",
                                fwd if ph == "fwd" else fb,
                                what + "; torch.profiler recording (CPU+CUDA, record_shapes=True) around the timing",
                                profiled=True,
                            )
            # ---- optimizer step and zero_grad over P tiny tensors, plain vs FSDP2 DTensor
            for kind, P, ps, gs in opt_sets:
                tag = "" if kind == "plain" else "dtensor_"
                d = (
                    f"{P} params: plain fp32 tensors of [32]"
                    if kind == "plain"
                    else f"{P} FSDP2 params (fully_shard of {P} x [64] fp32) = DTensor Shard(0), local [32]"
                )

                def assign(ps=ps, gs=gs):
                    for p, g in zip(ps, gs, strict=True):
                        p.grad = g

                o_any = opts.get((kind, "fused", P)) or opts.get((kind, "foreach", P))
                if o_any is None:
                    continue

                def assign_zero_none(assign=assign, o=o_any):
                    assign()
                    o.zero_grad(set_to_none=True)

                self.dpoint(k, f"grad_assign_{tag}{P}", assign, d + "; python loop p.grad = g (the baseline)")
                self.dpoint(
                    k,
                    f"grad_assign_zero_grad_none_{tag}{P}",
                    assign_zero_none,
                    d + "; assign + zero_grad(set_to_none=True)",
                )
                assign()
                for impl in ("fused", "foreach"):
                    o = opts.get((kind, impl, P))
                    if o is not None:
                        self.dpoint(
                            k,
                            f"adamw_{impl}_{tag}step_{P}",
                            o.step,
                            f"{d}; AdamW({impl}=True, lr 1e-4, wd 0.1).step(), grads set",
                        )
            # ---- AdamW(fused) over the layer models' own parameters (grads from one backward), 1 vs 4 layers
            for pfx, tag in (("", ""), ("fsdp2_", "dtensor_")) if not sel else ():
                for L in (1, 4):
                    m = models.get((pfx, L))
                    if m is None:
                        continue
                    key = ("model", pfx, L)
                    if key not in opts:
                        try:
                            with torch.autocast(**ac):
                                y = m(xb)
                            y.float().sum().backward()
                            opts[key] = torch.optim.AdamW(
                                m.parameters(), lr=1e-4, weight_decay=0.1, fused=True
                            )
                        except Exception as e:  # noqa: BLE001
                            opts[key] = None
                            log(f"rank{self.rank} ERROR model optimizer {pfx} L={L}: {repr(e)[:300]}")
                            self.out.row(
                                name=f"adamw_fused_{tag}step_layers{L}",
                                framework="eager",
                                notes=f"error: {repr(e)[:300]}",
                            )
                    o = opts[key]
                    if o is not None:
                        self.dpoint(
                            k,
                            f"adamw_fused_{tag}step_layers{L}",
                            o.step,
                            f"AdamW(fused=True).step() over the parameters of {L} x {desc0}; "
                            + ("plain tensors" if not pfx else "FSDP2 DTensor shards (fsdp2_ model)")
                            + f", {6 * L} tensors",
                        )
            self._fence()
        self._dist_finish(lname, counts)

    def _dist_finish(self, lname: str, counts: tuple[int, int]) -> None:
        """Rows with the plain names (min over passes) and the derived rows (rank 0 only)."""
        if self.rank != 0:
            self._fence()
            self.dist.destroy_process_group()
            return
        for name, rs in self.runs.items():
            host, n, spread = min(rs)
            self.res[name] = host
            per = ", ".join(f"pass{i} {r[0] * 1e6:.1f}" for i, r in enumerate(rs, 1))
            self.out.row(
                name=name,
                framework="eager",
                calls=n,
                host_s_per_call=host,
                notes=f"{self.notes[name]}; min over {len(rs)} passes (host us: {per}); spread {spread:.3f}",
            )
        pps = ("", "profiled_") if getattr(self, "dist_profiled", False) else ("",)
        for pp, pfx, what in [
            (pp, pfx, what)
            for pp in pps
            for pfx, what in (
                ("", "plain"),
                ("fsdp2_", "FSDP2"),
                ("tp2_", "TP=2"),
                ("fsdp2_nomp_", "FSDP2 no mp policy"),
                ("ddp2_", "DDP"),
            )
        ]:
            for ph in ("fwd", "fwd_bwd"):
                self.derived(
                    f"{pp}per_layer_{pfx}{lname}_rc_none_{ph}",
                    [(1, f"{pp}layers4_{pfx}{lname}_rc_none_{ph}"), (-1, f"{pp}layers1_{pfx}{lname}_rc_none_{ph}")],
                    3,
                    notes=f"host time per transformer layer ({what}, rank 0): slope between 1 and 4 layers",
                )
                self.derived(
                    f"{pp}train_fixed_{pfx}{lname}_rc_none_{ph}",
                    [
                        (4 / 3, f"{pp}layers1_{pfx}{lname}_rc_none_{ph}"),
                        (-1 / 3, f"{pp}layers4_{pfx}{lname}_rc_none_{ph}"),
                    ],
                    notes=f"intercept (0 layers) of the 1-vs-4-layer line ({what})",
                )
            self.derived(
                f"{pp}per_layer_{pfx}{lname}_rc_none_bwd",
                [(1, f"{pp}per_layer_{pfx}{lname}_rc_none_fwd_bwd"), (-1, f"{pp}per_layer_{pfx}{lname}_rc_none_fwd")],
                notes=f"backward host time per layer ({what}) = fwd_bwd - fwd",
            )
            if pfx:
                for ph in ("fwd", "fwd_bwd", "bwd"):
                    a, b = (
                        self.res.get(f"{pp}per_layer_{pfx}{lname}_rc_none_{ph}"),
                        self.res.get(f"{pp}per_layer_{lname}_rc_none_{ph}"),
                    )
                    ratio = f"; ratio {a / b:.3f}" if a is not None and b else ""
                    self.derived(
                        f"{pp}{pfx}extra_per_layer_{lname}_rc_none_{ph}",
                        [
                            (1, f"{pp}per_layer_{pfx}{lname}_rc_none_{ph}"),
                            (-1, f"{pp}per_layer_{lname}_rc_none_{ph}"),
                        ],
                        notes=f"host time {what} adds per layer over the plain model (same run){ratio}",
                    )
        a, b = counts
        for P in counts:
            for tag in ("", "dtensor_"):
                self.derived(
                    f"zero_grad_none_{tag}{P}",
                    [(1, f"grad_assign_zero_grad_none_{tag}{P}"), (-1, f"grad_assign_{tag}{P}")],
                    notes=f"optimizer.zero_grad(set_to_none=True) over {P} {'DTensor' if tag else 'plain'} tensors",
                )
        stems = [f"{s}_{t}" for t in ("", "dtensor_") for s in ("adamw_fused", "adamw_foreach")]
        for stem in [s + "step" for s in stems] + ["zero_grad_none", "zero_grad_none_dtensor"]:
            sa, sb = f"{stem}_{a}", f"{stem}_{b}"
            self.derived(
                f"{stem}_per_tensor",
                [(1, sb), (-1, sa)],
                b - a,
                notes=f"host time per parameter tensor: slope between {a} and {b} tensors",
            )
            self.derived(
                f"{stem}_fixed",
                [(1 + a / (b - a), sa), (-a / (b - a), sb)],
                notes=f"intercept (0 tensors) of the line through {a} and {b} tensors",
            )
        for tag in ("", "dtensor_"):
            self.derived(
                f"adamw_fused_{tag}step_per_layer",
                [(1, f"adamw_fused_{tag}step_layers4"), (-1, f"adamw_fused_{tag}step_layers1")],
                3,
                notes="AdamW(fused).step() host time per transformer layer (6 tensors): slope between 1 and 4 layers",
            )
        self.out.close()
        self.log0(f"done: {self.out.n} rows")
        self._fence()
        self.dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds; later points are skipped")
    ap.add_argument("--infer", action="store_true", help="inference-mode measurements (run_infer) only")
    ap.add_argument("--merge", nargs="+", help="CSV(.gz) files of --infer runs to combine (no measurement)")
    ap.add_argument(
        "--profiled",
        action="store_true",
        help="per-layer host times with and without torch.profiler recording (run_profiled); with --merge: "
        "combine --profiled CSVs",
    )
    ap.add_argument(
        "--dist",
        action="store_true",
        help="distributed wrappers (plain / FSDP2 / TP=2 per-layer host time, AdamW over DTensors; run_dist); "
        "run with torchrun --nproc_per_node=2, rank 0 writes --out",
    )
    ap.add_argument("--passes", type=int, default=2, help="--dist: passes over all points (min kept)")
    ap.add_argument(
        "--dist-timeout", type=float, default=120.0, help="--dist: process-group timeout, seconds"
    )
    ap.add_argument(
        "--dist-variants",
        default="",
        help="--dist: comma list of variants to run besides the plain model (ddp, fsdp2, tp2, fsdp2_nomp); "
        "given: only those per-layer points, no optimizer points (round 7: ddp); empty: round 5's set",
    )
    ap.add_argument(
        "--hidden", type=int, default=64, help="model width of every point (round 10: 1024 for --dist at real sizes)"
    )
    ap.add_argument(
        "--dist-profiled",
        action="store_true",
        help="--dist: also time every per-layer point with torch.profiler recording (profiled_<name> rows; round 12)",
    )
    args = ap.parse_args()
    global H
    H = args.hidden
    if args.dist:
        db = DistBench(args)
        db.variant_sel = args.dist_variants
        db.dist_profiled = args.dist_profiled
        db.run_dist()
        return
    if args.merge and args.profiled:
        args.smoke = True  # no device needed
        Bench(args).merge_profiled(args.merge)
        return
    if args.merge:
        args.smoke = True  # no device needed
        Bench(args).merge(args.merge)
        return
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    probe_sdpa(dev)
    b = Bench(args)
    if args.profiled:
        b.run_profiled()
    elif args.infer:
        b.run_infer()
    else:
        b.run()


if __name__ == "__main__":
    main()
