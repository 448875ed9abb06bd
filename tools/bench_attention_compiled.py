"""Round 93 (stop 24): the attention of a static-cache decode step as torch.compile runs it, beside the eager call.

Round 91's compiled ``generate()`` decode graphs ran cuDNN's ``sm80 ... wmma`` fused-attention kernel (466 us at
512 sequences x 32 heads x 48 slots), where round 92's eager call of the same shapes ran a Hopper kernel in 262 us.
This reproduces what ``transformers``' decode layer does with a static cache, one query a sequence: the keys and values
written into the static cache at the step's slot (``index_copy_``), repeated to every query head (``repeat_kv``:
expand and reshape), and ``F.scaled_dot_product_attention`` with the boolean ``[b, 1, 1, slots]`` mask. Each
shape is run eagerly and compiled (``torch.compile(mode="reduce-overhead")``, CUDA graphs), timed over replays with
CUDA events (the copies included), and profiled once to name and time the attention kernel alone. Rows in
``bench_ops.py``'s attention layout (``kind=attention``, ``seq`` 1, ``kv_seq`` the slots, ``kv_heads`` the cache's
heads), ``framework`` ``eager`` / ``compiled``, ``kernel_s`` the attention kernel's median duration, ``step_s`` the
whole call's, ``kernel`` the attention kernel's name (no ``time_s``: a diagnostic, not an op sweep ``simcore calibrate``
fits; the compiled call's "attention kernel" is inductor's fused copy where it outlasts cuDNN's).

``--variants`` (round 94): round 91's shape (512 x 32 heads x 48 slots) with the mask and the neighbours varied: the
boolean mask contiguous, broadcast over the batch (stride 0, as a mask built from one ``arange`` comparison is),
additive bf16, expanded over the heads; the keys and values from a transposed ``[b, slots, heads, d]`` buffer; and
the call right after a large GEMM in the same CUDA graph (the clocks a GEMM-bound graph leaves it). Rows as above,
``name`` the variant.

  python tools/bench_attention_compiled.py --out attention_compiled.csv [--budget S] [--smoke] [--variants]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log  # noqa: E402

COLS = ["kind", "dtype", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal", "backward", "name",
        "kernel_s", "step_s", "framework", "kernel"]

# (batch, heads, kv_heads, slots, head_dim): round 91's shapes and a grid around them
SHAPES = [
    (512, 32, 8, 48, 128), (512, 28, 4, 48, 128), (1536, 16, 8, 32, 128),
    (8, 32, 8, 48, 128), (64, 32, 8, 48, 128), (256, 32, 8, 48, 128), (1536, 32, 8, 48, 128),
    (512, 32, 8, 128, 128), (512, 32, 8, 528, 128), (64, 32, 8, 528, 128), (8, 16, 8, 528, 128),
    (512, 16, 8, 48, 128), (512, 16, 4, 272, 64), (128, 32, 8, 1040, 128), (4, 16, 8, 272, 128),
    (2, 16, 8, 528, 128), (1, 16, 4, 160, 64),
]


def layer_attention(q, k_new, v_new, k_cache, v_cache, pos, mask, groups: int):
    """One static-cache decode layer's attention, as transformers writes it."""
    k_cache.index_copy_(2, pos, k_new)
    v_cache.index_copy_(2, pos, v_new)
    b, kvh, n, d = k_cache.shape
    k = k_cache[:, :, None].expand(b, kvh, groups, n, d).reshape(b, kvh * groups, n, d)
    v = v_cache[:, :, None].expand(b, kvh, groups, n, d).reshape(b, kvh * groups, n, d)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def kernel_times(fn, dev) -> tuple[str, float]:
    """The attention kernel of ``fn``'s calls: its name and median duration (seconds), from the profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            fn()
        torch.cuda.synchronize(dev)
    ks = [e for e in p.events() if e.device_type.name == "CUDA" and ("sdpa" in e.name or "fmha" in e.name
                                                                       or "flash" in e.name or "attention" in e.name)]
    if not ks:
        return "", 0.0
    name = max({e.name for e in ks}, key=lambda n: sum(e.device_time for e in ks if e.name == n))
    return name, statistics.median(e.device_time for e in ks if e.name == name) * 1e-6


def step_time(fn, dev, n: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize(dev)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(3):
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize(dev)
        ts.append(a.elapsed_time(b) * 1e-3 / n)
    return statistics.median(ts)


def variants(out: CsvOut, dev: torch.device, shape: tuple[int, int, int, int, int]) -> None:
    """Round 94: one shape's attention with its mask and neighbours varied (see the module docstring)."""
    b, h, kvh, n, d = shape
    bf = torch.bfloat16
    q = torch.randn(b, h, 1, d, device=dev, dtype=bf)
    k = torch.randn(b, h, n, d, device=dev, dtype=bf)
    v = torch.randn(b, h, n, d, device=dev, dtype=bf)
    kt = torch.randn(b, n, h, d, device=dev, dtype=bf).transpose(1, 2)  # [b, h, n, d] view of [b, n, h, d]
    vt = torch.randn(b, n, h, d, device=dev, dtype=bf).transpose(1, 2)
    keep = torch.arange(n, device=dev) <= n // 2
    masks = {
        "bool": keep[None, None, None, :].expand(b, 1, 1, n).contiguous(),
        "bool_bcast": keep[None, None, None, :].expand(b, 1, 1, n),
        "additive": torch.zeros(b, 1, 1, n, device=dev, dtype=bf).masked_fill(~keep, float("-inf")),
        "bool_heads": keep[None, None, None, :].expand(b, h, 1, n),
    }
    a = torch.randn(8192, 8192, device=dev, dtype=bf)
    jobs = [(f"mask_{m}", q, k, v, mk, False) for m, mk in masks.items()]
    jobs += [("kv_transposed", q, kt, vt, masks["bool"], False), ("after_gemm", q, k, v, masks["bool"], True)]
    for name, qq, kk, vv, mk, gemm in jobs:
        try:
            def fn(qq=qq, kk=kk, vv=vv, mk=mk, gemm=gemm):
                if gemm:
                    a @ a
                return F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mk)

            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                fn()
            kname, ktime = kernel_times(g.replay, dev)
            step = step_time(g.replay, dev)
            out.row(kind="attention", dtype="bf16", batch=b, heads=h, kv_heads=h, seq=1, kv_seq=n, head_dim=d,
                    causal=0, backward=0, name=name, kernel_s=ktime, step_s=step, framework="cuda_graphs",
                    kernel=kname[:120])
            log(f"{name}: attention {ktime * 1e6:.1f} us of {step * 1e6:.1f} us, {kname[:80]}")
        except Exception as e:  # noqa: BLE001
            log(f"skip {name}: {repr(e)[:200]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--variants", action="store_true", help="round 94: round 91's shape, the mask and neighbours varied")
    args = ap.parse_args()
    dev = torch.device("cuda")
    log("env", env_info(dev))
    out = CsvOut(args.out, COLS)
    if args.variants:
        variants(out, dev, (2, 4, 2, 16, 32) if args.smoke else (512, 32, 8, 48, 128))
        out.close()
        return
    shapes = [(2, 4, 2, 16, 32)] if args.smoke else SHAPES
    t0 = time.time()
    for b, h, kvh, n, d in shapes:
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        try:
            bf = torch.bfloat16
            q = torch.randn(b, h, 1, d, device=dev, dtype=bf)
            k_new = torch.randn(b, kvh, 1, d, device=dev, dtype=bf)
            v_new = torch.randn(b, kvh, 1, d, device=dev, dtype=bf)
            k_cache = torch.randn(b, kvh, n, d, device=dev, dtype=bf)
            v_cache = torch.randn(b, kvh, n, d, device=dev, dtype=bf)
            pos = torch.tensor([n // 2], device=dev)
            mask = (torch.arange(n, device=dev) <= n // 2)[None, None, None, :].expand(b, 1, 1, n).contiguous()

            def eager():
                return layer_attention(q, k_new, v_new, k_cache, v_cache, pos, mask, h // kvh)

            torch._dynamo.reset()
            comp = torch.compile(layer_attention, mode="reduce-overhead", fullgraph=True)

            def compiled():
                return comp(q, k_new, v_new, k_cache, v_cache, pos, mask, h // kvh)

            for fw, fn in (("eager", eager), ("compiled", compiled)):
                step = step_time(fn, dev)
                kname, kt = kernel_times(fn, dev)
                out.row(kind="attention", dtype="bf16", batch=b, heads=h, kv_heads=kvh, seq=1, kv_seq=n, head_dim=d,
                        causal=0, backward=0, name="sdpa_cudnn_mask", kernel_s=kt, step_s=step, framework=fw,
                        kernel=kname[:120])
                log(f"b{b} h{h}/{kvh} slots {n} d{d} {fw}: attention {kt * 1e6:.1f} us of {step * 1e6:.1f} us, {kname[:70]}")
        except Exception as e:  # noqa: BLE001  (a shape that fails: logged, skipped)
            log(f"skip b{b} h{h}/{kvh} slots {n} d{d}: {repr(e)[:200]}")
        finally:
            torch.cuda.empty_cache()
    out.close()
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
