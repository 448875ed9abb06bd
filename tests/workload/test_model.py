"""Parameter and FLOP counts against hand computation and published sizes."""

import pytest

from simcore.specs import default_registry, scenario_from_dict
from simcore.workload.model import model_flops_per_token, param_counts


def _model(preset: str, **over: object):
    sc = scenario_from_dict(
        {"kind": "training", "cluster": {"system": "hgx-h200"}, "model": {"preset": preset, **over}},
        default_registry(),
    )
    return sc.model


def test_gpt3_175b_params_hand_computed() -> None:
    m = _model("gpt3-175b")
    pc = param_counts(m)
    h, L, V = 12288, 96, 51200
    per_layer = 4 * h * h + 2 * h * 4 * h + 2 * h  # qkv+out, fc1+fc2, two norms
    assert pc.per_dense_layer == per_layer
    emb = V * h
    expected = L * per_layer + emb + (0 if m.tied_embeddings else emb)
    assert pc.total == expected
    assert 174e9 < pc.total < 176.5e9


def test_llama3_8b_gqa_swiglu() -> None:
    m = _model("llama3-8b")
    pc = param_counts(m)
    h, kv, d, f = 4096, 8, 128, 14336
    assert pc.attention_per_layer == h * (32 + 2 * kv) * d + 32 * d * h
    assert pc.dense_mlp_per_layer == 3 * h * f
    assert abs(pc.total - 8.03e9) / 8.03e9 < 0.01


def test_moe_active_params_deepseek_v3() -> None:
    pc = param_counts(_model("deepseek-v3"))
    assert abs(pc.total - 671e9) / 671e9 < 0.03
    assert abs(pc.active - 37e9) / 37e9 < 0.1


def test_flops_per_token_is_6n_plus_attention() -> None:
    m = _model("gpt3-175b")
    pc = param_counts(m)
    f = model_flops_per_token(m)
    attn = 12 * 96 * 2048 * 12288
    assert f == pytest.approx(6 * pc.active_non_embedding + attn, rel=1e-12)
    assert model_flops_per_token(m, training=False) == pytest.approx(f / 3)
