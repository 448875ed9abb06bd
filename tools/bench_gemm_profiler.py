"""Does recording with the PyTorch profiler change how fast a GEMM runs (round 18d)?

The Llama-1B gate/up GEMM (8192 x 16384 x 2048 bf16, trace strides), after 0.3 s of the same GEMM
each time: (a) CUDA events around 30 calls, profiler off; (b) the same 30 calls recorded by the
profiler (CPU + CUDA activities): the GEMM kernels' own durations; (c) events around 30 calls while
the profiler records. Also a 130 ms training-like pattern (GEMM, then a copy of half its length)
under the same three conditions.

  python tools/bench_gemm_profiler.py --out gemm_profiler.csv
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log, run_for, sync  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = CsvOut(args.out, ["pattern", "condition", "time_s", "n"])
    a = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16)
    b = torch.randn(16384, 2048, device=dev, dtype=torch.bfloat16).t()
    src = torch.randn(64 << 20, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)

    def warm():
        run_for(lambda: torch.mm(a, b), 0.3, dev)

    for pattern, fill in (("gemm_b2b", 0), ("gemm_copy", 1)):
        def run(n=30, fill=fill):
            for _ in range(n):
                torch.mm(a, b)
                for _ in range(fill):
                    dst.copy_(src)

        for cond in ("events", "profiler_kernels", "events_under_profiler", "events"):
            warm()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if cond == "events":
                s.record()
                run()
                e.record()
                sync(dev)
                t = s.elapsed_time(e) / 1e3 / 30
            else:
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    s.record()
                    run()
                    e.record()
                    sync(dev)
                if cond == "events_under_profiler":
                    t = s.elapsed_time(e) / 1e3 / 30
                else:
                    ks = [ev.device_time for ev in prof.events()
                          if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name.startswith("nvjet")]
                    t = statistics.median(ks) * 1e-6 if ks else float("nan")
            out.row(pattern=pattern, condition=cond, time_s=t, n=30)
            log(f"{pattern} {cond}: {t * 1e6:.1f} us per GEMM (+fill)")
    out.close()


if __name__ == "__main__":
    main()
