"""GPT-OSS's experts beside the grouped GEMMs: Megatron-Core's eager clamp and per-expert bias kernels
(``lowering.expert_eager_ops``), gone under the fused grouped MLP (``runtime.moe_fused_mlp``) and in serving."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.specs.scenario import ModelSpec, MoESpec
from simcore.workload import lowering as L


def _model(bias: bool = True, clamp: float | None = 7.0) -> ModelSpec:
    moe = MoESpec(experts=8, top_k=2, expert_ffn_hidden=64, expert_bias=bias, activation_clamp=clamp)
    return ModelSpec(layers=2, hidden=32, heads=4, ffn_hidden=64, vocab=128, seq_len=16, activation="swiglu",
                     norm="rmsnorm", moe=moe)


def test_hand_computed_bytes() -> None:
    # 10 routed rows, ffn 64, hidden 32, bf16: the two clamps read the 2 x 64 strided values of a row and
    # write them (2 x 1280 x 2 B), the cat copies them (same); the bias: an fp32 broadcast product written
    # (320 x 4 B read+write convention 2 x 4), a bf16 + fp32 add into fp32 (3 x 10/3 B), the fp32 cat (2 x 4 B)
    # and the cast back to bf16 (2 x 3 B)
    ops = {o.name: o.args for o in L.expert_eager_ops(_model(), 10.0, 1.0, 2.0)}
    assert ops["expert_act_clamp"]["nbytes"] == pytest.approx(2 * 1280 * 2.0)
    assert ops["expert_act_clamp_cat"]["nbytes"] == pytest.approx(2 * 1280 * 2.0)
    assert ops["fc2_bias_scale"]["nbytes"] == pytest.approx(2 * 320 * 4.0)
    assert ops["fc2_bias_add"]["nbytes"] == pytest.approx(3 * 320 * 10.0 / 3.0)
    assert ops["fc2_bias_cat"]["nbytes"] == pytest.approx(2 * 320 * 4.0)
    assert ops["fc2_bias_cast"]["nbytes"] == pytest.approx(2 * 320 * 3.0)
    # expert tensor parallelism splits the ffn (the clamp), not the hidden (the bias)
    half = {o.name: o.args for o in L.expert_eager_ops(_model(), 10.0, 2.0, 2.0)}
    assert half["expert_act_clamp"]["numel"] == pytest.approx(1280 / 2)
    assert half["fc2_bias_add"]["numel"] == pytest.approx(320)


def test_only_the_models_features_and_never_under_the_fused_mlp() -> None:
    assert L.expert_eager_ops(_model(bias=False, clamp=None), 10.0, 1.0, 2.0) == []
    names = [o.name for o in L.expert_eager_ops(_model(bias=False), 10.0, 1.0, 2.0)]
    assert names == ["expert_act_clamp", "expert_act_clamp_cat"]
    lay = L.Layout(micro_batch=1, seq=16, eager_expert_ops=True)
    eager = [o.name for o in L.moe_block_fwd(_model(), lay)]
    # the fused grouped MLP, and serving engines' fused MoE kernels (the Layout's default)
    fused = [o.name for o in L.moe_block_fwd(_model(), L.Layout(micro_batch=1, seq=16))]
    assert "fc2_bias_add" in eager and "expert_act_clamp" in eager
    assert not any(n.startswith(("fc2_bias", "expert_act_clamp")) for n in fused)
    # selective recompute of moe_act re-runs the clamps with the activation, not the output bias
    rec = [o.name for o in L.recompute_fwd(_model(), lay, True, ["moe_act"])]
    assert "expert_act_clamp" in rec and "fc2_bias_add" not in rec


@settings(max_examples=25, deadline=None)
@given(st.floats(1.0, 1e6), st.floats(1.0, 1e6))
def test_bytes_grow_with_the_routed_rows(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    tot = [sum(o.args["nbytes"] for o in L.expert_eager_ops(_model(), r, 1.0, 2.0)) for r in (lo, hi)]
    assert tot[0] <= tot[1]
