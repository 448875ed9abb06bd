"""Round 65: norms, the loss's log-softmax and the embedding at the shapes training steps run them.

The profiler traces' per-op check (``python -m simcore.validation.trace_report --ops``) found the
memory-bound kernels simcore prices furthest from their own measured time at the traces' own shapes:
LayerNorm's backward at 0.41x, fused RMSNorm's backward at 0.56x, the loss's log-softmax at 0.80x and
the embedding's backward at 0.11x. Every one was fitted from round 1's sweep (``tools/bench_ops.py``),
which ran the norms at one width (4096) in bf16 and the log-softmax at a fixed size over few rows,
while training steps run them in fp32 (autocast runs norms in fp32, the loss on fp32 logits) over
768-8192-wide rows and a vocabulary's width over thousands of tokens.

Rows in ``bench_ops.py``'s CSV layout (``kind=memory``; ``m`` rows / tokens, ``n`` width / hidden, ``k``
the vocabulary of the embedding), eager calls and, below 50 us a call, CUDA-graph replays, with the byte
conventions the trace classifier uses for the same ops:

* ``layernorm`` / ``rmsnorm``: ``aten::native_layer_norm`` and ``aten::_fused_rms_norm`` with a weight
  (LayerNorm a bias too) of the input's dtype, forward ``2 e N``, backward (``aten::native_layer_norm_backward``,
  ``_fused_rms_norm_backward``, called directly: input, weight and bias gradients, as autograd asks; through
  ``autograd.grad`` a call costs ~70 us of host, which hid the kernels of every row under ~8192 rows in a
  first run) ``3 e N``;
* ``log_softmax``: over a vocabulary's width in fp32 (forward ``2 e N``, backward ``3 e N``);
* ``embedding``: ``aten::embedding`` (``2 T H e + 8 T``) and ``aten::embedding_dense_backward``
  (``V H e + 2 T H e + 8 T``: it zero-fills the table's gradient, then sorts and sums the tokens' rows).

The kernels each variant launches are logged (one call each under the profiler).

  python tools/bench_norm_ops.py --out norm_ops.csv [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_eager_ops import log_kernels, run_jobs  # noqa: E402  (round 59's job loop and kernel log)
from bench_elementwise import COLS  # noqa: E402  (the op sweeps' columns)
from benchutil import CsvOut, env_info, log  # noqa: E402

ELT = {torch.bfloat16: 2, torch.float32: 4}
TAG = {torch.bfloat16: "bf16", torch.float32: "fp32"}
MAX_TENSOR = 1 << 30  # bytes of the largest operand


def _unavailable() -> None:
    raise RuntimeError("no direct backward op")


def _direct_or_autograd(direct, out: torch.Tensor, inputs: list[torch.Tensor]):
    """The backward op called directly (``direct``: cheap on the host, so small rows time their kernels
    and CUDA graphs capture it), else autograd's gradients of ``inputs`` over one retained graph."""
    try:
        direct()
        return direct
    except (RuntimeError, AttributeError, TypeError) as e:
        log("direct backward unavailable, autograd instead:", repr(e)[:160])
    go = torch.randn_like(out)

    def bwd():
        return torch.autograd.grad(out, inputs, go, retain_graph=True)

    return bwd


def norm_variants(dev, rows: int, w: int):
    aten = torch.ops.aten
    out = []
    for dt in (torch.float32, torch.bfloat16):
        e, n = ELT[dt], rows * w
        ex = dict(m=rows, n=w)
        x = torch.randn(rows, w, device=dev, dtype=dt, requires_grad=True)
        wt = torch.randn(w, device=dev, dtype=dt, requires_grad=True)
        b = torch.randn(w, device=dev, dtype=dt, requires_grad=True)
        xd, wd, bd = x.detach(), wt.detach(), b.detach()
        g = torch.randn(rows, w, device=dev, dtype=dt)
        out.append(("layernorm", TAG[dt], lambda xd=xd, wd=wd, bd=bd: F.layer_norm(xd, (w,), wd, bd), 2 * e * n,
                    dict(ex, backward=0)))
        out.append(("rmsnorm", TAG[dt], lambda xd=xd, wd=wd: F.rms_norm(xd, (w,), wd, 1e-5), 2 * e * n,
                    dict(ex, backward=0)))
        # the backward ops a trace shows (input, weight and bias gradients, as autograd asks for them)
        _y, mean, rstd = aten.native_layer_norm(xd, [w], wd, bd, 1e-5)
        ln_bwd = (lambda g=g, xd=xd, mean=mean, rstd=rstd, wd=wd, bd=bd:
                  aten.native_layer_norm_backward(g, xd, [w], mean, rstd, wd, bd, [True, True, True]))
        out.append(("layernorm", TAG[dt], _direct_or_autograd(ln_bwd, F.layer_norm(x, (w,), wt, b), [x, wt, b]),
                    3 * e * n, dict(ex, backward=1)))
        try:
            _y2, rstd2 = aten._fused_rms_norm(xd, [w], wd, 1e-5)
            rms_bwd = (lambda g=g, xd=xd, rstd2=rstd2, wd=wd:
                       aten._fused_rms_norm_backward(g, xd, [w], rstd2, wd, [True, True]))
        except (RuntimeError, AttributeError, TypeError) as e:
            log("no _fused_rms_norm:", repr(e)[:160])
            rms_bwd = None
        y2 = F.rms_norm(x, (w,), wt, 1e-5)
        out.append(("rmsnorm", TAG[dt], _direct_or_autograd(rms_bwd or _unavailable, y2, [x, wt]), 3 * e * n,
                    dict(ex, backward=1)))
    return out


def log_softmax_variants(dev, rows: int, v: int):
    aten = torch.ops.aten
    dt, e, n = torch.float32, 4, rows * v
    x = torch.randn(rows, v, device=dev, dtype=dt)
    y = torch.log_softmax(x, -1)
    g = torch.randn_like(x)
    ex = dict(m=rows, n=v)
    return [
        ("log_softmax", "fp32", lambda: aten._log_softmax(x, -1, False), 2 * e * n, dict(ex, backward=0)),
        ("log_softmax", "fp32", lambda: aten._log_softmax_backward_data(g, y, -1, dt), 3 * e * n, dict(ex, backward=1)),
    ]


def embedding_variants(dev, v: int, h: int, t: int):
    aten = torch.ops.aten
    out = []
    for dt in (torch.float32, torch.bfloat16):
        e = ELT[dt]
        table = torch.randn(v, h, device=dev, dtype=dt)
        idx = torch.randint(0, v, (t,), device=dev)
        g = torch.randn(t, h, device=dev, dtype=dt)
        ex = dict(m=t, n=h, k=v)
        out.append(("embedding", TAG[dt], lambda table=table, idx=idx: F.embedding(idx, table), 2 * t * h * e + 8 * t,
                    dict(ex, backward=0)))
        out.append(("embedding", TAG[dt], lambda g=g, idx=idx: aten.embedding_dense_backward(g, idx, v, -1, False),
                    v * h * e + 2 * t * h * e + 8 * t, dict(ex, backward=1)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=150.0)
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    out = CsvOut(args.out, COLS)
    log("env", env_info(dev))
    t0 = time.time()
    jobs: list[tuple[str, tuple[int, ...]]] = []
    widths = [64, 256] if args.smoke else [768, 1024, 1280, 1536, 2048, 3072, 4096, 5120, 8192]
    rows = [32, 128] if args.smoke else [1024, 2048, 4096, 8192, 16384, 32768]
    jobs += [("norm", (r, w)) for w in widths for r in rows if r * w * 4 <= MAX_TENSOR]
    vocab = [100, 1000] if args.smoke else [32000, 50304, 128256, 151936]
    toks = [16, 64] if args.smoke else [1024, 2048, 4096, 8192, 16384]
    jobs += [("loss", (t, v)) for v in vocab for t in toks if t * v * 4 <= 3 * MAX_TENSOR]
    hidden = [64] if args.smoke else [768, 2048, 4096]
    etoks = [16, 256] if args.smoke else [1024, 4096, 16384]
    jobs += [("emb", (v, h, t)) for v in vocab for h in hidden for t in etoks]
    variants = {"norm": norm_variants, "loss": log_softmax_variants, "emb": embedding_variants}
    run_jobs(out, dev, jobs, variants, args.smoke, args.budget, t0)
    # which kernels each variant launches: one call each under the profiler
    if dev.type == "cuda":
        probes = norm_variants(dev, 8192, 768) + log_softmax_variants(dev, 4096, 32000) + embedding_variants(dev, 32000, 2048, 4096)
        log_kernels(probes, lambda e: f"{e.name[:90]} {e.device_time_total:.1f}us")
    log(f"done {out.n} rows in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
