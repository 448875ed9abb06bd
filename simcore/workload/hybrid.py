"""Lowering of hybrid Mamba-Transformer layers: a Mamba-2 layer's kernels (Megatron-Core's ``MambaMixer``
with mamba_ssm's SSD kernels) and the layers of a ``model.hybrid_pattern``, as ops of one rank.

The Mamba-2 layer follows Megatron-Core's training path (``megatron/core/ssm/mamba_mixer.py``:
``in_proj`` with the pre-norm fused, ``mamba_split_conv1d_scan_combined``, the group RMSNorm, ``out_proj``)
and mamba_ssm's kernels (``mamba_ssm/ops/triton/ssd_combined.py``): the causal conv1d, ``_chunk_cumsum``,
``_chunk_state``, ``_state_passing``, ``_bmm_chunk`` (``C B^T``), ``_chunk_scan``; its backward recomputes the
convolution, the cumsum, ``C B^T``, the chunk states and their passing, then runs ``_chunk_scan_bwd_dz``,
``_chunk_scan_bwd_dstates``, ``_state_passing_bwd``, ``_chunk_scan_chunk_state_bwd_dx``,
``_chunk_state_bwd_db``, ``_chunk_scan_bwd_dC``, ``_chunk_scan_bwd_dcb``, two ``_bmm_chunk_bwd``,
``_chunk_scan_bwd_ddAcs_stable`` and the conv1d backward.

Each chunk-level matmul of the scan is priced as a batched GEMM of its tile shape (one GEMM per chunk and
head, or group) through the fitted GEMM model: those are small GEMMs (``Q x Q x N``, ``P x N x Q``, ...,
Q = 128 or 256, N = 128 or 256, P = 64), which the fitted model prices at the low efficiency it gives
cuBLAS's batched small GEMMs. mamba_ssm runs them as Triton kernels fused with their elementwise work (the
decays, ``dt``, the ``D`` skip), which no calibration sweep here has measured; the elementwise passes are
priced as the streaming kernels below. See docs/compute.md, "Mamba-2 layers and hybrid models".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simcore.specs.scenario import ModelSpec
from simcore.workload import lowering as L
from simcore.workload.lowering import Layout, Num, Op, fused_mem_op, mem_op
from simcore.workload.ssm import LayerKind, causal_fraction, mamba_shape


def _scan_sizes(m: ModelSpec, lay: Layout) -> tuple[Num, Num, Num, Num, Num]:
    """(tokens the scan sees on a rank, heads, groups, chunks, group replication) of one rank: context
    parallelism's all-to-all gives each rank the whole sequence of ``heads / (tp cp)`` heads
    (Megatron-Core's ``MambaContextParallel``); a rank with fewer groups than CP ranks holds one group,
    replicated ``cp / (groups / tp)`` times."""
    s = mamba_shape(m)
    tc = np.asarray(lay.tp, dtype=float) * np.asarray(lay.cp, dtype=float)
    g_tp = s.groups / np.asarray(lay.tp, dtype=float)
    groups = np.maximum(s.groups / tc, 1.0)
    repeat = np.maximum(np.asarray(lay.cp, dtype=float) / g_tp, 1.0)
    tokens = lay.micro_batch * lay.seq
    chunks = lay.micro_batch * np.ceil(np.asarray(lay.seq, dtype=float) / s.chunk)
    return tokens, s.heads / tc, groups, chunks, repeat


def ssd_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """The convolution and the SSD scan of one Mamba layer's forward on a rank (the kernels of
    ``mamba_split_conv1d_scan_combined``, gate included), the first op carrying the backward's kernels."""
    s = mamba_shape(m)
    b = lay.act_bytes
    dt = L.hp_dtype(lay.dtype)  # the scan's operands stay bf16 under any GEMM recipe
    T, H, G, nc, _r = _scan_sizes(m, lay)
    Q, N, P = s.chunk, s.state, s.head_dim
    di = H * P
    conv_numel = T * (di + 2 * G * N)
    states = nc * H * P * N
    cf = causal_fraction(Q)

    def gemm(name: str, mm: int, n: int, k: int, batch: Num, count: float = 1.0) -> Op:
        return L._gemm(name, mm, n, k, dt, "ssm", count, batch)

    def stream(name: str, numel: Num, nbytes: float) -> Op:
        # a streaming kernel of ``nbytes`` read + written per element (priced on the copy curve)
        op = fused_mem_op("copy", numel, b, nbytes, 0.0, "ssm")
        return Op(name, op.kind, op.category, op.args, op.count)

    # causal depthwise conv1d + SiLU over x, B, C: each input read once, each output written once
    conv = stream("ssm_conv1d", conv_numel, 2 * b)
    # dt + bias, softplus, and the decays' cumsum within each chunk: dt read, fp32 dt and cumsum written
    cumsum = stream("ssm_chunk_cumsum", T * H, b + 8.0)
    fwd_rest = [
        gemm("ssm_chunk_state", P, N, Q, nc * H),  # B^T (x dt decay): N x P per chunk and head
        stream("ssm_state_passing", states, 8.0),  # fp32 states read and written, chunk after chunk
        gemm("ssm_bmm_cb", Q, Q, N, nc * G),  # C B^T per chunk and group
        gemm("ssm_chunk_scan_intra", Q, P, Q, nc * H, cf),  # (C B^T o decay) (x dt), causal
        gemm("ssm_chunk_scan_states", Q, P, N, nc * H),  # C times the incoming state
        # the D skip and the silu(z) gate: z and x read, the gated and the ungated outputs written
        stream("ssm_chunk_scan_out", T * di, 4 * b),
    ]
    bwd = [
        # recomputed: the convolution, the cumsum, C B^T, the chunk states and their passing
        stream("ssm_conv1d_recompute", conv_numel, 2 * b),
        stream("ssm_chunk_cumsum_recompute", T * H, b + 8.0),
        gemm("ssm_bmm_cb_recompute", Q, Q, N, nc * G),
        gemm("ssm_chunk_state_recompute", P, N, Q, nc * H),
        stream("ssm_state_passing_recompute", states, 8.0),
        # dz and the gate's gradient: x, z, out, dout read, dz and dout' written
        stream("ssm_chunk_scan_bwd_dz", T * di, 6 * b),
        gemm("ssm_chunk_scan_bwd_dstates", N, P, Q, nc * H),  # C^T dout
        stream("ssm_state_passing_bwd", states, 12.0),
        gemm("ssm_bwd_dx_intra", Q, P, Q, nc * H, cf),  # (C B^T)^T dout, causal
        gemm("ssm_bwd_dx_states", Q, P, N, nc * H),  # B dstates
        gemm("ssm_chunk_state_bwd_db", Q, N, P, nc * H),  # x dstates^T
        gemm("ssm_chunk_scan_bwd_dc", Q, N, P, nc * H),  # dout states^T
        gemm("ssm_chunk_scan_bwd_dcb", Q, Q, P, nc * H, cf),  # dout x^T
        gemm("ssm_bmm_chunk_bwd_db", Q, N, Q, nc * G),  # dCB B
        gemm("ssm_bmm_chunk_bwd_dc", Q, N, Q, nc * G),  # dCB^T C
        gemm("ssm_bwd_ddacs", Q, Q, P, nc * H, cf),  # dout x^T once more, for the decays' gradient
        stream("ssm_chunk_cumsum_bwd", T * H, 8.0 + b),
        # conv1d backward: the input and the gradient read, the input's gradient written
        stream("ssm_conv1d_bwd", conv_numel, 3 * b),
    ]
    first = Op(conv.name, conv.kind, conv.category, {**conv.args, "bwd_ops": bwd}, conv.count)
    rest = [Op(o.name, o.kind, o.category, {**o.args, "bwd_ops": []}, o.count) for o in [cumsum, *fwd_rest]]
    return [first, *rest]


def mamba_decode_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """The recurrent step of one Mamba layer for one new token a sequence (``causal_conv1d_update`` and
    ``selective_state_update``): the convolution's window (``K - 1`` inputs a channel) read and shifted,
    and each head's ``P x N`` state read and written once. Constant in the context length."""
    s = mamba_shape(m)
    b = lay.act_bytes
    t = np.asarray(lay.tp, dtype=float)
    T = lay.tokens
    k = s.conv_kernel
    conv = fused_mem_op("copy", T * s.conv_dim / t, b, 2 * k * b, 0.0, "ssm")
    state = fused_mem_op("copy", T * s.heads / t * s.head_dim * s.state, b, 2 * b, 0.0, "ssm")
    return [
        Op("ssm_conv1d_update", conv.kind, conv.category, conv.args),
        Op("ssm_state_update", state.kind, state.category, state.args),
    ]


def group_norm(m: ModelSpec, lay: Layout) -> Op:
    """The gated group RMSNorm over the scan's output (``RMSNormGated``, ``norm_before_gate=False``), priced
    as the model's norm over ``T x d_inner / t`` elements of ``T`` rows."""
    s = mamba_shape(m)
    T = lay.tokens
    return mem_op(L.norm_name(m), T * s.d_inner / lay.tp, lay.act_bytes, "norm", rows=T)


def mamba_block_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """Forward ops of one Mamba-2 layer on a rank: the pre-norm, ``in_proj`` (column-parallel: heads,
    groups and the inner width split over TP), under CP the all-to-all to whole sequences of ``heads / cp``
    heads and back (Megatron-Core's ``MambaContextParallel``), the layout copies (``l b d`` to ``b l d``
    and back), the convolution and SSD scan (or, in a decode step, the recurrent update), the group
    RMSNorm, ``out_proj`` (row-parallel), the residual add and the block's TP collective."""
    s = mamba_shape(m)
    T = lay.tokens
    t = lay.tp
    b = lay.act_bytes
    tsp = T / lay.sp_div
    ops: list[Op] = [*L.norm_ops(m, lay, tsp)]
    ops.append(L._gemm("in_proj", T, s.in_proj_dim / t, s.hidden, lay.dtype))
    decode = lay.kv_seq is not None
    cp1 = isinstance(lay.cp, int | float) and lay.cp == 1
    if not cp1 and not decode:
        _T, _H, _G, _nc, r = _scan_sizes(m, lay)
        pre = T * (2 * s.d_inner + 2 * s.groups * s.state * r + s.heads) / t * b
        ops.append(L._comm("ssm_cp_a2a_in", "all_to_all", pre, "cp", "cp_comm"))
    if decode:
        ops.extend(mamba_decode_fwd(m, lay))
    else:
        ops.append(mem_op("copy", T * s.in_proj_dim / t, b, "elementwise"))
        ops.extend(ssd_fwd(m, lay))
        ops.append(mem_op("copy", T * s.d_inner / t, b, "elementwise"))
    if not cp1 and not decode:
        ops.append(L._comm("ssm_cp_a2a_out", "all_to_all", T * s.d_inner / t * b, "cp", "cp_comm"))
    ops.append(group_norm(m, lay))
    ops.append(L._gemm("out_proj", T, s.hidden, s.d_inner / t, lay.dtype))
    ops.extend(L.residual_add(m, lay, tsp))
    ops.extend(L.tp_comm_fwd(m, lay, blocks=1))
    return ops


def layer_fwd(m: ModelSpec, lay: Layout, kind: LayerKind) -> list[Op]:
    """All forward ops of one layer of kind ``kind`` on one rank (:data:`~simcore.workload.ssm.LayerKind`):
    a transformer layer (``False`` / ``True``: dense / MoE, :func:`simcore.workload.lowering.layer_fwd`) or
    a hybrid pattern's layer, each with its pre-norm, residual add and one block's TP collectives: ``M``
    Mamba-2, ``*`` attention (and ring attention's exchange under CP), ``-`` MLP, ``E`` MoE."""
    if isinstance(kind, bool):
        return L.layer_fwd(m, lay, moe_layer=kind)
    if kind == "M":
        return mamba_block_fwd(m, lay)
    if kind == "*":
        return [*L.attention_block_fwd(m, lay), *L.tp_comm_fwd(m, lay, blocks=1), *L.cp_exchange(m, lay)]
    tsp = lay.tokens / lay.sp_div
    block = L.moe_block_fwd(m, lay) if kind == "E" else L.mlp_block_fwd(m, lay)
    return [*L.norm_ops(m, lay, tsp), *block, *L.residual_add(m, lay, tsp), *L.tp_comm_fwd(m, lay, blocks=1)]


def recompute_fwd(m: ModelSpec, lay: Layout, kind: LayerKind, modules: Sequence[str]) -> list[Op]:
    """Ops selective recompute re-runs before the backward of a layer of kind ``kind``
    (:func:`simcore.workload.lowering.recompute_fwd` for transformer layers; in a hybrid each module applies
    to the layers that have it: ``core_attn`` the ``*`` layers' attention core, ``mlp`` the ``-`` layers'
    MLP, ``moe`` / ``moe_act`` / ``shared_experts`` the ``E`` layers', ``layernorm`` every layer's
    pre-norm; Megatron-Core has no recompute module for a Mamba mixer)."""
    if isinstance(kind, bool):
        return L.recompute_fwd(m, lay, kind, modules)
    ops = layer_fwd(m, lay, kind)
    moe = L.moe_block_fwd(m, lay) if kind == "E" else []
    picks: dict[str, list[Op]] = {
        "core_attn": [o for o in ops if o.category == "attention"],
        "mla_up_proj": [],
        "layernorm": L.norm_ops(m, lay, lay.tokens / lay.sp_div),
        "mlp": L.mlp_block_fwd(m, lay) if kind == "-" else [],
        "moe": moe,
        "moe_act": [o for o in moe if o.name.startswith("expert_") and o.category == "elementwise"],
        "shared_experts": [o for o in moe if o.name.startswith("shared_")],
    }
    return [o for mod in modules for o in picks[mod]]
