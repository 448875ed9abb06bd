"""The shipped profile's GEMMs on round 49's bf16 / fp16 rows, which it was not fitted on.

Round 49 (``tools/bench_gemm_align.py``) timed misaligned GEMMs beside their aligned twins in four dtypes
as CUDA-graph kernel times. Its fp32 / tf32 rows are a calibration input (``traces/h200/gemm_align.csv.gz``);
the bf16 / fp16 rows (``traces/h200/round49/gemm_align_check.csv.gz``) are a check: this prices each with
``simcore.compute.ops.gemm`` (kernel time, no launch) and prints predicted / measured per row.

  python tools/gemm_align_check.py [--calibration NAME]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.specs.profile import load_profile  # noqa: E402
from simcore.compute import ops  # noqa: E402
from simcore.specs.registry import default_registry  # noqa: E402

CHECK = REPO / "traces/h200/round49/gemm_align_check.csv.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", default=None, help="profile name or path (default: the device's own)")
    args = ap.parse_args()
    dev = default_registry().device("h200")
    prof = load_profile(dev, args.calibration)
    with gzip.open(CHECK, "rt") as f:
        rows = list(csv.DictReader(f))
    print(
        f"{'dtype':6s} {'m':>6s} {'n':>6s} {'k':>6s} {'measured us':>12s} {'predicted us':>13s} {'error':>8s}"
    )
    for r in rows:
        m, n, k = (int(r[c]) for c in "mnk")
        meas = float(r["time_s"])
        pred = float(ops.gemm(dev, prof, m, n, k, r["dtype"]).time_s)
        print(
            f"{r['dtype']:6s} {m:6d} {n:6d} {k:6d} {meas * 1e6:12.1f} {pred * 1e6:13.1f} {100 * (pred / meas - 1):+7.1f}%"
        )


if __name__ == "__main__":
    main()
