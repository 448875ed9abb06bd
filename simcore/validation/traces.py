"""Predicted vs measured: validate simcore against profiler traces of a real run.

``validate(traces, scenario)`` reads the traces (one file per rank), classifies their kernels,
takes the median step time over the profiled steps, predicts the scenario that describes the run
with :func:`simcore.predict`, and compares:

* per step: measured median step time vs predicted step time (training: ``step_time_s``;
  inference: one profiled step = prefill + ``output_len`` decode steps);
* per op class: the measured time each class adds to the device timeline (its kernels plus the
  launch gaps before them; overlapped communication counts only where it is exposed) vs the
  prediction's breakdown folded onto the same classes;
* per kernel: every op whose shape the trace recorded, priced by simcore's cost model for that
  exact shape on the scenario's device and calibration profile.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from simcore.calibration.fit_host import code_probe_ratios, gemm_pace, thread_probe, train_gemm_ratios
from simcore.calibration.host_trace import (
    FUSED_ATTENTION_OPS,
    FUSED_OPTIMIZER_OPS,
    PROBE_WINDOW,
    SYNC_CALLS,
    OpSpeed,
    compiled_decode_graphs,
    compiled_launch_speed,
    compiled_op_speed,
    cpu_range,
    decode_layer_op_count,
    decode_pass_op_count,
    eager_attention,
    gemm_ops_per_step,
    generate_loop,
    graph_capture_steps,
    graph_launches,
    graph_records_per_step,
    hf_layers,
    layer_op_counts,
    op_speed,
    profiler_record,
    queued_at_start,
    start_queue_s,
    step_synchronized,
    unannotated_step,
)
from simcore.engine.inference import LAUNCH_QUEUE_KERNELS
from simcore.engine.runtime import with_stack
from simcore.errors import SimcoreError
from simcore.specs.profile import ComputeProfile, HostOps, backend_of_name
from simcore.specs.scenario import CpuOpTime, LayerOps, Scenario
from simcore.traces.classify import (
    INDUCTOR_FUSED,
    Analysis,
    attention_shape,
    fp32_weights,
    optimizer_element_type,
)
from simcore.traces.model import CpuOp
from simcore.workload.lowering import decode_moe_key

CLASS_ORDER = (
    "gemm",
    "attention",
    "norm",
    "elementwise",
    "loss",
    "embedding",
    "optimizer",
    "communication",
    "memcpy/memset",
    "idle",
    "other",
)


def predicted_class(category: str) -> str:
    """The trace class a breakdown category of :func:`simcore.predict` belongs to."""
    c = category.removeprefix("recompute_")
    if c.endswith("_comm") or c in ("pp_p2p", "comm"):
        return "communication"
    if c in ("gemm", "moe_router", "overlap_slowdown"):  # compute slowed beside collectives: mostly GEMMs
        return "gemm"
    if c in ("elementwise", "amp_cast", "loss_cast", "moe_permute", "kv_cache", "cast", "fsdp_copy"):
        return "elementwise"
    if c in ("pipeline_bubble", "host_overhead", "idle", "power_cap", "graph_sync"):
        return "idle"
    if c == "dp_copy":  # PyTorch DDP's gradient bucket copies: device-to-device memcpy
        return "memcpy/memset"
    if c in ("attention", "norm", "loss", "embedding", "optimizer"):
        return c
    return "other"


def measured_class(cls: str) -> str:
    """The comparison class of a trace class (``comm:all_reduce`` -> ``communication``)."""
    if cls.startswith("comm"):
        return "communication"
    if cls in ("memcpy", "memset"):
        return "memcpy/memset"
    return cls if cls in CLASS_ORDER else "other"


@dataclass
class ValidationReport:
    """Result of :func:`validate`; ``to_dict`` gives the JSON form."""

    traces: list[str]
    scenario: str
    device: str
    step_source: str
    measured_step_time_s: float
    predicted_step_time_s: float
    step_times_s: list[float]
    classes: list[dict[str, Any]]
    kernels: list[dict[str, Any]]
    collectives: dict[str, float]
    notes: list[str] = field(default_factory=list)
    host_speed_ratio: float | None = None
    """Host time per layer on the trace's CPU timeline over the profile's (profiled) host model
    (:mod:`simcore.calibration.host_trace`); ``None`` where the trace does not show it."""
    cpu_op_speed_s: dict[str, float | None] | None = None
    """Median ``aten::t`` seconds on the main and the backward thread of the rank with the slowest CPU
    (the CPU's per-op speed; see :func:`simcore.calibration.host_trace.op_speed`), as predicted with."""
    runtime: dict[str, Any] = field(default_factory=dict)
    """The scenario's ``runtime`` section as predicted: what the scenario says, plus what the trace
    showed where it said nothing (the profiler, compiled kernels, the CPU speed, unsynchronized steps)."""
    training: dict[str, Any] | None = None
    """The scenario's ``training`` section as predicted (with what the trace showed, e.g. the weights'
    dtype); ``None`` for inference."""
    inference: dict[str, Any] | None = None
    """The scenario's ``inference`` section as predicted (with what the trace showed, e.g. the prefill's
    logits of every position); ``None`` for training."""
    phases: dict[str, float] | None = None
    """Inference: how the predicted step is made, ``prefills`` prefills and ``decode_steps`` decode steps
    (counted from the trace), each phase's predicted seconds (``prefill_s``, ``decode_step_s``) and the
    host seconds to issue it (``prefill_host_s``, ``decode_host_s``; 0 where not modelled), and what a
    loop that never waits saves by issuing decode steps during the prefill (``overlap_saved_s``);
    ``None`` for training."""

    @property
    def error_pct(self) -> float:
        """(predicted - measured) / measured, in percent."""
        return 100.0 * (self.predicted_step_time_s / self.measured_step_time_s - 1.0)

    def _idle(self, key: str) -> float:
        return float(sum(r[key] for r in self.classes if r["class"] == "idle"))

    @property
    def measured_gpu_busy_s(self) -> float:
        """Measured step minus the time the GPU sat idle (launch gaps, host stalls)."""
        return self.measured_step_time_s - self._idle("measured_s")

    @property
    def predicted_gpu_busy_s(self) -> float:
        """Predicted step minus predicted idle (``host_overhead``, ``pipeline_bubble``)."""
        return self.predicted_step_time_s - self._idle("predicted_s")

    def to_dict(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "scenario": self.scenario,
            "device": self.device,
            "step_source": self.step_source,
            "steps": len(self.step_times_s),
            "step_times_s": self.step_times_s,
            "measured_step_time_s": self.measured_step_time_s,
            "predicted_step_time_s": self.predicted_step_time_s,
            "error_pct": self.error_pct,
            "measured_gpu_busy_s": self.measured_gpu_busy_s,
            "predicted_gpu_busy_s": self.predicted_gpu_busy_s,
            "gpu_busy_error_pct": 100.0 * (self.predicted_gpu_busy_s / self.measured_gpu_busy_s - 1.0)
            if self.measured_gpu_busy_s > 0
            else None,
            "classes": self.classes,
            "collectives_measured_s": self.collectives,
            "kernels": self.kernels,
            "host_speed_ratio": self.host_speed_ratio,
            "cpu_op_speed_s": self.cpu_op_speed_s,
            "runtime": self.runtime,
            "training": self.training,
            "inference": self.inference,
            "phases": self.phases,
            "notes": self.notes,
        }


_NOT_A_PASS = ("bwd", "backward", "combine", "convert_dq", "dot_do_o")
"""Attention kernels that are not one forward pass of a layer (backward, split-KV combine)."""


def inference_composition(a: Analysis, layers_per_rank: float) -> tuple[float, float] | None:
    """(prefills, decode steps) in one profiled step, counted from the attention ops the trace
    recorded (a forward attention over more than one query is a prefill layer, over one query a
    decode layer; attention written out of ops counts its softmaxes over 4-D scores the same way),
    median over steps; None when the trace has no attention shapes.

    Attention kernels replayed from a CUDA graph count as decode layers; other kernels without a
    recorded op (traced without shapes) count by their launch grid: a forward attention kernel (not a backward or split-combine kernel) whose
    grid has one block of query rows (``grid[0] == 1``, FlashAttention's layout) is a decode layer,
    more a prefill layer."""
    per: list[tuple[float, float]] = []
    replayed = {c.correlation for c in graph_launches(a.trace)}
    for st in a.steps:
        seen: set[int] = set()
        pre = dec = 0
        for k in st.kernels:
            if k.cls == "attention" and k.ev.correlation in replayed and k.shape is None:
                # a graph replayed in an inference loop is a decode pass (tools/gpt.py's captured
                # decode, a static cache's compiled one): cuDNN's grids do not show its one query
                dec += 0 if any(w in k.ev.name.lower() for w in _NOT_A_PASS) else 1
                continue
            s = k.shape
            if s is not None and s.get("name") == "softmax" and "queries" in s:
                pre, dec = (pre + 1, dec) if s["queries"] > 1 else (pre, dec + 1)
                continue
            if k.cls != "attention":
                continue
            if s is None:
                name = k.ev.name.lower()
                grid = k.ev.args.get("grid")
                if any(w in name for w in _NOT_A_PASS) or not isinstance(grid, list) or not grid:
                    continue
                if int(grid[0]) == 1:
                    dec += 1
                else:
                    pre += 1
                continue
            if s.get("backward") or k.ev.ext_id in seen:
                continue
            seen.add(k.ev.ext_id)
            if s["seq"] > 1:
                pre += 1
            else:
                dec += 1
        per.append((pre / layers_per_rank, dec / layers_per_rank))
    if not per or all(p == (0.0, 0.0) for p in per):
        return None
    return float(statistics.median(p[0] for p in per)), float(statistics.median(p[1] for p in per))


def single_step_lead(a: Analysis, sc: Scenario) -> float:
    """Seconds of lead the host lost to the GPU over a one-step trace without step annotations: its
    first kernels' wait behind earlier GPU work less its last kernels' (:func:`start_queue_s`), for a
    training loop that runs ahead (``runtime.step_sync`` false); 0 otherwise. Such a trace measures
    the span of the step's kernels, not the loop's period: a host-bound step's span is the host's
    total less the lead it spent (in a steady loop the lead is the same at both ends: nothing)."""
    if unannotated_step(a) and sc.kind == "training" and queued_at_start(a) and not sc.runtime.step_sync:
        return max(start_queue_s(a) - start_queue_s(a, last=True), 0.0)
    return 0.0


def inference_step_time(
    res: dict[str, Any], n_pre: float, n_dec: float, never_waits: bool
) -> tuple[float, float]:
    """Seconds of a profiled inference step of ``n_pre`` prefills and ``n_dec`` decode steps priced by
    ``res`` (an ``InferenceResult`` dumped), and the seconds a loop that never waits for its tokens
    saves: its host issues the decode steps while the GPU still runs the prefill (a traced loop launched
    its first decode step 10 ms into a 30 ms prefill), so the step is the later of the host
    issuing everything (then the last decode step's kernels) and the GPU running everything back to
    back, where the phases' host is modelled (``prefill_host_s``, ``decode_host_s``), with the host at
    most a launch queue of kernels ahead (:data:`LAUNCH_QUEUE_KERNELS`, ``decode_kernels`` a step)."""
    serial = n_pre * float(res["prefill_time_s"]) + n_dec * float(res["decode_step_time_s"])
    if not never_waits or float(res.get("decode_host_s", 0.0)) <= 0.0:
        return serial, 0.0
    gpu = {
        ph: float(res[key]) - float(res[f"breakdown_{ph}"].get("host_overhead", 0.0))
        for ph, key in (("prefill", "prefill_time_s"), ("decode", "decode_step_time_s"))
    }
    h_pre = n_pre * float(res["prefill_host_s"])
    h_step = float(res["decode_host_s"])
    g_pre = n_pre * gpu["prefill"]
    # while the GPU runs the prefill the host issues decode steps, but at most a launch queue's worth
    # of kernels ahead of the GPU (LAUNCH_QUEUE_KERNELS; then each launch waits for a slot): a traced
    # batch-32 decode issued ~2.5 of its 8 steps behind a 60 ms prefill
    k_step = float(res.get("decode_kernels", 0.0))
    ahead = n_dec * h_step if k_step <= 0 else min(n_dec * h_step, h_step * LAUNCH_QUEUE_KERNELS / k_step)
    during = min(max(g_pre - h_pre, 0.0), ahead)
    queued = max(h_pre, g_pre) + max(n_dec * h_step - during + gpu["decode"], n_dec * gpu["decode"])
    return min(queued, serial), max(serial - queued, 0.0)


def p2p_wait(a: Analysis) -> float:
    """Median over steps of the time point-to-point kernels spent waiting for their peer: each
    send/recv kernel's duration beyond the shortest one of the same size in the trace (seconds)."""
    ks = [k for k in a.kernels if k.cls == "comm:send_recv" and k.step >= 0]
    if not ks:
        return 0.0
    pure: dict[Any, float] = {}
    for k in ks:
        key = (k.shape or {}).get("nbytes")
        pure[key] = min(pure.get(key, float("inf")), k.ev.dur)
    per: dict[int, float] = defaultdict(float)
    for k in ks:
        per[k.step] += k.ev.dur - pure[(k.shape or {}).get("nbytes")]
    return float(statistics.median(per.get(i, 0.0) for i in range(len(a.steps))))


def _predicted(
    sc: Scenario, engine: str, a: Analysis | None = None
) -> tuple[float, dict[str, float], dict[str, float] | None, list[str]]:
    """The predicted step (seconds), its breakdown, for inference the step's phases
    (:attr:`ValidationReport.phases`), and the prediction's notes."""
    from simcore.prediction import predict

    r = predict(sc, engine=engine)
    d = r.model_dump()
    notes = [str(n) for n in d.get("notes", [])]
    if sc.kind == "training":
        return float(d["step_time_s"]), {k: float(v) for k, v in d["breakdown"].items()}, None, notes
    inf = sc.inference
    assert inf is not None
    comp = inference_composition(a, sc.model.layers / sc.parallel.pp) if a is not None else None
    if comp is not None:
        n_pre, n_dec = comp
        notes.append(
            f"inference: one profiled step = {n_pre:g} prefill + {n_dec:g} decode steps (counted from the "
            "trace's attention ops, or their kernels' launch grids)"
        )
    else:
        n_pre, n_dec = 1.0, float(inf.output_len)
        notes.append(
            f"inference: one profiled step = prefill + {n_dec:g} decode steps (inference.output_len)"
        )
    bd: dict[str, float] = defaultdict(float)
    for k, v in d.get("breakdown_prefill", {}).items():
        bd[k] += n_pre * float(v)
    for k, v in d.get("breakdown_decode", {}).items():
        bd[k] += n_dec * float(v)
    # a loop that waits at most once a profiled step (for the last token) runs ahead inside it
    every = sc.runtime.decode_sync_every
    total, saved = inference_step_time(d, n_pre, n_dec, every is None or every >= n_dec)
    if saved > 0.0:
        notes.append(
            "inference: the loop does not wait for its tokens inside a step, so its decode steps are issued "
            f"while the GPU still runs the prefill: {total * 1e3:.3g} ms instead of {(total + saved) * 1e3:.3g} "
            "ms back to back"
        )
        bd["host_overhead"] = bd.get("host_overhead", 0.0) - saved
    if bd.get("power_cap", 0.0) > 0.0:
        # the card holds its power limit over the profiled step, whose decode steps draw little: the
        # stretch is that of the whole step, not the sum of each phase's as if it ran back to back
        from simcore.engine.pricing import breakdown_power_cap
        from simcore.specs.profile import load_profile
        from simcore.specs.registry import default_registry
        from simcore.specs.resolve import resolve_cluster
        from simcore.workload.precision import inference_gemm_family

        dev = resolve_cluster(sc.cluster, default_registry()).device
        per_phase = bd.pop("power_cap")
        bd["power_cap"] = float(
            breakdown_power_cap(dev, load_profile(dev, sc.calibration), bd, inference_gemm_family(inf.precision))
        )
        total += bd["power_cap"] - per_phase
    phases = {
        "prefills": n_pre,
        "decode_steps": n_dec,
        "prefill_s": float(d["prefill_time_s"]),
        "decode_step_s": float(d["decode_step_time_s"]),
        "prefill_host_s": float(d["prefill_host_s"]),
        "decode_host_s": float(d["decode_host_s"]),
        "overlap_saved_s": saved,
    }
    return total, dict(bd), phases, notes


def _kernel_rows(ans: list[Analysis], sc: Scenario, top: int) -> list[dict[str, Any]]:
    """Per-op comparison for ops with recorded shapes, largest total error first."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster
    from simcore.workload.replay import price_shape

    cluster = resolve_cluster(sc.cluster, default_registry())
    prof = load_profile(cluster.device, sc.calibration)
    a = ans[0]
    nsteps = max(1, len(a.steps))
    inst: dict[tuple[int, int], list[Any]] = {}
    for k in a.kernels:
        if k.step < 0 or k.shape is None or k.base == "comm" or k.ev.ext_id < 0:
            continue
        key = (k.step, k.ev.ext_id)
        if key in inst:
            inst[key][1] += k.ev.dur
            inst[key][3] += 1
        else:
            inst[key] = [k, k.ev.dur, k.op, 1]
    groups: dict[str, list[Any]] = {}
    for k, dur, op, nk in inst.values():
        s = k.shape
        g = groups.setdefault(f"{op} {shape_label(s)}", [k.cls, s, [], nk])
        g[2].append(dur)
    rows = []
    for name, (cls, s, durs, nk) in groups.items():
        pred = price_shape(s, cluster.device, prof, kernel_rate=sc.runtime.framework == "compiled")
        if pred is None:
            continue
        meas = float(statistics.median(durs))
        count = len(durs) / nsteps
        rows.append(
            {
                "op": name,
                "class": cls,
                # the op simcore priced: its kind, and a memory-bound op's name (``cast_up``, ...)
                "priced_as": s.get("name", s.get("kind", "")),
                "kernels_per_op": nk,
                "count_per_step": count,
                "measured_s": meas,
                "predicted_s": pred,
                "error_pct": 100.0 * (pred / meas - 1.0),
                "total_error_s": count * (pred - meas),
            }
        )
    rows.sort(key=lambda r: -abs(r["total_error_s"]))
    return rows[:top]


def _i(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def shape_label(s: dict[str, Any]) -> str:
    """A short human label of a recovered shape (``4096x1024x3072 bf16``)."""
    kind = s.get("kind")
    if kind == "gemm":
        b = f"{_i(s['batch'])}x " if s.get("batch", 1) != 1 else ""
        return f"{b}{_i(s['m'])}x{_i(s['n'])}x{_i(s['k'])} {s['dtype']}"
    if kind == "attention":
        return (
            f"b{_i(s['batch'])} h{_i(s['heads'])}/{_i(s['kv_heads'])} s{_i(s['seq'])}/{_i(s['kv_seq'])} "
            f"d{_i(s['head_dim'])}{' causal' if s['causal'] else ''}{' mask' if s.get('mask') else ''}"
            f"{' dropout' if s.get('dropout') else ''} {'bwd' if s['backward'] else 'fwd'}"
            f"{' cudnn' if s.get('backend') == 'cudnn' else ''}"
        )
    if kind == "memory":
        return f"{s['name']} {s['nbytes'] / 1e6:.3g} MB"
    if kind == "optimizer":
        return f"{s['optimizer']} {'fused' if s.get('fused') else 'foreach'} {s['params'] / 1e6:.3g}M params"
    return ""


def inductor_kernels(a: Analysis) -> int:
    """Kernels of a trace that torch.compile's inductor generated (by its naming of fused kernels)."""
    return sum(1 for e in a.trace.gpu_events if e.name.startswith(INDUCTOR_FUSED))


def graph_framework(ans: list[Analysis]) -> bool:
    """Whether most kernels of the traces ran inside replays of captured CUDA graphs (their
    correlation is a ``cudaGraphLaunch`` call's)."""
    inside = total = 0
    for a in ans:
        launches = {c.correlation for c in graph_launches(a.trace)}
        for k in a.trace.kernels():
            total += 1
            inside += k.correlation in launches
    return total > 0 and inside > total / 2


def hf_implementation(ans: list[Analysis]) -> bool:
    """Whether the traces ran Hugging Face ``transformers``' modelling code: in eager kernels its
    written-out tanh GELU or RMSNorm (:func:`simcore.calibration.host_trace.hf_layers`); compiled,
    the causal mask it materialises for SDPA when ``torch.compile`` traces it
    (:func:`dense_mask_attention`)."""
    ops = [o for a in ans for o in a.trace.cpu_ops.values()]
    return hf_layers(ops) or dense_mask_attention(ops)


# SDPA entry points whose fourth input is the attention mask (or bias)
_MASKED_ATTN = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_efficient_attention",
)


def dense_mask_attention(ops: list[CpuOp]) -> bool:
    """Whether most multi-query fused attention calls of the traces take a materialised 4-D mask
    (``[b, 1 or h, s, s_kv]``) with ``is_causal`` false, as ``transformers`` passes under
    ``torch.compile`` (outside tracing it passes ``is_causal`` and no mask)."""
    dense = total = 0
    for o in ops:
        shape = attention_shape(o) if o.name in _MASKED_ATTN else None
        if shape is None or shape["seq"] <= 1:
            continue
        dims = o.input_dims if isinstance(o.input_dims, list) else []
        total += 1
        dense += (not shape["causal"]) and any(
            isinstance(d, list) and len(d) == 4 and d[-2:] == [int(shape["seq"]), int(shape["kv_seq"])]
            for d in dims[3:]
        )
    return total > 0 and dense > total / 2


def _attention_kernel_backend(kernel: str) -> str | None:
    """The SDPA backend a fused attention kernel's name belongs to: cuDNN's generated
    ``cudnn_generated_..._sdpa_...`` kernels, PyTorch's FlashAttention-2 ``pytorch_flash::flash_fwd...``,
    the memory-efficient ``fmha_cutlass...``; ``None`` for any other kernel."""
    if kernel.startswith("cudnn_generated") and "sdpa" in kernel:
        return "cudnn"
    if "pytorch_flash::" in kernel:
        return "flash"
    if "fmha_cutlass" in kernel:
        return "efficient"
    return None


def sdpa_backend(ans: list[Analysis]) -> str | None:
    """The attention kernels most of the traces' attention ran: ``cudnn``, ``flash`` or ``efficient`` by
    PyTorch's backend ops (``aten::_cudnn_attention_forward`` / ``aten::_flash_attention_forward`` /
    ``aten::_efficient_attention_forward``), or where no op was recorded (CUDA-graph replays) by their
    kernels' names, ``eager``
    where no fused attention runs but softmaxes over 4-D ``[b, h, s, s_kv]`` scores do (attention
    written out of PyTorch ops); ``None`` otherwise (no attention, another backend, no shapes)."""
    n = {"cudnn": 0, "flash": 0, "efficient": 0}
    for a in ans:
        for o in a.trace.cpu_ops.values():
            if o.name in FUSED_ATTENTION_OPS:
                n[backend_of_name(o.name)] += 1
    if not any(n.values()):
        # replayed CUDA graphs record no op on the host: their kernels' names say whose they are
        for a in ans:
            for e in a.trace.gpu_events:
                b = _attention_kernel_backend(e.name)
                if b is not None:
                    n[b] += 1
    if any(n.values()):
        return max(n, key=lambda k: n[k])
    return "eager" if any(eager_attention(list(a.trace.cpu_ops.values())) for a in ans) else None


# ops only an optimizer's foreach update issues (clip_grad_norm_ and zero_grad issue _foreach_norm,
# _foreach_mul_ and _foreach_zero_; GradScaler its own _amp_foreach_ ops)
_FOREACH_UPDATE_OPS = (
    "aten::_foreach_addcdiv_",
    "aten::_foreach_addcmul_",
    "aten::_foreach_lerp_",
    "aten::_foreach_sqrt",
    "aten::_foreach_add_",
)


def optimizer_impl(ans: list[Analysis]) -> str | None:
    """How the traces' optimizer ran: ``fused`` (an ``aten::_fused_adamw_`` / ``_fused_sgd_`` call),
    ``foreach`` (``torch.optim``'s multi-tensor update ops and no fused one), ``None`` where neither
    shows (no optimizer step profiled, or a for-loop implementation)."""
    names = {o.name for a in ans for o in a.trace.cpu_ops.values()}
    if any(n.startswith(FUSED_OPTIMIZER_OPS) for n in names):
        return "fused"
    if names & set(_FOREACH_UPDATE_OPS):
        return "foreach"
    return None


def dropout_p(ans: list[Analysis]) -> float:
    """The dropout probability of a training trace's ``aten::native_dropout`` calls in training mode
    (their recorded arguments; the median), else of its fused attention calls (compiled code draws
    the other dropouts' random numbers in its own kernels); 0 where it has none."""
    ps: list[float] = []
    attn: list[float] = []
    for a in ans:
        for o in a.trace.cpu_ops.values():
            c = o.concrete or []
            if o.name == "aten::native_dropout" and len(c) > 2 and c[2] in ("True", "1"):
                try:
                    ps.append(float(c[1]))
                except ValueError:
                    continue
            elif o.name in FUSED_ATTENTION_OPS:
                shape = attention_shape(o)
                if shape is not None:
                    attn.append(float(shape["dropout"]))
    ps = ps or [p for p in attn if p > 0]
    p = statistics.median(ps) if ps else 0.0
    return p if 0.0 < p < 1.0 else 0.0


class _Fact(NamedTuple):
    """What a trace shows about its run: ``section.fld = value`` where ``shown``, with the note saying so."""

    section: str
    fld: str
    value: Any
    shown: bool
    note: str


def validate(
    traces: list[str],
    scenario: str | Path | Scenario,
    overrides: list[str] | None = None,
    engine: str = "analytic",
    analyses: list[Analysis] | None = None,
    top_kernels: int = 15,
    probe_window: int | None = None,
) -> ValidationReport:
    """Compare the prediction of ``scenario`` with the measured ``traces`` (one file per rank).
    ``probe_window``: a what-if for an inference trace's CPU pace, the calls per window of its probe
    (0: one median over the trace; default :data:`~simcore.calibration.host_trace.PROBE_WINDOW`).

    The steps: read the run (:func:`_read_run`); predict it with what its traces show where the
    scenario is silent (:func:`_code_facts`, :func:`_loop_facts`, :func:`_host_facts`); compare the
    slowest rank's step (:func:`_predicted`, :func:`_without_spent_lead`), its classes
    (:func:`_class_rows`) and its ops (:func:`_kernel_rows`). See docs/traces.md, validate."""
    from simcore.specs.resolve import load_scenario

    sc = scenario if isinstance(scenario, Scenario) else load_scenario(str(scenario), overrides or [])
    if sc.kind == "serving":
        raise SimcoreError("validate compares training or inference steps; this scenario is a serving one")
    ans, passes, warm = _read_run(traces, sc, analyses)
    # what the traces show about the run, unless the scenario or --set says otherwise: first how it
    # ran (the framework, the weights' dtype, the profiler), then what that decides (the host's pace)
    assumed: list[str] = []
    cdec = sc.kind == "inference" and compiled_decode_graphs(ans)
    sc = _assume_facts(sc, [*_code_facts(sc, ans, cdec), *_loop_facts(sc, ans)], overrides, assumed)
    host_facts, cpu = _host_facts(sc, ans, cdec, probe_window)
    sc = _assume_facts(sc, host_facts, overrides, assumed)
    sc = with_stack(sc)[0]  # the stack's defaults where neither the scenario nor the traces say
    _check_one_run(ans)
    slowest = max(ans, key=lambda a: a.step_time_s)
    pred_step, bd, phases, notes = _predicted(sc, engine, slowest)
    notes = [*notes, *assumed, *_step_notes(passes, warm, slowest)]
    pred_step, lead_notes = _without_spent_lead(slowest, sc, pred_step, bd)
    notes += lead_notes
    host_ratio = _host_speed(sc, ans)
    if host_ratio is not None:
        notes.append(
            f"the trace's CPU issued each layer in x{host_ratio:.2f} the profile's host time (from the spacing of "
            "its norm ops; `simcore calibrate TRACE` puts this into a profile's host_scale)"
        )
    meas_cls, meas_kernel, colls = _measured_classes(slowest)
    host_idle = meas_cls.get("idle", 0.0)
    notes += _p2p_as_idle(slowest, meas_cls)
    rows = _class_rows(meas_cls, meas_kernel, bd, pred_step)
    notes += _trace_notes(slowest, sc, host_idle)
    return ValidationReport(
        traces=[a.trace.path for a in ans],
        scenario=sc.name,
        device=str(slowest.trace.device_name),
        step_source=slowest.step_source,
        measured_step_time_s=slowest.step_time_s,
        predicted_step_time_s=pred_step,
        step_times_s=[s.time_s for s in slowest.steps],
        classes=rows,
        kernels=_kernel_rows([slowest], sc, top_kernels),
        collectives=dict(colls),
        notes=notes,
        host_speed_ratio=host_ratio,
        cpu_op_speed_s=None
        if cpu is None
        else {
            "main": cpu.main,
            "backward": cpu.backward,
            **({} if cpu.decode is None else {"decode": cpu.decode}),
        },
        runtime=sc.runtime.model_dump(mode="json"),
        training=None if sc.training is None else sc.training.model_dump(mode="json"),
        inference=None if sc.inference is None else sc.inference.model_dump(mode="json"),
        phases=phases,
    )


def _read_run(
    traces: list[str], sc: Scenario, analyses: list[Analysis] | None
) -> tuple[list[Analysis], bool, list[int]]:
    """The analysed traces of one run (``analyses`` where given, else read from ``traces``), whether an
    unannotated inference trace was taken as one step, and the steps left out for capturing a CUDA graph
    (:func:`_steady_steps`)."""
    from simcore.workload.replay import load_analyses

    ans = analyses if analyses is not None else load_analyses([str(t) for t in traces])
    # an unannotated inference trace repeats the same kernels every forward pass: steps found by repetition
    # would be its passes, which the composition counted over a step (prefills, decode steps) cannot price
    passes = sc.kind == "inference" and any(a.step_source == "repeat" for a in ans)
    if passes:
        ans = [a.as_one_step() if a.step_source == "repeat" else a for a in ans]
    ans, warm = _steady_steps(ans)
    return ans, passes, warm


def _assume_facts(sc: Scenario, facts: list[_Fact], overrides: list[str] | None, assumed: list[str]) -> Scenario:
    """``sc`` with each fact the trace showed, in order (:func:`_assume`; the first of two facts on the same
    field wins)."""
    for f in facts:
        sc = _assume(sc, f.section, f.fld, f.value, f.shown, f.note, overrides, assumed)
    return sc


def _code_facts(sc: Scenario, ans: list[Analysis], cdec: bool) -> list[_Fact]:
    """How the traced code ran: CUDA graphs, a compiled decode (``cdec``: its graphs' re-recordings),
    torch.compile, AMP's fp32 weights, ``transformers``' modelling code, the attention kernels."""
    # graphs recorded again in the steps kept (every step records one or none does: _steady_steps)
    records = float(statistics.median(graph_records_per_step(ans[0]))) if cdec and ans[0].steps else 0.0
    graphs = graph_framework(ans) and not cdec
    backend = sdpa_backend(ans)
    return [
        # the kernels of replayed CUDA graphs correlate with a cudaGraphLaunch call
        _Fact(
            "runtime",
            "framework",
            "cuda_graphs",
            graphs,
            "predicted with runtime.framework: cuda_graphs (most of the trace's kernels are replays of "
            "captured CUDA graphs, cudaGraphLaunch); --set runtime.framework=eager predicts the same model "
            "launched op by op",
        ),
        # transformers' static cache: generate() replays a compiled decode forward's CUDA graph
        _Fact(
            "runtime",
            "compiled_decode",
            True,
            cdec,
            "predicted with runtime.compiled_decode: true (the trace's decode passes are CUDA-graph replays of "
            "torch.compile's fused kernels, its prefill launched op by op: generate() with a static cache); "
            "--set runtime.compiled_decode=false predicts every pass launched op by op",
        ),
        # cudagraph trees record the decode graph again when a call's static inputs moved (large batches)
        _Fact(
            "runtime",
            "decode_graph_records",
            records,
            cdec and records > 0,
            f"predicted with runtime.decode_graph_records: {records:g} (every profiled generate() call records "
            "its decode graph again, cudaGraphInstantiate, the GPU idle meanwhile); --set "
            "runtime.decode_graph_records=0 predicts the steady state",
        ),
        # torch.compile's inductor names its generated kernels triton_poi_/per_/red_fused_...
        _Fact(
            "runtime",
            "framework",
            "compiled",
            not graphs and not cdec and any(inductor_kernels(a) for a in ans),
            "predicted with runtime.framework: compiled (the trace's fused kernels are torch.compile's); "
            "--set runtime.framework=eager predicts the same model in eager PyTorch",
        ),
        # PyTorch AMP keeps fp32 weights and casts them for each GEMM: aten::linear sees a float weight
        _Fact(
            "training",
            "param_dtype",
            "fp32",
            sc.kind == "training" and fp32_weights(ans),
            "predicted with training.param_dtype: fp32 (the trace's gradients or linear layers' weights are float: "
            "PyTorch AMP, cast to the compute precision each step); --set training.param_dtype=bf16 "
            "predicts weights kept in bf16",
        ),
        _Fact(
            "training",
            "param_dtype",
            "bf16",
            sc.kind == "training" and sc.training is not None and sc.training.precision != "fp32" and not fp32_weights(ans),
            "predicted with training.param_dtype: bf16 (the trace's gradients and linear layers' weights are "
            "16-bit: the model was cast to bf16); --set training.param_dtype=fp32 predicts AMP's fp32 weights",
        ),
        # Hugging Face's modelling code writes some ops out of elementwise kernels
        _Fact(
            "runtime",
            "implementation",
            "huggingface",
            hf_implementation(ans),
            "predicted with runtime.implementation: huggingface (the trace writes the tanh GELU or RMSNorm "
            "out of elementwise ops, as transformers' modelling code does); --set "
            "runtime.implementation=reference predicts PyTorch's fused ops",
        ),
        # F.scaled_dot_product_attention picks cuDNN's kernels by itself on Hopper (torch 2.11)
        _Fact(
            "runtime",
            "attention_backend",
            "cudnn",
            backend == "cudnn",
            "predicted with runtime.attention_backend: cudnn (the trace's attention ran cuDNN's fused "
            "kernels, aten::_cudnn_attention_forward); --set runtime.attention_backend=flash predicts "
            "FlashAttention-2's",
        ),
        # tools/gpt.py forces SDPA's flash backend (sdpa_kernel), as the flash-attn package runs it
        _Fact(
            "runtime",
            "attention_backend",
            "flash",
            backend == "flash",
            "predicted with runtime.attention_backend: flash (the trace's attention ran FlashAttention-2: "
            "aten::_flash_attention_forward or, in CUDA-graph replays, its pytorch_flash kernels); --set "
            "runtime.attention_backend=auto predicts the stack's choice",
        ),
        # the memory-efficient kernels: what fp32 attention runs (and SDPA's pick where cuDNN and flash refuse)
        _Fact(
            "runtime",
            "attention_backend",
            "efficient",
            backend == "efficient",
            "predicted with runtime.attention_backend: efficient (the trace's attention ran PyTorch's "
            "memory-efficient kernels, aten::_efficient_attention_forward); --set "
            "runtime.attention_backend=cudnn predicts cuDNN's (16-bit attention only: fp32 attention runs "
            "the memory-efficient kernels whatever the backend)",
        ),
        # attention written out of PyTorch ops (transformers' attn_implementation="eager")
        _Fact(
            "runtime",
            "attention_backend",
            "eager",
            backend == "eager",
            "predicted with runtime.attention_backend: eager (the trace's attention is written out of "
            "PyTorch ops: softmaxes over 4-D attention scores, no fused attention kernel); --set "
            "runtime.attention_backend=cudnn predicts a fused kernel",
        ),
    ]


def _loop_facts(sc: Scenario, ans: list[Analysis]) -> list[_Fact]:
    """What the traced loop did around the model: the prefill's logits, ``generate()``, the optimizer's
    states and implementation, dropout, and what the profiler recorded."""
    drop = dropout_p(ans)
    opt_impl = optimizer_impl(ans) if sc.kind == "training" else None
    # PyTorch's optimizers on bf16 weights keep no fp32 master copy: they update bf16 params and moments
    low_states = sc.kind == "training" and optimizer_element_type(ans) in ("c10::BFloat16", "c10::Half")
    record = profiler_record(ans[0].trace)
    return [
        # a plain transformers forward computes the logits of every prompt position
        _Fact(
            "inference",
            "prefill_logits",
            "all",
            sc.kind == "inference" and any(_all_prompt_logits(a, sc) for a in ans),
            "predicted with inference.prefill_logits: all (the trace's LM head GEMM runs over every prompt "
            "token, as a plain transformers forward does); --set inference.prefill_logits=last predicts "
            "logits of each sequence's last token only",
        ),
        # transformers' generate(): its stopping criteria call aten::isin every token
        _Fact(
            "runtime",
            "decode_loop",
            "generate",
            sc.kind == "inference" and any(generate_loop(list(a.trace.cpu_ops.values())) for a in ans),
            "predicted with runtime.decode_loop: generate (the trace's stopping criteria, aten::isin, or their "
            "verdict's unfinished & ~done are transformers' generate()); --set runtime.decode_loop=manual "
            "predicts a loop of forward passes",
        ),
        # 16-bit weights updated from fp32 optimizer states: a master copy (Megatron- or DeepSpeed-style)
        _Fact(
            "training",
            "master_weights",
            True,
            sc.kind == "training" and optimizer_element_type(ans) == "float" and not fp32_weights(ans),
            "predicted with training.master_weights: true (the trace's optimizer updates fp32 states of "
            "16-bit weights); --set training.master_weights=false predicts none",
        ),
        _Fact(
            "training",
            "master_weights",
            False,
            low_states,
            "predicted with training.master_weights: false (the trace's optimizer updates bf16 parameters "
            "and moments in place, no fp32 master copy); --set training.master_weights=true predicts one",
        ),
        # torch.optim's default on CUDA is the foreach update (one kernel per arithmetic step)
        _Fact(
            "training",
            "optimizer_impl",
            "foreach",
            opt_impl == "foreach",
            "predicted with training.optimizer_impl: foreach (the trace's optimizer step runs torch.optim's "
            "multi-tensor ops, aten::_foreach_*); --set training.optimizer_impl=fused predicts a fused update",
        ),
        _Fact(
            "training",
            "optimizer_impl",
            "fused",
            opt_impl == "fused",
            "predicted with training.optimizer_impl: fused (the trace's optimizer step is one fused kernel per "
            "group, aten::_fused_adamw_); --set training.optimizer_impl=foreach predicts torch.optim's default",
        ),
        _Fact(
            "training",
            "dropout",
            drop,
            sc.kind == "training" and drop > 0,
            f"predicted with training.dropout: {drop:g} (the trace's native_dropout calls in training mode, or "
            "its fused attention's dropout_p); "
            "--set training.dropout=0 predicts no dropout kernels",
        ),
        # a PyTorch-profiler trace was recorded with the profiler attached (Nsight Systems ones not)
        _Fact(
            "runtime",
            "profiler",
            True,
            all(a.trace.format == "kineto" for a in ans),
            "predicted with runtime.profiler: true (the run was recorded by the PyTorch profiler, which "
            "adds host time to every op); --set runtime.profiler=false predicts the same run unprofiled",
        ),
        # with_stack, profile_memory, no record_shapes: each changes the host's time per op
        _Fact(
            "runtime",
            "profiler_record",
            record,
            # (measured for training steps; an inference trace's host is priced as shapes alone)
            sc.kind == "training" and all(a.trace.format == "kineto" for a in ans) and record != ["shapes"],
            f"predicted with runtime.profiler_record: [{', '.join(record)}] (what the trace's profiler "
            "recorded: shapes, Python stacks, memory events; each changes the host's time per op); "
            "--set runtime.profiler_record=[shapes] predicts a trace of shapes alone",
        ),
    ]


def _host_facts(
    sc: Scenario, ans: list[Analysis], cdec: bool, probe_window: int | None
) -> tuple[list[_Fact], CpuOpTime | None]:
    """What the traced host did, for a scenario that already holds how the code ran: its code's ops per
    layer and per decode pass, its CPU's speed (also returned), how often its loop waits for the GPU. The
    CPU speed scales a host model measured at a known probe; a loop that never syncs is priced as one only
    for an eager or compiled single-stage training step with a per-layer host model (docs/traces.md,
    host speed)."""
    prof = _profile_of(sc)
    host_model = prof.host_layer
    inference = sc.kind == "inference"
    has_ref = bool(host_model.get("probe_infer" if inference else "probe_main"))
    # a no-grad pass is paced by its steadier GEMM-op probe, stated as aten::t at its code's ratio
    hf_code = "hf_" if sc.runtime.implementation == "huggingface" else ""
    act = decode_layer_key(sc, prof)
    gemm_code = f"{hf_code}{act}" if inference else None
    window = (PROBE_WINDOW if probe_window is None else probe_window) if inference else 0
    train_code = _train_gemm_code(ans, sc, act) if not inference else None
    cpu = _cpu_speed(ans, inference, host_model, gemm_code or train_code, window=window) if has_ref else None
    if cdec and cpu is not None:
        # a compiled decode's passes call no aten::linear outside the graph: their pace is the loop's
        # aten::empty, the eager prefill's its aten::linear
        dec = _cpu_speed(ans, inference, host_model, empty_only=True, window=window)
        cpu = cpu if dec is None else cpu.model_copy(update={"decode": dec.main})
    synced = [step_synchronized(a) for a in ans]
    decode_every = _decode_sync_every(ans[0], sc) if inference else 1
    unsync_model = (
        sc.kind == "training"
        and sc.parallel.pp == 1
        and sc.runtime.framework != "cuda_graphs"
        and any(k.startswith("train_fwd_") for k in host_model)
    )
    layer_ops = _layer_ops(ans, sc, act, prof.host_ops)
    pass_ops, ref_pass = _pass_ops(ans, sc, act.endswith("_eager"), prof.host_ops)
    facts = [
        # the run's own code: its ops per layer, where they are not the calibrated code's
        _Fact(
            "runtime", "layer_ops", layer_ops, layer_ops is not None, _layer_ops_note(sc, layer_ops, act, prof.host_ops)
        ),
        # the run's own decode loop: its ops outside the layers, where they are not the calibrated code's
        _Fact(
            "runtime",
            "pass_ops",
            pass_ops,
            pass_ops is not None,
            f"predicted with runtime.pass_ops: {pass_ops or 0:g} (the ops a decode pass of the trace's code "
            f"issues outside its layers, where the host beyond the layers was measured on code issuing "
            f"{ref_pass or 0:g}; that host scales with them); --set runtime.pass_ops=null predicts the "
            "calibrated code's",
        ),
        # the CPU's per-op speed (aten::t) of the slowest rank: host-bound phases scale with it
        _Fact(
            "runtime",
            "cpu_op_time",
            cpu,
            cpu is not None,
            "predicted at the trace's CPU speed (runtime.cpu_op_time: aten::t "
            + _cpu_label(cpu)
            + (
                f", read from the mean of its GEMM ops at the ratio measured on {train_code}'s fit steps"
                if train_code and train_gemm_ratios(host_model, train_code)
                else ""
            )
            + "); host times scale by its ratio to the calibration machine's, which moves 2-3x between and "
            "within runs; --set runtime.cpu_op_time=null predicts at the calibration machine's speed",
        ),
        # decode steps per host wait: under CUDA graphs each wait exposes the next graph's launch
        _Fact(
            "runtime",
            "decode_sync_every",
            decode_every,
            decode_every != 1 and inference,
            f"predicted with runtime.decode_sync_every: {'null' if decode_every is None else decode_every} (the "
            f"trace's loop waits for the GPU {'never' if decode_every is None else f'once every {decode_every} decode steps'}"
            "); --set runtime.decode_sync_every=1 predicts a loop that reads its tokens every step",
        ),
        # a training loop with no host wait in its steps lets the host run ahead across steps
        _Fact(
            "runtime",
            "step_sync",
            False,
            unsync_model and all(x is False for x in synced),
            "predicted with runtime.step_sync: false (no step of the trace waits for the GPU, so the host "
            "runs ahead into the next step and a step takes the larger of the host's and the GPU's totals); "
            "--set runtime.step_sync=true predicts a loop that syncs",
        ),
    ]
    return facts, cpu


def _layer_ops_note(sc: Scenario, layer_ops: LayerOps | None, act: str, host_ops: HostOps) -> str:
    """The note of a ``runtime.layer_ops`` the trace showed: its ops per layer against the calibrated
    code's (``HostOps.calibrated_layer_ops``; inference: a decode layer's), ``act`` the decode layers' host
    key (:func:`decode_layer_key`)."""
    inference = sc.kind == "inference"
    hf_code = "hf_" if sc.runtime.implementation == "huggingface" else ""
    act_name = "swiglu" if sc.model.activation == "swiglu" else "gelu"
    ref_f, ref_b = host_ops.calibrated_layer_ops(sc.runtime.implementation, act_name) or (0.0, 0.0)
    hf_code_name = (
        ("transformers' dynamic-cache" if inference else "transformers' fit steps'") if hf_code else "tools/gpt.py's"
    )
    ref_ops = (
        f"{{fwd: {host_ops.calibrated_decode_layer_ops(sc.runtime.implementation, act if hf_code else act_name) or 0:g}}} "
        "a decode layer"
        if inference
        else f"{{fwd: {ref_f:g}, bwd: {ref_b:g}}}"
    )
    return (
        "predicted with runtime.layer_ops: "
        + (
            ""
            if layer_ops is None
            else f"{{fwd: {layer_ops.fwd:g}}}"
            if layer_ops.bwd is None
            else f"{{fwd: {layer_ops.fwd:g}, bwd: {layer_ops.bwd:g}}}"
        )
        + (
            " (the host weight of the ops a layer of the trace's code issues, in aten::t units, where the eager "
            if hf_code and not inference
            else " (the ops a layer of the trace's code issues, where the eager "
        )
        + f"host model was measured on {hf_code_name} {ref_ops}; its host per "
        f"{'decode ' if hf_code and inference else ''}layer scales with them); "
        "--set runtime.layer_ops=null "
        "predicts the calibrated code's"
    )


def _check_one_run(ans: list[Analysis]) -> None:
    """Raise where the traces are of more than one run (``calibrate.runs``): validate compares one."""
    from simcore.calibration.calibrate import runs

    groups = runs(ans)
    if len(groups) > 1:
        raise SimcoreError(
            f"the traces are {len(groups)} different runs ("
            + "; ".join(", ".join(Path(a.trace.path).name for a in g) for g in groups)
            + "): validate one run (its ranks' traces) at a time"
        )


def _step_notes(passes: bool, warm: list[int], slowest: Analysis) -> list[str]:
    """Notes on how the measured step was taken: one step of an unannotated inference trace (``passes``),
    and the steps left out for capturing a CUDA graph (``warm``)."""
    notes = []
    if passes:
        notes.append(
            "the trace has no step annotations and repeats its kernels every forward pass: taken as one step "
            "(its kernels' span) rather than as steps found by repetition, which would be single passes"
        )
    if warm:
        notes.append(
            f"step{'s' if len(warm) > 1 else ''} {', '.join(str(i) for i in warm)} of the trace captured a CUDA "
            "graph (cudaStreamBeginCapture / cudaGraphInstantiate: torch.compile warming up or re-recording its "
            "graphs), a one-off cost steady steps do not pay: measured over the other "
            f"{len(slowest.steps)} step{'s' if len(slowest.steps) > 1 else ''}"
        )
    return notes


def _without_spent_lead(
    slowest: Analysis, sc: Scenario, pred_step: float, bd: dict[str, float]
) -> tuple[float, list[str]]:
    """The predicted step (seconds) of one unannotated step of a loop that ran ahead, less the host lead the
    trace shows spent (:func:`single_step_lead`; at most the predicted ``host_overhead``, taken off ``bd`` in
    place), and the note saying so; ``pred_step`` and no note otherwise. Such a trace measures its kernels'
    span, which starts when the GPU reaches them."""
    lead = single_step_lead(slowest, sc)
    if lead <= 0.0:
        return pred_step, []
    cut = min(lead, bd.get("host_overhead", 0.0))
    bd["host_overhead"] = bd.get("host_overhead", 0.0) - cut
    note = (
        f"one unannotated step whose first kernels waited {lead * 1e3:.3g} ms longer behind earlier GPU work "
        "than its last ones (the loop runs ahead, and the host spent that lead): its measured time is its "
        "kernels' span, so the prediction is the GPU's total, or the host's less that lead "
        f"({cut * 1e3:.3g} ms off the predicted period)"
    )
    return pred_step - cut, [note]


def _measured_classes(a: Analysis) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Seconds a step of ``a`` per comparison class (:func:`measured_class`): the time each adds to the
    device timeline (exposed), its kernels' own time, and each collective's kernel time."""
    meas_cls: dict[str, float] = defaultdict(float)
    meas_kernel: dict[str, float] = defaultdict(float)
    colls: dict[str, float] = defaultdict(float)
    for c, v in a.class_times(exposed=True).items():
        meas_cls[measured_class(c)] += v
    for c, v in a.class_times(exposed=False).items():
        meas_kernel[measured_class(c)] += v
        if c.startswith("comm:"):
            colls[c.split(":", 1)[1]] += v
    return meas_cls, meas_kernel, colls


def _p2p_as_idle(a: Analysis, meas_cls: dict[str, float]) -> list[str]:
    """Moves the exposed point-to-point time spent waiting for the peer (:func:`p2p_wait`) from
    ``communication`` to ``idle`` in ``meas_cls`` (where simcore puts the pipeline bubble); its note."""
    wait = p2p_wait(a)
    if wait <= 0:
        return []
    moved = min(wait, meas_cls.get("communication", 0.0))
    meas_cls["communication"] -= moved
    meas_cls["idle"] += moved
    return [
        f"{moved * 1e3:.3g} ms of exposed point-to-point time is waiting for the peer (longer than the "
        "shortest transfer of the same size in the trace): counted as idle, where simcore puts the "
        "pipeline bubble"
    ]


def _class_rows(
    meas_cls: dict[str, float], meas_kernel: dict[str, float], bd: dict[str, float], pred_step: float
) -> list[dict[str, Any]]:
    """Per comparison class, measured (exposed and kernel) against predicted seconds, the prediction's
    breakdown ``bd`` folded onto the classes (:func:`predicted_class`; what it leaves of ``pred_step`` beyond
    0.1 % is ``other``); largest absolute error first."""
    pred_cls: dict[str, float] = defaultdict(float)
    for c, v in bd.items():
        pred_cls[predicted_class(c)] += v
    # whatever of the predicted step the breakdown does not cover (should be ~0)
    gap = pred_step - sum(pred_cls.values())
    if abs(gap) > 1e-3 * pred_step:
        pred_cls["other"] += gap
    rows: list[dict[str, Any]] = []
    for c in CLASS_ORDER:
        m, p = meas_cls.get(c, 0.0), pred_cls.get(c, 0.0)
        if m == 0.0 and p == 0.0:
            continue
        rows.append(
            {
                "class": c,
                "measured_s": m,
                "measured_kernel_s": meas_kernel.get(c, 0.0),
                "predicted_s": p,
                "error_s": p - m,
                "error_pct": 100.0 * (p / m - 1.0) if m > 0 else None,
            }
        )
    rows.sort(key=lambda r: -abs(float(r["error_s"])))
    return rows


def _trace_notes(slowest: Analysis, sc: Scenario, host_idle: float) -> list[str]:
    """Notes on the measured trace: how its steps were found, a GPU idle more than 20 % of the step
    (``host_idle`` seconds: host-bound), a GPU other than the scenario system's."""
    from simcore.specs.registry import default_registry
    from simcore.workload.replay import match_device_name

    notes = []
    if slowest.step_source != "annotation":
        notes.append(
            f"steps found by {'repeated kernel sequences' if slowest.step_source == 'repeat' else 'taking the whole trace as one step'}"
        )
    measured = slowest.step_time_s
    if host_idle > 0.2 * measured:
        notes.append(
            f"the GPU is idle {host_idle / measured:.0%} of the measured step (launch gaps and host stalls): the "
            "run is host-bound there, and a profiler with record_shapes=True adds host time to every op"
        )
    traced = slowest.trace.device_name
    if traced:
        reg = default_registry()
        key = match_device_name(traced, reg)
        want = reg.system(sc.cluster.system).device
        if key != want:
            notes.append(
                f"the trace ran on {traced!r}{f' ({key})' if key else ''} but the scenario's system "
                f"{sc.cluster.system} has {want} GPUs"
            )
    return notes


def _cpu_label(cpu: CpuOpTime | None) -> str:
    """The CPU probe of a note: one value, or the prefill's / decode's, or the main / backward thread's."""
    if cpu is None:
        return ""
    if cpu.decode is not None:
        return f"{cpu.main * 1e6:.1f} / {cpu.decode * 1e6:.1f} us in the prefill / decode passes"
    if cpu.backward is not None:
        return f"{cpu.main * 1e6:.1f} / {cpu.backward * 1e6:.1f} us on the main / backward thread"
    return f"{cpu.main * 1e6:.1f} us"


def _steady_steps(ans: list[Analysis]) -> tuple[list[Analysis], list[int]]:
    """The analyses without the steps whose host captured a CUDA graph on any rank
    (:func:`~simcore.calibration.host_trace.graph_capture_steps`), and those steps' indices; unchanged
    (and no indices) where every step captured one or none did."""
    caught = sorted({i for a in ans for i in graph_capture_steps(a)})
    if not caught or len(caught) >= min(len(a.steps) for a in ans):
        return ans, []
    return [a.without_steps(set(caught)) for a in ans], caught


def _assume(
    sc: Scenario,
    section: str,
    fld: str,
    value: Any,
    shown: bool,
    note: str,
    overrides: list[str] | None,
    assumed: list[str],
) -> Scenario:
    """``sc`` with ``section.fld = value`` where the trace ``shown`` it and neither the scenario file nor
    a ``--set`` gave the field (the ``note`` then joins ``assumed``)."""
    part = getattr(sc, section)
    if (
        not shown
        or part is None
        or fld in part.model_fields_set
        or any(o.split("=", 1)[0].strip() == f"{section}.{fld}" for o in overrides or [])
    ):
        return sc
    assumed.append(note)
    return sc.model_copy(update={section: part.model_copy(update={fld: value})})


_GEMM_OPS = ("aten::linear", "aten::matmul", "aten::mm", "aten::addmm")


def _all_prompt_logits(a: Analysis, sc: Scenario) -> bool:
    """Whether the trace's LM head (a GEMM with a vocabulary-wide weight) runs over more rows than
    there are sequences: every prompt position's logits, not only each sequence's last."""
    inf = sc.inference
    if inf is None or inf.prompt_len <= 1:
        return False
    vocab = sc.model.vocab
    for op in a.trace.cpu_ops.values():
        if op.name not in _GEMM_OPS or not op.input_dims or len(op.input_dims) < 2:
            continue
        x, w = op.input_dims[0], op.input_dims[1]
        if not (isinstance(x, list) and isinstance(w, list) and len(w) == 2 and len(x) >= 2):
            continue
        if vocab not in w or not all(isinstance(d, int) and d > 0 for d in x):
            continue
        rows = 1
        for d in x[:-1]:
            rows *= d
        if rows > inf.batch:
            return True
    return False


def _layer_ops(ans: list[Analysis], sc: Scenario, layer_key: str, host_ops: HostOps) -> LayerOps | None:
    """The ops a layer of the trace's code issues (:func:`layer_op_counts`; inference: a decode layer's,
    :func:`decode_layer_op_count`), where they differ from the calibrated code's by more than 5 %
    (``RuntimeSpec.layer_ops``): eager single-GPU runs of PyTorch's own layers, training without recompute
    (its forward ops run again in the backward), over ``tools/gpt.py``'s or ``transformers``' fit code's
    (``HostOps.calibrated_layer_ops``; a ``transformers`` MoE or eager-attention layer has entries of its
    own), and ``transformers``' eager decode layers (``layer_key`` the host entries' block key,
    ``swiglu_eager``, ...)."""
    if sc.runtime.framework != "eager" or sc.cluster.gpus != 1:
        return None
    hf = sc.runtime.implementation == "huggingface"
    act = "swiglu" if sc.model.activation == "swiglu" else "gelu"
    if sc.kind == "inference":
        cal = host_ops.calibrated_decode_layer_ops(sc.runtime.implementation, layer_key if hf else act)
        n = decode_layer_op_count(ans[0]) if not sc.runtime.compiled_decode else None
        if n is None or cal is None or abs(n / cal - 1.0) <= 0.05:
            return None
        return LayerOps(fwd=n)
    tr = sc.training
    # transformers' MoE and eager-attention layers have entries of their own, and its layers with bf16 weights
    # (no autocast) a measured factor over the fit code's (``ComputeProfile.weights_factor``)
    if tr is None or tr.recompute != "none" or (hf and (layer_key != act or tr.param_dtype != "fp32")):
        return None
    # transformers' layers by their ops' host weight (HostOps.layer_op_weights), others by their op count
    counts = layer_op_counts(ans[0], host_ops if hf else None)
    ref = host_ops.calibrated_layer_ops(sc.runtime.implementation, act)
    if counts is None or ref is None:
        return None
    # the same code's weight is the same to the rounding (its ops' names): a 2 % difference is another code's
    tol = 0.02 if hf else 0.05
    if all(abs(c / r - 1.0) <= tol for c, r in zip(counts, ref, strict=True)):
        return None
    return LayerOps(fwd=counts[0], bwd=counts[1])


def _pass_ops(
    ans: list[Analysis], sc: Scenario, eager_attention: bool, host_ops: HostOps
) -> tuple[float | None, float | None]:
    """(The ops a decode pass of the trace's code issues outside its layers, :func:`decode_pass_op_count`,
    where they differ from the calibrated code's by more than 5 %; the calibrated code's count) of an
    eager single-GPU inference trace (``RuntimeSpec.pass_ops``)."""
    if sc.kind != "inference" or sc.runtime.framework != "eager" or sc.cluster.gpus != 1:
        return None, None
    act = "swiglu" if sc.model.activation == "swiglu" else "gelu"
    ref = host_ops.calibrated_pass_ops(
        sc.runtime.implementation,
        sc.runtime.decode_loop == "generate",
        act,
        eager_attention,
        bool(sc.runtime.compiled_decode),
    )
    # a compiled decode's: the loop's own ops between the graph's launches (its layers and the model's
    # ops run inside)
    n = decode_pass_op_count(ans[0], host_ops)
    if n is None or ref is None or abs(n / ref - 1.0) <= 0.05:
        return None, ref
    return n, ref


def _decode_sync_every(a: Analysis, sc: Scenario) -> int | None:
    """Decode passes per host synchronization in an inference trace's steps (``None``: no step waits;
    1 where the passes cannot be counted). A trace without step annotations counts over its whole
    CPU range: its decode passes (one step, or steps found by repeats) per wait; a trace without CPU
    ops (CUDA-graph replays profiled without ``record_function``) over its runtime calls' range."""
    comp = inference_composition(a, sc.model.layers / sc.parallel.pp)
    ranges = [(s.cpu_start, s.cpu_end) for s in a.steps if s.cpu_start is not None and s.cpu_end is not None]
    steps = 1.0
    if not ranges and a.steps and (a.trace.cpu_ops or a.trace.host_calls):
        ranges, steps = [cpu_range(a)], float(len(a.steps))
    if comp is None or not ranges or comp[1] <= 0:
        return 1
    calls = [c.ts for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS)]
    waits = statistics.median([float(sum(1 for t in calls if lo <= t <= hi)) for lo, hi in ranges])
    return None if waits == 0 else max(1, round(comp[1] * steps / waits))


def _profile_of(sc: Scenario) -> Any:
    """The compute profile the scenario's prediction uses."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster

    return load_profile(resolve_cluster(sc.cluster, default_registry()).device, sc.calibration)


def decode_layer_key(sc: Scenario, prof: ComputeProfile) -> str:
    """The key of a scenario's decode layers' host entries (``ComputeProfile.layer_key``), which also names
    the code whose probe ratios pace an inference trace (``fit_host.code_probe_ratios``: ``hf_`` and it for
    ``transformers``'): an MoE model's under ``generate()`` its batched experts' (its decode passes hold
    most of its ops), else the grouped GEMM's."""
    rt = sc.runtime
    act = "swiglu" if sc.model.activation == "swiglu" else "gelu"
    moe = decode_moe_key(rt.implementation, rt.decode_loop, sc.model.moe is not None)
    return prof.layer_key(act, moe, rt.implementation, "infer_decode", rt.attention_backend)


TRAIN_GEMMS_PER_LAYER = {"swiglu": 7, "gelu": 4}
"""GEMM ops a layer of the ``transformers`` code the training pace ratios were measured on issues on the main
thread (``fit_host.train_gemm_ratios``): a Llama's separate q / k / v / o, gate / up / down projections, a
GPT-2's four ``Conv1D`` ``addmm``."""


def _train_gemm_code(ans: list[Analysis], sc: Scenario, act: str) -> str | None:
    """The code (``hf_<act>``) whose GEMM-op pace ratios (``fit_host.train_gemm_ratios``) time a training
    trace's CPU, where the trace runs that code as its fit steps did: ``transformers``' dense layers with
    separate projections (:data:`TRAIN_GEMMS_PER_LAYER` GEMM ops a layer), fp32 weights under autocast (bf16
    or fp16), no recompute, one GPU, eager. A GEMM op's host time carries its code's (a fused q / k / v, autocast's
    casts, a recomputed forward, a DDP hook), so elsewhere the step keeps ``aten::t`` and ``aten::empty``."""
    tr = sc.training
    per_layer = TRAIN_GEMMS_PER_LAYER.get(act)
    if (
        per_layer is None
        or tr is None
        or sc.runtime.implementation != "huggingface"
        or sc.runtime.framework != "eager"
        or sc.model.moe is not None
        or sc.cluster.gpus != 1
        or tr.param_dtype != "fp32"
        or tr.precision == "fp32"
        or tr.recompute != "none"
    ):
        return None
    n = gemm_ops_per_step(ans[0])
    return f"hf_{act}" if n and n // max(sc.model.layers, 1) == per_layer else None


def _cpu_speed(
    ans: list[Analysis],
    inference: bool,
    host: dict[str, float],
    gemm_code: str | None = None,
    empty_only: bool = False,
    window: int | None = None,
) -> CpuOpTime | None:
    """The CPU speed probe of the slowest rank (the one whose host sets the pace), if the traces have
    one: the largest main-thread probe for inference, the largest sum over both threads for training
    (where both are found). A torch.compile trace has no ``aten::t``: its compiled regions'
    ``aten::transpose`` stands in, over the profile's ``probe_compiled_*`` (the same CPU's transpose
    in compiled code where its ``aten::t`` is ``probe_main`` / ``probe_backward``); compiled code that calls
    none (``transformers``') is timed by its kernel launches over ``probe_launch_ratio_*``
    (:func:`~simcore.calibration.host_trace.compiled_launch_speed`). A thread without
    enough ``aten::t`` is timed by its ``aten::empty`` (:func:`_as_t`)."""
    speeds: list[OpSpeed] = []
    for a in ans:
        comp = compiled_op_speed(a) if not inference else None
        if comp is not None and comp.main_s and comp.backward_s and host.get("probe_compiled_main"):
            speeds.append(
                OpSpeed(
                    main_s=comp.main_s * host["probe_main"] / host["probe_compiled_main"],
                    backward_s=comp.backward_s * host["probe_backward"] / host["probe_compiled_backward"],
                )
            )
            continue
        launch = compiled_launch_speed(a) if not inference and comp is None else None
        l_m, l_b = host.get("probe_launch_ratio_main"), host.get("probe_launch_ratio_backward")
        if launch is not None and launch.main_s and launch.backward_s and l_m and l_b:
            # transformers' compiled code: its kernel launches' pace (host_trace.LAUNCH_PROBE_PREFIX) as aten::t
            speeds.append(OpSpeed(main_s=launch.main_s / l_m, backward_s=launch.backward_s / l_b))
            continue
        # an inference trace's pace over windows of its probe calls (host_trace.PROBE_WINDOW), or ``window``
        w = window if window is not None else (PROBE_WINDOW if inference else 0)
        s = _as_t(op_speed(a, w), inference, host, gemm_code, empty_only)
        if s is not None and s.main_s:
            speeds.append(s)
    if not speeds:
        return None
    if inference:
        return CpuOpTime(main=max(float(s.main_s or 0.0) for s in speeds))
    both = [s for s in speeds if s.backward_s]
    if not both:
        return None
    s = max(both, key=lambda x: float(x.main_s or 0.0) + float(x.backward_s or 0.0))
    return CpuOpTime(main=float(s.main_s or 0.0), backward=float(s.backward_s or 0.0))


def _as_t(
    s: OpSpeed | None,
    inference: bool,
    host: dict[str, float],
    gemm_code: str | None = None,
    empty_only: bool = False,
) -> OpSpeed | None:
    """A trace's probes as ``aten::t``: a thread without enough ``aten::t`` is timed by its
    ``aten::empty`` over the profile's ``probe_empty_ratio_*`` (``host_trace.ALT_PROBE_OP``). With
    ``gemm_code``, the layers' code (``[hf_]<act>``: a no-grad pass), the main thread is timed by its
    ``aten::linear`` and its ``aten::empty`` together at the ratios the profile measured for that code
    where it has them (``host_trace.GEMM_PROBE_OP``, a steadier probe; ``fit_host.code_probe_ratios``,
    ``fit_host.gemm_pace``); with ``empty_only`` by its
    ``aten::empty`` alone (a compiled decode pass: its ``aten::linear`` calls are its prefill's few,
    :func:`compiled_decode_graphs`)."""
    if s is None:
        return None
    r_m = host.get("probe_empty_ratio_infer" if inference else "probe_empty_ratio_main")
    r_b = host.get("probe_empty_ratio_backward")
    if not inference and gemm_code and s.gemm_mean_main_s and s.mm_mean_backward_s:
        # a training step of its ratios' code: each thread by the mean of its GEMM ops
        ratios = train_gemm_ratios(host, gemm_code)
        if ratios:
            return OpSpeed(main_s=s.gemm_mean_main_s / ratios[0], backward_s=s.mm_mean_backward_s / ratios[1])
    r_lin, r_e = code_probe_ratios(host, gemm_code) if gemm_code and inference else (None, None)
    if empty_only and s.empty_main_s and r_m:
        # ``empty_only``: the main thread by its aten::empty alone (a compiled decode loop's own ops)
        return OpSpeed(main_s=s.empty_main_s / r_m, backward_s=None)
    if s.linear_main_s and r_lin:
        # a no-grad pass's steadier probe (host_trace.GEMM_PROBE_OP) beside its aten::empty, stated as aten::t
        return OpSpeed(main_s=gemm_pace(s.linear_main_s, r_lin, s.empty_main_s or 0.0, r_e), backward_s=None)
    main = thread_probe(s.main_s or 0.0, s.empty_main_s or 0.0, r_m, training=not inference)
    bwd = thread_probe(s.backward_s or 0.0, s.empty_backward_s or 0.0, r_b, training=True)
    return OpSpeed(main_s=main or None, backward_s=bwd or None)


def _host_speed(sc: Scenario, ans: list[Analysis]) -> float | None:
    """This run's host pace per layer over the scenario's profile (eager single-GPU traces only)."""
    from simcore.calibration.host_trace import host_scale

    if sc.runtime.framework != "eager":
        return None
    prof = _profile_of(sc)
    scale, _ = host_scale(ans, prof.model_copy(update={"host_scale": 1.0}))
    return None if scale is None else scale * 1.0 / prof.host_scale
