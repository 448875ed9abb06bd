"""Request-level inference serving simulation (a discrete-event loop of its own): arrivals,
continuous batching with chunked prefill over a paged KV cache, replicas, optional prefill/decode
disaggregation.

How an engine step is priced
----------------------------
The analytic inference engine (:func:`simcore.engine.inference.evaluate`) is sampled once per
instance shape into a small table (:class:`StepModel`): the GPU time of a decode step over a grid of
batches and contexts, and of a one-prompt prefill over a grid of lengths split into attention and
the rest, plus the host time of issuing a step (eager PyTorch). A continuous-batching step prices
its non-attention work (GEMMs, norms, TP communication) as a roofline over all its tokens -- so a
small prefill chunk rides on the weight read of the decodes and a large one is compute-bound -- and
adds the causal attention of each chunk over its prefix. The decode batch is priced at its mean
context.

Scheduler (vLLM V1 style, per instance)
---------------------------------------
Each step: running decodes first (one token each; each takes a new KV block when its last one is
full — with no free block the newest running request is preempted: its blocks are freed and it
re-enters the head of the queue to be recomputed, prompt plus generated tokens), then prefill chunks
of admitted requests, then new requests first-come first-served while the step's token budget
(``max_batch_tokens``), ``max_batch`` sequences and free KV blocks allow (a request that does not
fit stops admission). The step that computes a prompt's last chunk samples its first token.
Beside this default (``fcfs``, ``decode_first``): priority and shortest-prompt-first queues,
prefill-first steps, CUDA-graph padding, engine profiles (:func:`~simcore.specs.serving.with_engine`),
speculative decoding (:func:`speculative_step_model`), prefix caching with shared blocks
(:class:`_PrefixCache`) and closed-loop users (``serving.concurrency``); docs/serving.md.

Speed
-----
The loop merges the arrivals (read from the workload arrays in slices, a request object exists only
while the request is in the system) with a heap of step ends, wake-ups and KV transfers. A step that
ends before the next event anywhere is applied at once, and a stretch of decode-only steps runs in
one tight loop (:meth:`_Instance._decode_run`) with the same arithmetic; decoding requests' KV
blocks are counted per step by phase (see :class:`_Instance`), not per request. Outcomes go to
per-request arrays. See docs/serving.md, "Speed".
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import os
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from simcore import memory as MEM
from simcore.comm.collectives import kv_transfer_time
from simcore.engine import inference as INF
from simcore.engine.runtime import inference_runtime
from simcore.errors import SpecError
from simcore.serving.spec import ServingSpec, load_trace, with_serving_stack
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.loader import validate
from simcore.specs.registry import default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster
from simcore.specs.scenario import InferenceSpec, ModelSpec, Scenario
from simcore.specs.serving import (
    ENGINE_FIELDS,
    StepProfile,
    load_step_profile,
    padded_context,
    with_engine,
)
from simcore.workload.layout import valid_layouts

Role = Literal["mixed", "prefill", "decode"]


# --------------------------------------------------------------------------------------------
# step-cost table


def _grid(top: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, ... up to ``top`` (inclusive)."""
    out = {1, top}
    v = 1
    while v < top:
        out.add(v)
        if v * 3 // 2 < top:
            out.add(v * 3 // 2)
        v *= 2
    return sorted(x for x in out if 1 <= x <= top)


def _bucket_grid(grid: list[int], buckets: list[int] | None, top: int) -> list[int]:
    """``grid`` with each context bucket ``c <= top`` and ``c + 1`` added, and ``top`` itself, so that a table
    over it steps at the buckets (contexts in ``(c, c']`` attend over ``c'``) instead of ramping between grid
    points, and is never extrapolated from a bucket's step. ``grid`` itself without buckets."""
    if not buckets:
        return grid
    extra = {x for c in buckets for x in (c, c + 1) if x <= top}
    return sorted(set(grid) | extra | {top})


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    """Piecewise-linear interpolation on sorted ``xs`` (clamped to the first segment's slope
    below and the last one's above)."""
    i = bisect_right(xs, x) - 1
    i = min(max(i, 0), len(xs) - 2)
    x0, x1 = xs[i], xs[i + 1]
    return ys[i] + (ys[i + 1] - ys[i]) * (x - x0) / (x1 - x0)


SATURATED = "saturated"
"""How a run's note begins when completions fall behind arrivals (fewer than 0.9 of them over the second
half of the arrivals, 200 requests or more): the queue grows and latencies depend on the run's length."""


def padded_slots_context(ctx: float, b: float, b_graph: float) -> float:
    """Mean context (tokens) to price a decode of ``b`` sequences at mean context ``ctx`` padded to a CUDA graph of
    ``b_graph`` rows: ``ctx b / b_graph``. The padding rows are dummy sequences (TensorRT-LLM's CUDA-graph dummy
    requests hold one token; vLLM's and SGLang's padded rows have no KV): they add GEMM rows but read no KV, so the
    step's attention reads the ``b ctx`` tokens of the real sequences (the paged decode kernels' time is linear in
    the KV read; docs/serving.md, "CUDA graphs and padding")."""
    return ctx * b / b_graph if b_graph > b else ctx


@dataclass
class StepModel:
    """Engine-step cost of one instance (``tp`` x ``pp`` GPUs), seconds.

    GPU time of a step with ``b`` decodes at mean context ``c`` and prefill chunks ``(p_i, n_i)``
    (``n_i`` new tokens after ``p_i`` cached ones), ``N = b + sum n_i`` tokens in all::

        D(b, c) + R(N) - R(b) + sum_i [A(p_i + n_i) - A(p_i)]      (A(0) := A(1))

    ``D``: decode step (GPU), ``R(n)``: everything but attention of an ``n``-token forward pass
    (GEMMs, norms, TP communication: a roofline over the step's whole token count, so small chunks
    ride on the weight read of the decodes), ``A(n)``: causal attention of one ``n``-token prompt.
    Without decodes the step costs ``R(N) + A(1) + sum_i [...]``. The step takes at least the host
    time of issuing it (eager PyTorch), ``H_pre`` with prefill chunks, ``H_dec`` without.

    An engine that runs a step's prompts as passes of their own before the decode pass
    (``separate_prefill``, ``serving.mixed_step: separate``) takes the sum instead: ``k`` prefill passes
    ``max(R(N - b) + (k - 1) R(1) + A(1) + sum_i [...], k H_pre)`` (each pass reads the weights and is issued
    by the host) plus the decode step ``max(D(b, c), H_dec)``.
    """

    b_grid: list[float]
    c_grid: list[float]
    dec: list[list[float]]
    """``dec[j][i]``: GPU time of a decode step of ``b_grid[i]`` sequences at context ``c_grid[j]``."""
    n_grid: list[float]
    rest: list[float]
    """``rest[i]``: GPU time of an ``n_grid[i]``-token prefill, attention left out."""
    attn: list[float]
    """``attn[i]``: attention time of one ``n_grid[i]``-token prompt."""
    host_decode: float = 0.0
    host_prefill: float = 0.0
    separate_prefill: bool = False
    """Prefill chunks run as passes of their own, then the decode pass (``serving.mixed_step: separate``)."""
    shape_setup: float = 0.0
    """Seconds the first pass of an input shape ``(prompts, length)`` an instance has not run yet adds (a measured
    eager engine's per-shape setup, :attr:`~simcore.specs.serving.PrefillFit.c_shape`; separate passes only)."""

    _cols: dict[float, list[float]] = field(default_factory=dict, repr=False, compare=False)
    """Decode time along ``c_grid`` for each batch asked so far (interpolated in the batch)."""
    _rests: dict[float, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    _attns: dict[float, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    """``R(n)`` and ``A(n)`` for each token count asked so far (a step's token counts are whole numbers up to
    its token budget, so these stay small; new for each model, ``dataclasses.replace`` included)."""

    def column(self, b: float) -> list[float]:
        """Decode-step GPU time of ``b`` sequences at each context of ``c_grid`` (interpolated in the
        batch), s."""
        col = self._cols.get(b)
        if col is None:
            col = self._cols[b] = [_interp(self.b_grid, row, b) for row in self.dec]
        return col

    def decode_gpu(self, b: float, ctx: float) -> float:
        """GPU time of a decode step of ``b`` sequences at mean context ``ctx`` (bilinear), s."""
        col = self.column(b)
        cg = self.c_grid
        j = min(max(bisect_right(cg, ctx) - 1, 0), len(cg) - 2)
        w = (ctx - cg[j]) / (cg[j + 1] - cg[j])
        lo = col[j]
        return lo + (col[j + 1] - lo) * w

    def rest_gpu(self, n: float) -> float:
        """``R(n)``: non-attention GPU time of ``n`` tokens in one step, s."""
        t = self._rests.get(n)
        if t is None:
            t = self._rests[n] = _interp(self.n_grid, self.rest, n)
        return t

    def attention(self, n: float) -> float:
        """``A(n)``: attention of one causal ``n``-token prompt (``A(0) = A(1)``), s."""
        if n <= 1.0:
            return self.attn[0]
        t = self._attns.get(n)
        if t is None:
            t = self._attns[n] = _interp(self.n_grid, self.attn, n)
        return t

    def chunk_attention(self, done: float, new: float) -> float:
        """Attention added by ``new`` prompt tokens after ``done`` cached ones, s."""
        return self.attention(done + new) - self.attention(done)

    def step_time(
        self, b: int, ctx_mean: float, prefill_tokens: float, attn: float, b_graph: int | None = None,
        passes: int = 1,
    ) -> float:  # fmt: skip
        """A step of ``b`` decodes at mean context ``ctx_mean`` tokens plus ``prefill_tokens``
        prompt tokens whose chunk attention (from :meth:`chunk_attention`) sums to ``attn``, s. The
        decodes are priced as a batch of ``b_graph`` (default ``b``): the CUDA graph's padded size
        (:func:`padded_slots_context`: the padding rows hold no KV). ``passes``: prefill passes of a
        ``separate_prefill`` engine (class docstring)."""
        if b_graph is not None and b > 0:
            ctx_mean = padded_slots_context(ctx_mean, b, b_graph)
        if self.separate_prefill and prefill_tokens > 0:
            gpu = self.rest_gpu(prefill_tokens) + (passes - 1) * self.rest_gpu(1.0) + self.attn[0] + attn
            pre = max(gpu, passes * self.host_prefill)
            return pre + (self.decode(b if b_graph is None else b_graph, ctx_mean) if b > 0 else 0.0)
        if b > 0:
            gpu = self.decode_gpu(b if b_graph is None else b_graph, ctx_mean)
            if prefill_tokens > 0:
                gpu += self.rest_gpu(b + prefill_tokens) - self.rest_gpu(b) + attn
            return max(gpu, self.host_prefill if prefill_tokens > 0 else self.host_decode)
        gpu = self.rest_gpu(prefill_tokens) + self.attn[0] + attn
        return max(gpu, self.host_prefill)

    def prefill(self, n: float) -> float:
        """One ``n``-token prompt prefilled alone in one step, s."""
        return self.step_time(0, 0.0, n, self.chunk_attention(0.0, n))

    def decode(self, b: float, ctx: float) -> float:
        """A decode-only step of ``b`` sequences at mean context ``ctx``, s."""
        return max(self.decode_gpu(b, ctx), self.host_decode)


def build_step_model(
    sc: Scenario,
    cluster: ClusterInfo,
    tp: int,
    max_batch: int,
    max_len: int,
    max_tokens: int = 0,
    engine: ServingSpec | None = None,
    dp: int = 1,
    ep: int = 1,
) -> StepModel:
    """Sample the inference engine into a :class:`StepModel` for batches up to ``max_batch``,
    contexts up to ``max_len`` tokens and steps of up to ``max(max_len, max_tokens)`` tokens.

    ``dp > 1`` (``serving.attention_dp``): the instance is ``dp`` attention ranks stepping together, the
    experts sharded over ``ep = dp x tp`` GPUs (:func:`attention_dp_step_model` of one rank's tables, sampled
    with ``ep``). ``dp == 1`` with ``ep == tp > 1`` (``parallel.ep``): TP attention with each expert whole on one
    of the ``tp`` GPUs, the MoE's partial outputs summed by the layer's TP all-reduce (``tp_all_reduce``).

    ``engine``'s properties (default: none of them): ``prefill_framework`` prices the prefill rows under that
    framework (an engine whose decode steps are CUDA-graph replays while its prefill runs eager, its host time
    per pass included); ``decode_context_buckets`` prices a decode step at context ``c`` as one attending over
    the bucket ``padded_context(c)``; ``mixed_step: separate`` sets ``separate_prefill``."""
    if dp > 1:
        rank = build_step_model(
            sc, cluster, tp, -(-max_batch // dp), max_len, -(-max_tokens // dp), engine, ep=dp * tp
        )
        return attention_dp_step_model(rank, dp)
    inf = sc.inference
    assert inf is not None
    buckets = engine.decode_context_buckets if engine is not None else None
    pre_fw = engine.prefill_framework if engine is not None else None
    tbo = engine is not None and engine.two_batch_overlap and ep > 1
    if ep > 1 and ep == tp:  # expert parallelism inside a TP instance: the tokens are already on every rank
        exchange = "tp_all_reduce"
    elif engine is not None and ep > 1 and engine.ep_exchange is not None:
        exchange = engine.ep_exchange
    else:
        exchange = "all_to_all"
    fw = sc.runtime.framework
    b_grid = _grid(max(max_batch, 2))
    c_top = max(max_len, 2, min(int(padded_context(buckets, max_len)), sc.model.seq_len))
    n_grid = _bucket_grid(_grid(max(c_top, max_tokens)), buckets, c_top)
    c_grid = [n for n in n_grid if n <= c_top]
    barr = np.asarray(b_grid, dtype=float)
    dec: list[list[float]] = []
    rest: list[float] = []
    attn: list[float] = []
    h_dec = h_pre = 0.0

    def evaluate(n: int, batch: Any, framework: str) -> INF.InferenceEval:
        # the engine broadcasts over a batch array; the spec's int field is bypassed on purpose
        spec = InferenceSpec.model_construct(batch=batch, prompt_len=n, context_len=n, output_len=1,
                                             precision=inf.precision, kv_cache_dtype=inf.kv_cache_dtype)  # fmt: skip
        return INF.evaluate(sc.model, spec, cluster, tp, sc.parallel.pp, framework, sc.calibration,
                            **inference_runtime(sc), paged_kv=True, ep=ep, ep_exchange=exchange,
                            decode_kernel_gemms=engine is not None and engine.decode_gemms == "kernel")  # a serving engine's paged KV cache  # fmt: skip

    for n in n_grid:
        ev = evaluate(n, barr if n <= c_top else 1, fw)
        ev_pre = ev if pre_fw in (None, fw) else evaluate(n, 1, str(pre_fw))
        pt = {k: float(np.ravel(np.asarray(v, dtype=float))[0]) for k, v in ev_pre.prefill.time.items()}
        p_host = pt.pop("host_overhead", 0.0)
        p_attn = pt.get("attention", 0.0)
        p_gpu = float(_overlap_ep(sum(pt.values()), pt.get("ep_comm", 0.0), tbo))
        rest.append(p_gpu - p_attn)
        attn.append(p_attn)
        if p_host > 0:
            h_pre = max(h_pre, p_gpu + p_host)
        if n <= c_top:
            dt = {
                k: np.broadcast_to(np.asarray(v, dtype=float), barr.shape) for k, v in ev.decode.time.items()
            }
            d_host = dt.pop("host_overhead", np.zeros(barr.shape))
            d_gpu = _overlap_ep(np.sum(list(dt.values()), axis=0), dt.get("ep_comm", 0.0), tbo)
            dec.append([float(x) for x in d_gpu])
            if np.any(d_host > 0):
                h_dec = max(h_dec, float(np.max((d_gpu + d_host)[d_host > 0])))
    if buckets:  # a step at context c attends over c's bucket: the row of the padded context
        cols = [[row[i] for row in dec] for i in range(len(b_grid))]
        cg = [float(c) for c in c_grid]
        dec = [[_interp(cg, col, padded_context(buckets, c)) for col in cols] for c in c_grid]
    # more tokens never take less time (guards interpolation against rounding in the tables)
    rest = [float(x) for x in np.maximum.accumulate(np.asarray(rest))]
    attn = [float(x) for x in np.maximum.accumulate(np.asarray(attn))]
    return StepModel(
        [float(b) for b in b_grid],
        [float(n) for n in c_grid],
        dec,
        [float(n) for n in n_grid],
        rest,
        attn,
        h_dec,
        h_pre,
        separate_prefill=engine is not None and engine.mixed_step == "separate",
    )


def _overlap_ep(gpu: Any, comm: Any, overlap: bool) -> Any:
    """GPU seconds of a pass whose expert all-to-alls (``comm`` of ``gpu``) run under the other micro-batch's
    computation (``serving.two_batch_overlap``): ``max(gpu - comm, comm)``; else ``gpu``."""
    return np.maximum(gpu - comm, comm) if overlap else gpu


def attention_dp_step_model(rank: StepModel, dp: int) -> StepModel:
    """The step model of an instance of ``dp`` attention data-parallel ranks from one rank's tables (sampled
    with the experts sharded instance-wide, so each rank's MoE layers already pay the dispatch and combine
    all-to-alls over ``ep`` GPUs and read ``experts / ep`` experts).

    Mean field: the instance's sequences and prompt tokens are spread evenly over the ranks, which step
    together (every MoE layer is a collective over all of them). A decode step of ``b`` sequences costs a
    rank's step of ``b / dp`` (at least one: a rank with nothing to decode still runs the MoE layers with the
    others, SGLang's and TensorRT-LLM's idle batches); ``N`` prompt tokens cost ``R(max(N / dp, 1))``; the
    chunks' attention, each on its own rank, adds ``1 / dp`` of its sum. A lone prompt's prefill is thus
    priced as if shared by the ranks: optimistic at light load (one rank computes it), exact on average
    when many requests are in flight (docs/serving.md, "Expert parallelism with attention DP")."""
    b_grid = [1.0] + [dp * b for b in rank.b_grid]
    dec = [[row[0], *row] for row in rank.dec]
    n_grid = sorted({*rank.n_grid, *(dp * n for n in rank.n_grid)})
    rest = [_interp(rank.n_grid, rank.rest, max(n / dp, 1.0)) for n in n_grid]
    attn = [_interp(rank.n_grid, rank.attn, n) / dp for n in n_grid]
    return dataclasses.replace(rank, b_grid=b_grid, dec=dec, n_grid=n_grid, rest=rest, attn=attn, _cols={})


def profile_step_model(
    prof: StepProfile, max_batch: int, max_len: int, max_tokens: int = 0, engine: ServingSpec | None = None
) -> StepModel:
    """A measured engine's :class:`StepModel` (``serving.step_profile``): the tables of :func:`build_step_model`
    sampled from the profile's fitted step times instead of the roofline, over the same grids. The decode table is
    ``D(b, c)`` (:meth:`~simcore.specs.serving.StepProfile.decode_time` at the context padded to ``engine``'s
    ``decode_context_buckets``); a prefill's GPU work is ``R(n) = c_token n`` and ``A(n) = c_token2 n^2`` and the
    host's issue time of a pass ``c0`` (``H_pre``, under which the GPU runs): a lone prompt takes
    ``max(c0, R(n) + A(n))``, a chunk fused into a decode step adds ``R + A`` to it, ``k`` separate passes
    (``mixed_step: separate``) take ``max(k c0, sum of R + A)``, and a pass of a shape the instance has not run
    adds ``c_shape`` (``shape_setup``). The decode's host work is inside its measured times."""
    buckets = engine.decode_context_buckets if engine is not None else None
    b_grid = [float(b) for b in _grid(max(max_batch, 2))]
    c_top = max(max_len, 2)
    n_grid = [float(n) for n in _bucket_grid(_grid(max(c_top, max_tokens)), buckets, c_top)]
    c_grid = [n for n in n_grid if n <= c_top]
    p = prof.prefill
    return StepModel(
        b_grid,
        c_grid,
        [[prof.decode_time(b, padded_context(buckets, c)) for b in b_grid] for c in c_grid],
        n_grid,
        [p.c_token * n for n in n_grid],
        [p.c_token2 * n * n for n in n_grid],
        host_prefill=p.c0,
        separate_prefill=engine is not None and engine.mixed_step == "separate",
        shape_setup=p.c_shape,
    )


def step_profile(sc: Scenario, spec: ServingSpec, device: str) -> StepProfile | None:
    """The scenario's ``serving.step_profile``, checked against it: the profiled device (``device``: the
    cluster's), model and GPU count, no speculative decoding or disaggregated pools (the profile measured
    neither). ``None`` without one."""
    if spec.step_profile is None:
        return None
    prof = load_step_profile(spec.step_profile)
    where = "serving.step_profile"
    if prof.device.lower() != device.lower():
        raise SpecError(f"{prof.name} was measured on {prof.gpu} ({prof.device}); the cluster's GPU is {device}",
                        field=where)  # fmt: skip
    if prof.model != sc.model.name:
        raise SpecError(
            f"{prof.name} was measured on the model {prof.model!r}; the scenario's model is {sc.model.name!r}",
            field=where,
        )
    if sc.parallel.tp * sc.parallel.pp != prof.gpus:
        raise SpecError(
            f"{prof.name} was measured on {prof.gpus} GPU(s) an instance; the scenario's tp x pp is "
            f"{sc.parallel.tp * sc.parallel.pp}",
            field=where,
        )
    if spec.speculative is not None or spec.disaggregated is not None:
        raise SpecError(f"{prof.name} measured plain decoding on mixed instances: drop speculative/disaggregated",
                        field=where)  # fmt: skip
    if spec.attention_dp > 1:
        raise SpecError(f"{prof.name} measured one rank's steps; attention_dp {spec.attention_dp} needs a profile of "
                        "the whole data-parallel instance", field=where)  # fmt: skip
    if sc.parallel.ep > 1:
        raise SpecError(f"{prof.name} measured its own expert layout; parallel.ep {sc.parallel.ep} is not what it ran",
                        field=where)  # fmt: skip
    return prof


def speculative_step_model(target: StepModel, draft: StepModel, k: int, tokens_per_round: float) -> StepModel:
    """The step model of speculative decoding, per generated token: a round of ``k`` draft decode
    steps and one verification pass, divided by the tokens it yields on average, ``E``::

        D'(b, c) = [k D_draft(b, c) + D(b, c) + R(b (k + 1)) - R(b)] / E

    The verification pass is a decode step whose non-attention work runs ``k + 1`` tokens per
    sequence (``R`` over ``b (k + 1)`` tokens) while its attention still reads each sequence's KV
    cache once (``D`` already holds it). Each simulated decode step then stands for one token of
    every sequence, so KV blocks, TPOT and throughput follow the expected token rate; the host
    floor is spread the same way. Tables of ``target`` and ``draft`` share their grids (built with
    the same batch and length limits)."""
    dec = [
        [
            (k * dd + td + target.rest_gpu(b * (k + 1)) - target.rest_gpu(b)) / tokens_per_round
            for b, td, dd in zip(target.b_grid, trow, drow, strict=True)
        ]
        for trow, drow in zip(target.dec, draft.dec, strict=True)
    ]
    host = (k * draft.host_decode + target.host_decode) / tokens_per_round
    return dataclasses.replace(target, dec=dec, host_decode=host, _cols={})


def draft_scenario(sc: Scenario, spec: ServingSpec) -> Scenario | None:
    """The scenario of the draft model of ``spec.speculative`` (``None`` without it): the preset of
    ``draft_model``, or for MTP/EAGLE heads the target's shape with one layer; same cluster,
    parallel layout, precision and runtime as the target."""
    sd = spec.speculative
    if sd is None:
        return None
    if sd.draft_model is None:
        model = sc.model.model_copy(update={"layers": 1, "name": f"{sc.model.name}-mtp"})
    else:
        fields = default_registry().model_preset(sd.draft_model)
        fields = {k: v for k, v in fields.items() if k in ModelSpec.model_fields and k != "preset"}
        model = validate(
            ModelSpec, {**fields, "seq_len": sc.model.seq_len}, prefix="serving.speculative.draft_model"
        )
        if model.vocab != sc.model.vocab:
            raise SpecError(
                f"draft model {sd.draft_model!r} has a vocabulary of {model.vocab} tokens, the target "
                f"{sc.model.vocab}: a draft must share the target's tokenizer",
                field="serving.speculative.draft_model",
            )
    return sc.model_copy(update={"model": model})


def _kv_dtype_bytes(sc: Scenario) -> float:
    inf = sc.inference
    assert inf is not None
    return float(DTYPE_BYTES[MEM.kv_cache_dtype(inf.precision, inf.kv_cache_dtype)])


def _kv_bytes_per_token(sc: Scenario, tp: int) -> float:
    """KV-cache bytes of one token on one GPU of a ``tp x pp`` instance (:func:`simcore.memory.kv_cache_bytes`)."""
    return float(np.asarray(MEM.kv_cache_bytes(sc.model, 1, 1, tp, _kv_dtype_bytes(sc)))) / sc.parallel.pp


def kv_blocks(
    sc: Scenario,
    cluster: ClusterInfo,
    spec: ServingSpec,
    tp: int,
    draft: Scenario | None = None,
    dp: int = 1,
    max_seq_len: int | None = None,
) -> tuple[int, dict[str, float]]:
    """KV-cache blocks of one instance (with attention DP, ``dp > 1``: of one of its ``dp`` ranks, whose
    ``tp`` GPUs hold the experts of ``ep = dp x tp`` ranks and the activations of ``1 / dp`` of the
    instance's step) and its per-GPU memory budget (bytes): device memory times
    ``memory_utilization`` (at most capacity minus the reserved runtime bytes; with ``memory_fraction_of:
    free`` of what is left after it), minus what is resident when the engine sizes its cache
    (:func:`resident_before_kv`, whose ``max_seq_len`` this passes on). With a ``draft`` scenario (speculative
    decoding) its weights come off too and each token's block space holds the draft's KV beside the target's."""
    res = resident_before_kv(sc, cluster, spec, tp, dp, max_seq_len)
    weights = res["weights"]
    per_token = _kv_bytes_per_token(sc, tp)
    if draft is not None:
        weights += resident_before_kv(draft, cluster, spec, tp, dp, max_seq_len)["weights"]
        per_token += _kv_bytes_per_token(draft, tp)
    held = res["activations"] + (res["cuda_graphs"] if spec.graphs_before_kv else 0.0)
    cap = cluster.device.memory.capacity
    if spec.memory_fraction_of == "free":
        used = weights + held
        usable = used + spec.memory_utilization * max(cap - MEM.RESERVED_BYTES - used, 0.0)
    else:
        usable = min(cap * spec.memory_utilization, cap - MEM.RESERVED_BYTES)
    free = usable - weights - held
    blocks = int(max(free, 0.0) // (per_token * spec.kv_block_tokens))
    return blocks, {
        "usable": usable,
        "weights": weights,
        "activations": res["activations"],
        "kv_cache": blocks * per_token * spec.kv_block_tokens,
        "kv_bytes_per_token": per_token,
        "cuda_graphs": res["cuda_graphs"],
    }


def resident_before_kv(
    sc: Scenario, cluster: ClusterInfo, spec: ServingSpec, tp: int, dp: int = 1, max_seq_len: int | None = None
) -> dict[str, float]:
    """Bytes per GPU of a ``tp x pp`` instance (an attention-DP rank of ``dp``) that are resident when the engine
    sizes its KV cache, by part (docs/serving.md, "KV cache"):

    * ``weights``: routed experts over :func:`instance_ep` GPUs, the rest over ``tp x pp``;
    * ``activations``: the transient peak of the engine's profiling forward, a ``max_batch_tokens / dp``-token
      prefill step, plus, unless the CUDA graphs come first (``graphs_before_kv``), fp32 logits of
      ``max_batch / dp`` sequences over the vocabulary split ``tp`` ways (vLLM's dummy sampler run);
    * ``cuda_graphs``: the decode CUDA graphs' memory pool (0 without graphs).

    With ``graphs_before_kv`` (TensorRT-LLM's PyTorch backend) the graphs are captured in a warm-up that runs on the
    small estimation cache, before the engine measures free memory: every size into one shared private pool,
    largest first, each graph's output kept as a weak reference, so the pool is the largest captured step's peak:
    the intermediate activations of ``B`` tokens (as a ``B``-token prefill step) plus ``B x vocab x
    graph_logit_bytes`` for the logits the captured forward ends in (the whole vocabulary per rank). The warm-up
    captures a size only when the cache has that many free blocks, and the estimation cache holds just the
    profiling requests: ``max_batch_tokens / dp`` tokens in requests of at most ``max_seq_len - 1`` tokens (default
    the model's context), each with one more token, in ``kv_block_tokens`` blocks. So ``B`` is the largest of
    ``cuda_graph_sizes / dp`` within those blocks (``max_batch / dp`` capped by them when the sizes are not listed).
    Otherwise (vLLM: graphs captured after the cache is allocated; it subtracts its graph estimate only with
    ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, default 0, docs/parallelism.md, CUDA-graph memory) the pool of
    the largest step's activations plus each captured size's ``b x hidden`` 16-bit output, reported beside the KV
    budget and not taken from it, in the memory ``memory_utilization`` leaves."""
    rank = -(-spec.max_batch // dp)
    ev = _prefill_memory(sc, cluster, tp, dp, max(spec.max_batch_tokens // dp, 1))
    weights = float(np.asarray(ev.memory["weights"]))
    acts = float(np.asarray(ev.memory["activations"]))
    sizes = spec.cuda_graph_sizes
    graphs = 0.0
    if spec.graphs_before_kv:
        free = estimation_blocks(spec.max_batch_tokens // dp, max_seq_len or sc.model.seq_len, spec.kv_block_tokens)
        if sizes:
            top = max((c for c in (-(-b // dp) for b in sizes) if c <= free), default=0)
        else:
            top = min(rank, free)
        if top:
            pool = _prefill_memory(sc, cluster, tp, dp, top)
            graphs = float(np.asarray(pool.memory["activations"])) + top * sc.model.vocab * spec.graph_logit_bytes
    else:
        acts += float(np.asarray(ev.memory["logits"])) * rank
        if sizes:
            pool = _prefill_memory(sc, cluster, tp, dp, -(-max(sizes) // dp))
            outputs = sum(-(-b // dp) for b in sizes) * sc.model.hidden * 2.0  # bf16 hidden states per graph
            graphs = float(np.asarray(pool.memory["activations"])) + outputs
    return {"weights": weights, "activations": acts, "cuda_graphs": graphs}


def estimation_blocks(tokens: int, max_seq_len: int, block: int) -> int:
    """KV blocks of the cache TensorRT-LLM sizes its memory estimate on (``_util.py``
    ``KvCacheCreator._get_token_num_for_estimation``): ``tokens`` (``max_num_tokens``) split into dummy requests of at
    most ``max_seq_len - 1`` tokens, each with one generated token more, each rounded up to whole ``block``-token
    blocks (requests do not share blocks)."""
    tokens = max(tokens, 1)
    per_req = max(min(tokens, max_seq_len - 1), 1)
    full, rest = divmod(tokens, per_req)
    return full * -(-(per_req + 1) // block) + (-(-(rest + 1) // block) if rest else 0)


def instance_ep(sc: Scenario, tp: int, dp: int) -> int:
    """Expert-parallel GPUs of a serving instance: all ``dp x tp`` with attention DP (``dp > 1``), else
    ``parallel.ep`` (1, or ``tp``: each expert whole on one of the instance's GPUs; :func:`check_ep`)."""
    return dp * tp if dp > 1 else sc.parallel.ep


def check_ep(sc: Scenario, tp: int, dp: int, field: str = "parallel.ep") -> None:
    """``parallel.ep`` of a serving scenario: 1 (experts as the attention lays them out), or the instance's
    expert-parallel GPUs, ``tp`` without attention DP (experts whole on the TP ranks: TensorRT-LLM's ``--ep``
    with ``moe_tp_size`` 1, vLLM's expert parallelism) or ``attention_dp x tp`` with it; anything else (expert
    TP inside EP, EP across instances) is not modelled."""
    ep = sc.parallel.ep
    if ep == 1 or ep == dp * tp:
        if ep > 1 and sc.model.moe is None:
            raise SpecError(f"ep {ep} needs an MoE model; {sc.model.name} has no experts", field=field)
        return
    want = f"tp ({tp})" if dp == 1 else f"attention_dp x tp ({dp * tp})"
    raise SpecError(
        f"ep {ep}: a serving instance runs each expert whole on its {want} GPUs (ep 1 or {dp * tp}); expert "
        "tensor parallelism inside EP is not modelled",
        field=field,
    )


def _prefill_memory(sc: Scenario, cluster: ClusterInfo, tp: int, dp: int, tokens: int) -> INF.InferenceEval:
    """The engine's evaluation (its ``memory`` parts per GPU) of one prefill step of ``tokens`` tokens on a
    ``tp x pp`` instance whose routed experts span :func:`instance_ep` GPUs: the transient activations a
    step of that many tokens holds, beside the weights."""
    inf = sc.inference
    assert inf is not None
    step = InferenceSpec.model_construct(
        batch=1,
        prompt_len=tokens,
        context_len=1,
        output_len=1,
        precision=inf.precision,
        kv_cache_dtype=inf.kv_cache_dtype,
    )
    return INF.evaluate(
        sc.model,
        step,
        cluster,
        tp,
        sc.parallel.pp,
        sc.runtime.framework,
        sc.calibration,
        **inference_runtime(sc),
        ep=instance_ep(sc, tp, dp),
    )


# --------------------------------------------------------------------------------------------
# requests and instances


class _Req:
    """One request in the system (created at its arrival, dropped when it finishes; its outcome is
    written to the run's arrays)."""

    __slots__ = (
        "i",
        "arrival",
        "prompt",
        "out",
        "cached",
        "computed",
        "target",
        "gen",
        "g0",
        "k_start",
        "ctx_base",
        "blocks",
        "knext",
        "sq",
        "first",
        "sched",
        "epoch",
        "decoding",
        "active",
        "kv_ready",
        "preemptions",
        "prio",
        "group",
        "nodes",
    )

    def __init__(
        self, i: int, arrival: float, prompt: int, out: int, cached: int, prio: int = 0, group: int = -1
    ) -> None:
        self.i = i
        self.arrival = arrival
        self.prompt = prompt
        self.out = out
        self.cached = cached
        self.computed = cached
        self.target = prompt
        self.gen = 0
        self.g0 = 0
        self.k_start = 0
        self.ctx_base = 0
        self.blocks = 0
        self.knext = 0
        self.sq = 0
        self.first = -1.0
        self.sched = -1.0
        self.epoch = 0
        self.decoding = False
        self.active = False
        self.kv_ready = False
        self.preemptions = 0
        self.prio = prio
        self.group = group
        """Shared system prompt the request starts with (-1: none)."""
        self.nodes: list[_Node] = []
        """Prefix-cache blocks the request holds (shared, not counted in ``blocks``)."""


class _Node:
    """A KV block in the prefix cache: its hash, its place in the radix tree, its users."""

    __slots__ = ("children", "key", "parent", "ref")

    def __init__(self, key: Any, parent: _Node | None) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[Any, _Node] = {}
        self.ref = 0


class _PrefixCache:
    """Automatic prefix caching: a radix tree of full KV blocks keyed by block hash (a block's hash
    stands for its tokens and every token before it, so a path from the root is a prompt prefix),
    with reference counts and least-recently-used eviction of unreferenced leaves. A block of a
    shared system prompt is hashed as (prompt group, block index); only those blocks are cached
    (a request's own blocks could only be reused by itself after a preemption)."""

    def __init__(self) -> None:
        self.root = _Node(None, None)
        self.lru: OrderedDict[_Node, None] = OrderedDict()
        """Unreferenced leaves, least recently used first."""
        self.size = 0

    def match(self, group: int, blocks: int) -> list[_Node]:
        """The cached blocks of the first ``blocks`` blocks of ``group``'s prefix, from the root."""
        out: list[_Node] = []
        node = self.root
        for i in range(blocks):
            nxt = node.children.get((group, i))
            if nxt is None:
                break
            out.append(nxt)
            node = nxt
        return out

    def acquire(self, node: _Node) -> None:
        if node.ref == 0:
            self.lru.pop(node, None)
        node.ref += 1

    def release(self, node: _Node) -> None:
        node.ref -= 1
        if node.ref == 0 and not node.children:
            self.lru[node] = None

    def add(self, parent: _Node, key: Any) -> _Node:
        """A new block under ``parent``, referenced once."""
        node = _Node(key, parent)
        parent.children[key] = node
        node.ref = 1
        self.size += 1
        self.lru.pop(parent, None)
        return node

    def evict(self, n: int) -> int:
        """Evict up to ``n`` unreferenced leaf blocks, least recently used first; returns how many."""
        done = 0
        while done < n and self.lru:
            node, _ = self.lru.popitem(last=False)
            parent = node.parent
            assert parent is not None
            del parent.children[node.key]
            self.size -= 1
            done += 1
            if parent is not self.root and parent.ref == 0 and not parent.children:
                self.lru[parent] = None
                self.lru.move_to_end(parent, last=False)  # used no later than its child
        return done


class _KeyedQueue:
    """A waiting queue ordered by a key (lowest first, then arrival), with the methods of the
    ``deque`` that the first-come first-served queue uses; a preempted request put back
    (``appendleft``) takes its place by key."""

    def __init__(self, key: Callable[[_Req], Any]) -> None:
        self.key = key
        self.h: list[tuple[Any, int, _Req]] = []

    def append(self, r: _Req) -> None:
        heapq.heappush(self.h, (self.key(r), r.i, r))

    appendleft = append

    def popleft(self) -> _Req:
        return heapq.heappop(self.h)[2]

    def __getitem__(self, i: int) -> _Req:
        if i != 0:
            raise IndexError(i)
        return self.h[0][2]

    def __len__(self) -> int:
        return len(self.h)


_KEYS: dict[str, Callable[[_Req], Any]] = {
    "priority": lambda r: r.prio,
    "shortest_prompt_first": lambda r: r.prompt,
}


_STEP, _WAKE, _XFER, _ARRIVE = 0, 1, 2, 3
"""Kinds of event in the simulator's queue: an engine step ends, an idle instance is woken, a KV
transfer lands, a closed-loop user sends its next request."""


class _Instance:
    """One model instance (tp x pp GPUs) with its scheduler.

    KV blocks of decoding requests are counted lazily: a decoding request takes a block every
    ``B`` steps, at the steps congruent to its first block step modulo ``B``, so the instance keeps
    the decoding requests in ``B`` buckets by that phase and takes ``len(bucket[k % B])`` blocks at
    step ``k`` in one subtraction; a request's own block count is brought up to date when it
    leaves (or when the free blocks run short and requests are preempted one by one).
    """

    def __init__(self, sim: _Sim, idx: int, role: Role, model: StepModel, blocks: int) -> None:
        self.sim = sim
        self.idx = idx
        self.role = role
        self.m = model
        self.total_blocks = blocks
        self.free = blocks
        self.B = sim.spec.kv_block_tokens
        self.max_batch = sim.spec.max_batch
        self.budget = sim.spec.max_batch_tokens
        self.reserve = sim.spec.reserve_output_kv
        self.prefill_first = sim.spec.step_order == "prefill_first"
        self.by_priority = sim.spec.scheduler == "priority"
        self.graphs = sim.spec.cuda_graph_sizes or []
        self.pad_top = bool(sim.spec.decode_context_buckets)
        """Decode steps attend over the bucket of the longest running context (the engine pads every sequence to
        it), so they are priced at the longest context, not the mean."""
        self.whole = model.separate_prefill
        """Whole prompts, no chunking (``mixed_step: separate``): admitted first come first served while their
        tokens fit ``max_batch_tokens`` (the first one whatever its length)."""
        self.shapes: set[tuple[int, int]] = sim.shapes if sim.shapes is not None else set()
        """Prefill pass shapes ``(prompts, length)`` run so far (``StepModel.shape_setup``)."""
        self.cache = _PrefixCache() if sim.spec.prefix_caching and sim.spec.shared_prefix else None
        self.prefix_tokens = sim.spec.shared_prefix.tokens if sim.spec.shared_prefix else 0
        self.kinc = 1
        """1 when the step under way advances the decodes, 0 for a prefill-only step that leaves them
        waiting (``prefill_first``)."""
        key = _KEYS.get(sim.spec.scheduler)
        self.waiting: deque[_Req] | _KeyedQueue = deque() if key is None else _KeyedQueue(key)
        self.running: dict[_Req, None] = {}
        self.prefilling: list[_Req] = []
        self.nd = 0
        self.S = 0
        self.top = 0
        """The largest ``ctx_base`` of the decoding requests (their longest context at step ``k``: ``top + k``)."""
        self.k = 0
        self.hfin: list[tuple[int, int, int, _Req]] = []
        self.pend: list[tuple[int, int, int, _Req]] = []
        """Decoding requests whose first block step is still ahead: (step, seq, epoch, request)."""
        self.bucket: list[dict[_Req, None]] = [{} for _ in range(self.B)]
        self.kalloc = 0
        """The last step whose blocks have been taken."""
        self.blocked = False
        """The head of the queue could not be admitted and nothing has changed since."""
        self.idle = True
        self.woken = False
        self.dt = 0.0
        self.used = 0
        self.chunks: list[tuple[_Req, int]] = []
        self.load = 0
        # the cache-aware router's view of this instance: the system prompts and prompt tokens routed to it
        self.routed_groups: set[int] = set()
        self.routed_tokens = 0
        self.kv_area = 0.0
        self.kv_peak = 0
        self.busy = 0.0
        self.steps = 0
        self.preempted = 0
        self.nic_free = 0.0
        """When this (prefill) instance's network link finishes its queued KV transfers, s."""
        # what the decode-only loop (:meth:`_decode_run`) reads of the step model at each call
        self._cg, self._ctop, self._hd = model.c_grid, len(model.c_grid) - 2, model.host_decode
        self._cols: dict[int, list[float]] = {}

    # -- queue
    def enqueue(self, r: _Req) -> None:
        self.waiting.append(r)
        self.sim.queue_change(+1)
        self.blocked = False
        self.poke()

    def poke(self) -> None:
        """Wake the instance if it is idle (it plans its next step at the current time)."""
        if self.idle and not self.woken:
            self.woken = True
            self.sim.push(self.sim.now, _WAKE, self)

    # -- decode bookkeeping
    def _enter_decode(self, r: _Req, k_start: int) -> None:
        r.decoding = True
        r.g0 = r.gen
        r.k_start = k_start
        r.ctx_base = r.prompt + r.gen - k_start
        self.nd += 1
        self.S += r.ctx_base
        if self.nd == 1 or r.ctx_base > self.top:
            self.top = r.ctx_base
        sq = self.sim.seq
        self.sim.seq += 1
        r.sq = sq
        heapq.heappush(self.hfin, (k_start + r.out - r.g0 - 1, sq, r.epoch, r))
        r.knext = k_start + (r.blocks + len(r.nodes)) * self.B - (r.prompt + r.g0)
        r.active = False
        heapq.heappush(self.pend, (r.knext, sq, r.epoch, r))

    def _materialize(self, r: _Req) -> None:
        """Add to ``r.blocks`` the blocks it took up to step ``kalloc`` (a decoding request)."""
        if r.active and self.kalloc >= r.knext:
            c = (self.kalloc - r.knext) // self.B + 1
            r.blocks += c
            r.knext += c * self.B

    def _leave(self, r: _Req) -> None:
        if r.decoding:
            if r.active:
                self._materialize(r)
                del self.bucket[r.knext % self.B][r]
                r.active = False
            self.nd -= 1
            self.S -= r.ctx_base
            r.decoding = False
            if self.pad_top and r.ctx_base == self.top:
                self.top = max((q.ctx_base for q in self.running if q.decoding), default=0)
        else:
            self.prefilling.remove(r)
        del self.running[r]
        r.epoch += 1
        self.blocked = False
        if r.nodes:
            self._unshare(r)

    def _unshare(self, r: _Req) -> None:
        """``r`` lets go of its prefix-cache blocks (they stay cached until evicted)."""
        if r.nodes:
            assert self.cache is not None
            for node in r.nodes:
                self.cache.release(node)
            r.nodes = []

    def _cache_prompt(self, r: _Req) -> None:
        """``r``'s prompt is computed: its full blocks of the shared prefix join the prefix cache (a
        block already cached by another request replaces ``r``'s own copy, which is freed)."""
        cache = self.cache
        if cache is None or r.group < 0:
            return
        n = min(self.prefix_tokens, r.prompt - 1) // self.B
        node = r.nodes[-1] if r.nodes else cache.root
        for i in range(len(r.nodes), n):
            key = (r.group, i)
            nxt = node.children.get(key)
            if nxt is None:
                nxt = cache.add(node, key)
            else:
                cache.acquire(nxt)
                self.free += 1
            r.blocks -= 1
            r.nodes.append(nxt)
            node = nxt

    def _reclaim(self, n: int) -> None:
        """Evict up to ``n`` unreferenced prefix-cache blocks into the free pool."""
        if self.cache is not None and n > 0:
            self.free += self.cache.evict(n)

    def _victim(self) -> _Req:
        """The running request to preempt: the newest, or with the ``priority`` scheduler the one of
        the lowest priority (largest class, latest arrival)."""
        if self.by_priority:
            return max(self.running, key=lambda r: (r.prio, r.i))
        return next(reversed(self.running))

    def _preempt(self, v: _Req) -> None:
        if v.decoding:
            v.gen = v.g0 + max(self.k - v.k_start + 1, 0)
        self._leave(v)
        self.free += v.blocks
        v.blocks = 0
        v.target = v.prompt + v.gen
        v.computed = v.cached
        v.kv_ready = False
        v.preemptions += 1
        self.preempted += 1
        self.waiting.appendleft(v)
        self.sim.queue_change(+1)

    def _finish(self, r: _Req) -> None:
        self._leave(r)
        self.free += r.blocks
        r.blocks = 0
        r.gen = r.out
        self.load -= 1
        self.sim.done(r)

    def release(self, r: _Req) -> None:
        """KV of a handed-off request has left this (prefill) instance."""
        self.free += r.blocks
        r.blocks = 0
        self._unshare(r)
        self.blocked = False
        self.poke()

    # -- one step
    def _allocate(self, k: int) -> None:
        """Give every decoding request whose last block is full at step ``k`` a new block."""
        pend = self.pend
        while pend and pend[0][0] <= k:
            kn, _, ep, r = heapq.heappop(pend)
            if ep == r.epoch:
                r.active = True
                self.bucket[kn % self.B][r] = None
        bk = self.bucket[k % self.B]
        a = len(bk)
        if a:
            if a > self.free:
                self._reclaim(a - self.free)
            if a <= self.free:
                self.free -= a
            else:
                self._allocate_short(k, bk)
        self.kalloc = k

    def _allocate_short(self, k: int, bk: dict[_Req, None]) -> None:
        """Not enough free blocks for every request at step ``k``: give them one at a time in the
        order the requests started decoding, preempting the newest running request while none is
        free (it may be the one asking)."""
        for b in self.bucket:
            for r in b:
                self._materialize(r)
        for r in sorted(bk, key=lambda x: x.sq):
            if r not in bk:
                continue
            while self.free < 1:
                v = self._victim()
                self._preempt(v)
                if v is r:
                    break
            if r not in bk:
                continue
            self.free -= 1
            r.blocks += 1
            r.knext += self.B

    def _padded(self, nd: int) -> int:
        """The decode batch a CUDA graph runs for ``nd`` sequences: the next captured size."""
        g = self.graphs
        if not g or nd > g[-1]:
            return nd
        return g[bisect_left(g, nd)]

    def _ctx(self, k: int) -> float:
        """The context a decode step ``k`` is priced at: the longest running one (``pad_top``) or the mean."""
        return float(self.top + k) if self.pad_top else (self.S + self.nd * k) / self.nd

    def _setup(self, chunks: list[tuple[_Req, int]]) -> float:
        """Seconds the step's prefill passes of shapes not run before add (``StepModel.shape_setup``; separate
        passes: one per distinct length, of as many prompts as have that length)."""
        if not (self.m.shape_setup and self.m.separate_prefill and chunks):
            return 0.0
        count: dict[int, int] = {}
        for _, c in chunks:
            count[c] = count.get(c, 0) + 1
        new = {(k, c) for c, k in count.items()} - self.shapes
        self.shapes |= new
        return len(new) * self.m.shape_setup

    def _passes(self, chunks: list[tuple[_Req, int]]) -> int:
        """Prefill passes of a step of these chunks: one, or with ``separate_prefill`` one per distinct chunk
        length (``serving.mixed_step: separate``: prompts of equal length batched in one pass)."""
        return len({c for _, c in chunks}) if self.m.separate_prefill and chunks else 1

    def _plan(self) -> tuple[float, list[tuple[_Req, int]]] | None:
        k = self.k + 1
        self.kinc = 1
        if self.prefill_first and self.nd and (self.prefilling or (self.waiting and not self.blocked)):
            pre = self._admit(k, self.budget)
            if pre[2]:
                self.kinc = 0
                dt = self.m.step_time(0, 0.0, pre[1], pre[0], passes=self._passes(pre[2]))
                return dt + self._setup(pre[2]), pre[2]
        self._allocate(k)
        nd = self.nd
        if nd and not self.prefilling and (self.blocked or not self.waiting):
            bg = self._padded(nd)
            return self.m.decode(bg, padded_slots_context(self._ctx(k), nd, bg)), []
        while True:
            cost, ptok, chunks = self._admit(k, self.budget if self.whole else self.budget - self.nd)
            if self.nd == 0 and not chunks:
                if self.running:
                    # prefills hold blocks and none can grow: recompute the newest later
                    self._preempt(self._victim())
                    continue
                return None
            nd = self.nd
            ctx = self._ctx(k) if nd else 0.0
            dt = self.m.step_time(nd, ctx, ptok, cost, self._padded(nd), self._passes(chunks))
            return dt + self._setup(chunks), chunks

    def _admit(self, k: int, budget: int) -> tuple[float, int, list[tuple[_Req, int]]]:
        """Fill ``budget`` tokens of step ``k`` with prefill chunks: of admitted requests first, then
        of requests admitted from the head of the queue while ``max_batch`` and the free KV blocks
        allow (a request that does not fit stops admission and marks the instance ``blocked``).
        Returns the chunks' attention time (s), their tokens and the ``(request, tokens)`` chunks."""
        B = self.B
        cost = 0.0
        ptok = 0
        chunks: list[tuple[_Req, int]] = []
        for r in self.prefilling:
            if budget <= 0:
                break
            held = r.blocks + len(r.nodes)
            room = self.free + (len(self.cache.lru) if self.cache is not None else 0)
            c = min(r.target - r.computed, budget, (held + room) * B - r.computed - 1)
            if c <= 0:
                continue
            need = -(-(r.computed + c + 1) // B) - held
            if need > self.free:
                self._reclaim(need - self.free)
            if need > 0:
                self.free -= need
                r.blocks += need
            cost += self.m.chunk_attention(r.computed, c)
            ptok += c
            chunks.append((r, c))
            budget -= c
        self.blocked = False
        while self.waiting and budget > 0:
            if len(self.running) >= self.max_batch:
                self.blocked = True
                break
            r = self.waiting[0]
            if r.kv_ready:
                tokens = r.prompt + r.gen + 1
                if self.reserve:
                    tokens = max(tokens, r.prompt + r.out)
                need = -(-tokens // B) - r.blocks
                if need > self.free:
                    self.blocked = True
                    break
                self.waiting.popleft()
                self.sim.queue_change(-1)
                self.free -= need
                r.blocks += need
                self.running[r] = None
                r.kv_ready = False
                self._enter_decode(r, k)
                budget -= 1
                continue
            hit: list[_Node] = []
            if self.cache is not None and r.group >= 0:
                hit = self.cache.match(r.group, min(self.prefix_tokens, r.target - 1) // B)
            done = max(r.computed, len(hit) * B)
            if self.whole and chunks and r.target - done > budget:
                break  # whole prompts: the next one waits for a step with room for it
            c = r.target - done if self.whole else min(r.target - done, budget)
            tokens = done + c + 1
            if self.reserve:  # a prefill instance holds the prompt (and first token) only
                tokens = max(tokens, r.prompt + (1 if self.role == "prefill" else r.out))
            need = -(-tokens // B) - r.blocks - len(hit)
            if need > self.free:
                for node in hit:  # in use from here on: not evictable
                    self.cache.acquire(node)  # type: ignore[union-attr]
                self._reclaim(need - self.free)
                for node in hit:
                    self.cache.release(node)  # type: ignore[union-attr]
                if need > self.free:
                    self.blocked = True
                    break
            for node in hit:
                self.cache.acquire(node)  # type: ignore[union-attr]
            r.nodes = hit
            r.computed = done
            self.waiting.popleft()
            self.sim.queue_change(-1)
            if r.sched < 0:
                r.sched = self.sim.now
            self.free -= need
            r.blocks += need
            self.running[r] = None
            self.prefilling.append(r)
            cost += self.m.chunk_attention(r.computed, c)
            ptok += c
            chunks.append((r, c))
            budget -= c
        return cost, ptok, chunks

    def _complete(self, chunks: list[tuple[_Req, int]]) -> None:
        k = self.k
        now = self.sim.now
        for r, c in chunks:
            r.computed += c
            if r.computed < r.target:
                continue
            r.gen += 1
            if self.cache is not None:
                self._cache_prompt(r)
            if self.role == "prefill":
                self.prefilling.remove(r)
                del self.running[r]
                r.epoch += 1
                self.blocked = False
                self.load -= 1
                if r.gen >= r.out:
                    self.free += r.blocks
                    r.blocks = 0
                    self._unshare(r)
                    r.first = now
                    self.sim.done(r)
                else:
                    self.sim.hand_off(r, self)
                continue
            if r.first < 0:
                r.first = now
            if r.gen >= r.out:
                self._finish(r)
            else:
                self.prefilling.remove(r)
                self._enter_decode(r, k + 1)
        hf = self.hfin
        while hf and hf[0][0] <= k:
            _, _, ep, r = heapq.heappop(hf)
            if ep == r.epoch:
                self._finish(r)

    def end_step(self) -> None:
        """The step under way has ended (at ``sim.now``): account for it and apply it."""
        dt = self.dt
        self.k += self.kinc
        self.steps += 1
        self.busy += dt
        self.kv_area += self.used * dt
        if self.used > self.kv_peak:
            self.kv_peak = self.used
        if self.chunks or (self.hfin and self.hfin[0][0] <= self.k):
            self._complete(self.chunks)

    def run(self) -> None:
        """Plan steps from ``sim.now`` on. A step that ends before anything else happens in the
        simulation (the next arrival or queued event) is applied at once and the next one planned;
        the first that does not is queued. Idle when nothing can run."""
        sim = self.sim
        self.idle = False
        while True:
            lim = sim.limit()  # (planning a step queues no event: the limit holds until it is pushed)
            ran = self._decode_run(lim)
            if ran is None:
                return
            if ran:
                continue
            plan = self._plan()
            if plan is None:
                self.idle = True
                return
            self.dt, self.chunks = plan
            self.used = self.total_blocks - self.free
            t_end = sim.now + self.dt
            if t_end >= lim:
                sim.push(t_end, _STEP, self)
                return
            sim.now = t_end
            self.end_step()

    def _decode_run(self, lim: float) -> bool | None:
        """Run decode-only steps (the same requests, no prefill, nothing admissible waiting) that end
        before ``lim`` -- the same arithmetic as :meth:`_plan` and :meth:`end_step`, without their
        general case. Returns ``True`` after a step that finishes a request, ``False`` when no step
        could run this way (the general path plans the next), ``None`` once it has queued the first
        step that ends at or after ``lim``."""
        nd = self.nd
        if not nd or self.prefilling or (self.waiting and not self.blocked):
            return False
        col = self._cols.get(nd)  # the decode batch's column of step times (its CUDA graph's size)
        if col is None:
            col = self._cols[nd] = self.m.column(self._padded(nd))
        share = nd / self._padded(nd)  # the padding rows read no KV (padded_slots_context)
        cg = self._cg
        jtop = self._ctop
        hd = self._hd
        B = self.B
        bucket = self.bucket
        pend = self.pend
        kpend = pend[0][0] if pend else math.inf
        kfin = self.hfin[0][0]
        S = self.S
        top = self.top if self.pad_top else None
        tot = self.total_blocks
        free = self.free
        sim = self.sim
        now = sim.now
        busy = self.busy
        area = self.kv_area
        peak = self.kv_peak
        k = k0 = self.k
        j = bisect_right(cg, self._ctx(k + 1) * share) - 1
        j = 0 if j < 0 else (jtop if j > jtop else j)
        c0, lo = cg[j], col[j]
        dlo, dc = col[j + 1] - lo, cg[j + 1] - c0
        c1 = cg[j + 1] if j < jtop else math.inf  # (the last segment extends beyond the grid)
        used = peak  # blocks in use after the last step run; used only grows in the loop (peak after it)
        queued = False
        while True:
            k += 1
            if k >= kpend:
                while pend and pend[0][0] <= k:
                    kn, _, ep, r = heapq.heappop(pend)
                    if ep == r.epoch:
                        r.active = True
                        bucket[kn % B][r] = None
                kpend = pend[0][0] if pend else math.inf
            a = len(bucket[k % B])
            if a > free:
                k -= 1
                break
            free -= a
            ctx = ((S + nd * k) / nd if top is None else float(top + k)) * share
            if ctx >= c1:
                while j < jtop and cg[j + 1] <= ctx:
                    j += 1
                c0, lo = cg[j], col[j]
                dlo, dc = col[j + 1] - lo, cg[j + 1] - c0
                c1 = cg[j + 1] if j < jtop else math.inf
            dt = lo + dlo * ((ctx - c0) / dc)
            if dt < hd:
                dt = hd
            t_end = now + dt
            if t_end >= lim:
                self.kalloc = k
                self.dt = dt
                self.used = tot - free
                self.chunks = []
                self.kinc = 1
                sim.push(t_end, _STEP, self)
                queued = True
                k -= 1
                break
            now = t_end
            busy += dt
            used = tot - free
            area += used * dt
            if k >= kfin:
                break
        if used > peak:
            peak = used
        if not queued:
            self.kalloc = k
        self.free = free
        sim.now = now
        self.busy = busy
        self.kv_area = area
        self.kv_peak = peak
        self.steps += k - k0
        self.k = k
        if queued:
            return None
        if k >= kfin and k > k0:
            self._complete([])
            return True
        return False


class _Sim:
    """The event loop: arrivals in time order (from the workload arrays, made into requests as they
    arrive) merged with a heap of timed events (step ends, wake-ups, KV transfers); ties go to the
    event queued first, and queued events before an arrival at the same time. Each request's outcome
    is written to arrays indexed by arrival order."""

    CHUNK = 65536

    def __init__(
        self,
        spec: ServingSpec,
        arrival: np.ndarray,
        prompt: np.ndarray,
        output: np.ndarray,
        cached: np.ndarray,
        prio: np.ndarray,
        group: np.ndarray,
    ) -> None:
        self.spec = spec
        n = int(arrival.size)
        self.n = n
        self.arrays = (arrival, prompt, output, cached, prio, group)
        self.shapes: set[tuple[int, int]] | None = None
        """The prefill pass shapes the engine ran before this run (:func:`simulate`'s ``shapes``)."""
        self.first = np.full(n, -1.0)
        self.finish = np.full(n, -1.0)
        self.sched = np.full(n, -1.0)
        self.npre = np.zeros(n, dtype=np.int64)
        self.now = 0.0
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.events = 0
        self.completed = 0
        self.in_system = 0
        self.queued = 0
        self.last_t = 0.0
        self.area_sys = 0.0
        self.area_q = 0.0
        self.max_sys = 0
        self.max_q = 0
        self.front: list[_Instance] = []
        self.back: list[_Instance] = []
        self.rr = [0, 0]
        self.xfer: np.ndarray = np.zeros(0)
        self._ai = 0
        self.closed = spec.concurrency if spec.concurrency is not None else n
        """Next request a closed-loop user sends (``n``: none, arrivals come from the arrays)."""
        self._chunk: tuple[list[float], list[int], list[int], list[int], list[int], list[int]] = (
            [],
            [],
            [],
            [],
            [],
            [],
        )
        self._c0 = 0
        self.ta = math.inf
        self._load_chunk()

    def _load_chunk(self) -> None:
        """Next slice of the workload arrays as Python lists (memory stays bounded by the slice)."""
        a, p, o, c, q, g = self.arrays
        s = slice(self._ai, self._ai + self.CHUNK)
        self._chunk = (
            a[s].tolist(),
            p[s].tolist(),
            o[s].tolist(),
            c[s].tolist(),
            q[s].tolist(),
            g[s].tolist(),
        )
        self._c0 = self._ai
        self.ta = self._chunk[0][0] if self._ai < self.n else math.inf

    def push(self, t: float, kind: int, obj: Any) -> None:
        heapq.heappush(self.heap, (t, self.seq, kind, obj))
        self.seq += 1

    def limit(self) -> float:
        """Time of the next thing to happen outside the instance being stepped, s."""
        h = self.heap
        return h[0][0] if h and h[0][0] < self.ta else self.ta

    def run(self) -> None:
        """Run until every request has finished."""
        heap = self.heap
        while self.completed < self.n:
            if heap and heap[0][0] <= self.ta:
                t, _, kind, obj = heapq.heappop(heap)
                self.now = t
                self.events += 1
                if kind == _STEP:
                    obj.end_step()
                    obj.run()
                elif kind == _WAKE:
                    obj.woken = False
                    obj.run()
                elif kind == _ARRIVE:
                    self.arrive(self._request(obj))
                else:
                    r, src = obj
                    src.release(r)
                    r.first = t
                    r.kv_ready = True
                    self.route(self.back, 1).enqueue(r)
            else:
                self._arrivals()
        self._mark()

    def _arrivals(self) -> None:
        """Every request arriving at the next arrival time."""
        t = self.ta
        self.now = t
        while self.ta == t:
            a, p, o, c, q, g = self._chunk
            j = self._ai - self._c0
            r = _Req(self._ai, a[j], p[j], o[j], c[j], q[j], g[j])
            self._ai += 1
            self.events += 1
            if self._ai - self._c0 < len(a):
                self.ta = a[j + 1]
            else:
                self._load_chunk()
            self.arrive(r)

    def _request(self, i: int) -> _Req:
        """Request ``i`` read from the workload arrays (a closed-loop arrival)."""
        a, p, o, c, q, g = self.arrays
        return _Req(i, float(a[i]), int(p[i]), int(o[i]), int(c[i]), int(q[i]), int(g[i]))

    def _mark(self) -> None:
        now = self.now
        dt = now - self.last_t
        self.area_sys += self.in_system * dt
        self.area_q += self.queued * dt
        self.last_t = now

    def queue_change(self, d: int) -> None:
        self._mark()
        self.queued += d
        if self.queued > self.max_q:
            self.max_q = self.queued

    def route(self, pool: list[_Instance], which: int, r: _Req | None = None) -> _Instance:
        if len(pool) == 1:
            inst = pool[0]
        elif self.spec.router == "round_robin":
            inst = pool[self.rr[which] % len(pool)]
            self.rr[which] += 1
        elif self.spec.router == "cache_aware" and r is not None:
            inst = self._cache_aware(pool, r)
        else:
            inst = min(pool, key=lambda x: x.load)
        inst.load += 1
        return inst

    def _cache_aware(self, pool: list[_Instance], r: _Req) -> _Instance:
        """SGLang router's ``cache_aware`` policy (sgl-router README, "Cache-Aware Load-Balancing Router"): while
        the loads are balanced, the instance whose router tree (the prompts routed to it so far) matches most of
        the prompt when more than :data:`CACHE_THRESHOLD` of it matches, else the instance with the smallest tree
        (most cache room); when imbalanced (max - min load above :data:`BALANCE_ABS` and max above
        :data:`BALANCE_REL` x min) the least loaded. A prompt matches its shared system prompt on an instance
        that was routed that prompt before (``serving.shared_prefix``); the trees are never evicted (the
        router's 16.8 M-node default)."""
        loads = [x.load for x in pool]
        lo, hi = min(loads), max(loads)
        if hi - lo > BALANCE_ABS and hi > BALANCE_REL * lo:
            return pool[loads.index(lo)]
        shared = self.spec.shared_prefix.tokens if self.spec.shared_prefix is not None else 0
        rate = shared / r.prompt if shared and r.prompt > 0 else 0.0
        if rate > CACHE_THRESHOLD:
            seen = [x for x in pool if r.group in x.routed_groups]
            if seen:
                best = min(seen, key=lambda x: x.load)
                best.routed_tokens += r.prompt - shared
                return best
        inst = min(pool, key=lambda x: (x.routed_tokens, x.load))
        inst.routed_tokens += r.prompt - (shared if r.group in inst.routed_groups else 0)
        if shared:
            inst.routed_groups.add(r.group)
        return inst

    def arrive(self, r: _Req) -> None:
        """``r`` enters the system and the queue of the instance it is routed to."""
        self._mark()
        self.in_system += 1
        if self.in_system > self.max_sys:
            self.max_sys = self.in_system
        self.queued += 1
        if self.queued > self.max_q:
            self.max_q = self.queued
        inst = self.route(self.front, 0, r)
        inst.waiting.append(r)
        inst.blocked = False
        inst.poke()

    def done(self, r: _Req) -> None:
        self._mark()
        self.in_system -= 1
        i = r.i
        self.first[i] = r.first
        self.finish[i] = self.now
        self.sched[i] = r.sched
        self.npre[i] = r.preemptions
        self.completed += 1
        if self.closed < self.n:  # the user sends its next request now
            self.arrays[0][self.closed] = self.now
            self.push(self.now, _ARRIVE, self.closed)
            self.closed += 1

    def hand_off(self, r: _Req, src: _Instance) -> None:
        """Queue the KV transfer of ``r`` on ``src``'s link (one transfer at a time, in order)."""
        start = max(self.now, src.nic_free)
        src.nic_free = start + float(self.xfer[r.i])
        self.push(src.nic_free, _XFER, (r, src))


# --------------------------------------------------------------------------------------------
# results


class Stats(BaseModel):
    """Summary of a latency distribution, seconds."""

    model_config = ConfigDict(frozen=True)

    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class ServingResult(BaseModel):
    """Outcome of a serving simulation (seconds, requests/s, tokens/s; SI units)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["serving"] = "serving"
    device: str
    gpus: int
    instances: dict[str, int]
    """Model instances by role (``mixed``, or ``prefill`` and ``decode``)."""
    layout: dict[str, Any]
    requests: int
    offered_rate: float | None
    """Arrival rate asked for (requests/s); ``None`` for a trace."""
    duration_s: float
    """From the first arrival to the last completion (seconds)."""
    requests_per_s: float
    """Requests completed per second over the run, first arrival to last completion (as vLLM's
    ``benchmark_serving`` counts it: the drain after the last arrival is included)."""
    steady_requests_per_s: float | None
    """Completions per second over the second half of the arrival window: the service capacity when
    saturated, the arrival rate otherwise, free of warm-up and drain (``None`` for fewer than 20
    requests or simultaneous arrivals)."""
    input_tokens_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    ttft_s: Stats
    tpot_s: Stats
    """Mean time per output token after the first, per request (requests with one output token
    are left out)."""
    e2e_s: Stats
    queue_wait_s: Stats
    """From arrival to the first scheduled prefill chunk."""
    goodput: float
    """Requests/s that met every SLO given."""
    slo_attainment: float
    """Fraction of requests that met every SLO given."""
    mean_in_system: float
    """Time-averaged requests in the system (queued or running)."""
    max_in_system: int
    mean_queue: float
    """Time-averaged requests waiting for admission."""
    max_queue: int
    kv_blocks_per_instance: dict[str, int]
    kv_tokens_per_instance: dict[str, int]
    kv_utilization: float
    """Time-averaged fraction of KV blocks in use, over instances and the whole run."""
    kv_peak_utilization: float
    busy_fraction: float
    """Fraction of instance-time spent running steps."""
    preemptions: int
    steps: int
    events: int
    """Events the simulator processed: arrivals, and steps, wake-ups and KV transfers that had to
    wait their turn behind other events (a step that ends before anything else happens is applied
    without queueing)."""
    memory_per_gpu: dict[str, float]
    settings: dict[str, Any] = {}
    """The scheduler and KV-cache settings the run assumed (``engine``: the profile they came from,
    ``None`` for the serving section's own defaults)."""
    calibration: str | None
    notes: list[str] = []


@dataclass
class RequestLog:
    """Per-request arrays (seconds, tokens), in arrival order."""

    arrival: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    preemptions: np.ndarray
    priority: np.ndarray | None = None
    """Priority class of each request (``serving.priority_mix``)."""

    @property
    def ttft(self) -> np.ndarray:
        return np.asarray(self.first_token - self.arrival, dtype=float)

    @property
    def e2e(self) -> np.ndarray:
        return np.asarray(self.finish - self.arrival, dtype=float)

    @property
    def tpot(self) -> np.ndarray:
        """Mean inter-token time of each request (NaN for a single output token)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.output > 1, (self.finish - self.first_token) / (self.output - 1), np.nan)


@dataclass
class ServingRun:
    """A simulation's summary, its per-request log and the simulator's own wall time (s)."""

    result: ServingResult
    log: RequestLog
    wall_s: float
    step_models: dict[str, StepModel] = field(default_factory=dict)
    kv_blocks_leaked: int = 0
    """KV blocks still held when every request has finished (a consistency check: 0)."""


def _stats(x: np.ndarray) -> Stats:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return Stats(mean=0.0, p50=0.0, p90=0.0, p99=0.0, max=0.0)
    q = np.percentile(x, [50, 90, 99])
    return Stats(mean=float(x.mean()), p50=float(q[0]), p90=float(q[1]), p99=float(q[2]), max=float(x.max()))


# --------------------------------------------------------------------------------------------
# workload


def _workload(
    spec: ServingSpec, seq_len: int, model: str = "the model"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrival times (s), prompt and output lengths (tokens), and each request's shared system prompt
    (-1: none; ``serving.shared_prefix``, drawn from a random stream of its own and prepended to the
    prompt). A request whose prompt + output exceeds the model's context (``seq_len``) is a
    :class:`SpecError` naming the length field: it is never clipped to a different workload
    (docs/serving.md, contexts and precisions)."""
    rng = np.random.default_rng(spec.seed)
    if spec.trace is not None:
        t, p, o = load_trace(spec.trace)
        keep = np.ones(t.size, dtype=bool)
        if spec.duration_s is not None:
            keep &= t <= spec.duration_s
        t, p, o = t[keep], p[keep], o[keep]
        if spec.requests is not None:
            t, p, o = t[: spec.requests], p[: spec.requests], o[: spec.requests]
        if t.size == 0:
            raise SpecError("no trace request arrives within duration_s", field="serving.duration_s")
    elif spec.concurrency is not None:
        n = spec.requests if spec.requests is not None else 1000
        # the first `concurrency` requests arrive at once, each later one when a request finishes
        t = np.where(np.arange(n) < spec.concurrency, 0.0, np.inf)
        p = spec.prompt.sample(rng, n)
        o = spec.output.sample(rng, n)
    else:
        assert spec.rate is not None
        cv2 = spec.arrival_cv**2
        if spec.requests is not None:
            n = spec.requests
        elif spec.duration_s is not None:
            n = int(
                spec.rate * spec.duration_s * 1.2 + 10 * math.sqrt(spec.rate * spec.duration_s * cv2) + 10
            )
        else:
            n = 1000
        gaps = rng.gamma(1.0 / cv2, cv2 / spec.rate, size=n)
        t = np.cumsum(gaps)
        if spec.duration_s is not None:
            while t[-1] <= spec.duration_s and spec.requests is None:
                more = np.cumsum(rng.gamma(1.0 / cv2, cv2 / spec.rate, size=n)) + t[-1]
                t = np.concatenate([t, more])
            t = t[t <= spec.duration_s]
            if t.size == 0:
                raise SpecError("no request arrives within duration_s", field="serving.duration_s")
        n = t.size
        p = spec.prompt.sample(rng, n)
        o = spec.output.sample(rng, n)
    group = np.full(t.size, -1, dtype=np.int64)
    if spec.shared_prefix is not None:
        group = np.random.default_rng([spec.seed, 2]).integers(0, spec.shared_prefix.groups, size=t.size)
        p = p + spec.shared_prefix.tokens
    over = (p + o) > seq_len
    if np.any(over):
        i = int(np.argmax(np.where(over, p + o, 0)))
        field = (
            "serving.trace"
            if spec.trace is not None
            else ("serving.prompt" if p[i] >= seq_len else "serving.output")
        )
        raise SpecError(
            f"{int(np.count_nonzero(over))} request(s) exceed {model}'s context of {seq_len} tokens "
            f"(model.seq_len), the longest {int(p[i])} prompt + {int(o[i])} output tokens; "
            "shorten them or choose a longer-context model",
            field=field,
        )
    return t.astype(float), p.astype(np.int64), o.astype(np.int64), group.astype(np.int64)


def _priorities(spec: ServingSpec, n: int) -> np.ndarray:
    """Each request's priority class (0 first), drawn from ``spec.priority_mix`` with a random
    stream of its own (the arrivals and lengths stay those of the same seed without it)."""
    if spec.priority_mix is None:
        return np.zeros(n, dtype=np.int64)
    w = np.asarray(spec.priority_mix, dtype=float)
    rng = np.random.default_rng([spec.seed, 1])
    return rng.choice(w.size, size=n, p=w / w.sum()).astype(np.int64)


# --------------------------------------------------------------------------------------------
# entry points


CACHE_THRESHOLD = 0.5
"""sgl-router ``--cache-threshold`` default: the prefix match rate above which a request follows its cache."""
BALANCE_ABS = 32
"""sgl-router ``--balance-abs-threshold`` default (requests)."""
BALANCE_REL = 1.0001
"""sgl-router ``--balance-rel-threshold`` default."""

Pool = tuple[Role, int, int, int]
"""One pool of identical instances: (role, instances, tp, attention DP ranks of an instance)."""


def _pools(sc: Scenario, spec: ServingSpec, cluster: ClusterInfo, notes: list[str]) -> list[Pool]:
    """The instance pools: one ``mixed`` pool of ``serving.replicas`` (default: as many as the cluster
    holds) tp x pp instances, or a ``prefill`` and a ``decode`` pool (``serving.disaggregated``). Each
    pool's tp must divide the heads (:func:`~simcore.workload.layout.valid_layouts`), and the pools
    must fit the cluster."""
    m = sc.model
    pp = sc.parallel.pp
    dis = spec.disaggregated
    if dis is None:
        tp, dp = sc.parallel.tp, spec.attention_dp
        valid_layouts(m, tp=tp).require()
        check_ep(sc, tp, dp)
        per = dp * tp * pp
        reps = spec.replicas if spec.replicas is not None else max(cluster.gpus // per, 1)
        if reps * per > cluster.gpus:
            raise SpecError(
                f"{reps} replica(s) of attention_dp*tp*pp = {per} GPUs need {reps * per} GPUs; the cluster has "
                f"{cluster.gpus}",
                field="serving.replicas",
            )
        return [("mixed", reps, tp, dp)]
    pools: list[Pool] = []
    sides: tuple[tuple[Role, int, int, int], ...] = (  # (role, GPUs, tp, attention DP)
        (
            "prefill",
            dis.prefill_gpus,
            dis.prefill_tp or sc.parallel.tp,
            dis.prefill_attention_dp or spec.attention_dp,
        ),
        (
            "decode",
            dis.decode_gpus,
            dis.decode_tp or sc.parallel.tp,
            dis.decode_attention_dp or spec.attention_dp,
        ),
    )
    for role, gpus, tpx, dp in sides:
        valid_layouts(m, tp=tpx).require(field=f"serving.disaggregated.{role}_tp")
        check_ep(sc, tpx, dp)
        if gpus % (dp * tpx * pp):
            raise SpecError(
                f"{role}_gpus ({gpus}) is not a multiple of {role}_{'tp*pp' if dp == 1 else 'attention_dp*tp*pp'} "
                f"({dp * tpx * pp})",
                field=f"serving.disaggregated.{role}_gpus",
            )
        pools.append((role, gpus // (dp * tpx * pp), tpx, dp))
    if dis.prefill_gpus + dis.decode_gpus > cluster.gpus:
        raise SpecError(
            f"prefill_gpus + decode_gpus ({dis.prefill_gpus + dis.decode_gpus}) exceed the cluster's "
            f"{cluster.gpus} GPUs",
            field="serving.disaggregated",
        )
    if spec.replicas is not None:
        notes.append("serving.replicas is ignored with disaggregated pools")
    return pools


@dataclass
class _Fleet:
    """The instances' step models, KV blocks and memory by role, and the GPUs they take."""

    models: dict[str, StepModel]
    blocks: dict[str, int]
    memory: dict[str, dict[str, float]]
    gpus: int


def _place(
    sim: _Sim,
    sc: Scenario,
    spec: ServingSpec,
    cluster: ClusterInfo,
    pools: list[Pool],
    lengths: tuple[int, int, int],
    prof: StepProfile | None = None,
) -> _Fleet:
    """Build every pool's instances into ``sim`` (one step model per tp: the roofline's, or ``prof``'s, the
    scenario's checked step profile). ``lengths``: the longest request, the longest prompt (tokens) and the
    longest context a step model samples; an instance's KV cache must hold the longest request it serves (a
    prefill instance: the longest prompt)."""
    longest, longest_prompt, max_len = lengths
    fleet = _Fleet({}, {}, {}, 0)
    for role, count, tpx, dp in pools:
        key = f"tp{tpx}" if dp == 1 else f"tp{tpx}-dp{dp}"
        draft = draft_scenario(sc, spec) if role != "prefill" else None
        if key not in fleet.models:
            fleet.models[key] = (
                build_step_model(
                    sc, cluster, tpx, spec.max_batch, max_len, spec.max_batch_tokens, spec, dp, instance_ep(sc, tpx, dp)
                )
                if prof is None
                else profile_step_model(prof, spec.max_batch, max_len, spec.max_batch_tokens, spec)
            )
        model = fleet.models[key]
        if draft is not None and spec.speculative is not None:
            dkey = f"{key}-speculative"
            if dkey not in fleet.models:
                dm = build_step_model(
                    draft, cluster, tpx, spec.max_batch, max_len, spec.max_batch_tokens, None, dp
                )
                fleet.models[dkey] = speculative_step_model(
                    model, dm, spec.speculative.tokens, spec.speculative.tokens_per_round
                )
            model = fleet.models[dkey]
        rank_blocks, mem = kv_blocks(sc, cluster, spec, tpx, draft, dp, max_len)
        # a request lives on one attention-DP rank: its cache must fit one rank's blocks
        cap_tokens = rank_blocks * spec.kv_block_tokens
        blocks = rank_blocks * dp
        need = longest + 1 if role != "prefill" else longest_prompt + 1
        if cap_tokens < need:
            raise SpecError(
                f"the KV cache of a tp={tpx} {'instance' if dp == 1 else 'attention-DP rank'} holds {cap_tokens} tokens "
                f"({mem['usable'] / 2**30:.1f} GiB usable, weights {mem['weights'] / 2**30:.1f} GiB per GPU), "
                f"less than the longest request ({need} tokens)",
                field="serving",
            )
        fleet.blocks[role] = blocks
        fleet.memory[role] = mem
        fleet.gpus += count * dp * tpx * sc.parallel.pp
        pool = sim.back if role == "decode" else sim.front
        for _ in range(count):
            pool.append(_Instance(sim, len(pool), role, model, blocks))
    return fleet


def _kv_transfers(sc: Scenario, spec: ServingSpec, cluster: ClusterInfo, prompt: np.ndarray) -> np.ndarray:
    """Seconds to move each request's KV cache from its prefill to its decode instance
    (:func:`~simcore.comm.collectives.kv_transfer_time`; disaggregated pools only)."""
    dis = spec.disaggregated
    assert dis is not None
    m = sc.model
    nbytes = np.asarray(MEM.kv_cache_bytes(m, 1, prompt + 1, 1, _kv_dtype_bytes(sc)), dtype=float)
    return np.asarray(
        kv_transfer_time(
            nbytes,
            cluster,
            src_tp=dis.prefill_tp or sc.parallel.tp,
            dst_tp=dis.decode_tp or sc.parallel.tp,
            same_domain=dis.prefill_gpus + dis.decode_gpus <= cluster.system.gpus,
            transfers=dis.transfers_per_request or m.layers,
            gpudirect=dis.gpudirect,
        ),
        dtype=float,
    ) * np.ones(prompt.size)


def _result(
    sc: Scenario,
    spec: ServingSpec,
    cluster: ClusterInfo,
    sim: _Sim,
    log: RequestLog,
    sched: np.ndarray,
    pools: list[Pool],
    fleet: _Fleet,
    notes: list[str],
) -> ServingResult:
    """Summarise a finished run: throughput over first arrival to last completion, latency
    percentiles, SLO goodput, queue and KV-cache occupancy; adds the notes on saturation,
    preemption and pipeline stages."""
    arrival, prompt, output = log.arrival, log.prompt, log.output
    n = int(arrival.size)
    pp = sc.parallel.pp
    t0 = float(arrival.min())
    span = max(float(log.finish.max()) - t0, 1e-12)
    ttft, tpot, e2e = log.ttft, log.tpot, log.e2e
    ok = np.ones(n, dtype=bool)
    if spec.slo.ttft_s is not None:
        ok &= ttft <= spec.slo.ttft_s
    if spec.slo.tpot_s is not None:
        ok &= ~(tpot > spec.slo.tpot_s)  # NaN (one output token) passes
    insts = sim.front + sim.back
    kv_area = sum(i.kv_area / max(i.total_blocks, 1) for i in insts)
    offered = spec.rate if spec.trace is None else None
    rps = n / span
    # steady state: completions against arrivals over the second half of the arrival window
    t1 = float(arrival.max())
    steady: float | None = None
    if n >= 20 and t1 - t0 > 0.0:
        tm = t0 + 0.5 * (t1 - t0)
        half = t1 - tm
        steady = float(np.count_nonzero((log.finish > tm) & (log.finish <= t1))) / half
        arriving = float(np.count_nonzero(arrival > tm)) / half
        if n >= 200 and steady < 0.9 * arriving:
            notes.append(
                f"{SATURATED}: {steady:.3g} requests/s complete while {arriving:.3g} arrive (second half of the "
                "arrivals); the queue grows through the run and latencies depend on how many requests are simulated"
            )
    pre = sum(i.preempted for i in insts)
    if pre:
        notes.append(f"{pre} preemption(s) for lack of KV blocks (recomputed)")
    if pp > 1:
        notes.append("pipeline stages run one batch at a time (no micro-batching across steps)")
    layout: dict[str, Any] = {"tp": sc.parallel.tp, "pp": pp}
    if spec.disaggregated is not None:
        layout = {"prefill_tp": pools[0][2], "decode_tp": pools[1][2], "pp": pp}
    for role, _, tpx, dp in pools:
        if dp > 1:
            layout[f"{role}_attention_dp"] = dp
        if instance_ep(sc, tpx, dp) > 1:
            layout[f"{role}_ep"] = instance_ep(sc, tpx, dp)
    gpus = fleet.gpus
    return ServingResult(
        name=sc.name,
        device=cluster.device.name,
        gpus=gpus,
        instances={role: cnt for role, cnt, _, _ in pools},
        layout=layout,
        requests=n,
        offered_rate=offered,
        duration_s=span,
        requests_per_s=rps,
        steady_requests_per_s=steady,
        input_tokens_per_s=float(prompt.sum()) / span,
        output_tokens_per_s=float(output.sum()) / span,
        output_tokens_per_s_per_gpu=float(output.sum()) / span / gpus,
        ttft_s=_stats(ttft),
        tpot_s=_stats(tpot),
        e2e_s=_stats(e2e),
        queue_wait_s=_stats(sched[sched >= 0] - arrival[sched >= 0]),
        goodput=float(ok.sum()) / span,
        slo_attainment=float(ok.mean()),
        mean_in_system=sim.area_sys / span,
        max_in_system=sim.max_sys,
        mean_queue=sim.area_q / span,
        max_queue=sim.max_q,
        kv_blocks_per_instance=fleet.blocks,
        kv_tokens_per_instance={k: v * spec.kv_block_tokens for k, v in fleet.blocks.items()},
        kv_utilization=kv_area / (len(insts) * span),
        kv_peak_utilization=max(i.kv_peak / max(i.total_blocks, 1) for i in insts),
        busy_fraction=sum(i.busy for i in insts) / (len(insts) * span),
        preemptions=pre,
        steps=sum(i.steps for i in insts),
        events=sim.events,
        memory_per_gpu=fleet.memory[pools[-1][0]],
        settings={
            "engine": spec.engine,
            "stack": sc.runtime.stack,
            **{k: getattr(spec, k) for k in ENGINE_FIELDS},
        },
        calibration=sc.calibration,
        notes=notes,
    )


def simulate(sc: Scenario, spec: ServingSpec, shapes: set[tuple[int, int]] | None = None) -> ServingRun:
    """Simulate serving ``sc``'s model on its cluster under ``spec``'s load; deterministic for a
    given ``spec.seed``. ``shapes``: the prefill pass shapes ``(prompts, length)`` the engine has already run, for
    a step profile that prices a new shape's setup (an engine serving run after run); updated in place, shared by
    the instances. The steps: the request workload (:func:`_workload`), the instance pools
    (:func:`_pools`) and their instances (:func:`_place`), the KV transfers of disaggregated pools
    (:func:`_kv_transfers`), the event simulation (:func:`_run`) and its summary (:func:`_result`)."""
    wall0 = time.perf_counter()
    sc, spec, chosen = with_serving_stack(sc, spec)
    cluster = resolve_cluster(sc.cluster, default_registry())
    spec = with_engine(spec, cluster.device.name, cluster.device.memory.capacity, cluster.system.multi_node_nvlink)
    m = sc.model
    notes: list[str] = []
    if chosen:
        vals = ", ".join(f"{c.key}={c.value}" for c in chosen)
        notes.append(f"stack {sc.runtime.stack} defaults (not given by the scenario): {vals}")
    if sc.inference is None:
        raise SpecError("needs the inference settings (precision, kv_cache_dtype)", field="inference")
    valid_layouts(m, pp=sc.parallel.pp).require()
    arrival, prompt, output, group = _workload(spec, m.seq_len, m.name)
    n = int(arrival.size)
    pools = _pools(sc, spec, cluster, notes)
    prof = step_profile(sc, spec, cluster.device.name)
    if prof is not None:
        notes.append(
            f"steps priced by the measured step profile {prof.name} ({prof.engine} engine on {prof.gpu}; decode fit "
            f"rms {prof.decode.rms_rel:.1%}, prefill fit rms {prof.prefill.rms_rel:.1%}), not the roofline"
        )
    longest = int((prompt + output).max())
    max_len = int(min(m.seq_len, max(longest + 1, 2)))
    cached = np.minimum(np.floor(spec.prefix_cache_hit * prompt).astype(np.int64), prompt - 1)
    prio = _priorities(spec, n)
    sim = _Sim(spec, arrival, prompt, output, cached, prio, group)
    sim.shapes = shapes
    fleet = _place(sim, sc, spec, cluster, pools, (longest, int(prompt.max()), max_len), prof)
    if spec.disaggregated is not None:
        sim.xfer = _kv_transfers(sc, spec, cluster, prompt)
    sim.run()
    log = RequestLog(
        arrival=arrival,
        first_token=sim.first,
        finish=sim.finish,
        prompt=prompt,
        output=output,
        preemptions=sim.npre,
        priority=prio,
    )
    res = _result(sc, spec, cluster, sim, log, sim.sched, pools, fleet, notes)
    insts = sim.front + sim.back
    return ServingRun(
        result=res,
        log=log,
        wall_s=time.perf_counter() - wall0,
        step_models=fleet.models,
        kv_blocks_leaked=sum(i.total_blocks - i.free - (i.cache.size if i.cache else 0) for i in insts),
    )


def serve(
    scenario: str | os.PathLike[str] | dict[str, Any] | Scenario,
    spec: ServingSpec | dict[str, Any] | None = None,
    overrides: list[str] | tuple[str, ...] | str | None = None,
) -> ServingResult:
    """Simulate a ``kind: serving`` scenario: a file path or built-in name, a dict of a scenario
    file's fields, or a loaded :class:`Scenario`.

    ``spec`` replaces the scenario's ``serving`` section (a :class:`ServingSpec` or a dict of its
    fields); ``overrides`` are ``--set``-style ``key.path=value`` strings applied while loading, so
    they take a path, a name or a dict, not a loaded Scenario. A bad argument raises a one-line
    :class:`~simcore.errors.SpecError` naming it.
    """
    sc, own = _serving_scenario(scenario, overrides)
    return simulate(sc, _serving_spec(spec, own)).result


def _serving_scenario(scenario: Any, overrides: Any) -> tuple[Scenario, ServingSpec | None]:
    """The scenario :func:`serve` runs and its own serving section (a relative trace path made
    relative to the scenario file)."""
    from simcore.serving.spec import load_serving
    from simcore.specs.resolve import load_scenario

    todo = () if overrides is None else overrides
    if isinstance(scenario, Scenario):
        if not isinstance(todo, str | list | tuple):
            raise SpecError(
                f"expected a list of 'key.path=value' strings, got {type(todo).__name__}", field="overrides"
            )
        if todo:
            raise SpecError(
                "applied while loading: pass the scenario's path, name or dict of fields, "
                "not a loaded Scenario",
                field="overrides",
            )
        return scenario, scenario.serving
    if isinstance(scenario, str | os.PathLike):
        return load_serving(os.fspath(scenario), todo)
    if isinstance(scenario, dict):
        sc = load_scenario(scenario, todo)
        if sc.kind != "serving" or sc.serving is None:
            raise SpecError(f"simcore serve needs kind: serving, got {sc.kind!r}", field="kind")
        return sc, sc.serving
    raise SpecError(
        "expected a Scenario, a scenario file path or built-in name, or a dict of its fields, "
        f"got {type(scenario).__name__}",
        field="scenario",
    )


def _serving_spec(spec: Any, own: ServingSpec | None) -> ServingSpec:
    if spec is None:
        if own is None:
            raise SpecError("a serving simulation needs a 'serving' section", field="serving")
        return own
    if isinstance(spec, ServingSpec):
        return spec
    if isinstance(spec, dict):
        from simcore.specs.loader import validate

        return validate(ServingSpec, spec, prefix="spec")
    raise SpecError(
        f"expected a ServingSpec or a dict of serving fields, got {type(spec).__name__}", field="spec"
    )


__all__ = [
    "RequestLog",
    "ServingResult",
    "ServingRun",
    "StepModel",
    "Stats",
    "build_step_model",
    "profile_step_model",
    "step_profile",
    "kv_blocks",
    "serve",
    "simulate",
]
