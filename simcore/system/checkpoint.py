"""Checkpoints: their size, the time to write and read them through a storage system, and the stall each
way of saving leaves in training (docs/system.md, "Checkpoints").

* Size ``S = parameters x (weight bytes + optimizer bytes)`` from :func:`simcore.memory.state_bytes`
  (gradients are not saved; fp8 runs save their bf16 weights, not the fp8 copies): Megatron-style bf16
  with AdamW is ``2 + 12 = 14`` bytes per parameter.
* Writers: ``sync`` (``torch.save`` from the data-parallel rank-0 replica) writes ``S`` from the
  ``gpus / dp`` GPUs of one model replica, on ``ceil((gpus / dp) / gpus_per_node)`` nodes; ``distributed``
  and ``async`` spread ``S`` over every GPU (``S / gpus`` each) and every node.
* Write time: each writing node moves ``S / nodes_writing`` at ``min(node_bandwidth, write_bandwidth /
  nodes_writing)`` (its own storage path, or its share of the file system's aggregate).
* Copy to host: each writer GPU first copies its bytes to host memory (``simcore.transfer_time``,
  pageable for ``torch.save`` and DCP ``save``, pinned for the asynchronous staging buffers); GPUDirect
  Storage skips it (DMA from GPU memory to the storage path).
* Stall: ``sync`` and ``distributed`` wait for copy and write; ``async`` only for the copy, the write
  finishing ``write`` seconds later in the background (the checkpoint's lag to durability).
* Restore: every GPU reads back its own state (the weights and optimizer state of the memory model, so
  data-parallel replicas read the weights each), ``gpus x state`` over all nodes at the aggregate read
  bandwidth or the nodes' own, then copies it to the GPU (no copy with GPUDirect Storage).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.comm.host import transfer_time
from simcore.errors import SpecError
from simcore.memory import state_bytes
from simcore.specs.scenario import ModelSpec, TrainingSpec
from simcore.specs.system import CheckpointSpec, StorageSpec
from simcore.workload.lowering import hp_dtype
from simcore.workload.model import param_counts
from simcore.workload.precision import recipe


@dataclass(frozen=True)
class CheckpointResult:
    """One checkpoint's size, times and stall (seconds, bytes)."""

    mode: str
    storage: str
    gds: bool
    size_bytes: float
    """The whole checkpoint: model weights and optimizer state."""
    bytes_per_writer_gpu: float
    writer_gpus: int
    nodes_writing: int
    copy_s: float
    """Device-to-host copy of a writer GPU's bytes (0 with GPUDirect Storage)."""
    write_s: float
    """Writing the checkpoint to storage."""
    stall_s: float
    """Seconds training stops for one checkpoint."""
    lag_s: float
    """Seconds after the stall before the checkpoint is on storage (the background write of ``async``)."""
    restore_s: float
    """Reading a checkpoint back on every GPU after a failure (storage read and host-to-GPU copy)."""


def checkpoint_bytes(model: ModelSpec, training: TrainingSpec, param_dtype: str) -> float:
    """Bytes of a full checkpoint: parameters x (weight + optimizer bytes per parameter) of
    :func:`simcore.memory.state_bytes`; quantized recipes (fp8*, mxfp8, nvfp4) save the bf16 weights their
    low-precision copies are cast from."""
    precision = hp_dtype(recipe(training.precision).gemm_dtype)
    sb = state_bytes(precision, training.optimizer, training.master_weights, param_dtype)
    return float(param_counts(model).total) * (sb.weights + sb.optimizer)


def storage_time(nbytes: float, nodes: int, node_bandwidth: float, aggregate_bandwidth: float) -> float:
    """Seconds for ``nodes`` nodes to move ``nbytes`` in total to or from storage, each at
    ``min(node_bandwidth, aggregate_bandwidth / nodes)`` bytes/s."""
    if nodes < 1:
        raise SpecError("at least one node must write the checkpoint", field="runtime.checkpoint")
    return nbytes / nodes / min(node_bandwidth, aggregate_bandwidth / nodes)


def checkpoint_cost(
    spec: CheckpointSpec,
    storage: StorageSpec,
    size_bytes: float,
    state_per_gpu_bytes: float,
    gpus: int,
    dp: int,
    gpus_per_node: int,
    system: str,
) -> CheckpointResult:
    """The cost of one checkpoint of ``size_bytes`` saved by ``spec.mode`` to ``storage`` from a job of
    ``gpus`` GPUs (``dp`` data-parallel replicas, ``gpus_per_node`` per node) on ``system``;
    ``state_per_gpu_bytes``: the weights and optimizer state one GPU holds (read back on restore)."""
    if spec.gds and not storage.gds:
        raise SpecError(
            f"gds: true but storage {storage.name!r} has no GPUDirect Storage path",
            field="runtime.checkpoint.gds",
        )
    nodes = math.ceil(gpus / gpus_per_node)
    writers = gpus // dp if spec.mode == "sync" else gpus
    writing_nodes = math.ceil(writers / gpus_per_node)
    per_gpu = size_bytes / writers
    pinned = spec.mode == "async"
    gds = spec.gds
    copy = 0.0 if gds else transfer_time(per_gpu, src="gpu", dst="host", pinned=pinned, system=system).time_s
    write = storage_time(size_bytes, writing_nodes, storage.node_bandwidth, storage.write_bandwidth)
    stall, lag = (copy, write) if spec.mode == "async" else (copy + write, 0.0)
    read = storage_time(state_per_gpu_bytes * gpus, nodes, storage.node_bandwidth, storage.read_bandwidth)
    load = (
        0.0
        if gds
        else transfer_time(state_per_gpu_bytes, src="host", dst="gpu", pinned=False, system=system).time_s
    )
    return CheckpointResult(
        mode=spec.mode,
        storage=storage.name,
        gds=gds,
        size_bytes=size_bytes,
        bytes_per_writer_gpu=per_gpu,
        writer_gpus=writers,
        nodes_writing=writing_nodes,
        copy_s=copy,
        write_s=write,
        stall_s=stall,
        lag_s=lag,
        restore_s=read + load,
    )


__all__ = ["CheckpointResult", "checkpoint_bytes", "checkpoint_cost", "storage_time"]
