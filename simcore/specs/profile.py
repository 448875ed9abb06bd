"""Compute calibration profiles: fitted efficiency parameters per op family and dtype.

A profile is the output of :mod:`simcore.calibration.fit_compute` run on micro-benchmark traces of
one device (``hardware_specs/calibration/<device>.yaml``). It holds *fractions of the device's
peaks* and a few structural constants (kernel latencies, tile overheads), never absolute rates, so
it can be transferred to a device without measurements: the efficiencies are kept and the peaks,
bandwidth, SM count and L2 size come from the target device (``transferred_from`` says so).

The op cost models that read these parameters live in :mod:`simcore.compute.ops`; the meaning of
each parameter is documented on its field and in ``docs/compute.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.loader import read_yaml, validate
from simcore.specs.registry import default_registry


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GemmParams(_Frozen):
    """Efficiency parameters of dense GEMM kernels for one dtype (see ``docs/compute.md``).

    Per output tile of ``tm x tn`` with K-depth ``k``, the tensor-core time is
    ``2 (tm tn + load_cost (tm + tn)) (k + k_overhead) / (eff_peak peak / sm_count)``.
    """

    eff_peak: float = Field(gt=0, le=1.2)
    """Fraction of the dense peak the MMA main loop reaches (dimensionless)."""
    k_overhead: float = Field(ge=0)
    """Per-tile prologue/epilogue cost, as an equivalent K-depth (elements)."""
    load_cost: float = Field(ge=0)
    """Operand staging cost per tile edge (elements); makes small tiles less efficient."""
    eff_bw: float = Field(gt=0, le=1.5)
    """Fraction of HBM bandwidth reached when streaming operands (dimensionless)."""
    sharpness: float = Field(ge=1, le=16)
    """Exponent p of the smooth roofline corner ``(tc^p + tm^p)^(1/p)``."""
    t0: float = Field(ge=0)
    """Fixed device-side time per kernel (seconds)."""
    eff_misaligned: float = Field(default=1.0, gt=0, le=1.0)
    """Multiplier of ``eff_peak`` when a row stride (``k`` or ``n`` elements) is not a multiple of
    16 bytes: libraries then fall back to kernels without TMA/vector loads (dimensionless)."""
    cta_bw: float | None = Field(default=None, gt=0, le=8.0)
    """Streaming rate one CTA sustains, as a multiple of ``eff_bw bandwidth / sm_count`` (times the
    L2 boost when the operands are L2-resident: a CTA also pulls faster from L2) (dimensionless;
    ``None`` = no per-CTA limit). Skinny GEMMs with few output tiles cannot keep
    enough loads in flight to reach the HBM bandwidth (decode GEMVs with a small ``n``)."""
    split_t0: float = Field(default=0.0, ge=0)
    """Extra time of a split-K GEMM (seconds): the partial sums are reduced by a second pass."""
    t0_hbm: float = Field(default=0.0, ge=0)
    """Extra fixed time when the operands come from HBM rather than L2 (seconds): the longer
    memory latency of filling the kernel's load pipeline once."""
    skinny_bw: float | None = Field(default=None, gt=0, le=1.0)
    """Fraction of the streaming rate a GEMM of one row reaches, rising linearly with the rows to the full
    rate at ``SKINNY_ROWS`` (128) rows (dimensionless; ``None`` = every row count streams alike). PyTorch's
    row-wise fp8 ``scaled_mm`` picks GEMV-like kernels for few rows that stream the weights at 36-53 % of
    the HBM rate, slower than its 128-row kernels (H200, 8192 x 28672: 137 µs at M = 1, 72 µs at M = 128;
    docs/compute.md, "Served models' GEMMs: the decode grid"). Fitted where a dtype's rows show it."""


FP8_TENSOR = "fp8_tensor"
"""The GEMM family (a key of ``ComputeProfile.gemm`` / ``gemm_kernel``) of per-tensor scaled FP8 GEMMs: one
scale per operand, applied to the accumulator in the epilogue, cuBLASLt's FP8 kernels (PyTorch's ``_scaled_mm``
with tensor-wise scales, Transformer Engine's delayed and current scaling, TensorRT-LLM's FP8 linears). The
``fp8`` family is row-wise scaled FP8 (PyTorch's ``_scaled_mm`` with a scale per row of A and per column of B,
on Hopper its own CUTLASS kernel), a slower kernel family: docs/compute.md, "FP8 GEMMs by scaling"."""

GEMM_ROW_NAMES = {"scaled_mm_e4m3_tensorwise": FP8_TENSOR}
"""Op-sweep GEMM rows (by ``name``) whose family is not their ``dtype`` column: the per-tensor scaled FP8 ones."""


def gemm_element_dtype(family: str) -> str:
    """The element dtype of a GEMM family (``fp8_tensor``: ``fp8``; a dtype is its own)."""
    return "fp8" if family == FP8_TENSOR else family


def gemm_family(dtype: str, per_tensor: bool) -> str:
    """The GEMM family of ``dtype`` GEMMs of the per-tensor kernel family or not (``fp8`` per-tensor: ``fp8_tensor``;
    any other dtype is its own family): the inverse of :func:`gemm_element_dtype`."""
    return FP8_TENSOR if per_tensor and dtype == "fp8" else dtype


ATTENTION_BACKENDS = ("flash", "cudnn", "efficient")
"""Fused attention kernels simcore prices: FlashAttention-2 (PyTorch's flash SDPA backend, the
flash-attn package), cuDNN's fused attention (PyTorch's default SDPA backend on Hopper) and the
memory-efficient kernels (PyTorch's CUTLASS ``fmha``: its only fused attention for fp32 tensors)."""


# the host entries the engines read with one block key (``ComputeProfile.layer_key``'s ``entry``)
_ENTRY_FAMILIES = {
    "train_fwd": ("train_fwd", "train_bwd", "step_fwd", "step_bwd"),
    "infer_decode": ("infer_decode", "infer_decode_fixed"),
}


_LAYER_VARIANT = re.compile(r"_moe(?:_native|_batched)?|_eager")


def dense_layer(name: str) -> str:
    """A host entry's name without its layer variant (``_moe_native``, ``_moe_batched``, ``_moe``,
    ``_eager``: the MoE and eager-attention layers of ``ComputeProfile.layer_key``): the dense, SDPA
    layer's entry."""
    return _LAYER_VARIANT.sub("", name)


def backend_of_name(name: str) -> str:
    """The attention backend an op's or a calibration row's name says (``aten::_cudnn_attention_forward``,
    ``sdpa_efficient_mask``): ``cudnn``, ``efficient``, else ``flash``."""
    return "cudnn" if "cudnn" in name else "efficient" if "efficient" in name else "flash"


class AttentionParams(_Frozen):
    """Efficiency parameters of a fused (flash-style) attention kernel, one direction.

    Per CTA, the time is ``block_rows (L + kv_overhead) c`` where ``L`` is the KV (forward) or Q
    (backward) length it walks and ``c = flops_per_score (head_dim + head_dim_overhead) /
    (eff_peak peak / sm_count)``; ``head_dim_overhead`` models softmax/exp work per score element.
    """

    eff_peak: float = Field(gt=0, le=1.2)
    """Fraction of the dense peak the MMAs reach (dimensionless)."""
    head_dim_overhead: float = Field(ge=0)
    """Non-MMA work per score element (softmax, masking), as an equivalent head dim (elements)."""
    kv_overhead: float = Field(ge=0)
    """Per-CTA prologue/epilogue cost, as an equivalent sequence length (tokens)."""
    head_dim_scale: float | None = Field(default=None, gt=0)
    """Large head dims cost ``head_dim / head_dim_scale`` more per MMA element: the shared memory
    a tile needs grows with the head dim, so KV tiles narrow and the output accumulator is
    rescaled more often per score. ``None``: no such term."""
    eff_bw: float = Field(gt=0, le=1.5)
    """Fraction of HBM bandwidth reached when streaming Q/K/V (dimensionless)."""
    sharpness: float = Field(ge=1, le=16)
    """Exponent of the smooth roofline corner."""
    t0: float = Field(ge=0)
    """Fixed device-side time per kernel (seconds)."""
    block_rows: int = Field(default=128, gt=0)
    """Rows of the tile each CTA owns (query rows forward, key rows backward). Kernel structure."""
    block_cols: int = Field(default=128, gt=0)
    """Columns of the inner loop tile (keys forward, queries backward). Kernel structure."""
    split_t0: float = Field(default=0.0, ge=0)
    """Extra fixed time of a split-KV launch (the combine kernel), seconds."""
    split_threshold: float = Field(default=1.6, ge=0)
    """Split the KV walk only when the grid of 64-row blocks has fewer CTAs than this many per SM:
    FlashAttention-2's split-KV heuristic, 0.8 of two CTA slots per SM (flash_api.cpp). Kernel
    structure, not fitted."""
    mask_overhead: float = Field(default=0.0, ge=0)
    """Work per score of an explicit additive mask tensor (read, added), as an equivalent head dim
    (elements); 0 where the kernel was not measured with one."""
    dropout_overhead: float = Field(default=0.0, ge=0)
    """Work per score of attention dropout (Philox numbers, keep test, scaling), as an equivalent head
    dim (elements); 0 where not measured."""
    per_head_tiles: bool = False
    """Forward: one CTA per ``block_rows`` query rows of one query head (grouped heads not packed as rows),
    each walking at least one ``block_cols`` block of keys: cuDNN's fprop, whose short causal prompts cost
    the same per sequence and head at 16-128 tokens (~22 ns a sequence and head at 512-1536 sequences in
    ``traces/h200/**/attention_short.csv.gz``). ``False``: FlashAttention-2's packing of a KV group's
    query heads into rows."""
    odd_cols: float | None = Field(default=None, gt=0)
    """Forward over an odd number of keys: each CTA walks ``L + min(L, odd_cols)`` keys instead of ``L``
    (cuDNN's one-query kernel over ``transformers``' static cache of ``max_length - 1`` slots: about twice
    the walk up to ~128 keys, a fixed extra beyond: ``traces/h200/**/attention_kvlen.csv.gz``). ``None``:
    no such term."""


class MemoryOpParams(_Frozen):
    """Per-op adjustments of a memory-bound kernel relative to the family's parameters."""

    eff: float = Field(default=1.0, gt=0, le=2.0)
    """Multiplier of the family's bandwidth efficiency (dimensionless)."""
    t0: float | None = Field(default=None, ge=0)
    """Fixed device time per call (seconds); ``None`` uses the family's."""
    host: float | None = Field(default=None, ge=0)
    """Eager host time per call (seconds; autograd backward calls cost more); ``None`` uses
    ``ComputeProfile.host_overhead``."""
    row_share: float | None = Field(default=None, gt=0)
    """Row-wise ops: one CTA streams a row at ``row_share x bandwidth / sm_count``; used when
    the row count is known (few long rows are slow). ``None``: no row limit."""
    width_knots: tuple[float, ...] = ()
    """Row-wise ops: row widths (elements) at which ``width_factors`` were measured (PyTorch's
    softmax kernels change with the width: a warp per row up to 1024, a block with the row in shared
    memory, a block streaming it)."""
    width_factors: tuple[float, ...] = ()
    """Multipliers of the bandwidth-bound time at ``width_knots`` for 16-bit rows, linear in log2(width)
    between them and flat outside; used when the row count is known."""
    width_factors_fp32: tuple[float, ...] = ()
    """The same for fp32 rows, where measured (else ``width_factors``): the kernels' choice depends on
    the element size too."""

    @model_validator(mode="after")
    def _same_lengths(self) -> MemoryOpParams:
        n = len(self.width_knots)
        if len(self.width_factors) != n or (self.width_factors_fp32 and len(self.width_factors_fp32) != n):
            raise ValueError("width_factors (and width_factors_fp32) need one value per width_knots entry")
        if any(k <= 0 for k in self.width_knots) or list(self.width_knots) != sorted(self.width_knots):
            raise ValueError("width_knots must be positive and increasing")
        return self

    def width_factor(self, width: ArrayLike, elt_bytes: ArrayLike = 2.0) -> Any:
        """The time multiplier at row widths ``width`` of ``elt_bytes``-byte elements (1 without knots)."""
        w = np.log2(np.maximum(np.asarray(width, dtype=np.float64), 1.0))
        if not self.width_knots:
            return np.ones_like(w)
        k = np.log2(np.asarray(self.width_knots))
        f16 = np.interp(w, k, np.asarray(self.width_factors))
        if not self.width_factors_fp32:
            return f16
        f32 = np.interp(w, k, np.asarray(self.width_factors_fp32))
        return np.where(np.asarray(elt_bytes, dtype=np.float64) >= 4.0, f32, f16)


class MemoryParams(_Frozen):
    """Efficiency parameters of bandwidth-bound kernels (elementwise, norms, softmax, copies).

    ``time = t0 + smoothmax(bytes / (bandwidth eff_bw eff_op boost(bytes)), flops / (fp32 peak eff_compute))``
    with ``boost = 1 + (l2_speedup - 1) / (1 + (bytes / (l2_fraction l2_cache))^4)`` for working sets
    that stay resident in L2 across back-to-back calls.
    """

    eff_bw: float = Field(gt=0, le=1.5)
    """Fraction of HBM bandwidth reached by large streaming kernels (dimensionless)."""
    t0: float = Field(ge=0)
    """Fixed device-side time per kernel (seconds)."""
    l2_speedup: float = Field(default=1.0, ge=1.0, le=10.0)
    """Bandwidth ratio of L2-resident to HBM-resident working sets (1 = no L2 effect)."""
    l2_fraction: float = Field(default=0.5, gt=0, le=2.0)
    """Fraction of the L2 size at which residency fades (dimensionless)."""
    eff_compute: float = Field(default=0.5, gt=0, le=1.2)
    """Fraction of the fp32 (non-tensor) peak for the arithmetic of these kernels."""
    sharpness: float = Field(default=4.0, ge=1, le=16)
    """Exponent of the smooth roofline corner."""
    ops: dict[str, MemoryOpParams] = {}
    """Per-op adjustments (keys: add, gelu, softmax, layernorm, ...)."""


class OptimizerParams(_Frozen):
    """An optimizer step: a bandwidth-bound sweep over the parameters and their states."""

    traffic: float = Field(gt=0)
    """Bytes actually moved over the minimal bytes of the update (1 = one read and write of each
    state; unfused implementations make several passes)."""
    t0: float = Field(ge=0)
    """Fixed time per step (seconds)."""
    host: float | None = Field(default=None, ge=0)
    """Eager host time of one ``step()`` call (seconds); ``None`` uses ``host_overhead``."""


class EmbeddingBackwardParams(_Frozen):
    """PyTorch's dense embedding backward (``aten::embedding_dense_backward``) beyond the zero fill of
    its gradient table (priced as a ``fill``) and cub's memsets: up to ``direct_max_tokens`` tokens one
    kernel accumulates each token's gradient row; above, a radix sort of the token ids and scans (a
    fixed ``sorted_t0``), then the segment sums over the tokens' rows. Per-element terms are fractions of
    the memory bandwidth over 12 bytes a token x hidden element (read in fp32, accumulated and written:
    a convention, as the kernels run alike on fp32 and bf16 gradients), so they move with a device's
    bandwidth on transfer; the per-token and fixed terms are latencies (seconds). Fitted on the kernel-by-kernel
    sweep ``traces/h200/**/embedding_bwd.csv.gz`` (``tools/bench_embedding_bwd.py``)."""

    direct_max_tokens: float = Field(default=3072.0, gt=0)
    """PyTorch's switch to the sorting path (``num_indices <= 3072`` takes the direct kernel)."""
    direct_per_token: float = Field(ge=0)
    """Seconds a token on the direct path."""
    direct_eff: float = Field(gt=0)
    """Bandwidth fraction of the direct path's per-element work."""
    sorted_t0: float = Field(ge=0)
    """Seconds of the sort, unique-by-key and scans (flat over 4k-32k tokens)."""
    sorted_eff: float = Field(gt=0)
    """Bandwidth fraction of the segment sums' per-element work."""


ONE_QUERY_ATTENTION = "fwd_cudnn_one_query"
"""The ``attention`` entry of cuDNN's kernel for one query a sequence over a masked cache whose keys and values come
repeated to every query head (``transformers``' static cache): an sm80 wmma kernel of 64 x 64 tiles, one CTA a
sequence and head (as a static cache's decode graphs run it), fitted on its own
(``traces/h200/**/attention_masked_decode.csv.gz``)."""


ONE_QUERY_ODD_ATTENTION = "fwd_cudnn_one_query_odd"
"""The ``attention`` entry of :data:`ONE_QUERY_ATTENTION`'s kernel over an odd number of slots, as ``transformers``'
static cache holds (``max_length - 1``, e.g. 47 or 31 slots): each sequence and head costs
about one more 64-slot tile than the even count beside it (47 slots 390 us against 262 at 48, 512 sequences x 32
heads; 1.06-1.5x over 31-1039 slots), fitted on its own (``traces/h200/**/attention_kvlen.csv.gz``)."""


def one_query_family(kv_seq: ArrayLike) -> NDArray[np.str_]:
    """The ``attention`` entry that prices a one-query call (:func:`one_query_call`) over ``kv_seq`` slots:
    :data:`ONE_QUERY_ODD_ATTENTION` for an odd count, else :data:`ONE_QUERY_ATTENTION` (elementwise)."""
    odd = np.mod(np.asarray(kv_seq, dtype=np.float64), 2.0) == 1.0
    out: NDArray[np.str_] = np.where(odd, ONE_QUERY_ODD_ATTENTION, ONE_QUERY_ATTENTION)
    return out


def one_query_call(mask: ArrayLike, seq: ArrayLike, kv_heads: ArrayLike, heads: ArrayLike) -> NDArray[np.bool_]:
    """Where a cuDNN forward attention call runs :data:`ONE_QUERY_ATTENTION`'s kernel: an explicit mask, one
    query a sequence, the keys and values repeated to every query head (elementwise over the arguments)."""
    out: NDArray[np.bool_] = (
        (np.asarray(mask, dtype=np.float64) > 0) & (np.asarray(seq) == 1) & (np.asarray(kv_heads) == np.asarray(heads))
    )
    return out


_NODE_PREFIX = "autograd::engine::evaluate_function: "


def layer_op_key(name: str) -> str:
    """A layer op's :attr:`HostOps.layer_op_weights` key: its name, an autograd node's without the engine's
    prefix."""
    return name.removeprefix(_NODE_PREFIX)


def layer_op_class(name: str, launches: int) -> str:
    """The :attr:`HostOps.layer_op_weights` key that prices an op or autograd node not in the table:
    ``class|<launches>`` or ``node|<launches>``, launches capped at 3."""
    return f"{'node' if name.startswith(_NODE_PREFIX) else 'class'}|{min(launches, 3)}"


class HostOps(_Frozen):
    """What the code the eager ``host_layer`` entries were measured on issues, and what each op it issues
    costs the host, so that a run of other code is priced by its own ops (``RuntimeSpec.layer_ops``,
    ``RuntimeSpec.pass_ops``; see docs/compute.md, "The host model"). Counts are top-level ops
    (:mod:`simcore.calibration.host_trace` counts them in profiled traces); weights are in units of a cheap
    op. Written by ``simcore calibrate`` (:func:`simcore.calibration.calibrate.fit_host_ops`); empty: not
    known, runs are not scaled by their own ops."""

    layer_ops: dict[str, tuple[float, float]] = {}
    """Per MLP kind (``gelu``, ``swiglu``): (top-level forward ops on the main thread, top-level backward
    nodes on the autograd thread) a training layer of ``tools/gpt.py`` issues (GPT and Llama blocks, fused
    q/k/v and gate/up, SDPA; ``host_trace.layer_op_counts`` of
    ``traces/h200/profile_train_gpt-125m_s1024_b8_eager.json.gz`` and
    ``traces/h200/profile_train_llama-1b_s2048_b4_eager.json.gz``)."""
    hf_layer_ops: dict[str, tuple[float, float]] = {}
    """The same for the ``transformers`` code the ``profiled_hf_train_*`` entries were measured on (GPT-2's
    ``Conv1D`` layers, a Llama's separate projections, SDPA, bf16 autocast; the ``hf_fit3_train_*`` fit steps under
    ``traces/h200/``). For comparison: a Qwen2 layer's biased q / k / v projections add six backward nodes, Phi-3's
    fused projections and their splits give 72 / 83."""
    hf_layer_weights: dict[str, tuple[float, float]] = {}
    """The host weight (``host_trace.layer_op_counts`` weighed by :attr:`layer_op_weights`, ``aten::t``
    units) of a forward and a backward layer of the ``transformers`` fit code (the ``hf_fit3_train_*``
    fit steps under ``traces/h200/``, which agree): what a ``transformers`` training layer's ``RuntimeSpec.layer_ops`` is stated
    against. For comparison: a Qwen2 layer weighs 300.2 / 880.4 (1.05 of a Llama's backward), Phi-3's 280.6
    / 796.9 (0.94 / 0.95, where its op counts say 1.16 / 0.89)."""
    decode_layer_ops: dict[str, float] = {}
    """Per MLP kind: top-level ops a decode step's layer issues in ``tools/gpt.py`` with its preallocated KV
    cache (``host_trace.decode_layer_op_count`` of
    ``traces/h200/**/profile_infer_gpt_gelu_decode.json.gz`` and
    ``traces/h200/profile_infer_prefill_decode.json.gz``)."""
    hf_decode_layer_ops: dict[str, float] = {}
    """Per ``host_layer`` layer key (``swiglu``, ``gelu``, ``swiglu_eager``): top-level ops a decode step's
    layer issues in ``transformers``' modelling code with its dynamic cache (GPT-2's block; Llama's, Mistral's
    and Qwen2's, and with eager attention; every committed trace of such layers agrees; an MoE layer's count
    moves with the experts its tokens reach and is left out). A static cache's decode layer issues 63 (its
    ``index_copy_`` updates) where its prefill's layers issue the dynamic cache's 62."""
    pass_ops: dict[str, dict[str, dict[str, float]]] = {}
    """By implementation (``reference``, ``huggingface``), loop and MLP kind: the :meth:`pass_op_weight` of the
    ops a decode pass issues outside its layers (``host_trace.decode_pass_op_count``) in the code each eager
    inference ``host_layer`` fixed entry was measured on. Loops: ``manual`` (``tools/gpt.py``'s loop: embedding,
    final norm, LM head, argmax, the token's copy; ``transformers``' forward: GPT-2 11 ops, the Llama family 31
    with its rotary tables, causal-mask and cache-position ops), ``generate`` (``generate()``: 56 / 72 ops with
    logits processors, stopping criteria with an end-of-sequence id, the cache's bookkeeping),
    ``manual_eager_attention`` (a forward with eager attention's 4-D mask, 56 ops) and ``compiled_generate``
    (``generate()`` with a static cache whose decode passes replay a compiled graph: the loop's own ops between
    the graph's launches, 72 with ``aten::isin``'s launches, fitted beside ``host_layer.compiled_decode_call_*``).
    Counted on the ``hf_infer_*``, ``hf_generate_*``, ``hf_infer_llama_*_eager_attn``,
    ``profile_infer_prefill_decode``, ``profile_infer_gpt_gelu_decode`` and ``hf_sfit_generate_*_static`` traces
    under ``traces/h200/``."""
    loop_op_weights: dict[str, float] = {}
    """Per op name: the host of one call of an op a decode loop issues outside its layers, in typical ops (a
    typical op: the median over the calls that launch at most one kernel). Views cost a fraction of one,
    ``aten::isin`` and ``aten::where`` several, a sampler's ``aten::sort`` / ``aten::topk`` /
    ``aten::multinomial`` 11-18: weighed so, a pass's host outside its layers is one cost per typical op
    across codes (a ``generate()`` without an end-of-sequence id skips the dear stopping test; counting ops
    alone puts its loop ~15 % over). ``host_trace.fit_loop_op_weights`` on the decode-loop fit traces
    under ``traces/h200/`` (``generate()`` and users' loops, greedy beside temperature, top-k and top-p sampling)."""
    extra_launch_ops: float = Field(default=0.0, ge=0)
    """The host of a stream launch (kernel, memset, copy) an op not in :attr:`loop_op_weights` makes beyond
    its first, in typical ops (an ``aten::sort`` launches 15-20 from one call and takes 5-7 ops' host).
    ``host_trace.fit_extra_launch_ops`` on the same decode-loop traces: a pass's host outside its layers over
    its code's per-op cost, least squares in log (RMS error over the 16 traces 7.0 %, 17.2 % counting ops
    alone)."""
    layer_op_weights: dict[str, float] = {}
    """Per op name (an autograd node by its node name, ``MmBackward0``): the host of one call of a top-level
    op a ``transformers`` training layer issues, in ``aten::t`` units: its own time plus its thread's mean
    gap between the layer's ops (the Python between them), over the thread's median ``aten::t``. Views cost
    1.5-3.8, a one-kernel op 3.7-5, the forward's ``aten::linear`` (its weight's autocast cast and the GEMM)
    16.6, SDPA 30.5, a backward GEMM node 24; ``class|<launches>`` / ``node|<launches>`` price an op or node
    not there by its stream launches (:func:`layer_op_class`). ``host_trace.fit_layer_op_weights`` on
    ``traces/h200/**/hf_fit3_train_*``. Only ``transformers``' training layers are weighed: over
    hand-written decode loops the weights put a layer's host further from the measured than its op count
    (rms log error 0.13 against 0.10)."""

    def calibrated_layer_ops(self, implementation: str, act: str) -> tuple[float, float] | None:
        """(Forward ops, backward nodes) a training layer of the code ``implementation``'s eager host entries
        were measured on issues (:attr:`layer_ops`; ``transformers``: their host weight,
        :attr:`hf_layer_weights`; ``None``: not known)."""
        table = self.hf_layer_weights if implementation == "huggingface" else self.layer_ops
        return table.get(act)

    def calibrated_decode_layer_ops(self, implementation: str, layer_key: str) -> float | None:
        """The top-level ops a decode layer of the code ``implementation``'s ``host_layer`` entries under
        ``layer_key`` (``swiglu``, ``gelu_eager``, ...) were measured on issues (``None``: not known)."""
        table = self.hf_decode_layer_ops if implementation == "huggingface" else self.decode_layer_ops
        return table.get(layer_key)

    def layer_op_weight(self, ops: Iterable[tuple[str, int]]) -> float:
        """A layer's host in ``aten::t`` units from its top-level ops, (name, stream launches): each at its
        :attr:`layer_op_weights` entry, an op or autograd node not there at its :func:`layer_op_class`'s
        (1 where that is not there either)."""
        w = self.layer_op_weights
        return float(
            sum(w.get(layer_op_key(name), w.get(layer_op_class(name, launches), 1.0)) for name, launches in ops)
        )

    def pass_op_weight(self, ops: Iterable[tuple[str, int]]) -> float:
        """A decode pass's host outside its layers in typical ops (``RuntimeSpec.pass_ops``) from its
        top-level ops there, (name, stream launches beyond its first): each at its :attr:`loop_op_weights`,
        a name not there one op plus :attr:`extra_launch_ops` a launch beyond its first."""
        w = self.loop_op_weights
        return float(sum(w.get(name, 1.0 + self.extra_launch_ops * extra) for name, extra in ops))

    def calibrated_pass_ops(
        self, implementation: str, generate: bool, act: str, eager_attention: bool, compiled_decode: bool = False
    ) -> float | None:
        """The :meth:`pass_op_weight` of :attr:`pass_ops` for the fixed host entry the inference engine
        prices a pass with: ``generate()``'s on eager attention is the generate entry plus eager attention's
        own (the engine adds their difference the same way); with ``compiled_decode``, the loop between a
        compiled decode's graph launches (``compiled_generate``); ``None`` where the calibrated code's weight
        is not known."""
        impl = "huggingface" if implementation == "huggingface" else "reference"
        loops = self.pass_ops.get(impl, {})

        def weight(loop: str) -> float | None:
            return loops.get(loop, {}).get(act)

        if impl == "reference":
            return weight("manual")
        if compiled_decode:
            return weight("compiled_generate")
        base = weight("generate" if generate else "manual")
        if not eager_attention or base is None:
            return base
        eager, sdpa = weight("manual_eager_attention"), weight("manual")
        return None if eager is None or sdpa is None else base + eager - sdpa

    def compiled_prefill_pass_weight(
        self, loop_weight: float | None, implementation: str, generate: bool, act: str, eager_attention: bool
    ) -> float | None:
        """The weight (:meth:`pass_op_weight`) of the eager prefill's pass outside its layers in a run whose
        decode replays a compiled graph: the run's loop between the graph's launches (``loop_weight``;
        ``None``: the calibrated compiled loop's) plus what a decode pass's graph holds and the prefill issues
        itself (the embedding, the final norm, the LM head): the calibrated pass's weight beyond the
        calibrated compiled loop's. ``None`` where either calibrated weight is not known."""
        args = (implementation, generate, act, eager_attention)
        ref, comp = self.calibrated_pass_ops(*args), self.calibrated_pass_ops(*args, compiled_decode=True)
        if ref is None or comp is None:
            return None
        return (comp if loop_weight is None else loop_weight) + ref - comp


EMBEDDING_BWD_ELEMENT_BYTES = 12.0
"""Bytes a token x hidden element counts for :class:`EmbeddingBackwardParams`' efficiencies."""


class CopyParams(_Frozen):
    """One kind of host<->GPU copy (a direction and a host memory kind):
    ``time = latency + bytes / (host link bandwidth per direction x eff)`` (:mod:`simcore.comm.host`)."""

    latency: float = Field(ge=0)
    """Seconds of a copy too small for its bytes to matter (the profiler's ``gpu_memcpy`` duration)."""
    eff: float = Field(gt=0, le=1.0)
    """Achieved fraction of the host link's raw bandwidth per direction."""
    basis: str
    """Where ``latency`` and ``eff`` come from: fitted (copies, traces) or a stated default and its source."""


class HostCopies(_Frozen):
    """Host<->GPU copy parameters (``simcore.transfer_time``), fitted by :mod:`simcore.calibration.fit_copy`."""

    link: str
    """The host link the copies were measured over (a link spec name, e.g. ``pcie5``)."""
    source: list[str] = []
    """The extracted copies the fit read (paths relative to the repository)."""
    h2d_pinned: CopyParams
    h2d_pageable: CopyParams
    d2h_pinned: CopyParams
    d2h_pageable: CopyParams
    held_out: dict[str, dict[str, float]] = {}
    """Per kind: ``n`` held-out copies (whole traces held apart) and their ``median_abs_err``."""

    def params(self, direction: str, pinned: bool) -> CopyParams:
        """The parameters of ``direction`` (``h2d`` or ``d2h``) from pinned or pageable host memory."""
        p: CopyParams = getattr(self, f"{direction}_{'pinned' if pinned else 'pageable'}")
        return p


class HardwareRef(_Frozen):
    """The measured device's peaks, recorded for traceability (SI units)."""

    peak: dict[str, float]
    bandwidth: float
    sm_count: int
    l2_cache: float


_FRAMEWORKS = ("eager", "cuda_graphs", "compiled")


BACKWARD_THREAD_HOST = (
    "train_bwd",
    "ckpt_full_bwd",
    "ckpt_selective",
    "ddp_param",
    "ddp_bucket",
    "ddp_fixed",
    "step_bwd",
    "ddp_step_bwd",
    "fsdp_step_bwd",
    "tp_step_bwd",
    "compiled_bwd",
    "compiled_step_bwd",
)
"""``host_layer`` entries for work PyTorch's autograd thread does (the rest runs on the main thread)."""


def profiler_key(record: Sequence[str]) -> str:
    """The profile's name of a profiler option set (:meth:`ComputeProfile.profiler_factor`): ``""`` for
    shapes alone (what every fit row records), else ``noshapes`` (no ``shapes``), ``stack``,
    ``memory`` joined by ``_`` in that order (``stack_memory``: Holistic Trace Analysis' three)."""
    parts = ([] if "shapes" in record else ["noshapes"]) + [k for k in ("stack", "memory") if k in record]
    return "_".join(parts)


class ComputeProfile(_Frozen):
    """Fitted compute efficiency parameters for one device (see module docstring)."""

    device: str
    """Device the parameters apply to (after transfer: the target device)."""
    source: list[str] = []
    """Traces the parameters were fitted on (paths relative to the repository)."""
    provisional: bool = False
    """True when the parameters are neutral defaults, not fitted on measurements."""
    transferred_from: str | None = None
    """Device whose measurements these parameters come from, when not ``device`` itself."""
    measured_on: HardwareRef | None = None
    notes: list[str] = []
    fit_report: dict[str, Any] = {}
    """Held-out errors per op family from the fit (informational)."""
    launch: dict[str, float]
    """Host-side dispatch time per kernel launch (seconds) per framework: eager, cuda_graphs, compiled."""
    host_overhead: dict[str, float] = {}
    """Eager host time per *call* (seconds) by op family (gemm, attention_fwd, attention_bwd,
    memory, memory_bwd, optimizer): PyTorch dispatch of the op, which may launch several kernels.
    Falls back to ``launch['eager']``."""
    host_layer: dict[str, float] = {}
    """Eager host time per transformer layer, per checkpointed layer and per optimizer tensor
    (seconds), measured with tiny tensors (see :mod:`simcore.calibration.fit_host`). Empty: the
    engines fall back to per-op host times."""
    host_ops: HostOps = HostOps()
    """What the code ``host_layer`` was measured on issues and what its ops cost the host (:class:`HostOps`)."""
    host_scale: float = Field(default=1.0, gt=0)
    """This machine's host speed over the one ``host_layer`` was measured on (dimensionless;
    multiplies every ``host_layer`` entry). ``simcore calibrate`` sets it from the CPU timeline of
    profiler traces (:mod:`simcore.calibration.host_trace`)."""
    cpu_ratio_main: float = Field(default=1.0, gt=0)
    """The run's CPU per-op probe (median ``aten::t`` under the profiler) on the main thread over the one
    the ``host_layer`` entries were measured at (``probe_main``, or ``probe_infer`` for inference; set
    by :meth:`at_cpu_speed`). The share of each host time that follows the probe
    (``probe_share_<kind>``, default all of it) scales with it."""
    cpu_ratio_bwd: float = Field(default=1.0, gt=0)
    """The same on the autograd (backward) thread (``probe_backward``)."""
    attention_score_scale: float = Field(default=1.0, gt=0)
    """Factor on attention's score work (``head_dim_overhead``: the softmax's exponentials, which the
    special-function units compute, not the tensor cores) on this device over the measured one:
    ``(peak / exp rate)`` here over the same ratio where the profile was measured (:func:`transfer`;
    1 on the measured device or where either exp rate is unknown). See docs/parallelism.md, "Attention's
    softmax across generations"."""
    clock_fraction: dict[str, float] = {}
    """SM clock while each family (gemm, attention, memory) was measured, as a fraction of the
    device's boost clock (``nvidia-smi dmon`` during the sweep). Power-capped GPUs slow their clock
    under sustained tensor-core load; compute-bound times scale with 1/clock, so an op priced at
    another clock (``clock_hz=``) is rescaled. Empty: no clock information."""
    power_fraction: dict[str, float] = {}
    """Median board power while each family was measured, as a fraction of the device's TDP, and
    ``idle``: the idle board power fraction (``nvidia-smi dmon``). Feeds :func:`sustained_clock`."""
    gap: dict[str, float] = {}
    """Device idle time between back-to-back kernels (seconds) by framework, beyond what a
    CUDA-graph replay shows (the kernel fits include that): eager launches leave a small gap
    even when the GPU is the bottleneck."""
    launch_mode: Literal["max", "add"] = "max"
    """How launch overhead combines with kernel time in a stream of launches: ``max`` (the host
    runs ahead of the GPU) or ``add`` (host time exposed); chosen by the fit."""
    gemm: dict[str, GemmParams]
    """Per GEMM family: bf16, fp16, fp8 (row-wise scaled FP8), fp8_tensor (per-tensor scaled FP8:
    :data:`FP8_TENSOR`), tf32, fp32."""
    gemm_measured: dict[str, str] = {}
    """GEMM families of a transferred profile taken from an engine's linear-layer table, by family: where
    (``hardware_specs/calibration/gemm-<device>.yaml``, applied by :func:`load_profile`: this device's own table,
    or the nearest of its die family's as fractions of its peaks). Their ``gemm`` entries are efficiencies
    measured on that die at its burst clock, not the transfer source's (docs/compute.md, "Blackwell's GEMMs from
    engine tables")."""
    gemm_kernel: dict[str, GemmParams] = {}
    """Per dtype: GEMMs fitted on their kernels' own durations (profiler, not CUDA events around
    back-to-back calls, whose time on a power-capped GPU holds gaps between the kernels), with the
    call-timed rows of shapes not re-timed (``simcore calibrate --kernel-gemms-apart``). What a GEMM
    kernel takes inside a step; compiled code's GEMMs are priced with it (docs/compute.md,
    "torch.compile"). Empty: ``gemm`` prices every GEMM."""
    attention: dict[str, AttentionParams]
    """Keys ``fwd`` and ``bwd`` (optionally ``fwd_fp8``...)."""
    memory: MemoryParams
    optimizer: dict[str, OptimizerParams]
    """Keys like ``adamw_fused``, ``adamw_unfused``, ``sgd_fused``, ``sgd_unfused``."""
    embedding_bwd: EmbeddingBackwardParams | None = None
    """The embedding's dense backward where measured kernel by kernel; ``None``: priced as a
    bandwidth-bound op over its gradient's bytes."""
    host_copy: HostCopies | None = None
    """Host<->GPU copies (pinned and pageable, both directions); ``None``: not measured for this device."""

    def host(self, name: str, profiled: bool = False, default: float = 0.0) -> float:
        """A ``host_layer`` entry (seconds): the profiler-recorded one when ``profiled`` and measured,
        at this profile's host speed (``host_scale``) and CPU probe ratio (``cpu_ratio_main``, or
        ``cpu_ratio_bwd`` for the backward thread's entries)."""
        scale = self.host_scale
        base = name.removeprefix("hf_")
        cpu = self.cpu_ratio_bwd if base.startswith(BACKWARD_THREAD_HOST) else self.cpu_ratio_main
        if cpu != 1.0:
            # only part of a host time follows the CPU's per-op speed (the rest: driver launch calls,
            # thread hand-offs); ``probe_share_<kind>`` where measured (fit_host.step_host_costs)
            kind = dense_layer(base).removesuffix("_gelu").removesuffix("_swiglu").removesuffix("_layer")
            share = self.host_layer.get(f"probe_share_{kind}", 1.0)
            scale *= 1.0 - share + share * cpu
        if profiled and f"profiled_{name}" in self.host_layer:
            return self.host_layer[f"profiled_{name}"] * scale
        return self.host_layer.get(name, default) * scale

    def profiler_factor(self, record: Sequence[str], kind: str, implementation: str = "reference") -> float:
        """How much the profiler's options beyond shapes (``record``: ``RuntimeSpec.profiler_record``)
        change ``kind`` of host time (``train_fwd``, ``train_bwd``, ``step_fwd``, ``step_bwd``,
        ``step_end``) against the shapes-only profiled steps the host entries were measured with:
        ``profiler_<options>_<kind>`` (:func:`profiler_key`; ``profiler_hf_...`` for ``transformers``'
        layers where measured), 1 where not measured."""
        key = profiler_key(record)
        if not key:
            return 1.0
        own = self.host_layer.get(f"profiler_{key}_{kind}", 1.0)
        return (
            self.host_layer.get(f"profiler_hf_{key}_{kind}", own) if implementation == "huggingface" else own
        )

    def weights_factor(
        self, param_dtype: str, kind: str, implementation: str = "reference", act: str | None = None
    ) -> float:
        """How much ``kind`` of host time changes when the weights are ``param_dtype`` rather than the fp32
        weights under autocast the host entries were measured with: ``weights_[hf_]bf16_<kind>_<act>`` for
        the block's MLP kind ``act`` (``gelu``, ``swiglu``) where fitted, else the kinds' pooled
        ``weights_[hf_]bf16_<kind>`` (``transformers``' layers with bf16 weights: no autocast's
        per-op dispatch and casts), 1 where not measured."""
        if param_dtype != "bf16":
            return 1.0
        hf = "hf_" if implementation == "huggingface" else ""
        pooled = self.host_layer.get(f"weights_{hf}bf16_{kind}", 1.0)
        return self.host_layer.get(f"weights_{hf}bf16_{kind}_{act}", pooled) if act else pooled

    def optimizer_host(self, optimizer: str, impl: str, part: str, profiled: bool) -> float:
        """Host seconds of ``optimizer.step()``'s ``part`` (``fixed`` per step or ``per_tensor``) for
        ``optimizer`` (adamw, sgd) run ``impl`` (fused, foreach): its own entry where measured
        (``<optimizer>_<impl>_<part>``, plain or ``profiled_``); one measured only under the profiler
        (SGD's), unprofiled, at the plain / profiled ratio of AdamW's same implementation;
        else fused AdamW's."""
        hc = self.host_layer
        key = f"{optimizer}_{impl}_{part}"
        if key in hc or (profiled and f"profiled_{key}" in hc):
            return self.host(key, profiled)
        if f"profiled_{key}" in hc:
            ref = f"adamw_{impl}_{part}" if f"adamw_{impl}_{part}" in hc else f"adamw_fused_{part}"
            return self.host(key, True) * self.host(ref, False) / max(self.host(ref, True), 1e-30)
        return self.host(f"adamw_fused_{part}", profiled)

    def layer_key(
        self, act: str, moe: str | None, implementation: str, entry: str, attention: str = "flash"
    ) -> str:
        """The block key of a model's host entries (``<entry>_<key>``): for ``transformers``'
        mixture-of-experts layers ``<act>_<moe>`` where measured (``moe``: ``moe``, the fp32 grouped
        GEMM's per-expert loop under AMP; ``moe_native``, the bf16 grouped GEMM;
        ``profiled_hf_<entry>_<act>_<moe>``: about twice a dense layer's
        host), else ``act``; ``_eager`` appended for ``transformers``' layers whose attention is written
        out of ops (``attention`` ``eager``) where measured."""
        key = act
        if implementation != "huggingface":
            return key
        # every entry the engine reads with the key must be measured (else the one it falls back to)
        family = _ENTRY_FAMILIES.get(entry, (entry,))

        def measured(k: str) -> bool:
            return all(f"profiled_hf_{e}_{k}" in self.host_layer for e in family)

        if moe and measured(f"{act}_{moe}"):
            key = f"{act}_{moe}"
        if attention == "eager" and measured(f"{key}_eager"):
            key += "_eager"
        return key

    def host_of(self, name: str, profiled: bool, implementation: str) -> float:
        """:meth:`host` for layers of ``implementation``'s modelling code: Hugging Face's own entries
        (``profiled_hf_<name>``, whole profiled steps of its layers) where measured, and
        without the profiler the plain entry times their profiled ratio; else the plain entry. An MoE or
        eager-attention entry that was not measured (an MoE prefill) is the dense, SDPA layer's."""
        hf = f"profiled_hf_{name}"
        dense = dense_layer(name)
        if implementation == "huggingface" and hf not in self.host_layer and dense != name:
            return self.host_of(dense, profiled, implementation)
        if implementation != "huggingface" or hf not in self.host_layer:
            return self.host(name, profiled)
        if profiled:
            return self.host(f"hf_{name}", True)
        if f"hf_{name}" in self.host_layer:
            return self.host(f"hf_{name}")
        # an MoE or eager-attention layer's entries are measured under the profiler only: the plain
        # (SDPA, dense) layer's plain entry at their profiled ratio to it
        plain = self.host_layer.get(f"profiled_{dense}")
        return self.host(dense) * (self.host_layer[hf] / plain if plain else 1.0)

    def at_cpu_speed(
        self, main_s: float, backward_s: float | None = None, inference: bool = False
    ) -> ComputeProfile:
        """This profile on a CPU whose per-op probe (median ``aten::t`` under the profiler, seconds) is
        ``main_s`` on the main thread and ``backward_s`` on the autograd thread: the host entries scaled
        by their ratio to the probes they were measured at (``host_layer`` ``probe_main`` /
        ``probe_backward``; ``probe_infer`` for a no-grad ``inference`` run, whose ops cost less host).
        Unchanged when the profile has no reference probe."""
        ref_m = self.host_layer.get("probe_infer" if inference else "probe_main")
        ref_b = self.host_layer.get("probe_backward")
        if not ref_m or main_s <= 0:
            return self
        main = main_s / ref_m
        bwd = backward_s / ref_b if backward_s and backward_s > 0 and ref_b else main
        return self.model_copy(update={"cpu_ratio_main": main, "cpu_ratio_bwd": bwd})

    def gemm_params(self, dtype: str, kernel_rate: bool = False, per_tensor: bool = False) -> GemmParams:
        """Parameters for ``dtype``, falling back to the nearest dtype the profile has; ``kernel_rate``:
        from ``gemm_kernel`` where the profile has that fit (else ``gemm``); ``per_tensor``: a low-precision GEMM
        of the per-tensor kernel family (:data:`FP8_TENSOR`: per-tensor FP8, and Blackwell's block-scaled FP8/FP4
        without a measured family of their own), else the row-wise ``fp8`` family."""
        table = self.gemm_kernel if kernel_rate and self.gemm_kernel else self.gemm
        dtype = gemm_family(dtype, per_tensor)
        order = {
            "fp4": ["fp4", FP8_TENSOR, "fp8", "bf16"] if per_tensor else ["fp4", "fp8", "bf16"],
            FP8_TENSOR: [FP8_TENSOR, "fp8", "bf16"],
            "fp8": ["fp8", "bf16"],
            "int8": ["int8", "fp8", "bf16"],
            "bf16": ["bf16", "fp16"],
            "fp16": ["fp16", "bf16"],
            "tf32": ["tf32", "fp32", "bf16"],
            "fp32": ["fp32", "tf32", "bf16"],
            "fp64": ["fp64", "fp32", "bf16"],
        }.get(dtype, [dtype, "bf16"])
        for d in order:
            if d in table:
                return table[d]
        raise SpecError(f"calibration profile for {self.device} has no GEMM parameters for {dtype}")

    def attention_params(
        self, backward: bool, dtype: str = "bf16", backend: str = "flash"
    ) -> AttentionParams:
        """Forward or backward attention parameters of ``backend``'s kernels (``flash``: FlashAttention-2,
        ``cudnn``: cuDNN's fused attention, ``efficient``: the memory-efficient kernels; a profile without
        the backend's own entries gives flash's),
        dtype-specific when the profile has them."""
        key = "bwd" if backward else "fwd"
        if backend != "flash":
            own = self.attention.get(f"{key}_{backend}_{dtype}") or self.attention.get(f"{key}_{backend}")
            if own is not None:
                return own
        return self.attention.get(f"{key}_{dtype}", self.attention[key])

    def launch_s(self, framework: str, family: str | None = None) -> float:
        """Host seconds per kernel (or per op call of ``family`` in eager mode) for ``framework``."""
        if framework not in self.launch:
            raise SpecError(
                f"unknown framework {framework!r}; known: {', '.join(sorted(self.launch))}", field="framework"
            )
        if framework == "eager" and family is not None and family in self.host_overhead:
            return self.host_overhead[family]
        return self.launch[framework]


# --------------------------------------------------------------------------------------------
# loading and transfer


def _read(path: Path) -> ComputeProfile:
    data = read_yaml(path)
    return validate(ComputeProfile, data, str(path))


def _distance(a: Device, b: Device) -> float:
    """How unlike two devices are: log-ratios of bf16 peak, bandwidth and SM count, plus penalties."""
    d = abs(math.log(a.peak_flops("bf16") / b.peak_flops("bf16")))
    d += abs(math.log(a.memory.bandwidth / b.memory.bandwidth))
    d += 0.5 * abs(math.log(a.sm_count / b.sm_count))
    if a.vendor != b.vendor:
        d += 10.0
    if a.architecture.split()[0].lower() != b.architecture.split()[0].lower():
        d += 1.0
    return d


SSD_CLASSES = ("scan", "state_update", "norm_fwd", "norm_bwd")
"""Kernel classes of Mamba-2's Triton kernels (mamba_ssm) with their own fitted rates: the chunked SSD
scan's kernels (forward and backward), the decode step's state update, the gated group RMSNorm's forward
and backward kernels."""


class SsdParams(_Frozen):
    """Achieved rates of mamba_ssm's Triton kernels as fractions of the device's peaks, fitted on one GPU
    by :mod:`simcore.calibration.fit_ssd` (``hardware_specs/calibration/ssd-<device>.yaml``).

    A kernel of class ``c`` moving ``bytes`` (read + written, fp32 intermediates counted at 4 bytes) with
    ``flops`` of tensor-core work takes ``t0 + bytes / (eff_bw[c] HBM bandwidth) + flops / (eff_mma
    bf16 dense peak)``: the chunked kernels stream each operand once and run their small matmuls in the
    same pass, without overlapping the two (docs/compute.md, "Mamba-2 layers and hybrid models"). Being
    fractions of peaks, the rates transfer to another device through its specs."""

    device: str
    """Device the kernels were measured on."""
    source: list[str] = []
    """The measurements (paths relative to the repository)."""
    eff_bw: dict[str, float]
    """Per class (:data:`SSD_CLASSES`): achieved fraction of HBM bandwidth (dimensionless)."""
    eff_mma: float = Field(gt=0, le=1.0)
    """The scan kernels' matmul work: achieved fraction of the bf16 dense tensor-core peak."""
    t0: float = Field(ge=0)
    """Fixed device time per kernel (seconds)."""
    host_launch: float = Field(default=0.0, ge=0)
    """Host seconds per Triton kernel launch of the measuring benchmark's eager calls (informational:
    the eager bench rows are host-bound below some size; a training step's host time is the engine's)."""
    fit_report: dict[str, Any] = {}
    """Held-out errors per op (informational)."""

    @model_validator(mode="after")
    def _classes(self) -> SsdParams:
        missing = [c for c in SSD_CLASSES if c not in self.eff_bw]
        if missing or any(not 0 < v <= 1.2 for v in self.eff_bw.values()):
            raise ValueError(f"eff_bw needs each of {', '.join(SSD_CLASSES)} in (0, 1.2] (missing: {missing})")
        return self


@lru_cache(maxsize=4)
def _ssd_cached(path: str, mtime: float) -> SsdParams:
    return validate(SsdParams, read_yaml(path), path, "ssd")


def load_ssd(device: Device) -> SsdParams:
    """The SSD kernel rates for ``device``: its own ``ssd-<device>.yaml`` where measured, else the
    measured one (fractions of peak, applied to ``device``'s bandwidth and peak). Raises
    :class:`SpecError` when no calibration has them."""
    reg = default_registry()
    own = reg.calibration_path(f"ssd-{device.calibration or device.name}")
    paths = [own] if own is not None else [p for n, p in sorted(reg.calibration_files.items()) if n.startswith("ssd-")]
    if not paths:
        raise SpecError("no SSD kernel calibration (hardware_specs/calibration/ssd-<device>.yaml): run "
                        "`simcore calibrate traces/h100/ssd`")
    return _ssd_cached(str(paths[0]), paths[0].stat().st_mtime)


class EngineGemm(_Frozen):
    """A serving engine's linear layers on one GPU, fitted to the GEMM model by
    :mod:`simcore.calibration.fit_engine_gemm` (``hardware_specs/calibration/gemm-<device>.yaml``).

    Each family's :class:`GemmParams` prices the GEMM kernel alone: the table's times less the input's
    quantize kernel, which serving steps price as an op of its own (docs/compute.md, "Blackwell's GEMMs from
    engine tables"). :func:`load_profile` puts them in place of a transferred profile's entries for this
    device (and for a device of its die family without a table of its own, as fractions of its peaks)."""

    device: str
    """Device the table was measured on."""
    engine: str
    """The engine whose linear layers were timed (``tensorrt-llm``)."""
    engine_version: str
    source: list[str] = []
    """The collection (paths relative to the repository) and the table it was imported from."""
    gemm: dict[str, GemmParams]
    """Per GEMM family (``bf16``, ``fp8_tensor``, ``fp4``)."""
    fit_report: dict[str, Any] = {}
    """Held-out errors per family (informational)."""


@lru_cache(maxsize=8)
def _engine_gemm_cached(path: str, mtime: float) -> EngineGemm:
    return validate(EngineGemm, read_yaml(path), path, "engine GEMM table")


ENGINE_GEMM_PREFIX = "gemm-"
"""Calibration files ``gemm-<device>.yaml``: :class:`EngineGemm` fits."""


def die_family(device: Device) -> str:
    """The GPU die family of ``device``'s architecture string: the die name's letters and first digit
    (``Blackwell (GB100, dual die)`` and ``Blackwell Ultra (GB110, ...)``: ``GB1``; ``Hopper (GH100)``: ``GH1``;
    a workstation Blackwell ``GB202``: ``GB2``); the architecture's first word where no die is named."""
    m = re.search(r"\(([A-Z]+)(\d)", device.architecture)
    return m.group(1) + m.group(2) if m else device.architecture.split()[0].lower()


def engine_gemm_for(device: Device, source: str | None = None) -> EngineGemm | None:
    """The engine GEMM fit that applies to ``device``: its own ``gemm-<device>.yaml``; else, unless ``device``'s
    profile is transferred from a device of its own die family (``source``: then that measured relative's curves
    are nearer than another device's engine table), the nearest (:func:`_distance`) fitted device of the same
    :func:`die_family` (B300 takes B200's or GB300's); else ``None``."""
    reg = default_registry()
    own = reg.calibration_path(f"{ENGINE_GEMM_PREFIX}{device.name}")
    if own is not None:
        return _engine_gemm_cached(str(own), own.stat().st_mtime)
    family = die_family(device)
    src = reg.devices.get(source) if source else None
    if src is not None and die_family(src) == family:
        return None
    best: tuple[float, Path] | None = None
    for key, path in sorted(reg.calibration_files.items()):
        other = reg.devices.get(key.removeprefix(ENGINE_GEMM_PREFIX)) if key.startswith(ENGINE_GEMM_PREFIX) else None
        if other is None or die_family(other) != family:
            continue
        # the low-precision peaks too: the tables' families are FP8 and FP4 (GB300 vs GB200: the same bf16 peak)
        dist = _distance(device, other) + sum(
            abs(math.log(device.peak[d] / other.peak[d])) for d in ("fp8", "fp4") if d in device.peak and d in other.peak
        )
        if best is None or dist < best[0]:
            best = (dist, path)
    return None if best is None else _engine_gemm_cached(str(best[1]), best[1].stat().st_mtime)


def engine_gemm_note(profile: ComputeProfile) -> str | None:
    """One phrase saying which GEMM families of a transferred profile come from an engine table and from where
    (``None`` without any): what predictions and the op report add to "transferred from"."""
    if not profile.gemm_measured:
        return None
    sources = sorted(set(profile.gemm_measured.values()))
    return f"GEMMs {', '.join(sorted(profile.gemm_measured))} from {'; '.join(sources)}, not transferred"


def with_engine_gemm(profile: ComputeProfile, device: Device) -> ComputeProfile:
    """``profile`` (transferred to ``device``) with the GEMM families of :func:`engine_gemm_for` put in place of
    the transferred ones, call-timed and kernel-rate alike (:attr:`ComputeProfile.gemm_measured` says which, the
    notes say from where). A profile measured on ``device`` itself is returned as it is: its own sweeps rule."""
    if profile.transferred_from is None:
        return profile
    eg = engine_gemm_for(device, profile.transferred_from)
    if eg is None:
        return profile
    where = f"{eg.device}'s {eg.engine} {eg.engine_version} linear-layer table ({ENGINE_GEMM_PREFIX}{eg.device}.yaml)"
    fams = sorted(eg.gemm)
    # the tables time kernels replayed in a CUDA graph: the in-step rate as well (``gemm_kernel``, where the
    # profile prices some GEMMs by their kernels' own durations)
    kernel = {**profile.gemm_kernel, **eg.gemm} if profile.gemm_kernel else {}
    return profile.model_copy(
        update={
            "gemm": {**profile.gemm, **eg.gemm},
            "gemm_kernel": kernel,
            "gemm_measured": {**profile.gemm_measured, **dict.fromkeys(fams, where)},
            "notes": [*profile.notes, f"GEMMs {', '.join(fams)} from {where}"
                      + ("" if eg.device == device.name else f", as fractions of {device.name}'s peaks")],
        }
    )  # fmt: skip


def transfer(profile: ComputeProfile, target: Device) -> ComputeProfile:
    """``profile`` applied to ``target``: efficiencies kept, peaks taken from ``target`` at use; the
    attention's score work rescaled by :func:`attention_score_scale`."""
    if profile.device == target.name:
        return profile
    src = profile.transferred_from or profile.device
    note = (
        f"efficiencies transferred from {src}: measured fractions of peak kept, "
        f"peaks/bandwidth/SMs/L2 of {target.name} used"
    )
    measured = default_registry().devices.get(src)
    scale = attention_score_scale(measured, target) if measured is not None else 1.0
    return profile.model_copy(
        update={
            "device": target.name,
            "transferred_from": src,
            "notes": [*profile.notes, note],
            "attention_score_scale": scale,
        }
    )


def attention_score_scale(measured: Device, target: Device) -> float:
    """How much dearer attention's score work (the softmax's exponentials, one per score) is on
    ``target`` than on ``measured``, in FLOP-equivalents of the tensor-core peak that the attention fit
    counts it in: ``(peak_t / exp_t) / (peak_m / exp_m)`` with ``exp = exp_per_clock_per_sm x SMs x
    clock`` (bf16 peaks; fp8's double alike from Hopper to Blackwell). 1 where either exp rate is unknown.
    Blackwell doubled the tensor cores' rate per SM but not the special-function units' (B200: about 2),
    Blackwell Ultra doubled those too (B300/GB300: about 1)."""
    em, et = measured.exp_rate(), target.exp_rate()
    if em is None or et is None:
        return 1.0
    return (target.peak_flops("bf16") / et) / (measured.peak_flops("bf16") / em)


@lru_cache(maxsize=32)
def _read_cached(path: str, mtime: float) -> ComputeProfile:
    return _read(Path(path))


def _read_file(path: Path) -> ComputeProfile:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        raise SpecError("calibration file not found", file=str(path)) from None
    return _read_cached(str(path), mtime)


@lru_cache(maxsize=64)
def _load_cached(
    device_json: str, name_or_path: str | None, files: tuple[str, ...], engine_tables: bool = True
) -> ComputeProfile:
    device = Device.model_validate_json(device_json)
    reg = default_registry()
    if name_or_path is not None and name_or_path.startswith(ENGINE_GEMM_PREFIX) and reg.calibration_path(name_or_path):
        raise SpecError(f"{name_or_path!r} is an engine GEMM table (applied over a transferred profile by itself), "
                        "not a compute profile", field="calibration")  # fmt: skip
    if name_or_path is not None:
        path = reg.calibration_path(name_or_path)
        if path is None:
            p = Path(name_or_path)
            if p.suffix in (".yaml", ".yml") or p.exists():
                path = p
        if path is None:
            known = ", ".join(sorted(reg.calibration_files)) or "none"
            raise SpecError(
                f"unknown calibration profile {name_or_path!r}; known: {known}", field="calibration"
            )
        return transfer(_read_file(path), device)
    own = reg.calibration_path(device.calibration) if device.calibration else None
    overlay = with_engine_gemm if engine_tables else (lambda prof, _dev: prof)
    if own is not None:
        return overlay(transfer(_read_file(own), device), device)
    # nearest calibrated device
    best: tuple[float, str, Path] | None = None
    for dname, dev in sorted(reg.devices.items()):
        path = reg.calibration_path(dev.calibration) if dev.calibration else None
        if path is None:
            continue
        dist = _distance(device, dev)
        if best is None or dist < best[0]:
            best = (dist, dname, path)
    if best is None:
        raise SpecError(f"no calibration profile for {device.name} and no calibrated device to transfer from")
    return overlay(transfer(_read_file(best[2]), device), device)


def load_profile(device: Device, name_or_path: str | None = None, engine_tables: bool = True) -> ComputeProfile:
    """The compute profile for ``device`` (cached).

    ``name_or_path`` picks a profile by name (a ``calibration/<name>.yaml`` in the spec folders) or
    by file path. Without it, the device's own profile (``Device.calibration``) is used, or, when the
    device has none, the profile of the nearest calibrated device, transferred (``transferred_from``
    is set), with the GEMM families of an engine table in place of the transferred ones
    (:func:`with_engine_gemm`; ``engine_tables=False``: without them). Raises :class:`SpecError` when nothing
    applies.
    """
    reg = default_registry()
    files = tuple(sorted(str(p) for p in reg.calibration_files.values()))
    return _load_cached(_device_key(device), name_or_path, files, engine_tables)


_DEV_KEYS: dict[int, tuple[Device, str]] = {}


def _device_key(device: Device) -> str:
    hit = _DEV_KEYS.get(id(device))
    if hit is not None and hit[0] is device:
        return hit[1]
    key = device.model_dump_json()
    if len(_DEV_KEYS) > 256:
        _DEV_KEYS.clear()
    _DEV_KEYS[id(device)] = (device, key)
    return key


def save_profile(profile: ComputeProfile, path: str | Path) -> None:
    """Write ``profile`` as YAML (the format :func:`load_profile` reads)."""
    import yaml

    data = profile.model_dump(mode="json", exclude_defaults=False)
    Path(path).write_text(
        "# Compute calibration profile (written by simcore.calibration.fit_compute).\n"
        + yaml.safe_dump(data, sort_keys=False, width=110),
        encoding="utf-8",
    )


__all__ = [
    "AttentionParams",
    "ComputeProfile",
    "CopyParams",
    "EngineGemm",
    "GemmParams",
    "HardwareRef",
    "HostCopies",
    "MemoryOpParams",
    "MemoryParams",
    "OptimizerParams",
    "SsdParams",
    "load_profile",
    "die_family",
    "engine_gemm_for",
    "engine_gemm_note",
    "load_ssd",
    "save_profile",
    "transfer",
    "with_engine_gemm",
]
