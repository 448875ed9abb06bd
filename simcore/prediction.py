"""``simcore.predict``: one scenario in, one result out (training or inference).

This module composes the engines for a single scenario; the planner calls the same engines with
numpy grids of layouts. Results are pydantic models (``.model_dump()`` gives the JSON of
``simcore predict --json``), all quantities in SI units.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from simcore import memory as M
from simcore.cost import busy_fraction, cost_energy
from simcore.engine import training as T
from simcore.engine.runtime import inference_runtime, training_runtime
from simcore.errors import SpecError
from simcore.memory import RESERVED_BYTES as RESERVED_BYTES
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster
from simcore.specs.scenario import ModelSpec, Scenario
from simcore.workload.layout import valid_layouts


def _f(x: Any) -> float:
    return float(np.asarray(x, dtype=float))


class TrainingResult(BaseModel):
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
    power_per_gpu_w: float
    energy_per_step_j: float
    energy_per_token_j: float
    calibration: str
    notes: list[str] = []


class InferenceResult(BaseModel):
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


def _fits(total: float, cluster: ClusterInfo) -> tuple[bool, str]:
    cap = cluster.device.memory.capacity
    usable = cap - RESERVED_BYTES
    if total <= usable:
        return True, f"{total / M.GiB:.1f} GiB of {usable / M.GiB:.1f} GiB usable"
    return (
        False,
        f"needs {total / M.GiB:.1f} GiB per GPU, {usable / M.GiB:.1f} GiB usable on {cluster.device.name}",
    )


def _calibration_note(cluster: ClusterInfo, name: str | None) -> tuple[str, list[str]]:
    prof = load_profile(cluster.device, name)
    notes: list[str] = []
    tf = prof.transferred_from
    label = prof.device
    if tf:
        notes.append(
            f"no measurements for {cluster.device.name}: efficiency curves transferred from {tf} (measured "
            "fractions of peak kept; memory-bound kernels move worst between GPUs: docs/validation.md section 6)"
        )
        label = f"transferred from {tf}"
    if prof.provisional:
        notes.append("calibration profile is provisional (not yet fitted on measurements)")
    return label, notes


def _require_layout(model: ModelSpec, gpus: int, tp: int, pp: int, *more: int | None) -> None:
    """:func:`~simcore.workload.layout.valid_layouts`' check of a scalar layout (``more``: cp, dp, ep, vp,
    micro-batch, global batch), raising its error; a valid one is remembered (a pure function of
    frozen, hashable inputs; see docs/architecture.md, Speed)."""
    try:
        _valid_layout(model, gpus, tp, pp, *more)
    except TypeError:  # (a spec that holds a list does not hash: checked each time)
        _valid_layout.__wrapped__(model, gpus, tp, pp, *more)


@lru_cache(maxsize=512)
def _valid_layout(model: ModelSpec, gpus: int, tp: int, pp: int, *more: int | None) -> None:
    names = ("cp", "dp", "ep", "vp", "micro_batch", "global_batch")
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
    _require_layout(sc.model, cluster.gpus, p.tp, p.pp, p.cp, dp, p.ep, vp, tr.micro_batch, gb)
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
    }


def evaluate_training(sc: Scenario) -> tuple[ClusterInfo, dict[str, Any], T.TrainingEval]:
    """Resolve a training scenario and run the analytic engine on its (scalar) layout."""
    if sc.training is None:
        raise SpecError("needs a training scenario", field="kind")
    cluster = resolve_cluster(sc.cluster, default_registry())
    lay = layout_of(sc, cluster)
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


def predict_training(sc: Scenario, engine: str = "analytic") -> TrainingResult:
    cluster, lay, ev = evaluate_training(sc)
    tr = sc.training
    assert tr is not None
    step = _f(ev.step_time_s)
    notes: list[str] = []
    if engine == "des":
        from simcore.engine.timeline import simulate_training

        des = simulate_training(sc, cluster, lay, ev)
        step = des.step_time_s
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
    peak = cluster.device.peak_flops(tr.precision)
    mfu = mflops / (step * gpus * peak)
    hfu = _f(ev.hardware_flops_per_step) / (step * gpus * peak)
    mem = {k: _f(v) for k, v in ev.memory.items()}
    fits, reason = _fits(mem["total"], cluster)
    cal, cal_notes = _calibration_note(cluster, sc.calibration)
    notes.extend(cal_notes)
    bd = {k: _f(v) for k, v in ev.breakdown.items()}
    ce = cost_energy(cluster, step, busy_fraction(bd, step), tokens, gpus, sc.cost, tr.tokens)
    power = _f(ce["power_per_gpu_w"])
    energy = _f(ce["energy_per_step_j"])
    ttt = _f(ce["time_to_train_s"]) if tr.tokens else None
    gh = _f(ce["gpu_hours"]) if tr.tokens else None
    cost = _f(ce["cost"]) if tr.tokens and ce.get("cost") is not None else None
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
        power_per_gpu_w=power,
        energy_per_step_j=energy,
        energy_per_token_j=energy / tokens,
        calibration=cal,
        notes=notes,
    )


def _param_dtype(sc: Scenario) -> str:
    assert sc.training is not None
    return "fp32" if sc.training.precision == "fp32" else sc.training.param_dtype


def predict_inference(sc: Scenario) -> InferenceResult:
    from simcore.engine import inference as I  # (imported here: a training prediction never needs it)

    reg = default_registry()
    cluster = resolve_cluster(sc.cluster, reg)
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
    # the generated tokens see a growing cache: price the mean decode step at the middle of the output
    ctx0 = inf.context_len if inf.context_len is not None else inf.prompt_len
    mid = inf.model_copy(update={"context_len": ctx0 + inf.output_len // 2})
    dec_mid = _f(
        I.evaluate(sc.model, mid, cluster, p.tp, p.pp, rt.framework, sc.calibration, **kw).decode_step_time_s
    )
    pre = _f(ev.prefill_time_s)
    dec = _f(ev.decode_step_time_s)
    mem = {k: _f(v) for k, v in ev.memory.items()}
    fits, reason = _fits(mem["total"], cluster)
    cal, notes = _calibration_note(cluster, sc.calibration)
    if ignored:
        notes.append(f"inference prices one tp x pp replica; parallel.{', parallel.'.join(ignored)} not used")
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
        prefill_time_s=pre,
        decode_step_time_s=dec,
        prefill_host_s=_f(ev.prefill_host_s),
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
        breakdown_prefill={k: _f(v) for k, v in ev.prefill.time.items()},
        breakdown_decode={k: _f(v) for k, v in ev.decode.time.items()},
        calibration=cal,
        notes=notes,
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
