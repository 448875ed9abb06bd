"""Memory model: bytes per GPU for weights, gradients, optimizer states, activations, KV cache.

Pure functions over scalars or numpy arrays (one element per layout). Activation bytes are counted
from the tensors each layer saves for its backward pass (flash attention: no s x s score matrix is
kept), following Korthikanti et al. 2022 "Reducing Activation Recomputation in Large Transformer
Models" with dropout removed (modern LLMs train without it) and GQA/SwiGLU shapes:

* outside the tensor-parallel region (sharded only with sequence parallelism): the two norm inputs,
  the QKV GEMM input and the MLP-in GEMM input — ``4 s b h`` elements;
* inside it (sharded by TP): Q, K, V, the attention output, the MLP-in output(s) and the activation
  output.

Full recomputation keeps only each layer's input (plus one layer's working set during its
recompute); selective recomputation re-runs the attention core, which with flash attention saves
only the softmax statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.specs.hardware import Device
from simcore.specs.scenario import ModelSpec
from simcore.workload.model import expert_width, layer_shape, routed_load
from simcore.workload.precision import recipe
from simcore.workload.ssm import LayerKind, attention_layers, mamba_activation_elements

Num = Any

GiB = 1024.0**3
RESERVED_BYTES = 1.5 * GiB
"""Device memory not available to tensors: CUDA context, cuBLAS/NCCL workspaces, allocator slack."""

# Bytes per parameter of the training state.
# bf16 weights + fp32 master (Megatron): 2 (weights) + 4 (fp32 grad accumulation) + 4 (master) + 8 (Adam m, v)
# fp32 weights with autocast (PyTorch AMP): 4 (weights) + 4 (grads) + 8 (Adam m, v)


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each part of the training state."""

    weights: float
    grads: float
    optimizer: float
    """Optimizer states including an fp32 master copy when the weights are low precision."""
    gathered: float = 2.0
    """Bytes per parameter a ZeRO / distributed-optimizer parameter all-gather moves: bf16, or the FP8
    values themselves under ``fp8_param_gather``."""


def state_bytes(
    precision: str,
    optimizer: str,
    master_weights: bool,
    param_dtype: str = "bf16",
    device: Device | None = None,
    grads_fp32: bool | None = None,
    moments_bf16: bool = False,
    fp8_param_gather: bool = False,
) -> StateBytes:
    """Per-parameter bytes of weights, gradients and optimizer state.

    ``param_dtype='fp32'`` is PyTorch AMP (fp32 weights, autocast): no separate master copy.
    ``param_dtype='bf16'`` is Megatron-style mixed precision: low-precision weights, an fp32 master copy
    in the optimizer when ``master_weights`` (without it, the optimizer keeps its moments in the weights'
    dtype: PyTorch's optimizers on bf16 parameters) and the gradients in fp32 when ``grads_fp32``
    (``training.grad_reduce_in_fp32``; ``None``: when ``master_weights``), else in bf16.
    FP8/FP4 recipes keep their quantized weight copies beside the bf16 weights
    (:meth:`simcore.workload.precision.Recipe.weight_copy_bytes` on ``device``; none given: two copies,
    Hopper's data and transpose). ``moments_bf16``: the moments in bf16 beside the fp32 master copy
    (``training.optimizer_moments_dtype``; Megatron's precision-aware optimizer). ``fp8_param_gather``
    (Megatron's ``--fp8-param-gather``: the model is built under Transformer Engine's ``fp8_model_init``, so its
    parameters are FP8 tensors and the distributed optimizer's fp32 master copy is the only high-precision one):
    no bf16 weights, only the quantized copies, and the parameter all-gather moves the FP8 values
    (docs/parallelism.md, "Precision recipes").
    """
    moments = 8.0 if optimizer == "adamw" else 4.0  # SGD with momentum
    if param_dtype == "fp32" or precision == "fp32":
        return StateBytes(4.0, 4.0, moments)
    if not master_weights or moments_bf16:
        moments /= 2.0
    rec = recipe(precision)
    fp8_params = fp8_param_gather and rec.quantized
    w = (0.0 if fp8_params else 2.0) + rec.weight_copy_bytes(device)
    master = 4.0 if master_weights else 0.0
    grads = 4.0 if (master_weights if grads_fp32 is None else grads_fp32) else 2.0
    gathered = rec.stored_bytes(rec.weight_block or rec.block) if fp8_params else 2.0
    return StateBytes(w, grads, moments + master, gathered)


def training_state_bytes(
    params: Num, sb: StateBytes, dp: Num = 1, zero: Num = 0, fsdp: Num = False
) -> tuple[Num, Num, Num]:
    """(weights, grads, optimizer) bytes per GPU for ``params`` parameters held by the rank before
    ZeRO sharding over ``dp`` ranks (stage 1: optimizer, 2: + grads, 3 or FSDP: + weights)."""
    z = np.where(np.asarray(fsdp, dtype=bool), 3, zero)
    w = params * sb.weights / np.where(z >= 3, dp, 1)
    g = params * sb.grads / np.where(z >= 2, dp, 1)
    o = params * sb.optimizer / np.where(z >= 1, dp, 1)
    return w, g, o


def activation_bytes_per_layer(
    m: ModelSpec,
    micro_batch: Num,
    seq: Num,
    tp: Num = 1,
    cp: Num = 1,
    sp: Num = False,
    recompute: str = "none",
    act_bytes: float = 2.0,
    moe_layer: LayerKind = False,
    residual_bytes: float | None = None,
    compiled: bool = False,
    modules: tuple[str, ...] = (),
    gemm_in_bytes: float | None = None,
) -> Num:
    """Bytes one layer keeps for backward, per micro-batch, on one rank. ``moe_layer``: the layer's kind
    (:data:`~simcore.workload.ssm.LayerKind`): a transformer layer with an MoE block (``True``) or a dense
    MLP, or a hybrid pattern's symbol, whose one block keeps its norm's and first GEMM's inputs and that
    block's tensors below (``M``: :func:`~simcore.workload.ssm.mamba_activation_elements`).

    ``residual_bytes``: bytes per element of the residual stream (fp32 under autocast with fp32
    weights), which the two norms keep as their inputs; default ``act_bytes``.
    ``compiled``: torch.compile's partitioner saves the norms' inputs but recomputes their
    normalised outputs in backward, and saves the first MLP GEMM's output(s) but recomputes the
    activation function's result (GELU: 1 instead of 2 tensors of the MLP width; SwiGLU: 2 instead of 3).

    ``modules``: under ``selective``, the modules it re-runs (``training.recompute_modules``; empty:
    ``core_attn``). Megatron-Core's ``CheckpointWithoutOutput`` frees each one's output after its consumer's
    forward and rebuilds it before the backward (``megatron/core/transformer/transformer_layer.py``,
    ``multi_latent_attention.py``, ``moe/experts.py``), so the layer keeps only the module's input:
    ``core_attn`` drops the softmax statistics; ``layernorm`` the two norms' outputs (the QKV and MLP-in
    GEMM inputs); ``mla_up_proj`` MLA's up-projected queries, keys and values (the latents
    ``q_lora_rank + kv_lora_rank + qk_rope_head_dim`` per token stay); ``moe_act`` the routed experts'
    activation output; ``shared_experts`` the shared experts' tensors; ``moe`` a whole MoE block's, ``mlp``
    a dense MLP's (docs/parallelism.md, section 9, "The Megatron-Bridge rows' memory, term by term").

    ``gemm_in_bytes``: bytes per element of a GEMM input a quantized layer keeps for its weight gradient
    (``None``: not quantized, the ``act_bytes`` tensor itself). Transformer Engine's ``Linear`` /
    ``LayerNormLinear`` / ``GroupedLinear`` under an FP8 or FP4 recipe save the quantized input, its
    column-wise copy only (``update_usage(rowwise_usage=False)`` before ``save_for_backward``), not the
    bf16 one: the norms' outputs (QKV and MLP-in inputs) and the activation's output (the second MLP
    GEMM's input) are kept at this size, and the output projection keeps a quantized copy of the
    attention output beside the bf16 one the attention kernel keeps (docs/parallelism.md, section 6)."""
    s = layer_shape(m)
    tokens = micro_batch * seq / cp
    sp_div = np.where(np.asarray(sp, dtype=bool), tp, 1)
    h = s.hidden
    rb = act_bytes if residual_bytes is None else residual_bytes
    if recompute == "full":
        return tokens * h * m.residual_streams * rb / sp_div  # the layer's input: its residual stream(s)
    if moe_layer == "M":
        return mamba_activation_elements(m, tokens, tp, sp) * act_bytes
    rc = set(modules or ("core_attn",)) if recompute == "selective" else set()
    # 2 norm inputs (residual dtype) + QKV input + MLP-in input, in activation-element units
    # (compiled or recomputed norms: the norm outputs are rebuilt from the saved inputs)
    g = 1.0 if gemm_in_bytes is None else gemm_in_bytes / act_bytes  # a saved GEMM input, in act elements
    norm_out = 0.0 if compiled or "layernorm" in rc else 2.0 * g
    outside = (2.0 * rb / act_bytes + norm_out) * tokens * h / sp_div
    # the first MLP GEMM's output(s) and the activation's output (the second GEMM's saved input)
    per_f = (2.0 if s.gated else 1.0) if compiled else (2.0 if s.gated else 1.0) + g
    qkv = tokens * (s.heads + 2 * s.kv_heads) * s.head_dim / tp
    if m.mla is not None and "mla_up_proj" in rc:
        qkv = tokens * (m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim)
    attn_out = tokens * s.heads * s.v_head_dim / tp
    if m.csa is not None:
        qkv, attn_out = _csa_saved(m, tokens, tp, "mla_up_proj" in rc)
    # hyper-connections: each block's mix reads the n residual streams, kept for its backward (two a layer)
    outside = outside + 2.0 * (m.residual_streams - 1) * tokens * h * rb / act_bytes / sp_div
    attn_out = attn_out * (1.0 if gemm_in_bytes is None else 1.0 + g)  # + the projection's quantized copy
    lse = tokens * s.heads / tp * 2.0  # fp32 softmax statistics, in bf16-element units
    if "core_attn" in rc:
        lse = 0.0
    if isinstance(moe_layer, str):
        # one block of a hybrid: one norm input and one GEMM input outside the TP region
        outside = outside / 2.0
        if moe_layer == "*":
            return (outside + qkv + attn_out + lse) * act_bytes
        qkv = attn_out = lse = 0.0
    if moe_layer in (True, "E") and m.moe is not None:
        f = m.moe.expert_ffn_hidden
        # the busiest rank's routed rows: its imbalance, capped by a capacity factor or padded to the capacity
        moe = m.moe
        routed = tokens * moe.top_k * routed_load(
            tokens, moe.top_k, moe.experts, moe.imbalance, moe.capacity_factor, moe.pad_to_capacity
        )
        shared_f = m.moe.shared_experts * f
        routed_f = per_f - (g if "moe_act" in rc and not compiled else 0.0)
        shared = 0.0 if "shared_experts" in rc else tokens * shared_f * per_f
        mlp = (routed * f * routed_f + shared) / tp
        w = expert_width(m)  # the routed rows' width (a LatentMoE's latent width)
        mlp = mlp + 2.0 * routed * w  # permuted tokens (dispatch and expert input)
        if m.moe.latent_dim is not None:
            mlp = mlp + tokens * w / tp  # the combined latent rows, the up projection's saved input
        mlp = mlp + tokens * m.moe.experts / tp * 2.0  # router probabilities (fp32)
        if "moe" in rc:
            mlp = 0.0 * mlp
    else:
        mlp = 0.0 if "mlp" in rc else tokens * s.ffn_hidden / tp * per_f
    return (outside + qkv + attn_out + lse + mlp) * act_bytes


def _csa_saved(m: ModelSpec, tokens: Num, tp: Num, up_recomputed: bool) -> tuple[Num, Num]:
    """(query/key/value side, output side) elements DeepSeek-V4's attention block keeps for its backward per
    layer, averaged over its compression ratios: the query latent and the shared key/value head, plus the
    up-projected queries unless ``mla_up_proj`` recomputes them; a CSA layer's indexer queries and its top-k
    entry indices (int32: 2 elements each); the attention output and the grouped ``wo_a`` output
    (``o_groups x o_lora_rank``, the ``wo_b`` input)."""
    c = m.csa
    assert c is not None
    d = m.d_head
    q = 0.0 if up_recomputed else m.heads * d / tp
    sparse = c.compress_ratios.count(c.sparse_ratio) / m.layers
    indexer = sparse * (c.indexer_heads * c.indexer_head_dim / tp + 2.0 * c.indexer_topk)
    qkv = tokens * (c.q_lora_rank + d + q + indexer)
    out = tokens * (m.heads * d + c.o_groups * c.o_lora_rank) / tp
    return qkv, out


def logits_bytes(
    m: ModelSpec,
    micro_batch: Num,
    seq: Num,
    tp: Num = 1,
    cp: Num = 1,
    act_bytes: float = 2.0,
    unfused: bool = False,
    compiled: bool = False,
) -> Num:
    """Peak bytes of the LM head output and the fp32 loss working set on the last stage.

    Fused (Megatron's vocab-parallel cross-entropy): the logits, their fp32 softmax and its gradient
    (``act + 4 + 4`` bytes per element). ``unfused`` (PyTorch autocast: cast to fp32, log_softmax,
    NLL): at the start of backward the saved fp32 log-probabilities, the zero-filled fp32 NLL
    gradient and the fp32 log_softmax gradient coexist (12 bytes per element). ``compiled``
    (torch.compile's one-kernel cross-entropy): the logits and their gradient, both in the activation
    dtype (``2 act``)."""
    tokens = micro_batch * seq / cp
    per = 2.0 * act_bytes if compiled else (12.0 if unfused else act_bytes + 4.0 + 4.0)
    return tokens * m.vocab / tp * per


def inflight_microbatches(schedule: Num, pp: Num, micro_batches: Num, vp: Num = 1) -> Num:
    """Micro-batches whose activations the first (busiest) stage holds at the peak.

    GPipe holds all ``m``; 1F1B holds ``min(m, p)``; interleaved 1F1B holds
    ``p * (1 + (p - 1) / (p * v))`` (Megatron-LM); zero-bubble H1 as 1F1B; DualPipe holds
    ``p + 1`` micro-batches' worth (it runs two directions)."""
    p = np.asarray(pp, dtype=float)
    m = np.asarray(micro_batches, dtype=float)
    v = np.asarray(vp, dtype=float)
    one_f1b = np.minimum(m, p)
    inter = np.minimum(m, p) * (1.0 + (p - 1.0) / (p * v))
    dual = np.minimum(m, p + 1.0)
    sched = np.asarray(schedule)
    return np.select(
        [sched == "gpipe", sched == "interleaved", sched == "dualpipe"], [m, inter, dual], default=one_f1b
    )


def kv_cache_dtype(precision: str, kv_cache_dtype: str | None) -> str:
    """The KV cache's element type: the one given, else fp8 under fp8 or fp4 weights (ModelOpt's FP8
    and NVFP4 checkpoints quantize the KV cache to FP8, ``kv_cache_quant_algo: FP8``; TensorRT-LLM
    and vLLM then run an FP8 cache), else bf16 (fp32 runs keep a bf16 cache)."""
    if kv_cache_dtype is not None:
        return kv_cache_dtype
    return "fp8" if precision in ("fp8", "fp4") else "bf16"


def kv_cache_bytes(m: ModelSpec, batch: Num, tokens: Num, tp: Num = 1, kv_bytes: float = 2.0) -> Num:
    """Bytes of the KV cache for ``batch`` sequences of ``tokens`` tokens (MLA caches the latent)."""
    if m.mla is not None:
        per_token = (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * m.layers
        return batch * tokens * per_token * kv_bytes
    s = layer_shape(m)
    # each rank holds whole KV heads: ceil(kv_heads / tp), at least one (replicated when tp > kv_heads);
    # a hybrid's attention (``*``) layers only
    kvh = np.maximum(np.ceil(s.kv_heads / np.asarray(tp, dtype=float)), 1.0)
    return batch * tokens * 2.0 * kvh * s.head_dim * attention_layers(m) * kv_bytes
