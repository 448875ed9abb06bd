"""Fit a comm calibration profile (``hardware_specs/calibration/comm-<system>.yaml``) to measured
collectives, and report its error on measurements it was not fitted on.

    python -m simcore.validation comm traces/h200x2/nccl.csv.gz --system hgx-h200 --write
    python -m simcore.validation comm

What is fitted (the rest of the profile keeps its spec/NCCL-default values):

* the NVLink bandwidth curve: plateau ``efficiency``, ``ramp_bytes`` and ``ramp_exponent``;
* per op a per-call floor (``op_overhead``: back-to-back calls through torch.distributed cannot be
  issued faster than this), and per op family a bandwidth multiplier -- families -- ``all_reduce`` (the anchor, 1), ``ring`` (all_gather,
  reduce_scatter), ``rooted`` (broadcast, reduce), ``p2p`` (all_to_all, send_recv) -- so an op never
  seen in fitting borrows its family's multiplier and mean floor.

NCCL's protocol latencies (LL, LL128, Simple; base and per hop) are kept: two GPUs cannot separate
them from the per-call floor. bf16 and fp32 points are fitted together (same bytes, same curve).

The split is deterministic: the held-out set is every point of the ``reduce`` op plus every third
message size (log2 index ``% 3 == 1``) of every other op; the fit sees only the rest. The loss is
the sum of squared log ratios of predicted to measured time: a grid over the shared ramp shape,
and for each shape an independent 2-D Nelder-Mead per family (numpy only).
Points inside one NVLink domain fit the NVLink side; multi-node points (nccl-tests across nodes),
when a file has them, then fit the network curve (plateau and ramp) with the NVLink side fixed.
Without them the network curve stays at its spec values.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from simcore.comm.collectives import (
    PROTOCOLS,
    CommProfile,
    LinkCurve,
    LinkRates,
    ProtoTimes,
    collective_time,
    cost_from_profile,
    link_rates,
    load_profile,
    read_profile,
)
from simcore.comm.groups import GroupPlacement
from simcore.errors import SimcoreError, TraceError
from simcore.specs.registry import builtin_dir
from simcore.specs.resolve import cluster_for
from simcore.traces.nccl import CommMeasurements, read_measurements

FAMILIES: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "broadcast": "rooted",
    "reduce": "rooted",
    "all_to_all": "p2p",
    "send_recv": "p2p",
}
FAMILY_NAMES = ("all_reduce", "ring", "rooted", "p2p")
HELD_OUT_OP = "reduce"
DEFAULT_TRACE = "traces/h200x2/nccl.csv.gz"
PUBLISHED = "published_collectives.csv"


def model_op(op: str) -> str:
    """The modelled op a measured op maps to (``send_recv_bidir`` is ``send_recv`` both ways)."""
    return "send_recv" if op == "send_recv_bidir" else op


def held_out_mask(m: CommMeasurements) -> NDArray[np.bool_]:
    """The deterministic held-out split: the whole ``reduce`` op and every third log2 size."""
    idx = np.round(np.log2(np.maximum(m.nbytes, 1.0))).astype(np.int64)
    out: NDArray[np.bool_] = (m.op == HELD_OUT_OP) | (idx % 3 == 1)
    return out


def aggregate(m: CommMeasurements) -> CommMeasurements:
    """Median time per (op, dtype, nbytes, gpus, nodes); out-of-place rows when there are any."""
    if np.any(~m.in_place):
        m = m.select(~m.in_place)
    groups: dict[tuple[Any, ...], list[int]] = {}
    cols = zip(
        m.op.tolist(), m.dtype.tolist(), m.nbytes.tolist(), m.gpus.tolist(), m.nodes.tolist(), strict=True
    )
    for i, k in enumerate(cols):
        groups.setdefault(k, []).append(i)
    keys = list(groups)
    return CommMeasurements(
        op=np.array([k[0] for k in keys], dtype=str),
        dtype=np.array([k[1] for k in keys], dtype=str),
        nbytes=np.array([k[2] for k in keys], dtype=np.float64),
        gpus=np.array([k[3] for k in keys], dtype=np.int64),
        nodes=np.array([k[4] for k in keys], dtype=np.int64),
        time_s=np.array([float(np.median(m.time_s[groups[k]])) for k in keys]),
        in_place=np.zeros(len(keys), dtype=bool),
        source=m.source,
        meta=m.meta,
    )


# ------------------------------------------------------------------------------------------------
# Parameterisation
# ------------------------------------------------------------------------------------------------


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(max(x, -40.0), 40.0)))


@dataclass(frozen=True)
class Params:
    """Fitted values: NVLink curve, protocol latency scales (kept at 1), a bandwidth multiplier per op
    family, per-call floors (seconds) per op (or per family); ``fp32`` is a reduction multiplier (kept
    at 1)."""

    efficiency: float
    ramp_bytes: float
    ramp_exponent: float
    lat_scale: dict[str, float]
    family: dict[str, float]
    fp32: float
    overhead: dict[str, float]


def apply(base: CommProfile, prm: Params) -> CommProfile:
    """``base`` with the fitted parameters put in (latencies scaled per protocol)."""

    def scale(pt: ProtoTimes) -> ProtoTimes:
        vals = {
            k: (None if pt.get(k) is None else float(pt.get(k) or 0.0) * prm.lat_scale[k]) for k in PROTOCOLS
        }
        return ProtoTimes.model_construct(None, **vals)

    links = dict(base.links)
    links["nvlink"] = LinkCurve.model_construct(
        efficiency=prm.efficiency, ramp_bytes=prm.ramp_bytes, ramp_exponent=prm.ramp_exponent
    )
    return base.model_copy(
        update={
            "links": links,
            "base_latency": {k: scale(v) for k, v in base.base_latency.items()},
            "hop_latency": {
                "nvlink": scale(base.hop_latency["nvlink"]),
                **{k: v for k, v in base.hop_latency.items() if k != "nvlink"},
            },
            "ops": {op: prm.family[fam] for op, fam in FAMILIES.items()},
            "op_overhead": {
                op: prm.overhead.get(op, prm.overhead.get(fam, 0.0)) for op, fam in FAMILIES.items()
            },
            "dtypes": {"fp32": prm.fp32} if prm.fp32 != 1.0 else {},
        }
    )


@dataclass(frozen=True)
class _Design:
    """Per (op, dtype, gpus, nodes): which rows, the group and the link rates (built once per fit)."""

    parts: list[tuple[str, str, NDArray[np.bool_], GroupPlacement, LinkRates, NDArray[np.float64]]]
    n: int


def design(m: CommMeasurements, system: str) -> _Design:
    parts = []
    keys = sorted(set(zip(m.op.tolist(), m.dtype.tolist(), m.gpus.tolist(), m.nodes.tolist(), strict=True)))
    for op, dt, n, k in keys:
        sel = (m.op == op) & (m.dtype == dt) & (m.gpus == n) & (m.nodes == k)
        cl = cluster_for(system, gpus=int(n), nodes=int(k) if k > 1 else None)
        per = math.ceil(int(n) / cl.nodes)
        grp = GroupPlacement.of(int(n), min(per, cl.system.nvlink_domain))
        parts.append((model_op(op), dt, sel, grp, link_rates(cl, grp), m.nbytes[sel]))
    return _Design(parts, len(m))


def predict(
    m: CommMeasurements, profile: CommProfile, system: str, plan: _Design | None = None
) -> NDArray[np.float64]:
    """Predicted seconds for every row of ``m`` (groups laid out as contiguous ranks of ``system``)."""
    plan = plan or design(m, system)
    out = np.empty(plan.n)
    for op, dt, sel, grp, rates, sizes in plan.parts:
        out[sel] = cost_from_profile(op, sizes, grp, rates, profile, "auto", dt).time_s
    return out


def nelder_mead(
    f: Callable[[NDArray[np.float64]], float],
    x0: NDArray[np.float64],
    step: float = 0.5,
    iters: int = 3000,
    tol: float = 1e-10,
) -> NDArray[np.float64]:
    """Minimise ``f`` from ``x0`` (plain Nelder-Mead, deterministic)."""
    n = x0.shape[0]
    pts = [x0.astype(np.float64)]
    for i in range(n):
        x = x0.astype(np.float64).copy()
        x[i] += step
        pts.append(x)
    simplex = np.array(pts)
    vals = np.array([f(x) for x in simplex])
    for _ in range(iters):
        order = np.argsort(vals)
        simplex, vals = simplex[order], vals[order]
        if abs(vals[-1] - vals[0]) <= tol * (abs(vals[0]) + tol):
            break
        c = simplex[:-1].mean(axis=0)
        xr = c + (c - simplex[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2.0 * (c - simplex[-1])
            fe = f(xe)
            simplex[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            simplex[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (simplex[-1] - c) if fr >= vals[-1] else c + 0.5 * (xr - c)
            fc = f(xc)
            if fc < min(fr, vals[-1]):
                simplex[-1], vals[-1] = xc, fc
            else:
                simplex[1:] = simplex[0] + 0.5 * (simplex[1:] - simplex[0])
                vals[1:] = [f(x) for x in simplex[1:]]
    return np.asarray(simplex[int(np.argmin(vals))])


@dataclass(frozen=True)
class FitResult:
    profile: CommProfile
    params: Params
    train: CommMeasurements
    test: CommMeasurements
    report: dict[str, Any]


def _errors(m: CommMeasurements, pred: NDArray[np.float64]) -> dict[str, Any]:
    err = (pred - m.time_s) / m.time_s
    big = m.nbytes >= 1e6

    def med(mask: NDArray[np.bool_]) -> float | None:
        return float(np.median(np.abs(err[mask]))) if mask.any() else None

    return {
        "points": len(m),
        "median_abs_error_ge_1MB": med(big),
        "median_abs_error_lt_1MB": med(~big),
        "by_op": {str(op): med(m.op == op) for op in sorted(set(m.op.tolist()))},
    }


def _fit_params(
    train: CommMeasurements,
    system: str,
    base: CommProfile,
    iters: int,
    grid: tuple[tuple[float, ...], tuple[float, ...]],
) -> Params:
    """Separable fit: the ramp shape (``ramp_bytes``, ``ramp_exponent``) is shared and searched on a
    grid; for each shape every op family gets its own plateau efficiency, and each of its ops its
    per-call floor, by a small Nelder-Mead on the family's points (families do not interact, so this
    is exact and fast); an op never fitted takes its family's mean floor. The
    all_reduce family's plateau is the link efficiency; the others become multipliers of it. NCCL's
    protocol latencies are kept: two GPUs cannot separate them from the per-call floor."""
    fam_of = np.array([FAMILIES[model_op(o)] for o in train.op.tolist()])
    subsets = {f: train.select(fam_of == f) for f in FAMILY_NAMES if np.any(fam_of == f)}
    plans = {f: design(m, system) for f, m in subsets.items()}
    logs = {f: np.log(m.time_s) for f, m in subsets.items()}
    floor0 = {f: float(np.min(m.time_s)) for f, m in subsets.items()}

    ops_of = {f: sorted({model_op(o) for o in m.op.tolist()}) for f, m in subsets.items()}

    def family_fit(f: str, ramp: float, expo: float) -> tuple[float, NDArray[np.float64]]:
        ops = ops_of[f]

        def lf(v: NDArray[np.float64]) -> float:
            prm = Params(
                float(min(math.exp(v[0]), 3.0)),
                ramp,
                expo,
                dict.fromkeys(PROTOCOLS, 1.0),
                dict.fromkeys(FAMILY_NAMES, 1.0),
                1.0,
                {op: float(math.exp(min(v[1 + i], 8.0))) * 1e-6 for i, op in enumerate(ops)},
            )
            r = np.log(predict(subsets[f], apply(base, prm), system, plans[f])) - logs[f]
            return float(np.sum(r * r))

        x0 = np.array([math.log(0.8)] + [math.log(max(floor0[f] * 1e6 * 0.8, 1e-3))] * len(ops))
        x = nelder_mead(lf, x0, step=0.4, iters=iters * len(ops))
        return lf(x), x

    best: tuple[float, float, float, dict[str, NDArray[np.float64]]] | None = None
    for ramp in grid[0]:
        for expo in grid[1]:
            total = 0.0
            sol: dict[str, NDArray[np.float64]] = {}
            for f in subsets:
                val, x = family_fit(f, ramp, expo)
                total += val
                sol[f] = x
            if best is None or total < best[0]:
                best = (total, ramp, expo, sol)
    assert best is not None
    _, ramp, expo, sol = best
    eff = {f: float(min(math.exp(x[0]), 3.0)) for f, x in sol.items()}
    anchor = eff.get("all_reduce", max(eff.values()))
    link_eff = min(anchor, 1.5)
    fam = {f: (eff[f] / link_eff if f in eff else 1.0) for f in FAMILY_NAMES}
    fam["all_reduce"] = 1.0
    # per-call floors per op; an op never fitted takes the mean of its family's fitted ops
    floors: dict[str, float] = {}
    for f, x in sol.items():
        for i, op in enumerate(ops_of[f]):
            floors[op] = float(math.exp(min(x[1 + i], 8.0))) * 1e-6
    for op, f in FAMILIES.items():
        if op not in floors:
            known = [floors[o] for o in ops_of.get(f, [])]
            floors[op] = float(np.mean(known)) if known else 0.0
    return Params(link_eff, ramp, expo, dict.fromkeys(PROTOCOLS, 1.0), fam, 1.0, floors)


def fit(
    m: CommMeasurements,
    system: str = "hgx-h200",
    base: CommProfile | None = None,
    iters: int = 150,
    grid: tuple[tuple[float, ...], tuple[float, ...]] = (
        (1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7),
        (0.2, 0.35, 0.5, 0.65, 0.8, 1.0),
    ),
) -> FitResult:
    """Fit the profile of ``system`` on the training part of ``m``; report errors on the held-out part."""
    m = aggregate(m)
    if base is None:
        base = _provisional_base(system)
    dom = cluster_for(system).system.nvlink_domain
    inter = (m.nodes > 1) | (m.gpus > dom)
    test_mask = held_out_mask(m)
    train, test = m.select(~test_mask), m.select(test_mask)
    intra_train = m.select(~test_mask & ~inter)
    if len(intra_train) < 8:
        raise SimcoreError(f"too few single-node measurements to fit ({len(intra_train)} training points)")
    prm = _fit_params(intra_train, system, base, iters, grid)
    prof = apply(base, prm)
    inter_train = m.select(~test_mask & inter)
    if len(inter_train) >= 4:
        prof = _fit_network(inter_train, system, prof, iters * 4)
    report: dict[str, Any] = {
        "split": f"held out: all of '{HELD_OUT_OP}' and every third log2 size of the other ops",
        "train": _errors(train, predict(train, prof, system)),
        "held_out": _errors(test, predict(test, prof, system)),
    }
    if np.any(inter):
        t_inter = m.select(test_mask & inter)
        if len(t_inter):
            report["held_out_multi_node"] = _errors(t_inter, predict(t_inter, prof, system))
    return FitResult(prof, prm, train, test, report)


def _fit_network(m: CommMeasurements, system: str, prof: CommProfile, iters: int) -> CommProfile:
    """Fit the network link curve (plateau, ramp) on multi-node points, NVLink side fixed."""
    plan = design(m, system)
    logt = np.log(m.time_s)

    def curve(v: NDArray[np.float64]) -> LinkCurve:
        return LinkCurve.model_construct(
            efficiency=float(min(math.exp(v[0]), 1.5)),
            ramp_bytes=float(10 ** (3.0 + 7.0 * _sigmoid(float(v[1])))),
            ramp_exponent=float(0.05 + 0.95 * _sigmoid(float(v[2]))),
        )

    def with_net(v: NDArray[np.float64]) -> CommProfile:
        return prof.model_copy(update={"links": {**prof.links, "network": curve(v)}})

    def loss(v: NDArray[np.float64]) -> float:
        r = np.log(predict(m, with_net(v), system, plan)) - logt
        return float(np.sum(r * r))

    best: tuple[float, NDArray[np.float64]] | None = None
    for ramp_logit in (-2.0, 0.0, 2.0):
        for expo_logit in (-1.0, 1.0):
            x = nelder_mead(loss, np.array([math.log(0.8), ramp_logit, expo_logit]), step=0.5, iters=iters)
            fx = loss(x)
            if best is None or fx < best[0]:
                best = (fx, x)
    assert best is not None
    return with_net(best[1])


def _provisional_base(system: str) -> CommProfile:
    """The starting point of a fit: the system's profile with any earlier fit undone (NCCL default
    latencies from ``fit_report.base``, neutral NVLink curve, no multipliers)."""
    path = builtin_dir() / "calibration" / f"comm-{system}.yaml"
    prof = read_profile(path) if path.is_file() else load_profile(system).profile
    base = prof.fit_report.get("base")
    data = prof.model_dump()
    if isinstance(base, dict):
        data.update(base)
        data["links"] = {
            **data["links"],
            "nvlink": {"efficiency": 1.0, "ramp_bytes": 0.0, "ramp_exponent": 1.0},
        }
        data["ops"] = {}
        data["dtypes"] = {}
    data.update(system=system, fit_report={}, provisional=True)
    return CommProfile.model_validate(data)


def _fmt_t(v: float) -> str:
    return f"{v * 1e6:.4g} us"


def overlap_slowdown(path: str | Path) -> float | None:
    """Median of ``overlapped_s / alone_s`` over the rows of ``tools/bench_overlap.py``'s CSV: how
    much slower compute kernels run beside a collective on another stream. ``None`` without rows."""
    import csv
    import gzip

    try:
        with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
            r = [
                float(x["overlapped_s"]) / float(x["alone_s"])
                for x in csv.DictReader(f)
                if float(x["alone_s"]) > 0
            ]
    except (OSError, KeyError, ValueError) as e:
        raise TraceError(f"cannot read the overlap measurements: {e}", file=str(path)) from None
    return float(np.median(r)) if r else None


def overlap_beside(path: str | Path) -> float | None:
    """:func:`overlap_slowdown` of ``overlap.csv.gz`` next to a collective measurement file, if any."""
    side = Path(path).parent / "overlap.csv.gz"
    return overlap_slowdown(side) if side.is_file() else None


def profile_yaml(
    res: FitResult, base: CommProfile, fitted_on: str, compute_slowdown: float | None = None
) -> str:
    """The fitted profile as YAML (unit strings; provenance in comments and fields)."""
    p = res.profile

    def pt(x: ProtoTimes) -> dict[str, str]:
        return {k: _fmt_t(float(v)) for k in PROTOCOLS if (v := x.get(k)) is not None}

    def raw(x: ProtoTimes) -> dict[str, str]:
        return pt(x)

    doc: dict[str, Any] = {
        "system": p.system,
        "provisional": False,
        "source": (
            f"fitted by simcore.calibration.fit_comm on {fitted_on}: NVLink curve (plateau, ramp), and per "
            "op family a bandwidth multiplier and a per-call floor; latencies are NCCL's defaults "
            "(src/graph/tuning.cc); network curve and NVLS efficiency stay at spec values"
        ),
        "fitted_on": fitted_on,
        **({"compute_slowdown": round(compute_slowdown, 4)} if compute_slowdown is not None else {}),
        "base_latency": {k: pt(v) for k, v in p.base_latency.items()},
        "hop_latency": {k: pt(v) for k, v in p.hop_latency.items()},
        "protocol_bandwidth": dict(p.protocol_bandwidth),
        "links": {
            k: {
                "efficiency": round(v.efficiency, 4),
                "ramp_bytes": f"{v.ramp_bytes:.4g} B",
                "ramp_exponent": round(v.ramp_exponent, 4),
            }
            for k, v in p.links.items()
        },
        "algorithms": dict(p.algorithms),
        "ops": {k: round(v, 4) for k, v in p.ops.items()},
        "dtypes": {k: round(v, 4) for k, v in p.dtypes.items()},
        "op_overhead": {k: _fmt_t(v) for k, v in p.op_overhead.items()},
        "peer_latency_fraction": p.peer_latency_fraction,
        "fit_report": {
            **_round(res.report),
            "base": {
                "base_latency": {k: raw(v) for k, v in base.base_latency.items()},
                "hop_latency": {k: raw(v) for k, v in base.hop_latency.items()},
            },
        },
        "notes": [
            "network link curve and NVLS efficiency not measured yet (2 GPUs in one node): spec values",
            "fit_report.base keeps the NCCL default latencies the scales multiply",
        ],
    }
    head = (
        "# Collective-cost profile of an HGX H200 node, FITTED on measurements (see fitted_on).\n"
        "# Regenerate: python -m simcore.validation comm "
        + fitted_on
        + " --system "
        + p.system
        + " --write\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, width=110)


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    return x


# ------------------------------------------------------------------------------------------------
# Reports
# ------------------------------------------------------------------------------------------------


def heldout_table(m: CommMeasurements, profile: CommProfile, system: str) -> list[dict[str, Any]]:
    """Per held-out/train, op and size class: points and median |error| of time."""
    m = aggregate(m)
    pred = predict(m, profile, system)
    err = np.abs(pred - m.time_s) / m.time_s
    mask = held_out_mask(m)
    rows = []
    for part, sel in (("held-out", mask), ("train", ~mask)):
        for op in sorted(set(m.op.tolist())) + ["ALL"]:
            for cls, cm in ((">=1MB", m.nbytes >= 1e6), ("<1MB", m.nbytes < 1e6)):
                s = sel & cm & ((m.op == op) if op != "ALL" else True)
                if s.any():
                    rows.append(
                        {
                            "set": part,
                            "op": op,
                            "sizes": cls,
                            "points": int(s.sum()),
                            "median_abs_error": float(np.median(err[s])),
                        }
                    )
    return rows


_SYSTEM_OF = {"H100": "hgx-h100", "A100": "hgx-a100", "H200": "hgx-h200"}


def published_check(path: Path | None = None) -> list[dict[str, Any]]:
    """Predicted vs published busbw for the rows of published_collectives.csv we can map (CHECK only)."""
    path = path or _published_path()
    rows: list[dict[str, Any]] = []
    if path is None or not path.is_file():
        return rows
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            gpu = r["gpu"]
            system = next((s for k, s in _SYSTEM_OF.items() if gpu.startswith(k)), None)
            if system is None or "all_reduce" not in r["collective"] or "across nodes" in r["collective"]:
                continue
            if not r["metric"].startswith(("busbw", "expected", "max_busbw")):
                continue
            try:
                # "2-8" GPUs: the published value holds for the whole range; check both ends
                gpu_counts = sorted({int(x) for x in r["num_gpus"].split("-")})
                nodes = int(r["num_nodes"] or 1)
                value = float(r["value"].split("-")[0])
            except ValueError:
                continue
            size_txt = r["message_size_bytes"]
            try:
                size = float(size_txt)
            except ValueError:
                size = (
                    4.0 * 2**30 if ("large" in size_txt or "GB" in size_txt or "G" in size_txt) else math.nan
                )
            if math.isnan(size):
                continue
            algo_txt = r["algorithm"].lower()
            algorithm = (
                "nvls" if algo_txt.startswith("nvls") else "ring" if algo_txt.startswith("ring") else "auto"
            )
            for n in gpu_counts:
                try:
                    res = collective_time(
                        "all_reduce", nbytes=size, gpus=n, system=system, nodes=nodes, algorithm=algorithm
                    )
                except SimcoreError:
                    continue
                pred = res.busbw / 1e9
                rows.append(
                    {
                        "system": system,
                        "gpus": n,
                        "nodes": nodes,
                        "algorithm": algorithm,
                        "nbytes": size,
                        "published_busbw_GBps": value,
                        "predicted_busbw_GBps": pred,
                        "error": (pred - value) / value,
                        "source": r["source"][:60],
                        "transferred_from": res.transferred_from,
                    }
                )
    return rows


def _published_path() -> Path | None:
    shipped = Path(__file__).resolve().parents[1] / "validation" / "data" / PUBLISHED
    if shipped.is_file():
        return shipped
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "reference" / PUBLISHED
        if cand.is_file():
            return cand
    return None


def report_comm(
    measurements: str | Path | None = None, system: str = "hgx-h200", out: Any = None
) -> dict[str, Any]:
    """Print the held-out error table of the built-in profile and the published-H100 comparison."""
    out = out or sys.stdout
    profile = load_profile(system).profile
    summary: dict[str, Any] = {"profile_provisional": profile.provisional}
    mpath = Path(measurements) if measurements else _repo_path(DEFAULT_TRACE)
    if mpath is not None and mpath.is_file():
        m = read_measurements(mpath)
        rows = heldout_table(m, profile, system)
        summary["heldout"] = rows
        print(f"== {system}: predicted vs measured time ({mpath}) ==", file=out)
        print(f"{'set':9} {'op':16} {'sizes':6} {'points':>6} {'median |err|':>13}", file=out)
        for r in rows:
            print(
                f"{r['set']:9} {r['op']:16} {r['sizes']:6} {r['points']:6d} {r['median_abs_error']:12.1%}",
                file=out,
            )
    else:
        print(f"no measurements at {mpath}; skipping the held-out table", file=out)
    pub = published_check()
    summary["published"] = pub
    if pub:
        print("\n== published all_reduce busbw (CHECK only, never fitted) ==", file=out)
        print(
            f"{'system':9} {'gpus':>4} {'nodes':>5} {'algo':5} {'size':>10} {'published':>9} {'predicted':>9} {'error':>7}",
            file=out,
        )
        for r in pub:
            print(
                f"{r['system']:9} {r['gpus']:4d} {r['nodes']:5d} {r['algorithm']:5} {r['nbytes']:10.3g} "
                f"{r['published_busbw_GBps']:9.1f} {r['predicted_busbw_GBps']:9.1f} {r['error']:+7.1%}",
                file=out,
            )
        for label, multi in (("single node", False), ("multi-node", True)):
            large = [abs(r["error"]) for r in pub if r["nbytes"] >= 256e6 and (r["nodes"] > 1) == multi]
            if large:
                key = "published_large_median_abs_error_" + ("multi_node" if multi else "single_node")
                summary[key] = float(np.median(large))
                print(
                    f"{label}: median |error| at >= 256 MB: {np.median(large):.1%} over {len(large)} rows",
                    file=out,
                )
    if profile.provisional:
        print("note: the profile is provisional (not fitted)", file=out)
    return summary


def _repo_path(rel: str) -> Path | None:
    root = builtin_dir().parent
    p = root / rel
    return p


def fit_files(files: list[str], system: str = "hgx-h200") -> tuple[FitResult, CommProfile]:
    """Fit ``system``'s comm profile on measurement files (nccl-tests logs or ``bench_comm`` CSVs),
    starting from its provisional profile; the fit and that base profile (:func:`profile_yaml` writes
    both)."""
    m = CommMeasurements.concat([read_measurements(f) for f in files])
    base = _provisional_base(system)
    return fit(m, system, base), base


def format_fit(res: FitResult) -> str:
    """A fit's error report (YAML, numbers to 4 decimals) and its parameters on one line: the NVLink
    plateau efficiency and ramp, the latency scales, the family multipliers and the fp32 factor."""
    prm = res.params
    return yaml.safe_dump(_round(res.report), sort_keys=False) + (
        f"\nnvlink efficiency {prm.efficiency:.3f}, ramp {prm.ramp_bytes:.3g} B ^{prm.ramp_exponent:.3f}; "
        f"latency scales {', '.join(f'{k} {v:.2f}' for k, v in prm.lat_scale.items())}; "
        f"families {', '.join(f'{k} {v:.3f}' for k, v in prm.family.items())}; fp32 {prm.fp32:.3f}"
    )
