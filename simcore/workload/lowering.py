"""Lowering: a transformer and a parallel layout become lists of ops per rank.

The op lists are the single description of the work that every engine prices: the analytic
engine evaluates them over numpy grids of layouts, the discrete-event engine places the same ops
on streams. Every shape field may be a numpy array (one element per layout).

Shapes follow Megatron-LM: column-parallel QKV and MLP-in GEMMs, row-parallel attention-out and
MLP-out GEMMs, two tensor-parallel collectives per block in each direction (all-reduce, or
all-gather + reduce-scatter with sequence parallelism), context parallelism splitting the sequence
(attention exchanges K/V in a ring), expert parallelism with all-to-all dispatch and combine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from simcore.compute.kernels import misaligned_rows
from simcore.compute.ops import PAGED_DECODE, dtype_variant, memory_op_traffic
from simcore.errors import SimcoreError
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.scenario import ModelSpec
from simcore.workload import csa as C
from simcore.workload.layout import Layout as Layout
from simcore.workload.layout import Num as Num
from simcore.workload.model import expert_width, layer_shape, routed_load

OpKind = Literal["gemm", "attention", "memory", "ssd", "comm"]
Phase = Literal["fwd", "bwd"]


@dataclass(frozen=True)
class Op:
    """One kernel (or collective) type with its shape and how many times it runs.

    ``args`` are the keyword arguments of the matching cost function in :mod:`simcore.compute.ops`
    (``gemm``, ``attention``, ``memory_op``) or, for ``comm``, ``op``, ``nbytes`` and ``group``
    (a parallel dimension name: ``tp``, ``cp``, ``ep``, ``dp``, ``pp``).
    """

    name: str
    kind: OpKind
    category: str
    """Breakdown key: gemm, attention, elementwise, norm, tp_comm, cp_comm, ep_comm, ..."""
    args: dict[str, Any]
    count: Num = 1.0
    overlappable: bool = False
    """Communication that may hide behind computation (tp_overlap, CP ring exchange)."""


def _gemm(
    name: str,
    m: Num,
    n: Num,
    k: Num,
    dtype: str,
    category: str = "gemm",
    count: Num = 1.0,
    batch: Num = 1,
    bias: bool = False,
    chunks: tuple[Num, Num] | None = None,
    dgrad_chunks: bool = False,
) -> Op:
    """A GEMM op; ``chunks`` ``(n, on)``: where ``on``, it runs as ``n`` calls of ``m / n`` rows (TP overlap's
    ring exchange, :attr:`Layout.tp_chunks`), with ``dgrad_chunks`` its input gradient too (its weight
    gradient is one call)."""
    args: dict[str, Any] = {"m": m, "n": n, "k": k, "dtype": dtype, "batch": batch}
    if bias:
        args["bias"] = True  # its backward also reduces the output gradient over the tokens
    if chunks is not None:
        args["splits"], args["split_on"] = chunks
        if dgrad_chunks:
            args["dgrad_split"] = True
    return Op(name, "gemm", category, args, count)


def mem_op(
    name: str,
    numel: Num,
    elt_bytes: float,
    category: str = "elementwise",
    count: Num = 1.0,
    rows: Num | None = None,
) -> Op:
    """A bandwidth-bound kernel over ``numel`` elements; bytes and FLOPs follow the compute layer's
    traffic conventions (:func:`simcore.compute.ops.memory_op_traffic`), the ones its efficiencies
    were fitted with. ``rows``: the row count of a row-wise op (norms), which gives each row to one
    CTA (:func:`simcore.compute.ops.memory_op`)."""
    nbytes, flops = memory_op_traffic(name, numel, elt_bytes)
    args = {"name": name, "nbytes": nbytes, "flops": flops, "numel": numel, "elt": elt_bytes}
    if rows is not None:
        args["rows"] = rows
    return Op(name, "memory", category, args, count)


def _comm(
    name: str,
    op: str,
    nbytes: Num,
    group: str,
    category: str,
    count: Num = 1.0,
    overlappable: bool = False,
    bwd_nbytes: Num | None = None,
) -> Op:
    """A collective; ``bwd_nbytes`` sizes its backward twin when that moves a different dtype."""
    args = {"op": op, "nbytes": nbytes, "group": group}
    if bwd_nbytes is not None:
        args["bwd_nbytes"] = bwd_nbytes
    return Op(name, "comm", category, args, count, overlappable)


def norm_name(m: ModelSpec) -> str:
    return "rmsnorm" if m.norm == "rmsnorm" else "layernorm"


def fused_mem_op(
    name: str,
    numel: Num,
    elt_bytes: float,
    fwd_bytes: float,
    bwd_bytes: float,
    category: str,
    bwd_name: str | None = None,
    count: Num = 1.0,
    rows: Num | None = None,
) -> Op:
    """One fused memory-bound kernel priced on op ``name``'s fitted curve with explicit traffic:
    ``fwd_bytes`` / ``bwd_bytes`` bytes per element read + written by its forward / backward kernels;
    ``bwd_name``: the fitted op whose curve prices the backward kernel (default ``<name>_bwd``);
    ``count`` kernels of it; ``rows``: the row count of a row-wise op (see :func:`mem_op`)."""
    _nb, flops = memory_op_traffic(name, numel, elt_bytes)
    n = np.asarray(numel, dtype=np.float64)
    args = {
        "name": name,
        "nbytes": n * fwd_bytes,
        "flops": flops,
        "numel": numel,
        "elt": elt_bytes,
        "bwd_nbytes": n * bwd_bytes,
        "bwd_name": bwd_name or name + "_bwd",
    }
    if rows is not None:
        args["rows"] = rows
    return Op(name, "memory", category, args, count)


def with_bwd_chain(op: Op, chain: list[tuple[float, str]]) -> Op:
    """``op`` (a :func:`fused_mem_op`) whose backward is the kernels of ``chain`` (bytes read + written per
    element of its ``numel``, and the fitted op pricing each) instead of one kernel: PyTorch ops that
    launch several (softmax's product then its own kernel), or none (``[]``)."""
    n = np.asarray(op.args["numel"], dtype=np.float64)
    return Op(
        op.name, op.kind, op.category, {**op.args, "bwd_chain": [(n * b, nm) for b, nm in chain]}, op.count
    )


Kernel = float | tuple[float, str]
"""One kernel of a composite: bytes read + written per element, and the fitted op pricing it (a bare
number: ``mul``, a plain binary op)."""


def _kernel(k: Kernel) -> tuple[float, str]:
    return (float(k[0]), k[1]) if isinstance(k, tuple) else (float(k), "mul")


def chain_op(name: str, numel: Num, fwd: list[Kernel], bwd: list[Kernel], category: str) -> list[Op]:
    """Elementwise kernels written out of separate PyTorch ops (a composite activation or norm): one
    kernel per entry of ``fwd`` (bytes read + written per element of ``numel``, and the op whose
    fitted curve prices it: a plain binary op, ``mul``, unless named, e.g. ``add_mixed`` for an fp32
    tensor plus a bf16 one); the first carries the backward chain ``bwd`` (one kernel per entry,
    :func:`backward_of`)."""
    n = np.asarray(numel, dtype=np.float64)
    _nb, flops = memory_op_traffic("mul", numel, 2.0)
    out: list[Op] = []
    for i, k in enumerate(fwd):
        b, kname = _kernel(k)
        args = {"name": kname, "nbytes": n * b, "flops": flops, "numel": numel, "elt": 2.0}
        args["bwd_chain"] = [(n * x, nm) for x, nm in map(_kernel, bwd)] if i == 0 else []
        out.append(Op(f"{name}_{i}", "memory", category, args))
    return out


def hf_biases(m: ModelSpec, implementation: str) -> bool:
    """Whether the block's projections (and LayerNorms) carry biases: Hugging Face's GPT-2 family
    (``Conv1D``; the Llama family and the reference layers are bias-free)."""
    return implementation == "huggingface" and m.activation != "swiglu"


def _biased(m: ModelSpec, lay: Layout) -> bool:
    return hf_biases(m, lay.implementation)


def composite_ops(kind: str, numel: Num, act: float, wide: float) -> list[Op]:
    """The kernels Hugging Face ``transformers`` writes out of elementwise ops, per element of
    ``numel`` (bytes read + written per kernel; ``act``: the activation dtype's bytes, ``wide``: the
    dtype autocast promotes to, fp32 under AMP, else ``act``). From the modelling code, kernel by
    kernel (forward; the backward is the autograd of each op):

    * ``gelu_tanh`` (GPT-2's ``gelu_new``, ``0.5 x (1 + tanh(c (x + 0.044715 x^3)))``: ``pow`` runs in
      fp32 under autocast, its input cast first, and promotes the rest): cast, pow, mul, add, mul,
      tanh, add, mul(0.5, x), mul, and the cast for the next GEMM; backward: 15 kernels (the products' two gradients, tanh_backward,
      pow's 3 x^2 g, the casts back, the sum of the three gradients of x);
    * ``rmsnorm`` (``LlamaRMSNorm`` over the residual stream of ``wide`` bytes, in fp32 whatever that
      is: the upcast where it is narrower, pow(2), mean, rsqrt of the row means, x * rsqrt, the cast
      back, weight * x; the row-sized kernels are priced as one kernel of ``act`` bytes per element,
      the same order as their launches); backward: 11 kernels (13 with the casts);
    * ``rotary`` (``apply_rotary_pos_emb`` on queries or keys: neg of one half, cat, x cos, rot sin,
      add; cos and sin in the residual dtype, so under AMP the products promote to fp32 and the sum
      is cast back); backward: the cast, the products' gradients and their casts, neg, the two halves'
      zero-filled slices, the sums."""
    a, w = act, wide
    fwd: list[Kernel]
    bwd: list[Kernel]
    # where autocast widens (``wide`` > ``act``), the upcasts and the ops mixing the two dtypes run
    # PyTorch's unrolled kernels (``cast_up``, ``add_mixed``, ``mul_mixed``); casts down stay vectorised
    mixed = w > a
    madd, mmul = ("add_mixed", "mul_mixed") if mixed else ("add", "mul")

    def up(n: float) -> list[Kernel]:  # an autocast upcast (none without autocast)
        return [(n, "cast_up")] if mixed else []

    def down(n: float) -> list[Kernel]:  # an autocast cast back
        return [(n, "cast")] if mixed else []

    if kind == "gelu_tanh":
        # autocast casts pow's input to fp32 first and the result back for the next GEMM (without
        # autocast, bf16 weights, neither: 8 kernels)
        fwd = [*up(a + w), 2 * w, 2 * w, (a + 2 * w, madd), 2 * w, 2 * w, 2 * w, 2 * a, (a + 2 * w, mmul)]
        fwd += down(w + a)
        # cast back, the products' two gradients, tanh_backward, pow's 3 x^2 g on the fp32 copy,
        # the casts back, the sum of the three gradients of x
        bwd = [*up(a + w), 3 * w, *down(w + a), (2 * w + a, mmul), 2 * a, 3 * w, 2 * w, *down(w + a), 2 * w]
        bwd += [2 * w, 2 * w, 3 * w, *down(w + a), 3 * a, 3 * a]
    elif kind == "rmsnorm":
        # ``LlamaRMSNorm`` always computes in fp32 (``f``): an input of another dtype (``wide``: the
        # residual stream's, bf16 with bf16 weights) is upcast first and cast back before the weight;
        # the products with the row statistic ``[rows, 1]`` and with the weight ``[W]`` broadcast
        # them (a stride-0 operand: the offset loop, ``mul_bcast``)
        r, f = w, 4.0
        cast = r < f
        bf, br = "mul_bcast_fp32", dtype_variant("mul_bcast", "fp32" if r == 4.0 else "bf16")
        fwd = [*([(r + f, "cast_up")] if cast else []), 2 * f, f, a, (2 * f, bf)]
        fwd += [*([(f + r, "cast")] if cast else []), (2 * r, br)]
        # the weight's product (broadcast) and its gradient (product, sum over the tokens), the upcast,
        # the products and sum through rsqrt (broadcast), the row-sized kernels, the mean's broadcast,
        # pow's 2 x g, the product with x, the sum of the two gradients of x, the cast back
        bwd = [(2 * r, br), 3 * r, r, *([(r + f, "cast_up")] if cast else []), 3 * f]
        bwd += [(2 * f, bf), f, a, (f, bf), 2 * f, 3 * f, (3 * f, "add")]
        bwd += [(f + r, "cast")] if cast else []
    elif kind == "rotary":
        # cos and sin come in the residual stream's dtype (fp32 under AMP): the products promote, and
        # the sum is cast back for the attention; rotate_half negates and concatenates the strided
        # halves of the transposed heads, and every op on those views runs the strided loop
        smul = mmul if mixed else "mul_strided"
        fwd = [
            (a, "copy_strided"),
            (2 * a, "copy_strided"),
            (a + w, smul),
            (a + w, smul),
            (3 * w, "mul_strided"),
        ]
        fwd += down(w + a)
        bwd = [*up(a + w), (2 * w, smul), *down(w + a), (2 * w, smul), *down(w + a), (a, "copy_strided")]
        bwd += [(2 * a, "copy_strided"), (2 * a, "copy_strided"), (3 * a, "add"), (3 * a, "add")]
    else:
        raise ValueError(f"unknown composite {kind!r}")
    # every kernel of the chain is an elementwise one (a trace's classifier finds no norm kernel in
    # transformers' RMSNorm): the class table compares like with like
    return chain_op(kind, numel, fwd, bwd, "elementwise")


def dropout_op(numel: Num, act: float) -> Op:
    """``native_dropout`` of a training run: reads the activation, writes it and a one-byte mask; its
    backward reads the gradient and the mask and writes the gradient."""
    return fused_mem_op("dropout", numel, act, 2 * act + 1.0, 2 * act + 1.0, "elementwise", bwd_name="mul")


def norm_ops(m: ModelSpec, lay: Layout, tokens: Num, consumers: int = 1) -> list[Op]:
    """A norm over the residual stream, and, when that stream is wider than the GEMM input dtype
    (autocast), the cast of the norm output for the next GEMM.

    Fused (compiled): the residual add before the norm, the norm and its cast are one kernel: it reads
    the branch output and the residual and writes the new residual and the normalised activations
    (``2 rb + 2 b`` bytes per element); its backward reads the incoming gradient, the saved residual
    and the residual's gradient, writes the residual's new gradient, and reads the gradient and the
    input again for the weight gradient (``2 b + 4 rb``). The add itself is then not emitted
    (:func:`residual_add`). Both directions are priced as a plain streaming kernel (``compiled_norm``,
    the ``add`` curve), not on PyTorch's eager norm kernels' fit."""
    rb = lay.residual_bytes
    b = lay.act_bytes
    if lay.fused:
        # forward and backward priced on one curve: a generated kernel streaming its bytes (no
        # measurement of Triton's norm kernels; PyTorch's eager norm kernels are slower per byte)
        return [
            fused_mem_op(
                "compiled_norm", tokens * m.hidden, rb, 2 * rb + 2 * b, 2 * b + 4 * rb, "norm", "compiled_norm"
            )
        ]
    if lay.hf and m.norm == "rmsnorm":
        ops = composite_ops("rmsnorm", tokens * m.hidden, b, rb)
    else:
        ops = [mem_op(norm_name(m), tokens * m.hidden, rb, "norm", rows=tokens)]
    if rb > lay.act_bytes:
        # autocast casts a GEMM's input at each call: once per projection that reads the norm (the
        # separate q / k / v and gate / up projections of Hugging Face's Llama family)
        ops.append(mem_op("cast", tokens * m.hidden, (rb + lay.act_bytes) / 2.0, "amp_cast", count=consumers))
    return ops


def residual_add(m: ModelSpec, lay: Layout, tokens: Num) -> list[Op]:
    """The residual add closing a block (part of the next norm's kernel when fused)."""
    if lay.fused:
        return []
    rb, b = lay.residual_bytes, lay.act_bytes
    if rb > b:
        # an fp32 residual plus a bf16 branch (autocast): PyTorch's unrolled mixed-dtype kernel; its
        # backward casts the residual's gradient down for the branch (a vectorised cast)
        return [
            fused_mem_op(
                "add_mixed", tokens * m.hidden, (2 * rb + b) / 3, 2 * rb + b, rb + b, "elementwise", "cast"
            )
        ]
    return [mem_op("add", tokens * m.hidden, rb, "elementwise")]


def attention_block_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of one attention block (norm, QKV, attention core, out-projection, residual)."""
    s = layer_shape(m)
    T = lay.tokens
    t = lay.tp
    b = lay.act_bytes
    dt = lay.dtype
    h = s.hidden
    ops: list[Op] = []
    tsp = T / lay.sp_div  # tokens seen outside the TP region
    ops.extend(norm_ops(m, lay, tsp, 3 if lay.hf and m.activation == "swiglu" else 1))
    if m.csa is not None:
        ops.extend(csa_attention_fwd(m, lay))
        ops.extend(residual_add(m, lay, tsp))
        return ops
    if m.mla is not None:
        ml = m.mla
        ops.append(_gemm("q_down", T, ml.q_lora_rank, h, dt))
        ops.append(_gemm("q_up", T, s.heads * s.head_dim / t, ml.q_lora_rank, dt))
        ops.append(_gemm("kv_down", T, ml.kv_lora_rank + ml.qk_rope_head_dim, h, dt))
        ops.append(_gemm("kv_up", T, s.heads * (ml.qk_nope_head_dim + s.v_head_dim) / t, ml.kv_lora_rank, dt))
        ops.append(mem_op(norm_name(m), T * (ml.q_lora_rank + ml.kv_lora_rank), b, "norm", rows=T))
    elif split_projections(m, lay):
        # transformers' Llama family projects q, k and v with three nn.Linear (inductor keeps the three
        # GEMMs); the queries' rotary embedding and cast, and the mask's, are two more kernels before SDPA
        # (the measured compiled decode graph: 17 kernels a layer)
        for nm, heads in (("q_proj", s.heads), ("k_proj", s.kv_heads), ("v_proj", s.kv_heads)):
            ops.append(_gemm(nm, T, heads * s.head_dim / t, h, dt, bias=_biased(m, lay)))
        # (streaming kernels priced on the copy curve: the queries read and written once, the boolean mask)
        ops.append(fused_mem_op("copy", T * s.heads / t * s.head_dim, b, 2 * b, 0.0, "elementwise"))
        ops.append(fused_mem_op("copy", lay.micro_batch * (lay.static_cache or 1.0), 1.0, 2.0, 0.0, "elementwise"))
    else:
        # TP overlap: the forward's all-gather ring exchange (qkv_fprop); the input gradient's reduce-scatter
        # is a bulk overlap beside one GEMM (qkv_dgrad)
        ops.append(
            _gemm(
                "qkv", T, (s.heads + 2 * s.kv_heads) * s.head_dim / t, h, dt, bias=_biased(m, lay),
                chunks=lay.tp_chunks,
            )
        )  # fmt: skip
        if lay.hf_code and m.activation == "swiglu":
            # the Llama family's rotary embedding on the queries and the keys (GPT-2: learned positions)
            ops.extend(rotary_ops(T * (s.heads + s.kv_heads) * s.head_dim / t, lay))
    if lay.attention_backend == "eager":
        ops.extend(eager_attention_ops(m, lay))
    else:
        if lay.static_cache is not None and s.kv_heads < s.heads:
            # repeat_kv over the whole static cache: the keys and the values each read once and written
            # once per query head (inductor's two fused copies a layer, measured ~65 us each at 512 x 48)
            n = lay.micro_batch * s.heads / t * lay.static_cache * s.head_dim
            kb = lay.kv_bytes
            ops.append(
                fused_mem_op("copy", n, kb, kb * (1.0 + s.kv_heads / s.heads), 0.0, "elementwise", count=2.0)
            )
        ops.append(_fused_attention(m, lay))
    kv_numel = T * s.kv_heads / t * s.head_dim
    if lay.hf:
        # transformers' cache (also filled in training: ``use_cache`` defaults to true) concatenates
        # the transposed keys and values (PyTorch's cat of strided inputs); their gradients come back
        # as strided copies
        kb = lay.kv_bytes
        ops.append(fused_mem_op("cat_strided", kv_numel, kb, 2 * kb, 2 * kb, "kv_cache", "copy_strided", 2.0))
    elif lay.kv_cache or lay.hf_code:
        # inference: this step's keys and values are written into the KV cache (one copy each;
        # compiled transformers code writes its cache in one fused kernel each)
        ops.append(mem_op("copy", kv_numel, lay.kv_bytes, "kv_cache", count=2.0))
    if lay.hf:
        # transformers' attention output, [b, heads, s, d] transposed back and made contiguous
        ops.append(mem_op("copy", T * s.heads / t * s.v_head_dim, b, "elementwise"))
    # TP overlap: the forward's reduce-scatter (proj_fprop) and the input gradient's all-gather (proj_dgrad)
    # ring exchanges
    ops.append(
        _gemm(
            "attn_out", T, h, s.heads * s.v_head_dim / t, dt, bias=_biased(m, lay), chunks=lay.tp_chunks,
            dgrad_chunks=True,
        )
    )  # fmt: skip
    if lay.dropout > 0:
        ops.append(dropout_op(tsp * h, b))
    ops.extend(residual_add(m, lay, tsp))
    return ops


def csa_attention_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of DeepSeek-V4's hybrid attention between the pre-norm and the residual on one rank, one
    layer averaged over the model's compression ratios (each ratio's ops counted ``layers of it / layers``;
    :mod:`simcore.workload.csa`): the query latent (``q_down``, its norm, ``q_up``, column-parallel), the shared
    key/value head (``kv``, its norm); per compressed layer the compressor's key/value and gate GEMM
    (``hidden -> 2 x overlap x head_dim``) and its gated pooling of ``overlap x ratio`` rows into one; per CSA
    layer the indexer (query ``q_lora -> H_I D_I``, its own overlapping compressor, ``weights_proj``
    ``hidden -> H_I``), its scores of every earlier compressed entry (a GEMM of ``2 H_I D_I`` FLOPs per
    query-entry pair whose epilogue sums the heads' ReLU-weighted scores into one fp32 logit, in bf16: Megatron-
    Core's ``dsa.py`` indexer is "a BF16 implementation of the ``fp8_index`` logic") and its top-k over those
    logits; the attention kernel over the window and the selected (CSA) or all (HCA) compressed entries, as a
    non-causal attention of :func:`~simcore.workload.csa.attention_context` keys per query (one key/value head);
    and the grouped low-rank output projection (``wo_a``: ``o_groups`` GEMMs of ``heads / o_groups x head_dim ->
    o_lora_rank``, batched; ``wo_b``: ``o_groups x o_lora_rank -> hidden``, row-parallel). Training only
    (:func:`simcore.specs.stack.check_given` refuses other kinds)."""
    c = m.csa
    assert c is not None
    s = layer_shape(m)
    T, t, b, dt = lay.tokens, lay.tp, lay.act_bytes, lay.dtype
    h, d = s.hidden, s.head_dim
    seq = float(np.max(np.asarray(lay.seq, dtype=float)))  # one sequence length per evaluation (the longest)
    att = _fused_attention(m, lay)
    if att.args["backend"] != "cudnn":
        # DeepSeek-V4's attention runs its own fused sparse kernels (cuDNN's DSA where Megatron-Bridge finds it,
        # ``deepseek_v4_supports_fused_dsa_kernels``), priced on cuDNN's 16-bit fused-attention curve
        raise SimcoreError(
            f"DeepSeek-V4's hybrid attention is priced as cuDNN's 16-bit fused kernels, not {att.args['backend']}",
            field="runtime.attention_backend",
        )
    ops: list[Op] = [
        _gemm("q_down", T, c.q_lora_rank, h, dt),
        mem_op(norm_name(m), T * c.q_lora_rank, b, "norm", rows=T),
        _gemm("q_up", T, s.heads * d / t, c.q_lora_rank, dt),
        _gemm("kv", T, d, h, dt),
        mem_op(norm_name(m), T * d, b, "norm", rows=T),
    ]
    for g in C.ratio_groups(m):
        w = g.layers / m.layers
        if g.ratio:
            ops.append(_gemm(f"compress_r{g.ratio}", T, 2 * g.overlap * d, h, dt, count=w))
            pool = fused_mem_op("softmax", T * g.overlap * d, b, 2 * b + b / g.ratio, 4 * b, "attention_aux", count=w)
            ops.append(replace(pool, name=f"compress_pool_r{g.ratio}"))
        if g.sparse:
            hi, di = c.indexer_heads / t, c.indexer_head_dim
            ops.append(_gemm("indexer_q", T, hi * di, c.q_lora_rank, dt, count=w))
            ops.append(_gemm("indexer_compress", T, 2 * 2 * di, h, dt, count=w))
            ops.append(_gemm("indexer_weights", T, hi, h, hp_dtype(dt), count=w))
            pairs = C.indexer_pairs(g, seq)
            # per sequence: seq queries x their mean earlier entries, k = the heads' H_I D_I products summed
            ops.append(
                _gemm("indexer_scores", lay.seq, pairs, hi * di, hp_dtype(dt), "attention_aux", w, lay.micro_batch)
            )
            topk = mem_op("argmax", T * pairs, 4.0, "attention_aux", count=w)
            ops.append(replace(topk, name="indexer_topk"))
        ctx = C.attention_context(g, c, seq)
        args = {**att.args, "kv_heads": 1.0, "kv_seq": ctx, "causal": False}
        ops.append(Op("attention" if g.ratio == 0 else f"attention_r{g.ratio}", "attention", "attention", args,
                      att.count * w))
    groups = c.o_groups / t
    ops.append(_gemm("o_down", T, c.o_lora_rank, s.heads * d / c.o_groups, dt, batch=groups))
    ops.append(_gemm("attn_out", T, h, groups * c.o_lora_rank, dt))
    return ops


def hc_ops(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of one layer's two manifold-constrained hyper-connections (none for a plain residual): each
    block's ``hc_pre`` (the ``n`` streams, flattened to ``n h`` and RMS-normalised, times ``hc_fn`` into the
    ``(2 + n) n`` mixes; a GEMM that reads the streams once) and its weighted sum of the streams into the block's
    ``h``-wide input (reads ``n h``, writes ``h``), and ``hc_post``: the ``n x n`` residual mix of the streams plus
    the post weights times the block's output (reads ``n h + h``, writes ``n h``). Bandwidth-bound streaming
    kernels over the ``n h`` streams, fused as Megatron-Core's ``use_fused_mhc`` kernels are; the 20 Sinkhorn
    iterations on the ``n x n`` mixes per token are left out (``n^2`` elements a token)."""
    n = m.residual_streams
    if n == 1:
        return []
    T = lay.tokens / lay.sp_div
    b = lay.act_bytes
    numel = T * n * m.hidden
    mix = _gemm("hc_mix", T, C.hc_mixes(n), n * m.hidden, hp_dtype(lay.dtype), "hyper_connection", count=2.0)
    pre = fused_mem_op("copy", numel, b, b * (1 + 1 / n), 2 * b * (1 + 1 / n), "hyper_connection", "copy", 2.0)
    post = fused_mem_op("copy", numel, b, b * (2 + 1 / n), 2 * b * (2 + 1 / n), "hyper_connection", "copy", 2.0)
    return [
        mix,
        replace(pre, name="hc_pre_mix"),
        replace(post, name="hc_post_mix"),
    ]


def rotary_ops(numel: Num, lay: Layout) -> list[Op]:
    """``transformers``' rotary embedding of ``numel`` query and key elements: eager, the chain of
    elementwise kernels :func:`composite_ops` lists; compiled, the one kernel inductor fuses it into
    (``triton_poi_fused_..._cat_cos_mul_neg_sin_slice_transpose...`` per layer in the committed
    compiled Llama traces, e.g. traces/h200/round36) and one for its backward (``..._slice_backward...``),
    each priced on the copy curve over the heads read once and written once. A lower bound: those
    kernels also recompute cos and sin per element (the position x inverse-frequency product is fused
    in), which the byte count does not price (docs/stacks.md, torch.compile)."""
    b = lay.act_bytes
    if not lay.fused:
        return composite_ops("rotary", numel, b, lay.residual_bytes)
    return [fused_mem_op("copy", numel, b, 2 * b, 2 * b, "elementwise", bwd_name="copy")]


def split_projections(m: ModelSpec, lay: Layout) -> bool:
    """Whether the q / k / v and the gate / up projections are priced as the separate GEMMs
    ``transformers``' Llama family (SwiGLU) runs: inside a compiled static-cache decode graph
    (:attr:`Layout.static_cache`), whose kernel count the graph's per-kernel host terms read (fitted on
    the graphs' measured kernels). Elsewhere each group is priced as one GEMM of the summed width."""
    return lay.static_cache is not None and lay.hf_code and m.activation == "swiglu" and m.mla is None


def strided_gate_up(framework: str, gate_up: str) -> bool:
    """Whether a gated MLP's SiLU and product read the strided halves of one fused gate/up GEMM
    output: a ``fused`` gate/up projection outside compiled code (eager kernels, and CUDA graphs
    replaying them; inductor fuses the product into one kernel)."""
    return gate_up == "fused" and framework != "compiled"


def mlp_block_fwd(
    m: ModelSpec, lay: Layout, ffn: Num | None = None, tokens: Num | None = None, hidden: Num | None = None
) -> list[Op]:
    """Forward ops of a dense MLP block (or one expert group's when ``tokens`` is given; ``hidden``: its input and
    output width, a LatentMoE's latent width for the routed experts)."""
    s = layer_shape(m)
    T = lay.tokens if tokens is None else tokens
    f = (s.ffn_hidden if ffn is None else ffn) / lay.tp
    h = s.hidden if hidden is None else hidden
    b = lay.act_bytes
    dt = lay.dtype
    # TP overlap's ring exchanges (fc1_fprop, fc2_fprop, fc2_dgrad) on the dense MLP; an expert group's GEMMs
    # (``tokens`` given) are not TP-overlapped
    chunks = lay.tp_chunks if tokens is None else None
    ops: list[Op] = []
    if s.gated and split_projections(m, lay):
        # transformers' gate_proj and up_proj: two GEMMs, then inductor's fused SiLU-and-product
        ops.extend(_gemm(nm, T, f, h, dt) for nm in ("gate_proj", "up_proj"))
        ops.append(mem_op("swiglu", T * f, b, "elementwise"))
    elif s.gated:
        ops.append(_gemm("mlp_in", T, 2 * f, h, dt, chunks=chunks))
        # one fused gate/up GEMM in eager PyTorch: SiLU and the product read its strided halves
        act = "swiglu_strided" if lay.strided_gate_up else "swiglu"
        ops.append(mem_op(act, T * f, b, "elementwise"))
    else:
        ops.append(_gemm("mlp_in", T, f, h, dt, bias=_biased(m, lay), chunks=chunks))
        if m.activation == "squared_relu":
            # Megatron-Core's squared_relu, ``torch.pow(F.relu(x), 2)``: two unary kernels in eager
            # PyTorch (the vectorised one-in one-out loop, priced as ``mul_scalar``)
            for nm in ("relu", "square"):
                o = mem_op("mul_scalar", T * f, b, "elementwise")
                ops.append(Op(nm, o.kind, o.category, o.args, o.count))
        elif lay.hf:
            ops.extend(composite_ops("gelu_tanh", T * f, b, lay.residual_bytes))
        else:
            ops.append(mem_op("gelu", T * f, b, "elementwise"))
    ops.append(_gemm("mlp_out", T, h, f, dt, bias=_biased(m, lay), chunks=chunks, dgrad_chunks=True))
    if lay.dropout > 0:
        ops.append(dropout_op(T * h, b))
    return ops


def tp_comm_fwd(m: ModelSpec, lay: Layout, blocks: int = 2, quantized: bool = True) -> list[Op]:
    """Tensor-parallel collectives of ``blocks`` blocks in the forward pass (their backward twins follow by
    :func:`backward_of`). With sequence parallelism and ``quantized`` (the blocks' linear layers are
    Transformer Engine modules under the recipe), the all-gathers of the inputs (forward) and of the output
    gradients (backward) move :attr:`Layout.gather_bytes` per element, the reduce-scatters the activation
    dtype. Such a block's input feeds a column-parallel linear layer, whose backward gathers the input once
    more for its weight gradient (the forward keeps only the local shard) and reduce-scatters the input
    gradient, each asynchronously beside a GEMM (:func:`backward_of`: category ``tp_comm_async``)."""
    nbytes = lay.tokens * m.hidden * lay.act_bytes
    # backward collectives carry gradients of the residual stream (fp32 under autocast)
    bwd = lay.tokens * m.hidden * lay.residual_bytes
    q = lay.tokens * m.hidden * lay.gather_bytes if quantized and lay.gather_bytes is not None else None
    ar = _comm("tp_allreduce", "all_reduce", nbytes, "tp", "tp_comm", count=blocks, bwd_nbytes=bwd)
    ag = _comm(
        "tp_allgather", "all_gather", nbytes if q is None else q, "tp", "tp_comm", count=blocks,
        bwd_nbytes=None if q is None else nbytes,
    )  # fmt: skip
    if quantized:
        ag = Op(ag.name, ag.kind, ag.category, {**ag.args, "regather": True}, ag.count)
    rs = _comm("tp_reducescatter", "reduce_scatter", nbytes, "tp", "tp_comm", count=blocks, bwd_nbytes=q)
    if isinstance(lay.sp, bool):
        return [ag, rs] if lay.sp else [ar]
    # Arrays of layouts: all three listed, counts zeroed where they do not apply.
    sp = np.asarray(lay.sp, dtype=bool)
    return [
        Op(ar.name, ar.kind, ar.category, ar.args, np.where(sp, 0.0, blocks)),
        Op(ag.name, ag.kind, ag.category, ag.args, np.where(sp, blocks, 0.0)),
        Op(rs.name, rs.kind, rs.category, rs.args, np.where(sp, blocks, 0.0)),
    ]


def batched_experts(implementation: str, decode_loop: str, moe: bool) -> bool:
    """Whether a decode pass runs ``transformers``' ``batched_mm`` experts: on a GPU ``generate()`` switches
    an MoE model's ``grouped_mm`` experts to ``batched_mm`` for its decode passes (transformers' "decode-stage
    switching", seen in its decode traces), its prefill and a hand-written loop's passes keep the grouped GEMM."""
    return moe and implementation == "huggingface" and decode_loop == "generate"


def decode_moe_key(implementation: str, decode_loop: str, moe: bool) -> str | None:
    """The MoE variant of a decode layer's host entries (``ComputeProfile.layer_key``'s ``moe``):
    ``moe_batched`` where the decode passes run :func:`batched_experts`, ``moe_native`` (the bf16 grouped
    GEMM) for another MoE model's, ``None`` for a dense model's."""
    if not moe:
        return None
    return "moe_batched" if batched_experts(implementation, decode_loop, moe) else "moe_native"


def active_experts(experts: int, top_k: int, ep: Num, tokens: Num) -> Any:
    """Expected number of experts with at least one token on the busiest of ``ep`` expert-parallel ranks when
    ``tokens`` tokens (the whole EP group's) each pick ``top_k`` distinct experts of ``experts`` uniformly.

    An expert is hit with probability ``p = 1 - (1 - top_k / experts) ** tokens``; a rank holds
    ``n = experts / ep`` of them, so its count is Binomial(n, p) (the experts taken as independent) and the
    expected maximum over the ranks is ``sum_{j=1..n} [1 - F(j - 1) ** ep]`` with ``F`` that binomial's CDF.
    One rank (``ep = 1``) gives the mean ``experts x p``: ``top_k`` experts at one token, nearly all of them
    once ``tokens x top_k`` is a few times ``experts``. A decode step reads the weights of these experts, so
    this, not ``top_k`` per token, sets an MoE model's weight traffic at small batches (docs/serving.md,
    "Active experts"). At least one expert (a rank with no token still runs its kernels)."""
    ep_a, t_a = np.broadcast_arrays(np.asarray(ep, dtype=float), np.asarray(tokens, dtype=float))
    out = np.empty(ep_a.shape)
    for e in np.unique(ep_a):
        sel = ep_a == e
        out[sel] = _busiest_active(experts, top_k, float(e), t_a[sel])
    return float(out) if out.ndim == 0 else out


def _busiest_active(experts: int, top_k: int, ep: float, tokens: np.ndarray) -> np.ndarray:
    """:func:`active_experts` for one ``ep`` over a 1-D array of token counts."""
    n = max(int(round(experts / ep)), 1)
    p = 1.0 - (1.0 - top_k / experts) ** np.maximum(tokens, 0.0)
    j = np.arange(n + 1, dtype=float)
    logf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, n + 1)))])
    pe = np.clip(p, 1e-300, 1.0 - 1e-16)[:, None]
    pmf = np.exp(logf[n] - logf - logf[::-1] + j * np.log(pe) + (n - j) * np.log1p(-pe))
    cdf = np.minimum(np.cumsum(pmf, axis=1), 1.0)[:, :-1]
    busiest = np.sum(1.0 - cdf**ep, axis=1)
    return np.asarray(np.maximum(np.where(p >= 1.0 - 1e-16, float(n), busiest), 1.0))


def moe_block_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of an MoE block: router, dispatch all-to-all, expert GEMMs, combine all-to-all (the exchange
    :attr:`Layout.ep_exchange` names; none under ``tp_all_reduce``, whose folded ``T x etp / tp`` tokens a rank
    are the replicated tokens' ``1 / ep`` share with ``ep x etp = tp``). Under :attr:`Layout.batched_experts`
    every routed token gathers its expert's weights and multiplies them alone (a GEMV of batch ``routed``).
    A LatentMoE (``moe.latent_dim``) projects the routed tokens down to the latent width after the router and back
    up after the combine (Megatron-Core ``MoELayer``'s ``fc1_latent_proj`` / ``fc2_latent_proj``, replicated over
    TP, on the rank's sequence-parallel share of the tokens): the dispatch, permute, experts, unpermute and combine
    all move and multiply ``latent_dim``-wide rows. With :attr:`Layout.capacity_factor` the busiest expert's rows
    are capped at its capacity, or with :attr:`Layout.pad_to_capacity` every expert's are filled to it
    (:func:`~simcore.workload.model.routed_load`): the exchange, permute, experts and unpermute follow."""
    assert m.moe is not None
    moe = m.moe
    s = layer_shape(m)
    T = lay.tokens
    h = expert_width(m)  # the routed rows' width (the hidden size, or a LatentMoE's latent width)
    latent = moe.latent_dim is not None
    T_lat = lay.tokens / lay.sp_div
    b = lay.act_bytes
    dt = lay.dtype
    # the router is a plain linear layer in bf16 whatever the recipe (Megatron-Core's TopKRouter); hash-routed
    # layers (moe.hash_layers) look their experts up instead: no router kernels on those
    routed_share = 1.0 - moe.hash_layers / max(m.moe_layers, 1)
    ops: list[Op] = [_gemm("router", T, moe.experts, h, hp_dtype(dt), "moe_router", routed_share)]
    ops.append(mem_op("softmax", T * moe.experts, 4.0, "moe_router", routed_share))
    # top-k over the fp32 probabilities: one read of them (the k indices and values written are small);
    # its backward scatters the k gradients into a T x experts gradient (read the probs' shape once more)
    topk = mem_op("argmax", T * moe.experts, 4.0, "moe_router", routed_share)
    ops.append(replace(topk, name="topk"))
    if latent:
        ops.append(_gemm("latent_down", T_lat, h, s.hidden, dt))
    # parallel folding: an expert-TP group of etp ranks shares the tokens of etp of the attention's
    # tp ranks (each attention TP rank holds 1/tp of the tokens under sequence parallelism)
    etp = lay.tp if lay.etp is None else lay.etp
    T = T * etp / lay.tp
    # hash-routed layers' fixed assignment is taken as balanced: the busiest rank's excess applies to the others;
    # a capacity factor caps it (the copies beyond an expert's capacity dropped) or pads every expert to it
    imbalance = 1.0 + (moe.imbalance - 1.0) * routed_share
    load = routed_load(T, moe.top_k, moe.experts, imbalance, lay.capacity_factor, lay.pad_to_capacity)
    routed = T * moe.top_k * load
    # experts a rank runs (and whose weights it reads): at few tokens not all of its share are hit, and the
    # busiest of the ep ranks sets every MoE layer's pace (the group routes T x ep tokens); padded, all of them
    local_experts = active_experts(moe.experts, moe.top_k, lay.ep, T * lay.ep)
    if lay.pad_to_capacity and lay.capacity_factor is not None:
        local_experts = np.maximum(moe.experts / lay.ep, 1.0)
    if lay.batched_experts:
        # one "expert" per routed token, each gathering its weights (gate/up and down: an index-select's
        # gather kernel, as the embedding lookup's, over (2 if gated) + 1 matrices of h x ffn per token)
        local_experts = routed
        f = moe.expert_ffn_hidden / etp
        mats = 3.0 if s.gated else 2.0
        g = mem_op("embedding", routed * mats * h * f, b, "embedding")
        ops.append(replace(g, name="expert_weight_gather"))
    per_expert = routed / local_experts
    # the busiest rank sets the all-to-all's pace: it receives (dispatch) and sends back (combine) the
    # tokens of its hot experts, ``imbalance`` times the mean (collective_time's ``skew``), at most their
    # capacity; padded to capacity, every rank moves ``capacity x experts`` rows
    a2a_bytes = routed * h * b
    db = b if lay.dispatch_bytes is None else lay.dispatch_bytes
    # all_gather: every rank receives all ep ranks' tokens (the gathered T x ep rows, in the dispatch's bytes) and
    # a reduce-scatter sums the ranks' partial outputs back (T x ep rows in act_bytes), whatever the routing
    gathered = T * lay.ep * h
    dispatch: Op | None
    combine: Op | None
    if lay.ep_exchange == "all_gather":
        dispatch = _comm("ep_dispatch", "all_gather", gathered * db, "ep", "ep_comm")
        combine = _comm("ep_combine", "reduce_scatter", gathered * b, "ep", "ep_comm")
    elif lay.ep_exchange == "tp_all_reduce":  # the tokens are on every rank, tp_comm sums the outputs
        dispatch = combine = None
    else:
        dispatch = _comm("ep_dispatch", "all_to_all", a2a_bytes * db / b, "ep", "ep_comm")
        combine = _comm("ep_combine", "all_to_all", a2a_bytes, "ep", "ep_comm")
        if lay.dispatcher != "alltoall":
            # a token goes once to each NVLink domain and GPU holding one of its experts: the pricer needs
            # the routing's fan-out (simcore.comm.dispatch)
            fan = {"dispatcher": lay.dispatcher, "top_k": moe.top_k, "experts": moe.experts}
            dispatch = replace(dispatch, args={**dispatch.args, **fan})
            combine = replace(combine, args={**combine.args, **fan})
    if dispatch is not None:
        ops.append(dispatch)
    # permute: a row gather of the routed tokens into expert order (an index-select, priced as the
    # embedding lookup's gather); its backward scatter-adds the rows back (the embedding backward's kernel)
    permute = mem_op("embedding", routed * h, b, "moe_permute")
    ops.append(replace(permute, name="permute"))
    wide = lay.fp32_experts
    for op in mlp_block_fwd(m, replace(lay, tp=etp), ffn=moe.expert_ffn_hidden, tokens=per_expert, hidden=h):
        args = dict(op.args)
        if op.kind == "gemm":
            args["batch"] = local_experts
            if wide:
                args["dtype"] = "fp32"
            ops.append(Op("expert_" + op.name, op.kind, "gemm", args, op.count))
        else:
            # every local expert's kernels, at fp32 width where the experts run fp32 (the backward's
            # traffic follows from numel and elt, or scales like the forward's where it was given)
            grow = lay.residual_bytes / b if wide else 1.0
            scale = local_experts * grow
            args["nbytes"] = op.args["nbytes"] * scale
            args["flops"] = op.args["flops"] * local_experts
            args["numel"] = op.args["numel"] * local_experts
            if wide:
                args["elt"] = lay.residual_bytes
            if "bwd_nbytes" in args:
                args["bwd_nbytes"] = args["bwd_nbytes"] * scale
            if "bwd_chain" in args:
                args["bwd_chain"] = [(nb * scale, nm) for nb, nm in args["bwd_chain"]]
            ops.append(Op("expert_" + op.name, op.kind, op.category, args, op.count))
    if lay.eager_expert_ops:
        ops.extend(expert_eager_ops(m, routed, etp, b))
    # unpermute: each routed row times its router probability, then the top_k rows of a token summed
    # into it (a row scatter-add of ``routed`` rows into ``T``: the embedding backward's access pattern,
    # whose backward is a gather)
    ops.append(Op("unpermute_scale", "memory", "moe_permute", mem_op("mul_bcast", routed * h, b).args))
    unpermute = mem_op("embedding", routed * h, b, "moe_permute")
    ops.append(replace(unpermute, name="unpermute"))
    if combine is not None:
        ops.append(combine)
    if latent:
        ops.append(_gemm("latent_up", T_lat, s.hidden, h, dt))
    if moe.shared_experts:
        ops.extend(
            Op("shared_" + o.name, o.kind, o.category, o.args, o.count)
            for o in mlp_block_fwd(m, lay, ffn=moe.shared_experts * moe.expert_ffn_hidden)
        )
    return ops


def expert_eager_ops(m: ModelSpec, routed: Num, etp: Num, b: float) -> list[Op]:
    """The eager kernels Megatron-Core's ``TEGroupedMLP`` runs beside the grouped GEMMs and the fused
    activation for a clamped activation and expert biases (GPT-OSS), over a rank's ``routed`` rows
    (megatron/core/transformer/moe/experts.py and fusions/fused_bias_geglu.py, Megatron-LM 0d8e0714 to
    d0b3b775; none under the fused grouped MLP). ``weighted_bias_quick_geglu_impl`` clamps the gate and
    linear halves of the gate/up output (two kernels reading the strided halves) and ``torch.cat``s them
    back (``expert_act_clamp``: recomputed with ``moe_act``). ``_apply_bias`` adds the output projection's
    bias per local expert as ``t + bias * prob`` with the fp32 router probabilities (an fp32 broadcast
    product, a bf16 + fp32 add), ``torch.cat``s the fp32 pieces and casts them back to bf16. The first
    projection's bias is added inside the fused activation kernel, not priced apart. Only where
    :attr:`Layout.eager_expert_ops`."""
    assert m.moe is not None
    moe = m.moe
    ops: list[Op] = []
    if moe.activation_clamp is not None:  # a gated activation's (ModelSpec checks it)
        n = routed * 2.0 * moe.expert_ffn_hidden / etp
        # each clamp reads a strided half of the gate/up output, as the eager SiLU of a fused gate/up does
        ops.append(Op("expert_act_clamp", "memory", "elementwise", mem_op("silu_strided", n, b).args))
        ops.append(Op("expert_act_clamp_cat", "memory", "elementwise", mem_op("copy", n, b).args))
    if moe.expert_bias:
        n = routed * expert_width(m)  # the routed rows' width (a LatentMoE's latent)
        mixed = (b + 4.0 + 4.0) / 3.0  # a bf16 row plus an fp32 product into fp32
        ops.append(Op("fc2_bias_scale", "memory", "elementwise", mem_op("mul_bcast_fp32", n, 4.0).args))
        ops.append(Op("fc2_bias_add", "memory", "elementwise", mem_op("add_mixed", n, mixed).args))
        ops.append(Op("fc2_bias_cat", "memory", "elementwise", mem_op("copy", n, 4.0).args))
        ops.append(Op("fc2_bias_cast", "memory", "elementwise", mem_op("cast", n, (4.0 + b) / 2.0).args))
    return ops


def layer_fwd(m: ModelSpec, lay: Layout, moe_layer: bool) -> list[Op]:
    """All forward ops of one transformer layer on one rank."""
    ops = attention_block_fwd(m, lay)
    T = lay.tokens / lay.sp_div
    ops.extend(norm_ops(m, lay, T, 2 if lay.hf and m.activation == "swiglu" else 1))
    ops.extend(moe_block_fwd(m, lay) if moe_layer else mlp_block_fwd(m, lay))
    ops.extend(residual_add(m, lay, T))
    ops.extend(hc_ops(m, lay))
    if moe_layer and lay.gather_bytes is not None:
        # the MoE block's TP collectives move the routed tokens' bf16 hidden states (the token dispatcher's)
        ops.extend([*tp_comm_fwd(m, lay, blocks=1), *tp_comm_fwd(m, lay, blocks=1, quantized=False)])
    else:
        ops.extend(tp_comm_fwd(m, lay))
    ops.extend(cp_exchange(m, lay))
    return ops


def cp_exchange(m: ModelSpec, lay: Layout) -> list[Op]:
    """Ring attention's exchange of one attention block: each rank passes its K/V shard around the ring
    (cp - 1 steps), overlapped with the attention compute of the previous shard (none without CP)."""
    if isinstance(lay.cp, int | float) and lay.cp == 1:
        return []
    s = layer_shape(m)
    kv_bytes = 2 * lay.micro_batch * lay.seq / lay.cp * s.kv_heads / lay.tp * s.head_dim * lay.act_bytes
    return [_comm("cp_kv_exchange", "send_recv", kv_bytes, "cp", "cp_comm", count=lay.cp - 1, overlappable=True)]


def recompute_fwd(m: ModelSpec, lay: Layout, moe_layer: bool, modules: Sequence[str]) -> list[Op]:
    """Forward ops that selective recompute re-runs before a layer's backward, for Megatron-Core's
    ``recompute_modules`` (see :class:`~simcore.specs.scenario.TrainingSpec`): ``core_attn`` the attention
    core, ``mla_up_proj`` MLA's ``q_up`` and ``kv_up`` GEMMs, ``layernorm`` the layer's two norms, ``mlp``
    a dense layer's MLP (Megatron skips it on MoE layers), ``moe`` the whole MoE block with its
    all-to-alls, ``moe_act`` the routed experts' activation kernels, ``shared_experts`` the shared experts."""
    attn = attention_block_fwd(m, lay)
    moe = moe_block_fwd(m, lay) if moe_layer else []
    picks: dict[str, list[Op]] = {
        "core_attn": [o for o in attn if o.category == "attention"],
        "mla_up_proj": [o for o in attn if o.name in ("q_up", "kv_up")],
        "layernorm": 2 * norm_ops(m, lay, lay.tokens / lay.sp_div),
        "mlp": [] if moe_layer else mlp_block_fwd(m, lay),
        "moe": moe,
        "moe_act": [o for o in moe if o.name.startswith("expert_") and o.category == "elementwise"],
        "shared_experts": [o for o in moe if o.name.startswith("shared_")],
    }
    return [o for mod in modules for o in picks[mod]]


def _fused_attention(m: ModelSpec, lay: Layout) -> Op:
    """The fused attention kernel (FlashAttention-2's, cuDNN's or the memory-efficient one) of one
    layer's forward. fp32 attention runs the memory-efficient kernels whatever the backend asked for:
    PyTorch's flash and cuDNN kernels take only 16-bit tensors."""
    s = layer_shape(m)
    t = lay.tp
    dt = lay.dtype
    backend = lay.attention_backend
    if dt == "fp32" and backend in ("flash", "cudnn"):
        backend = "efficient"
    static = lay.static_cache
    kv_heads = (s.heads if static is not None else s.kv_heads) / t
    head_dim: Num = s.head_dim
    if m.mla is not None and backend == PAGED_DECODE and lay.kv_seq is not None:
        # serving engines' MLA decode (FlashMLA, FlashInfer's MLA, TensorRT-LLM's): W_UK and W_UV absorbed
        # into the query and the output, every head attends over the cached latent itself, one vector of
        # kv_lora_rank + rope dims a token (keys; its first kv_lora_rank dims are the values): per head and
        # cached token 2 (latent + kv_lora_rank) flops, the latent read once for all heads. As an attention
        # of head_dim (latent + kv_lora_rank) / 2 (the flops: 4 heads kv head_dim) whose keys and values
        # read latent elements a token (2 kv_heads head_dim = latent)
        ml = m.mla
        latent = ml.kv_lora_rank + ml.qk_rope_head_dim
        head_dim = (latent + ml.kv_lora_rank) / 2
        kv_heads = latent / (2 * head_dim)
    return Op(
        "attention",
        "attention",
        "attention",
        {
            "batch": lay.micro_batch,
            "heads": s.heads / t,
            # a static cache's keys and values come repeated to every query head (repeat_kv)
            "kv_heads": kv_heads,
            "seq": lay.seq,
            "head_dim": head_dim,
            "causal": lay.kv_seq is None and not lay.dense_mask,
            "backward": False,
            "dtype": dt,
            # fused attention runs in bf16 under fp8/fp4 GEMMs; a decode step over an fp8 KV cache
            # streams 1-byte keys and values
            "attn_dtype": "fp8"
            if lay.kv_seq is not None and lay.kv_elt == 1.0
            else hp_dtype(dt),
            "kv_seq": static if static is not None else lay.kv_seq,
            "backend": backend,
            # the materialised mask is read and added per score (a static cache's masks its empty slots)
            "mask": lay.dense_mask or static is not None,
            # attention dropout (GPT-2's configs: attn_pdrop = resid_pdrop)
            "dropout": lay.dropout,
        },
        1.0 / lay.cp,
    )


def eager_attention_ops(m: ModelSpec, lay: Layout) -> list[Op]:
    """Attention written out of PyTorch ops (``transformers``' ``attn_implementation="eager"``): the
    keys and values repeated to every query head (GQA), ``Q K^T`` as a batched GEMM over the whole
    ``s x kv`` score matrix (no causal skipping), the scale by a Python float, the additive mask in
    training and prefill broadcast over the heads (in the residual stream's dtype: fp32 under AMP, so
    the scores promote), softmax in fp32 (16-bit scores cast up first), the cast back (none for fp32
    activations), dropout where trained with it, and ``P V``; each kernel's
    backward from its own traffic. The kernels are booked as ``gemm`` and ``elementwise``, the classes
    a trace shows them in (so selective recompute and the attention-specific overlaps see no attention)."""
    s = layer_shape(m)
    t = lay.tp
    dt = lay.dtype
    b = lay.act_bytes
    heads = s.heads / t
    q = lay.seq
    kv = lay.seq if lay.kv_seq is None else lay.kv_seq
    bh = lay.micro_batch * heads
    scores = bh * q * kv
    c = 1.0 / lay.cp
    masked = lay.kv_seq is None
    wide = lay.residual_bytes if masked else b  # the softmax's input: promoted by the mask, or the scores
    ops: list[Op] = []
    if s.kv_heads < s.heads:
        # repeat_kv: expand + reshape copies K and V to every query head; its backward sums them back
        numel = bh * kv * (s.head_dim + s.v_head_dim)
        ops.append(fused_mem_op("copy", numel, b, 2 * b, 2 * b, "elementwise", bwd_name="copy", count=c))
    ops.append(_gemm("attn_scores", q, kv, s.head_dim, dt, "gemm", c, bh))
    # the scale by a Python float (and its gradient's): one tensor read and one written
    ops.append(
        fused_mem_op("mul_scalar", scores, b, 2 * b, 2 * b, "elementwise", bwd_name="mul_scalar", count=c)
    )
    if masked and wide > b:
        # the causal mask ``[b, 1, q, kv]`` broadcast over the heads, in the residual stream's fp32:
        # PyTorch's unrolled loop with dynamic casts and offsets (~1.1 TB/s measured); its gradient
        # passes through, cast back to the scores' dtype
        ops.append(
            fused_mem_op(
                "add_bcast_mixed", scores, b, b + wide, wide + b, "elementwise", bwd_name="cast", count=c
            )
        )
    elif masked:
        # a mask of the scores' dtype: the broadcast loop; the gradient passes through (no kernel)
        name = dtype_variant("add_bcast", "fp32" if b == 4.0 else "bf16")
        _nb, fl = memory_op_traffic(name, scores, b)
        args = {"name": name, "nbytes": np.asarray(scores) * 2 * b, "flops": fl, "numel": scores, "elt": b}
        ops.append(Op("mask_add", "memory", "elementwise", {**args, "bwd_chain": []}, c))
    if wide < 4.0:
        # softmax(x, dtype=float32) of 16-bit scores: PyTorch casts them first (its CUDA softmax
        # converts in the kernel from fp16 only); the gradient's way back is a plain cast
        ops.append(
            fused_mem_op("cast_up", scores, b, b + 4.0, 4.0 + b, "elementwise", bwd_name="cast", count=c)
        )
    # one row of kv scores per query and head; the backward is PyTorch's product of the gradient and the
    # output, then the softmax backward kernel (``ops.PRODUCT_BEFORE``), 12 bytes a score each
    sm = fused_mem_op("softmax", scores, 4.0, 8.0, 12.0, "elementwise", count=c, rows=bh * q)
    ops.append(with_bwd_chain(sm, [(12.0, "mul"), (12.0, "softmax_bwd")]))
    if b < 4.0:
        ops.append(
            fused_mem_op("cast", scores, b, 4.0 + b, b + 4.0, "elementwise", bwd_name="cast_up", count=c)
        )
    if lay.dropout > 0:
        d = dropout_op(scores, b)
        ops.append(Op(d.name, d.kind, d.category, d.args, c))
    ops.append(_gemm("attn_values", q, s.v_head_dim, kv, dt, "gemm", c, bh))
    return ops


def backward_of(op: Op) -> list[Op]:
    """Backward ops of a forward op: two GEMMs per GEMM, the attention backward kernel, about twice
    the bytes for memory-bound ops, the transposed collective for communication; an op that lists its own
    backward kernels (``bwd_ops``: a fused kernel whose backward is other kernels, the Mamba-2 scan's) gives
    those."""
    if "bwd_ops" in op.args:
        return list(op.args["bwd_ops"])
    if op.kind == "gemm":
        a = {k: v for k, v in op.args.items() if k not in ("bias", "splits", "split_on", "dgrad_split")}
        dsplit = (
            {"splits": op.args["splits"], "split_on": op.args["split_on"]} if op.args.get("dgrad_split") else {}
        )
        out = [
            Op(
                op.name + "_dgrad",
                "gemm",
                op.category,
                {**a, "m": a["m"], "n": a["k"], "k": a["n"], **dsplit},
                op.count,
            ),
            Op(
                op.name + "_wgrad",
                "gemm",
                op.category,
                {**a, "m": a["k"], "n": a["n"], "k": a["m"], "misaligned": _wgrad_misaligned(a)},
                op.count,
            ),
        ]
        if op.args.get("bias"):
            # the bias gradient: the output gradient (bf16) summed over the tokens, read once
            numel = np.asarray(a["m"], dtype=np.float64) * a["n"] * a["batch"]
            args = {"name": "mul", "nbytes": numel * 2.0, "flops": numel, "numel": numel, "elt": 2.0}
            out.append(Op(op.name + "_bias_bwd", "memory", "elementwise", args, op.count))
        return out
    if op.kind == "attention":
        a = op.args
        out = [Op(op.name + "_bwd", "attention", op.category, {**a, "backward": True}, op.count)]
        if a.get("kv_seq") is None:
            # the separate dq, dk, dv are concatenated into the fused QKV projection's gradient
            numel = a["batch"] * a["seq"] * (a["heads"] + 2 * a["kv_heads"]) * a["head_dim"]
            out.append(mem_op("copy", numel, 2.0, "elementwise", count=op.count))
        return out
    if op.kind == "memory" and "bwd_chain" in op.args:
        # a composite written out of elementwise ops: its backward kernels were given with its first
        a = {k: v for k, v in op.args.items() if k != "bwd_chain"}
        return [
            Op(f"{op.name}_bwd{i}", "memory", op.category, {**a, "name": nm, "nbytes": nb}, op.count)
            for i, (nb, nm) in enumerate(op.args["bwd_chain"])
        ]
    if op.kind == "memory" and "bwd_nbytes" in op.args:
        # a fused kernel: its backward traffic was given with it
        a = op.args
        name = a["bwd_name"]
        _nb, flops = memory_op_traffic(name, a["numel"], a["elt"])
        args = {k: v for k, v in a.items() if k not in ("bwd_nbytes", "bwd_name")}
        return [
            Op(
                op.name + "_bwd",
                "memory",
                op.category,
                {**args, "name": name, "nbytes": a["bwd_nbytes"], "flops": flops},
                op.count,
            )
        ]
    if op.kind == "memory":
        a = op.args
        # the gradient of a dtype cast is the reverse cast, the same traffic: a downcast's (``cast``)
        # is an upcast, PyTorch's unrolled copy (``cast_up``), and the other way round
        reverse = {"cast": "cast_up", "cast_up": "cast"}
        name = reverse.get(a["name"], a["name"] + "_bwd")
        nbytes, flops = memory_op_traffic(name, a["numel"], a["elt"])
        out = [
            Op(
                op.name + "_bwd",
                "memory",
                op.category,
                {**a, "name": name, "nbytes": nbytes, "flops": flops},
                op.count,
            )
        ]
        base = a["name"]
        # a norm's backward also reduces x_hat * dy over the tokens into the weight (and bias)
        # gradient: the fitted norm backward includes it (the sweep takes the gradient of the input
        # and the weight), and its row-wise time needs the row count the forward op carries
        if base == "cross_entropy":
            # NLL backward zero-fills the full fp32 gradient of the logits before scattering into it
            out.insert(0, mem_op("fill", a["numel"], 4.0, op.category, count=op.count))
        elif base == "embedding" and "table_numel" in a:
            # the dense gradient of the embedding table is zeroed (a fill kernel, elementwise in a
            # trace), then rows are accumulated
            elt = float(a.get("table_elt", 4.0))
            out.insert(0, mem_op("fill", a["table_numel"], elt, "elementwise", count=op.count))
        return out
    a = op.args
    swap = {"all_gather": "reduce_scatter", "reduce_scatter": "all_gather"}.get(a["op"], a["op"])
    nb = a.get("bwd_nbytes", a["nbytes"])
    # a column-parallel layer's input-gradient reduce-scatter runs asynchronously beside its weight-gradient GEMM
    # (Transformer Engine's linear.py / layernorm_linear.py backward: reduce_scatter_along_first_dim(...,
    # async_op=True) before the wgrad GEMM; with TP overlap, the qkv_wgrad / fc1_wgrad bulk overlaps)
    cat = "tp_comm_async" if a.get("regather") else op.category
    out = [Op(op.name + "_bwd", "comm", cat, {**a, "op": swap, "nbytes": nb}, op.count, op.overlappable)]
    if a.get("regather"):
        # sequence parallelism: a column-parallel linear layer saves only its local input shard, and its
        # backward all-gathers it again (the forward's bytes: the recipe's column-wise quantized copy, or
        # bf16) for the weight gradient, launched asynchronously beside the input-gradient GEMM (Transformer
        # Engine's linear.py backward_input_needs_gather, layernorm_linear.py ln_out_needs_gather; Megatron-Core's
        # own LinearWithGradAccumulationAndAsyncCommunication likewise): category tp_comm_async
        out.append(Op(op.name + "_regather", "comm", "tp_comm_async", dict(a), op.count))
    return out


def _wgrad_misaligned(fwd: dict[str, Any]) -> Any:
    """Whether the weight gradient of the forward GEMM ``fwd`` runs cuBLAS's misaligned kernels. PyTorch
    computes it as ``grad_output.t() @ input``: its operands are the forward's output gradient (strided by
    ``n``) and input (strided by ``k``), read transposed; its reduction runs over the tokens (``m``), which
    are no stride. So a token count that is not a multiple of 8 (an MoE expert's share of the routed
    tokens, an expected value) does not make it slower (docs/compute.md, "Stride alignment")."""
    # (an unknown dtype: the pricer names it)
    return misaligned_rows(DTYPE_BYTES.get(fwd["dtype"], 2.0), fwd["k"], fwd["n"])


def backward(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    for op in reversed(ops):
        out.extend(backward_of(op))
    return out


def embedding_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Token embedding lookup (first pipeline stage)."""
    T = lay.tokens / lay.sp_div
    op = mem_op("embedding", T * m.hidden, lay.act_bytes, "embedding")
    ops = [
        Op(
            op.name,
            op.kind,
            op.category,
            {
                **op.args,
                "table_numel": m.vocab * m.hidden / lay.vocab_div,
                # the table's gradient has the weights' dtype (the embedding output's: the residual's)
                "table_elt": lay.residual_bytes,
                # eager PyTorch's backward sorts the token ids and sums their rows, by the token count
                # (EmbeddingBackwardParams); compiled code scatters them in a kernel of its own
                **({} if lay.fused else {"rows": T}),
            },
            op.count,
        )
    ]
    if lay.hf and m.activation != "swiglu":
        # GPT-2's learned positions: a second lookup added to the tokens' (in the residual dtype)
        ops += [
            mem_op("embedding", T * m.hidden, lay.act_bytes, "embedding"),
            mem_op("add", T * m.hidden, lay.residual_bytes),
        ]
    if lay.dropout > 0:
        ops.append(dropout_op(T * m.hidden, lay.residual_bytes))
    return ops


def head_fwd(m: ModelSpec, lay: Layout, tokens: Num | None = None) -> list[Op]:
    """Final norm, LM head GEMM (vocabulary split by TP) and cross-entropy (last pipeline stage)."""
    T = lay.tokens if tokens is None else tokens
    v = m.vocab / lay.vocab_div
    # the output layer is not a quantized linear in any FP8/FP4 recipe (Megatron's output_layer is not
    # a Transformer Engine module; ModelOpt's FP8/FP4 checkpoints exclude lm_head)
    return [*norm_ops(m, lay, T / lay.sp_div), _gemm("lm_head", T, v, m.hidden, hp_dtype(lay.dtype), "gemm")]


def loss_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Cross-entropy over the (TP-split) logits: reads bf16 logits, fp32 softmax."""
    T = lay.tokens
    v = m.vocab / lay.vocab_div
    if lay.fused:
        # one reduction kernel reads the bf16 logits (fp32 math in registers), priced as the loss's
        # own read-once reduction; its backward is one pointwise pass (softmax minus the one-hot target)
        # that reads them again and writes their bf16 gradient, priced as a softmax: no fp32 copy, no
        # zero-filled gradient
        b = lay.act_bytes
        return [fused_mem_op("cross_entropy", T * v, b, b, 2 * b, "loss", bwd_name="softmax")]
    # the loss runs in fp32 (autocast's fp32 list; Megatron's vocab-parallel cross-entropy): the bf16
    # logits are upcast (PyTorch's unrolled copy, ``cast_up``: 2 bytes read and 4 written per element;
    # the gradient's way back is a plain cast), then PyTorch's cross-entropy is a log-softmax over each
    # token's row of logits (priced with its measured row-width factors) and an NLL gather of
    # one element a row; its backward zero-fills the fp32 gradient, scatters into it, and runs the
    # log-softmax backward (the NLL kernels, a few elements a row, are not priced)
    b = lay.act_bytes
    ls = fused_mem_op("log_softmax", T * v, 4.0, 8.0, 12.0, "loss", rows=T)
    return [
        fused_mem_op("cast_up", T * v, (b + 4.0) / 2.0, b + 4.0, b + 4.0, "loss_cast", "cast"),
        with_bwd_chain(ls, [(4.0, "fill"), (12.0, "log_softmax_bwd")]),
    ]


def mtp_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of the model's multi-token-prediction modules (``ModelSpec.mtp_layers``, last pipeline
    stage), each: the embedding of the tokens shifted by its depth, RMSNorm of that embedding and of the
    previous depth's hidden states, the ``2h -> h`` projection of their concatenation, one transformer
    layer (MoE where the model has experts, as DeepSeek-V3's), then the shared LM head and its loss
    (DeepSeek-V3 report sec. 2.2; Megatron-Core ``multi_token_prediction.py``)."""
    if m.mtp_layers == 0:
        return []
    T = lay.tokens / lay.sp_div
    one = [
        *embedding_fwd(m, lay),
        *norm_ops(m, lay, T, 1),
        *norm_ops(m, lay, T, 1),
        _gemm("mtp_proj", lay.tokens, m.hidden, 2 * m.hidden, lay.dtype, "gemm"),
        *layer_fwd(m, lay, moe_layer=m.moe is not None),
        *head_fwd(m, lay),
        *loss_fwd(m, lay),
    ]
    return [Op("mtp_" + o.name, o.kind, o.category, o.args, o.count * m.mtp_layers, o.overlappable) for o in one]


def dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES[dtype]


LOW_PRECISION = ("fp8", "fp4")
"""GEMM dtypes of the quantized recipes (:mod:`simcore.workload.precision`)."""


def hp_dtype(dtype: str) -> str:
    """The dtype of the work a low-precision recipe keeps out of its quantized GEMMs (the fused attention,
    the router, the LM head): bf16 under FP8/FP4 GEMMs, else the GEMMs' own."""
    return "bf16" if dtype in LOW_PRECISION else dtype


def quantize_ops(
    gemms: list[Op], quant_bytes: Any, weight_share: Num = 1.0, backward: bool = False
) -> list[Op]:
    """The quantize kernels of a low-precision recipe for the forward GEMMs ``gemms`` (those in an FP8/FP4
    dtype; others are skipped): forward, each GEMM's input (``m x k``) and its weights (``k x n``, cast
    once per step and cached over the micro-batches: ``weight_share`` = 1 / micro-batches); backward
    (``backward=True``), its output gradient (``m x n``). ``quant_bytes(numel, weight)`` gives the HBM bytes
    of quantizing ``numel`` bf16 elements (:meth:`simcore.workload.precision.Recipe.quantize_bytes`).
    Priced as memory-bound cast kernels (category ``quantize``)."""
    out: list[Op] = []
    for op in gemms:
        a = op.args
        if op.kind != "gemm" or a["dtype"] not in LOW_PRECISION:
            continue
        batch = a.get("batch", 1)
        if backward:
            tensors = [("grad", a["m"] * a["n"] * batch, False, op.count)]
        else:
            tensors = [
                ("input", a["m"] * a["k"] * batch, False, op.count),
                ("weight", a["k"] * a["n"] * batch, True, op.count * weight_share),
            ]
        for what, numel, weight, count in tensors:
            args = {"name": "cast", "nbytes": quant_bytes(numel, weight), "flops": 2.0 * numel, "numel": numel, "elt": 2.0}
            out.append(Op(f"quantize_{op.name}_{what}", "memory", "quantize", args, count))
    return out


_ATTN_IN = {"qkv": True, "q_proj": True, "k_proj": True, "v_proj": True, "mlp_in": True, "gate_proj": True,
            "up_proj": True}
SERVING_QUANTIZED_INPUTS: dict[str, dict[str, bool]] = {"fp8": _ATTN_IN, "fp4": {**_ATTN_IN, "mlp_out": False}}
"""By GEMM dtype, the dense layer's linears whose 16-bit input a serving engine quantizes in a kernel of its own
(TensorRT-LLM's PyTorch backend, assumed for every serving engine), by GEMM name; ``True``: only without tensor
parallelism. The QKV and gate/up inputs come from the RMSNorms in 16 bits (with TP > 1 the all-reduce + RMSNorm
fusion writes them quantized: ``RESIDUAL_RMS_NORM_QUANT_FP8`` / ``_NVFP4``). The out-projection's input never: the
attention kernel writes its output quantized (``out_scale``; ``enable_attn_nvfp4_output``, default on). The down
projection's only under NVFP4: ``GatedMLP._apply_activation`` runs SwiGLU with ``quant_type=float8_e4m3fn`` under
FP8 (its kernel writes FP8), plain SwiGLU under NVFP4, whose 16-bit output ``NVFP4LinearMethod.apply`` then
quantizes (``fp4_quantize``: per-16 block amax, E4M3 scales in the swizzled layout). docs/serving.md, "Activation
quantization"."""


def activation_quantize_fwd(ops: list[Op], lay: Layout) -> list[Op]:
    """The quantize kernels a serving engine runs before the FP8/FP4 linears of one dense layer (``ops``, the layer's
    forward): each linear of :data:`SERVING_QUANTIZED_INPUTS` for its dtype reads its ``m x k`` input (2 bytes an
    element) and writes it in the GEMM's dtype (FP8: 1 byte; NVFP4: half a byte and an E4M3 scale per 16 elements,
    ``DTYPE_BYTES["fp4"]``): TensorRT-LLM's ``FP8QDQLinearMethod`` / ``NVFP4LinearMethod.apply`` on a 16-bit input
    (``static_quantize_e4m3_per_tensor`` / ``fp4_quantize``). A memory-bound kernel each (category ``quantize``), at
    the kernel floor of a replayed CUDA graph like any other."""
    out: list[Op] = []
    tp = np.asarray(lay.tp, dtype=float)
    for op in ops:
        a = op.args
        solo = SERVING_QUANTIZED_INPUTS.get(a.get("dtype", ""), {}).get(op.name) if op.kind == "gemm" else None
        if solo is None:
            continue
        numel = a["m"] * a["k"] * a.get("batch", 1)
        count = op.count * (np.where(tp > 1, 0.0, 1.0) if solo else 1.0)
        out.append(Op(f"quantize_{op.name}_input", "memory", "quantize", quantize_input_args(numel, a["dtype"]), count))
    return out


def quantize_input_args(numel: Num, dtype: str) -> dict[str, Any]:
    """The memory-op arguments of quantizing ``numel`` 16-bit elements into a ``dtype`` GEMM's input (a ``cast``:
    reads 2 bytes an element, writes ``DTYPE_BYTES[dtype]``: FP8 1, NVFP4 half a byte and an E4M3 scale per 16)."""
    return {"name": "cast", "nbytes": numel * (2.0 + DTYPE_BYTES[dtype]), "flops": 2.0 * numel, "numel": numel, "elt": 2.0}


def amp_ops(params: Num, tensors: Num, accumulate: Num = 0.0, shard: Num = 1.0) -> tuple[list[Op], list[Op]]:
    """PyTorch autocast with fp32 weights: every forward casts each weight to bf16 (read 4, write 2
    bytes per parameter), and every backward casts the bf16 weight gradient to fp32 (about the same
    traffic). ``tensors`` kernels share ``params`` parameters. ``accumulate``: the fraction of
    backwards whose fp32 gradient is then added to an existing ``.grad`` (gradient accumulation over
    ``m`` micro-batches: ``(m - 1) / m``; the first one's is stored as is), one fp32 add of 12 bytes per
    parameter per tensor; ``shard``: the part of each gradient a rank accumulates (``1 / dp`` when the
    gradients are reduce-scattered first: ZeRO-2/3, FSDP)."""
    per = params / np.maximum(tensors, 1.0)
    fwd = [mem_op("cast", per, 3.0, "amp_cast", count=tensors)]
    bwd = [
        mem_op("cast_up", per, 3.0, "amp_cast", count=tensors),
        mem_op("add", per * shard, 4.0, "amp_cast", count=tensors * accumulate),
    ]
    return fwd, bwd
