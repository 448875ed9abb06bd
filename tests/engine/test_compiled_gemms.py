"""``framework: compiled`` prices its GEMMs at the kernels' own in-step rate (``ComputeProfile.gemm_kernel``)."""

from __future__ import annotations

import pytest

import simcore
from simcore.compute import ops as C
from simcore.engine.pricing import Pricer
from simcore.specs.profile import ComputeProfile, load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario, resolve_cluster
from simcore.workload import lowering as L

SC = "tests/data/trace_scenarios/h200_train_llama1b_compiled.yaml"


def _gemm_s(over: list[str]) -> float:
    return float(simcore.predict(load_scenario(SC, over)).breakdown["gemm"])


def test_kernel_rate_params_and_fallback() -> None:
    dev = default_registry().device("h200")
    prof = load_profile(dev)
    assert prof.gemm_kernel, "the shipped H200 profile carries the kernel-duration GEMM fit"
    assert prof.gemm_params("bf16", kernel_rate=True) == prof.gemm_kernel["bf16"]
    assert prof.gemm_params("bf16") == prof.gemm["bf16"]
    # a dtype the kernel fit lacks falls back within it (fp4 -> fp8), a profile without it to ``gemm``
    assert prof.gemm_params("fp4", kernel_rate=True) == prof.gemm_kernel["fp8"]
    bare = prof.model_copy(update={"gemm_kernel": {}})
    assert bare.gemm_params("bf16", kernel_rate=True) == prof.gemm["bf16"]
    # the Llama-1B gate/up GEMM: 718 us per kernel, 838 us per call back to back (docs/compute.md)
    t_k = float(C.gemm(dev, prof, 8192, 16384, 2048, kernel_rate=True).time_s)
    t_c = float(C.gemm(dev, prof, 8192, 16384, 2048).time_s)
    assert 0.80 < t_k / t_c < 0.92
    assert t_k == pytest.approx(718e-6, rel=0.08)


def test_compiled_steps_use_the_kernel_rate_eager_ones_do_not() -> None:
    reg = default_registry()
    prof = load_profile(reg.device("h200"))
    bare = prof.model_copy(update={"gemm_kernel": {}})
    # eager keeps the call-timed rate (whose excess stands in for the memory-bound kernels its lowering
    # leaves out); compiled code's GEMMs are the same cuBLAS kernels at their in-step rate
    assert _gemm_s(["runtime.framework=compiled"]) < 0.92 * _gemm_s(["runtime.framework=eager"])
    cl = resolve_cluster(load_scenario(SC, []).cluster, reg)
    op = [L._gemm("mlp_in", 8192.0, 16384.0, 2048.0, "bf16")]

    def t(framework: str, p: ComputeProfile) -> float:
        return float(Pricer(cl, framework, profile=p, per_op_host=False).times(op)[0][0])

    assert t("compiled", prof) < 0.92 * t("compiled", bare)
    # without a kernel-duration fit compiled code's GEMMs are the call-timed ones (as eager's, but for
    # inductor's 16-byte padding, which this shape does not need, and eager's launch gap)
    assert t("compiled", bare) == pytest.approx(t("eager", prof), rel=0.01)


def test_the_prediction_says_which_gemm_rate_it_assumed() -> None:
    def notes(over: list[str]) -> list[str]:
        return [n for n in simcore.predict(load_scenario(SC, over)).notes if n.startswith("torch.compile")]

    assert notes([]) == ["torch.compile: inductor's fused memory-bound kernels; GEMMs (cuBLAS) at their kernels' in-step rate"]
    # the H100's profile has its own kernel-duration GEMM fit (traces/h100/kernel_rates)
    assert "in-step rate" in notes(["cluster.system=hgx-h100"])[0]
    # a profile without one (h200-kernels: every GEMM row kernel-timed, no separate block) says the GEMMs stay call-timed
    assert "call-timed" in notes(["calibration=h200-kernels"])[0]
    assert notes(["runtime.framework=eager"]) == []


def test_serving_engines_decode_gemms_at_the_kernel_rate_prefills_call_timed() -> None:
    """``ServingSpec.decode_gemms: kernel`` (the vLLM / SGLang / TensorRT-LLM profiles): a decode step's GEMMs at
    the ``gemm_kernel`` rate, the prefill's call-timed; the engine profiles say so."""
    from simcore.engine import inference as INF
    from simcore.specs.scenario import InferenceSpec
    from simcore.specs.serving import engine_settings

    sc = load_scenario("scenarios/serve_llama3_8b_h200.yaml", [])
    cl = resolve_cluster(sc.cluster, default_registry())
    spec = InferenceSpec.model_construct(
        batch=256, prompt_len=1024, context_len=1024, output_len=1, precision="fp8", kv_cache_dtype="fp8"
    )

    def ev(kernel: bool) -> INF.InferenceEval:
        return INF.evaluate(sc.model, spec, cl, 1, 1, "cuda_graphs", paged_kv=True, decode_kernel_gemms=kernel)

    call, kern = ev(False), ev(True)
    assert float(kern.decode.time["gemm"]) < 0.95 * float(call.decode.time["gemm"])
    assert float(kern.prefill.time["gemm"]) == pytest.approx(float(call.prefill.time["gemm"]), rel=1e-12)
    for engine in ("vllm", "sglang", "trtllm"):
        assert engine_settings(engine, "h200", 141e9)["decode_gemms"] == "kernel"
