"""Kernel classification, shape recovery and step detection for measured traces.

Every GPU activity of a :class:`~simcore.traces.model.Trace` gets a class:

``gemm``, ``attention``, ``norm``, ``elementwise``, ``loss``, ``embedding``, ``optimizer``,
``comm:<collective>`` (``comm:all_reduce``, ...), ``memcpy``, ``memset``

from the ``cpu_op`` that launched it (linked through ``External id``; the innermost op of an id),
the ``Optimizer.step`` range its launch fell in, and its name (patterns in the spirit of HTA's:
NCCL kernels by name, memcpy/memset by category). Shapes come from the op's ``Input Dims`` and
``Input type`` (``record_shapes=True``). Collective metadata comes from the kernel's own arguments
(``Collective name``, ``In msg nelems``, ``dtype``, ``Group size``, ``Process Group Ranks``), which
Kineto copies from ``record_param_comms``. The NCCL algorithm and protocol are never read from a
kernel name (``..._RING_LL`` names the dispatcher, not what ran).

Steps come from ``ProfilerStep#N`` ranges (a kernel belongs to the step its launch fell in), else from
a repeating kernel sequence, else the whole profiled GPU work is one step.
"""

from __future__ import annotations

import bisect
import gc
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from simcore.errors import TraceError
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.ops import dtype_variant, memory_op_traffic
from simcore.specs.profile import backend_of_name
from simcore.traces.model import CpuOp, GpuEvent, Trace

CLASSES = (
    "gemm",
    "attention",
    "norm",
    "elementwise",
    "loss",
    "embedding",
    "optimizer",
    "comm",
    "memcpy",
    "memset",
)
"""Base classes (communication is split by collective as ``comm:<op>``)."""

_COMM_NAME = re.compile(r"(^nccl)|(ncclKernel)|(ncclDevKernel)|(^hccl)|(^rccl)", re.IGNORECASE)
INDUCTOR_FUSED = ("triton_poi_fused", "triton_per_fused", "triton_red_fused")
"""Name prefixes of the pointwise / persistent-reduction / reduction kernels torch.compile's inductor
generates (its templates, ``triton_tem_fused_*``, are GEMMs or attention)."""
_ATTN_NAME = re.compile(r"flash|fmha|attention|sdpa|_attn_|mha_|xformers", re.IGNORECASE)
_GEMM_NAME = re.compile(
    r"gemm|nvjet|xmma|cutlass.*(gemm|matmul)|cublas|splitKreduce|sm\d+_.*_(tn|nt|nn|tt)_|"
    r"ampere_.*(gemm|sgemm|hgemm)|volta_|turing_|magma|wgmma",
    re.IGNORECASE,
)
_NORM_NAME = re.compile(r"layer_?norm|rms_?norm|GammaBeta|batch_?norm|group_?norm|bn_fw|bn_bw", re.IGNORECASE)
_LOSS_NAME = re.compile(r"nll_loss|cross_?entropy|SoftMax|softmax|log_softmax", re.IGNORECASE)
_EMB_NAME = re.compile(r"indexSelect|embedding|index_select|EmbeddingBag|vectorized_gather", re.IGNORECASE)
_OPT_NAME = re.compile(r"adam|FusedOptimizer|_foreach_|multi_tensor_apply|sgd|lamb|lion", re.IGNORECASE)

_GEMM_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_mm",
    "aten::addmv",
    "aten::mv",
    "aten::_addmm_activation",
}
_ATTN_OPS_FWD = {
    "aten::_flash_attention_forward": "bshd",
    "aten::_efficient_attention_forward": "bshd",
    "aten::_scaled_dot_product_flash_attention": "bhsd",
    "aten::_scaled_dot_product_efficient_attention": "bhsd",
    "aten::_scaled_dot_product_cudnn_attention": "bhsd",
    "aten::_cudnn_attention_forward": "bhsd",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "bhsd",
    "aten::_fused_sdp_choice": "bhsd",
    "aten::scaled_dot_product_attention": "bhsd",
}
_ATTN_OPS_BWD = {
    "aten::_flash_attention_backward": "bshd",
    "aten::_efficient_attention_backward": "bshd",
    "aten::_scaled_dot_product_flash_attention_backward": "bhsd",
    "aten::_scaled_dot_product_efficient_attention_backward": "bhsd",
    "aten::_scaled_dot_product_cudnn_attention_backward": "bhsd",
    "aten::_cudnn_attention_backward": "bhsd",
}
# positions of is_causal among the concrete inputs, where the op has one (the memory-efficient
# kernels' own ops take ``custom_mask_type``: 0 none, 1 causal from the top left, 2 from the bottom right)
_CAUSAL_ARG = {
    "aten::_flash_attention_forward": 8,
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_efficient_attention_backward": 11,
    "aten::_efficient_attention_forward": 9,
    "aten::_efficient_attention_backward": 14,
    "aten::scaled_dot_product_attention": 5,
    "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_cudnn_attention_forward": 10,
    "aten::_flash_attention_backward": 11,
    "aten::_scaled_dot_product_flash_attention_backward": 11,
    "aten::_scaled_dot_product_cudnn_attention_backward": 14,
    "aten::_cudnn_attention_backward": 14,
}
# positions of dropout_p among the concrete inputs, and of the attention mask among the inputs
_DROPOUT_ARG = {
    "aten::_flash_attention_forward": 7,
    "aten::_scaled_dot_product_efficient_attention": 5,
    "aten::_scaled_dot_product_efficient_attention_backward": 9,
    "aten::_efficient_attention_forward": 8,
    "aten::_efficient_attention_backward": 11,
    "aten::_scaled_dot_product_flash_attention": 3,
    "aten::scaled_dot_product_attention": 4,
    "aten::_scaled_dot_product_cudnn_attention": 5,
    "aten::_cudnn_attention_forward": 9,
    "aten::_flash_attention_backward": 10,
    "aten::_scaled_dot_product_flash_attention_backward": 10,
    "aten::_scaled_dot_product_cudnn_attention_backward": 13,
    "aten::_cudnn_attention_backward": 13,
}
_MASK_ARG = {
    "aten::scaled_dot_product_attention": 3,
    "aten::_scaled_dot_product_efficient_attention": 3,
    "aten::_scaled_dot_product_efficient_attention_backward": 4,
    "aten::_efficient_attention_forward": 3,
    "aten::_efficient_attention_backward": 4,
    "aten::_scaled_dot_product_cudnn_attention": 3,
    "aten::_cudnn_attention_forward": 3,
    "aten::_scaled_dot_product_cudnn_attention_backward": 8,
    "aten::_cudnn_attention_backward": 8,
}
# aten op -> simcore memory-bound op name (see simcore.compute.ops.memory_op_names)
_MEM_OPS: dict[str, tuple[str, str]] = {
    "aten::native_layer_norm": ("layernorm", "norm"),
    "aten::layer_norm": ("layernorm", "norm"),
    "aten::native_layer_norm_backward": ("layernorm_bwd", "norm"),
    "aten::_fused_rms_norm": ("rmsnorm", "norm"),
    "aten::rms_norm": ("rmsnorm", "norm"),
    "aten::_fused_rms_norm_backward": ("rmsnorm_bwd", "norm"),
    "aten::gelu": ("gelu", "elementwise"),
    "aten::gelu_backward": ("gelu_bwd", "elementwise"),
    "aten::silu": ("silu", "elementwise"),
    "aten::silu_backward": ("silu_bwd", "elementwise"),
    "aten::add": ("add", "elementwise"),
    "aten::add_": ("add", "elementwise"),
    "aten::mul": ("mul", "elementwise"),
    "aten::mul_": ("mul", "elementwise"),
    "aten::copy_": ("copy", "elementwise"),
    "aten::_to_copy": ("cast", "elementwise"),
    "aten::clone": ("copy", "elementwise"),
    "aten::contiguous": ("copy", "elementwise"),
    "aten::cat": ("copy", "elementwise"),
    "aten::fill_": ("fill", "elementwise"),
    "aten::zero_": ("fill", "elementwise"),
    "aten::native_dropout": ("dropout", "elementwise"),
    "aten::native_dropout_backward": ("dropout_bwd", "elementwise"),
    "aten::_softmax": ("softmax", "elementwise"),
    "aten::_softmax_backward_data": ("softmax_bwd", "elementwise"),
    "aten::_log_softmax": ("log_softmax", "loss"),
    "aten::_log_softmax_backward_data": ("log_softmax_bwd", "loss"),
    "aten::embedding": ("embedding", "embedding"),
    "aten::index_select": ("embedding", "embedding"),
    "aten::embedding_dense_backward": ("embedding_bwd", "embedding"),
    "aten::embedding_backward": ("embedding_bwd", "embedding"),
}
_DTYPES = {
    "c10::bfloat16": "bf16",
    "bfloat16": "bf16",
    "c10::half": "fp16",
    "half": "fp16",
    "float": "fp32",
    "float32": "fp32",
    "double": "fp64",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
}
_ELT = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp64": 8.0, "fp8": 1.0}
_NCCL_DTYPES = {
    "float": "fp32",
    "bfloat16": "bf16",
    "half": "fp16",
    "double": "fp64",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int": "int32",
    "long": "int64",
    "char": "int8",
    "byte": "int8",
}
_NCCL_ELT = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp64": 8.0,
    "fp8": 1.0,
    "int32": 4.0,
    "int64": 8.0,
    "int8": 1.0,
}
_COLL_CANON = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherintocoalesced": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "send_recv",
    "recv": "send_recv",
    "sendrecv": "send_recv",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "allreducecoalesced": "all_reduce",
}


def dtype_of(type_name: Any) -> str | None:
    """simcore dtype of a PyTorch ``Input type`` string (``c10::BFloat16`` -> ``bf16``)."""
    if not isinstance(type_name, str):
        return None
    return _DTYPES.get(type_name.strip().lower())


def canonical_collective(name: str) -> str:
    """``allreduce`` / ``AllReduce`` / ``_allgather_base`` -> ``all_reduce`` / ``all_gather``."""
    key = re.sub(r"[^a-z]", "", name.lower())
    return _COLL_CANON.get(key, key or "unknown")


def _collective_from_kernel_name(name: str) -> str:
    # the collective (never the algorithm) from ncclKernel_<Coll>_... / ncclDevKernel_<Coll>_...
    m = re.search(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", name)
    return canonical_collective(m.group(1)) if m else "unknown"


def _numel(dims: Any) -> float:
    if not isinstance(dims, list) or not all(isinstance(d, int | float) for d in dims):
        return 0.0
    n = 1.0
    for d in dims:
        n *= float(d)
    return n


def _is_shape(d: Any) -> bool:
    return isinstance(d, list) and len(d) > 0 and all(isinstance(x, int | float) for x in d)


@dataclass(slots=True)
class Kernel:
    """A classified GPU activity."""

    ev: GpuEvent
    cls: str
    op: str | None = None
    """Name of the linked cpu_op."""
    shape: dict[str, Any] | None = None
    """Recovered shape: keyword arguments of the matching simcore cost function plus ``kind``."""
    step: int = -1
    launch_ts: float | None = None
    """Host time of the runtime call that launched it (seconds), when recorded."""

    @property
    def base(self) -> str:
        """Class without the collective suffix (``comm:all_reduce`` -> ``comm``)."""
        return self.cls.partition(":")[0]


@dataclass
class Step:
    """One training/inference step: the kernels launched within it and its measured time."""

    name: str
    kernels: list[Kernel] = field(default_factory=list)
    cpu_start: float | None = None
    cpu_end: float | None = None
    gpu_start: float = 0.0
    gpu_end: float = 0.0
    time_s: float = 0.0
    """The step's period: next step's GPU start minus this one's, else max(GPU span, CPU range)."""


@dataclass
class Analysis:
    """A classified trace: kernels, steps and per-class times."""

    trace: Trace
    kernels: list[Kernel]
    steps: list[Step]
    step_source: str
    """``annotation``, ``repeat`` or ``single``."""

    def without_steps(self, drop: set[int]) -> Analysis:
        """This analysis with the steps of indices ``drop`` left out, the others renumbered in order
        (their kernels' ``step`` with them; a dropped step's kernels belong to none, ``-1``)."""
        keep = {old: new for new, old in enumerate(i for i in range(len(self.steps)) if i not in drop)}
        moved = {id(k): replace(k, step=keep.get(k.step, -1)) for k in self.kernels}
        steps = [
            replace(s, kernels=[moved.get(id(k), k) for k in s.kernels])
            for i, s in enumerate(self.steps)
            if i in keep
        ]
        return replace(self, kernels=[moved[id(k)] for k in self.kernels], steps=steps)

    def as_one_step(self) -> Analysis:
        """The trace as one step without annotations: every kernel in it, timed by their span (what a
        trace of one unannotated step measures), ``step_source`` ``single``."""
        ks = [replace(k, step=0) for k in self.kernels]
        st = Step("step#0", kernels=ks)
        if ks:
            st.gpu_start = min(k.ev.ts for k in ks)
            st.gpu_end = max(k.ev.ts + k.ev.dur for k in ks)
            st.time_s = st.gpu_end - st.gpu_start
        return replace(self, kernels=ks, steps=[st], step_source="single")

    @property
    def step_time_s(self) -> float:
        """Median step time over the profiled steps (seconds)."""
        return float(statistics.median(s.time_s for s in self.steps))

    def class_times(self, exposed: bool = True, launch_gap_max: float = 0.0) -> dict[str, float]:
        """Median over steps of seconds per class.

        ``exposed=True`` counts what each class adds to the device's busy timeline (the first
        stream to occupy an instant owns it, communication only where nothing else runs); the rest
        of the step is ``idle`` (see :func:`step_class_times`). ``exposed=False`` sums kernel
        durations.
        """
        per: list[dict[str, float]] = [step_class_times(s, exposed, launch_gap_max) for s in self.steps]
        keys = sorted({k for d in per for k in d})
        return {k: float(statistics.median(d.get(k, 0.0) for d in per)) for k in keys}


def _merge(iv: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    for a, b, c in sorted(iv):
        if out and a <= out[-1][1]:
            pa, pb, pc = out[-1]
            out[-1] = (pa, max(pb, b), pc)
        else:
            out.append((a, b, c))
    return out


def _covered(iv: list[tuple[float, float, str]], a: float, b: float) -> dict[str, float]:
    """Seconds of [a, b] covered by the merged intervals ``iv``, by label."""
    out: dict[str, float] = {}
    if b <= a:
        return out
    for x, y, c in iv:
        if y <= a:
            continue
        if x >= b:
            break
        ov = min(b, y) - max(a, x)
        if ov > 0:
            out[c] = out.get(c, 0.0) + ov
    return out


def step_class_times(step: Step, exposed: bool = True, launch_gap_max: float = 0.0) -> dict[str, float]:
    """Seconds per class in one step (see :meth:`Analysis.class_times`).

    Exposed attribution: compute, memcpy and memset kernels own the device timeline (where they
    overlap each other the earlier one keeps the instant); communication counts only where no
    other kernel runs; time with nothing on the device is ``idle`` (launch gaps and host stalls:
    the GPU waiting for the host), except that a gap of at most ``launch_gap_max`` seconds before
    a kernel is charged to that kernel's class. The classes sum to the step time."""
    out: dict[str, float] = defaultdict(float)
    ks = sorted(step.kernels, key=lambda k: k.ev.ts)
    if not exposed:
        for k in ks:
            out[k.cls] += k.ev.dur
        return dict(out)
    # (``k.base == "comm"``, without the property call per kernel)
    is_comm = [k.cls == "comm" or k.cls.startswith("comm:") for k in ks]
    comm = _merge([(k.ev.ts, k.ev.ts + k.ev.dur, k.cls) for k, c in zip(ks, is_comm, strict=True) if c])
    cursor = step.gpu_start

    def fill(a: float, b: float, nxt: str | None) -> None:
        if b <= a:
            return
        cov = _covered(comm, a, b)
        for c, v in cov.items():
            out[c] += v
        rest = (b - a) - sum(cov.values())
        if rest > 0:
            out[nxt if nxt is not None and rest <= launch_gap_max else "idle"] += rest

    for k, c in zip(ks, is_comm, strict=True):
        if c:
            continue
        e = k.ev
        end = e.ts + e.dur
        fill(cursor, e.ts, k.cls)
        own = max(0.0, end - max(e.ts, cursor))
        out[k.cls] += own
        cursor = max(cursor, end)
    fill(cursor, step.gpu_start + step.time_s, None)
    return dict(out)


# ---------------------------------------------------------------------------------------------
# shapes


def gemm_shape(op: CpuOp) -> dict[str, Any] | None:
    """``m, n, k, batch, dtype`` of a GEMM op from its ``Input Dims`` (None when not recorded)."""
    dims = op.input_dims
    if not isinstance(dims, list):
        return None
    types = op.input_types or []
    name = op.name
    shapes = [d for d in dims if _is_shape(d)]
    first_t = next((dtype_of(t) for t in types if dtype_of(t)), None)
    dt = first_t or "bf16"
    b = 1.0
    try:
        if name in ("aten::mm", "aten::_scaled_mm") and len(shapes) >= 2:
            (m, k), (_k2, n) = shapes[0][-2:], shapes[1][-2:]
        elif name in ("aten::addmm", "aten::_addmm_activation") and len(dims) >= 3:
            (m, k), (_k2, n) = dims[1][-2:], dims[2][-2:]
        elif name == "aten::bmm" and len(shapes) >= 2 and len(shapes[0]) == 3:
            b, m, k = shapes[0]
            n = shapes[1][-1]
        elif name == "aten::baddbmm" and len(dims) >= 3 and _is_shape(dims[1]) and len(dims[1]) == 3:
            b, m, k = dims[1]
            n = dims[2][-1]
        elif name == "aten::linear" and len(shapes) >= 2:
            x, w = shapes[0], shapes[1]
            k = x[-1]
            m = _numel(x[:-1])
            n = w[0]
        elif name == "aten::matmul" and len(shapes) >= 2 and len(shapes[1]) == 2:
            x, w = shapes[0], shapes[1]
            k = x[-1]
            m = _numel(x[:-1])
            n = w[-1]
        elif name in ("aten::mv", "aten::addmv") and len(shapes) >= 2:
            mat = shapes[-2]
            m, k, n = mat[0], mat[1], 1
        else:
            return None
    except (TypeError, ValueError, IndexError):
        return None
    if name == "aten::_scaled_mm":
        dt = "fp8"
    out: dict[str, Any] = {
        "kind": "gemm",
        "m": float(m),
        "n": float(n),
        "k": float(k),
        "batch": float(b),
        "dtype": dt,
    }
    lds = _leading_strides(op)
    if lds is not None:
        elt = DTYPE_BYTES.get(dt, 2.0)
        out["misaligned"] = any((ld * elt) % 16 != 0 for ld in [*lds, float(n)])
    return out


_GEMM_OPERANDS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::addmm": (1, 2), "aten::baddbmm": (1, 2)}


def _leading_strides(op: CpuOp) -> list[float] | None:
    """The leading stride (elements between rows of the stored matrix) of a GEMM op's two operands
    from its ``Input Strides`` (``[k, 1]`` row-major, ``[1, m]`` a transposed view: ``m``); None where
    not recorded or an operand is strided both ways (copied by the library first)."""
    idx = _GEMM_OPERANDS.get(op.name)
    strides = op.input_strides if isinstance(op.input_strides, list) else None
    if idx is None or strides is None or len(strides) <= max(idx):
        return None
    lds: list[float] = []
    for i in idx:
        st = strides[i]
        if not isinstance(st, list) or len(st) < 2 or not all(isinstance(x, int | float) for x in st[-2:]):
            return None
        a, b = float(st[-2]), float(st[-1])
        if b == 1:
            lds.append(a)
        elif a == 1:
            lds.append(b)
        else:
            return None
    return lds


def attention_shape(op: CpuOp) -> dict[str, Any] | None:
    """Shape of a fused attention op (``batch, heads, kv_heads, seq, kv_seq, head_dim, causal,
    backward, dtype``), its ``backend`` (``cudnn`` / ``efficient`` for cuDNN's / the memory-efficient
    kernels' ops, else ``flash``), whether it
    takes a 4-D ``mask`` tensor and its ``dropout`` probability, where the op records them."""
    name = op.name
    layout = _ATTN_OPS_FWD.get(name) or _ATTN_OPS_BWD.get(name)
    if layout is None or not isinstance(op.input_dims, list):
        return None
    bwd = name in _ATTN_OPS_BWD
    dims = op.input_dims
    # backward ops start with grad_out, then q, k, v
    q_i = 1 if bwd else 0
    if len(dims) < q_i + 3 or not all(_is_shape(dims[q_i + j]) and len(dims[q_i + j]) == 4 for j in range(3)):
        return None
    q, k = dims[q_i], dims[q_i + 1]
    if layout == "bshd":
        b, s, h, d = q
        skv, hkv = k[1], k[2]
    else:
        b, h, s, d = q
        hkv, skv = k[1], k[2]
    causal = True
    conc = op.concrete or []
    idx = _CAUSAL_ARG.get(name)
    if idx is not None and idx < len(conc) and isinstance(conc[idx], str) and conc[idx] in ("True", "False"):
        causal = conc[idx] == "True"
    elif idx is not None and idx < len(conc) and conc[idx] in ("0", "1", "2"):  # custom_mask_type
        causal = conc[idx] != "0"
    elif s == 1:
        causal = False
    types = op.input_types or []
    dt = dtype_of(types[q_i]) if len(types) > q_i else None
    drop = 0.0
    j = _DROPOUT_ARG.get(name)
    if j is not None and j < len(conc):
        try:
            drop = float(conc[j])
        except (TypeError, ValueError):
            drop = 0.0
    j = _MASK_ARG.get(name)
    mask = j is not None and j < len(dims) and _is_shape(dims[j]) and len(dims[j]) == 4
    return {
        "kind": "attention",
        "backend": backend_of_name(name),
        "mask": bool(mask),
        "dropout": drop if 0.0 < drop < 1.0 else 0.0,
        "batch": float(b),
        "heads": float(h),
        "kv_heads": float(hkv),
        "seq": float(s),
        "kv_seq": float(skv),
        "head_dim": float(d),
        "causal": bool(causal),
        "backward": bwd,
        "dtype": dt or "bf16",
    }


def memory_shape(op: CpuOp) -> dict[str, Any] | None:
    """``name, nbytes, dtype`` of a memory-bound op from its largest input (simcore's traffic
    convention: :func:`simcore.compute.ops.memory_op_traffic`)."""
    spec = _MEM_OPS.get(op.name)
    if spec is None or not isinstance(op.input_dims, list):
        return None
    name = spec[0]
    types = op.input_types or []
    best, elt, last = 0.0, 2.0, 0.0
    for i, d in enumerate(op.input_dims):
        if _is_shape(d):
            n = _numel(d)
        elif isinstance(d, list) and d and all(_is_shape(x) for x in d):
            n = sum(_numel(x) for x in d)  # a tensor list (``cat``'s): the elements it gathers
        else:
            n = 0.0
        if n > best:
            best = n
            last = float(d[-1]) if _is_shape(d) else 0.0
            dt = dtype_of(types[i]) if i < len(types) else None
            elt = _ELT.get(dt or "bf16", 2.0)
    if best <= 0:
        return None
    dims = op.input_dims
    if name == "embedding":
        # [table, (dim,) indices]: the moved elements are tokens x hidden
        tab = next((d for d in dims if _is_shape(d) and len(d) == 2), None)
        idx_i = [i for i, t in enumerate(types) if isinstance(t, str) and ("long" in t or "int" in t.lower())]
        if tab is not None and idx_i and _is_shape(dims[idx_i[0]]):
            best = _numel(dims[idx_i[0]]) * float(tab[-1])
    strided = _strided_inputs(op)
    if name in ("copy", "cast"):
        shapes = [(i, d) for i, d in enumerate(dims) if _is_shape(d)]
        if len(shapes) >= 2:
            e = [
                _ELT.get(dtype_of(types[i]) or "bf16", 2.0) if i < len(types) else 2.0 for i, _ in shapes[:2]
            ]
            n = max(_numel(shapes[0][1]), _numel(shapes[1][1]))
            # copy_(dst, src): an upcast runs PyTorch's unrolled copy, a downcast the vectorised one,
            # a copy from a non-contiguous source the strided loop
            nm = "cast_up" if e[0] > e[1] else "cast" if e[0] != e[1] else "copy"
            if nm == "copy" and shapes[1][0] in strided:
                nm = "copy_strided_fp32" if e[0] == 4.0 else "copy_strided"
            return {"kind": "memory", "name": nm, "nbytes": n * (e[0] + e[1]), "dtype": "bf16", "numel": n}
    if op.name == "aten::cat" and strided:
        name = "cat_strided"
    elif name in ("add", "mul", "silu"):
        tensors = [i for i, d in enumerate(dims) if _is_shape(d) and _numel(d) > 1]
        kinds = {dtype_of(types[i]) for i in tensors if i < len(types)}
        bcast = any(_numel(dims[i]) < best for i in tensors)
        if name != "silu" and len(kinds) > 1:
            # operands of two dtypes: the unrolled loop, with offsets where one is broadcast
            name = "add_bcast_mixed" if bcast else name + "_mixed"
        elif name != "silu" and bcast and not strided & set(tensors):
            # an operand broadcast to the other's shape (a stride-0 dimension): the offset loop
            name = dtype_variant(name + "_bcast", "fp32" if elt == 4.0 else "bf16")
        elif strided & set(tensors) or bcast:
            # a non-contiguous operand: the strided loop
            name = "silu_strided" if name == "silu" else "mul_strided"
        elif name != "silu" and len(tensors) == 1:
            name = "mul_scalar"  # a Python scalar operand: one tensor read, one written
    nb, _fl = memory_op_traffic(name, best, elt)
    out: dict[str, Any] = {
        "kind": "memory",
        "name": name,
        "nbytes": float(nb),
        "dtype": "fp32" if elt == 4.0 else "bf16",
        "numel": best,
    }
    if name == "embedding_bwd":
        # [grad, indices, ...]: the token count (the sort and segment sums go by it)
        idx_i = [i for i, t in enumerate(types) if isinstance(t, str) and ("long" in t or "int" in t.lower())]
        if idx_i and _is_shape(dims[idx_i[0]]) and _numel(dims[idx_i[0]]) > 0:
            out["rows"] = _numel(dims[idx_i[0]])
    if name.removesuffix("_bwd") in ("layernorm", "rmsnorm", "softmax", "log_softmax") and last > 0:
        out["rows"] = best / last  # a row-wise op gives each row (of the last dimension) to one CTA
    if name == "softmax" and _is_shape(dims[0]) and len(dims[0]) == 4:
        out["queries"] = float(dims[0][2])  # attention scores [b, h, q, kv] written out of ops
    return out


def _strided_inputs(op: CpuOp) -> set[int]:
    """Indices of the tensor inputs the op recorded as non-contiguous (``Input Strides`` against
    row-major strides of ``Input Dims``; size-1 dimensions ignored; a list input, as ``cat``'s,
    counts when any of its tensors is)."""
    out: set[int] = set()
    strides = op.input_strides if isinstance(op.input_strides, list) else []
    dims = op.input_dims if isinstance(op.input_dims, list) else []
    for i, (d, st) in enumerate(zip(dims, strides, strict=False)):
        if _is_shape(d) and _is_shape(st):
            tensors = [(d, st)]
        elif isinstance(d, list) and isinstance(st, list):
            tensors = [(x, y) for x, y in zip(d, st, strict=False) if _is_shape(x) and _is_shape(y)]
        else:
            continue
        if any(not _row_major(x, y) for x, y in tensors):
            out.add(i)
    return out


def _row_major(dims: list[Any], strides: list[Any]) -> bool:
    if len(dims) != len(strides):
        return True
    expected = 1
    for d, st in zip(reversed(dims), reversed(strides), strict=True):
        if d == 1:
            continue
        if st != expected:
            return False
        expected *= d
    return True


def optimizer_shape(op: CpuOp) -> dict[str, Any] | None:
    """``params`` (elements updated) of a fused optimizer step (``aten::_fused_adamw_``, ...) from its
    first tensor list. A ``foreach`` implementation runs one op per arithmetic step, none of which
    is the whole update: no shape."""
    if "_fused_" not in op.name or not isinstance(op.input_dims, list) or not op.input_dims:
        return None
    first = op.input_dims[0]
    total = 0.0
    if isinstance(first, list) and first and all(_is_shape(x) for x in first):
        total = sum(_numel(x) for x in first)
    if total <= 0:
        return None
    fused = "fused" in op.name
    name = "adamw" if "adam" in op.name else "sgd" if "sgd" in op.name else "adamw"
    return {"kind": "optimizer", "params": total, "optimizer": name, "fused": fused}


def collective_info(ev: GpuEvent) -> dict[str, Any]:
    """Collective metadata of an NCCL kernel: ``op``, ``nbytes`` (per rank, the message the
    collective was called with), ``dtype``, ``group_size``, ``ranks``, ``pg``, ``seq``."""
    a = ev.args
    op = (
        canonical_collective(str(a["Collective name"]))
        if "Collective name" in a
        else _collective_from_kernel_name(ev.name)
    )
    raw_dt = str(a.get("dtype", "")).strip().lower()
    dt = _NCCL_DTYPES.get(raw_dt, raw_dt or "unknown")
    elt = _NCCL_ELT.get(dt, 0.0)
    nel_in = _num(a.get("In msg nelems"))
    nel_out = _num(a.get("Out msg nelems"))
    nbytes = None
    if elt and (nel_in or nel_out):
        # all_gather is called with the per-rank input; the message that travels is the output
        nbytes = (
            elt * max(nel_in or 0.0, nel_out or 0.0)
            if op in ("all_gather",)
            else elt * (nel_in or nel_out or 0.0)
        )
    ranks: list[int] | None = None
    pr = a.get("Process Group Ranks")
    if isinstance(pr, str):
        try:
            ranks = [int(x) for x in re.findall(r"-?\d+", pr)]
        except ValueError:
            ranks = None
    elif isinstance(pr, list):
        ranks = [int(x) for x in pr if isinstance(x, int | float)]
    gs = _num(a.get("Group size"))
    return {
        "op": op,
        "nbytes": nbytes,
        "dtype": dt,
        "group_size": int(gs) if gs else (len(ranks) if ranks else None),
        "ranks": ranks,
        "pg": a.get("Process Group Name"),
        "seq": a.get("Seq"),
    }


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


# ---------------------------------------------------------------------------------------------
# classification


def class_of(
    name: str, cat: str, opname: str, in_optimizer: bool = False, collective: bool = False
) -> tuple[str, str | None]:
    """(class, shape recovery to apply: ``gemm``/``attention``/``memory``/``optimizer``/``comm``/None)
    of a GPU activity named ``name`` launched by op ``opname``."""
    if cat == "gpu_memcpy" or name.startswith("Memcpy"):
        return "memcpy", None
    if cat == "gpu_memset" or name.startswith("Memset"):
        return "memset", None
    if collective or _COMM_NAME.search(name):
        return "comm", "comm"
    if (
        in_optimizer
        or "_fused_adam" in opname
        or "_foreach_" in opname
        or ("multi_tensor" in name and _OPT_NAME.search(name))
    ):
        return "optimizer", "optimizer"
    if opname:
        if opname in _ATTN_OPS_FWD or opname in _ATTN_OPS_BWD:
            return "attention", "attention"
        if opname in _GEMM_OPS:
            if _GEMM_NAME.search(name) or not re.search(
                r"elementwise|reduce_kernel|copy|fill", name, re.IGNORECASE
            ):
                return "gemm", "gemm"
            return "elementwise", None
        if "nll_loss" in opname:
            # gathers (forward) or scatters (backward) one element per token: no bandwidth model
            return "loss", None
        if opname in _MEM_OPS:
            return _MEM_OPS[opname][1], "memory"
    # by kernel name alone; inductor's generated pointwise and reduction kernels are named after the
    # ops they fuse (``triton_poi_fused__scaled_dot_product_cudnn_attention_...`` prepares SDPA's
    # inputs, ``..._mm_...`` a GEMM's): never the attention or GEMM itself
    inductor = name.startswith(INDUCTOR_FUSED)
    if _ATTN_NAME.search(name) and not inductor:
        return "attention", None
    if _GEMM_NAME.search(name) and not inductor:
        return "gemm", None
    if _NORM_NAME.search(name):
        return "norm", None
    if _LOSS_NAME.search(name):
        return "loss", None
    if _EMB_NAME.search(name) or "embedding" in opname:
        return "embedding", None
    if "cross_entropy" in opname or "nll_loss" in opname or "log_softmax" in opname:
        return "loss", None
    if "norm" in opname:
        return "norm", None
    return "elementwise", None


_SHAPERS = {
    "gemm": gemm_shape,
    "attention": attention_shape,
    "memory": memory_shape,
    "optimizer": optimizer_shape,
}


def classify_event(
    ev: GpuEvent, op: CpuOp | None, in_optimizer: bool = False
) -> tuple[str, dict[str, Any] | None]:
    """(class, recovered shape or None) of one GPU activity."""
    cls, how = class_of(ev.name, ev.cat, op.name if op else "", in_optimizer, "Collective name" in ev.args)
    return _finish(ev, op, cls, how)


def _finish(ev: GpuEvent, op: CpuOp | None, cls: str, how: str | None) -> tuple[str, dict[str, Any] | None]:
    if how == "comm":
        info = collective_info(ev)
        return f"comm:{info['op']}", {"kind": "comm", **info}
    if how is None or op is None:
        return cls, None
    return cls, _SHAPERS[how](op)


def _ranges(trace: Trace, prefix: str) -> list[tuple[float, float, str]]:
    out = [(a.ts, a.ts + a.dur, a.name) for a in trace.annotations if not a.gpu and a.name.startswith(prefix)]
    return sorted(out)


def _in_ranges(t: float, rs: list[tuple[float, float, str]]) -> int:
    """Index of the range containing ``t`` (ranges sorted, non-overlapping), else -1."""
    lo, hi = 0, len(rs) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        a, b, _ = rs[mid]
        if t < a:
            hi = mid - 1
        elif t > b:
            lo = mid + 1
        else:
            return mid
    return -1


def _range_finder(rs: list[tuple[float, float, str]]) -> Callable[[float], int]:
    """``t -> _in_ranges(t, rs)``, by :func:`bisect.bisect_right` where the ranges are disjoint (the
    usual case: steps, optimizer steps), else by :func:`_in_ranges` itself; the same answers."""
    starts = [a for a, _b, _n in rs]
    ends = [b for _a, b, _n in rs]
    if any(ends[i] >= starts[i + 1] for i in range(len(rs) - 1)):
        return lambda t: _in_ranges(t, rs)
    right = bisect.bisect_right

    def find(t: float) -> int:
        i = right(starts, t) - 1
        return i if i >= 0 and t <= ends[i] else -1

    return find


def classify(trace: Trace) -> list[Kernel]:
    """Classify every GPU activity of ``trace`` (sorted by start time)."""
    in_optimizer = _range_finder(_ranges(trace, "Optimizer.step"))
    out: list[Kernel] = []
    cache: dict[tuple[str, str, str, bool, bool], tuple[str, str | None]] = {}
    shapes: dict[tuple[Any, ...], tuple[str, dict[str, Any] | None]] = {}
    # the autograd-engine wrappers and module annotations share ids with nothing; cpu_ops holds
    # the innermost op per External id
    for ev in sorted(trace.gpu_events, key=lambda e: e.ts):
        op = trace.cpu_ops.get(ev.ext_id) if ev.ext_id >= 0 else None
        rc = trace.runtime.get(ev.correlation) if ev.correlation >= 0 else None
        launch = rc.ts if rc is not None else None
        in_opt = launch is not None and in_optimizer(launch) >= 0
        key = (ev.name, ev.cat, op.name if op else "", in_opt, "Collective name" in ev.args)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = class_of(*key)
        if op is not None and hit[1] is not None and hit[1] != "comm":
            # a shape depends on the op's name and recorded inputs alone; the Kineto reader shares
            # the lists of repeated inputs, so a step's ops recur as the same objects (all alive
            # here, in trace.cpu_ops: their ids are theirs)
            skey = (
                hit,
                op.name,
                id(op.input_dims),
                id(op.input_types),
                id(op.concrete),
                id(op.input_strides),
            )
            got = shapes.get(skey)
            if got is None:
                got = shapes[skey] = _finish(ev, op, *hit)
            cls, shape = got[0], (None if got[1] is None else dict(got[1]))
        else:
            cls, shape = _finish(ev, op, *hit)
        out.append(Kernel(ev, cls, op.name if op else None, shape, -1, launch))
    return out


# ---------------------------------------------------------------------------------------------
# steps


def _period(names: Sequence[str]) -> int | None:
    """Smallest period P (>= 8 kernels) such that the sequence repeats at least twice with
    >= 90 % of positions matching; None when it does not repeat."""
    n = len(names)
    if n < 16:
        return None
    first = names[0]
    cands = [i for i in range(8, n // 2 + 1) if names[i] == first]
    for p in cands:
        m = n - p
        same = sum(1 for i in range(m) if names[i] == names[i + p])
        if same >= 0.9 * m:
            return p
    return None


def find_steps(trace: Trace, kernels: list[Kernel]) -> tuple[list[Step], str]:
    """Group kernels into steps; returns (steps, source) with source ``annotation``, ``repeat`` or
    ``single``. Raises :class:`TraceError` when the trace has no GPU activity."""
    if not kernels:
        raise TraceError(
            "no GPU activity in this trace (kernels, memcpy, memset): was it recorded with "
            "ProfilerActivity.CUDA on a GPU?",
            file=trace.path,
        )
    steps_r = _ranges(trace, "ProfilerStep#")
    steps: list[Step] = []
    source = "single"
    if steps_r:
        steps = [Step(name, cpu_start=a, cpu_end=b) for a, b, name in steps_r]
        gpu_steps = sorted(
            (a.ts, a.ts + a.dur, a.name)
            for a in trace.annotations
            if a.gpu and a.name.startswith("ProfilerStep#")
        )
        by_name = {s.name: i for i, s in enumerate(steps)}
        in_step, in_gpu_step = _range_finder(steps_r), _range_finder(gpu_steps)
        for k in kernels:
            i = in_step(k.launch_ts) if k.launch_ts is not None else -1
            if i < 0 and k.launch_ts is None:
                j = in_gpu_step(k.ev.ts) if gpu_steps else -1
                i = by_name.get(gpu_steps[j][2], -1) if j >= 0 else -1
            if i >= 0:
                k.step = i
                steps[i].kernels.append(k)
        steps = [s for s in steps if s.kernels]
        if steps:
            source = "annotation"
    if not steps:
        names = [k.ev.name for k in kernels if not k.cls.startswith("comm")]
        p = _period(names)
        if p is not None:
            comp = [k for k in kernels if not k.cls.startswith("comm")]
            starts = [comp[i].ev.ts for i in range(0, len(comp), p)]
            steps = [Step(f"step#{i}") for i in range(len(starts))]
            for k in kernels:
                i = max(0, _bisect_right(starts, k.ev.ts) - 1)
                k.step = i
                steps[i].kernels.append(k)
            if len(comp) % p:
                steps = steps[:-1] if len(steps) > 1 and len(steps[-1].kernels) < 0.5 * p else steps
            source = "repeat"
        else:
            steps = [Step("step#0", kernels=list(kernels))]
            for k in kernels:
                k.step = 0
    for s in steps:
        s.gpu_start = min(k.ev.ts for k in s.kernels)
        s.gpu_end = max(k.ev.ts + k.ev.dur for k in s.kernels)
    for i, s in enumerate(steps):
        span = s.gpu_end - s.gpu_start
        cpu = (s.cpu_end - s.cpu_start) if s.cpu_start is not None and s.cpu_end is not None else 0.0
        if i + 1 < len(steps):
            s.time_s = max(steps[i + 1].gpu_start - s.gpu_start, span)
        else:
            s.time_s = max(span, cpu if source == "annotation" else 0.0)
    return steps, source


def _bisect_right(a: list[float], x: float) -> int:
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def analyze(trace: Trace) -> Analysis:
    """Classify ``trace`` and split it into steps."""
    was_enabled = gc.isenabled()
    gc.disable()  # as in the reader: a kernel record per GPU activity, no cycles for the collector to find
    try:
        ks = classify(trace)
        steps, source = find_steps(trace, ks)
    finally:
        if was_enabled:
            gc.enable()
    return Analysis(trace, ks, steps, source)


_ACC_GRAD_NODE = "torch::autograd::AccumulateGrad"


def fp32_weights(ans: list[Analysis]) -> bool:
    """Whether the traces' weights are fp32 (PyTorch AMP: autocast casts them for each GEMM), where
    they recorded input types: most gradients reach ``AccumulateGrad`` as float (eager and compiled),
    or, with no backward, the ``aten::linear`` calls take float weights (each AMP call records the
    float call and, inside it, the one autocast makes with the cast weight: half of them)."""
    grads = [
        o.input_types[0]
        for a in ans
        for o in a.trace.cpu_ops.values()
        if o.name == _ACC_GRAD_NODE and o.input_types
    ]
    if grads:
        return bool(sum(t == "float" for t in grads) > len(grads) / 2)
    lin = [
        o.input_types[1]
        for a in ans
        for o in a.trace.cpu_ops.values()
        if o.name == "aten::linear" and o.input_types and len(o.input_types) > 1
    ]
    if lin:
        return bool(sum(t == "float" for t in lin) >= len(lin) / 3)
    # recorded without shapes: the element type the optimizer updates
    return optimizer_element_type(ans) == "float"


_FUNCTOR_TYPE = re.compile(r"Functor<(float|c10::BFloat16|c10::Half|double)\b")


def optimizer_element_type(ans: list[Analysis]) -> str | None:
    """The element type most of the traces' optimizer multi-tensor kernels update
    (``FusedAdamMathFunctor<float, ...>``, ``BinaryOpListAlphaFunctor<c10::BFloat16, ...>``): the
    parameters' and so, in PyTorch's optimizers, the moments' dtype; ``None`` where there are none."""
    types = [
        m.group(1)
        for a in ans
        for ev in a.trace.gpu_events
        if "multi_tensor_apply_kernel" in ev.name and (m := _FUNCTOR_TYPE.search(ev.name))
    ]
    return statistics.mode(types) if types else None
