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

Each of mamba_ssm's Triton kernels (the scan's, the decode state update's, the gated norm's) is one
``ssd`` op: the bytes it reads and writes (fp32 intermediates at 4 bytes) and the FLOPs of the small
matmuls it runs in the same pass, priced at rates fitted on that kernel family's measurements
(``hardware_specs/calibration/ssd-<device>.yaml``, :mod:`simcore.calibration.fit_ssd`): they are
bandwidth-bound streaming kernels whose matmuls add to the time. See docs/compute.md, "Mamba-2 layers
and hybrid models".
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


def ssd_op(name: str, cls: str, nbytes: Num, flops: Num = 0.0, category: str = "ssm", **args: object) -> Op:
    """One of mamba_ssm's Triton kernels: ``nbytes`` read + written, ``flops`` of bf16 tensor-core work,
    priced at the fitted rates of its class (:func:`simcore.compute.ops.ssd_kernel`)."""
    return Op(name, "ssd", category, {"cls": cls, "nbytes": nbytes, "flops": flops, **args})


def ssd_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """The convolution and the SSD scan of one Mamba layer's forward on a rank (the kernels of
    ``mamba_split_conv1d_scan_combined``, gate included), the first op carrying the backward's kernels.

    Each SSD kernel's traffic counts what it reads and writes once (an operand re-read per head of a
    group comes from L2), in the dtypes mamba_ssm keeps: bf16 inputs (``x``, ``z``, ``B``, ``C``) and
    outputs, fp32 ``dt``, decay cumsum, chunk states and ``C B^T``; the passed states bf16 in the forward,
    fp32 when the backward recomputes them. Its FLOPs are the small matmuls it runs (hardware FLOPs,
    the intra-chunk ones at the causal share). The conv1d is causal_conv1d's CUDA kernels (what
    Megatron-Core runs), priced as a streaming kernel on the copy curve (not measured here)."""
    s = mamba_shape(m)
    b = lay.act_bytes
    T, H, G, nc, _r = _scan_sizes(m, lay)
    Q, N, P = s.chunk, s.state, s.head_dim
    X = T * H * P * b  # x, z, out, dout and their gradients: bytes of one
    BC = T * G * N * b  # B or C
    Sf = nc * H * P * N * 4.0  # the chunk states in fp32
    Sh = Sf * b / 4.0  # ... in bf16
    CBf = nc * G * Q * Q * 4.0  # C B^T in fp32
    dA = T * H * 4.0  # fp32 dt, or the decays' cumsum
    f_state = 2.0 * T * H * P * N  # one chunk-state product (B^T x, C states, ...)
    f_intra = 2.0 * T * H * P * Q * causal_fraction(Q)  # one causal intra-chunk product
    f_cb = 2.0 * nc * G * Q * Q * N  # C B^T
    conv_numel = T * (H * P + 2 * G * N)

    def stream(name: str, numel: Num, nbytes: float) -> Op:
        # a streaming kernel of ``nbytes`` read + written per element (priced on the copy curve)
        op = fused_mem_op("copy", numel, b, nbytes, 0.0, "ssm")
        return Op(name, op.kind, op.category, op.args, op.count)

    def scan(name: str, nbytes: Num, flops: Num = 0.0) -> Op:
        return ssd_op(name, "scan", nbytes, flops)

    # causal depthwise conv1d + SiLU over x, B, C: each input read once, each output written once
    conv = stream("ssm_conv1d", conv_numel, 2 * b)

    def cumsum(name: str) -> Op:  # dt read, dt + bias softplus and the decays' cumsum written (fp32)
        return scan(name, T * H * b + 2 * dA)

    def chunk_state(name: str) -> Op:  # x, B, dt, cumsum read; fp32 states written
        return scan(name, X + BC + 2 * dA + Sf, f_state)

    def bmm_cb(name: str) -> Op:  # B, C read; fp32 C B^T written
        return scan(name, 2 * BC + CBf, f_cb)

    fwd_rest = [
        cumsum("ssm_chunk_cumsum"),
        chunk_state("ssm_chunk_state"),
        scan("ssm_state_passing", Sf + Sh),  # fp32 states in, passed states out in bf16
        bmm_cb("ssm_bmm_cb"),
        # C B^T, x, C, the passed states, z, dt, cumsum read; the gated and ungated outputs written
        scan("ssm_chunk_scan", CBf + 4 * X + BC + Sh + 2 * dA, f_state + f_intra),
    ]
    bwd = [
        # recomputed: the convolution, the cumsum, C B^T, the chunk states and their passing (fp32 out)
        stream("ssm_conv1d_recompute", conv_numel, 2 * b),
        cumsum("ssm_chunk_cumsum_recompute"),
        bmm_cb("ssm_bmm_cb_recompute"),
        chunk_state("ssm_chunk_state_recompute"),
        scan("ssm_state_passing_recompute", 2 * Sf),
        # x, z, out, dout read; dz and the gated dout written
        scan("ssm_chunk_scan_bwd_dz", 6 * X),
        scan("ssm_chunk_scan_bwd_dstates", X + BC + dA + Sf, f_state),  # C^T dout: fp32 dstates
        # states and dstates (fp32) read, both written back in bf16
        scan("ssm_state_passing_bwd", 2 * Sf + 2 * Sh),
        # x, C B^T, dout, dstates, B, dt, cumsum read; dx, ddt written
        scan("ssm_chunk_scan_chunk_state_bwd_dx", 3 * X + CBf + Sh + BC + 3 * dA, f_state + f_intra),
        scan("ssm_chunk_state_bwd_db", X + Sh + 2 * dA + BC + 2 * BC, f_state),  # fp32 dB written
        scan("ssm_chunk_scan_bwd_dc", X + Sh + 2 * dA + BC + 2 * BC, f_state),  # fp32 dC written
        scan("ssm_chunk_scan_bwd_dcb", 2 * X + 2 * dA + CBf, f_intra),  # dout x^T: fp32 dCB
        scan("ssm_bmm_chunk_bwd_db", 4 * BC + CBf, f_cb),  # dCB B + the fp32 residual -> dB
        scan("ssm_bmm_chunk_bwd_dc", 4 * BC + CBf, f_cb),  # dCB^T C + the fp32 residual -> dC
        scan("ssm_chunk_scan_bwd_ddacs", 2 * X + CBf + 3 * dA, f_intra),  # the decays' gradient
        scan("ssm_chunk_cumsum_bwd", 2 * dA + T * H * b * 2),
        # conv1d backward: the input and the gradient read, the input's gradient written
        stream("ssm_conv1d_bwd", conv_numel, 3 * b),
    ]
    first = Op(conv.name, conv.kind, conv.category, {**conv.args, "bwd_ops": bwd}, conv.count)
    rest = [Op(o.name, o.kind, o.category, {**o.args, "bwd_ops": []}, o.count) for o in fwd_rest]
    return [first, *rest]


def mamba_decode_fwd(m: ModelSpec, lay: Layout) -> list[Op]:
    """The recurrent step of one Mamba layer for one new token a sequence (``causal_conv1d_update`` and
    ``selective_state_update``): the convolution's window (``K - 1`` inputs a channel) read and shifted
    (priced on the copy curve); each head's ``P x N`` state read and written once, and the token's
    ``x``, ``z``, output, ``B`` and ``C`` (mamba_ssm's state-update kernel, at its fitted rate). Constant
    in the context length."""
    s = mamba_shape(m)
    b = lay.act_bytes
    t = np.asarray(lay.tp, dtype=float)
    T = lay.tokens
    k = s.conv_kernel
    conv = fused_mem_op("copy", T * s.conv_dim / t, b, 2 * k * b, 0.0, "ssm")
    state = T * s.heads / t * s.head_dim * s.state * 2 * b
    io = T * (3 * s.heads * s.head_dim + 2 * s.groups * s.state) / t * b  # (TP splits heads and groups)
    return [
        Op("ssm_conv1d_update", conv.kind, conv.category, conv.args),
        ssd_op("ssm_state_update", "state_update", state + io),
    ]


def group_norm(m: ModelSpec, lay: Layout) -> Op:
    """The gated group RMSNorm over the scan's output (mamba_ssm's ``RMSNormGated``,
    ``norm_before_gate=False``) on ``T x d_inner / t`` elements: the forward reads ``x`` and ``z`` and
    writes the output; the backward reads ``x``, ``z`` and the output's gradient and writes ``dx`` and
    ``dz`` (its Triton kernels, at their fitted rates)."""
    s = mamba_shape(m)
    numel = lay.tokens * s.d_inner / lay.tp
    b = lay.act_bytes
    bwd = ssd_op("ssm_group_norm_bwd", "norm_bwd", 5 * numel * b, category="norm")
    return ssd_op("ssm_group_norm", "norm_fwd", 3 * numel * b, category="norm", bwd_ops=[bwd])


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
    tpc = L.tp_comm_fwd(m, lay, blocks=1, quantized=kind != "E")  # (an MoE block's: the dispatcher's bf16 tokens)
    return [*L.norm_ops(m, lay, tsp), *block, *L.residual_add(m, lay, tsp), *tpc]


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
