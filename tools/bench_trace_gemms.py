"""The GEMMs of profiler traces, re-timed alone on this GPU (round 18).

For every ``aten::mm`` shape (with the operands' strides, i.e. the same transposes) of the given
Kineto traces, the kernel time three ways: back to back (0.3 s of the same GEMM first, so the power
cap has settled; then CUDA events over 30 calls), at ~50 % GEMM duty (each GEMM followed by a copy
of about its own length), and in the trace itself (median kernel time of that op). Separates a
change of GPU or clock state between the op sweep and the traces from the in-step effect.

  python tools/bench_trace_gemms.py --out trace_gemms.csv TRACE.json.gz [...] [--top 12]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, measure, run_for, sync  # noqa: E402

COLS = ["trace", "m", "n", "k", "a_strides", "b_strides", "count", "trace_kernel_s", "b2b_s", "duty50_s",
        "duty", "flops"]


def trace_gemms(path):
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        ev = json.load(f)["traceEvents"]
    ext = {}
    for e in ev:
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm":
            a = e.get("args", {})
            ext[a.get("External id")] = (json.dumps(a.get("Input Dims")), json.dumps(a.get("Input Strides")))
    # kernels link to cpu ops through the runtime launch's correlation id and the op's External id
    corr_ext = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            a = e.get("args", {})
            if "correlation" in a and "External id" in a:
                corr_ext[a["correlation"]] = a["External id"]
    times = defaultdict(list)
    for e in ev:
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            x = a.get("External id", corr_ext.get(a.get("correlation")))
            if x in ext:
                times[ext[x]].append(e["dur"] * 1e-6)
    return times


def make(dims, strides, dev):
    (m, k), (k2, n) = dims
    sa, sb = strides

    def mat(r, c, s):
        if s[1] == 1:
            return torch.randn(r, c, device=dev, dtype=torch.bfloat16)
        return torch.randn(c, r, device=dev, dtype=torch.bfloat16).t()

    return mat(m, k, sa), mat(k2, n, sb), (m, n, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    dev = torch.device("cuda")
    log("env", env_info(dev))
    out = CsvOut(args.out, COLS)
    src = torch.randn(64 << 20, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        dst.copy_(src)
    e.record()
    sync(dev)
    t_copy = s.elapsed_time(e) / 1e3 / 10
    for path in args.traces:
        times = trace_gemms(path)
        shapes = sorted(times, key=lambda k: -sum(times[k]))[: args.top]
        for key in shapes:
            dims, strides = json.loads(key[0]), json.loads(key[1])
            a, b, (m, n, k) = make(dims, strides, dev)
            run_for(lambda a=a, b=b: torch.mm(a, b), 0.3, dev, batch=20)
            b2b = measure(lambda a=a, b=b: torch.mm(a, b), 30, dev)
            r = max(1, round(b2b / t_copy))
            pairs = []
            for _ in range(200):
                s1, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s1.record()
                torch.mm(a, b)
                e1.record()
                pairs.append((s1, e1))
                for _ in range(r):
                    dst.copy_(src)
            sync(dev)
            ts = [x.elapsed_time(y) / 1e3 for x, y in pairs[100:]]
            d50 = statistics.median(ts)
            out.row(trace=os.path.basename(path), m=m, n=n, k=k, a_strides=json.dumps(strides[0]),
                    b_strides=json.dumps(strides[1]), count=len(times[key]),
                    trace_kernel_s=statistics.median(times[key]), b2b_s=b2b, duty50_s=d50,
                    duty=d50 / (d50 + r * t_copy), flops=2 * m * n * k)
            log(f"{os.path.basename(path)} {m}x{n}x{k} {strides}: trace {statistics.median(times[key]) * 1e6:.1f} "
                f"b2b {b2b * 1e6:.1f} duty~.5 {d50 * 1e6:.1f} us")
            del a, b
    out.close()


if __name__ == "__main__":
    main()
