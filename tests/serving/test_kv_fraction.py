"""``serving.memory_fraction_of``: vLLM's fraction of the device vs TensorRT-LLM's fraction of what is free."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.memory import RESERVED_BYTES
from simcore.serving import ServingSpec
from simcore.serving.sim import estimation_blocks, kv_blocks
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster, scenario_from_dict
from tests.serving.test_serving import scen


def test_free_fraction_by_hand() -> None:
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    cap = cluster.device.memory.capacity
    dev = ServingSpec(rate=1.0, memory_utilization=0.9)
    free = ServingSpec(rate=1.0, memory_utilization=0.9, memory_fraction_of="free")
    _, m_dev = kv_blocks(sc, cluster, dev, 1)
    _, m_free = kv_blocks(sc, cluster, free, 1)
    used = m_dev["weights"] + m_dev["activations"]
    assert m_dev["usable"] == pytest.approx(min(0.9 * cap, cap - RESERVED_BYTES))
    # TensorRT-LLM: 0.9 of what the model, its activations and the runtime's reserve leave
    assert m_free["usable"] == pytest.approx(used + 0.9 * (cap - RESERVED_BYTES - used))
    assert m_free["kv_cache"] > m_dev["kv_cache"]  # an 8B model leaves most of an H200 free


def test_cuda_graph_memory_beside_the_kv_budget() -> None:
    """Decode CUDA graphs (docs/parallelism.md, CUDA-graph memory): one shared private pool holding the
    largest captured step's activations, plus each graph's static output (``b x hidden`` bf16 values);
    reported, not taken from the KV cache (vLLM's default)."""
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    hidden = sc.model.hidden
    none = kv_blocks(sc, cluster, ServingSpec(rate=1.0), 1)[1]
    one = kv_blocks(sc, cluster, ServingSpec(rate=1.0, cuda_graph_sizes=[8, 16]), 1)[1]
    more = kv_blocks(sc, cluster, ServingSpec(rate=1.0, cuda_graph_sizes=[4, 8, 16]), 1)[1]
    assert none["cuda_graphs"] == 0.0
    # a smaller size adds its static output only: the pool is the largest step's
    assert more["cuda_graphs"] - one["cuda_graphs"] == pytest.approx(4 * hidden * 2.0)
    assert one["cuda_graphs"] > (8 + 16) * hidden * 2.0
    assert one["kv_cache"] == none["kv_cache"]


# Llama-3-8B (hidden 4096, SwiGLU ffn 14336, vocab 128256) at TP 1 in bf16: a prefill step holds the fused gate/up
# output, silu(gate) and their product (4 x 14336) beside two hidden-wide tensors, (4 x 14336 + 2 x 4096) x 2 bytes
# a token; a captured decode step of b sequences ends with b x 128256 logits in bf16 and fp32 (6 bytes each)
ACT_PER_TOKEN = (4 * 14336 + 2 * 4096) * 2.0
VOCAB = 128256


def trtllm(**kw: object) -> ServingSpec:
    """TensorRT-LLM's memory fields (its engine profile) on a small instance."""
    base: dict[str, object] = {
        "rate": 1.0,
        "max_batch": 256,
        "max_batch_tokens": 2048,
        "memory_utilization": 0.9,
        "memory_fraction_of": "free",
        "graphs_before_kv": True,
        "graph_logit_bytes": 6.0,
        "cuda_graph_sizes": [1, 2, 4, 8, 16],
    }
    return ServingSpec.model_validate({**base, **kw})


def test_graphs_captured_before_the_kv_cache_by_hand() -> None:
    """TensorRT-LLM (docs/serving.md, "KV cache"): the shared graph pool holds the largest captured step's peak,
    its activations and its logits, and comes off the memory the KV fraction applies to."""
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    cap = cluster.device.memory.capacity
    blocks, m = kv_blocks(sc, cluster, trtllm(), 1)
    # the max_num_tokens dummy prefill (its few last-token logits aside)
    assert m["activations"] == pytest.approx(2048 * ACT_PER_TOKEN)
    assert m["cuda_graphs"] == pytest.approx(16 * ACT_PER_TOKEN + 16 * VOCAB * 6.0)  # the size-16 step only
    used = m["weights"] + m["activations"] + m["cuda_graphs"]
    free = 0.9 * (cap - RESERVED_BYTES - used)
    assert m["usable"] == pytest.approx(used + free)
    per_block = m["kv_bytes_per_token"] * 16
    assert blocks == int(free // per_block)


def test_estimation_blocks_by_hand() -> None:
    """TensorRT-LLM's estimation cache: ``max_num_tokens`` in dummy requests of at most ``max_seq_len - 1`` tokens,
    each plus one token, in whole blocks."""
    assert estimation_blocks(2048, 8192, 16) == 129  # one request: ceil(2049 / 16)
    # NVIDIA/TensorRT-LLM#6294's run (23,552 tokens, max_seq_len 157, 32-token blocks): 150 requests of 156 tokens,
    # 5 blocks each, and one of 152 tokens, 5 blocks
    assert estimation_blocks(23552, 157, 32) == 755
    assert estimation_blocks(4608, 256, 32) == 18 * 8 + 1  # 18 x 255 tokens, then 18 tokens (+1) in one block


def test_graph_pool_sizes_and_attention_dp() -> None:
    """Only sizes the estimation cache has blocks for are captured before the KV sizing (without listed sizes, up
    to the batch limit); each attention-DP rank captures its own share of the sizes and prefills its share of the
    step's tokens."""
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    # the estimation cache: one 2,048-token dummy request (the 8,192-token context holds it) and its generated
    # token, ceil(2,049 / 16) = 129 blocks: no graph above 129 sequences is captured before the KV sizing
    unlisted = kv_blocks(sc, cluster, trtllm(cuda_graph_sizes=None), 1)[1]
    assert unlisted["cuda_graphs"] == pytest.approx(129 * ACT_PER_TOKEN + 129 * VOCAB * 6.0)
    listed = kv_blocks(sc, cluster, trtllm(cuda_graph_sizes=[64, 128, 256]), 1)[1]
    assert listed["cuda_graphs"] == pytest.approx(128 * ACT_PER_TOKEN + 128 * VOCAB * 6.0)
    rank = kv_blocks(sc, cluster, trtllm(), 1, dp=2)[1]
    assert rank["cuda_graphs"] == pytest.approx(8 * ACT_PER_TOKEN + 8 * VOCAB * 6.0)
    assert rank["activations"] == pytest.approx(1024 * ACT_PER_TOKEN)


def test_graphs_after_the_kv_cache_keep_the_profiling_logits() -> None:
    """vLLM (``graphs_before_kv`` false): the profiling run's fp32 logits of ``max_batch`` sequences come off the
    budget, the graphs do not; the same instance under TensorRT-LLM's order trades those logits for the pool."""
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    after = kv_blocks(sc, cluster, trtllm(graphs_before_kv=False), 1)[1]
    assert after["activations"] == pytest.approx(2048 * ACT_PER_TOKEN + 256 * VOCAB * 4.0)
    before = kv_blocks(sc, cluster, trtllm(), 1)[1]
    held_after = after["activations"]
    held_before = before["activations"] + before["cuda_graphs"]
    # KV room = 0.9 x (capacity - reserve - weights - held): it moves by 0.9 x the difference of what is held
    assert before["kv_cache"] - after["kv_cache"] == pytest.approx(
        0.9 * (held_after - held_before), abs=before["kv_bytes_per_token"] * 16
    )


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 512), min_size=1, max_size=6), st.integers(1, 512))
def test_a_larger_captured_size_never_adds_kv_blocks(sizes: list[int], extra: int) -> None:
    sc = scen()
    cluster = resolve_cluster(sc.cluster, default_registry())
    base = kv_blocks(sc, cluster, trtllm(max_batch=1024, cuda_graph_sizes=sizes), 1)[0]
    more = kv_blocks(sc, cluster, trtllm(max_batch=1024, cuda_graph_sizes=[*sizes, max(sizes) + extra]), 1)[0]
    assert more <= base


def test_engine_profiles_set_the_graph_order() -> None:
    """``serving.engine: trtllm`` takes its profile's graph order and logit bytes; vLLM keeps the profiling logits."""
    from simcore.specs.serving import with_engine

    gib = 80 * 2.0**30
    trt = with_engine(ServingSpec(rate=1.0, engine="trtllm"), "h100", gib)
    vll = with_engine(ServingSpec(rate=1.0, engine="vllm"), "h100", gib)
    assert (trt.graphs_before_kv, trt.graph_logit_bytes) == (True, 6.0)
    assert not vll.graphs_before_kv
    # a scenario's own value wins over its engine's
    assert not with_engine(ServingSpec(rate=1.0, engine="trtllm", graphs_before_kv=False), "h100", gib).graphs_before_kv


def test_a_published_trtllm_kv_capacity() -> None:
    """NVIDIA/TensorRT-LLM#6294 (trtllm-bench, Llama 3.1 8B FP8 on one H100, max_num_requests 4,096, max_num_tokens
    23,552, max_seq_len 157, fraction 0.8, 32-token blocks, CUDA graphs of 24 sizes up to 4,096) logged "Allocated 52.51
    GiB for max tokens in paged KV cache (860320)": the graphs-before-KV accounting lands within 1 % of it."""
    sc = scenario_from_dict(
        {
            "name": "trtllm-6294",
            "kind": "serving",
            "cluster": {"system": "hgx-h100", "gpus": 1},
            "model": {"preset": "llama3.1-8b"},
            "inference": {"precision": "fp8", "kv_cache_dtype": "fp8"},
            "runtime": {"framework": "cuda_graphs"},
            "serving": {"rate": 1.0},
        }
    )
    cluster = resolve_cluster(sc.cluster, default_registry())
    # the log's 24 captured sizes, read as CudaGraphConfig generates them with padding: 1, 2, 4, 8..128, 256..4096
    sizes = [1, 2, 4, *range(8, 129, 8), 256, 512, 1024, 2048, 4096]
    spec = trtllm(
        max_batch=4096, max_batch_tokens=23552, memory_utilization=0.8, kv_block_tokens=32, cuda_graph_sizes=sizes
    )
    blocks, _ = kv_blocks(sc, cluster, spec, 1, max_seq_len=157)
    assert blocks * 32 == pytest.approx(860320, rel=0.01)
