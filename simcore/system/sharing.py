"""GPU sharing between processes: several copies of a small inference job on one GPU under time-slicing
or MPS (docs/system.md, "MPS and time-slicing").

Each of ``N`` processes runs the job alone in ``t1`` seconds per decode step (its host issuing kernels,
its kernels running), of which ``d`` seconds are kernels on the device. Its host work runs on its own CPU
thread, so it overlaps the other processes'; what they share is the GPU:

* **time-slicing** (the CUDA driver's default between processes): one context's kernels run at a
  time, each at its single-process speed, and an idle context yields, so the device must run ``N x d``
  seconds of kernels per step of every process: ``t = max(t1, N d)``;
* **MPS** (the Multi-Process Service): kernels of all processes run at once on the shared SMs and
  memory, so the floor is the device's resources, not the kernels' single-process durations: every
  process reads its own weights and KV cache (``B`` bytes) and does its own ``F`` FLOPs per step,
  ``t = max(t1, N max(B / bandwidth, F / peak))``; an upper bound on MPS's throughput (concurrent
  kernels reaching the roofline together).

Throughput per process is ``batch / t``, per GPU ``N batch / t``; every process holds its own weights
and cache, so ``N`` copies of the job's memory must fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.errors import SpecError


@dataclass(frozen=True)
class SharingResult:
    """``N`` processes sharing one GPU: each one's decode step and the GPU's throughput."""

    mode: str
    processes: int
    alone_step_s: float
    """The decode step of one process alone on the GPU (``t1``)."""
    device_step_s: float
    """Kernel seconds of one process's step (``d``)."""
    floor_step_s: float
    """The device's resource floor of one process's step, ``max(B / bandwidth, F / peak)``."""
    step_s: float
    """Each process's decode step when all ``N`` share the GPU."""
    tokens_per_s_per_process: float
    tokens_per_s_per_gpu: float
    bound: str
    """``process`` (each process's own step sets the pace: sharing is free) or ``gpu`` (the GPU is full)."""


def shared_decode(
    mode: str,
    processes: int,
    batch: int,
    alone_step_s: float,
    device_step_s: float,
    step_bytes: float,
    step_flops: float,
    bandwidth: float,
    peak_flops: float,
) -> SharingResult:
    """The decode step of each of ``processes`` copies of a job (``batch`` sequences, ``alone_step_s`` per
    step alone, ``device_step_s`` of it kernels, ``step_bytes`` read and ``step_flops`` done per step) on
    one GPU of ``bandwidth`` bytes/s and ``peak_flops`` FLOP/s under ``mode`` (module docstring)."""
    if processes < 1 or min(alone_step_s, device_step_s, step_bytes, step_flops) < 0:
        raise SpecError(
            "GPU sharing needs at least one process and non-negative times", field="cluster.sharing"
        )
    floor = max(step_bytes / bandwidth, step_flops / peak_flops)
    per = device_step_s if mode == "time_slicing" else floor
    step = max(alone_step_s, processes * per)
    return SharingResult(
        mode=mode,
        processes=processes,
        alone_step_s=alone_step_s,
        device_step_s=device_step_s,
        floor_step_s=floor,
        step_s=step,
        tokens_per_s_per_process=batch / step,
        tokens_per_s_per_gpu=processes * batch / step,
        bound="process" if step == alone_step_s else "gpu",
    )


__all__ = ["SharingResult", "shared_decode"]
