"""MoE serving with attention data parallelism and wide expert parallelism (``serving.attention_dp``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from simcore.engine import inference as INF
from simcore.errors import SpecError
from simcore.serving import ServingSpec, simulate
from simcore.serving.sim import attention_dp_step_model, build_step_model
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster, scenario_from_dict
from simcore.specs.scenario import InferenceSpec, Scenario


def scen(preset: str = "qwen3-30b-a3b", gpus: int = 8, system: str = "hgx-h100", kv: str = "fp8") -> Scenario:
    return scenario_from_dict(
        {
            "name": "ep",
            "kind": "serving",
            "cluster": {"system": system, "gpus": gpus},
            "model": {"preset": preset},
            "parallel": {"tp": 1},
            "inference": {"precision": "fp8", "kv_cache_dtype": kv},
            "runtime": {"framework": "cuda_graphs"},
            "serving": {"rate": 1.0},
        }
    )


def _decode(sc: Scenario, batch: int, ctx: int, ep: int) -> Any:
    cl = resolve_cluster(sc.cluster, default_registry())
    spec = InferenceSpec.model_construct(
        batch=batch, prompt_len=ctx, context_len=ctx, output_len=1, precision="fp8", kv_cache_dtype="fp8"
    )
    return INF.evaluate(sc.model, spec, cl, 1, 1, "cuda_graphs", paged_kv=True, ep=ep)


def test_instance_tables_are_a_ranks_at_its_share_of_the_batch() -> None:
    sc = scen()
    cl = resolve_cluster(sc.cluster, default_registry())
    rank = build_step_model(sc, cl, 1, 64, 1024, 1024, None, 1, ep=8)
    inst = attention_dp_step_model(rank, 8)
    # 8 x 16 sequences on 8 ranks: one rank's step of 16; fewer sequences than ranks: a rank's step of one
    assert inst.decode_gpu(128, 700.0) == pytest.approx(rank.decode_gpu(16, 700.0), rel=1e-12)
    assert inst.decode_gpu(3, 700.0) == pytest.approx(rank.decode_gpu(1, 700.0), rel=1e-12)
    # prompt tokens spread over the ranks; a chunk's attention shared by them
    assert inst.rest_gpu(8 * 512) == pytest.approx(rank.rest_gpu(512), rel=1e-9)
    assert inst.attention(512) == pytest.approx(rank.attention(512) / 8, rel=1e-9)


def test_expert_weights_per_gpu_and_all_to_alls_follow_ep() -> None:
    sc = scen()
    tp1, ep8 = _decode(sc, 64, 1024, 1), _decode(sc, 64, 1024, 8)
    assert "ep_comm" in ep8.decode.time and float(np.asarray(ep8.decode.time["ep_comm"])) > 0
    # every expert on one GPU (tp 1, ep 1) against an eighth of them
    assert float(np.asarray(ep8.memory["weights"])) < 0.25 * float(np.asarray(tp1.memory["weights"]))


def test_fp8_dispatch_sends_fewer_bytes_than_a_bf16_one() -> None:
    from simcore.workload import lowering as L

    m = scen().model
    base = L.Layout(micro_batch=64, seq=1.0, ep=8, etp=1, dtype="fp8", kv_seq=1024.0)
    fp8 = L.Layout(micro_batch=64, seq=1.0, ep=8, etp=1, dtype="fp8", kv_seq=1024.0, dispatch_bytes=1 + 4 / 128)

    def nbytes(lay: L.Layout, name: str) -> float:
        return float(next(o for o in L.moe_block_fwd(m, lay) if o.name == name).args["nbytes"])

    assert nbytes(fp8, "ep_dispatch") == pytest.approx(nbytes(base, "ep_dispatch") * (1 + 4 / 128) / 2)
    assert nbytes(fp8, "ep_combine") == nbytes(base, "ep_combine")


def test_all_gather_exchange_moves_every_ranks_tokens() -> None:
    """TensorRT-LLM without multi-node NVLink: each rank gathers the ep ranks' tokens (FP8) and reduce-scatters
    the bf16 outputs, whatever top_k; hand-computed bytes (qwen3-30b-a3b: hidden 2048, top 8)."""
    from simcore.workload import lowering as L

    m = scen().model
    lay = L.Layout(micro_batch=64, seq=1.0, ep=8, etp=1, dtype="fp8", kv_seq=1024.0, dispatch_bytes=1 + 4 / 128,
                   ep_exchange="all_gather")  # fmt: skip
    ops = {o.name: o.args for o in L.moe_block_fwd(m, lay)}
    assert ops["ep_dispatch"]["op"] == "all_gather" and ops["ep_combine"]["op"] == "reduce_scatter"
    assert ops["ep_dispatch"]["nbytes"] == pytest.approx(64 * 8 * 2048 * (1 + 4 / 128))
    assert ops["ep_combine"]["nbytes"] == pytest.approx(64 * 8 * 2048 * 2.0)


def test_ep_exchange_follows_the_engine_and_multi_node_nvlink() -> None:
    from simcore.specs.serving import engine_settings, with_engine

    reg = default_registry()
    assert not reg.system("hgx-h100").multi_node_nvlink and not reg.system("dgx-b200").multi_node_nvlink
    assert reg.system("gb200-nvl72").multi_node_nvlink  # 18 compute trays (hosts) on one NVLink domain
    assert engine_settings("trtllm", "h100", 80e9)["ep_exchange"] == "all_gather"  # no multi-node NVLink
    assert engine_settings("trtllm", "gb200", 186e9, multi_node_nvlink=True)["ep_exchange"] == "all_to_all"
    assert engine_settings("sglang", "h100", 80e9)["ep_exchange"] == "all_to_all"
    given = ServingSpec(rate=1.0, engine="trtllm", ep_exchange="all_to_all")
    assert with_engine(given, "h100", 80e9).ep_exchange == "all_to_all"


def test_the_chosen_exchange_is_in_the_results_settings() -> None:
    sc = scen()
    res = simulate(sc, ServingSpec(rate=1e9, requests=50, prompt=128, output=8, engine="trtllm", attention_dp=8))
    assert res.result.settings["ep_exchange"] == "all_gather"


def test_mla_paged_decode_streams_the_latent_once() -> None:
    """DeepSeek-V3's decode attention in a serving engine reads kv_lora_rank + rope dims a cached token (bf16),
    not every head's expanded keys and values."""
    from simcore.workload import lowering as L

    m = scen("deepseek-v3", 72).model
    assert m.mla is not None
    lay = L.Layout(micro_batch=16, seq=1.0, kv_seq=2000.0, attention_backend="paged", kv_cache=True)
    a = next(o for o in L.attention_block_fwd(m, lay) if o.kind == "attention").args
    latent = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    assert 2 * a["kv_heads"] * a["head_dim"] == pytest.approx(latent)
    assert 4 * a["heads"] * a["head_dim"] == pytest.approx(2 * m.heads * (latent + m.mla.kv_lora_rank))


def test_attention_dp_serving_runs_and_reports_its_layout() -> None:
    sc = scen()
    spec = ServingSpec(rate=200.0, requests=400, prompt=512, output=64, attention_dp=8, max_batch=512,
                       max_batch_tokens=8192, two_batch_overlap=True)  # fmt: skip
    res = simulate(sc, spec).result
    assert res.gpus == 8 and res.instances == {"mixed": 1}
    assert res.layout["mixed_attention_dp"] == 8 and res.layout["mixed_ep"] == 8
    assert res.requests == 400 and res.output_tokens_per_s > 0


def test_attention_dp_needs_the_gpus() -> None:
    with pytest.raises(SpecError, match="attention_dp"):
        simulate(scen(gpus=4), ServingSpec(rate=10.0, requests=10, attention_dp=8))


def test_two_batch_overlap_never_slower() -> None:
    sc = scen()
    base = ServingSpec(rate=1e9, requests=300, prompt=256, output=64, attention_dp=8, max_batch=512)
    plain = simulate(sc, base).result
    tbo = simulate(sc, base.model_copy(update={"two_batch_overlap": True})).result
    assert tbo.output_tokens_per_s >= plain.output_tokens_per_s * (1 - 1e-9)


def test_vision_encoder_weights_sit_on_every_gpu_in_16_bits() -> None:
    """Llama 4's checkpoint carries a vision encoder (871,932,416 parameters, hardware_specs/models/llama4-scout.yaml)
    that engines load unquantized on every rank: 2 bytes each on top of the text model's weights, whatever ep."""
    sc = scen("llama4-scout", gpus=4)
    assert sc.model.vision_params == 871_932_416
    text = sc.model_copy(update={"model": sc.model.model_copy(update={"vision_params": 0})})
    for ep in (1, 4):
        with_v = float(np.asarray(_decode(sc, 8, 256, ep).memory["weights"]))
        without = float(np.asarray(_decode(text, 8, 256, ep).memory["weights"]))
        assert with_v - without == pytest.approx(871_932_416 * 2.0)


def test_tp_all_reduce_runs_the_folded_experts_without_an_exchange() -> None:
    """EP inside a TP instance (ep = tp = 4, expert TP 1): every rank holds all 64 tokens after the attention's
    all-reduce and runs its own experts on the rows routed to them, 64 x 8 / 4 = 128 rows of Qwen3-30B-A3B (top 8
    of 128), on the experts the busiest rank hits; the layer's TP all-reduce sums the outputs. The expert GEMMs are
    the folded all-to-all layout's, the exchange is gone."""
    from simcore.workload import lowering as L

    m = scen().model
    assert m.moe is not None and m.moe.top_k == 8 and m.moe.experts == 128
    tpar = L.Layout(micro_batch=64, seq=1.0, tp=4, ep=4, etp=1, dtype="fp8", kv_seq=1024.0, ep_exchange="tp_all_reduce")
    a2a = replace(tpar, ep_exchange="all_to_all")
    ops = L.moe_block_fwd(m, tpar)
    assert not [o for o in ops if o.category == "ep_comm"]
    gemm = {o.name: o.args for o in ops if o.kind == "gemm" and o.name.startswith("expert_")}
    ref = {o.name: o.args for o in L.moe_block_fwd(m, a2a) if o.kind == "gemm" and o.name.startswith("expert_")}
    assert gemm == ref
    busiest = L.active_experts(128, 8, 4, 64)
    for args in gemm.values():
        assert args["batch"] == pytest.approx(busiest)
        assert args["m"] == pytest.approx(64 * 8 / 4 / busiest)
    # TP attention's all-reduces stay: one after the attention, one after the MoE, 64 x 2048 bf16 each
    (ar,) = [o for o in L.layer_fwd(m, tpar, moe_layer=True) if o.category == "tp_comm"]
    assert ar.args["op"] == "all_reduce" and ar.count == 2 and ar.args["nbytes"] == 64 * 2048 * 2


def test_parallel_ep_inside_a_tp_instance_serves_and_reports_its_layout() -> None:
    """parallel.ep = tp: TP attention, experts whole on the 4 GPUs (TensorRT-LLM's --ep 4 --tp 4 without attention
    DP); weights a GPU as with TP-sharded experts (a quarter of them either way), no ep_comm in a step."""
    sc = scen(gpus=4).model_copy(update={"parallel": scen().parallel.model_copy(update={"tp": 4, "ep": 4})})
    spec = ServingSpec(rate=1e9, requests=200, prompt=256, output=32, max_batch=128)
    res = simulate(sc, spec).result
    assert res.layout["tp"] == 4 and res.layout["mixed_ep"] == 4 and "mixed_attention_dp" not in res.layout
    tp_only = simulate(sc.model_copy(update={"parallel": sc.parallel.model_copy(update={"ep": 1})}), spec).result
    assert "mixed_ep" not in tp_only.layout
    assert res.memory_per_gpu["weights"] == pytest.approx(tp_only.memory_per_gpu["weights"], rel=1e-9)
    cl = resolve_cluster(sc.cluster, default_registry())
    assert build_step_model(sc, cl, 4, 64, 512, 512, spec, 1, 4).decode_gpu(64, 300.0) > 0


@pytest.mark.parametrize(("tp", "ep", "dp"), [(4, 2, 1), (2, 8, 2)])
def test_parallel_ep_the_instance_cannot_run_is_one_error(tp: int, ep: int, dp: int) -> None:
    base = scen(gpus=8)
    sc = base.model_copy(update={"parallel": base.parallel.model_copy(update={"tp": tp, "ep": ep})})
    with pytest.raises(SpecError, match="ep ") as e:
        simulate(sc, ServingSpec(rate=10.0, requests=10, attention_dp=dp))
    assert e.value.field == "parallel.ep"


def test_parallel_ep_needs_experts() -> None:
    base = scenario_from_dict(
        {"name": "d", "kind": "serving", "cluster": {"system": "hgx-h100", "gpus": 2}, "model": {"preset": "llama3.1-8b"},
         "parallel": {"tp": 2, "ep": 2}, "inference": {"precision": "fp8", "kv_cache_dtype": "fp8"},
         "serving": {"rate": 1.0}}
    )  # fmt: skip
    with pytest.raises(SpecError, match="MoE"):
        simulate(base, ServingSpec(rate=10.0, requests=10))


def test_cuda_graph_padding_under_attention_dp_pads_each_ranks_batch() -> None:
    """Sizes are the instance's decode batches (dp x a rank's captured size): 8 ranks of 10 sequences run a rank's
    graph of 16 (8 x 16 = 128 for the instance), priced as a rank's step of 16 rows over the 10 real sequences' KV;
    padding never makes the run faster."""
    from simcore.serving.sim import padded_slots_context

    sc = scen()
    cl = resolve_cluster(sc.cluster, default_registry())
    inst = attention_dp_step_model(build_step_model(sc, cl, 1, 64, 1024, 1024, None, 1, ep=8), 8)
    padded = inst.decode_gpu(128, padded_slots_context(700.0, 80, 128))
    assert padded > inst.decode_gpu(80, 700.0)
    graphs = [8 * g for g in (1, 2, 4, 8, 16, 32, 64)]
    base = ServingSpec(rate=1e9, requests=160, prompt=256, output=32, attention_dp=8, max_batch=512)
    plain = simulate(sc, base).result
    pad = simulate(sc, base.model_copy(update={"cuda_graph_sizes": graphs})).result
    assert pad.output_tokens_per_s <= plain.output_tokens_per_s
    assert pad.memory_per_gpu["cuda_graphs"] > 0
