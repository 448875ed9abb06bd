"""Engine step profiles from ``tools/bench_serving.py --steps`` (docs/serving.md, "Measured under load").

The steps collection (``steps_manifest.json`` beside ``steps_<engine>.csv.gz``, a row per request in the load
runs' format) holds, per engine, two kinds of points (``tools/bench_serving.py``'s ``plan_steps``):

* ``decode-b<N>-p<P>``: ``N`` requests of ``P`` prompt and ``O`` output tokens submitted together and admitted in
  one step, so they decode in lockstep: a request's ``(finish - first token) / (generated - 1)`` is the decode
  step of batch ``N``; over its ``O - 1`` decode steps the context runs from ``P + 1`` to ``P + O - 1``. The
  point's time is the median over its requests, its context the mean over the steps of the attended context
  (padded up to the engine's context buckets where the manifest lists them: the reference engine's CUDA graphs
  attend over the bucket, not the context);
* ``prefill-p<P>-<k>``: one request alone: its TTFT is the prefill of ``P`` tokens with the engine's host work of
  a step; the point's time is the median over the repeats.

Fits, weighted by ``1 / measured`` (least squares of the relative residuals, coefficients kept >= 0):

* decode ``t = c0 + c_batch * b + c_kv * b * ctx`` (a fixed cost per step, a cost per sequence, a cost per KV
  token attended: the three terms of a memory-bound decode step and its host work);
* prefill ``t = c0 + c_token * n + c_token2 * n^2`` (fixed, per-token GEMM work, causal attention).

The profile (:class:`~simcore.specs.serving.StepProfile`) keeps every point with its fitted value and the rms
relative residual; ``serving.step_profile`` makes ``simcore serve`` price steps with it
(:func:`simcore.serving.sim.profile_step_model`).
"""

from __future__ import annotations

import csv
import datetime
import gzip
import itertools
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import TraceError
from simcore.specs.serving import DecodeFit, PrefillFit, StepProfile, padded_context

MANIFEST = "steps_manifest.json"
_DECODE = re.compile(r"decode-b(\d+)-p(\d+)$")
_PREFILL = re.compile(r"prefill-p(\d+)-\d+$")


def steps_manifest(path: Path) -> Path | None:
    """``path``'s steps manifest: the file itself (named ``steps_manifest.json``) or the one in the folder."""
    if path.is_dir():
        path = path / MANIFEST
    return path if path.name == MANIFEST and path.is_file() else None


def _rows(path: Path) -> list[dict[str, str]]:
    with (
        gzip.open(path, "rt", newline="", encoding="utf-8")
        if path.suffix == ".gz"
        else open(path, newline="", encoding="utf-8") as f
    ):
        return list(csv.DictReader(f))


def _float(row: dict[str, str], key: str, where: str) -> float:
    try:
        return float(row[key])
    except (KeyError, ValueError):
        raise TraceError(f"{key}: not a number ({row.get(key)!r})", file=where) from None


def points(rows: list[dict[str, str]], where: str, buckets: list[int] | None = None) -> tuple[
    list[tuple[float, float, float]], list[tuple[float, float]]
]:  # fmt: skip
    """The decode points ``(batch, mean attended context, step s)`` and prefill points ``(prompt tokens, s)`` of
    one engine's rows (module docstring); rows of other runs are ignored."""
    dec: dict[str, list[dict[str, str]]] = defaultdict(list)
    pre: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        run = r.get("run", "")
        if _DECODE.match(run):
            dec[run].append(r)
        elif m := _PREFILL.match(run):
            first, sub = _float(r, "first_token_s", where), _float(r, "arrival_s", where)
            if math.isfinite(first - sub):
                pre[int(m.group(1))].append(first - sub)
    out_d: list[tuple[float, float, float]] = []
    for run, rs in dec.items():
        m = _DECODE.match(run)
        assert m is not None
        tpot = []
        for r in rs:
            g = _float(r, "generated", where)
            dt = _float(r, "finish_s", where) - _float(r, "first_token_s", where)
            if g >= 2 and math.isfinite(dt):
                tpot.append(dt / (g - 1))
        if not tpot:
            continue
        p, o = int(rs[0]["prompt_len"]), int(rs[0]["output_len"])
        ctx = [float(p + k) for k in range(1, max(o, 2))]
        if buckets:
            ctx = [padded_context(buckets, x) for x in ctx]
        out_d.append((float(m.group(1)), float(np.mean(ctx)), float(np.median(tpot))))
    out_p = [(float(n), float(np.median(v))) for n, v in sorted(pre.items())]
    return sorted(out_d), out_p


def nonneg_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Coefficients ``c >= 0`` minimising ``sum(((x @ c) / y - 1)^2)``: the best over every subset of
    columns of the unconstrained weighted fit whose coefficients are all non-negative (a handful of columns)."""
    a = x / y[:, None]
    ones = np.ones_like(y)
    best: tuple[float, np.ndarray] | None = None
    cols = range(x.shape[1])
    for k in range(1, x.shape[1] + 1):
        for sub in itertools.combinations(cols, k):
            c_sub = np.linalg.lstsq(a[:, sub], ones, rcond=None)[0]
            if np.any(c_sub < 0):
                continue
            c = np.zeros(x.shape[1])
            c[list(sub)] = c_sub
            err = float(np.sum((a @ c - 1.0) ** 2))
            if best is None or err < best[0]:
                best = (err, c)
    if best is None:
        raise TraceError("no non-negative fit")
    return best[1]


def _rms(fit: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((fit / y - 1.0) ** 2)))


def fit_decode(pts: list[tuple[float, float, float]]) -> DecodeFit:
    """:class:`DecodeFit` of decode points ``(batch, context, s)`` (at least 3 with 2 batches)."""
    if len(pts) < 3 or len({p[0] for p in pts}) < 2:
        raise TraceError(f"{len(pts)} decode point(s): the fit needs at least 3 over 2 batch sizes")
    b, c, y = (np.array(v) for v in zip(*pts, strict=True))
    x = np.column_stack([np.ones_like(b), b, b * c])
    coef = nonneg_fit(x, y)
    f = x @ coef
    return DecodeFit(c0=float(coef[0]), c_batch=float(coef[1]), c_kv=float(coef[2]),
                     points=[[float(v) for v in row] for row in zip(b, c, y, f, strict=True)],
                     rms_rel=_rms(f, y))  # fmt: skip


def fit_prefill(pts: list[tuple[float, float]]) -> PrefillFit:
    """:class:`PrefillFit` of prefill points ``(prompt tokens, s)`` (at least 3 lengths)."""
    if len(pts) < 3:
        raise TraceError(f"{len(pts)} prefill length(s): the fit needs at least 3")
    n, y = (np.array(v) for v in zip(*pts, strict=True))
    x = np.column_stack([np.ones_like(n), n, n * n])
    coef = nonneg_fit(x, y)
    f = x @ coef
    return PrefillFit(c0=float(coef[0]), c_token=float(coef[1]), c_token2=float(coef[2]),
                      points=[[float(v) for v in row] for row in zip(n, y, f, strict=True)], rms_rel=_rms(f, y))  # fmt: skip


def gpu_tag(gpu: str | None) -> str:
    """A short name of the GPU the driver reports (``NVIDIA H100 80GB HBM3`` -> ``h100``; none: ``cpu``)."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu or "")
    return m.group(1).lower() if m else "cpu"


def profile_name(engine: str, gpu: str | None) -> str:
    """The name of ``engine``'s step profile on ``gpu``: ``served-<engine>-<gpu tag>``."""
    return f"served-{engine}-{gpu_tag(gpu)}"


def fit(path: Path) -> list[StepProfile]:
    """One :class:`StepProfile` per engine of a steps collection (its manifest, or the folder holding it)."""
    man_path = steps_manifest(path)
    if man_path is None:
        raise TraceError(f"no {MANIFEST} here", file=str(path))
    try:
        man = json.loads(man_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as ex:
        raise TraceError(f"unreadable steps manifest: {ex}", file=str(man_path)) from None
    folder = man_path.parent
    out = []
    for engine, scenarios in sorted((man.get("engines") or {}).items()):
        csv_path = next((p for p in (folder / f"steps_{engine}.csv.gz", folder / f"steps_{engine}.csv") if p.is_file()),
                        None)  # fmt: skip
        if csv_path is None or not scenarios:
            continue
        name, info = next(iter(scenarios.items()))
        sc = (man.get("scenarios") or {}).get(name, {})
        buckets = info.get(
            "context_buckets"
        )  # the reference engine pads graphed and eager decode steps alike
        where = str(csv_path)
        try:
            dec, pre = points(_rows(csv_path), where, buckets)
            d, p = fit_decode(dec), fit_prefill(pre)
        except TraceError as ex:
            raise TraceError(f"{engine}: {ex.args[0] if ex.args else ex}", file=where) from None
        tag = gpu_tag(man.get("gpu"))
        out.append(
            StepProfile(
                name=profile_name(engine, man.get("gpu")), engine=engine, gpu=man.get("gpu") or man.get("device", "cpu"), device=tag,
                model=str(sc.get("model", {}).get("name", "?")) + (" (smoke)" if man.get("smoke") else ""),
                precision=str(sc.get("precision", "bf16")),
                context_buckets=buckets or None, decode=d, prefill=p,
                source=str(man_path), fitted=datetime.datetime.now(datetime.UTC).date().isoformat(),
            )
        )  # fmt: skip
    if not out:
        raise TraceError("no engine with steps rows in this collection", file=str(man_path))
    return out


def to_yaml(prof: StepProfile) -> str:
    """The profile as the YAML ``hardware_specs/calibration/<name>.yaml`` holds (a comment header first)."""
    import yaml

    head = (
        f"# {prof.name}: measured step costs of the {prof.engine} serving engine on {prof.gpu}, written by\n"
        f"# `simcore calibrate` (simcore/calibration/fit_served.py) from {prof.source}.\n"
        "# Fitted numbers only; docs/serving.md, 'Measured under load'. points: decode [batch, context, measured s,\n"
        "# fitted s], prefill [prompt tokens, measured s, fitted s].\n"
    )
    data: dict[str, Any] = prof.model_dump(mode="json")
    for part in ("decode", "prefill"):
        data[part]["points"] = [[float(f"{v:.4g}") for v in row] for row in data[part]["points"]]
    return head + yaml.safe_dump(data, sort_keys=False, width=118, default_flow_style=None)


def write(profiles: list[StepProfile], folder: Path) -> list[Path]:
    """Write each profile to ``folder/<name>.yaml``; the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for prof in profiles:
        path = folder / f"{prof.name}.yaml"
        path.write_text(to_yaml(prof), encoding="utf-8")
        paths.append(path)
    return paths


def summary(prof: StepProfile) -> str:
    """One line per fit: its coefficients and rms relative residual."""
    d, p = prof.decode, prof.prefill
    return (
        f"{prof.name}: decode t = {d.c0 * 1e3:.3g} ms + {d.c_batch * 1e6:.3g} us x batch + {d.c_kv * 1e9:.3g} ns x KV "
        f"tokens (rms {d.rms_rel:.1%}, {len(d.points)} points); prefill t = {p.c0 * 1e3:.3g} ms + "
        f"{p.c_token * 1e6:.3g} us x n + {p.c_token2 * 1e9:.3g} ns x n^2 (rms {p.rms_rel:.1%}, {len(p.points)} points)"
    )


__all__ = ["MANIFEST", "fit", "fit_decode", "fit_prefill", "gpu_tag", "nonneg_fit", "points", "profile_name", "steps_manifest",
           "summary", "to_yaml", "write"]  # fmt: skip
