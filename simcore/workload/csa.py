"""DeepSeek-V4's hybrid attention and hyper-connections as numbers: layer counts per compression ratio, the keys a
query attends, weights and model FLOPs (docs/hardware.md, "DeepSeek-V4").

Each layer (``model.csa.compress_ratios``) is one of:

* a sliding-window layer (ratio 0): every query attends the ``window`` raw keys before it;
* a CSA layer (``sparse_ratio``, 4): a compressor pools overlapping windows of ``2 r`` tokens into one entry
  every ``r`` tokens, a lightning indexer (``indexer_heads`` x ``indexer_head_dim``, from the query latent)
  scores every earlier compressed entry and the attention takes the ``indexer_topk`` best plus the window;
* an HCA layer (any other ratio, 128): every earlier compressed entry plus the window, no indexer.

The attention is MQA: ``heads`` queries of ``head_dim`` over one shared key/value head of ``head_dim``
(DeepSeek-V4 ``Attention``: ``wkv`` is ``hidden -> head_dim``). The output projection is grouped and low rank:
``o_groups`` groups of ``heads / o_groups`` heads each project ``heads / o_groups x head_dim -> o_lora_rank``
(one batched GEMM), then ``o_groups x o_lora_rank -> hidden``. Shapes: DeepSeek-V4 ``inference/model.py``
(``Compressor``, ``Indexer``, ``Attention``, ``Block.hc_pre`` / ``hc_post``) as Megatron-Bridge's
``deepseek_v4_bridge.py`` maps them; model FLOPs: Megatron-Bridge ``training/utils/flop_utils.py``'s
``dsv4_hybrid`` branch (NVIDIA-NeMo/Megatron-Bridge@067f987d).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.specs.scenario import CSASpec, ModelSpec


@dataclass(frozen=True)
class RatioGroup:
    """The layers of one compression ratio."""

    ratio: int
    layers: int
    sparse: bool
    """CSA (indexer top-k over overlapping-window entries) rather than HCA or window-only."""

    @property
    def overlap(self) -> int:
        """Compressor projections' width factor: 2 where its windows overlap (CSA), else 1."""
        return 2 if self.sparse else 1


def ratio_groups(m: ModelSpec) -> list[RatioGroup]:
    """The model's decoder layers grouped by compression ratio, in ascending ratio."""
    c = m.csa
    assert c is not None
    return [
        RatioGroup(r, c.compress_ratios.count(r), r == c.sparse_ratio) for r in sorted(set(c.compress_ratios))
    ]


def window_context(window: float, seq: float) -> float:
    """Mean raw keys a causal query attends in a ``window``: ``W - W (W - 1) / (2 s)`` for ``W < s`` (the first
    ``W`` queries see fewer), ``(s + 1) / 2`` otherwise."""
    return window - window * (window - 1) / (2.0 * seq) if window < seq else (seq + 1) / 2.0


def compressed_context(g: RatioGroup, c: CSASpec, seq: float) -> float:
    """Mean compressed entries a causal query attends in a layer of group ``g``: query ``t`` sees ``t / r`` of
    them, so an HCA layer's mean is ``s / (2 r)``; a CSA layer takes ``min(t / r, k)``, whose mean is
    ``k - k^2 r / (2 s)`` with ``k = min(indexer_topk, s / r)``; a window-only layer none."""
    if g.ratio == 0:
        return 0.0
    if not g.sparse:
        return seq / (2.0 * g.ratio)
    k = min(float(c.indexer_topk), seq / g.ratio)
    return k - k * k * g.ratio / (2.0 * seq)


def attention_context(g: RatioGroup, c: CSASpec, seq: float) -> float:
    """Mean keys (raw window and compressed) a causal query of a layer of group ``g`` attends."""
    return window_context(c.window, seq) + compressed_context(g, c, seq)


def indexer_pairs(g: RatioGroup, seq: float) -> float:
    """Mean compressed entries the indexer scores per query in a CSA layer (every earlier one: ``s / (2 r)``)."""
    return seq / (2.0 * g.ratio) if g.sparse else 0.0


def attention_params(m: ModelSpec) -> float:
    """Weights of the attention block averaged over the layers (the compressors and the indexer differ by
    ratio): ``wq_a`` ``h x q_lora``, ``wq_b`` ``q_lora x heads d``, ``wkv`` ``h x d``, their two norms,
    ``wo_a`` ``heads d x o_lora`` (grouped), ``wo_b`` ``o_groups o_lora x h``; a compressed layer's compressor
    ``2 x h x overlap d`` (key/value and gate projections); a CSA layer's indexer ``q_lora x H_I D_I``
    (``wq_b``), its own compressor ``2 x h x 2 D_I`` and ``weights_proj`` ``h x H_I``."""
    c = m.csa
    assert c is not None and m.head_dim is not None
    h, d, a = m.hidden, m.head_dim, m.heads
    base = h * c.q_lora_rank + c.q_lora_rank * a * d + h * d + c.q_lora_rank + d
    base += a * d * c.o_lora_rank + c.o_groups * c.o_lora_rank * h
    extra = 0.0
    for g in ratio_groups(m):
        if g.ratio == 0:
            continue
        per = 2.0 * h * g.overlap * d
        if g.sparse:
            per += c.q_lora_rank * c.indexer_heads * c.indexer_head_dim
            per += 2.0 * h * 2 * c.indexer_head_dim + h * c.indexer_heads
        extra += per * g.layers
    return base + extra / m.layers


def hc_mixes(n: int) -> int:
    """Mixing coefficients one hyper-connection computes per token: ``n`` pre weights, ``n`` post weights and
    the ``n x n`` residual matrix (DeepSeek-V4 ``hc_fn``: ``(2 + n) n`` outputs)."""
    return (2 + n) * n


def hc_params(m: ModelSpec) -> int:
    """Weights of one layer's two hyper-connections (attention's and the MLP's): ``hc_fn`` of ``n h x (2 + n) n``
    plus its ``(2 + n) n`` bias and 3 scales each; 0 for a plain residual."""
    n = m.residual_streams
    if n == 1:
        return 0
    return 2 * (n * m.hidden * hc_mixes(n) + hc_mixes(n) + 3)


def model_attention_flops_per_token(m: ModelSpec, seq: float) -> float:
    """Forward FLOPs per token of the attention cores and the indexer's scores, summed over the decoder layers,
    as Megatron-Bridge counts them for ``dsv4_hybrid`` (``flop_utils.py``): ``4 heads head_dim`` per key
    attended, the window counted whole (``W``, not its causal mean), a CSA layer's ``k (1 - k r / (2 s))``
    selected entries, an HCA layer's ``s / (2 r)``, and the indexer's ``2 H_I D_I s / r`` (every compressed
    entry, not halved). The projections, compressors and indexer weights are in ``6 N_active``."""
    c = m.csa
    assert c is not None and m.head_dim is not None
    total = 0.0
    for g in ratio_groups(m):
        ctx = c.window + compressed_context(g, c, seq)
        total += g.layers * 4.0 * m.heads * m.head_dim * ctx
        if g.sparse:
            total += g.layers * 2.0 * c.indexer_heads * c.indexer_head_dim * seq / g.ratio
    return total
