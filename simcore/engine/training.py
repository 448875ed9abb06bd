"""Analytic engine for training steps: closed forms over numpy grids of parallel layouts.

Given a model, a training recipe and arrays of layouts (tp, pp, dp, cp, ep, vp, micro-batch,
sequence parallelism, ZeRO stage, recompute, schedule, overlap flags), :func:`evaluate` prices the
lowered ops once per layout element and composes them into the step:

``step = pipeline(F_s, B_s, m, p, v, schedule) + exposed data-parallel reduction + optimizer``

where ``F_s``/``B_s`` are a stage's forward/backward seconds per micro-batch (compute plus exposed
tensor/context/expert-parallel communication, plus recomputation, plus the host time the GPU waits
for), and the pipeline is :func:`simcore.engine.schedules.pipeline_time`, the closed form the
discrete-event engine reproduces on uncontended cases (see docs/parallelism.md, pipeline schedules).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simcore import memory as M
from simcore.comm.host import pinned_copy_time
from simcore.compute import ops as C
from simcore.engine.offload import host_memory_copy_time, layered_copy_exposed, optimizer_offload_time
from simcore.engine.pricing import Priced, Pricer, breakdown_power_cap
from simcore.engine.schedules import pipeline_time
from simcore.errors import SpecError
from simcore.specs.profile import ComputeProfile, load_profile
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import ModelSpec, TrainingSpec
from simcore.workload import hybrid as H
from simcore.workload import lowering as L
from simcore.workload import precision as P
from simcore.workload.model import model_flops_per_token, param_counts, weight_tensors
from simcore.workload.ssm import LayerKind, layer_kinds

Num = Any

COMM_CATEGORIES = ("tp_comm", "cp_comm", "ep_comm", "tp_comm_async")


@dataclass(frozen=True)
class TrainingLayout:
    """Parallel layouts as numpy arrays (or scalars) that broadcast together."""

    tp: Num = 1
    pp: Num = 1
    dp: Num = 1
    cp: Num = 1
    ep: Num = 1
    vp: Num = 1
    micro_batch: Num = 1
    global_batch: Num = 1
    sp: Num = False
    zero: Num = 0
    fsdp: Num = False
    recompute: Num = "none"
    schedule: Num = "1f1b"
    dp_overlap: Num = True
    param_gather_overlap: Num = True
    """ZeRO-1/2's parameter all-gather behind the next forward (``ParallelSpec.param_gather_overlap``; with
    ``dp_overlap``); ``False``: whole after the optimizer step."""
    tp_overlap: Num = False
    dp_mode: Num = "ddp"
    """``ddp`` or ``dataparallel`` (single-process nn.DataParallel)."""
    vocab_parallel: bool = True
    """Embedding, LM head and loss sharded over TP (scalar for a whole grid)."""
    etp: Num | None = None
    """Expert tensor parallelism (``None``: ``tp``)."""
    embedding_stage: bool = False
    """The embedding counts as a layer in the pipeline split (``account_for_embedding_in_pipeline_split``)."""
    loss_stage: bool = False
    """The LM head and loss count as a layer in the split (``account_for_loss_in_pipeline_split``)."""
    stage_layers: tuple[int, ...] | None = None
    """Layers on each pipeline stage, first to last (``parallel.pipeline_layers``); ``None``: even."""
    dp_contention: Num | None = None
    """How many times slower than its GPU's NIC share each data-parallel group's network flows move, the
    layout's concurrent groups (and other jobs') on the fabric's graph
    (:func:`simcore.comm.flow.data_parallel_contention`; the pricer divides the network rate of every
    data-parallel collective by it); ``None``: the collective model's oversubscription rule of thumb."""
    megatron_fsdp: bool = False
    """Megatron-Core's FSDP (``ParallelSpec.megatron_fsdp``, scalar for a whole grid): gradients kept and
    reduced in the weights' dtype (:func:`layout_state_bytes`)."""
    zero3_gather: Num = "bucketed"
    """ZeRO-3's parameter movement: ``bucketed`` (prefetched flat all-gathers) or ``per_tensor``
    (DeepSpeed 2021: one synchronous collective per weight tensor; :func:`zero3_per_tensor`)."""
    pipeline_library: Num = "torch"
    """The code running the pipeline schedule (``parallel.pipeline_library``): ``torch`` pays
    torch.distributed.pipelining's host per action (:func:`pipeline_action_host`)."""


def host_run_ahead(
    h_f: Num,
    h_b: Num,
    g_f: Num,
    g_b: Num,
    emb_f: Num,
    emb_b: Num,
    head_f: Num,
    head_b: Num,
    layers: Num,
    m: Num,
    h_sf: Num = 0.0,
    h_sb: Num = 0.0,
    a_f: Num = 0.0,
    a_b: Num = 0.0,
) -> tuple[Num, Num]:
    """Per-micro-batch time and end-of-backward GPU lag of one pipeline-free eager step that starts
    with host and GPU together (seconds).

    The host issues the ops in order (embedding, ``layers`` forward layers of ``h_f / layers`` host
    seconds each, then ``h_sf`` for the LM head and loss, ``h_sb`` on the autograd thread for their
    backward, the backward layers); the GPU runs each as soon as it is issued and the previous one is
    done, with an unbounded launch queue and no synchronisation until the step ends. For ``n``
    identical units of host time ``h`` and GPU time ``g`` that start with the GPU free at ``G`` and
    the host at ``H``, the GPU finishes at ``max(G + n g, H + h + (n - 1) max(h, g))`` (a two-stage
    pipeline); the head's kernels end no earlier than the host has issued them; later micro-batches
    repeat at ``max(host, GPU)`` per micro-batch. Returns ``(period, lag)``: the step's layer phases
    take ``m x period`` on the GPU, and the host finishes issuing the last backward ``lag`` seconds
    before the GPU finishes it (>= 0 when the GPU is behind).

    ``a_f`` / ``a_b``: seconds each layer's compute waits, after the host issued the layer's parameter
    all-gather, for that gather (FSDP2: :func:`fsdp_gather_wait`). In the forward the host issues layer
    ``i``'s gather at the start of its host unit, so its kernels start no earlier than
    ``i hu + a``: the layers end no earlier than ``a + gu + (n - 1) max(hu, gu)``; in the backward
    the gather of layer ``i`` is issued one unit ahead (FSDP2's backward prefetch) except the first's:
    no earlier than ``H + a + n gu`` and ``H + a + gu + (n - 2) max(hu, gu)``. A host far ahead of the
    GPU hides them; a host-bound micro-batch pays them again in every later one.
    """
    n = np.maximum(np.asarray(layers, dtype=float), 1.0)
    hu_f, hu_b, gu_f, gu_b = h_f / n, h_b / n, g_f / n, g_b / n
    mx_f, mx_b = np.maximum(hu_f, gu_f), np.maximum(hu_b, gu_b)

    def first_mb(a_f: Num, a_b: Num) -> tuple[Num, Num]:
        G = np.maximum(emb_f + g_f, hu_f + (n - 1.0) * mx_f)
        G = np.maximum(G, a_f + gu_f + (n - 1.0) * mx_f)
        H = h_f + h_sf
        G = np.maximum(G + head_f, H)
        H = H + h_sb
        G = np.maximum(G + head_b, H)
        late_b = np.maximum(H + a_b + g_b, H + a_b + gu_b + np.maximum(n - 2.0, 0.0) * mx_b)
        G = np.maximum(np.maximum(G + g_b, H + hu_b + (n - 1.0) * mx_b), late_b) + emb_b
        return G, H + h_b

    G, H = first_mb(a_f, a_b)
    g_mb = emb_f + g_f + head_f + head_b + g_b + emb_b
    h_mb = h_f + h_b + h_sf + h_sb
    period_rest = np.maximum(g_mb, h_mb)
    if np.any(np.asarray(a_f) > 0) or np.any(np.asarray(a_b) > 0):
        wait = G - first_mb(0.0, 0.0)[0]
        period_rest = period_rest + np.where(h_mb >= g_mb, wait, 0.0)
    mm = np.maximum(np.asarray(m, dtype=float), 1.0)
    G_m = G + (mm - 1.0) * period_rest
    H_m = mm * h_mb
    return G_m / mm, G_m - H_m


def _comm_profile(cluster: ClusterInfo) -> Any:
    """The communication profile of the cluster's system (or of the nearest one that has one)."""
    from simcore.comm.collectives import load_profile as load_comm_profile

    return load_comm_profile(cluster.system.name).profile


DDP_BUCKET_BYTES = 25 * 2**20
"""PyTorch DDP's default gradient bucket cap (``bucket_cap_mb=25``)."""


def ddp_gradients_and_buckets(
    model: ModelSpec, pp: Num, grad_bytes: float, gate_up: str = "fused"
) -> tuple[Num, Num]:
    """Gradient tensors and gradient buckets of one PyTorch DDP rank (a pipeline stage's share).

    The stage's weight tensors (:func:`simcore.workload.model.weight_tensors`). DDP fills ``DDP_BUCKET_BYTES`` buckets in reverse order and closes one when it is full: the
    layers' gradients make ``bytes / cap`` buckets and each embedding-sized tensor closes one of its
    own (GPT-2 small, 12 x 768 fp32: 14 buckets, as its profiled trace shows)."""
    pc = param_counts(model)
    layers = model.layers / np.asarray(pp, dtype=float)
    big = 1.0 + (1.0 if pc.lm_head else 0.0)
    layer_bytes = (pc.dense_layers * pc.per_dense_layer + pc.moe_layers * pc.per_moe_layer) / model.layers
    grads = weight_tensors(model, layers, gate_up)
    buckets = np.floor(layers * layer_bytes * grad_bytes / DDP_BUCKET_BYTES) + big
    return grads, buckets


def comm_call_host(cluster: ClusterInfo, op: str = "all_reduce") -> float:
    """Host seconds of one eager torch.distributed call of ``op``: the per-call floor of the
    system's communication profile (back-to-back eager calls; ``send_recv``: one ``isend`` or
    ``irecv`` and its ``wait()``)."""
    return float(_comm_profile(cluster).op_overhead.get(op, 0.0))


def pipeline_p2p_calls(pp: Num) -> tuple[Num, Num]:
    """Point-to-point calls one micro-batch's forward and backward issue on an end stage and on a
    middle stage of a ``pp``-stage pipeline (0 without pipelining).

    torch.distributed.pipelining (``torch/distributed/pipelining/stage.py``: ``get_fwd_recv_ops``,
    ``get_fwd_send_ops``, ``get_bwd_recv_ops``, ``get_bwd_send_ops``, one ``P2POp`` per tensor, run
    by the schedule's ``_batch_p2p``) and Megatron's ``p2p_communication.py`` alike: a middle stage
    receives and sends each micro-batch's activations (forward) and their gradients (backward), 4
    calls; the first stage only sends activations and receives gradients, the last only receives
    activations and sends gradients, 2 calls."""
    pp_a = np.asarray(pp, dtype=float)
    return np.where(pp_a > 1, 2.0, 0.0), np.where(pp_a > 2, 4.0, np.where(pp_a > 1, 2.0, 0.0))


def overlap_slowdown(cluster: ClusterInfo) -> float:
    """Factor on compute kernels beside a collective of the cluster's system (its communication
    profile's ``compute_slowdown``; 1 where nothing was measured)."""
    return float(_comm_profile(cluster).compute_slowdown)


STEP_TERMS = ("power_cap", "overlap_slowdown")
"""Breakdown categories the analytic step adds on top of its pipeline of stage times; the
discrete-event engine, which simulates only that pipeline, adds them the same way."""


def _a(x: Num, dtype: Any = float) -> Any:
    return np.asarray(x, dtype=dtype)


@dataclass
class TrainingEval:
    """Results over the layout grid (each value an array of the broadcast shape)."""

    step_time_s: Num
    breakdown: dict[str, Num]
    bubble_fraction: Num
    microbatches: Num
    tokens_per_step: Num
    model_flops_per_step: Num
    hardware_flops_per_step: Num
    memory: dict[str, Num]
    memory_per_gpu_bytes: Num
    stage_times: dict[str, Num]
    exposed_comm: dict[str, Num]
    extra: dict[str, Num] = field(default_factory=dict)


def _stage_priced(
    pricer: Pricer, model: ModelSpec, lw: L.Layout, moe: LayerKind, quant: Any = None, weight_share: Num = 1.0
) -> tuple[Priced, Priced, Num, Num, Num, Num]:
    """(forward, backward, weight-gradient seconds, attention-forward seconds, GEMM seconds,
    attention-forward FLOPs) of one layer of kind ``moe`` (:func:`simcore.workload.hybrid.layer_fwd`). ``quant``: the precision recipe's quantize traffic
    (:meth:`Recipe.quantize_bytes` of the device), whose kernels join the layer's
    (:func:`~simcore.workload.lowering.quantize_ops`; weights cast once per step: ``weight_share``).
    Without it the priced layer is kept across calls (:meth:`Pricer.price_of`)."""
    if quant is None:
        fwd = pricer.price_of((H.layer_fwd,), model, lw, moe)
        bwd = pricer.price_of((H.layer_fwd,), model, lw, moe, backward=True)
    else:
        f_ops = H.layer_fwd(model, lw, moe)
        b_ops = L.backward(f_ops) + L.quantize_ops(f_ops, quant, backward=True)
        f_ops = f_ops + L.quantize_ops(f_ops, quant, weight_share)
        fwd = pricer.price(f_ops)
        bwd = pricer.price(b_ops)
    attn = fwd.time.get("attention", 0.0)
    gemm = fwd.time.get("gemm", 0.0)
    return fwd, bwd, bwd.wgrad, attn, gemm, fwd.attention_flops


def _exposed(
    p: Priced,
    attn: Num,
    gemm: Num,
    tp_overlap: Num,
    tp: Num,
    schedule: Num,
    compute: Num,
    a2a_overlap: bool = False,
    slowdown: float = 1.0,
    paired: Num = 1.0,
) -> Priced:
    """Replace overlappable communication by its exposed part: CP ring exchange hides behind the
    attention compute; TP collectives hide behind the GEMMs when ``tp_overlap``; the expert all-to-all
    behind the layer's compute under DualPipe or ``a2a_overlap`` (``RuntimeSpec.moe_a2a_overlap``), the
    compute it hides behind running ``slowdown`` times slower meanwhile (:func:`overlap_slowdown`: the
    all-to-all's kernels take SMs and memory bandwidth, as the data-parallel overlap prices). Under
    ``a2a_overlap`` only the ``paired`` share of the passes has another micro-batch's pass beside it
    (:func:`a2a_paired_share`); DualPipe pairs every one."""
    out = Priced(dict(p.time), p.flops, p.kernels)
    if "cp_comm" in out.time:
        out.time["cp_comm"] = np.maximum(out.time["cp_comm"] - attn, 0.0)
    if "tp_comm" in out.time:
        # communication overlap (userbuffers ring exchange) splits each GEMM into tp chunks and
        # pipelines the exchange of one chunk with the GEMM of the previous: the first chunk's
        # transfer always shows, the rest hides behind the GEMM work that remains
        tpc = out.time["tp_comm"]
        k = np.maximum(_a(tp), 1.0)
        hidden = np.maximum(tpc / k, tpc - gemm * (1.0 - 1.0 / k))
        out.time["tp_comm"] = np.where(_a(tp_overlap, bool), hidden, tpc)
    if "tp_comm_async" in out.time:
        # the column-parallel layers' backward collectives, each asynchronous beside one GEMM: the input's
        # re-gather beside the input-gradient GEMM, the input gradient's reduce-scatter beside the weight-gradient
        # GEMM (Transformer Engine's async_op=True; with TP overlap, the bulk overlaps qkv_dgrad / fc1_dgrad and
        # qkv_wgrad / fc1_wgrad): what the layer's backward GEMMs (``gemm`` here; aggregated over the layer) do
        # not cover shows, and the GEMMs run slower beside the part that hides; reported with the TP communication
        rg = out.time.pop("tp_comm_async")
        hidden = np.minimum(rg, gemm)
        out.time["tp_comm"] = out.time.get("tp_comm", 0.0) + rg - hidden + (slowdown - 1.0) * hidden
    if "ep_comm" in out.time:
        # DualPipe, and Megatron-Core's 1F1B A2A overlap, run one micro-batch's expert all-to-all
        # while another micro-batch computes
        epc = out.time["ep_comm"]
        dualpipe = np.asarray(schedule) == "dualpipe"
        hidden = np.minimum(epc, compute) * np.where(dualpipe, 1.0, paired)
        out.time["ep_comm"] = np.where(dualpipe | a2a_overlap, epc - hidden + (slowdown - 1.0) * hidden, epc)
    return out


def a2a_paired_share(m: Num, pp: Num, vp: Num) -> Num:
    """The share of a rank's forward (and backward) passes that Megatron-Core's 1F1B A2A overlap runs beside
    another micro-batch's backward (forward), so that their expert all-to-alls hide. Without pipelining
    (``combined_1f1b_schedule_for_no_pipelining``) the first micro-batch's forward and the last one's
    backward run alone: ``1 - 1/m``. With pipelining (interleaved only: Megatron-Core asserts a virtual
    pipeline), the first rank's warmup of ``2 (pp - 1) + (vp - 1) pp`` chunk forwards plus the one extra the
    overlap schedules (``schedules.py get_pp_rank_microbatches``) run alone, and as many backwards in the
    cooldown: ``1 - (2 (pp - 1) + (vp - 1) pp + 1) / (m vp)``, at least 0 (docs/parallelism.md, "GPT-OSS's
    experts, and each release's own recipe")."""
    pp, vp, m = (np.maximum(_a(x), 1.0) for x in (pp, vp, m))
    alone = 2.0 * (pp - 1.0) + (vp - 1.0) * pp + 1.0
    return np.clip(1.0 - alone / (m * vp), 0.0, 1.0)


def _layer_layout(
    model: ModelSpec,
    lay: TrainingLayout,
    tp: Num,
    cp: Num,
    ep: Num,
    etp: Num,
    mb: Num,
    sp: Num,
    gemm_dtype: str,
    act: float,
    resid: float,
    compiled: bool,
    framework: str,
    gate_up: str,
    implementation: str,
    dropout: float,
    attention_backend: str,
    moe_dispatcher: str = "alltoall",
    moe_fused_mlp: bool = False,
    gather_bytes: float | None = None,
) -> L.Layout:
    """The lowering layout of one micro-batch's layer on a rank (shapes, dtypes, the run's kernels)."""
    lw = L.Layout(
        micro_batch=mb,
        seq=float(model.seq_len),
        tp=tp,
        cp=cp,
        ep=ep,
        etp=etp,
        sp=sp,
        tp_overlap=lay.tp_overlap,
        dtype=gemm_dtype,
        gather_bytes=gather_bytes,
        act_bytes=act,
        residual=resid,
        vocab_parallel=bool(lay.vocab_parallel),
        fused=compiled,
        strided_gate_up=L.strided_gate_up(framework, gate_up),
        implementation=implementation,
        dropout=dropout,
        attention_backend=attention_backend,
        dispatcher=moe_dispatcher,
        capacity_factor=None if model.moe is None else model.moe.capacity_factor,
        pad_to_capacity=model.moe is not None and model.moe.pad_to_capacity,
        eager_expert_ops=not moe_fused_mlp,
    )
    return lw


class _Step:
    """What every part of a step's pricing reads: the run's options, the layout grid as arrays, the
    compute profile at the run's CPU speed, the pricer, the lowering layout of one layer, and whether
    host time comes from the profile's per-layer host tables (see :func:`evaluate`'s arguments)."""

    def __init__(
        self,
        model: ModelSpec,
        training: TrainingSpec,
        lay: TrainingLayout,
        cluster: ClusterInfo,
        framework: str,
        calibration: str | None,
        param_dtype: str,
        profiler: bool,
        gate_up: str,
        step_sync: bool,
        cpu_op_time: tuple[float, float | None] | None,
        implementation: str,
        dropout: float,
        attention_backend: str,
        profiler_record: tuple[str, ...],
        layer_ops: tuple[float, float] | None,
        moe_expert_calls: str = "grouped",
        moe_host_sync: bool = False,
        moe_dispatcher: str = "alltoall",
        moe_a2a_overlap: bool = False,
        moe_fused_mlp: bool = False,
    ) -> None:
        self.model, self.training, self.lay, self.cluster = model, training, lay, cluster
        self.framework, self.param_dtype, self.profiler, self.gate_up = (
            framework,
            param_dtype,
            profiler,
            gate_up,
        )
        self.step_sync, self.implementation = step_sync, implementation
        self.profiler_record, self.layer_ops = profiler_record, layer_ops
        # padded to capacity, the dispatcher knows its split sizes on the host (capacity x experts): no sync
        self.moe_expert_calls = moe_expert_calls
        self.moe_host_sync = moe_host_sync and model.moe is not None and not model.moe.pad_to_capacity
        self.moe_a2a_overlap = moe_a2a_overlap
        tp, pp, dp, cp, ep, vp = (_a(x) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.vp))
        self.tp, self.pp, self.dp, self.cp, self.ep, self.vp = tp, pp, dp, cp, ep, vp
        self.mb = mb = _a(lay.micro_batch)
        self.sp = sp = _a(lay.sp, bool)
        recompute = np.asarray(lay.recompute)
        self.schedule = np.asarray(lay.schedule)
        self.m = np.maximum(_a(lay.global_batch) / (mb * dp), 1.0)
        """Micro-batches per step, ``global_batch / (micro_batch x dp)`` (at least 1)."""
        prof = load_profile(cluster.device, calibration)
        if cpu_op_time is not None:
            prof = prof.at_cpu_speed(*cpu_op_time)
        self.prof: ComputeProfile = prof
        self.act_key = act_key = "swiglu" if model.activation == "swiglu" else "gelu"
        self.host_cal: dict[str, float] = prof.host_layer
        self.compiled = compiled = framework == "compiled"
        # eager: measured per-layer host times; compiled (torch.compile): the same times scaled by the
        # compiled/eager ratio measured in one process (fit_host), where the profile has it
        self.layer_host: bool = f"train_fwd_{act_key}" in self.host_cal and (
            framework == "eager" or (compiled and f"compiled_ratio_fwd_{act_key}" in self.host_cal)
        )
        self.etp = etp = tp if lay.etp is None else _a(lay.etp)
        self.pricer = Pricer.for_layout(
            cluster,
            tp,
            cp,
            dp,
            pp,
            ep,
            framework,
            calibration,
            per_op_host=not self.layer_host,
            profile=prof,
            etp=etp,
            dp_contention=lay.dp_contention,
        )
        self.full_t = np.where(recompute == "full", 1.0, 0.0)
        self.sel_t = np.where(recompute == "selective", 1.0, 0.0)
        self.zero = zero = np.where(_a(lay.fsdp, bool), 3, _a(lay.zero, int))  # FSDP is ZeRO-3
        self.zero0, self.zero12, self.zero3 = zero == 0, (zero >= 1) & (zero <= 2), zero >= 3
        self.recipe = P.recipe(training.precision, cluster.device)
        # the recipe's GEMMs at the device's rate for its block-scaled format (mxfp8, nvfp4)
        self.pricer.block_format = self.recipe.block_format
        self.pricer.per_tensor = self.recipe.per_tensor_kernels(cluster.device)
        self.sb = layout_state_bytes(training, lay, param_dtype, cluster.device)
        self.single_proc = np.asarray(lay.dp_mode) == "dataparallel"
        self.ddp = (dp > 1) & (np.asarray(lay.dp_mode) == "ddp")
        self.act = act = 2.0 if training.precision != "fp32" else 4.0
        resid = 4.0 if param_dtype == "fp32" else act
        self.lw = _layer_layout(
            model,
            lay,
            tp,
            cp,
            ep,
            etp,
            mb,
            sp,
            self.recipe.gemm_dtype,
            act,
            resid,
            compiled,
            framework,
            gate_up,
            implementation,
            dropout,
            attention_backend,
            moe_dispatcher,
            moe_fused_mlp,
            # TE gathers the quantized GEMM inputs (values and block scales; one row-wise copy)
            self.recipe.stored_bytes(self.recipe.block) if self.recipe.quantized else None,
        )
        # transformers' MoE layers have their own host entries: the fp32 grouped GEMM's per-expert loop
        # under AMP or the native bf16 one
        moe_path = (
            None if model.moe is None or compiled else ("moe" if self.lw.fp32_experts else "moe_native")
        )
        self.lk: str = prof.layer_key(act_key, moe_path, implementation, "train_fwd", attention_backend)
        """The profile's host-table key of a layer (activation, MoE path, implementation, attention)."""
        self.pc = param_counts(model)
        self.vdiv = tp if lay.vocab_parallel else 1.0
        self.layers_per_rank = model.layers / pp
        self.hp_layers = (
            (training.bf16_layers_start + training.bf16_layers_end) if self.recipe.quantized else 0
        )


@dataclass
class _StageWork:
    """Priced work of one micro-batch on a stage (a middle stage's ``layers / pp`` layers), and of the
    embedding (first stage) and the LM head + loss (last stage)."""

    parts: list[tuple[int, Priced, Priced, Num, Num]]
    """Per kind of layer (dense, MoE; a hybrid's pattern symbols): (count, exposed forward, backward with
    recomputation, weight gradient seconds, recomputed FLOPs) of one layer."""
    F_layers: Priced
    B_layers: Priced
    W_layers: Num
    emb_f: Priced
    emb_b: Priced
    head_f: Priced
    head_b: Priced
    head_w: Num
    kinds: list[LayerKind] = field(default_factory=list)
    """The kind of layer of each of ``parts`` (:func:`simcore.workload.ssm.layer_kinds`)."""
    hp_delta: Num = 0.0
    """Extra forward + backward seconds of a layer kept in bf16 by the precision recipe over a quantized
    one (``training.bf16_layers_start`` / ``_end``: on the first and last pipeline stages)."""


def _stage_work(s: _Step) -> _StageWork:
    """Seconds of a stage's layers (compute, exposed TP/CP/EP communication, recomputation: full
    re-runs the forward, selective the attention core), of the embedding and of the LM head + loss,
    per micro-batch (see docs/parallelism.md)."""
    model, pricer, lw, recipe = s.model, s.pricer, s.lw, s.recipe
    dev = s.cluster.device
    quant = (lambda n, w: recipe.quantize_bytes(dev, n, w)) if recipe.quantized else None
    parts = []
    kinds = layer_kinds(model)
    hp_delta: Num = 0.0
    for moe, count in kinds:
        fwd, bwd, w, attn, gemm, attn_flops = _stage_priced(pricer, model, lw, moe, quant, 1.0 / s.m)
        if s.hp_layers:
            # a layer the recipe keeps in bf16 (first/last layers): its extra seconds over a quantized one
            hp = _stage_priced(pricer, model, replace(lw, dtype=L.hp_dtype(lw.dtype)), moe)
            extra = hp[0].total() + hp[1].total() - fwd.total() - bwd.total()
            hp_delta = hp_delta + extra * count / model.layers
        comp_f = fwd.total(exclude=COMM_CATEGORIES)
        comp_b = bwd.total(exclude=COMM_CATEGORIES)
        ov, slow = s.moe_a2a_overlap, overlap_slowdown(s.cluster)
        pair = a2a_paired_share(s.m, s.pp, s.vp)
        fwd_x = _exposed(fwd, attn, gemm, s.lay.tp_overlap, s.tp, s.schedule, comp_f, ov, slow, pair)
        bwd_x = _exposed(bwd, 2.0 * attn, 2.0 * gemm, s.lay.tp_overlap, s.tp, s.schedule, comp_b, ov, slow, pair)
        # recomputation re-runs the forward (full) or the attention core (selective) before backward
        full = fwd_x
        rec = full.scaled(s.full_t)
        rec.time = {f"recompute_{k}": v for k, v in rec.time.items()}
        mods = s.training.recompute_modules
        if mods:
            # selective recompute of the named modules: their forward ops once more (and, under a
            # low-precision recipe, their inputs' quantize kernels; the weights stay cached)
            sub = H.recompute_fwd(model, lw, moe, mods)
            sub_p = pricer.price(sub + (L.quantize_ops(sub, quant, 0.0) if quant is not None else []))
            rec.add("recompute_modules", sub_p.total() * s.sel_t)
            rec.flops = fwd.flops * s.full_t + sub_p.flops * s.sel_t
        else:
            rec.add("recompute_attention", attn * s.sel_t)
            rec.flops = fwd.flops * s.full_t + attn_flops * s.sel_t
        parts.append((count, fwd_x, bwd_x.merged(rec), w, rec.flops))

    F_layers = Priced()
    B_layers = Priced()
    W_layers: Num = 0.0
    for count, f, b, w, _rf in parts:
        share = count / model.layers * s.layers_per_rank
        F_layers = F_layers.merged(f.scaled(share))
        B_layers = B_layers.merged(b.scaled(share))
        W_layers = W_layers + w * share

    # the multi-token-prediction modules run on the last stage after the LM head (none: no ops)
    emb, head = (L.embedding_fwd,), (L.head_fwd, L.loss_fwd, L.mtp_fwd)
    emb_f, emb_b = pricer.price_of(emb, model, lw), pricer.price_of(emb, model, lw, backward=True)
    head_f, head_b = pricer.price_of(head, model, lw), pricer.price_of(head, model, lw, backward=True)
    if "tp_comm_async" in head_b.time:
        # (the multi-token-prediction layers' TP communication is priced exposed, their re-gathers with it)
        head_b.time["tp_comm"] = head_b.time.get("tp_comm", 0.0) + head_b.time.pop("tp_comm_async")
    work = _StageWork(
        parts, F_layers, B_layers, W_layers, emb_f, emb_b, head_f, head_b, head_b.wgrad,
        [k for k, _n in kinds], hp_delta,
    )
    if s.param_dtype == "fp32" and s.training.precision != "fp32":
        _add_amp_casts(s, work)
    return work


def _add_amp_casts(s: _Step, work: _StageWork) -> None:
    """PyTorch AMP (fp32 weights, autocast): weight casts in every forward, bf16 -> fp32 gradient
    accumulation in every backward, per micro-batch, on each rank's share of the weights (added to
    ``work``'s layers and head)."""
    model, pc, pricer = s.model, s.pc, s.pricer
    tensors_per_layer = weight_tensors(model, 1.0, s.gate_up) - weight_tensors(model, 0.0, s.gate_up)
    stage_params = (pc.dense_layers * pc.per_dense_layer + pc.moe_layers * pc.per_moe_layer) / s.pp / s.tp
    acc = (s.m - 1.0) / s.m  # backwards that add into an existing fp32 .grad
    # ZeRO-2/3 and FSDP accumulate on the reduce-scattered shard of the gradient
    shard = np.where(s.zero >= 2, 1.0 / np.maximum(s.dp, 1.0), 1.0)
    amp_f, amp_b = L.amp_ops(stage_params, tensors_per_layer * s.layers_per_rank, acc, shard)
    work.F_layers = work.F_layers.merged(pricer.price(amp_f))
    work.B_layers = work.B_layers.merged(pricer.price(amp_b))
    emb_params = (pc.embedding + pc.lm_head) / s.vdiv
    ea_f, ea_b = L.amp_ops(emb_params, 2.0 if pc.lm_head else 1.0, acc, shard)
    work.head_f = work.head_f.merged(pricer.price(ea_f))
    work.head_b = work.head_b.merged(pricer.price(ea_b))


@dataclass
class _HostTables:
    """Eager host seconds of a step's parts from the profile's measured host tables
    (``ComputeProfile.host_layer``), for the run's framework, profiler, wrapper and code
    (see docs/compute.md, host model)."""

    s: _Step
    own: dict[str, str]
    """Profiled compiled steps measured whole: the entries that replace the eager ones."""

    def pf(self, kind: str) -> float:
        """The profiler's options' and the weights' dtype's factor on ``kind`` of host time (measured on
        eager layers; the native MoE entries were measured with bf16 weights already)."""
        s = self.s
        native = s.lk.endswith("_native")
        dtype = "fp32" if s.training.precision == "fp32" or s.compiled or native else s.param_dtype
        w = s.prof.weights_factor(dtype, kind, s.implementation, s.act_key)
        return w * (s.prof.profiler_factor(s.profiler_record, kind, s.implementation) if s.profiler else 1.0)

    def hv(self, name: str) -> float:
        """Host seconds of entry ``name`` (eager; compiled: times the compiled/eager ratio of its phase)."""
        s, prof, host_cal = self.s, self.s.prof, self.s.host_cal
        if name in self.own:
            return prof.host(self.own[name], True)
        v = prof.host(name, s.profiler) if s.compiled else prof.host_of(name, s.profiler, s.implementation)
        if s.compiled:
            # the compiled graph issues a layer's kernels with less host work than eager
            phase = "bwd" if "_bwd" in name or name == "ckpt_selective" else "fwd"
            ratio = f"compiled_ratio_{phase}_{s.act_key}"
            v *= host_cal.get(("profiled_" if s.profiler else "") + ratio, host_cal.get(ratio, 1.0))
        return v

    def wrapped(self, name: str, phase: str) -> Num:
        """Per-layer host time with the distributed wrapper the layout uses (FSDP2 / ZeRO-3,
        tensor parallel), as measured ratios over the plain layer."""
        s, host_cal = self.s, self.s.host_cal

        def ratio(key: str) -> float:
            # the profiler's per-op cost changes the wrapper's share: its own ratio where measured
            return host_cal.get(("profiled_" if s.profiler else "") + key, host_cal.get(key, 1.0))

        r_t = ratio(f"tp_ratio_{phase}")
        r_d = ratio(f"ddp_ratio_{phase}")
        # FSDP replaces DDP; tensor parallelism and DDP hooks compose
        other = np.where(s.tp > 1, r_t, 1.0) * np.where(s.ddp, r_d, 1.0)
        base = self.hv(name)
        group = self.fsdp_group(phase)
        fsdp = base + group if group is not None else base * ratio(f"fsdp_ratio_{phase}")
        return base * np.where(s.zero3, 1.0, other) + np.where(s.zero3, fsdp - base, 0.0)

    def fsdp_group(self, phase: str) -> float | None:
        """FSDP2's host per ``fully_shard`` group in ``phase`` (``fwd`` / ``bwd``) where
        ``simcore calibrate`` fitted ``fsdp_group`` (unprofiled; one group's forward and backward,
        :mod:`simcore.calibration.fit_dist_units`), split between the phases as the measured
        per-layer ``fsdp_ratio_*`` split FSDP2's extra host; ``None`` where not fitted (the per-layer
        ratios stand)."""
        s, host_cal = self.s, self.s.host_cal
        if s.profiler or "fsdp_group" not in host_cal:
            return None
        extra = {
            ph: max(host_cal.get(f"fsdp_ratio_{ph}", 1.0) - 1.0, 0.0) * self.hv(f"train_{ph}_{s.lk}")
            for ph in ("fwd", "bwd")
        }
        total = extra["fwd"] + extra["bwd"]
        return s.prof.host("fsdp_group") * (extra[phase] / total if total > 0 else 0.5)

    def wrapper_step(self, part: str) -> Num:
        """A distributed wrapper's host outside the layers beyond a single GPU's, per micro-batch
        (``fwd`` / ``bwd``) or per step (``end``), where measured. DDP's backward part is its
        reducer finishing the gradient reduction: once per step, like its hooks. FSDP2's root group
        (embedding, final norm, head) costs one group's host where ``fsdp_group`` is fitted."""
        s = self.s
        f, t, d = (self.hv(f"{w}_step_{part}") for w in ("fsdp", "tp", "ddp"))
        root = self.fsdp_group(part) if part in ("fwd", "bwd") else None
        f = f + (root or 0.0)
        d_mb = d / s.m if part == "bwd" else d
        return np.where(s.zero3, f, np.where(s.tp > 1, t, 0.0) + np.where(s.ddp, d_mb, 0.0))


def _host_tables(s: _Step) -> _HostTables:
    """The host tables of an eager or compiled step. Profiled compiled steps were measured whole, in
    their own CPU-speed units: a layer's and a micro-batch's forward and backward host replace the
    eager entries times a compiled ratio (transformers' own compiled steps where measured: its compiled
    code runs ~2x the host of simcore's layers per forward layer)."""
    host_cal, act_key = s.host_cal, s.act_key
    hf = s.implementation == "huggingface" and f"profiled_hf_compiled_fwd_{act_key}" in host_cal
    cpre = "hf_" if hf else ""
    own = (
        {
            f"train_{ph}_{act_key}": f"{cpre}compiled_{ph}_{act_key}"
            for ph in ("fwd", "bwd")
            if f"profiled_{cpre}compiled_{ph}_{act_key}" in host_cal
        }
        | {
            f"step_{ph}_{act_key}": f"{cpre}compiled_step_{ph}_{act_key}"
            for ph in ("fwd", "bwd")
            if f"profiled_{cpre}compiled_step_{ph}_{act_key}" in host_cal
        }
        if s.compiled and s.profiler
        else {}
    )
    return _HostTables(s, own)


def _layer_host(s: _Step, ht: _HostTables) -> tuple[Num, Num]:
    """Host seconds to issue one micro-batch's forward and backward of a stage's layers (eager
    PyTorch: the host dispatches every op of a layer: module calls, autocast, autograd), with the
    wrapper, recomputation, DDP hooks, the profiler's options and the run's own ops per layer
    (see docs/compute.md, host model)."""
    prof, model, act_key, lk, hv = s.prof, s.model, s.act_key, s.lk, ht.hv
    implementation, layer_ops, compiled = s.implementation, s.layer_ops, s.compiled
    # a run's own code: its ops per layer over the calibrated code's (eager; a transformers layer with
    # its own entries, an MoE or eager-attention one, is not scaled)
    ops_f, ops_b = 1.0, 1.0
    cal = prof.host_ops.calibrated_layer_ops(implementation, act_key)
    if layer_ops is not None and cal is not None and not compiled and lk == act_key:
        ops_f, ops_b = layer_ops[0] / cal[0], (layer_ops[1] / cal[1] if layer_ops[1] > 0 else 1.0)
    h_f = s.layers_per_rank * (
        ht.wrapped(f"train_fwd_{lk}", "fwd") * ops_f + s.full_t * hv(f"ckpt_full_fwd_{act_key}")
    )
    h_b = s.layers_per_rank * (
        ht.wrapped(f"train_bwd_{lk}", "bwd") * ops_b
        + s.full_t * hv(f"ckpt_full_bwd_{act_key}")
        + s.sel_t * hv("ckpt_selective")
    )
    h_b = h_b + np.where(s.ddp & ~s.zero3, hv("ddp_fixed"), 0.0)
    e_f, e_b = _moe_expert_host(s, ht)
    h_f, h_b = h_f + e_f, h_b + e_b + s.full_t * e_f
    if np.any(s.ddp & ~s.zero3):
        h_b = h_b + np.where(s.ddp & ~s.zero3, ddp_bucket_host(s) / s.m, 0.0)
    # the profiler's other options (Python stacks, memory events, no shapes) change each kind of
    # host time by its own measured ratio
    h_f = h_f * ht.pf("train_fwd")
    h_b = h_b * ht.pf("train_bwd")
    if lk.endswith("_moe"):
        # (the fp32 experts' path) the fp32 grouped GEMM reads each expert's token count on the host
        # (one sync per expert GEMM), so the host waits while every expert GEMM runs: their GPU time
        # adds to the layers' host time (the fit rows hold these waits too, at their own small token
        # count: a known double count of a few percent of the layers' host)
        experts = [
            o for o in L.moe_block_fwd(model, s.lw) if o.kind == "gemm" and o.name.startswith("expert_")
        ]
        moe_rank = s.pc.moe_layers / model.layers * s.layers_per_rank
        h_f = h_f + moe_rank * s.pricer.price(experts).total()
        h_b = h_b + moe_rank * s.pricer.price(L.backward(experts)).total()
    if "tp_ratio_fwd" not in s.host_cal:
        # without a measured TP layer: each collective the layer issues is one more host call
        floor = comm_call_host(s.cluster)
        n_tp = np.where(s.tp > 1, np.where(s.sp, 4.0, 2.0), 0.0)
        h_f = h_f + s.layers_per_rank * n_tp * floor
        h_b = h_b + s.layers_per_rank * n_tp * floor
    return h_f, h_b


def _moe_expert_host(s: _Step, ht: _HostTables) -> tuple[Num, Num]:
    """Host seconds a stage's MoE layers add to one micro-batch's forward and backward when the routed
    experts' GEMMs are issued one local expert at a time (``RuntimeSpec.moe_expert_calls: per_expert``,
    Transformer Engine's ``GroupedLinear``; docs/parallelism.md, "MoE host costs").

    Per local expert (``experts / ep``) and each of the two expert projections, the forward issues its
    GEMM and, under an FP8-family recipe, its input's quantize into a new quantized tensor; the backward
    its data- and weight-gradient GEMMs and its output gradient's quantize. Each call costs the host what
    a top-level op of the calibrated eager layer costs on average: the layer's forward host over its
    forward ops, its backward host over its autograd nodes (``HostOps.calibrated_layer_ops``). ``(0, 0)``
    for ``grouped`` calls, compiled code, or a profile without those op counts."""
    model = s.model
    cal = s.prof.host_ops.calibrated_layer_ops(s.implementation, s.act_key)
    if (
        model.moe is None
        or s.moe_expert_calls != "per_expert"
        or s.compiled
        or cal is None
        or s.lk != s.act_key
    ):
        return 0.0, 0.0
    per_f = ht.wrapped(f"train_fwd_{s.lk}", "fwd") / cal[0]
    per_b = ht.wrapped(f"train_bwd_{s.lk}", "bwd") / cal[1]
    quant = 1.0 if s.recipe.quantized else 0.0
    calls = s.pc.moe_layers / model.layers * s.layers_per_rank * model.moe.experts / s.ep
    return calls * 2.0 * (1.0 + quant) * per_f, calls * 2.0 * (2.0 + quant) * per_b


def ddp_bucket_host(s: _Step) -> Num:
    """Host seconds of PyTorch DDP's Reducer per step beyond the per-layer ``ddp_ratio_*`` and
    ``ddp_fixed`` entries, on the autograd thread during the last micro-batch's backward (the step's
    other micro-batches run under ``no_sync`` or accumulate without reducing).

    The Reducer (``torch/csrc/distributed/c10d/reducer.cpp``: ``mark_variable_ready`` ->
    ``mark_bucket_ready`` -> ``all_reduce_bucket``, a ``then`` callback on the work's future,
    ``finalize_bucket_dense`` copying back) does host work per gradient bucket:
    :func:`ddp_gradients_and_buckets` of them (``bucket_cap_mb`` 25). Without the profiler the
    per-layer ratio and ``ddp_fixed`` were measured on a model whose gradients filled one bucket, so
    each further bucket costs one bucket's host: the profile's ``ddp_bucket`` entry where
    ``simcore calibrate`` fitted it (``tools/bench_dist_steps.py --units``), else the system's
    per-call floor of an eager all-reduce (the communication profile's ``op_overhead``, back-to-back
    ``torch.distributed.all_reduce`` calls: the bucket's collective launch, the part of the per-bucket
    work measured on these systems). Under the profiler: the hooks per gradient tensor and per bucket
    measured from profiled DDP ranks (``profiled_ddp_param``, ``profiled_ddp_bucket``)
    (docs/parallelism.md, DDP's host per bucket)."""
    n_grads, n_buckets = ddp_gradients_and_buckets(s.model, s.pp, s.sb.grads, s.gate_up)
    prof = s.prof
    if s.profiler:
        return n_grads * prof.host("ddp_param", True) + n_buckets * prof.host("ddp_bucket", True)
    per_bucket = prof.host("ddp_bucket") if "ddp_bucket" in prof.host_layer else comm_call_host(s.cluster)
    return np.maximum(n_buckets - 1.0, 0.0) * per_bucket


def pipeline_action_host(s: _Step) -> Num:
    """Host seconds per micro-batch of torch.distributed.pipelining's own Python on a rank: one
    forward and one backward action per stage the rank holds (``2 vp``), each at the calibration
    profile's fitted ``pp_action`` (0 where not fitted: the H200 profile; the H100 profile's was
    measured with the stages sharing one GPU's rank), where
    ``parallel.pipeline_library`` is ``torch`` and the layout has pipeline stages.

    Per action ``torch/distributed/pipelining/schedules.py`` (``_step_microbatches``: the action's
    bookkeeping, ``_batch_p2p``'s ``batch_isend_irecv`` of its sends and receives) and ``stage.py``
    (``forward_one_chunk``: argument flattening, validation of the inputs' metadata, the output's
    detach; ``backward_one_chunk`` -> ``stage_backward``: an ``autograd.backward`` call per
    micro-batch) run beside the layers' own host; the point-to-point calls are priced apart
    (:func:`pipeline_p2p_calls`). Measured by ``tools/bench_dist_steps.py --units`` as the excess of a
    pipelined step over the same layers run as plain gradient accumulation (docs/parallelism.md,
    pipeline host costs)."""
    if "pp_action" not in s.prof.host_layer:
        return 0.0 * s.pp
    torch_lib = (np.asarray(s.pp) > 1) & (np.asarray(s.lay.pipeline_library) == "torch")
    return np.where(torch_lib, 2.0 * s.vp * s.prof.host("pp_action"), 0.0)


@dataclass
class _Host:
    """Host seconds of one micro-batch (its layers, its work outside them) and the lead the host has
    on the GPU at the end of the backward."""

    h_layers: Num = 0.0
    h_out: Num = 0.0
    host_lag: Num = 0.0


def _host_overhead(s: _Step, ht: _HostTables, work: _StageWork) -> _Host:
    """Add the host time the GPU waits for to ``work``'s layers as ``host_overhead`` (per micro-batch).

    Nothing synchronises host and GPU inside a step (NCCL send/recv waits are stream-side), so the host
    runs ahead of the GPU while the GPU is busy (LM head and loss, long layers) and that slack absorbs
    host-bound layers later. One stage: the phase-by-phase pipeline of :func:`host_run_ahead`, with the
    work outside the layers (embedding, LM head and loss on the main thread, their backward on the
    autograd thread, from whole profiled steps). A pipeline stage: a micro-batch's forward and backward
    on the stage take at least the host's time for both (its per-micro-batch excess, split as the
    phases' excesses), the largest over a middle stage (its layers and 4 point-to-point calls) and the
    last (its layers, the LM head and loss outside them, priced as a whole step's work outside the
    layers, and 2 point-to-point calls), each call at the profile's ``send_recv`` floor
    (:func:`pipeline_p2p_calls`; see docs/parallelism.md, pipeline host costs).
    """
    hv, lk = ht.hv, s.lk
    h_f, h_b = _layer_host(s, ht)
    embF, embB, headF, headB = (
        work.emb_f.total(),
        work.emb_b.total(),
        work.head_f.total(),
        work.head_b.total(),
    )
    Fg, Bg = work.F_layers.total(), work.B_layers.total()
    x_f, x_b = np.maximum(h_f - Fg, 0.0), np.maximum(h_b - Bg, 0.0)
    single_stage = np.asarray(s.pp, dtype=float) <= 1
    # (eager: plus the part that grows with the layers; compiled: its own per-step line has it)
    lay_f = 0.0 if s.compiled else s.layers_per_rank * hv(f"step_fwd_layer_{lk}")
    lay_b = 0.0 if s.compiled else s.layers_per_rank * hv(f"step_bwd_layer_{lk}")
    # per micro-batch outside the layers: one stage's whole; a pipeline's last stage (LM head and loss)
    h_out_f = (hv(f"step_fwd_{lk}") + lay_f + ht.wrapper_step("fwd")) * ht.pf("step_fwd")
    h_out_b = (hv(f"step_bwd_{lk}") + lay_b + ht.wrapper_step("bwd")) * ht.pf("step_bwd")
    h_sf = np.where(single_stage, h_out_f, 0.0)
    h_sb = np.where(single_stage, h_out_b, 0.0)
    a = fsdp_gather_wait(s)
    g_mb, lag = host_run_ahead(
        h_f, h_b, Fg, Bg, embF, embB, headF, headB, s.layers_per_rank, s.m, h_sf, h_sb, a, a
    )
    per_mb = np.maximum(g_mb - (Fg + Bg + embF + embB + headF + headB), 0.0)
    share_f = np.where(x_f + x_b > 0, x_f / np.maximum(x_f + x_b, 1e-30), 0.5)
    p2p_end, p2p_mid = pipeline_p2p_calls(s.pp)
    call = comm_call_host(s.cluster, "send_recv")
    acts = pipeline_action_host(s)
    middle = h_f + h_b + p2p_mid * call + acts - (Fg + Bg)
    last = h_f + h_b + h_out_f + h_out_b + p2p_end * call + acts - (Fg + Bg + headF + headB)
    per_mb = np.where(single_stage, per_mb, np.maximum(np.maximum(middle, last), 0.0))
    if s.moe_host_sync:
        # every MoE layer's forward waits for the GPU (the dispatcher's device-to-host copy), so the
        # forward's host excess cannot hide behind the backward's GPU time (nor the reverse)
        per_mb = np.maximum(per_mb, x_f + x_b)
    work.F_layers.add("host_overhead", per_mb * share_f)
    work.B_layers.add("host_overhead", per_mb * (1.0 - share_f))
    return _Host(h_f + h_b, h_sf + h_sb, np.where(single_stage, lag, 0.0))


@dataclass
class _Pipeline:
    """A stage's seconds per micro-batch and the pipeline phase of the step."""

    Fl: Num
    """Forward seconds of a middle stage's layers (compute, exposed communication, host overhead)."""
    Bl: Num
    embF: Num
    embB: Num
    headF: Num
    headB: Num
    stage_max: Num
    """The slowest stage's forward + backward seconds per micro-batch."""
    first: Num
    last: Num
    n_hi: Num
    """Layers on the first stage."""
    n_lo: Num
    """Layers on the last stage."""
    n_mid: Num
    """Layers on the fullest middle stage (0 with fewer than three stages)."""
    r_layer: Num
    W_max: Num
    c: Num
    """Seconds of one point-to-point transfer of a micro-batch's activations between stages."""
    t_pipe: Num


def checked_stage_layers(stage_layers: tuple[int, ...], pp: Num, layers: int) -> list[int]:
    """``parallel.pipeline_layers`` as a list, checked to have ``pp`` entries summing to ``layers`` (else one
    :class:`SpecError` naming the field)."""
    n = list(stage_layers)
    if np.any(np.asarray(pp) != len(n)) or sum(n) != layers:
        pps = ", ".join(str(int(v)) for v in np.unique(np.asarray(pp)))
        raise SpecError(
            f"pipeline_layers {n} must have pp ({pps}) entries summing to model.layers ({layers})",
            field="parallel.pipeline_layers",
        )
    return n


def stage_layer_counts(
    layers: int,
    pp: Num,
    vp: Num = 1,
    embedding_stage: bool = False,
    loss_stage: bool = False,
    stage_layers: tuple[int, ...] | None = None,
) -> tuple[Num, Num, Num]:
    """Transformer layers on the first, the last and the fullest middle pipeline rank (0 without
    middle ranks).

    Megatron's split: ``layers`` (plus one for the embedding and one for the loss where they count as
    layers, ``account_for_*_in_pipeline_split``) go over ``pp x vp`` model chunks, ``floor`` each and one
    more to the first chunks; rank ``i`` holds chunks ``i, i + pp, ...``; the embedding's and the loss's
    units then leave the first and last rank. ``stage_layers``: an explicit count per rank (checked to
    have ``pp`` entries summing to ``layers``)."""
    if stage_layers is not None:
        n = checked_stage_layers(stage_layers, pp, layers)
        mid = max(n[1:-1], default=0)
        return float(n[0]), float(n[-1] if len(n) > 1 else 0.0), float(mid)
    pp_, vp_ = np.asarray(pp, dtype=float), np.asarray(vp, dtype=float)
    e, lo_ = float(embedding_stage), float(loss_stage)
    chunks = pp_ * vp_
    units = layers + e + lo_
    lo = np.floor(units / chunks + 1e-9)
    r = units - chunks * lo  # chunks 0 .. r-1 hold one more
    first = vp_ * lo + np.minimum(vp_, np.ceil(r / pp_))
    last = vp_ * lo + np.clip(np.ceil((r - pp_ + 1) / pp_), 0, vp_)
    mid = vp_ * lo + np.clip(np.ceil((r - 1) / pp_), 0, vp_)
    single = pp_ <= 1
    return (
        np.where(single, layers, first - e),
        np.where(single, 0.0, last - lo_),
        np.where(pp_ > 2, mid, 0.0),
    )


def chunk_layer_counts(
    layers: int,
    pp: int,
    vp: int = 1,
    embedding_stage: bool = False,
    loss_stage: bool = False,
    stage_layers: tuple[int, ...] | None = None,
) -> list[int]:
    """Transformer layers of each of the ``pp x vp`` model chunks, in chunk order (chunk ``c`` on rank
    ``c % pp``): Megatron's split of :func:`stage_layer_counts` chunk by chunk (``floor`` each, one more to
    the first chunks, the embedding's and the loss's units leaving the first and the last chunk), or the
    explicit ``stage_layers`` (one chunk per rank, checked as :func:`checked_stage_layers`)."""
    if stage_layers is not None:
        return checked_stage_layers(stage_layers, pp, layers)
    chunks = pp * vp
    units = layers + int(embedding_stage) + int(loss_stage)
    n = [units // chunks + (1 if c < units % chunks else 0) for c in range(chunks)]
    n[0] -= int(embedding_stage)
    n[-1] -= int(loss_stage)
    return n


def pattern_stage_costs(
    pattern: str,
    cost: dict[str, Num],
    pp: Num,
    vp: Num = 1,
    embedding_stage: bool = False,
    loss_stage: bool = False,
    stage_layers: tuple[int, ...] | None = None,
) -> tuple[Num, Num, Num]:
    """Seconds of the layers on the first, the last and the costliest middle pipeline rank of a hybrid
    model: each rank holds its chunks' slices of ``pattern`` (Megatron's split,
    :func:`chunk_layer_counts`: rank ``i`` holds chunks ``i, i + pp, ...``), and a slice costs the sum of
    ``cost[symbol]`` over its layers. ``pp`` and ``vp`` may be arrays over layouts (each distinct pair is
    split once); the costs may be arrays too."""
    pp_a, vp_a = np.broadcast_arrays(np.asarray(pp, dtype=float), np.asarray(vp, dtype=float))
    first: Num = 0.0
    last: Num = 0.0
    mid: Num = 0.0
    for p, v in sorted({(int(a), int(b)) for a, b in zip(pp_a.ravel(), vp_a.ravel(), strict=True)}):
        counts = chunk_layer_counts(len(pattern), p, v, embedding_stage, loss_stage, stage_layers)
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        ranks: list[Num] = [0.0] * p
        for c, n in enumerate(counts):
            for sym in pattern[starts[c] : starts[c] + n]:
                ranks[c % p] = ranks[c % p] + cost[sym]
        sel = (pp_a == p) & (vp_a == v)
        f = ranks[0]
        lo = ranks[-1] if p > 1 else 0.0
        md = np.maximum.reduce([np.asarray(r, dtype=float) for r in ranks[1:-1]]) if p > 2 else 0.0
        first = np.where(sel, f, first)
        last = np.where(sel, lo, last)
        mid = np.where(sel, md, mid)
    return first, last, mid


def _pipeline(s: _Step, work: _StageWork) -> _Pipeline:
    """The stages' times and the pipeline phase, :func:`simcore.engine.schedules.pipeline_time`.

    Layers go over the stages by :func:`stage_layer_counts` (uneven splits: one more on the first
    chunks; the last stage, which also runs the LM head and loss, gets the smaller share); the first
    stage adds the embedding; layers the precision recipe keeps in bf16 add their extra time to the
    first and last stages. ``c`` moves
    ``micro_batch x seq/cp x hidden`` activations (``/tp`` with sequence parallelism) over the PP
    group (see docs/parallelism.md, pipeline schedules)."""
    model, pp = s.model, s.pp
    embF, embB = work.emb_f.total(), work.emb_b.total()
    headF, headB = work.head_f.total(), work.head_b.total()
    Fl, Bl = work.F_layers.total(), work.B_layers.total()
    single = pp <= 1
    R = Fl + Bl  # a middle stage (average layer count)
    lay, tr = s.lay, s.training
    n_hi, n_lo, n_mid = stage_layer_counts(
        model.layers, pp, s.vp, lay.embedding_stage, lay.loss_stage, lay.stage_layers
    )
    r_layer = R / (model.layers / pp)
    if model.hybrid_pattern is not None:
        # a hybrid's ranks hold their slices of the pattern: a layer of each kind costs the middle stage's
        # mean layer in proportion to that kind's priced forward + backward
        own = {k: f.total() + b.total() for k, (_n, f, b, _w, _r) in zip(work.kinds, work.parts, strict=True)}
        mean = sum(n * own[k] for k, (n, *_x) in zip(work.kinds, work.parts, strict=True)) / model.layers
        cost = {str(k): r_layer * own[k] / np.maximum(mean, 1e-30) for k in own}
        c_hi, c_lo, c_mid = pattern_stage_costs(
            model.hybrid_pattern, cost, pp, s.vp, lay.embedding_stage, lay.loss_stage, lay.stage_layers
        )
    else:
        c_hi, c_lo, c_mid = r_layer * n_hi, r_layer * n_lo, r_layer * n_mid
    hp_first = work.hp_delta * np.minimum(tr.bf16_layers_start, n_hi) if s.hp_layers else 0.0
    hp_last = work.hp_delta * np.minimum(tr.bf16_layers_end, n_lo) if s.hp_layers else 0.0
    hp_all = work.hp_delta * min(s.hp_layers, model.layers)
    first = c_hi + embF + embB + hp_first
    last = c_lo + headF + headB + hp_last
    stage_max = np.where(
        single, R + embF + embB + headF + headB + hp_all, np.maximum(np.maximum(first, last), c_mid)
    )
    stage_sum = pp * R + embF + embB + headF + headB + hp_all
    W_max = work.W_layers + np.where(single, work.head_w, 0.0)
    p2p_bytes = s.mb * model.seq_len / s.cp * model.hidden * s.act / np.where(s.sp, s.tp, 1.0)
    c = np.where(pp > 1, s.pricer.comm_time("send_recv", p2p_bytes, "pp"), 0.0)
    t_pipe = pipeline_time(s.schedule, pp, s.m, s.vp, stage_max, stage_sum, Fl, Bl, work.W_layers, c)
    return _Pipeline(
        Fl, Bl, embF, embB, headF, headB, stage_max, first, last, n_hi, n_lo, n_mid, r_layer, W_max, c, t_pipe
    )


@dataclass
class _RankParams:
    """Parameters held by one rank (its stage's share over TP, and EP for the experts)."""

    dense: Num
    experts: Num
    embed: Num
    total: Num


def _rank_params(s: _Step) -> _RankParams:
    """Parameters per rank: dense layers and the MoE layers' attention, norms and shared experts over
    ``pp x tp``; routed experts over ``pp x etp x ep``; the embedding and LM head (one of them on a
    pipeline stage, the larger) over TP when vocabulary-parallel."""
    pc, pp, tp = s.pc, s.pp, s.tp
    moe_attn = pc.attention_per_layer + pc.norms_per_layer + pc.moe_layer_shared
    dense = (pc.dense_layers * pc.per_dense_layer + pc.moe_layers * moe_attn) / pp / tp
    experts = pc.moe_layers * pc.moe_layer_experts / pp / s.etp / s.ep
    embed = (
        np.where(pp <= 1, pc.embedding + pc.lm_head, np.maximum(pc.embedding, pc.lm_head or pc.embedding))
        / s.vdiv
    )
    return _RankParams(dense, experts, embed, dense + experts + embed)


def _optimizer_params(s: _Step, params: _RankParams) -> Num:
    """Parameters whose optimizer state the rank holds and updates: all it holds, or under ZeRO >= 1 its
    shard of them, the dense ones over ``dp x cp`` and the routed experts over their data-parallel group
    (:func:`sharding_groups`)."""
    group, expert_group = sharding_groups(s.lay)
    sharded = (params.total - params.experts) / group + params.experts / expert_group
    return np.where(s.zero >= 1, sharded, params.total)


def _bucketed(comm: Num, window: Num, buckets: Num, overlap: Num) -> Num:
    """Exposed seconds of a bucketed collective overlapped with ``window`` seconds of compute: the
    last bucket always shows, ``max(comm / buckets, comm - window (1 - 1/buckets))``."""
    return np.where(overlap, np.maximum(comm / buckets, comm - window * (1 - 1 / buckets)), comm)


@dataclass
class _DataParallel:
    """Data-parallel seconds of one step (gradient reduction, ZeRO/FSDP gathers, side costs)."""

    dp_exposed: Num
    zero3_exposed: Num
    dp_grad: Num
    dp_legacy: Num
    dp_tail: Num
    """Exposed parameter all-gather of ZeRO-1/2 behind the next forward (seconds)."""
    buckets: Num
    B_last: Num
    overlap_cost: Num
    ddp_copy: Num
    fsdp_copy: Num
    """FSDP2's copy-out kernels (compute stream), per step."""
    gil: Num
    busy: Num = 0.0
    """Seconds per step the data-parallel collectives move bytes, exposed or not (DDP: the all-reduce;
    ZeRO-1/2: reduce-scatter and all-gather; ZeRO-3: two gathers and a reduce-scatter per micro-batch)."""


def _data_parallel(s: _Step, work: _StageWork, pipe: _Pipeline, params: _RankParams) -> _DataParallel:
    """Exposed data-parallel communication of a step (see docs/parallelism.md, overlap assumptions).

    DDP: gradient all-reduce in buckets during the last backward. ZeRO-1/2 (distributed optimizer):
    gradient reduce-scatter during the last backward, parameter all-gather during the next forward.
    ZeRO-3/FSDP: parameters gathered for forward and backward and gradients reduce-scattered per
    micro-batch, prefetched behind the layer compute: exposed ``max(2 AG + RS - (F+B), 0)`` per
    micro-batch. Expert gradients reduce (and, ZeRO-1/2, expert parameters gather) over the
    expert-data-parallel group (``tp cp dp / (ep etp)`` ranks, ``ep etp`` apart: the pricer's ``edp``).
    Single-process nn.DataParallel: parameters broadcast from GPU 0 and gradients reduced to it every
    step, nothing overlapped."""
    pricer, dp, zero0, zero12, zero3 = s.pricer, s.dp, s.zero0, s.zero12, s.zero3
    grad_b = s.sb.grads
    dense_grads = (params.dense + params.embed) * grad_b
    exp_grads = params.experts * grad_b
    gdt = "fp32" if grad_b == 4 else "bf16"
    zeros = 0.0 * dp

    def when(mask: Num, fn: Any) -> Num:
        """Price a collective only if some layout needs it (scalar layouts skip the rest)."""
        return fn() if np.any(mask & (dp > 1)) else zeros

    # (the contention of the layout's concurrent data-parallel groups on the fabric: the pricer's "dp" rate)
    ar = when(zero0, lambda: pricer.comm_time("all_reduce", dense_grads, "dp", gdt))
    rs = when(~zero0, lambda: pricer.comm_time("reduce_scatter", dense_grads, "dp", gdt))
    ag = when(~zero0, lambda: pricer.comm_time("all_gather", (params.dense + params.embed) * s.sb.gathered, "dp"))
    # expert data parallelism: the tp x cp x dp / (ep x etp) ranks that hold the same experts, ep x etp
    # ranks apart (parallel folding; the pricer's "edp" group, across nodes once ep x etp fills a node):
    # their gradients all-reduce (DDP) or reduce-scatter and their parameters all-gather (ZeRO-1/2)
    moe = s.pc.moe_layers > 0
    ar_exp = when(zero0 & moe, lambda: pricer.comm_time("all_reduce", exp_grads, "edp", gdt))
    rs_exp = when(zero12 & moe, lambda: pricer.comm_time("reduce_scatter", exp_grads, "edp", gdt))
    ag = ag + when(zero12 & moe, lambda: pricer.comm_time("all_gather", params.experts * s.sb.gathered, "edp"))
    single = s.pp <= 1
    overlap = _a(s.lay.dp_overlap, bool)
    # one bucket per layer during the last micro-batch's backward (forward)
    buckets = np.maximum(s.layers_per_rank, 1.0)
    B_last = pipe.Bl + np.where(single, pipe.embB + pipe.headB, np.maximum(pipe.embB, pipe.headB))
    F_first = pipe.Fl + np.where(single, pipe.embF + pipe.headF, pipe.embF)
    dp_grad = np.select([zero0, zero12], [ar + ar_exp, rs + rs_exp], default=0.0)
    grad_x = _bucketed(dp_grad, B_last, buckets, overlap)
    # Megatron's overlap_param_gather off: the distributed optimizer gathers every bucket after its step
    gather_overlap = overlap & _a(s.lay.param_gather_overlap, bool)
    ag_x = _bucketed(ag, F_first, buckets, gather_overlap)
    dp_exposed = grad_x + np.where(zero12, ag_x, 0.0)
    per_tensor = zero3 & (np.asarray(s.lay.zero3_gather) == "per_tensor")
    copy_out, ag_in, rs_in = _fsdp_copies(s, params, zeros)
    zero3_exposed = np.where(
        zero3, np.maximum(2.0 * ag + ag_in + rs + rs_in - (pipe.Fl + pipe.Bl), 0.0) * s.m, 0.0
    )
    if np.any(per_tensor & (dp > 1)):
        zero3_exposed = np.where(per_tensor, zero3_per_tensor(s, params) * s.m, zero3_exposed)
    dp_exposed = np.where(zero3, 0.0, np.where(dp > 1, dp_exposed, 0.0))
    pbytes = 4.0 if s.param_dtype == "fp32" else 2.0
    dp_legacy = when(
        s.single_proc,
        lambda: (
            pricer.comm_time("broadcast", params.total * pbytes, "dp")
            + pricer.comm_time("reduce", params.total * grad_b, "dp", gdt)
        ),
    )
    dp_exposed = np.where(s.single_proc & (dp > 1), dp_legacy, dp_exposed)
    # compute beside an overlapped collective runs slower (NCCL's kernels take SMs and HBM bandwidth,
    # the system's measured compute_slowdown); where the host bounds those phases the GPU has slack
    overlapped = np.where(
        zero3,
        np.minimum(2.0 * ag + rs, pipe.Fl + pipe.Bl) * s.m,
        (dp_grad - grad_x) + np.where(zero12, ag - ag_x, 0.0),
    )
    overlapped = np.where((dp > 1) & overlap & ~s.single_proc & ~per_tensor, overlapped, 0.0)
    host_slack = (
        work.F_layers.time.get("host_overhead", 0.0) + work.B_layers.time.get("host_overhead", 0.0)
    ) * s.m
    dp_tail = np.where(zero12 & (dp > 1) & ~s.single_proc, ag_x, 0.0)
    v = np.maximum(s.vp, 1.0)
    # (vp > 1 only under the interleaved schedule: prediction.layout_of and the planner's space set vp 1 elsewhere)
    chunked = overlap & (v > 1) & (dp > 1) & ~zero3 & ~s.single_proc
    if np.any(chunked):
        # Megatron's interleaved schedule syncs each of the v model chunks' gradients when that chunk's last
        # micro-batch backward ends, and gathers each chunk's parameters at the previous chunk's first forward
        # (megatron/core/pipeline_parallel/schedules.py: grad_sync_func / param_sync_func per model chunk): v
        # buckets whose boundaries lie p virtual micro-batches (Bl / v, Fl / v seconds each) apart, the last
        # ending with the step's last backward. Applied as a change to the one-window exposure (the arrays
        # above do not carry the schedule's axes: the layout grid's full size is met here only)
        d_ag = np.where(chunked & zero12 & gather_overlap, _bucketed(ag, s.pp * pipe.Fl, v, True) - ag_x, 0.0)
        d_exp = np.where(chunked, _bucketed(dp_grad, s.pp * pipe.Bl, v, True) - grad_x, 0.0) + d_ag
        dp_exposed, overlapped, dp_tail = dp_exposed + d_exp, overlapped - d_exp, dp_tail + d_ag
        # (the buckets and window the DES replays)
        buckets, B_last = np.where(chunked, v, buckets), np.where(chunked, s.pp * pipe.Bl, B_last)
    slowdown = overlap_slowdown(s.cluster)
    overlap_cost = np.maximum((slowdown - 1.0) * overlapped - host_slack, 0.0)
    return _DataParallel(
        dp_exposed,
        zero3_exposed,
        dp_grad,
        dp_legacy,
        dp_tail,
        buckets,
        B_last,
        overlap_cost,
        _ddp_copy(s, params, zeros),
        copy_out * s.m,
        _dataparallel_launch(s, work, pipe),
        np.where(
            dp > 1,
            np.select([zero3, zero12, s.single_proc], [(2.0 * ag + rs) * s.m, dp_grad + ag, dp_legacy], dp_grad),
            0.0,
        ),
    )


def zero3_per_tensor(s: _Step, params: _RankParams) -> Num:
    """Seconds per micro-batch of ZeRO-3's parameter gathers and gradient reduce-scatters as DeepSpeed's
    first ZeRO-3 ran them (spring 2021, ``deepspeed/runtime/zero/partition_parameters.py``), all exposed.

    Each weight tensor is gathered on its own (``_allgather_param``): ``torch.cuda.synchronize()``,
    then ``torch.distributed.all_gather`` into a list of ``dp`` per-rank views of a flat buffer, which
    PyTorch's NCCL process group of that time ran as one all-gather into a flat temporary followed by one
    ``copy_`` per rank into the views; each gradient likewise (``_reduce_scatter_gradient``: a list of
    ``dp`` input views, flattened by one copy per rank, then a reduce-scatter). The synchronize before
    every gather leaves nothing overlapped. Per micro-batch: a gather for the forward, one for the
    backward, one more for the full-recompute forward, and one reduce-scatter, each
    ``sum over tensors (collective(tensor) + dp copies)``; the copies cost the larger of their host (each
    a stream launch from inside the one collective call: ``HostOps.extra_launch_ops`` of an eager op's
    launch, the host of a launch beyond an op's first) and the bytes' device copy. Tensors:
    :func:`~simcore.workload.model.weight_tensors` of the stage (biases on every projection and norm of a
    LayerNorm GPT, none in an RMSNorm one; dense models: DeepSpeed's 2021 ZeRO-3 had no experts); the
    four projection matrices of a layer and the embedding share the bytes, norms and biases are
    ``hidden`` elements each (docs/parallelism.md, ZeRO-3 as DeepSpeed shipped it in 2021)."""
    model, pricer = s.model, s.pricer
    biased = model.norm == "layernorm"
    tensors = weight_tensors(model, s.layers_per_rank, s.gate_up, biased)
    big = 4.0 * s.layers_per_rank + 1.0 + (0.0 if model.tied_embeddings else 1.0)
    small = tensors - big
    pbytes = 4.0 if s.param_dtype == "fp32" else 2.0
    elems = params.dense + params.experts + params.embed
    small_elems = float(model.hidden)

    def one_pass(op: str, nbytes_per_elem: float, dtype: str) -> Num:
        big_b = (elems - small * small_elems) / big * nbytes_per_elem
        coll = big * pricer.comm_time(op, big_b, "dp", dtype) + small * pricer.comm_time(
            op, small_elems * nbytes_per_elem, "dp", dtype
        )
        copies = tensors * s.dp * pricer.launch_s * s.prof.host_ops.extra_launch_ops
        copy_gpu = pricer.price([L.mem_op("copy", elems, nbytes_per_elem, "dp_comm")]).total()
        return coll + np.maximum(copies, copy_gpu)

    gathers = 2.0 + s.full_t
    grad_b = s.sb.grads
    return gathers * one_pass("all_gather", pbytes, "fp32" if pbytes == 4 else "bf16") + one_pass(
        "reduce_scatter", grad_b, "fp32" if grad_b == 4 else "bf16"
    )


def fsdp_gather_wait(s: _Step) -> Num:
    """Seconds one layer's compute waits for its own parameter all-gather once the host has issued it
    (FSDP2, ``fully_shard`` per block; 0 for every other layout): the all-gather of the layer's bf16
    parameters over the data-parallel group, priced as one collective of that size on the ``dp``
    placement, plus the layer's share of the all-gather copy-in on the same stream
    (:func:`_fsdp_copies`).

    FSDP2's pre-forward hook of a block (``torch/distributed/fsdp/_fully_shard/_fsdp_state.py``
    ``_pre_forward`` -> ``FSDPParamGroup.pre_forward``: ``unshard()`` then ``wait_for_unshard()``)
    issues the block's all-gather on the all-gather stream and makes the compute stream wait for it
    before the copy-out; nothing issues it earlier in the forward (explicit forward prefetch,
    ``set_modules_to_forward_prefetch``, is opt-in). In the backward ``pre_backward`` unshards the
    block and prefetches the next one to run (``_backward_prefetch``, one group ahead). When the host
    is ahead of the GPU the gathers hide behind the previous layers; when it is not, each layer waits
    for its gather (:func:`host_run_ahead`; docs/parallelism.md, FSDP2 issue order)."""
    mask = s.zero3 & _a(s.lay.fsdp, bool) & (s.dp > 1) & (np.asarray(s.lay.zero3_gather) != "per_tensor")
    if not np.any(mask):
        return 0.0 * s.dp
    params = _rank_params(s)
    n = np.maximum(s.layers_per_rank, 1.0)
    layer = params.dense / n
    gather = s.pricer.comm_time("all_gather", layer * 2.0, "dp")
    _out, ag_in, _rs_in = _fsdp_copies(s, params, 0.0 * s.dp)
    copy_in = ag_in * layer / np.maximum(2.0 * params.dense + params.embed, 1.0)
    return np.where(mask, gather + copy_in, 0.0)


def _fsdp_copies(s: _Step, params: _RankParams, zeros: Num) -> tuple[Num, Num, Num]:
    """Seconds per micro-batch of FSDP2's (``fully_shard``) copy kernels around its collectives:
    ``(copy-outs, all-gather copy-ins, reduce-scatter copy-in)`` (0 without FSDP).

    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: before each all-gather
    ``all_gather_copy_in`` casts each fp32 shard to the bf16 ``param_dtype`` (``MixedPrecisionPolicy``)
    and ``_foreach_copy_``-s it into the flat input, on the all-gather stream; after it
    ``split_with_sizes_copy`` copies the gathered flat buffer out into each unsharded parameter, on the
    compute stream; before each reduce-scatter ``_chunk_cat`` copies the bf16 unsharded gradients into
    the reduce-scatter input in the reduce dtype, on the reduce-scatter stream. Each layer's group is
    gathered twice (forward, and backward: ``reshard_after_forward=True``), the root's (embedding, head)
    once (fully_shard keeps the root unsharded after forward). Each priced as a streaming kernel over its
    bytes read + written (the fitted ``copy`` and ``cast`` curves); the copy-outs add to the step, the
    copy-ins lengthen the collectives' streams (docs/parallelism.md, FSDP2 copies)."""
    mask = s.zero3 & _a(s.lay.fsdp, bool) & (s.dp > 1)
    if not np.any(mask):
        return zeros, zeros, zeros
    gathered = 2.0 * params.dense + params.embed  # elements all-gathered per micro-batch
    shard = gathered / s.dp
    out = [L.fused_mem_op("copy", gathered, 2.0, 4.0, 0.0, "fsdp_copy")]
    ins = [L.fused_mem_op("copy", shard, 2.0, 4.0, 0.0, "fsdp_copy")]
    if s.param_dtype == "fp32":  # the fp32 shard read, its bf16 copy written
        ins.append(L.fused_mem_op("cast", shard, 2.0, 6.0, 0.0, "fsdp_copy"))
    rs = [L.fused_mem_op("cast", params.dense + params.embed, 2.0, 2.0 + s.sb.grads, 0.0, "fsdp_copy")]
    copy_out, ag_in, rs_in = (np.where(mask, s.pricer.price(o).total(), 0.0) for o in (out, ins, rs))
    return copy_out, ag_in, rs_in


def _ddp_copy(s: _Step, params: _RankParams, zeros: Num) -> Num:
    """Seconds of PyTorch DDP's bucket copies (fp32 weights): each gradient is copied into its flat
    bucket before the all-reduce and back afterwards, on the compute stream (Megatron-style training
    reduces in place in contiguous gradient buffers)."""
    mask = (s.dp > 1) & s.zero0 & ~s.single_proc
    if s.param_dtype != "fp32" or not np.any(mask):
        return zeros
    copy_op = L.mem_op("copy", 2.0 * (params.dense + params.embed + params.experts), s.sb.grads, "dp_copy")
    return np.where(mask, s.pricer.price([copy_op]).total(), 0.0)


def _dataparallel_launch(s: _Step, work: _StageWork, pipe: _Pipeline) -> Num:
    """Exposed host seconds of single-process nn.DataParallel: one Python process launches every
    replica's kernels (GIL), serially per micro-batch; the excess over the GPU time shows."""
    kernels = (
        work.F_layers.kernels
        + work.B_layers.kernels
        + work.emb_f.kernels
        + work.emb_b.kernels
        + work.head_f.kernels
        + work.head_b.kernels
    )
    host = kernels * s.pricer.launch_s
    return np.where(s.single_proc & (s.dp > 1), np.maximum(host * s.dp - pipe.stage_max, 0.0) * s.m, 0.0)


@dataclass
class _Optimizer:
    """Seconds of the optimizer step and the loop's host after it."""

    opt: Num
    """The step's optimizer seconds (GPU update, unscaling, exposed host)."""
    opt_gpu: Num
    """Its GPU part (update plus the fp16 unscale pass)."""
    h_opt: Num = 0.0
    h_end: Num = 0.0
    loss_wait: bool = False


def _optimizer(s: _Step, params: _RankParams, ht: _HostTables | None, host_lag: Num) -> _Optimizer:
    """The optimizer step on each rank's share of the parameters (:func:`_optimizer_params`).

    fp16 trains with dynamic loss scaling (PyTorch's GradScaler, Megatron's): one more pass over the
    gradients unscales them and checks for inf/NaN; for a foreach (or for-loop) optimizer the host reads
    that flag before the update (GradScaler.step's ``found_inf.item()``): it waits for the GPU, so the
    update's host time is exposed. A fused optimizer takes the flag on the GPU: no wait (see
    docs/compute.md, host model)."""
    training, pricer, zero, dp = s.training, s.pricer, s.zero, s.dp
    opt_params = _optimizer_params(s, params)
    # CPU optimizer offload: the GPU updates the rest while the host's share runs beside it (docs/parallelism.md, Offload)
    off = _optimizer_offload(s, opt_params)
    opt = C.with_launch(
        pricer.optimizer_time(
            opt_params * (1.0 - training.optimizer_offload_fraction),
            training.optimizer,
            training.optimizer_impl == "fused",
            training.master_weights and s.param_dtype != "fp32",
            s.param_dtype,
            s.sb.grads,
            2.0 if training.optimizer_moments_dtype == "bf16" else 4.0,
        ),
        pricer.launch_s,
        pricer.prof.launch_mode,
    )
    loss_scaling = training.precision == "fp16"
    loss_wait = loss_scaling and training.optimizer_impl != "fused"
    unscale_t: Num = 0.0
    if loss_scaling:
        unscale = L.mem_op("mul", params.total / np.where(zero >= 2, dp, 1.0), s.sb.grads, "optimizer")
        unscale_t = pricer.price([unscale]).total()
    opt_update = np.maximum(opt, off[0])
    opt = opt_gpu = opt_update + unscale_t
    if ht is None or "adamw_fused_fixed" not in s.host_cal:
        return _Optimizer(opt, opt_gpu, loss_wait=loss_wait)
    h_opt = _optimizer_host(s)
    # the host reaches optimizer.step() host_lag seconds before the GPU finishes the backward; after
    # loss scaling's wait it reads the inf flag once the unscale pass is done, then issues the
    # update: no lead, and nothing hides the unscale
    opt = unscale_t + np.maximum(opt_update, h_opt) if loss_wait else np.maximum(opt, h_opt - host_lag)
    # zero_grad and the loop after the optimizer: the GPU waits when the loop synchronizes
    prof, profiler, implementation = s.prof, s.profiler, s.implementation
    h_end = (
        prof.host_of("step_end", profiler, implementation)
        + (
            0.0
            if s.compiled
            else s.layers_per_rank * prof.host_of("step_end_layer", profiler, implementation)
        )
        + ht.wrapper_step("end")
    ) * ht.pf("step_end")
    return _Optimizer(opt, opt_gpu, h_opt, h_end, loss_wait)


def _optimizer_offload(s: _Step, opt_params: Num) -> tuple[Num, Num, Num, Num]:
    """``(seconds, gradient copy, CPU update, weight copy)`` of the offloaded share of the optimizer step
    (``training.optimizer_offload_fraction`` of the rank's ``opt_params``;
    :func:`simcore.engine.offload.optimizer_offload_time`; zeros without offload). The host keeps fp32
    copies (Megatron-Core's ``param_update_in_fp32``): the weights come back as 4 bytes each, the
    gradients go down as the optimizer's gradient bytes."""
    tr = s.training
    if tr.optimizer_offload_fraction <= 0:
        return 0.0, 0.0, 0.0, 0.0
    return optimizer_offload_time(
        s.cluster.system,
        opt_params,
        tr.optimizer_offload_fraction,
        tr.optimizer,
        s.sb.grads,
        4.0,
        tr.optimizer_offload_overlap,
    )


def _activation_offload(s: _Step, pipe: _Pipeline) -> Num:
    """Exposed seconds per step of activation offload (``training.activation_offload_layers``): per
    micro-batch, the offload stream's excess over the forward and the reload stream's over the backward
    (:func:`simcore.engine.offload.layered_copy_exposed`), each layer's activations
    (:func:`layer_activation_bytes`) over the host link (:func:`simcore.comm.host.pinned_copy_time`), and no
    faster than the host memory's share of each GPU (every GPU's stream copies at once: a Grace's LPDDR5X
    serves the two GPUs of its superchip; :func:`simcore.engine.offload.host_memory_copy_time`)."""
    n = s.training.activation_offload_layers
    on = offloaded_layers(s.training, s.pp) > 0  # one stage: the stage holds every layer
    if not np.any(on):
        return 0.0
    nbytes = layer_activation_bytes(s.model, s.training, s.lay, s.param_dtype, s.compiled)
    system = s.cluster.system
    L = s.model.layers
    mem = host_memory_copy_time(system, nbytes)
    fwd = layered_copy_exposed(n, L, pipe.Fl / L, np.maximum(pinned_copy_time(system, nbytes, "d2h"), mem))
    bwd = layered_copy_exposed(n, L, pipe.Bl / L, np.maximum(pinned_copy_time(system, nbytes, "h2d"), mem))
    return np.where(on, (fwd + bwd) * s.m, 0.0)


def _optimizer_host(s: _Step) -> Num:
    """Host seconds of AdamW's step: a fixed host cost per step plus a cost per parameter tensor
    (norms, projections, MLP matrices of each layer; embedding, head and final norm), fused or foreach
    as measured (Hugging Face's GPT-2 also steps its biases and position embedding); FSDP/ZeRO-3 steps
    DTensors at their own measured costs."""
    prof, training, profiler = s.prof, s.training, s.profiler
    tensors = weight_tensors(
        s.model, np.ceil(s.layers_per_rank), s.gate_up, L.hf_biases(s.model, s.implementation)
    )

    # (seconds entries through ComputeProfile.host: scaled by the profile's host speed)
    def h(name: str, default: float = 0.0) -> float:
        return prof.host(name, profiler, default)

    def opt_host(part: str) -> float:
        return prof.optimizer_host(training.optimizer, training.optimizer_impl, part, profiler)

    plain_opt = opt_host("fixed") + opt_host("per_tensor") * tensors
    dtensor_opt = (
        h("adamw_fused_dtensor_fixed", default=h("adamw_fused_fixed"))
        + h("adamw_fused_dtensor_per_tensor", default=h("adamw_fused_per_tensor")) * tensors
    )
    return np.where(s.zero3, dtensor_opt, plain_opt)


def _pacing_breakdown(s: _Step, work: _StageWork, pipe: _Pipeline) -> dict[str, Num]:
    """Seconds by category of the stage that sets the pace over the step's ``m`` micro-batches: the
    first (its layers and the embedding), the last (its layers and the LM head + loss) or a middle one
    (the larger layer count); one stage holds everything."""
    single = s.pp <= 1
    stage = work.F_layers.merged(work.B_layers)
    mid = pipe.r_layer * pipe.n_mid
    is_first = (pipe.first >= pipe.last) & (pipe.first >= mid)
    is_last = ~is_first & (pipe.last >= mid)
    w_emb = np.where(single | is_first, 1.0, 0.0)
    w_head = np.where(single | is_last, 1.0, 0.0)
    n_b = np.where(is_last, pipe.n_lo, np.where(is_first, pipe.n_hi, pipe.n_mid))
    layer_w = np.where(single, 1.0, n_b / np.maximum(s.layers_per_rank, 1e-30))
    bd: dict[str, Num] = {}
    for k, v in stage.time.items():
        bd[k] = v * s.m * layer_w
    for pr, w8 in ((work.emb_f, w_emb), (work.emb_b, w_emb), (work.head_f, w_head), (work.head_b, w_head)):
        for k, v in pr.time.items():
            bd[k] = bd.get(k, 0.0) + v * s.m * w8
    return bd


def _step_time(
    s: _Step,
    work: _StageWork,
    pipe: _Pipeline,
    dpc: _DataParallel,
    optm: _Optimizer,
    host: _Host,
    act_offload: Num = 0.0,
) -> tuple[Num, dict[str, Num], Num, Num]:
    """The step's seconds, its breakdown (the pacing stage's view; sums to the step time), the
    optimizer's seconds and where the step is unsynchronized.

    ``step = pipeline + exposed DP communication + optimizer + host tails + overlap slowdown +
    power cap + exposed activation offload``. A power-capped GPU stretches a step whose kernels would
    draw more than its TDP on average. Where nothing synchronizes (one stage, eager host tables, no ``step_sync``, no loss
    scaling wait) the host runs ahead into the next step while the GPU finishes this one, so in the
    steady state a step takes the larger of the host and GPU totals (see docs/compute.md, composing a
    training step)."""
    step = (
        pipe.t_pipe
        + dpc.dp_exposed
        + dpc.zero3_exposed
        + optm.opt
        + dpc.gil
        + dpc.ddp_copy
        + dpc.fsdp_copy
        + dpc.overlap_cost
        + optm.h_end
        + act_offload
    )
    bd = _pacing_breakdown(s, work, pipe)
    compute_sum: Num = sum(bd.values(), 0.0)
    bd["pipeline_bubble"] = np.maximum(pipe.t_pipe - compute_sum, 0.0)
    if np.any(act_offload):
        bd["activation_offload"] = act_offload
    bd["dp_comm"] = dpc.dp_exposed + dpc.zero3_exposed
    bd["optimizer"] = optm.opt
    bd["host_launch"] = dpc.gil
    bd["dp_copy"] = dpc.ddp_copy
    if np.any(dpc.fsdp_copy):
        bd["fsdp_copy"] = dpc.fsdp_copy
    bd["overlap_slowdown"] = dpc.overlap_cost
    bd["host_overhead"] = bd.get("host_overhead", 0.0) + optm.h_end
    power_cap = breakdown_power_cap(s.cluster.device, s.prof, bd, s.recipe.gemm_family(s.cluster.device))
    bd["power_cap"] = power_cap
    step = step + power_cap
    opt = optm.opt
    free = (np.asarray(s.pp, dtype=float) <= 1) & (s.layer_host and not s.step_sync and not optm.loss_wait)
    if np.any(free):
        host_wait = bd["host_overhead"] + (opt - optm.opt_gpu)
        g_total = step - host_wait
        h_total = s.m * (host.h_layers + host.h_out) + optm.h_opt + optm.h_end
        step = np.where(free, np.maximum(g_total, h_total), step)
        bd["host_overhead"] = np.where(free, np.maximum(h_total - g_total, 0.0), bd["host_overhead"])
        bd["optimizer"] = np.where(free, optm.opt_gpu, opt)
        opt = bd["optimizer"]
    return step, bd, opt, free


def _step_memory(s: _Step, params: _RankParams) -> dict[str, Num]:
    """Peak bytes per GPU by part (:func:`training_memory`), plus PyTorch DDP's flat gradient buckets
    with fp32 weights: a second copy of the gradients."""
    mem = training_memory(
        s.model,
        s.training,
        s.lay,
        params.total,
        params.dense,
        s.m,
        s.param_dtype,
        s.compiled,
        s.cluster.device,
        params.experts,
    )
    if s.param_dtype == "fp32":
        mask = (s.dp > 1) & s.zero0 & ~s.single_proc
        buckets_mem = np.where(mask, params.total * s.sb.grads, 0.0)
        mem["gradients"] = mem["gradients"] + buckets_mem
        mem["total"] = mem["total"] + buckets_mem
    return mem


def evaluate(
    model: ModelSpec,
    training: TrainingSpec,
    lay: TrainingLayout,
    cluster: ClusterInfo,
    framework: str = "eager",
    calibration: str | None = None,
    param_dtype: str = "bf16",
    profiler: bool = False,
    gate_up: str = "separate",
    step_sync: bool = True,
    cpu_op_time: tuple[float, float | None] | None = None,
    implementation: str = "reference",
    dropout: float = 0.0,
    attention_backend: str = "flash",
    profiler_record: tuple[str, ...] = ("shapes",),
    layer_ops: tuple[float, float] | None = None,
    moe_expert_calls: str = "grouped",
    moe_host_sync: bool = False,
    moe_dispatcher: str = "alltoall",
    moe_a2a_overlap: bool = False,
    moe_fused_mlp: bool = False,
) -> TrainingEval:
    """Price one training step for every layout in ``lay`` (numpy broadcasting). ``gate_up``: a gated
    MLP's gate/up projections as ``separate`` GEMMs or one ``fused`` GEMM (see ``RuntimeSpec``).
    ``step_sync``: the loop waits for the GPU every step (else an eager single-stage step takes the
    larger of its host and GPU totals); ``cpu_op_time``: the CPU's probe speed (main, backward
    seconds; ``RuntimeSpec.cpu_op_time``), scaling the profile's host times; ``implementation``: whose
    modelling code (``RuntimeSpec.implementation``: its composite elementwise ops); ``dropout``: the
    probability on the embedding and residual branches (its kernels where > 0) and in the attention
    kernel; ``attention_backend``: ``RuntimeSpec.attention_backend``; ``profiler_record``: what the
    profiler records beside the timeline (``RuntimeSpec.profiler_record``), which scales the profiled
    host times by kind (``ComputeProfile.profiler_factor``); ``layer_ops``: (forward, backward) ops a
    layer of the run's own code issues (``RuntimeSpec.layer_ops``), scaling the eager host per layer by
    their ratio to the calibrated code's (``HostOps.calibrated_layer_ops``); ``moe_expert_calls`` and
    ``moe_host_sync``: ``RuntimeSpec``'s (the routed experts' GEMMs issued per local expert; a host sync in
    every MoE layer's forward; :func:`_moe_expert_host`, :func:`_host_overhead`); ``moe_dispatcher``,
    ``moe_a2a_overlap`` and ``moe_fused_mlp``: ``RuntimeSpec``'s (how the routed tokens travel; the expert
    all-to-all hidden behind another micro-batch's compute, :func:`_exposed`; the experts' fused grouped MLP,
    :func:`~simcore.workload.lowering.expert_eager_ops`).

    The parts: stage times (:func:`_stage_work`), host (:func:`_host_overhead`), pipeline
    (:func:`_pipeline`), data-parallel communication (:func:`_data_parallel`), optimizer
    (:func:`_optimizer`), the step and its breakdown (:func:`_step_time`) and memory
    (:func:`_step_memory`)."""
    s = _Step(
        model,
        training,
        lay,
        cluster,
        framework,
        calibration,
        param_dtype,
        profiler,
        gate_up,
        step_sync,
        cpu_op_time,
        implementation,
        dropout,
        attention_backend,
        profiler_record,
        layer_ops,
        moe_expert_calls,
        moe_host_sync,
        moe_dispatcher,
        moe_a2a_overlap,
        moe_fused_mlp,
    )
    work = _stage_work(s)
    ht = _host_tables(s) if s.layer_host else None
    host = _host_overhead(s, ht, work) if ht is not None else _Host()
    pipe = _pipeline(s, work)
    params = _rank_params(s)
    dpc = _data_parallel(s, work, pipe, params)
    optm = _optimizer(s, params, ht, host.host_lag)
    act_offload = _activation_offload(s, pipe)
    step, bd, opt, free = _step_time(s, work, pipe, dpc, optm, host, act_offload)

    tp, pp, dp, cp = s.tp, s.pp, s.dp, s.cp
    tokens = _a(lay.global_batch) * model.seq_len
    gpus = tp * pp * dp * cp
    mflops = model_flops_per_token(model) * tokens
    rec_flops_rank: Num = 0.0
    for count, _f, _b, _w, rf in work.parts:
        rec_flops_rank = rec_flops_rank + rf * count / model.layers * s.layers_per_rank
    hflops = mflops + rec_flops_rank * s.m * gpus
    mem = _step_memory(s, params)
    dp_comm = np.where(dp > 1, np.where(s.single_proc, dpc.dp_legacy, dpc.dp_grad), 0.0)
    stage_times = {
        "forward_s": pipe.Fl,
        "backward_s": pipe.Bl,
        "wgrad_s": work.W_layers,
        "embedding_fwd_s": pipe.embF,
        "embedding_bwd_s": pipe.embB,
        "head_fwd_s": pipe.headF,
        "head_bwd_s": pipe.headB,
        "head_wgrad_s": work.head_w,
        "p2p_s": pipe.c,
        "dp_comm_s": np.where(s.zero3, dpc.zero3_exposed, dp_comm),
        "dp_tail_s": dpc.dp_tail,
        "dp_busy_s": dpc.busy,
        "host_tail_s": dpc.gil + dpc.ddp_copy + dpc.fsdp_copy + optm.h_end,
        "optimizer_s": opt,
        "buckets": dpc.buckets,
        "dp_window_s": dpc.B_last,
        "layers": float(model.layers),
        # the extra time of the layers the precision recipe keeps in bf16, on the first / last rank
        "hp_first_s": np.where(
            pp <= 1,
            work.hp_delta * min(s.hp_layers, model.layers),
            work.hp_delta * np.minimum(s.training.bf16_layers_start, pipe.n_hi),
        )
        if s.hp_layers
        else 0.0,
        "hp_last_s": work.hp_delta * np.minimum(s.training.bf16_layers_end, pipe.n_lo)
        if s.hp_layers
        else 0.0,
    }
    exposed = {
        "tp_comm": bd.get("tp_comm", 0.0),
        "cp_comm": bd.get("cp_comm", 0.0),
        "ep_comm": bd.get("ep_comm", 0.0),
        "dp_comm": bd["dp_comm"],
        "pp_p2p": 2 * (pp - 1) * pipe.c,
    }
    bubble = bd["pipeline_bubble"] / np.maximum(pipe.t_pipe, 1e-30)
    bubble = np.where(bubble < 1e-9, 0.0, bubble)  # float noise of single-stage layouts
    return TrainingEval(
        step_time_s=step,
        breakdown=bd,
        bubble_fraction=bubble,
        microbatches=s.m,
        tokens_per_step=tokens,
        model_flops_per_step=mflops,
        hardware_flops_per_step=hflops,
        memory=mem,
        memory_per_gpu_bytes=mem["total"],
        stage_times=stage_times,
        exposed_comm=exposed,
        extra={
            "gpus": gpus,
            "params_per_gpu": params.total,
            "W_s": pipe.W_max,
            "unsynchronized": free,
            **_offload_extra(s, params, act_offload),
        },
    )


def _offload_extra(s: _Step, params: _RankParams, act_offload: Num) -> dict[str, Num]:
    """The offload figures a prediction's notes report (none without offload): the exposed activation
    offload per step, and the optimizer offload's seconds, gradient copy, CPU update and weight copy."""
    out: dict[str, Num] = {}
    if s.training.activation_offload_layers:
        out["activation_offload_s"] = act_offload
    if s.training.optimizer_offload_fraction > 0:
        opt_params = _optimizer_params(s, params)
        for k, v in zip(("s", "d2h_s", "cpu_s", "h2d_s"), _optimizer_offload(s, opt_params), strict=True):
            out[f"optimizer_offload_{k}"] = v
    return out


def training_memory(
    model: ModelSpec,
    training: TrainingSpec,
    lay: TrainingLayout,
    params_rank: Num,
    dense_params_rank: Num,
    m: Num,
    param_dtype: str = "bf16",
    compiled: bool = False,
    device: Any = None,
    expert_params_rank: Num = 0.0,
) -> dict[str, Num]:
    """Peak bytes per GPU on the busiest stage, by part: the first and the last rank, each with its
    layers' activations times its micro-batches in flight (a hybrid's rank: its own slice of the pattern,
    :func:`pattern_stage_costs`; otherwise the mean layer times ``ceil(layers / pp)``). ``compiled``:
    torch.compile's graphs save fewer activations (recomputable pointwise results are recomputed in
    backward) and its fused loss keeps no fp32 logits (:func:`simcore.memory.activation_bytes_per_layer`,
    ``logits_bytes``)."""
    tp, pp, dp, cp, vp = (_a(x) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.vp))
    mb = _a(lay.micro_batch)
    sp = _a(lay.sp, bool)
    recompute = np.asarray(lay.recompute)
    sb = layout_state_bytes(training, lay, param_dtype, device)
    # ZeRO shards over the ranks that reduce the same gradients (:func:`sharding_groups`)
    group, expert_group = sharding_groups(lay)
    zero, fsdp = _a(lay.zero, int), _a(lay.fsdp, bool)
    w, g, o = M.training_state_bytes(params_rank - expert_params_rank, sb, group, zero, fsdp)
    we, ge, oe = M.training_state_bytes(expert_params_rank, sb, expert_group, zero, fsdp)
    w, g, o = w + we, g + ge, o + oe
    # DualPipe keeps two copies of the parameters (one per direction; DeepSeek-V3 report, 3.2.1)
    w = w * np.where(np.asarray(lay.schedule) == "dualpipe", 2.0, 1.0)
    act = 2.0 if training.precision != "fp32" else 4.0
    amp = param_dtype == "fp32" and training.precision != "fp32"
    resid = 4.0 if amp else act
    kinds = layer_kinds(model)
    per_kind = layer_kind_activation_bytes(model, training, lay, param_dtype, compiled)
    per_layer = sum(n / model.layers * per_kind[kind] for kind, n in kinds)  # the mean layer's
    layers_rank = np.ceil(model.layers / pp - 1e-9)  # the first stages hold the extra layers
    if model.hybrid_pattern is not None:
        # a hybrid's first and last ranks hold their own slices of the pattern (Megatron's split)
        slice_first, slice_last, _mid = pattern_stage_costs(
            model.hybrid_pattern,
            {str(k): v for k, v in per_kind.items()},
            pp,
            vp,
            lay.embedding_stage,
            lay.loss_stage,
            lay.stage_layers,
        )
    else:
        slice_first = slice_last = per_layer * layers_rank
    inflight = M.inflight_microbatches(np.asarray(lay.schedule), pp, m, vp)
    # activation offload: the GPU keeps the last layers - n layers' activations (docs/parallelism.md, Offload)
    n_off = offloaded_layers(training, pp)
    acts = (slice_first - per_layer * n_off) * inflight
    # optimizer offload: that share of the optimizer state lives in host memory
    o_host = o * training.optimizer_offload_fraction
    o = o - o_host
    # full recompute: one layer's full working set is rebuilt during its backward
    working = np.where(
        recompute == "full",
        np.maximum.reduce(
            [
                np.asarray(
                    M.activation_bytes_per_layer(model, mb, model.seq_len, tp, cp, sp, "none", act, k, resid, compiled),
                    dtype=float,
                )
                # (a transformer stack: its MoE layer where it has one; a hybrid: its costliest kind)
                for k in ([k for k, _n in kinds] if model.hybrid_pattern else [kinds[-1][0]])
            ]
        ),
        0.0,
    )
    vdiv = tp if lay.vocab_parallel else 1.0
    last_stage_logits = M.logits_bytes(
        model, mb, model.seq_len, vdiv, cp, act, unfused=amp, compiled=compiled
    )
    logits = np.where(pp <= 1, last_stage_logits, 0.0)
    inflight_last = np.where(np.asarray(lay.schedule) == "gpipe", m, 1.0)
    layers_mem = slice_last * inflight_last
    # other in-flight micro-batches on the last stage keep their fp32 log-probabilities (compiled:
    # their bf16 logits) for backward
    kept = act if compiled else 4.0
    last_stage_logits = (
        last_stage_logits + (inflight_last - 1.0) * mb * model.seq_len / cp * model.vocab / vdiv * kept
    )
    if amp:
        # PyTorch AMP: autocast's bf16 weight copies are saved by the GEMMs for backward (one layer's
        # at a time under full recompute). Each micro-batch's forward runs in its own autocast region,
        # whose cast cache is dropped on exit, so every micro-batch in flight holds its own copies
        # (GPipe: all of them). Gradients are allocated during backward as activations are freed
        # (zero_grad(set_to_none=True)), so the peak is the larger of the two phases.
        copies = params_rank * 2.0 * np.where(recompute == "full", 1.0 / layers_rank, 1.0)
        # (checkpointed layers save no autocast copies: under full recompute only the layer being
        # recomputed holds one, whatever the number of micro-batches in flight)
        full_rc = recompute == "full"
        # FSDP / ZeRO-3: the parameters are gathered already in bf16 (mixed-precision policy) and
        # freed again after each layer's forward, so autocast saves no copies; what is held is the
        # gathered layer and the prefetched next one
        sharded = (_a(lay.zero, int) >= 3) | _a(lay.fsdp, bool)
        copies = np.where(sharded, 2.0 * dense_params_rank / np.maximum(layers_rank, 1.0) * 2.0, copies)
        full_rc = full_rc | sharded  # one set, not one per micro-batch in flight
        fwd_peak_first = acts + working + logits + copies * np.where(full_rc, 1.0, inflight)
        fwd_peak_last = (
            layers_mem + last_stage_logits + working + copies * np.where(full_rc, 1.0, inflight_last)
        )
        first = w + o + np.maximum(fwd_peak_first, g + working)
        last = w + o + np.maximum(fwd_peak_last, g + working)
    else:
        # Megatron-style: the gradient buffers are persistent
        first = w + g + o + acts + working + logits
        # the last stage holds fewer in-flight micro-batches (1F1B: one) but the logits
        last = w + g + o + layers_mem + last_stage_logits + working
    # multi-token prediction: on the last rank (the only one without pipeline stages)
    mtp = mtp_memory(model, training, lay, sb, inflight_last, param_dtype, compiled)
    first = first + np.where(pp <= 1, mtp, 0.0)
    last = last + mtp
    total = np.maximum(first, np.where(pp > 1, last, 0.0))
    out = {
        "weights": w,
        "gradients": g,
        "optimizer": o,
        "activations": acts + working,
        "logits": np.where(pp <= 1, logits, last_stage_logits),
        "total": total,
    }
    if model.mtp_layers:
        out["mtp"] = mtp
    # what offload keeps in (pinned) host memory per GPU, beside the GPU's total (not in it)
    if np.any(n_off > 0):
        out["host_activations"] = per_layer * n_off * inflight
    if training.optimizer_offload_fraction > 0:
        out["host_optimizer"] = o_host
    return out


def sharding_groups(lay: TrainingLayout) -> tuple[Num, Num]:
    """Ranks the ZeRO / distributed-optimizer / FSDP state is sharded over: ``(dense, expert)``.

    The dense parameters' gradients are reduced over the data-parallel ranks of every context-parallel rank
    (CP ranks hold the same weights), so Megatron-Core's distributed optimizer shards them over ``dp x cp``
    (``megatron/core/optimizer/__init__.py get_megatron_optimizer``: the dense optimizer on
    ``get_data_parallel_group(with_context_parallel=True)``; torchtitan's FSDP shards over its ``dp_shard_cp``
    mesh alike), and the routed experts over the expert-data-parallel group, the ``tp cp dp / (ep etp)``
    ranks holding the same experts (the MoE optimizer on ``get_expert_data_parallel_group()``;
    docs/parallelism.md, section 6)."""
    tp, dp, cp, ep = (_a(x) for x in (lay.tp, lay.dp, lay.cp, lay.ep))
    etp = tp if lay.etp is None else _a(lay.etp)
    return dp * cp, np.maximum(tp * cp * dp / (ep * etp), 1.0)


def layout_state_bytes(training: TrainingSpec, lay: TrainingLayout, param_dtype: str, device: Any) -> M.StateBytes:
    """Bytes per parameter of the training state (:func:`simcore.memory.state_bytes`); under Megatron-FSDP
    the main gradients take the weights' dtype (``megatron_fsdp_main_grads_dtype: auto``, Megatron-LM's
    default: ``megatron/training/arguments.py``), so they are kept and reduced in it."""
    sb = M.state_bytes(
        training.precision,
        training.optimizer,
        training.master_weights,
        param_dtype,
        device,
        training.grad_reduce_in_fp32,
        training.optimizer_moments_dtype == "bf16",
        training.fp8_param_gather,
    )
    if lay.megatron_fsdp:
        sb = replace(sb, grads=4.0 if param_dtype == "fp32" or training.precision == "fp32" else 2.0)
    return sb


def offloaded_layers(training: TrainingSpec, pp: Num) -> Num:
    """Layers whose activations go to host memory (``training.activation_offload_layers``) on each
    layout: Megatron-Core offloads only without pipeline parallelism (0 where ``pp > 1``; the scenario
    path rejects that combination, :func:`simcore.prediction.layout_of`)."""
    return np.where(_a(pp) <= 1, float(training.activation_offload_layers), 0.0)


def layer_kind_activation_bytes(
    model: ModelSpec,
    training: TrainingSpec,
    lay: TrainingLayout,
    param_dtype: str,
    compiled: bool,
    extra_kinds: tuple[LayerKind, ...] = (),
) -> dict[LayerKind, Num]:
    """Bytes each kind of layer (:func:`simcore.workload.ssm.layer_kinds`: dense or MoE transformer layers, a
    hybrid pattern's symbols) keeps for its backward per micro-batch on a rank, under each layout's
    recomputation (:func:`simcore.memory.activation_bytes_per_layer`); ``extra_kinds``: kinds priced beside the
    model's own (the multi-token-prediction layer's, :func:`mtp_memory`)."""
    tp, cp = _a(lay.tp), _a(lay.cp)
    mb = _a(lay.micro_batch)
    sp = _a(lay.sp, bool)
    recompute = np.asarray(lay.recompute)
    act = 2.0 if training.precision != "fp32" else 4.0
    resid = 4.0 if param_dtype == "fp32" and training.precision != "fp32" else act
    q = P.recipe(training.precision)
    gemm_in = q.stored_bytes(q.block) if q.quantized else None  # the quantized GEMM inputs kept
    modules = tuple(training.recompute_modules)
    return {
        kind: sum(
            np.where(recompute == rec, 1.0, 0.0)
            * M.activation_bytes_per_layer(
                model, mb, model.seq_len, tp, cp, sp, rec, act, kind, resid, compiled, modules, gemm_in
            )
            for rec in ("none", "selective", "full")
        )
        for kind in dict.fromkeys([*(k for k, _n in layer_kinds(model)), *extra_kinds])
    }


def mtp_memory(
    model: ModelSpec,
    training: TrainingSpec,
    lay: TrainingLayout,
    sb: M.StateBytes,
    inflight_last: Num,
    param_dtype: str = "bf16",
    compiled: bool = False,
) -> Num:
    """Bytes per GPU the multi-token-prediction depths (``model.mtp_layers``) add to the last pipeline rank.

    Each depth's parameters: its two RMSNorms (``2 h``), the ``2h -> h`` projection (``2 h^2``) and one
    transformer layer (an MoE layer where the model has experts), over TP, the routed experts over
    ``etp x ep``; with pipeline stages and an untied head, the last rank also keeps an embedding copy for the
    shifted tokens (Megatron-Core's ``GPTModel`` builds one where ``mtp_process``), except under DualPipe,
    whose rank holding the last stage holds the first too and shares it (DeepSeek-V3 report sec. 3.2.1). Their weights, gradients
    and optimizer state take the main model's bytes per parameter and ZeRO sharding
    (:func:`simcore.memory.training_state_bytes`). Per micro-batch in flight, each depth keeps its layer's
    activations (:func:`layer_kind_activation_bytes`, under the layout's recomputation), the two norms' and
    the projection's inputs (``4 T h`` elements, sharded by sequence parallelism) and its loss's fp32
    softmax (``T V / vocab-TP x 4`` bytes, Megatron's vocab-parallel cross-entropy); the one loss working
    set at a time is the main head's (:func:`simcore.memory.logits_bytes`). docs/parallelism.md,
    "Multi-token prediction"."""
    d = model.mtp_layers
    if d == 0:
        return 0.0
    tp, pp, dp, cp = (_a(x) for x in (lay.tp, lay.pp, lay.dp, lay.cp))
    etp = tp if lay.etp is None else _a(lay.etp)
    vdiv = tp if lay.vocab_parallel else 1.0
    pc = param_counts(model)
    h = model.hidden
    moe = model.moe is not None
    if moe:
        layer_tp, experts = pc.attention_per_layer + pc.norms_per_layer + pc.moe_layer_shared, pc.moe_layer_experts
    else:
        layer_tp, experts = pc.per_dense_layer, 0
    own_embedding = (pp > 1) & (pc.lm_head > 0) & (np.asarray(lay.schedule) != "dualpipe")
    embed = np.where(own_embedding, pc.embedding, 0.0) / vdiv
    params = d * ((2 * h + 2 * h * h + layer_tp) / tp + experts / etp / _a(lay.ep)) + embed
    w, g, o = M.training_state_bytes(params, sb, dp, _a(lay.zero, int), _a(lay.fsdp, bool))
    act = 2.0 if training.precision != "fp32" else 4.0
    layer = layer_kind_activation_bytes(model, training, lay, param_dtype, compiled, (moe,))[moe]
    tokens = _a(lay.micro_batch) * model.seq_len / cp
    sp_div = np.where(_a(lay.sp, bool), tp, 1.0)
    saved = layer + 4.0 * tokens * h / sp_div * act + tokens * model.vocab / vdiv * 4.0
    return w + g + o + d * saved * inflight_last


def layer_activation_bytes(
    model: ModelSpec, training: TrainingSpec, lay: TrainingLayout, param_dtype: str, compiled: bool
) -> Num:
    """Bytes the model's mean layer keeps for its backward per micro-batch on a rank
    (:func:`layer_kind_activation_bytes` weighed by each kind's layer count)."""
    per_kind = layer_kind_activation_bytes(model, training, lay, param_dtype, compiled)
    return sum(n / model.layers * per_kind[kind] for kind, n in layer_kinds(model))
