"""Precision recipes (simcore.workload.precision): hand-computed quantize traffic and weight copies, the
device checks (one line naming training.precision), and the laws of a step under each recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simcore.errors import SpecError
from simcore.memory import state_bytes
from simcore.prediction import predict
from simcore.specs.registry import default_registry
from simcore.specs.resolve import scenario_from_dict
from simcore.workload.precision import RECIPES, recipe

REG = default_registry()
H100, B200 = REG.device("h100"), REG.device("b200")


def _sc(system: str, precision: str, stack: str = "pytorch", **training: Any) -> Any:
    return scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": system, "gpus": 8},
            "model": {
                "layers": 8, "hidden": 4096, "heads": 32, "ffn_hidden": 14336, "vocab": 32000,
                "seq_len": 4096, "activation": "swiglu", "norm": "rmsnorm",
            },
            "training": {"micro_batch": 1, "global_batch": 64, "precision": precision, **training},
            "parallel": {"tp": 1, "pp": 1},
            "runtime": {"stack": stack},
        }
    )


def test_quantize_bytes_by_hand() -> None:
    n = 1000.0
    # per-tensor on Hopper: read bf16 (2), write the fp8 copy and its transpose (2 x 1)
    assert recipe("fp8").quantize_bytes(H100, n) == pytest.approx(4 * n)
    # current scaling reads the input once more for its amax
    assert recipe("fp8_current").quantize_bytes(H100, n) == pytest.approx(6 * n)
    # per-tensor on Blackwell: one copy serves both orientations
    assert recipe("fp8").quantize_bytes(B200, n) == pytest.approx(3 * n)
    # MXFP8: row- and column-wise copies, one E8M0 byte per 32 values each
    assert recipe("mxfp8").quantize_bytes(B200, n) == pytest.approx(n * (2 + 2 * (1 + 1 / 32)))
    # NVFP4: half a byte a value plus an E4M3 scale per 16; weights one scale per 16x16 block
    assert recipe("nvfp4").quantize_bytes(B200, n) == pytest.approx(n * (2 + 2 * (0.5 + 1 / 16)))
    assert recipe("nvfp4").quantize_bytes(B200, n, weight=True) == pytest.approx(n * (2 + 2 * (0.5 + 1 / 256)))
    # blockwise FP8: an fp32 scale per 1x128 (activations) or 128x128 (weights) block
    assert recipe("fp8_blockwise").quantize_bytes(H100, n) == pytest.approx(n * (2 + 2 * (1 + 4 / 128)))
    assert recipe("bf16").quantize_bytes(H100, n) == pytest.approx(2 * n)


def test_weight_copies_in_memory() -> None:
    assert state_bytes("bf16", "adamw", True).weights == 2.0
    assert state_bytes("fp8", "adamw", True, "bf16", H100).weights == pytest.approx(4.0)
    assert state_bytes("fp8", "adamw", True, "bf16", B200).weights == pytest.approx(3.0)
    assert state_bytes("nvfp4", "adamw", True, "bf16", B200).weights == pytest.approx(2.0 + 2 * (0.5 + 1 / 256))


@pytest.mark.parametrize(
    ("system", "precision", "missing"),
    [("hgx-h100", "nvfp4", "fp4 tensor-core rate"), ("hgx-h100", "mxfp8", "mxfp8 block-scaled")],
)
def test_a_format_the_device_lacks_is_one_error(system: str, precision: str, missing: str) -> None:
    with pytest.raises(SpecError) as e:
        predict(_sc(system, precision))
    assert e.value.field == "training.precision"
    assert missing in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("system", ["hgx-b200", "hgx-b300", "gb200-nvl72", "gb300-nvl72"])
def test_nvfp4_runs_on_every_blackwell_system(system: str) -> None:
    bf16 = predict(_sc(system, "bf16")).step_time_s
    mx = predict(_sc(system, "mxfp8")).step_time_s
    fp4 = predict(_sc(system, "nvfp4")).step_time_s
    assert fp4 < mx < bf16


def test_quantize_kernels_cost_time() -> None:
    delayed = predict(_sc("hgx-h100", "fp8"))
    current = predict(_sc("hgx-h100", "fp8_current"))
    assert current.step_time_s > delayed.step_time_s
    assert delayed.breakdown["quantize"] > 0
    assert "quantize" not in predict(_sc("hgx-h100", "bf16")).breakdown


def test_bf16_layers_slow_the_step_monotonically() -> None:
    times = [predict(_sc("hgx-b200", "nvfp4", bf16_layers_end=k)).step_time_s for k in (0, 2, 4, 8)]
    assert times == sorted(times) and times[0] < times[-1]
    # all layers in bf16 under nvfp4 prices like bf16 GEMMs (quantize kernels aside)
    assert times[-1] == pytest.approx(predict(_sc("hgx-b200", "bf16")).step_time_s, rel=0.05)


def test_every_recipe_has_a_gemm_dtype_of_the_spec() -> None:
    for r in RECIPES.values():
        assert r.gemm_dtype in ("fp32", "fp16", "bf16", "fp8", "fp4")


def test_fp8_param_gather_keeps_no_bf16_weights() -> None:
    # Megatron's fp8_param_gather: FP8 parameters only (Blackwell one copy, Hopper data + transpose), the
    # optimizer's fp32 master copy and moments unchanged, the all-gather moves 1-byte values
    b = state_bytes("fp8_current", "adamw", True, "bf16", B200, fp8_param_gather=True)
    assert (b.weights, b.optimizer, b.gathered) == pytest.approx((1.0, 12.0, 1.0))
    assert state_bytes("fp8_current", "adamw", True, "bf16", H100, fp8_param_gather=True).weights == pytest.approx(2.0)
    # no effect on an unquantized recipe
    assert state_bytes("bf16", "adamw", True, fp8_param_gather=True) == state_bytes("bf16", "adamw", True)


def test_megatron_stack_keeps_fp8_parameters_under_fp8_current() -> None:
    def weights(precision: str, **training: Any) -> float:
        return float(predict(_sc("dgx-b200", precision, stack="megatron", **training)).memory_breakdown["weights"])

    # the stack's default (Megatron-Bridge's fp8_current preset) drops the bf16 copy: 3 -> 1 byte a parameter
    assert weights("fp8_current") == pytest.approx(weights("fp8_current", fp8_param_gather=False) / 3.0)
    assert weights("bf16") == pytest.approx(weights("bf16", fp8_param_gather=True))


def test_mxfp8_gemms_run_at_the_devices_block_scaled_rate() -> None:
    """A block-scaled GEMM's main loop runs at ``block_gemm_rate`` of the per-tensor kernel's: its
    tensor-core time is exactly 1 / rate longer; formats or devices without a rate are unchanged."""
    from simcore.compute import ops as C
    from simcore.specs.profile import load_profile

    rate = B200.block_gemm_rate["mxfp8"]
    assert 0.0 < rate < 1.0
    prof = load_profile(B200)
    plain = C.gemm(B200, prof, 16384, 14336, 4096, "fp8")
    mx = C.gemm(B200, prof, 16384, 14336, 4096, "fp8", block_format="mxfp8")
    assert float(mx.compute_time_s) == pytest.approx(float(plain.compute_time_s) / rate)
    assert float(plain.time_s) < float(mx.time_s) <= float(plain.time_s) / rate * (1 + 1e-12)
    assert mx.memory_time_s == plain.memory_time_s and mx.flops == plain.flops
    nv = C.gemm(B200, prof, 16384, 14336, 4096, "fp4", block_format="nvfp4")  # no rate listed: 1
    assert float(nv.time_s) == float(C.gemm(B200, prof, 16384, 14336, 4096, "fp4").time_s)
    h = load_profile(H100)
    assert H100.block_gemm_rate == {}
    assert C.gemm(H100, h, 4096, 4096, 4096, "fp8", block_format="mxfp8") == C.gemm(H100, h, 4096, 4096, 4096, "fp8")


@pytest.mark.parametrize("system", ["hgx-b200", "gb300-nvl72"])
def test_mxfp8_step_pays_its_gemm_rate(system: str) -> None:
    """The MXFP8 step's GEMM seconds exceed FP8 current scaling's (same FP8 peak, slower block-scaled
    kernels) while its quantize kernels cost less (no amax pass; two 1-byte copies + E8M0 scales)."""
    mx = predict(_sc(system, "mxfp8")).breakdown
    cs = predict(_sc(system, "fp8_current")).breakdown
    assert mx["gemm"] > cs["gemm"]
    assert mx["quantize"] < cs["quantize"]


def test_block_gemm_rate_out_of_range_is_one_error() -> None:
    from pydantic import ValidationError

    data = B200.model_dump()
    data["block_gemm_rate"] = {"mxfp8": 1.2}
    with pytest.raises(ValidationError) as e:
        type(B200).model_validate(data)
    assert "block_gemm_rate" in str(e.value)


def test_which_recipes_run_the_per_tensor_gemm_family() -> None:
    """Per-tensor scaling (TE delayed / current) runs cuBLASLt's per-tensor FP8 GEMMs; Blackwell's MXFP8 and NVFP4
    apply their block scales inside the MMA (the per-tensor family at ``block_gemm_rate``); FP8 blockwise keeps
    the row-wise family (docs/compute.md, "FP8 GEMMs by scaling")."""
    on = {name for name, r in RECIPES.items() if r.per_tensor_kernels(B200)}
    assert on == {"fp8", "fp8_delayed", "fp8_current", "mxfp8", "nvfp4"}
    assert {name for name, r in RECIPES.items() if r.per_tensor_kernels(H100)} == {"fp8", "fp8_delayed", "fp8_current"}


def test_fp8_current_step_prices_its_gemms_per_tensor(tmp_path: Path) -> None:
    """An H100 step under FP8 current scaling prices its GEMMs with the profile's ``fp8_tensor`` family: with that
    family's efficiency halved, its GEMM seconds grow; FP8 blockwise (row-wise family) does not move."""
    from simcore.specs.profile import FP8_TENSOR, load_profile, save_profile

    prof = load_profile(H100)
    slow = prof.gemm[FP8_TENSOR].model_copy(update={"eff_peak": prof.gemm[FP8_TENSOR].eff_peak / 2})
    path = str(tmp_path / "slow.yaml")

    save_profile(prof.model_copy(update={"gemm": {**prof.gemm, FP8_TENSOR: slow}}), path)
    for precision, moves in (("fp8_current", True), ("fp8_blockwise", False)):
        base = predict(_sc("hgx-h100", precision)).breakdown["gemm"]
        sc = _sc("hgx-h100", precision).model_copy(update={"calibration": path})
        assert (predict(sc).breakdown["gemm"] > 1.2 * base) is moves


def test_the_prediction_says_which_fp8_kernels_it_assumed() -> None:
    def note(system: str, precision: str) -> str:
        return next(n for n in predict(_sc(system, precision)).notes if n.startswith(f"precision {precision}"))

    assert "per-tensor (cuBLASLt)" in note("hgx-h100", "fp8_current")
    assert "row-wise" in note("hgx-h100", "fp8_blockwise")
    assert "per-tensor (cuBLASLt)" in note("hgx-b200", "nvfp4")
