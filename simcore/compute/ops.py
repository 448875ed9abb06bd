"""Op cost models: GEMM, fused attention, bandwidth-bound ops, optimizer step, launch overhead.

Pure, vectorised functions: every shape argument may be a numpy array (they broadcast) and the
result fields are arrays of the broadcast shape (floats for scalar inputs). Each takes the device
(:class:`~simcore.specs.hardware.Device`) and a calibration profile
(:class:`~simcore.specs.profile.ComputeProfile`, from :func:`load_profile`) first.

Time is the roofline bound divided by a shape-dependent efficiency, i.e. a kernel model built on
tiles, waves over SMs, per-tile overheads and a smooth roofline corner (see :mod:`.kernels` and
``docs/compute.md``); every efficiency comes from the profile. ``time_s`` of an :class:`OpCost` is
device-side kernel time; host launch overhead per kernel is :func:`launch_overhead`, added by
:func:`op_time` (and by the workload lowering) according to ``runtime.framework``.

FLOP conventions: a GEMM is ``2 m n k batch``; attention counts the attended (query, key) pairs
(causal masks halve them): forward ``4 b h pairs d``, backward ``2.5 x`` forward. Bytes are the
minimal HBM traffic (every operand read once, every result written once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict

from simcore import units
from simcore.compute import kernels as K
from simcore.errors import SimcoreError
from simcore.specs.arguments import show
from simcore.specs.hardware import DTYPE_BYTES, Device
from simcore.specs.ops import TRAFFIC
from simcore.specs.ops import dtype_variant as dtype_variant  # re-exported: the cost model's op names
from simcore.specs.ops import memory_op_names as memory_op_names
from simcore.specs.ops import memory_op_traffic as memory_op_traffic
from simcore.specs.profile import (
    ATTENTION_BACKENDS,
    EMBEDDING_BWD_ELEMENT_BYTES,
    ONE_QUERY_ATTENTION,
    ONE_QUERY_ODD_ATTENTION,
    ComputeProfile,
    EmbeddingBackwardParams,
    SsdParams,
    engine_gemm_note,
    gemm_element_dtype,
    load_profile,
    one_query_call,
    one_query_family,
)
from simcore.specs.stack import attention_choice, load_stack

Num = Any  # float or numpy array
FRAMEWORKS = ("eager", "cuda_graphs", "compiled")
GEMM_DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32", "fp4", "int8", "fp64")


class OpCost(NamedTuple):
    """Cost of one kernel (arrays of the broadcast input shape, or floats)."""

    time_s: Num
    """Device-side kernel time (seconds), without host launch overhead."""
    flops: Num
    """FLOP (model FLOPs, see module docstring)."""
    bytes: Num
    """Minimal HBM bytes moved."""
    compute_time_s: Num
    """Time the tensor/ALU work alone would take at the modelled efficiency (seconds)."""
    memory_time_s: Num
    """Time the memory traffic alone would take at the modelled efficiency (seconds)."""


def _out(x: Any) -> Num:
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def _cost(t: Any, fl: Any, nb: Any, tc: Any, tm: Any) -> OpCost:
    shape = np.broadcast_shapes(*(np.shape(v) for v in (t, fl, nb, tc, tm)))
    return OpCost(
        *(_out(np.broadcast_to(np.asarray(v, dtype=np.float64), shape)) for v in (t, fl, nb, tc, tm))
    )


def _hw(dev: Device, dtype: str) -> K.HW:
    try:
        peak = dev.peak_flops(dtype)
    except KeyError:
        raise SimcoreError(f"device {dev.name} has no {dtype} peak rate", field="dtype") from None
    return K.HW(
        peak=peak,
        bandwidth=dev.memory.bandwidth,
        sm_count=dev.sm_count,
        l2_cache=dev.l2_cache,
        fp32_peak=dev.peak_flops("fp32"),
    )


def clock_scale(dev: Device, prof: ComputeProfile, family: str, clock_hz: float | None) -> float:
    """Factor on compute throughput when the SM clock is ``clock_hz`` instead of the one the
    profile's ``family`` was measured at (1 when either is unknown)."""
    frac = prof.clock_fraction.get(family)
    if clock_hz is None or frac is None:
        return 1.0
    if not clock_hz > 0:
        raise SimcoreError(f"clock must be positive (got {clock_hz!r})", field="clock_hz")
    return float(clock_hz) / (frac * dev.boost_clock)


LOWEST_CLOCK = 0.2
"""The lowest SM clock :func:`sustained_clock` searches, as a fraction of the boost clock."""


POWER_EXPONENT = 3.0
"""Exponent of board power in the SM clock under DVFS (dynamic power ~ f V^2, V rising with f): a physics
prior, not fitted (docs/compute.md, "SM clock and the power cap")."""


def _sustained_at_tdp(dev: Device, idle_fraction: float, dtype: str, exponent: float) -> float:
    """``dev``'s own sustained-over-burst GEMM rate at its TDP from ``dev.sustained_gemm`` (1 without it)."""
    sg = dev.sustained_gemm
    r0 = None if sg is None else sg.fraction.get(dtype)  # type: ignore[call-overload]
    if sg is None or r0 is None:
        return 1.0
    p_idle = idle_fraction * dev.tdp
    headroom = (dev.tdp - p_idle) / max(sg.board_power - p_idle, 1e-9)
    return float(min(1.0, r0 * max(headroom, 0.0) ** (1.0 / exponent)))


def gemm_sustained_fraction(
    dev: Device, prof: ComputeProfile, dtype: str, exponent: float = POWER_EXPONENT
) -> float:
    """Sustained rate of a stream of ``dtype`` GEMMs (a dtype or a GEMM family: ``fp8_tensor``) on ``dev`` at its TDP
    over the rate the transferred profile ``prof`` gives them (dimensionless, at most 1).

    ``Device.sustained_gemm`` holds a measured sustained-over-burst fraction ``r0`` at a board limit
    ``P0``. The GEMM stream's burst power ``P_b`` follows from ``P0 = P_idle + (P_b - P_idle) r0^k``; at a
    device's own TDP ``T`` the clock holds ``r = r0 ((T - P_idle) / (P0 - P_idle))^(1/k)`` of the burst
    clock (compute-bound time ~ 1/clock), at most 1; ``P_idle`` is the profile's idle fraction of ``T``.
    A transferred profile carries the source device's call-timed, i.e. sustained, rates as fractions of
    peak, so the answer is ``r_dev / r_source`` (each at its own TDP, 1 without the fact), at most 1.
    1 for a profile measured on the device itself (its sweep is already the sustained rate) and for a dtype
    the device's fact does not list. A family from an engine's table measured on the device or its die family
    (``prof.gemm_measured``: a few CUDA-graph replays, the burst clock) gets ``r_dev`` itself. Monotone
    non-decreasing in the device's TDP."""
    src = prof.transferred_from
    if src is None or dev.sustained_gemm is None:
        return 1.0
    from simcore.specs.registry import default_registry

    idle = prof.power_fraction.get("idle", 0.0)
    family, dtype = dtype, gemm_element_dtype(dtype)
    r_dev = _sustained_at_tdp(dev, idle, dtype, exponent)
    if family in prof.gemm_measured:
        return r_dev  # measured at the burst clock on this die (docs/compute.md, "Blackwell's GEMMs from engine tables")
    source = default_registry().devices.get(src)
    r_src = _sustained_at_tdp(source, idle, dtype, exponent) if source is not None else 1.0
    return min(1.0, r_dev / r_src)


def power_fractions(
    dev: Device, prof: ComputeProfile, gemm_dtype: str = "bf16", exponent: float | None = None
) -> dict[str, float]:
    """The profile's power fractions of TDP by family, the GEMM family's raised where ``dev`` sustains
    only :func:`gemm_sustained_fraction` ``r < 1`` of the profile's GEMM rate: to the draw at which a
    stream of GEMMs is slowed by exactly ``1 / r``. Under :func:`power_cap_time`'s stretch (``exponent``
    ``None``) that is ``1 + (1/r - 1)(1 - i)``, under :func:`sustained_clock`'s power law
    ``i + (1 - i) / r^k`` (``i``: the idle fraction). Other families are left as measured."""
    pf = prof.power_fraction
    r = gemm_sustained_fraction(dev, prof, gemm_dtype, exponent or POWER_EXPONENT)
    if r >= 1.0 or "idle" not in pf or "gemm" not in pf:
        return pf
    i = pf["idle"]
    need = i + (1.0 - i) / r**exponent if exponent else 1.0 + (1.0 / r - 1.0) * (1.0 - i)
    return {**pf, "gemm": max(pf["gemm"], need)}


def sustained_clock(
    dev: Device,
    prof: ComputeProfile,
    seconds: dict[str, float],
    exponent: float = POWER_EXPONENT,
    gemm_dtype: str = "bf16",
) -> float:
    """SM clock (Hz) a power-capped GPU sustains on a workload (a training or inference step).

    ``seconds``: device time by family (``gemm``, ``attention``, ``memory``, and optionally
    ``idle``) as priced at the profile's calibration clocks. Board power of each family follows
    ``P(f) = P_idle + (P_measured - P_idle) (f / f_measured)^exponent`` (dynamic power ~ f V^2 with
    V rising with f); compute-bound time scales with ``1/f``, memory-bound time does not. The clock
    is the highest one, up to the boost clock, at which the time-averaged power stays within the
    TDP. ``gemm_dtype``: the GEMMs' dtype, for a device that sustains less than the profile's GEMM rate
    (:func:`power_fractions`). Without power data in the profile, returns the boost clock.
    """
    pf, cf = power_fractions(dev, prof, gemm_dtype, exponent), prof.clock_fraction
    fams = [k for k, v in seconds.items() if v > 0 and k in pf and k in cf]
    if not fams or "idle" not in pf:
        return dev.boost_clock
    p_idle = pf["idle"] * dev.tdp
    f_max = dev.boost_clock

    def avg_power(f: float) -> float:
        num = den = 0.0
        for k in fams:
            f_k = cf[k] * f_max
            t = seconds[k] * (f_k / f if k in ("gemm", "attention") else 1.0)
            p = p_idle + (pf[k] * dev.tdp - p_idle) * (f / f_k) ** exponent
            num += t * p
            den += t
        t_idle = seconds.get("idle", 0.0)
        return (num + t_idle * p_idle) / (den + t_idle)

    if avg_power(f_max) <= dev.tdp:
        return f_max
    lo, hi = LOWEST_CLOCK * f_max, f_max
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if avg_power(mid) <= dev.tdp else (lo, mid)
    return lo


def power_cap_time(
    dev: Device, prof: ComputeProfile, seconds: dict[str, Num], idle_s: Num = 0.0, gemm_dtype: str = "bf16"
) -> Num:
    """Seconds a power-capped GPU adds to a workload whose kernels, run at their own speed, would
    draw more than its TDP on average (vectorised over layouts).

    ``seconds``: device time by family (``gemm``, ``attention``, ``memory``) at the profile's kernel
    rates; ``idle_s``: time the device waits (host gaps, pipeline bubbles). Each family draws
    ``power_fraction[family] x TDP`` while it runs, the idle device ``power_fraction["idle"] x TDP``.
    When the average exceeds the TDP the card holds it by stretching the step with low-power
    time: ``x = (sum_f t_f P_f + t_idle P_idle - TDP T) / (TDP - P_idle)`` for a step of ``T`` seconds.
    On the H200, GEMM kernels timed by their own durations draw more than the TDP when
    they run back to back (``power_fraction["gemm"] > 1``): a stream of GEMMs is stretched by the
    measured 16 %, a training step that mixes them with memory-bound work not at all. On a device with a
    measured sustained GEMM rate (``Device.sustained_gemm``) the GEMM family of ``gemm_dtype`` draws
    :func:`power_fractions`' value: a stream of them is stretched to the sustained rate, a step's
    memory-bound time absorbs part of it. Profiles without power data, or whose families all draw at
    most the TDP, add nothing."""
    pf = power_fractions(dev, prof, gemm_dtype)
    if "idle" not in pf or dev.tdp <= 0:
        return 0.0 * np.asarray(idle_s, dtype=float)
    p_idle = pf["idle"]
    energy: Num = np.asarray(idle_s, dtype=float) * p_idle
    total: Num = np.asarray(idle_s, dtype=float)
    for fam, t in seconds.items():
        frac = pf.get(fam)
        if frac is None:
            continue
        energy = energy + np.asarray(t, dtype=float) * frac
        total = total + np.asarray(t, dtype=float)
    return np.maximum(energy - total, 0.0) / max(1.0 - p_idle, 1e-9)


def _dtype_bytes(dtype: str) -> float:
    if dtype not in DTYPE_BYTES:
        raise SimcoreError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}", field="dtype")
    return DTYPE_BYTES[dtype]


def gemm_out_bytes(dtype: str) -> float:
    """Bytes per output element of a GEMM in ``dtype`` (low-precision inputs write bf16)."""
    return 4.0 if dtype in ("fp32", "tf32", "fp64") else 2.0


# ---------------------------------------------------------------------------------------------
# op families


def gemm(
    dev: Device,
    prof: ComputeProfile,
    m: ArrayLike,
    n: ArrayLike,
    k: ArrayLike,
    dtype: str = "bf16",
    batch: ArrayLike = 1,
    l2_reuse: bool = True,
    clock_hz: float | None = None,
    misaligned: ArrayLike | None = None,
    kernel_rate: bool = False,
    block_format: str | None = None,
    per_tensor: bool = False,
) -> OpCost:
    """``batch`` GEMMs ``C[m,n] = A[m,k] B[k,n]`` in ``dtype`` (seconds, FLOP, bytes).

    Row-major (PyTorch) convention: ``k`` and ``n`` are the row strides; ``misaligned`` overrides
    whether a stride is not a 16-byte multiple where the operands' real strides are known (a trace's
    ``Input Strides``: PyTorch's weight gradient reads the output gradient transposed, strided by ``m``). ``l2_reuse=True``
    (the benchmark situation) lets working sets that fit the L2 stream at L2 speed;
    ``False`` reads the operands from HBM (e.g. a layer's weights in a decode step, untouched
    since the previous step). ``clock_hz``: SM clock the kernel runs at (default: the sustained
    clock of the calibration sweep, see ``ComputeProfile.clock_fraction``). ``kernel_rate``: the
    kernel's own duration in a step (``ComputeProfile.gemm_kernel`` where fitted) rather than the
    call-timed rate (docs/compute.md, "GEMM kernels vs back-to-back calls"). ``block_format``: the
    operands are block-scaled in that format (``mxfp8``...): the main loop reaches the device's
    ``block_gemm_rate`` of the per-tensor-scaled kernel's rate (docs/parallelism.md, "Precision
    recipes"). ``per_tensor``: a low-precision GEMM of the per-tensor kernel family (per-tensor FP8, Blackwell's
    block-scaled FP8/FP4), priced with the profile's ``fp8_tensor`` parameters rather than the row-wise ``fp8``
    ones (docs/compute.md, "FP8 GEMMs by scaling")."""
    ib = _dtype_bytes(dtype)
    ob = gemm_out_bytes(dtype)
    m_, n_, k_, b_ = (np.asarray(v, dtype=np.float64) for v in (m, n, k, batch))
    if misaligned is not None:  # one layout per element of all five
        m_, n_, k_, b_, misaligned = np.broadcast_arrays(m_, n_, k_, b_, np.asarray(misaligned, dtype=bool))
    mp = prof.memory if l2_reuse else None
    gp = prof.gemm_params(dtype, kernel_rate, per_tensor)
    scale = clock_scale(dev, prof, "gemm", clock_hz)
    if block_format is not None:
        scale *= dev.block_gemm_rate.get(block_format, 1.0)  # type: ignore[call-overload]
    if scale != 1.0:
        gp = gp.model_copy(update={"eff_peak": gp.eff_peak * scale})
    r = K.gemm_time(_hw(dev, dtype), gp, m_, n_, k_, b_, ib, ob, mp, misaligned)
    flops = 2.0 * m_ * n_ * k_ * b_
    nbytes = b_ * ((m_ * k_ + k_ * n_) * ib + m_ * n_ * ob)
    return _cost(r.time, flops, nbytes, r.compute, r.memory)


PAGED_DECODE = "paged"
"""``attention(backend=...)`` of serving engines' decode over a paged KV cache: vLLM's and SGLang's
FlashAttention/FlashInfer decode kernels, TensorRT-LLM's XQA. They pack a GQA group's query heads into
one tile's rows and split long caches across CTAs, so one query a sequence streams its keys and values
once at the device's streaming rate: priced by :func:`paged_decode_attention`. Prompts (``seq`` > 1) and
backward passes under this name are FlashAttention-2's kernels (``flash``)."""


def paged_decode_attention(
    dev: Device,
    prof: ComputeProfile,
    batch: ArrayLike,
    heads: ArrayLike,
    head_dim: ArrayLike,
    kv_heads: ArrayLike,
    kv_seq: ArrayLike,
    dtype: str = "bf16",
) -> OpCost:
    """One decode step's attention (one query a sequence over ``kv_seq`` cached tokens) in a serving
    engine's paged decode kernel, seconds, with its FLOPs and bytes.

    ``time = t0 + max(bytes / (HBM bandwidth x memory.eff_bw x L2 boost), 4 b h kv d / (peak x eff_peak))``
    with ``bytes = b (2 h d + 2 kv_heads kv d) x elt`` (Q read, O written, K and V read once): the KV
    stream at the rate the device's large streaming kernels reach (the profile's ``memory.eff_bw``),
    the real rows' MMAs (no 128-row padding: the group's heads share a tile) at the attention fit's
    ``eff_peak``, ``t0`` the attention fit's fixed time. Evidence (docs/serving.md, decode attention over
    long KV caches): PyTorch's cuDNN one-query kernel, which packs the group the same way, moves
    2.86 TB/s on the H100 (85 % of 3.35) and 3.95 TB/s on the H200 (82 % of 4.8) at 134 MB and is still
    climbing with size, towards the 0.89-0.90 the profiles' streaming kernels reach; FlashAttention-2's
    padded tiles (the ``flash`` pricing) stay near 2.1-2.5 TB/s on both."""
    eb = _dtype_bytes(dtype)
    b, h, d = (np.asarray(v, dtype=np.float64) for v in (batch, heads, head_dim))
    kvh, skv = np.asarray(kv_heads, dtype=np.float64), np.asarray(kv_seq, dtype=np.float64)
    hw = _hw(dev, dtype)
    ap = prof.attention_params(False, dtype, "flash")
    nbytes = b * (2.0 * h * d + 2.0 * kvh * skv * d) * eb
    flops = 4.0 * b * h * skv * d
    mp = prof.memory
    tm = nbytes / (hw.bandwidth * mp.eff_bw * K.l2_boost(hw, mp, nbytes))
    tc = flops / (hw.peak * ap.eff_peak)
    return _cost(np.maximum(tm, tc) + ap.t0, flops, nbytes, tc, tm)


def attention(
    dev: Device,
    prof: ComputeProfile,
    batch: ArrayLike,
    heads: ArrayLike,
    seq: ArrayLike,
    head_dim: ArrayLike,
    causal: ArrayLike = True,
    backward: bool = False,
    kv_heads: ArrayLike | None = None,
    kv_seq: ArrayLike | None = None,
    dtype: str = "bf16",
    l2_reuse: bool = True,
    clock_hz: float | None = None,
    backend: str = "flash",
    mask: ArrayLike = False,
    dropout: ArrayLike = 0.0,
) -> OpCost:
    """Fused (flash-style) attention over ``seq`` queries and ``kv_seq`` keys per sequence.

    ``kv_heads`` < ``heads`` is GQA/MQA; decode is ``seq=1`` with ``kv_seq`` the cached length.
    ``backward=True`` gives the backward kernel alone. Causal masks are aligned bottom-right
    (the last query sees every key). Returns seconds, model FLOP and minimal bytes.
    ``l2_reuse=False``: Q/K/V come from HBM even when they would fit the L2 (see :func:`gemm`);
    ``clock_hz``: SM clock (see :func:`gemm`). ``backend``: ``flash`` (FlashAttention-2, PyTorch's
    flash SDPA), ``cudnn`` (cuDNN's fused attention, PyTorch's default SDPA on Hopper) or
    ``efficient`` (PyTorch's memory-efficient kernels, the only fused ones for fp32);
    ``mask``: an explicit additive mask tensor (with ``causal`` False: the kernel walks every
    block); ``dropout``: the attention dropout probability.
    """
    if backend == PAGED_DECODE:
        if not backward and np.all(np.asarray(seq) == 1.0):
            return paged_decode_attention(
                dev, prof, batch, heads, head_dim, heads if kv_heads is None else kv_heads,
                seq if kv_seq is None else kv_seq, dtype,
            )
        backend = "flash"
    if backend not in ATTENTION_BACKENDS:
        raise SimcoreError(
            f"unknown attention backend {backend!r}; known: {', '.join(ATTENTION_BACKENDS)}", field="backend"
        )
    eb = _dtype_bytes(dtype)
    kvh = heads if kv_heads is None else kv_heads
    skv = seq if kv_seq is None else kv_seq
    ap = prof.attention_params(bool(backward), dtype, backend)
    if prof.attention_score_scale != 1.0:
        # the softmax's exponentials run on the special-function units, whose rate per tensor-core FLOP
        # differs between the measured device and this one (ComputeProfile.attention_score_scale)
        ap = ap.model_copy(update={"head_dim_overhead": ap.head_dim_overhead * prof.attention_score_scale})
    scale = clock_scale(dev, prof, "attention", clock_hz)
    if scale != 1.0:
        ap = ap.model_copy(update={"eff_peak": ap.eff_peak * scale})
    args = (
        batch,
        heads,
        seq,
        head_dim,
        np.asarray(causal, dtype=np.float64),
        bool(backward),
        kvh,
        skv,
        eb,
        prof.memory if l2_reuse else None,
        np.asarray(mask, dtype=np.float64),
        np.asarray(dropout, dtype=np.float64),
    )
    r = K.attention_time(_hw(dev, dtype), ap, *args)
    time, comp, memt = r.time, r.compute, r.memory
    if backend == "cudnn" and not backward and ONE_QUERY_ATTENTION in prof.attention:
        # one query a sequence over a masked cache with the heads repeated: cuDNN's own kernel for it, over
        # an odd number of slots its own entry where fitted
        sel = one_query_call(mask, seq, kvh, heads)
        fam = one_query_family(skv)
        for key in (ONE_QUERY_ATTENTION, ONE_QUERY_ODD_ATTENTION):
            here = sel & (fam == key)
            if np.any(here):
                one = prof.attention.get(key, prof.attention[ONE_QUERY_ATTENTION])
                q = K.attention_time(_hw(dev, dtype), one.model_copy(update={"eff_peak": one.eff_peak * scale}), *args)
                time, comp, memt = (
                    np.where(here, b, a) for a, b in ((time, q.time), (comp, q.compute), (memt, q.memory))
                )
    return _cost(time, r.flops, r.bytes, comp, memt)


_SIXTEEN_BIT = ("bf16", "fp16")


def attention_kernel_accepts(
    backend: str,
    dtype: str,
    head_dim: float,
    mask: bool = False,
    cudnn_max_head_dim: int = 128,
    gqa: bool = False,
) -> bool:
    """Whether ``backend``'s fused attention kernels take a call of ``dtype`` (the attention's own:
    bf16 under fp8 GEMMs) and ``head_dim``, with an explicit ``mask`` tensor or not, with fewer key/value
    heads than query heads (``gqa``, SDPA's ``enable_gqa``) or not: PyTorch's SDPA checks
    (``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``): ``cudnn`` 16-bit, head dim a multiple of 8
    up to ``cudnn_max_head_dim`` (128 with the cuDNN torch 2.11 bundles); ``flash`` (FlashAttention-2)
    16-bit, head dim up to 256, no arbitrary mask; ``efficient`` 16-bit or fp32, head dim a multiple of 8
    (fp32: 4), no grouped-query heads (the committed fp32 Mistral trace
    ``traces/h200/round60/hf_train_mistral_L6_h2048_b1_fp32.json.gz`` ran SDPA's math fallback);
    ``eager`` (no fused kernel) anything. Dropout every fused backend takes. See docs/stacks.md."""
    if backend == "cudnn":
        return dtype in _SIXTEEN_BIT and head_dim % 8 == 0 and head_dim <= cudnn_max_head_dim
    if backend == "flash":
        return dtype in _SIXTEEN_BIT and head_dim <= 256 and not mask
    if backend == "efficient":
        aligned = (dtype in _SIXTEEN_BIT and head_dim % 8 == 0) or (dtype == "fp32" and head_dim % 4 == 0)
        return aligned and not gqa
    return backend == "eager"


def pick_attention_backend(
    order: Sequence[str],
    dtype: str,
    head_dim: float,
    mask: bool = False,
    cudnn_max_head_dim: int = 128,
    gqa: bool = False,
) -> str:
    """The first backend of ``order`` (a stack's priority list for the device, :mod:`simcore.specs.stack`)
    whose kernels take the call (:func:`attention_kernel_accepts`); ``eager`` (SDPA's math fallback)
    when none does."""
    for b in order:
        if attention_kernel_accepts(b, dtype, head_dim, mask, cudnn_max_head_dim, gqa):
            return b
    return "eager"


def default_attention_backend(
    dev: Device, dtype: str, head_dim: float, mask: bool = False, gqa: bool = False
) -> str:
    """The backend plain PyTorch's ``F.scaled_dot_product_attention`` runs on ``dev`` (the ``pytorch``
    stack's order for the device's generation): what ``op_time("attention", ...)`` prices when no backend
    is given."""
    ch = attention_choice(load_stack("pytorch"), dev)
    dt = "bf16" if dtype == "fp8" else dtype
    return pick_attention_backend(ch.order, dt, head_dim, mask, ch.cudnn_max_head_dim, gqa)


# variants priced as their plain op where a profile lacks their own measurement
_PRICED_AS = {
    "swiglu_strided": "swiglu",
    "swiglu_strided_bwd": "swiglu_bwd",
    "cast_up": "cast",
    "add_mixed": "add",
    "mul_mixed": "mul",
    "mul_strided": "mul",
    "silu_strided": "silu",
    "copy_strided": "copy",
    "copy_strided_fp32": "copy",
    "cat_strided": "copy",
    "log_softmax": "softmax",
    "mul_scalar": "mul",
    "add_bcast": "mul_strided",
    "add_bcast_fp32": "mul_strided",
    "mul_bcast": "mul_strided",
    "mul_bcast_fp32": "mul_strided",
    "add_bcast_mixed": "add_mixed",
    "mul_bcast_mixed": "add_bcast_mixed",
    "compiled_norm": "add",
    # PyTorch's reductions (sum, mean, max, amax, vector norms) run one kernel template
    # (``ATen/native/cuda/Reduce.cuh``'s ``reduce_kernel``), the one the profile measured as ``argmax``
    # (``docs/compute.md``, "Reductions"): priced with its fit until a profile measures them
    "sum": "argmax",
    "mean": "argmax",
    "max": "argmax",
    "amax": "argmax",
    "norm": "argmax",
}

# PyTorch's softmax backward launches a product kernel (the gradient times the output) before its own:
# a calibration row of the op times both, a trace shows both; the op's fit is its own kernel
PRODUCT_BEFORE = {"softmax_bwd": "mul"}

# names used by PyTorch / the calibration traces -> simcore op names
_ALIASES = {
    "layer_norm": "layernorm",
    "rms_norm": "rmsnorm",
    "rms_norm_manual": "rmsnorm",
    "swiglu_eager": "swiglu",
    "copy_cast_fp32_to_bf16": "cast",
    "mul_bcast_row": "mul_bcast",
    "xent": "cross_entropy",
    "crossentropy": "cross_entropy",
    "decode_argmax": "argmax",
    "amin": "amax",
    "min": "max",
    "linalg_vector_norm": "norm",
    "vector_norm": "norm",
}


def canonical_op_name(name: str) -> str:
    """simcore's name of a memory-bound op (``layer_norm`` -> ``layernorm``, ``dropout_p0.1`` ->
    ``dropout``); a ``_bwd`` suffix is kept."""
    raw = name.strip().lower()
    bwd = raw.endswith("_bwd")
    base = raw[:-4] if bwd else raw
    base = _ALIASES.get(base, base)
    if base.startswith("dropout"):
        base = "dropout"
    return base + ("_bwd" if bwd else "")


def row_width(name: str, nbytes: ArrayLike, rows: ArrayLike, elt_bytes: ArrayLike = 2.0) -> Num:
    """Elements per row of row-wise op ``name`` moving ``nbytes`` over ``rows`` rows of ``elt_bytes``-byte
    elements (its bytes per element from :func:`memory_op_traffic`)."""
    per = float(memory_op_traffic(name, 1.0, 1.0)[0]) * np.asarray(elt_bytes, dtype=np.float64)
    return _out(
        np.asarray(nbytes, dtype=np.float64) / (np.maximum(np.asarray(rows, dtype=np.float64), 1.0) * per)
    )


def embedding_backward_time(dev: Device, p: EmbeddingBackwardParams, tokens: ArrayLike, hidden: ArrayLike) -> Num:
    """Seconds of PyTorch's dense embedding backward over ``tokens`` gradient rows of ``hidden``
    elements, its table's zero fill and cub's memsets apart (see :class:`EmbeddingBackwardParams`):
    a kernel per token up to ``direct_max_tokens``, else a sort and scans plus the segment sums."""
    tok = np.asarray(tokens, dtype=np.float64)
    elements = tok * np.asarray(hidden, dtype=np.float64)
    per_elt = EMBEDDING_BWD_ELEMENT_BYTES / dev.memory.bandwidth
    direct = tok * p.direct_per_token + elements * per_elt / p.direct_eff
    sort = p.sorted_t0 + elements * per_elt / p.sorted_eff
    return _out(np.where(tok > p.direct_max_tokens, sort, direct))


def ssd_kernel(dev: Device, ssd: SsdParams, cls: str, nbytes: ArrayLike, flops: ArrayLike) -> OpCost:
    """One of mamba_ssm's Triton kernels of class ``cls`` (:data:`~simcore.specs.profile.SSD_CLASSES`)
    moving ``nbytes`` (read + written) with ``flops`` of bf16 tensor-core work (seconds, FLOP, bytes):
    ``t0 + nbytes / (eff_bw[cls] bandwidth) + flops / (eff_mma bf16 peak)`` with the fitted fractions of
    ``ssd`` and ``dev``'s peaks (docs/compute.md, "Mamba-2 layers and hybrid models")."""
    if cls not in ssd.eff_bw:
        raise SimcoreError(f"unknown SSD kernel class {cls!r}; known: {', '.join(ssd.eff_bw)}", field="cls")
    nb = np.asarray(nbytes, dtype=np.float64)
    fl = np.asarray(flops, dtype=np.float64)
    tm = nb / (ssd.eff_bw[cls] * dev.memory.bandwidth)
    tc = fl / (ssd.eff_mma * dev.peak_flops("bf16"))
    return _cost(ssd.t0 + tm + tc, fl, nb, tc, tm)


def memory_op(
    dev: Device,
    prof: ComputeProfile,
    name: str,
    nbytes: ArrayLike,
    flops: ArrayLike | None = None,
    elt_bytes: float = 2.0,
    rows: ArrayLike | None = None,
    l2_reuse: bool = True,
) -> OpCost:
    """A bandwidth-bound kernel ``name`` moving ``nbytes`` (read + written) with ``flops`` of
    non-tensor arithmetic (seconds, FLOP, bytes). ``flops=None`` takes the op's convention for
    ``nbytes`` of ``elt_bytes``-byte elements (see :func:`memory_op_traffic`). ``rows``: the row
    count of a row-wise op (softmax, norms, cross-entropy); few long rows run on few SMs.
    ``l2_reuse=False``: operands come from HBM whatever their size (see :func:`gemm`)."""
    name = canonical_op_name(name)
    base = name[:-4] if name.endswith("_bwd") else name
    if base not in TRAFFIC and name not in prof.memory.ops:
        raise SimcoreError(
            f"unknown memory-bound op {name!r}; known: {', '.join(memory_op_names())}", field="name"
        )
    if flops is None:
        per_b, per_f = memory_op_traffic(name, 1.0, elt_bytes) if base in TRAFFIC else (1.0, 0.0)
        flops = np.asarray(nbytes, dtype=np.float64) / per_b * per_f
    if name == "embedding_bwd" and prof.embedding_bwd is not None and rows is not None:
        # a sort and segment sums, not a bytes-bound curve: the row count is the token count
        nb = np.asarray(nbytes, dtype=np.float64)
        per_elt, _ = memory_op_traffic(name, 1.0, elt_bytes)
        hidden = nb / np.asarray(per_elt, dtype=np.float64) / np.maximum(np.asarray(rows, dtype=np.float64), 1.0)
        t = embedding_backward_time(dev, prof.embedding_bwd, rows, hidden)
        return _cost(t, flops, nbytes, np.zeros_like(t), t)
    mp = prof.memory
    op = mp.ops.get(name) or mp.ops.get(base)
    if op is None and base in _PRICED_AS:  # a variant the profile has not measured: its plain op
        op = mp.ops.get(_PRICED_AS[base] + name[len(base) :]) or mp.ops.get(_PRICED_AS[base])
    eff = op.eff if op is not None else 1.0
    t0 = op.t0 if op is not None else None
    share = op.row_share if op is not None else None
    wf: ArrayLike = 1.0
    if rows is not None and op is not None and op.width_knots and base in TRAFFIC:
        wf = op.width_factor(row_width(name, nbytes, rows, elt_bytes), elt_bytes)
    r = K.memory_time(
        _hw(dev, "fp32"), mp, nbytes, flops, eff, t0, rows if share else None, share, l2_reuse, elt_bytes, wf
    )
    return _cost(r.time, flops, nbytes, r.compute, r.memory)


_OPT_BYTES: dict[tuple[str, str], float] = {
    # bytes per parameter of one update, minimal traffic
    # adamw + fp32 master: master p r/w 8, fp32 grad 4, m r/w 8, v r/w 8, low-precision copy 2
    ("adamw", "master"): 30.0,
    # adamw on fp32 params: p r/w 8, grad 4, m 8, v 8
    ("adamw", "fp32"): 28.0,
    # adamw on bf16 params without a master copy (PyTorch keeps the moments in the params' dtype):
    # p r/w 4, grad 2, m r/w 4, v r/w 4
    ("adamw", "bf16"): 14.0,
    ("sgd", "master"): 22.0,
    ("sgd", "fp32"): 20.0,
    ("sgd", "bf16"): 10.0,
}
_OPT_FLOPS = {"adamw": 16.0, "sgd": 4.0}
_OPT_MOMENTS = {"adamw": 2.0, "sgd": 1.0}


def optimizer_step(
    dev: Device,
    prof: ComputeProfile,
    params: ArrayLike,
    optimizer: str = "adamw",
    fused: bool = True,
    master_weights: bool = True,
    param_dtype: str = "fp32",
    grad_bytes: float = 4.0,
    moment_bytes: float = 4.0,
) -> OpCost:
    """One optimizer update over ``params`` parameters on this GPU (seconds, FLOP, bytes).

    Bytes are the minimal traffic of the update (see ``_OPT_BYTES``): with an fp32 ``master_weights``
    copy, else on parameters of ``param_dtype`` (``bf16``: moments in bf16 too, as PyTorch keeps
    them); unfused implementations make more passes, a factor fitted in the profile
    (``optimizer.<name>_unfused.traffic``); 16-bit parameters use ``optimizer.<name>_bf16`` where the
    profile measured it. With a master copy, ``grad_bytes`` and ``moment_bytes`` are the bytes per element
    of the gradients it reads (bf16 under Megatron's ``grad_reduce_in_fp32: false``) and of each moment it
    reads and writes (bf16 under the precision-aware optimizer); the table's entry counts 4 and 4.
    """
    if optimizer not in _OPT_FLOPS:
        raise SimcoreError(f"unknown optimizer {optimizer!r}; known: adamw, sgd", field="optimizer")
    key = f"{optimizer}_{'fused' if fused else 'unfused'}"
    kind = "master" if master_weights else ("bf16" if param_dtype in ("bf16", "fp16") else "fp32")
    # 16-bit parameters and moments: their own entry where measured (the update of half the
    # bytes takes ~0.63x the fp32 one's time, not 0.5x), else the fp32 one's per-byte efficiency
    low = prof.optimizer.get(f"{key}_bf16") if kind == "bf16" else None
    op = low or prof.optimizer.get(key) or prof.optimizer.get(f"adamw_{'fused' if fused else 'unfused'}")
    if op is None:
        raise SimcoreError(f"calibration profile has no optimizer parameters for {key}")
    p = np.asarray(params, dtype=np.float64)
    nbytes = p * _OPT_BYTES[(optimizer, kind)]
    if kind == "master":
        nbytes = nbytes - p * ((4.0 - grad_bytes) + 2.0 * _OPT_MOMENTS[optimizer] * (4.0 - moment_bytes))
    flops = p * _OPT_FLOPS[optimizer]
    r = K.memory_time(_hw(dev, "fp32"), prof.memory, nbytes * op.traffic, flops, 1.0, op.t0)
    return _cost(r.time, flops, nbytes, r.compute, r.memory)


def launch_overhead(prof: ComputeProfile, framework: str, family: str | None = None) -> float:
    """Host-side time to dispatch one kernel under ``framework`` (seconds): eager PyTorch pays
    the Python/dispatcher path per op; CUDA graphs and compiled code much less.

    ``family`` (gemm, attention_fwd, attention_bwd, memory, memory_bwd, optimizer) gives the
    measured eager host time of one op call of that family instead of the generic per-kernel one.
    """
    return prof.launch_s(framework, family)


def with_launch(kernel_s: ArrayLike, launch_s: float, mode: str = "max", gap_s: float = 0.0) -> Num:
    """Per-kernel time in a stream of back-to-back launches (seconds).

    ``mode="max"``: the host runs ahead of the GPU, so a kernel costs
    ``max(kernel + gap, launch)`` (``gap``: device idle time between launched kernels, see
    ``ComputeProfile.gap``); ``"add"``: the host work is exposed (``kernel + launch``). The
    profile says which its measurements support (``ComputeProfile.launch_mode``).
    """
    k = np.asarray(kernel_s, dtype=np.float64)
    return _out(np.maximum(k + gap_s, launch_s) if mode == "max" else k + launch_s)


def stream_time(prof: ComputeProfile, kernel_s: ArrayLike, framework: str, family: str | None = None) -> Num:
    """Time per op of ``family`` in a stream of back-to-back calls under ``framework`` (seconds):
    ``max(kernel + gap[framework], host time)``."""
    return with_launch(
        kernel_s, launch_overhead(prof, framework, family), prof.launch_mode, prof.gap.get(framework, 0.0)
    )


# ---------------------------------------------------------------------------------------------
# the public single-op API


class OpResult(BaseModel):
    """Predicted cost of one op on one device (SI units)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    device: str
    dtype: str
    framework: str
    shape: dict[str, Any]
    time_s: float
    """Per-kernel time including host launch overhead as seen in a stream of launches (seconds)."""
    kernel_time_s: float
    """Device-side kernel time (seconds)."""
    launch_overhead_s: float
    flops: float
    bytes: float
    arithmetic_intensity: float
    """FLOP per byte."""
    compute_time_s: float
    memory_time_s: float
    bound: Literal["compute", "memory", "latency"]
    efficiency: float
    """Roofline time (the larger of FLOP/peak and bytes/bandwidth) over predicted kernel time."""
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    calibration: str
    """Which profile the efficiencies come from (with a note when transferred or provisional)."""
    transferred_from: str | None = None
    provisional: bool = False


def _num(v: Any, name: str, dim: units.Dimension | None = None) -> float:
    """A number; with ``dim``, also a string with a unit (``"64 MB"``, ``"1.8 GHz"``) read by
    :func:`simcore.units.parse`, the convention at every edge."""
    if isinstance(v, bool):
        raise SimcoreError(f"expected a number, got {show(v)}", field=name)
    try:
        if dim is not None:
            x = units.parse(v if isinstance(v, str | int | float) else float(v), dim)
        elif isinstance(v, str):
            raise SimcoreError(f"expected a number, got the string {show(v)}", field=name)
        else:
            x = float(v)
    except (TypeError, ValueError, OverflowError, units.UnitError) as e:
        raise SimcoreError(f"cannot read {show(v)} as a number: {e}", field=name) from None
    if not np.isfinite(x):
        raise SimcoreError(f"expected a finite number, got {show(v)}", field=name)
    return x


def _int(v: Any, name: str, low: float = 1.0) -> float:
    """A count (a GEMM dimension, heads, parameters): an integer, or a float with an integral value
    such as ``7e9``; never a bool, a string or a fraction."""
    if isinstance(v, str):
        raise SimcoreError(f"expected an integer, got the string {show(v)}", field=name)
    if isinstance(v, bool | np.bool_):
        raise SimcoreError(f"expected an integer, got {v!r}", field=name)
    x = _num(v, name)
    if not x.is_integer():
        raise SimcoreError(f"expected an integer, got {show(v)}", field=name)
    if x < low:
        raise SimcoreError(f"must be at least {low:g} (got {show(v)})", field=name)
    return x


def _flag(v: Any, name: str) -> bool:
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise SimcoreError(f"expected true or false (got {show(v)})", field=name)


def _text(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise SimcoreError(f"expected a string, got {type(v).__name__} {show(v)}", field=name)
    return v


KINDS = ("gemm", "attention", "elementwise", "norm", "softmax", "reduction", "memory", "copy", "optimizer")
SHAPE_KEYS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch", "scaling"),
    "attention": (
        "batch",
        "heads",
        "seq",
        "head_dim",
        "causal",
        "backward",
        "kv_heads",
        "kv_seq",
        "backend",
        "mask",
        "dropout",
    ),  # fmt: skip
    "memory": ("name", "bytes", "numel", "flops", "backward", "rows"),
    "optimizer": ("params", "optimizer", "fused", "master_weights"),
}
"""The shape keywords each op family takes (:func:`shape_family`), in the order the CLI lists them."""


def shape_family(kind: str) -> str:
    """The family whose shape keywords a kind takes: ``gemm``, ``attention``, ``optimizer``, else
    ``memory``."""
    return kind if kind in ("gemm", "attention", "optimizer") else "memory"


_NORM_NAMES = ("layernorm", "rmsnorm", "layernorm_bwd", "rmsnorm_bwd")
REDUCTIONS = ("sum", "mean", "max", "amax", "norm")
"""Reductions of a tensor ``op_time("reduction", name=...)`` prices (``norm``: a vector 2-norm)."""


def _resolve_device(device: str | Device) -> Device:
    if isinstance(device, Device):
        return device
    if not isinstance(device, str):
        raise SimcoreError(
            f"expected a device name (e.g. 'h200') or a Device, got {type(device).__name__} {device!r}",
            field="device",
        )
    from simcore.specs.registry import default_registry

    dev = default_registry().find(device)[1]
    if not isinstance(dev, Device):
        from simcore.specs.hardware import System

        if isinstance(dev, System):
            return default_registry().device(dev.device)
        raise SimcoreError(f"{device!r} is a link, not a device", field="device")
    return dev


def op_cost(
    kind: str,
    dev: Device,
    prof: ComputeProfile,
    dtype: str = "bf16",
    l2_reuse: bool = True,
    clock_hz: float | None = None,
    **shape: Any,
) -> tuple[OpCost, dict[str, Any]]:
    """Dispatch ``kind`` with keyword ``shape`` to the op family; returns the cost and the
    normalised shape. Raises :class:`SimcoreError` for unknown kinds or shape keywords."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise SimcoreError(f"unknown op kind {kind!r}; known: {', '.join(KINDS)}", field="kind")
    family = shape_family(kind)
    allowed = set(SHAPE_KEYS[family])
    unknown = sorted(set(shape) - allowed)
    if unknown:
        raise SimcoreError(
            f"unknown shape keyword(s) {', '.join(unknown)} for {kind}; expected {', '.join(sorted(allowed))}",
            field="shape",
        )
    if family == "gemm":
        for key in ("m", "n", "k"):
            if key not in shape:
                raise SimcoreError("gemm needs m, n and k", field=key)
        s: dict[str, Any] = {key: _int(shape[key], key) for key in ("m", "n", "k")}
        s["batch"] = _int(shape.get("batch", 1), "batch")
        if dtype not in GEMM_DTYPES:
            raise SimcoreError(f"unknown dtype {dtype!r}; known: {', '.join(GEMM_DTYPES)}", field="dtype")
        # FP8's scaling picks the kernel family: row-wise (default) or per-tensor (docs/compute.md, "FP8 GEMMs by scaling")
        scaling = _text(shape.get("scaling") or "row", "scaling")
        if scaling not in ("row", "tensor"):
            raise SimcoreError(f"unknown scaling {scaling!r}; known: row, tensor", field="scaling")
        if dtype == "fp8":
            s["scaling"] = scaling
        elif shape.get("scaling") is not None:
            raise SimcoreError(f"scaling applies to fp8 GEMMs only (dtype is {dtype})", field="scaling")
        return gemm(
            dev, prof, s["m"], s["n"], s["k"], dtype, s["batch"], l2_reuse, clock_hz, per_tensor=scaling == "tensor"
        ), s
    if family == "attention":
        for key in ("batch", "heads", "seq", "head_dim"):
            if key not in shape:
                raise SimcoreError("attention needs batch, heads, seq and head_dim", field=key)
        a: dict[str, Any] = {key: _int(shape[key], key) for key in ("batch", "heads", "seq", "head_dim")}
        a["causal"] = _flag(shape.get("causal", True), "causal")
        a["backward"] = _flag(shape.get("backward", False), "backward")
        a["kv_heads"] = (
            _int(shape["kv_heads"], "kv_heads") if shape.get("kv_heads") is not None else a["heads"]
        )
        a["kv_seq"] = _int(shape["kv_seq"], "kv_seq") if shape.get("kv_seq") is not None else a["seq"]
        if a["heads"] % a["kv_heads"] != 0:
            raise SimcoreError(
                f"heads ({a['heads']:g}) must be a multiple of kv_heads ({a['kv_heads']:g})", field="kv_heads"
            )
        a["mask"] = _flag(shape.get("mask", False), "mask")
        a["backend"] = _text(shape.get("backend") or "auto", "backend")
        if a["backend"] == "auto":
            gqa = a["kv_heads"] < a["heads"]
            a["backend"] = default_attention_backend(dev, dtype, a["head_dim"], a["mask"], gqa)
            if a["backend"] == "eager":
                raise SimcoreError(
                    f"PyTorch's SDPA runs no fused kernel for {dtype} attention at head_dim {a['head_dim']:g}"
                    f"{' with a mask' if a['mask'] else ''}{' over grouped kv heads' if gqa else ''} (its math "
                    "fallback: price its GEMMs and softmax)",
                    field="backend",
                )
        a["dropout"] = _num(shape.get("dropout") or 0.0, "dropout")
        if not 0.0 <= a["dropout"] < 1.0:
            raise SimcoreError(f"dropout must be in [0, 1) (got {a['dropout']!r})", field="dropout")
        c = attention(
            dev, prof, a["batch"], a["heads"], a["seq"], a["head_dim"], a["causal"], a["backward"],
            a["kv_heads"], a["kv_seq"], dtype, l2_reuse, clock_hz, a["backend"], a["mask"], a["dropout"],
        )  # fmt: skip
        return c, a
    if family == "optimizer":
        if "params" not in shape:
            raise SimcoreError("optimizer needs params (number of parameters)", field="params")
        o: dict[str, Any] = {"params": _int(shape["params"], "params")}
        o["optimizer"] = _text(shape.get("optimizer", "adamw"), "optimizer")
        o["fused"] = _flag(shape.get("fused", True), "fused")
        o["master_weights"] = _flag(shape.get("master_weights", True), "master_weights")
        return optimizer_step(dev, prof, o["params"], o["optimizer"], o["fused"], o["master_weights"]), o
    # memory-bound
    default = {"norm": "rmsnorm", "softmax": "softmax", "copy": "copy", "reduction": "sum"}.get(kind)
    name = canonical_op_name(_text(shape.get("name") or default or "", "name"))
    if not name:
        raise SimcoreError(f"{kind} needs name (one of {', '.join(memory_op_names())})", field="name")
    if _flag(shape.get("backward", False), "backward") and not name.endswith("_bwd"):
        name += "_bwd"
    if kind == "norm" and name not in _NORM_NAMES:
        raise SimcoreError(f"norm name must be one of {', '.join(_NORM_NAMES)} (got {name!r})", field="name")
    if kind == "reduction" and name.removesuffix("_bwd") not in REDUCTIONS:
        raise SimcoreError(
            f"reduction name must be one of {', '.join(REDUCTIONS)} (got {name!r})", field="name"
        )
    known = name in memory_op_names()
    if not known and name not in prof.memory.ops:
        raise SimcoreError(
            f"unknown memory-bound op {name!r}; known: {', '.join(memory_op_names())}", field="name"
        )
    elt = _dtype_bytes(dtype)
    if shape.get("bytes") is not None:
        nbytes = _num(shape["bytes"], "bytes", "bytes")
        if nbytes <= 0:
            raise SimcoreError(f"must be positive (got {shape['bytes']!r})", field="bytes")
    elif shape.get("numel") is not None:
        if not known:
            raise SimcoreError(f"give bytes for {name!r} (no byte convention)", field="bytes")
        nbytes = float(memory_op_traffic(name, _int(shape["numel"], "numel"), elt)[0])
    else:
        raise SimcoreError(f"{kind} needs bytes (bytes moved, e.g. '64 MB') or numel", field="bytes")
    flops = _num(shape["flops"], "flops", "flops") if shape.get("flops") is not None else None
    rows = _int(shape["rows"], "rows") if shape.get("rows") is not None else None
    cost = memory_op(dev, prof, name, nbytes, flops, elt, rows, l2_reuse)
    if name in PRODUCT_BEFORE:
        # the whole PyTorch op: the product kernel it launches first, then its own
        p = memory_op(dev, prof, PRODUCT_BEFORE[name], nbytes, 0.0, elt, None, l2_reuse)
        cost = _cost(
            cost.time_s + p.time_s,
            cost.flops,
            2.0 * nbytes,
            cost.compute_time_s,
            cost.memory_time_s + p.memory_time_s,
        )
    out: dict[str, Any] = {"name": name, "bytes": nbytes, "flops": float(cost.flops)}
    if rows is not None:
        out["rows"] = rows
    return cost, out


def op_family(kind: str, shape: dict[str, Any]) -> str:
    """Family of an op for host-overhead purposes: gemm, attention_fwd, attention_bwd, memory,
    memory_bwd or optimizer."""
    if kind == "gemm":
        return "gemm"
    if kind == "attention":
        return "attention_bwd" if shape.get("backward") else "attention_fwd"
    if kind == "optimizer":
        return "optimizer"
    return "memory_bwd" if str(shape.get("name", "")).endswith("_bwd") else "memory"


def op_time(
    kind: str,
    device: str | Device = "h200",
    dtype: str = "bf16",
    framework: str = "eager",
    calibration: str | None = None,
    cold_cache: bool = False,
    clock_hz: float | str | None = None,
    **shape: Any,
) -> OpResult:
    """Predicted time of one kernel on ``device`` (seconds, with FLOP, bytes, bound, efficiency).

    ``kind`` is gemm (``m, n, k[, batch]``), attention (``batch, heads, seq, head_dim[, causal,
    backward, kv_heads, kv_seq, backend, mask, dropout]``; ``backend`` ``auto`` or none: the kernels plain
    PyTorch's SDPA picks on ``device``, :func:`default_attention_backend`), elementwise / norm / softmax / reduction / copy / memory (``name`` and
    ``bytes`` moved, or ``numel``; optional ``flops``) or optimizer (``params[, optimizer, fused,
    master_weights]``). ``framework`` (eager | cuda_graphs | compiled) sets the host launch
    overhead. ``cold_cache=True`` reads operands from HBM even when they would fit the L2 (the
    default matches back-to-back benchmark calls, where they stay resident). ``clock_hz`` (a
    number or ``"1.8 GHz"``) prices compute at that SM clock instead of the sustained clock of the
    calibration sweep. Unknown kinds or shape keywords raise :class:`SimcoreError`.
    """
    _text(kind, "kind")
    _text(dtype, "dtype")
    dev = _resolve_device(device)
    if not isinstance(framework, str) or framework not in FRAMEWORKS:
        raise SimcoreError(
            f"unknown framework {framework!r}; known: {', '.join(FRAMEWORKS)}", field="framework"
        )
    if isinstance(calibration, os.PathLike):
        calibration = os.fspath(calibration)
    if calibration is not None and not isinstance(calibration, str):
        raise SimcoreError(
            f"expected a profile name or YAML path, got {type(calibration).__name__} {calibration!r}",
            field="calibration",
        )
    cold_cache = _flag(cold_cache, "cold_cache")
    prof = load_profile(dev, calibration)
    clk = None if clock_hz is None else _num(clock_hz, "clock_hz", "frequency")
    cost, norm_shape = op_cost(kind, dev, prof, dtype, not cold_cache, clk, **shape)
    kt = float(cost.time_s)
    launch = launch_overhead(prof, framework, op_family(kind, norm_shape))
    if framework == "eager" and "name" in norm_shape:
        op = prof.memory.ops.get(str(norm_shape["name"]))
        if op is not None and op.host is not None:
            launch = op.host
    if framework == "eager" and kind == "optimizer":
        oz = prof.optimizer.get(f"{norm_shape['optimizer']}_{'fused' if norm_shape['fused'] else 'unfused'}")
        if oz is not None and oz.host is not None:
            launch = oz.host
    total = float(with_launch(kt, launch, prof.launch_mode, prof.gap.get(framework, 0.0)))
    peak = dev.peak_flops(dtype if kind in ("gemm", "attention") else "fp32")
    bw = dev.memory.bandwidth
    fl, nb = float(cost.flops), float(cost.bytes)
    tc, tm = float(cost.compute_time_s), float(cost.memory_time_s)
    ideal = max(fl / peak, nb / bw)
    if total - max(tc, tm) > max(tc, tm):
        bound: Literal["compute", "memory", "latency"] = "latency"
    else:
        bound = "compute" if tc >= tm else "memory"
    cal = f"{prof.transferred_from or prof.device} profile"
    if prof.transferred_from:
        cal += f" transferred to {dev.name} (efficiencies measured on {prof.transferred_from})"
        if (own := engine_gemm_note(prof)) is not None:
            cal += f"; {own}"
    if prof.provisional:
        cal += " (provisional: neutral defaults, not fitted on measurements)"
    return OpResult(
        kind=kind,
        device=dev.name,
        dtype=dtype,
        framework=framework,
        shape=norm_shape,
        time_s=total,
        kernel_time_s=kt,
        launch_overhead_s=launch,
        flops=fl,
        bytes=nb,
        arithmetic_intensity=fl / nb if nb > 0 else float("inf"),
        compute_time_s=tc,
        memory_time_s=tm,
        bound=bound,
        efficiency=ideal / kt if kt > 0 else 0.0,
        achieved_flops_per_s=fl / kt if kt > 0 else 0.0,
        achieved_bytes_per_s=nb / kt if kt > 0 else 0.0,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bw,
        calibration=cal,
        transferred_from=prof.transferred_from,
        provisional=prof.provisional,
    )


__all__ = [
    "FRAMEWORKS",
    "KINDS",
    "OpCost",
    "OpResult",
    "attention",
    "canonical_op_name",
    "clock_scale",
    "gemm",
    "launch_overhead",
    "load_profile",
    "memory_op",
    "memory_op_names",
    "memory_op_traffic",
    "op_cost",
    "op_family",
    "op_time",
    "optimizer_step",
    "stream_time",
    "sustained_clock",
    "power_cap_time",
    "gemm_sustained_fraction",
    "power_fractions",
    "POWER_EXPONENT",
    "with_launch",
]
