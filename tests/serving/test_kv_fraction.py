"""``serving.memory_fraction_of``: vLLM's fraction of the device vs TensorRT-LLM's fraction of what is free."""

from __future__ import annotations

import pytest

from simcore.memory import RESERVED_BYTES
from simcore.serving import ServingSpec
from simcore.serving.sim import kv_blocks
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster
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
