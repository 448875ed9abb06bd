"""Fit the GEMM model to a serving engine's measured linear layers on one GPU and write
``hardware_specs/calibration/gemm-<device>.yaml`` (:class:`~simcore.specs.profile.EngineGemm`).

The collection (:func:`import_aiconfigurator`, ``simcore calibrate --import-aiconfigurator``: ``engine_gemm.json``
beside ``gemm.csv.gz``) holds the device time of one linear-layer forward per ``(family, m, n, k)``, replayed in a
CUDA graph with weights that left the L2. A quantized linear (``fp8_tensor``, ``fp4``) runs the input's quantize kernel first; serving steps price that
kernel as an op of its own (:func:`simcore.workload.lowering.activation_quantize_fwd`: a memory-bound ``cast`` of
``m x k`` 16-bit elements into the GEMM's format), so the GEMM is fitted on the table's time less that priced
cast (the kernel's own time: the graph's per-kernel floor a step also applies, about a microsecond more at decode
sizes, stays in the GEMM's ``t0``), with the profile the device has without the table (docs/compute.md,
"Blackwell's GEMMs from engine tables").

Fit: :func:`simcore.compute.kernels.gemm_time` with operands from HBM (no L2 reuse) over the family's rows with
``m <= 16384``, the deterministic 70 / 30 shape split of the op sweeps (:func:`~simcore.calibration.fit_compute.is_fit_row`);
``eff_peak``, ``k_overhead``, ``load_cost``, ``eff_bw``, ``sharpness`` and ``t0`` fitted by the bounded
least squares of :mod:`~simcore.calibration.fit_compute` on log-time residuals, the others kept from the
starting profile's family. The check half's errors go to ``fit_report``; ``simcore calibrate
traces/b200/trtllm_gemm`` runs it.
"""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from simcore.calibration import fit_compute as FC
from simcore.compute import kernels as K
from simcore.compute.ops import gemm_out_bytes, memory_op
from simcore.errors import SpecError
from simcore.specs.hardware import DTYPE_BYTES, Device
from simcore.specs.loader import manifest_field
from simcore.specs.profile import (
    FP8_TENSOR,
    ComputeProfile,
    EngineGemm,
    GemmParams,
    gemm_element_dtype,
    load_profile,
)
from simcore.specs.registry import default_registry
from simcore.workload.lowering import quantize_input_args

MANIFEST = "engine_gemm.json"
TABLE = "gemm.csv.gz"
FAMILIES = ("bf16", FP8_TENSOR, "fp4")
"""The GEMM families an engine table can hold."""
MAX_M = 16384
"""Rows above this many tokens are left out (no serving step runs them)."""
MAX_FIT_ROWS = 6000
"""At most this many fit rows per family (evenly spaced over the fit half, in table order): the fit's cost."""
FITTED = ("eff_peak", "k_overhead", "load_cost", "eff_bw", "sharpness", "t0")
"""The parameters fitted, within the op sweeps' bounds (:data:`simcore.calibration.fit_compute.GEMM_PARAMS`)."""


AIC_DTYPES = {"bfloat16": "bf16", "fp8": FP8_TENSOR, "nvfp4": "fp4"}
"""AIConfigurator's ``gemm_dtype`` -> simcore's GEMM family (``fp8`` there is ``QuantAlgo.FP8``: per-tensor scales,
cuBLASLt's per-tensor kernel)."""
AIC_SYSTEMS = {"b200_sxm": "b200", "gb200": "gb200", "b300_sxm": "b300", "gb300": "gb300", "h100_sxm": "h100",
               "h200_sxm": "h200"}  # fmt: skip
"""AIConfigurator's system folders -> simcore's devices."""
AIC_DATA = "aic-core/src/aiconfigurator_core/systems/data"
AIC_TIMED = (
    "one TensorRT-LLM Linear forward (collector/trtllm/collect_gemm.py) on a bf16 input: FP8 (QuantAlgo.FP8, per-tensor) "
    "and NVFP4 linears quantize the input in a kernel of their own before the GEMM; replayed in a CUDA graph "
    "(helper.benchmark_with_power: 3 warm-ups, 6 replays), weights rotated through copies that exceed the L2; "
    "latency per linear"
)


def import_aiconfigurator(repo: str | Path, system: str, version: str, out: str | Path, commit: str | None = None) -> int:
    """Write a collection (``gemm.csv.gz``: ``dtype,m,n,k,time_s``; ``engine_gemm.json``: where it came from and what
    was timed) from NVIDIA AIConfigurator's TensorRT-LLM GEMM table of ``system`` at ``version``
    (``REPO/aic-core/.../data/<system>/gemm/trtllm/<version>/gemm_perf.parquet``; ai-dynamo/aiconfigurator,
    Apache-2.0). Needs ``pyarrow`` (not a simcore dependency: only this import reads parquet). Returns the rows."""
    if system not in AIC_SYSTEMS:
        raise SpecError(f"unknown AIConfigurator system {system!r} (known: {', '.join(AIC_SYSTEMS)})", field="system")
    rel = f"{AIC_DATA}/{system}/gemm/trtllm/{version}/gemm_perf.parquet"
    src = Path(repo) / rel
    if not src.is_file():
        raise SpecError("no such AIConfigurator GEMM table", file=str(src))
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise SpecError("reading AIConfigurator's parquet tables needs pyarrow (pip install pyarrow)", file=str(src)) from None
    if commit is None:
        run = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
        commit = run.stdout.strip() or None
    table = pq.read_table(src).to_pylist()
    rows = sorted(
        (AIC_DTYPES[r["gemm_dtype"]], int(r["m"]), int(r["n"]), int(r["k"]), float(r["latency"]) * 1e-3)
        for r in table
        if r["gemm_dtype"] in AIC_DTYPES and r["latency"] and r["latency"] > 0
    )
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / TABLE, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["dtype", "m", "n", "k", "time_s"])
        w.writerows((d, m, n, k, f"{s:.6g}") for d, m, n, k, s in rows)
    manifest = {
        "kind": "engine_gemm",
        "engine": "tensorrt-llm",
        "engine_version": version,
        "device": AIC_SYSTEMS[system],
        "device_name": sorted({str(r["device"]) for r in table}),
        "source": {"repository": "ai-dynamo/aiconfigurator", "commit": commit, "path": rel, "license": "Apache-2.0"},
        "timed": AIC_TIMED,
        "dtypes": {v: k for k, v in AIC_DTYPES.items()},
        "rows": len(rows),
        "imported_by": "simcore calibrate --import-aiconfigurator",
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return len(rows)


def is_collection(path: str | Path) -> bool:
    """Whether ``path`` is an engine GEMM collection (its manifest says kind ``engine_gemm``)."""
    return bool(manifest_field(Path(path) / MANIFEST, "kind") == "engine_gemm")


def read(folder: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray[Any, Any]]]:
    """The manifest and the table's columns (``dtype`` as strings, ``m, n, k, time_s`` as floats)."""
    folder = Path(folder)
    if manifest_field(folder / MANIFEST, "kind") != "engine_gemm":
        raise SpecError(f"not an engine GEMM collection (no {MANIFEST} of kind engine_gemm)", file=str(folder))
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    try:
        with gzip.open(folder / TABLE, "rt", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, ValueError, EOFError) as e:
        raise SpecError(f"cannot read the table: {e}", file=str(folder / TABLE)) from None
    need = {"dtype", "m", "n", "k", "time_s"}
    if not rows or not need <= set(rows[0]):
        raise SpecError(f"{TABLE} needs the columns {', '.join(sorted(need))}", file=str(folder / TABLE))
    cols: dict[str, np.ndarray[Any, Any]] = {"dtype": np.array([r["dtype"] for r in rows])}
    for c in ("m", "n", "k", "time_s"):
        try:
            cols[c] = np.array([float(r[c]) for r in rows])
        except (TypeError, ValueError):  # a short row reads None
            raise SpecError(f"column {c}: not a number in every row", file=str(folder / TABLE), field=c) from None
    bad = [d for d in set(cols["dtype"].tolist()) if d not in FAMILIES]
    if bad:
        raise SpecError(f"unknown GEMM family {bad[0]!r} (known: {', '.join(FAMILIES)})", file=str(folder / TABLE),
                        field="dtype")  # fmt: skip
    return manifest, cols


def fit_half(cols: dict[str, np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """Which rows of a table (:func:`read`'s columns) the fit sees: the op sweeps' deterministic shape split
    (:func:`~simcore.calibration.fit_compute.is_fit_row` of ``gemm|family|m|n|k``); the others are the check half."""
    keys = (f"gemm|{d}|{m:.6g}|{n:.6g}|{k:.6g}" for d, m, n, k in zip(cols["dtype"], cols["m"], cols["n"], cols["k"], strict=True))
    return np.array([FC.is_fit_row(x) for x in keys], dtype=bool)


def quantize_time(dev: Device, prof: ComputeProfile, family: str, m: Any, k: Any) -> np.ndarray[Any, Any]:
    """Seconds of the input's quantize kernel of a ``family`` linear as a serving step prices it (a ``cast`` of
    ``m x k`` 16-bit elements written in the GEMM's format, operands from HBM); 0 for ``bf16``."""
    m, k = np.asarray(m, dtype=float), np.asarray(k, dtype=float)
    if family == "bf16":
        return np.zeros(np.broadcast(m, k).shape)
    a = quantize_input_args(m * k, gemm_element_dtype(family))
    cost = memory_op(dev, prof, a["name"], a["nbytes"], flops=a["flops"], l2_reuse=False)
    return np.asarray(cost.time_s, dtype=float)


def _predict(hw: K.HW, p: GemmParams, family: str, m: Any, n: Any, k: Any) -> np.ndarray[Any, Any]:
    dtype = gemm_element_dtype(family)
    return np.asarray(K.gemm_time(hw, p, m, n, k, 1.0, DTYPE_BYTES[dtype], gemm_out_bytes(dtype), None).time)


def _errors(pred: np.ndarray[Any, Any], meas: np.ndarray[Any, Any]) -> dict[str, float]:
    e = pred / meas - 1.0
    a = np.abs(e)
    return {"n": int(e.size), "median_abs_err": round(float(np.median(a)), 4),
            "p90_abs_err": round(float(np.percentile(a, 90)), 4), "median_err": round(float(np.median(e)), 4)}  # fmt: skip


def fit(folder: str | Path, device: str | None = None) -> EngineGemm:
    """Fit each family of the collection; starting values and the quantize kernels' prices from the profile
    ``device`` has without an engine table (its transferred profile)."""
    manifest, cols = read(folder)
    reg = default_registry()
    key = device or str(manifest.get("device") or "")
    if key not in reg.devices and device is None:
        raise SpecError(f"{folder}: the manifest names no GPU simcore knows; pass --device", field="device")
    dev = reg.device(key)
    base = without_table(dev)
    is_fit = fit_half(cols)
    gemm: dict[str, GemmParams] = {}
    report: dict[str, Any] = {"held_out": {}, "fit": {}, "start_held_out": {}}
    for fam in FAMILIES:
        sel = (cols["dtype"] == fam) & (cols["m"] <= MAX_M)
        if not sel.any():
            continue
        m, n, k = cols["m"][sel], cols["n"][sel], cols["k"][sel]
        gemm_s = cols["time_s"][sel] - quantize_time(dev, base, fam, m, k)
        ok = gemm_s > 0
        fit_rows = np.flatnonzero(is_fit[sel] & ok)
        if len(fit_rows) > MAX_FIT_ROWS:
            fit_rows = fit_rows[np.unique(np.linspace(0, len(fit_rows) - 1, MAX_FIT_ROWS).astype(int))]
        check = ~is_fit[sel] & ok
        if len(fit_rows) < 20:
            raise SpecError(f"{folder}: {fam}: {len(fit_rows)} rows to fit (need 20)")
        dtype = gemm_element_dtype(fam)
        hw = FC._hw(dev, dtype)
        start = base.gemm_params(dtype, per_tensor=True)
        bounds = {b.name: b for b in FC.GEMM_PARAMS if b.name in FITTED}
        ps = [FC.Param(p, bounds[p].lo, bounds[p].hi, min(max(getattr(start, p), bounds[p].lo * 1.001), bounds[p].hi * 0.999),
                       bounds[p].log) for p in FITTED]  # fmt: skip
        mf, nf, kf, yf = m[fit_rows], n[fit_rows], k[fit_rows], gemm_s[fit_rows]

        def resid(x: np.ndarray[Any, Any], mf: Any = mf, nf: Any = nf, kf: Any = kf, yf: Any = yf,
                  start: GemmParams = start, hw: K.HW = hw, fam: str = fam) -> np.ndarray[Any, Any]:  # fmt: skip
            p = start.model_copy(update=dict(zip(FITTED, (float(v) for v in x), strict=True)))
            return np.asarray(np.log(_predict(hw, p, fam, mf, nf, kf) / yf), dtype=float)

        x, _ = FC.least_squares(resid, ps, max_iter=60)
        p = GemmParams.model_validate({**start.model_dump(), **{a: float(f"{v:.5g}") for a, v in zip(FITTED, x, strict=True)}})
        gemm[fam] = p
        at_bound = [a for a, v in zip(FITTED, x, strict=True)
                    if min(v - bounds[a].lo, bounds[a].hi - v) <= 1e-3 * (bounds[a].hi - bounds[a].lo)]  # fmt: skip
        if at_bound:
            report.setdefault("at_bound", {})[fam] = at_bound
        total = cols["time_s"][sel]
        q = total - gemm_s
        report["held_out"][fam] = _errors(_predict(hw, p, fam, m[check], n[check], k[check]) + q[check], total[check])
        report["fit"][fam] = _errors(_predict(hw, p, fam, mf, nf, kf) + q[fit_rows], total[fit_rows])
        report["start_held_out"][fam] = _errors(_predict(hw, start, fam, m[check], n[check], k[check]) + q[check], total[check])
    src = manifest.get("source") or {}
    folder_s = _repo_relative(Path(folder))
    return EngineGemm(
        device=dev.name,
        engine=str(manifest.get("engine", "")),
        engine_version=str(manifest.get("engine_version", "")),
        source=[folder_s, f"{src.get('repository')}@{str(src.get('commit'))[:12]} {src.get('path')}"],
        gemm=gemm,
        fit_report=report,
    )


def _repo_relative(path: Path) -> str:
    """``path`` relative to the checkout (the parent of ``hardware_specs/``) where it lies inside it."""
    from simcore.specs.registry import builtin_dir

    try:
        return path.resolve().relative_to(builtin_dir().resolve().parent).as_posix()
    except ValueError:
        return path.as_posix()


def without_table(dev: Device) -> ComputeProfile:
    """``dev``'s profile without any engine table (the fit's starting point and its quantize prices)."""
    return load_profile(dev, engine_tables=False)


def to_yaml(eg: EngineGemm) -> str:
    import yaml

    return (
        "# A serving engine's linear layers fitted to the GEMM model (written by simcore.calibration.fit_engine_gemm:\n"
        "# `simcore calibrate traces/<gpu>/<engine>_gemm`).\n"
        + yaml.safe_dump(eg.model_dump(mode="json"), sort_keys=False, width=110)
    )


def summary(eg: EngineGemm) -> str:
    """A few lines: each family's fitted rates and the held-out errors against the profile it replaces."""
    lines = [f"{eg.engine} {eg.engine_version} linear layers on {eg.device} (held out: predicted / measured - 1):"]
    for fam, p in eg.gemm.items():
        h = eg.fit_report.get("held_out", {}).get(fam, {})
        s = eg.fit_report.get("start_held_out", {}).get(fam, {})
        lines.append(
            f"  {fam:10s} eff_peak {p.eff_peak:.2f} eff_bw {p.eff_bw:.2f} t0 {p.t0 * 1e6:.1f} us | n {h.get('n', 0):5d} "
            f"median |err| {h.get('median_abs_err', 0):6.1%} p90 {h.get('p90_abs_err', 0):6.1%} signed "
            f"{h.get('median_err', 0):+6.1%} (transferred: {s.get('median_abs_err', 0):.1%}, {s.get('median_err', 0):+.1%})"
            + (f"; at a bound: {', '.join(b)}" if (b := eg.fit_report.get("at_bound", {}).get(fam)) else "")
        )
    return "\n".join(lines)
