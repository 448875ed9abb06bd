"""Speed and memory of the streaming PyTorch-profiler trace reader.

Synthesises a Kineto-layout trace of about ``--mb`` megabytes (default 200) in a temporary folder
(a small GPT's training steps, repeated, with ``python_function`` padding events as a
``with_stack=True`` trace has), then reads it in a fresh process and reports decompressed MB/s and
that process's peak resident memory (``resource.getrusage``). Targets: >= 50 MB/s, < 1 GB RSS.

    python benchmarks/bench_trace_read.py                 # 200 MB plain JSON
    python benchmarks/bench_trace_read.py --gzip --mb 50  # gzip-compressed input
    python benchmarks/bench_trace_read.py --no-stack      # no python_function events
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READER = r"""
import json, os, resource, sys, time
from simcore.traces import read_trace
from simcore.traces.classify import analyze
from simcore.traces.kineto import read_kineto
t0 = time.perf_counter()
tr = read_kineto(sys.argv[1], workers=int(sys.argv[2])) if sys.argv[2] != "auto" else read_trace(sys.argv[1])
t1 = time.perf_counter()
a = analyze(tr)
t2 = time.perf_counter()
print(json.dumps({"read_s": t1 - t0, "analyze_s": t2 - t1, "bytes": tr.bytes_read, "events": tr.events_seen,
                  "gpu_events": len(tr.gpu_events), "cpu_ops": len(tr.cpu_ops), "steps": len(a.steps),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "peak_rss_worker_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="approximate trace size in MB (decompressed)")
    ap.add_argument("--gzip", action="store_true", help="write and read .json.gz")
    ap.add_argument("--keep", help="write the trace here instead of a temporary folder")
    ap.add_argument(
        "--workers",
        default="auto",
        help="reader processes: auto (SIMCORE_TRACE_WORKERS or up to 4), 0 = one process",
    )
    ap.add_argument(
        "--no-stack",
        action="store_true",
        help="no python_function events (a with_stack=False trace: denser in kernels)",
    )
    args = ap.parse_args()
    from simcore.traces.synth import SynthConfig, write_trace

    with tempfile.TemporaryDirectory(prefix="simcore-bench-") as tmp:
        path = Path(args.keep or tmp) / ("bench.json.gz" if args.gzip else "bench.json")
        # one step of this config is ~0.3 MB
        pad = 0 if args.no_stack else 3
        cfg = SynthConfig(
            layers=12, hidden=512, heads=8, seq=256, batch=2, vocab=4096, pad_cpu_events=pad, steps=1
        )
        t0 = time.perf_counter()
        probe = Path(tmp) / "probe.json"
        write_trace(probe, cfg)
        per_step = probe.stat().st_size
        probe.unlink()
        cfg.steps = max(1, int(args.mb * 1e6 / per_step))
        write_trace(path, cfg)
        gen_s = time.perf_counter() - t0
        out = subprocess.run(
            [sys.executable, "-c", READER, str(path), str(args.workers)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        r = json.loads(out.stdout)
        r["file_bytes"] = os.path.getsize(path)
        r["generate_s"] = gen_s
        r["mb_per_s"] = r["bytes"] / 1e6 / r["read_s"]
        r["ok_speed"] = r["mb_per_s"] >= 50.0
        r["ok_memory"] = r["peak_rss_bytes"] + r["peak_rss_worker_bytes"] < 1e9
        print(json.dumps(r))
        print(
            f"read {r['bytes'] / 1e6:.0f} MB ({r['events']:,} events, {r['gpu_events']:,} GPU) in {r['read_s']:.2f} s "
            f"= {r['mb_per_s']:.0f} MB/s (workers: {args.workers}); classify+steps {r['analyze_s']:.2f} s; peak RSS "
            f"{r['peak_rss_bytes'] / 1e6:.0f} MB + {r['peak_rss_worker_bytes'] / 1e6:.0f} MB (largest worker)  "
            f"[{'OK' if r['ok_speed'] and r['ok_memory'] else 'MISSED TARGET'}]",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
