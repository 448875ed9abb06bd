"""Offload to host memory: activations over the host link during forward and backward, and the optimizer
step on the CPU (docs/parallelism.md, Offload).

Pure functions over scalars or numpy arrays (one element per layout):

* :func:`layered_copy_exposed`: the seconds a layer-by-layer offload (or reload) stream adds to a pass
  of ``L`` layers when it moves ``n`` layers' activations, each copy taking ``t`` seconds and each layer
  ``c`` seconds of compute, as Transformer Engine's ``OffloadSynchronizer`` schedules them (a replay of
  its ``L`` steps over the layouts' arrays);
* :func:`optimizer_offload_time`: the seconds of Megatron-Core's ``HybridDeviceOptimizer`` step
  (gradients to the host, the CPU's update, weights back) beside the GPU's update of the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcore.comm.host import pinned_copy_time
from simcore.errors import SpecError
from simcore.specs.hardware import System

Num = Any

CPU_UPDATE_BYTES = {"adamw": 28.0, "sgd": 20.0}
"""Bytes of host memory one parameter's CPU update streams: AdamW reads the fp32 weight, gradient and
two moments and writes the weight and moments back (7 x 4 B); SGD with momentum reads three and writes
two (5 x 4 B). ``torch.optim``'s CPU ``AdamW(fused=True)`` (Megatron-Core's ``CPUAdam``) and DeepSpeed's
``DeepSpeedCPUAdam`` are vectorized loops whose rate this traffic bounds."""


def layered_copy_exposed(n: int, layers: int, per_layer_s: Num, copy_s: Num) -> Num:
    """Seconds an offload (or reload) stream adds to one forward (or backward) pass of ``layers``
    layers of ``per_layer_s`` seconds each when it copies the first ``n`` layers' activations, each copy
    ``copy_s`` seconds, one after another on one stream (numpy-broadcasting over the seconds; 0 where
    ``n`` is 0).

    Transformer Engine's default schedule (``OffloadSynchronizer._default_offload_sync_init``,
    transformer_engine/pytorch/cpu_offload.py): layer ``i < n`` is offloaded once its forward ends and the
    stream is free, and must be on the host before the forward of layer ``L - n + i`` starts, so the GPU
    holds ``L - n`` layers' activations at the end of the forward. The backward mirrors it: the reload
    of layer ``i`` starts when the backward reaches layer ``L - 1 - n + i`` and must be back before
    layer ``i``'s backward, the same chain in reverse order. The pass is replayed layer by layer (a
    layer waits for the copy due before it; a copy waits for its layer and the copy before it), and the
    result is its end minus ``layers x per_layer_s``. With ``c = per_layer_s``, ``t = copy_s``: nothing
    shows while ``t <= (L - 1 - n) c`` and ``n t <= (L - 2) c`` (each copy, and the queue of them, hides
    behind the layers between its layer and its deadline)."""
    c = np.asarray(per_layer_s, dtype=float)
    t = np.asarray(copy_s, dtype=float)
    shape = np.broadcast_shapes(c.shape, t.shape)
    now = np.zeros(shape)
    stream = np.zeros(shape)
    done: list[Any] = []
    for j in range(int(layers)):
        i = j - (layers - n)
        if 0 <= i < n:
            now = np.maximum(now, done[i])  # the copy due before this layer
        now = now + c
        if j < n:
            stream = np.maximum(stream, now) + t
            done.append(stream)
    return now - layers * c


def host_bandwidth_per_gpu(system: System) -> float:
    """Bytes/s of CPU memory per GPU when every GPU of ``system`` updates its share at once: the system's
    STREAM triad bandwidth (``host_memory_stream``, measured) over its GPUs, or, where none is cited, its
    peak ``host_memory_bandwidth`` (an upper bound); a system with neither is an error naming the field."""
    bw = system.host_memory_stream or system.host_memory_bandwidth
    if bw is None:
        raise SpecError(
            f"system {system.name} gives no host_memory_bandwidth, so its CPU optimizer step cannot be priced",
            field="training.optimizer_offload_fraction",
        )
    return bw / system.gpus


def host_memory_copy_time(system: System, nbytes: Num) -> Num:
    """Seconds the host memory needs to take (or give) ``nbytes`` from each GPU of ``system`` when every GPU
    copies at once: ``nbytes / (host memory bandwidth / gpus)``, the STREAM triad rate where measured
    (``host_memory_stream``), else the peak (``host_memory_bandwidth``); 0 where the system gives neither
    (the host link alone then bounds the copy). On an NVL72 rack each Grace serves two GPUs: 315 GB/s of
    STREAM over two is 158 GB/s per GPU, below NVLink-C2C's 450 GB/s a direction (docs/parallelism.md,
    Offload)."""
    bw = system.host_memory_stream or system.host_memory_bandwidth
    return np.asarray(nbytes, dtype=float) / (bw / system.gpus) if bw else 0.0


def optimizer_offload_time(
    system: System,
    params: Num,
    fraction: float,
    optimizer: str,
    grad_bytes: float,
    weight_bytes: float,
    overlap: bool,
) -> tuple[Num, Num, Num, Num]:
    """``(seconds, gradient copy, CPU update, weight copy)`` of the offloaded share of one rank's optimizer
    step over ``params`` parameters (its optimizer shard), ``fraction`` of them kept on the host.

    Megatron-Core's ``HybridDeviceOptimizer.step`` (megatron/core/optimizer/cpu_offloading/
    hybrid_optimizer.py): the share's gradients are copied to pinned host buffers (``grad_bytes`` each),
    the CPU optimizer updates the fp32 copies at the CPU memory's bandwidth per GPU
    (:data:`CPU_UPDATE_BYTES` at :func:`host_bandwidth_per_gpu`: STREAM triad where cited, else the peak,
    a lower bound on the CPU's time), and the updated weights are
    copied back (``weight_bytes`` each, the fp32 copy). Without ``overlap`` the three follow one another;
    with it (``overlap_cpu_optimizer_d2h_h2d``: one CPU optimizer per parameter, the copies on their own
    streams) they pipeline over the parameters and the slowest sets the time. The GPU's update of the
    rest runs meanwhile (the caller takes the larger)."""
    off = np.asarray(params, dtype=float) * fraction
    d2h = np.where(off > 0, pinned_copy_time(system, off * grad_bytes, "d2h"), 0.0)
    h2d = np.where(off > 0, pinned_copy_time(system, off * weight_bytes, "h2d"), 0.0)
    cpu = off * CPU_UPDATE_BYTES[optimizer] / host_bandwidth_per_gpu(system)
    total = np.maximum(np.maximum(d2h, cpu), h2d) if overlap else d2h + cpu + h2d
    return total, d2h, cpu, h2d


__all__ = ["CPU_UPDATE_BYTES", "host_bandwidth_per_gpu", "layered_copy_exposed", "optimizer_offload_time"]
