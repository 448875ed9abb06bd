"""``simcore.predict``: one scenario in, one result out (training or inference).

This module composes the engines for a single scenario; the planner calls the same engines with
numpy grids of layouts. Results are pydantic models (``.model_dump()`` gives the JSON of
``simcore predict --json``), all quantities in SI units.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_serializer

from simcore import memory as M
from simcore.cost import busy_fraction, cost_energy
from simcore.engine import training as T
from simcore.engine.runtime import inference_runtime, training_runtime, with_stack
from simcore.errors import SpecError
from simcore.memory import RESERVED_BYTES as RESERVED_BYTES
from simcore.specs.intervals import class_key, load_intervals, lookup
from simcore.specs.profile import engine_gemm_note, load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster
from simcore.specs.scenario import ModelSpec, Scenario
from simcore.specs.stack import Chosen
from simcore.system import (
    InferencePower,
    SystemResult,
    energy_cluster,
    inference_capped,
    inference_shared,
    on_mig,
    power_capped,
    scenario_limit,
    training_system,
)
from simcore.system.sharing import SharingResult
from simcore.workload.layout import valid_layouts
from simcore.workload.model import dropped_share, expert_capacity, routed_load
from simcore.workload.precision import recipe


def _f(x: Any) -> float:
    return float(np.asarray(x, dtype=float))


class _SystemEffects(BaseModel):
    """A result whose ``system_effects`` (:mod:`simcore.system`) is left out of the JSON when the
    scenario models none of it."""

    @model_serializer(mode="wrap")
    def _drop_absent_system(self, handler: Any) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for key in ("system_effects", "sharing"):
                if key in out and out[key] is None:
                    del out[key]
        return out


class TrainingResult(_SystemEffects):
    """Prediction for one training step (seconds, bytes, FLOP/s; SI units)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["training"] = "training"
    engine: str
    device: str
    system: str
    gpus: int
    layout: dict[str, Any]
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    memory_per_gpu_bytes: float
    memory_breakdown: dict[str, float]
    fits_in_memory: bool
    fits_reason: str
    breakdown: dict[str, float]
    bubble_fraction: float
    exposed_comm: dict[str, float]
    microbatches: int
    tokens_per_step: float
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    cost: float | None = None
    system_effects: SystemResult | None = None
    """The system around the GPU (data loading, power cap, checkpoints, failures and goodput) where the
    scenario models it; left out of the JSON when it does not."""
    power_per_gpu_w: float
    energy_per_step_j: float
    energy_per_token_j: float
    calibration: str
    notes: list[str] = []
    step_time_s_low: float | None = None
    """Lower end of the prediction interval of ``step_time_s`` (``interval`` says which)."""
    step_time_s_high: float | None = None
    """Upper end of the prediction interval of ``step_time_s``."""
    interval: str | None = None
    """The interval's level and the class of measurements it comes from (None: no intervals shipped)."""


class InferenceResult(_SystemEffects):
    """Prediction for a prefill and a decode step (seconds, bytes; SI units)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["inference"] = "inference"
    device: str
    system: str
    gpus: int
    layout: dict[str, Any]
    batch: int
    prompt_len: int
    context_len: int
    output_len: int
    system_effects: InferencePower | None = None
    sharing: SharingResult | None = None
    """``cluster.sharing``: the processes sharing each GPU; the decode step and tokens/s above are then
    one process's among them."""
    """The power cap's clocks and slowdowns of the prefill and the decode step (``cluster.power_cap``)."""
    prefill_time_s: float
    decode_step_time_s: float
    prefill_host_s: float = 0.0
    """Host seconds to issue the prefill (eager PyTorch's per-layer host model; 0: not modelled)."""
    decode_host_s: float = 0.0
    """Host seconds to issue one decode step (as ``prefill_host_s``)."""
    decode_kernels: float = 0.0
    """Kernels one decode step launches."""
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    tokens_per_s: float
    """Decode throughput: generated tokens per second for the whole batch."""
    prefill_tokens_per_s: float
    memory_per_gpu_bytes: float
    memory_breakdown: dict[str, float]
    fits_in_memory: bool
    fits_reason: str
    breakdown_prefill: dict[str, float]
    breakdown_decode: dict[str, float]
    calibration: str
    notes: list[str] = []
    prefill_time_s_low: float | None = None
    """Lower end of the prediction interval of ``prefill_time_s`` (``interval`` says which)."""
    prefill_time_s_high: float | None = None
    decode_step_time_s_low: float | None = None
    """Lower end of the prediction interval of ``decode_step_time_s``."""
    decode_step_time_s_high: float | None = None
    interval: str | None = None
    """The interval's level and the class of measurements it comes from (None: no intervals shipped)."""


def _fits(total: float, cluster: ClusterInfo) -> tuple[bool, str]:
    cap = cluster.device.memory.capacity
    usable = cap - RESERVED_BYTES
    if total <= usable:
        return True, f"{total / M.GiB:.1f} GiB of {usable / M.GiB:.1f} GiB usable"
    return (
        False,
        f"needs {total / M.GiB:.1f} GiB per GPU, {usable / M.GiB:.1f} GiB usable on {cluster.device.name}",
    )


def _calibration_note(
    cluster: ClusterInfo, name: str | None, framework: str = "eager"
) -> tuple[str, list[str]]:
    prof = load_profile(cluster.device, name)
    notes: list[str] = []
    if framework == "compiled":
        notes.append(
            "torch.compile: inductor's fused memory-bound kernels; GEMMs (cuBLAS) at their kernels' in-step rate"
            if prof.gemm_kernel
            else "torch.compile: inductor's fused memory-bound kernels; GEMMs at the call-timed rate (this "
            "profile has no kernel-duration GEMM fit, gemm_kernel: docs/compute.md, torch.compile)"
        )
    tf = prof.transferred_from
    label = prof.device
    if tf:
        notes.append(
            f"no measurements for {cluster.device.name}: efficiency curves transferred from {tf} (measured "
            "fractions of peak kept; memory-bound kernels move worst between GPUs: docs/validation.md section 6)"
            + (f"; {own} (docs/compute.md, Blackwell's GEMMs from engine tables)" if (own := engine_gemm_note(prof)) else "")
        )
        label = f"transferred from {tf}"
    if prof.provisional:
        notes.append("calibration profile is provisional (not yet fitted on measurements)")
    return label, notes


def interval_of(cluster: ClusterInfo, calibration: str | None, gpus: int, kind: str) -> dict[str, Any]:
    """The measured/predicted factors ``low``/``high`` of the prediction interval for a ``kind``
    (``training``/``inference``) prediction on ``gpus`` GPUs, and its label; empty when no intervals ship
    (:mod:`simcore.specs.intervals`; docs/accuracy.md, Prediction intervals)."""
    iv = load_intervals()
    if iv is None:
        return {}
    calibrated = not load_profile(cluster.device, calibration).transferred_from
    hit = lookup(iv, class_key(calibrated, gpus, kind))
    if hit is None:
        return {}
    used, c = hit
    return {
        "low": c.low,
        "high": c.high,
        "label": f"{iv.level:.0%} interval from {c.n} held-out measurements of class {used}",
    }


def _require_layout(model: ModelSpec, gpus: int, tp: int, pp: int, *more: int | None) -> None:
    """:func:`~simcore.workload.layout.valid_layouts`' check of a scalar layout (``more``: cp, dp, ep, vp,
    micro-batch, global batch, etp, extra pipeline units), raising its error; a valid one is remembered (a pure function of
    frozen, hashable inputs; see docs/architecture.md, Speed)."""
    try:
        _valid_layout(model, gpus, tp, pp, *more)
    except TypeError:  # (a spec that holds a list does not hash: checked each time)
        _valid_layout.__wrapped__(model, gpus, tp, pp, *more)


@lru_cache(maxsize=512)
def _valid_layout(model: ModelSpec, gpus: int, tp: int, pp: int, *more: int | None) -> None:
    names = ("cp", "dp", "ep", "vp", "micro_batch", "global_batch", "etp", "extra_units")
    valid_layouts(model, gpus, tp=tp, pp=pp, **dict(zip(names, more, strict=False))).require()


def layout_of(sc: Scenario, cluster: ClusterInfo) -> dict[str, Any]:
    """The scalar parallel layout of a training scenario, validated against the cluster and model
    (:func:`~simcore.workload.layout.valid_layouts`): ``dp`` fills the cluster when not given, ``vp``
    counts only under the interleaved schedule, and the global batch defaults to ``micro_batch * dp``
    times ``4 pp`` micro-batches with pipeline stages (one without)."""
    p = sc.parallel
    tr = sc.training
    assert tr is not None
    dp = p.dp if p.dp is not None else cluster.gpus // (p.tp * p.pp * p.cp)
    vp = p.vp if p.schedule == "interleaved" else 1
    gb = tr.global_batch or tr.micro_batch * dp * (4 * p.pp if p.pp > 1 else 1)
    extra = int(p.account_for_embedding_in_pipeline_split) + int(p.account_for_loss_in_pipeline_split)
    _require_offload(sc)
    _require_layout(sc.model, cluster.gpus, p.tp, p.pp, p.cp, dp, p.ep, vp, tr.micro_batch, gb, p.etp, extra)
    # the folding and pipeline-split options appear in the layout only where the scenario sets them
    options = {
        "etp": p.etp,
        "embedding_stage": p.account_for_embedding_in_pipeline_split or None,
        "loss_stage": p.account_for_loss_in_pipeline_split or None,
        "stage_layers": tuple(p.pipeline_layers) if p.pipeline_layers is not None else None,
        "zero3_gather": p.zero3_gather if p.zero3_gather != "bucketed" else None,
        "megatron_fsdp": p.megatron_fsdp or None,
        "param_gather_overlap": False if not p.param_gather_overlap else None,
        "pipeline_library": p.pipeline_library if p.pp > 1 and p.pipeline_library != "torch" else None,
    }
    return {
        "tp": p.tp,
        "pp": p.pp,
        "dp": dp,
        "cp": p.cp,
        "ep": p.ep,
        "vp": vp,
        "micro_batch": tr.micro_batch,
        "global_batch": gb,
        "sp": p.sequence_parallel,
        "zero": p.zero,
        "fsdp": p.fsdp,
        "recompute": tr.recompute,
        "schedule": p.schedule,
        "dp_overlap": p.dp_overlap,
        "tp_overlap": p.tp_overlap,
        "dp_mode": p.data_parallel,
        "vocab_parallel": p.vocab_parallel,
        **{k: v for k, v in options.items() if v is not None},
    }


def _require_offload(sc: Scenario) -> None:
    """Activation offload as Megatron-Core allows it (``TransformerConfig.__post_init__``): fewer layers
    than the model's and no pipeline parallelism; else one error naming the field."""
    tr = sc.training
    assert tr is not None
    n = tr.activation_offload_layers
    if n and n >= sc.model.layers:
        raise SpecError(
            f"offloads {n} layers of {sc.model.name}'s {sc.model.layers}; at most {sc.model.layers - 1} "
            "(the last layer's activations are used at once)",
            field="training.activation_offload_layers",
        )
    if n and sc.parallel.pp > 1:
        raise SpecError(
            f"activation offload runs without pipeline parallelism (Megatron-Core's check); got pp {sc.parallel.pp}",
            field="training.activation_offload_layers",
        )


def _offload_notes(sc: Scenario, ev: T.TrainingEval, mem: dict[str, float], cluster: ClusterInfo) -> list[str]:
    """The notes of a prediction with offload: what moves over the host link, what shows in the step,
    what stays in host memory (docs/parallelism.md, Offload)."""
    tr = sc.training
    assert tr is not None
    x = {k: _f(v) for k, v in ev.extra.items() if k.startswith(("activation_offload", "optimizer_offload"))}
    notes = []
    if "activation_offload_s" in x:
        notes.append(
            f"activation offload: {tr.activation_offload_layers} of {sc.model.layers} layers' activations "
            f"({mem['host_activations'] / M.GiB:.2f} GiB per GPU) to host memory and back each micro-batch, "
            f"{x['activation_offload_s'] * 1e3:.2f} ms per step not hidden behind the other layers' compute"
        )
    if "optimizer_offload_s" in x:
        how = "pipelined" if tr.optimizer_offload_overlap else "one after another"
        stream = cluster.system.host_memory_stream is not None
        bw_kind = "STREAM triad bandwidth per GPU" if stream else "peak bandwidth per GPU: no STREAM figure cited"
        notes.append(
            f"optimizer offload: {tr.optimizer_offload_fraction:.0%} of the optimizer state "
            f"({mem['host_optimizer'] / M.GiB:.2f} GiB per GPU) on the host; gradients down "
            f"{x['optimizer_offload_d2h_s'] * 1e3:.1f} ms, CPU update {x['optimizer_offload_cpu_s'] * 1e3:.1f} ms "
            f"(at the CPU memory's {bw_kind}), weights up {x['optimizer_offload_h2d_s'] * 1e3:.1f} ms, "
            f"{how}: {x['optimizer_offload_s'] * 1e3:.1f} ms beside the GPU's update of the rest"
        )
    return notes


def _capacity_notes(m: ModelSpec, micro_batch: int, lay: dict[str, Any]) -> list[str]:
    """The note of an MoE prediction with a capacity factor: each expert's capacity on a rank, the busiest
    expert's rows and the share of its copies dropped (:func:`simcore.workload.model.routed_load`)."""
    moe = m.moe
    if moe is None or moe.capacity_factor is None:
        return []
    etp = lay["tp"] if lay.get("etp") is None else lay["etp"]
    tokens = micro_batch * m.seq_len / lay["cp"] * etp / lay["tp"]  # a rank's tokens at the dispatcher
    cap = _f(expert_capacity(tokens, moe.top_k, moe.experts, moe.capacity_factor))
    load = _f(routed_load(tokens, moe.top_k, moe.experts, moe.imbalance, moe.capacity_factor, moe.pad_to_capacity))
    drop = _f(dropped_share(tokens, moe.top_k, moe.experts, moe.imbalance, moe.capacity_factor))
    what = "padded to it: every expert computes" if moe.pad_to_capacity else "the busiest expert computes"
    return [
        f"MoE capacity factor {moe.capacity_factor:g} (Megatron-Core moe_expert_capacity_factor): {cap:.0f} rows per "
        f"expert from each rank's {tokens:.0f} tokens; {what} {load:.3g}x the mean rows; at imbalance "
        f"{moe.imbalance:g} the busiest expert drops {drop:.1%} of its routed copies"
    ]


def stack_note(stack: str, chosen: list[Chosen]) -> list[str]:
    """The note saying which defaults ``stack`` chose (:func:`with_stack`; docs/stacks.md)."""
    if not chosen:
        return []
    vals = ", ".join(
        f"{c.key}={str(c.value).lower() if isinstance(c.value, bool) else c.value}" for c in chosen
    )
    return [f"stack {stack} defaults (not given by the scenario): {vals}; sources: simcore predict --explain"]


def evaluate_training(
    sc: Scenario, cluster: ClusterInfo | None = None, dp_contention: float | None = None
) -> tuple[ClusterInfo, dict[str, Any], T.TrainingEval]:
    """Resolve a training scenario (its stack's defaults where it gives none, :func:`with_stack`) and run
    the analytic engine on its (scalar) layout (on ``cluster`` when given: one already resolved, e.g.
    power-capped). ``dp_contention``: the data-parallel groups' network slowdown when the caller has it
    (several jobs on one fabric, :mod:`simcore.planning.multijob`); else, on an oversubscribed fabric,
    the flow model's for this job alone (``TrainingLayout.dp_contention``)."""
    sc = with_stack(sc)[0]
    if sc.training is None:
        raise SpecError("needs a training scenario", field="kind")
    if cluster is None:
        cluster = on_mig(resolve_cluster(sc.cluster, default_registry()), sc.cluster.mig)
    lay = layout_of(sc, cluster)
    if dp_contention is None and cluster.fabric.oversubscription > 1:
        # the concurrent data-parallel groups share the oversubscribed fabric: the flow model prices it
        from simcore.comm.flow import data_parallel_slowdown

        dp_contention = data_parallel_slowdown(cluster, lay["tp"], lay["cp"], lay["dp"], lay["pp"])
    if dp_contention is not None:
        lay["dp_contention"] = dp_contention
    ev = T.evaluate(
        sc.model,
        sc.training,
        T.TrainingLayout(**lay),
        cluster,
        sc.runtime.framework,
        sc.calibration,
        _param_dtype(sc),
        **training_runtime(sc),
    )
    return cluster, lay, ev


def predict_training(
    sc: Scenario, engine: str = "analytic", dp_contention: float | None = None
) -> TrainingResult:
    """A training step's prediction; ``dp_contention``: as :func:`evaluate_training`'s."""
    sc, chosen = with_stack(sc)
    notes = stack_note(sc.runtime.stack, chosen)
    cluster, lay, ev = evaluate_training(sc, dp_contention=dp_contention)
    if "dp_contention" in lay and dp_contention is None:
        groups = lay["tp"] * lay["cp"] * lay["pp"]
        notes.append(
            f"data-parallel network flows at 1/{lay['dp_contention']:.2f} of the NIC share: the {groups} "
            f"data-parallel groups ({lay['pp']} stage(s)) reducing at once on the "
            f"{cluster.fabric.oversubscription:g}:1 fabric's graph (flow model, docs/parallelism.md)"
        )
    run_cluster, clocks = cluster, None
    if (capped := power_capped(sc, cluster, ev.breakdown)) is not None:
        clocks, run_cluster = capped
        uncapped = _f(ev.step_time_s)
        ev = evaluate_training(sc, run_cluster, lay.get("dp_contention"))[2]
        clocks = dataclasses.replace(clocks, slowdown_s=_f(ev.step_time_s) - uncapped)
    tr = sc.training
    assert tr is not None
    step = _f(ev.step_time_s)
    if engine == "des":
        from simcore.engine.timeline import simulate_training

        des = simulate_training(sc, run_cluster, lay, ev)
        step = des.step_time_s
        if (offload := _f(ev.breakdown.get("activation_offload", 0.0))) > 0:
            # the offload stream's stalls are the analytic replay's (engine/offload.py); the DES adds them
            step += offload
            notes.append("activation offload: its exposed seconds (the analytic replay) added to the simulated step")
        if bool(np.all(ev.extra["unsynchronized"])):
            # one step simulated from host and GPU together; a loop that never waits for the GPU
            # overlaps consecutive steps, whose steady state the analytic engine gives
            step = _f(ev.step_time_s)
            notes.append(
                "runtime.step_sync: false on one stage: the step is the analytic steady state (the larger of "
                "the host's and the GPU's totals); the discrete-event engine simulates synchronized steps"
            )
        if sc.runtime.straggler_sigma > 0:
            notes.append(
                f"stragglers: per-GPU speed spread sigma {sc.runtime.straggler_sigma:g} (seed {sc.runtime.seed}); "
                f"{step / _f(ev.step_time_s) - 1:+.1%} over the straggler-free step"
            )
    gpus = cluster.gpus
    tokens = _f(ev.tokens_per_step)
    mflops = _f(ev.model_flops_per_step)
    rec = recipe(tr.precision, cluster.device)
    peak = cluster.device.peak_flops(rec.gemm_dtype)
    if rec.quantized:
        kept = "embedding, LM head, router, attention core, norms"
        if tr.bf16_layers_start or tr.bf16_layers_end:
            kept += f", first {tr.bf16_layers_start} and last {tr.bf16_layers_end} layers"
        fam = "per-tensor (cuBLASLt)" if rec.per_tensor_kernels(cluster.device) else "row-wise"
        notes.append(
            f"precision {tr.precision}: {rec.description}; GEMMs at the {fam} FP8 kernels' rate; kept in bf16: {kept}"
        )
    mem = {k: _f(v) for k, v in ev.memory.items()}
    fits, reason = _fits(mem["total"], cluster)
    notes.extend(_offload_notes(sc, ev, mem, cluster))
    notes.extend(_capacity_notes(sc.model, tr.micro_batch, lay))
    cal, cal_notes = _calibration_note(cluster, sc.calibration, sc.runtime.framework)
    notes.extend(cal_notes)
    bd = {k: _f(v) for k, v in ev.breakdown.items()}
    sysfx = training_system(sc, cluster, lay, step, mem, tokens, _param_dtype(sc), clocks)
    if sysfx is not None:
        step = sysfx.step_time_s
        bd.update({k: bd.get(k, 0.0) + v for k, v in sysfx.added.items()})
        notes.extend(sysfx.notes)
    mfu = mflops / (step * gpus * peak)
    hfu = _f(ev.hardware_flops_per_step) / (step * gpus * peak)
    ce = cost_energy(
        energy_cluster(cluster, scenario_limit(sc, cluster.device)),
        step,
        busy_fraction(bd, step),
        tokens,
        gpus,
        sc.cost,
        tr.tokens,
    )
    power = _f(ce["power_per_gpu_w"])
    energy = _f(ce["energy_per_step_j"])
    iv = interval_of(cluster, sc.calibration, gpus, "training")
    ttt = _f(ce["time_to_train_s"]) if tr.tokens else None
    gh = _f(ce["gpu_hours"]) if tr.tokens else None
    cost = _f(ce["cost"]) if tr.tokens and ce.get("cost") is not None else None
    if ttt and sysfx is not None and sysfx.time_to_train_s is not None:
        # the GPUs are held through restarts and checkpoint stalls: GPU-hours and cost over the wall clock
        held = sysfx.time_to_train_s / ttt
        gh = None if gh is None else gh * held
        cost = None if cost is None else cost * held
        notes.append(f"GPU-hours and cost over the wall-clock time to train (x{held:.3f}: failures, checkpoints)")
    return TrainingResult(
        name=sc.name,
        engine=engine,
        device=cluster.device.name,
        system=cluster.system.name,
        gpus=gpus,
        layout=lay,
        step_time_s=step,
        tokens_per_s=tokens / step,
        tokens_per_s_per_gpu=tokens / step / gpus,
        model_tflops_per_gpu=mflops / step / gpus / 1e12,
        mfu=mfu,
        hfu=hfu,
        memory_per_gpu_bytes=mem["total"],
        memory_breakdown=mem,
        fits_in_memory=fits,
        fits_reason=reason,
        breakdown=bd,
        bubble_fraction=_f(ev.bubble_fraction),
        exposed_comm={k: _f(v) for k, v in ev.exposed_comm.items()},
        microbatches=int(round(_f(ev.microbatches))),
        tokens_per_step=tokens,
        time_to_train_s=ttt,
        gpu_hours=gh,
        cost=cost,
        system_effects=sysfx,
        power_per_gpu_w=power,
        energy_per_step_j=energy,
        energy_per_token_j=energy / tokens,
        calibration=cal,
        notes=notes,
        step_time_s_low=step * iv["low"] if iv else None,
        step_time_s_high=step * iv["high"] if iv else None,
        interval=iv.get("label"),
    )


def _param_dtype(sc: Scenario) -> str:
    assert sc.training is not None
    return "fp32" if sc.training.precision == "fp32" else sc.training.param_dtype


def predict_inference(sc: Scenario) -> InferenceResult:
    from simcore.engine import inference as I  # (imported here: a training prediction never needs it)

    sc, chosen = with_stack(sc)
    reg = default_registry()
    cluster = on_mig(resolve_cluster(sc.cluster, reg), sc.cluster.mig)
    inf = sc.inference
    assert inf is not None
    p = sc.parallel
    _require_layout(sc.model, cluster.gpus, p.tp, p.pp)
    ignored = [k for k in ("cp", "ep") if getattr(p, k) > 1] + (
        ["sequence_parallel"] if p.sequence_parallel else []
    )
    if p.dp not in (None, 1):
        ignored.append("dp")
    rt = sc.runtime
    kw = inference_runtime(sc)
    ev = I.evaluate(sc.model, inf, cluster, p.tp, p.pp, rt.framework, sc.calibration, **kw)
    ev_pre, dec_cluster, capped = ev, cluster, None
    if scenario_limit(sc, cluster.device) is not None:
        ev_pre, ev, dec_cluster, capped = inference_capped(
            sc,
            cluster,
            ev,
            lambda c: I.evaluate(sc.model, inf, c, p.tp, p.pp, rt.framework, sc.calibration, **kw),
        )
    # the generated tokens see a growing cache: price the mean decode step at the middle of the output
    ctx0 = inf.context_len if inf.context_len is not None else inf.prompt_len
    mid = inf.model_copy(update={"context_len": ctx0 + inf.output_len // 2})
    dec_mid = _f(
        I.evaluate(
            sc.model, mid, dec_cluster, p.tp, p.pp, rt.framework, sc.calibration, **kw
        ).decode_step_time_s
    )
    pre = _f(ev_pre.prefill_time_s)
    dec = _f(ev.decode_step_time_s)
    mem = {k: _f(v) for k, v in ev.memory.items()}
    shared = None
    if sc.cluster.sharing is not None:
        shared = inference_shared(sc, dec_cluster, ev, mem)
        dec_mid, dec = dec_mid * shared.step_s / dec, shared.step_s
    fits, reason = _fits(mem["total"], cluster)
    cal, notes = _calibration_note(cluster, sc.calibration)
    notes = stack_note(sc.runtime.stack, chosen) + notes
    if ignored:
        notes.append(f"inference prices one tp x pp replica; parallel.{', parallel.'.join(ignored)} not used")
    if inf.precision in ("fp8", "fp4"):
        notes.append(
            f"precision {inf.precision}: dense GEMMs at the per-tensor (cuBLASLt) FP8 kernels' rate (FP8 checkpoints are "
            "per-tensor scaled), NVFP4 at its own family's (block scales applied inside the MMA); MoE experts on the "
            "row-wise (CUTLASS) family except where the GPU's own FP8 linears were measured"
        )
    iv = interval_of(cluster, sc.calibration, p.tp * p.pp, "inference")
    return InferenceResult(
        name=sc.name,
        device=cluster.device.name,
        system=cluster.system.name,
        gpus=p.tp * p.pp,
        layout={"tp": p.tp, "pp": p.pp},
        batch=inf.batch,
        prompt_len=inf.prompt_len,
        context_len=int(ev.context_len),
        output_len=inf.output_len,
        system_effects=capped,
        sharing=shared,
        prefill_time_s=pre,
        decode_step_time_s=dec,
        prefill_host_s=_f(ev_pre.prefill_host_s),
        decode_host_s=_f(ev.decode_host_s),
        decode_kernels=_f(ev.decode.kernels),
        ttft_s=pre,
        tpot_s=dec,
        e2e_latency_s=pre + dec_mid * max(inf.output_len - 1, 0),
        tokens_per_s=inf.batch / dec,
        prefill_tokens_per_s=inf.batch * inf.prompt_len / pre,
        memory_per_gpu_bytes=mem["total"],
        memory_breakdown=mem,
        fits_in_memory=fits,
        fits_reason=reason,
        breakdown_prefill={k: _f(v) for k, v in ev_pre.prefill.time.items()},
        breakdown_decode={k: _f(v) for k, v in ev.decode.time.items()},
        calibration=cal,
        notes=notes,
        prefill_time_s_low=pre * iv["low"] if iv else None,
        prefill_time_s_high=pre * iv["high"] if iv else None,
        decode_step_time_s_low=dec * iv["low"] if iv else None,
        decode_step_time_s_high=dec * iv["high"] if iv else None,
        interval=iv.get("label"),
    )


def predict(scenario: Scenario | str | Path | dict[str, Any], engine: str = "analytic") -> Any:
    """Predict a scenario (object, path or built-in name, or a dict of a scenario file's fields): a training step (``TrainingResult``), an
    inference prefill and decode step (``InferenceResult``), or a serving run (``ServingResult``).

    ``engine`` is ``analytic`` (closed forms) or ``des`` (discrete-event simulation of the step).
    """
    from simcore.specs.resolve import as_scenario

    scenario = as_scenario(scenario)
    if engine not in ("analytic", "des"):
        raise SpecError(f"unknown engine {engine!r}; use analytic or des", field="engine")
    if scenario.kind == "training":
        return predict_training(scenario, engine)
    if engine == "des":
        raise SpecError(
            "the discrete-event engine simulates training steps; use analytic for inference", field="engine"
        )
    if scenario.kind == "inference":
        return predict_inference(scenario)
    if engine != "analytic":
        raise SpecError("serving scenarios run the request-level simulation; drop --engine", field="engine")
    from simcore.serving import serve

    return serve(scenario)


def moe_layer_time(
    model: Any,
    tokens: int,
    system: str = "hgx-h200",
    ep: int = 1,
    etp: int = 1,
    dtype: str = "bf16",
) -> dict[str, Any]:
    """Device seconds of one MoE feed-forward layer on one rank, forward and backward, by category.

    ``model``: a :class:`~simcore.specs.scenario.ModelSpec` (or its fields as a dict, or a preset's name)
    with ``moe``;
    ``tokens``: tokens the rank holds before the dispatch; ``ep`` / ``etp``: expert and expert-tensor
    parallelism (``ep x etp`` GPUs of ``system``). The layer is :func:`simcore.workload.lowering.moe_block_fwd`
    and its backward: router GEMM, fp32 softmax and top-k, dispatch all-to-all (skewed by
    ``moe.imbalance``, capped or padded by ``moe.capacity_factor``), permute gather, the local experts' grouped
    GEMMs (each expert's ``m`` its share of the routed tokens, priced by the GEMM model's tile/wave efficiency) and activation, the
    probability scale and unpermute scatter-add, combine all-to-all (docs/parallelism.md, "MoE layer").
    Returns ``fwd_s``, ``bwd_s``, ``total_s`` and ``by_category`` (seconds, forward + backward).
    """
    from simcore.engine.pricing import Pricer
    from simcore.specs.loader import validate
    from simcore.specs.resolve import cluster_for
    from simcore.specs.scenario import ModelSpec
    from simcore.workload import lowering as L

    if isinstance(model, str):  # a preset's name ("deepseek-v3")
        from simcore.specs.resolve import resolve_scenario_dict

        model = resolve_scenario_dict({"model": {"preset": model}}, default_registry())["model"]
        model.pop("preset", None)
    m = model if isinstance(model, ModelSpec) else validate(ModelSpec, model, None, "model")
    if m.moe is None:
        raise SpecError("moe_layer_time needs a model with an moe section", field="model.moe")
    for name, v in (("tokens", tokens), ("ep", ep), ("etp", etp)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError(f"{name} must be a positive integer (got {v!r})", field=name)
    if m.moe.experts % ep:
        raise SpecError(f"ep {ep} does not divide the {m.moe.experts} experts", field="ep")
    try:
        recipe(dtype)
    except SpecError as e:
        raise SpecError(e.problem, field="dtype") from None
    pricer = Pricer.for_layout(cluster_for(system, gpus=ep * etp), tp=etp, dp=ep, ep=ep, etp=etp)
    lay = L.Layout(
        micro_batch=1,
        seq=tokens * etp,
        tp=etp,
        ep=ep,
        etp=etp,
        sp=etp > 1,
        dtype=dtype,
        capacity_factor=m.moe.capacity_factor,
        pad_to_capacity=m.moe.pad_to_capacity,
    )
    fwd = L.moe_block_fwd(m, lay)
    pf, pb = pricer.price(fwd), pricer.price(L.backward(fwd))
    cats = {k: float(pf.time.get(k, 0.0) + pb.time.get(k, 0.0)) for k in {*pf.time, *pb.time}}
    return {
        "fwd_s": float(pf.total()),
        "bwd_s": float(pb.total()),
        "total_s": float(pf.total() + pb.total()),
        "by_category": dict(sorted(cats.items())),
    }
