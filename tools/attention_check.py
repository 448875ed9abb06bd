"""The fitted attention parameters on round 40's rows they were not fitted on, from committed files.

Round 40 (``tools/bench_attention.py``) timed cuDNN's and FlashAttention-2's kernels over the same shapes.
The cuDNN rows are a calibration input (``traces/h200/attention.csv.gz``; the fit's own held-out report
splits them by shape hash); the flash rows of the same run (``traces/h200/round40/attention_flash.csv.gz``,
columns renamed so that calibration does not read them) were never fitted on: this prices them with the
shipped profile's flash parameters and prints the error on the kernel-dominated ones (CUDA-graph replays,
and eager calls over 50 us), without dropout (the flash parameters have no dropout term).

  python tools/attention_check.py [--calibration NAME]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.calibration import fit_compute as FC  # noqa: E402
from simcore.specs.profile import load_profile  # noqa: E402
from simcore.specs.registry import default_registry  # noqa: E402

FLASH = REPO / "traces/h200/round40/attention_flash.csv.gz"
RENAMED = {"op": "kind", "seconds": "time_s", "timing": "framework"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", default=None, help="profile name or path (default: the device's own)")
    args = ap.parse_args()
    with gzip.open(FLASH, "rt") as f:
        rows = [{RENAMED.get(k, k): v for k, v in r.items()} for r in csv.DictReader(f)]
    rows = [r for r in rows if "_drop" not in r["name"]]
    dev = default_registry().device("h200")
    prof = load_profile(dev, args.calibration)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "flash.csv"
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        t = FC.read_ops([path])
    pred = FC.kernel_rows(dev, prof, t)
    meas = t.num["time_s"]
    keep = (np.array(t.framework) == "cuda_graphs") | (meas > 50e-6)
    err = pred[keep] / meas[keep] - 1.0
    print(
        f"round 40's flash rows (not fitted on), kernel-dominated: n={int(keep.sum())}  "
        f"median |error| {statistics.median(np.abs(err)) * 100:.1f} %  median error {statistics.median(err) * 100:+.1f} %"
    )


if __name__ == "__main__":
    main()
