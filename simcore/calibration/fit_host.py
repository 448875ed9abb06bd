"""Host (CPU) overheads of eager PyTorch, measured per transformer layer and per optimizer tensor.

``tools/bench_host.py`` times eager constructs with tiny tensors so the GPU never bounds them
(``traces/h200/host.csv.gz``, ``host_infer.csv.gz``). This module turns those rows into the
``host_layer`` section of a compute profile (seconds):

* ``train_fwd_<act>`` / ``train_bwd_<act>``: host time of one layer's forward (grad enabled, autocast)
  and of its backward, for ``gelu`` (GPT: LayerNorm, GELU MLP) and ``swiglu`` (Llama: RMSNorm,
  SwiGLU, GQA) blocks — the slope between 1- and 4-layer models;
* ``ckpt_full_fwd_<act>`` / ``ckpt_full_bwd_<act>``: extra host time of checkpointing a whole layer
  (``torch.utils.checkpoint``, non-reentrant) in forward and in backward (recompute included);
* ``ckpt_selective``: extra host time of checkpointing the attention core of a layer;
* ``adamw_fused_per_tensor`` / ``adamw_fused_fixed`` (and ``adamw_foreach_*``): optimizer step host time;
* ``infer_decode_<act>`` / ``infer_prefill_<act>`` / ``infer_<mode>_fixed_<act>``: no-grad bf16 forward
  per layer for a decode step and a prefill, and the per-step cost outside the layers;
* ``fsdp_ratio_<fwd|bwd>`` / ``tp_ratio_<fwd|bwd>`` / ``ddp_ratio_<fwd|bwd>``: per-layer host time of
  a layer under FSDP2 (``fully_shard``), tensor parallelism or PyTorch DDP over the plain layer's,
  measured in one run; ``ddp_fixed``: DDP's extra host time per forward + backward outside the
  layers;
* ``profiled_ddp_param`` / ``profiled_ddp_bucket``: DDP's backward host work per gradient tensor (its
  autograd hook and the copy back from the bucket) and per bucket (the all-reduce call) while the
  profiler records, read from profiled DDP ranks' CPU timelines (``host_ddp_hooks.csv.gz``, made by
  ``simcore host-trace --ddp``); without the profiler these costs are within the
  per-layer ``ddp_ratio_bwd`` measured at width 64;
* ``ddp_bucket`` / ``fsdp_group`` / ``pp_action``: plain PyTorch's distributed wrappers' host per
  DDP gradient bucket, FSDP2 group and pipelining schedule action, from unprofiled host-bound steps
  (``host_dist_units_rank<r>.csv.gz``, :mod:`simcore.calibration.fit_dist_units`);
* ``graph_kernel_<act>``: device time of one small kernel replayed in a CUDA graph (the floor of a
  kernel inside a captured decode step);
* ``compiled_ratio_<fwd|bwd>_<act>`` (and ``profiled_compiled_ratio_...``): host time of a layer under
  ``torch.compile`` over the eager layer's, measured in one process (``tools/bench_compiled_host.py``,
  ``host_compiled.csv.gz``);
* ``profiled_compiled_<fwd|bwd>_<act>``, ``profiled_compiled_step_<fwd|bwd>_<act>``,
  ``probe_compiled_<main|backward>``: a profiled compiled step's host per layer and per micro-batch, in
  the compiled regions' own CPU-speed probe (``host_compiled_steps.csv.gz``,
  :func:`compiled_step_costs`);
* ``profiled_<entry>``: the entry while the PyTorch profiler records, the entry times the profiler's
  ratio measured in one process (``profiler_ratio_<decode|train>_<act>`` from the interleaved
  multi-process runs of ``tools/bench_host_size.py`` where they exist).

The engines take a phase's time as ``max(GPU time, host time)``: eager PyTorch queues kernels
asynchronously, so the slower of the two sides sets the pace. The model and its evidence: docs/compute.md,
"The host model (eager PyTorch)" and "torch.compile".
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from simcore.calibration.fit_dist_units import check, dist_unit_costs, is_dist_units_run, not_fitted
from simcore.errors import TraceError
from simcore.specs.profile import HostOps
from simcore.workload.model import WEIGHT_TENSORS_PER_LAYER

_ACT = {"gpt_ln_gelu": "gelu", "llama_rms_swiglu_gqa": "swiglu"}


def _csv_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a CSV file (gzip or plain), as dicts."""
    p = Path(path)
    try:
        raw = gzip.open(p, "rt") if p.suffix == ".gz" else open(p)  # noqa: SIM115
        with raw as f:
            text = f.read()
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read: {e}", file=str(p)) from None
    return list(csv.DictReader(io.StringIO(text)))


def _is_size_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and "profiled" in rows[0] and "run" in rows[0]


def _is_ddp_hook_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"per_param_s", "per_bucket_s"} <= set(rows[0])


def ddp_hook_costs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """``profiled_ddp_param`` / ``profiled_ddp_bucket``: PyTorch DDP's host seconds per gradient
    tensor and per gradient bucket while the profiler records, the medians over the profiled ranks
    of ``simcore host-trace --ddp`` (one row per rank's trace)."""
    try:
        param = [float(r["per_param_s"]) for r in rows]
        bucket = [float(r["per_bucket_s"]) for r in rows]
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad DDP hook row: {e}", file=str(path)) from None
    return {"profiled_ddp_param": statistics.median(param), "profiled_ddp_bucket": statistics.median(bucket)}


def fit_dist_unit_files(paths: list[str | Path]) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """``tools/bench_dist_steps.py --units`` files (every rank's together): the ``host_layer`` entries
    they give (:func:`~simcore.calibration.fit_dist_units.dist_unit_costs`), the held-out half's median
    |error| per family (:func:`~simcore.calibration.fit_dist_units.check`) and a line per family the
    fit leaves out (:func:`~simcore.calibration.fit_dist_units.not_fitted`)."""
    rows = [r for p in paths for r in _csv_rows(p)]
    name = ", ".join(str(p) for p in paths)
    if not is_dist_units_run(rows):
        raise TraceError("not a tools/bench_dist_steps.py --units table", file=name)
    return dist_unit_costs(rows, name), check(rows, name), not_fitted(rows)


def thread_probe(t: float, empty: float, ratio: float | None, training: bool = False) -> float:
    """One thread's CPU probe stated as ``aten::t`` (seconds; 0 where it has none): its median
    ``aten::t``; where it calls ``aten::t`` too rarely (``t`` 0: GPT-2's ``Conv1D`` layers), its
    ``aten::empty`` over their measured ``ratio``; on either thread of a ``training`` step with both,
    their geometric mean (on the autograd thread a backward layer's units across runs spread 0.064
    over ``aten::t`` alone, 0.043 over the two; on the main thread a forward layer's 0.023 and 0.016,
    the step's head 0.029 and 0.016, where rows time both). The fit rows and a validated trace take
    their probes from here; see docs/compute.md, the host model."""
    if t <= 0:
        return empty / ratio if empty > 0 and ratio else 0.0
    if training and empty > 0 and ratio:
        return math.sqrt(t * empty / ratio)
    return t


def gemm_pace(linear: float, linear_ratio: float | None, empty: float, empty_ratio: float | None) -> float:
    """A no-grad pass's CPU pace stated as ``aten::t`` (seconds; 0 where it has neither probe): the
    geometric mean of its GEMM op's median (``host_trace.GEMM_PROBE_OP``) over ``linear_ratio``
    (``probe_linear_ratio_infer_<code>``) and its ``aten::empty``'s over ``empty_ratio``
    (``probe_empty_ratio_infer_<code>``, measured on the same passes) where it has both, else the one
    it has. One op's median carries its own code's cost beside the CPU's speed (Qwen2's eager prefill
    issues its ``aten::linear`` 1.4x slower than a Llama's against its ``aten::empty``; 10-layer Qwen2
    prefill layers come out 15 % long over the GEMM op alone, 6 % over the two); on the fit passes, one
    code each, the two spread as the GEMM op alone (a layer's units across passes 0.034, ``aten::t``
    0.055). The fit rows and a validated trace take their pace from here; see docs/compute.md, the host
    model."""
    lin = linear / linear_ratio if linear > 0 and linear_ratio else 0.0
    emp = empty / empty_ratio if empty > 0 and empty_ratio else 0.0
    if lin and emp:
        return math.sqrt(lin * emp)
    return lin or emp


def code_probe_ratios(host: Mapping[str, float], code: str) -> tuple[float | None, float | None]:
    """The ratios to ``aten::t`` that :func:`gemm_pace` states a no-grad pass of ``code`` (``[hf_]<act>``,
    e.g. ``hf_swiglu``) at: its GEMM op's (``probe_linear_ratio_infer_<code>``) and its ``aten::empty``'s
    (``probe_empty_ratio_infer_<code>``, else the pooled ``probe_empty_ratio_infer``), as
    :func:`decode_host_costs` fitted them (``None`` where not)."""
    return (
        host.get(f"probe_linear_ratio_infer_{code}"),
        host.get(f"probe_empty_ratio_infer_{code}", host.get("probe_empty_ratio_infer")),
    )


def train_gemm_ratios(host: Mapping[str, float], code: str) -> tuple[float, float] | None:
    """The ratios to ``aten::t`` (as :func:`thread_probe` states it) at which a training step of ``code``
    (``[hf_]<act>``, e.g. ``hf_swiglu``) is paced by the mean of its GEMM ops: the main thread's
    (``host_trace.GEMM_PROBE_OP``) and the backward thread's ``aten::mm``
    (``probe_gemm_ratio_train_<code>_main`` / ``_backward``, fitted by :func:`step_host_costs` on steps of
    that code), or ``None`` where not measured. A layer's host time is the sum of its ops, launch calls
    and any waits they hold included; the mean GEMM op carries those where one cheap op's median does not
    (a layer's units over the GEMM ops' means spread 0.043 /
    0.046 across the fit steps (``traces/h200/host_steps_hf_r102.csv.gz``, ``host_steps_hf_r104.csv.gz``),
    forward / backward, against 0.072 / 0.064 over ``aten::t`` and ``aten::empty``; 30 held-apart steps of
    the same code 0.041 / 0.043 from the fit's, against 0.070 / 0.051)."""
    m = host.get(f"probe_gemm_ratio_train_{code}_main")
    b = host.get(f"probe_gemm_ratio_train_{code}_backward")
    return (m, b) if m and b else None


def _is_step_host_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"fwd_layer_s", "bhead_s", "probe_main_s", "probe_bwd_s"} <= set(rows[0])


_OPTIONAL = (
    "hooks_s",
    "empty_main_s",
    "empty_bwd_s",
    "linear_main_s",
    "mm_bwd_s",
    "gemm_mean_main_s",
    "mm_mean_bwd_s",
)


StepRec = tuple[str, str, bool, dict[str, float]]
"""A plain fused-AdamW step row: (strategy, act, synchronized, its times and layer count)."""
ActRec = tuple[str, bool, dict[str, float]]
"""A step row fitted by its MLP kind only: (act, synchronized, its times and layer count)."""
Sel = list[tuple[str, dict[str, float]]]
"""Selected step rows as (act, times)."""


@dataclass
class _StepRows:
    """The rows of ``host_trace --steps`` files sorted by what they fit (each row's numbers as a dict of
    floats: ``layers`` and every ``*_s`` column, in seconds)."""

    every: list[StepRec] = field(default_factory=list)
    """Simcore's own layers with fused AdamW, every strategy, the default profiler options."""
    hf: list[ActRec] = field(default_factory=list)
    """Hugging Face layers (``impl`` huggingface) with fused AdamW."""
    other_opt: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    """Single-GPU unsynchronized steps of another optimizer than fused AdamW, by optimizer: only its
    ``step()`` is fitted from them (and they are the plain-profiled baseline of the profiler options)."""
    by_options: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    """Single-GPU unsynchronized steps recorded with other profiler options, or with bf16 weights without
    autocast, by the host-layer prefix their ratios go to (``profiler_[hf_]<options>``,
    ``weights_[hf_]bf16``): only their ratios to plain-profiled steps of the same models are fitted."""
    own: list[ActRec] = field(default_factory=list)
    """Transformers' MoE layers (``<act>_moe``) and eager-attention layers (``<act>_eager``): only their
    own units are fitted from them."""
    act_of: dict[int, str] = field(default_factory=dict)
    """A row's MLP kind, by ``id`` of its numbers."""
    run_of: dict[int, str] = field(default_factory=dict)
    """A row's run (its trace without the pass suffix; the probe moves between runs), by ``id``."""


def _read_step_rows(rows: list[dict[str, str]], path: str | Path) -> _StepRows:
    """Parse and sort the rows of ``host_trace --steps`` files; a bad row raises a one-line
    :class:`~simcore.errors.TraceError` naming its line."""
    out = _StepRows()
    for line, r in enumerate(rows, start=2):
        try:
            sync = r["synchronized"].strip().lower()
            if sync not in ("1", "0", "true", "false"):
                raise ValueError(f"synchronized is {r['synchronized']!r}, not true/false")
            # every time must be given; only the newer columns (hooks_s, empty_*) may be empty
            vals = {
                "layers": float(r["layers"]),
                **{k: float(r[k] or 0.0) if k in _OPTIONAL else float(r[k]) for k in r if k.endswith("_s")},
            }
            if not all(math.isfinite(v) for v in vals.values()):
                raise ValueError("a value is not a finite number")
            rec = (r.get("strategy") or "single", r["act"], sync in ("1", "true"), vals)
            out.run_of[id(vals)] = _run_of(r.get("trace", ""))
            optimizer = (r.get("optimizer") or "adamw_fused").strip()
            out.act_of[id(vals)] = r["act"]
            hf = (r.get("impl") or "reference") == "huggingface"
            options = (r.get("profiler") or "").strip()
            # the host-layer prefix a row's ratios go to: the profiler's other options, or bf16 weights
            # without autocast
            ratio_key = f"profiler_{'hf_' if hf else ''}{options}" if options else ""
            if not options and (r.get("weights") or "fp32").strip() == "bf16" and "_moe" not in r["act"]:
                ratio_key = f"weights_{'hf_' if hf else ''}bf16"
            if ratio_key:
                if rec[0] == "single" and not rec[2]:
                    out.by_options.setdefault(ratio_key, []).append(vals)
            elif "_moe" in r["act"] or "_eager" in r["act"]:
                out.own.append(rec[1:])
            elif optimizer != "adamw_fused":
                if rec[0] == "single" and not rec[2] and not hf:
                    out.other_opt.setdefault(optimizer, []).append(vals)
            elif hf:
                out.hf.append(rec[1:])
            else:
                out.every.append(rec)
        except (KeyError, ValueError, AttributeError) as e:
            raise TraceError(f"bad step-host row (line {line}): {e}", file=str(path)) from None
    return out


def _probes_as_t(s: _StepRows) -> dict[str, float]:
    """``probe_empty_ratio_<main|backward>``: the median ``aten::empty`` / ``aten::t`` of the threads that
    time both (plain and Hugging Face fit rows). Every row's probe is then restated in place as
    :func:`thread_probe` states it (a thread that calls ``aten::t`` too rarely, GPT-2's ``Conv1D`` layers,
    is timed by its ``aten::empty`` over that ratio)."""
    out: dict[str, float] = {}
    all_vals = [rec[-1] for rec in s.every] + [rec[-1] for rec in s.hf]
    for probe, alt, key in (
        ("probe_main_s", "empty_main_s", "main"),
        ("probe_bwd_s", "empty_bwd_s", "backward"),
    ):
        both = [v[alt] / v[probe] for v in all_vals if v[probe] > 0 and v.get(alt, 0) > 0]
        if both:
            ratio = out[f"probe_empty_ratio_{key}"] = statistics.median(both)
            others = [v for d in (s.other_opt, s.by_options) for vs in d.values() for v in vs]
            for v in [*all_vals, *others, *(rec[-1] for rec in s.own)]:
                v[probe] = thread_probe(v[probe], v.get(alt, 0.0), ratio, training=True)
    return out


# each kind of host time of a step: (the probe of the thread that runs it, its seconds in a row)
_SEGMENTS: dict[str, tuple[str, Callable[[dict[str, float]], float]]] = {
    "train_fwd": ("probe_main_s", lambda v: v["fwd_layer_s"]),
    "train_bwd": ("probe_bwd_s", lambda v: v["bwd_layer_s"]),
    "step_fwd": ("probe_main_s", lambda v: v["pre_s"] + v["head_s"]),
    "step_bwd": ("probe_bwd_s", lambda v: v["bhead_s"] + v["tail_s"]),
}


def _probe_shares(
    sel: Sel, run_of: Mapping[int, str], ref_main: float, ref_backward: float
) -> dict[str, float]:
    """``probe_share_<kind>``: the share of each kind of host time that follows the probe (the rest is
    work whose time does not move with the CPU's per-op speed: driver launch calls, thread hand-offs),
    from how one run's segment moves with its probe between its passes (:func:`probe_share`)."""
    out: dict[str, float] = {}
    for kind, (probe, seg) in _SEGMENTS.items():
        runs: dict[str, list[tuple[float, float]]] = {}
        for _, v in sel:
            runs.setdefault(run_of.get(id(v), ""), []).append((v[probe], seg(v)))
        sh = probe_share(list(runs.values()), ref_main if probe == "probe_main_s" else ref_backward)
        if sh is not None:
            out[f"probe_share_{kind}"] = sh
    return out


@dataclass(frozen=True)
class _Pace:
    """The reference probes (seconds of ``aten::t`` on the main and backward threads) and the probe share of
    each kind of host time, which turn a row's seconds into CPU-speed units."""

    ref_main: float
    ref_backward: float
    shares: Mapping[str, float]

    def main(self, v: dict[str, float], kind: str) -> float:
        """The main thread's probe as the share of ``kind``'s host time that follows it sees it:
        ``share x probe + (1 - share) x reference``, so that units over it are the ones
        :meth:`ComputeProfile.host` scales back (a host time measured at a slow probe is not all
        probe-bound work)."""
        sh = self.shares.get(f"probe_share_{kind}", 1.0)
        return sh * v["probe_main_s"] + (1.0 - sh) * self.ref_main

    def backward(self, v: dict[str, float], kind: str) -> float:
        """:meth:`main` on the backward thread."""
        sh = self.shares.get(f"probe_share_{kind}", 1.0)
        return sh * v["probe_bwd_s"] + (1.0 - sh) * self.ref_backward


def _units(sel: list[dict[str, float]], f: Callable[[dict[str, float]], float]) -> float:
    """The median of ``f`` over the rows."""
    return statistics.median(f(v) for v in sel)


def _per_layer(sel: list[dict[str, float]], f: Callable[[dict[str, float]], float]) -> tuple[float, float]:
    """(level, slope per layer) of ``f``: units outside the layers as a line over the layer count (the work
    there that grows with the parameters: gradient accumulation, ``zero_grad``, the autograd graph's
    teardown), where the rows have two layer counts; else their median and no slope."""
    xs = [v["layers"] for v in sel]
    if len(set(xs)) < 2:
        return _units(sel, f), 0.0
    slope, icpt = statistics.linear_regression(xs, [f(v) for v in sel])
    if icpt < 0 or slope < 0:  # noise: keep the level
        return _units(sel, f), 0.0
    return icpt, slope


def _layer_and_step_units(free: Sel, hf_free: Sel, own_rows: Sel, pace: _Pace) -> dict[str, float]:
    """Per MLP kind, ``profiled_[hf_]train_<fwd|bwd>_<act>`` (one layer) and
    ``profiled_[hf_]step_<fwd|bwd>[_layer]_<act>`` (per micro-batch outside the layers, a line over the
    layer count), then ``profiled_[hf_]step_end[_layer]`` (after the optimizer); seconds at the reference
    probes. Transformers' MoE and eager-attention rows (``own_rows``) join the Hugging Face ones here."""
    out: dict[str, float] = {}
    ref_m, ref_b = pace.ref_main, pace.ref_backward
    for pre, sel_rows in (("", free), ("hf_", [*hf_free, *own_rows])):
        for act in sorted({a for a, _ in sel_rows}):
            sel = [v for a, v in sel_rows if a == act]
            out[f"profiled_{pre}train_fwd_{act}"] = ref_m * _units(
                sel, lambda v: v["fwd_layer_s"] / pace.main(v, "train_fwd")
            )
            out[f"profiled_{pre}train_bwd_{act}"] = ref_b * _units(
                sel, lambda v: v["bwd_layer_s"] / pace.backward(v, "train_bwd")
            )
            for part, ref, seg in (
                ("fwd", ref_m, lambda v: (v["pre_s"] + v["head_s"]) / pace.main(v, "step_fwd")),
                ("bwd", ref_b, lambda v: (v["bhead_s"] + v["tail_s"]) / pace.backward(v, "step_bwd")),
            ):
                lo, slope = _per_layer(sel, seg)
                out[f"profiled_{pre}step_{part}_{act}"] = ref * lo
                out[f"profiled_{pre}step_{part}_layer_{act}"] = ref * slope
    for pre, sel_rows in (("", free), ("hf_", hf_free)):
        if sel_rows:
            lo, slope = _per_layer([v for _, v in sel_rows], lambda v: v["post_s"] / v["probe_main_s"])
            out[f"profiled_{pre}step_end"] = ref_m * lo
            out[f"profiled_{pre}step_end_layer"] = ref_m * slope
    return out


def _gemm_ratios(free: Sel, hf_free: Sel) -> dict[str, float]:
    """``probe_gemm_ratio_train_[hf_]<act>_<main|backward>``: a training step's pace from its GEMM ops (the
    mean of every call: the dispatch, the launch call and any wait it holds, as the layers' own ops do)
    over ``aten::t``, the median over the fit steps of that code that time them
    (:func:`train_gemm_ratios`)."""
    out: dict[str, float] = {}
    for pre, sel_rows in (("", free), ("hf_", hf_free)):
        for act in sorted({a for a, _ in sel_rows}):
            for col, probe, thread in (
                ("gemm_mean_main_s", "probe_main_s", "main"),
                ("mm_mean_bwd_s", "probe_bwd_s", "backward"),
            ):
                rs = [
                    v[col] / v[probe]
                    for a, v in sel_rows
                    if a == act and v.get(col, 0.0) > 0 and v[probe] > 0
                ]
                if rs:
                    out[f"probe_gemm_ratio_train_{pre}{act}_{thread}"] = statistics.median(rs)
    return out


def _wrapper_units(every: list[StepRec], free: Sel, pace: _Pace) -> dict[str, float]:
    """A distributed wrapper's host beyond a single GPU's, in the same block's units (seconds at the
    reference probes): ``profiled_<strategy>_step_<fwd|bwd|end>`` outside the layers per micro-batch on
    each thread and per step after the optimizer (DDP's reducer preparing and finalising the buckets,
    FSDP2's root unshard and post-backward bookkeeping), and, where the rows have the same run's plain
    replicas (``single_x2`` rows, else the baseline is the single-GPU fit),
    ``profiled_<strategy>_ratio_<fwd|bwd>``: the wrapper's per-layer ratio in probe units."""
    out: dict[str, float] = {}
    base = [
        (a, v) for st, a, sync, v in every if st == "single_x2" and not sync and v["probe_main_s"] > 0
    ] or free

    def seg_units(sel: Sel, act: str) -> dict[str, float]:
        vs = [v for a, v in sel if a == act]
        return {
            "fl": _units(vs, lambda v: v["fwd_layer_s"] / pace.main(v, "train_fwd")),
            "bl": _units(vs, lambda v: v["bwd_layer_s"] / pace.backward(v, "train_bwd")),
            "sf": _units(vs, lambda v: (v["pre_s"] + v["head_s"]) / pace.main(v, "step_fwd")),
            # DDP's reducer work there is priced per gradient and bucket already (hooks_s)
            "sb": _units(
                vs,
                lambda v: (v["bhead_s"] + v["tail_s"] - v.get("hooks_s", 0.0)) / pace.backward(v, "step_bwd"),
            ),
            "end": _units(vs, lambda v: v["post_s"] / v["probe_main_s"]),
        }

    base_units = {act: seg_units(base, act) for act in {a for a, _ in base}}
    for strat in sorted({x[0] for x in every} - {"single", "single_x2"}):
        sel_s = [
            (a, v)
            for st, a, sync, v in every
            if st == strat and not sync and a in base_units and v["probe_main_s"] > 0 and v["probe_bwd_s"] > 0
        ]
        if not sel_s:
            continue
        per_act = {act: seg_units(sel_s, act) for act in {a for a, _ in sel_s}}

        def extra(key: str, per_act: dict[str, dict[str, float]] = per_act) -> float:
            return statistics.fmean(per_act[a][key] - base_units[a][key] for a in per_act)

        out[f"profiled_{strat}_step_fwd"] = pace.ref_main * max(extra("sf"), 0.0)
        out[f"profiled_{strat}_step_bwd"] = pace.ref_backward * max(extra("sb"), 0.0)
        out[f"profiled_{strat}_step_end"] = pace.ref_main * max(extra("end"), 0.0)
        if base is not free:  # the same run's replicas: the wrapper's per-layer ratio in probe units
            out[f"profiled_{strat}_ratio_fwd"] = statistics.fmean(
                per_act[a]["fl"] / base_units[a]["fl"] for a in per_act
            )
            # DDP's backward extra is its hooks, priced per gradient and bucket
            out[f"profiled_{strat}_ratio_bwd"] = (
                1.0
                if strat == "ddp"
                else statistics.fmean(per_act[a]["bl"] / base_units[a]["bl"] for a in per_act)
            )
    return out


def _option_ratios(s: _StepRows, hf_free: Sel) -> dict[str, float]:
    """``profiler_[hf_]<options>_<kind>`` (the profiler's other options: with_stack, profile_memory, no
    record_shapes) and ``weights_[hf_]bf16_<kind>[_<act>]`` (bf16 weights without autocast): the median
    over the models of each kind of host time's units under them over its units in the same models'
    plain profiled steps. Simcore's layers are compared with the other-optimizer rows (recorded beside
    them), transformers' with the Hugging Face fit rows; bf16 weights also per MLP kind."""
    out: dict[str, float] = {}
    plain_rows = [v for vs in s.other_opt.values() for v in vs]
    hf_plain = [v for _a, v in hf_free]
    seg_of: dict[str, Callable[[dict[str, float]], float]] = {
        "train_fwd": lambda v: v["fwd_layer_s"] / v["probe_main_s"],
        "train_bwd": lambda v: v["bwd_layer_s"] / v["probe_bwd_s"],
        "step_fwd": lambda v: (v["pre_s"] + v["head_s"]) / v["probe_main_s"],
        "step_bwd": lambda v: (v["bhead_s"] + v["tail_s"]) / v["probe_bwd_s"],
        "step_end": lambda v: v["post_s"] / v["probe_main_s"],
    }

    def of_model(
        rows: list[dict[str, float]], model: tuple[str, float], seg: Callable[[dict[str, float]], float]
    ) -> list[float]:
        """``seg`` of the rows of one model (MLP kind, layer count) that have both probes."""
        return [
            seg(v)
            for v in rows
            if (s.act_of[id(v)], v["layers"]) == model and v["probe_main_s"] > 0 and v["probe_bwd_s"] > 0
        ]

    for ratio_key, vs in sorted(s.by_options.items()):
        base_rows = hf_plain if "_hf_" in ratio_key else plain_rows
        models = sorted({(s.act_of[id(v)], v["layers"]) for v in vs})
        for kind, seg in seg_of.items():
            ratios: list[float] = []
            for model in models:
                under, plain = of_model(vs, model, seg), of_model(base_rows, model, seg)
                if under and plain and statistics.median(plain) > 0:
                    ratios.append(statistics.median(under) / statistics.median(plain))
            if ratios:
                out[f"{ratio_key}_{kind}"] = statistics.median(ratios)
            if ratio_key.startswith("weights_"):
                # bf16 weights save a different share of each block's host (Llama and GPT-2 rows:
                # 0.82x / 0.72x a forward layer): per MLP kind beside the pooled factor
                for act in sorted({m[0] for m in models}):
                    own = [
                        statistics.median(u) / statistics.median(p)
                        for model in models
                        if model[0] == act
                        and (u := of_model(vs, model, seg))
                        and (p := of_model(base_rows, model, seg))
                        and statistics.median(p) > 0
                    ]
                    if own:
                        out[f"{ratio_key}_{kind}_{act}"] = statistics.median(own)
    return out


def _optimizer_lines(
    free: Sel, other_opt: dict[str, list[dict[str, float]]], ref_main: float
) -> dict[str, float]:
    """``profiled_<optimizer>_per_tensor`` / ``_fixed``: ``optimizer.step()`` as a least-squares line over
    the parameter tensor count in probe units, per optimizer and implementation (fused AdamW from the fit
    rows; torch.optim's foreach AdamW and SGD from the other-optimizer rows), seconds at the reference
    probe. The fit models (``tools/gpt.py``: bias-free, gate/up fused, untied) have
    ``WEIGHT_TENSORS_PER_LAYER`` tensors per layer + 3."""
    out: dict[str, float] = {}
    for key, vs in {"adamw_fused": [v for _, v in free], **other_opt}.items():
        vs = [v for v in vs if v["probe_main_s"] > 0]
        xs = [WEIGHT_TENSORS_PER_LAYER * v["layers"] + 3.0 for v in vs]
        ys = [v["optimizer_s"] / v["probe_main_s"] for v in vs]
        if len(set(xs)) >= 2:
            slope, icpt = statistics.linear_regression(xs, ys)
            out[f"profiled_{key}_per_tensor"] = ref_main * max(slope, 0.0)
            out[f"profiled_{key}_fixed"] = ref_main * max(icpt, 0.0)
    return out


def step_host_costs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """Profiled host entries in CPU-speed units (seconds at the reference probes) from whole profiled
    training steps (rows of ``simcore host-trace --steps``); see docs/compute.md,
    the host model.

    Every segment of a step is divided by the step's own ``aten::t`` median on the thread that runs it
    (main: forward, head, optimizer, end; backward: the autograd nodes), so the CPU's speed of the
    moment cancels; the medians over the unsynchronized steps, times the median probe of all steps
    (``probe_main`` / ``probe_backward``, the speed these entries stand for), give seconds:

    * ``profiled_train_fwd_<act>`` / ``profiled_train_bwd_<act>``: one layer's forward / backward;
    * ``profiled_step_fwd_<act>``: per micro-batch outside the layers on the main thread (the
      embedding, the LM head, the loss, the ``backward()`` call), a line over the layer count:
      ``profiled_step_fwd_layer_<act>`` per layer (likewise ``step_bwd``, ``step_end``);
    * ``profiled_step_bwd_<act>``: per micro-batch outside the layers on the backward thread (loss and
      LM head backward, the embedding backward, gradient accumulation);
    * ``profiled_adamw_fused_fixed`` / ``profiled_adamw_fused_per_tensor``: ``optimizer.step()``, a
      least-squares line over the parameter tensor count (:func:`_optimizer_lines`);
    * ``profiled_step_end``: after the optimizer to the next step (``zero_grad``, the loop);
    * ``profiled_<ddp|fsdp|tp>_step_<fwd|bwd|end>``: rows labelled with a distributed wrapper (the
      slowest-CPU rank of profiled runs, ``--strategy``): their units beyond the single-GPU ones
      (:func:`_wrapper_units`);
    * ``profiled_hf_<train|step>_<fwd|bwd>_<act>``: the same four for rows of Hugging Face layers
      (``impl`` huggingface), at the reference probes of the plain rows;
    * ``probe_empty_ratio_<main|backward>``: the median ``aten::empty`` / ``aten::t`` of the threads
      that time both; a thread without enough ``aten::t`` (GPT-2's ``Conv1D`` layers) is timed by its
      ``aten::empty`` over that ratio;
    * ``probe_share_<kind>``, ``probe_gemm_ratio_train_...``, ``profiler_<options>_<kind>``,
      ``weights_bf16_<kind>``: see :func:`_probe_shares`, :func:`_gemm_ratios`, :func:`_option_ratios`.
    """
    s = _read_step_rows(rows, path)
    out = _probes_as_t(s)
    recs = [(a, sync, v) for strat, a, sync, v in s.every if strat == "single"]
    if not recs:
        raise TraceError("no single-GPU step rows (strategy single)", file=str(path))
    free = [(a, v) for a, sync, v in recs if not sync and v["probe_main_s"] > 0 and v["probe_bwd_s"] > 0]
    if not free:
        raise TraceError("no unsynchronized step with probes", file=str(path))
    ref_m = statistics.median(v["probe_main_s"] for _, _, v in recs)
    ref_b = statistics.median(v["probe_bwd_s"] for _, _, v in recs)
    out.update({"probe_main": ref_m, "probe_backward": ref_b})
    # Hugging Face's layers (rows labelled impl huggingface): their own units, at the same reference
    hf_free = [(a, v) for a, sync, v in s.hf if not sync and v["probe_main_s"] > 0 and v["probe_bwd_s"] > 0]
    # transformers' MoE layers (act ``<act>_moe``) and eager-attention layers (``<act>_eager``): their
    # per-layer and per-step units only, synchronized rows included: MoE steps wait for the GPU inside the
    # layers (the fp32 grouped GEMM's per-expert sizes), and every eager-attention fit step waits once
    # before its layers (a device-to-host copy as the 4-D mask is built, ~15 us)
    own_rows = [(a, v) for a, _sync, v in s.own if v["probe_main_s"] > 0 and v["probe_bwd_s"] > 0]
    # the probe shares pool the plain and Hugging Face layers
    shares = _probe_shares([*free, *hf_free], s.run_of, ref_m, ref_b)
    out.update(shares)
    pace = _Pace(ref_m, ref_b, shares)
    out.update(_layer_and_step_units(free, hf_free, own_rows, pace))
    out.update(_gemm_ratios(free, hf_free))
    out.update(_wrapper_units(s.every, free, pace))
    out.update(_option_ratios(s, hf_free))
    out.update(_optimizer_lines(free, s.other_opt, ref_m))
    return out


def _run_of(trace: str) -> str:
    """A trace file's run: its name without the pass suffix (``r25_train_gpt_L2_h768_p1.json.gz`` ->
    ``r25_train_gpt_L2_h768``)."""
    return re.sub(r"_p\d+(\.json)?(\.gz)?$", "", Path(trace).name)


def probe_share(runs: list[list[tuple[float, float]]], ref: float) -> float | None:
    """The share ``s`` of a host time that follows the CPU probe: ``time = U (s probe + (1 - s) ref)``
    with ``U`` one run's own, chosen (0.2-1 in steps of 0.01) to make each run's units over that
    effective probe as constant as possible across its passes, which ran at different CPU speeds
    (least squares of the log units about each run's mean). ``None`` where fewer than three runs
    span a probe ratio of 1.15."""
    spans = [r for r in runs if len(r) >= 2 and max(p for p, _ in r) > 1.15 * min(p for p, _ in r)]
    if len(spans) < 3 or ref <= 0:
        return None

    def cost(sh: float) -> float:
        c = 0.0
        for r in spans:
            y = [math.log(x / (sh * p + (1.0 - sh) * ref)) for p, x in r if x > 0 and p > 0]
            if len(y) >= 2:
                m = statistics.fmean(y)
                c += sum((v - m) ** 2 for v in y)
        return c

    return min((i / 100 for i in range(20, 101)), key=cost)


def _is_decode_host_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"pass_s", "layer_s", "probe_main_s"} <= set(rows[0])


def decode_host_costs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """Profiled decode host entries in CPU-speed units from eager decode passes (rows of ``simcore
    host-trace --decode``; see docs/compute.md, the host model): per layer (the norms' spacing) and per step
    outside the layers (the pass minus its layers: embedding, final norm, LM head, sampling), each over
    the step's ``aten::t`` median, times the median probe of all passes (``probe_infer``; a no-grad
    op costs less host than one under autograd and autocast, so inference has its own reference).
    Rows of Hugging Face layers (``impl`` huggingface) give ``profiled_hf_infer_decode_*`` at
    the same reference; ``probe_empty_ratio_infer`` states an ``aten::empty`` probe as ``aten::t``.
    Passes of ``generate()`` (``loop`` generate) give only the host beyond their layers,
    ``profiled_[hf_]infer_generate_fixed_<act>``. Rows that time the GEMM op too give
    ``probe_linear_ratio_infer_[hf_]<act>``, its median over ``aten::t`` (GPT-2's ``aten::empty`` as
    ``aten::t``): a trace's GEMM-op probe stated as ``aten::t``."""
    try:
        passes = [
            _Pass(
                r["act"],
                float(r["layers"]),
                float(r["pass_s"]),
                float(r["layer_s"]),
                float(r["probe_main_s"]),
                float(r.get("empty_main_s") or 0.0),
                (r.get("impl") or "reference") == "huggingface",
                (r.get("loop") or "manual") == "generate",
                int(float(r.get("seq") or 1)),
                float(r.get("linear_main_s") or 0.0),
            )
            for r in rows
        ]
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad decode-host row: {e}", file=str(path)) from None
    out: dict[str, float] = {}
    both = [
        x.empty / x.probe
        for x in passes
        if x.seq == 1 and x.probe > 0 and x.empty > 0 and "_moe" not in x.act and "_eager" not in x.act
    ]
    if both:
        # a pass without enough aten::t (GPT-2's Conv1D layers) is timed by its aten::empty
        ratio = out["probe_empty_ratio_infer"] = statistics.median(both)
        passes = [x._replace(probe=thread_probe(x.probe, x.empty, ratio)) for x in passes]
    passes = [x for x in passes if x.probe > 0]
    recs = [x for x in passes if x.seq == 1]
    if not any(not x.hf for x in recs):
        raise TraceError("no decode pass with a probe", file=str(path))
    ref = statistics.median(x.probe for x in recs if not x.hf)
    out["probe_infer"] = ref
    # a no-grad pass's steadier probe, its GEMM op (host_trace.GEMM_PROBE_OP: aten::linear, or GPT-2's
    # Conv1D addmm), stated as aten::t per code and block kind (about 8.9 for simcore's Llama, 10.7 for
    # GPT's biased linears, 8.8 for transformers' Llama)
    lin: dict[str, list[float]] = {}
    emp: dict[str, list[float]] = {}
    for x in recs:
        if x.linear > 0:
            lin.setdefault(f"{'hf_' if x.hf else ''}{x.act}", []).append(x.linear / x.probe)
            if x.empty > 0:
                emp.setdefault(f"{'hf_' if x.hf else ''}{x.act}", []).append(x.empty / x.probe)
    for key, v in lin.items():
        out[f"probe_linear_ratio_infer_{key}"] = statistics.median(v)
    # and its aten::empty, where the same passes time both (gemm_pace: the two beside each other; a code's
    # aten::empty costs its own share of an aten::t, 0.73-0.93 over the fit files)
    for key, v in emp.items():
        out[f"probe_empty_ratio_infer_{key}"] = statistics.median(v)

    def put(kind: str, act: str, sel: list[_Pass], layers: bool = True) -> None:
        """``profiled_<kind>_<act>``: the passes' units per layer (where ``layers``), and
        ``profiled_<kind>_fixed_<act>``: beyond their layers, both at ``ref``."""
        if layers:
            out[f"profiled_{kind}_{act}"] = ref * statistics.median(x.layer_s / x.probe for x in sel)
        out[f"profiled_{kind}_fixed_{act}"] = ref * max(
            statistics.median((x.pass_s - x.layers * x.layer_s) / x.probe for x in sel), 0.0
        )

    for pre, hf in (("", False), ("hf_", True)):
        for act in sorted({x.act for x in recs if x.hf == hf}):
            sel = [x for x in recs if x.act == act and x.hf == hf and not x.generate]
            gen = [x for x in recs if x.act == act and x.hf == hf and x.generate]
            if sel:
                put(f"{pre}infer_decode", act, sel)
            elif gen:
                # a layer that runs only inside generate() (transformers' batched experts in its decode
                # passes): its decode entries from those passes
                put(f"{pre}infer_decode", act, gen)
            if gen:
                # generate(): the pass beyond its layers (logits processors, stopping criteria, cache)
                put(f"{pre}infer_generate", act, gen, layers=False)
    # prefill passes in hand-written loops (rows with seq > 1; Hugging Face layers and simcore's own):
    # per layer and beyond the layers, at the same reference (the prompt hardly moves the host of a
    # prefill: 512-2048-token prompts)
    for pre, hf in (("", False), ("hf_", True)):
        pre_rows = [x for x in passes if x.seq > 1 and x.hf == hf and not x.generate]
        for act in sorted({x.act for x in pre_rows}):
            put(f"{pre}infer_prefill", act, [x for x in pre_rows if x.act == act])
    return out


class _Pass(NamedTuple):
    """One forward pass of a ``host_trace --decode`` row (seconds; ``probe``: its ``aten::t``)."""

    act: str
    layers: float
    pass_s: float
    layer_s: float
    probe: float
    empty: float
    hf: bool
    generate: bool
    seq: int
    linear: float = 0.0


def _is_graph_sync_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"replays_per_sync", "wall_per_iter_s", "bb_per_replay_s", "model"} <= set(rows[0])


def _is_graph_replay_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"kernels_per_replay", "busy_per_replay_s", "gap_per_kernel_s"} <= set(rows[0])


def graph_loop_costs(
    sync_rows: list[dict[str, str]], replay_rows: list[dict[str, str]], path: str | Path
) -> dict[str, float]:
    """CUDA-graph decode loops (``tools/bench_graph_sync.py``; see docs/compute.md, the host model): per model, the wall time of R
    replays and a synchronize against R x the back-to-back replay time gives what one synchronize
    exposes (the GPU idles until the host has launched the next graph); the same models' profiled
    traces (``simcore host-trace --graphs``) give the kernels per replay and
    their summed time.

    * ``graph_sync_fixed`` / ``graph_sync_per_kernel``: a least-squares line of the exposed cost over
      the kernels per replay, unprofiled (``profiled_...``: under the profiler, whose launch call takes
      ~1.6 us per graph node); where the traces' rows read the device idle at the ends of each profiled
      step (``step_exposed_s`` per wait: the loop, ``profiler.step()``, the first launch after the wait,
      the wait's return), the profiled line is fitted to those instead: what a trace shows per step;
    * ``profiled_graph_replay_gap``: device idle between back-to-back replays in the profiled traces;
    * ``graph_kernel_gap``: device idle between consecutive kernels of a replay, unprofiled (the
      back-to-back replay time minus the kernels' time, per kernel); ``profiled_graph_kernel_gap``: read
      in the profiled traces (first kernel's start to last kernel's end, minus the kernels)."""

    def num(v: str) -> float:
        x = float(v)
        if not math.isfinite(x):
            raise ValueError(f"{v!r} is not a finite number")
        return x

    try:
        replays = {
            Path(r["trace"]).name.removeprefix("graph_").split(".json")[0]: (
                num(r["kernels_per_replay"]),
                num(r["busy_per_replay_s"]),
                num(r["gap_per_kernel_s"]),
            )
            for r in replay_rows
        }
        replays = {m: v for m, v in replays.items() if v[0] >= 2}
        # newer rows: the device idle at a profiled step's ends per wait, and between replays
        steps = {
            Path(r["trace"]).name.removeprefix("graph_").split(".json")[0]: num(r["step_exposed_s"])
            / num(r["syncs_per_step"])
            for r in replay_rows
            if r.get("step_exposed_s") and r.get("syncs_per_step") and num(r["syncs_per_step"]) > 0
        }
        replay_gaps = [num(r["replay_gap_s"]) for r in replay_rows if r.get("replay_gap_s")]
        sync: dict[tuple[str, bool], list[float]] = {}
        bb: dict[str, list[float]] = {}
        for r in sync_rows:
            flag = r["profiled"].strip().lower()
            if flag not in ("0", "1", "true", "false"):
                raise ValueError(f"profiled is {r['profiled']!r}, not 0/1")
            prof = flag in ("1", "true")
            w, b, n = num(r["wall_per_iter_s"]), num(r["bb_per_replay_s"]), num(r["replays_per_sync"])
            sync.setdefault((r["model"], prof), []).append(w - n * b)
            if not prof:
                bb.setdefault(r["model"], []).append(b)
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad CUDA-graph row: {e}", file=str(path)) from None
    models = sorted(m for m in replays if (m, False) in sync and (m, True) in sync)
    if len({replays[m][0] for m in models}) < 2:
        raise TraceError(
            "needs the sync runs and the traces of two or more models with different kernel counts",
            file=str(path),
        )
    out: dict[str, float] = {}
    xs = [replays[m][0] for m in models]
    for prof in (False, True):
        slope, icpt = statistics.linear_regression(xs, [statistics.median(sync[(m, prof)]) for m in models])
        pre = "profiled_" if prof else ""
        out[f"{pre}graph_sync_per_kernel"] = max(slope, 0.0)
        out[f"{pre}graph_sync_fixed"] = max(icpt, 0.0)
    out["graph_kernel_gap"] = statistics.median(
        max(statistics.median(bb[m]) - replays[m][1], 0.0) / replays[m][0] for m in models
    )
    out["profiled_graph_kernel_gap"] = statistics.median(replays[m][2] for m in models)
    # profiled traces of the loop (one profiler step per wait) expose more per wait than the timing
    # loops, which call no profiler.step(): the loop and the step boundary before the first launch,
    # a slower first launch, the return of the wait after the last kernel; where the rows read it
    per_wait = {m: w for m, w in steps.items() if m in replays and w > 0}
    if len({replays[m][0] for m in per_wait}) >= 2:
        slope, icpt = statistics.linear_regression([replays[m][0] for m in per_wait], list(per_wait.values()))
        out["profiled_graph_sync_per_kernel"] = max(slope, 0.0)
        out["profiled_graph_sync_fixed"] = max(icpt, 0.0)
    if replay_gaps:
        # back-to-back replays of a profiled loop: the device idles between one's last kernel and the
        # next one's first (unprofiled, inside the back-to-back time that graph_kernel_gap spreads)
        out["profiled_graph_replay_gap"] = statistics.median(replay_gaps)
    return out


def _is_compiled_decode_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"kernels_per_replay", "call_s", "linear_main_s"} <= set(rows[0])


def _empty_probe(ref: dict[str, float], path: str | Path, what: str) -> tuple[float, float]:
    """(``probe_infer``, ``probe_empty_ratio_infer``) of ``ref``: the reference inference probe and its
    ``aten::empty`` ratio, which state a compiled decode's host at the reference pace."""
    ratio = ref.get("probe_empty_ratio_infer")
    probe = ref.get("probe_infer")
    if not ratio or not probe:
        raise TraceError(
            f"{what} rows need the inference probe and its aten::empty ratio (host_decode rows)", file=str(path)
        )
    return probe, ratio


def _kernel_line(rows: list[dict[str, str]], col: str, probe: float, ratio: float) -> tuple[float, float]:
    """(fixed, per kernel) seconds of ``col`` over the rows' graphs' kernels (``kernels_per_replay``), each
    row stated at the reference probe from its ``empty_main_s`` pace; both clipped at 0."""
    xs = [float(r["kernels_per_replay"]) for r in rows]
    ys = [float(r.get(col) or 0.0) * probe / (float(r["empty_main_s"]) / ratio) for r in rows]
    slope, icpt = statistics.linear_regression(xs, ys)
    return max(icpt, 0.0), max(slope, 0.0)


def _line_entries(name: str, line: tuple[float, float]) -> dict[str, float]:
    """``<name>_fixed`` / ``<name>_per_kernel`` and their ``profiled_`` twins (the same values: measured
    under the profiler only, whose extra host per aten op does not apply to guards and driver calls)."""
    out = {f"{name}_fixed": line[0], f"{name}_per_kernel": line[1]}
    return {**out, **{f"profiled_{k}": v for k, v in out.items()}}


def compiled_decode_costs(
    rows: list[dict[str, str]], path: str | Path, ref: dict[str, float], host_ops: HostOps | None = None
) -> dict[str, float]:
    """The compiled call of a static-cache ``generate()`` decode pass (``host_trace --compiled-decode``,
    see docs/compute.md, torch.compile): a least-squares line over the graph's kernels of each trace's
    median call (dynamo's guards, the inputs' copies, the graph's launch), stated at the reference
    inference probe (``probe_infer``): each trace's probe is its windowed ``aten::empty`` over
    ``probe_empty_ratio_infer`` (the loop's own ops; its ``aten::linear`` calls are the prefill's few).
    ``compiled_decode_call_fixed`` / ``_per_kernel`` and their ``profiled_`` twins (measured under the
    profiler only; its extra host per aten op does not apply to the guards and driver calls, so the
    plain entries take the same values); with the rows' ``act`` and ``prefill_layer_s``,
    ``compiled_decode_prefill_layer_ratio``: the eager prefill's host per layer in such a run over the
    profile's Hugging Face prefill layer at the trace's ``aten::linear`` pace; with ``pass_weight`` and
    ``prefill_outside_s`` and ``host_ops`` (the calibrated passes' weights), ``compiled_decode_prefill_fixed_ratio``:
    the prefill's host outside its layers over
    the ``generate()`` entry the engine prices it at. Those from the host-bound rows (a decode whose
    host waits under half as long as it leads, ``wait_s <= 0.5 lead_s``), where
    the call is what a pass's host costs. With ``lead_s``, ``[profiled_]compiled_decode_lead_fixed`` / ``_per_kernel``: what
    the GPU idles from a step's wait for it to the graph's first kernel, a line over the graph's kernels at
    the reference probe, from the GPU-bound rows (fit traces with waits of 1-5 ms: right after
    a wait the loop's ops and the call run 1.0-1.3x their host-bound pace), the host-bound ones where fewer than two."""
    probe, ratio = _empty_probe(ref, path, "compiled decode")
    rows = [r for r in rows if float(r["empty_main_s"]) > 0]
    gpu_bound = [r for r in rows if float(r.get("wait_s") or 0.0) > float(r.get("lead_s") or 0.0) > 0]
    # a decode that waits for its graph about as long as it leads it (batch 96) is neither: its
    # eager prefill waits for the GPU too
    host_bound = [r for r in rows if float(r.get("wait_s") or 0.0) <= 0.5 * float(r.get("lead_s") or 0.0)]
    if len(host_bound) < 2:
        raise TraceError("compiled decode rows need two host-bound traces or more", file=str(path))
    out = _line_entries("compiled_decode_call", _kernel_line(host_bound, "call_s", probe, ratio))
    # the eager prefill beside a compiled decode: its host per layer over the profile's eager
    # Hugging Face prefill layer (fitted on hand-written loops) at the trace's pace, its aten::linear
    # stated as aten::t (1.06-1.23 over the host-bound traces, as simcore validate reads them)
    ratios = []
    for r in host_bound:
        act = r.get("act") or ""
        lin, emp = code_probe_ratios(ref, f"hf_{act}")
        layer = ref.get(f"profiled_hf_infer_prefill_{act}")
        pace = gemm_pace(float(r["linear_main_s"]), lin, float(r["empty_main_s"]), emp) if lin else 0.0
        if layer and pace > 0 and float(r.get("prefill_layer_s") or 0.0) > 0:
            ratios.append(float(r["prefill_layer_s"]) / (layer * pace / probe))
    if ratios:
        out["compiled_decode_prefill_layer_ratio"] = float(statistics.median(ratios))
    # the eager prefill's pass outside its layers (its embedding, final norm, LM head and the loop's ops on
    # its token) over what the engine prices for it: the generate() entry at the pass's weight beside a
    # compiled decode (the loop's plus the calibrated generate() pass's beyond the calibrated compiled loop's)
    # at the trace's aten::linear pace (1.0-1.5 over the host-bound traces)
    outside = []
    for r in host_bound:
        act = r.get("act") or ""
        lin, emp = code_probe_ratios(ref, f"hf_{act}")
        gen = ref.get(f"profiled_hf_infer_generate_fixed_{act}")
        eager = host_ops.calibrated_pass_ops("huggingface", True, act, False) if host_ops else None
        weight = float(r.get("pass_weight") or 0.0)
        pass_weight = (
            host_ops.compiled_prefill_pass_weight(weight, "huggingface", True, act, False)
            if host_ops and weight > 0
            else None
        )
        got = float(r.get("prefill_outside_s") or 0.0)
        if lin and gen and eager and pass_weight and got > 0:
            pace = gemm_pace(float(r["linear_main_s"]), lin, float(r["empty_main_s"]), emp)
            outside.append(got / (gen * pass_weight / eager * pace / probe))
    if outside:
        out["compiled_decode_prefill_fixed_ratio"] = float(statistics.median(outside))
    # the GPU's idle from a step's wait for it to its graph's first kernel: the loop's own ops, the call, the
    # launch (what a GPU-bound decode idles each step), from the runs where it is exposed
    led = [r for r in (gpu_bound if len(gpu_bound) >= 2 else rows) if float(r.get("lead_s") or 0.0) > 0]
    if len({r["kernels_per_replay"] for r in led}) >= 2:
        out.update(_line_entries("compiled_decode_lead", _kernel_line(led, "lead_s", probe, ratio)))
    return out


def _is_graph_record_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"record_s", "kernels_per_replay", "empty_main_s"} <= set(rows[0])


def graph_record_costs(
    rows: list[dict[str, str]], path: str | Path, ref: dict[str, float]
) -> dict[str, float]:
    """A compiled decode graph's recording (``host_trace --graph-records``): a least-squares line
    over the graph's kernels of each trace's GPU idle per recording beyond the steady call, stated at the
    reference inference probe as :func:`compiled_decode_costs` states the call (the region's Python runs at the
    decode passes' ``aten::empty`` pace): ``compiled_decode_record_fixed`` / ``_per_kernel`` and their
    ``profiled_`` twins (measured under the profiler only, the same values)."""
    probe, ratio = _empty_probe(ref, path, "graph record")
    rows = [r for r in rows if float(r["empty_main_s"]) > 0 and int(float(r["records"])) > 0]
    if len({float(r["kernels_per_replay"]) for r in rows}) < 2:
        raise TraceError("graph record rows need two traces of different graphs or more", file=str(path))
    return _line_entries("compiled_decode_record", _kernel_line(rows, "record_s", probe, ratio))


def _is_generate_call_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"setup_s", "compiled_decode", "linear_main_s"} <= set(rows[0])


def generate_call_costs(
    rows: list[dict[str, str]], path: str | Path, ref: dict[str, float]
) -> dict[str, float]:
    """A transformers ``generate()`` call's host before its prefill (``host_trace --generate``: dynamic-cache
    runs and static-cache compiled ones), the median over the traces stated at the
    reference inference probe (``probe_infer``), each trace's probe read as ``simcore validate`` reads the
    prefill's (:func:`gemm_pace`: its ``aten::linear`` over ``probe_linear_ratio_infer_hf_<act>`` and its
    ``aten::empty`` over ``probe_empty_ratio_infer``). ``[profiled_]hf_infer_generate_call`` (dynamic cache) and
    ``[profiled_]hf_compiled_decode_generate_call`` (a static cache reset each call); measured under the
    profiler only, the plain entries take the same values."""
    probe = ref.get("probe_infer")
    empty = ref.get("probe_empty_ratio_infer")
    if not probe or not empty:
        raise TraceError(
            "generate() call rows need the inference probe and its ratios (host_decode rows)", file=str(path)
        )
    by: dict[bool, list[float]] = {False: [], True: []}
    for r in rows:
        compiled = r["compiled_decode"] == "True"
        lin, emp = code_probe_ratios(ref, f"hf_{r['act']}")
        t = gemm_pace(float(r["linear_main_s"]), lin, float(r["empty_main_s"]), emp)
        if t > 0:
            by[compiled].append(float(r["setup_s"]) * probe / t)
    out: dict[str, float] = {}
    for compiled, name in ((False, "infer_generate_call"), (True, "compiled_decode_generate_call")):
        if by[compiled]:
            out[f"hf_{name}"] = out[f"profiled_hf_{name}"] = float(statistics.median(by[compiled]))
    return out


def _is_compiled_step_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"fwd_region_s", "bwd_region_s", "trace"} <= set(rows[0])


_COMPILED_NAME = re.compile(r"compiled_(gpt|llama)_L(\d+)_h(\d+)")


def compiled_step_costs(
    rows: list[dict[str, str]], path: str | Path, ref: dict[str, float]
) -> dict[str, float]:
    """The host of profiled torch.compile training steps in CPU-speed units (see docs/compute.md,
    torch.compile; ``tools/bench_compiled_steps.py --set r30``; rows of ``simcore host-trace
    --compiled`` for traces named ``compiled_<gpt|llama>_L<n>_h<w>``).

    A compiled trace has no ``aten::t``; its probe is ``aten::transpose`` in the compiled regions
    (``host_trace.COMPILED_PROBE_OP``). Per block, least-squares lines over the layer count of

    * the forward region(s) over the step's main-thread probe: ``a_f + b_f x layers``;
    * the rest of the step but the optimizer (the backward regions, gradient accumulation, ``zero_grad``,
      the loop) over its autograd-thread probe: ``a_b + b_b x layers``;

    in seconds at the compiled probe these entries stand for: ``probe_compiled_main`` /
    ``probe_compiled_backward``, the eager reference probes ``ref`` (``probe_main`` /
    ``probe_backward``) times the median compiled / eager probe ratio of the rows (each compiled trace
    beside an eager one of its process). Entries: ``profiled_compiled_<fwd|bwd>_<act>`` per layer,
    ``profiled_compiled_step_<fwd|bwd>_<act>`` per micro-batch; the eager ``optimizer.step()`` keeps its
    own entries, and the after-optimizer ``profiled_step_end`` in ``ref`` is taken out of ``a_b``."""
    acts = {"gpt": "gelu", "llama": "swiglu"}
    pts: dict[str, list[tuple[int, float, float]]] = {}
    r_main: list[float] = []
    r_bwd: list[float] = []
    try:
        for r in rows:
            m = _COMPILED_NAME.search(Path(r["trace"]).name)
            pm, pb = float(r["probe_main_s"]), float(r["probe_bwd_s"])
            if m is None or pm <= 0 or pb <= 0:
                continue
            fwd, rest = (
                float(r["fwd_region_s"]),
                float(r["step_s"]) - float(r["fwd_region_s"]) - float(r["optimizer_s"]),
            )
            pts.setdefault(acts[m[1]], []).append((int(m[2]), fwd / pm, rest / pb))
            em, eb = float(r["eager_probe_main_s"] or 0.0), float(r["eager_probe_bwd_s"] or 0.0)
            if em > 0 and eb > 0:
                r_main.append(pm / em)
                r_bwd.append(pb / eb)
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad compiled-step row: {e}", file=str(path)) from None
    if not r_main or not ref.get("probe_main") or not ref.get("probe_backward"):
        raise TraceError(
            "no compiled_<gpt|llama>_L<layers>_h<width> row with its compiled and eager probes "
            "(host_compiled_steps rows), or no eager reference probe to state them at",
            file=str(path),
        )
    c_main = statistics.median(r_main) * ref["probe_main"]
    c_bwd = statistics.median(r_bwd) * ref["probe_backward"]
    out = {"probe_compiled_main": c_main, "probe_compiled_backward": c_bwd}
    out.update(_compiled_lines(pts, "compiled", c_main, c_bwd, ref.get("profiled_step_end", 0.0)))
    out.update(_hf_compiled_costs(rows, path, ref))
    return out


def _compiled_lines(
    pts: dict[str, list[tuple[int, float, float]]], prefix: str, c_main: float, c_bwd: float, end: float
) -> dict[str, float]:
    """Per block, least-squares lines over the layer count of a compiled step's forward and
    rest-of-step units (``pts``: (layers, forward units, rest units) per step), stated in seconds at the
    probes ``c_main`` / ``c_bwd``: ``profiled_<prefix>_<fwd|bwd>_<act>`` per layer and
    ``profiled_<prefix>_step_<fwd|bwd>_<act>`` per micro-batch (the after-optimizer ``end`` taken out of
    the backward's); blocks measured at one layer count only are left out."""
    out: dict[str, float] = {}
    for act, p in sorted(pts.items()):
        if len({x[0] for x in p}) < 2:
            continue
        a_f, b_f = _line([x[0] for x in p], [x[1] for x in p])
        a_b, b_b = _line([x[0] for x in p], [x[2] for x in p])
        out[f"profiled_{prefix}_fwd_{act}"] = max(b_f, 0.0) * c_main
        out[f"profiled_{prefix}_bwd_{act}"] = max(b_b, 0.0) * c_bwd
        out[f"profiled_{prefix}_step_fwd_{act}"] = max(a_f, 0.0) * c_main
        out[f"profiled_{prefix}_step_bwd_{act}"] = max(a_b * c_bwd - end, 0.0)
    return out


_HF_COMPILED_NAME = re.compile(r"hf_cfit_train_(gpt2|llama)_L(\d+)")


def _hf_compiled_costs(
    rows: list[dict[str, str]], path: str | Path, ref: dict[str, float]
) -> dict[str, float]:
    """``transformers``' compiled steps (``tools/bench_hf.py --set compiled_fit``: the Hugging Face fit
    models under torch.compile, traces ``hf_cfit_train_<gpt2|llama>_L<n>``), whose compiled code calls no
    :data:`host_trace.COMPILED_PROBE_OP`: the same lines as :func:`compiled_step_costs`, over the steps' kernel
    launches (:data:`host_trace.LAUNCH_PROBE_PREFIX`, the median launch op on each thread) stated as ``aten::t``,
    in seconds at the eager reference probes (``probe_main`` / ``probe_backward``):
    ``profiled_hf_compiled_<fwd|bwd>_<act>`` per layer and ``profiled_hf_compiled_step_<fwd|bwd>_<act>`` per
    micro-batch (``transformers``' after-optimizer ``profiled_hf_step_end`` taken out of the backward's).
    ``probe_launch_ratio_<main|backward>``: a launch op in ``aten::t``, the median over the rows of the launch
    over the same step's ``aten::empty`` stated as ``aten::t`` (``probe_empty_ratio_*``): what ``simcore
    validate`` divides a trace's launch pace by. Rows without launch columns keep the
    ``aten::empty`` probe."""
    acts = {"gpt2": "gelu", "llama": "swiglu"}
    r_m, r_b = ref.get("probe_empty_ratio_main"), ref.get("probe_empty_ratio_backward")
    p_m, p_b = ref.get("probe_main"), ref.get("probe_backward")
    if not (r_m and r_b and p_m and p_b):
        return {}
    parsed: list[tuple[str, int, float, float, float, float, float, float]] = []
    try:
        for r in rows:
            m = _HF_COMPILED_NAME.search(Path(r["trace"]).name)
            em, eb = float(r.get("empty_main_s") or 0.0), float(r.get("empty_bwd_s") or 0.0)
            if m is None or em <= 0 or eb <= 0:
                continue
            lm, lb = float(r.get("launch_main_s") or 0.0), float(r.get("launch_bwd_s") or 0.0)
            fwd = float(r["fwd_region_s"])
            rest = float(r["step_s"]) - fwd - float(r["optimizer_s"])
            parsed.append((acts[m[1]], int(m[2]), fwd, rest, em / r_m, eb / r_b, lm, lb))
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad compiled-step row: {e}", file=str(path)) from None
    out: dict[str, float] = {}
    if parsed and all(x[6] > 0 and x[7] > 0 for x in parsed):
        l_m = statistics.median(x[6] / x[4] for x in parsed)
        l_b = statistics.median(x[7] / x[5] for x in parsed)
        out = {"probe_launch_ratio_main": l_m, "probe_launch_ratio_backward": l_b}
        probes = [(x[6] / l_m, x[7] / l_b) for x in parsed]
    else:
        probes = [(x[4], x[5]) for x in parsed]
    pts: dict[str, list[tuple[int, float, float]]] = {}
    for x, (pm, pb) in zip(parsed, probes, strict=True):
        pts.setdefault(x[0], []).append((x[1], x[2] / pm, x[3] / pb))
    end = ref.get("profiled_hf_step_end", ref.get("profiled_step_end", 0.0))
    out.update(_compiled_lines(pts, "hf_compiled", p_m, p_b, end))
    return out


def _line(x: list[int], y: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of ``y`` over ``x``."""
    import numpy as np

    slope, icpt = np.polyfit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), 1)
    return float(icpt), float(slope)


def _is_compiled_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"framework", "fwd_host_s", "bwd_host_s", "layers"} <= set(rows[0])


def compiled_ratios(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """Host time of a compiled layer over an eager one, from ``tools/bench_compiled_host.py`` rows
    (columns arch, framework, profiled, layers, pass, fwd_host_s, bwd_host_s, and ``hidden`` where
    the run measured several widths; rows without it are width 64).

    Per architecture, width, framework and profiler flag the per-layer host time of the forward and
    of the backward is the slope between the two layer counts (medians over the passes); the
    returned ``compiled_ratio_<fwd|bwd>_<act>`` is compiled / eager without the profiler,
    ``profiled_compiled_ratio_<fwd|bwd>_<act>`` the same under the profiler (seconds cancel: one
    process, interleaved). Where layers wider than 64 were measured, the ratio is the mean over those
    widths: inductor issues other kernels for real tensor sizes (split reductions), and the host time
    of a compiled backward grows with them (GPT x0.69 at width 64, x0.88 / x1.01 at 768 /
    1536 under the profiler); the GPU-trivial width 64 is used only when nothing wider was measured."""
    acts = {"gpt": "gelu", "llama": "swiglu"}
    t: dict[tuple[str, int, str, int, int, str], list[float]] = {}
    for r in rows:
        try:
            prof = 1 if r["profiled"].strip().lower() in ("1", "true") else 0
            width = int(float(r.get("hidden") or 64))
            key = (r["arch"], width, r["framework"], prof, int(float(r["layers"])))
            for phase in ("fwd", "bwd"):
                t.setdefault((*key, phase), []).append(float(r[f"{phase}_host_s"]))
        except (KeyError, ValueError) as e:
            raise TraceError(f"bad compiled-host row: {e}", file=str(path)) from None
    out: dict[str, float] = {}
    for arch, act in acts.items():
        widths = sorted({k[1] for k in t if k[0] == arch})
        wide = [w for w in widths if w > 64] or widths
        for prof in (0, 1):
            for phase in ("fwd", "bwd"):
                ratios = []
                for w in wide:
                    slopes = {}
                    for fw in ("eager", "compiled"):
                        sel = (arch, w, fw, prof)
                        counts = sorted({k[4] for k in t if k[:4] == sel and k[5] == phase})
                        if len(counts) < 2:
                            break
                        lo, hi = counts[0], counts[-1]
                        a = statistics.median(t[(*sel, lo, phase)])
                        b = statistics.median(t[(*sel, hi, phase)])
                        slopes[fw] = (b - a) / (hi - lo)
                    if len(slopes) == 2 and slopes["eager"] > 0 and slopes["compiled"] > 0:
                        ratios.append(slopes["compiled"] / slopes["eager"])
                if ratios:
                    name = f"compiled_ratio_{phase}_{act}"
                    out[("profiled_" if prof else "") + name] = statistics.fmean(ratios)
    return out


def read_host_rows(path: str | Path) -> dict[str, float]:
    """``name -> host_s_per_call`` of a host-overhead CSV (gzip or plain)."""
    return _host_rows(_csv_rows(path), path)


def _host_rows(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        v = (row.get("host_s_per_call") or "").strip()
        if row.get("name") and v:
            try:
                out[row["name"]] = float(v)
            except ValueError:
                raise TraceError(
                    f"host_s_per_call {v!r} is not a number", file=str(path), field=row["name"]
                ) from None
    if not out:
        raise TraceError("no host-overhead rows", file=str(path))
    return out


def read_size_runs(path: str | Path) -> dict[str, float] | None:
    """Profiler ratios from an interleaved multi-process host run (``tools/bench_host_size.py``:
    columns run, rep, mode, arch, hidden, layers, profiled, host_s), or ``None`` for other files.

    Per run, width and profiled flag the per-layer slope is ``(median t(4 layers) - median
    t(1 layer)) / 3`` over the repeats (medians: single calls spike when the allocator or the garbage
    collector runs); the ratio profiled / plain is taken per run and width, and the median over those
    is returned as ``profiler_ratio_<decode|train>_<act>`` (``train`` is forward + backward); the
    unprofiled decode slope at width 64 (median over the processes) as ``per_layer_decode_<tag>``."""
    rows = _csv_rows(path)
    return _size_runs(rows, path) if _is_size_run(rows) else None


def _size_runs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    # (run, mode, arch, hidden, profiled 0/1, layers) -> host seconds of each repeat
    times: dict[tuple[str, str, str, str, int, str], list[float]] = {}
    for r in rows:
        try:
            prof = 1 if r["profiled"].strip().lower() in ("1", "true") else 0
            key = (r["run"], r["mode"], r["arch"], r["hidden"], prof, r["layers"])
            times.setdefault(key, []).append(float(r["host_s"]))
        except (KeyError, ValueError):
            raise TraceError("malformed host-size row", file=str(path), field=str(r)) from None

    def slope(run: str, mode: str, arch: str, hidden: str, prof: int) -> float | None:
        one, four = (
            times.get((run, mode, arch, hidden, prof, "1")),
            times.get((run, mode, arch, hidden, prof, "4")),
        )
        return None if one is None or four is None else (statistics.median(four) - statistics.median(one)) / 3

    out: dict[str, list[float]] = {}
    for run, mode, arch, hidden in sorted({k[:4] for k in times}):
        act = "swiglu" if arch == "llama" else "gelu"
        sp, su = slope(run, mode, arch, hidden, 1), slope(run, mode, arch, hidden, 0)
        if sp is not None and su is not None and sp > 0 and su > 0:
            out.setdefault(f"profiler_ratio_{mode}_{act}", []).append(sp / su)
        # the unprofiled decode slope at width 64 (the other host files' convention), one value per process
        if mode == "decode" and hidden == "64" and su is not None:
            tag = "llama_rms_swiglu_gqa" if arch == "llama" else "gpt_ln_gelu"
            out.setdefault(f"per_layer_decode_{tag}", []).append(su)
    return {k: float(statistics.median(v)) for k, v in out.items()}


def fit_host(paths: list[str | Path], host_ops: HostOps | None = None) -> dict[str, float]:
    """The ``host_layer`` profile section from host-overhead CSVs (seconds; missing rows are skipped).

    A file with rows measured while the PyTorch profiler records (``profiled_<name>`` beside
    ``<name>``, taken back to back in one process) gives the profiler's *ratio* per entry; the
    ``profiled_`` entries are the other files' values times that ratio, so a noisier machine on the
    day of that measurement does not leak into the absolute host times. ``host_ops``: the host op tables the
    entries are stated against (:class:`HostOps`; without them no ``compiled_decode_prefill_fixed_ratio``)."""
    rows: dict[str, float] = {}
    profiled_files: list[dict[str, float]] = []
    dist_files: list[dict[str, float]] = []
    size_ratios: dict[str, float] = {}
    compiled_rows: list[dict[str, str]] = []
    compiled_paths: list[str] = []
    ddp_hooks: dict[str, float] = {}
    step_hosts: dict[str, float] = {}
    step_rows: list[dict[str, str]] = []
    step_paths: list[str] = []
    decode_rows: list[dict[str, str]] = []
    decode_paths: list[str] = []
    graph_sync: list[dict[str, str]] = []
    graph_replay: list[dict[str, str]] = []
    compiled_steps: list[dict[str, str]] = []
    compiled_step_paths: list[str] = []
    compiled_decode: list[dict[str, str]] = []
    compiled_decode_paths: list[str] = []
    generate_calls: list[dict[str, str]] = []
    generate_call_paths: list[str] = []
    graph_records: list[dict[str, str]] = []
    graph_record_paths: list[str] = []
    unit_rows: list[dict[str, str]] = []
    unit_paths: list[str] = []
    for p in paths:
        csv_rows = _csv_rows(p)
        if is_dist_units_run(csv_rows):
            unit_rows.extend(csv_rows)
            unit_paths.append(str(p))
            continue
        if _is_graph_record_run(csv_rows):
            graph_records.extend(csv_rows)
            graph_record_paths.append(str(p))
            continue
        if _is_generate_call_run(csv_rows):
            generate_calls.extend(csv_rows)
            generate_call_paths.append(str(p))
            continue
        if _is_compiled_decode_run(csv_rows):
            compiled_decode.extend(csv_rows)
            compiled_decode_paths.append(str(p))
            continue
        if _is_step_host_run(csv_rows):
            step_rows.extend(csv_rows)
            step_paths.append(str(p))
            continue
        if _is_decode_host_run(csv_rows):
            decode_rows.extend(csv_rows)
            decode_paths.append(str(p))
            continue
        if _is_compiled_step_run(csv_rows):
            compiled_steps.extend(csv_rows)
            compiled_step_paths.append(str(p))
            continue
        if _is_graph_sync_run(csv_rows):
            graph_sync.extend(csv_rows)
            continue
        if _is_graph_replay_run(csv_rows):
            graph_replay.extend(csv_rows)
            continue
        if _is_ddp_hook_run(csv_rows):
            ddp_hooks.update(ddp_hook_costs(csv_rows, p))
            continue
        if _is_compiled_run(csv_rows):
            compiled_rows.extend(csv_rows)
            compiled_paths.append(str(p))
            continue
        if _is_size_run(csv_rows):
            sr = _size_runs(csv_rows, p)
            size_ratios.update({k: v for k, v in sr.items() if k.startswith("profiler_ratio_")})
            # its per-layer slopes (median over its processes) join the other files' lower envelope
            for k, v in sr.items():
                if k.startswith("per_layer_"):
                    rows[k] = min(rows[k], v) if k in rows else v
            continue
        r = _host_rows(csv_rows, p)
        if any(k.startswith("profiled_") for k in r):
            profiled_files.append(r)
        elif any(k.startswith(("per_layer_fsdp2_", "per_layer_tp2_", "per_layer_ddp2_")) for k in r):
            dist_files.append(r)
        else:
            # the same quantity measured in several files: keep the smallest (host-time noise on a
            # shared machine only ever adds; the lower envelope is the intrinsic cost)
            for k, v in r.items():
                rows[k] = min(rows[k], v) if k in rows else v
    out = _section(rows)
    for r in dist_files:
        # distributed wrappers (FSDP2, tensor parallel): their per-layer host time over the plain
        # model's in the same run, applied to the reference per-layer values
        plain = _section(r)
        for wrap in ("fsdp2", "tp2", "ddp2"):
            wrapped = _section({k.replace(f"_{wrap}_", "_", 1): v for k, v in r.items() if f"_{wrap}_" in k})
            for phase in ("fwd", "bwd"):
                ratios = [
                    wrapped[k] / plain[k]
                    for k in (f"train_{phase}_gelu", f"train_{phase}_swiglu")
                    if plain.get(k, 0.0) > 0 and wrapped.get(k, 0.0) > 0
                ]
                if ratios:
                    out[f"{wrap.rstrip('2')}_ratio_{phase}"] = sum(ratios) / len(ratios)
        # DDP's per-step host work outside the layers (prepare_for_backward, bucket finalisation):
        # the difference of the 0-layer intercepts of a forward + backward
        fixed_ddp = r.get("train_fixed_ddp2_gpt_ln_gelu_rc_none_fwd_bwd")
        fixed_plain = r.get("train_fixed_gpt_ln_gelu_rc_none_fwd_bwd")
        if fixed_ddp is not None and fixed_plain is not None:
            out["ddp_fixed"] = max(fixed_ddp - fixed_plain, 0.0)
        for part in ("per_tensor", "fixed"):
            opt = r.get(f"adamw_fused_dtensor_step_{part}")
            if opt is not None:
                out[f"adamw_fused_dtensor_{part}"] = max(opt, 0.0)
    for r in profiled_files:
        plain = _section({k: v for k, v in r.items() if not k.startswith("profiled_")})
        prof = _section({k.removeprefix("profiled_"): v for k, v in r.items() if k.startswith("profiled_")})
        for k, v in prof.items():
            base = plain.get(k, 0.0)
            if k in out and base > 0 and v > 0:
                out[f"profiled_{k}"] = out[k] * v / base
    # interleaved multi-process ratios (host_size) supersede the one-run ratios they cover: decode, and
    # training forward + backward (one ratio for both phases)
    for key, ratio in size_ratios.items():
        mode, act = key.removeprefix("profiler_ratio_").split("_", 1)
        names = (
            [f"infer_decode_{act}", f"infer_decode_fixed_{act}"]
            if mode == "decode"
            else [f"train_fwd_{act}", f"train_bwd_{act}", f"ckpt_full_fwd_{act}", f"ckpt_full_bwd_{act}"]
            # the selective checkpoint's extra was measured on the GELU block
            + (["ckpt_selective"] if act == "gelu" else [])
        )
        for k in names:
            if k in out:
                out[f"profiled_{k}"] = out[k] * ratio
        out[key] = ratio
    if compiled_rows:  # the runs of every width together (one file per set of widths)
        out.update(compiled_ratios(compiled_rows, ", ".join(compiled_paths)))
    out.update(ddp_hooks)
    if unit_rows:  # every rank's file together: the wrappers' host per bucket, group, action
        out.update(dist_unit_costs(unit_rows, ", ".join(unit_paths)))
    if step_rows:  # single-GPU and distributed steps together (the wrappers' extra is over the single)
        step_hosts.update(step_host_costs(step_rows, ", ".join(step_paths)))
    if decode_rows:  # the plain and Hugging Face passes together (one reference probe)
        step_hosts.update(decode_host_costs(decode_rows, ", ".join(decode_paths)))
    # whole profiled steps in CPU-speed units (host_steps) supersede the profiled per-layer entries above
    # (a width-64 layer times the profiler's ratio); the unprofiled per-step host outside the layers is
    # the profiled one over the profiler's measured per-layer ratio
    out.update(step_hosts)
    # profiled compiled steps in their own CPU-speed units (host_compiled_steps): the profiled compiled host per
    # layer and per micro-batch, stated at the eager reference probes' speed
    if compiled_steps:
        out.update(compiled_step_costs(compiled_steps, ", ".join(compiled_step_paths), out))
    if graph_sync and graph_replay:
        out.update(graph_loop_costs(graph_sync, graph_replay, "host_graph_*.csv.gz"))
    if compiled_decode:
        out.update(compiled_decode_costs(compiled_decode, ", ".join(compiled_decode_paths), out, host_ops))
    if graph_records:
        out.update(graph_record_costs(graph_records, ", ".join(graph_record_paths), out))
    if generate_calls:
        out.update(generate_call_costs(generate_calls, ", ".join(generate_call_paths), out))
    for act in ("gelu", "swiglu"):
        train_ratio = out.get(f"profiler_ratio_train_{act}")
        for part in ("fwd", "bwd", "fwd_layer", "bwd_layer"):
            prof_v = step_hosts.get(f"profiled_step_{part}_{act}")
            if prof_v is not None and train_ratio:
                out[f"step_{part}_{act}"] = prof_v / train_ratio
    # (the distributed wrappers' extras stay profiled-only: over the profiler's ratio they put the own
    # unprofiled 2 x H200 TP and FSDP runs 8-11 % long, `python -m simcore.validation own`)
    for act in ("gelu", "swiglu"):
        gen = step_hosts.get(f"profiled_hf_infer_generate_fixed_{act}")
        if gen is not None and out.get(f"profiler_ratio_decode_{act}"):
            # without the profiler: over the profiler's measured ratio for decode host
            out[f"hf_infer_generate_fixed_{act}"] = gen / out[f"profiler_ratio_decode_{act}"]
    for key in ("step_end", "step_end_layer"):
        if f"profiled_{key}" in step_hosts and out.get("profiler_ratio_train_gelu"):
            out[key] = step_hosts[f"profiled_{key}"] / out["profiler_ratio_train_gelu"]
    return out


def _section(rows: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for tag, act in _ACT.items():
        fwd = rows.get(f"per_layer_{tag}_rc_none_fwd")
        fb = rows.get(f"per_layer_{tag}_rc_none_fwd_bwd")
        if fwd is not None and fb is not None:
            out[f"train_fwd_{act}"] = fwd
            out[f"train_bwd_{act}"] = max(fb - fwd, 0.0)
        cf = rows.get(f"per_layer_{tag}_full_ckpt_extra_fwd")
        cfb = rows.get(f"per_layer_{tag}_full_ckpt_extra_fwd_bwd")
        if cf is not None and cfb is not None:
            out[f"ckpt_full_fwd_{act}"] = max(cf, 0.0)
            out[f"ckpt_full_bwd_{act}"] = max(cfb - cf, 0.0)
        for mode in ("decode", "prefill"):
            v = rows.get(f"per_layer_{mode}_{tag}")
            if v is not None:
                out[f"infer_{mode}_{act}"] = v
        for mode in ("decode", "prefill"):
            v = rows.get(f"{mode}_fixed_{tag}")
            if v is not None:
                out[f"infer_{mode}_fixed_{act}"] = max(v, 0.0)
        v = rows.get(f"graph_decode_per_kernel_{tag}")
        if v is not None:
            out[f"graph_kernel_{act}"] = v
    sel = rows.get("per_layer_gpt_ln_gelu_selective_extra_fwd_bwd")
    if sel is not None:
        out["ckpt_selective"] = max(sel, 0.0)
    for opt in ("adamw_fused", "adamw_foreach"):
        for part in ("per_tensor", "fixed"):
            v = rows.get(f"{opt}_step_{part}")
            if v is not None:
                out[f"{opt}_{part}"] = max(v, 0.0)
    return out


def host_files_beside(ops_csv: str | Path) -> list[Path]:
    """Host-overhead CSVs in the folder of an ops CSV (``host*.csv.gz``) and in its multi-GPU
    sibling folders (``<folder>x2/`` and the like, for distributed wrappers)."""
    folder = Path(ops_csv).parent
    found = [
        *folder.glob("host*.csv*"),
        *folder.parent.glob(f"{folder.name}x*/host*.csv*"),
    ]
    return sorted(p for p in found if p.is_file())
