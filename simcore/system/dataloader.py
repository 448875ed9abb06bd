"""The input pipeline: how long a training rank's GPU waits for its data each step.

A PyTorch ``DataLoader`` with ``W`` worker processes is a set of ``W`` parallel servers, each building a
whole batch in ``c = batch_size x sample_time`` CPU seconds (times the NUMA slowdown when the workers sit
on the other socket), so batches arrive at most every ``c / W`` seconds. The GPU consumes one batch per
``t`` seconds of its own work (the step's time over the batches it takes) and, before each batch, waits for
its host-to-GPU copy ``x`` (``simcore.transfer_time``, pinned with ``pin_memory``, else pageable), which
sits in the step's stream. In steady state the bounded queue (``W x prefetch_factor`` batches) is empty
whenever the producers are the slower side, so each batch costs the GPU ``max(c / W - t, x)`` seconds of
waiting; with ``W = 0`` the main process loads each batch itself between steps, serially: ``c + x``.
The fewest workers that leave only the copy are ``ceil(c / (t + x))``. ``docs/system.md`` ("Data loading")
derives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.errors import SpecError


@dataclass(frozen=True)
class LoaderResult:
    """The input pipeline's cost per training step on one rank (seconds unless named)."""

    wait_per_step_s: float
    """Seconds the GPU waits for data (loading and the batch copies) per optimizer step."""
    wait_per_batch_s: float
    batches_per_step: int
    batch_cpu_s: float
    """CPU seconds one worker spends building one batch (``c``)."""
    gpu_per_batch_s: float
    """GPU seconds of work per batch (``t``)."""
    copy_s: float
    """Host-to-GPU copy of one batch (``x``)."""
    num_workers: int
    workers_needed: int
    """The fewest workers with which loading no longer stalls the GPU (only the copy is left):
    ``ceil(c / (t + x))``."""
    queue_batches: int
    """Batches the loader holds ahead (``num_workers x prefetch_factor``; 0 in the main process)."""
    first_batch_s: float
    """The one-off wait for the first batch of an epoch (workers start empty)."""
    bound: str
    """What sets the wait: ``main process`` (serial loading), ``workers`` (too few) or ``copy``."""


def loader_wait(
    batch_cpu_s: float,
    gpu_per_batch_s: float,
    copy_s: float,
    num_workers: int,
    batches_per_step: int,
    prefetch_factor: int = 2,
) -> LoaderResult:
    """The GPU's wait for data of a ``DataLoader`` with ``num_workers`` workers (0: the main process)
    building each batch in ``batch_cpu_s`` CPU seconds, for a GPU doing ``gpu_per_batch_s`` seconds of
    work per batch and copying each batch in ``copy_s``; ``batches_per_step`` batches per step.

    Per batch: ``c + x`` with no workers, else ``max(c / W - t, x)`` (module docstring)."""
    c, t, x = float(batch_cpu_s), float(gpu_per_batch_s), float(copy_s)
    if min(c, t, x) < 0 or num_workers < 0 or batches_per_step < 1:
        raise SpecError("data loader times and counts must be non-negative", field="runtime.dataloader")
    if num_workers == 0:
        per, bound = c + x, "main process"
    else:
        starve = c / num_workers - t
        per, bound = (starve, "workers") if starve > x else (x, "copy")
    needed = max(1, math.ceil(c / (t + x))) if t + x > 0 else 1
    return LoaderResult(
        wait_per_step_s=per * batches_per_step,
        wait_per_batch_s=per,
        batches_per_step=batches_per_step,
        batch_cpu_s=c,
        gpu_per_batch_s=t,
        copy_s=x,
        num_workers=num_workers,
        workers_needed=needed,
        queue_batches=num_workers * prefetch_factor,
        first_batch_s=c + x,
        bound=bound,
    )


__all__ = ["LoaderResult", "loader_wait"]
