"""Fit a compute calibration profile from op micro-benchmarks.

Input: one or more CSV files (optionally gzip-compressed) with columns
``kind,dtype,m,n,k,batch,heads,kv_heads,seq,kv_seq,head_dim,causal,backward,name,bytes,time_s,flops,framework``
(see ``traces/README.md``). ``kind`` is ``gemm``, ``attention``, ``optimizer``, ``launch`` or a
memory-bound op (``elementwise``/``memory``/``norm`` with ``name``, or the op name itself).

The measurements are split deterministically by a hash of each row's shape: 70 % fit the
parameters, 30 % only check them; the report gives the median and worst |relative error| per op
family on the check part. Fitting is Levenberg-Marquardt on log time (numpy only), with box
bounds through a logistic transform and a few starting points.

Run ``python -m simcore.validation kernels traces/h200/ops.csv.gz -o hardware_specs/calibration/h200.yaml``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.calibration.fit_host import fit_host, host_files_beside
from simcore.compute import kernels as K
from simcore.errors import SimcoreError, TraceError
from simcore.specs.hardware import DTYPE_BYTES, Device
from simcore.specs.profile import (
    ATTENTION_BACKENDS,
    EMBEDDING_BWD_ELEMENT_BYTES,
    FP8_TENSOR,
    GEMM_ROW_NAMES,
    ONE_QUERY_ATTENTION,
    ONE_QUERY_ODD_ATTENTION,
    AttentionParams,
    ComputeProfile,
    EmbeddingBackwardParams,
    GemmParams,
    HardwareRef,
    MemoryOpParams,
    MemoryParams,
    OptimizerParams,
    backend_of_name,
    gemm_element_dtype,
    gemm_family,
    load_profile,
    one_query_call,
    one_query_family,
)

F = NDArray[np.float64]
FIT_FRACTION = 0.7
GEMM_DTYPES = ("bf16", "fp16", "fp8", FP8_TENSOR, "tf32", "fp32")
"""The GEMM families fitted (the dtype column, or the family of a row named in ``GEMM_ROW_NAMES``)."""
_MEMORY_KINDS = {"elementwise", "memory", "norm", "softmax", "copy", "reduction", "memory_op", "bandwidth"}


# ---------------------------------------------------------------------------------------------
# reading


@dataclass
class Table:
    """Columns of an ops CSV as numpy arrays (floats; NaN where empty) and string lists."""

    kind: list[str]
    dtype: list[str]
    name: list[str]
    framework: list[str]
    num: dict[str, F]
    source: list[str]

    def __len__(self) -> int:
        return len(self.kind)

    def take(self, idx: NDArray[np.int64]) -> Table:
        il = idx.tolist()
        return Table(
            [self.kind[i] for i in il],
            [self.dtype[i] for i in il],
            [self.name[i] for i in il],
            [self.framework[i] for i in il],
            {k: v[idx] for k, v in self.num.items()},
            [self.source[i] for i in il],
        )


_NUM_COLS = (
    "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal", "backward",
    "bytes", "time_s", "flops", "params", "cold",
)  # fmt: skip


def _float(v: str | None) -> float:
    if v is None:
        return math.nan
    v = v.strip()
    if v == "":
        return math.nan
    low = v.lower()
    if low in ("true", "yes"):
        return 1.0
    if low in ("false", "no"):
        return 0.0
    try:
        return float(v)
    except ValueError:
        return math.nan


def file_clock(path: str | Path, gpu: int = 0) -> float | None:
    """SM clock (Hz) a measurement file ran at, from its ``nvidia-smi dmon`` sidecar
    (``cold.csv.gz`` -> ``cold.dmon.txt``): the median ``pclk`` of GPU ``gpu``'s samples with the
    SMs busy (any utilisation: short decode kernels leave the SMs mostly idle between them);
    ``None`` without a sidecar (the file then runs at the sweep clocks of :func:`sweep_clock_power`)."""
    path = Path(path)
    stem = path.name.removesuffix(".gz").removesuffix(".csv")
    side = path.with_name(f"{stem}.dmon.txt")
    if not side.is_file():
        return None
    clocks = [c for _, sm, c, _ in dmon_samples(side, gpu) if sm > 0]
    return float(np.median(clocks)) if clocks else None


EMBEDDING_KERNEL_COLS = {"op", "tokens", "hidden", "vocab", "sort_s", "segment_s", "other_s"}


def _csv_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceError(f"cannot read: {e}", file=str(path)) from None
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")


def is_embedding_kernels_csv(path: str | Path) -> bool:
    """Whether ``path`` holds embedding-backward kernel groups (``tools/bench_embedding_bwd.py``'s CSV)."""
    try:
        first = _csv_text(Path(path)).split("\n", 1)[0]
    except (TraceError, UnicodeDecodeError, EOFError, OSError):
        return False
    return {c.strip() for c in first.split(",")} >= EMBEDDING_KERNEL_COLS


def fit_embedding_backward(
    paths: Sequence[str | Path], device: Device, fraction: float = FIT_FRACTION
) -> tuple[EmbeddingBackwardParams, dict[str, Any]]:
    """:class:`EmbeddingBackwardParams` from kernel-group rows (``tools/bench_embedding_bwd.py``): the
    kernels a trace classifies as the embedding's backward (sort, segment sums, the rest; not the
    table's fill nor cub's memsets), least squares in relative error on the fit part (a hash of each
    shape, as the op sweeps), per path (direct below ``direct_max_tokens`` tokens, sorting above).
    Returns the parameters and the held-out errors."""
    recs: list[tuple[float, float, float, bool]] = []
    for p in paths:
        for r in csv.DictReader(io.StringIO(_csv_text(Path(p)))):
            try:
                n_tok, n_hid = float(r["tokens"]), float(r["hidden"])
                secs = float(r["sort_s"]) + float(r["segment_s"]) + float(r["other_s"])
            except (KeyError, ValueError):
                raise TraceError("an embedding kernel row without numbers", file=str(p)) from None
            key = f"embedding_bwd|{r.get('dtype', '')}|{n_tok:g}|{n_hid:g}|{r.get('vocab', '')}"
            recs.append((n_tok, n_hid, secs, _hash01(key) < fraction))
    if not recs:
        raise TraceError("no embedding kernel rows", file=", ".join(str(p) for p in paths))
    tok = np.array([r[0] for r in recs], dtype=np.float64)
    hid = np.array([r[1] for r in recs], dtype=np.float64)
    y = np.array([r[2] for r in recs], dtype=np.float64)
    fit = np.array([r[3] for r in recs], dtype=bool)
    per_elt = EMBEDDING_BWD_ELEMENT_BYTES / device.memory.bandwidth
    limit = EmbeddingBackwardParams.model_fields["direct_max_tokens"].default
    direct = tok <= limit
    cols = {
        "direct": np.stack([tok, tok * hid * per_elt], 1),
        "sorted": np.stack([np.ones_like(tok), tok * hid * per_elt], 1),
    }
    coef: dict[str, NDArray[np.float64]] = {}
    report: dict[str, Any] = {}
    pred = np.zeros_like(y)
    for path, mask in (("direct", direct), ("sorted", ~direct)):
        sel = mask & fit & (y > 0)
        if np.sum(sel) < 2:
            raise TraceError(f"too few embedding kernel rows on the {path} path to fit", file=str(paths[0]))
        x = cols[path]
        c, *_ = np.linalg.lstsq(x[sel] / y[sel, None], np.ones(int(np.sum(sel)), dtype=np.float64), rcond=None)
        coef[path] = np.maximum(c, 1e-12)
        pred[mask] = x[mask] @ coef[path]
    for part, m in (("check", ~fit), ("fit", fit)):
        report[part] = _errors(pred[m & (y > 0)], y[m & (y > 0)])
    params = EmbeddingBackwardParams(
        direct_per_token=float(coef["direct"][0]),
        direct_eff=float(1.0 / coef["direct"][1]),
        sorted_t0=float(coef["sorted"][0]),
        sorted_eff=float(1.0 / coef["sorted"][1]),
    )
    return params, report


def read_ops(paths: Iterable[str | Path]) -> Table:
    """Read one or more ops CSV files (``.csv`` or ``.csv.gz``) into a :class:`Table`.

    Column ``clock`` (Hz) is the file's SM clock from its dmon sidecar (:func:`file_clock`), NaN
    when unknown; ``cold`` (1 = operands read from HBM, not L2) is 0 when the file lacks it."""
    rows: list[dict[str, str]] = []
    src: list[str] = []
    clk: list[float] = []
    for p in paths:
        path = Path(p)
        reader = csv.DictReader(io.StringIO(_csv_text(path)))
        if reader.fieldnames is None or "time_s" not in reader.fieldnames or "kind" not in reader.fieldnames:
            raise TraceError("not an ops CSV (needs columns kind and time_s)", file=str(path))
        fc = file_clock(path)
        for r in reader:
            rows.append(r)
            src.append(str(path))
            clk.append(math.nan if fc is None else fc)
    num = {c: np.array([_float(r.get(c)) for r in rows], dtype=np.float64) for c in _NUM_COLS}
    num["cold"] = np.nan_to_num(num["cold"], nan=0.0)
    num["clock"] = np.array(clk, dtype=np.float64)
    names = [(r.get("name") or "").strip().lower() for r in rows]
    return Table(
        [(r.get("kind") or "").strip().lower() for r in rows],
        # a GEMM row's dtype column names its family (per-tensor FP8 rows: ``fp8_tensor``)
        [GEMM_ROW_NAMES.get(nm, (r.get("dtype") or "").strip().lower()) for r, nm in zip(rows, names, strict=True)],
        names,
        [(r.get("framework") or "").strip().lower() for r in rows],
        num,
        src,
    )


def shape_key(t: Table, i: int) -> str:
    """A string naming the shape of row ``i`` (used for the deterministic fit/check split)."""
    parts = [t.kind[i], t.dtype[i], t.name[i]]
    for c in (
        "m",
        "n",
        "k",
        "batch",
        "heads",
        "kv_heads",
        "seq",
        "kv_seq",
        "head_dim",
        "causal",
        "backward",
        "bytes",
        "params",
    ):
        v = t.num[c][i]
        parts.append("" if math.isnan(v) else f"{v:.6g}")
    return "|".join(parts)


def _hash01(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64


def split_rows(t: Table, fam: NDArray[Any], fraction: float = FIT_FRACTION) -> NDArray[np.bool_]:
    """Deterministic fit/check split, stratified: within each group (family and dtype or op
    name) the distinct shapes are ranked by a hash of their shape and the first ``fraction`` of
    them fit; repeated measurements of one shape stay on one side."""
    keys = [shape_key(t, i) for i in range(len(t))]
    groups: dict[str, set[str]] = {}
    # cuDNN's one-query kernel: families of their own (even and odd slot counts), split on their own
    one = np.where(one_query_rows(t, fam), one_query_family(t.num["kv_seq"]), "")
    for i, k in enumerate(keys):
        g = f"{fam[i]}|{t.dtype[i]}|{t.name[i] if fam[i] != 'gemm' else ''}{'|' + one[i] if one[i] else ''}"
        groups.setdefault(g, set()).add(k)
    fit_keys: set[str] = set()
    for shapes in groups.values():
        ranked = sorted(shapes, key=_hash01)
        fit_keys.update(ranked[: max(1, math.ceil(fraction * len(ranked)))] if len(ranked) > 1 else ranked)
    return np.array([k in fit_keys for k in keys])


def is_fit_row(key: str, fraction: float = FIT_FRACTION) -> bool:
    """Deterministic split: the same shape always lands on the same side."""
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return (h % 10_000) < fraction * 10_000


# ---------------------------------------------------------------------------------------------
# SM clocks during the sweeps (nvidia-smi dmon + the benchmark's log)

_SECTION_FAMILY = {"gemm": "gemm", "attention": "attention", "memory": "memory"}


def _hms(text: str) -> int | None:
    parts = text.strip().split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    h, m, sec = (int(p) for p in parts)
    return h * 3600 + m * 60 + sec


def sweep_clocks(
    dmon: str | Path, log: str | Path, gpu: int = 0, min_sm_pct: float = 50.0
) -> dict[str, float]:
    """Median SM clock (Hz) of GPU ``gpu`` while each section of ``tools/bench_ops.py`` ran."""
    return {k: v[0] for k, v in sweep_clock_power(dmon, log, gpu, min_sm_pct).items() if k != "idle"}


def dmon_samples(dmon: str | Path, gpu: int = 0) -> list[tuple[int | None, float, float, float]]:
    """``(time of day in s or None, SM %, SM clock in Hz, board W)`` of GPU ``gpu`` per sample of an
    ``nvidia-smi dmon -s pucm`` file (with or without its ``-o T`` time column)."""
    out: list[tuple[int | None, float, float, float]] = []
    header: list[str] = []
    try:
        text = Path(dmon).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise TraceError(f"cannot read: {e}", file=str(dmon)) from None
    for line in text.splitlines():
        if line.startswith("#"):
            if not header and "pclk" in line:
                header = line.lstrip("#").split()
            continue
        parts = line.split()
        if not header or len(parts) != len(header):
            continue
        try:
            if int(parts[header.index("gpu")]) != gpu:
                continue
            t = _hms(parts[0]) if header[0].lower() == "time" else None
            out.append(
                (
                    t,
                    float(parts[header.index("sm")]),
                    float(parts[header.index("pclk")]) * 1e6,
                    float(parts[header.index("pwr")]),
                )
            )
        except ValueError:
            continue
    return out


def sweep_clock_power(
    dmon: str | Path, log: str | Path, gpu: int = 0, min_sm_pct: float = 50.0
) -> dict[str, tuple[float, float]]:
    """(median SM clock in Hz, median board power in W) of GPU ``gpu`` per section of
    ``tools/bench_ops.py``, plus ``"idle"``: the lowest power seen with the SMs idle.

    ``log`` is the benchmark's log (lines ``HH:MM:SS == gemm ...``, ending ``HH:MM:SS done``);
    ``dmon`` is ``nvidia-smi dmon -s pucm`` output (columns time, gpu, pwr, ..., sm, ..., pclk).
    Samples with SM utilisation below ``min_sm_pct`` are ignored (idle moments between points).
    """
    marks: list[tuple[int, str]] = []
    for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 2 and _hms(parts[0]) is not None:
            if parts[1] == "==" and len(parts) >= 3:
                marks.append((_hms(parts[0]) or 0, parts[2]))
            elif parts[1].startswith("done"):
                marks.append((_hms(parts[0]) or 0, "done"))
    samples = [(t, sm, c, w) for t, sm, c, w in dmon_samples(dmon, gpu) if t is not None]
    out: dict[str, tuple[float, float]] = {}
    for (t0, name), (t1, _) in zip(marks, marks[1:], strict=False):
        fam = _SECTION_FAMILY.get(name)
        if fam is None:
            continue
        sel = [(c, w) for t, sm, c, w in samples if t0 < t <= t1 and sm >= min_sm_pct]
        if sel:
            out[fam] = (float(np.median([c for c, _ in sel])), float(np.median([w for _, w in sel])))
    idle = [(c, w) for _, sm, c, w in samples if sm == 0]
    if idle:
        out["idle"] = (float(np.median([c for c, _ in idle])), float(min(w for _, w in idle)))
    return out


def window_power(
    dmon: str | Path, log: str | Path, keep: Callable[[str], bool], gpu: int = 0
) -> float | None:
    """Median board power (W) of the ops ``keep`` selects among a power run's windows: ``tools/bench_mem_power.py``
    runs each op back to back for seconds between ``HH:MM:SS START <op> ...`` and ``... END <op>`` log
    lines; the median of each op's ``dmon`` samples (its first second dropped), then the median over
    the selected ops. ``None`` when the files show no such window."""
    starts: dict[str, int] = {}
    windows: list[tuple[str, int, int]] = []
    for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("START", "END") and _hms(parts[0]) is not None:
            t = _hms(parts[0]) or 0
            if parts[1] == "START":
                starts[parts[2]] = t
            elif parts[2] in starts:
                windows.append((parts[2], starts[parts[2]], t))
    samples = [(t, w) for t, _sm, _c, w in dmon_samples(dmon, gpu) if t is not None]
    per_op = []
    for name, t0, t1 in windows:
        if not keep(name):
            continue
        sel = [w for t, w in samples if t0 + 1 <= t < t1]
        if sel:
            per_op.append(float(np.median(sel)))
    return float(np.median(per_op)) if per_op else None


def streaming_memory_power(dmon: str | Path, log: str | Path, gpu: int = 0) -> float | None:
    """Median board power (W) of memory-bound kernels streaming from HBM: :func:`window_power`
    over the ops other than ``idle`` and ``gemm*``."""
    return window_power(dmon, log, lambda n: n != "idle" and not n.startswith("gemm"), gpu)


# ---------------------------------------------------------------------------------------------
# a small bounded Levenberg-Marquardt (numpy only)


@dataclass(frozen=True)
class Param:
    name: str
    lo: float
    hi: float
    init: float
    log: bool = False
    """Search in log space between the bounds (for scale-free positive quantities)."""


def _to_x(ps: Sequence[Param], theta: F) -> F:
    s = 1.0 / (1.0 + np.exp(-theta))
    out = np.empty(len(ps))
    for i, p in enumerate(ps):
        if p.log:
            out[i] = math.exp(math.log(p.lo) + (math.log(p.hi) - math.log(p.lo)) * s[i])
        else:
            out[i] = p.lo + (p.hi - p.lo) * s[i]
    return out


def _to_theta(ps: Sequence[Param], x: Sequence[float]) -> F:
    out = np.empty(len(ps))
    for i, p in enumerate(ps):
        if p.log:
            u = (math.log(x[i]) - math.log(p.lo)) / (math.log(p.hi) - math.log(p.lo))
        else:
            u = (x[i] - p.lo) / (p.hi - p.lo)
        u = min(max(u, 1e-6), 1 - 1e-6)
        out[i] = math.log(u / (1 - u))
    return out


def least_squares(
    resid: Callable[[F], F],
    ps: Sequence[Param],
    starts: Sequence[Sequence[float]] | None = None,
    max_iter: int = 60,
    huber: float = 0.15,
    prior: float = 0.01,
) -> tuple[F, float]:
    """Minimise the (Huber-weighted) sum of squared residuals over bounded parameters.

    ``resid(x)`` returns the residual vector (log-time errors); ``prior`` weighs a pull of the
    (transformed) parameters towards their starting values. Returns the best ``x`` over the
    starting points and its cost.
    """
    starts = list(starts) if starts else [[p.init for p in ps]]
    best_x: F = np.array([p.init for p in ps])
    best_c = math.inf
    for s0 in starts:
        theta = _to_theta(ps, s0)

        theta0 = theta.copy()

        def full_resid(th: F, theta0: F = theta0) -> F:
            # a weak pull towards the start keeps parameters the data cannot see at their defaults
            return np.concatenate([resid(_to_x(ps, th)), prior * (th - theta0)])

        def cost_of(th: F) -> tuple[float, F]:
            r = full_resid(th)
            if not np.all(np.isfinite(r)):
                return math.inf, r
            a = np.abs(r)
            w = np.where(a <= huber, 1.0, huber / np.maximum(a, 1e-300))
            return float(np.sum(w * r * r)), r

        c, r = cost_of(theta)
        lam = 1e-2
        rel = 1.0
        for _ in range(max_iter):
            a = np.abs(r)
            w = np.sqrt(np.where(a <= huber, 1.0, huber / np.maximum(a, 1e-300)))
            jac = np.empty((r.size, theta.size))
            for j in range(theta.size):
                th = theta.copy()
                th[j] += 1e-4
                jac[:, j] = (full_resid(th) - r) / 1e-4
            jw = jac * w[:, None]
            rw = r * w
            g = jw.T @ rw
            hmat = jw.T @ jw
            improved = False
            for _ in range(8):
                step = np.linalg.solve(hmat + lam * (np.diag(np.diag(hmat)) + 1e-9 * np.eye(theta.size)), -g)
                th_new = np.clip(theta + step, -12.0, 12.0)
                c_new, r_new = cost_of(th_new)
                if c_new < c:
                    rel = (c - c_new) / max(c, 1e-300)
                    theta, c, r = th_new, c_new, r_new
                    lam = max(lam / 3.0, 1e-9)
                    improved = True
                    break
                lam *= 4.0
            if not improved or rel < 1e-9:
                break
        if c < best_c:
            best_c, best_x = c, _to_x(ps, theta)
    return best_x, best_c


# ---------------------------------------------------------------------------------------------
# prediction of a table's rows with a profile (vectorised per family)


def _hw(dev: Device, dtype: str) -> K.HW:
    dtype = gemm_element_dtype(dtype)
    return K.HW(
        dev.peak_flops(dtype), dev.memory.bandwidth, dev.sm_count, dev.l2_cache, dev.peak_flops("fp32")
    )


def _row_groups(t: Table, clock_ref: float | None) -> list[tuple[NDArray[np.int64], float, bool]]:
    """Rows grouped by (compute-rate scale, cold): the scale is the row's SM clock over the clock
    the profile's efficiencies refer to (1 when either is unknown); cold rows read HBM."""
    clk = t.num["clock"] if "clock" in t.num else np.full(len(t), np.nan)
    scale = np.where(np.isfinite(clk) & ((clock_ref or 0.0) > 0), clk / (clock_ref or 1.0), 1.0)
    cold = (t.num["cold"] > 0) if "cold" in t.num else np.zeros(len(t), dtype=bool)
    out = []
    for sc in sorted(set(scale.tolist())):
        for c in (False, True):
            idx = np.flatnonzero((scale == sc) & (cold == c))
            if idx.size:
                out.append((idx, float(sc), c))
    return out


def _gemm_pred(
    dev: Device,
    p: GemmParams,
    t: Table,
    dtype: str,
    mp: MemoryParams | None = None,
    clock_ref: float | None = None,
) -> F:
    dtype = gemm_element_dtype(dtype)
    ob = 4.0 if dtype in ("fp32", "tf32") else 2.0
    b = np.nan_to_num(t.num["batch"], nan=1.0)
    b = np.where(b > 0, b, 1.0)
    out = np.empty(len(t))
    hw = _hw(dev, dtype)
    for idx, sc, cold in _row_groups(t, clock_ref):
        out[idx] = K.gemm_time(
            hw._replace(peak=hw.peak * sc), p, t.num["m"][idx], t.num["n"][idx], t.num["k"][idx], b[idx],
            DTYPE_BYTES[dtype], ob, None if cold else mp,
        ).time  # fmt: skip
    return out


def _attn_pred(
    dev: Device,
    p: AttentionParams,
    t: Table,
    dtype: str,
    backward: bool,
    mp: MemoryParams | None = None,
    clock_ref: float | None = None,
) -> F:
    heads = t.num["heads"]
    kvh = np.where(np.isnan(t.num["kv_heads"]) | (t.num["kv_heads"] <= 0), heads, t.num["kv_heads"])
    # K/V expanded to every query head before the kernel ("gqa_repeat" rows): the kernel sees MHA
    repeat = np.array(["repeat" in nm for nm in t.name], dtype=bool)
    kvh = np.where(repeat, heads, kvh)
    skv = np.where(np.isnan(t.num["kv_seq"]) | (t.num["kv_seq"] <= 0), t.num["seq"], t.num["kv_seq"])
    causal = np.nan_to_num(t.num["causal"], nan=0.0)
    b = np.nan_to_num(t.num["batch"], nan=1.0)
    masked, drop = attention_flags(t)
    out = np.empty(len(t))
    hw = _hw(dev, dtype)
    for i, sc, cold in _row_groups(t, clock_ref):
        out[i] = K.attention_time(
            hw._replace(peak=hw.peak * sc), p, b[i], heads[i], t.num["seq"][i], t.num["head_dim"][i],
            causal[i], backward, kvh[i], skv[i], DTYPE_BYTES.get(dtype, 2.0), None if cold else mp,
            masked[i], drop[i],
        ).time  # fmt: skip
    return out


def attention_backend(t: Table) -> NDArray[np.str_]:
    """The fused-attention backend each row timed: ``cudnn`` / ``efficient`` where its name says so
    (``sdpa_cudnn*``, ``sdpa_efficient*`` rows), else ``flash``."""
    return np.array([backend_of_name(nm or "") for nm in t.name])


def attention_row_name(backend: str, mask: bool, dropout: float) -> str:
    """The ``name`` of an attention row of an ops CSV: ``sdpa_<backend>``, ``_mask`` where the call
    passed a mask tensor, ``_drop`` where it had dropout (names read back by
    :func:`attention_backend` and :func:`attention_flags`)."""
    return f"sdpa_{backend}" + ("_mask" if mask else "") + ("_drop" if dropout else "")


def attention_flags(t: Table) -> tuple[F, F]:
    """Per row: 1 where the call passed an explicit mask tensor (``_mask`` in its name), and its
    dropout probability (``_drop``: the sweeps measured 0.1)."""
    names = [nm or "" for nm in t.name]
    return (
        np.array([1.0 if "_mask" in nm else 0.0 for nm in names]),
        np.array([0.1 if "_drop" in nm else 0.0 for nm in names]),
    )


def one_query_rows(t: Table, fam: NDArray[np.str_]) -> NDArray[np.bool_]:
    """Rows of cuDNN's one-query call over a masked cache with its keys and values repeated to every head
    (:data:`~simcore.specs.profile.ONE_QUERY_ATTENTION`'s kernel)."""
    out: NDArray[np.bool_] = (
        (fam == "attention_fwd")
        & (attention_backend(t) == "cudnn")
        & one_query_call(attention_flags(t)[0], t.num["seq"], t.num["kv_heads"], t.num["heads"])
    )
    return out


def _misaligned(t: Table) -> NDArray[np.bool_]:
    e = np.array([DTYPE_BYTES.get(d or "bf16", 2.0) for d in t.dtype])
    out: NDArray[np.bool_] = (np.mod(t.num["k"] * e, 16.0) != 0) | (np.mod(t.num["n"] * e, 16.0) != 0)
    return out


def _opt_params(t: Table) -> F:
    for c in ("params", "n", "m"):
        v = t.num[c]
        if np.all(np.isfinite(v)):
            return v
    return t.num["bytes"] / 28.0


def _opt_bytes(t: Table) -> F:
    b = t.num["bytes"]
    return np.where(np.isfinite(b) & (b > 0), b, 28.0 * _opt_params(t))


def _opt_key(t: Table, i: int) -> str:
    """The profile's optimizer entry a row measures: ``<opt>_<fused|unfused>``, ``_bf16`` appended for
    16-bit parameters without a master copy (their update moves half the bytes at ~0.8x the
    fp32 update's bandwidth, an entry of its own: :func:`simcore.compute.ops.optimizer_step`)."""
    name = t.name[i] or "adamw_fused"
    fused = "unfused" if any(w in name for w in ("unfused", "foreach", "forloop", "nonfused")) else "fused"
    opt = "sgd" if "sgd" in name else "adamw"
    low = "_bf16" if t.dtype[i] in ("bf16", "fp16") else ""
    return f"{opt}_{fused}{low}"


def canonical_memory_name(raw: str) -> str:
    """The simcore op name of a memory-bound op as named in a trace (``layer_norm`` -> ``layernorm``)."""
    from simcore.compute.ops import canonical_op_name

    return canonical_op_name(raw)


def memory_name(t: Table, i: int) -> str:
    """The canonical memory-bound op a row measures (``_bwd`` appended for backward rows; ``_fp32``
    for the fp32 rows of the ops with an fp32 fit of their own: :func:`simcore.compute.ops.dtype_variant`)."""
    from simcore.compute.ops import dtype_variant

    name = canonical_memory_name(t.name[i] or t.kind[i])
    if t.num["backward"][i] == 1 and not name.endswith("_bwd"):
        name += "_bwd"
    return dtype_variant(name, t.dtype[i])


def family_of(t: Table, i: int) -> str:
    """Op family of row ``i``: gemm, attention_fwd/_bwd, memory, memory_bwd, optimizer, launch."""
    k = t.kind[i]
    if k in ("gemm", "matmul"):
        return "gemm"
    if k == "attention":
        return "attention_bwd" if t.num["backward"][i] == 1 else "attention_fwd"
    if k == "optimizer":
        return "optimizer"
    if k == "launch":
        return "launch"
    return "memory_bwd" if memory_name(t, i).endswith("_bwd") else "memory"


ROWWISE = ("softmax", "log_softmax", "layernorm", "rmsnorm", "cross_entropy", "argmax")


def _product_before(
    nm: str, ops: dict[str, MemoryOpParams], mp: MemoryParams, dev: Device, sub: Table
) -> F | float:
    """Seconds of the product kernel PyTorch launches before op ``nm``'s own (``ops.PRODUCT_BEFORE``:
    softmax's backward) in each of its rows, which time both; 0 for other ops (or without the product's fit)."""
    from simcore.compute.ops import PRODUCT_BEFORE

    prod = ops.get(PRODUCT_BEFORE.get(nm, ""))
    if prod is None:
        return 0.0
    # the product reads the gradient and the output and writes their product: the row's bytes
    out: F = K.memory_time(_hw(dev, "fp32"), mp, sub.num["bytes"], 0.0, prod.eff, prod.t0).time
    return out


WIDTH_MIN_BYTES = 16e6
"""Rows of a row-wise op that say its width factor: at least this many bytes (the streaming regime)."""


def _width_factors(sub: Table, y: F, pred: F) -> dict[str, tuple[float, ...]]:
    """``width_knots``, ``width_factors`` (16-bit rows) and ``width_factors_fp32``: the median measured
    over predicted time of a row-wise op's rows of at least :data:`WIDTH_MIN_BYTES` per distinct row
    width (column ``n``), per element size where both sizes were measured at every width (else one
    list for all); nothing where fewer than three widths have such rows (one curve serves them all)."""
    n = sub.num["n"]
    big = np.isfinite(n) & (sub.num["bytes"] >= WIDTH_MIN_BYTES) & (pred > 0)
    widths = sorted(set(n[big].tolist()))
    if len(widths) < 3:
        return {}
    fp32 = _elt(sub) >= 4.0
    r = y / np.where(pred > 0, pred, 1.0)

    def med(sel: NDArray[np.bool_]) -> tuple[float, ...] | None:
        out = []
        for w in widths:
            m = sel & (n == w)
            if not np.any(m):
                return None
            out.append(float(np.median(r[m])))
        return tuple(out)

    f16, f32 = med(big & ~fp32), med(big & fp32)
    out = {"width_knots": tuple(float(w) for w in widths)}
    if f16 is not None and f32 is not None:
        return {**out, "width_factors": f16, "width_factors_fp32": f32}
    return {**out, "width_factors": med(big) or ()}


def _elt(t: Table) -> F:
    """Element size (bytes) of each row's dtype."""
    return np.array([DTYPE_BYTES.get(d or "bf16", 2.0) for d in t.dtype])


def _rows(t: Table, name: str) -> F | None:
    """Row counts of row-wise ops (trace column ``m``), else ``None``."""
    base = name[:-4] if name.endswith("_bwd") else name
    if base not in ROWWISE or not np.all(np.isfinite(t.num["m"])):
        return None
    return t.num["m"]


def _mem_flops(t: Table, names: Sequence[str]) -> F:
    """FLOP of memory rows: the trace's, else simcore's convention from bytes and dtype."""
    from simcore.compute.ops import memory_op_names, memory_op_traffic

    known = set(memory_op_names())
    out = np.nan_to_num(t.num["flops"], nan=-1.0)
    for j, nm in enumerate(names):
        if out[j] >= 0:
            continue
        if nm in known:
            e = DTYPE_BYTES.get(t.dtype[j] or "bf16", 2.0)
            per_b, per_f = memory_op_traffic(nm, 1.0, e)
            out[j] = t.num["bytes"][j] / float(per_b) * float(per_f)
        else:
            out[j] = 0.0
    return out


def _clock_ref(dev: Device, prof: ComputeProfile, family: str) -> float | None:
    """SM clock (Hz) the profile's ``family`` efficiencies refer to (``None`` when unknown)."""
    frac = prof.clock_fraction.get(family)
    return None if frac is None else frac * dev.boost_clock


def kernel_rows(dev: Device, prof: ComputeProfile, t: Table) -> F:
    """Predicted device-side kernel time of every row (seconds; NaN for launch rows)."""
    out = np.full(len(t), np.nan)
    fam = np.array([family_of(t, i) for i in range(len(t))])
    dts = np.array([d or "bf16" for d in t.dtype])
    for dtype in sorted(set(dts)):
        idx = np.flatnonzero((fam == "gemm") & (dts == dtype))
        if idx.size:
            out[idx] = _gemm_pred(
                dev, prof.gemm_params(dtype), t.take(idx), dtype, prof.memory, _clock_ref(dev, prof, "gemm")
            )
        backends = attention_backend(t)
        for bwd in (False, True):
            for be in ATTENTION_BACKENDS:
                sel = (
                    (fam == ("attention_bwd" if bwd else "attention_fwd")) & (dts == dtype) & (backends == be)
                )
                idx = np.flatnonzero(sel)
                if idx.size:
                    out[idx] = _attn_pred(
                        dev, prof.attention_params(bwd, dtype, be), t.take(idx), dtype, bwd, prof.memory,
                        _clock_ref(dev, prof, "attention"),
                    )  # fmt: skip
        one = one_query_rows(t, fam) & (dts == dtype)
        for key in (ONE_QUERY_ATTENTION, ONE_QUERY_ODD_ATTENTION) if ONE_QUERY_ATTENTION in prof.attention else ():
            idx = np.flatnonzero(one & (one_query_family(t.num["kv_seq"]) == key))
            if idx.size:
                out[idx] = _attn_pred(
                    dev, prof.attention.get(key, prof.attention[ONE_QUERY_ATTENTION]), t.take(idx), dtype, False,
                    prof.memory, _clock_ref(dev, prof, "attention"),
                )  # fmt: skip
    hw32 = _hw(dev, "fp32")
    midx = np.flatnonzero((fam == "memory") | (fam == "memory_bwd"))
    if midx.size:
        from simcore.compute.ops import row_width

        names = [memory_name(t, int(i)) for i in midx]
        sub = t.take(midx)
        flops = _mem_flops(sub, names)
        for nm in sorted(set(names)):
            j = np.flatnonzero(np.array(names) == nm)
            op = prof.memory.ops.get(nm)
            share = op.row_share if op else None
            rows = _rows(sub.take(j), nm)
            elt = _elt(sub.take(j))
            # (as ops.memory_op: the width factor wherever the row count is known)
            wf = (
                op.width_factor(row_width(nm, sub.num["bytes"][j], rows, elt), elt)
                if op and rows is not None
                else 1.0
            )
            rows = rows if share else None
            out[midx[j]] = K.memory_time(
                hw32, prof.memory, sub.num["bytes"][j], flops[j], op.eff if op else 1.0, op.t0 if op else None,
                rows, share, True, elt, wf,
            ).time + _product_before(nm, prof.memory.ops, prof.memory, dev, sub.take(j))  # fmt: skip
    oidx = np.flatnonzero(fam == "optimizer")
    if oidx.size:
        sub = t.take(oidx)
        keys = np.array([_opt_key(t, int(i)) for i in oidx])
        params, nbytes = _opt_params(sub), _opt_bytes(sub)
        for key in sorted(set(keys)):
            j = np.flatnonzero(keys == key)
            oz = prof.optimizer.get(key) or prof.optimizer["adamw_fused"]
            out[oidx[j]] = K.memory_time(
                hw32, prof.memory, nbytes[j] * oz.traffic, 16.0 * params[j], 1.0, oz.t0
            ).time
    return out


def floor_rows(prof: ComputeProfile, t: Table) -> F:
    """Host-side floor of every row's measured time (seconds): eager rows wait for the op's host
    dispatch, CUDA-graph rows for the per-kernel graph floor, kernel-only rows for nothing."""
    out = np.zeros(len(t))
    backends = attention_backend(t)
    for i in range(len(t)):
        fw = t.framework[i]
        fam = family_of(t, i)
        if fam == "launch":
            continue
        if fw == "eager":
            host = None
            if fam.startswith("attention") and backends[i] != "flash":
                host = prof.host_overhead.get(f"{fam}_{backends[i]}")
            if fam in ("memory", "memory_bwd"):
                op = prof.memory.ops.get(memory_name(t, i))
                host = op.host if op is not None else None
            elif fam == "optimizer":
                oz = prof.optimizer.get(_opt_key(t, i))
                host = oz.host if oz is not None else None
            out[i] = host if host is not None else prof.host_overhead.get(fam, prof.launch.get("eager", 0.0))
        elif fw in prof.launch:
            out[i] = prof.launch[fw]
    return out


def gap_rows(prof: ComputeProfile, t: Table) -> F:
    """Device idle time between back-to-back launches for every row's framework (seconds)."""
    return np.array([prof.gap.get(f, 0.0) if f else 0.0 for f in t.framework])


def _observed(kernel: F, floor: F, mode: str, gap: F | float = 0.0) -> F:
    out: F = np.maximum(kernel + gap, floor) if mode == "max" else kernel + floor
    return out


def predict_rows(dev: Device, prof: ComputeProfile, t: Table) -> F:
    """Predicted measured time of every row of ``t`` under ``prof`` (seconds; NaN for launch rows)."""
    return _observed(kernel_rows(dev, prof, t), floor_rows(prof, t), prof.launch_mode, gap_rows(prof, t))


def estimate_gap(t: Table, launch_eager: float) -> float | None:
    """Median extra time of an eager call over the same op in a CUDA graph, where the kernel is
    long enough that the host is not the bottleneck (seconds); ``None`` without such pairs. Calls
    that launch several kernels (cuDNN's attention: memsets, a reduction, a conversion) are not one
    launch's gap and are left out."""
    by_shape: dict[str, dict[str, float]] = {}
    backends = attention_backend(t)
    for i in range(len(t)):
        if t.kind[i] == "launch" or not t.framework[i] or backends[i] != "flash":
            continue
        by_shape.setdefault(shape_key(t, i), {})[t.framework[i]] = float(t.num["time_s"][i])
    diffs = [
        v["eager"] - v["cuda_graphs"]
        for v in by_shape.values()
        if "eager" in v and "cuda_graphs" in v and v["cuda_graphs"] > 1.5 * launch_eager
    ]
    if len(diffs) < 3:
        return None
    return max(float(np.median(diffs)), 0.0)


def estimate_graph_gap(t: Table) -> float | None:
    """Median time a kernel replayed in a CUDA graph takes beyond its own duration (seconds): the
    graph-timed sweep rows (``cuda_graphs``, events around a graph of back-to-back copies of the op)
    against the same shapes timed by their kernels' durations (``framework`` empty,
    ``traces/h200/kernel_rates/gemm_kernels.csv.gz``): 0.46 µs on the H200. ``None`` without at least 10 such pairs."""
    by_shape: dict[str, dict[str, float]] = {}
    for i in range(len(t)):
        fw = t.framework[i]
        if t.kind[i] == "launch" or fw not in ("cuda_graphs", "") or t.num["cold"][i] > 0:
            continue
        by_shape.setdefault(shape_key(t, i), {})[fw] = float(t.num["time_s"][i])
    diffs = [v["cuda_graphs"] - v[""] for v in by_shape.values() if "cuda_graphs" in v and "" in v]
    if len(diffs) < 10:
        return None
    return max(float(np.median(diffs)), 0.0)


# ---------------------------------------------------------------------------------------------
# default (provisional) profile


def neutral_profile(dev: Device, note: str | None = None) -> ComputeProfile:
    """A profile of neutral defaults (0.8 of peak, 0.9 of bandwidth), marked provisional.

    Used only until measurements exist; the numbers are round placeholders, not fitted and not
    taken from any published result.
    """
    g = GemmParams(eff_peak=0.8, k_overhead=64.0, load_cost=0.0, eff_bw=0.9, sharpness=4.0, t0=3e-6)
    a_fwd = AttentionParams(
        eff_peak=0.8, head_dim_overhead=0.0, kv_overhead=64.0, eff_bw=0.9, sharpness=4.0, t0=4e-6
    )
    a_bwd = a_fwd.model_copy(update={"block_cols": 64})
    mem = MemoryParams(eff_bw=0.9, t0=3e-6)
    opt = {
        "adamw_fused": OptimizerParams(traffic=1.0, t0=5e-6),
        "adamw_unfused": OptimizerParams(traffic=3.0, t0=50e-6),
        "sgd_fused": OptimizerParams(traffic=1.0, t0=5e-6),
        "sgd_unfused": OptimizerParams(traffic=2.0, t0=20e-6),
    }
    return ComputeProfile(
        device=dev.name,
        source=[],
        provisional=True,
        measured_on=_ref(dev),
        notes=[
            note
            or "PROVISIONAL: neutral defaults (0.8 of dense peak, 0.9 of HBM bandwidth, round kernel "
            "latencies), not fitted on measurements; replace by running fit_compute on traces/<device>/ops.csv.gz"
        ],
        launch={"eager": 8e-6, "cuda_graphs": 1.5e-6, "compiled": 1.5e-6},
        gemm={d: g for d in GEMM_DTYPES},
        attention={"fwd": a_fwd, "bwd": a_bwd},
        memory=mem,
        optimizer=opt,
    )


def _ref(dev: Device) -> HardwareRef:
    return HardwareRef(
        peak={k: float(v) for k, v in dev.peak.items()},
        bandwidth=dev.memory.bandwidth,
        sm_count=dev.sm_count,
        l2_cache=dev.l2_cache,
    )


# ---------------------------------------------------------------------------------------------
# fitting per family

GEMM_PARAMS = (
    Param("eff_peak", 0.05, 1.1, 0.75),
    Param("k_overhead", 0.5, 4096.0, 64.0, log=True),
    Param("load_cost", 0.01, 256.0, 4.0, log=True),
    Param("eff_bw", 0.05, 1.4, 0.8),
    Param("sharpness", 1.0, 12.0, 3.0),
    Param("t0", 1e-7, 5e-5, 3e-6, log=True),
    Param("eff_misaligned", 0.02, 1.0, 0.5),
    Param("cta_bw", 0.2, 8.0, 2.0, log=True),
    Param("split_t0", 1e-8, 2e-5, 1e-6, log=True),
    Param("t0_hbm", 1e-8, 2e-5, 1e-6, log=True),
    Param("skinny_bw", 0.1, 1.0, 0.6),
)
_COLD_GEMM = ("cta_bw", "split_t0", "t0_hbm")
_ATTN_PARAMS = (
    Param("eff_peak", 0.05, 1.1, 0.6),
    Param("head_dim_overhead", 0.1, 1024.0, 16.0, log=True),
    Param("kv_overhead", 0.5, 8192.0, 128.0, log=True),
    Param("eff_bw", 0.05, 1.0, 0.7),  # at most the HBM peak (L2-resident rows get the L2 boost)
    Param("sharpness", 1.0, 12.0, 3.0),
    Param("t0", 1e-7, 2e-4, 4e-6, log=True),
    Param("split_t0", 1e-8, 5e-5, 1e-6, log=True),
    Param("head_dim_scale", 16.0, 1e5, 2000.0, log=True),
    Param("mask_overhead", 0.1, 1024.0, 16.0, log=True),
    Param("dropout_overhead", 0.1, 1024.0, 16.0, log=True),
    Param("odd_cols", 1.0, 4096.0, 128.0, log=True),
)
_ATTN_FLAG_PARAMS = ("mask_overhead", "dropout_overhead", "odd_cols")
"""Fitted only on rows that measured a mask / dropout (the cuDNN rows of ``traces/h200/attention.csv.gz``), ``odd_cols`` only in the odd
one-query family (:data:`~simcore.specs.profile.ONE_QUERY_ODD_ATTENTION`)."""
_MEM_PARAMS = (
    Param("eff_bw", 0.05, 1.4, 0.85),
    Param("t0", 1e-7, 5e-5, 3e-6, log=True),
    Param("l2_speedup", 1.0, 6.0, 1.5),
    Param("l2_fraction", 0.05, 2.0, 0.5),
    Param("eff_compute", 0.01, 1.1, 0.5),
)
_HOST = Param("host", 5e-7, 2e-3, 8e-6, log=True)


def _subset(ps: Sequence[Param], names: Iterable[str], base: Any) -> list[Param]:
    keep = set(names)
    out = []
    for p in ps:
        if p.name in keep:
            v = getattr(base, p.name, None) if base is not None else None
            init = p.init if v is None else float(v)
            out.append(Param(p.name, p.lo, p.hi, min(max(init, p.lo * 1.001), p.hi * 0.999), p.log))
    return out


def _starts(ps: Sequence[Param], n: int = 3) -> list[list[float]]:
    base = [p.init for p in ps]
    out = [base]
    rng = np.random.default_rng(1234)
    for _ in range(n - 1):
        s = []
        for p in ps:
            if p.log:
                v = math.exp(rng.uniform(math.log(p.lo), math.log(p.hi)) * 0.5 + math.log(p.init) * 0.5)
            else:
                v = 0.5 * p.init + 0.5 * rng.uniform(p.lo, p.hi)
            s.append(min(max(v, p.lo * 1.001), p.hi * 0.999))
        out.append(s)
    return out


def _fit_model(
    base: Any,
    ps: Sequence[Param],
    kernel: Callable[[Any], F],
    meas: F,
    eager: NDArray[np.bool_],
    floor: F,
    host: float | None,
    mode: str,
    n_starts: int = 3,
    gap: F | float = 0.0,
) -> tuple[Any, float | None]:
    """Fit ``ps`` of the pydantic object ``base`` (and, when ``host`` is given and rows are eager,
    the eager host time) so that ``observed(kernel(obj), floor)`` matches ``meas`` in log space."""
    names = [p.name for p in ps]
    fit_host = host is not None and bool(np.any(eager))
    all_ps = (
        [*ps, Param(_HOST.name, _HOST.lo, _HOST.hi, min(max(host or _HOST.init, 1e-6), 1e-3), True)]
        if fit_host
        else list(ps)
    )
    logm = np.log(meas)

    def split(x: F) -> tuple[Any, float | None]:
        obj = base.model_copy(update=dict(zip(names, (float(v) for v in x[: len(names)]), strict=True)))
        return obj, (float(x[-1]) if fit_host else None)

    def resid(x: F) -> F:
        obj, h = split(x)
        fl = np.where(eager, h, floor) if h is not None else floor
        return np.log(np.maximum(_observed(kernel(obj), fl, mode, gap), 1e-15)) - logm

    x, _ = least_squares(resid, all_ps, _starts(all_ps, n_starts))
    return split(x)


def power_fractions(power_w: dict[str, float], tdp: float, gemm_stretch: float | None) -> dict[str, float]:
    """Board power per op family as a fraction of the TDP (from the sweeps' ``dmon``). Where GEMMs
    were also timed by their kernels' durations, the GEMM family's entry is the power its kernels
    would draw at that speed: the value at which :func:`simcore.compute.ops.power_cap_time`
    stretches a sustained GEMM stream by the measured ``gemm_stretch``,
    ``1 + (stretch - 1) (1 - idle fraction)``."""
    if tdp <= 0:
        return {}
    out = {k: v / tdp for k, v in power_w.items()}
    if gemm_stretch is not None and "idle" in out:
        out["gemm"] = 1.0 + max(gemm_stretch - 1.0, 0.0) * (1.0 - out["idle"])
    return out


def _beside_kernel_rates(
    paths: Sequence[str | Path], fam: NDArray[Any], fws: NDArray[Any], *names: str
) -> Path | None:
    """The folder of the inputs that holds ``names`` (the power logs, the in-step kernels:
    ``traces/h200/kernel_rates/``), when GEMM kernel-duration rows are fitted; ``None`` otherwise."""
    if not np.any((fam == "gemm") & (fws == "")):
        return None
    for p in paths:
        folder = Path(p).parent
        if all((folder / n).is_file() for n in names):
            return folder
    return None


def kernel_rate_power(paths: Sequence[str | Path], fam: NDArray[Any], fws: NDArray[Any]) -> dict[str, float]:
    """``{"memory": W}`` when GEMM kernel-duration rows are fitted and the folder of such an input
    holds ``mem_power.log`` + ``mem_power.dmon.txt``: a step priced at kernel rates streams
    its memory-bound tensors from HBM, whose draw (~620 W on the H200) is far above the op sweep's
    memory section (335 W, small L2-resident ops); and ``"gemm_fp32"``: the draw of an fp32 GEMM stream
    where the folder holds ``gemm_power.log`` + ``gemm_power.dmon.txt``. Empty otherwise."""
    out: dict[str, float] = {}
    folder = _beside_kernel_rates(paths, fam, fws, "mem_power.log", "mem_power.dmon.txt")
    if folder is not None:
        w = streaming_memory_power(folder / "mem_power.dmon.txt", folder / "mem_power.log")
        if w is not None:
            out["memory"] = w
    folder = _beside_kernel_rates(paths, fam, fws, "gemm_power.log", "gemm_power.dmon.txt")
    if folder is not None:
        # fp32 GEMMs (CUDA-core FFMA) stream below the TDP at full clock (the H200: 664-671 W at
        # 1980 MHz; bf16 / fp16 / tf32 streams hold 690 W at 1455-1620 MHz)
        f32 = window_power(folder / "gemm_power.dmon.txt", folder / "gemm_power.log", fp32_gemm_window)
        if f32 is not None:
            out["gemm_fp32"] = f32
    return out


def fp32_gemm_window(name: str) -> bool:
    """A power run's window of fp32 GEMMs at PyTorch's default precision (``gemm_fp32_<m>x<n>x<k>``; not
    ``gemm_tf32_*``, which runs on the tensor cores)."""
    return name.startswith("gemm_fp32_")


def strided_swiglu_ratios(path: str | Path) -> tuple[float, float] | None:
    """(forward, backward) time of eager SwiGLU on the strided halves of a fused gate/up output over
    the same on contiguous tensors, from an in-step ``insitu.csv.gz`` (rows ``kind=mem``, ``name``
    silu / mul / silu_bwd, ``variant`` strided / contiguous, per ``m x n``): forward SiLU + product,
    backward SiLU's backward + two products (both products read a strided half); medians over the
    sizes. ``None`` without a complete size."""
    t: dict[tuple[str, str, str], float] = {}
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        for r in csv.DictReader(f):
            if r.get("kind") == "mem" and r.get("variant") in ("strided", "contiguous"):
                t[(f"{r['m']}x{r['n']}", r["name"], r["variant"])] = float(r["time_s"])
    fwd, bwd = [], []
    for size in sorted({k[0] for k in t}):
        try:
            g = {
                (n, v): t[(size, n, v)]
                for n in ("silu", "mul", "silu_bwd")
                for v in ("strided", "contiguous")
            }
        except KeyError:
            continue
        fwd.append(
            (g["silu", "strided"] + g["mul", "strided"]) / (g["silu", "contiguous"] + g["mul", "contiguous"])
        )
        s_b = g["silu_bwd", "strided"] + 2 * g["mul", "strided"]
        bwd.append(s_b / (g["silu_bwd", "contiguous"] + 2 * g["mul", "contiguous"]))
    if not fwd:
        return None
    return float(np.median(fwd)), float(np.median(bwd))


def _gemm_kernel_pairs(
    t: Table, fam: NDArray[Any], fws: NDArray[Any]
) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], int], NDArray[np.int64]]:
    """Each row's GEMM shape (dtype, m, n, k, batch), the rows timed by their kernels' own durations
    (``framework`` empty) by shape, and the call-timed GEMM rows (``eager``,
    ``cuda_graphs``); the cold (HBM-read) decode rows are in neither."""
    dts = [d or "bf16" for d in t.dtype]
    batch = np.maximum(np.nan_to_num(t.num["batch"], nan=0.0), 1.0)
    keys = [
        (dts[i], float(t.num["m"][i]), float(t.num["n"][i]), float(t.num["k"][i]), float(batch[i]))
        for i in range(len(t))
    ]
    gemm = (fam == "gemm") & ~(t.num["cold"] > 0)
    kernels = {keys[i]: int(i) for i in np.flatnonzero(gemm & (fws == ""))}
    return keys, kernels, np.flatnonzero(gemm & (fws != ""))


def repeated_kernel_rows(t: Table, fam: NDArray[Any], fws: NDArray[Any]) -> NDArray[np.bool_]:
    """GEMM rows timed by their kernels' own durations of a shape (family, m, n, k, batch) an earlier file
    already times: the first file's timing stands (``traces/h100/kernel_rates_tensorwise`` re-times the op
    sweep's shapes before its per-tensor grid; given after ``kernel_rates_decode``, only its grid enters)."""
    keys, _, _ = _gemm_kernel_pairs(t, fam, fws)
    timed = (fam == "gemm") & ~(t.num["cold"] > 0) & (fws == "")
    first: dict[tuple[Any, ...], str] = {}
    out = np.zeros(len(t), dtype=bool)
    for i in np.flatnonzero(timed):
        out[i] = first.setdefault(keys[i], t.source[i]) != t.source[i]
    return out


def burst_compute_rows(t: Table, fam: NDArray[Any], fws: NDArray[Any], dev: Device) -> NDArray[np.bool_]:
    """Kernel-timed GEMM rows of shapes the op sweep does not time (no call-timed twin: the served models' grid,
    ``kernel_rates_decode``, ``kernel_rates_tensorwise``) that are compute-bound at the datasheet roofline
    (``2 m n k / peak > bytes / bandwidth``). The grid interleaves few-row shapes with large ones, so its 8-call
    bursts ran at the boost clock (H200 ``dmon`` 1935-1980 MHz at 290-490 W while the grid ran, 1215-1695 MHz at
    662-713 W while the sweep's shapes ran just before; the H100 1485-1965 MHz): a compute-bound kernel's time
    scales with the clock, so these rows would price in-step GEMMs under the power cap too fast; a
    bandwidth-bound one's does not (the HBM clock is fixed), and those enter (docs/compute.md, "FP8 GEMMs by
    scaling")."""
    keys, _, called = _gemm_kernel_pairs(t, fam, fws)
    twins = {keys[i] for i in called}
    timed = (fam == "gemm") & ~(t.num["cold"] > 0) & (fws == "")
    out = np.zeros(len(t), dtype=bool)
    for i in np.flatnonzero(timed):
        if keys[i] not in twins:  # the row's own FLOP and bytes columns
            peak = dev.peak_flops(gemm_element_dtype(keys[i][0]))
            out[i] = t.num["flops"][i] / peak > t.num["bytes"][i] / dev.memory.bandwidth
    return out


def superseded_gemm_rows(t: Table, fam: NDArray[Any], fws: NDArray[Any]) -> NDArray[np.bool_]:
    """GEMM rows timed around calls (``eager``, ``cuda_graphs``) of a shape that another file times
    by its kernels' own durations (``framework`` empty, ``traces/h200/kernel_rates/gemm_kernels.csv.gz``).

    On a power-capped H200, CUDA events around back-to-back GEMMs include gaps between the kernels
    (8192x16384x2048: 838 µs per call by events, 718 µs per kernel); inside a training step the same
    kernel takes 711 µs with 1.6 µs gaps (traces/README.md). simcore prices a GEMM as a
    kernel in a step, so where a kernel-duration row exists the call-timed rows of that shape are
    left out of the fit."""
    keys, kernels, called = _gemm_kernel_pairs(t, fam, fws)
    out = np.zeros(len(t), dtype=bool)
    for i in called:
        out[i] = keys[i] in kernels
    return out


def gemm_power_stretch(
    t: Table, fam: NDArray[Any], fws: NDArray[Any], min_kernel_s: float = 100e-6
) -> float | None:
    """Median ratio of a GEMM's back-to-back time per call (CUDA events, ``eager`` rows) to its own
    kernel duration (``framework`` empty), over the shapes measured both ways whose kernel takes at
    least ``min_kernel_s``: how much the power cap stretches a sustained stream of GEMMs (1.16 on
    the H200). ``None`` without such pairs."""
    keys, kernels, called = _gemm_kernel_pairs(t, fam, fws)
    meas = t.num["time_s"]
    ratios = []
    for i in called:
        k = kernels.get(keys[i])
        if fws[i] == "eager" and k is not None and meas[k] >= min_kernel_s:
            ratios.append(meas[i] / meas[k])
    return float(np.median(ratios)) if len(ratios) >= 5 else None


def _errors(pred: F, meas: F) -> dict[str, float | int]:
    e = np.abs(pred / meas - 1.0)
    if e.size == 0:
        return {"n": 0}
    return {
        "n": int(e.size),
        "median_abs_err": float(np.median(e)),
        "p90_abs_err": float(np.quantile(e, 0.9)),
        "worst_abs_err": float(np.max(e)),
        "bias_median": float(np.median(pred / meas - 1.0)),
    }


@dataclass
class _Sweep:
    """The rows of an op sweep and what the fit reads of each (one entry a row): the op family
    (:func:`family_of`), fit or held out (:func:`split_rows`), usable (a positive time, and not a call-timed
    GEMM row its kernel-timed twin supersedes: :func:`superseded_gemm_rows`), the dtype (``bf16`` where
    empty), the framework, the attention backend (:func:`attention_backend`) and the memory-bound op's
    name (:func:`memory_name`; empty for other families)."""

    t: Table
    fam: NDArray[np.str_]
    fit: NDArray[np.bool_]
    ok: NDArray[np.bool_]
    dtypes: NDArray[np.str_]
    fws: NDArray[np.str_]
    backends: NDArray[np.str_]
    mem_names: NDArray[np.str_]

    @classmethod
    def of(cls, t: Table, fraction: float) -> _Sweep:
        """The sweep ``t`` with ``fraction`` of its shapes (by hash) in the fit part."""
        fam = np.array([family_of(t, i) for i in range(len(t))])
        meas = t.num["time_s"]
        fws = np.array(t.framework)
        ok = np.isfinite(meas) & (meas > 0)
        ok &= ~superseded_gemm_rows(t, fam, fws) & ~repeated_kernel_rows(t, fam, fws)
        all_mem = (fam == "memory") | (fam == "memory_bwd")
        return cls(
            t=t,
            fam=fam,
            fit=split_rows(t, fam, fraction),
            ok=ok,
            dtypes=np.array([d or "bf16" for d in t.dtype]),
            fws=fws,
            backends=attention_backend(t),
            mem_names=np.array([memory_name(t, i) if all_mem[i] else "" for i in range(len(t))]),
        )

    def n_fit(self, mask: NDArray[np.bool_]) -> int:
        """Usable rows of ``mask`` in the fit part."""
        return int(np.sum(mask & self.fit & self.ok))

    def fit_rows(self, mask: NDArray[np.bool_], launch: dict[str, float]) -> tuple[Table, F, NDArray[np.bool_], F]:
        """The usable fit rows of ``mask``: their table, measured seconds, which are eager calls, and
        each one's launch floor (``launch`` of its framework; 0 for eager and kernel-timed rows)."""
        idx = np.flatnonzero(mask & self.fit & self.ok)
        sub = self.t.take(idx)
        eager = self.fws[idx] == "eager"
        floor = np.array([launch.get(f, 0.0) if f and f != "eager" else 0.0 for f in self.fws[idx]])
        return sub, sub.num["time_s"], eager, floor


def is_gemm_kernels_csv(path: str | Path) -> bool:
    """Whether an op CSV times GEMMs by their kernels' own durations only (every row a GEMM with an empty
    ``framework`` and no HBM-cold flag, as ``traces/h200/kernel_rates/gemm_kernels.csv.gz``)."""
    t = read_ops([path])
    timed = [k == "gemm" and f == "" for k, f in zip(t.kind, t.framework, strict=True)]
    return len(t) > 0 and all(timed) and not bool(np.any(t.num["cold"] > 0))


def _fit_gemm_kernel(
    paths: Sequence[str | Path],
    kernel_paths: Sequence[str | Path],
    prof: ComputeProfile,
    device: Device,
    base: ComputeProfile | None,
    host: dict[str, float],
    n_starts: int,
    clock: float | None,
    fraction: float,
) -> tuple[dict[str, GemmParams], dict[str, Any]]:
    """The ``gemm_kernel`` block: GEMMs fitted on the sweep ``paths`` plus the kernel-duration rows of
    ``kernel_paths``, which supersede the call-timed rows of their shapes (:func:`superseded_gemm_rows`: the
    fit of a kernel-rate profile's ``gemm``), from the same start (``prof``, ``host``: the call-timed fit's);
    and its errors on the kernel-duration rows (held out by shape hash, and fitted)."""
    s = _Sweep.of(read_ops([*paths, *kernel_paths]), fraction)
    s.ok &= ~burst_compute_rows(s.t, s.fam, s.fws, device)
    gk = _fit_gemm(s, prof, device, base, dict(host), n_starts, clock)
    timed = (s.fam == "gemm") & (s.fws == "") & ~(s.t.num["cold"] > 0) & s.ok
    t = s.t.take(np.flatnonzero(timed))
    pred = kernel_rows(device, prof.model_copy(update={"gemm": gk}), t)
    meas, fit_part = t.num["time_s"], s.fit[timed]
    return gk, {"check": _errors(pred[~fit_part], meas[~fit_part]), "fit": _errors(pred[fit_part], meas[fit_part])}


def fit(
    ops_csv_paths: Sequence[str | Path],
    device: Device,
    base: ComputeProfile | None = None,
    fraction: float = FIT_FRACTION,
    n_starts: int = 3,
    clocks: dict[str, float] | None = None,
    kernel_gemms_apart: bool = False,
) -> tuple[ComputeProfile, dict[str, Any]]:
    """Fit a :class:`ComputeProfile` for ``device`` on the fit part of the measurements.

    ``clocks``: SM clock (Hz) per family during the sweeps (see :func:`sweep_clocks`); by default
    read from ``dmon.txt`` and ``ops.log`` next to the first CSV when both exist.

    ``kernel_gemms_apart``: GEMM tables timed by their kernels' own durations (:func:`is_gemm_kernels_csv`)
    fit the profile's ``gemm_kernel`` block only (:func:`_fit_gemm_kernel`: what compiled code's GEMMs are
    priced with) and everything else is fitted without them; otherwise their rows supersede the call-timed
    GEMM rows of their shapes in ``gemm`` (a kernel-rate profile, ``h200-kernels``).

    Returns the profile and a report: per op family, the errors on the check part (rows whose
    shape hash falls outside the fit fraction) and on the fit part.

    The steps, each family on top of the ones before (docs/compute.md): launch floors and gaps
    (:func:`_fit_launch`), memory-bound ops (:func:`_fit_memory`), GEMMs (:func:`_fit_gemm`), attention
    (:func:`_fit_attention`), optimizers (:func:`_fit_optimizer`); then the held-out report
    (:func:`_held_out_report`), the embedding backward (:func:`fit_embedding_backward`), the clocks and
    board power per family (:func:`power_fractions`) and the host model of the host sweeps beside the
    inputs (:func:`~simcore.calibration.fit_host.fit_host`).
    """
    all_paths = list(ops_csv_paths)
    emb_paths = [p for p in all_paths if is_embedding_kernels_csv(p)]
    kernel_paths = [p for p in all_paths if kernel_gemms_apart and p not in emb_paths and is_gemm_kernels_csv(p)]
    ops_csv_paths = [p for p in all_paths if p not in emb_paths and p not in kernel_paths]
    if not ops_csv_paths:
        raise TraceError("no op sweep among the inputs", file=", ".join(str(p) for p in all_paths))
    t = read_ops(ops_csv_paths)
    if len(t) == 0:
        raise TraceError("no rows", file=", ".join(str(p) for p in ops_csv_paths))
    clocks_found, power_found = _sweep_clocks_power(ops_csv_paths, clocks)
    s = _Sweep.of(t, fraction)
    prof = _fit_launch(s, base or neutral_profile(device))
    host: dict[str, float] = dict(prof.host_overhead)
    prof = prof.model_copy(update={"memory": _fit_memory(s, prof, device, host, n_starts, ops_csv_paths)})
    gemm_kernel, kernel_report = prof.gemm_kernel, None
    if kernel_paths:
        gemm_kernel, kernel_report = _fit_gemm_kernel(
            ops_csv_paths, kernel_paths, prof, device, base, host, n_starts, clocks_found.get("gemm"), fraction
        )
    elif np.any(s.fam == "gemm"):
        gemm_kernel = {}  # (a base profile's kernel-rate GEMMs belong to the GEMMs refitted here)
    gemm = _fit_gemm(s, prof, device, base, host, n_starts, clocks_found.get("gemm"))
    prof = prof.model_copy(update={"gemm": gemm, "gemm_kernel": gemm_kernel})
    attn = _fit_attention(s, prof, device, host, n_starts, clocks_found.get("attention"))
    prof = prof.model_copy(update={"attention": attn})
    prof = prof.model_copy(update={"optimizer": _fit_optimizer(s, prof, device, host), "host_overhead": host})

    report = _held_out_report(s, prof, device, fraction)
    if kernel_report is not None:
        report["families"]["gemm_kernel"] = kernel_report
    emb = None
    if emb_paths:
        emb, report["families"]["embedding_bwd"] = fit_embedding_backward(emb_paths, device, fraction)
    prof = prof.model_copy(
        update={
            "source": sorted({str(p) for p in all_paths}),
            "provisional": False,
            "transferred_from": None,
            "measured_on": _ref(device),
            "notes": [
                f"fitted by simcore.calibration.fit_compute on {len(t)} rows "
                f"({int(np.sum(s.fit & s.ok))} fit, {int(np.sum(~s.fit & s.ok))} held out by shape hash)",
                "launch.compiled (one op) takes the CUDA-graph value; profiled compiled training steps take "
                "host_layer.profiled_compiled_* (fitted on whole profiled steps), unprofiled ones the eager host per "
                "layer times host_layer.compiled_ratio_* (measured)",
            ],
            "fit_report": {"held_out": _held_out_summary(report)},
            "embedding_bwd": emb,
            "clock_fraction": {k: v / device.boost_clock for k, v in clocks_found.items()},
            "power_fraction": power_fractions(
                {**power_found, **kernel_rate_power(ops_csv_paths, s.fam, s.fws)},
                device.tdp,
                gemm_power_stretch(t, s.fam, s.fws),
            ),
        }
    )
    host_files = host_files_beside(ops_csv_paths[0])
    if host_files:
        # the host entries are stated against the host op tables of the base (else the device's own profile)
        host_ops = (base or load_profile(device)).host_ops
        prof = prof.model_copy(
            update={
                "host_layer": fit_host(list(host_files), host_ops),
                "host_ops": host_ops,
                "source": sorted({*prof.source, *(str(p) for p in host_files)}),
            }
        )
    # host<->GPU copies are not in the op sweeps: the starting profile's section (else the device's own) is kept
    prof = prof.model_copy(update={"host_copy": (base or load_profile(device)).host_copy})
    report["clocks_hz"] = clocks_found
    report["power_w"] = power_found
    return prof, report


def _sweep_clocks_power(
    paths: Sequence[str | Path], clocks: dict[str, float] | None
) -> tuple[dict[str, float], dict[str, float]]:
    """SM clock (Hz) and board power (W) per family during the sweeps: ``clocks`` where given (and no
    power), else read from ``dmon.txt`` and ``ops.log`` beside the first input where both exist
    (:func:`sweep_clock_power`)."""
    clocks_found: dict[str, float] = dict(clocks or {})
    power_found: dict[str, float] = {}
    if clocks is None:
        folder = Path(paths[0]).parent
        if (folder / "dmon.txt").is_file() and (folder / "ops.log").is_file():
            cp = sweep_clock_power(folder / "dmon.txt", folder / "ops.log")
            clocks_found = {k: v[0] for k, v in cp.items() if k != "idle"}
            power_found = {k: v[1] for k, v in cp.items()}
    return clocks_found, power_found


def _fit_launch(s: _Sweep, prof: ComputeProfile) -> ComputeProfile:
    """``prof`` with the measured launch costs: the host time per eager launch and the per-kernel floor in a
    CUDA graph (the median ``launch`` row of each; a compiled op takes the graph's), and the device idle
    time between launches (:func:`estimate_gap` on the fit part's eager vs CUDA-graph pairs,
    :func:`estimate_graph_gap` where kernel durations were measured)."""
    meas = s.t.num["time_s"]
    launch = dict(prof.launch)
    for fw in ("eager", "cuda_graphs"):
        idx = np.flatnonzero((s.fam == "launch") & (s.fws == fw) & s.ok)
        if idx.size:
            launch[fw] = float(np.median(meas[idx]))
    if "cuda_graphs" in launch:
        launch["compiled"] = launch["cuda_graphs"]
    gap = dict(prof.gap)
    g_e = estimate_gap(s.t.take(np.flatnonzero(s.fit)), launch["eager"])
    if g_e is not None:
        gap["eager"] = g_e
    g_g = estimate_graph_gap(s.t)
    if g_g is not None:
        gap["cuda_graphs"] = g_g
    return prof.model_copy(update={"launch": launch, "gap": gap})


def _fit_memory(
    s: _Sweep, prof: ComputeProfile, device: Device, host: dict[str, float], n_starts: int, paths: Sequence[str | Path]
) -> MemoryParams:
    """The memory-bound family: its streaming parameters (:func:`_fit_memory_stream`), then each op's own
    (:func:`_fit_memory_ops`), then the strided SwiGLU ops where an in-step measurement sits beside the inputs
    (:func:`strided_swiglu_ratios`). ``host`` gains the fitted eager host times (in place)."""
    mem = _fit_memory_stream(s, prof, device, host, n_starts)
    ops = _fit_memory_ops(s, prof, mem, device, host)
    in_step = _beside_kernel_rates(paths, s.fam, s.fws, "insitu.csv.gz")
    ratios = strided_swiglu_ratios(in_step / "insitu.csv.gz") if in_step is not None else None
    if ratios is not None:
        # in-step kernels: SiLU and the product on the strided halves of a fused gate/up output
        for nm, r in (("swiglu", ratios[0]), ("swiglu_bwd", ratios[1])):
            if nm in ops:
                strided = nm.replace("swiglu", "swiglu_strided")
                ops[strided] = ops[nm].model_copy(update={"eff": ops[nm].eff / r})
    return mem.model_copy(update={"ops": ops})


def _fit_memory_stream(
    s: _Sweep, prof: ComputeProfile, device: Device, host: dict[str, float], n_starts: int
) -> MemoryParams:
    """The memory-bound family's parameters (:data:`_MEM_PARAMS`) on plain streaming ops (``copy``, ``add``,
    ``mul``; every memory-bound row where those have fewer than 6 fit rows), and their eager host time
    (``host["memory"]``); ``prof.memory`` where fewer than 6 rows remain."""
    mem: MemoryParams = prof.memory
    ref = np.isin(s.mem_names, ["copy", "add", "mul"])
    if s.n_fit(ref) < 6:
        ref = s.fam == "memory"
    if s.n_fit(ref) < 6:
        return mem
    hw32 = _hw(device, "fp32")
    sub, y, eager, floor = s.fit_rows(ref, prof.launch)
    flops = _mem_flops(sub, [canonical_memory_name(n) for n in sub.name])

    def mem_k(mp: MemoryParams, s: Table = sub, fl: F = flops) -> F:
        return K.memory_time(hw32, mp, s.num["bytes"], fl, 1.0, None).time

    mem, h = _fit_model(mem, _subset(_MEM_PARAMS, [p.name for p in _MEM_PARAMS], mem),
                        mem_k, y, eager, floor, host.get("memory", prof.launch["eager"]), prof.launch_mode, n_starts,
                        gap_rows(prof, sub))  # fmt: skip
    if h is not None:
        host["memory"] = h
    return mem


def _fit_memory_ops(
    s: _Sweep, prof: ComputeProfile, mem: MemoryParams, device: Device, host: dict[str, float]
) -> dict[str, MemoryOpParams]:
    """Each memory-bound op's efficiency and latency over the family's streaming model ``mem`` (a row-wise
    op also its share of a row per CTA where it runs few rows, and its width factors:
    :func:`_width_factors`), with its eager host time; ops with fewer than 3 fit rows keep the family's.
    ``host["memory_bwd"]``: the median host time of the backward ops."""
    hw32 = _hw(device, "fp32")
    all_mem = (s.fam == "memory") | (s.fam == "memory_bwd")
    ops: dict[str, MemoryOpParams] = {}
    bwd_hosts = []
    for nm in sorted(str(v) for v in set(s.mem_names[all_mem])):
        mask = s.mem_names == nm
        if s.n_fit(mask) < 3:
            continue
        sub, y, eager, floor = s.fit_rows(mask, prof.launch)
        flops = _mem_flops(sub, [nm] * len(sub))
        rows = _rows(sub, nm)
        elt_s = _elt(sub)
        pre = _product_before(nm, ops, mem, device, sub)

        def op_k(
            op: MemoryOpParams,
            s: Table = sub,
            fl: F = flops,
            mp: MemoryParams = mem,
            r: F | None = rows,
            e: F = elt_s,
            p: F | float = pre,
        ) -> F:
            return (
                K.memory_time(hw32, mp, s.num["bytes"], fl, op.eff, op.t0, r, op.row_share, True, e).time + p
            )

        ps = [Param("eff", 0.1, 2.0, 1.0), Param("t0", 1e-7, 2e-4, mem.t0, log=True)]
        base_op = MemoryOpParams(eff=1.0, t0=mem.t0)
        if rows is not None and np.any(rows < 4 * device.sm_count):
            ps.append(Param("row_share", 0.01, 50.0, 1.0, log=True))
            base_op = base_op.model_copy(update={"row_share": 1.0})
        h0 = host.get("memory", prof.launch["eager"]) * (4.0 if nm.endswith("_bwd") else 1.0)
        op, h = _fit_model(base_op, ps, op_k, y, eager, floor, h0, prof.launch_mode, 2, gap_rows(prof, sub))
        if rows is not None:
            # row-wise kernels change with the row width: the measured over the fitted time per width
            op = op.model_copy(update=_width_factors(sub, y - pre, op_k(op) - pre))
        ops[nm] = op.model_copy(update={"host": h})
        if nm.endswith("_bwd") and h is not None:
            bwd_hosts.append(h)
    if bwd_hosts:
        host["memory_bwd"] = float(np.median(bwd_hosts))
    return ops


def _fit_gemm(
    s: _Sweep,
    prof: ComputeProfile,
    device: Device,
    base: ComputeProfile | None,
    host: dict[str, float],
    n_starts: int,
    clock: float | None,
) -> dict[str, GemmParams]:
    """GEMM parameters per dtype. The dtype group with the most fit rows (bf16 and fp16 together: the same
    tensor-core rate, the same kernels) fits every parameter (:func:`_fit_gemm_rows`) and the eager host time
    (``host["gemm"]``); the others refit the efficiencies from it and keep its structure (their
    misalignment penalty the ``base`` profile's where they have no misaligned rows; fp8 with eight rows or
    more below ``kernels.SKINNY_ROWS`` also fits ``skinny_bw``). Dtypes without rows
    are dropped: they fall back to the nearest fitted one (``profile.gemm_params``). ``clock``: the SM
    clock (Hz) of the sweep."""
    gemm = dict(prof.gemm)
    is_gemm = s.fam == "gemm"
    groups_g = [("bf16", ("bf16", "fp16"))] + [(d, (d,)) for d in GEMM_DTYPES if d not in ("bf16", "fp16")]
    groups_g.sort(key=lambda g: -s.n_fit(is_gemm & np.isin(s.dtypes, g[1])))
    anchor: GemmParams | None = None
    for key_g, members in groups_g:
        mask = is_gemm & np.isin(s.dtypes, members)
        if s.n_fit(mask) == 0:
            continue
        sub, y, eager, floor = s.fit_rows(mask, prof.launch)
        start = gemm.get(key_g, gemm["bf16"]) if anchor is None else anchor
        misal = bool(np.any(_misaligned(sub)))
        if anchor is not None and not misal and base is not None and key_g in base.gemm:
            # no misaligned rows of this dtype here: its misalignment penalty stays the base profile's
            # (a property of the dtype's kernels: fp32 FFMA barely minds, tensor-core tiles do)
            start = start.model_copy(update={"eff_misaligned": base.gemm[key_g].eff_misaligned})
        if anchor is None:
            names = [p.name for p in GEMM_PARAMS if p.name not in (*_COLD_GEMM, "skinny_bw")] + (
                ["eff_misaligned"] if misal else []
            )
        else:
            names = ["eff_peak", "k_overhead", "t0"] + (["eff_misaligned"] if misal else [])
            if np.sum(np.minimum(sub.num["m"], sub.num["n"]) <= 256) >= 4:
                names.append("eff_bw")  # skinny (memory-bound) shapes measured
            if len(sub) >= 40:
                names.append("load_cost")
            if key_g in ("fp8", FP8_TENSOR) and np.sum(sub.num["m"] < K.SKINNY_ROWS) >= 8:
                # fp8 kernels may stream few rows slower than 128 (GemmParams.skinny_bw)
                names.append("skinny_bw")
        h_gemm = host.get("gemm", prof.launch["eager"])
        floor_e = np.where(eager, h_gemm, floor)
        p_fit, h = _fit_gemm_rows(
            device, prof, sub, y, eager, floor_e, start, names, h_gemm if anchor is None else None, n_starts, clock
        )
        for d in members:
            if np.any(is_gemm & (s.dtypes == d) & s.ok) or anchor is None:
                gemm[d] = p_fit
        if anchor is None:
            anchor = p_fit
            if h is not None:
                host["gemm"] = h
    if anchor is not None:
        for d in GEMM_DTYPES:
            if not np.any(is_gemm & (s.dtypes == d) & s.ok):
                gemm.pop(d, None)  # falls back to the nearest fitted dtype (profile.gemm_params)
    return gemm


def _fit_gemm_rows(
    device: Device,
    prof: ComputeProfile,
    sub: Table,
    y: F,
    eager: NDArray[np.bool_],
    floor: F,
    start: GemmParams,
    names: list[str],
    host: float | None,
    n_starts: int,
    clock: float | None,
) -> tuple[GemmParams, float | None]:
    """``names`` of ``start`` fitted on the GEMM rows ``sub`` (measured ``y``), with the eager host time where
    ``host`` (its start) is given. Such a first fit of rows read from HBM (``cold``) also fits the
    HBM-streaming parameters (:data:`_COLD_GEMM`), in a second stage where the sweep holds 20 rows or more."""
    sub_dt = np.array([d or "bf16" for d in sub.dtype])
    mode = prof.launch_mode

    def g_k(p: GemmParams, s: Table = sub, dts: NDArray[Any] = sub_dt) -> F:
        out = np.empty(len(s))
        for d in sorted(set(dts)):
            j = np.flatnonzero(dts == d)
            out[j] = _gemm_pred(device, p, s.take(j), str(d), prof.memory, clock)
        return out

    cold = sub.num["cold"] > 0
    sweep = ~cold & ~np.isfinite(sub.num["clock"])
    if host is not None and np.any(cold) and int(np.sum(sweep)) >= 20:
        # Two stages: the general parameters on the sweep (rows at the sweep clocks, no decode-regime
        # file, whose hundreds of skinny shapes would otherwise outweigh the large GEMMs); then the
        # HBM-streaming parameters, identifiable only from skinny GEMMs read from HBM, on every row
        # with the rest held.
        hot = np.flatnonzero(sweep)
        sub_h, dt_h = sub.take(hot), sub_dt[hot]

        def g_hot(p: GemmParams, s: Table = sub_h, dts: NDArray[Any] = dt_h) -> F:
            return g_k(p, s, dts)

        p_fit, h = _fit_model(
            start, _subset(GEMM_PARAMS, names, start), g_hot,
            y[hot], eager[hot], floor[hot], host, mode, n_starts, gap_rows(prof, sub)[hot],
        )  # fmt: skip
        floor_2 = np.where(eager, h if h is not None else floor, floor)
        p_fit, _ = _fit_model(
            p_fit, _subset(GEMM_PARAMS, _COLD_GEMM, p_fit), g_k, y, eager, floor_2, None, mode,
            n_starts, gap_rows(prof, sub),
        )  # fmt: skip
        return p_fit, h
    if host is not None and np.any(cold):
        names = [*names, *_COLD_GEMM]  # too few sweep rows for two stages: one fit of everything
    return _fit_model(
        start, _subset(GEMM_PARAMS, names, start), g_k, y, eager, floor, host, mode, n_starts, gap_rows(prof, sub)
    )


def _fit_attention(
    s: _Sweep, prof: ComputeProfile, device: Device, host: dict[str, float], n_starts: int, clock: float | None
) -> dict[str, AttentionParams]:
    """Attention parameters per pass (forward, backward), backend and dtype (:func:`_attention_fit_names`
    says which; entries ``fwd``, ``bwd_cudnn``, ``fwd_efficient_fp32``, ...), each with its eager host time
    per call (``host["attention_fwd"]``, ``host["attention_bwd_cudnn"]``, ...; the engines' eager host uses
    flash's); cells with fewer than 5 fit rows keep their entry. cuDNN's one-query call over a masked cache
    is a family of its own (:func:`_fit_one_query_attention`). ``clock``: the SM clock (Hz) of the sweep."""
    attn = dict(prof.attention)
    masked_all, drop_all = attention_flags(s.t)
    one_query = one_query_rows(s.t, s.fam)
    for bwd, be in itertools.product((False, True), ATTENTION_BACKENDS):
        f = "attention_bwd" if bwd else "attention_fwd"
        key = "bwd" if bwd else "fwd"
        for d in sorted(set(s.dtypes[(s.fam == f) & (s.backends == be)])):
            mask = (s.fam == f) & (s.dtypes == d) & (s.backends == be) & ~one_query
            if s.n_fit(mask) < 5:
                continue
            sub, y, eager, floor = s.fit_rows(mask, prof.launch)
            k1 = key if be == "flash" else f"{key}_{be}"
            k2 = k1 if d in ("bf16", "fp16") else f"{k1}_{d}"
            start_a = attn.get(k2, attn.get(k1, attn[key]))
            if be == "cudnn" and not bwd:
                # cuDNN's fprop tiles each query head's rows on their own (seen on short prompts)
                start_a = start_a.model_copy(update={"per_head_tiles": True})

            def a_k(p: AttentionParams, tb: Table = sub, dt: str = d, b_: bool = bwd) -> F:
                return _attn_pred(device, p, tb, dt, b_, prof.memory, clock)

            flags = [
                flag
                for flag, col in (("mask_overhead", masked_all), ("dropout_overhead", drop_all))
                if s.n_fit(mask & (col > 0)) >= 3
            ]
            names, start_a = _attention_fit_names(sub, be, bwd, flags, start_a)
            h0 = host.get(f"{f}_{be}", host.get(f, prof.launch["eager"] * (6.0 if bwd else 2.0)))
            attn[k2], h = _fit_model(
                start_a,
                _subset(_ATTN_PARAMS, names, start_a),
                a_k,
                y,
                eager,
                floor,
                h0,
                prof.launch_mode,
                n_starts,
                gap_rows(prof, sub),
            )
            if h is not None:
                # cuDNN's calls have their own host per call; the engines' eager host uses flash's
                host[f if be == "flash" else f"{f}_{be}"] = h
    attn.update(_fit_one_query_attention(s, prof, attn, device, host, n_starts, clock))
    return attn


def _attention_fit_names(
    sub: Table, be: str, bwd: bool, flags: list[str], start: AttentionParams
) -> tuple[list[str], AttentionParams]:
    """Which attention parameters the rows ``sub`` of backend ``be`` fit, and the start: every one but the
    mask / dropout / odd-column terms on 20 rows or more (else the peak efficiency, the KV overhead and the
    latency), no split latency backward, the ``flags`` (``mask_overhead``, ``dropout_overhead``: 3 fit rows or
    more measured one), the head-dim scale only over 3 head dims (flash) or 2 (others), from 2000 where
    ``start`` has none."""
    names = (
        [p.name for p in _ATTN_PARAMS if p.name not in _ATTN_FLAG_PARAMS]
        if len(sub) >= 20
        else ["eff_peak", "kv_overhead", "t0"]
    )
    if bwd:
        names = [n for n in names if n != "split_t0"]
    names += flags
    if len(set(sub.num["head_dim"][np.isfinite(sub.num["head_dim"])])) < (3 if be == "flash" else 2):
        names = [n for n in names if n != "head_dim_scale"]
    elif start.head_dim_scale is None:
        start = start.model_copy(update={"head_dim_scale": 2000.0})
    return names, start


def _fit_one_query_attention(
    s: _Sweep,
    prof: ComputeProfile,
    attn: dict[str, AttentionParams],
    device: Device,
    host: dict[str, float],
    n_starts: int,
    clock: float | None,
) -> dict[str, AttentionParams]:
    """cuDNN's one-query call over a masked cache whose keys and values come repeated to every head
    (``transformers``' static cache) runs its own kernel (sm80 wmma, 64 x 64 tiles, one CTA a sequence and
    head): bf16 entries :data:`~simcore.specs.profile.ONE_QUERY_ATTENTION` (even slot counts) and
    :data:`~simcore.specs.profile.ONE_QUERY_ODD_ATTENTION` (odd ones, also ``odd_cols``), each from 5 fit
    rows, started from cuDNN's forward fit (the odd one from the even one's)."""
    one_query = one_query_rows(s.t, s.fam)
    one_fam = one_query_family(s.t.num["kv_seq"])
    fitted_q: dict[str, AttentionParams] = {}
    for key in (ONE_QUERY_ATTENTION, ONE_QUERY_ODD_ATTENTION):
        rows_q = one_query & (s.dtypes == "bf16") & (one_fam == key)
        if s.n_fit(rows_q) < 5:
            continue
        sub, y, eager, floor = s.fit_rows(rows_q, prof.launch)
        start_q = fitted_q.get(ONE_QUERY_ATTENTION, attn.get("fwd_cudnn", attn["fwd"])).model_copy(
            update={"block_rows": 64, "block_cols": 64, "per_head_tiles": False}
        )

        def q_k(p: AttentionParams, tb: Table = sub) -> F:
            return _attn_pred(device, p, tb, "bf16", False, prof.memory, clock)

        names = ["eff_peak", "kv_overhead", "t0", "eff_bw"] + (["odd_cols"] if key == ONE_QUERY_ODD_ATTENTION else [])
        h0 = host.get("attention_fwd_cudnn", prof.launch["eager"] * 2.0)
        fitted_q[key], _h = _fit_model(
            start_q, _subset(_ATTN_PARAMS, names, start_q), q_k, y, eager, floor, h0, prof.launch_mode, n_starts,
            gap_rows(prof, sub),
        )  # fmt: skip
    return fitted_q


def _fit_optimizer(s: _Sweep, prof: ComputeProfile, device: Device, host: dict[str, float]) -> dict[str, OptimizerParams]:
    """Per optimizer implementation (:func:`_opt_key`), its traffic factor over the bytes of its states (and
    its latency from 3 fit rows, its eager host time from 4) on the memory-bound model;
    ``host["optimizer"]``: the median of those host times."""
    hw32 = _hw(device, "fp32")
    mem = prof.memory
    opt = dict(prof.optimizer)
    okeys = np.array([_opt_key(s.t, i) if s.fam[i] == "optimizer" else "" for i in range(len(s.t))])
    opt_hosts = []
    for key in sorted(set(okeys[s.fam == "optimizer"])):
        mask = okeys == key
        n_fit = s.n_fit(mask)
        if n_fit < 1:
            continue
        sub, y, eager, floor = s.fit_rows(mask, prof.launch)
        params, nbytes = _opt_params(sub), _opt_bytes(sub)

        def o_k(op: OptimizerParams, nb: F = nbytes, pr: F = params) -> F:
            return K.memory_time(hw32, mem, nb * op.traffic, 16.0 * pr, 1.0, op.t0).time

        ps = [Param("traffic", 0.3, 20.0, 1.5, log=True)]
        if n_fit >= 3:
            ps.append(Param("t0", 1e-7, 5e-3, 1e-5, log=True))
        base_o = opt.get(key, OptimizerParams(traffic=1.0, t0=1e-5))
        h_opt: float | None = host.get("optimizer", 5.0 * prof.launch["eager"]) if n_fit >= 4 else None
        o_fit, h = _fit_model(base_o, ps, o_k, y, eager, floor, h_opt, prof.launch_mode, 2, gap_rows(prof, sub))
        opt[key] = o_fit.model_copy(update={"host": h})
        if h is not None:
            opt_hosts.append(h)
    if opt_hosts:
        host["optimizer"] = float(np.median(opt_hosts))
    return opt


def _held_out_report(s: _Sweep, prof: ComputeProfile, device: Device, fraction: float) -> dict[str, Any]:
    """The fit's report: per group of rows (family, backend, dtype, memory-bound op, framework, and the rows
    whose kernel is over twice the launch floor), the errors of ``prof``'s prediction on the held-out
    (``check``) and the fit part (:func:`_errors`); the launch rows, launch costs, gaps and host times."""
    t, fam, fws = s.t, s.fam, s.fws
    meas = t.num["time_s"]
    kern = kernel_rows(device, prof, t)
    pred = _observed(kern, floor_rows(prof, t), prof.launch_mode, gap_rows(prof, t))
    report: dict[str, Any] = {"rows": int(len(t)), "fit_fraction": fraction, "families": {}}
    kernel_dominated = kern > 2.0 * floor_rows(prof, t)
    groups: dict[str, NDArray[np.bool_]] = {}
    for g in ("gemm", "attention_fwd", "attention_bwd", "memory", "memory_bwd", "optimizer"):
        groups[g] = fam == g
    for g in ("attention_fwd", "attention_bwd"):
        for be in ATTENTION_BACKENDS[1:]:
            groups[f"{g}_{be}"] = (fam == g) & (s.backends == be)
    for d in GEMM_DTYPES:
        groups[f"gemm_{d}"] = (fam == "gemm") & (s.dtypes == d)
    all_mem = (fam == "memory") | (fam == "memory_bwd")
    for nm in sorted(set(s.mem_names[all_mem])):
        groups[f"mem:{nm}"] = s.mem_names == nm
    groups["all"] = fam != "launch"
    groups["all_cuda_graphs"] = (fam != "launch") & (fws == "cuda_graphs")
    groups["all_eager"] = (fam != "launch") & (fws == "eager")
    groups["all_kernel_dominated"] = (fam != "launch") & kernel_dominated
    for g, mask in groups.items():
        if not np.any(mask & s.ok):
            continue
        chk = mask & ~s.fit & s.ok
        fitp = mask & s.fit & s.ok
        report["families"][g] = {
            "check": _errors(pred[chk], meas[chk]),
            "fit": _errors(pred[fitp], meas[fitp]),
        }
    report["launch_rows"] = {f"{t.name[i]}[{t.framework[i]}]": float(meas[i]) for i in np.flatnonzero(fam == "launch")}
    report["launch_s"] = prof.launch
    report["gap_s"] = prof.gap
    report["host_overhead_s"] = prof.host_overhead
    return report


def _held_out_summary(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The profile's ``fit_report.held_out``: per group with held-out rows (memory-bound ops left out), their
    count and median and worst relative error (4 decimals)."""
    return {
        g: {
            "n_check": v["check"].get("n", 0),
            "median_abs_err": round(float(v["check"].get("median_abs_err", float("nan"))), 4),
            "worst_abs_err": round(float(v["check"].get("worst_abs_err", float("nan"))), 4),
        }
        for g, v in report["families"].items()
        if v["check"].get("n", 0) and not g.startswith("mem:")
    }


# ---------------------------------------------------------------------------------------------
# published kernel numbers (checking only, never fitting)


def _ref_devices(ref_yaml: Path) -> dict[str, Device]:
    """Devices built from the reference hardware table (for checks of devices not in the registry)."""
    import yaml

    data = yaml.safe_load(ref_yaml.read_text())
    out: dict[str, Device] = {}
    for d in data.get("devices", []):
        try:
            peak = {}
            for dt in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4"):
                v = d.get(f"peak_tflops_{dt}_dense") if dt != "fp32" else d.get("peak_tflops_fp32")
                if v:
                    peak[dt] = f"{v} TFLOP/s"
            dev = Device.model_validate(
                {
                    "name": d["id"],
                    "display_name": d["name"],
                    "vendor": d.get("vendor", "other")
                    if d.get("vendor") in ("nvidia", "amd", "intel")
                    else "other",
                    "architecture": d.get("architecture", "?"),
                    "sm_count": d["sm_count"],
                    "boost_clock": f"{d.get('boost_clock_mhz') or 1000} MHz",
                    "peak": peak,
                    "memory": {
                        "type": str(d.get("hbm_type")),
                        "capacity": f"{d['hbm_capacity_gb']} GB",
                        "bandwidth": f"{d['hbm_bandwidth_tbs']} TB/s",
                    },
                    "l2_cache": f"{d.get('l2_cache_mb') or 50} MB",
                    "tdp": f"{d.get('tdp_w') or 700} W",
                    "pcie_generation": max(int(d.get("pcie_generation") or 5), 3),
                    "pcie_bandwidth": "64 GB/s",
                    "sources": {"all": "shared/reference/hardware_specs.yaml"},
                }
            )
        except Exception:  # noqa: BLE001 - incomplete rows are skipped
            continue
        out[d["id"]] = dev
    return out


_PUBLISHED_GPU = {
    "NVIDIA H100 SXM": ("h100", "h100_sxm_80gb"),
    "H100 80GB HBM3 (Azure ND H100 v5)": ("h100", "h100_sxm_80gb"),
    "H100 80GB HBM3": ("h100", "h100_sxm_80gb"),
    "NVIDIA A100 SXM": ("a100", "a100_sxm_80gb"),
    "NVIDIA B200 SXM": ("b200", "b200_sxm_180gb"),
    "NVIDIA H200 SXM": ("h200", "h200_sxm_141gb"),
    "NVIDIA GB200 SXM": ("gb200", "gb200_nvl72_gpu"),
    "GB200 (Azure ND GB200 v6)": ("gb200", "gb200_nvl72_gpu"),
    "NVIDIA B300 SXM": ("b300", "b300_hgx"),
}


def check_published(
    profile: ComputeProfile, published_csv: str | Path, ref_yaml: str | Path | None = None
) -> list[dict[str, Any]]:
    """Predict the GEMM/bandwidth rows of the published kernel table for H100/H200/A100/B200/B300/GB200 with
    ``profile`` transferred to each device (with the device's engine GEMM table where it has one:
    :func:`simcore.specs.profile.with_engine_gemm`); returns one dict per row with the relative error. A GEMM row
    timed after thousands of warm-up iterations (Azure's AI-benchmarking-guide: the board at its power
    limit) is a sustained stream: its time carries :func:`simcore.compute.ops.power_cap_time` of a pure
    GEMM stream (docs/compute.md, "SM clock and the power cap"); other rows are burst timings."""
    import re

    from simcore.compute import ops
    from simcore.specs.profile import transfer, with_engine_gemm
    from simcore.specs.registry import default_registry

    reg = default_registry()
    refdevs = _ref_devices(Path(ref_yaml)) if ref_yaml else {}
    out: list[dict[str, Any]] = []
    with open(published_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            gpu = row["gpu"].strip()
            if gpu not in _PUBLISHED_GPU:
                continue
            reg_name, ref_id = _PUBLISHED_GPU[gpu]
            try:
                dev = reg.device(reg_name)
            except SimcoreError:
                dev = refdevs.get(ref_id)  # type: ignore[assignment]
            if dev is None:
                continue
            prof = with_engine_gemm(transfer(profile, dev), dev)
            metric = row["metric"]
            value = float(row["value"])
            dt_raw = row["dtype"].lower()
            if metric in ("mamf_tflops", "gemm_tflops"):
                mm = re.search(r"(\d+)x(\d+)x(\d+)", row["shape_or_config"])
                if not mm:
                    continue
                m, n, k = (float(v) for v in mm.groups())
                if "cublaslt" in row["kernel"].lower():
                    # cuBLASLt benchmarks are column-major (strides m and k); simcore's shapes are
                    # PyTorch row-major C[m,n] = A[m,k] B[k,n] (strides n and k): same problem
                    # with m and n swapped
                    m, n = n, m
                dtype = next((d for d in ("fp8", "fp4", "bf16") if d in dt_raw), None)
                if dtype is None or dtype not in dev.peak:
                    continue
                # cuBLASLt's FP8 GEMMs (Azure's sweep, MAMF's torch._scaled_mm with one scale per tensor) and its
                # block-scaled FP4: the per-tensor family (docs/compute.md, "FP8 GEMMs by scaling")
                c = ops.gemm(dev, prof, m, n, k, dtype, per_tensor=True)
                t = c.time_s
                if "10,000 warmup" in row["notes"]:
                    fam = gemm_family(dtype, per_tensor=True)
                    t = t + ops.power_cap_time(dev, prof, {"gemm": t}, gemm_dtype=fam)
                pred = c.flops / t / 1e12
            elif metric == "hbm_bandwidth":
                nbytes = 2 * 1024**3  # a large stream, far past L2
                c = ops.memory_op(dev, prof, "copy", nbytes)
                pred = nbytes / c.time_s / 1e12
            else:
                continue
            out.append(
                {
                    "gpu": gpu,
                    "device": dev.name,
                    "kernel": row["kernel"],
                    "dtype": row["dtype"],
                    "shape": row["shape_or_config"],
                    "published": value,
                    "predicted": round(float(pred), 1),
                    "unit": row["unit"],
                    "rel_err": round(float(pred) / value - 1.0, 3),
                    "transferred_from": prof.transferred_from,
                }
            )
    return out


# ---------------------------------------------------------------------------------------------
# report text


def format_report(report: dict[str, Any]) -> str:
    """:func:`fit`'s report as text: per op family the held-out rows' median, p90 and worst |relative error|
    and median signed error, beside the fit rows' count and median."""
    lines = [f"{'family':<16}{'n_check':>8}{'median':>9}{'p90':>9}{'worst':>9}{'bias':>9}   (fit: n, median)"]
    for g, v in report["families"].items():
        c, f = v["check"], v["fit"]
        if not c.get("n"):
            lines.append(
                f"{g:<16}{0:>8}{'-':>9}{'-':>9}{'-':>9}{'-':>9}   ({f.get('n', 0)}, {f.get('median_abs_err', float('nan')):.3f})"
            )
            continue
        lines.append(
            f"{g:<16}{c['n']:>8}{c['median_abs_err']:>9.3f}{c['p90_abs_err']:>9.3f}{c['worst_abs_err']:>9.3f}"
            f"{c['bias_median']:>+9.3f}   ({f.get('n', 0)}, {f.get('median_abs_err', float('nan')):.3f})"
        )
    return "\n".join(lines)


def format_published(rows: list[dict[str, Any]]) -> str:
    """:func:`check_published`'s rows as text: published and predicted per kernel, the relative error, and
    the median and worst |error|."""
    lines = ["published kernel numbers (checking only):"]
    for r in rows:
        lines.append(
            f"  {r['gpu'][:34]:<34} {r['dtype'][:10]:<10} {r['shape'][:34]:<34} "
            f"pub {r['published']:>8.1f} pred {r['predicted']:>8.1f} {r['unit']:<8} err {r['rel_err']:+.1%}"
        )
    errs = np.abs([r["rel_err"] for r in rows])
    lines.append(f"  median |err| {np.median(errs):.1%}, worst {np.max(errs):.1%} over {len(rows)} rows")
    return "\n".join(lines)
