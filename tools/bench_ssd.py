"""Mamba-2's SSD scan (mamba_ssm's Triton kernels) and its decode-step state update, timed on one GPU.

``mamba_chunk_scan_combined`` (``mamba_ssm/ops/triton/ssd_combined.py``: chunk cumsum, chunk states, state
passing, ``C B^T``, chunk scan with the ``D`` skip and the ``silu(z)`` gate, as Megatron-Core's training
path runs them after the convolution) forward and forward+backward, bf16 inputs, ``dt`` with its bias and
softplus, at the per-rank shapes of the hybrid presets (Nemotron-H 8B at TP 1 and 2, 56B at TP 8, Nemotron 3
Nano, Mamba-2 2.7B) and a sequence sweep; and ``selective_state_update`` (one decode token a sequence over
each head's ``P x N`` state) at several batches. CUDA events, the mean of back-to-back calls after warm-up.
mamba_ssm is not a dependency of simcore: put its ``mamba_ssm`` folder (the Triton ops and
``utils/torch.py``, ``utils/determinism.py``) on ``PYTHONPATH`` with einops.

  python tools/bench_ssd.py --out ssd.csv [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, measure  # noqa: E402

COLS = ["case", "op", "batch", "seq", "heads", "head_dim", "state", "groups", "chunk", "fwd_s", "fwd_bwd_s", "n"]

# case: (batch, seq, heads, head_dim, state, groups, chunk) of one rank
SCANS = {
    "nemotron-h-8b-tp1": (1, 8192, 128, 64, 128, 8, 128),
    "nemotron-h-8b-tp2": (1, 8192, 64, 64, 128, 4, 128),
    "nemotron-h-56b-tp8": (1, 8192, 32, 64, 256, 1, 128),
    "nemotron3-nano-tp1": (1, 8192, 64, 64, 128, 8, 128),
    "mamba2-2.7b": (8, 2048, 80, 64, 128, 1, 256),
    "nemotron-h-8b-tp1-s2048": (1, 2048, 128, 64, 128, 8, 128),
    "nemotron-h-8b-tp1-s4096": (1, 4096, 128, 64, 128, 8, 128),
    "nemotron-h-8b-tp1-s16384": (1, 16384, 128, 64, 128, 8, 128),
    "nemotron-h-8b-tp1-c256": (1, 8192, 128, 64, 128, 8, 256),
}
DECODE_BATCHES = (1, 8, 64, 256)


def scan_case(b: int, s: int, h: int, p: int, n: int, g: int, q: int, dev: torch.device, n_iter: int):
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

    kw = dict(device=dev, dtype=torch.bfloat16)
    x = torch.randn(b, s, h, p, **kw, requires_grad=True)
    z = torch.randn(b, s, h, p, **kw, requires_grad=True)
    dt = torch.randn(b, s, h, **kw, requires_grad=True)
    B = torch.randn(b, s, g, n, **kw, requires_grad=True)
    C = torch.randn(b, s, g, n, **kw, requires_grad=True)
    A = -torch.rand(h, device=dev, dtype=torch.float32).add_(0.5).requires_grad_(True)
    D = torch.ones(h, device=dev, dtype=torch.float32, requires_grad=True)
    dt_bias = torch.zeros(h, device=dev, dtype=torch.float32, requires_grad=True)
    grad = torch.randn(b, s, h, p, **kw)

    def fwd():
        with torch.no_grad():
            return mamba_chunk_scan_combined(x, dt, A, B, C, q, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)

    def fwd_bwd():
        y = mamba_chunk_scan_combined(x, dt, A, B, C, q, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)
        y.backward(grad)

    for f in (fwd, fwd_bwd):
        for _ in range(3):
            f()
    torch.cuda.synchronize(dev)
    return measure(fwd, n_iter, dev), measure(fwd_bwd, n_iter, dev)


def decode_case(b: int, h: int, p: int, n: int, g: int, dev: torch.device, n_iter: int) -> float:
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update

    kw = dict(device=dev, dtype=torch.bfloat16)
    state = torch.randn(b, h, p, n, **kw)
    x = torch.randn(b, h, p, **kw)
    dt = torch.randn(b, h, p, **kw)
    A = -torch.rand(h, p, n, device=dev, dtype=torch.float32)
    B = torch.randn(b, g, n, **kw)
    C = torch.randn(b, g, n, **kw)
    D = torch.ones(h, p, device=dev, dtype=torch.float32)
    z = torch.randn(b, h, p, **kw)
    dt_bias = torch.zeros(h, p, device=dev, dtype=torch.float32)

    def step():
        selective_state_update(state, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize(dev)
    return measure(step, n_iter, dev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="one small case, few iterations")
    a = ap.parse_args()
    dev = torch.device("cuda")
    n_iter = 3 if a.smoke else 20
    out = CsvOut(a.out, COLS)
    cases = {"smoke": (1, 1024, 8, 64, 128, 1, 128)} if a.smoke else SCANS
    for name, (b, s, h, p, n, g, q) in cases.items():
        f, fb = scan_case(b, s, h, p, n, g, q, dev, n_iter)
        log(f"{name}: fwd {f * 1e3:.3f} ms, fwd+bwd {fb * 1e3:.3f} ms")
        out.row(case=name, op="chunk_scan_combined", batch=b, seq=s, heads=h, head_dim=p, state=n, groups=g,
                chunk=q, fwd_s=f, fwd_bwd_s=fb, n=n_iter)
    for b in (1,) if a.smoke else DECODE_BATCHES:
        t = decode_case(b, 128, 64, 128, 8, dev, n_iter * 10)
        log(f"decode nemotron-h-8b batch {b}: {t * 1e6:.1f} us")
        out.row(case=f"nemotron-h-8b-decode-b{b}", op="selective_state_update", batch=b, seq=1, heads=128,
                head_dim=64, state=128, groups=8, chunk=0, fwd_s=t, fwd_bwd_s="", n=n_iter * 10)
    out.close()
    with open(os.path.splitext(a.out)[0] + ".manifest.json", "w") as fh:
        json.dump({"suite": "ssd", "args": vars(a), **env_info(dev)}, fh, indent=1)


if __name__ == "__main__":
    main()
