"""Search space of training layouts, generated and pruned as numpy arrays.

A layout is (tp, pp, cp, dp, ep, vp, micro-batch) -- the *shape* of the job, constrained by
divisibility -- times independent *knobs* (sequence parallelism, recompute, ZeRO stage, pipeline
schedule, DP and TP overlap). The space is stored factorised:

* ``base``: a table (one numpy array per column, all of length ``rows``) of the shapes that
  ``simcore predict`` accepts (:func:`~simcore.workload.layout.valid_layouts`: ``tp*pp*cp*dp == gpus``,
  ``heads % tp == 0``, ``pp <= layers`` and ``pp*vp <= layers``, ``global_batch % (micro_batch*dp) == 0``,
  for MoE ``experts % ep == 0`` and ``ep*etp`` dividing ``tp*cp*dp``, ``etp`` being ``tp`` or 1: Megatron-Core's
  parallel folding, so EP may exceed DP), narrowed by the search's own choices: TP
  divides the KV heads and sits inside one NVLink domain (``domain % tp == 0``), ``seq_len % cp == 0``,
  virtual stages only with pipeline stages, and even stages and chunks (``layers % (pp*vp) == 0``)
  unless uneven ones are searched;
* ``knobs``: one short array per knob.

The full grid is ``rows x prod(len(knob))``; :meth:`SearchSpace.layout` returns a
:class:`~simcore.engine.training.TrainingLayout` whose fields broadcast over that grid (base columns
on axis 0, knob *i* on axis *i+1*), so the analytic engine prices each op on the few axes it depends
on and only the cheap composition runs on the full grid. :meth:`SearchSpace.mask` removes redundant
or unsupported combinations (e.g. sequence parallelism without TP, an interleaved schedule without
virtual stages); the memory fit is checked by the planner against the engine's memory model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from simcore.comm.groups import domain_size
from simcore.engine.training import TrainingLayout
from simcore.errors import SpecError
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import ModelSpec
from simcore.workload.layout import valid_layouts

KNOB_NAMES = ("sp", "recompute", "zero", "schedule", "dp_overlap", "tp_overlap")
BASE_NAMES = ("tp", "pp", "cp", "dp", "ep", "etp", "vp", "micro_batch", "global_batch")
SCHEDULES = ("1f1b", "interleaved", "zero_bubble", "dualpipe", "gpipe")
UNEVEN_VP_MAX = 8
"""With uneven stages, virtual-stage counts up to this are tried besides the divisors of the layers."""


@dataclass(frozen=True)
class SearchOptions:
    """What to search. ``None`` for a parallel degree means every value the rules allow.

    Attributes:
        tp, pp, cp, ep, vp, micro_batch: candidate values (``None``: all divisors that fit the rules,
            capped by the ``max_*`` fields).
        global_batch: sequences per step to consider (``None``: the scenario's).
        recompute, schedule, zero, sp, dp_overlap, tp_overlap: knob values to try.
        max_cp, max_micro_batch, max_vp: caps for the automatic candidate lists.
    """

    tp: Sequence[int] | None = None
    pp: Sequence[int] | None = None
    cp: Sequence[int] | None = None
    ep: Sequence[int] | None = None
    vp: Sequence[int] | None = None
    micro_batch: Sequence[int] | None = None
    global_batch: Sequence[int] | None = None
    recompute: Sequence[str] = ("none", "selective", "full")
    schedule: Sequence[str] = ("1f1b", "interleaved", "zero_bubble", "dualpipe", "gpipe")
    zero: Sequence[int] = (0, 1, 2, 3)
    sp: Sequence[bool] = (False, True)
    dp_overlap: Sequence[bool] = (True,)
    tp_overlap: Sequence[bool] = (False, True)
    max_cp: int = 8
    max_micro_batch: int = 16
    max_vp: int | None = None
    uneven_pp: bool | None = None
    """Allow pipeline degrees (and with virtual stages ``pp*vp`` chunk counts, ``vp`` up to
    ``UNEVEN_VP_MAX`` besides the divisors of the layers) that do not divide the layers: the first
    stages or chunks take one more layer. ``None``: whatever
    :func:`~simcore.workload.layout.valid_layouts` accepts."""


@lru_cache(maxsize=1)
def engine_allows_uneven_pp() -> bool:
    """Whether the engine accepts pipeline stages of unequal layer counts (``layers % pp != 0``).

    Asked of :func:`~simcore.workload.layout.valid_layouts` itself (3 layers on 2 stages), so the
    planner never proposes a layout that ``simcore predict`` would reject."""
    model = ModelSpec(layers=3, hidden=64, heads=2, ffn_hidden=128, vocab=128, seq_len=32)
    check = valid_layouts(model, 2, tp=1, pp=2, cp=1, dp=1, ep=1, vp=1, micro_batch=1, global_batch=2)
    return bool(check.ok)


def divisors(n: int) -> np.ndarray:
    """All positive divisors of ``n`` in increasing order (int64 array)."""
    if n < 1:
        return np.zeros(0, dtype=np.int64)
    k = np.arange(1, int(np.sqrt(n)) + 1, dtype=np.int64)
    small = k[n % k == 0]
    return np.unique(np.concatenate([small, n // small]))


def _cand(given: Sequence[int] | None, auto: np.ndarray) -> np.ndarray:
    if given is None:
        return np.asarray(auto, dtype=np.int64)
    g = np.unique(np.asarray(list(given), dtype=np.int64))
    return g[np.isin(g, auto)] if len(auto) else g[:0]


def _cross(table: dict[str, np.ndarray], name: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """Every row of ``table`` times every value (row-major: rows outer, values inner)."""
    n = len(next(iter(table.values()))) if table else 1
    out = {k: np.repeat(v, len(values)) for k, v in table.items()}
    out[name] = np.tile(values, n)
    return out


def _keep(table: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in table.items()}


def _keep_valid(
    table: dict[str, np.ndarray], model: ModelSpec, gpus: int, mask: np.ndarray | bool = True
) -> dict[str, np.ndarray]:
    """The rows of ``table`` (``mask``) whose columns so far make a valid layout (:func:`valid_layouts`)."""
    return _keep(table, valid_layouts(model, gpus, **{k: table[k] for k in BASE_NAMES if k in table}).ok & mask)


@dataclass
class SearchSpace:
    """A factorised grid of layouts for one cluster size (see the module docstring)."""

    gpus: int
    base: dict[str, np.ndarray]
    knobs: dict[str, np.ndarray]
    options: SearchOptions = field(default_factory=SearchOptions)

    @property
    def rows(self) -> int:
        return int(len(self.base["tp"]))

    @property
    def knob_shape(self) -> tuple[int, ...]:
        return tuple(len(self.knobs[k]) for k in KNOB_NAMES)

    @property
    def grid_size(self) -> int:
        """Points of the full broadcast grid (before :meth:`mask`)."""
        return self.rows * int(np.prod(self.knob_shape))

    def _col(self, name: str, rows: slice) -> np.ndarray:
        return self.base[name][rows].reshape((-1,) + (1,) * len(KNOB_NAMES))

    def _knob(self, name: str) -> np.ndarray:
        i = KNOB_NAMES.index(name)
        shape = [1] * (len(KNOB_NAMES) + 1)
        shape[i + 1] = -1
        return self.knobs[name].reshape(shape)

    def layout(self, rows: slice = slice(None)) -> TrainingLayout:
        """A broadcasting :class:`TrainingLayout` for base rows ``rows`` times every knob."""
        c = self._col
        return TrainingLayout(
            tp=c("tp", rows),
            pp=c("pp", rows),
            dp=c("dp", rows),
            cp=c("cp", rows),
            ep=c("ep", rows),
            etp=c("etp", rows),
            vp=c("vp", rows),
            micro_batch=c("micro_batch", rows),
            global_batch=c("global_batch", rows),
            sp=self._knob("sp"),
            zero=self._knob("zero"),
            fsdp=False,
            recompute=self._knob("recompute"),
            schedule=self._knob("schedule"),
            dp_overlap=self._knob("dp_overlap"),
            tp_overlap=self._knob("tp_overlap"),
        )

    def mask(self, rows: slice = slice(None)) -> np.ndarray:
        """Boolean array over the grid block of ``rows``: True for a distinct, supported layout.

        Removed: ``sp`` or ``tp_overlap`` without TP (and TP overlap without sequence parallelism,
        as Megatron requires), ZeRO stages without data parallelism, DP-overlap variants without
        DP, schedule variants of a single stage, ``interleaved`` without ``vp > 1`` or with a
        micro-batch count not a multiple of ``pp``, ``vp > 1`` with any other schedule,
        ``zero_bubble``/``dualpipe`` without pipeline stages, ``dualpipe`` with an odd ``pp`` or
        fewer micro-batches than ``pp``.
        """
        c = self._col
        tp, pp, dp, vp = c("tp", rows), c("pp", rows), c("dp", rows), c("vp", rows)
        m = c("global_batch", rows) // (c("micro_batch", rows) * dp)
        sp, zero = self._knob("sp"), self._knob("zero")
        sch, dpo, tpo = self._knob("schedule"), self._knob("dp_overlap"), self._knob("tp_overlap")
        first_dpo = self.knobs["dp_overlap"][0]
        single_sched = "1f1b" if "1f1b" in self.knobs["schedule"] else str(self.knobs["schedule"][0])
        inter = sch == "interleaved"
        ok = (tp > 1) | ~sp
        ok = ok & (~tpo | (sp & (tp > 1)))
        ok = ok & ((dp > 1) | (zero == 0))
        ok = ok & ((dp > 1) | (dpo == first_dpo))
        ok = ok & ((pp > 1) | (sch == single_sched))
        ok = ok & np.where(inter, (vp > 1) & (m % pp == 0), vp == 1)
        ok = ok & (((sch != "zero_bubble") & (sch != "dualpipe")) | (pp > 1))
        ok = ok & ((sch != "dualpipe") | ((pp % 2 == 0) & (m >= pp)))
        out: np.ndarray = np.broadcast_to(ok, (len(tp),) + self.knob_shape)
        return out

    def decode(self, rows_start: int, flat: np.ndarray) -> list[dict[str, Any]]:
        """Layout dicts for flat indices into the grid block starting at base row ``rows_start``."""
        idx = np.unravel_index(np.asarray(flat, dtype=np.int64), (self.rows - rows_start,) + self.knob_shape)
        out = []
        for j in range(len(idx[0])):
            r = rows_start + int(idx[0][j])
            d: dict[str, Any] = {k: int(self.base[k][r]) for k in BASE_NAMES}
            for i, k in enumerate(KNOB_NAMES):
                v = self.knobs[k][int(idx[i + 1][j])]
                d[k] = v.item() if hasattr(v, "item") else v
            d["gpus"] = self.gpus
            out.append(d)
        return out


def build_space(
    model: ModelSpec,
    cluster: ClusterInfo,
    global_batch: int | Sequence[int],
    options: SearchOptions | None = None,
) -> SearchSpace:
    """The pruned search space for ``model`` on ``cluster`` (all of its GPUs), as numpy arrays."""
    o = options or SearchOptions()
    gpus = int(cluster.gpus)
    gb_list = [int(global_batch)] if isinstance(global_batch, (int, np.integer)) else list(global_batch)
    gbs = np.unique(np.asarray(gb_list, dtype=np.int64))
    if o.global_batch is not None:
        gbs = np.unique(np.asarray(list(o.global_batch), dtype=np.int64))
    if len(gbs) == 0 or np.any(gbs < 1):
        raise SpecError("global batch must be a positive integer", field="training.global_batch")
    for name, vals in (("schedule", o.schedule), ("recompute", o.recompute)):
        allowed = SCHEDULES if name == "schedule" else ("none", "selective", "full")
        bad = [v for v in vals if v not in allowed]
        if bad or not vals:
            raise SpecError(f"unknown {name} {bad or vals!r}; use {', '.join(allowed)}", field=name)
    dom = domain_size(cluster)

    # tensor parallel: divides heads and KV heads, the GPU count and the NVLink domain
    tp_auto = divisors(int(np.gcd(np.gcd(model.heads, model.n_kv_heads), gpus)))
    tp_auto = tp_auto[(tp_auto <= dom) & (dom % tp_auto == 0)]
    tp_c = _cand(o.tp, tp_auto)
    uneven = o.uneven_pp if o.uneven_pp is not None else engine_allows_uneven_pp()
    pp_auto = divisors(gpus) if uneven else divisors(int(np.gcd(model.layers, gpus)))
    pp_c = _cand(o.pp, pp_auto[pp_auto <= model.layers])
    cp_auto = divisors(int(np.gcd(model.seq_len, gpus)))
    cp_c = _cand(o.cp, cp_auto[cp_auto <= o.max_cp] if o.cp is None else cp_auto)

    t: dict[str, np.ndarray] = {"tp": tp_c}
    t = _cross(t, "pp", pp_c)
    t = _cross(t, "cp", cp_c)
    t["dp"] = gpus // (t["tp"] * t["pp"] * t["cp"])
    t = _keep_valid(t, model, gpus)

    if model.moe is not None:
        # Megatron-Core's parallel folding: experts split over etp = tp (no folding) or etp = 1 (each
        # expert whole, EP then free to span tp x cp x dp, so EP may exceed DP)
        t = _cross(t, "fold", np.asarray([False, True]))
        t = _keep(t, ~t["fold"] | (t["tp"] > 1))  # with tp 1 folding changes nothing
        t["etp"] = np.where(t.pop("fold"), 1, t["tp"])
        ep_auto = divisors(int(np.gcd(model.moe.experts, gpus)))
        ep_c = _cand(o.ep, ep_auto)
        t = _cross(t, "ep", ep_c)
        t = _keep_valid(t, model, gpus)
    else:
        t["ep"] = np.ones_like(t["tp"])
        t["etp"] = t["tp"].copy()

    t = _cross(t, "global_batch", gbs)
    mb_auto = divisors(int(np.max(gbs)) if len(gbs) else 1)
    mb_auto = mb_auto[mb_auto <= o.max_micro_batch]
    t = _cross(t, "micro_batch", _cand(o.micro_batch, mb_auto) if o.micro_batch is not None else mb_auto)
    t = _keep_valid(t, model, gpus)

    vp_auto = divisors(model.layers)
    if uneven:
        # uneven chunks: also the small interleavings that do not divide the layers (Llama 3.1 405B's
        # 126 layers on pp 8 x vp 4 or 8)
        vp_auto = np.union1d(vp_auto, np.arange(1, UNEVEN_VP_MAX + 1))
    if o.max_vp is not None:
        vp_auto = vp_auto[vp_auto <= o.max_vp]
    vp_c = _cand(o.vp, vp_auto)
    if "interleaved" not in o.schedule:
        vp_c = vp_c[vp_c == 1] if 1 in vp_c else np.ones(1, dtype=np.int64)
    t = _cross(t, "vp", vp_c)
    even = model.layers % (t["pp"] * t["vp"]) == 0
    t = _keep_valid(t, model, gpus, (even | uneven) & ((t["vp"] == 1) | (t["pp"] > 1)))

    base = {k: t[k].astype(np.int64) for k in BASE_NAMES}
    knobs = {
        "sp": np.asarray(sorted(set(o.sp)), dtype=bool),
        "recompute": np.asarray(list(dict.fromkeys(o.recompute))),
        "zero": np.asarray(sorted(set(o.zero)), dtype=np.int64),
        "schedule": np.asarray(list(dict.fromkeys(o.schedule))),
        "dp_overlap": np.asarray(list(dict.fromkeys(o.dp_overlap)), dtype=bool),
        "tp_overlap": np.asarray(sorted(set(o.tp_overlap)), dtype=bool),
    }
    for k, v in knobs.items():
        if len(v) == 0:
            raise SpecError(f"no values to search for {k}", field=k)
    return SearchSpace(gpus=gpus, base=base, knobs=knobs, options=o)


__all__ = ["KNOB_NAMES", "SCHEDULES", "SearchOptions", "SearchSpace", "build_space", "divisors"]
