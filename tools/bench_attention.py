"""Round 40: PyTorch's cuDNN attention, beside its FlashAttention-2 kernels, timed like ``tools/bench_ops.py``.

``F.scaled_dot_product_attention`` picks its backend per call. simcore's attention rows (round 1,
``bench_ops.py``) force the flash backend, as ``tools/gpt.py`` does for every model simcore's own
traces ran. On an H200 with torch 2.11 an unforced call runs cuDNN's fused attention (every
``transformers`` trace of rounds 31-39 shows ``aten::_cudnn_attention_forward``), whose Hopper kernels
(wgmma) are faster than FlashAttention-2's at head dim 64 and 128, and which takes what flash cannot:
an explicit additive mask (``transformers`` under ``torch.compile`` passes a ``[b, 1, s, s]`` one), and
dropout. This measures both backends over training, prefill and decode shapes:

* ``sdpa_cudnn`` / ``sdpa_flash``: ``is_causal`` (``causal`` 1) or no mask (``causal`` 0);
* ``..._mask``: an additive bf16 causal mask ``[b, 1, s, s]`` with ``is_causal=False`` (cuDNN only:
  flash takes no mask); ``causal`` 0: the kernel walks every block;
* ``..._drop``: dropout 0.1 (training runs of GPT-2 configs);
* ``backward`` 1 rows: ``torch.autograd.grad`` of the forward's output (all of the backward's kernels:
  cuDNN adds a dO.O reduction and a dQ conversion, flash a dO.O pre-pass).

Rows in ``bench_ops.py``'s CSV layout (``kind=attention``), eager calls and, for forward calls under
50 us without dropout, CUDA-graph replays. ``--choice OUT2`` writes which backend an unforced call picks
per shape (``torch._fused_sdp_choice``), with and without a mask / dropout.

Round 59 (``--set efficient``): the memory-efficient kernels (``sdpa_efficient``, ``..._mask``, ``..._drop``
from round 60's rerun), fp32 and
bf16, K/V repeated to every head: PyTorch's only fused attention for fp32 tensors (round 48's fp32
GPT-2 ran ``aten::_efficient_attention_forward``), at the same training and decode shapes.

Round 92 (``--set short``, stop 24): cuDNN (and flash beside it) at short sequences over many sequences and heads,
the shapes of round 91's large-batch ``generate()`` runs with a static cache, which simcore put 2.7-4x short: one query
against a masked static cache of 32-1040 slots (``sdpa_cudnn_mask``, ``seq`` 1), the keys and values repeated to every
query head (``kv_heads`` = ``heads``, as ``transformers``' ``repeat_kv`` passes them) or grouped (``enable_gqa``), at
batches of 8-1536; and short prompts of 16-128 tokens, causal, at batches of 64-1536 (the prefill beside them).

Round 96 (``--set kvlen``, stop 25): the same masked one-query decode over slot counts that are not multiples of 16:
``transformers``' static cache holds ``max_length - 1`` slots (round 95 caught round 91's 8-layer Llama passing 47, not
48, to SDPA, where cuDNN's kernel took 390 us against 262 us at 48); odd counts, multiples of 8 and of 4 beside
multiples of 16, at batches of 8-1536.

  python tools/bench_attention.py --out attention.csv [--set r40|efficient|short|kvlen] [--choice sdpa_choice.csv] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, time_eager, time_graph  # noqa: E402

COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim",
        "causal", "backward", "name", "bytes", "time_s", "flops", "framework"]
GRAPH_BELOW = 50e-6

# training / prefill shapes (batch, heads, kv_heads, seq, head_dim): GPT-2 small/medium, Llama-like
# widths 1024-4096, at 512-8192 tokens per sequence
TRAIN = [
    (8, 12, 12, 1024, 64), (4, 12, 12, 1024, 64), (16, 12, 12, 512, 64), (4, 16, 16, 1024, 64),
    (2, 16, 16, 2048, 64), (2, 32, 8, 2048, 64), (1, 32, 8, 4096, 64), (4, 24, 6, 512, 64),
    (2, 32, 32, 2048, 64), (1, 16, 16, 8192, 64), (8, 32, 8, 512, 64),
    (2, 16, 16, 1024, 128), (4, 16, 16, 2048, 128), (2, 32, 8, 2048, 128), (1, 32, 8, 4096, 128),
    (8, 32, 8, 1024, 128), (1, 32, 32, 8192, 128), (1, 8, 8, 2048, 128), (16, 16, 4, 512, 128),
]
# decode (batch, heads, kv_heads, kv_seq, head_dim): one query per sequence against its cache
DECODE = [
    (1, 12, 12, 512, 64), (8, 12, 12, 1024, 64), (1, 32, 8, 1024, 64), (4, 32, 8, 2048, 64),
    (1, 32, 8, 512, 128), (4, 32, 8, 4096, 128), (16, 32, 8, 2048, 128), (64, 32, 8, 1024, 128),
    (1, 32, 32, 8192, 128), (32, 16, 16, 512, 64),
]


def ctx(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}.get(
        backend, SDPBackend.FLASH_ATTENTION))


def record(out: CsvOut, dev: torch.device, fn, smoke: bool, graph_ok: bool, dtype: str = "bf16", **row) -> None:
    fn()
    t, _n, _spread = time_eager(fn, dev, target=0.002 if smoke else 0.01, reps=3 if smoke else 5)
    out.row(time_s=t, framework="eager", kind="attention", dtype=dtype, **row)
    if graph_ok and dev.type == "cuda" and t < GRAPH_BELOW:
        tg = time_graph(fn, dev, int(min(200, max(20, 2e-3 / t))))
        out.row(time_s=tg, framework="cuda_graphs", kind="attention", dtype=dtype, **row)


def point(out, dev, smoke, backend, b, h, kvh, s, skv, d, causal, mask, drop, bwd, dtype="bf16") -> None:
    bf = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    e = 4 if dtype == "fp32" else 2
    q = torch.randn(b, h, s, d, device=dev, dtype=bf)
    k = torch.randn(b, kvh, skv, d, device=dev, dtype=bf)
    v = torch.randn(b, kvh, skv, d, device=dev, dtype=bf)
    kw = {"enable_gqa": True} if kvh != h else {}
    am = None
    if mask:
        keep = torch.ones(s, skv, device=dev, dtype=torch.bool).tril(skv - s)
        am = torch.zeros(b, 1, s, skv, device=dev, dtype=bf).masked_fill(~keep, float("-inf"))
    name = f"sdpa_{backend}" + ("_mask" if mask else "") + ("_drop" if drop else "")
    frac = 0.5 if causal or mask else 1.0
    fl = 4 * b * h * s * skv * d * frac
    qo = 2 * b * h * s * d * e
    kvb = 2 * b * kvh * skv * d * e
    row = dict(batch=b, heads=h, kv_heads=kvh, seq=s, kv_seq=skv, head_dim=d, causal=int(causal), name=name)
    p = 0.1 if drop else 0.0
    c = ctx(backend) if not smoke else torch.no_grad() if not bwd else torch.enable_grad()
    with c:
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=am, dropout_p=p, is_causal=causal, **kw)

        record(out, dev, fwd, smoke, graph_ok=not drop, dtype=dtype, backward=0, bytes=qo + kvb, flops=fl, **row)
        if bwd:
            for t in (q, k, v):
                t.requires_grad_(True)
            o = fwd()
            go = torch.randn_like(o)

            def bwdfn():
                return torch.autograd.grad(o, (q, k, v), go, retain_graph=True)

            record(out, dev, bwdfn, smoke, graph_ok=False, dtype=dtype, backward=1, bytes=2 * qo + 2 * kvb, flops=2.5 * fl,
                   **row)


def choice(dev, b, h, kvh, s, skv, d, causal, mask, drop) -> str:
    names = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}
    bf = torch.bfloat16
    q = torch.randn(b, h, s, d, device=dev, dtype=bf, requires_grad=True)
    k = torch.randn(b, kvh, skv, d, device=dev, dtype=bf, requires_grad=True)
    am = torch.zeros(b, 1, s, skv, device=dev, dtype=bf) if mask else None
    try:
        c = torch._fused_sdp_choice(q, k, k, am, 0.1 if drop else 0.0, causal, None, kvh != h)
        return names.get(int(c), str(c))
    except Exception as e:  # noqa: BLE001
        return "error " + repr(e)[:80]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--choice", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=200.0)
    ap.add_argument("--set", choices=("r40", "efficient", "short", "kvlen"), default="r40",
                    help="r40: cuDNN and flash (bf16); efficient: the memory-efficient kernels (fp32 and bf16); "
                    "short: cuDNN at short sequences over many sequences (round 92); kvlen: its masked decode at "
                    "slot counts off multiples of 16 (round 96)")
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    out = CsvOut(args.out, COLS)
    log("env", env_info(dev))
    train = [(2, 4, 2, 64, 32), (1, 4, 4, 128, 64)] if args.smoke else TRAIN
    decode = [(2, 4, 2, 64, 32)] if args.smoke else DECODE
    backends = ("cudnn",) if args.smoke else ("cudnn", "flash")
    jobs = []
    if args.set == "efficient":
        # round 59: the memory-efficient kernels, PyTorch's only fused attention for fp32 (an fp32
        # model without autocast) and its pick for masks cuDNN refuses; K/V repeated to every head
        # (kv_heads = heads), as transformers does before SDPA outside flash and cuDNN
        for dt in ("fp32", "bf16"):
            for i, (b, h, _kvh, s, d) in enumerate(train):
                jobs.append(("efficient", b, h, h, s, s, d, True, False, False, True, dt))  # causal
                jobs.append(("efficient", b, h, h, s, s, d, False, False, False, i % 2 == 0, dt))  # no mask
                jobs.append(("efficient", b, h, h, s, s, d, False, True, False, i % 2 == 1, dt))  # dense mask
                if d == 64 or i % 3 == 0:
                    jobs.append(("efficient", b, h, h, s, s, d, True, False, True, True, dt))  # causal + dropout
            for b, h, _kvh, skv, d in decode:
                jobs.append(("efficient", b, h, h, 1, skv, d, False, False, False, False, dt))
        backends = ("efficient",)
    if args.set == "short":
        # round 92: a static cache's masked decode (one query, every slot walked), heads repeated or grouped
        for b in ((2,) if args.smoke else (8, 64, 256, 512, 1536)):
            for h, kvh, d in (((4, 2, 32),) if args.smoke else ((32, 8, 128), (16, 8, 128), (28, 4, 128), (16, 4, 64))):
                for skv in ((48,) if args.smoke else (32, 48, 128, 272, 528, 1040)):
                    if b * h * skv > 1536 * 32 * 1040:
                        continue
                    jobs.append(("cudnn", b, h, h, 1, skv, d, False, True, False, False))  # repeat_kv'd, masked
                    if skv in (48, 528):
                        jobs.append(("cudnn", b, h, kvh, 1, skv, d, False, True, False, False))  # grouped, masked
                        jobs.append(("cudnn", b, h, kvh, 1, skv, d, False, False, False, False))  # grouped, no mask
        # short causal prompts over many sequences (the prefill of a large-batch generate())
        for b in ((2,) if args.smoke else (64, 512, 1536)):
            for h, kvh, d in (((4, 2, 32),) if args.smoke else ((32, 8, 128), (16, 8, 128))):
                for s in ((16,) if args.smoke else (16, 32, 64, 128)):
                    jobs.append(("cudnn", b, h, kvh, s, s, d, True, False, False, False))
                    jobs.append(("cudnn", b, h, kvh, s, s + 16, d, False, True, False, False))  # over a static cache
        backends = ()
    if args.set == "kvlen":
        # round 96: a static cache's masked decode at max_length - 1 slots (odd), and at multiples of 8 or 4
        for b in ((2,) if args.smoke else (8, 64, 256, 512, 1536)):
            for h, d in (((4, 32),) if args.smoke else ((32, 128), (16, 128), (28, 128), (16, 64))):
                for skv in ((47,) if args.smoke else (31, 47, 63, 64, 95, 127, 40, 100, 271, 527, 1039)):
                    if b * h * skv > 1536 * 32 * 1040:
                        continue
                    jobs.append(("cudnn", b, h, h, 1, skv, d, False, True, False, False))  # repeat_kv'd, masked
        backends = ()
    for i, (b, h, kvh, s, d) in enumerate(train if args.set == "r40" else []):
        for be in backends:
            jobs.append((be, b, h, kvh, s, s, d, True, False, False, True))  # causal
            jobs.append((be, b, h, kvh, s, s, d, False, False, False, i % 2 == 0))  # no mask
            if d == 64 or i % 3 == 0:
                jobs.append((be, b, h, kvh, s, s, d, True, False, True, True))  # causal + dropout
        jobs.append(("cudnn", b, h, kvh, s, s, d, False, True, False, True))  # dense causal mask
        if d == 64 and h == kvh:
            jobs.append(("cudnn", b, h, kvh, s, s, d, False, True, True, True))  # mask + dropout (GPT-2)
    for b, h, kvh, skv, d in decode if args.set == "r40" else []:
        for be in backends:
            jobs.append((be, b, h, kvh, 1, skv, d, False, False, False, False))
    if not args.smoke and args.set == "r40":
        # prefill against a longer cache (chunked prefill / a second turn): 512 queries, 4096 keys
        for be in backends:
            jobs.append((be, 2, 32, 8, 512, 4096, 128, True, False, False, False))
            jobs.append((be, 4, 16, 16, 256, 2048, 64, True, False, False, False))
    t0 = time.time()
    for n, (be, b, h, kvh, s, skv, d, causal, mask, drop, bwd, *dt) in enumerate(jobs):
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        try:
            point(out, dev, args.smoke, be, b, h, kvh, s, skv, d, causal, mask, drop, bwd, *dt)
        except Exception as e:  # noqa: BLE001  (a backend that refuses a shape: logged, skipped)
            log(f"skip {be} b{b} h{h}/{kvh} s{s}/{skv} d{d} causal={causal} mask={mask} drop={drop}: {repr(e)[:160]}")
        finally:
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        if n % 10 == 0:
            log(f"{n}/{len(jobs)} ({time.time() - t0:.0f} s)")
    out.close()
    if args.choice and dev.type == "cuda" and args.set == "r40":
        ch = CsvOut(args.choice, ["batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal", "mask",
                                  "dropout", "backend"])
        for b, h, kvh, s, d in train:
            for causal, mask, drop in ((True, False, False), (False, False, False), (False, True, False),
                                       (True, False, True)):
                ch.row(batch=b, heads=h, kv_heads=kvh, seq=s, kv_seq=s, head_dim=d, causal=int(causal),
                       mask=int(mask), dropout=0.1 if drop else 0.0,
                       backend=choice(dev, b, h, kvh, s, s, d, causal, mask, drop))
        for b, h, kvh, skv, d in decode:
            ch.row(batch=b, heads=h, kv_heads=kvh, seq=1, kv_seq=skv, head_dim=d, causal=0, mask=0, dropout=0.0,
                   backend=choice(dev, b, h, kvh, 1, skv, d, False, False, False))
        ch.close()
    # the kernels each backend launches (one causal training shape, forward and backward)
    if dev.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        b, h, kvh, s, d = TRAIN[0]
        pairs = [(x, dt) for x in backends for dt in (torch.bfloat16, torch.float32) if x == "efficient" or dt == torch.bfloat16]
        for be, dt in pairs:
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                q = torch.randn(b, h, s, d, device=dev, dtype=dt, requires_grad=True)
                with ctx(be):
                    o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
                    o.sum().backward()
                torch.cuda.synchronize()
            for e in p.events():
                if e.device_type.name == "CUDA":
                    log("kernel", be, dt, e.name[:140])
    log(f"done {out.n} rows in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
