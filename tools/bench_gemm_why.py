"""Why do GEMMs run faster inside the profiled training steps than alone (round 18b)?

One trace GEMM shape (8192 x 16384 x 2048 bf16, the Llama-1B MLP up-projection with its trace
strides) timed back to back after 0.3 s of warm-up, varying one thing at a time:
operand data (standard normal, x0.02 like an initialised weight, a quarter of the values zero, all
zero), and the measurement (CUDA events around 30 calls vs the PyTorch profiler's kernel durations,
i.e. CUPTI). Then the power state: the same GEMM in short bursts (5 calls after an idle second,
timed by events and by the profiler) vs sustained (after 0.3 s of the same GEMM). Prints and writes
one row per variant.

  python tools/bench_gemm_why.py --out gemm_why.csv
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log, measure, run_for, sync  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = CsvOut(args.out, ["variant", "measure", "time_s", "n"])
    m, n, k = 8192, 16384, 2048

    def operands(kind):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16).t()  # strides (1, k): as in the trace
        if kind == "small":
            b = b * 0.02
        elif kind == "sparse25":
            a = a * (torch.rand_like(a) > 0.25)
        elif kind == "zeros":
            a.zero_()
            b = torch.zeros_like(b)
        elif kind == "small_both":
            a, b = a * 0.02, b * 0.02
        return a, b

    for kind in ("randn", "small", "small_both", "sparse25", "zeros", "randn"):
        a, b = operands(kind)
        run_for(lambda a=a, b=b: torch.mm(a, b), 0.3, dev)
        t = measure(lambda a=a, b=b: torch.mm(a, b), 30, dev)
        out.row(variant=kind, measure="events", time_s=t, n=30)
        log(f"{kind}: events {t * 1e6:.1f} us")
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(30):
                torch.mm(a, b)
            sync(dev)
        ks = [ev.device_time for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA]
        if ks:
            tk = statistics.median(ks) * 1e-6
            out.row(variant=kind, measure="profiler", time_s=tk, n=len(ks))
            log(f"{kind}: profiler kernel {tk * 1e6:.1f} us ({len(ks)} kernels)")
    # burst vs sustained: the card's power cap needs time to pull the clock down
    a, b = operands("randn")
    for label, warm_s in (("burst", 0.0), ("sustained", 0.3), ("burst", 0.0)):
        time.sleep(1.0)  # idle: the clock recovers
        run_for(lambda: torch.mm(a, b), warm_s, dev)
        t = measure(lambda: torch.mm(a, b), 5, dev)
        out.row(variant=f"randn_{label}", measure="events_5", time_s=t, n=5)
        log(f"{label}: events over 5 calls {t * 1e6:.1f} us")
    out.close()


if __name__ == "__main__":
    main()
