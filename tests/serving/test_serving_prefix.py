"""Prefix caching with shared KV blocks: the radix tree, a hand-computed hit, and the properties that
caching never raises TTFT and never leaks a block."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.errors import SpecError
from simcore.serving.sim import _PrefixCache
from tests.serving.test_serving import run, scen


def test_radix_tree_matches_prefixes_and_evicts_least_recently_used_leaves() -> None:
    c = _PrefixCache()
    a0 = c.add(c.root, (0, 0))
    a1 = c.add(a0, (0, 1))
    b0 = c.add(c.root, (1, 0))
    assert c.size == 3 and c.match(0, 5) == [a0, a1] and c.match(1, 1) == [b0] and c.match(2, 3) == []
    assert not c.lru  # all referenced
    c.release(b0)  # group 1 unused first
    c.release(a1)
    c.release(a0)  # not a leaf: not evictable yet
    assert list(c.lru) == [b0, a1]
    c.acquire(a1)  # used again: not evictable
    assert list(c.lru) == [b0]
    assert c.evict(5) == 1 and c.match(1, 1) == [] and c.size == 2
    c.release(a1)
    assert c.evict(1) == 1 and c.match(0, 2) == [a0]  # the leaf goes first, then its parent is a leaf
    assert list(c.lru) == [a0] and c.evict(1) == 1 and c.size == 0


def test_a_second_request_computes_only_what_is_not_cached() -> None:
    # two requests of one system prompt (1000 tokens + 200 of their own), far apart in time
    serving: dict[str, Any] = {
        "rate": 0.01,
        "requests": 2,
        "prompt": 200,
        "output": 2,
        "shared_prefix": {"tokens": 1000},
        "prefix_caching": True,
    }
    r = run(**serving)
    sm = r.step_models["tp1"]
    p, hit = 1200, (1000 // 16) * 16
    assert r.log.ttft[0] == pytest.approx(sm.rest_gpu(p) + sm.attention(p), rel=1e-12)
    second = sm.rest_gpu(p - hit) + sm.attention(1) + sm.attention(p) - sm.attention(hit)
    assert r.log.ttft[1] == pytest.approx(second, rel=1e-12)
    off = run(**{**serving, "prefix_caching": False})
    assert off.log.ttft[1] == pytest.approx(off.log.ttft[0], rel=1e-12)
    assert r.kv_blocks_leaked == 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tokens=st.integers(16, 3000),
    groups=st.integers(1, 6),
    rate=st.sampled_from([2.0, 8.0, 20.0]),
    block=st.sampled_from([1, 16, 64]),
    seed=st.integers(0, 50),
)
def test_prefix_caching_never_raises_ttft(
    tokens: int, groups: int, rate: float, block: int, seed: int
) -> None:
    serving: dict[str, Any] = {
        "rate": rate,
        "requests": 120,
        "prompt": {"dist": "lognormal", "mean": 300, "sigma": 0.8, "max": 6000},
        "output": {"dist": "uniform", "low": 1, "high": 200},
        "shared_prefix": {"tokens": tokens, "groups": groups},
        "kv_block_tokens": block,
        "seed": seed,
    }
    off = run(**serving).result
    on = run(**serving, prefix_caching=True)
    assert on.result.ttft_s.mean <= off.ttft_s.mean * (1 + 1e-9)
    assert on.result.ttft_s.p50 <= off.ttft_s.p50 * (1 + 1e-9)
    assert on.kv_blocks_leaked == 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    util=st.floats(0.135, 0.2),
    block=st.sampled_from([1, 8, 16]),
    disagg=st.booleans(),
    reserve=st.booleans(),
    engine=st.sampled_from(["vllm", "sglang", "trtllm"]),
    seed=st.integers(0, 50),
)
def test_caching_under_memory_pressure_finishes_without_leaks(
    util: float, block: int, disagg: bool, reserve: bool, engine: str, seed: int
) -> None:
    serving: dict[str, Any] = {
        "rate": 40.0,
        "requests": 60,
        "prompt": {"dist": "lognormal", "mean": 800, "sigma": 1.0, "max": 6000},
        "output": {"dist": "uniform", "low": 1, "high": 300},
        "shared_prefix": {"tokens": 700, "groups": 3},
        "prefix_caching": True,
        "engine": engine,
        "kv_block_tokens": block,
        "memory_utilization": util,
        "reserve_output_kv": reserve,
        "max_batch": 64,
        "seed": seed,
    }
    if disagg:
        serving["disaggregated"] = {"prefill_gpus": 1, "decode_gpus": 1}
    try:
        r = run(scen(gpus=2), **serving)
    except SpecError as e:
        assert "KV cache" in str(e)
        return
    assert r.kv_blocks_leaked == 0
    assert np.all(np.isfinite(r.log.finish)) and np.all(r.log.finish >= r.log.first_token)
    assert 0.0 <= r.result.kv_utilization <= r.result.kv_peak_utilization <= 1.0
