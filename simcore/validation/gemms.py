"""``python -m simcore.validation gemms``: how the GEMM model prices two kinds of measured GEMM tables.

* **The served models' decode grid** (``traces/<gpu>/kernel_rates_decode``, and ``kernel_rates_tensorwise`` where
  it exists): M in {1, 8, ..., 8192} x 16 (N, K) pairs of served Llama models, timed by their kernels' own
  durations (``tools/bench_gemm_kernels.py --grid``), priced with the profile's call-timed ``gemm`` and its
  kernel-rate ``gemm_kernel`` block, operands L2-resident as in the benchmark (docs/compute.md, "Served models'
  GEMMs: the decode grid", "FP8 GEMMs by scaling"). ``calibration``: price the grid with another profile (the
  check of carrying a GEMM family from one Hopper to the other: ``--calibration h100`` on the H200).
* **Engine linear-layer tables** (``traces/<gpu>/<engine>_gemm``, fitted into ``gemm-<device>.yaml`` by
  ``simcore calibrate``): the check half of the shape split (rows the fit did not see), each row priced as a serving
  step prices a linear (the input's quantize kernel and the GEMM, operands from HBM) with the device's profile,
  by family and by rows: decode (M <= 512), middle, prefill (M >= 4096) (docs/compute.md, "Blackwell's GEMMs from
  engine tables").
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Any

import numpy as np

from simcore.calibration import fit_engine_gemm as FE
from simcore.compute import ops as C
from simcore.specs.profile import FP8_TENSOR, GEMM_ROW_NAMES, gemm_element_dtype, load_profile
from simcore.specs.registry import default_registry

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "traces"


def grid_rows(device: str, traces: Path = TRACES) -> dict[str, list[dict[str, str]]]:
    """The grid rows of a device's decode GEMM files by family (``tools/bench_gemm_kernels.py --grid``: the rows
    whose name or shape the op sweep's part does not repeat are the file's tail; the sweep part has no fp8)."""
    out: dict[str, list[dict[str, str]]] = {}
    for folder in ("kernel_rates_decode", "kernel_rates_tensorwise"):
        path = traces / device / folder / "gemm_kernels.csv.gz"
        if not path.is_file():
            continue
        with gzip.open(path, "rt") as f:
            rows = list(csv.DictReader(f))
        # the grid starts at the first fp8 row (its bf16 twin before it in kernel_rates_decode)
        first_fp8 = next(i for i, r in enumerate(rows) if r["dtype"] == "fp8")
        for r in rows[first_fp8 - (folder == "kernel_rates_decode") :]:
            out.setdefault(GEMM_ROW_NAMES.get(r["name"], r["dtype"]), []).append(r)
    return out


def _stats(e: np.ndarray[Any, Any]) -> str:
    if e.size == 0:
        return "-"
    return f"{np.median(np.abs(e)) * 100:5.1f} % {np.median(e) * 100:+6.1f} (p90 {np.quantile(np.abs(e), 0.9) * 100:5.1f} %)"


def grid_report(devices: list[str], calibration: str | None = None) -> str:
    """The decode grid's errors (median |error|, signed median, p90) per device, family and rate."""
    lines = [f"{'device':6} {'family':10} {'rate':6} | {'M = 1':28} | {'M = 8-512':28} | {'M >= 1024':28}"]
    for name in devices:
        dev = default_registry().device(name)
        prof = load_profile(dev, calibration)
        for fam, sub in grid_rows(name).items():
            m, n, k = (np.array([float(r[c]) for r in sub]) for c in ("m", "n", "k"))
            meas = np.array([float(r["time_s"]) for r in sub])
            dt, tensor = gemm_element_dtype(fam), fam == FP8_TENSOR
            for rate in ("call", "kernel"):
                e = C.gemm(dev, prof, m, n, k, dt, kernel_rate=rate == "kernel", per_tensor=tensor).time_s / meas - 1.0
                parts = [_stats(e[sel]) for sel in (m == 1, (m > 1) & (m <= 512), m >= 1024)]
                lines.append(f"{name:6} {fam:10} {rate:6} | " + " | ".join(f"{p:28}" for p in parts))
    return "\n".join(lines)


def engine_table_errors(folder: Path) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    """Per family of an engine table: the check half's relative errors (predicted / measured - 1) with the
    device's profile, under ``all``, ``decode`` (M <= 512), ``middle`` and ``prefill`` (M >= 4096)."""
    manifest, cols = FE.read(folder)
    dev = default_registry().device(str(manifest.get("device")))
    prof = load_profile(dev)
    out: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
    checked = ~FE.fit_half(cols)
    for fam in FE.FAMILIES:
        sel = (cols["dtype"] == fam) & (cols["m"] <= FE.MAX_M)
        check = checked[sel]
        if not check.any():
            continue
        m, n, k, y = (cols[c][sel][check] for c in ("m", "n", "k", "time_s"))
        dtype = gemm_element_dtype(fam)
        gemm = C.gemm(dev, prof, m, n, k, dtype, l2_reuse=False, per_tensor=fam == FP8_TENSOR).time_s
        e = (gemm + FE.quantize_time(dev, prof, fam, m, k)) / y - 1.0
        out[fam] = {"all": e, "decode": e[m <= 512], "middle": e[(m > 512) & (m < 4096)], "prefill": e[m >= 4096]}
    return out


def engine_tables(traces: Path = TRACES) -> list[Path]:
    """The engine GEMM collections under ``traces`` (``simcore calibrate --import-aiconfigurator`` folders)."""
    return sorted(p.parent for p in traces.glob("*/*/" + FE.MANIFEST) if FE.is_collection(p.parent))


def tables_report(folders: list[Path]) -> str:
    lines = [f"{'table':26} {'family':10} | {'all':28} | {'M <= 512':28} | {'512 < M < 4096':28} | {'M >= 4096':28}"]
    for f in folders:
        for fam, parts in engine_table_errors(f).items():
            label = f"{f.parent.name}/{f.name}"
            lines.append(f"{label:26} {fam:10} | " + " | ".join(f"{_stats(parts[p]):28}" for p in ("all", "decode", "middle", "prefill")))
    return "\n".join(lines)
