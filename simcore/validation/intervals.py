"""Prediction intervals from the accuracy reports' errors: fit on one half of the rows, check on the other.

Every measurement the accuracy reports compare becomes one *row*: its class
(:func:`simcore.specs.intervals.class_key`: calibrated or transferred GPU, one GPU / one node / a
cluster, training or inference) and its ratio measured / predicted. The rows are

* ``steps``: whole training steps, prefills and decode steps on one H200 and on one H100
  (``python -m simcore.validation steps`` and the ``devices`` report's H100 table);
* ``traces``: the held-apart profiler traces of ``traces/validate.csv`` (one and two GPUs);
* ``published``: the published training tables' configurations (``published``; each configuration's
  primary metric, converted to a step time by the table's own FLOP formula).

A row belongs to the fit half or the check half by a hash of its name (:func:`half`), so the split is
the same on every machine and does not move when rows are added. :func:`fit` takes the central
``level`` quantiles of the ratio per class (and per pooled class) over the fit half;
:func:`coverage` counts how many check-half rows fall inside the interval their class gets. The fit is
what ``simcore calibrate --intervals`` writes to ``hardware_specs/calibration/intervals.yaml``; the
check is ``python -m simcore.validation intervals``. See docs/accuracy.md, "Prediction intervals".
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simcore.specs.intervals import IntervalClass, Intervals, class_key, lookup, parents

LEVEL = 0.8
"""The intervals' nominal coverage."""
MIN_N = 10
"""Fewest fit rows a class needs before its own quantiles are used (else its pooled parent's)."""
SPLIT = "sha1(report:name) even -> fit, odd -> check"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Row:
    """One compared measurement: which report, its name there, its class, measured / predicted."""

    report: str
    name: str
    key: str
    ratio: float

    @property
    def half(self) -> str:
        return half(self.report, self.name)


def half(report: str, name: str) -> str:
    """``fit`` or ``check``: the parity of the SHA-1 of ``report:name`` (stable across machines)."""
    digest = hashlib.sha1(f"{report}:{name}".encode()).digest()
    return "fit" if digest[-1] % 2 == 0 else "check"


def _calibrated(device_name: str) -> bool:
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    return not load_profile(default_registry().device(device_name)).transferred_from


def _kind(mode: str) -> str:
    return "training" if mode in ("train", "training") else "inference"


def steps_rows(progress: Progress | None = None) -> list[Row]:
    """The H200 and H100 step tables (``steps`` report; one GPU each)."""
    from simcore.validation.inputs import report_inputs
    from simcore.validation.steps import traces_dir, validate

    out: list[Row] = []
    for label, path in (("h200", None), ("h100", traces_dir() / report_inputs()["h100_steps"])):
        if progress:
            progress(f"steps: {label}")
        res = validate(path)
        cal = _calibrated(res["device"])
        for r in res["rows"]:
            name = f"{label}:{r['mode']}:{r['name']}:{r['framework']}:{r['micro_batch']}:{r['seq_len']}:{r['recompute']}"
            out.append(
                Row("steps", name, class_key(cal, 1, _kind(r["mode"])), r["measured_s"] / r["predicted_s"])
            )
    return out


def trace_rows(progress: Progress | None = None) -> list[Row]:
    """The held-apart profiler traces (``traces`` report): the slowest rank's step, measured / predicted."""
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import load_scenario, resolve_cluster
    from simcore.validation import trace_report as TR

    cases = [c for c in TR.read_index() if c.held_apart]
    out: list[Row] = []
    for i, c in enumerate(cases):
        if progress and i % 25 == 0:
            progress(f"traces: {i}/{len(cases)}")
        (res,) = TR.run([c])
        sc = load_scenario(str(c.scenario))
        cluster = resolve_cluster(sc.cluster, default_registry())
        cal = _calibrated(cluster.device.name)
        key = class_key(cal, len(c.traces), sc.kind)
        out.append(Row("traces", c.name, key, res["measured_step_time_s"] / res["predicted_step_time_s"]))
    return out


def published_rows(
    csvs: Iterable[str | Path | None] = (None,), progress: Progress | None = None
) -> list[Row]:
    """Each published configuration's primary metric (``published`` report), as a step-time ratio."""
    from simcore.specs.registry import default_registry
    from simcore.validation import published as P

    reg = default_registry()
    out: list[Row] = []
    for csv in csvs:
        if progress:
            progress(f"published: {csv or 'default table'}")
        table = P.load_published(csv)
        system = {x.index: x.system for x in table}
        for r in P.predict_rows(table):
            if not r.primary or r.problem is not None or not math.isfinite(r.error):
                continue
            cal = _calibrated(reg.system(system[r.index]).device)
            # error = published step / predicted step - 1 (per-GPU throughput convention)
            name = f"{Path(str(csv)).name if csv else 'default'}:{r.index}"
            out.append(Row("published", name, class_key(cal, r.gpus, "training"), 1.0 + r.error))
    return out


def default_published_csvs() -> list[str | Path | None]:
    """The published tables the ``published`` report reads: its default and the 2025 Megatron-Bridge one."""
    return [None, Path(__file__).parent / "data" / "published_training_2025.csv"]


def collect(progress: Progress | None = None, traces: bool = True) -> list[Row]:
    """Every row of every source (``traces=False`` leaves the slow trace report out)."""
    rows = steps_rows(progress) + published_rows(default_published_csvs(), progress)
    if traces:
        rows += trace_rows(progress)
    return rows


def fit(rows: list[Row], level: float = LEVEL, min_n: int = MIN_N) -> Intervals:
    """Quantiles of measured / predicted per class and pooled class over the fit-half ``rows``."""
    ratios: dict[str, list[float]] = defaultdict(list)
    sources: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.half != "fit":
            continue
        sources[r.report] += 1
        for k in parents(r.key):
            ratios[k].append(r.ratio)
    classes = {}
    for k, v in sorted(ratios.items()):
        low, high = conformal_bounds(v, level)
        classes[k] = IntervalClass(n=len(v), low=low, high=high, median=float(np.median(v)))
    return Intervals(
        level=level, min_n=min_n, split=SPLIT, sources=dict(sorted(sources.items())), classes=classes
    )


def conformal_bounds(values: list[float], level: float) -> tuple[float, float]:
    """The split-conformal central interval of ``values``: the ``floor((n + 1) a)``-th smallest and the
    ``ceil((n + 1) (1 - a))``-th smallest, ``a = (1 - level) / 2`` (clipped to the sample). A new value
    from the same distribution falls inside with probability at least ``level`` (where ``n`` is large
    enough for the order statistics to exist), unlike the plain sample quantiles, which cover less than
    ``level`` at small ``n``."""
    v = np.sort(np.asarray(values, dtype=float))
    n = v.size
    a = (1.0 - level) / 2.0
    # rounded first: (n + 1) a is often an integer that floating point leaves a hair below or above
    lo = min(max(math.floor(round((n + 1) * a, 9)), 1), n)
    hi = min(max(math.ceil(round((n + 1) * (1.0 - a), 9)), 1), n)
    return float(v[lo - 1]), float(v[hi - 1])


def coverage(iv: Intervals, rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Per class used (and ``all``): check-half rows, how many fell inside their interval, the fraction."""
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        if r.half != "check":
            continue
        hit = lookup(iv, r.key)
        if hit is None:
            continue
        used, c = hit
        inside = int(c.low <= r.ratio <= c.high)
        for k in (f"{r.report} -> {used}", "all"):
            stats[k][0] += 1
            stats[k][1] += inside
    return {k: {"n": n, "inside": i, "coverage": i / n} for k, (n, i) in sorted(stats.items())}


def to_yaml(iv: Intervals) -> str:
    """The intervals file's text (what :func:`simcore.specs.intervals.load_intervals` reads)."""
    import yaml

    head = (
        "# Prediction intervals: quantiles of measured / predicted per class, over the fit half of the\n"
        "# accuracy reports' rows. Written by `simcore calibrate --intervals`; checked on the other half by\n"
        "# `python -m simcore.validation intervals` (docs/accuracy.md, Prediction intervals).\n"
    )
    return head + yaml.safe_dump(iv.model_dump(), sort_keys=False)


def format_report(iv: Intervals, cov: dict[str, dict[str, Any]]) -> str:
    """The classes' intervals and the check half's coverage, as text."""
    lines = [
        f"{iv.level:.0%} intervals of measured / predicted (fit half: {iv.sources}; min {iv.min_n} rows a class)"
    ]
    lines.append(f"{'class':34s} {'n':>4s} {'low':>6s} {'median':>7s} {'high':>6s}")
    for k, c in iv.classes.items():
        flag = "" if c.n >= iv.min_n else "  (too few: pooled class used)"
        lines.append(f"{k:34s} {c.n:4d} {c.low:6.3f} {c.median:7.3f} {c.high:6.3f}{flag}")
    lines.append("")
    lines.append("check half (rows not used to fit): inside the interval their class gets")
    for k, s in cov.items():
        lines.append(f"{k:46s} {s['inside']:4d}/{s['n']:<4d} {s['coverage']:6.1%}")
    return "\n".join(lines)
