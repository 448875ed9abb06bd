"""Mamba-2 layers and hybrid layer patterns: shapes, parameters, FLOPs, saved activations and the decode
state, as pure functions of the model spec (no pricing; the layer's kernels are lowered in
:mod:`simcore.workload.hybrid`).

A Mamba-2 layer (Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060; Megatron-Core's
``MambaLayer`` / ``MambaMixer``) on ``h`` hidden channels with ``H`` heads of ``P`` channels
(``d_inner = H P``), state size ``N``, ``G`` groups and a convolution of width ``K``:

* pre-norm, then ``in_proj``: ``h -> 2 d_inner + 2 G N + H`` (``z``, ``x``, ``B``, ``C``, ``dt``);
* causal depthwise conv1d (width ``K``) and SiLU over ``x``, ``B``, ``C`` (``d_inner + 2 G N`` channels);
* the SSD scan in chunks of ``Q`` tokens: within a chunk ``C B^T`` (``Q x Q`` per group), masked by the
  decays and applied to ``x dt`` (``Q x Q`` by ``Q x P`` per head, causal); each chunk's state ``B^T (x dt)``
  (``N x P`` per head); the states passed from chunk to chunk (a scan over chunks); each token reads the
  incoming state (``C`` by ``N x P`` per head); ``D x`` skip and the ``silu(z)`` gate;
* the gated output's group RMSNorm (``G`` groups), ``out_proj``: ``d_inner -> h``; residual add.

Symbols of a hybrid pattern (``model.hybrid_pattern``, Megatron-Core's ``hybrid_override_pattern``): ``M``
a Mamba-2 layer, ``*`` an attention layer, ``-`` an MLP layer, ``E`` an MoE layer; each has its own pre-norm
and residual. A model without a pattern is a stack of transformer layers (attention and MLP / MoE in one
layer). See docs/compute.md, "Mamba-2 layers and hybrid models".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.specs.scenario import ModelSpec

Num = Any

LayerKind = bool | str
"""A kind of layer the engines price once and count: ``False`` / ``True`` a transformer layer with a dense
MLP / an MoE block (models without a pattern), or a pattern symbol ``M``, ``*``, ``-``, ``E``."""


SSD_CAUSAL_BLOCK = 64
"""Rows of a query tile of mamba_ssm's ``_chunk_scan`` kernels (``BLOCK_SIZE_M``, 64 in most of its autotune
configurations): a tile ``i`` of a chunk runs the inner loop over the ``(i + 1) x 64`` earlier tokens only
(causal), so the intra-chunk matmuls do ``(1 + 64 / Q) / 2`` of a full ``Q x Q`` product."""


def causal_fraction(chunk: int) -> float:
    """Share of a full ``Q x Q`` intra-chunk product that the causal kernels compute."""
    return min(1.0, (1.0 + SSD_CAUSAL_BLOCK / chunk) / 2.0)


@dataclass(frozen=True)
class MambaShape:
    """Dimensions of one Mamba-2 mixer."""

    hidden: int
    heads: int
    head_dim: int
    state: int
    groups: int
    conv_kernel: int
    chunk: int

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: ``x``, ``B`` and ``C``."""
        return self.d_inner + 2 * self.groups * self.state

    @property
    def in_proj_dim(self) -> int:
        """Outputs of ``in_proj``: ``z``, ``x``, ``B``, ``C`` and ``dt``."""
        return 2 * self.d_inner + 2 * self.groups * self.state + self.heads


def mamba_shape(m: ModelSpec) -> MambaShape:
    assert m.mamba is not None
    a = m.mamba
    return MambaShape(m.hidden, a.heads, a.head_dim, a.state_dim, a.groups, a.conv_kernel, a.chunk_size)


def layer_kinds(m: ModelSpec) -> list[tuple[LayerKind, int]]:
    """The kinds of layer of ``m`` and how many of each, in a fixed order (kinds with no layer left out)."""
    if m.hybrid_pattern is None:
        dense = m.moe.dense_layers if m.moe is not None else m.layers
        out: list[tuple[LayerKind, int]] = [(False, dense), (True, m.layers - dense)]
    else:
        c = Counter(m.hybrid_pattern)
        out = [(k, c[k]) for k in "M*-E"]
    return [(k, n) for k, n in out if n > 0]


def attention_layers(m: ModelSpec) -> int:
    """Layers with self-attention (every layer of a model without a pattern; the ``*`` of a hybrid)."""
    return m.layers if m.hybrid_pattern is None else m.hybrid_pattern.count("*")


def mamba_layers(m: ModelSpec) -> int:
    return 0 if m.hybrid_pattern is None else m.hybrid_pattern.count("M")


def mamba_params(m: ModelSpec) -> int:
    """Weights of one Mamba-2 layer: ``in_proj`` and ``out_proj``, the convolution's weight and bias, the
    per-head ``A_log``, ``D`` and ``dt_bias``, the group norm's weight and the pre-norm's."""
    s = mamba_shape(m)
    h = s.hidden
    return (
        h * s.in_proj_dim
        + s.d_inner * h
        + s.conv_dim * (s.conv_kernel + 1)
        + 3 * s.heads
        + s.d_inner
        + h
    )


def ssd_flops_per_token(m: ModelSpec) -> float:
    """Forward FLOPs per token of one layer's SSD scan and convolution as the chunked kernels run them
    (hardware FLOPs; multiply-adds count 2), chunk ``Q``:

    ``conv 2 K conv_dim + G (2 Q N) [C B^T] + H (2 N P [chunk states] + 2 Q P c [intra-chunk, causal share
    c = causal_fraction(Q)] + 2 N P [incoming state])``; the state passing between chunks, ``2 H P N / Q``,
    is included.
    Megatron's model-FLOPs count of the scan is :func:`ssd_model_flops_per_token`."""
    s = mamba_shape(m)
    q, n, p = s.chunk, s.state, s.head_dim
    conv = 2.0 * s.conv_kernel * s.conv_dim
    cb = s.groups * 2.0 * q * n
    per_head = 2.0 * n * p + 2.0 * q * p * causal_fraction(q) + 2.0 * n * p + 2.0 * n * p / q
    return conv + cb + s.heads * per_head


def ssd_model_flops_per_token(m: ModelSpec) -> float:
    """Model FLOPs per token of one Mamba layer's scan, forward: Megatron-LM's ``mamba_layer_flops``
    (``megatron/training/training.py``) counts ``7 d_inner N`` (the projections are counted as weights)."""
    s = mamba_shape(m)
    return 7.0 * s.d_inner * s.state


def mamba_activation_elements(m: ModelSpec, tokens: Num, tp: Num = 1, sp: Num = False) -> Num:
    """Elements one Mamba layer keeps for its backward per ``tokens`` tokens on a rank (Megatron-Core with
    ``mamba_split_conv1d_scan_combined``, the memory-efficient path, which recomputes the convolution and
    the chunk states in backward): the pre-norm's input (sharded by TP only with sequence parallelism),
    ``in_proj``'s input (the same), its output ``zxBCdt`` (saved by the fused kernel), the scan's ungated
    output ``out_x`` and the gated output (the group norm's input, which the norm keeps), the norm's output
    (``out_proj``'s input), and per head and token an fp32 ``dt`` and decay cumsum are not kept (recomputed).
    Context parallelism's all-to-all keeps the layout: tokens x channels / (tp cp) either way."""
    s = mamba_shape(m)
    sp_div = np.where(np.asarray(sp, dtype=bool), tp, 1)
    outside = 2.0 * tokens * s.hidden / sp_div
    inside = tokens * (s.in_proj_dim + 3 * s.d_inner) / tp
    return outside + inside


def mamba_state_elements(m: ModelSpec, batch: Num, tp: Num = 1) -> Num:
    """Elements of the recurrent state one sequence batch keeps per rank over all Mamba layers in inference:
    the SSM state (``H P N`` per layer) and the convolution's last ``K - 1`` inputs (``(K - 1) conv_dim``),
    split over TP. Constant in the context length (no cache grows)."""
    if m.mamba is None:
        return 0.0 * np.asarray(batch, dtype=float)
    s = mamba_shape(m)
    per_layer = s.heads * s.head_dim * s.state + (s.conv_kernel - 1) * s.conv_dim
    return batch * mamba_layers(m) * per_layer / np.asarray(tp, dtype=float)
