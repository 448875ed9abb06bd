"""Analytic engine for training steps: closed forms over numpy grids of parallel layouts.

Given a model, a training recipe and arrays of layouts (tp, pp, dp, cp, ep, vp, micro-batch,
sequence parallelism, ZeRO stage, recompute, schedule, overlap flags), :func:`evaluate` prices the
lowered ops once per layout element and composes them into the step:

``step = pipeline(F_s, B_s, m, p, v, schedule) + exposed data-parallel reduction + optimizer``

where ``F_s``/``B_s`` are a stage's forward/backward seconds per micro-batch (compute plus exposed
tensor/context/expert-parallel communication, plus recomputation), and the pipeline closed forms
are those the discrete-event engine reproduces on uncontended cases (tests hold them within 1 %):

* GPipe, 1F1B: ``(m-1) max_s(F_s+B_s) + sum_s(F_s+B_s) + 2(p-1)c``
* interleaved 1F1B: ``m max_s(F_s+B_s) + (p-1)/v (F+B) + 2 v (p-1) c``
* zero-bubble H1: the 1F1B form less ``(p-1) W`` (weight gradients fill the cool-down)
* DualPipe: ``m (F+B) + (p/2-1)(F+B+B_in-3W)`` (DeepSeek-V3 report, with F&B = F+B)

with ``c`` the point-to-point time of one micro-batch's activations between stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcore import memory as M
from simcore.compute import ops as C
from simcore.engine.pricing import Priced, Pricer, breakdown_power_cap
from simcore.specs.profile import load_profile
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import ModelSpec, TrainingSpec
from simcore.workload import lowering as L
from simcore.workload.model import model_flops_per_token, param_counts, weight_tensors

Num = Any

COMM_CATEGORIES = ("tp_comm", "cp_comm", "ep_comm")


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
    tp_overlap: Num = False
    dp_mode: Num = "ddp"
    """``ddp`` or ``dataparallel`` (single-process nn.DataParallel)."""
    vocab_parallel: bool = True
    """Embedding, LM head and loss sharded over TP (scalar for a whole grid)."""


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
    """
    n = np.maximum(np.asarray(layers, dtype=float), 1.0)
    hu_f, hu_b, gu_f, gu_b = h_f / n, h_b / n, g_f / n, g_b / n
    G = emb_f + np.maximum(g_f, hu_f + (n - 1.0) * np.maximum(hu_f, gu_f) - emb_f)
    H = h_f + h_sf
    G = np.maximum(G + head_f, H)
    H = H + h_sb
    G = np.maximum(G + head_b, H)
    G = np.maximum(G + g_b, H + hu_b + (n - 1.0) * np.maximum(hu_b, gu_b)) + emb_b
    H = H + h_b
    g_mb = emb_f + g_f + head_f + head_b + g_b + emb_b
    h_mb = h_f + h_b + h_sf + h_sb
    period_rest = np.maximum(g_mb, h_mb)
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


def comm_call_host(cluster: ClusterInfo) -> float:
    """Host seconds of one eager torch.distributed collective call: the per-call floor of the
    system's communication profile (back-to-back eager calls)."""
    return float(_comm_profile(cluster).op_overhead.get("all_reduce", 0.0))


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
    pricer: Pricer, model: ModelSpec, lw: L.Layout, moe: bool
) -> tuple[Priced, Priced, Num, Num, Num, Num]:
    """(forward, backward, weight-gradient seconds, attention-forward seconds, GEMM seconds,
    attention-forward FLOPs) of one layer."""
    f_ops = L.layer_fwd(model, lw, moe_layer=moe)
    b_ops = L.backward(f_ops)
    fwd = pricer.price(f_ops)
    bwd = pricer.price(b_ops)
    attn = fwd.time.get("attention", 0.0)
    gemm = fwd.time.get("gemm", 0.0)
    return fwd, bwd, bwd.wgrad, attn, gemm, fwd.attention_flops


def _exposed(
    p: Priced, attn: Num, gemm: Num, tp_overlap: Num, tp: Num, schedule: Num, compute: Num
) -> Priced:
    """Replace overlappable communication by its exposed part: CP ring exchange hides behind the
    attention compute; TP collectives hide behind the GEMMs when ``tp_overlap``."""
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
    if "ep_comm" in out.time:
        # DualPipe overlaps one micro-batch's expert all-to-all with another's computation
        epc = out.time["ep_comm"]
        out.time["ep_comm"] = np.where(
            np.asarray(schedule) == "dualpipe", np.maximum(epc - compute, 0.0), epc
        )
    return out


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
    their ratio to the calibrated code's (``HostOps.calibrated_layer_ops``)."""
    tp, pp, dp, cp, ep, vp = (_a(x) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.vp))
    mb = _a(lay.micro_batch)
    sp = _a(lay.sp, bool)
    recompute = np.asarray(lay.recompute)
    schedule = np.asarray(lay.schedule)
    m = np.maximum(_a(lay.global_batch) / (mb * dp), 1.0)
    prof = load_profile(cluster.device, calibration)
    if cpu_op_time is not None:
        prof = prof.at_cpu_speed(*cpu_op_time)
    act_key = "swiglu" if model.activation == "swiglu" else "gelu"
    host_cal = prof.host_layer
    compiled = framework == "compiled"
    # eager: measured per-layer host times; compiled (torch.compile): the same times scaled by the
    # compiled/eager ratio measured in one process (fit_host, round 14), where the profile has it
    layer_host = f"train_fwd_{act_key}" in host_cal and (
        framework == "eager" or (compiled and f"compiled_ratio_fwd_{act_key}" in host_cal)
    )
    pricer = Pricer.for_layout(
        cluster, tp, cp, dp, pp, ep, framework, calibration, per_op_host=not layer_host, profile=prof
    )
    full_t = np.where(recompute == "full", 1.0, 0.0)
    sel_t = np.where(recompute == "selective", 1.0, 0.0)
    zero = np.where(_a(lay.fsdp, bool), 3, _a(lay.zero, int))  # FSDP is ZeRO-3
    zero0, zero12, zero3 = zero == 0, (zero >= 1) & (zero <= 2), zero >= 3
    sb = M.state_bytes(training.precision, training.optimizer, training.master_weights, param_dtype)
    single_proc = np.asarray(lay.dp_mode) == "dataparallel"
    ddp = (dp > 1) & (np.asarray(lay.dp_mode) == "ddp")
    gemm_dtype = training.precision
    act = 2.0 if training.precision != "fp32" else 4.0
    resid = 4.0 if param_dtype == "fp32" else act
    lw = L.Layout(
        micro_batch=mb,
        seq=float(model.seq_len),
        tp=tp,
        cp=cp,
        ep=ep,
        sp=sp,
        dtype=gemm_dtype,
        act_bytes=act,
        extra={
            "residual_bytes": resid,
            "vocab_parallel": bool(lay.vocab_parallel),
            "fused": compiled,
            "strided_gate_up": L.strided_gate_up(framework, gate_up),
            "impl": implementation,
            "dropout": dropout,
            "attention_backend": attention_backend,
        },
    )
    # transformers' MoE layers have their own host entries: the fp32 grouped GEMM's per-expert loop
    # under AMP (round 51) or the native bf16 one (round 56)
    moe_path = None if model.moe is None or compiled else ("moe" if lw.fp32_experts else "moe_native")
    lk = prof.layer_key(act_key, moe_path, implementation, "train_fwd", attention_backend)

    pc = param_counts(model)
    vdiv = tp if lay.vocab_parallel else 1.0
    n_moe = pc.moe_layers
    n_dense = pc.dense_layers

    # --- one layer of each kind
    parts = []
    for moe, count in ((False, n_dense), (True, n_moe)):
        if count == 0:
            continue
        fwd, bwd, w, attn, gemm, attn_flops = _stage_priced(pricer, model, lw, moe)
        comp_f = fwd.total(exclude=COMM_CATEGORIES)
        comp_b = bwd.total(exclude=COMM_CATEGORIES)
        fwd_x = _exposed(fwd, attn, gemm, lay.tp_overlap, tp, schedule, comp_f)
        bwd_x = _exposed(bwd, 2.0 * attn, 2.0 * gemm, lay.tp_overlap, tp, schedule, comp_b)
        # recomputation re-runs the forward (full) or the attention core (selective) before backward
        full = fwd_x
        rec = full.scaled(full_t)
        rec.time = {f"recompute_{k}": v for k, v in rec.time.items()}
        rec.add("recompute_attention", attn * sel_t)
        rec.flops = fwd.flops * full_t + attn_flops * sel_t
        parts.append((count, fwd_x, bwd_x.merged(rec), w, rec.flops))

    layers_per_rank = model.layers / pp
    F_layers = Priced()
    B_layers = Priced()
    W_layers: Num = 0.0
    for count, f, b, w, _rf in parts:
        share = count / model.layers * layers_per_rank
        F_layers = F_layers.merged(f.scaled(share))
        B_layers = B_layers.merged(b.scaled(share))
        W_layers = W_layers + w * share

    # --- embedding (first stage) and head + loss (last stage)
    emb_f_ops = L.embedding_fwd(model, lw)
    head_f_ops = L.head_fwd(model, lw) + L.loss_fwd(model, lw)
    emb_f, emb_b = pricer.price(emb_f_ops), pricer.price(L.backward(emb_f_ops))
    head_f, head_b = pricer.price(head_f_ops), pricer.price(L.backward(head_f_ops))
    head_w: Num = head_b.wgrad

    # PyTorch AMP (fp32 weights, autocast): weight casts in every forward, bf16 -> fp32 gradient
    # accumulation in every backward, per micro-batch, on each rank's share of the weights
    if param_dtype == "fp32" and training.precision != "fp32":
        tensors_per_layer = weight_tensors(model, 1.0, gate_up) - weight_tensors(model, 0.0, gate_up)
        stage_params = (pc.dense_layers * pc.per_dense_layer + pc.moe_layers * pc.per_moe_layer) / pp / tp
        acc = (m - 1.0) / m  # backwards that add into an existing fp32 .grad
        # ZeRO-2/3 and FSDP accumulate on the reduce-scattered shard of the gradient
        shard = np.where(zero >= 2, 1.0 / np.maximum(dp, 1.0), 1.0)
        amp_f, amp_b = L.amp_ops(stage_params, tensors_per_layer * layers_per_rank, acc, shard)
        F_layers = F_layers.merged(pricer.price(amp_f))
        B_layers = B_layers.merged(pricer.price(amp_b))
        emb_params = (pc.embedding + pc.lm_head) / vdiv
        ea_f, ea_b = L.amp_ops(emb_params, 2.0 if pc.lm_head else 1.0, acc, shard)
        head_f = head_f.merged(pricer.price(ea_f))
        head_b = head_b.merged(pricer.price(ea_b))

    embF, embB, headF, headB = emb_f.total(), emb_b.total(), head_f.total(), head_b.total()
    host_lag: Num = 0.0

    def pf(kind: str) -> float:
        """The profiler's options' and the weights' dtype's factor on ``kind`` of host time (measured on
        eager layers; the native MoE entries were measured with bf16 weights already)."""
        dtype = "fp32" if training.precision == "fp32" or compiled or lk.endswith("_native") else param_dtype
        w = prof.weights_factor(dtype, kind, implementation, act_key)
        return w * (prof.profiler_factor(profiler_record, kind, implementation) if profiler else 1.0)

    # host seconds of one micro-batch's layers and of its work outside them, on a single stage
    h_layers: Num = 0.0
    h_out: Num = 0.0
    if layer_host:
        # eager PyTorch: the host dispatches every op of a layer (module calls, autocast, autograd);
        # where the host is slower than the GPU, the difference shows as host_overhead (below)
        # profiled compiled steps measured whole, in their own CPU-speed units (round 30): a layer's and
        # a micro-batch's forward and backward host replace the eager entries times a compiled ratio
        # (transformers' own compiled steps where measured, round 70: its compiled code runs ~2x the host
        # of simcore's layers per forward layer)
        cpre = "hf_" if implementation == "huggingface" and f"profiled_hf_compiled_fwd_{act_key}" in host_cal else ""
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
            if compiled and profiler
            else {}
        )

        def hv(name: str) -> float:
            if name in own:
                return prof.host(own[name], True)
            v = prof.host(name, profiler) if compiled else prof.host_of(name, profiler, implementation)
            if compiled:
                # the compiled graph issues a layer's kernels with less host work than eager
                phase = "bwd" if "_bwd" in name or name == "ckpt_selective" else "fwd"
                ratio = f"compiled_ratio_{phase}_{act_key}"
                v *= host_cal.get(("profiled_" if profiler else "") + ratio, host_cal.get(ratio, 1.0))
            return v

        def wrapped(name: str, phase: str) -> Num:
            """Per-layer host time with the distributed wrapper the layout uses (FSDP2 / ZeRO-3,
            tensor parallel), as measured ratios over the plain layer."""

            def ratio(key: str) -> float:
                # the profiler's per-op cost changes the wrapper's share: its own ratio where measured
                return host_cal.get(("profiled_" if profiler else "") + key, host_cal.get(key, 1.0))

            r_f = ratio(f"fsdp_ratio_{phase}")
            r_t = ratio(f"tp_ratio_{phase}")
            r_d = ratio(f"ddp_ratio_{phase}")
            # FSDP replaces DDP; tensor parallelism and DDP hooks compose
            other = np.where(tp > 1, r_t, 1.0) * np.where(ddp, r_d, 1.0)
            return hv(name) * np.where(zero3, r_f, other)

        def wrapper_step(part: str) -> Num:
            """A distributed wrapper's host outside the layers beyond a single GPU's, per micro-batch
            (``fwd`` / ``bwd``) or per step (``end``), where measured. DDP's backward part is its
            reducer finishing the gradient reduction: once per step, like its hooks."""
            f, t, d = (hv(f"{w}_step_{part}") for w in ("fsdp", "tp", "ddp"))
            d_mb = d / m if part == "bwd" else d
            return np.where(zero3, f, np.where(tp > 1, t, 0.0) + np.where(ddp, d_mb, 0.0))

        # a run's own code: its ops per layer over the calibrated code's (eager; a transformers layer with
        # its own entries, an MoE or eager-attention one, is not scaled)
        ops_f, ops_b = 1.0, 1.0
        cal = prof.host_ops.calibrated_layer_ops(implementation, act_key)
        if layer_ops is not None and cal is not None and not compiled and lk == act_key:
            ops_f, ops_b = layer_ops[0] / cal[0], (layer_ops[1] / cal[1] if layer_ops[1] > 0 else 1.0)
        h_f = layers_per_rank * (
            wrapped(f"train_fwd_{lk}", "fwd") * ops_f + full_t * hv(f"ckpt_full_fwd_{act_key}")
        )
        h_b = layers_per_rank * (
            wrapped(f"train_bwd_{lk}", "bwd") * ops_b
            + full_t * hv(f"ckpt_full_bwd_{act_key}")
            + sel_t * hv("ckpt_selective")
        )
        h_b = h_b + np.where(ddp & ~zero3, hv("ddp_fixed"), 0.0)
        if profiler:
            # DDP's hooks while the profiler records: per gradient tensor and per bucket all-reduce
            # call, once per step (the last micro-batch's backward; measured from profiled DDP ranks)
            n_grads, n_buckets = ddp_gradients_and_buckets(model, pp, sb.grads, gate_up)
            hooks = n_grads * prof.host("ddp_param", True) + n_buckets * prof.host("ddp_bucket", True)
            h_b = h_b + np.where(ddp & ~zero3, hooks / m, 0.0)
        # the profiler's other options (Python stacks, memory events, no shapes) change each kind of
        # host time by its own measured ratio (rounds 47-48)
        h_f = h_f * pf("train_fwd")
        h_b = h_b * pf("train_bwd")
        if lk.endswith("_moe"):
            # (the fp32 experts' path: ``moe_path``) the fp32 grouped GEMM reads each expert's token count on the host (round 50: 192 syncs a
            # step), so the host waits while every expert GEMM runs: their GPU time adds to the layers'
            # host time (round 51's fit rows hold these waits too, at their own small token count: a
            # known double count of a few percent of the layers' host)
            experts = [
                o for o in L.moe_block_fwd(model, lw) if o.kind == "gemm" and o.name.startswith("expert_")
            ]
            moe_rank = pc.moe_layers / model.layers * layers_per_rank
            h_f = h_f + moe_rank * pricer.price(experts).total()
            h_b = h_b + moe_rank * pricer.price(L.backward(experts)).total()
        if "tp_ratio_fwd" not in host_cal:
            # without a measured TP layer: each collective the layer issues is one more host call
            floor = comm_call_host(cluster)
            n_tp = np.where(tp > 1, np.where(sp, 4.0, 2.0), 0.0)
            h_f = h_f + layers_per_rank * n_tp * floor
            h_b = h_b + layers_per_rank * n_tp * floor
        Fg, Bg = F_layers.total(), B_layers.total()
        x_f, x_b = np.maximum(h_f - Fg, 0.0), np.maximum(h_b - Bg, 0.0)
        # Nothing synchronises host and GPU inside a step (NCCL send/recv waits are stream-side), so
        # the host runs ahead of the GPU while the GPU is busy (LM head and loss, long layers) and
        # that slack absorbs host-bound layers later. One stage: the phase-by-phase pipeline of
        # host_run_ahead. A pipeline stage: a micro-batch's forward and backward on the stage take at
        # least the host's time for both (its per-micro-batch excess, split as the phases' excesses).
        # outside the layers, per micro-batch: embedding, LM head and loss on the main thread, their
        # backward on the autograd thread (whole profiled steps, round 25); pipeline stages: not modelled
        single_stage = np.asarray(pp, dtype=float) <= 1
        # (eager: plus the part that grows with the layers; compiled: its own per-step line has it)
        lay_f = 0.0 if compiled else layers_per_rank * hv(f"step_fwd_layer_{lk}")
        lay_b = 0.0 if compiled else layers_per_rank * hv(f"step_bwd_layer_{lk}")
        h_sf = np.where(single_stage, hv(f"step_fwd_{lk}") + lay_f + wrapper_step("fwd"), 0.0) * pf(
            "step_fwd"
        )
        h_sb = np.where(single_stage, hv(f"step_bwd_{lk}") + lay_b + wrapper_step("bwd"), 0.0) * pf(
            "step_bwd"
        )
        h_layers, h_out = h_f + h_b, h_sf + h_sb
        g_mb, lag = host_run_ahead(h_f, h_b, Fg, Bg, embF, embB, headF, headB, layers_per_rank, m, h_sf, h_sb)
        per_mb = np.maximum(g_mb - (Fg + Bg + embF + embB + headF + headB), 0.0)
        share_f = np.where(x_f + x_b > 0, x_f / np.maximum(x_f + x_b, 1e-30), 0.5)
        per_mb = np.where(single_stage, per_mb, np.maximum(h_f + h_b - (Fg + Bg), 0.0))
        F_layers.add("host_overhead", per_mb * share_f)
        B_layers.add("host_overhead", per_mb * (1.0 - share_f))
        host_lag = np.where(single_stage, lag, 0.0)

    Fl, Bl = F_layers.total(), B_layers.total()
    single = pp <= 1
    R = Fl + Bl  # a middle stage (average layer count)
    # layers that do not divide evenly go one extra to the first stages (the last stage, which also
    # runs the LM head, gets the smaller share)
    n_hi = np.ceil(model.layers / pp - 1e-9)
    n_lo = np.floor(model.layers / pp + 1e-9)
    r_layer = R / (model.layers / pp)
    first = r_layer * n_hi + embF + embB
    last = r_layer * n_lo + headF + headB
    stage_max = np.where(
        single, R + embF + embB + headF + headB, np.maximum(np.maximum(first, last), r_layer * n_hi)
    )
    stage_sum = pp * R + embF + embB + headF + headB
    W_max = W_layers + np.where(single, head_w, 0.0)

    # --- point-to-point between stages
    p2p_bytes = mb * model.seq_len / cp * model.hidden * act / np.where(sp, tp, 1.0)
    c = np.where(pp > 1, pricer.comm_time("send_recv", p2p_bytes, "pp"), 0.0)

    base = (m - 1) * stage_max + stage_sum + 2 * (pp - 1) * c
    inter = m * stage_max + (pp - 1) / vp * R + 2 * vp * (pp - 1) * c
    zb = base - (pp - 1) * W_layers
    Bin = Bl - W_layers
    dual = m * stage_max + np.maximum(pp / 2 - 1, 0.0) * (Fl + Bl + Bin - 3 * W_layers) + 2 * (pp - 1) * c
    t_pipe = np.select(
        [schedule == "interleaved", schedule == "zero_bubble", schedule == "dualpipe"],
        [np.where(vp > 1, inter, base), zb, dual],
        default=base,
    )

    # --- data parallel: gradient reduction (and ZeRO/FSDP parameter gathers)
    dense_layer_params = pc.per_dense_layer
    moe_attn = pc.attention_per_layer + pc.norms_per_layer + pc.moe_layer_shared
    moe_experts = pc.moe_layer_experts
    dense_params_rank = (n_dense * dense_layer_params + n_moe * moe_attn) / pp / tp
    expert_params_rank = n_moe * moe_experts / pp / tp / ep
    embed_rank = (
        np.where(single, pc.embedding + pc.lm_head, np.maximum(pc.embedding, pc.lm_head or pc.embedding))
        / vdiv
    )
    params_rank = dense_params_rank + expert_params_rank + embed_rank
    grad_b = sb.grads
    dense_grads = (dense_params_rank + embed_rank) * grad_b
    exp_grads = expert_params_rank * grad_b
    gdt = "fp32" if grad_b == 4 else "bf16"
    zeros = 0.0 * dp

    def when(mask: Num, fn: Any) -> Num:
        """Price a collective only if some layout needs it (scalar layouts skip the rest)."""
        return fn() if np.any(mask & (dp > 1)) else zeros

    ar = when(zero0, lambda: pricer.comm_time("all_reduce", dense_grads, "dp", gdt))
    rs = when(~zero0, lambda: pricer.comm_time("reduce_scatter", dense_grads, "dp", gdt))
    ag = when(~zero0, lambda: pricer.comm_time("all_gather", (dense_params_rank + embed_rank) * 2.0, "dp"))
    # expert gradients reduce over the expert-data-parallel group (dp / ep ranks): priced on dp with the ratio
    edp_frac = np.where(dp > 1, np.maximum(dp / ep - 1, 0) / np.maximum(dp - 1, 1), 0.0)
    ar_exp = when(pc.moe_layers > 0, lambda: pricer.comm_time("all_reduce", exp_grads, "dp") * edp_frac)
    buckets = np.maximum(layers_per_rank, 1.0)
    B_last = Bl + np.where(single, embB + headB, np.maximum(embB, headB))
    F_first = Fl + np.where(single, embF + headF, embF)
    overlap = _a(lay.dp_overlap, bool)

    def hidden(comm: Num, window: Num) -> Num:
        """Exposed part of a bucketed collective overlapped with ``window`` seconds of compute: the
        last bucket always shows."""
        return np.where(overlap, np.maximum(comm / buckets, comm - window * (1 - 1 / buckets)), comm)

    # DDP: gradient all-reduce in buckets during the last backward. ZeRO-1/2 (distributed optimizer):
    # gradient reduce-scatter during the last backward, parameter all-gather during the next forward.
    # ZeRO-3/FSDP: parameters gathered for forward and backward and gradients reduce-scattered per
    # micro-batch, prefetched behind the layer compute.
    dp_grad = np.select([zero0, zero12], [ar, rs], default=0.0) + ar_exp
    dp_exposed = hidden(dp_grad, B_last) + np.where(zero12, hidden(ag, F_first), 0.0)
    zero3_exposed = np.where(zero3, np.maximum(2.0 * ag + rs - (Fl + Bl), 0.0) * m, 0.0)
    dp_exposed = np.where(zero3, 0.0, np.where(dp > 1, dp_exposed, 0.0))
    # single-process nn.DataParallel: parameters broadcast from GPU 0 and gradients reduced to it every
    # step, nothing overlapped; one Python process launches every replica's kernels (GIL)
    pbytes = 4.0 if param_dtype == "fp32" else 2.0
    dp_legacy = when(
        single_proc,
        lambda: (
            pricer.comm_time("broadcast", params_rank * pbytes, "dp")
            + pricer.comm_time("reduce", params_rank * grad_b, "dp", gdt)
        ),
    )
    dp_exposed = np.where(single_proc & (dp > 1), dp_legacy, dp_exposed)
    # compute beside an overlapped collective runs slower (NCCL's kernels take SMs and HBM bandwidth,
    # the system's measured compute_slowdown); where the host bounds those phases the GPU has slack
    overlapped = np.where(
        zero3,
        np.minimum(2.0 * ag + rs, Fl + Bl) * m,
        (dp_grad - hidden(dp_grad, B_last)) + np.where(zero12, ag - hidden(ag, F_first), 0.0),
    )
    overlapped = np.where((dp > 1) & overlap & ~single_proc, overlapped, 0.0)
    host_slack = (F_layers.time.get("host_overhead", 0.0) + B_layers.time.get("host_overhead", 0.0)) * m
    slowdown = overlap_slowdown(cluster)
    overlap_cost = np.maximum((slowdown - 1.0) * overlapped - host_slack, 0.0)
    # PyTorch DDP (fp32 weights): each gradient is copied into its flat bucket before the all-reduce
    # and back afterwards, on the compute stream (Megatron-style training reduces in place in
    # contiguous gradient buffers)
    ddp_copy = zeros
    if param_dtype == "fp32" and np.any((dp > 1) & zero0 & ~single_proc):
        copy_op = L.mem_op(
            "copy", 2.0 * (dense_params_rank + embed_rank + expert_params_rank), grad_b, "dp_copy"
        )
        ddp_copy = np.where((dp > 1) & zero0 & ~single_proc, pricer.price([copy_op]).total(), 0.0)
    host = (
        F_layers.kernels + B_layers.kernels + emb_f.kernels + emb_b.kernels + head_f.kernels + head_b.kernels
    ) * pricer.launch_s
    # per micro-batch the host issues dp replicas' kernels serially; the excess over GPU time is exposed
    gil = np.where(single_proc & (dp > 1), np.maximum(host * dp - stage_max, 0.0) * m, 0.0)

    # --- optimizer
    opt_params = params_rank / np.where(zero >= 1, dp, 1.0)
    opt = C.with_launch(
        C.optimizer_step(
            cluster.device,
            pricer.prof,
            opt_params,
            training.optimizer,
            training.optimizer_impl == "fused",
            training.master_weights and param_dtype != "fp32",
            param_dtype,
        ).time_s,
        pricer.launch_s,
        pricer.prof.launch_mode,
    )
    # fp16 trains with dynamic loss scaling (PyTorch's GradScaler, Megatron's): one more pass over the
    # gradients unscales them and checks for inf/NaN; for a foreach (or for-loop) optimizer the host
    # reads that flag before the update (GradScaler.step's found_inf.item()): it waits for the GPU, so
    # the update's host time is exposed. A fused optimizer takes the flag on the GPU: no wait (round
    # 55's fp16 Llama with fused AdamW has no sync in its steps)
    loss_scaling = training.precision == "fp16"
    loss_wait = loss_scaling and training.optimizer_impl != "fused"
    unscale_t: Num = 0.0
    if loss_scaling:
        unscale = L.mem_op("mul", params_rank / np.where(zero >= 2, dp, 1.0), grad_b, "optimizer")
        unscale_t = pricer.price([unscale]).total()
    opt_update = opt
    opt = opt_gpu = opt + unscale_t
    h_opt: Num = 0.0
    h_end: Num = 0.0
    if layer_host and "adamw_fused_fixed" in host_cal:
        # AdamW: a fixed host cost per step plus a cost per parameter tensor (norms, projections, MLP
        # matrices of each layer; embedding, head and final norm), fused or foreach as measured
        # (Hugging Face's GPT-2 also steps its biases and position embedding)
        tensors = weight_tensors(model, np.ceil(layers_per_rank), gate_up, L.hf_biases(model, implementation))

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
        h_opt = np.where(zero3, dtensor_opt, plain_opt)
        # the host reaches optimizer.step() host_lag seconds before the GPU finishes the backward; after
        # loss scaling's wait it reads the inf flag once the unscale pass is done, then issues the
        # update: no lead, and nothing hides the unscale
        opt = unscale_t + np.maximum(opt_update, h_opt) if loss_wait else np.maximum(opt, h_opt - host_lag)
        # zero_grad and the loop after the optimizer: the GPU waits when the loop synchronizes
        h_end = (
            prof.host_of("step_end", profiler, implementation)
            + (
                0.0
                if compiled
                else layers_per_rank * prof.host_of("step_end_layer", profiler, implementation)
            )
            + wrapper_step("end")
        ) * pf("step_end")

    step = t_pipe + dp_exposed + zero3_exposed + opt + gil + ddp_copy + overlap_cost + h_end

    # --- breakdown (the bottleneck stage's view; sums to the step time)
    bd: dict[str, Num] = {}
    stage = F_layers.merged(B_layers)
    # the stage that sets the pace: the first (its layers and the embedding), the last (its layers and
    # the LM head + loss) or a middle one (the larger layer count); one stage holds everything
    mid = r_layer * n_hi
    is_first = (first >= last) & (first >= mid)
    is_last = ~is_first & (last >= mid)
    w_emb = np.where(single | is_first, 1.0, 0.0)
    w_head = np.where(single | is_last, 1.0, 0.0)
    n_b = np.where(is_last, n_lo, n_hi)
    layer_w = np.where(single, 1.0, n_b / np.maximum(layers_per_rank, 1e-30))
    for k, v in stage.time.items():
        bd[k] = v * m * layer_w
    for pr, w8 in ((emb_f, w_emb), (emb_b, w_emb), (head_f, w_head), (head_b, w_head)):
        for k, v in pr.time.items():
            bd[k] = bd.get(k, 0.0) + v * m * w8
    compute_sum: Num = sum(bd.values(), 0.0)
    bd["pipeline_bubble"] = np.maximum(t_pipe - compute_sum, 0.0)
    bd["dp_comm"] = dp_exposed + zero3_exposed
    bd["optimizer"] = opt
    bd["host_launch"] = gil
    bd["dp_copy"] = ddp_copy
    bd["overlap_slowdown"] = overlap_cost
    bd["host_overhead"] = bd.get("host_overhead", 0.0) + h_end
    # a power-capped GPU stretches a step whose kernels would draw more than its TDP on average
    power_cap = breakdown_power_cap(cluster.device, prof, bd, gemm_dtype)
    bd["power_cap"] = power_cap
    step = step + power_cap
    free = (np.asarray(pp, dtype=float) <= 1) & (layer_host and not step_sync and not loss_wait)
    if np.any(free):
        # nothing synchronizes: the host runs ahead into the next step while the GPU finishes this one,
        # so in the steady state a single-stage step takes the larger of the two totals
        host_wait = bd["host_overhead"] + (opt - opt_gpu)
        g_total = step - host_wait
        h_total = m * (h_layers + h_out) + h_opt + h_end
        step = np.where(free, np.maximum(g_total, h_total), step)
        bd["host_overhead"] = np.where(free, np.maximum(h_total - g_total, 0.0), bd["host_overhead"])
        bd["optimizer"] = np.where(free, opt_gpu, opt)
        opt = bd["optimizer"]

    # --- FLOPs and memory
    tokens = _a(lay.global_batch) * model.seq_len
    gpus = tp * pp * dp * cp
    mflops = model_flops_per_token(model) * tokens
    rec_flops_rank: Num = 0.0
    for count, _f, _b, _w, rf in parts:
        rec_flops_rank = rec_flops_rank + rf * count / model.layers * layers_per_rank
    hflops = mflops + rec_flops_rank * m * gpus

    mem = training_memory(model, training, lay, params_rank, dense_params_rank, m, param_dtype, compiled)
    if param_dtype == "fp32":
        # PyTorch DDP's flat gradient buckets: a second copy of the gradients
        buckets_mem = np.where((dp > 1) & zero0 & ~single_proc, params_rank * grad_b, 0.0)
        mem["gradients"] = mem["gradients"] + buckets_mem
        mem["total"] = mem["total"] + buckets_mem
    stage_times = {
        "forward_s": Fl,
        "backward_s": Bl,
        "wgrad_s": W_layers,
        "embedding_fwd_s": embF,
        "embedding_bwd_s": embB,
        "head_fwd_s": headF,
        "head_bwd_s": headB,
        "head_wgrad_s": head_w,
        "p2p_s": c,
        "dp_comm_s": np.where(
            zero3, zero3_exposed, np.where(dp > 1, np.where(single_proc, dp_legacy, dp_grad), 0.0)
        ),
        "dp_tail_s": np.where(zero12 & (dp > 1) & ~single_proc, hidden(ag, F_first), 0.0),
        "host_tail_s": gil + ddp_copy + h_end,
        "optimizer_s": opt,
        "buckets": buckets,
        "dp_window_s": B_last,
        "layers": float(model.layers),
    }
    exposed = {
        "tp_comm": bd.get("tp_comm", 0.0),
        "cp_comm": bd.get("cp_comm", 0.0),
        "ep_comm": bd.get("ep_comm", 0.0),
        "dp_comm": bd["dp_comm"],
        "pp_p2p": 2 * (pp - 1) * c,
    }
    bubble = bd["pipeline_bubble"] / np.maximum(t_pipe, 1e-30)
    bubble = np.where(bubble < 1e-9, 0.0, bubble)  # float noise of single-stage layouts
    return TrainingEval(
        step_time_s=step,
        breakdown=bd,
        bubble_fraction=bubble,
        microbatches=m,
        tokens_per_step=tokens,
        model_flops_per_step=mflops,
        hardware_flops_per_step=hflops,
        memory=mem,
        memory_per_gpu_bytes=mem["total"],
        stage_times=stage_times,
        exposed_comm=exposed,
        extra={"gpus": gpus, "params_per_gpu": params_rank, "W_s": W_max, "unsynchronized": free},
    )


def training_memory(
    model: ModelSpec,
    training: TrainingSpec,
    lay: TrainingLayout,
    params_rank: Num,
    dense_params_rank: Num,
    m: Num,
    param_dtype: str = "bf16",
    compiled: bool = False,
) -> dict[str, Num]:
    """Peak bytes per GPU on the busiest stage, by part. ``compiled``: torch.compile's graphs save
    fewer activations (recomputable pointwise results are recomputed in backward) and its fused loss
    keeps no fp32 logits (:func:`simcore.memory.activation_bytes_per_layer`, ``logits_bytes``)."""
    tp, pp, dp, cp, vp = (_a(x) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.vp))
    mb = _a(lay.micro_batch)
    sp = _a(lay.sp, bool)
    recompute = np.asarray(lay.recompute)
    sb = M.state_bytes(training.precision, training.optimizer, training.master_weights, param_dtype)
    w, g, o = M.training_state_bytes(params_rank, sb, dp, _a(lay.zero, int), _a(lay.fsdp, bool))
    # DualPipe keeps two copies of the parameters (one per direction; DeepSeek-V3 report, 3.2.1)
    w = w * np.where(np.asarray(lay.schedule) == "dualpipe", 2.0, 1.0)
    act = 2.0 if training.precision != "fp32" else 4.0
    amp = param_dtype == "fp32" and training.precision != "fp32"
    resid = 4.0 if amp else act
    pc = param_counts(model)
    per_layer: Num = 0.0
    for rec in ("none", "selective", "full"):
        sel = np.where(recompute == rec, 1.0, 0.0)
        dense = M.activation_bytes_per_layer(
            model, mb, model.seq_len, tp, cp, sp, rec, act, False, resid, compiled
        )
        layer = dense
        if pc.moe_layers:
            moe = M.activation_bytes_per_layer(
                model, mb, model.seq_len, tp, cp, sp, rec, act, True, resid, compiled
            )
            layer = (dense * pc.dense_layers + moe * pc.moe_layers) / model.layers
        per_layer = per_layer + sel * layer
    layers_rank = np.ceil(model.layers / pp - 1e-9)  # the first stages hold the extra layers
    inflight = M.inflight_microbatches(np.asarray(lay.schedule), pp, m, vp)
    acts = per_layer * layers_rank * inflight
    # full recompute: one layer's full working set is rebuilt during its backward
    working = np.where(
        recompute == "full",
        M.activation_bytes_per_layer(
            model, mb, model.seq_len, tp, cp, sp, "none", act, pc.moe_layers > 0, resid, compiled
        ),
        0.0,
    )
    vdiv = tp if lay.vocab_parallel else 1.0
    last_stage_logits = M.logits_bytes(
        model, mb, model.seq_len, vdiv, cp, act, unfused=amp, compiled=compiled
    )
    logits = np.where(pp <= 1, last_stage_logits, 0.0)
    inflight_last = np.where(np.asarray(lay.schedule) == "gpipe", m, 1.0)
    layers_mem = per_layer * layers_rank * inflight_last
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
    total = np.maximum(first, np.where(pp > 1, last, 0.0))
    return {
        "weights": w,
        "gradients": g,
        "optimizer": o,
        "activations": acts + working,
        "logits": np.where(pp <= 1, logits, last_stage_logits),
        "total": total,
    }
