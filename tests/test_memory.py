"""Memory model against hand computation (Korthikanti et al. 2022 without dropout)."""

import numpy as np
import pytest

from simcore import memory as M
from simcore.specs import default_registry, scenario_from_dict


def _gpt(**over: object):
    model = {
        "layers": 24,
        "hidden": 2048,
        "heads": 16,
        "ffn_hidden": 8192,
        "vocab": 50304,
        "seq_len": 2048,
        **over,
    }
    sc = scenario_from_dict(
        {"kind": "training", "cluster": {"system": "hgx-h200"}, "model": model}, default_registry()
    )
    return sc.model


def test_activation_bytes_gpt_no_recompute() -> None:
    m = _gpt()
    s, b, h = 2048, 4, 2048
    # bf16: 4sbh outside TP + qkv 3sbh + attn out sbh + lse (2 sb a) + mlp in 4sbh + act 4sbh
    expected = (4 * s * b * h + 3 * s * b * h + s * b * h + 2 * s * b * 16 + 8 * s * b * h) * 2
    assert M.activation_bytes_per_layer(m, b, s) == pytest.approx(expected)


def test_tensor_and_sequence_parallel_shard_activations() -> None:
    m = _gpt()
    full = M.activation_bytes_per_layer(m, 1, 2048, tp=1)
    tp = M.activation_bytes_per_layer(m, 1, 2048, tp=4)
    sp = M.activation_bytes_per_layer(m, 1, 2048, tp=4, sp=True)
    assert sp == pytest.approx(full / 4)
    assert sp < tp < full


def test_full_recompute_keeps_layer_input_only() -> None:
    m = _gpt()
    assert M.activation_bytes_per_layer(m, 2, 2048, recompute="full") == pytest.approx(2 * 2048 * 2048 * 2)


def test_state_bytes_mixed_precision() -> None:
    sb = M.state_bytes("bf16", "adamw", True)
    assert (sb.weights, sb.grads, sb.optimizer) == (2.0, 4.0, 12.0)  # 18 bytes/param (Megatron)
    amp = M.state_bytes("bf16", "adamw", True, param_dtype="fp32")
    assert amp.weights + amp.grads + amp.optimizer == 16.0  # PyTorch AMP


def test_grad_reduce_in_fp32_sets_the_gradients_bytes() -> None:
    """Megatron's ``grad_reduce_in_fp32``: fp32 main_grad buffers (4 B) or bf16 ones (2 B); unset, they
    follow the master copy; fp32 weights keep fp32 gradients whatever it says."""
    assert M.state_bytes("bf16", "adamw", True, grads_fp32=False).grads == 2.0
    assert M.state_bytes("bf16", "adamw", False, grads_fp32=True).grads == 4.0
    assert M.state_bytes("bf16", "adamw", False).grads == 2.0
    assert M.state_bytes("bf16", "adamw", True, param_dtype="fp32", grads_fp32=False).grads == 4.0
    bf16 = M.state_bytes("bf16", "adamw", True, grads_fp32=False)
    assert bf16.optimizer == M.state_bytes("bf16", "adamw", True).optimizer  # the master copy stays fp32


def test_zero_stages_shard_progressively() -> None:
    sb = M.state_bytes("bf16", "adamw", True)
    parts = [np.sum(M.training_state_bytes(1e9, sb, dp=8, zero=z)) for z in (0, 1, 2, 3)]
    assert parts == sorted(parts, reverse=True)
    assert parts[3] == pytest.approx(18e9 / 8)


def test_inflight_microbatches() -> None:
    assert M.inflight_microbatches("1f1b", 4, 16) == 4
    assert M.inflight_microbatches("gpipe", 4, 16) == 16
    assert M.inflight_microbatches("interleaved", 4, 16, 2) == pytest.approx(4 * (1 + 3 / 8))


def test_kv_cache_gqa() -> None:
    m = _gpt(kv_heads=4, layers=2)
    # 2 (k,v) x kv_heads x head_dim x layers x bytes
    assert M.kv_cache_bytes(m, 3, 100) == pytest.approx(3 * 100 * 2 * 4 * 128 * 2 * 2)


def test_recompute_modules_drop_what_they_rebuild() -> None:
    """Selective recompute keeps each named module's input only (Megatron's CheckpointWithoutOutput): by
    hand, one dense SwiGLU layer, T = 2048 tokens, h = 1024, ffn 4096, 8 heads of 128, tp 1."""
    m = _gpt(layers=2, hidden=1024, heads=8, ffn_hidden=4096, activation="swiglu")
    T, h = 2048, 1024
    base = M.activation_bytes_per_layer(m, 1, T, recompute="selective")
    norms = M.activation_bytes_per_layer(m, 1, T, recompute="selective", modules=("core_attn", "layernorm"))
    assert base - norms == pytest.approx(2 * T * h * 2)  # the QKV and MLP-in GEMM inputs, bf16
    mlp = M.activation_bytes_per_layer(m, 1, T, recompute="selective", modules=("core_attn", "mlp"))
    assert base - mlp == pytest.approx(3 * T * 4096 * 2)  # gate, up and SwiGLU output
    # no core_attn: the softmax statistics (fp32, T x heads) stay
    only_norms = M.activation_bytes_per_layer(m, 1, T, recompute="selective", modules=("layernorm",))
    assert only_norms - norms == pytest.approx(T * 8 * 4)
    # the modules change nothing without selective recompute
    assert M.activation_bytes_per_layer(m, 1, T, modules=("mlp",)) == M.activation_bytes_per_layer(m, 1, T)


def test_moe_and_mla_recompute_modules() -> None:
    from simcore.specs.scenario import MLASpec, MoESpec

    moe = MoESpec(experts=8, top_k=2, expert_ffn_hidden=512, shared_experts=1)
    m = _gpt(layers=2, hidden=1024, heads=8, activation="swiglu", moe=moe)
    T = 1024
    sel = M.activation_bytes_per_layer(m, 1, T, recompute="selective", moe_layer=True)
    act = M.activation_bytes_per_layer(m, 1, T, recompute="selective", moe_layer=True, modules=("core_attn", "moe_act"))
    assert sel - act == pytest.approx(T * 2 * 512 * 2)  # routed tokens x top-k x expert width, bf16
    shared = M.activation_bytes_per_layer(
        m, 1, T, recompute="selective", moe_layer=True, modules=("core_attn", "shared_experts")
    )
    assert sel - shared == pytest.approx(T * 512 * 3 * 2)
    whole = M.activation_bytes_per_layer(m, 1, T, recompute="selective", moe_layer=True, modules=("core_attn", "moe"))
    assert whole < min(act, shared)
    mla = MLASpec(q_lora_rank=256, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    ml = _gpt(layers=2, hidden=1024, heads=8, mla=mla)
    full_qkv = M.activation_bytes_per_layer(ml, 1, T, recompute="selective")
    up = M.activation_bytes_per_layer(ml, 1, T, recompute="selective", modules=("core_attn", "mla_up_proj"))
    assert full_qkv - up == pytest.approx((T * 3 * 8 * 96 - T * (256 + 128 + 32)) * 2)


def test_quantized_layers_keep_their_gemm_inputs_quantized() -> None:
    """Transformer Engine under FP8 keeps the norms' outputs and the activation's output as the 1-byte
    column-wise copy its wgrad GEMM reads, and the projection a 1-byte copy of the attention output: by
    hand, one dense SwiGLU layer, T = 2048, h = 1024, ffn 4096, 8 heads of 128, tp 1."""
    m = _gpt(layers=2, hidden=1024, heads=8, ffn_hidden=4096, activation="swiglu")
    T, h, f = 2048, 1024, 4096
    bf16 = M.activation_bytes_per_layer(m, 1, T)
    fp8 = M.activation_bytes_per_layer(m, 1, T, gemm_in_bytes=1.0)
    # norm outputs 2 T h and the SwiGLU output T f go from 2 bytes to 1; the projection adds T h at 1 byte
    assert bf16 - fp8 == pytest.approx(2 * T * h + T * f - T * h)
    mx = M.activation_bytes_per_layer(m, 1, T, gemm_in_bytes=1.0 + 1.0 / 32)  # MXFP8: a scale per 32
    assert fp8 < mx < bf16
    # selective recompute of the norms frees their quantized outputs
    sel = M.activation_bytes_per_layer(m, 1, T, recompute="selective", gemm_in_bytes=1.0)
    ln = M.activation_bytes_per_layer(
        m, 1, T, recompute="selective", modules=("core_attn", "layernorm"), gemm_in_bytes=1.0
    )
    assert sel - ln == pytest.approx(2 * T * h)


def test_bf16_moments_halve_the_moments_not_the_master_copy() -> None:
    """Megatron's precision-aware optimizer with bf16 ``exp_avg`` / ``exp_avg_sq``: AdamW's moments 4 bytes
    instead of 8 beside the fp32 master (4): 8 bytes of optimizer state per parameter instead of 12."""
    assert M.state_bytes("bf16", "adamw", True).optimizer == 12.0
    assert M.state_bytes("bf16", "adamw", True, moments_bf16=True).optimizer == 8.0
    assert M.state_bytes("bf16", "sgd", True, moments_bf16=True).optimizer == 6.0
