"""Round 95 (stop 25): what a large-batch compiled static-cache ``generate()`` does that the small ones did not.

Round 91's three held-apart runs (``generate(cache_implementation="static")`` at batches 512-1536) differ from
every earlier static-cache run in two ways this script measures, on the same models (``bench_hf.llama``):

``--part rerecord``: every profiled ``generate()`` call of round 91 captured a new CUDA graph at its first decode
step (cudagraph trees' ``CUDAGraphNode.record``), where rounds 84-90 (batches 1-16) replayed the graph recorded
in the warm-up. For a small Llama at several batches and round 91's 8-layer Llama at 512: the graph captures of
each of 7 calls (``torch.cuda.CUDAGraph.capture_begin`` counted), each call's wall time, and whether the static
cache's key tensor moved between calls (its ``data_ptr``). One JSON line per run in ``rerecord.jsonl``;
``TORCH_LOGS=cudagraphs`` output goes to the log.

``--part sdpa``: cuDNN's masked one-query kernel took ~400-466 us a layer inside round 91's decode graphs against
260 us for the same shape alone (rounds 93-94). Here round 91's 8-layer Llama at batch 512: the tensors its
eager static-cache decode passes to ``scaled_dot_product_attention`` (captured by a wrapper: shapes, strides,
dtypes, the mask), the attention kernel's duration in the whole eager decode and in the compiled one (profiler),
then the same call on the captured tensors alone (eager and from a CUDA graph), on contiguous copies of them, and
inside a CUDA graph between the layer's GEMMs at the decode's shapes (the clocks a GEMM-heavy graph runs at), with
``nvidia-smi`` sampling the SM clock and board power every 20 ms during each case. Rows in ``sdpa_insitu.csv``
(``case``, ``kernel_s`` the attention kernel's median, ``sm_mhz`` / ``power_w`` the medians over the case's samples,
``kernel`` the name); diagnostic, no ``time_s``.

  python tools/bench_generate_insitu.py --part rerecord|sdpa --outdir DIR [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_hf import llama  # noqa: E402
from benchutil import CsvOut, env_info, log  # noqa: E402

CAPTURES = [0]


def count_captures() -> None:
    """Count every CUDA graph capture (cudagraph trees record through ``torch.cuda.graph``)."""
    orig = torch.cuda.CUDAGraph.capture_begin

    def capture_begin(self, *a, **k):
        CAPTURES[0] += 1
        return orig(self, *a, **k)

    torch.cuda.CUDAGraph.capture_begin = capture_begin


class Sampler:
    """``nvidia-smi`` sampling the SM clock (MHz) and board power (W) every 20 ms while active."""

    def __enter__(self):
        self.p = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        out, _ = self.p.communicate(timeout=5)
        self.samples = []
        for line in out.splitlines()[5:]:  # the first lines may predate the work
            try:
                mhz, w = (float(x) for x in line.split(","))
                self.samples.append((mhz, w))
            except ValueError:
                pass

    def medians(self) -> tuple[float | None, float | None]:
        if not self.samples:
            return None, None
        return statistics.median(s[0] for s in self.samples), statistics.median(s[1] for s in self.samples)


def cache_ptr(model) -> int | None:
    c = getattr(model, "_cache", None)
    if c is None:
        return None
    for path in (("layers", 0, "keys"), ("key_cache", 0)):
        try:
            o = c
            for p in path:
                o = o[p] if isinstance(p, int) else getattr(o, p)
            return int(o.data_ptr())
        except (AttributeError, IndexError, TypeError, KeyError):
            continue
    return None


def build(layers, hidden, heads, kvh, ffn, vocab, smoke, family="llama"):
    model, _ = llama(layers, hidden, heads, kvh, ffn, vocab, smoke, family)
    return model.to("cuda").to(torch.bfloat16).eval()


def generate_fn(model, batch, prompt, new, vocab, **gen):
    x = torch.randint(0, vocab, (batch, prompt), device="cuda")
    mask = torch.ones_like(x)

    @torch.no_grad()
    def step():
        model.generate(input_ids=x, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, pad_token_id=0,
                       do_sample=False, cache_implementation="static", **gen)  # fmt: skip

    return step


def rerecord(outdir: str, smoke: bool) -> None:
    runs = [("llama_L4_h1024", (4, 1024, 16, 4, 4096, 32000), b) for b in ((2, 8) if smoke else (8, 128, 512, 1024))]
    runs += [] if smoke else [("llama_L8_h4096", (8, 4096, 32, 8, 14336, 32000), 512)]
    path = os.path.join(outdir, "rerecord.jsonl")
    for name, cfg, batch in runs:
        t0 = time.time()
        try:
            vocab = 512 if smoke else cfg[5]
            model = build(*cfg, smoke)
            step = generate_fn(model, batch, 32, 16, vocab)
            caps, walls, ptrs = [], [], []
            for _ in range(7):
                c0, t = CAPTURES[0], time.perf_counter()
                step()
                torch.cuda.synchronize()
                walls.append(time.perf_counter() - t)
                caps.append(CAPTURES[0] - c0)
                ptrs.append(cache_ptr(model))
            row = {"model": name, "batch": batch, "prompt": 32, "new_tokens": 16, "captures_per_call": caps,
                   "wall_s": [round(w, 5) for w in walls], "cache_moved": [p != ptrs[0] for p in ptrs],
                   "cache_ptr_known": ptrs[0] is not None}  # fmt: skip
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            log(f"{name} b{batch}: captures {caps}, wall {[round(w * 1e3) for w in walls]} ms, "
                f"cache moved {row['cache_moved']} ({time.time() - t0:.0f} s)")  # fmt: skip
        except Exception as e:  # noqa: BLE001
            log(f"skip {name} b{batch}: {repr(e)[:300]}")
        finally:
            model = step = None
            torch._dynamo.reset()
            gc.collect()
            torch.cuda.empty_cache()


def attention_kernels(fn, n: int = 3) -> tuple[str, list[float]]:
    """The one-query attention kernel's durations (seconds) over ``n`` calls of ``fn`` (profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    ks = [e for e in p.events() if e.device_type.name == "CUDA" and ("sdpa" in e.name or "fmha" in e.name
                                                                       or "flash" in e.name)]  # fmt: skip
    if not ks:
        return "", []
    name = max({e.name for e in ks}, key=lambda m: sum(e.device_time for e in ks if e.name == m))
    return name, [e.device_time * 1e-6 for e in ks if e.name == name]


def graphed(fn):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        fn()
    return g.replay


def sdpa(outdir: str, smoke: bool) -> None:
    cfg = (8, 4096, 32, 8, 14336, 32000)
    batch, prompt, new = (4, 16, 4) if smoke else (512, 32, 16)
    vocab = 512 if smoke else cfg[5]
    model = build(*cfg, smoke)
    out = CsvOut(os.path.join(outdir, "sdpa_insitu.csv"),
                 ["case", "batch", "heads", "kv_seq", "kernel_s", "kernels", "sm_mhz", "power_w", "kernel", "detail"])

    def row(case, name, ts, smp, detail=""):
        mhz, w = smp.medians()
        k = statistics.median(ts) if ts else None
        out.row(case=case, batch=batch, heads=cfg[2], kv_seq=prompt + new, kernel_s=k, kernels=len(ts), sm_mhz=mhz,
                power_w=w, kernel=name[:120], detail=detail)  # fmt: skip
        log(f"{case}: {k * 1e6 if k else 0:.1f} us over {len(ts)} kernels, {mhz} MHz, {w} W, {name[:70]} {detail}")

    # 1. the tensors the eager static-cache decode passes to SDPA (one query a sequence)
    seen = {}
    orig = F.scaled_dot_product_attention

    def keep(t):
        """A copy with the same strides."""
        if t is None:
            return None
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)

    def spy(q, k, v, attn_mask=None, *a, **kw):
        if q.shape[2] == 1 and "q" not in seen:
            seen.update(q=keep(q), k=keep(k), v=keep(v), mask=keep(attn_mask), args=a, kw=dict(kw))
        return orig(q, k, v, attn_mask, *a, **kw)

    eager_step = generate_fn(model, batch, prompt, new, vocab, disable_compile=True)
    F.scaled_dot_product_attention = spy
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        eager_step()
    finally:
        F.scaled_dot_product_attention = orig
        torch.nn.functional.scaled_dot_product_attention = orig
    torch.cuda.synchronize()
    desc = {n: (list(t.shape), list(t.stride()), str(t.dtype)) for n, t in seen.items()
            if isinstance(t, torch.Tensor)}  # fmt: skip
    desc["kwargs"] = {k: repr(v) for k, v in seen["kw"].items()}
    desc["args"] = repr(seen["args"])
    with open(os.path.join(outdir, "sdpa_inputs.json"), "w") as f:
        json.dump(desc, f, indent=1)
    log("captured SDPA inputs", json.dumps(desc))

    # 2. the kernel inside whole decodes: eager, then compiled (its warm-up calls first)
    eager_step()
    with Sampler() as smp:
        name, ts = attention_kernels(eager_step, 1)
    row("eager_generate", name, ts, smp, "whole eager static-cache generate()")
    comp_step = generate_fn(model, batch, prompt, new, vocab)
    for _ in range(3):
        comp_step()
    torch.cuda.synchronize()
    with Sampler() as smp:
        name, ts = attention_kernels(comp_step, 2)
    row("compiled_generate", name, ts, smp, "whole compiled generate(), CUDA-graph decode")

    # 3. the captured call alone
    q, k, v, m = seen["q"], seen["k"], seen["v"], seen["mask"]
    kw = seen["kw"]

    def call(q=q, k=k, v=v, m=m):
        return orig(q, k, v, m, *seen["args"], **kw)

    cases = [("captured_eager", call), ("captured_graph", graphed(call))]
    qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
    mc = m.contiguous() if m is not None else None
    cases.append(("contiguous_graph", graphed(lambda: orig(qc, kc, vc, mc, *seen["args"], **kw))))
    # 4. between the layer's GEMMs at the decode's shapes (q/k/v/o, gate/up/down over `batch` rows)
    h, f = cfg[1], cfg[4]
    bf = torch.bfloat16
    x = torch.randn(batch, h, device="cuda", dtype=bf)
    w_up = torch.randn(h, f, device="cuda", dtype=bf) * 0.02
    w_down = torch.randn(f, h, device="cuda", dtype=bf) * 0.02
    w_o = torch.randn(h, h, device="cuda", dtype=bf) * 0.02

    def layer():
        y = x @ w_o
        a = y @ w_up
        b = y @ w_up
        c = (a * b) @ w_down
        call()
        return c

    cases.append(("between_gemms_graph", graphed(layer)))
    for case, fn in cases:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with Sampler() as smp:
            t = time.time()
            while time.time() - t < 1.0:  # a second of the case first: its steady clock
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
            name, ts = attention_kernels(fn, 30)
        row(case, name, ts, smp)
    out.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["rerecord", "sdpa"], required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    log("env", env_info(torch.device("cuda")))
    count_captures()
    t0 = time.time()
    (rerecord if args.part == "rerecord" else sdpa)(args.outdir, args.smoke)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
