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
  token attended: the three terms of a memory-bound decode step and its host work), a term the points do not
  determine dropped (:func:`determined_fit`);
* prefill ``t = max(c0, c_token * n + c_token2 * n^2)`` (the host's issue time of an eager pass, under which the
  GPU runs; or the GPU's work: per-token GEMMs and causal attention), ``c_token2 / c_token`` the roofline's
  (:func:`attention_ratio`) where the points cannot separate the two (:func:`fit_prefill`); and, for an engine of
  separate prefill passes, ``c_shape``: what the first pass of an input shape not run before adds
  (:func:`shape_setup`).

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


def points(rows: list[dict[str, str]], where: str, buckets: list[int] | None = None,
           cold: frozenset[str] = frozenset()) -> tuple[list[tuple[float, float, float]], list[tuple[float, float]]]:
    """The decode points ``(batch, mean attended context, step s)`` and prefill points ``(prompt tokens, s)`` of
    one engine's rows (module docstring); rows of other runs are ignored. A prefill repeat in ``cold`` (a pass of a
    shape the engine had not run, :func:`passes`, priced apart by ``c_shape``) is left out of its length's median
    where a later repeat remains."""
    dec: dict[str, list[dict[str, str]]] = defaultdict(list)
    pre: dict[int, list[float]] = defaultdict(list)
    pre_cold: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        run = r.get("run", "")
        if _DECODE.match(run):
            dec[run].append(r)
        elif m := _PREFILL.match(run):
            first, sub = _float(r, "first_token_s", where), _float(r, "arrival_s", where)
            if math.isfinite(first - sub):
                (pre_cold if run in cold else pre)[int(m.group(1))].append(first - sub)
    for n, v in pre_cold.items():
        if not pre[n]:
            pre[n] = v
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
        p, o = int(_float(rs[0], "prompt_len", where)), int(_float(rs[0], "output_len", where))
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


T_MIN = 2.0
"""A fitted term is kept where its coefficient is at least this many standard errors (a two-sided ~95 % test)."""


def determined_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`nonneg_fit` keeping only the terms the points determine: while a term beyond the first (the constant)
    has a coefficient under :data:`T_MIN` standard errors of the weighted fit (residual variance over ``n - p``
    degrees of freedom), the least determined one is dropped (set to 0) and the rest refitted. A term whose effect
    over the points' range is below their scatter would otherwise take a value from the scatter and carry it to
    batches and contexts the points never reached."""
    keep = list(range(x.shape[1]))
    while True:
        c = np.zeros(x.shape[1])
        c[keep] = nonneg_fit(x[:, keep], y)
        live = [j for j in keep if c[j] > 0]
        a = x[:, live] / y[:, None]
        dof = y.size - len(live)
        r = a @ c[live] - 1.0
        if dof <= 0:
            return c
        cov = float(r @ r) / dof * np.linalg.pinv(a.T @ a)
        t = {j: c[j] / math.sqrt(max(cov[i, i], 1e-300)) for i, j in enumerate(live) if j > 0}
        weak = [j for j in t if t[j] < T_MIN]
        if not weak:
            return c
        keep = [j for j in keep if j in live and j != min(weak, key=lambda j: t[j])]


def _rms(fit: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((fit / y - 1.0) ** 2)))


def fit_decode(pts: list[tuple[float, float, float]]) -> DecodeFit:
    """:class:`DecodeFit` of decode points ``(batch, context, s)`` (at least 3 with 2 batches)."""
    if len(pts) < 3 or len({p[0] for p in pts}) < 2:
        raise TraceError(f"{len(pts)} decode point(s): the fit needs at least 3 over 2 batch sizes")
    b, c, y = (np.array(v) for v in zip(*pts, strict=True))
    x = np.column_stack([np.ones_like(b), b, b * c])
    coef = determined_fit(x, y)
    f = x @ coef
    return DecodeFit(c0=float(coef[0]), c_batch=float(coef[1]), c_kv=float(coef[2]),
                     points=[[float(v) for v in row] for row in zip(b, c, y, f, strict=True)],
                     rms_rel=_rms(f, y))  # fmt: skip


def fit_prefill(pts: list[tuple[float, float]], rho: float | None = None) -> PrefillFit:
    """:class:`PrefillFit` of prefill points ``(prompt tokens, s)`` (at least 3 lengths): ``t = max(c0, c_token n
    + c_token2 n^2)``. Each split of the points by length into host-bound (the shorter) and GPU-bound (the longer,
    at least one) is fitted apart, ``c0`` on the first, the GPU terms on the second, and the split whose model
    fits all points best is kept. Both GPU terms are free (non-negative) unless that zeroes one of them: single
    prompts of a few lengths, most of them host-bound, may not separate the GEMMs' linear term from the
    attention's quadratic one, and neither is absent from a real prefill; then ``c_token2 / c_token`` is
    ``rho``, the roofline's (:func:`attention_ratio`), where given."""
    if len(pts) < 3:
        raise TraceError(f"{len(pts)} prefill length(s): the fit needs at least 3")
    free = _fit_prefill(pts, None)
    if rho is not None and (free.c_token == 0.0 or free.c_token2 == 0.0):
        return _fit_prefill(pts, rho)
    return free


def _fit_prefill(pts: list[tuple[float, float]], rho: float | None) -> PrefillFit:
    n, y = (np.array(v) for v in zip(*sorted(pts), strict=True))
    best: tuple[float, float, float, float] | None = None
    for s in range(len(n)):
        host, gpu = slice(0, s), slice(s, len(n))
        c0 = float(np.sum(1 / y[host]) / np.sum(1 / y[host] ** 2)) if s else 0.0
        if rho is not None:
            g = (n + rho * n * n)[gpu] / y[gpu]
            c1 = float(np.sum(g) / np.sum(g * g))
            c2 = rho * c1
        else:
            x = np.column_stack([n, n * n])[gpu] if len(n) - s >= 2 else n[gpu, None]
            c = nonneg_fit(x, y[gpu])
            c1, c2 = float(c[0]), float(c[1]) if c.size > 1 else 0.0
        f = np.maximum(c0, c1 * n + c2 * n * n)
        err = _rms(f, y)
        if best is None or err < best[0]:
            best = (err, c0, c1, c2)
    assert best is not None
    err, c0, c1, c2 = best
    f = np.maximum(c0, c1 * n + c2 * n * n)
    return PrefillFit(c0=c0, c_token=c1, c_token2=c2,
                      points=[[float(v) for v in row] for row in zip(n, y, f, strict=True)], rms_rel=err)  # fmt: skip


def passes(runs: list[str]) -> dict[str, tuple[int, int, bool]]:
    """Each run's admission pass, in the order the collection ran them in one engine process: ``run -> (prompts
    k, length P, new)``, ``new`` where no earlier run had the shape ``(k, P)`` (a decode point's ``N`` prompts are
    admitted in one pass, a prefill point is one prompt)."""
    seen: set[tuple[int, int]] = set()
    out: dict[str, tuple[int, int, bool]] = {}
    for run in runs:
        if m := _DECODE.match(run):
            shape = (int(m.group(1)), int(m.group(2)))
        elif m := _PREFILL.match(run):
            shape = (1, int(m.group(1)))
        else:
            continue
        out[run] = (*shape, shape not in seen)
        seen.add(shape)
    return out


def pass_time(p: PrefillFit, k: int, n: int) -> float:
    """:class:`PrefillFit`'s time of one pass of ``k`` prompts of ``n`` tokens, of a shape run before (s)."""
    return max(p.c0, p.c_token * k * n + p.c_token2 * k * n * n)


def shape_setup(rows: list[dict[str, str]], runs: list[str], prefill: PrefillFit, where: str) -> float:
    """Seconds the first pass of a new input shape adds: the median, over every admission pass of a shape the
    engine process had not run (:func:`passes`; the prefill points' first repeats and the decode points' passes of
    ``N`` prompts), of its TTFT (the median over its requests) less ``prefill``'s time of that pass. Left out: the
    collection's first run, which also pays the engine's cold start, and passes of more tokens than the longest
    prefill point (outside the range ``prefill`` was fitted on). 0 where no pass qualifies."""
    ttft: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        t = _float(r, "first_token_s", where) - _float(r, "arrival_s", where)
        if math.isfinite(t):
            ttft[r.get("run", "")].append(t)
    top = max((row[0] for row in prefill.points), default=0.0)
    extra = [
        float(np.median(ttft[run])) - pass_time(prefill, k, n)
        for i, (run, (k, n, new)) in enumerate(passes(runs).items())
        if new and i > 0 and ttft[run] and k * n <= top
    ]
    return max(float(np.median(extra)), 0.0) if extra else 0.0


def attention_ratio(model: dict[str, Any], precision: str, tag: str) -> float | None:
    """The roofline's ratio of a prompt's attention term to its GEMM term, ``c_token2 / c_token``: the slopes of
    simcore's prefill tables (:func:`simcore.serving.sim.build_step_model`, the model on one GPU of ``hgx-<tag>``)
    between 2,048 and 4,096 tokens, ``[A(n2) - A(n1)] / (n2^2 - n1^2)`` over ``[R(n2) - R(n1)] / (n2 - n1)``.
    ``None`` where the model or system is not one simcore can build (a smoke run's partial model)."""
    from simcore.errors import SimcoreError
    from simcore.serving.sim import build_step_model
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import load_scenario, resolve_cluster

    n1, n2 = 2048.0, 4096.0
    try:
        sc = load_scenario({"name": "step-profile-prior", "kind": "serving", "model": model,
                            "cluster": {"system": f"hgx-{tag}", "gpus": 1}, "inference": {"precision": precision},
                            "serving": {"rate": 1.0}})  # fmt: skip
        st = build_step_model(sc, resolve_cluster(sc.cluster, default_registry()), 1, 2, int(n2), int(n2))
    except SimcoreError:
        return None
    da = st.attention(n2) - st.attention(n1)
    dr = st.rest_gpu(n2) - st.rest_gpu(n1)
    return (da / (n2 * n2 - n1 * n1)) / (dr / (n2 - n1)) if dr > 0 and da > 0 else None


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
    if not isinstance(man, dict) or not isinstance(man.get("engines") or {}, dict):
        raise TraceError("a steps manifest is a JSON object with an 'engines' object", file=str(man_path))
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
        tag = gpu_tag(man.get("gpu"))
        rho = attention_ratio(sc.get("model") or {}, str(sc.get("precision", "bf16")), tag)
        try:
            rows = _rows(csv_path)
            # passes of (prompts, length) shapes: the first of each new one pays its setup, priced apart
            separate = info.get("mixed_step") == "separate"
            order = [str(r.get("run", "")) for r in man.get("runs", []) if r.get("engine") == engine]
            cold = frozenset(run for run, (_, _, new) in passes(order).items() if new) if separate else frozenset()
            dec, pre = points(rows, where, buckets, cold)
            d, p = fit_decode(dec), fit_prefill(pre, rho)
            if separate:
                p = p.model_copy(update={"c_shape": shape_setup(rows, order, p, where)})
        except TraceError as ex:
            raise TraceError(f"{engine}: {ex.args[0] if ex.args else ex}", file=where) from None
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
        f"tokens (rms {d.rms_rel:.1%}, {len(d.points)} points); prefill t = max({p.c0 * 1e3:.3g} ms, "
        f"{p.c_token * 1e6:.3g} us x n + {p.c_token2 * 1e9:.3g} ns x n^2), + {p.c_shape * 1e3:.3g} ms a new shape "
        f"(rms {p.rms_rel:.1%}, {len(p.points)} points)"
    )


__all__ = ["MANIFEST", "T_MIN", "attention_ratio", "determined_fit", "fit", "fit_decode", "fit_prefill", "gpu_tag", "nonneg_fit", "pass_time", "passes", "points", "profile_name", "shape_setup", "steps_manifest",
           "summary", "to_yaml", "write"]  # fmt: skip
