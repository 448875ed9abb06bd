"""Failures and goodput: the job's mean time between failures, the Young/Daly checkpoint interval and
the share of wall time that trains (docs/system.md, "Failures and goodput").

* Job failure rate ``1/M = gpus / mtbf + nodes / node_mtbf + failures_per_day / 86400`` (rates of
  independent parts add); with no rate given, the per-GPU rate of a published record (Llama 3: 419
  unexpected interruptions in 54 days on 16,384 H100s, one per 2,111 GPU-days).
* Young's interval ``tau = sqrt(2 C M)`` for a checkpoint stall of ``C`` seconds (Young 1974; Daly 2006
  gives it as the first-order optimum), at least the checkpoint's lag to durability (an asynchronous
  save must finish before the next starts), rounded to whole steps.
* Each failure loses on average half a checkpoint period ``(tau + C) / 2``, the lag ``L`` of a
  checkpoint not yet on storage, and the restart ``R`` (relaunch and checkpoint read). Over wall time
  ``T`` with ``T / M`` failures, ``T - (T / M) (( tau + C) / 2 + L + R) = W (tau + C) / tau`` for ``W``
  seconds of failure-free training, so the goodput is
  ``W / T = (1 - ((tau + C) / 2 + L + R) / M) / (1 + C / tau)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.errors import SpecError
from simcore.specs.system import ReliabilitySpec, failure_record
from simcore.system.checkpoint import CheckpointResult

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class GoodputResult:
    """Failures, checkpoint interval and goodput of a training job (seconds unless named)."""

    job_mtbf_s: float
    """Mean wall time between job-interrupting failures of the whole job (``M``)."""
    rate_basis: str
    """Where the failure rate comes from."""
    interval_s: float
    """Training seconds between checkpoints (``tau``, a whole number of steps)."""
    interval_steps: int
    optimal: bool
    """``interval_s`` is the Young/Daly optimum (else the scenario's ``runtime.checkpoint.interval``)."""
    checkpoint_stall_s: float
    restart_s: float
    """Seconds from a failure to training again: relaunch (``reliability.restart_time``) and restore."""
    lost_per_failure_s: float
    """Half a checkpoint period, the durability lag and the restart."""
    goodput: float
    """Share of wall time that advances training (0..1)."""


def job_mtbf(spec: ReliabilitySpec, gpus: int, nodes: int) -> tuple[float, str]:
    """(Mean seconds between failures of a job of ``gpus`` GPUs on ``nodes`` nodes, where the rate comes
    from): the given rates added, else the per-GPU rate of ``spec.failure_record``."""
    rate = 0.0
    parts = []
    if spec.mtbf is not None:
        rate += gpus / spec.mtbf
        parts.append(f"per-GPU MTBF {spec.mtbf / 3600:,.0f} h")
    if spec.node_mtbf is not None:
        rate += nodes / spec.node_mtbf
        parts.append(f"per-node MTBF {spec.node_mtbf / 3600:,.0f} h")
    if spec.failures_per_day is not None:
        rate += spec.failures_per_day / SECONDS_PER_DAY
        parts.append(f"{spec.failures_per_day:g} job failures per day")
    if not parts:
        rec = failure_record(spec.failure_record)
        rate = gpus / rec.gpu_mtbf
        parts.append(
            f"{rec.display_name}: {rec.interruptions:g} interruptions, per-GPU MTBF {rec.gpu_mtbf / 86400:,.0f} days"
        )
    return 1.0 / rate, "; ".join(parts)


def young_daly_interval(stall_s: float, mtbf_s: float) -> float:
    """Young's optimal compute time between checkpoints, ``sqrt(2 C M)`` seconds, for a checkpoint
    stall of ``C`` seconds and a job MTBF of ``M`` seconds."""
    return math.sqrt(2.0 * stall_s * mtbf_s)


def goodput_fraction(
    interval_s: float, stall_s: float, lag_s: float, restart_s: float, mtbf_s: float
) -> float:
    """Share of wall time that trains: ``(1 - ((tau + C) / 2 + L + R) / M) / (1 + C / tau)`` (module
    docstring); 0 when failures come faster than the work they lose."""
    lost = (interval_s + stall_s) / 2.0 + lag_s + restart_s
    return max(0.0, 1.0 - lost / mtbf_s) / (1.0 + stall_s / interval_s)


def whole_steps(seconds: float, step_s: float) -> tuple[float, int]:
    """``seconds`` rounded to a whole number (at least one) of ``step_s``-second steps: (seconds, steps)."""
    steps = max(1, round(seconds / step_s))
    return steps * step_s, steps


def goodput(
    spec: ReliabilitySpec,
    gpus: int,
    nodes: int,
    step_s: float,
    checkpoint: CheckpointResult,
    interval_s: float | None = None,
) -> GoodputResult:
    """Goodput of a job of ``gpus`` GPUs on ``nodes`` nodes whose steps take ``step_s`` seconds and whose
    checkpoints cost ``checkpoint`` (stall ``C``, lag ``L``, restore), at ``interval_s`` seconds of
    training between checkpoints or Young/Daly's."""
    mtbf, basis = job_mtbf(spec, gpus, nodes)
    c, lag = checkpoint.stall_s, checkpoint.lag_s
    tau = interval_s if interval_s is not None else max(young_daly_interval(c, mtbf), lag)
    tau, steps = whole_steps(tau, step_s)
    restart = (spec.restart_time or 0.0) + checkpoint.restore_s
    lost = (tau + c) / 2.0 + lag + restart
    if lost >= mtbf:
        raise SpecError(
            f"the job fails every {mtbf:,.0f} s on average, less than the {lost:,.0f} s each failure loses: "
            "it never finishes (fewer GPUs, faster checkpoints or restarts)",
            field="reliability",
        )
    return GoodputResult(
        job_mtbf_s=mtbf,
        rate_basis=basis,
        interval_s=tau,
        interval_steps=steps,
        optimal=interval_s is None,
        checkpoint_stall_s=c,
        restart_s=restart,
        lost_per_failure_s=lost,
        goodput=goodput_fraction(tau, c, lag, restart, mtbf),
    )


__all__ = ["GoodputResult", "goodput", "goodput_fraction", "job_mtbf", "whole_steps", "young_daly_interval"]
