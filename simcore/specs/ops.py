"""The memory-bound op catalogue: which ops simcore names, and the bytes and FLOP each moves per element.

A convention shared by the trace classifier (:mod:`simcore.traces.classify`, which sizes a measured
kernel by it) and the cost model (:mod:`simcore.compute.ops`, which prices it); not a fitted number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from simcore.errors import SimcoreError

Num = Any  # float or numpy array


def _out(x: Any) -> Num:
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


# Bytes moved per element (in units of the element size, plus fixed bytes) and FLOP per element
# of the common bandwidth-bound ops, forward. Backward variants ("<name>_bwd") read one more
# tensor (the incoming gradient) unless listed.
TRAFFIC: dict[str, tuple[float, float, float]] = {
    # name: (element-size multiples moved, extra bytes per element, FLOP per element)
    "copy": (2.0, 0.0, 0.0),
    "cast": (2.0, 0.0, 0.0),
    "add": (3.0, 0.0, 1.0),
    "mul": (3.0, 0.0, 1.0),
    "gelu": (2.0, 0.0, 14.0),
    "silu": (2.0, 0.0, 8.0),
    "swiglu": (3.0, 0.0, 9.0),
    # SiLU and the product on the strided halves of one fused gate/up GEMM output (eager PyTorch)
    "swiglu_strided": (3.0, 0.0, 9.0),
    "dropout": (2.0, 1.0, 4.0),
    "softmax": (2.0, 0.0, 8.0),
    "log_softmax": (2.0, 0.0, 8.0),
    "layernorm": (2.0, 0.0, 8.0),
    "rmsnorm": (2.0, 0.0, 5.0),
    "cross_entropy": (1.0, 0.0, 8.0),
    # the next token's argmax over each sequence's logits: read once (the index written is negligible)
    "argmax": (1.0, 0.0, 1.0),
    # reductions of a tensor (``x.sum()``, ``x.mean(-1)``, ``x.amax()``, ``torch.linalg.vector_norm(x)``):
    # each element read once, the reduced result (one value per row or per tensor) negligible; one add
    # (``max``: one compare) per element, the 2-norm a multiply-add, ``mean`` a final divide per row
    "sum": (1.0, 0.0, 1.0),
    "mean": (1.0, 0.0, 1.0),
    "max": (1.0, 0.0, 1.0),
    "amax": (1.0, 0.0, 1.0),
    "norm": (1.0, 0.0, 2.0),
    "embedding": (2.0, 0.0, 0.0),
    "rope": (2.0, 0.0, 6.0),
    "fill": (1.0, 0.0, 0.0),
    # torch.compile's fused residual add + norm (+ cast): a Triton kernel of its own, streaming its bytes
    # like the generated elementwise kernels (priced as ``add``), not PyTorch's eager norm kernels
    "compiled_norm": (2.0, 0.0, 8.0),
    # PyTorch's slower kernels for the same ops (measured by the elementwise suite, docs/compute.md): operands of
    # two dtypes take the unrolled loop with dynamic casts (bf16 -> fp32 upcasts, an fp32 residual
    # plus a bf16 branch: ``elt`` the mean element size), non-contiguous ones the strided loop (the
    # halves of a fused gate/up output, a transposed view made contiguous, transformers' KV-cache
    # ``cat`` of transposed keys); a strided add is priced as ``mul_strided``
    "cast_up": (2.0, 0.0, 0.0),
    "add_mixed": (3.0, 0.0, 1.0),
    "mul_mixed": (3.0, 0.0, 1.0),
    "mul_strided": (3.0, 0.0, 1.0),
    "silu_strided": (2.0, 0.0, 8.0),
    "copy_strided": (2.0, 0.0, 0.0),
    "copy_strided_fp32": (2.0, 0.0, 0.0),
    "cat_strided": (2.0, 0.0, 0.0),
    # a Python scalar operand (``x * 0.125``, ``1 + t``): one tensor read and one written, PyTorch's
    # vectorised loop (the eager-ops suite, docs/compute.md)
    "mul_scalar": (2.0, 0.0, 1.0),
    # an operand broadcast to the other's shape (a stride-0 dimension: RMSNorm's per-row statistic and
    # per-column weight, an additive ``[b, 1, q, k]`` mask over the heads) takes the non-vectorised
    # offset loop, bound by elements more than bytes (``_fp32``: the fp32 rows' own fit); the
    # broadcast operand's bytes are not counted. ``add_bcast_mixed``: bf16 scores plus an fp32 mask,
    # fp32 out (eager attention under autocast): the unrolled loop with dynamic casts and offsets,
    # ~1.1 TB/s at any size on the H200
    "add_bcast": (2.0, 0.0, 1.0),
    "add_bcast_fp32": (2.0, 0.0, 1.0),
    "mul_bcast": (2.0, 0.0, 1.0),
    "mul_bcast_fp32": (2.0, 0.0, 1.0),
    "add_bcast_mixed": (3.0, 0.0, 1.0),
    "mul_bcast_mixed": (3.0, 0.0, 1.0),
}
TRAFFIC_BWD: dict[str, tuple[float, float, float]] = {
    "add": (2.0, 0.0, 0.0),
    "swiglu": (5.0, 0.0, 14.0),
    "swiglu_strided": (5.0, 0.0, 14.0),
    "dropout": (2.0, 1.0, 2.0),
    "cross_entropy": (2.0, 0.0, 6.0),
    "embedding": (3.0, 0.0, 1.0),
}


def memory_op_names() -> list[str]:
    """Names :func:`memory_op` and :func:`memory_op_traffic` know (forward and ``_bwd``)."""
    return sorted([*TRAFFIC, *(f"{n}_bwd" for n in TRAFFIC)])


def memory_op_traffic(name: str, numel: ArrayLike, elt_bytes: float = 2.0) -> tuple[Num, Num]:
    """(bytes moved, FLOP) of op ``name`` over ``numel`` elements of ``elt_bytes`` each.

    Conventions (forward): unary ops read and write each element once (``2 e``), binary ops and
    SwiGLU read two and write one (``3 e``), dropout also writes a 1-byte mask, cross-entropy reads
    the logits once, an embedding lookup reads and writes each gathered element. ``<name>_bwd``
    adds a read of the incoming gradient.
    """
    base, bwd = (name[:-4], True) if name.endswith("_bwd") else (name, False)
    if base not in TRAFFIC:
        raise SimcoreError(
            f"unknown memory-bound op {name!r}; known: {', '.join(memory_op_names())}", field="name"
        )
    if bwd:
        mult, extra, fl = TRAFFIC_BWD.get(
            base, (TRAFFIC[base][0] + 1.0, TRAFFIC[base][1], TRAFFIC[base][2])
        )
    else:
        mult, extra, fl = TRAFFIC[base]
    n = np.asarray(numel, dtype=np.float64)
    return _out(n * (mult * elt_bytes + extra)), _out(n * fl)


# ops whose fp32 rows have a fit of their own (``<name>_fp32``): kernels bound by elements, not bytes
_FP32_VARIANTS = ("add_bcast", "mul_bcast")


def dtype_variant(name: str, dtype: str | None) -> str:
    """The op name a kernel of ``dtype`` is priced as: ``<name>_fp32`` for the element-bound ops that
    have an fp32 fit of their own (``add_bcast``, ``mul_bcast``, forward or ``_bwd``), else ``name``."""
    bwd = name.endswith("_bwd")
    base = name[:-4] if bwd else name
    if dtype == "fp32" and base in _FP32_VARIANTS:
        return f"{base}_fp32" + ("_bwd" if bwd else "")
    return name


