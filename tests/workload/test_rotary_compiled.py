"""transformers' rotary embedding, eager and compiled (``simcore.workload.lowering.rotary_ops``)."""

from __future__ import annotations

import pytest

from simcore.specs.scenario import ModelSpec
from simcore.workload import lowering as L

M = ModelSpec(layers=2, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=32000, seq_len=2048,
              activation="swiglu", norm="rmsnorm")  # fmt: skip


def _layout(fused: bool) -> L.Layout:
    return L.Layout(micro_batch=2.0, seq=2048.0, tp=1, dtype="bf16", act_bytes=2.0, fused=fused,
                    implementation="huggingface", attention_backend="cudnn")  # fmt: skip


def test_compiled_rotary_is_one_kernel_each_way_over_the_heads_bytes() -> None:
    numel = 2 * 2048 * (32 + 8) * 64  # tokens x (query + key heads) x head dim
    ops = L.rotary_ops(numel, _layout(True))
    assert len(ops) == 1 and ops[0].count == 1.0
    assert ops[0].args["nbytes"] == pytest.approx(numel * 2 * 2.0)  # bf16 read once, written once
    assert ops[0].args["bwd_nbytes"] == pytest.approx(numel * 2 * 2.0)


def test_eager_rotary_is_transformers_chain_and_the_compiled_layer_has_one_more_kernel_than_without() -> None:
    eager = L.rotary_ops(1e6, _layout(False))
    assert [o.name for o in eager] == [f"rotary_{i}" for i in range(5)]  # neg, cat, x cos, rot sin, add
    compiled = L.attention_block_fwd(M, _layout(True))
    gpt = L.attention_block_fwd(M.model_copy(update={"activation": "gelu", "norm": "layernorm"}), _layout(True))
    assert len(compiled) == len(gpt) + 1  # learned positions: no rotary
