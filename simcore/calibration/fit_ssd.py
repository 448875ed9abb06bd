"""Fit the rates of mamba_ssm's Triton kernels (Mamba-2's SSD scan, decode state update, gated group
RMSNorm) on a ``tools/bench_ssd.py`` collection and write ``hardware_specs/calibration/ssd-<device>.yaml``
(:class:`~simcore.specs.profile.SsdParams`).

The model (docs/compute.md, "Mamba-2 layers and hybrid models"): each kernel of the lowering
(:mod:`simcore.workload.hybrid`) takes ``t0 + bytes / (eff_bw[class] bandwidth) + flops / (eff_mma bf16
peak)``. The observations:

* per-kernel device times of each op's profiled case (``ssd_kernels.csv.gz``), mamba_ssm's kernel names
  mapped to the lowering's ops (:data:`KERNEL_OPS`; PyTorch's glue kernels of the backward are left out
  and reported as their share);
* the graphed decode steps (``graph_s``: device time of one state update);
* the eager calls (``fwd_s``, ``fwd_bwd_s``: back-to-back calls timed by CUDA events), which a slow host
  bounds below some size: an eager call takes ``max(kernels x host_launch, device time + kernels x gap)``,
  ``host_launch`` (host seconds per Triton launch of that benchmark) fitted with the rates. A training
  step's host time is the engine's (the layer's launches overlap the GPU's work), so ``host_launch``
  prices nothing outside this check.

Shape split: within each op the cases, ordered by ``batch x seq x heads``, alternate between fit and
check, the profiled case (the only per-kernel times) in the fit half; the fit minimises the squared log
error over the fit half (coordinate search over each parameter's log), and the check half's errors per
op are the ``fit_report``. ``simcore calibrate traces/h100/ssd`` runs it.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import statistics
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.loader import manifest_field, validate
from simcore.specs.profile import SSD_CLASSES, SsdParams, load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_scenario_dict
from simcore.specs.scenario import MambaSpec, ModelSpec
from simcore.workload import hybrid
from simcore.workload import lowering as L
from simcore.workload.lowering import Layout, Op

SHAPE = ("op", "case", "batch", "seq", "heads", "head_dim", "state", "groups", "chunk", "channels", "width")
OPS = ("scan", "conv1d", "gated_rmsnorm", "state_update")

KERNEL_OPS: dict[str, tuple[str, ...]] = {
    "_chunk_cumsum_fwd_kernel": ("ssm_chunk_cumsum", "ssm_chunk_cumsum_recompute"),
    "_chunk_state_fwd_kernel": ("ssm_chunk_state", "ssm_chunk_state_recompute"),
    "_state_passing_fwd_kernel": ("ssm_state_passing", "ssm_state_passing_recompute"),
    "_bmm_chunk_fwd_kernel": ("ssm_bmm_cb", "ssm_bmm_cb_recompute"),
    "_chunk_scan_fwd_kernel": ("ssm_chunk_scan",),
    "_chunk_scan_bwd_dz_kernel": ("ssm_chunk_scan_bwd_dz",),
    "_chunk_scan_bwd_dstates_kernel": ("ssm_chunk_scan_bwd_dstates",),
    "_state_passing_bwd_kernel": ("ssm_state_passing_bwd",),
    "_chunk_scan_chunk_state_bwd_dx_kernel": ("ssm_chunk_scan_chunk_state_bwd_dx",),
    "_chunk_state_bwd_db_kernel": ("ssm_chunk_state_bwd_db",),
    "_chunk_scan_bwd_dc_kernel": ("ssm_chunk_scan_bwd_dc",),
    "_chunk_scan_bwd_dcb_kernel": ("ssm_chunk_scan_bwd_dcb",),
    "_bmm_chunk_bwd_kernel": ("ssm_bmm_chunk_bwd_db", "ssm_bmm_chunk_bwd_dc"),
    "_chunk_scan_bwd_ddAcs_stable_kernel": ("ssm_chunk_scan_bwd_ddacs",),
    "_chunk_cumsum_bwd_kernel": ("ssm_chunk_cumsum_bwd",),
    "_selective_scan_update_kernel": ("ssm_state_update",),
    "_layer_norm_fwd_1pass_kernel": ("ssm_group_norm",),
    "_layer_norm_bwd_kernel": ("ssm_group_norm_bwd",),
}
"""mamba_ssm's kernel names (as the profiler lists them) and the lowering's ops each one runs."""


# ------------------------------------------------------------------------------------ rows and ops


def _int(row: dict[str, str], k: str, default: int | None = None) -> int:
    v = row.get(k) or ""
    if v == "":
        if default is None:
            raise SpecError(f"row {row.get('case')!r} has no {k}", field=k)
        return default
    return int(float(v))


def row_model(row: dict[str, str]) -> ModelSpec:
    """A hybrid model whose Mamba mixer has the row's per-rank shape (the rest of the model is unused)."""
    raw = resolve_scenario_dict({"model": {"preset": "nemotron-h-8b"}}, default_registry())["model"]
    raw.pop("preset", None)
    m = validate(ModelSpec, raw, None, "model")
    mamba = MambaSpec(
        heads=_int(row, "heads"),
        head_dim=_int(row, "head_dim"),
        state_dim=_int(row, "state"),
        groups=_int(row, "groups"),
        conv_kernel=_int(row, "width", 4),
        chunk_size=_int(row, "chunk", 128),
    )
    return m.model_copy(update={"mamba": mamba})


def _strip(op: Op) -> Op:
    return Op(op.name, op.kind, op.category, {k: v for k, v in op.args.items() if k != "bwd_ops"}, op.count)


def row_ops(row: dict[str, str]) -> tuple[list[Op], list[Op]]:
    """(forward ops, backward ops) of the Mamba layer's lowering that one bench row runs."""
    op = row["op"]
    if op not in OPS:
        raise SpecError(f"row {row.get('case')!r}: unknown op {op!r} (one of {', '.join(OPS)})", field="op")
    m = row_model(row)
    b = _int(row, "batch")
    if op == "state_update":
        lay = Layout(micro_batch=b, seq=1, kv_seq=1)
        return [o for o in hybrid.mamba_decode_fwd(m, lay) if o.name == "ssm_state_update"], []
    lay = Layout(micro_batch=b, seq=_int(row, "seq"))
    if op == "gated_rmsnorm":
        fwd = [hybrid.group_norm(m, lay)]
        return [_strip(fwd[0])], L.backward(fwd)
    conv, *scan = hybrid.ssd_fwd(m, lay)  # (the convolution first, carrying the backward's kernels)
    bwd = list(conv.args["bwd_ops"])
    if op == "conv1d":
        return [_strip(conv)], [o for o in bwd if o.name == "ssm_conv1d_bwd"]
    return [_strip(o) for o in scan], [o for o in bwd if not o.name.startswith("ssm_conv1d")]


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise SpecError(f"{path}: no such file")
    with (gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="")) as fh:
        return list(csv.DictReader(fh))


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a ``bench_ssd.py`` CSV (planned or measured)."""
    p = Path(path)
    rows = read_csv(p)
    missing = [k for k in SHAPE if rows and k not in rows[0]]
    if not rows or missing:
        raise SpecError(f"{p}: not a bench_ssd.py CSV (missing columns: {', '.join(missing) or 'all rows'})")
    return rows


# ------------------------------------------------------------------------------------ observations


@dataclass
class Obs:
    """One measured time and what the model needs to price it."""

    op: str
    case: str
    what: str
    """``fwd``, ``fwd_bwd``, ``graph`` or ``kernel:<name>``."""
    measured: float
    bytes_: dict[str, float]
    """Bytes per kernel class."""
    flops: float
    kernels: float
    eager: bool
    fit: bool = True


def _features(ops: Iterable[Op]) -> tuple[dict[str, float], float, float]:
    by: dict[str, float] = dict.fromkeys(SSD_CLASSES, 0.0)
    fl = n = 0.0
    for o in ops:
        if o.kind != "ssd":
            raise SpecError(f"op {o.name} is not one of mamba_ssm's kernels")
        by[o.args["cls"]] += float(o.args["nbytes"]) * float(o.count)
        fl += float(o.args["flops"]) * float(o.count)
        n += float(o.count)
    return by, fl, n


def _size(r: dict[str, str]) -> float:
    return _int(r, "batch") * _int(r, "seq") * _int(r, "heads")


def observations(folder: str | Path) -> tuple[list[Obs], dict[str, Any]]:
    """The observations of a ``bench_ssd.py`` collection (``ssd.csv.gz``, ``ssd_kernels.csv.gz``,
    ``ssd.manifest.json``), split into fit and check (module docstring); and the manifest. The conv1d
    rows are left out (PyTorch's fallback, not what Megatron-Core runs)."""
    d = Path(folder)
    rows = [r for r in read_rows(d / "ssd.csv.gz") if not r.get("error") and r["op"] != "conv1d"]
    kpath = d / "ssd_kernels.csv.gz"
    krows = read_csv(kpath) if kpath.is_file() else []
    mpath = d / "ssd.manifest.json"
    manifest: dict[str, Any] = json.loads(mpath.read_text()) if mpath.is_file() else {}
    profiled = {r["case"] for r in krows}
    fit_cases: set[str] = set()
    for op in sorted({r["op"] for r in rows}):
        mine = sorted((r for r in rows if r["op"] == op), key=lambda r: (-_size(r), r["case"]))
        prof = [r for r in mine if r["case"] in profiled]
        rest = [r for r in mine if r["case"] not in profiled]
        fit_cases.update(r["case"] for r in prof)
        # alternate by size, the profiled case counting as the first fit one
        start = 1 if prof else 0
        fit_cases.update(r["case"] for i, r in enumerate(rest) if (i + start) % 2 == 0)
    out: list[Obs] = []
    for r in rows:
        fwd, bwd = row_ops(r)
        fit = r["case"] in fit_cases
        for col, ops, eager in (("fwd_s", fwd, True), ("fwd_bwd_s", fwd + bwd, True), ("graph_s", fwd, False)):
            if r.get(col) and ops and (col != "fwd_bwd_s" or bwd):
                by, fl, n = _features(ops)
                out.append(Obs(r["op"], r["case"], col.removesuffix("_s"), float(r[col]), by, fl, n, eager, fit))
        mine_k = [k for k in krows if k["case"] == r["case"] and k["phase"] == "fwd_bwd"] or [
            k for k in krows if k["case"] == r["case"]
        ]
        named = {o.name: o for o in fwd + bwd}
        for k in mine_k:
            ops_k = [named[n] for n in KERNEL_OPS.get(k["kernel"], ()) if n in named]
            if ops_k:
                by, fl, n = _features(ops_k)
                # the scan's kernels of its one profiled case: half by a hash of the kernel's name
                kfit = fit and (r["op"] != "scan" or zlib.crc32(k["kernel"].encode()) % 2 == 1)
                out.append(Obs(r["op"], r["case"], f"kernel:{k['kernel']}", float(k["time_s"]), by, fl, n, False, kfit))
    return out, manifest


def glue_share(folder: str | Path) -> dict[str, float]:
    """Per profiled case and phase: the share of its device time in kernels the model leaves out (PyTorch's
    reductions, copies and fills around mamba_ssm's kernels)."""
    krows = read_csv(Path(folder) / "ssd_kernels.csv.gz")
    tot: dict[str, list[float]] = {}
    for k in krows:
        if k["op"] == "conv1d":  # (PyTorch's fallback: none of it is mamba_ssm's)
            continue
        a = tot.setdefault(f"{k['op']} {k['phase']}", [0.0, 0.0])
        a[0] += float(k["time_s"])
        if k["kernel"] not in KERNEL_OPS:
            a[1] += float(k["time_s"])
    return {key: v[1] / v[0] for key, v in tot.items() if v[0] > 0}


# ----------------------------------------------------------------------------------------- model


PARAMS = ("scan", "state_update", "norm_fwd", "norm_bwd", "eff_mma", "t0", "host_launch")
_BOUNDS = {
    "scan": (0.05, 1.2),
    "state_update": (0.05, 1.2),
    "norm_fwd": (0.05, 1.2),
    "norm_bwd": (0.05, 1.2),
    "eff_mma": (0.005, 1.0),
    "t0": (1e-7, 2e-5),
    "host_launch": (1e-6, 1e-3),
}


def predict_obs(o: Obs, p: dict[str, float], dev: Device, gap: float) -> float:
    """Seconds the model gives an observation (module docstring)."""
    t = sum(b / (p[c] * dev.memory.bandwidth) for c, b in o.bytes_.items() if b > 0)
    t += o.flops / (p["eff_mma"] * dev.peak_flops("bf16")) + o.kernels * p["t0"]
    if not o.eager:
        return t
    return max(o.kernels * p["host_launch"], t + o.kernels * gap)


def _loss(obs: list[Obs], p: dict[str, float], dev: Device, gap: float) -> float:
    return sum(math.log(predict_obs(o, p, dev, gap) / o.measured) ** 2 for o in obs)


DEVICE_PARAMS = PARAMS[:-1]


def fit_params(
    obs: list[Obs], dev: Device, gap: float, keys: tuple[str, ...] = PARAMS, start: dict[str, float] | None = None,
    sweeps: int = 8,
) -> dict[str, float]:
    """The parameters ``keys`` minimising the squared log error over ``obs`` (coordinate search on a log
    grid), the others kept at ``start``."""
    p = start or {"scan": 0.7, "state_update": 0.7, "norm_fwd": 0.7, "norm_bwd": 0.7, "eff_mma": 0.3,
                  "t0": 1e-6, "host_launch": 3e-5}
    for _ in range(sweeps):
        for k in keys:
            lo, hi = _BOUNDS[k]
            grid = np.exp(np.linspace(math.log(lo), math.log(hi), 241))
            losses = [_loss(obs, {**p, k: float(v)}, dev, gap) for v in grid]
            p = {**p, k: float(grid[int(np.argmin(losses))])}
    return p


def _errors(obs: list[Obs], p: dict[str, float], dev: Device, gap: float) -> dict[str, dict[str, Any]]:
    rep: dict[str, list[float]] = {}
    for o in obs:
        key = f"{o.op} {o.what.split(':')[0]}"
        rep.setdefault(key, []).append(predict_obs(o, p, dev, gap) / o.measured - 1.0)
    return {
        k: {
            "n": len(v),
            "median_abs_err": round(statistics.median(abs(e) for e in v), 4),
            "worst_err": round(v[int(np.argmax(np.abs(v)))], 4),
        }
        for k, v in sorted(rep.items())
    }


def fit(folder: str | Path, device: str | None = None) -> SsdParams:
    """Fit :class:`SsdParams` on the fit half of a ``bench_ssd.py`` collection, with the check half's
    errors per op and kind of observation in ``fit_report``."""
    from simcore.workload.replay import match_device_name

    obs, manifest = observations(folder)
    reg = default_registry()
    key = device or match_device_name(str(manifest.get("gpu", "")))
    if key is None:
        raise SpecError(f"{folder}: the manifest names no GPU simcore knows; pass --device", field="device")
    dev = reg.device(key)
    gap = load_profile(dev).gap.get("eager", 0.0)
    train = [o for o in obs if o.fit]
    check = [o for o in obs if not o.fit]
    if not train:
        raise SpecError(f"{folder}: no measured rows to fit")
    # the rates on device times (kernels, graph replays); then the eager bench's host time per launch
    p = fit_params([o for o in train if not o.eager], dev, gap, DEVICE_PARAMS)
    p = fit_params([o for o in train if o.eager], dev, gap, ("host_launch",), start=p, sweeps=1)
    src = Path(folder)
    return SsdParams(
        device=dev.name,
        source=[str(src / "ssd.csv.gz"), str(src / "ssd_kernels.csv.gz")],
        eff_bw={c: round(p[c], 4) for c in SSD_CLASSES},
        eff_mma=round(p["eff_mma"], 4),
        t0=float(f"{p['t0']:.4g}"),
        host_launch=float(f"{p['host_launch']:.4g}"),
        fit_report={
            "split": "within each op, cases by batch x seq x heads alternate fit / check, the profiled case fitting; its "
            "scan kernels split by a hash of their names; rates fitted on device times, host_launch on eager calls",
            "n_fit": len(train),
            "n_check": len(check),
            "fit": _errors(train, p, dev, gap),
            "held_out": _errors(check, p, dev, gap),
            "unmodelled_glue_share": {k: round(v, 3) for k, v in glue_share(folder).items()},
            "mamba_ssm": manifest.get("mamba_ssm"),
            "triton": manifest.get("triton"),
        },
    )


def to_yaml(params: SsdParams) -> str:
    import yaml

    return "# SSD kernel rates (written by simcore.calibration.fit_ssd: `simcore calibrate traces/<gpu>/ssd`).\n" + (
        yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False, width=110)
    )


def summary(params: SsdParams) -> str:
    """A few lines: the fitted rates and the held-out errors per op and kind of observation."""
    bw = ", ".join(f"{c} {v:.0%}" for c, v in params.eff_bw.items())
    lines = [
        f"SSD kernels on {params.device}: HBM bandwidth reached {bw}; scan matmuls {params.eff_mma:.0%} of the "
        f"bf16 peak; t0 {params.t0 * 1e6:.1f} us; eager bench host {params.host_launch * 1e6:.0f} us a launch",
        "held out (predicted / measured - 1):",
    ]
    for k, v in (params.fit_report.get("held_out") or {}).items():
        lines.append(f"  {k:24s} n {v['n']:2d}  median |err| {v['median_abs_err']:6.1%}  worst {v['worst_err']:+7.1%}")
    return "\n".join(lines)


def is_collection(path: str | Path) -> bool:
    """Whether ``path`` is a ``bench_ssd.py`` collection folder (its manifest says suite ``ssd``)."""
    return bool(manifest_field(Path(path) / "ssd.manifest.json", "suite") == "ssd")
