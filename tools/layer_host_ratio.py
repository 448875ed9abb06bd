"""Each training step's host per layer over what the shipped profile gives at that step's own CPU probe.

For profiled eager training traces (``host_trace.training_step_hosts``) or the rows ``python -m
simcore.calibration.host_trace --steps`` wrote from them (a ``.csv`` / ``.csv.gz``): the forward and
backward layers' host time over ``ComputeProfile.host_of("train_fwd_<act>" / "train_bwd_<act>")`` at the
step's ``aten::t`` probes (``at_cpu_speed``). Stop 18 read the held-apart Llama-family training traces at
1.07-1.19 (forward) and round 64's fit-config runs (``traces/h200/round64/host_width.csv.gz``) at 1.03 with it.

  python tools/layer_host_ratio.py TRACE.json.gz|ROWS.csv.gz [...]
"""

from __future__ import annotations

import csv
import gzip
import statistics
import sys

from simcore.traces.classify import analyze
from simcore.calibration.host_trace import training_step_hosts
from simcore.specs.profile import load_profile
from simcore.traces import read_trace
from simcore.specs.registry import default_registry


def _rows(path: str) -> list[dict[str, str]]:
    if path.endswith((".csv", ".csv.gz")):
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            return list(csv.DictReader(f))
    return [{k: str(v) for k, v in h.row().items()} for h in training_step_hosts(analyze(read_trace(path)))]


def ratios(path: str) -> list[tuple[str, float, float]]:
    """(act, forward ratio, backward ratio) of each step of ``path``."""
    prof = load_profile(default_registry().device("h200"))
    out = []
    for r in _rows(path):
        impl = r.get("impl") or "reference"
        p = prof.at_cpu_speed(float(r["probe_main_s"]), float(r["probe_bwd_s"]))
        f = float(r["fwd_layer_s"]) / p.host_of(f"train_fwd_{r['act']}", True, impl)
        b = float(r["bwd_layer_s"]) / p.host_of(f"train_bwd_{r['act']}", True, impl)
        out.append((r["act"], f, b))
    return out


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for path in paths:
        rs = ratios(path)
        if not rs:
            print(path, "no eager training step with host marks")
            continue
        fwd, bwd = statistics.median(x[1] for x in rs), statistics.median(x[2] for x in rs)
        print(f"{path} {rs[0][0]}: forward {fwd:.2f}, backward {bwd:.2f} (median of {len(rs)} steps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
