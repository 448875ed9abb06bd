"""transformers' mixture-of-experts layers: their own host entries, and the host waiting on fp32 experts."""

from __future__ import annotations

from pathlib import Path

from simcore.prediction import predict
from simcore.specs.resolve import load_scenario

SC = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "trace_scenarios"
    / "h200_r50_train_mixtral_l4_h1024_e8_b4.yaml"
)


def test_fp32_experts_make_the_host_wait() -> None:
    """Under AMP (fp32 weights) transformers' experts run the fp32 grouped GEMM, a loop of per-expert
    GEMMs that reads each expert's size on the host: the host waits for every expert GEMM, so a
    host-bound step grows by their GPU time; bf16 weights run the native grouped GEMM, no wait."""
    over = ["runtime.implementation=huggingface", "runtime.profiler=true", "runtime.step_sync=true"]
    amp = predict(load_scenario(str(SC), [*over, "training.param_dtype=fp32"]))
    bf16 = predict(load_scenario(str(SC), [*over, "training.param_dtype=bf16"]))
    ref = predict(load_scenario(str(SC), ["runtime.profiler=true", "training.param_dtype=fp32"]))
    # the experts' fp32 GEMMs cost GPU time, and waited on by the host they are not hidden under its
    # (host-bound) time: the step grows by at least their extra GPU time
    extra_gemm = amp.breakdown["gemm"] - bf16.breakdown["gemm"]
    assert extra_gemm > 0 and amp.step_time_s - bf16.step_time_s > 0.9 * extra_gemm
    assert amp.step_time_s > 1.3 * bf16.step_time_s
    # simcore's own (grouped, bf16) experts: neither
    assert ref.step_time_s < amp.step_time_s


def test_moe_host_waits_leave_the_parameter_counts_alone() -> None:
    """The host-wait term prices per-stage expert GEMMs; the stage's parameters and memory must not
    depend on whose modelling code issues the ops (review: a shadowed layer count halved them at pp 2)."""
    base = ["training.param_dtype=fp32", "runtime.profiler=true", "parallel.pp=2", "cluster.gpus=2"]
    hf = predict(load_scenario(str(SC), [*base, "runtime.implementation=huggingface"]))
    ref = predict(load_scenario(str(SC), [*base, "runtime.implementation=reference"]))
    assert hf.memory_per_gpu_bytes == ref.memory_per_gpu_bytes
