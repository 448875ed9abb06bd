"""DeepSeek-V4's hybrid attention (``model.csa``), hyper-connections (``model.residual_streams``) and hash routing
(``moe.hash_layers``): the keys each query attends, the weights, the model FLOPs, the lowered ops and the saved
activations, checked by hand; the preset against its published size and the 26.08 table's FLOP convention."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.errors import SimcoreError
from simcore.memory import activation_bytes_per_layer
from simcore.specs.registry import registry
from simcore.specs.scenario import CSASpec, ModelSpec, MoESpec
from simcore.workload import csa as C
from simcore.workload import lowering as L
from simcore.workload.model import model_flops_per_token, param_counts

H, A, D, QL, G, OL, HI, DI, K, W = 256, 8, 64, 128, 4, 32, 4, 16, 8, 16


def _model(streams: int = 1, hash_layers: int = 0) -> ModelSpec:
    # 4 layers: window-only, window-only, CSA (ratio 4), HCA (ratio 16)
    csa = CSASpec(compress_ratios=[0, 0, 4, 16], sparse_ratio=4, window=W, q_lora_rank=QL, qk_rope_head_dim=16, o_groups=G,
                  o_lora_rank=OL, indexer_heads=HI, indexer_head_dim=DI, indexer_topk=K)
    return ModelSpec(
        layers=4, hidden=H, heads=A, head_dim=D, ffn_hidden=64, vocab=1000, seq_len=128, activation="swiglu",
        norm="rmsnorm", residual_streams=streams, csa=csa,
        moe=MoESpec(experts=8, top_k=2, shared_experts=1, expert_ffn_hidden=64, hash_layers=hash_layers),
    )  # fmt: skip


def preset() -> ModelSpec:
    d = dict(registry().model_preset("deepseek-v4-flash"))
    d.pop("aliases", None)
    return ModelSpec(**d)


def test_keys_per_query_by_hand() -> None:
    m = _model()
    c = m.csa
    assert c is not None
    g0, g4, g16 = C.ratio_groups(m)
    assert (g0.layers, g4.sparse, g16.sparse, g4.overlap, g16.overlap) == (2, True, False, 2, 1)
    # window 16 over 128 causal queries: the first 16 see 1..16 keys, the rest 16: (136 + 112 x 16) / 128
    assert C.window_context(16, 128) == pytest.approx((136 + 112 * 16) / 128)
    assert C.window_context(256, 128) == pytest.approx(129 / 2)
    # CSA: query t sees t / 4 entries, capped at 8: mean of min(t / 4, 8) over t in [0, 128) = 8 - 64 x 4 / 256
    assert C.compressed_context(g4, c, 128) == pytest.approx(7.0)
    # HCA: every earlier entry, t / 16: mean 128 / 32
    assert C.compressed_context(g16, c, 128) == pytest.approx(4.0)
    assert C.compressed_context(g0, c, 128) == 0.0
    assert C.indexer_pairs(g4, 128) == pytest.approx(16.0) and C.indexer_pairs(g16, 128) == 0.0


@settings(max_examples=30, deadline=None)
@given(st.integers(64, 1 << 16), st.sampled_from([4, 16, 128]))
def test_a_longer_sequence_never_attends_fewer_keys(seq: int, ratio: int) -> None:
    m = _model()
    c = m.csa
    assert c is not None
    g = C.RatioGroup(ratio, 1, ratio == c.sparse_ratio)
    assert C.attention_context(g, c, 2 * seq) >= C.attention_context(g, c, seq)


def test_weights_by_hand() -> None:
    base = H * QL + QL * A * D + H * D + QL + D + A * D * OL + G * OL * H
    csa_extra = 2 * H * 2 * D + QL * HI * DI + 2 * H * 2 * DI + H * HI  # compressor, indexer (CSA layer)
    hca_extra = 2 * H * D
    assert param_counts(_model()).attention_per_layer == round(base + (csa_extra + hca_extra) / 4)
    # hyper-connections: hc_fn (n h x (2 + n) n), its bias and 3 scales, twice a layer
    n = 4
    assert C.hc_params(_model(n)) == 2 * (n * H * 24 + 24 + 3)
    assert param_counts(_model(n)).norms_per_layer - param_counts(_model()).norms_per_layer == C.hc_params(_model(n))


def test_model_flops_follow_megatron_bridge() -> None:
    m, s = _model(), 128
    # flop_utils dsv4_hybrid: 4 A D per key (window whole), CSA 8 (1 - 8 x 4 / 256) = 7, HCA 128 / 32 = 4; the
    # indexer 2 HI DI s / 4 on the CSA layer
    attn = 4 * A * D * (2 * W + (W + 7) + (W + 4)) + 2 * HI * DI * s / 4
    weights = 2.0 * param_counts(m).active_non_embedding
    assert model_flops_per_token(m) == pytest.approx(3 * (weights + attn))


def test_preset_size_and_the_tables_flop_convention() -> None:
    m = preset()
    pc = param_counts(m)
    assert pc.total == pytest.approx(284e9, rel=0.01)  # the model card: 284B total
    # Megatron-Bridge's count adds the MTP layer (a window-only layer, every weight of a layer), its eh
    # projection and norms, and its second logit GEMM; the 26.08 table's 748 TFLOP/s/GPU at 8224 tokens/s/GPU
    # is 90.95 GFLOP a token
    c = m.csa
    assert c is not None
    layer = param_counts(m).active_non_embedding - 129280 * 4096  # 43 layers' GEMM weights
    per_layer = layer / 43
    mtp = 6 * (per_layer + 2 * 4096 * 4096 + 3 * 4096 + 129280 * 4096) + 3 * 4 * 64 * 512 * 128
    assert model_flops_per_token(m) + mtp == pytest.approx(748e12 / 8224, rel=0.02)


def test_lowered_attention_by_hand() -> None:
    m = _model()
    lay = L.Layout(micro_batch=1, seq=128.0, attention_backend="cudnn")
    ops = {o.name: o for o in L.attention_block_fwd(m, lay)}
    assert (ops["q_up"].args["n"], ops["q_up"].args["k"]) == (A * D, QL)
    assert ops["kv"].args["n"] == D  # one shared key/value head
    # the CSA layer's compressor: two projections of 2 D (overlapping windows); the HCA layer's of D
    assert ops["compress_r4"].args["n"] == 4 * D and ops["compress_r16"].args["n"] == 2 * D
    assert ops["compress_r4"].count == pytest.approx(1 / 4)
    # the indexer: queries from the latent, scores of 128 queries x 16 entries (mean) x HI DI, in bf16
    assert (ops["indexer_q"].args["n"], ops["indexer_q"].args["k"]) == (HI * DI, QL)
    sc = ops["indexer_scores"].args
    assert (sc["m"], sc["n"], sc["k"], sc["dtype"]) == (128.0, 16.0, HI * DI, "bf16")
    # the main attention: every query over window + selected entries, one key/value head, non-causal
    at = ops["attention_r4"].args
    assert at["kv_seq"] == pytest.approx(C.window_context(W, 128) + 7.0)
    assert (at["kv_heads"], at["causal"], at["head_dim"]) == (1.0, False, D)
    assert ops["attention"].count == pytest.approx(2 / 4)
    # grouped low-rank output: G GEMMs of A D / G -> OL, then G OL -> H
    od, out = ops["o_down"].args, ops["attn_out"].args
    assert (od["batch"], od["n"], od["k"]) == (G, OL, A * D / G)
    assert (out["n"], out["k"]) == (H, G * OL)


def test_hyper_connection_ops_by_hand() -> None:
    lay = L.Layout(micro_batch=1, seq=128.0, attention_backend="cudnn")
    assert L.hc_ops(_model(1), lay) == []
    ops = {o.name: o for o in L.hc_ops(_model(4), lay)}
    mix = ops["hc_mix"].args
    assert (mix["m"], mix["n"], mix["k"], ops["hc_mix"].count) == (128.0, 24, 4 * H, 2.0)
    # pre: reads 4 h, writes h; post: reads 4 h + h, writes 4 h (bf16), per token, twice a layer
    assert ops["hc_pre_mix"].args["nbytes"] == pytest.approx(128 * 4 * H * 2 * 1.25)
    assert ops["hc_post_mix"].args["nbytes"] == pytest.approx(128 * 4 * H * 2 * 2.25)
    names = [o.name for o in L.layer_fwd(_model(4), lay, moe_layer=True)]
    assert "hc_mix" in names and "hc_mix" not in [o.name for o in L.layer_fwd(_model(1), lay, moe_layer=True)]


def test_hash_layers_run_no_router() -> None:
    lay = L.Layout(micro_batch=1, seq=128.0, ep=2, etp=1)
    plain = {o.name: o for o in L.moe_block_fwd(_model(), lay)}
    hashed = {o.name: o for o in L.moe_block_fwd(_model(hash_layers=1), lay)}
    for nm in ("router", "softmax", "topk"):
        assert plain[nm].count == 1.0 and hashed[nm].count == pytest.approx(3 / 4)
    # the routed tokens and the exchange do not change (balanced either way here)
    assert hashed["ep_dispatch"].args["nbytes"] == plain["ep_dispatch"].args["nbytes"]


def test_hash_layers_are_balanced() -> None:
    lay = L.Layout(micro_batch=1, seq=128.0, ep=2, etp=1)
    m = _model(hash_layers=2)
    assert m.moe is not None
    skewed = m.model_copy(update={"moe": m.moe.model_copy(update={"imbalance": 1.5})})
    plain = _model().model_copy(update={"moe": m.moe.model_copy(update={"imbalance": 1.5, "hash_layers": 0})})
    a2a = {o.name: o for o in L.moe_block_fwd(skewed, lay)}["ep_dispatch"].args["nbytes"]
    full = {o.name: o for o in L.moe_block_fwd(plain, lay)}["ep_dispatch"].args["nbytes"]
    # half the layers hash-routed (balanced): the mean excess is half of 0.5
    assert a2a / full == pytest.approx(1.25 / 1.5)


def test_saved_activations_by_hand() -> None:
    kw = {"micro_batch": 1, "seq": 128, "recompute": "selective", "moe_layer": True, "modules": ("mla_up_proj",)}
    one, four = activation_bytes_per_layer(_model(1), **kw), activation_bytes_per_layer(_model(4), **kw)
    # 3 more residual streams read by each of the two mixes, in bf16
    assert four - one == pytest.approx(2 * 3 * 128 * H * 2)
    full = activation_bytes_per_layer(_model(1), **{**kw, "modules": ("core_attn",)})
    # mla_up_proj drops the up-projected queries (A D a token) but keeps the softmax statistics core_attn drops
    # (A fp32 a token: 2 A bf16 elements)
    assert full - one == pytest.approx(128 * (A * D - 2 * A) * 2)


def _dsv4_scenario(tmp_path: Path, extra: str = "") -> Path:
    """A DeepSeek-V4 Flash training scenario file (the published GB200 layout), ``extra`` lines appended."""
    sc = tmp_path / "dsv4.yaml"
    sc.write_text(
        "kind: training\n"
        "cluster: {system: gb200-nvl72, gpus: 64}\n"
        "model: {preset: deepseek-v4-flash}\n"
        "training: {micro_batch: 1, global_batch: 256, precision: mxfp8}\n"
        "parallel: {tp: 1, ep: 64, etp: 1}\n"
        "runtime: {stack: megatron, moe_dispatcher: hybridep}\n" + extra
    )
    return sc


def test_bad_csa_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.cli_runner import predicts_then_rejects

    predicts_then_rejects(capsys, str(_dsv4_scenario(tmp_path)), "model.csa.compress_ratios=[0,4]", "compress_ratios")


@pytest.mark.parametrize("bad", [-1, 1])
def test_a_ratio_below_two_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path, bad: int) -> None:  # type: ignore[no-untyped-def]
    from tests.cli_runner import run_cli

    sc = _dsv4_scenario(tmp_path)
    ratios = ",".join(["0", "0"] + ["4", str(bad)] * 20 + ["4"])  # the preset's, its HCA layers' 128 replaced
    code, _out, err = run_cli(capsys, "predict", str(sc), "--set", f"model.csa.compress_ratios=[{ratios}]")
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "compress_ratios" in err
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        _model().model_validate({**_model().model_dump(), "csa": {**_model().model_dump()["csa"], "qk_rope_head_dim": D}})
    with pytest.raises(ValueError, match="at least 2"):
        CSASpec(compress_ratios=[0, 4, 1], q_lora_rank=QL, o_groups=G, o_lora_rank=OL, indexer_heads=HI,
                indexer_head_dim=DI, indexer_topk=K)  # fmt: skip


def test_the_attention_backend_is_cudnn_named_or_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from simcore.engine.runtime import with_stack
    from simcore.specs.resolve import load_scenario
    from tests.cli_runner import predicts_then_rejects

    sc = _dsv4_scenario(tmp_path)
    stacked, chosen = with_stack(load_scenario(sc))
    assert stacked.runtime.attention_backend == "cudnn"  # not the stack's eager fallback at head dim 512
    assert any(c.key == "runtime.attention_backend" and "DeepSeek-V4" in c.source for c in chosen)
    for backend in ("eager", "efficient", "flash"):
        predicts_then_rejects(capsys, str(sc), f"runtime.attention_backend={backend}", "attention_backend")
    with pytest.raises(SimcoreError, match="cuDNN"):  # an API caller's layout too
        L.attention_block_fwd(_model(), L.Layout(micro_batch=1, seq=128.0, attention_backend="flash"))


def test_output_groups_split_over_tp(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from simcore.workload.layout import valid_layouts
    from tests.cli_runner import predicts_then_rejects

    # G = 4 output groups, A = 8 heads: tp 4 splits both, tp 8 only the heads
    check = valid_layouts(_model(), tp=np.array([4, 8]))
    assert check.ok.tolist() == [True, False] and "o_groups" in check.reason((1,))
    predicts_then_rejects(capsys, str(_dsv4_scenario(tmp_path)), "parallel.tp=16", "o_groups")  # the preset's 8


def test_inference_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.cli_runner import run_cli

    sc = tmp_path / "dsv4_serve.yaml"
    sc.write_text("kind: inference\ncluster: {system: gb200-nvl72, gpus: 8}\nmodel: {preset: deepseek-v4-flash}\n")
    for command in ("predict", "check"):  # check reports what predict would refuse
        code, _out, err = run_cli(capsys, command, str(sc))
        assert code != 0 and "Traceback" not in err
        assert "model.csa" in err and "training only" in err
        if command == "predict":
            assert len(err.strip().splitlines()) == 1


def test_full_recompute_keeps_every_stream() -> None:
    kw = {"micro_batch": 1, "seq": 128, "recompute": "full", "moe_layer": True}
    assert activation_bytes_per_layer(_model(4), **kw) == pytest.approx(4 * activation_bytes_per_layer(_model(1), **kw))
