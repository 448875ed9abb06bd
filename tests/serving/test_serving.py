"""Serving simulation: hand-computed single-request timings, queueing laws, monotonicity, policies."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.errors import SpecError
from simcore.serving import ServingSpec, load_serving, simulate
from simcore.serving.sim import ServingRun
from simcore.specs.resolve import scenario_from_dict
from simcore.specs.scenario import Scenario

BASE: dict[str, Any] = {
    "name": "t",
    "kind": "inference",
    "cluster": {"system": "hgx-h200", "gpus": 1},
    "model": {"preset": "llama3-8b"},
    "inference": {"precision": "bf16"},
    "runtime": {"framework": "cuda_graphs"},
}
_SC: dict[str, Scenario] = {}


def scen(**cluster: Any) -> Scenario:
    key = repr(sorted(cluster.items()))
    if key not in _SC:
        d = copy.deepcopy(BASE)
        d["cluster"].update(cluster)
        _SC[key] = scenario_from_dict(d)
    return _SC[key]


def run(sc: Scenario | None = None, **serving: Any) -> ServingRun:
    spec = ServingSpec.model_validate({"rate": 5.0, "requests": 400, "prompt": 512, "output": 64, **serving})
    return simulate(sc or scen(), spec)


# ---------------------------------------------------------------- hand-computed single requests


def test_single_request_timing_follows_the_step_table() -> None:
    r = run(requests=1, prompt=512, output=10)
    sm = r.step_models["tp1"]
    log = r.log
    ttft = sm.rest_gpu(512) + sm.attention(512)  # one step: non-attention + attention
    decode = sum(sm.decode(1, 512 + 1 + j) for j in range(9))  # tokens 2..10, context grows by one
    assert log.ttft[0] == pytest.approx(ttft, rel=1e-12)
    assert log.e2e[0] == pytest.approx(ttft + decode, rel=1e-12)
    assert r.result.tpot_s.mean == pytest.approx(decode / 9, rel=1e-12)
    assert r.result.steps == 10


def test_chunked_prefill_is_the_sum_of_its_steps() -> None:
    r = run(requests=1, prompt=4096, output=2, max_batch_tokens=1024)
    sm = r.step_models["tp1"]
    # four steps of 1024 tokens; each adds the attention of its chunk over the prefix before it
    steps = [sm.step_time(0, 0.0, 1024, sm.chunk_attention(1024 * i, 1024)) for i in range(4)]
    assert r.log.ttft[0] == pytest.approx(sum(steps), rel=1e-12)
    whole = run(requests=1, prompt=4096, output=2, max_batch_tokens=8192)
    assert whole.log.ttft[0] == pytest.approx(sm.prefill(4096), rel=1e-12)
    assert sum(steps) > sm.prefill(4096)  # each chunk pays the weight read again


def test_step_table_is_monotone_and_mixed_steps_are_cheaper_than_separate_ones() -> None:
    sm = run(requests=1).step_models["tp1"]
    assert all(np.diff(sm.rest) >= 0) and all(np.diff(sm.attn) >= 0)
    for row in sm.dec:
        assert all(np.diff(row) >= -1e-12)
    assert sm.decode(64, 2048) > sm.decode(64, 128) > sm.decode(1, 128) > 0
    # a small chunk rides on the decodes' weight read; a mixed step never costs more than the two apart
    dec = sm.decode(64, 1024)
    for n in (16, 256, 4096):
        mixed = sm.step_time(64, 1024, n, sm.chunk_attention(0, n))
        assert dec < mixed <= dec + sm.prefill(n)
    assert sm.step_time(64, 1024, 16, sm.chunk_attention(0, 16)) < dec * 1.1


@pytest.mark.parametrize("batch,prompt,output", [(32, 1024, 256), (8, 2048, 128), (64, 512, 512)])
def test_a_simultaneous_batch_agrees_with_predict(
    tmp_path: Path, batch: int, prompt: int, output: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical requests arriving together are one batched prefill and then lock-step decodes:
    what ``simcore predict`` prices for an inference batch run with a serving engine's paged decode
    kernels (``paged_kv``, which every serving step prices and a plain PyTorch prediction does not)."""
    import functools

    from simcore.engine import inference
    from simcore.prediction import predict

    monkeypatch.setattr(inference, "evaluate", functools.partial(inference.evaluate, paged_kv=True))
    d = copy.deepcopy(BASE)
    d["inference"] = {"batch": batch, "prompt_len": prompt, "output_len": output}
    pr = predict(scenario_from_dict(d))
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_len,output_len\n" + f"0,{prompt},{output}\n" * batch, encoding="utf-8")
    r = simulate(scen(), ServingSpec(trace=str(f), max_batch_tokens=batch * prompt)).result
    assert r.ttft_s.max == pytest.approx(pr.ttft_s, rel=0.05)
    # predict prices every decode step at the middle of the output (its e2e latency)
    assert r.tpot_s.mean == pytest.approx((pr.e2e_latency_s - pr.ttft_s) / (output - 1), rel=0.03)
    assert r.e2e_s.max == pytest.approx(pr.e2e_latency_s, rel=0.03)  # predict: mean step at mid-output


# ---------------------------------------------------------------- determinism and queueing laws


def test_deterministic_with_a_seed() -> None:
    a = run(seed=3, prompt={"dist": "lognormal", "mean": 512, "sigma": 0.5, "max": 6000}).result.model_dump()
    b = run(seed=3, prompt={"dist": "lognormal", "mean": 512, "sigma": 0.5, "max": 6000}).result.model_dump()
    c = run(seed=4, prompt={"dist": "lognormal", "mean": 512, "sigma": 0.5, "max": 6000}).result.model_dump()
    assert a == b
    assert a != c


def test_littles_law() -> None:
    res = run(rate=8.0, requests=1500, output={"dist": "uniform", "low": 16, "high": 128}).result
    # time-averaged requests in the system = arrival rate x mean time in the system
    assert res.mean_in_system == pytest.approx(8.0 * res.e2e_s.mean, rel=0.08)


def test_throughput_follows_arrivals_below_saturation_and_saturates_above() -> None:
    low = run(rate=4.0, requests=1500)
    emp = (low.result.requests - 1) / float(low.log.arrival.max() - low.log.arrival.min())
    assert low.result.requests_per_s == pytest.approx(emp, rel=0.02)
    assert low.result.requests_per_s == pytest.approx(4.0, rel=0.08)
    assert low.result.output_tokens_per_s == pytest.approx(emp * 64, rel=0.03)
    hi = [run(rate=r, requests=3000, max_batch=64).result for r in (400.0, 800.0)]
    cap = hi[0].requests_per_s
    assert cap < 0.5 * 400.0
    assert hi[1].requests_per_s == pytest.approx(cap, rel=0.02)
    assert any("saturated" in n for n in hi[1].notes)
    assert not any("saturated" in n for n in low.result.notes)
    # the steady-state rate (second half of the arrivals, a few seconds here: completions come in
    # waves of a batch) sits on the same capacity
    s0, s1 = hi[0].steady_requests_per_s, hi[1].steady_requests_per_s
    assert s0 is not None and s1 is not None
    assert s0 == pytest.approx(cap, rel=0.15) and s1 == pytest.approx(cap, rel=0.15)
    assert low.result.steady_requests_per_s == pytest.approx(4.0, rel=0.1)


def test_higher_rate_never_lowers_p99_ttft() -> None:
    p99 = [run(rate=r, requests=600).result.ttft_s.p99 for r in (2.0, 8.0, 20.0, 80.0, 320.0)]
    for a, b in zip(p99, p99[1:], strict=False):
        assert b >= a * 0.98, p99
    assert p99[-1] > 5 * p99[0]


def test_prefix_cache_lowers_ttft() -> None:
    base = run(rate=20.0, prompt=2048).result
    cached = run(rate=20.0, prompt=2048, prefix_cache_hit=0.75).result
    assert cached.ttft_s.mean < 0.7 * base.ttft_s.mean
    assert cached.ttft_s.p99 < base.ttft_s.p99


def test_more_replicas_never_hurt() -> None:
    sc = scen(gpus=4)
    res = [run(sc, rate=60.0, requests=1200, replicas=k).result for k in (1, 2, 4)]
    for a, b in zip(res, res[1:], strict=False):
        assert b.e2e_s.p99 <= a.e2e_s.p99 * 1.02
        assert b.ttft_s.mean <= a.ttft_s.mean * 1.02
        assert b.requests_per_s >= a.requests_per_s * 0.98
    assert [r.gpus for r in res] == [1, 2, 4]
    # default: as many replicas as the cluster holds
    assert run(sc, requests=50).result.instances == {"mixed": 4}


def test_kv_pressure_preempts_and_still_finishes() -> None:
    # room for a few thousand tokens of KV: requests queue for blocks and running ones get preempted
    r = run(rate=50.0, requests=300, prompt=1024, output=256, memory_utilization=0.132)
    res = r.result
    assert res.kv_tokens_per_instance["mixed"] < 20000
    assert np.all(r.log.finish > r.log.first_token)
    assert res.kv_peak_utilization <= 1.0
    assert res.kv_peak_utilization > 0.9
    assert res.preemptions > 0
    roomy = run(rate=50.0, requests=300, prompt=1024, output=256).result
    assert roomy.preemptions == 0
    assert res.e2e_s.mean > roomy.e2e_s.mean


def test_slo_goodput() -> None:
    loose = run(rate=10.0, slo={"ttft_s": "10 s", "tpot_s": "1 s"}).result
    assert loose.slo_attainment == 1.0
    assert loose.goodput == pytest.approx(loose.requests_per_s)
    tight = run(rate=10.0, slo={"ttft_s": "30 ms"}).result
    assert 0.0 < tight.slo_attainment < 1.0
    assert tight.goodput < tight.requests_per_s


# ---------------------------------------------------------------- disaggregation


def test_disaggregated_mode_runs_and_pays_the_transfer() -> None:
    sc = scen(gpus=8)
    dis = run(sc, rate=10.0, disaggregated={"prefill_gpus": 2, "decode_gpus": 2}, requests=300)
    res = dis.result
    assert res.instances == {"prefill": 2, "decode": 2}
    assert res.gpus == 4
    assert np.all(dis.log.finish >= dis.log.first_token)
    sm = dis.step_models["tp1"]
    # first token after the prefill and the KV transfer
    assert dis.log.ttft.min() > sm.prefill(512)
    # decode instances never prefill: their steps are pure decodes, so TPOT sits on the decode table
    assert res.tpot_s.p50 < 2 * sm.decode(16, 560)
    slow = run(
        sc,
        rate=10.0,
        disaggregated={"prefill_gpus": 2, "decode_gpus": 2, "gpudirect": False},
        requests=300,
        prompt=8128,
    )
    fast = run(sc, rate=10.0, disaggregated={"prefill_gpus": 2, "decode_gpus": 2}, requests=300, prompt=8128)
    assert slow.result.ttft_s.mean >= fast.result.ttft_s.mean


# ---------------------------------------------------------------- workload and spec


def test_length_distributions_and_context() -> None:
    r = run(
        requests=3000,
        prompt={"dist": "lognormal", "mean": 800, "sigma": 0.7, "max": 6000},
        output={"dist": "uniform", "low": 5, "high": 9},
    )
    assert float(r.log.prompt.mean()) == pytest.approx(800, rel=0.06)
    assert r.log.output.min() >= 5 and r.log.output.max() <= 9
    # llama3-8b's context is 8192 tokens: a longer request is an error naming the field, never clipped
    with pytest.raises(SpecError, match="exceed llama3-8b's context of 8192") as e:
        run(requests=20, prompt=9000, output=100)
    assert e.value.field == "serving.prompt"
    with pytest.raises(SpecError) as e:
        run(requests=20, prompt=8000, output=193)
    assert e.value.field == "serving.output"
    ok = run(requests=4, prompt=8000, output=192)  # exactly the context: runs
    assert int((ok.log.prompt + ok.log.output).max()) == 8192


def test_trace_file(tmp_path: Path) -> None:
    csv = tmp_path / "trace.csv"
    csv.write_text("arrival_s,prompt_len,output_len\n0.5,100,5\n0.0,200,3\n0.2,300,4\n", encoding="utf-8")
    r = simulate(scen(), ServingSpec(trace=str(csv)))
    assert r.log.prompt.tolist() == [200, 300, 100]
    assert r.log.output.tolist() == [3, 4, 5]
    assert r.result.offered_rate is None
    assert np.all(r.log.finish > r.log.arrival)


@pytest.mark.parametrize(
    "bad,needle",
    [
        ({"rate": 1, "trace": "x.csv"}, "exactly one"),
        ({}, "exactly one"),
        ({"rate": 1, "max_batch": 64, "max_batch_tokens": 32}, "max_batch_tokens"),
        ({"rate": 1, "prompt": {"dist": "uniform", "low": 5}}, "high"),
        ({"rate": 1, "prefix_cache_hit": 1.0}, "less than 1"),
        ({"rate": 1, "slo": {"ttft_s": "fast"}}, "ttft_s"),
    ],
)
def test_bad_specs(bad: dict[str, Any], needle: str) -> None:
    with pytest.raises(Exception) as e:
        ServingSpec.model_validate(bad)
    assert needle in str(e.value)


def test_load_serving_resolves_trace_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,prompt_len,output_len\n0,10,2\n", encoding="utf-8")
    f = tmp_path / "s.yaml"
    f.write_text(
        "kind: serving\ncluster: {system: hgx-h200, gpus: 1}\nmodel: {preset: llama3-8b}\nserving: {trace: t.csv}\n",
        encoding="utf-8",
    )
    sc, spec = load_serving(f, ["serving.seed=7"])
    assert spec.trace == str(tmp_path / "t.csv")
    assert spec.seed == 7
    assert sc.kind == "serving" and sc.inference is not None


# ---------------------------------------------------------------- invariants under random policies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    max_batch=st.integers(1, 32),
    extra_tokens=st.integers(0, 2048),  # a budget of max_batch tokens forbids any prefill
    block=st.sampled_from([1, 8, 16, 64]),
    util=st.floats(0.1345, 0.2),
    hit=st.floats(0.0, 0.9),
    disagg=st.booleans(),
    reserve=st.booleans(),
    seed=st.integers(0, 100),
)
def test_every_request_finishes_and_no_block_leaks(
    max_batch: int,
    extra_tokens: int,
    block: int,
    util: float,
    hit: float,
    disagg: bool,
    reserve: bool,
    seed: int,
) -> None:
    sc = scen(gpus=2)
    serving: dict[str, Any] = {
        "rate": 40.0,
        "requests": 60,
        "prompt": {"dist": "lognormal", "mean": 1500, "sigma": 1.0, "max": 6000},
        "output": {"dist": "uniform", "low": 1, "high": 300},
        "max_batch": max_batch,
        "max_batch_tokens": max_batch + extra_tokens,
        "kv_block_tokens": block,
        "memory_utilization": util,
        "prefix_cache_hit": hit,
        "reserve_output_kv": reserve,
        "seed": seed,
    }
    if disagg:
        serving["disaggregated"] = {"prefill_gpus": 1, "decode_gpus": 1}
    try:
        r = run(sc, **serving)
    except SpecError as e:  # a cache too small for the longest request, or a request over the context
        assert "KV cache" in str(e) or "context of 8192" in str(e)
        return
    log = r.log
    assert r.kv_blocks_leaked == 0
    assert np.all(log.first_token >= log.arrival)
    assert np.all(log.finish >= log.first_token)
    assert np.all(np.isfinite(log.finish))
    assert 0.0 <= r.result.kv_utilization <= r.result.kv_peak_utilization <= 1.0
    assert r.result.max_queue <= 60
    if reserve:
        assert r.result.preemptions == 0


# ---------------------------------------------------------------- arrival process, routing, layouts


def test_burstier_arrivals_queue_longer() -> None:
    smooth = run(rate=15.0, requests=800, prompt=1024, output=128).result
    bursty = run(rate=15.0, requests=800, prompt=1024, output=128, arrival_cv=3.0).result
    assert bursty.ttft_s.p99 > smooth.ttft_s.p99
    assert bursty.mean_queue > smooth.mean_queue


def test_duration_bounds_the_arrivals() -> None:
    r = run(rate=10.0, requests=None, duration_s="30 s")
    assert float(r.log.arrival.max()) <= 30.0
    assert r.result.requests == pytest.approx(300, rel=0.25)


def test_round_robin_and_least_loaded_both_spread_load() -> None:
    sc = scen(gpus=4)
    ll = run(sc, rate=40.0, requests=800).result
    rr = run(sc, rate=40.0, requests=800, router="round_robin").result
    assert ll.instances == rr.instances == {"mixed": 4}
    # least-loaded routing never does worse on the tail than blind turns
    assert ll.e2e_s.p99 <= rr.e2e_s.p99 * 1.02


def test_tensor_and_pipeline_parallel_instances() -> None:
    d = copy.deepcopy(BASE)
    d["cluster"]["gpus"] = 8
    d["parallel"] = {"tp": 2, "pp": 2}
    sc = scenario_from_dict(d)
    res = run(sc, rate=20.0, requests=200).result
    assert res.instances == {"mixed": 2} and res.gpus == 8
    assert any("pipeline" in n for n in res.notes)
    # TP=2 halves the weights per GPU: more KV room per GPU than a TP=1 instance on one GPU
    one = run(rate=20.0, requests=50).result
    assert res.memory_per_gpu["weights"] < one.memory_per_gpu["weights"]
    dis = run(
        scen(gpus=8),
        rate=20.0,
        requests=200,
        disaggregated={"prefill_gpus": 4, "decode_gpus": 2, "prefill_tp": 2, "decode_tp": 1},
    ).result
    assert dis.instances == {"prefill": 2, "decode": 2}
    assert dis.layout == {"prefill_tp": 2, "decode_tp": 1, "pp": 1}
    with pytest.raises(SpecError, match="multiple of prefill_tp"):
        run(scen(gpus=8), disaggregated={"prefill_gpus": 3, "decode_gpus": 2, "prefill_tp": 2})


def test_reserving_output_kv_never_preempts() -> None:
    tight = {"rate": 50.0, "requests": 300, "prompt": 1024, "output": 256, "memory_utilization": 0.14}
    on_demand = run(**tight)
    reserved = run(**tight, reserve_output_kv=True)
    assert on_demand.result.preemptions > 0
    assert reserved.result.preemptions == 0
    assert reserved.kv_blocks_leaked == 0
    # with room to spare both policies serve the same way
    roomy = {"rate": 5.0, "requests": 200}
    assert run(**roomy).result.e2e_s == run(**roomy, reserve_output_kv=True).result.e2e_s
