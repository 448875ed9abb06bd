"""Mamba-2 layers and hybrid patterns: hand-computed shapes, parameters and FLOPs, the lowering's SSD kernels,
a hybrid's cost as the sum over its pattern, pipeline stages over the pattern, decode state constant in the
context, and a longer sequence never cheaper (docs/compute.md, "Mamba-2 layers and hybrid models")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simcore import memory as M
from simcore.engine.pricing import Pricer
from simcore.engine.training import pattern_stage_costs
from simcore.errors import SpecError
from simcore.specs.registry import registry
from simcore.specs.resolve import ClusterSpec, resolve_cluster
from simcore.specs.scenario import ModelSpec
from simcore.workload import hybrid as H
from simcore.workload.layout import Layout, valid_layouts
from simcore.workload.model import model_flops_per_token, param_counts
from simcore.workload.ssm import (
    causal_fraction,
    layer_kinds,
    mamba_activation_elements,
    mamba_params,
    mamba_shape,
    mamba_state_elements,
    ssd_flops_per_token,
)

SMALL = {
    "name": "tiny-hybrid",
    "layers": 4,
    "hidden": 64,
    "heads": 4,
    "kv_heads": 2,
    "ffn_hidden": 256,
    "vocab": 1000,
    "seq_len": 256,
    "activation": "squared_relu",
    "norm": "rmsnorm",
    "hybrid_pattern": "M*M-",
    "mamba": {"heads": 4, "head_dim": 16, "state_dim": 8, "groups": 2, "conv_kernel": 4, "chunk_size": 32},
}


def tiny(**over: object) -> ModelSpec:
    return ModelSpec(**{**SMALL, **over})


def preset(name: str) -> ModelSpec:
    d = dict(registry().model_preset(name))
    d.pop("aliases", None)
    return ModelSpec(**d)


def pricer(system: str = "hgx-h100", gpus: int = 8, tp: int = 1, cp: int = 1) -> Pricer:
    cluster = resolve_cluster(ClusterSpec(system=system, gpus=gpus), registry())
    return Pricer.for_layout(cluster, tp, cp, 1, 1, 1, "eager", per_op_host=False)


def test_shapes_and_params_by_hand() -> None:
    s = mamba_shape(tiny())
    assert s.d_inner == 64
    assert s.conv_dim == 64 + 2 * 2 * 8  # x, B, C
    assert s.in_proj_dim == 2 * 64 + 2 * 2 * 8 + 4  # z, x, B, C, dt
    # in_proj 64 x 164, out_proj 64 x 64, conv weight and bias 96 x (4 + 1), A_log/D/dt_bias 3 x 4,
    # group norm 64, pre-norm 64
    assert mamba_params(tiny()) == 64 * 164 + 64 * 64 + 96 * 5 + 12 + 64 + 64


def test_ssd_flops_of_one_layer_by_hand() -> None:
    # Q = 32 <= 64 rows a tile: the intra-chunk product runs whole (causal share 1)
    assert causal_fraction(32) == 1.0
    assert causal_fraction(128) == 0.75
    assert causal_fraction(256) == 0.625
    conv = 2 * 4 * 96
    cb = 2 * (2 * 32 * 8)  # per group: C B^T, 2 Q N a token
    per_head = 2 * 8 * 16 + 2 * 32 * 16 + 2 * 8 * 16 + 2 * 8 * 16 / 32
    assert ssd_flops_per_token(tiny()) == pytest.approx(conv + cb + 4 * per_head)


def test_lowered_ssd_kernels_match_the_flop_count() -> None:
    """The forward SSD kernels of the lowering do the matmul part of ``ssd_flops_per_token``: per token,
    ``G 2 Q N + H (2 N P + 2 Q P c + 2 N P)``."""
    m = tiny(seq_len=4096, mamba={**SMALL["mamba"], "chunk_size": 128})  # type: ignore[dict-item]
    s = mamba_shape(m)
    lw = Layout(micro_batch=2, seq=4096.0)
    flops = sum(o.args["flops"] * o.count for o in H.ssd_fwd(m, lw) if o.kind == "ssd")
    q, n, p = s.chunk, s.state, s.head_dim
    per_token = s.groups * 2 * q * n + s.heads * (4 * n * p + 2 * q * p * causal_fraction(q))
    assert flops == pytest.approx(per_token * 2 * 4096)


def test_param_counts_of_the_presets() -> None:
    # published sizes: Nemotron-H 8B / 47B / 56B, Mamba-2 2.7B, Nemotron 3 Nano 30B-A3B (~3.6B active)
    for name, total in [
        ("nemotron-h-8b", 8.1e9),
        ("nemotron-h-47b", 46.8e9),
        ("nemotron-h-56b", 56.3e9),
        ("mamba2-2.7b", 2.70e9),
        ("nemotron3-nano", 31.6e9),
    ]:
        assert param_counts(preset(name)).total == pytest.approx(total, rel=0.01), name
    assert param_counts(preset("nemotron3-nano")).active == pytest.approx(3.6e9, rel=0.02)


def test_model_flops_count_attention_layers_and_the_scan() -> None:
    m = tiny()
    s = mamba_shape(m)
    pc = param_counts(m)
    attn = 4.0 * 1 * m.seq_len * m.heads * m.d_head  # one '*' layer
    scan = 2 * 7.0 * s.d_inner * s.state  # two 'M' layers, Megatron's 7 d_inner N each
    assert model_flops_per_token(m, training=False) == pytest.approx(2.0 * pc.active_non_embedding + attn + scan)


def test_layer_kinds() -> None:
    assert layer_kinds(tiny()) == [("M", 2), ("*", 1), ("-", 1)]
    assert layer_kinds(preset("llama3-8b")) == [(False, 32)]


def test_hybrid_time_is_the_sum_over_its_pattern() -> None:
    m = preset("nemotron-h-8b")
    pr = pricer(tp=2)
    lw = Layout(micro_batch=1, seq=4096.0, tp=2, sp=True)
    every_layer = [op for sym in m.hybrid_pattern or "" for op in H.layer_fwd(m, lw, sym)]
    by_kind = sum(n * pr.price(H.layer_fwd(m, lw, k)).total() for k, n in layer_kinds(m))
    assert pr.price(every_layer).total() == pytest.approx(by_kind, rel=1e-12)
    # and the backward the same way
    from simcore.workload.lowering import backward

    bwd_kinds = sum(n * pr.price(backward(H.layer_fwd(m, lw, k))).total() for k, n in layer_kinds(m))
    assert pr.price(backward(every_layer)).total() == pytest.approx(bwd_kinds, rel=1e-12)


def test_pipeline_stages_hold_their_slices_of_the_pattern() -> None:
    cost = {"M": 1.0, "*": 10.0, "-": 2.0}
    first, last, mid = pattern_stage_costs("MM*-", cost, 2)
    assert (float(first), float(last), float(mid)) == (2.0, 12.0, 0.0)
    first, last, mid = pattern_stage_costs("MM*-MM", cost, 3)
    assert (float(first), float(last), float(mid)) == (2.0, 2.0, 12.0)
    # arrays of layouts: each pp split once
    first, last, _mid = pattern_stage_costs("MM*-", cost, np.array([1, 2]))
    assert first.tolist() == [14.0, 2.0] and last.tolist() == [0.0, 12.0]


@pytest.mark.parametrize("pattern", ["MMMMMM*-", "MM*-MMMM"])
def test_first_stage_activations_are_its_own_slice(pattern: str) -> None:
    """Under PP the first rank keeps, per micro-batch in flight, the activations of its own layers of the
    pattern (here its four first layers), not the mean layer's times its layer count."""
    from simcore.prediction import predict

    sc = {
        "kind": "training",
        "cluster": {"system": "hgx-h100", "gpus": 2},
        "model": {**SMALL, "layers": 8, "hybrid_pattern": pattern, "ffn_hidden": 1024},
        "training": {"micro_batch": 1, "global_batch": 8},
        "parallel": {"tp": 1, "pp": 2},
        "runtime": {"stack": "megatron"},
    }
    m = tiny(layers=8, hybrid_pattern=pattern, ffn_hidden=1024)
    per = {k: M.activation_bytes_per_layer(m, 1, 256, 1, 1, False, "none", 2.0, k, 2.0) for k in "M*-"}
    in_flight = M.inflight_microbatches("1f1b", 2, 8, 1)  # 1F1B: pp micro-batches on the first rank
    got = predict(sc).memory_breakdown["activations"]
    assert got == pytest.approx(in_flight * sum(per[k] for k in pattern[:4]))
    assert got != pytest.approx(in_flight * 4 * sum(per[k] for k in pattern) / 8)  # the mean layer's


def test_decode_state_is_constant_in_the_context() -> None:
    m = preset("nemotron-h-8b")
    s = mamba_shape(m)
    # per layer and sequence: H P N state + (K - 1) conv_dim window; 24 Mamba layers
    per_seq = 24 * (s.heads * s.head_dim * s.state + (s.conv_kernel - 1) * s.conv_dim)
    assert mamba_state_elements(m, 3) == pytest.approx(3 * per_seq)
    # the KV cache grows with the 4 attention layers only
    kv = M.kv_cache_bytes(m, 1, 1000) - M.kv_cache_bytes(m, 1, 0)
    assert kv == pytest.approx(1000 * 2 * 8 * 128 * 4 * 2)
    # a pure Mamba-2 model keeps no KV cache and its decode step does not depend on the context
    from simcore.prediction import predict

    base = {
        "kind": "inference",
        "cluster": {"system": "hgx-h100", "gpus": 1},
        "model": {"preset": "mamba2-2.7b"},
        "inference": {"batch": 16, "output_len": 64},
    }
    r = [predict({**base, "inference": {**base["inference"], "prompt_len": p}}) for p in (256, 1900)]
    assert r[0].memory_breakdown["kv_cache"] == pytest.approx(r[1].memory_breakdown["kv_cache"])
    assert r[0].memory_breakdown["mamba_state"] == r[1].memory_breakdown["mamba_state"] > 0
    assert r[0].decode_step_time_s == pytest.approx(r[1].decode_step_time_s, rel=1e-9)
    assert r[0].prefill_time_s < r[1].prefill_time_s


def test_activation_elements_by_hand() -> None:
    m = tiny()
    # 2 T h outside TP (pre-norm and in_proj inputs), zxBCdt, the ungated and gated outputs, the norm output
    assert mamba_activation_elements(m, 10.0) == pytest.approx(2 * 10 * 64 + 10 * (164 + 3 * 64))
    assert mamba_activation_elements(m, 10.0, tp=2, sp=True) == pytest.approx((2 * 10 * 64 + 10 * (164 + 3 * 64)) / 2)
    assert M.activation_bytes_per_layer(m, 1, 10, moe_layer="M") == pytest.approx(2 * (2 * 640 + 10 * 356))


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=1, max_value=64).map(lambda x: 128 * x),
    st.integers(min_value=1, max_value=64).map(lambda x: 128 * x),
    st.sampled_from([1, 2, 4]),
)
def test_longer_sequence_is_never_cheaper(s1: int, s2: int, tp: int) -> None:
    m = preset("nemotron-h-8b")
    pr = pricer(tp=tp)
    from simcore.workload.lowering import backward

    def t(seq: int) -> float:
        ops = H.layer_fwd(m, Layout(micro_batch=1, seq=float(seq), tp=tp, sp=tp > 1), "M")
        return float(pr.price(ops).total() + pr.price(backward(ops)).total())

    lo, hi = sorted((s1, s2))
    assert t(lo) <= t(hi) * (1 + 1e-12)


def test_context_parallel_moves_heads_with_all_to_alls() -> None:
    m = preset("nemotron-h-8b")
    ops = H.layer_fwd(m, Layout(micro_batch=1, seq=8192.0, tp=2, cp=2, sp=True), "M")
    a2a = [o for o in ops if o.kind == "comm" and o.args["group"] == "cp"]
    assert [o.args["op"] for o in a2a] == ["all_to_all", "all_to_all"]
    s = mamba_shape(m)
    # in: z, x, B, C, dt of the rank's 4096 tokens over its TP share; out: y
    assert float(a2a[0].args["nbytes"]) == pytest.approx(4096 * s.in_proj_dim / 2 * 2)
    assert float(a2a[1].args["nbytes"]) == pytest.approx(4096 * s.d_inner / 2 * 2)


def test_bad_patterns_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match="4 symbols but layers is 5"):
        tiny(layers=5)
    with pytest.raises(ValidationError, match="unknown symbols"):
        tiny(hybrid_pattern="M*MX")
    with pytest.raises(ValidationError, match="no mamba section"):
        tiny(mamba=None)
    with pytest.raises(ValidationError, match="no moe section"):
        tiny(hybrid_pattern="M*ME")
    moe = {"experts": 4, "top_k": 1, "expert_ffn_hidden": 64, "dense_layers": 1}
    with pytest.raises(ValidationError, match="dense_layers does not apply"):
        tiny(hybrid_pattern="M*ME", moe=moe)


def test_tp_must_divide_mamba_heads_and_groups() -> None:
    m = preset("mamba2-2.7b")  # one group: Megatron-Core allows no TP
    check = valid_layouts(m, 8, tp=2, pp=1, cp=1, dp=4)
    with pytest.raises(SpecError, match="groups \\(1\\) must be divisible by tp"):
        check.require()
    assert valid_layouts(preset("nemotron-h-8b"), 64, tp=8, pp=1, cp=4, dp=2).ok
    # 128 heads over tp 8: 16 a TP rank, which cp 3 does not divide (MambaContextParallel)
    bad = valid_layouts(preset("nemotron-h-8b"), 48, tp=8, pp=1, cp=3, dp=2)
    assert not bad.ok and bad.field() == "parallel.cp" and "heads per TP rank (16)" in bad.reason()


def test_cli_one_line_error_for_a_bad_pattern(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.cli_runner import run_cli

    code, _out, err = run_cli(
        capsys, "predict", "scenarios/nemotron-h-8b-64xh100.yaml", "--set", "model.hybrid_pattern=MM"
    )
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "hybrid_pattern" in err
