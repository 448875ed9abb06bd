"""GEMMs whose row strides are not 16-byte multiples, beside their aligned twins, per dtype (round 49).

cuBLAS runs a GEMM whose ``k`` or ``n`` stride is not a 16-byte multiple with kernels that cannot use
vector (TMA) loads; simcore prices that with ``eff_misaligned``, fitted on bf16 / tf32 rows only until
now. This times, for fp32 (PyTorch's default fp32 matmul: FFMA kernels), tf32, bf16 and fp16, LM-head
shapes of odd vocabularies (GPT-2's 50257, 32001) and odd model dimensions, each beside the aligned
shape next to it, as the kernel time of back-to-back calls replayed from one CUDA graph. Rows in the
format of ``ops.csv`` (``kind gemm``, ``framework cuda_graphs``), a ``simcore calibrate`` input.

  python tools/bench_gemm_align.py --out gemm_align.csv [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log, time_graph  # noqa: E402

# (m, n, k): misaligned shapes and their aligned neighbours
SHAPES = [
    (4096, 50257, 768), (4096, 50304, 768),  # GPT-2's LM head, forward
    (4096, 768, 50257), (4096, 768, 50304),  # its input gradient (k odd)
    (8192, 32001, 2048), (8192, 32000, 2048),
    (2048, 4095, 4096), (2048, 4096, 4095), (2048, 4096, 4096),
    (4096, 2050, 2048), (4096, 2048, 2050), (4096, 2048, 2048),
    (1024, 1023, 1024), (1024, 1024, 1024),
    (4097, 4096, 1024), (4096, 4096, 1024),  # odd m: not a stride
]  # fmt: skip
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
COLS = ["kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal",
        "backward", "name", "bytes", "time_s", "flops", "framework"]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = CsvOut(args.out, COLS)
    t0 = time.time()
    for name, dt in DTYPES.items():
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        for m, n, k in SHAPES[:4] if args.smoke else SHAPES:
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(k, n, device=dev, dtype=dt)
            flops = 2.0 * m * n * k
            est = flops / (50e12 if name == "fp32" else 400e12)
            n_inner = max(2, min(200, int(0.02 / est)))
            t = time_graph(lambda: torch.mm(a, b), dev, n_inner)
            eb = a.element_size()
            out.row(kind="gemm", dtype=name, m=m, n=n, k=k, batch=1, backward=0, name="matmul",
                    bytes=float((m * k + k * n + m * n) * eb), time_s=t, flops=flops, framework="cuda_graphs")  # fmt: skip
            log(f"{name} {m}x{n}x{k}: {t * 1e6:.1f} us, {flops / t / 1e12:.0f} TFLOP/s")
            del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    out.close()
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
