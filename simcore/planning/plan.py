"""Capacity planning: rank every valid training layout of a scenario with the vectorised analytic
engine, re-check the best few with the discrete-event engine.

:func:`plan` builds the pruned search space (:mod:`simcore.planning.space`) for each cluster size,
evaluates it chunk by chunk with :func:`simcore.engine.training.evaluate` over broadcast numpy grids
(no Python loop per configuration), masks layouts that are redundant or do not fit in device memory
(``memory_per_gpu_bytes <= capacity - simcore.prediction.RESERVED_BYTES``), and keeps the best by
the objective:

* ``time``: seconds per token (the global batch is fixed, so this orders by step time and
  time-to-train);
* ``cost``: money per token (GPU-hours x price, plus energy x price per kWh when given; GPU-seconds
  per token without a price);
* ``energy``: facility joules per token (:mod:`simcore.cost`).

The winners are predicted again one by one through :func:`simcore.predict` (the same numbers as
``simcore predict`` on that layout) and the first ``des_top`` with ``engine="des"``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcore import cost as K
from simcore.engine import training as T
from simcore.engine.runtime import training_runtime
from simcore.errors import SpecError
from simcore.memory import RESERVED_BYTES
from simcore.planning.space import SearchOptions, SearchSpace, build_space
from simcore.prediction import TrainingResult, _param_dtype, predict
from simcore.specs.registry import default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster, scenario_from_dict
from simcore.specs.scenario import Scenario

OBJECTIVES = ("time", "cost", "energy")
PARETO_KEEP = 4000
"""Points of the time-vs-cost cloud kept for plots (a uniform subsample of the valid layouts)."""


@dataclass
class PlanResult:
    """Outcome of :func:`plan` (JSON-ready through :meth:`to_json`)."""

    scenario: str
    objective: str
    gpus: list[int]
    evaluated_configs: int
    """Distinct supported layouts priced by the analytic engine (after divisibility pruning)."""
    valid_configs: int
    """Of those, layouts that fit in device memory."""
    grid_points: int
    """Points of the broadcast grids (including redundant combinations that were masked)."""
    elapsed_s: float
    search_s: float
    top: list[dict[str, Any]]
    baseline: dict[str, Any] | None = None
    pareto: list[dict[str, Any]] = field(default_factory=list)
    cloud: dict[str, list[float]] = field(default_factory=dict)
    per_gpus: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "objective": self.objective,
            "gpus": self.gpus,
            "evaluated_configs": self.evaluated_configs,
            "valid_configs": self.valid_configs,
            "grid_points": self.grid_points,
            "elapsed_s": self.elapsed_s,
            "search_s": self.search_s,
            "configs_per_s": self.evaluated_configs / max(self.search_s, 1e-9),
            "top": self.top,
            "baseline": self.baseline,
            "pareto": self.pareto,
            "per_gpus": self.per_gpus,
            "notes": self.notes,
        }


def _cluster(sc: Scenario, gpus: int) -> ClusterInfo:
    spec = sc.cluster.model_copy(update={"gpus": int(gpus), "nodes": None})
    return resolve_cluster(spec, default_registry())


def scenario_for(sc: Scenario, layout: dict[str, Any]) -> Scenario:
    """``sc`` with the parallel layout, micro/global batch, recompute and GPU count of ``layout``."""
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"].pop("nodes", None)
    data["cluster"]["gpus"] = int(layout["gpus"])
    data["model"].pop("preset", None)
    tr = data.setdefault("training", {})
    tr["micro_batch"] = int(layout["micro_batch"])
    tr["global_batch"] = int(layout["global_batch"])
    tr["recompute"] = layout["recompute"]
    data["parallel"] = {
        "tp": int(layout["tp"]),
        "pp": int(layout["pp"]),
        "dp": int(layout["dp"]),
        "cp": int(layout["cp"]),
        "ep": int(layout["ep"]),
        "vp": int(layout["vp"]),
        "sequence_parallel": bool(layout["sp"]),
        "zero": int(layout["zero"]),
        "fsdp": bool(layout.get("fsdp", False)),
        "schedule": layout["schedule"],
        "dp_overlap": bool(layout["dp_overlap"]),
        "tp_overlap": bool(layout["tp_overlap"]),
    }
    return scenario_from_dict(data)


def _objective(
    objective: str, ev: T.TrainingEval, cluster: ClusterInfo, gpus: int, sc: Scenario, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(objective per token, cost per token) over the grid block."""
    step = np.broadcast_to(ev.step_time_s, shape)
    tps = np.broadcast_to(ev.tokens_per_step, shape)
    t_tok = step / tps
    price = sc.cost.price_per_gpu_hour
    kwh = getattr(sc.cost, "price_per_kwh", None)
    if objective == "time" and kwh is None:
        c_tok = t_tok * gpus * (price if price is not None else 3600.0) / 3600.0
        return t_tok, c_tok
    busy = K.busy_fraction(ev.breakdown, step)
    ce = K.cost_energy(cluster, step, busy, tps, gpus, sc.cost)
    cost_step = (
        ce["cost_per_step"] if ce["cost_per_step"] is not None else ce["gpu_seconds_per_step"] / 3600.0
    )
    c_tok = np.broadcast_to(cost_step / tps, shape)
    if objective == "time":
        return t_tok, c_tok
    if objective == "cost":
        return c_tok, c_tok
    return np.broadcast_to(ce["energy_per_token_j"], shape), c_tok


def _front(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal points (minimise both ``t`` and ``c``)."""
    order = np.lexsort((c, t))
    cs = c[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(cs)[:-1]])
    return np.asarray(order[cs < best_before])


def _describe(lay: dict[str, Any]) -> str:
    s = f"tp{lay['tp']} pp{lay['pp']} dp{lay['dp']}"
    if lay["cp"] > 1:
        s += f" cp{lay['cp']}"
    if lay["ep"] > 1:
        s += f" ep{lay['ep']}"
    if lay["vp"] > 1:
        s += f" vp{lay['vp']}"
    s += f" mb{lay['micro_batch']} {lay['schedule']} rc:{lay['recompute']}"
    if lay["sp"]:
        s += " sp"
    if lay["zero"]:
        s += f" zero{lay['zero']}"
    if lay["tp_overlap"]:
        s += " tpo"
    return s


def _predict_entry(sc: Scenario, lay: dict[str, Any], des: bool) -> dict[str, Any]:
    """A top-K entry: the layout with the analytic prediction (and the DES step time)."""
    s = scenario_for(sc, lay)
    r = predict(s)
    assert isinstance(r, TrainingResult)
    cluster = _cluster(sc, int(lay["gpus"]))
    busy = K.busy_fraction(r.breakdown, r.step_time_s)
    tokens = sc.training.tokens if sc.training is not None else None
    ce = K.cost_energy(cluster, r.step_time_s, busy, r.tokens_per_step, r.gpus, sc.cost, tokens)
    entry: dict[str, Any] = {
        "layout": {k: lay[k] for k in lay if k != "gpus"},
        "gpus": r.gpus,
        "summary": _describe(lay),
        "step_time_s": r.step_time_s,
        "des_step_time_s": None,
        "tokens_per_s": r.tokens_per_s,
        "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
        "mfu": r.mfu,
        "hfu": r.hfu,
        "bubble_fraction": r.bubble_fraction,
        "memory_per_gpu_bytes": r.memory_per_gpu_bytes,
        "fits_in_memory": r.fits_in_memory,
        "busy_fraction": float(busy),
        "power_per_gpu_w": float(ce["power_per_gpu_w"]),
        "energy_per_step_j": float(ce["energy_per_step_j"]),
        "energy_per_token_j": float(ce["energy_per_token_j"]),
        "cost_per_step": None if ce["cost_per_step"] is None else float(ce["cost_per_step"]),
        "time_to_train_s": None,
        "gpu_hours": None,
        "cost": None,
        "energy_run_kwh": None,
    }
    if tokens is not None:
        entry["time_to_train_s"] = float(ce["time_to_train_s"])
        entry["gpu_hours"] = float(ce["gpu_hours"])
        entry["cost"] = None if ce["cost"] is None else float(ce["cost"])
        entry["energy_run_kwh"] = float(ce["energy_run_kwh"])
    if des:
        d = predict(s, engine="des")
        entry["des_step_time_s"] = d.step_time_s if isinstance(d, TrainingResult) else None
    return entry


def baseline_layout(sc: Scenario, gpus: int) -> dict[str, Any] | None:
    """The scenario's own layout on ``gpus`` GPUs as a planner layout dict (None if it does not fit
    the cluster's divisibility rules)."""
    from simcore.prediction import layout_of

    try:
        lay = layout_of(scenario_for_gpus(sc, gpus), _cluster(sc, gpus))
    except SpecError:
        return None
    lay["gpus"] = gpus
    return lay


def scenario_for_gpus(sc: Scenario, gpus: int) -> Scenario:
    """``sc`` on ``gpus`` GPUs (its data-parallel degree re-derived)."""
    data = sc.model_dump(mode="json", exclude_none=True)
    data["cluster"].pop("nodes", None)
    data["cluster"]["gpus"] = int(gpus)
    data["model"].pop("preset", None)
    data.get("parallel", {}).pop("dp", None)
    return scenario_from_dict(data)


def plan(
    scenario: Scenario | str,
    gpus: int | Sequence[int] | None = None,
    objective: str = "time",
    top: int = 5,
    options: SearchOptions | None = None,
    des_top: int = 3,
    pareto: bool = False,
    chunk_elems: int = 400_000,
    max_cost: float | None = None,
    max_time_s: float | None = None,
) -> PlanResult:
    """Search the training layouts of ``scenario`` on ``gpus`` GPUs (one size or several).

    Args:
        scenario: a training scenario (object, path or built-in name); its model, training recipe
            (global batch, precision, optimizer, tokens), runtime, calibration and cost are kept,
            its parallel plan is the baseline the winners are compared with.
        gpus: cluster size(s); default the scenario's.
        objective: ``time`` | ``cost`` | ``energy`` (see the module docstring).
        top: how many layouts to return, best first.
        options: what to search (:class:`~simcore.planning.space.SearchOptions`).
        des_top: how many of the winners to re-check with the discrete-event engine.
        pareto: also compute the time-vs-cost Pareto front over all valid layouts.
        chunk_elems: grid points per analytic-engine call (memory vs call overhead).
        max_cost: budget for the whole run (training.tokens; money with a price, else GPU-hours):
            layouts over it are left out.
        max_time_s: deadline for the whole run in seconds: slower layouts are left out.
    """
    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise SpecError(f"unknown objective {objective!r}; use time, cost or energy", field="--objective")
    if top < 1:
        raise SpecError("--top must be at least 1", field="--top")
    if isinstance(scenario, str):
        from simcore.specs.resolve import load_scenario

        scenario = load_scenario(scenario)
    sc = scenario
    if sc.kind != "training" or sc.training is None:
        raise SpecError("plan needs a training scenario", field="kind")
    tr = sc.training
    if gpus is None:
        sizes = [resolve_cluster(sc.cluster, default_registry()).gpus]
    else:
        sizes = [int(g) for g in ([gpus] if isinstance(gpus, int) else gpus)]
    if not sizes or any(g < 1 for g in sizes):
        raise SpecError("--gpus must be positive integers", field="--gpus")
    gb = tr.global_batch
    if gb is None and (options is None or options.global_batch is None):
        raise SpecError(
            "plan needs training.global_batch (sequences per step)", field="training.global_batch"
        )
    if (max_cost is not None or max_time_s is not None) and not tr.tokens:
        raise SpecError(
            "a budget or deadline needs training.tokens (tokens to train on)", field="training.tokens"
        )
    model = sc.model
    pdt = _param_dtype(sc)
    keep = max(4 * top, des_top, 16)
    n_within = 0

    n_eval = n_valid = n_grid = 0
    best_vals: list[np.ndarray] = []
    best_refs: list[tuple[SearchSpace, int, np.ndarray]] = []
    fronts: list[tuple[np.ndarray, np.ndarray, SearchSpace, int, np.ndarray]] = []
    cloud_t: list[np.ndarray] = []
    cloud_c: list[np.ndarray] = []
    cloud_g: list[np.ndarray] = []
    per_gpus: list[dict[str, Any]] = []
    rng = np.random.default_rng(0)
    ts = time.perf_counter()
    rt = sc.runtime
    runtime = training_runtime(sc)
    for g in sizes:
        cluster = _cluster(sc, g)
        space = build_space(model, cluster, gb or 1, options)
        cap = cluster.device.memory.capacity - RESERVED_BYTES
        per_row = int(np.prod(space.knob_shape))
        rpc = max(1, chunk_elems // per_row)
        g_eval = g_valid = 0
        for start in range(0, space.rows, rpc):
            sl = slice(start, min(start + rpc, space.rows))
            ok = space.mask(sl)
            ev = T.evaluate(
                model, tr, space.layout(sl), cluster, rt.framework, sc.calibration, pdt, **runtime
            )
            shape = ok.shape
            valid = ok & (np.broadcast_to(ev.memory_per_gpu_bytes, shape) <= cap)
            g_eval += int(ok.sum())
            g_valid += int(valid.sum())
            n_grid += ok.size
            if not valid.any():
                continue
            obj, c_tok = _objective(objective, ev, cluster, g, sc, shape)
            if max_cost is not None or max_time_s is not None:
                assert tr.tokens is not None
                if max_cost is not None:
                    valid = valid & (c_tok * tr.tokens <= max_cost)
                if max_time_s is not None:
                    t_tok = np.broadcast_to(
                        np.asarray(ev.step_time_s) / np.asarray(ev.tokens_per_step), shape
                    )
                    valid = valid & (t_tok * tr.tokens <= max_time_s)
                n_within += int(valid.sum())
            flat = np.where(valid, obj, np.inf).ravel()
            k = min(keep, flat.size)
            idx = np.argpartition(flat, k - 1)[:k]
            idx = idx[np.isfinite(flat[idx])]
            best_vals.append(flat[idx])
            best_refs.append((space, start, idx))
            if pareto:
                vflat = np.flatnonzero(valid.ravel())
                tt = np.broadcast_to(
                    np.asarray(ev.step_time_s) / np.asarray(ev.tokens_per_step), shape
                ).ravel()[vflat]
                cc = np.asarray(c_tok).ravel()[vflat]
                f = _front(tt, cc)
                fronts.append((tt[f], cc[f], space, start, vflat[f]))
                take = rng.random(len(vflat)) < min(1.0, PARETO_KEEP * 4 / max(space.grid_size, 1))
                cloud_t.append(tt[take])
                cloud_c.append(cc[take])
                cloud_g.append(np.full(int(take.sum()), float(g)))
        n_eval += g_eval
        n_valid += g_valid
        per_gpus.append(
            {"gpus": g, "evaluated_configs": g_eval, "valid_configs": g_valid, "base_rows": space.rows}
        )
    search_s = time.perf_counter() - ts

    notes: list[str] = []
    top_entries: list[dict[str, Any]] = []
    if best_vals:
        vals = np.concatenate(best_vals)
        owners = np.concatenate([np.full(len(v), i) for i, v in enumerate(best_vals)])
        offs = np.concatenate([np.arange(len(v)) for v in best_vals])
        order = np.argsort(vals, kind="stable")[:top]
        for rank, o in enumerate(order):
            space, start, idx = best_refs[int(owners[o])]
            lay = space.decode(start, idx[int(offs[o]) : int(offs[o]) + 1])[0]
            entry = _predict_entry(sc, lay, des=rank < des_top)
            entry["rank"] = rank + 1
            entry["objective_value"] = float(vals[o])
            top_entries.append(entry)
        for e in top_entries:
            d = e["des_step_time_s"]
            if d is not None and abs(d / e["step_time_s"] - 1.0) > 0.05:
                notes.append(
                    f"#{e['rank']}: the discrete-event engine predicts {d:.3g} s against the analytic "
                    f"{e['step_time_s']:.3g} s ({d / e['step_time_s'] - 1:+.0%}); check the runners-up with --des"
                )
    elif n_valid and (max_cost is not None or max_time_s is not None):
        notes.append(f"{n_valid:,} layouts fit in memory but none meets the budget or deadline")
    else:
        notes.append(
            "no layout fits in device memory; try more GPUs, recompute, ZeRO or a smaller micro-batch"
        )
    if max_cost is not None or max_time_s is not None:
        notes.append(f"{n_within:,} layouts meet the budget/deadline")

    baseline = None
    own = resolve_cluster(sc.cluster, default_registry()).gpus
    base_lay = baseline_layout(sc, own if own in sizes else sizes[0])
    if base_lay is not None:
        try:
            baseline = _predict_entry(sc, base_lay, des=des_top > 0)
        except SpecError as e:
            notes.append(f"baseline layout not predicted: {e}")

    front_out: list[dict[str, Any]] = []
    cloud: dict[str, list[float]] = {}
    if pareto and fronts:
        ft = np.concatenate([f[0] for f in fronts])
        fc = np.concatenate([f[1] for f in fronts])
        fo = np.concatenate([np.full(len(f[0]), i) for i, f in enumerate(fronts)])
        fi = np.concatenate([np.arange(len(f[0])) for f in fronts])
        sel = _front(ft, fc)
        tokens = tr.tokens
        for j in sel[np.argsort(ft[sel])]:
            _a, _b, space, start, vidx = fronts[int(fo[j])]
            lay = space.decode(start, vidx[int(fi[j]) : int(fi[j]) + 1])[0]
            front_out.append(
                {
                    "gpus": lay["gpus"],
                    "summary": _describe(lay),
                    "layout": lay,
                    "seconds_per_token": float(ft[j]),
                    "cost_per_token": float(fc[j]),
                    "time_to_train_s": None if tokens is None else float(ft[j] * tokens),
                    "cost": None if tokens is None else float(fc[j] * tokens),
                }
            )
        ct = np.concatenate(cloud_t) if cloud_t else np.zeros(0)
        cc_ = np.concatenate(cloud_c) if cloud_c else np.zeros(0)
        cg = np.concatenate(cloud_g) if cloud_g else np.zeros(0)
        if len(ct) > PARETO_KEEP:
            pick = rng.choice(len(ct), PARETO_KEEP, replace=False)
            ct, cc_, cg = ct[pick], cc_[pick], cg[pick]
        cloud = {"seconds_per_token": ct.tolist(), "cost_per_token": cc_.tolist(), "gpus": cg.tolist()}

    return PlanResult(
        scenario=sc.name,
        objective=objective,
        gpus=sizes,
        evaluated_configs=n_eval,
        valid_configs=n_valid,
        grid_points=n_grid,
        elapsed_s=time.perf_counter() - t0,
        search_s=search_s,
        top=top_entries,
        baseline=baseline,
        pareto=front_out,
        cloud=cloud,
        per_gpus=per_gpus,
        notes=notes,
    )


def plot_pareto(res: PlanResult, path: str, title: str | None = None) -> None:
    """Draw the time-vs-cost cloud of valid layouts and its Pareto front (matplotlib, to ``path``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    if res.cloud.get("seconds_per_token"):
        ct = np.asarray(res.cloud["seconds_per_token"])
        cc = np.asarray(res.cloud["cost_per_token"])
        cg = np.asarray(res.cloud["gpus"])
        for g in sorted(set(cg.tolist())):
            s = cg == g
            ax.scatter(ct[s] * 1e6, cc[s] * 1e6, s=4, alpha=0.35, label=f"{int(g)} GPUs")
    if res.pareto:
        ft = np.asarray([p["seconds_per_token"] for p in res.pareto]) * 1e6
        fc = np.asarray([p["cost_per_token"] for p in res.pareto]) * 1e6
        ax.plot(ft, fc, "k.-", lw=1.5, label="Pareto front")
        for p, x, y in zip(res.pareto[:8], ft, fc, strict=False):
            ax.annotate(f"{p['gpus']}: {p['summary'].split(' mb')[0]}", (x, y), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per million tokens (s)")
    ax.set_ylabel("cost per million tokens")
    ax.set_title(title or f"{res.scenario}: time vs cost of valid layouts")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


__all__ = ["OBJECTIVES", "PlanResult", "baseline_layout", "plan", "plot_pareto", "scenario_for"]
