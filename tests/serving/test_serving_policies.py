"""Scheduler policies, engine profiles and CUDA-graph padding of the serving simulation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simcore.errors import SpecError
from simcore.serving import ServingSpec, simulate
from simcore.serving import sim as S
from simcore.specs.serving import engine_settings, with_engine
from tests.serving.test_serving import run, scen

GIB = 2**30


def test_engine_profiles_follow_the_gpu_memory_tiers() -> None:
    big = engine_settings("vllm", "h200", 141e9)
    assert (big["max_batch"], big["max_batch_tokens"]) == (1024, 8192)
    small = engine_settings("vllm", "l4", 24 * GIB)
    assert (small["max_batch"], small["max_batch_tokens"]) == (256, 2048)
    a100 = engine_settings("vllm", "a100", 80 * GIB)  # excluded from the large tier
    assert a100["max_batch"] == 256
    assert big["cuda_graph_sizes"][:4] == [1, 2, 4, 8] and big["cuda_graph_sizes"][-1] == 512
    trt = engine_settings("trtllm", "h200", 141e9)
    assert trt["reserve_output_kv"] is True and trt["cuda_graph_sizes"] is None
    sg = engine_settings("sglang", "h100", 80e9)
    assert sg["step_order"] == "prefill_first" and sg["cuda_graph_sizes"][-1] == 256
    with pytest.raises(SpecError, match="unknown engine"):
        engine_settings("tgi", "h100", 80e9)


def test_fields_set_in_the_scenario_win_over_the_engine() -> None:
    spec = ServingSpec.model_validate({"rate": 1.0, "engine": "vllm", "max_batch": 64})
    got = with_engine(spec, "h200", 141e9)
    assert got.max_batch == 64 and got.max_batch_tokens == 8192 and got.kv_block_tokens == 16
    assert with_engine(ServingSpec(rate=1.0), "h200", 141e9) == ServingSpec(rate=1.0)


def test_result_says_which_settings_it_assumed() -> None:
    r = run(requests=50, engine="trtllm").result
    assert r.settings["engine"] == "trtllm"
    assert r.settings["reserve_output_kv"] is True and r.settings["kv_block_tokens"] == 32
    assert run(requests=20).result.settings["engine"] is None


def test_cuda_graph_padding_prices_the_padded_batch() -> None:
    r = run(requests=1, prompt=512, output=10, cuda_graph_sizes=[8, 16])
    sm = r.step_models["tp1"]
    ttft = sm.rest_gpu(512) + sm.attention(512)
    # one sequence runs the batch-8 graph: GEMMs of 8 rows, the KV of the one real sequence (the 7 dummies hold none)
    decode = sum(sm.decode(8, (512 + 1 + j) / 8) for j in range(9))
    assert r.log.e2e[0] == pytest.approx(ttft + decode, rel=1e-12)
    plain = run(requests=1, prompt=512, output=10).log.e2e[0]
    assert r.log.e2e[0] >= plain


def test_padding_rows_read_no_kv() -> None:
    """A decode of b sequences at context c padded to g rows is priced at g rows and context c b / g: the KV read is
    the real sequences' (hand-computed)."""
    assert S.padded_slots_context(1000.0, 3, 4) == 750.0
    assert S.padded_slots_context(1000.0, 4, 4) == 1000.0
    sm = run(requests=1, prompt=512, output=2).step_models["tp1"]
    ctx, b, g = 2000.0, 6, 8
    assert sm.step_time(b, ctx, 0, 0.0, b_graph=g) == pytest.approx(sm.decode(g, ctx * b / g), rel=1e-12)


SATURATED: dict[str, Any] = {
    "rate": 40.0,
    "requests": 600,
    "prompt": {"dist": "lognormal", "mean": 1024, "sigma": 1.0, "max": 6000},
    "output": 64,
}


def test_priority_serves_the_first_class_sooner() -> None:
    r = run(**{**SATURATED, "rate": 80.0}, scheduler="priority", priority_mix=[0.3, 0.7])
    p = r.log.priority
    assert p is not None and 0 < np.count_nonzero(p == 0) < p.size
    ttft = r.log.ttft
    assert ttft[p == 0].mean() < 0.5 * ttft[p == 1].mean()
    fcfs = run(**{**SATURATED, "rate": 80.0}, priority_mix=[0.3, 0.7]).log
    assert np.array_equal(fcfs.arrival, r.log.arrival)  # same workload, only the order differs


def test_shortest_prompt_first_lowers_mean_ttft_under_load() -> None:
    fcfs = run(**SATURATED).result
    spf = run(**SATURATED, scheduler="shortest_prompt_first").result
    assert spf.ttft_s.mean < fcfs.ttft_s.mean
    assert spf.requests == fcfs.requests


def test_prefill_first_trades_tpot_for_ttft() -> None:
    load = {"rate": 12.0, "requests": 400, "prompt": 2048, "output": 128}
    dec = run(**load).result
    pre = run(**load, step_order="prefill_first").result
    assert pre.tpot_s.mean > dec.tpot_s.mean
    assert pre.ttft_s.p50 <= dec.ttft_s.p50


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("scheduler", ["fcfs", "priority", "shortest_prompt_first"])
def test_every_engine_and_policy_finishes_without_leaks(engine: str, scheduler: str) -> None:
    spec = ServingSpec.model_validate(
        {
            **SATURATED,
            "requests": 150,
            "engine": engine,
            "scheduler": scheduler,
            "priority_mix": [1, 1, 1],
            "memory_utilization": 0.15,
        }
    )
    r = simulate(scen(), spec)
    assert r.kv_blocks_leaked == 0 and np.all(r.log.finish >= r.log.first_token)
    assert r.result.settings["scheduler"] == scheduler


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"engine": "tgi"}, "engine"),
        ({"scheduler": "lifo"}, "scheduler"),
        ({"priority_mix": [-1, 2]}, "priority_mix"),
        ({"cuda_graph_sizes": [0]}, "cuda_graph_sizes"),
    ],
)
def test_bad_policy_fields(bad: dict[str, Any], needle: str) -> None:
    with pytest.raises(Exception, match=needle):
        ServingSpec.model_validate({"rate": 1.0, **bad})
