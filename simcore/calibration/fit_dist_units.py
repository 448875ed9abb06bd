"""Host seconds of plain PyTorch's distributed wrappers per unit of their work, from unprofiled
host-bound steps (``tools/bench_dist_steps.py --units``, collect suite ``dist-units``; files
``host_dist_units_rank<r>.csv.gz``):

* ``ddp_bucket``: DDP's Reducer host per gradient bucket, the slope of a step's host seconds over
  DDP's own bucket count at one model (``bucket_cap_mb`` swept);
* ``fsdp_group``: FSDP2's host per ``fully_shard`` group (forward and backward of one micro-batch),
  the slope over the group count at one model (blocks sharded 1, 2, 4, all per group);
* ``pp_action``: torch.distributed.pipelining's host per schedule action (one stage's forward or
  backward of one micro-batch), the step's excess over the same layers run as plain gradient
  accumulation over the same micro-batches, per action, from the points whose stages share one rank
  (the point-to-point calls of the others are priced apart).

Rows are split by a stable hash of the point (variant, pass, rank, micro-batches, stages): the values
are fitted on one half and :func:`check` reports the other half's errors per family (DDP, FSDP2,
pipelining GPipe / 1F1B by micro-batch count, and all pipelining rows pooled), so a fitted value is
never judged on its own rows.

What one rank can measure (:data:`ONE_RANK`): at world size 1 DDP's Reducer still fills, launches
and finishes every bucket through a one-rank process group (``reducer.cpp``: no world-size branch;
NCCL completes a one-rank in-place all-reduce without a kernel, so only NCCL's own multi-rank launch
is missing from ``ddp_bucket``), and stages sharing the rank still run every action
(``schedules.py``: ``set_local_fwd_input`` in place of the point-to-point calls, which are priced
apart). FSDP2 does not: ``_fsdp_collectives.py`` ``foreach_reduce`` replaces the reduce-scatter by a
copy at world size 1 and its all-gather is a one-rank call, so ``fsdp_group`` is fitted only on rows
of two or more ranks (docs/parallelism.md, "Plain PyTorch's distributed host costs").
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from simcore.errors import TraceError

UNIT_COLUMNS = ("family", "variant", "host_s", "buckets", "groups", "actions", "micro_batches", "stages")
"""The columns that mark a ``--units`` file (and that the fit reads)."""

_UNIT = {"ddp": "buckets", "fsdp": "groups"}
_ENTRY = {"ddp": "ddp_bucket", "fsdp": "fsdp_group", "pp": "pp_action"}
ONE_RANK = frozenset({"ddp", "pp"})
"""The families whose per-unit host a world-size-1 run measures (module docstring); the others are
fitted only on rows of two or more ranks (the ``world`` column; rows without it count as one rank)."""
Row = Mapping[str, str]


def _world(row: Row) -> int:
    try:
        return int(row.get("world") or 1)
    except ValueError:
        return 1


def _usable(rows: Sequence[Row]) -> list[Row]:
    """The rows whose family's code path at their world size is the multi-rank one."""
    return [r for r in rows if r["family"] in ONE_RANK or _world(r) >= 2]


def not_fitted(rows: Sequence[Row]) -> list[str]:
    """One line per family present in ``rows`` that the fit leaves out because its rows ran on one rank."""
    fams = sorted({r["family"] for r in rows} - {r["family"] for r in _usable(rows)})
    return [
        f"{_ENTRY.get(f, f)} not fitted: its rows ran at world size 1, where FSDP2 copies instead of "
        "reduce-scattering and its all-gather is a one-rank call (docs/parallelism.md)"
        for f in fams
    ]


def is_dist_units_run(rows: Sequence[Row]) -> bool:
    """Whether ``rows`` are ``tools/bench_dist_steps.py --units`` rows."""
    return bool(rows) and all(c in rows[0] for c in UNIT_COLUMNS)


def fit_half(row: Row) -> bool:
    """The hash split: rows whose point hashes even are fitted, the others only checked."""
    key = "|".join(row.get(c, "") for c in ("family", "variant", "pass", "rank", "micro_batches", "stages"))
    return zlib.crc32(key.encode()) % 2 == 0


def _num(row: Row, col: str, path: str) -> float:
    try:
        return float(row[col])
    except (KeyError, ValueError):
        raise TraceError(f"column {col!r} is not a number: {row.get(col)!r}", file=path) from None


def _line(xy: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares ``y = a + b x``; None without two distinct ``x``."""
    xs = [x for x, _ in xy]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in xy)
    b = sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def _accum_pairs(rows: Sequence[Row], path: str) -> list[tuple[Row, float, float]]:
    """Each pipelining row whose stages share one rank (no point-to-point calls: those are priced
    apart, :func:`simcore.engine.training.pipeline_p2p_calls`) with its plain gradient-accumulation
    twin (same pass, rank, stages and micro-batches): ``(row, excess seconds, actions)``."""

    def key(r: Row) -> tuple[str, ...]:
        return (r.get("pass", ""), r["rank"], r["stages"], r["micro_batches"])

    accum = {
        key(r): _num(r, "host_s", path)
        for r in rows
        if r["family"] == "pp" and r["variant"].startswith("accum")
    }
    out = []
    for r in rows:
        if r["family"] != "pp" or r["variant"].startswith("accum") or r.get("p2p_ops", "") not in ("", "0"):
            continue
        if key(r) in accum:
            acts = _num(r, "actions", path)
            if acts > 0:
                out.append((r, _num(r, "host_s", path) - accum[key(r)], acts))
    return out


def _lines(rows: Sequence[Row], path: str) -> dict[str, tuple[float, float]]:
    out = {}
    for fam, col in _UNIT.items():
        pts = [
            (_num(r, col, path), _num(r, "host_s", path))
            for r in rows
            if r["family"] == fam and r["variant"] != "plain" and _num(r, col, path) > 0
        ]
        line = _line(pts)
        if line is not None:
            out[fam] = line
    return out


def dist_unit_costs(rows: Sequence[Row], path: str | Path) -> dict[str, float]:
    """``ddp_bucket``, ``fsdp_group``, ``pp_action`` (host seconds per unit) from the fit half of
    ``rows`` (:func:`fit_half`); a family without two distinct unit counts, or measured only where its
    code path is not the multi-rank one (:data:`ONE_RANK`, :func:`not_fitted`), is left out."""
    p = str(path)
    fit = [r for r in _usable(rows) if fit_half(r)]
    lines = _lines(fit, p)
    out = {_ENTRY[fam]: max(b, 0.0) for fam, (_a, b) in lines.items()}
    excess = [e / acts for _r, e, acts in _accum_pairs(fit, p)]
    if excess:
        out["pp_action"] = max(statistics.median(excess), 0.0)
    return out


def check(rows: Sequence[Row], path: str | Path) -> dict[str, float]:
    """Median |error| (fraction) of the check half's step host per family, predicted from the fit
    half's values: ``ddp``, ``fsdp`` (the fitted line over buckets / groups), ``pp_<order>_m<k>``
    (the accumulation twin's host plus ``actions x pp_action``; ``order`` gpipe or 1f1b, ``k`` the
    micro-batch count) and ``pp`` (every pipelining row pooled); only the families fitted."""
    p = str(path)
    usable = _usable(rows)
    fit = [r for r in usable if fit_half(r)]
    held = [r for r in usable if not fit_half(r)]
    lines = _lines(fit, p)
    errs: dict[str, list[float]] = {}
    for r in held:
        fam = r["family"]
        if fam in lines and r["variant"] != "plain":
            a, b = lines[fam]
            meas = _num(r, "host_s", p)
            errs.setdefault(fam, []).append(abs(a + b * _num(r, _UNIT[fam], p) - meas) / meas)
    costs = dist_unit_costs(rows, p)
    if "pp_action" in costs:
        for r, excess, acts in _accum_pairs(held, p):
            meas = _num(r, "host_s", p)
            pred = meas - excess + acts * costs["pp_action"]
            order = r["variant"].split("_", 1)[0]
            for key in (f"pp_{order}_m{r['micro_batches']}", "pp"):
                errs.setdefault(key, []).append(abs(pred - meas) / meas)
    return {k: statistics.median(v) for k, v in sorted(errs.items())}
