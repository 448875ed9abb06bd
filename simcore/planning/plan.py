"""Capacity planning: rank every valid training layout of a scenario with the vectorised analytic
engine, re-check the best few with the discrete-event engine.

:func:`plan` builds the pruned search space (:mod:`simcore.planning.space`) for each cluster size,
evaluates it chunk by chunk with :func:`simcore.engine.training.evaluate` over broadcast numpy grids
(no Python loop per configuration), masks layouts that are redundant or do not fit in device memory
(``memory_per_gpu_bytes <= capacity - simcore.memory.RESERVED_BYTES``), and keeps the best by
the objective:

* ``time``: seconds per token (the global batch is fixed, so this orders by step time and
  time-to-train);
* ``cost``: money per token (GPU-hours x price, plus energy x price per kWh when given; GPU-seconds
  per token without a price);
* ``energy``: facility joules per token (:mod:`simcore.cost`);
* ``goodput``: wall-clock seconds per token with failures: seconds per token over the goodput of the
  scenario's ``reliability`` and ``runtime.checkpoint`` (Young/Daly, :mod:`simcore.system.reliability`).
  The failure rate grows with the GPU count and the checkpoint's stall and restore depend on the layout,
  so more GPUs can train slower in wall-clock time. Each chunk's best layouts by seconds per token (at
  least 16) are ranked again by it.

Each winner carries the prediction interval of its step (``step_time_s_low``/``_high``,
docs/accuracy.md); a runner-up whose objective is within the winner's interval (its value at most the
winner's times ``step_time_s_high / step_time_s``) is marked ``tie``: the models cannot tell them apart.

The winners are predicted again one by one through :func:`simcore.predict` (the same numbers as
``simcore predict`` on that layout) and the first ``des_top`` with ``engine="des"``; the scenario's own
layout (the baseline) too, where its discrete-event step could beat the winner's.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcore import cost as K
from simcore import units
from simcore.engine import training as T
from simcore.engine.runtime import training_runtime, with_stack
from simcore.engine.timeline import training_step_bound
from simcore.errors import SpecError
from simcore.memory import RESERVED_BYTES
from simcore.planning.space import SearchOptions, SearchSpace, build_space
from simcore.prediction import TrainingResult, _param_dtype, evaluate_training, predict
from simcore.specs.arguments import show
from simcore.specs.registry import default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster, scenario_from_dict
from simcore.specs.scenario import Scenario
from simcore.system import scenario_checkpoint, scenario_goodput

OBJECTIVES = ("time", "cost", "energy", "goodput")
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
    """``sc`` with the parallel layout, micro/global batch, recompute and GPU count of ``layout``; the
    stack's defaults written out (:func:`with_stack`: every field of the copy counts as given)."""
    data = with_stack(sc)[0].model_dump(mode="json", exclude_none=True)
    data["cluster"].pop("nodes", None)
    data["cluster"]["gpus"] = int(layout["gpus"])
    data["model"].pop("preset", None)
    tr = data.setdefault("training", {})
    tr["micro_batch"] = int(layout["micro_batch"])
    tr["global_batch"] = int(layout["global_batch"])
    tr["recompute"] = layout["recompute"]
    if layout["recompute"] != "selective":
        tr.pop("recompute_modules", None)  # the modules of the scenario's selective recompute
    data["parallel"] = {
        "tp": int(layout["tp"]),
        "pp": int(layout["pp"]),
        "dp": int(layout["dp"]),
        "cp": int(layout["cp"]),
        "ep": int(layout["ep"]),
        **({"etp": int(layout["etp"])} if "etp" in layout and layout["etp"] != layout["tp"] else {}),
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
    if objective in ("time", "goodput") and kwh is None:
        c_tok = t_tok * gpus * (price if price is not None else 3600.0) / 3600.0
        return t_tok, c_tok
    busy = K.busy_fraction(ev.breakdown, step)
    ce = K.cost_energy(cluster, step, busy, tps, gpus, sc.cost)
    cost_step = (
        ce["cost_per_step"] if ce["cost_per_step"] is not None else ce["gpu_seconds_per_step"] / 3600.0
    )
    c_tok = np.broadcast_to(cost_step / tps, shape)
    if objective in ("time", "goodput"):
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
        if lay.get("etp", lay["tp"]) != lay["tp"]:
            s += f" etp{lay['etp']}"
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
        "step_time_s_low": r.step_time_s_low,
        "step_time_s_high": r.step_time_s_high,
        "interval": r.interval,
        "goodput": None,
        "wall_time_to_train_s": None,
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
    fx = r.system_effects
    if fx is not None and fx.reliability is not None:
        entry["goodput"] = fx.reliability.goodput
        entry["wall_time_to_train_s"] = fx.time_to_train_s
    if des:
        entry["des_step_time_s"] = _des_step(s)
    return entry


def _des_step(s: Scenario) -> float | None:
    """The discrete-event engine's step seconds of a single-layout scenario (``simcore predict --engine des``)."""
    d = predict(s, engine="des")
    return d.step_time_s if isinstance(d, TrainingResult) else None


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


_MAX_COUNT = 10**9
"""The largest GPU count or search value taken (well beyond any cluster; larger ones are typos)."""


def _count(v: Any, name: str, low: int = 1) -> int:
    """An integer argument: an int (numpy's too) or a float with an integral value; never a bool,
    a string or a fraction."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating):
        raise SpecError(f"expected an integer, got {type(v).__name__} {show(v)}", field=name)
    if isinstance(v, float | np.floating) and not (np.isfinite(v) and float(v).is_integer()):
        raise SpecError(f"expected an integer, got {show(v)}", field=name)
    n = int(v)
    if n < low:
        raise SpecError(f"must be at least {low} (got {show(v)})", field=name)
    if n > _MAX_COUNT:
        raise SpecError(f"too large ({show(v)}; at most {_MAX_COUNT:,})", field=name)
    return n


def _values(v: Any, name: str) -> list[Any]:
    """A list argument: a list, tuple, range, set or 1-d array; one bare value stands for itself."""
    if isinstance(v, list | tuple | range | set | frozenset) or (isinstance(v, np.ndarray) and v.ndim == 1):
        return list(v)
    if isinstance(v, np.ndarray | dict):
        raise SpecError(f"expected a list, got {type(v).__name__} {show(v)}", field=name)
    return [v]


def _counts(v: Any, name: str, low: int = 1) -> tuple[int, ...]:
    out = tuple(_count(x, name, low) for x in _values(v, name))
    if not out:
        raise SpecError("expected at least one value, got an empty list", field=name)
    return out


def _flag(v: Any, name: str) -> bool:
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer) and v in (0, 1):
        return bool(v)
    raise SpecError(f"expected true or false, got {type(v).__name__} {show(v)}", field=name)


def _limit(v: Any, name: str, dim: units.Dimension | None = None) -> float | None:
    """``None`` or a positive finite number (with ``dim``, also a string with a unit)."""
    if v is None:
        return None
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating | str):
        raise SpecError(f"expected a positive number, got {type(v).__name__} {show(v)}", field=name)
    if isinstance(v, str):
        if dim is None:
            raise SpecError(f"expected a positive number, got the string {show(v)}", field=name)
        try:
            x = units.parse(v, dim)
        except units.UnitError as e:
            raise SpecError(str(e), field=name) from None
    else:
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
    if not math.isfinite(x) or x <= 0:
        raise SpecError(f"expected a positive finite number, got {show(v)}", field=name)
    return x


_OPTION_COUNTS = ("tp", "pp", "cp", "ep", "vp", "micro_batch", "global_batch")
_OPTION_WORDS = ("recompute", "schedule")
_OPTION_FLAGS = ("sp", "dp_overlap", "tp_overlap")


def _checked_options(options: Any) -> SearchOptions | None:
    """``options`` with every field checked (one-line :class:`SpecError` naming ``options.FIELD``);
    a dict of its fields is taken too, and one bare value stands for a list of it."""
    if options is None:
        return None
    if isinstance(options, dict):
        known = {f.name for f in dataclasses.fields(SearchOptions)}
        for k in options:
            if k not in known:
                raise SpecError(
                    f"unknown search option; use {', '.join(sorted(known))}", field=f"options.{k}"
                )
        options = SearchOptions(**options)
    if not isinstance(options, SearchOptions):
        raise SpecError(
            f"expected a SearchOptions or a dict of its fields, got {type(options).__name__}", field="options"
        )
    o = options
    upd: dict[str, Any] = {}
    for k in _OPTION_COUNTS:
        v = getattr(o, k)
        upd[k] = None if v is None else _counts(v, f"options.{k}")
    for k in _OPTION_WORDS:
        vals = _values(getattr(o, k), f"options.{k}")
        for x in vals:
            if not isinstance(x, str):
                raise SpecError(f"expected a string, got {type(x).__name__} {show(x)}", field=f"options.{k}")
        upd[k] = tuple(vals)
    upd["zero"] = _counts(o.zero, "options.zero", low=0)
    if any(z > 3 for z in upd["zero"]):
        raise SpecError(f"ZeRO stages are 0 to 3, got {max(upd['zero'])}", field="options.zero")
    for k in _OPTION_FLAGS:
        upd[k] = tuple(_flag(x, f"options.{k}") for x in _values(getattr(o, k), f"options.{k}"))
    upd["max_cp"] = _count(o.max_cp, "options.max_cp")
    upd["max_micro_batch"] = _count(o.max_micro_batch, "options.max_micro_batch")
    upd["max_vp"] = None if o.max_vp is None else _count(o.max_vp, "options.max_vp")
    upd["uneven_pp"] = None if o.uneven_pp is None else _flag(o.uneven_pp, "options.uneven_pp")
    return dataclasses.replace(o, **upd)


def _checked(
    scenario: Any,
    gpus: Any,
    objective: Any,
    options: SearchOptions | None,
    budgeted: bool,
) -> tuple[Scenario, list[int]]:
    """The training scenario to plan and the cluster sizes to search; a bad argument raises a one-line
    :class:`~simcore.errors.SpecError` naming it."""
    if not isinstance(objective, str):
        raise SpecError(
            f"expected a string, got {type(objective).__name__} {show(objective)}", field="objective"
        )
    if objective not in OBJECTIVES:
        known = f"{', '.join(OBJECTIVES[:-1])} or {OBJECTIVES[-1]}"
        raise SpecError(f"unknown objective {objective!r}; use {known}", field="objective")
    sizes = None if gpus is None else list(_counts(gpus, "gpus"))
    from simcore.specs.resolve import as_scenario

    sc = as_scenario(scenario)
    sc = with_stack(sc)[0]  # the stack's defaults, as predict takes them
    if sc.kind != "training" or sc.training is None:
        raise SpecError("plan needs a training scenario", field="kind")
    tr = sc.training
    if sizes is None:
        sizes = [resolve_cluster(sc.cluster, default_registry()).gpus]
    if tr.global_batch is None and (options is None or options.global_batch is None):
        raise SpecError(
            "plan needs training.global_batch (sequences per step)", field="training.global_batch"
        )
    if objective == "goodput" and (sc.reliability is None or sc.runtime.checkpoint is None):
        raise SpecError(
            "objective goodput needs the scenario's reliability section and runtime.checkpoint "
            "(with cluster.storage): failures restart from checkpoints",
            field="objective",
        )
    if budgeted and not tr.tokens:
        raise SpecError(
            "a budget or deadline needs training.tokens (tokens to train on)", field="training.tokens"
        )
    return sc, sizes


@dataclass
class _Search:
    """The search's settings and what it keeps while it prices the layouts of every cluster size: counts,
    the best candidates of each chunk by the objective (at most ``keep``), and, with ``pareto``, each
    chunk's time-vs-cost front and a random sample of its valid layouts (the cloud)."""

    sc: Scenario
    objective: str
    options: SearchOptions | None
    keep: int
    pareto: bool
    chunk_elems: int
    max_cost: float | None
    max_time_s: float | None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    n_eval: int = 0
    n_valid: int = 0
    n_grid: int = 0
    n_within: int = 0
    """Valid layouts within the budget and deadline (where one is given)."""
    best_vals: list[np.ndarray] = field(default_factory=list)
    best_refs: list[tuple[SearchSpace, int, np.ndarray]] = field(default_factory=list)
    fronts: list[tuple[np.ndarray, np.ndarray, SearchSpace, int, np.ndarray]] = field(default_factory=list)
    cloud_t: list[np.ndarray] = field(default_factory=list)
    cloud_c: list[np.ndarray] = field(default_factory=list)
    cloud_g: list[np.ndarray] = field(default_factory=list)
    per_gpus: list[dict[str, Any]] = field(default_factory=list)

    @property
    def budgeted(self) -> bool:
        return self.max_cost is not None or self.max_time_s is not None


def _search_size(st: _Search, g: int) -> None:
    """Price every layout of the search space on ``g`` GPUs with the analytic engine, ``chunk_elems`` grid
    points a call; a layout is valid when it is not redundant and its memory per GPU fits
    ``capacity - RESERVED_BYTES``."""
    sc = st.sc
    tr = sc.training
    assert tr is not None
    cluster = _cluster(sc, g)
    options = st.options
    if tr.activation_offload_layers:
        # Megatron-Core offloads activations on one pipeline stage without recomputation: search only those
        o = options or SearchOptions()
        options = dataclasses.replace(o, pp=[p for p in (o.pp or [1]) if p == 1], recompute=("none",))
    space = build_space(sc.model, cluster, tr.global_batch or 1, options)
    cap = cluster.device.memory.capacity - RESERVED_BYTES
    pdt = _param_dtype(sc)
    runtime = training_runtime(sc)
    rpc = max(1, st.chunk_elems // int(np.prod(space.knob_shape)))
    g_eval = g_valid = 0
    for start in range(0, space.rows, rpc):
        sl = slice(start, min(start + rpc, space.rows))
        ok = space.mask(sl)
        ev = T.evaluate(
            sc.model, tr, space.layout(sl), cluster, sc.runtime.framework, sc.calibration, pdt, **runtime
        )
        valid = ok & (np.broadcast_to(ev.memory_per_gpu_bytes, ok.shape) <= cap)
        g_eval += int(ok.sum())
        g_valid += int(valid.sum())
        st.n_grid += ok.size
        if valid.any():
            _keep_best(st, ev, valid, cluster, g, space, start)
    st.n_eval += g_eval
    st.n_valid += g_valid
    st.per_gpus.append(
        {"gpus": g, "evaluated_configs": g_eval, "valid_configs": g_valid, "base_rows": space.rows}
    )


def _keep_best(
    st: _Search,
    ev: T.TrainingEval,
    valid: np.ndarray,
    cluster: ClusterInfo,
    g: int,
    space: SearchSpace,
    start: int,
) -> None:
    """Of one chunk's valid layouts (those within the budget and deadline, where given), keep the ``keep``
    best by the objective, and with ``pareto`` the chunk's time-vs-cost front and a uniform sample of
    about ``4 x PARETO_KEEP`` of the space's layouts for the cloud."""
    tokens = st.sc.training.tokens if st.sc.training is not None else None
    shape = valid.shape
    obj, c_tok = _objective(st.objective, ev, cluster, g, st.sc, shape)
    if st.budgeted:
        assert tokens is not None
        if st.max_cost is not None:
            valid = valid & (c_tok * tokens <= st.max_cost)
        if st.max_time_s is not None:
            t_tok = np.broadcast_to(np.asarray(ev.step_time_s) / np.asarray(ev.tokens_per_step), shape)
            valid = valid & (t_tok * tokens <= st.max_time_s)
        st.n_within += int(valid.sum())
    flat = np.where(valid, obj, np.inf).ravel()
    k = min(st.keep, flat.size)
    idx = np.argpartition(flat, k - 1)[:k]
    idx = idx[np.isfinite(flat[idx])]
    vals = flat[idx]
    if st.objective == "goodput":
        vals = _wall_per_token(st, ev, cluster, shape, space, start, idx, vals)
    st.best_vals.append(vals)
    st.best_refs.append((space, start, idx))
    if st.pareto:
        vflat = np.flatnonzero(valid.ravel())
        tt = np.broadcast_to(np.asarray(ev.step_time_s) / np.asarray(ev.tokens_per_step), shape).ravel()[
            vflat
        ]
        cc = np.asarray(c_tok).ravel()[vflat]
        f = _front(tt, cc)
        st.fronts.append((tt[f], cc[f], space, start, vflat[f]))
        take = st.rng.random(len(vflat)) < min(1.0, PARETO_KEEP * 4 / max(space.grid_size, 1))
        st.cloud_t.append(tt[take])
        st.cloud_c.append(cc[take])
        st.cloud_g.append(np.full(int(take.sum()), float(g)))


def _wall_per_token(
    st: _Search,
    ev: T.TrainingEval,
    cluster: ClusterInfo,
    shape: tuple[int, ...],
    space: SearchSpace,
    start: int,
    idx: np.ndarray,
    t_tok: np.ndarray,
) -> np.ndarray:
    """Wall-clock seconds per token of the chunk's layouts ``idx`` (seconds per token ``t_tok``): ``t_tok``
    over the goodput with the layout's checkpoint (its data-parallel degree, each GPU's weights and
    optimizer state) and step; ``inf`` where failures come faster than the work they lose."""
    step = np.broadcast_to(ev.step_time_s, shape).ravel()[idx]
    state = sum(np.broadcast_to(ev.memory.get(k, 0.0), shape).ravel()[idx] for k in ("weights", "optimizer"))
    pdt = _param_dtype(st.sc)
    out = np.full(len(idx), np.inf)
    for i, lay in enumerate(space.decode(start, idx)):
        ckpt = scenario_checkpoint(st.sc, cluster, int(lay["dp"]), float(state[i]), pdt)
        try:
            g = scenario_goodput(st.sc, cluster, float(step[i]), ckpt).goodput
        except SpecError:
            continue  # it never finishes
        out[i] = t_tok[i] / g if g > 0 else np.inf
    return out


def _mark_ties(entries: list[dict[str, Any]]) -> None:
    """Mark ``tie`` the runners-up whose objective is within the winner's prediction interval: at most
    the winner's value times its ``step_time_s_high / step_time_s`` (the interval's factor carries to
    time, cost and energy per token, all proportional to the step)."""
    if not entries:
        return
    best = entries[0]
    hi = best.get("step_time_s_high")
    for e in entries:
        e["tie"] = False
    if hi is None:
        return
    limit = best["objective_value"] * hi / best["step_time_s"]
    for e in entries[1:]:
        e["tie"] = bool(e["objective_value"] <= limit)


def _top_entries(st: _Search, top: int, des_top: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``top`` best layouts over every chunk, each predicted again through :func:`simcore.predict`
    (the first ``des_top`` with the discrete-event engine too), and notes: where the two engines differ
    by over 5 %, or why no layout was found."""
    notes: list[str] = []
    entries: list[dict[str, Any]] = []
    if st.best_vals:
        vals = np.concatenate(st.best_vals)
        owners = np.concatenate([np.full(len(v), i) for i, v in enumerate(st.best_vals)])
        offs = np.concatenate([np.arange(len(v)) for v in st.best_vals])
        order = np.argsort(vals, kind="stable")[:top]
        for rank, o in enumerate(order):
            space, start, idx = st.best_refs[int(owners[o])]
            lay = space.decode(start, idx[int(offs[o]) : int(offs[o]) + 1])[0]
            entry = _predict_entry(st.sc, lay, des=rank < des_top)
            entry["rank"] = rank + 1
            entry["objective_value"] = float(vals[o])
            entries.append(entry)
        _mark_ties(entries)
        for e in entries:
            d = e["des_step_time_s"]
            if d is not None and abs(d / e["step_time_s"] - 1.0) > 0.05:
                notes.append(
                    f"#{e['rank']}: the discrete-event engine predicts {d:.3g} s against the analytic "
                    f"{e['step_time_s']:.3g} s ({d / e['step_time_s'] - 1:+.0%}); check the runners-up with --des"
                )
    elif st.n_valid and st.budgeted:
        notes.append(f"{st.n_valid:,} layouts fit in memory but none meets the budget or deadline")
    else:
        notes.append(
            "no layout fits in device memory; try more GPUs, recompute, ZeRO or a smaller micro-batch"
        )
    if st.budgeted:
        notes.append(f"{st.n_within:,} layouts meet the budget/deadline")
    return entries, notes


def _baseline(
    sc: Scenario, sizes: list[int], des_top: int, winner: dict[str, Any] | None, notes: list[str]
) -> dict[str, Any] | None:
    """The scenario's own layout predicted like a top entry, on its own GPU count when searched, else on
    the first size searched (``None`` where it does not fit that size; a failed prediction adds a note).

    With ``des_top`` its discrete-event re-check runs only where it can change the comparison with the
    ``winner``: not where the baseline's DES step cannot be shorter than the winner's step (analytic or
    DES, whichever is shorter) because its busiest pipeline rank's work alone is longer
    (:func:`~simcore.engine.timeline.training_step_bound`); a note says so."""
    own = resolve_cluster(sc.cluster, default_registry()).gpus
    base_lay = baseline_layout(sc, own if own in sizes else sizes[0])
    if base_lay is None:
        return None
    try:
        entry = _predict_entry(sc, base_lay, des=False)
    except SpecError as e:
        notes.append(f"baseline layout not predicted: {e}")
        return None
    if des_top > 0:
        s = scenario_for(sc, base_lay)
        best = math.inf
        if winner is not None:
            best = min(winner["step_time_s"], winner["des_step_time_s"] or math.inf)
        _cluster_info, lay, ev = evaluate_training(s)
        bound = min(training_step_bound(s, lay, ev), entry["step_time_s"])
        if bound > best:
            notes.append(
                f"baseline not re-checked with the discrete-event engine: its step is at least {bound:.3g} s "
                f"(its busiest pipeline rank's work back to back), longer than the winner's {best:.3g} s"
            )
        else:
            entry["des_step_time_s"] = _des_step(s)
    return entry


def _pareto(st: _Search) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """The time-vs-cost Pareto front over every chunk's fronts, fastest first (seconds and cost per token;
    for the whole run where ``training.tokens`` is given), and the cloud of valid layouts for plots,
    subsampled to at most ``PARETO_KEEP`` points."""
    front_out: list[dict[str, Any]] = []
    if not st.fronts:
        return front_out, {}
    fronts = st.fronts
    ft = np.concatenate([f[0] for f in fronts])
    fc = np.concatenate([f[1] for f in fronts])
    fo = np.concatenate([np.full(len(f[0]), i) for i, f in enumerate(fronts)])
    fi = np.concatenate([np.arange(len(f[0])) for f in fronts])
    sel = _front(ft, fc)
    tokens = st.sc.training.tokens if st.sc.training is not None else None
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
    ct = np.concatenate(st.cloud_t) if st.cloud_t else np.zeros(0)
    cc_ = np.concatenate(st.cloud_c) if st.cloud_c else np.zeros(0)
    cg = np.concatenate(st.cloud_g) if st.cloud_g else np.zeros(0)
    if len(ct) > PARETO_KEEP:
        pick = st.rng.choice(len(ct), PARETO_KEEP, replace=False)
        ct, cc_, cg = ct[pick], cc_[pick], cg[pick]
    return front_out, {"seconds_per_token": ct.tolist(), "cost_per_token": cc_.tolist(), "gpus": cg.tolist()}


def plan(
    scenario: Scenario | str | os.PathLike[str] | dict[str, Any],
    gpus: int | Sequence[int] | None = None,
    objective: str = "time",
    top: int = 5,
    options: SearchOptions | dict[str, Any] | None = None,
    des_top: int = 3,
    pareto: bool = False,
    chunk_elems: int = 400_000,
    max_cost: float | None = None,
    max_time_s: float | str | None = None,
) -> PlanResult:
    """Search the training layouts of ``scenario`` on ``gpus`` GPUs (one size or several); see
    docs/planning.md.

    Args:
        scenario: a training scenario (object, path or built-in name, or a dict of a scenario file's
            fields); its model, training recipe
            (global batch, precision, optimizer, tokens), runtime, calibration and cost are kept,
            its parallel plan is the baseline the winners are compared with.
        gpus: cluster size(s); default the scenario's.
        objective: ``time`` | ``cost`` | ``energy`` | ``goodput`` (see the module docstring).
        top: how many layouts to return, best first.
        options: what to search (:class:`~simcore.planning.space.SearchOptions`, or a dict of its
            fields; one bare value stands for a list of it).
        des_top: how many of the winners to re-check with the discrete-event engine (the baseline too,
            unless its step provably cannot beat the winner's: a note says so).
        pareto: also compute the time-vs-cost Pareto front over all valid layouts.
        chunk_elems: grid points per analytic-engine call (memory vs call overhead).
        max_cost: budget for the whole run (training.tokens; money with a price, else GPU-hours):
            layouts over it are left out.
        max_time_s: deadline for the whole run in seconds (or a string with a unit, ``"30 d"``):
            slower layouts are left out.

    A bad argument (wrong type, out of range) raises a one-line :class:`~simcore.errors.SpecError`
    naming it (``top``, ``gpus``, ``options.tp``, ...).
    """
    t0 = time.perf_counter()
    top = _count(top, "top")
    des_top = _count(des_top, "des_top", low=0)
    pareto = _flag(pareto, "pareto")
    chunk_elems = _count(chunk_elems, "chunk_elems")
    max_cost = _limit(max_cost, "max_cost")
    max_time_s = _limit(max_time_s, "max_time_s", "time")
    options = _checked_options(options)
    budgeted = max_cost is not None or max_time_s is not None
    sc, sizes = _checked(scenario, gpus, objective, options, budgeted)
    st = _Search(sc, objective, options, max(4 * top, des_top, 16), pareto, chunk_elems, max_cost, max_time_s)
    ts = time.perf_counter()
    for g in sizes:
        _search_size(st, g)
    search_s = time.perf_counter() - ts
    top_entries, notes = _top_entries(st, top, des_top)
    baseline = _baseline(sc, sizes, des_top, top_entries[0] if top_entries else None, notes)
    front_out, cloud = _pareto(st) if pareto else ([], {})
    return PlanResult(
        scenario=sc.name,
        objective=objective,
        gpus=sizes,
        evaluated_configs=st.n_eval,
        valid_configs=st.n_valid,
        grid_points=st.n_grid,
        elapsed_s=time.perf_counter() - t0,
        search_s=search_s,
        top=top_entries,
        baseline=baseline,
        pareto=front_out,
        cloud=cloud,
        per_gpus=st.per_gpus,
        notes=notes,
    )


__all__ = ["OBJECTIVES", "PlanResult", "baseline_layout", "plan", "scenario_for"]
