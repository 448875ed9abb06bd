"""The optimizer step: implementations, their host time, loss scaling."""

from __future__ import annotations

import pytest

from simcore.prediction import predict
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import scenario_from_dict
from simcore.workload.model import weight_tensors

H200 = default_registry().device("h200")
PROF = load_profile(H200)
GPT2 = {
    "layers": 12, "hidden": 768, "heads": 12, "ffn_hidden": 3072, "vocab": 50257, "seq_len": 1024,
    "activation": "gelu", "norm": "layernorm", "tied_embeddings": True,
}  # fmt: skip


def _scenario(training: dict[str, object], runtime: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    return scenario_from_dict(
        {
            "name": "opt",
            "kind": "training",
            "cluster": {"system": "hgx-h200", "gpus": 1},
            "model": GPT2,
            "training": {"micro_batch": 8, "global_batch": 8, "param_dtype": "fp32", **training},
            "runtime": {"profiler": True, "step_sync": True, **(runtime or {})},
        }
    )


def test_hugging_face_gpt2_steps_its_biases() -> None:
    sc = _scenario({})
    # 12 layers of 12 tensors (weights and biases of 4 projections and 2 LayerNorms), wte, wpe, ln_f
    assert weight_tensors(sc.model, biased=True) == 148
    assert weight_tensors(sc.model) == 12 * 6 + 2


def test_optimizer_host_entries_and_fallbacks() -> None:
    hc = PROF.host_layer
    # measured under the profiler (round 47): foreach AdamW costs more per tensor than the fused one
    assert PROF.optimizer_host("adamw", "foreach", "per_tensor", True) > PROF.optimizer_host(
        "adamw", "fused", "per_tensor", True
    )
    assert "sgd_foreach_per_tensor" not in hc and "profiled_sgd_foreach_per_tensor" in hc
    # SGD unprofiled: its profiled entry at foreach AdamW's plain / profiled ratio
    ratio = PROF.host("adamw_foreach_per_tensor") / PROF.host("adamw_foreach_per_tensor", True)
    assert PROF.optimizer_host("sgd", "foreach", "per_tensor", False) == pytest.approx(
        PROF.host("sgd_foreach_per_tensor", True) * ratio
    )
    # an unmeasured combination falls back to fused AdamW's
    assert PROF.optimizer_host("sgd", "fused", "fixed", True) == PROF.host("adamw_fused_fixed", True)


def test_foreach_update_is_slower_and_fp16_loss_scaling_exposes_it() -> None:
    fused = predict(_scenario({"optimizer_impl": "fused"}))
    foreach = predict(_scenario({"optimizer_impl": "foreach"}))
    assert foreach.breakdown["optimizer"] > 2 * fused.breakdown["optimizer"]
    bf16 = predict(_scenario({"optimizer_impl": "foreach", "precision": "bf16"}))
    fp16 = predict(_scenario({"optimizer_impl": "foreach", "precision": "fp16"}))
    # the unscale pass and the host's wait for found_inf before the update
    assert fp16.step_time_s > bf16.step_time_s


def test_a_fused_optimizer_takes_the_inf_flag_on_the_gpu() -> None:
    """GradScaler passes found_inf to a fused optimizer's kernel (no host wait); a foreach one reads it
    on the host first (round 55's fp16 Llama with fused AdamW: no sync in its steps)."""
    fused16 = predict(_scenario({"optimizer_impl": "fused", "precision": "fp16"}, {"step_sync": False}))
    fused_bf = predict(_scenario({"optimizer_impl": "fused", "precision": "bf16"}, {"step_sync": False}))
    fe16 = predict(_scenario({"optimizer_impl": "foreach", "precision": "fp16"}, {"step_sync": False}))
    fe_bf = predict(_scenario({"optimizer_impl": "foreach", "precision": "bf16"}, {"step_sync": False}))
    # fused: only the unscale pass (GPU) is added; foreach: the wait exposes the update's host time
    assert 0 <= fused16.step_time_s - fused_bf.step_time_s < fe16.step_time_s - fe_bf.step_time_s


def test_bf16_parameters_use_their_measured_update() -> None:
    """AdamW on bf16 parameters (moments in bf16, 14 bytes a parameter) takes the profile's own entry
    (round 72: 0.63x the fp32 update's time fused, not the 0.5x half the bytes would give)."""
    from simcore.compute.ops import optimizer_step

    n = 1 << 30
    fp32 = optimizer_step(H200, PROF, n, master_weights=False, param_dtype="fp32").time_s
    bf16 = optimizer_step(H200, PROF, n, master_weights=False, param_dtype="bf16").time_s
    assert 0.55 < bf16 / fp32 < 0.75  # measured 5.60 / 8.93 ms = 0.63
    without = PROF.model_copy(update={"optimizer": {k: v for k, v in PROF.optimizer.items() if "bf16" not in k}})
    half = optimizer_step(H200, without, n, master_weights=False, param_dtype="bf16").time_s
    assert half == pytest.approx(fp32 / 2, rel=0.02)  # the fp32 entry's per-byte efficiency over 14 bytes
    # round 72's rows at 1 Gi parameters: fused 5.60 ms, foreach 14.55 ms
    foreach = optimizer_step(H200, PROF, n, fused=False, master_weights=False, param_dtype="bf16").time_s
    assert bf16 == pytest.approx(5.60e-3, rel=0.1) and foreach == pytest.approx(14.55e-3, rel=0.1)


def test_layer_ops_scale_the_eager_host_over_the_calibrated_code() -> None:
    """``runtime.layer_ops``: a layer issuing twice the calibrated code's ops takes twice its host per
    layer (a profiled, unsynchronized GPT-2-small step here is host-bound, so the step grows); the
    calibrated counts change nothing; transformers' layers scale over its fit code's host weight (stop 32:
    ``HostOps.hf_layer_weights``, GPT-2's 226.6 and 520.5)."""
    base = {"profiler": True, "step_sync": False}
    plain = predict(_scenario({}, base)).step_time_s
    same = predict(_scenario({}, {**base, "layer_ops": {"fwd": 19, "bwd": 43}})).step_time_s
    double = predict(_scenario({}, {**base, "layer_ops": {"fwd": 38, "bwd": 86}})).step_time_s
    assert same == pytest.approx(plain)
    assert double > 1.3 * plain
    hf = {**base, "implementation": "huggingface"}
    hf_plain = predict(_scenario({}, hf)).step_time_s
    assert predict(_scenario({}, {**hf, "layer_ops": {"fwd": 226.6, "bwd": 520.5}})).step_time_s == pytest.approx(
        hf_plain
    )
    assert predict(_scenario({}, {**hf, "layer_ops": {"fwd": 453.2, "bwd": 1041.0}})).step_time_s > 1.3 * hf_plain
