"""Facts of a profiler trace that stop 17's models rest on, read from committed files (no GPU needed).

* the most kernels launched and not yet started at once (CUDA's launch queue: round 52's batch-32
  decode held 1022, then each launch blocked; ``engine.inference.LAUNCH_QUEUE_KERNELS``), and the
  longest ``cudaLaunchKernel`` call;
* the host syncs per annotated step (``aten::item`` / ``aten::_local_scalar_dense`` calls: round 50's
  Mixtral under AMP reads each expert's token count, 192 a step);
* what the profiler recorded beside the timeline (``host_trace.profiler_record``);
* the CPU's speed: the median ``aten::t`` (simcore's op probe) and ``cudaLaunchKernel`` durations
  (stop 18: round 62-63's first-profiled AMP steps ran 6.5-6.8 / 7.6-7.8 us against round 31's ~3 / ~5.5);
* how long the trace's first and last kernels waited after their launch (``host_trace.start_queue_s``:
  a loop that runs ahead into a step without step annotations).

  python tools/trace_facts.py TRACE.json.gz [...]
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

from simcore.traces.classify import analyze
from simcore.calibration.host_trace import profiler_record, start_queue_s
from simcore.traces import read_trace


def facts(path: str) -> dict[str, object]:
    a = analyze(read_trace(path))
    tr = a.trace
    launch, start = [], []
    for k in tr.kernels():
        rc = tr.runtime.get(k.correlation)
        if rc is not None:
            launch.append(rc.ts)
            start.append(k.ts)
    pending = 0
    if start:
        lo, st = np.array(launch), np.array(start)
        # the pending count only grows at a launch: evaluate it there
        pending = int(max(np.sum((lo <= t) & (st > t)) for t in lo))
    launches = [c.dur for c in tr.host_calls if c.name == "cudaLaunchKernel"]
    syncs = []
    for s in a.steps:
        if s.cpu_start is None or s.cpu_end is None:
            continue
        syncs.append(
            sum(
                1
                for o in tr.cpu_ops.values()
                if o.name == "aten::_local_scalar_dense" and s.cpu_start <= o.ts <= s.cpu_end
            )
        )
    return {
        "max_pending_kernels": pending,
        "longest_launch_ms": round(max(launches) * 1e3, 3) if launches else None,
        "host_reads_per_step": statistics.median(syncs) if syncs else None,
        "profiler_record": profiler_record(tr),
        "aten_t_median_us": _median_us([o.dur for o in tr.cpu_ops.values() if o.name == "aten::t"]),
        "launch_median_us": _median_us(launches),
        "start_queue_ms": round(start_queue_s(a) * 1e3, 3),
        "end_queue_ms": round(start_queue_s(a, last=True) * 1e3, 3),
    }


def _median_us(durations: list[float]) -> float | None:
    return round(statistics.median(durations) * 1e6, 2) if durations else None


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for p in paths:
        print(p, facts(p))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
