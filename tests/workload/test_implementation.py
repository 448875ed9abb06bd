"""Hugging Face modelling code (``runtime.implementation: huggingface``): its composite elementwise
ops become one kernel each in eager lowering, none of it in compiled code; dropout kernels where the
probability is positive; validate reads both from a trace."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simcore.specs.resolve import load_scenario
from simcore.workload import lowering as L


def _lay(impl: str, fused: bool = False, dropout: float = 0.0, rb: float = 4.0) -> L.Layout:
    return L.Layout(
        micro_batch=2,
        seq=1024,
        residual=rb,
        fused=fused,
        implementation=impl,
        dropout=dropout,
    )


def _mem(ops: list[L.Op]) -> list[L.Op]:
    return [o for o in ops if o.kind == "memory"]


@pytest.fixture(scope="module")
def gpt():  # type: ignore[no-untyped-def]
    return load_scenario("default").model.model_copy(update={"activation": "gelu", "norm": "layernorm"})


@pytest.fixture(scope="module")
def llama():  # type: ignore[no-untyped-def]
    return load_scenario("default").model.model_copy(update={"activation": "swiglu", "norm": "rmsnorm"})


def test_gelu_tanh_chain_hand_counted(gpt) -> None:  # type: ignore[no-untyped-def]
    T, f = 2 * 1024, gpt.ffn_hidden
    ref = _mem(L.mlp_block_fwd(gpt, _lay("reference")))
    hf = _mem(L.mlp_block_fwd(gpt, _lay("huggingface")))
    assert [o.args["name"] for o in ref] == ["gelu"]
    # autocast's cast of pow's input, pow, mul, add, mul, tanh, add, mul(0.5, x), mul and the cast for
    # the next GEMM
    assert len(hf) == 10
    # bytes per element: bf16 input (2), fp32 from pow's input cast on under autocast (4)
    want = [2 + 4, 8, 8, 2 + 8, 8, 8, 8, 4, 2 + 8, 4 + 2]
    assert [float(o.args["nbytes"]) / (T * f) for o in hf] == pytest.approx(want)
    bwd = L.backward(hf)
    assert len(bwd) == 15 and all(o.name.startswith("gelu_tanh_0_bwd") for o in bwd)
    # without autocast (bf16 weights) nothing is promoted: every kernel moves bf16
    bf = _mem(L.mlp_block_fwd(gpt, _lay("huggingface", rb=2.0)))
    assert sum(float(o.args["nbytes"]) for o in bf) < sum(float(o.args["nbytes"]) for o in hf)
    # compiled code fuses the chain back into inductor's kernels
    assert [o.args["name"] for o in _mem(L.mlp_block_fwd(gpt, _lay("huggingface", fused=True)))] == [
        o.args["name"] for o in _mem(L.mlp_block_fwd(gpt, _lay("reference", fused=True)))
    ]


def test_llama_family_rmsnorm_rotary_and_casts(llama) -> None:  # type: ignore[no-untyped-def]
    T, h = 2 * 1024, llama.hidden
    ref = L.attention_block_fwd(llama, _lay("reference"))
    hf = L.attention_block_fwd(llama, _lay("huggingface"))
    assert sum(o.kind == "gemm" for o in hf) == sum(o.kind == "gemm" for o in ref)
    names = [o.name for o in _mem(hf)]
    assert (
        sum(n.startswith("rmsnorm_") for n in names) == 5 and sum(n.startswith("rotary_") for n in names) == 6
    )
    # the rotary embedding runs over the queries and the keys
    s = llama.head_dim if llama.head_dim else h // llama.heads
    rot = next(o for o in _mem(hf) if o.name == "rotary_1")
    kv = llama.kv_heads or llama.heads
    assert float(rot.args["nbytes"]) == pytest.approx(T * (llama.heads + kv) * s * 4.0)
    # autocast casts the fp32 norm output once per projection: q, k, v
    cast = next(o for o in hf if o.category == "amp_cast")
    assert cast.count == 3 and next(o for o in ref if o.category == "amp_cast").count == 1
    # GPT-2 keeps the fused LayerNorm and has no rotary embedding
    gpt2 = llama.model_copy(update={"activation": "gelu", "norm": "layernorm"})
    assert not any(
        o.name.startswith(("rmsnorm_", "rotary_")) for o in L.attention_block_fwd(gpt2, _lay("huggingface"))
    )


def test_dropout_kernels_where_positive(gpt) -> None:  # type: ignore[no-untyped-def]
    for impl in ("reference", "huggingface"):
        assert not any(o.name == "dropout" for o in L.layer_fwd(gpt, _lay(impl), False))
        ops = L.layer_fwd(gpt, _lay(impl, dropout=0.1), False)
        drops = [o for o in ops if o.name == "dropout"]
        assert len(drops) == 2  # after the attention and the MLP
        T, h = 2 * 1024, gpt.hidden
        # reads and writes bf16, writes a one-byte mask; the backward reads the mask again
        assert float(drops[0].args["nbytes"]) == pytest.approx(T * h * 5.0)
        assert [o.name for o in L.backward(drops)] == ["dropout_bwd", "dropout_bwd"]
    emb = L.embedding_fwd(gpt, _lay("huggingface", dropout=0.1))
    # token and position lookups, their fp32 sum, dropout
    assert [o.args["name"] for o in emb] == ["embedding", "embedding", "add", "dropout"]


def test_more_kernels_are_never_faster() -> None:
    """A run priced with Hugging Face's composite ops or with dropout never takes less time."""
    import simcore

    base = load_scenario("default").model_copy(update={"runtime": load_scenario("default").runtime})
    t_ref = simcore.predict(base).step_time_s  # type: ignore[attr-defined]
    hf = base.model_copy(
        update={"runtime": base.runtime.model_copy(update={"implementation": "huggingface"})}
    )
    t_hf = simcore.predict(hf).step_time_s  # type: ignore[attr-defined]
    assert t_hf > t_ref
    assert base.training is not None
    dr = base.model_copy(update={"training": base.training.model_copy(update={"dropout": 0.1})})
    assert simcore.predict(dr).step_time_s > t_ref  # type: ignore[attr-defined]
    assert np.isfinite(t_hf)


@pytest.mark.parametrize(
    ("trace", "hf", "p"),
    [
        ("h200/round31/hf_train_gpt2_L12_b8.json.gz", True, 0.1),
        ("h200/round31/hf_train_llama_L8_h2048_b2.json.gz", True, 0.0),
        ("h200/profile_train_gpt-125m_s1024_b8_eager.json.gz", False, 0.0),
        ("h200/round25/profile_train_llama_L8_h2048_v128k_tied.json.gz", False, 0.0),
    ],
)
def test_validate_reads_implementation_and_dropout(trace: str, hf: bool, p: float) -> None:
    from pathlib import Path

    from simcore.validation.traces import dropout_p, hf_implementation
    from simcore.workload.replay import load_analyses

    ans = load_analyses([str(Path(__file__).resolve().parents[2] / "traces" / trace)])
    assert hf_implementation(ans) is hf
    assert dropout_p(ans) == pytest.approx(p)


def test_compiled_gemms_are_padded_to_aligned_rows() -> None:
    """inductor pads a matmul to 16-byte rows: GPT-2's 50257-word LM head runs as 50264 under
    torch.compile, not on cuBLAS's misaligned kernels as in eager PyTorch."""
    from simcore.engine.pricing import Pricer
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster
    from simcore.specs.scenario import ClusterSpec

    cluster = resolve_cluster(ClusterSpec(system="hgx-h200", gpus=1), default_registry())
    head = [
        L.Op("lm_head", "gemm", "gemm", {"m": 8192.0, "n": n, "k": 768.0, "dtype": "bf16", "batch": 1.0})
        for n in (50257.0, 50264.0)
    ]
    eager = Pricer.for_layout(cluster, framework="eager").times(head)[0]
    compiled = Pricer.for_layout(cluster, framework="compiled").times(head)[0]
    assert float(eager[0]) > 2 * float(eager[1])  # misaligned rows: cuBLAS's slow kernels
    assert float(compiled[0]) == pytest.approx(float(compiled[1]))


def test_hf_biases_cache_and_output_copy(gpt, llama) -> None:  # type: ignore[no-untyped-def]
    """GPT-2's Conv1D projections carry biases (a reduction of the output gradient each, in the
    backward); transformers fills its KV cache in training too and copies the attention output back
    to [tokens, hidden]."""
    T = 2 * 1024
    gpt2 = L.layer_fwd(gpt, _lay("huggingface"), False)
    bias = [o for o in L.backward(gpt2) if o.name.endswith("_bias_bwd")]
    assert sorted(o.name for o in bias) == [
        "attn_out_bias_bwd",
        "mlp_in_bias_bwd",
        "mlp_out_bias_bwd",
        "qkv_bias_bwd",
    ]
    mlp_in = next(o for o in bias if o.name == "mlp_in_bias_bwd")
    assert float(mlp_in.args["nbytes"]) == pytest.approx(T * gpt.ffn_hidden * 2.0)  # bf16 read once
    assert not any(
        o.name.endswith("_bias_bwd") for o in L.backward(L.layer_fwd(llama, _lay("huggingface"), False))
    )
    assert not any(
        o.name.endswith("_bias_bwd") for o in L.backward(L.layer_fwd(gpt, _lay("reference"), False))
    )
    cache = [o for o in gpt2 if o.category == "kv_cache"]
    assert len(cache) == 1 and cache[0].count == 2.0
    assert not any(o.category == "kv_cache" for o in L.layer_fwd(gpt, _lay("reference"), False))


def test_compiled_hf_attention_walks_every_block(gpt, llama) -> None:  # type: ignore[no-untyped-def]
    """transformers materialises the causal mask when torch.compile traces it: the attention of a
    compiled Hugging Face model is not causal (every block), its biases and KV cache stay."""

    def attn(m, lay):  # type: ignore[no-untyped-def]
        return next(o for o in L.attention_block_fwd(m, lay) if o.kind == "attention")

    assert attn(gpt, _lay("huggingface", fused=True)).args["causal"] is False
    assert attn(llama, _lay("huggingface", fused=True)).args["causal"] is False
    assert attn(gpt, _lay("huggingface")).args["causal"] is True  # eager: is_causal
    assert attn(gpt, _lay("reference", fused=True)).args["causal"] is True
    compiled = L.layer_fwd(gpt, _lay("huggingface", fused=True), False)
    assert any(o.name.endswith("_bias_bwd") for o in L.backward(compiled))
    assert [o.category for o in compiled].count("kv_cache") == 1


def test_validate_reads_the_dense_mask_of_compiled_hf() -> None:
    from pathlib import Path

    from simcore.validation.traces import dense_mask_attention, hf_implementation
    from simcore.workload.replay import load_analyses

    root = Path(__file__).resolve().parents[2] / "traces" / "h200"
    ans = load_analyses([str(root / "round31" / "hf_train_gpt2_L12_b8_compiled.json.gz")])
    ops = [o for a in ans for o in a.trace.cpu_ops.values()]
    assert dense_mask_attention(ops) and hf_implementation(ans)
    # eager transformers passes is_causal (no mask); tools/gpt.py's compiled step runs flash attention
    for name in ("round31/hf_train_gpt2_L12_b8.json.gz", "profile_train_gpt-125m_s1024_b8_compiled.json.gz"):
        eager = load_analyses([str(root / name)])
        assert not dense_mask_attention([o for a in eager for o in a.trace.cpu_ops.values()])


def test_mixed_dtype_and_strided_kernels(gpt, llama) -> None:  # type: ignore[no-untyped-def]
    """PyTorch's unrolled (mixed dtypes) and strided kernels are their own fitted ops,
    slower per byte than the plain ones; the lowering uses them where the code runs them."""
    from simcore.compute.ops import memory_op
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    dev = default_registry().device("h200")
    prof = load_profile(dev)
    nb = 256e6
    plain = {n: float(memory_op(dev, prof, n, nb).time_s) for n in ("cast", "add", "mul", "silu", "copy")}
    for variant, base in (
        ("cast_up", "cast"),
        ("add_mixed", "add"),
        ("mul_mixed", "mul"),
        ("mul_strided", "mul"),
        ("silu_strided", "silu"),
        ("copy_strided", "copy"),
        ("cat_strided", "copy"),
    ):
        assert float(memory_op(dev, prof, variant, nb).time_s) > 1.3 * plain[base], variant
    # a profile that never measured them prices the plain op
    bare = prof.model_copy(update={"memory": prof.memory.model_copy(update={"ops": {}})})
    assert float(memory_op(dev, bare, "add_mixed", nb).time_s) == pytest.approx(
        float(memory_op(dev, bare, "add", nb).time_s)
    )
    # under autocast the residual add mixes an fp32 residual with a bf16 branch: 4 + 2 + 4 bytes
    T = 2 * 1024
    (add,) = L.residual_add(gpt, _lay("reference"), T)
    assert add.args["name"] == "add_mixed"
    assert float(add.args["nbytes"]) == pytest.approx(T * gpt.hidden * 10.0)
    (bwd,) = L.backward([add])
    assert bwd.args["name"] == "cast"  # the residual's gradient cast down for the branch
    assert L.residual_add(gpt, _lay("reference", rb=2.0), T)[0].args["name"] == "add"
    # transformers' KV cache: a cat of transposed keys and values, gradients back as strided copies
    (cache,) = [o for o in L.attention_block_fwd(llama, _lay("huggingface")) if o.category == "kv_cache"]
    assert cache.args["name"] == "cat_strided" and cache.count == 2.0
    assert L.backward([cache])[0].args["name"] == "copy_strided"
    # the GELU chain names its unrolled kernels: the upcast, the mixed add and product
    names = [o.args["name"] for o in _mem(L.mlp_block_fwd(gpt, _lay("huggingface")))]
    assert names[0] == "cast_up" and "add_mixed" in names and "mul_mixed" in names and names[-1] == "cast"


def test_transformers_experts_run_in_fp32_under_amp(llama) -> None:  # type: ignore[no-untyped-def]
    """transformers' experts call torch._grouped_mm, which autocast does not cast: under AMP (fp32
    weights, fp32 residual stream) they run fp32 GEMMs (a measured Mixtral trace: FFMA kernels)."""
    from simcore.specs.scenario import MoESpec

    moe = llama.model_copy(update={"moe": MoESpec(experts=8, top_k=2, expert_ffn_hidden=2048)})

    def experts(lay: L.Layout) -> set[str]:
        return {
            o.args["dtype"]
            for o in L.moe_block_fwd(moe, lay)
            if o.name.startswith("expert_") and o.kind == "gemm"
        }

    assert experts(_lay("huggingface")) == {"fp32"}
    assert experts(_lay("huggingface", rb=2.0)) == {"bf16"}  # bf16 weights: no autocast, bf16 experts
    assert experts(_lay("reference")) == {"bf16"}  # grouped GEMMs in the compute dtype
    assert experts(_lay("huggingface", fused=True)) == {"bf16"}


def test_generate_decode_runs_batched_experts(llama) -> None:  # type: ignore[no-untyped-def]
    """transformers' generate() switches grouped_mm experts to batched_mm in its decode passes:
    each routed token gathers its experts' gate/up and down weights (3 h f elements, read and written) and
    multiplies them alone, a GEMV of batch ``routed``; a hand-written loop and the prefill keep the grouped
    GEMM over the experts."""
    from simcore.specs.scenario import MoESpec

    moe = llama.model_copy(update={"moe": MoESpec(experts=8, top_k=2, expert_ffn_hidden=2048)})
    assert L.batched_experts("huggingface", "generate", True)
    assert not L.batched_experts("huggingface", "manual", True)
    assert not L.batched_experts("reference", "generate", True)
    assert not L.batched_experts("huggingface", "generate", False)
    lay = L.Layout(micro_batch=4, seq=1, implementation="huggingface", residual=2.0, kv_seq=256.0)
    grouped = L.moe_block_fwd(moe, lay)
    batched = L.moe_block_fwd(moe, dataclasses.replace(lay, batched_experts=True))
    routed = 4 * 2
    h, f = moe.hidden, 2048
    gather = [o for o in batched if o.name == "expert_weight_gather"]
    assert len(gather) == 1 and not any(o.name == "expert_weight_gather" for o in grouped)
    assert gather[0].category == "embedding"  # the index-select gather kernel an embedding lookup runs
    assert gather[0].args["nbytes"] == pytest.approx(2 * routed * 3 * h * f * 2)
    g_gemms = {o.name: o.args for o in grouped if o.kind == "gemm" and o.name.startswith("expert_")}
    b_gemms = {o.name: o.args for o in batched if o.kind == "gemm" and o.name.startswith("expert_")}
    assert set(g_gemms) == set(b_gemms)
    for name, a in b_gemms.items():
        assert float(a["batch"]) == routed and float(a["m"]) == 1.0, name
        # the same FLOPs either way: each routed token through its expert
        assert float(a["batch"]) * float(a["m"]) == pytest.approx(
            float(g_gemms[name]["batch"]) * float(g_gemms[name]["m"])
        )


def test_eager_attention_is_written_out_of_ops(llama) -> None:  # type: ignore[no-untyped-def]
    """transformers' attn_implementation="eager": batched GEMMs over the whole score matrix (twice the
    causal FLOPs), scale, mask, fp32 softmax and cast over b h s^2 scores, GQA's repeated K and V."""
    lay = L.Layout(
        micro_batch=2,
        seq=1024,
        residual=4.0,
        implementation="huggingface",
        attention_backend="eager",
    )
    ops = L.eager_attention_ops(llama, lay)
    s = L.layer_shape(llama)
    scores = 2 * s.heads * 1024 * 1024
    gemms = [o for o in ops if o.kind == "gemm"]
    assert [(o.args["m"], o.args["n"], o.args["k"], o.args["batch"]) for o in gemms] == [
        (1024, 1024, s.head_dim, 2 * s.heads),
        (1024, s.v_head_dim, 1024, 2 * s.heads),
    ]
    mem = {o.args["name"]: o for o in ops if o.kind == "memory"}
    # the scale by a float, the fp32 mask broadcast over the heads (mixed dtypes: its own fitted kernel)
    names = ("mul_scalar", "add_bcast_mixed", "softmax", "cast")
    assert set(names) <= set(mem)
    assert all(mem[n].args["numel"] == scores for n in names)
    assert mem["mul_scalar"].args["nbytes"] == scores * 4.0  # bf16 read and written
    assert mem["softmax"].args["nbytes"] == scores * 8.0  # fp32 scores in (AMP's fp32 mask), fp32 out
    assert mem["softmax"].args["rows"] == 2 * s.heads * 1024  # one row of 1024 keys per query and head
    assert "cast_up" not in mem  # the mask's promotion already made them fp32
    if s.kv_heads < s.heads:
        assert "copy" in mem
    # bf16 weights: a bf16 mask (the broadcast loop, no gradient kernel), and the scores cast up for
    # softmax(dtype=float32)
    bf = dataclasses.replace(lay, residual=2.0)
    ops16 = L.eager_attention_ops(llama, bf)
    mem16 = {o.args["name"]: o for o in ops16 if o.kind == "memory"}
    assert {"add_bcast", "cast_up", "softmax"} <= set(mem16) and "add_bcast_mixed" not in mem16
    assert not [o for o in L.backward(ops16) if o.name.startswith("mask_add")]
    # the layer uses them in place of the fused kernel
    names = {o.name for o in L.layer_fwd(llama, lay, False)}
    assert "attention" not in names and {"attn_scores", "attn_values"} <= names


def test_unfused_loss_is_a_log_softmax_over_each_tokens_logits(llama) -> None:  # type: ignore[no-untyped-def]
    """PyTorch's cross-entropy under autocast: the bf16 logits cast up, a log-softmax over each token's
    row of fp32 logits (its row count given, so the measured width factors apply), and in the backward
    the zero-filled fp32 gradient, the log-softmax backward and the cast back."""
    lay = L.Layout(micro_batch=2, seq=1024, residual=4.0, implementation="huggingface")
    ops = L.loss_fwd(llama, lay)
    names = [o.args["name"] for o in ops]
    assert names == ["cast_up", "log_softmax"]
    ls = ops[1]
    tokens, v = 2 * 1024, llama.vocab
    assert ls.args["rows"] == tokens and ls.args["nbytes"] == tokens * v * 8.0
    bwd = [o.args["name"] for o in L.backward(ops)]
    assert bwd == ["fill", "log_softmax_bwd", "cast"]
