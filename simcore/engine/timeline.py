"""Discrete-event simulation of a training scenario's step, from the analytic engine's stage times.

The analytic engine prices each stage's forward, backward and weight-gradient work (one formula
for every op); this module lays those stage times out on the pipeline ranks, runs the schedule in
simpy (:mod:`simcore.engine.des`) with point-to-point transfers and the data-parallel tail, and
returns the timeline. On uncontended cases the step time equals the analytic closed form (tests
hold them within 1 %).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from simcore.engine.des import DESResult, PipelineJob, StageTimes, simulate_pipeline, step_lower_bound
from simcore.engine.schedules import chunks
from simcore.engine.training import STEP_TERMS, TrainingEval, chunk_layer_counts
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import Scenario


def _f(x: Any) -> float:
    return float(np.asarray(x, dtype=float))


def pipeline_job(lay: dict[str, Any], ev: TrainingEval) -> PipelineJob:
    """The DES job of a scalar layout whose stage times ``ev`` priced."""
    st = {k: _f(v) for k, v in ev.stage_times.items()}
    p = int(lay["pp"])
    sched = str(lay["schedule"])
    v = int(lay["vp"]) if sched == "interleaved" else 1
    nch = chunks(sched, v)
    m = int(round(_f(ev.microbatches)))
    nstage = p * nch
    chain = p if sched == "dualpipe" else nstage
    # per-layer seconds (the stage times are for layers / pp layers); the layers of each chunk by
    # Megatron's split (embedding/loss counted as layers, explicit per-stage lists: chunk_layer_counts)
    layers = int(round(st["layers"]))
    per_rank = layers / p
    f, b, w = (st[k] / per_rank for k in ("forward_s", "backward_s", "wgrad_s"))
    counts = (
        chunk_layer_counts(
            layers, p, nstage // p, bool(lay.get("embedding_stage")), bool(lay.get("loss_stage")),
            lay.get("stage_layers"),
        )
        if chain == nstage and (lay.get("stage_layers") is None or nstage == p)
        else [layers // chain + (1 if pos < layers % chain else 0) for pos in range(chain)]
    )  # fmt: skip
    hp_share = f / max(f + b, 1e-30)  # a bf16 layer's extra time, split as a layer's forward/backward
    stages = []
    for vs in range(nstage):
        pos = vs % chain
        n = counts[pos]
        sf, sb, sw = f * n, b * n, w * n
        if pos == 0:
            sf += st["embedding_fwd_s"] + hp_share * st.get("hp_first_s", 0.0)
            sb += st["embedding_bwd_s"] + (1 - hp_share) * st.get("hp_first_s", 0.0)
        if pos == chain - 1:
            sf += st["head_fwd_s"] + hp_share * st.get("hp_last_s", 0.0)
            sb += st["head_bwd_s"] + (1 - hp_share) * st.get("hp_last_s", 0.0)
            sw += st["head_wgrad_s"]
        stages.append(StageTimes(sf, sb, sw))
    return PipelineJob(
        schedule=sched,
        pp=p,
        microbatches=m,
        vp=v,
        stages=stages,
        p2p_time=st["p2p_s"] if p > 1 else 0.0,
        dp_time=[st["dp_comm_s"]] * p,
        dp_overlap=bool(lay["dp_overlap"])
        and int(lay["zero"]) < 3
        and not bool(lay["fsdp"])
        and lay.get("dp_mode", "ddp") == "ddp",
        buckets=max(int(round(st["buckets"])), 1),
        optimizer_time=[st["optimizer_s"]] * p,
        tail_time=[st["dp_tail_s"] + st["host_tail_s"]] * p,
        dp_window=[st["dp_window_s"]] * p if sched == "interleaved" else [],
    )


def straggler_factors(lay: dict[str, Any], sigma: float, seed: int = 0) -> np.ndarray:
    """Slow-down factor of each pipeline rank: per-GPU speeds ``exp(N(0, sigma))`` (drawn with
    ``seed``), the slowest of a stage's ``tp x dp`` GPUs sets its pace (>= 1 for every stage)."""
    p, dp, tp = int(lay["pp"]), int(lay["dp"]), int(lay["tp"]) * int(lay["cp"])
    if sigma <= 0:
        return np.ones(p)
    rng = np.random.default_rng(seed)
    speeds = rng.lognormal(0.0, sigma, size=(p, dp * tp))
    return np.asarray(np.maximum(speeds.max(axis=1), 1.0), dtype=float)


def with_stragglers(job: PipelineJob, factors: np.ndarray) -> PipelineJob:
    """The job with every stage's compute on pipeline rank ``r`` slowed by ``factors[r]``."""
    if np.all(factors == 1.0):
        return job
    p = job.pp
    chain = p if job.schedule == "dualpipe" else p * chunks(job.schedule, job.vp)
    stages = []
    for vs, st in enumerate(job.stages):
        pos = vs % chain
        rank = pos % p if job.schedule != "dualpipe" else (pos if vs < p else p - 1 - pos)
        f = float(factors[rank])
        stages.append(StageTimes(st.fwd * f, st.bwd * f, st.wgrad * f))
    return dataclasses.replace(job, stages=stages)


def _training_job(sc: Scenario, lay: dict[str, Any], ev: TrainingEval) -> tuple[PipelineJob, float]:
    """The DES job of a scenario's scalar layout (with its stragglers), and the step-level seconds of the
    analytic step the pipeline simulation does not carry (the power cap's stretch, compute slowed beside
    overlapped data-parallel collectives)."""
    job = pipeline_job(lay, ev)
    factors = straggler_factors(lay, sc.runtime.straggler_sigma, sc.runtime.seed)
    extra = sum(float(np.asarray(ev.breakdown.get(k, 0.0))) for k in STEP_TERMS)
    return with_stragglers(job, factors), extra


def simulate_training(sc: Scenario, cluster: ClusterInfo, lay: dict[str, Any], ev: TrainingEval) -> DESResult:
    """Run the DES for one training step of a scenario with a scalar layout (with its stragglers)."""
    del cluster
    job, extra = _training_job(sc, lay, ev)
    res = simulate_pipeline(job)
    return dataclasses.replace(res, step_time_s=res.step_time_s + extra) if extra > 0 else res


def training_step_bound(sc: Scenario, lay: dict[str, Any], ev: TrainingEval) -> float:
    """Seconds the DES step of :func:`simulate_training` is at least, without simulating
    (:func:`~simcore.engine.des.step_lower_bound` plus the same step-level terms)."""
    job, extra = _training_job(sc, lay, ev)
    return step_lower_bound(job) + (extra if extra > 0 else 0.0)
