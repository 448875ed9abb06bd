"""Core kernel-time formulas (pure, vectorised numpy), shared by the cost API and the fitter.

Every function here takes plain hardware numbers (:class:`HW`) and a parameter object from
:mod:`simcore.specs.profile`, broadcasts its array arguments and returns device-side kernel
time in seconds (no host launch overhead). Shapes are element counts; bytes and FLOP are SI.
See ``docs/compute.md`` for the derivations.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from simcore.specs.profile import AttentionParams, GemmParams, MemoryParams

F = NDArray[np.float64]

# Candidate CTA tiles (rows x cols of the output) and split-K factors a GEMM library chooses
# among. This is kernel *structure* (the tile menu of cuBLAS/CUTLASS on Hopper-class GPUs), not
# a fitted number: the model takes the fastest candidate, like the library's heuristic aims to.
GEMM_TILES: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128), (64, 64))
GEMM_SPLITS: tuple[int, ...] = (1, 2, 4, 8, 16)
_CHUNK = 16384
_MMA_ROWS = 64.0  # smallest row tile of a Hopper warpgroup MMA (wgmma M = 64)
SKINNY_ROWS = 128.0
"""Rows from which a GEMM's operands stream at the full rate where ``GemmParams.skinny_bw`` is set (the
128-row tile of the kernels cuBLASLt picks from there on)."""


class HW(NamedTuple):
    """Hardware numbers a kernel formula needs (SI units)."""

    peak: float
    """Dense peak FLOP/s for the op's dtype."""
    bandwidth: float
    """HBM bytes/s."""
    sm_count: int
    l2_cache: float
    """Bytes."""
    fp32_peak: float
    """Non-tensor fp32 FLOP/s (elementwise arithmetic)."""


def f64(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def _flat(*xs: ArrayLike) -> list[F]:
    """Broadcast and flatten to 1-d (scalars and arrays then take the same numpy code paths, so
    a scalar call returns exactly the element of an array call)."""
    return [a.reshape(-1) for a in np.broadcast_arrays(*(np.atleast_1d(f64(x)) for x in xs))]


def smoothmax(a: F, b: F, p: float) -> F:
    """``(a^p + b^p)^(1/p)``: a roofline corner that is soft where both limits are close."""
    hi = np.maximum(a, b)
    lo = np.minimum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(hi > 0, lo / np.where(hi > 0, hi, 1.0), 0.0)
    out: F = hi * (1.0 + r**p) ** (1.0 / p)
    return out


def _ceil_div(a: F, b: float | F) -> F:
    out: F = np.ceil(a / b - 1e-9)
    return np.maximum(out, 1.0)


def l2_resident(hw: HW, mp: MemoryParams | None, nbytes: F) -> F | float:
    """Fraction (0..1) of a working set of ``nbytes`` served from L2 between back-to-back calls
    (the fading part of :func:`l2_boost`); 0 without ``mp`` (operands come from HBM)."""
    if mp is None or mp.l2_speedup == 1.0:
        return 0.0
    x = nbytes / (mp.l2_fraction * hw.l2_cache)
    out: F = 1.0 / (1.0 + x**4)
    return out


def l2_boost(hw: HW, mp: MemoryParams | None, nbytes: F) -> F | float:
    """Bandwidth multiplier for a working set of ``nbytes``: ``l2_speedup`` when it fits well
    inside the L2 (and stays resident between back-to-back calls), fading to 1 past
    ``l2_fraction`` of the L2 size. Monotone: ``nbytes / boost`` never decreases with ``nbytes``."""
    if mp is None or mp.l2_speedup == 1.0:
        return 1.0
    return 1.0 + (mp.l2_speedup - 1.0) * l2_resident(hw, mp, nbytes)


# ---------------------------------------------------------------------------------------------
# GEMM


def misaligned_rows(in_bytes: float, *strides: ArrayLike) -> NDArray[np.bool_]:
    """Whether any of a GEMM's operand row strides (elements of ``in_bytes`` bytes) is not a 16-byte
    multiple: then cuBLAS cannot use TMA / vector loads and runs its misaligned kernels at
    ``GemmParams.eff_misaligned`` of the rate (docs/compute.md, "Stride alignment")."""
    out = np.zeros(np.broadcast_shapes(*(np.shape(s) for s in strides)), dtype=bool)
    for s in strides:
        out = out | (np.mod(f64(s) * in_bytes, 16.0) != 0)
    return out


class GemmTimes(NamedTuple):
    time: F
    compute: F
    memory: F


def gemm_time(
    hw: HW,
    p: GemmParams,
    m: ArrayLike,
    n: ArrayLike,
    k: ArrayLike,
    batch: ArrayLike,
    in_bytes: float,
    out_bytes: float,
    mp: MemoryParams | None = None,
    misaligned: ArrayLike | None = None,
) -> GemmTimes:
    """Kernel time of ``batch`` GEMMs ``(m x k) @ (k x n)`` (seconds), with its compute and memory parts.

    For each candidate tile ``tm x tn`` and split-K factor ``s``: ``ctas = ceil(m/tm) ceil(n/tn)
    batch s`` run in ``waves = ceil(ctas / sm_count)``; a tile takes ``2 (tm tn + load_cost (tm+tn))
    (ceil(k/s) + k_overhead) / (eff_peak peak / sm_count)``, times ``1 / eff_misaligned`` when the
    row strides are not 16-byte aligned (row-major operands: ``k`` and ``n``; ``misaligned`` says it
    where the operands' strides are known, e.g. a transposed view strided by ``m``). Memory time is the minimal
    bytes (plus fp32 split-K partials) over ``eff_bw`` of the bandwidth, raised by the L2 boost of
    ``mp`` for working sets that stay in L2 between calls; with ``cta_bw``, each wave also takes at
    least one CTA's operand tiles ``(min(m, tm) + min(n, tn)) ceil(k / s)`` elements over
    ``cta_bw x eff_bw x bandwidth / sm_count`` (a grid of few deep CTAs cannot reach the HBM rate;
    raised by the L2 boost like the bandwidth when the operands stay in L2). With ``skinny_bw``, both
    streaming rates are ``skinny_bw + (1 - skinny_bw) min(m / SKINNY_ROWS, 1)`` of that (a kernel of few rows
    streams slower, so such a GEMM may take longer than one of more rows, as measured). A split-K candidate pays ``split_t0``;
    operands from HBM add ``t0_hbm`` (scaled by the part not resident in L2). The fastest
    candidate wins.
    """
    m_, n_, k_, b_ = _flat(m, n, k, batch)
    shape = np.broadcast_shapes(*(np.shape(v) for v in (m, n, k, batch)))
    sm = float(hw.sm_count)
    if misaligned is None:  # row-major operands: A strided by k, B and C by n
        misaligned = misaligned_rows(in_bytes, k_, n_)
    else:
        misaligned = np.broadcast_to(np.asarray(misaligned, dtype=bool), shape).ravel()
    rate_sm = hw.peak * p.eff_peak / sm * np.where(misaligned, p.eff_misaligned, 1.0)
    base_bytes = b_ * ((m_ * k_ + k_ * n_) * in_bytes + m_ * n_ * out_bytes)
    bw = np.broadcast_to(hw.bandwidth * p.eff_bw * l2_boost(hw, mp, base_bytes), m_.shape)
    if p.skinny_bw is not None:  # few rows: the library's GEMV-like kernels stream slower
        bw = bw * (p.skinny_bw + (1.0 - p.skinny_bw) * np.minimum(m_ / SKINNY_ROWS, 1.0))
    t_fixed = p.t0 + p.t0_hbm * (1.0 - np.broadcast_to(l2_resident(hw, mp, base_bytes), m_.shape))
    cand = [(tm, tn, sp) for tm, tn in GEMM_TILES for sp in GEMM_SPLITS]
    tm_c = np.array([c[0] for c in cand], dtype=np.float64)[:, None]
    tn_c = np.array([c[1] for c in cand], dtype=np.float64)[:, None]
    s_c = np.array([c[2] for c in cand], dtype=np.float64)[:, None]
    work_c = 2.0 * (tm_c * tn_c + p.load_cost * (tm_c + tn_c))
    partial_c = np.where(s_c > 1, 2.0 * 4.0 * s_c, 0.0)  # fp32 partial tiles written and read back
    best = np.empty(m_.shape)
    best_c = np.empty(m_.shape)
    best_m = np.empty(m_.shape)
    for lo in range(0, m_.size, _CHUNK):  # blocks of elements keep temporaries small
        sl = slice(lo, lo + _CHUNK)
        mm, nn, kk, bb = m_[sl][None, :], n_[sl][None, :], k_[sl][None, :], b_[sl][None, :]
        ctas = _ceil_div(mm, tm_c) * _ceil_div(nn, tn_c) * bb * s_c
        waves = _ceil_div(ctas, sm)
        tc = waves * work_c * (_ceil_div(kk, s_c) + p.k_overhead) / rate_sm[sl][None, :]
        bw_c = bw[sl][None, :]
        tmem = (base_bytes[sl][None, :] + partial_c * mm * nn * bb) / bw_c
        t = smoothmax(tc, tmem, p.sharpness)
        if p.cta_bw is not None:
            # one CTA pulls its own operand tiles (real rows/columns only) through one SM at
            # cta_bw x the SM's share of the bandwidth: few, deep CTAs cannot reach the HBM rate
            # (a floor, not a third roofline term: a compute-bound tile overlaps its loads)
            per_cta = (np.minimum(mm, tm_c) + np.minimum(nn, tn_c)) * _ceil_div(kk, s_c) * in_bytes
            t_cta = waves * per_cta / (bw_c * p.cta_bw / sm)
            tmem = np.maximum(tmem, t_cta)
            t = np.maximum(t, t_cta)
        t = t + np.where(s_c > 1, p.split_t0, 0.0)
        j = np.argmin(t, axis=0)
        cols = np.arange(t.shape[1])
        best[sl], best_c[sl], best_m[sl] = t[j, cols], tc[j, cols], tmem[j, cols]
    return GemmTimes(*(v.reshape(shape) for v in (best + t_fixed, best_c, best_m)))


# ---------------------------------------------------------------------------------------------
# attention


def attention_pairs(seq: F, kv_seq: F, causal: F) -> F:
    """Query-key pairs one head attends (bottom-right aligned causal mask when ``causal``)."""
    full = seq * kv_seq
    tri = np.where(
        kv_seq >= seq,
        seq * (kv_seq - seq) + seq * (seq + 1.0) / 2.0,
        kv_seq * (kv_seq + 1.0) / 2.0,
    )
    out: F = np.where(causal > 0, tri, full)
    return out


class AttnTimes(NamedTuple):
    time: F
    compute: F
    memory: F
    flops: F
    bytes: F


def attention_time(
    hw: HW,
    p: AttentionParams,
    batch: ArrayLike,
    heads: ArrayLike,
    seq: ArrayLike,
    head_dim: ArrayLike,
    causal: ArrayLike,
    backward: bool,
    kv_heads: ArrayLike,
    kv_seq: ArrayLike,
    elt_bytes: float,
    mp: MemoryParams | None = None,
    mask: ArrayLike = 0.0,
    dropout: ArrayLike = 0.0,
) -> AttnTimes:
    """Kernel time of fused attention, forward or backward (seconds), and its model FLOPs and bytes.

    Forward: one CTA per ``block_rows`` query rows of one KV head group (GQA query heads of a
    group are packed as rows; split-KV for few CTAs), walking the keys. Backward: one CTA per
    ``block_rows`` keys of one query head, walking the queries. When the grid has fewer than
    ``split_threshold x sm_count`` CTAs the forward splits the KV walk (flash-decoding) with a
    64-row tile. Per column walked, a CTA spends ``f (rows_tile head_dim + real_rows
    head_dim_overhead)`` FLOP-equivalents: MMAs on the padded tile, softmax on the real rows,
    with ``f = 4`` forward and ``10`` backward (the FlashAttention convention: backward = 2.5 x
    forward FLOPs). ``mask`` (1: an explicit additive mask tensor, read and added per score; the
    kernel walks every block, so pass ``causal`` 0) and ``dropout`` (> 0: Philox random numbers and
    a keep test per score) add ``mask_overhead`` / ``dropout_overhead`` to the softmax's work.
    """
    b, h, sq, d, c, kvh, skv, mk, dp = _flat(
        batch, heads, seq, head_dim, causal, kv_heads, kv_seq, mask, dropout
    )
    shape = np.broadcast_shapes(
        *(np.shape(v) for v in (batch, heads, seq, head_dim, causal, kv_heads, kv_seq, mask, dropout))
    )
    sm = float(hw.sm_count)
    br, bc = float(p.block_rows), float(p.block_cols)
    pairs = attention_pairs(sq, skv, c)
    fwd_flops = 4.0 * b * h * pairs * d
    if backward:
        flops = 2.5 * fwd_flops
        q_side, kv_side = 4.0, 4.0  # Q, O, dO read, dQ written; K, V read, dK, dV written
        f = 10.0
    else:
        flops = fwd_flops
        q_side, kv_side = 2.0, 2.0  # Q read, O written; K, V read
        f = 4.0
    nbytes = b * (h * sq * d * q_side + kvh * skv * d * kv_side) * elt_bytes
    rate_sm = hw.peak * p.eff_peak / sm
    bw = hw.bandwidth * p.eff_bw * l2_boost(hw, mp, nbytes)
    if backward:
        groups = b * h
        rows = skv  # keys per head, split across CTAs
        walk_max = sq  # longest walk over queries
        walk_avg = pairs / np.maximum(skv, 1.0) + c * bc / 2.0
    else:
        g = np.maximum(h / np.maximum(kvh, 1.0), 1.0)
        walk_max = skv
        walk_avg = pairs / np.maximum(sq, 1.0) + c * bc / 2.0
        # cuDNN's fprop over prompts: each query head's rows on their own, every CTA walking at least one
        # key block (its one-query calls pack a group's heads as FlashAttention-2 does)
        per_head = p.per_head_tiles & (sq > 1.0)
        groups = b * np.where(per_head, h, kvh)
        rows = np.where(per_head, sq, sq * g)
        walk_avg = np.where(per_head, np.maximum(walk_avg, bc), walk_avg)
    if p.odd_cols is not None and not backward:
        # an odd number of keys: the kernel walks up to ``odd_cols`` of them again (cuDNN's one-query kernel)
        again = np.where(np.mod(skv, 2.0) == 1.0, np.minimum(skv, p.odd_cols), 0.0)
        walk_max, walk_avg = walk_max + again, walk_avg + again
    walk_max = _ceil_div(walk_max, bc) * bc
    walk_avg = np.minimum(walk_avg, walk_max)
    d_factor = 1.0 if p.head_dim_scale is None else 1.0 + d / p.head_dim_scale
    if backward:
        s = np.ones_like(b)
    else:
        # Split-KV (flash-decoding) as FlashAttention-2 chooses it: only when the grid of 64-row
        # blocks leaves the SMs' CTA slots idle, then the smallest split count within 85 % of the
        # best wave efficiency (fa2_num_splits); the split kernel uses 64-row tiles and the KV
        # blocks of its head dim.
        block_n = np.where(d <= 64, 256.0, np.where(d <= 128, 128.0, 64.0))
        s = fa2_num_splits(
            groups * _ceil_div(rows, _MMA_ROWS), p.split_threshold * sm, _ceil_div(skv, block_n)
        )
    split = s > 1
    br_s = np.where(split, np.minimum(br, _MMA_ROWS * _ceil_div(rows, _MMA_ROWS)), br)
    rb = _ceil_div(rows, br_s)
    real_rows = np.minimum(rows, br_s)
    # seconds per column walked by one CTA: MMAs on the padded tile, softmax on the real rows
    score_work = p.head_dim_overhead + p.mask_overhead * mk + p.dropout_overhead * (dp > 0)
    per_col = f * (br_s * d * d_factor + real_rows * score_work) / rate_sm
    waves = _ceil_div(groups * rb * s, sm)
    avg = walk_avg / s + p.kv_overhead
    longest = walk_max / s + p.kv_overhead
    tc = np.maximum(waves * avg, longest) * per_col
    extra = np.where(split, 2.0 * 4.0 * s * b * h * sq * d, 0.0)  # fp32 partial outputs
    tmem = (nbytes + extra) / bw
    t = smoothmax(tc, tmem, p.sharpness) + np.where(split, p.split_t0, 0.0)
    return AttnTimes(*(v.reshape(shape) for v in (t + p.t0, tc, tmem, flops, nbytes)))


FA2_SLOTS_PER_SM = 2.0
"""CTA slots per SM FlashAttention-2's split heuristic counts (128-thread blocks, two per SM)."""


def fa2_num_splits(blocks: F, threshold_blocks: F | float, n_blocks: F, max_splits: int = 128) -> F:
    """FlashAttention-2's ``num_splits_heuristic`` (flash_api.cpp), vectorised: 1 when the grid has
    at least ``threshold_blocks`` CTAs; otherwise, over the split counts that change the KV blocks
    per split, the smallest whose wave efficiency ``w / ceil(w)`` (``w = blocks s / slots``, slots
    = 2 per SM, i.e. ``threshold_blocks / 0.8``) is within 85 % of the best."""
    slots = np.maximum(np.asarray(threshold_blocks, dtype=np.float64) / 0.8, 1.0)
    blocks = np.maximum(blocks, 1.0)
    need = blocks < 0.8 * slots
    if not np.any(need):  # training and prefill grids: never split
        return np.ones_like(blocks)
    top = np.minimum(np.minimum(float(max_splits), slots), n_blocks)
    k_max = int(min(max_splits, np.max(np.where(need, top, 1.0))))
    effs = []
    best = np.zeros_like(blocks)
    for k in range(1, k_max + 1):
        eligible = (k == 1) | (np.ceil(n_blocks / k) != np.ceil(n_blocks / max(k - 1, 1)))
        w = blocks * k / slots
        e = np.where(eligible & (k <= top), w / np.ceil(w), 0.0)
        effs.append(e)
        best = np.maximum(best, e)
    chosen = np.ones_like(blocks)
    found = np.zeros(blocks.shape, dtype=bool)
    for k, e in enumerate(effs, start=1):
        hit = ~found & (e > 0) & (e >= 0.85 * best)
        chosen = np.where(hit, float(k), chosen)
        found |= hit
    out: F = np.where(blocks >= 0.8 * slots, 1.0, chosen)
    return out


# ---------------------------------------------------------------------------------------------
# bandwidth-bound kernels


class MemTimes(NamedTuple):
    time: F
    compute: F
    memory: F


def memory_time(
    hw: HW,
    p: MemoryParams,
    nbytes: ArrayLike,
    flops: ArrayLike,
    op_eff: float = 1.0,
    t0: float | None = None,
    rows: ArrayLike | None = None,
    row_share: float | None = None,
    l2_reuse: bool = True,
    elt_bytes: ArrayLike = 2.0,
    width_factor: ArrayLike = 1.0,
) -> MemTimes:
    """Kernel time of a bandwidth-bound kernel that moves ``nbytes`` (read + written) and does
    ``flops`` of non-tensor arithmetic (seconds). ``width_factor`` multiplies the bandwidth-bound time,
    row limit included (a row-wise op's measured factor at its row width, ``MemoryOpParams.width_factor``),
    in full where the rows fill every SM and in their share of them below.

    Row-wise kernels (softmax, norms, cross-entropy) give one row to a CTA: with ``rows`` and the
    op's ``row_share`` (a CTA streams at ``row_share x bandwidth / sm_count``) the time is at least
    ``ceil(rows / sm_count)`` waves of one row each, which is what makes a few long rows slow
    (row work counted in elements: bytes scaled to 2-byte elements with ``elt_bytes``).
    ``l2_reuse=False`` streams from HBM whatever the size (data not touched since long ago).
    """
    if rows is None or row_share is None:
        nb, fl, wf = _flat(nbytes, flops, width_factor)
        rw = None
        shape = np.broadcast_shapes(np.shape(nbytes), np.shape(flops), np.shape(width_factor))
    else:
        nb, fl, wf, rw = _flat(nbytes, flops, width_factor, rows)
        shape = np.broadcast_shapes(np.shape(nbytes), np.shape(flops), np.shape(width_factor), np.shape(rows))
    tmem = nb / (hw.bandwidth * p.eff_bw * op_eff * l2_boost(hw, p if l2_reuse else None, nb))
    if rw is not None and row_share is not None:
        rw = np.maximum(rw, 1.0)
        bw_cta = row_share * hw.bandwidth * p.eff_bw / hw.sm_count
        # a row's work counts elements (loops over a row are per element, not per byte)
        scale = 2.0 / np.broadcast_to(
            f64(elt_bytes), np.broadcast_shapes(np.shape(elt_bytes), shape)
        ).reshape(-1)
        tmem = np.maximum(tmem, _ceil_div(rw, float(hw.sm_count)) * (nb * scale / rw) / bw_cta)
        # the width factor is a full GPU's (its rows measured on every SM); fewer rows than SMs run
        # on part of it, limited by the row term above: the factor fades with the rows' share
        wf = 1.0 + (wf - 1.0) * np.minimum(rw / hw.sm_count, 1.0)
    tmem = tmem * wf
    tc = fl / (hw.fp32_peak * p.eff_compute)
    t = smoothmax(tmem, tc, p.sharpness) + (p.t0 if t0 is None else t0)
    return MemTimes(t.reshape(shape), tc.reshape(shape), tmem.reshape(shape))
