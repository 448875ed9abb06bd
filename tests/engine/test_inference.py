"""Inference engine against rooflines and hand-computed bounds, and its input checks."""

import pytest

import simcore
from simcore.errors import SpecError
from simcore.specs import default_registry, scenario_from_dict
from simcore.workload.model import param_counts


def _sc(**inf: object) -> object:
    return scenario_from_dict(
        {
            "kind": "inference",
            "cluster": {"system": "hgx-h200", "gpus": 1},
            "model": {"preset": "llama3-8b"},
            "inference": {"batch": 1, "prompt_len": 2048, "output_len": 64, **inf},
            "runtime": {"framework": "cuda_graphs"},
        },
        default_registry(),
    )


def test_decode_is_bounded_by_streaming_the_weights() -> None:
    sc = _sc()
    r = simcore.predict(sc)
    dev = default_registry().device("h200")
    weights = param_counts(sc.model).total * 2.0  # bf16
    floor = weights / dev.memory.bandwidth  # every weight read once per step at peak bandwidth
    assert floor < r.decode_step_time_s < 2.0 * floor


def test_prefill_is_bounded_by_its_flops() -> None:
    sc = _sc(batch=8, prompt_len=4096)
    r = simcore.predict(sc)
    dev = default_registry().device("h200")
    tokens = 8 * 4096
    flops = 2.0 * param_counts(sc.model).active_non_embedding * tokens
    floor = flops / dev.peak_flops("bf16")
    assert floor < r.prefill_time_s < 3.0 * floor


def test_longer_context_and_bigger_batch_are_never_faster() -> None:
    a = simcore.predict(_sc(context_len=1024)).decode_step_time_s
    b = simcore.predict(_sc(context_len=8192)).decode_step_time_s
    c = simcore.predict(_sc(context_len=8192, batch=16)).decode_step_time_s
    assert a <= b <= c


def test_kv_cache_memory_hand_computed() -> None:
    r = simcore.predict(_sc(batch=4, prompt_len=1000, output_len=24))
    # llama3-8b: 32 layers, 8 KV heads of 128, bf16, K and V, 1024 tokens per sequence
    assert r.memory_breakdown["kv_cache"] == pytest.approx(4 * 1024 * 2 * 8 * 128 * 32 * 2)


def test_prefill_logits_of_every_prompt_token() -> None:
    """A plain transformers forward computes the LM head over every prompt position: the prefill grows by
    that GEMM's extra rows (at least their FLOPs at peak) and holds their bf16 logits; decode is unchanged."""
    last = simcore.predict(_sc(batch=4, prompt_len=1024))
    every = simcore.predict(_sc(batch=4, prompt_len=1024, prefill_logits="all"))
    dev = default_registry().device("h200")
    extra_flops = 2.0 * 4 * 1023 * 4096 * 128256  # llama3-8b's LM head over the other 1,023 positions
    assert every.prefill_time_s - last.prefill_time_s >= extra_flops / dev.peak_flops("bf16")
    assert every.decode_step_time_s == pytest.approx(last.decode_step_time_s)
    grown = every.memory_breakdown["prefill_peak"] - last.memory_breakdown["prefill_peak"]
    assert grown == pytest.approx(4 * 1024 * 128256 * 2.0 - 4 * 128256 * 4.0)


def test_e2e_latency_covers_every_generated_token() -> None:
    r = simcore.predict(_sc())
    assert r.e2e_latency_s >= r.prefill_time_s + 63 * r.decode_step_time_s


def test_tp_must_divide_heads_and_des_is_for_training() -> None:
    sc = scenario_from_dict(
        {
            "kind": "inference",
            "cluster": {"system": "hgx-h200", "gpus": 3},
            "model": {"preset": "llama3-8b"},
            "parallel": {"tp": 3},
        },
        default_registry(),
    )
    with pytest.raises(SpecError, match="heads"):
        simcore.predict(sc)
    with pytest.raises(SpecError, match="engine"):
        simcore.predict(_sc(), engine="des")
    with pytest.raises(SpecError, match="engine"):
        simcore.predict(_sc(), engine="fast")


def test_layer_ops_scale_the_eager_decode_host_of_the_reference_code() -> None:
    """``runtime.layer_ops.fwd`` over the calibrated decode layer's ops (27 a Llama block) scales the
    eager host per layer; the calibrated count changes nothing."""
    def host(ops: float | None) -> float:
        sc = scenario_from_dict(
            {
                "kind": "inference",
                "cluster": {"system": "hgx-h200", "gpus": 1},
                "model": {"preset": "llama3-8b"},
                "inference": {"batch": 1, "prompt_len": 256, "output_len": 8},
                "runtime": {"framework": "eager", "layer_ops": None if ops is None else {"fwd": ops}},
            },
            default_registry(),
        )
        return float(simcore.predict(sc).model_dump()["decode_host_s"])

    base = host(None)
    assert host(27.0) == pytest.approx(base)
    assert host(54.0) > 1.8 * base  # the layers' host doubles (32 layers against a fixed part)


def _prec(system: str, precision: str, preset: str = "llama3.1-8b", **inf: object) -> object:
    return scenario_from_dict(
        {
            "kind": "inference",
            "cluster": {"system": system, "gpus": 1},
            "model": {"preset": preset},
            "inference": {"batch": 64, "prompt_len": 1024, "output_len": 64, "precision": precision, **inf},
            "runtime": {"framework": "cuda_graphs"},
        },
        default_registry(),
    )


def test_fp4_weights_on_blackwell_bytes_and_speed() -> None:
    """NVFP4 weights: 4-bit values plus an E4M3 scale per 16 (0.5625 bytes a parameter) in the transformer
    blocks, the embedding and LM head in bf16 (the checkpoints quantize only the blocks' linear layers), an
    FP8 KV cache by default; NVFP4's steps are never slower than FP8's or bf16's. FP8 against bf16 depends on the
    FP8 linear's fixed cost at small shapes (B200's engine table: TensorRT-LLM's FP8 linear takes 14 us at
    512 x 512 where bf16 takes 3 us, docs/compute.md "Blackwell's GEMMs from engine tables"), so that pair is
    compared on the 70B, whose decode streams 70 GB of weights."""
    pc = param_counts(_prec("dgx-b200", "bf16").model)
    edge = pc.embedding + pc.lm_head
    r4 = simcore.predict(_prec("dgx-b200", "fp4"))
    r8 = simcore.predict(_prec("dgx-b200", "fp8"))
    r16 = simcore.predict(_prec("dgx-b200", "bf16"))
    assert r4.memory_breakdown["weights"] == pytest.approx((pc.total - edge) * (0.5 + 1 / 16) + edge * 2.0)
    assert r8.memory_breakdown["weights"] == pytest.approx((pc.total - edge) * 1.0 + edge * 2.0)
    assert r16.memory_breakdown["weights"] == pytest.approx(pc.total * 2.0)
    assert r4.memory_breakdown["kv_cache"] == pytest.approx(r8.memory_breakdown["kv_cache"])
    assert r4.memory_breakdown["kv_cache"] == pytest.approx(r16.memory_breakdown["kv_cache"] / 2)
    assert r4.prefill_time_s <= r8.prefill_time_s <= r16.prefill_time_s
    assert r4.decode_step_time_s <= min(r8.decode_step_time_s, r16.decode_step_time_s)
    big = {p: simcore.predict(_prec("dgx-b200", p, preset="llama3.3-70b")) for p in ("fp4", "fp8", "bf16")}
    assert big["fp4"].decode_step_time_s < big["fp8"].decode_step_time_s < big["bf16"].decode_step_time_s


@pytest.mark.parametrize("system", ["hgx-h100", "hgx-h200"])
def test_fp4_without_fp4_tensor_cores_is_an_error(system: str) -> None:
    with pytest.raises(SpecError, match="needs FP4 tensor cores") as e:
        simcore.predict(_prec(system, "fp4"))
    assert e.value.field == "inference.precision"


def test_fp8_kv_cache_halves_kv_memory_and_decode_attention() -> None:
    """kv_cache_dtype reaches both the KV memory and the decode attention's bytes (memory-bound reads)."""
    bf = simcore.predict(_prec("hgx-h200", "bf16", prompt_len=8192, kv_cache_dtype="bf16"))
    f8 = simcore.predict(_prec("hgx-h200", "bf16", prompt_len=8192, kv_cache_dtype="fp8"))
    assert f8.memory_breakdown["kv_cache"] == pytest.approx(bf.memory_breakdown["kv_cache"] / 2)
    a_bf, a_f8 = bf.breakdown_decode["attention"], f8.breakdown_decode["attention"]
    assert 0.4 * a_bf < a_f8 < 0.75 * a_bf
