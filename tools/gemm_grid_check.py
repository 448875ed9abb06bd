"""How the GEMM model prices the served models' decode grid (``traces/<gpu>/kernel_rates_decode``).

For each device and GEMM family (bf16, row-wise fp8, and per-tensor fp8 where ``traces/<gpu>/kernel_rates_tensorwise``
exists), the grid rows (the file's rows after the op sweep's re-timed shapes:
M in {1, 8, ..., 8192} x 16 (N, K) pairs of served Llama models, timed by their kernels' own durations) are
priced with the profile's call-timed ``gemm`` and its kernel-rate ``gemm_kernel`` block (``simcore.compute.ops.gemm``,
operands L2-resident as in the benchmark), and the median |error|, signed median and 90th percentile printed
for M = 1, 8-512 and >= 1024 (docs/compute.md, "Served models' GEMMs: the decode grid", "FP8 GEMMs by scaling").
``--calibration h100`` on the H200 prices its grid with the H100's profile transferred (the check of carrying a
GEMM family from one Hopper to the other).

  python tools/gemm_grid_check.py [h200 h100] [--calibration PATH_OR_NAME]
"""

from __future__ import annotations

import argparse
import csv
import gzip
from pathlib import Path

import numpy as np

from simcore.compute import ops as C
from simcore.specs.profile import FP8_TENSOR, GEMM_ROW_NAMES, gemm_element_dtype, load_profile
from simcore.specs.registry import default_registry

REPO = Path(__file__).resolve().parents[1]


def grid_rows(device: str) -> dict[str, list[dict[str, str]]]:
    """The grid rows of a device's decode GEMM files by family (``tools/bench_gemm_kernels.py --grid``: the rows
    whose name or shape the op sweep's part does not repeat are the file's tail; the sweep part has no fp8)."""
    out: dict[str, list[dict[str, str]]] = {}
    for folder in ("kernel_rates_decode", "kernel_rates_tensorwise"):
        path = REPO / "traces" / device / folder / "gemm_kernels.csv.gz"
        if not path.is_file():
            continue
        with gzip.open(path, "rt") as f:
            rows = list(csv.DictReader(f))
        # the grid starts at the first fp8 row (its bf16 twin before it in kernel_rates_decode)
        first_fp8 = next(i for i, r in enumerate(rows) if r["dtype"] == "fp8")
        for r in rows[first_fp8 - (folder == "kernel_rates_decode") :]:
            out.setdefault(GEMM_ROW_NAMES.get(r["name"], r["dtype"]), []).append(r)
    return out


def _stats(e: np.ndarray) -> str:
    if e.size == 0:
        return "-"
    return f"{np.median(np.abs(e)) * 100:5.1f} % {np.median(e) * 100:+6.1f} (p90 {np.quantile(np.abs(e), 0.9) * 100:5.1f} %)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("devices", nargs="*", default=["h200", "h100"])
    ap.add_argument("--calibration", default=None, help="a compute profile (name or YAML path) instead of the device's")
    args = ap.parse_args()
    print(f"{'device':6} {'family':10} {'rate':6} | {'M = 1':28} | {'M = 8-512':28} | {'M >= 1024':28}")
    for name in args.devices:
        dev = default_registry().device(name)
        prof = load_profile(dev, args.calibration)
        for fam, sub in grid_rows(name).items():
            m, n, k = (np.array([float(r[c]) for r in sub]) for c in ("m", "n", "k"))
            meas = np.array([float(r["time_s"]) for r in sub])
            dt, tensor = gemm_element_dtype(fam), fam == FP8_TENSOR
            for rate in ("call", "kernel"):
                e = C.gemm(dev, prof, m, n, k, dt, kernel_rate=rate == "kernel", per_tensor=tensor).time_s / meas - 1.0
                parts = [_stats(e[sel]) for sel in (m == 1, (m > 1) & (m <= 512), m >= 1024)]
                print(f"{name:6} {fam:10} {rate:6} | " + " | ".join(f"{p:28}" for p in parts))


if __name__ == "__main__":
    main()
