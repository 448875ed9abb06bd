"""Parameter and FLOP counts of decoder-only transformers (dense, MoE, MLA).

Conventions (see docs/compute.md):

* Parameters exclude biases (modern LLMs have none) and count norm weights.
* *Model FLOPs* per token follow PaLM / Megatron: ``6 * N_active`` for the weight GEMMs (forward 2,
  backward 4) plus ``12 * layers * seq * attn_dim`` for attention scores and values, not halved for
  causal masks (the convention the published tables use). MFU uses model FLOPs; HFU adds
  recomputation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.specs.scenario import ModelSpec
from simcore.workload import csa as C
from simcore.workload.ssm import attention_layers, mamba_layers, mamba_params, ssd_model_flops_per_token


@dataclass(frozen=True)
class LayerShape:
    """Dimensions of one transformer layer."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    """Head dimension of queries and keys."""
    v_head_dim: int
    ffn_hidden: int
    gated: bool
    """SwiGLU (three MLP matrices) rather than GELU (two)."""


def layer_shape(m: ModelSpec) -> LayerShape:
    if m.csa is not None:
        # DeepSeek-V4: ``heads`` queries over one shared key/value head, both ``head_dim`` wide
        d = m.d_head
        return LayerShape(m.hidden, m.heads, 1, d, d, m.ffn_hidden, m.activation == "swiglu")
    if m.mla is not None:
        qk = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim
        return LayerShape(
            m.hidden, m.heads, m.heads, qk, m.mla.v_head_dim, m.ffn_hidden, m.activation == "swiglu"
        )
    return LayerShape(
        m.hidden, m.heads, m.n_kv_heads, m.d_head, m.d_head, m.ffn_hidden, m.activation == "swiglu"
    )


def attention_params(m: ModelSpec) -> int:
    """Weights of one attention block (projections only; DeepSeek-V4's hybrid attention: the mean over its
    layers, :func:`simcore.workload.csa.attention_params`)."""
    h = m.hidden
    if m.csa is not None:
        return round(C.attention_params(m))
    if m.mla is not None:
        a = m.heads
        ml = m.mla
        q = h * ml.q_lora_rank + ml.q_lora_rank * a * (ml.qk_nope_head_dim + ml.qk_rope_head_dim)
        kv = h * (ml.kv_lora_rank + ml.qk_rope_head_dim) + ml.kv_lora_rank * a * (
            ml.qk_nope_head_dim + ml.v_head_dim
        )
        o = a * ml.v_head_dim * h
        return q + kv + o + ml.q_lora_rank + ml.kv_lora_rank
    d = m.d_head
    return h * (m.heads + 2 * m.n_kv_heads) * d + m.heads * d * h


def mlp_params(hidden: int, ffn: int, gated: bool) -> int:
    return (3 if gated else 2) * hidden * ffn


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (not bytes)."""

    embedding: int
    lm_head: int
    """0 when tied to the embedding."""
    attention_per_layer: int
    dense_mlp_per_layer: int
    moe_layer_experts: int
    """All routed experts of one MoE layer."""
    moe_layer_active: int
    """Routed experts a token visits (top_k) plus shared experts, plus the router."""
    moe_layer_shared: int
    """Shared experts and LatentMoE's latent projections: weights every token of an MoE layer uses, replicated
    like the attention's rather than spread over expert parallelism."""
    norms_per_layer: int
    dense_layers: int
    moe_layers: int

    @property
    def per_dense_layer(self) -> int:
        return self.attention_per_layer + self.dense_mlp_per_layer + self.norms_per_layer

    @property
    def per_moe_layer(self) -> int:
        return (
            self.attention_per_layer + self.moe_layer_experts + self.moe_layer_shared + self.norms_per_layer
        )

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.dense_layers * self.per_dense_layer
            + self.moe_layers * self.per_moe_layer
        )

    @property
    def active(self) -> int:
        """Parameters one token uses (MoE: top-k experts)."""
        moe_active = self.attention_per_layer + self.moe_layer_active + self.norms_per_layer
        return (
            self.embedding
            + self.lm_head
            + self.dense_layers * self.per_dense_layer
            + self.moe_layers * moe_active
        )

    @property
    def active_non_embedding(self) -> int:
        """Active parameters used in GEMMs (excludes the embedding lookup; keeps the LM head)."""
        head = self.lm_head if self.lm_head else self.embedding
        return self.active - self.embedding - self.lm_head + head


WEIGHT_TENSORS_PER_LAYER = 6
"""Weight tensors of one bias-free transformer layer: two norms, fused QKV, attention output, the MLP's
input (one fused gate/up for a gated MLP) and output projections (``tools/gpt.py``, most GPT / Llama
codes)."""


def weight_tensors(m: ModelSpec, layers: Any = None, gate_up: str = "fused", biased: bool = False) -> Any:
    """Parameter tensors of ``layers`` blocks (default: all of the model's) plus the token embedding,
    an untied LM head and the final norm: what an optimizer steps over and DDP registers a hook on.
    ``gate_up="separate"``: a gated MLP's gate and up projections are two tensors (Hugging Face Llama).
    ``biased``: every projection and LayerNorm also has a bias, and positions a learned embedding
    (Hugging Face's GPT-2: 12 tensors a layer, 148 in GPT-2 small)."""
    n = m.layers if layers is None else layers  # a number or a numpy array of layers per stage
    per_layer = WEIGHT_TENSORS_PER_LAYER + (1 if m.activation == "swiglu" and gate_up == "separate" else 0)
    extra_layer, extra = (WEIGHT_TENSORS_PER_LAYER, 2.0) if biased else (0, 0.0)
    return (per_layer + extra_layer) * n + 1.0 + (0.0 if m.tied_embeddings else 1.0) + 1.0 + extra


def hybrid_mixer_params(m: ModelSpec, kind: str) -> int:
    """Weights of one layer of a hybrid pattern symbol besides its pre-norm (``E``: the router and experts
    are counted apart, 0 here)."""
    h = m.hidden
    if kind == "M":
        return mamba_params(m) - h
    if kind == "*":
        return attention_params(m)
    if kind == "-":
        return mlp_params(h, m.ffn_hidden, m.activation == "swiglu")
    return 0


def expert_width(m: ModelSpec) -> int:
    """Input and output width of the routed experts, the dispatch and the combine: LatentMoE's
    ``moe.latent_dim`` where the model has one, else the hidden size."""
    return m.hidden if m.moe is None or m.moe.latent_dim is None else m.moe.latent_dim


def expert_capacity(tokens: Any, top_k: int, experts: int, capacity_factor: float) -> Any:
    """Rows each expert takes from one rank's ``tokens`` (Megatron-Core's ``get_capacity`` on the rank's
    ``tokens x top_k`` routed copies): ``ceil(tokens x top_k / experts x capacity_factor)``; the router drops
    the copies beyond it (``apply_router_token_dropping``; docs/parallelism.md, "Capacity factor")."""
    return np.ceil(np.asarray(tokens, dtype=float) * top_k / experts * capacity_factor)


def routed_load(
    tokens: Any, top_k: int, experts: int, imbalance: Any, capacity_factor: float | None, pad: bool
) -> Any:
    """Rows the busiest rank's experts take, over the balanced mean ``tokens x top_k`` (``tokens``: one rank's).

    Dropless (``capacity_factor`` None): ``imbalance``, the busiest expert's excess. With a capacity factor
    ``c = experts x capacity / (tokens x top_k)`` (:func:`expert_capacity`; ``capacity_factor`` up to the
    ceiling): ``min(imbalance, c)``, the copies beyond the capacity dropped; padded to capacity
    (``pad``, Megatron-Core's ``moe_pad_expert_input_to_capacity``): ``c`` whatever the routing, every expert's
    input filled to its capacity (docs/parallelism.md, "Capacity factor")."""
    if capacity_factor is None:
        return imbalance
    mean = np.asarray(tokens, dtype=float) * top_k
    c = expert_capacity(tokens, top_k, experts, capacity_factor) * experts / np.maximum(mean, 1e-30)
    return c if pad else np.minimum(imbalance, c)


def dropped_share(tokens: Any, top_k: int, experts: int, imbalance: Any, capacity_factor: float | None) -> Any:
    """Share of the busiest expert's routed copies its capacity drops: ``max(0, 1 - c / imbalance)`` with ``c``
    as in :func:`routed_load` (0 dropless). With balanced routing (``imbalance`` 1) nothing is dropped at a
    factor of at least 1."""
    if capacity_factor is None:
        return 0.0 * np.asarray(imbalance, dtype=float)
    kept = routed_load(tokens, top_k, experts, imbalance, capacity_factor, pad=False)
    return 1.0 - kept / np.asarray(imbalance, dtype=float)


def _moe_weights(m: ModelSpec) -> tuple[int, int, int]:
    """(one routed expert, the router, the weights every token uses besides them) of an MoE layer. The
    last are the shared experts (at the hidden width) and, in a LatentMoE, its ``h x latent`` down and
    ``latent x h`` up projections (Megatron-Core ``MoELayer.fc1_latent_proj`` / ``fc2_latent_proj``;
    Megatron-Bridge ``theoretical_memory_utils``: ``2 h latent`` a layer); the routed experts then hold
    ``(3 if gated else 2) x latent x ffn`` each."""
    assert m.moe is not None
    moe = m.moe
    h = m.hidden
    gated = m.activation == "swiglu"
    expert = mlp_params(expert_width(m), moe.expert_ffn_hidden, gated)
    latent = 0 if moe.latent_dim is None else 2 * h * moe.latent_dim
    shared = moe.shared_experts * mlp_params(h, moe.expert_ffn_hidden, gated) + latent
    return expert, h * moe.experts, shared


def param_counts(m: ModelSpec) -> ParamCounts:
    """Parameter counts of ``m``. A hybrid pattern (``model.hybrid_pattern``) is counted with one norm per
    layer, no attention in the MoE (``E``) layers, and its other layers (``M``, ``*``, ``-``) as "dense"
    layers of their mean weights (the totals are exact to a parameter a layer)."""
    h = m.hidden
    gated = m.activation == "swiglu"
    emb = m.vocab * h
    head = 0 if m.tied_embeddings else m.vocab * h
    attn = attention_params(m)
    norms = 2 * h + C.hc_params(m)  # the two norms, and hyper-connections' mixing weights where it has them
    if m.hybrid_pattern is not None:
        plain = [c for c in m.hybrid_pattern if c != "E"]
        mean = round(sum(hybrid_mixer_params(m, c) for c in plain) / max(len(plain), 1))
        n_moe = m.moe_layers
        if m.moe is None or n_moe == 0:
            return ParamCounts(emb, head, 0, mean, 0, 0, 0, h, len(plain), 0)
        expert, router, shared = _moe_weights(m)
        moe = m.moe
        return ParamCounts(
            emb, head, 0, mean, moe.experts * expert + router, moe.top_k * expert + shared + router,
            shared, h, len(plain), n_moe,
        )
    if m.moe is None:
        return ParamCounts(emb, head, attn, mlp_params(h, m.ffn_hidden, gated), 0, 0, 0, norms, m.layers, 0)
    moe = m.moe
    expert, router, shared = _moe_weights(m)
    return ParamCounts(
        emb,
        head,
        attn,
        mlp_params(h, m.ffn_hidden, gated),
        moe.experts * expert + router,
        moe.top_k * expert + shared + router,
        shared,
        norms,
        moe.dense_layers,
        m.moe_layers,
    )


def attn_dim(m: ModelSpec) -> int:
    """Width of the attention scores/values computation (heads x head_dim), for FLOP counting."""
    s = layer_shape(m)
    return s.heads * (s.head_dim + s.v_head_dim) // 2


def model_flops_per_token(m: ModelSpec, seq_len: int | None = None, training: bool = True) -> float:
    """Model FLOPs per token: ``6 N_active + 12 L s (a d)`` for training, a third of it for inference
    (forward only). DeepSeek-V4's hybrid attention counts its keys per query instead of ``s``
    (:func:`simcore.workload.csa.model_attention_flops_per_token`). In a hybrid ``L`` counts the attention
    layers, and each Mamba layer adds its scan's ``3 x 7 d_inner N`` (Megatron-LM's count,
    :func:`~simcore.workload.ssm.ssd_model_flops_per_token`)."""
    s = seq_len or m.seq_len
    pc = param_counts(m)
    weights = 2.0 * pc.active_non_embedding
    attn = 4.0 * attention_layers(m) * s * attn_dim(m)
    if m.csa is not None:
        # DeepSeek-V4: the keys each query attends (window, selected or all compressed entries) and the
        # indexer's scores, as Megatron-Bridge's flop_utils counts them
        attn = C.model_attention_flops_per_token(m, s)
    if mamba_layers(m):
        attn = attn + mamba_layers(m) * ssd_model_flops_per_token(m)
    fwd = weights + attn
    return 3.0 * fwd if training else fwd
