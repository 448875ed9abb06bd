"""How well a decode loop's weight tracks its measured host: by op name (``HostOps.loop_op_weights``) or by count.

For every eager inference trace of ``traces/validate.csv`` (held apart; the compiled decodes' loops wait on the GPU
inside them and are left out) and round 80's fit loops, the loop's measured host is the median over its decode
passes of the sum of its top-level ops outside the layers over the pass's ``aten::empty``
(``host_trace.loop_passes``). Each weighting predicts it up to one cost per code (implementation, loop, activation):
``HostOps.pass_op_weight`` (each op at its name's weight) or ``ops + extra_launch_ops x extra launches`` (stop 22's
count). Prints, per code, the traces and the standard deviation of log(host / weight) under each (smaller: the
weight explains the host better), held-apart traces and all.

  python tools/loop_weight_check.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.traces.classify import analyze  # noqa: E402
from simcore.calibration.host_trace import decode_step_hosts, loop_passes, trace_host_ops  # noqa: E402
from simcore.traces import read_trace  # noqa: E402


def main() -> None:
    paths: list[tuple[Path, bool]] = [(p, False) for p in sorted((REPO / "traces/h200/round80").glob("*.json.gz"))]
    with open(REPO / "traces/validate.csv") as f:
        for row in csv.DictReader(f):
            files = row["traces"].split()
            if len(files) == 1 and row["held_apart"] == "1":
                paths.append((REPO / "traces" / files[0], True))
    by_code: dict[str, list[tuple[bool, float, float, float]]] = {}
    for path, held in paths:
        a = analyze(read_trace(path))
        rows = decode_step_hosts(a)
        passes = [(pace, ops) for pace, ops in loop_passes(a) if pace > 0 and ops]
        if not rows or not passes:
            continue  # not an eager inference trace (training, compiled decode graphs)
        host = statistics.median(sum(o.dur for o in ops) / pace for pace, ops in passes)
        w = trace_host_ops(a)
        name = statistics.median(w.pass_op_weight((o.name, o.extra) for o in ops) for _, ops in passes)
        count = statistics.median(len(ops) + w.extra_launch_ops * sum(o.extra for o in ops) for _, ops in passes)
        code = f"{rows[0].impl}/{rows[0].loop}/{rows[0].act}"
        by_code.setdefault(code, []).append((held, host, name, count))
    print(f"{'code':32s} {'traces':>6s} {'held':>5s}  sd by name  sd by count  (held apart: by name, by count)")
    for code, v in sorted(by_code.items()):
        if len(v) < 3:
            continue

        def sd(sel: list[tuple[bool, float, float, float]], i: int) -> float:
            return statistics.pstdev(math.log(x[1] / x[i]) for x in sel) if len(sel) > 1 else float("nan")

        held = [x for x in v if x[0]]
        print(
            f"{code:32s} {len(v):6d} {len(held):5d}  {sd(v, 2):10.3f}  {sd(v, 3):11.3f}  ({sd(held, 2):.3f}, {sd(held, 3):.3f})"
        )


if __name__ == "__main__":
    main()
