"""Training precision recipes: which dtype a recipe's GEMMs run in, which layers it keeps in bf16,
and the memory-bound work it adds (quantize/cast kernels, scaling factors, quantized weight copies).

A recipe is what Transformer Engine and Megatron-Core run for ``training.precision`` (see
docs/parallelism.md, "Precision recipes", for the sources):

* ``bf16`` / ``fp16`` / ``fp32``: GEMMs in that dtype, nothing quantized.
* ``fp8`` (= ``fp8_delayed``): per-tensor FP8 (E4M3 forward, E5M2 gradients), the scale taken from an
  amax history (TE ``DelayedScaling``); the amax is reduced inside the cast kernel.
* ``fp8_current``: per-tensor FP8 whose scale comes from the tensor itself (TE
  ``Float8CurrentScaling``): one more read of the input for its amax before the cast.
* ``fp8_blockwise``: DeepSeek-V3's FP8 (TE ``Float8BlockScaling``): 1x128 blocks for activations and
  gradients, 128x128 for weights, one fp32 scale per block.
* ``mxfp8``: OCP MX FP8 (TE ``MXFP8BlockScaling``): 1x32 blocks with an E8M0 (1-byte) scale; Blackwell
  tensor cores only.
* ``nvfp4``: NVFP4 (TE ``NVFP4BlockScaling``): E2M1 values in 1x16 blocks with an E4M3 scale plus a
  per-tensor fp32 scale, a 16x16 random Hadamard transform on the weight-gradient GEMM's inputs (fused in
  its quantize kernel); Blackwell only.

Every low-precision recipe keeps in bf16 what Megatron-Core does not route through Transformer Engine's
quantized linears: the embedding, the output layer (LM head), the MoE router, the attention's
score/value products (the fused attention kernel), norms and activations; ``training.bf16_layers_start``
/ ``bf16_layers_end`` (Megatron's ``num_layers_at_start_in_bf16`` / ``_end_`` with
``first_last_layers_bf16``) keep whole leading/trailing layers in bf16 too.

Quantize traffic per quantized tensor of ``N`` bf16 elements: read ``2 N`` (plus ``2 N`` for a current
scaling's amax pass), write ``copies x N x (value bytes + scale bytes / block)``. ``copies`` is 2 where
the tensor feeds two GEMMs in different orientations that need their own quantized copy: Hopper's FP8
tensor cores take only the TN layout (TE writes a transposed copy, ``cast_transpose``), block scales
run along one axis (row-wise and column-wise copies); per-tensor FP8 on Blackwell reads either
orientation from one copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import SpecError
from simcore.specs.hardware import Device
from simcore.specs.profile import gemm_family


@dataclass(frozen=True)
class Recipe:
    """One training precision recipe (see the module docstring)."""

    name: str
    gemm_dtype: str
    """Dtype the quantized layers' GEMMs run in (a key of ``Device.peak``)."""
    value_bytes: float = 0.0
    """Bytes per quantized element (0: nothing is quantized)."""
    block: int = 0
    """Elements per scaling factor along a row (0: one scale per tensor)."""
    weight_block: int = 0
    """Elements per weight scaling factor (128 x 128 blockwise: 16,384; 0: as ``block``)."""
    scale_bytes: float = 0.0
    amax_pass: bool = False
    """Current scaling: the input is read once more for its amax before the cast."""
    block_format: str | None = None
    """The hardware block-scaled format the tensor cores must support (``Device.block_scaling``)."""
    description: str = ""

    @property
    def quantized(self) -> bool:
        return self.value_bytes > 0

    def per_tensor_kernels(self, dev: Device) -> bool:
        """Whether the recipe's GEMMs are priced with the per-tensor kernel family (the profile's ``fp8_tensor``):
        one scale per tensor (Transformer Engine's delayed and current scaling: cuBLASLt's per-tensor FP8 GEMMs),
        or a block-scaled format whose scales ``dev``'s tensor cores apply inside the MMA (Blackwell's MXFP8 and
        NVFP4: cuBLASLt's block-scaled kernels, whose ``block_gemm_rate`` is measured against the per-tensor
        ones). FP8 blockwise (DeepSeek's 1x128 / 128x128, scales applied by the kernel's main loop, not the MMA)
        keeps the row-wise ``fp8`` family. docs/compute.md, "FP8 GEMMs by scaling"."""
        if not self.quantized:
            return False
        return self.block == 0 or (self.block_format is not None and self.block_format in dev.block_scaling)

    def gemm_family(self, dev: Device) -> str:
        """The GEMM family the recipe's GEMMs are priced with on ``dev`` (:meth:`per_tensor_kernels`): ``fp8_tensor``
        for per-tensor FP8, else the GEMM dtype (the row-wise ``fp8`` one under FP8 blockwise)."""
        return gemm_family(self.gemm_dtype, self.per_tensor_kernels(dev))

    def copies(self, dev: Device) -> float:
        """Quantized copies of a tensor used in two GEMM orientations: 2 with block scales (row- and
        column-wise) or on FP8 tensor cores that take only TN GEMMs (before Blackwell), else 1."""
        if not self.quantized:
            return 0.0
        return 2.0 if self.block or not dev.block_scaling else 1.0

    def stored_bytes(self, block: int) -> float:
        """Bytes per element of one quantized copy, its share of the scales included."""
        return self.value_bytes + (self.scale_bytes / block if block else 0.0)

    def quantize_bytes(self, dev: Device, numel: float, weight: bool = False) -> float:
        """HBM bytes of quantizing ``numel`` bf16 elements (reads, amax pass, every copy written)."""
        block = (self.weight_block or self.block) if weight else self.block
        read = 2.0 * (2.0 if self.amax_pass else 1.0)
        return numel * (read + self.copies(dev) * self.stored_bytes(block))

    def weight_copy_bytes(self, dev: Device | None = None) -> float:
        """Bytes per parameter of the quantized weight copies kept beside the bf16 weights (TE caches
        them across a step's micro-batches). ``dev=None``: the two copies of a pre-Blackwell GPU."""
        if not self.quantized:
            return 0.0
        copies = 2.0 if dev is None else self.copies(dev)
        return copies * self.stored_bytes(self.weight_block or self.block)


RECIPES: dict[str, Recipe] = {
    "fp32": Recipe("fp32", "fp32", description="fp32 GEMMs (PyTorch's default precision)"),
    "fp16": Recipe("fp16", "fp16", description="fp16 GEMMs with loss scaling"),
    "bf16": Recipe("bf16", "bf16", description="bf16 GEMMs"),
    "fp8": Recipe(
        "fp8", "fp8", 1.0, 0, 0, 4.0, description="FP8 per-tensor delayed scaling (TE DelayedScaling)"
    ),
    "fp8_delayed": Recipe(
        "fp8_delayed", "fp8", 1.0, 0, 0, 4.0, description="FP8 per-tensor delayed scaling (TE DelayedScaling)"
    ),
    "fp8_current": Recipe(
        "fp8_current", "fp8", 1.0, 0, 0, 4.0, amax_pass=True,
        description="FP8 per-tensor current scaling (TE Float8CurrentScaling)",
    ),
    "fp8_blockwise": Recipe(
        "fp8_blockwise", "fp8", 1.0, 128, 128 * 128, 4.0,
        description="FP8 blockwise: 1x128 activations/gradients, 128x128 weights, fp32 scales (TE Float8BlockScaling)",
    ),
    "mxfp8": Recipe(
        "mxfp8", "fp8", 1.0, 32, 0, 1.0, block_format="mxfp8",
        description="MXFP8: 1x32 blocks, E8M0 scales (TE MXFP8BlockScaling)",
    ),
    "nvfp4": Recipe(
        "nvfp4", "fp4", 0.5, 16, 16 * 16, 1.0, block_format="nvfp4",
        description="NVFP4: E2M1 in 1x16 blocks (16x16 for weights), E4M3 scales (TE NVFP4BlockScaling)",
    ),
}


def recipe(precision: str, dev: Device | None = None) -> Recipe:
    """The recipe of ``training.precision``; with ``dev``, checked against what the device's tensor
    cores run (a :class:`SpecError` naming the field otherwise)."""
    try:
        r = RECIPES[precision]
    except KeyError:
        raise SpecError(
            f"unknown precision {precision!r}; known: {', '.join(RECIPES)}", field="training.precision"
        ) from None
    if dev is not None:
        if r.gemm_dtype not in dev.peak and not (r.gemm_dtype == "fp16" and "bf16" in dev.peak):
            raise SpecError(
                f"{dev.display_name} has no {r.gemm_dtype} tensor-core rate, so it cannot train in {precision}",
                field="training.precision",
            )
        if r.block_format is not None and r.block_format not in dev.block_scaling:
            raise SpecError(
                f"{dev.display_name} has no {r.block_format} block-scaled tensor cores "
                f"(Blackwell has), so it cannot train in {precision}",
                field="training.precision",
            )
    return r


def inference_gemm_family(precision: str) -> str:
    """The GEMM family of an inference precision's linears: FP8 checkpoints are per-tensor scaled (TensorRT-LLM's
    ``FP8QDQLinearMethod``, vLLM's ``Fp8LinearMethod``: docs/compute.md, "FP8 GEMMs by scaling"), so ``fp8`` runs
    ``fp8_tensor``; other precisions are their own."""
    return gemm_family(precision, per_tensor=True)


__all__ = ["RECIPES", "Recipe", "inference_gemm_family", "recipe"]
