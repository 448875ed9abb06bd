"""Host speed from a profiler trace: how long the CPU took per transformer layer.

Eager PyTorch issues kernels from Python without waiting for the GPU, so the CPU timestamps of a
profiler trace show the host's own pace whatever the GPU does. A pre-norm decoder calls its norm
twice per layer and once at the end (``2 L + 1`` norm ops per forward, and as many norm backward
nodes per backward), so the spacing of those ops gives the host time per layer:

* training step: the forward norms before the first autograd node, the backward norm nodes after
  it; steps with recomputation (norms or attention forwards rerun inside the backward) are left out;
* inference step: each forward pass's norms (a decode step: one token per sequence, read from the
  norm's recorded input shape).

:func:`host_scale` compares these with the compute profile's ``host_layer`` entries under the
profiler (a trace is always recorded with it) and returns the ratio: this machine's host speed
relative to the one the profile was measured on. Traces of distributed runs (NCCL kernels) are
skipped: their per-layer host includes the wrapper's work.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from simcore.specs.profile import ComputeProfile, HostOps, layer_op_class, layer_op_key, profiler_key
from simcore.traces.classify import INDUCTOR_FUSED, Analysis, Step, fp32_weights
from simcore.traces.model import CpuOp, RuntimeCall, Trace


class _Row:
    """A dataclass written as one CSV row: its fields, in order (:func:`columns`)."""

    def row(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


def columns(cls: type) -> tuple[str, ...]:
    """The CSV columns of a :class:`_Row` dataclass: its field names, in order."""
    return tuple(f.name for f in fields(cls))


FWD_NORMS = ("aten::layer_norm", "aten::rms_norm")
_BWD_NORM = "autograd::engine::evaluate_function: "
_ATTN_FWD = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention")


@dataclass(frozen=True)
class LayerHost:
    """Measured host seconds per layer in one step of a trace, and what the profile expects."""

    mode: str
    """``train`` or ``decode``."""
    act: str
    """``gelu`` or ``swiglu`` (from the trace's activation ops)."""
    layers: int
    measured_s: float
    """Host seconds per layer (training: forward + backward)."""
    expected_s: float
    """The profile's profiled ``host_layer`` value for the same work."""

    @property
    def ratio(self) -> float:
        return self.measured_s / self.expected_s


def _tokens_of(dims: object) -> int | None:
    """Token count (second dim) of a norm's first input [batch, tokens, hidden], if recorded."""
    if isinstance(dims, list) and dims and isinstance(dims[0], list) and len(dims[0]) == 3:
        try:
            return int(dims[0][1])
        except (TypeError, ValueError):
            return None
    return None


def _step_windows(a: Analysis) -> Iterator[tuple[Step, float, float, list[CpuOp]]]:
    """Each annotated step with a CPU range: the step, its start and end, and its CPU ops in time order."""
    ops = sorted(a.trace.cpu_ops.values(), key=lambda o: o.ts)
    ts = [o.ts for o in ops]
    for st in a.steps:
        if st.cpu_start is not None and st.cpu_end is not None:
            lo, hi = st.cpu_start, st.cpu_end
            yield st, lo, hi, ops[bisect.bisect_left(ts, lo) : bisect.bisect_right(ts, hi)]


MOE_OP = "aten::_grouped_mm"
"""The op of a mixture-of-experts layer's expert GEMMs (``transformers``' experts)."""


def batched_experts(ops: list[CpuOp]) -> bool:
    """Whether the ops run ``transformers``' ``batched_mm`` experts: each routed token's expert weights
    gathered and one ``aten::bmm`` of ``[tokens, out, in]`` weights by ``[tokens, in, 1]`` inputs, no
    grouped GEMM (:data:`MOE_OP`). ``generate()`` switches ``grouped_mm`` experts to them for its decode
    passes on a GPU (transformers' "decode-stage switching"). The Llama family's
    rotary ``bmm`` (``[b, d/2, 1]`` by ``[b, 1, s]``) is not one."""
    if any(o.name == MOE_OP for o in ops):
        return False
    for o in ops:
        d = o.input_dims
        if o.name == "aten::bmm" and isinstance(d, list) and len(d) >= 2:
            w, x = d[0], d[1]
            weights = isinstance(w, list) and len(w) == 3 and w[1] > 1 and w[2] > 1
            if weights and isinstance(x, list) and len(x) == 3 and x[2] == 1:
                return True
    return False


def _act_of(win: list[CpuOp]) -> str:
    """The MLP of the ops' layers: ``swiglu`` where they call SiLU, else ``gelu``; where the experts'
    grouped GEMM runs (:data:`MOE_OP`) their host is an MoE layer's: ``_moe`` appended for fp32 inputs
    (the fp32 grouped GEMM's loop of per-expert GEMMs, under AMP), ``_moe_native`` for others (the
    native bf16 grouped GEMM), ``_moe_batched`` where the experts are batched GEMMs over gathered
    weights instead (:func:`batched_experts`: ``generate()``'s decode passes); then ``_eager`` where
    the attention is written out of PyTorch ops (:func:`eager_attention`: ``transformers``'
    ``attn_implementation="eager"``, SDPA's math fallback)."""
    act = "swiglu" if any(o.name == "aten::silu" for o in win) else "gelu"
    grouped = [o for o in win if o.name == MOE_OP]
    if grouped:
        fp32 = any(o.input_types and o.input_types[0] == "float" for o in grouped)
        untyped = all(not o.input_types for o in grouped)
        act += "_moe" if fp32 or untyped else "_moe_native"
    elif batched_experts(win):
        act += "_moe_batched"
    return act + ("_eager" if eager_attention(win) else "")


FUSED_ATTENTION_OPS = (
    "aten::_cudnn_attention_forward",
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
)
"""The backend ops of a fused attention forward (one per call): SDPA's math fallback has none."""


def eager_attention(ops: list[CpuOp]) -> bool:
    """Whether the ops' attention is written out of PyTorch ops: softmaxes over 4-D ``[b, h, q, kv]``
    scores and no fused attention kernel's op (:data:`FUSED_ATTENTION_OPS`) among them (``transformers``'
    eager attention, or SDPA's math fallback, which runs the same ops)."""
    fused = any(o.name in FUSED_ATTENTION_OPS for o in ops)
    return not fused and any(
        o.name == "aten::_softmax"
        and isinstance(o.input_dims, list)
        and bool(o.input_dims)
        and isinstance(o.input_dims[0], list)
        and len(o.input_dims[0]) == 4
        for o in ops
    )


def layer_host_times(a: Analysis, prof: ComputeProfile) -> list[LayerHost]:
    """Per-layer host times of every annotated step of a single-GPU trace (empty when the trace
    has no usable norm pattern, no step annotations, NCCL kernels, or the profile no host model)."""
    if not prof.host_layer or any(k.base == "comm" for s in a.steps for k in s.kernels):
        return []
    out: list[LayerHost] = []
    for _st, _lo, _hi, win in _step_windows(a):
        act = _act_of(win)
        # transformers' layers (MoE, eager attention) have their own entries: Hugging Face's where measured
        impl = "huggingface" if hf_layers(win) else "reference"
        first_bwd = next((o.ts for o in win if o.name.startswith(_BWD_NORM)), None)
        norms = _outermost([o for o in win if o.name in FWD_NORMS])
        if first_bwd is not None:
            fwd = [o.ts for o in norms if o.ts < first_bwd]
            bwd = [o.ts for o in win if o.name.startswith(_BWD_NORM) and "NormBackward" in o.name]
            n = len(fwd)
            if n < 5 or n % 2 == 0 or len(bwd) != n:
                continue
            # recomputation (norms rerun inside the backward: full; attention forwards: selective) adds
            # checkpointing host work whose model is a single width-64 measurement: such steps would
            # measure that model rather than the host's speed, so they are left out
            if any(o.ts > first_bwd and (o.name in FWD_NORMS or o.name in _ATTN_FWD) for o in win):
                continue
            layers = (n - 1) // 2
            meas = (fwd[-1] - fwd[0] + bwd[-1] - bwd[0]) / layers
            exp = prof.host_of(f"train_fwd_{act}", True, impl) + prof.host_of(f"train_bwd_{act}", True, impl)
            if exp > 0 and meas > 0:
                out.append(LayerHost("train", act, layers, meas, exp))
            continue
        # inference: split the norms into forward passes (2 L + 1 each, one token shape per pass)
        exp = prof.host_of(f"infer_decode_{act}", True, impl)
        if exp <= 0:
            continue
        for p in _split_passes(norms, [o.ts for o in win if o.name == "aten::embedding"]):
            if len(p) >= 5 and len(p) % 2 == 1 and _tokens_of(p[0].input_dims) == 1:
                layers = (len(p) - 1) // 2
                meas = (p[-1].ts - p[0].ts) / layers
                out.append(LayerHost("decode", act, layers, meas, exp))
    return out


def _outermost(ops: list[CpuOp]) -> list[CpuOp]:
    """Drop ops nested in the previous kept one (autocast dispatches a norm twice)."""
    out: list[CpuOp] = []
    for o in ops:
        if out and o.ts < out[-1].ts + out[-1].dur:
            continue
        out.append(o)
    return out


def _split_passes(norms: list[CpuOp], starts: list[float]) -> list[list[CpuOp]]:
    """Norm ops grouped into forward passes: a pass starts at each token-embedding lookup."""
    out: list[list[CpuOp]] = []
    bounds = sorted(starts)
    k = 0
    for o in norms:
        while k < len(bounds) and bounds[k] <= o.ts:
            k += 1
            out.append([])
        if not out:
            out.append([])
        out[-1].append(o)
    return [p for p in out if p]


def host_scale(analyses: list[Analysis], prof: ComputeProfile) -> tuple[float | None, list[LayerHost]]:
    """Median measured / expected per-layer host time over the traces' steps (``None`` when no
    step could be measured), and the per-step measurements."""
    found = [x for a in analyses for x in layer_host_times(a, prof)]
    if not found:
        return None, []
    return float(statistics.median(x.ratio for x in found)), found


# ---------------------------------------------------------------------------------------------
# the CPU's per-op speed

PROBE_OP = "aten::t"
"""A metadata-only operator (a transposed view) every GPT / Llama layer calls in its forward and in its
backward: its duration is the CPU's speed of the moment, whatever the tensors."""


ALT_PROBE_OP = "aten::empty"
"""The probe where a thread calls ``aten::t`` too rarely to time it (fewer than one call per ten
``aten::empty``): Hugging Face's GPT-2 (its ``Conv1D`` is an ``addmm`` with an untransposed weight)
calls it once per pass, in the LM head. Every op that allocates calls ``aten::empty``; its median is
stated as ``aten::t`` through the ratio of the two on threads that have both (``fit_host``:
``probe_empty_ratio_*``)."""

GEMM_PROBE_OP = "aten::linear"
"""A no-grad pass's steadier CPU probe: against the decode fit passes of
``traces/h200/host_decode_r42.csv.gz``, five held-apart traces of one Llama decode layer put its host in units
of the trace's median ``aten::linear`` (its dispatch, the weight's transpose view, the GEMM's launch) within an
rms log error of 0.064, in units of its median ``aten::t`` 0.165. Stated as ``aten::t`` through
``fit_host``'s ``probe_linear_ratio_infer_*``."""

GEMM_PROBE_ALT_OP = "aten::addmm"
"""The GEMM-issuing op of layers without ``aten::linear`` (transformers' GPT-2 ``Conv1D``)."""


@dataclass(frozen=True)
class OpSpeed:
    """Median ``aten::t`` seconds on a training trace's main (forward) and backward (autograd) thread
    (``None`` where too rare to time), and median :data:`ALT_PROBE_OP` seconds (``empty_*``)."""

    main_s: float | None
    backward_s: float | None
    empty_main_s: float | None = None
    empty_backward_s: float | None = None
    linear_main_s: float | None = None
    """Median :data:`GEMM_PROBE_OP` seconds on the main thread, or :data:`GEMM_PROBE_ALT_OP`'s where
    the thread calls it more (``None`` under 10 calls)."""
    mm_backward_s: float | None = None
    """Median ``aten::mm`` seconds on the backward thread(s) (the weight and input gradients' GEMMs;
    ``None`` under 10 calls)."""
    gemm_mean_main_s: float | None = None
    """Mean seconds of the main thread's GEMM op (as ``linear_main_s``, every call: a training step's
    pace, ``fit_host.train_gemm_ratios``)."""
    mm_mean_backward_s: float | None = None
    """Mean ``aten::mm`` seconds on the backward thread(s) (as ``mm_backward_s``, every call)."""


def op_speed(a: Analysis, window: int = 0) -> OpSpeed | None:
    """The CPU's per-op speed in a trace (None when it calls neither probe), seconds a probe call: the
    median over the trace (as the fitted host units were measured), or with ``window`` the mean of the
    medians of consecutive windows of that many calls (:data:`PROBE_WINDOW`, an inference trace's
    pace). The backward thread is the one that runs the autograd nodes; the main thread the other one
    that runs the most ops."""
    ops = list(a.trace.cpu_ops.values())
    if not any(o.name in (PROBE_OP, ALT_PROBE_OP) for o in ops):
        return None
    return _probe_medians(ops, {o.tid for o in ops if o.name.startswith(_BWD_NORM)}, window)


PROBE_WINDOW = 16
"""Calls of a probe op per window of an inference trace's pace (:func:`op_speed`, as ``simcore validate``
reads it): the mean of the medians of consecutive windows of this many calls, not one median. The pace
moves within a run (a greedy GPT-2 ``generate()`` among the decode-loop fit traces: passes of 12-21 ms whose
layers stay at 214-279 of their own pass's ``aten::empty``), and a host-bound step's host is the sum of its ops at the
pace of each moment: one median over the trace under-predicts a run with slow stretches. A window's
median keeps a call preempted alone from counting. 16 was chosen on the decode-loop fit traces
(``generate()`` on GPT-2 and a Llama, each sampler beside greedy: mean |error| 5.8 % one median, 3.9 %
windows of 16, 4.5 % of 32, 4.7 % of 64). Training traces keep one median: their GPU-heavy steps fill
the launch queue, and ops that wait on it are back-pressure, not the CPU's pace (over the committed
traces windows moved training from 105 to 101 of 114 within 10 %, inference from 47 to 54 of 59; a
choice made on those traces, so not held apart). The fitted host units keep each step's median
(``_probe_medians``)."""


def _windowed(v: list[tuple[float, float]], w: int) -> float:
    """The mean over consecutive windows of ``w`` calls (in time order) of each window's median
    duration, seconds; the plain median where ``w`` is 0 or fewer than ``2 w`` calls are timed (a
    trailing partial window is left out)."""
    durs = [d for _, d in sorted(v)]
    if w <= 0 or len(durs) < 2 * w:
        return float(statistics.median(durs))
    return float(statistics.fmean(statistics.median(durs[i : i + w]) for i in range(0, len(durs) - w + 1, w)))


def _probe_medians(ops: list[CpuOp], bwd_tids: set[int], window: int = 0) -> OpSpeed:
    """Median ``aten::t`` and :data:`ALT_PROBE_OP` seconds among ``ops`` on the main thread (the
    non-backward thread with the most ops) and on the backward thread(s); ``aten::t`` is ``None`` on a
    thread that calls it fewer than once per ten :data:`ALT_PROBE_OP`. With ``window``, each the mean of
    windowed medians (:data:`PROBE_WINDOW`)."""
    count: dict[int, int] = {}
    for o in ops:
        count[o.tid] = count.get(o.tid, 0) + 1
    main_tid = max((t for t in count if t not in bwd_tids), key=lambda t: count[t], default=None)

    def med(name: str, tids: set[int]) -> tuple[float | None, int]:
        v = [(o.ts, o.dur) for o in ops if o.name == name and o.tid in tids]
        return (_windowed(v, window) if v else None, len(v))

    out: list[float | None] = []
    for tids in ({main_tid} if main_tid is not None else set(), bwd_tids):
        t, n_t = med(PROBE_OP, tids)
        e, n_e = med(ALT_PROBE_OP, tids)
        out += [t if n_t * 10 >= n_e else None, e]
    main = {main_tid} if main_tid is not None else set()
    lin, n_lin = med(GEMM_PROBE_OP, main)
    mm, n_mm = med(GEMM_PROBE_ALT_OP, main)
    gemm_op = GEMM_PROBE_ALT_OP if n_mm > n_lin else GEMM_PROBE_OP
    if n_mm > n_lin:  # GPT-2's Conv1D layers issue their GEMMs as addmm, without linear
        lin, n_lin = mm, n_mm
    bmm, n_bmm = med("aten::mm", bwd_tids)

    def mean(name: str, tids: set[int]) -> float | None:
        v = [o.dur for o in ops if o.name == name and o.tid in tids]
        return statistics.fmean(v) if len(v) >= 10 else None

    return OpSpeed(
        main_s=out[0],
        backward_s=out[2],
        empty_main_s=out[1],
        empty_backward_s=out[3],
        linear_main_s=lin if n_lin >= 10 else None,
        mm_backward_s=bmm if n_bmm >= 10 else None,
        gemm_mean_main_s=mean(gemm_op, main),
        mm_mean_backward_s=mean("aten::mm", bwd_tids),
    )


def profiler_record(tr: Trace) -> list[str]:
    """What the profiler recorded beside the timeline (``RuntimeSpec.profiler_record``): ``shapes``
    where any op has ``Input Dims``, ``stack`` where the trace has ``python_function`` ranges,
    ``memory`` where it has ``[memory]`` events."""
    out = ["shapes"] if any(o.input_dims for o in tr.cpu_ops.values()) else []
    if tr.python_events:
        out.append("stack")
    if tr.memory_events:
        out.append("memory")
    return out


def hf_layers(ops: list[CpuOp]) -> bool:
    """Whether ``ops`` come from Hugging Face ``transformers``' modelling code: the tanh GELU written
    out (``aten::tanh`` and ``aten::pow``, no ``aten::gelu``: GPT-2's ``gelu_new``) or RMSNorm written
    out (``aten::rsqrt``, no fused ``rms_norm``: the Llama family's) beside the rotary embedding's
    ``aten::cos`` of every forward pass (``transformers``' rotary module computes cos / sin per pass; a
    user's Llama with a written-out RMSNorm and precomputed tables is not its code)."""
    names = {o.name for o in ops}
    gelu_tanh = {"aten::tanh", "aten::pow"} <= names and "aten::gelu" not in names
    rms = (
        "aten::rsqrt" in names
        and "aten::cos" in names
        and not names & {"aten::rms_norm", "aten::_fused_rms_norm"}
    )
    return gelu_tanh or rms


def graph_launches(tr: Trace) -> list[RuntimeCall]:
    """A trace's CUDA-graph launch calls (``cudaGraphLaunch``), in time order."""
    return sorted((c for c in tr.host_calls if "GraphLaunch" in c.name), key=lambda c: c.ts)


def compiled_decode_graphs(ans: list[Analysis]) -> bool:
    """Whether the traces' decode passes are CUDA-graph replays of torch.compile's fused kernels
    beside a prefill launched op by op (transformers' static-cache ``generate()``): graph
    replays that run inductor's kernels, and attention kernels launched outside any graph."""
    for a in ans:
        launches = {c.correlation for c in graph_launches(a.trace)}
        if not launches:
            continue
        replayed = [k for k in a.kernels if k.ev.correlation in launches]
        eager_attn = any(k.cls == "attention" and k.ev.correlation not in launches for k in a.kernels)
        if eager_attn and any(k.ev.name.startswith(INDUCTOR_FUSED) for k in replayed):
            return True
    return False


GRAPH_CAPTURE_CALLS = ("cudaStreamBeginCapture", "cudaGraphInstantiate")
"""Runtime calls of a CUDA graph's capture (``cudaGraphInstantiateWithFlags`` included): a step that
makes them recorded a graph (torch.compile's ``reduce-overhead`` warming up or re-recording its
cudagraph tree), a one-off cost no steady-state step pays."""


def _calls_per_step(a: Analysis, names: tuple[str, ...]) -> list[int]:
    """How many host runtime calls named ``names*`` each of the trace's steps made, in step order; a step
    without a CPU range counts 0, except a trace of one unannotated step (the whole trace is that step),
    which counts all of them."""
    ts = sorted(c.ts for c in a.trace.host_calls if c.name.startswith(names))
    if len(a.steps) == 1 and a.steps[0].cpu_start is None:
        return [len(ts)]
    return [
        bisect.bisect_right(ts, st.cpu_end) - bisect.bisect_left(ts, st.cpu_start)
        if st.cpu_start is not None and st.cpu_end is not None
        else 0
        for st in a.steps
    ]


def graph_capture_steps(a: Analysis) -> list[int]:
    """The indices of the trace's steps whose host captured or instantiated a CUDA graph
    (:data:`GRAPH_CAPTURE_CALLS`), in order; empty where no step has a CPU range."""
    return [i for i, n in enumerate(_calls_per_step(a, GRAPH_CAPTURE_CALLS)) if n]


GRAPH_INSTANTIATE = "cudaGraphInstantiate"
"""The runtime call that ends a graph's recording (``cudaGraphInstantiateWithFlags`` included): one per
graph recorded."""


def graph_records_per_step(a: Analysis) -> list[int]:
    """The CUDA graphs each of the trace's steps recorded (its host's :data:`GRAPH_INSTANTIATE` calls),
    in step order; a step without a CPU range counts 0."""
    return _calls_per_step(a, (GRAPH_INSTANTIATE,))


def generate_loop(ops: list[CpuOp]) -> bool:
    """Whether ``ops`` come from transformers' ``generate()``: its stopping criteria test the new
    tokens against the end-of-sequence ids with ``aten::isin`` every step, and it folds their verdict
    into its unfinished sequences with ``unfinished & ~done`` (``aten::bitwise_not``, ``aten::__and__``)
    every step, with or without an end-of-sequence id (a config without one, e.g. a Qwen2's)."""
    names = {o.name for o in ops}
    return "aten::isin" in names or {"aten::bitwise_not", "aten::__and__"} <= names


def _norm_marks(win: list[CpuOp]) -> tuple[list[CpuOp], str]:
    """The ops that mark a window's norms (outermost), and the autograd node name part of their
    backward: the fused norms, or ``aten::rsqrt`` where RMSNorm is written out of elementwise ops."""
    norms = _outermost([o for o in win if o.name in FWD_NORMS])
    if norms:
        return norms, "NormBackward"
    return _outermost([o for o in win if o.name == "aten::rsqrt"]), "RsqrtBackward"


# ---------------------------------------------------------------------------------------------
# a whole training step's host timeline, and whether the loop synchronizes

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize")
"""Runtime calls by which the host waits for the GPU (``loss.item()``, ``.cpu()``,
``torch.cuda.synchronize()``); DDP's internal ``cudaEventSynchronize`` calls are not step syncs."""
_OPT_STEP = "Optimizer.step#"


@dataclass(frozen=True)
class StepHost(_Row):
    """The host's timeline of one profiled eager training step (seconds, CPU timestamps).

    In order: ``pre`` (step start to the first forward norm: zero-grad leftovers, the embedding),
    ``layers`` forward layers of ``fwd_layer_s`` each, ``head`` (the final norm to the first autograd
    node: LM head, loss, the ``backward()`` call), ``bhead`` (first autograd node to the first norm
    backward: loss and LM head backward, final norm), ``layers`` backward layers of ``bwd_layer_s``,
    ``tail`` (the last norm backward to ``optimizer.step()``: embedding backward, gradient
    accumulation), ``optimizer`` (the ``Optimizer.step`` range) and ``post`` (after it to the step's
    end: ``zero_grad``, the loop, and any wait for the GPU). ``probe_*``: the step's median
    ``aten::t`` on the main and backward threads (0 where too rare to time), ``empty_*``: its median
    :data:`ALT_PROBE_OP`; ``impl``: whose modelling code (``reference``, or ``huggingface`` by its
    written-out ops, :func:`hf_layers`)."""

    trace: str
    step: str
    strategy: str
    """The run's distributed wrapper as told (``single``, ``ddp``, ``fsdp``, ``tp``): a trace does not
    name it."""
    act: str
    layers: int
    synchronized: bool
    """The step contains a host wait for the GPU (:data:`SYNC_CALLS`)."""
    step_s: float
    gpu_step_s: float
    pre_s: float
    fwd_layer_s: float
    head_s: float
    bhead_s: float
    bwd_layer_s: float
    tail_s: float
    optimizer_s: float
    post_s: float
    probe_main_s: float
    probe_bwd_s: float
    hooks_s: float = 0.0
    """Of ``bhead`` + ``tail``: PyTorch DDP's reducer work (gradient hooks, bucket all-reduce calls, copies
    back from the buckets), which simcore prices per gradient and bucket (:class:`DdpHooks`)."""
    empty_main_s: float = 0.0
    empty_bwd_s: float = 0.0
    linear_main_s: float = 0.0
    """The step's median GEMM op on the main thread (:data:`GEMM_PROBE_OP`; 0: too rare, or not
    recorded), a candidate probe of a host-bound step."""
    mm_bwd_s: float = 0.0
    """The step's median ``aten::mm`` on the backward thread (as ``linear_main_s``)."""
    gemm_mean_main_s: float = 0.0
    """The step's mean GEMM op on the main thread (every call; 0: too rare), a training step's pace
    (``fit_host.train_gemm_ratios``)."""
    mm_mean_bwd_s: float = 0.0
    """The step's mean ``aten::mm`` on the backward thread (as ``gemm_mean_main_s``)."""
    impl: str = "reference"
    optimizer: str = "adamw_fused"
    """The optimizer and how it ran (``adamw_fused``, ``adamw_foreach``, ``sgd_foreach``, ...: the
    ``Optimizer.step#<name>.step`` range's class and whether it calls a fused update op)."""
    profiler: str = ""
    """The profiler's options beyond shapes (:func:`profiler_key`: ``""``, ``stack``, ``memory``,
    ``stack_memory``, ``noshapes_stack_memory``, ...)."""
    weights: str = "fp32"
    """The weights' dtype: ``fp32`` (PyTorch AMP: autocast casts them for each op) or ``bf16`` (no
    autocast), by :func:`classify.fp32_weights`."""


STEP_HOST_COLUMNS = columns(StepHost)


FUSED_OPTIMIZER_OPS = ("aten::_fused_adam", "aten::_fused_sgd")
"""Name prefixes of a fused optimizer's update op (``aten::_fused_adamw_``, ``aten::_fused_sgd_``)."""


def optimizer_of(name: str, ops: list[CpuOp]) -> str:
    """``<optimizer>_<fused|foreach>`` of an ``Optimizer.step#AdamW.step`` range and the ops in it."""
    cls = name.split("#", 1)[-1].split(".", 1)[0].lower()
    opt = "sgd" if cls == "sgd" else "adamw"
    fused = any(o.name.startswith(FUSED_OPTIMIZER_OPS) for o in ops)
    return f"{opt}_{'fused' if fused else 'foreach'}"


def _ddp_hook_time(ops: list[CpuOp]) -> float:
    """Seconds of DDP's reducer work among ``ops``: each gradient's hook (an ``AccumulateGrad`` node
    beyond its plain accumulation, the bucket all-reduce calls included, which run inside it) and the
    copies back from the buckets."""
    dur: dict[str, float] = {}
    for o in ops:
        if o.name in (_ACC_NODE, _ACC_INNER, _COPY_BACK, _BUCKET_CALL):
            dur[o.name] = dur.get(o.name, 0.0) + o.dur
    if not dur.get(_COPY_BACK) and not dur.get(_BUCKET_CALL):
        return 0.0  # no DDP reducer in this trace
    # a bucket's all-reduce call runs inside the hook of its last gradient: within the node's extra
    hooks = max(dur.get(_ACC_NODE, 0.0) - dur.get(_ACC_INNER, 0.0), 0.0)
    return hooks + dur.get(_COPY_BACK, 0.0)


QUEUED_LAG_S = 1e-3
"""Launch-to-start delay of a step's first kernels above which they waited behind earlier GPU work
(a synchronized step's first kernels start tens of microseconds after their launch)."""


def unannotated_step(a: Analysis) -> bool:
    """Whether the trace is one step without ``ProfilerStep`` marks (the whole trace taken as a step)."""
    return len(a.steps) == 1 and a.steps[0].cpu_start is None and bool(a.trace.cpu_ops)


def cpu_range(a: Analysis) -> tuple[float, float]:
    """(first op's start, last op's end) of a trace's CPU ops, seconds (a one-step trace's host range); of
    its CUDA runtime calls where it has no CPU ops (CUDA-graph replays profiled without
    ``record_function``). The trace has one or the other."""
    ops = list(a.trace.cpu_ops.values()) or a.trace.host_calls
    return min(o.ts for o in ops), max(o.ts + o.dur for o in ops)


def start_queue_s(a: Analysis, last: bool = False) -> float:
    """Seconds the trace's first kernels (``last``: its last ones) waited between their launch and
    their start, behind GPU work launched before them: the median over eight kernels (0 without
    launch times). The host's lead over the GPU at the trace's start (end)."""
    ks = sorted((k for k in a.kernels if k.launch_ts is not None), key=lambda k: k.ev.ts)
    ks = ks[-8:] if last else ks[:8]
    if len(ks) < 3:
        return 0.0
    return float(statistics.median(k.ev.ts - k.launch_ts for k in ks))  # type: ignore[operator]


def queued_at_start(a: Analysis) -> bool:
    """Whether the trace's first kernels waited behind earlier GPU work (:func:`start_queue_s` above
    :data:`QUEUED_LAG_S`): a loop that runs ahead of the GPU, profiled mid-run."""
    return start_queue_s(a) > QUEUED_LAG_S


def step_synchronized(a: Analysis) -> bool | None:
    """Whether the loop waits for the GPU in any annotated step (``False``: no step does, the host may
    run ahead across steps; ``None``: no annotated step with a CPU range). A trace without step
    annotations (one profiled step, the most common thing users send) is ``True`` where the host waits
    in it, else ``False`` where its first kernels waited behind earlier GPU work (:func:`queued_at_start`:
    the loop ran ahead into it), else ``None``."""
    steps = [s for s in a.steps if s.cpu_start is not None and s.cpu_end is not None]
    if not steps:
        if not unannotated_step(a):
            return None
        lo, hi = cpu_range(a)
        if any(lo <= c.ts <= hi for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS)):
            return True
        return False if queued_at_start(a) else None
    calls = [c for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS)]
    return any(s.cpu_start <= c.ts <= s.cpu_end for s in steps for c in calls)  # type: ignore[operator]


@dataclass(frozen=True)
class _LayerMarks:
    """An eager training step's layer boundaries: its forward norms' starts (two a layer and the final
    norm), its norm backwards' starts (as many), the first autograd node and every node."""

    fwd: list[float]
    bwd: list[float]
    first_bwd: float
    bwd_nodes: list[CpuOp]
    main_tid: int
    bwd_tid: int


def _layer_marks(win: list[CpuOp]) -> _LayerMarks | None:
    """:class:`_LayerMarks` of one step's CPU ops, or ``None`` where its norms and norm backwards do not
    pair up (2 x layers + 1 each) or it recomputes (forward norms or attention after the backward began)."""
    bwd_nodes = [o for o in win if o.name.startswith(_BWD_NORM)]
    if not bwd_nodes:
        return None
    first_bwd = bwd_nodes[0].ts
    norms, node = _norm_marks(win)
    fwd = [o for o in norms if o.ts < first_bwd]
    bwd = [o for o in bwd_nodes if node in o.name]
    n = len(fwd)
    if n < 3 or n % 2 == 0 or len(bwd) != n:
        return None
    marks = {o.name for o in norms}
    if any(o.ts > first_bwd and (o.name in marks or o.name in _ATTN_FWD) for o in win):
        return None
    return _LayerMarks([o.ts for o in fwd], [o.ts for o in bwd], first_bwd, bwd_nodes, fwd[0].tid, bwd[0].tid)


def _step_ops(a: Analysis) -> list[list[CpuOp]]:
    """Each annotated step's CPU ops in time order (:func:`_step_windows`); a trace of one profiled step
    without annotations (what users send): the whole trace."""
    windows = [w for _st, _lo, _hi, w in _step_windows(a)]
    if not windows and unannotated_step(a):
        windows = [sorted(a.trace.cpu_ops.values(), key=lambda o: o.ts)]
    return windows


def gemm_ops_per_step(a: Analysis) -> int | None:
    """How many GEMM ops (:data:`GEMM_PROBE_OP`, or :data:`GEMM_PROBE_ALT_OP` where more) a training step's
    forward issues outside the backward's autograd nodes (the median over the steps; ``None``: no step),
    which tells a code's projections apart (a Llama layer's seven, a fused q / k / v's fewer)."""
    counts = []
    for win in _step_ops(a):
        bwd = {o.tid for o in win if o.name.startswith(_BWD_NORM)}
        # autocast records each call twice, its wrapper around the op: count the outer
        lin, alt = (
            len(_outermost(sorted((o for o in win if o.name == n and o.tid not in bwd), key=lambda o: (o.ts, -o.dur))))
            for n in (GEMM_PROBE_OP, GEMM_PROBE_ALT_OP)
        )
        counts.append(max(lin, alt))
    return int(statistics.median(counts)) if counts else None


def _top_ops(win: list[CpuOp], tid: int, lo: float, hi: float) -> list[CpuOp]:
    """Ops of thread ``tid`` starting in ``[lo, hi)`` not nested in another."""
    return _outermost(
        sorted((o for o in win if o.tid == tid and lo <= o.ts < hi), key=lambda o: (o.ts, -o.dur))
    )


def layer_op_counts(a: Analysis, weights: HostOps | None = None) -> tuple[float, float] | None:
    """(The top-level ops a forward layer issues on the main thread, the top-level autograd nodes and ops a
    backward layer runs on the backward thread) of a trace's eager training steps, medians over its steps (an
    unannotated trace: its one step); with ``weights``, their host weight in ``aten::t`` units instead
    (:meth:`HostOps.layer_op_weight`; ``None`` where the trace records no stream launches). ``None`` where no
    step's layers can be found (:func:`_layer_marks`). The code's structure, not its timing: eager host time
    per layer goes with it (``RuntimeSpec.layer_ops``)."""
    if weights is not None and not any(c.name.startswith(LAUNCH_CALLS) for c in a.trace.host_calls):
        return None
    fw: list[float] = []
    bw: list[float] = []
    for kind, layers, _span, rows in _layer_groups(a):
        if kind in ("fwd", "bwd"):
            n = weights.layer_op_weight((o.name, o.launches) for o in rows) if weights is not None else len(rows)
            (fw if kind == "fwd" else bw).append(n / layers)
    if not fw:
        return None
    return round(float(statistics.median(fw)), 2), round(float(statistics.median(bw)), 2)


def training_step_hosts(a: Analysis, strategy: str = "single") -> list[StepHost]:
    """The host timeline of every annotated eager training step of a trace whose norms, norm
    backwards, ``Optimizer.step`` range and ``aten::t`` probes can all be found (steps with
    recomputation are left out, as in :func:`layer_host_times`); ``strategy`` labels the rows."""
    opt_ranges = sorted(
        (x for x in a.trace.annotations if x.name.startswith(_OPT_STEP) and not x.gpu), key=lambda x: x.ts
    )
    calls = [c for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS)]
    key = profiler_key(profiler_record(a.trace))
    weights = "fp32" if fp32_weights([a]) else "bf16"
    out: list[StepHost] = []
    for st, lo, hi, win in _step_windows(a):
        lm = _layer_marks(win)
        if lm is None:
            continue
        fwd, bwd, first_bwd, bwd_nodes = lm.fwd, lm.bwd, lm.first_bwd, lm.bwd_nodes
        n = len(fwd)
        opt = next((x for x in opt_ranges if bwd[-1] <= x.ts <= hi), None)
        sp = _probe_medians(win, {o.tid for o in bwd_nodes})
        if opt is None or not (sp.main_s or sp.empty_main_s) or not (sp.backward_s or sp.empty_backward_s):
            continue
        layers = (n - 1) // 2
        out.append(
            StepHost(
                trace=a.trace.path,
                step=st.name,
                strategy=strategy,
                act=_act_of(win),
                layers=layers,
                synchronized=any(lo <= c.ts <= hi for c in calls),
                step_s=hi - lo,
                gpu_step_s=st.time_s,
                pre_s=fwd[0] - lo,
                fwd_layer_s=(fwd[-1] - fwd[0]) / layers,
                head_s=first_bwd - fwd[-1],
                bhead_s=bwd[0] - first_bwd,
                bwd_layer_s=(bwd[-1] - bwd[0]) / layers,
                tail_s=opt.ts - bwd[-1],
                optimizer_s=opt.dur,
                post_s=max(hi - opt.ts - opt.dur, 0.0),
                probe_main_s=sp.main_s or 0.0,
                probe_bwd_s=sp.backward_s or 0.0,
                hooks_s=_ddp_hook_time(
                    [o for o in win if first_bwd <= o.ts < bwd[0] or bwd[-1] <= o.ts < opt.ts]
                ),
                empty_main_s=sp.empty_main_s or 0.0,
                empty_bwd_s=sp.empty_backward_s or 0.0,
                linear_main_s=sp.linear_main_s or 0.0,
                mm_bwd_s=sp.mm_backward_s or 0.0,
                gemm_mean_main_s=sp.gemm_mean_main_s or 0.0,
                mm_mean_bwd_s=sp.mm_mean_backward_s or 0.0,
                impl="huggingface" if hf_layers(win) else "reference",
                optimizer=optimizer_of(opt.name, [o for o in win if opt.ts <= o.ts <= opt.ts + opt.dur]),
                profiler=key,
                weights=weights,
            )
        )
    return out


@dataclass(frozen=True)
class DecodeHost(_Row):
    """The host's time of one eager decode step (one token per sequence) in a profiled inference
    trace: ``pass_s`` from its token-embedding lookup to the next forward pass's (or the step's end),
    ``layer_s`` per layer (the spacing of its norms), the median ``aten::t`` of the step (0 where too
    rare to time) and its median :data:`ALT_PROBE_OP`, and whose modelling code (``impl``)."""

    trace: str
    step: str
    act: str
    layers: int
    pass_s: float
    layer_s: float
    probe_main_s: float
    empty_main_s: float = 0.0
    linear_main_s: float = 0.0
    """The step's median :data:`GEMM_PROBE_OP` (0: too rare, or not recorded)."""
    impl: str = "reference"
    loop: str = "manual"
    """``generate``: transformers' ``generate()`` (its stopping criteria's ``aten::isin``), else a
    hand-written loop of forward passes."""
    seq: int = 1
    """Tokens per sequence of the pass: 1 for a decode step, the prompt for a prefill."""


DECODE_HOST_COLUMNS = columns(DecodeHost)


def _forward_passes(win: list[CpuOp], prefill: bool) -> Iterator[tuple[list[CpuOp], list[float], int]]:
    """The forward passes of one no-grad step's ops: each pass's norms (two a layer and the final one),
    every pass's start (its token-embedding lookups) and its tokens a sequence; decode passes only unless
    ``prefill``."""
    starts = sorted(o.ts for o in win if o.name == "aten::embedding")
    if not starts:
        return
    norms, _node = _norm_marks(win)
    for p in _split_passes(norms, starts):
        seq = _tokens_of(p[0].input_dims)
        if len(p) < 5 or len(p) % 2 == 0 or seq is None or (seq != 1 and not prefill):
            continue
        yield p, starts, seq


def _pass_span(norms: list[CpuOp], starts: list[float], hi: float) -> tuple[float, float]:
    """(start, end) of the forward pass whose norms are ``norms``: its token-embedding lookup, and the next
    pass's (``hi``, the step's end, after the last pass)."""
    begin = max((t for t in starts if t <= norms[0].ts), default=norms[0].ts)
    end = min((t for t in starts if t > norms[-1].ts), default=hi)
    return begin, end


class LayerOp(NamedTuple):
    """A top-level op of a layer: its name, host time (seconds) and the stream launches
    (:data:`LAUNCH_CALLS`) it makes."""

    name: str
    dur: float
    launches: int


def _layer_op_rows(win: list[CpuOp], tid: int, lo: float, hi: float, calls: dict[int, list[float]]) -> list[LayerOp]:
    """The top-level ops of thread ``tid`` starting in ``[lo, hi)`` (:func:`_top_ops`) with their launches."""
    ts = calls.get(tid, [])
    return [
        LayerOp(o.name, o.dur, bisect.bisect_left(ts, o.ts + o.dur) - bisect.bisect_left(ts, o.ts))
        for o in _top_ops(win, tid, lo, hi)
    ]


def _layer_groups(a: Analysis) -> Iterator[tuple[str, int, float, list[LayerOp]]]:
    """Each step's layers of a trace as (``fwd`` | ``bwd`` | ``decode``, layers, seconds from the first layer's
    start to the last's end, their top-level ops): an eager training step's forward layers on the main thread
    and backward layers on the autograd thread (:func:`_layer_marks`), a no-grad trace's decode passes."""
    calls = _launches(a.trace)
    for win in _step_ops(a):
        lm = _layer_marks(win)
        if lm is not None:
            layers = (len(lm.fwd) - 1) // 2
            yield "fwd", layers, lm.fwd[-1] - lm.fwd[0], _layer_op_rows(win, lm.main_tid, lm.fwd[0], lm.fwd[-1], calls)
            yield "bwd", layers, lm.bwd[-1] - lm.bwd[0], _layer_op_rows(win, lm.bwd_tid, lm.bwd[0], lm.bwd[-1], calls)
            continue
        if any(o.name.startswith(_BWD_NORM) for o in win):
            continue
        for p, _starts, _seq in _forward_passes(win, prefill=False):
            layers = (len(p) - 1) // 2
            yield "decode", layers, p[-1].ts - p[0].ts, _layer_op_rows(win, p[0].tid, p[0].ts, p[-1].ts, calls)


def fit_layer_op_weights(analyses: list[Analysis], min_calls: int = 8) -> dict[str, float]:
    """Each layer op's host per call in probe units (:attr:`HostOps.layer_op_weights`; an autograd node by its node
    name, ``MmBackward0``), from the layers of profiled eager traces (:func:`_layer_groups`). Within each trace
    and thread an op's host is its own time plus the thread's mean gap between the layers' top-level ops (the
    Python between them, one per op), over the thread's median ``aten::t`` (:func:`op_speed`: the CPU's pace, the
    main thread's for forward and decode layers, the autograd thread's for backward ones); a name's weight is the
    median over its calls. Names called fewer than ``min_calls`` times are left out; ``class|<launches>`` and
    ``node|<launches>`` (launches capped at 3) are the median weights of the kept ops and autograd nodes that made
    that many stream launches (what an op or node not in the table weighs). Rounded to 0.1."""
    units: dict[str, list[float]] = {}
    by_class: dict[str, set[str]] = {}
    for a in analyses:
        sp = op_speed(a)
        per: dict[str, tuple[float, list[LayerOp]]] = {}
        for kind, _layers, span, rows in _layer_groups(a):
            t, r = per.get(kind, (0.0, []))
            per[kind] = (t + span, r + rows)
        for kind, (span, rows) in per.items():
            probe = (sp.backward_s if kind == "bwd" else sp.main_s) if sp else None
            if not rows or not probe:
                continue
            gap = max(span - sum(o.dur for o in rows), 0.0) / len(rows)
            for o in rows:
                key = layer_op_key(o.name)
                units.setdefault(key, []).append((o.dur + gap) / probe)
                by_class.setdefault(layer_op_class(o.name, o.launches), set()).add(key)
    if not units:
        raise ValueError("no layers on a thread that calls aten::t")
    out = {k: round(statistics.median(v), 1) for k, v in sorted(units.items()) if len(v) >= min_calls}
    for cls, keys in sorted(by_class.items()):
        ws = [out[k] for k in keys if k in out]
        if ws:
            out[cls] = round(statistics.median(ws), 1)
    return out


def decode_layer_op_count(a: Analysis) -> float | None:
    """Top-level ops a decode pass's layer issues on its thread (between its norms), the median over a
    no-grad trace's decode passes; ``None`` without any. The code's structure, as
    :func:`layer_op_counts` for training (``RuntimeSpec.layer_ops``)."""
    counts = [len(rows) / layers for kind, layers, _span, rows in _layer_groups(a) if kind == "decode"]
    return float(statistics.median(counts)) if counts else None


LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync")
"""Runtime calls by which an op puts work on a stream (kernels, memsets, copies)."""


class LoopOp(NamedTuple):
    """A top-level op a decode pass issues outside its layers: its name, host time (seconds) and the
    stream launches (:data:`LAUNCH_CALLS`) it makes beyond its first."""

    name: str
    dur: float
    extra: int


def _launches(tr: Trace) -> dict[int, list[float]]:
    """Each thread's stream-launch calls' start times, sorted."""
    out: dict[int, list[float]] = {}
    for c in tr.host_calls:
        if c.name.startswith(LAUNCH_CALLS):
            out.setdefault(c.tid, []).append(c.ts)
    for ts in out.values():
        ts.sort()
    return out


def _loop_op(o: CpuOp, calls: list[float]) -> LoopOp:
    n = bisect.bisect_left(calls, o.ts + o.dur) - bisect.bisect_left(calls, o.ts)
    return LoopOp(o.name, o.dur, max(n - 1, 0))


def _empty_pace(ops: list[CpuOp], tid: int) -> float:
    """The median ``aten::empty`` of thread ``tid`` among ``ops`` (seconds; 0 without one)."""
    v = [o.dur for o in ops if o.tid == tid and o.name == "aten::empty"]
    return float(statistics.median(v)) if v else 0.0


def loop_passes(a: Analysis) -> list[tuple[float, list[LoopOp]]]:
    """Every decode pass of a no-grad trace: its thread's pace (the step's median ``aten::empty``,
    seconds) and the top-level ops it issues outside its layers (the token embedding, the final norm,
    the LM head, the loop's sampling and bookkeeping: ``generate()``'s logits processors, stopping
    criteria and cache updates). In a trace of compiled decode graphs, the loop's own ops between
    consecutive graph launches, outside the compiled call (:data:`COMPILED_REGION`,
    :data:`DYNAMO_LOOKUP`), at the pace of the launching thread's whole trace."""
    launches = _launches(a.trace)
    graphs = graph_launches(a.trace)
    out: list[tuple[float, list[LoopOp]]] = []
    if len(graphs) >= 2:
        tid = graphs[0].tid
        ts = [c.ts for c in graphs if c.tid == tid]
        calls = launches.get(tid, [])
        ops = sorted((o for o in a.trace.cpu_ops.values() if o.tid == tid), key=lambda o: o.ts)
        pace = _empty_pace(ops, tid)
        for lo, hi in zip(ts, ts[1:], strict=False):
            top = _top_ops(ops, tid, lo, hi)
            out.append(
                (pace, [_loop_op(o, calls) for o in top if not o.name.startswith((COMPILED_REGION, DYNAMO_LOOKUP))])
            )
        return out
    for win in _step_ops(a):
        if not win or any(o.name.startswith(_BWD_NORM) for o in win):
            continue
        hi = max(o.ts + o.dur for o in win)
        paces: dict[int, float] = {}
        for p, starts, _seq in _forward_passes(win, prefill=False):
            begin, end = _pass_span(p, starts, hi)
            tid = p[0].tid
            calls = launches.get(tid, [])
            top = [o for lo, up in ((begin, p[0].ts), (p[-1].ts, end)) for o in _top_ops(win, tid, lo, up)]
            if tid not in paces:
                paces[tid] = _empty_pace(win, tid)
            out.append((paces[tid], [_loop_op(o, calls) for o in top]))
    return out


def decode_pass_counts(a: Analysis) -> tuple[float, float] | None:
    """(Top-level ops a decode pass issues on its thread outside its layers, the stream launches those
    ops make beyond one each), medians over a no-grad trace's decode passes (:func:`loop_passes`: in a
    trace of compiled decode graphs, the loop's between the graphs' launches); ``None`` without any.
    An op such as ``aten::sort``, ``aten::topk`` or ``aten::multinomial`` launches 15-20 kernels and
    memsets from one call. The code's structure, as :func:`decode_layer_op_count` is its layers'
    (``RuntimeSpec.pass_ops`` weighs them, :func:`decode_pass_op_count`)."""
    per_pass = loop_passes(a)
    if not per_pass:
        return None
    return (
        float(statistics.median(len(ops) for _, ops in per_pass)),
        float(statistics.median(sum(o.extra for o in ops) for _, ops in per_pass)),
    )


def decode_pass_op_count(a: Analysis, weights: HostOps) -> float | None:
    """The host weight of the ops a decode pass issues outside its layers, in typical ops
    (:meth:`HostOps.pass_op_weight`), the median over a no-grad trace's decode passes (:func:`loop_passes`);
    ``None`` without any (``RuntimeSpec.pass_ops``)."""
    per_pass = loop_passes(a)
    if not per_pass:
        return None
    return float(statistics.median(weights.pass_op_weight((o.name, o.extra) for o in ops) for _, ops in per_pass))


def fit_loop_op_weights(analyses: list[Analysis], min_calls: int = 8) -> dict[str, float]:
    """Each op name's host per call in typical ops (:attr:`HostOps.loop_op_weights`), from the decode loops
    of profiled eager traces (:func:`loop_passes`): the median over its calls of its host time over its
    pass's pace (the step's median ``aten::empty``), divided by that median over every call that
    launches at most one kernel (a typical op); names called fewer than ``min_calls`` times are left
    out (priced by their launches, :meth:`HostOps.pass_op_weight`). Rounded to 0.01."""
    units: dict[str, list[float]] = {}
    single: list[float] = []
    for a in analyses:
        for pace, ops in loop_passes(a):
            if pace <= 0:
                continue
            for o in ops:
                units.setdefault(o.name, []).append(o.dur / pace)
                if o.extra == 0:
                    single.append(o.dur / pace)
    if not single:
        raise ValueError("no decode pass with an aten::empty pace")
    typical = statistics.median(single)
    return {
        name: round(statistics.median(v) / typical, 2) for name, v in sorted(units.items()) if len(v) >= min_calls
    }


def fit_extra_launch_ops(analyses: list[Analysis]) -> tuple[float, float, float]:
    """(The host of a stream launch beyond an op's first, in top-level ops; the RMS relative error of a
    pass's host outside its layers with it; without it) fitted on profiled eager decode loops
    (:attr:`HostOps.extra_launch_ops`). Each trace's median host outside the layers, over its empty-op probe
    (the host's pace), is its code's cost per op times ``ops + w * extra launches``
    (:func:`decode_pass_counts`); the codes (implementation, loop, activation) each have their own cost
    per op. ``w`` minimises the squared log error over a grid of 0 to 1.5 in steps of 0.01; the fit needs
    traces of one code with different launch counts (e.g. each sampler beside greedy)."""
    import numpy as np

    codes: list[str] = []
    host: list[float] = []
    counts: list[tuple[float, float]] = []
    for a in analyses:
        rows = [r for r in decode_step_hosts(a) if r.empty_main_s > 0]
        c = decode_pass_counts(a)
        if not rows or c is None:
            continue
        outside = statistics.median((r.pass_s - r.layers * r.layer_s) / r.empty_main_s for r in rows)
        codes.append(f"{rows[0].impl}/{rows[0].loop}/{rows[0].act}")
        host.append(outside)
        counts.append(c)
    if len({*codes}) == len(codes):
        raise ValueError("fitting the extra launch weight needs two or more traces of one code")
    y = np.log(np.asarray(host, dtype=float))
    groups = [np.asarray([k == code for k in codes]) for code in sorted({*codes})]

    def residual(w: float) -> np.ndarray:
        r: np.ndarray = y - np.log(np.asarray([o + w * x for o, x in counts], dtype=float))
        for g in groups:
            r[g] -= r[g].mean()
        return r

    grid = np.round(np.arange(0.0, 1.5001, 0.01), 2)
    best = float(grid[int(np.argmin([float((residual(w) ** 2).sum()) for w in grid]))])

    def rms(w: float) -> float:
        return float(np.sqrt(np.mean((np.exp(-residual(w)) - 1.0) ** 2)))

    return best, rms(best), rms(0.0)


def decode_step_hosts(a: Analysis, prefill: bool = False) -> list[DecodeHost]:
    """Every decode forward pass of a profiled eager inference trace whose norms and ``aten::t``
    probes can be found (the input of ``fit_host``'s ``profiled_infer_decode_*`` in CPU-speed units);
    with ``prefill``, the prefill passes too (``seq`` > 1)."""
    out: list[DecodeHost] = []
    for st, _lo, hi, win in _step_windows(a):
        if any(o.name.startswith(_BWD_NORM) for o in win):
            continue
        sp = _probe_medians(win, set())
        if not (sp.main_s or sp.empty_main_s):
            continue
        impl = "huggingface" if hf_layers(win) else "reference"
        loop = "generate" if generate_loop(win) else "manual"
        for p, starts, seq in _forward_passes(win, prefill):
            layers = (len(p) - 1) // 2
            begin, end = _pass_span(p, starts, hi)
            # each pass's own layers (generate() runs its prefill's experts grouped, its decode's batched)
            act = _act_of([o for o in win if begin <= o.ts < end])
            out.append(
                DecodeHost(
                    trace=a.trace.path,
                    step=st.name,
                    act=act,
                    layers=layers,
                    pass_s=end - begin,
                    layer_s=(p[-1].ts - p[0].ts) / layers,
                    probe_main_s=sp.main_s or 0.0,
                    empty_main_s=sp.empty_main_s or 0.0,
                    linear_main_s=sp.linear_main_s or 0.0,
                    impl=impl,
                    loop=loop,
                    seq=seq,
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# torch.compile'd steps: the host time of the compiled regions

_COMPILED_FWD = "CompiledFunction"
_COMPILED_BWD = "CompiledFunctionBackward"


COMPILED_PROBE_OP = "aten::transpose"
"""The per-op probe of a torch.compile trace, which has no ``aten::t``: inductor's generated code calls
``aten::transpose`` 8-16 times per layer and step on each thread. Its median in compiled regions tracks
their host time within ~5 % across layer counts and widths of one process ; it is not the
``aten::t`` of an eager step (0.3-0.5x of it, the ratio moving with the CPU)."""


@dataclass(frozen=True)
class CompiledStepHost(_Row):
    """One profiled torch.compile training step: the host seconds of its compiled forward region(s)
    (``CompiledFunction``, main thread), backward region(s) (``CompiledFunctionBackward``, autograd
    thread) and ``optimizer.step()``; the trace's :data:`COMPILED_PROBE_OP` median on each thread
    (``probe_*_s``), and the ``aten::t`` of an eager trace of the same process beside it
    (``eager_probe_*_s``, 0 where there is none)."""

    trace: str
    step: str
    step_s: float
    fwd_region_s: float
    bwd_region_s: float
    optimizer_s: float
    probe_main_s: float = 0.0
    probe_bwd_s: float = 0.0
    eager_probe_main_s: float = 0.0
    eager_probe_bwd_s: float = 0.0
    empty_main_s: float = 0.0
    """The step's median :data:`ALT_PROBE_OP` on the main thread (``transformers``' compiled code calls no
    :data:`COMPILED_PROBE_OP`), and on the compiled backward's thread (``empty_bwd_s``)."""
    empty_bwd_s: float = 0.0
    launch_main_s: float = 0.0
    """The step's median :data:`LAUNCH_PROBE_PREFIX` op (one generated kernel's launch) in its compiled forward
    regions' thread, and on the compiled backward's thread (``launch_bwd_s``); 0 where a thread launches fewer
    than :data:`MIN_LAUNCH_PROBES`."""
    launch_bwd_s: float = 0.0


COMPILED_COLUMNS = columns(CompiledStepHost)

LAUNCH_PROBE_PREFIX = "triton_"
"""The CPU op inductor's generated code records for each kernel it launches (named after the kernel:
``triton_poi_fused_...``, ``triton_per_...``, ``triton_red_...``): the launcher's own work, a fixed cost per
launch. A ``transformers`` compiled step calls no :data:`COMPILED_PROBE_OP` and its ``aten::empty`` are a few
allocations beside its launches; the launches' median is its CPU pace (``fit_host``'s
``profiled_hf_compiled_*`` entries). Across the held-apart compiled steps of the fit code
(the ``hf_cfit_train_*`` traces under ``traces/h200/``) the units of a step's host over it are off the fit's lines by 0.054 / 0.037 (rms of the log error; the forward regions / the rest
of the step but the optimizer) against 0.121 / 0.114 over ``aten::empty`` (docs/traces.md, host speed)."""

MIN_LAUNCH_PROBES = 10
"""Launch ops a thread needs for its :data:`LAUNCH_PROBE_PREFIX` median to count."""


def compiled_launch_speed(a: Analysis, window: tuple[float, float] | None = None) -> OpSpeed | None:
    """A torch.compile trace's kernel-launch pace (in ``window``, CPU timestamps, where given): the median
    :data:`LAUNCH_PROBE_PREFIX` op on the thread of its compiled forward regions (``main_s``) and on the compiled
    backward's thread (``backward_s``, ``None`` where it launches fewer than :data:`MIN_LAUNCH_PROBES`);
    ``None`` where the forward's thread does."""
    return _compiled_medians(a, lambda n: n.startswith(LAUNCH_PROBE_PREFIX), window, MIN_LAUNCH_PROBES)


def _compiled_medians(
    a: Analysis, probe: Callable[[str], bool], window: tuple[float, float] | None, min_calls: int
) -> OpSpeed | None:
    """The median duration of the CPU ops whose name ``probe`` accepts (in ``window``, CPU timestamps, where given)
    on the thread of a torch.compile trace's compiled forward regions and on its compiled backward's thread, each
    where it has at least ``min_calls`` of them (``None`` where the forward's thread has fewer)."""
    ops = list(a.trace.cpu_ops.values())
    fwd = {o.tid for o in ops if o.name == _COMPILED_FWD}
    bwd = {o.tid for o in ops if o.name == _COMPILED_BWD}
    lo, hi = window or (float("-inf"), float("inf"))
    probes = [o for o in ops if probe(o.name) and lo <= o.ts <= hi]
    main = [o.dur for o in probes if o.tid in fwd and o.tid not in bwd]
    back = [o.dur for o in probes if o.tid in bwd]
    if len(main) < min_calls:
        return None
    return OpSpeed(
        main_s=statistics.median(main), backward_s=statistics.median(back) if len(back) >= min_calls else None
    )


def compiled_op_speed(a: Analysis, window: tuple[float, float] | None = None) -> OpSpeed | None:
    """A torch.compile trace's CPU speed (in ``window``, CPU timestamps, where given): the median
    :data:`COMPILED_PROBE_OP` on its main thread (the one that runs the compiled forward) and on the
    autograd thread (compiled backward); ``None`` where no compiled region calls it."""
    return _compiled_medians(a, lambda n: n == COMPILED_PROBE_OP, window, 1)


def compiled_step_hosts(a: Analysis, eager: OpSpeed | None = None) -> list[CompiledStepHost]:
    """Every annotated step of a torch.compile trace with compiled forward and backward regions, with
    the step's own probes (``eager``: the probe of an eager trace of the same process, if any)."""
    opt_ranges = [x for x in a.trace.annotations if x.name.startswith(_OPT_STEP) and not x.gpu]
    out: list[CompiledStepHost] = []
    for st, lo, hi, win in _step_windows(a):
        fwd = sum(o.dur for o in win if o.name == _COMPILED_FWD)
        bwd = sum(o.dur for o in win if o.name == _COMPILED_BWD)
        if fwd <= 0 or bwd <= 0:
            continue
        opt = sum(x.dur for x in opt_ranges if lo <= x.ts <= hi)
        speed = compiled_op_speed(a, (lo, hi))
        alt = _probe_medians(win, {o.tid for o in win if o.name == _COMPILED_BWD})
        launch = compiled_launch_speed(a, (lo, hi))
        out.append(
            CompiledStepHost(
                a.trace.path,
                st.name,
                hi - lo,
                fwd,
                bwd,
                opt,
                float((speed.main_s if speed else None) or 0.0),
                float((speed.backward_s if speed else None) or 0.0),
                float((eager.main_s if eager else None) or 0.0),
                float((eager.backward_s if eager else None) or 0.0),
                float(alt.empty_main_s or 0.0),
                float(alt.empty_backward_s or 0.0),
                float((launch.main_s if launch else None) or 0.0),
                float((launch.backward_s if launch else None) or 0.0),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# CUDA-graph replays: kernels per replay, the device idle between them, the host's launch call


@dataclass(frozen=True)
class GraphReplays(_Row):
    """The replays of captured CUDA graphs in a trace (the kernels a ``cudaGraphLaunch`` call
    launched): medians per replay of the kernel count, the kernels' summed time, the span from the
    first kernel's start to the last one's end, the device idle between consecutive kernels
    (``(span - busy) / (kernels - 1)``), and the host duration of the launch call; the device idle
    between consecutive replays (``replay_gap_s``: the next replay's first kernel after this one's
    last, median over pairs, so the back-to-back ones); per annotated step with replays, the device
    idle at its ends (``step_exposed_s``: step start to its first kernel, plus its last kernel's end
    to the step's end: the loop, the profiler's step boundary, the first launch after a wait) and the
    host's waits for the GPU in it (``syncs_per_step``). Steps: 0 where the trace has no annotated
    step."""

    trace: str
    replays: int
    kernels_per_replay: float
    busy_per_replay_s: float
    span_per_replay_s: float
    gap_per_kernel_s: float
    graph_launch_s: float
    replay_gap_s: float = 0.0
    step_exposed_s: float = 0.0
    syncs_per_step: float = 0.0


GRAPH_COLUMNS = columns(GraphReplays)


def graph_replays(a: Analysis) -> GraphReplays | None:
    """The graph replays of a trace (``None`` when it launched no graph with at least two kernels)."""
    launches = {c.correlation: c for c in graph_launches(a.trace)}
    by: dict[int, list[tuple[float, float]]] = {}
    for k in a.trace.kernels():
        if k.correlation in launches:
            by.setdefault(k.correlation, []).append((k.ts, k.dur))
    reps = sorted((sorted(v) for v in by.values() if len(v) >= 2), key=lambda r: r[0][0])
    if not reps:
        return None
    busy = [sum(d for _, d in r) for r in reps]
    span = [max(t + d for t, d in r) - r[0][0] for r in reps]
    gaps = [(sp - b) / (len(r) - 1) for r, b, sp in zip(reps, busy, span, strict=True)]
    between = [nxt[0][0] - (r[0][0] + sp) for r, sp, nxt in zip(reps, span, reps[1:], strict=False)]
    syncs = [c.ts for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS)]
    exposed: list[float] = []
    waits: list[float] = []
    for st in a.steps:
        if st.cpu_start is None or st.cpu_end is None:
            continue
        lo, hi = st.cpu_start, st.cpu_end
        inside = [r for r in reps if lo <= r[0][0] <= hi]
        if not inside:
            continue
        last = max(t + d for r in inside for t, d in r)
        exposed.append((inside[0][0][0] - lo) + max(hi - last, 0.0))
        waits.append(float(sum(1 for t in syncs if lo <= t <= hi)))
    return GraphReplays(
        trace=a.trace.path,
        replays=len(reps),
        kernels_per_replay=float(statistics.median(len(r) for r in reps)),
        busy_per_replay_s=float(statistics.median(busy)),
        span_per_replay_s=float(statistics.median(span)),
        gap_per_kernel_s=float(statistics.median(gaps)),
        graph_launch_s=float(statistics.median(launches[c].dur for c in by)),
        replay_gap_s=float(statistics.median(between)) if between else 0.0,
        step_exposed_s=float(statistics.median(exposed)) if exposed else 0.0,
        syncs_per_step=float(statistics.median(waits)) if waits else 0.0,
    )


@dataclass(frozen=True)
class CompiledDecodeCalls(_Row):
    """The compiled calls of a trace's decode passes replayed from CUDA graphs (transformers'
    static-cache ``generate()``): each pass calls the compiled forward, whose host is
    dynamo's cache lookup (the guards) and the compiled region (the inputs' copies into the graph's
    buffers, the graph's launch). Medians over the trace's calls that launch a graph (seconds)."""

    trace: str
    calls: int
    kernels_per_replay: float
    call_s: float
    """Median ``TorchDynamo Cache Lookup`` plus median ``Torch-Compiled Region`` seconds."""
    linear_main_s: float
    """The trace's :data:`GEMM_PROBE_OP` pace (windowed, :data:`PROBE_WINDOW`): its eager prefill's."""
    empty_main_s: float
    act: str = ""
    """``swiglu`` or ``gelu`` (from the trace's activation ops)."""
    prefill_layer_s: float = 0.0
    """The eager prefill's host per layer (its norms' spacing), the median over the profiled steps (0:
    no prefill pass found)."""
    lead_s: float = 0.0
    """From the end of a decode step's wait for the GPU (:data:`SYNC_CALLS`, ``generate()``'s check of its
    stopping criteria) to the next graph's first kernel (the launch call included), the median over the
    decode steps (0: no step waits): what the GPU idles each step when the graph outlasts the host."""
    wait_s: float = 0.0
    """Those waits' median length: where it exceeds ``lead_s`` the decode is GPU-bound (the host waits
    longer than it works), and its lead is what such a run exposes."""
    prefill_outside_s: float = 0.0
    """The eager prefill's host outside its layers: from its embedding to its first layer's norm and from its
    final norm to the first decode graph's launch (the LM head, the loop's ops on the prefill's token), less
    ``call_s``; the median over the steps that recorded no graph (0: not found)."""
    pass_weight: float = 0.0
    """The loop's ops between the graph launches, weighed (:func:`decode_pass_op_count`; 0: none found)."""


COMPILED_DECODE_COLUMNS = columns(CompiledDecodeCalls)


@dataclass(frozen=True)
class GenerateCall(_Row):
    """What a transformers ``generate()`` call does on the host before its prefill: from the step's
    start to its first ``aten::embedding`` (the generation config, logits processors and stopping
    criteria built, the cache created or a static one reset, the inputs prepared), median over the
    profiled steps (seconds), with the trace's probes (windowed, :data:`PROBE_WINDOW`)."""

    trace: str
    act: str
    compiled_decode: bool
    """Its decode passes replay a compiled graph (a static cache: ``runtime.compiled_decode``)."""
    steps: int
    setup_s: float
    linear_main_s: float
    empty_main_s: float


GENERATE_CALL_COLUMNS = columns(GenerateCall)


def generate_call(a: Analysis) -> GenerateCall | None:
    """The host of a ``generate()`` call before its prefill (``None`` when the trace's steps do not run
    ``generate()`` or carry no step ranges)."""
    ops = sorted(a.trace.cpu_ops.values(), key=lambda o: o.ts)
    speed = op_speed(a, PROBE_WINDOW)
    if not generate_loop(ops) or speed is None:
        return None
    setups = []
    for _step, lo, _hi, win in _step_windows(a):
        emb = next((o.ts for o in win if o.name == "aten::embedding"), None)
        if emb is not None:
            setups.append(emb - lo)
    if not setups:
        return None
    return GenerateCall(
        trace=a.trace.path,
        act="swiglu" if any(o.name == "aten::silu" for o in ops) else "gelu",
        compiled_decode=compiled_decode_graphs([a]),
        steps=len(setups),
        setup_s=float(statistics.median(setups)),
        linear_main_s=float(speed.linear_main_s or 0.0),
        empty_main_s=float(speed.empty_main_s or 0.0),
    )


COMPILED_REGION = "Torch-Compiled Region"
DYNAMO_LOOKUP = "TorchDynamo Cache Lookup"


def trace_host_ops(a: Analysis) -> HostOps:
    """The host op tables (:class:`HostOps`) of the compute profile of the GPU trace ``a`` ran on (the
    nearest calibrated GPU's, transferred, where it has none)."""
    from simcore.specs.profile import load_profile
    from simcore.workload.replay import device_from_trace

    return load_profile(device_from_trace(a.trace)).host_ops


def compiled_decode_calls(a: Analysis, weights: HostOps | None = None) -> CompiledDecodeCalls | None:
    """The compiled decode calls of a trace (``None`` when no compiled region launches a graph); the loop's
    ops weighed by ``weights`` (default: :func:`trace_host_ops`)."""
    graphs = graph_launches(a.trace)
    launches = [c.ts for c in graphs]
    ops = list(a.trace.cpu_ops.values())
    regions = [
        o
        for o in ops
        if o.name.startswith(COMPILED_REGION)
        and (i := bisect.bisect_left(launches, o.ts)) < len(launches)
        and launches[i] <= o.ts + o.dur
    ]
    lookups = [o.dur for o in ops if o.name == DYNAMO_LOOKUP]
    speed = op_speed(a, PROBE_WINDOW)
    if not regions or speed is None or not speed.linear_main_s:
        return None
    call_s = float(statistics.median(o.dur for o in regions)) + (
        float(statistics.median(lookups)) if lookups else 0.0
    )
    corr = {c.correlation for c in graphs}
    per: dict[int, int] = {}
    first: dict[int, float] = {}
    for k in a.trace.kernels():
        if k.correlation in corr:
            per[k.correlation] = per.get(k.correlation, 0) + 1
            first[k.correlation] = min(first.get(k.correlation, k.ts), k.ts)
    waits = sorted((c.ts + c.dur, c.dur) for c in a.trace.host_calls if c.name.startswith(SYNC_CALLS))
    ends = [e for e, _d in waits]
    leads, waited = [], []
    for prev, nxt in zip(graphs, graphs[1:], strict=False):
        i = bisect.bisect_left(ends, nxt.ts) - 1  # the last wait that ended before this launch
        if i >= 0 and ends[i] > prev.ts:
            leads.append(first.get(nxt.correlation, nxt.ts + nxt.dur) - ends[i])
            waited.append(waits[i][1])
    layer_s, outside = [], []
    warm = set(graph_capture_steps(a))
    for st, _lo, hi, win in _step_windows(a):
        for p, starts, seq in _forward_passes(win, prefill=True):
            if seq <= 1:
                continue
            layer_s.append((p[-1].ts - p[0].ts) / ((len(p) - 1) // 2))
            # the prefill's pass outside its layers: its embedding to its first layer, and its final norm
            # to the decode's first graph launch (the LM head, the loop's ops on the first token) less the
            # call that launches it; steps that recorded a graph are left out (the record's own cost)
            begin, _end = _pass_span(p, starts, hi)
            launch = launches[bisect.bisect_left(launches, p[-1].ts)] if launches[-1] > p[-1].ts else None
            if launch is not None and launch <= hi and a.steps.index(st) not in warm:
                outside.append(p[0].ts - begin + launch - p[-1].ts)
    return CompiledDecodeCalls(
        trace=a.trace.path,
        calls=len(regions),
        kernels_per_replay=float(statistics.median(per.values())) if per else 0.0,
        call_s=call_s,
        linear_main_s=float(speed.linear_main_s),
        empty_main_s=float(speed.empty_main_s or 0.0),
        act="swiglu" if any(o.name == "aten::silu" for o in ops) else "gelu",
        prefill_layer_s=float(statistics.median(layer_s)) if layer_s else 0.0,
        lead_s=float(statistics.median(leads)) if leads else 0.0,
        wait_s=float(statistics.median(waited)) if waited else 0.0,
        prefill_outside_s=max(float(statistics.median(outside)) - call_s, 0.0) if outside else 0.0,
        pass_weight=float(decode_pass_op_count(a, weights or trace_host_ops(a)) or 0.0),
    )


@dataclass(frozen=True)
class GraphRecords(_Row):
    """The decode graphs a compiled static-cache ``generate()`` trace re-records: torch.compile's
    cudagraph trees record the decode graph again at a call's first decode pass when its static inputs moved
    (every call at large batches). Such a compiled region captures the graph's kernels
    (``CUDAGraphNode.record``), instantiates it, frees the old pool and synchronizes, the GPU idle meanwhile.
    Medians over the trace's recording regions (seconds)."""

    trace: str
    records: int
    """Compiled regions that recorded a graph (a :data:`GRAPH_INSTANTIATE` call inside)."""
    kernels_per_replay: float
    record_s: float
    """The GPU's idle time inside a recording region (the region less the kernels' busy time in it) beyond
    a steady compiled call (``call_s``, which a steady decode pass exposes anyway)."""
    call_s: float
    """The trace's steady compiled call (:attr:`CompiledDecodeCalls.call_s`)."""
    empty_main_s: float
    """The trace's windowed ``aten::empty`` pace: the decode passes'."""


GRAPH_RECORD_COLUMNS = columns(GraphRecords)


def _busy_s(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of ``[lo, hi]`` that the (start-sorted) ``spans`` cover."""
    busy, end = 0.0, lo
    for s, e in spans[bisect.bisect_left(spans, (lo - 10.0, lo)) :]:
        if s >= hi:
            break
        s, e = max(s, end), min(e, hi)
        if e > s:
            busy += e - s
            end = e
    return busy


def graph_records(a: Analysis) -> GraphRecords | None:
    """The decode graph recordings of a compiled static-cache ``generate()`` trace (``None`` when no
    compiled region records one, or the trace has no compiled decode calls)."""
    cd = compiled_decode_calls(a, HostOps())  # its calls alone: the loop's weight is not read here
    if cd is None:
        return None
    inst = sorted(c.ts for c in a.trace.host_calls if c.name.startswith(GRAPH_INSTANTIATE))
    regions = [
        o
        for o in a.trace.cpu_ops.values()
        if o.name.startswith(COMPILED_REGION)
        and bisect.bisect_right(inst, o.ts + o.dur) > bisect.bisect_left(inst, o.ts)
    ]
    if not regions:
        return None
    spans = sorted((k.ts, k.ts + k.dur) for k in a.trace.kernels())
    idle = [o.dur - _busy_s(spans, o.ts, o.ts + o.dur) for o in regions]
    return GraphRecords(
        trace=a.trace.path,
        records=len(regions),
        kernels_per_replay=cd.kernels_per_replay,
        record_s=max(float(statistics.median(idle)) - cd.call_s, 0.0),
        call_s=cd.call_s,
        empty_main_s=cd.empty_main_s,
    )


# ---------------------------------------------------------------------------------------------
# PyTorch DDP's host work in the backward, from a profiled DDP rank's CPU timeline

_ACC_NODE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
_ACC_INNER = "torch::autograd::AccumulateGrad"
_COPY_BACK = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
_BUCKET_CALL = "c10d::allreduce_"


@dataclass(frozen=True)
class DdpHooks(_Row):
    """DDP's host seconds in one profiled rank: per gradient tensor and per gradient bucket.

    ``per_param_s``: the autograd hook DDP registers on every parameter (its gradient scaled into
    the flat bucket: the ``AccumulateGrad`` node's time beyond the plain accumulation) plus the copy
    of the reduced bucket back into the gradient at the end of the backward
    (``copy_bucket_to_grad``); ``per_bucket_s``: the host call that launches a bucket's all-reduce
    (``c10d::allreduce_``). Medians over the trace's events, so a bucket's call is not counted in
    the per-parameter part (it runs inside one hook of each bucket)."""

    trace: str
    rank: int
    steps: int
    params_per_step: float
    buckets_per_step: float
    per_param_s: float
    per_bucket_s: float


DDP_HOOK_COLUMNS = columns(DdpHooks)


def ddp_hooks(a: Analysis) -> DdpHooks | None:
    """DDP's per-parameter and per-bucket host seconds in a profiled DDP trace (None when the trace
    has no DDP reducer hooks or bucket all-reduces)."""
    by: dict[str, list[float]] = {}
    for o in a.trace.cpu_ops.values():
        if o.name in (_ACC_NODE, _ACC_INNER, _COPY_BACK, _BUCKET_CALL):
            by.setdefault(o.name, []).append(o.dur)
    if not all(by.get(k) for k in (_ACC_NODE, _ACC_INNER, _COPY_BACK, _BUCKET_CALL)):
        return None
    med = {k: statistics.median(v) for k, v in by.items()}
    steps = max(len(a.steps), 1)
    return DdpHooks(
        trace=a.trace.path,
        rank=a.trace.rank,
        steps=steps,
        params_per_step=len(by[_ACC_NODE]) / steps,
        buckets_per_step=len(by[_BUCKET_CALL]) / steps,
        per_param_s=max(med[_ACC_NODE] - med[_ACC_INNER], 0.0) + med[_COPY_BACK],
        per_bucket_s=med[_BUCKET_CALL],
    )


HOST_TRACE_KINDS = ("ddp", "steps", "decode", "graphs", "compiled", "compiled_decode", "graph_records", "generate")
"""What :func:`host_trace_rows` measures in each trace (``simcore host-trace --<kind>``)."""


def host_trace_rows(
    kind: str, traces: list[str], strategy: str = "single", prefill: bool = False
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The host-cost rows of profiler traces and their CSV columns, the inputs of ``fit_host``:

    * ``ddp``: DDP's host costs per gradient tensor and per bucket from profiled DDP ranks, one row per
      trace (``fit_host``'s ``profiled_ddp_param`` / ``profiled_ddp_bucket``);
    * ``steps``: the host timeline of every profiled eager training step (:class:`StepHost`), one row per
      step (``fit_host``'s per-step and per-layer host in CPU-speed units); ``strategy`` labels the rows;
    * ``decode``: every eager decode pass of profiled inference traces (:class:`DecodeHost`; with
      ``prefill``, the prefill passes too);
    * ``graphs``: the CUDA-graph replays of a trace (:class:`GraphReplays`), one row per trace;
    * ``compiled``: the compiled regions of profiled torch.compile steps (:class:`CompiledStepHost`), with
      the ``aten::t`` of ``eager_<name>`` where it lies beside ``compiled_<name>`` (one process);
    * ``compiled_decode``: the compiled decode calls of static-cache ``generate()`` traces
      (:class:`CompiledDecodeCalls`), one row per trace;
    * ``graph_records``: the decode graphs such a trace re-records (:class:`GraphRecords`), one row per trace;
    * ``generate``: a ``generate()`` call's host before its prefill (:class:`GenerateCall`), one row per trace.

    A trace without what its kind measures is a :class:`~simcore.errors.SimcoreError` naming it."""
    from simcore.errors import SimcoreError
    from simcore.traces import read_trace
    from simcore.traces.classify import analyze

    if kind not in HOST_TRACE_KINDS:
        raise SimcoreError(f"unknown kind {kind!r}; known: {', '.join(HOST_TRACE_KINDS)}")
    # the kinds of one row per trace: what measures it, and what a trace without it lacks
    one_row: dict[str, tuple[Callable[[Analysis], _Row | None], str]] = {
        "graph_records": (graph_records, "no compiled decode call that records a CUDA graph"),
        "generate": (generate_call, "no profiled step of a transformers generate() call"),
        "compiled_decode": (compiled_decode_calls, "no compiled region that launches a CUDA graph"),
        "graphs": (graph_replays, "no CUDA-graph launch with its kernels in the trace"),
        "ddp": (ddp_hooks, "no DDP reducer hooks or bucket all-reduces in the trace"),
    }
    rows: list[dict[str, Any]] = []
    for p in traces:
        a = analyze(read_trace(p))
        if kind in one_row:
            measure, missing = one_row[kind]
            got = measure(a)
            if got is None:
                raise SimcoreError(missing, file=str(p))
            rows.append(got.row())
        elif kind == "compiled":
            # an eager trace of the same process beside it (eager_<name> next to compiled_<name>)
            twin = Path(p).with_name(Path(p).name.replace("compiled_", "eager_", 1))
            eager = op_speed(analyze(read_trace(twin))) if "compiled_" in Path(p).name and twin.exists() else None
            cs = compiled_step_hosts(a, eager)
            if not cs:
                raise SimcoreError("no step with compiled forward and backward regions", file=str(p))
            rows.extend(c.row() for c in cs)
        else:
            found: list[StepHost] | list[DecodeHost] = (
                training_step_hosts(a, strategy) if kind == "steps" else decode_step_hosts(a, prefill)
            )
            if not found:
                what = (
                    "eager training step with its norms, Optimizer.step range"
                    if kind == "steps"
                    else "eager decode step with its norms"
                )
                raise SimcoreError(f"no {what} and CPU probe (aten::t or aten::empty)", file=str(p))
            rows.extend(x.row() for x in found)
    columns_of = {
        "ddp": DDP_HOOK_COLUMNS,
        "steps": STEP_HOST_COLUMNS,
        "decode": DECODE_HOST_COLUMNS,
        "graphs": GRAPH_COLUMNS,
        "compiled": COMPILED_COLUMNS,
        "compiled_decode": COMPILED_DECODE_COLUMNS,
        "graph_records": GRAPH_RECORD_COLUMNS,
        "generate": GENERATE_CALL_COLUMNS,
    }
    return rows, columns_of[kind]
