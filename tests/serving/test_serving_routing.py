"""KV-cache-aware routing across replicas (``serving.router: cache_aware``, SGLang router's policy)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from simcore.serving import ServingSpec, simulate
from simcore.serving.sim import BALANCE_ABS, _Sim
from simcore.specs.resolve import scenario_from_dict


def _pick(spec: ServingSpec, pool: list[Any], group: int, prompt: int = 1200) -> Any:
    inst = _Sim._cache_aware(SimpleNamespace(spec=spec), pool, SimpleNamespace(prompt=prompt, group=group))  # type: ignore[arg-type]
    inst.load += 1
    return inst


def test_cache_aware_follows_the_shared_prompt_until_the_loads_are_imbalanced() -> None:
    spec = ServingSpec(rate=1.0, shared_prefix={"tokens": 1000, "groups": 2}, prefix_caching=True, router="cache_aware")
    pool = [SimpleNamespace(load=0, routed_groups=set(), routed_tokens=0) for _ in range(3)]
    first = _pick(spec, pool, 0)
    assert first is pool[0]
    assert _pick(spec, pool, 1) is pool[1]  # a new system prompt: the smallest tree
    assert _pick(spec, pool, 0) is pool[0]  # its system prompt is there: follow it
    # a prompt mostly its own (match rate below one half) goes to the smallest tree
    assert _pick(spec, pool, 0, prompt=5000) is pool[2]
    pool[0].load = BALANCE_ABS + 5
    assert _pick(spec, pool, 0) is not pool[0]  # imbalanced: least loaded


def test_cache_aware_routing_lowers_the_ttft_tail_of_shared_prompts() -> None:
    sc = scenario_from_dict({
        "name": "r", "kind": "serving", "cluster": {"system": "hgx-h100", "gpus": 4},
        "model": {"preset": "llama3.1-8b"}, "inference": {"precision": "fp8"}, "runtime": {"stack": "vllm"},
        "serving": {"rate": 1.0},
    })  # fmt: skip
    base = {"rate": 40.0, "requests": 1500, "prompt": 256, "output": 64, "prefix_caching": True,
            "shared_prefix": {"tokens": 2048, "groups": 16}, "seed": 1}  # fmt: skip
    ll = simulate(sc, ServingSpec.model_validate(base)).result
    ca = simulate(sc, ServingSpec.model_validate({**base, "router": "cache_aware"})).result
    assert ca.requests == ll.requests
    assert ca.ttft_s.p99 < ll.ttft_s.p99 and ca.ttft_s.mean <= ll.ttft_s.mean * 1.02
