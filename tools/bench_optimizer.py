"""Round 72: torch.optim.AdamW on bf16 parameters (no fp32 master copy), fused and foreach.

Round 1's sweep (``tools/bench_ops.py``) timed AdamW on fp32 parameters only (28 bytes a parameter:
p, g, m, v read, p, m, v written). PyTorch's optimizers keep the moments in the parameters' dtype, so
an update of bf16 weights moves 14 bytes a parameter; round 71's Llama-3-8B-shaped step with bf16
weights ran its fused update at ~2.3 TB/s where the fp32 fit (3.4 TB/s) gives 11.3 of its 16.7 ms.

Rows in ``bench_ops.py``'s CSV layout (``kind=optimizer``, ``dtype`` the parameters', ``m`` the
parameter count, ``batch`` the tensor count, ``name`` ``adamw_fused`` / ``adamw_foreach``, ``bytes`` the
minimal traffic: 14 bytes a bf16 parameter, 28 an fp32 one), eager calls of ``opt.step()`` over 16 Mi-element
tensors, 1 Mi to 1 Gi parameters; fp32 rows at the same sizes are measured beside them in the same process
(a reference for the ratio, named ``*_ref``; ``tools/collect.py optimizer`` moves them to a file of their
own whose ``kind`` column is renamed ``op``, so that no calibration takes them beside the op sweep's).

  python tools/bench_optimizer.py --out optimizer_bf16.csv [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_elementwise import COLS  # noqa: E402
from benchutil import CsvOut, env_info, log, time_eager  # noqa: E402

BYTES = {torch.bfloat16: 14, torch.float32: 28}


def adamw_row(out: CsvOut, dev: torch.device, n_params: int, impl: str, dtype: torch.dtype, smoke: bool) -> None:
    chunk = 1 << 14 if smoke else 16 << 20
    shapes = []
    left = n_params
    while left > 0:
        shapes.append(min(chunk, left))
        left -= shapes[-1]
    params = [torch.nn.Parameter(torch.randn(s, device=dev, dtype=dtype)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    kw = {"fused": True} if impl == "fused" else {"foreach": True}
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, **kw)
    opt.step()  # creates the moments (in the parameters' dtype)
    assert opt.state[params[0]]["exp_avg"].dtype == dtype
    t, _n, spread = time_eager(opt.step, dev, target=0.002 if smoke else 0.02, reps=3 if smoke else 5)
    tag = "bf16" if dtype == torch.bfloat16 else "fp32"
    name = f"adamw_{impl}" + ("" if dtype == torch.bfloat16 else "_ref")
    out.row(kind="optimizer", dtype=tag, m=n_params, batch=len(params), backward=0, name=name,
            bytes=BYTES[dtype] * n_params, time_s=t, framework="eager")  # fmt: skip
    log(f"{name} {tag} {n_params} params: {t * 1e3:.3f} ms ({BYTES[dtype] * n_params / t / 1e12:.2f} TB/s, spread {spread:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=120.0)
    args = ap.parse_args()
    dev = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    if dev.type == "cpu" and not args.smoke:
        raise SystemExit("no GPU: run with --smoke")
    out = CsvOut(args.out, COLS)
    log("env", env_info(dev))
    t0 = time.time()
    sizes = [1 << 12, 1 << 16] if args.smoke else [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    for n in sizes:
        for impl in ("fused", "foreach"):
            for dtype in (torch.bfloat16, torch.float32):
                if time.time() - t0 > args.budget:
                    log("budget reached")
                    break
                if dev.type == "cpu" and impl == "fused":
                    continue  # the fused CPU AdamW is not the kernel this measures
                adamw_row(out, dev, n, impl, dtype, args.smoke)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
    out.close()
    log(f"done {out.n} rows in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
