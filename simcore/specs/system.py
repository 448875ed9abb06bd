"""Specs of the system around the GPU: the input pipeline (``runtime.dataloader``), checkpoints
(``runtime.checkpoint``) and the storage they go to (``cluster.storage``), failures
(``reliability``), power caps (``cluster.power_cap``) and MIG slices (``cluster.mig``).

Scenario keys are pydantic models here; the data they name (storage systems, failure records, MIG
profile tables) are YAML files under ``hardware_specs/storage``, ``hardware_specs/reliability`` and
``hardware_specs/mig``, each number with its source. The models of what they cost live in
:mod:`simcore.system`; ``docs/system.md`` derives them.
"""

from __future__ import annotations

from functools import cache
from typing import Literal, TypeVar

from pydantic import ConfigDict, Field, model_validator

from simcore.errors import SpecError
from simcore.specs.docstrings import field_docstrings
from simcore.specs.loader import read_yaml, validate
from simcore.specs.quantities import Bandwidth, Bytes, Int, Seconds, Spec, Watts
from simcore.specs.registry import builtin_dir

S = TypeVar("S", bound=Spec)


class _Documented(Spec):
    """A spec whose field docstrings are its JSON Schema's descriptions (``simcore schema``)."""

    model_config = ConfigDict(json_schema_extra=field_docstrings)


class DataLoaderSpec(_Documented):
    """A PyTorch ``torch.utils.data.DataLoader`` feeding each training rank (docs/system.md, "Data
    loading"). Defaults are PyTorch's: ``num_workers=0`` (loading in the main process, serial with the
    step), ``prefetch_factor=2`` batches per worker, ``pin_memory=False``."""

    sample_time: Seconds = Field(gt=0)
    """CPU seconds one worker spends producing one sample (read, decode, tokenize or augment, its share
    of collation), measured on the run's CPU (e.g. ``"2 ms"``)."""
    num_workers: Int = Field(default=0, ge=0)
    """Worker processes per rank; 0 (PyTorch's default): the main process loads each batch itself,
    between steps, while the GPU waits."""
    batch_size: Int | None = Field(default=None, gt=0)
    """Samples per loader batch; default the training micro-batch (one batch per forward pass)."""
    prefetch_factor: Int = Field(default=2, ge=1)
    """Batches each worker loads ahead (PyTorch's default 2); with ``num_workers`` workers the queue
    holds ``num_workers x prefetch_factor`` batches. Multiprocess loading only."""
    pin_memory: bool = False
    """Batches are copied into page-locked host memory by the loader's pin thread, so the
    host-to-GPU copy runs at the pinned rate (PyTorch's default: ``False``, pageable copies)."""
    sample_bytes: Bytes | None = None
    """Bytes of one sample as copied to the GPU; default ``seq_len x 16`` (int64 token ids and
    labels, what a language-model dataset yields)."""
    numa: Literal["local", "remote"] = "local"
    """Where the workers run and the batches live relative to the GPU: its own socket (``local``,
    what ``numactl``/affinity-aware launchers give) or the other one (``remote``)."""
    numa_remote_slowdown: float | None = Field(default=None, ge=1.0)
    """With ``numa: remote``: the measured ratio of per-sample CPU time (and host-to-GPU copy time)
    on the remote socket to the local one (``numactl --membind`` to the other node). Required there:
    simcore has no measured default."""

    @model_validator(mode="after")
    def _checks(self) -> DataLoaderSpec:
        if self.numa == "remote" and self.numa_remote_slowdown is None:
            raise ValueError("numa: remote needs numa_remote_slowdown (measured remote/local time ratio)")
        if self.num_workers == 0 and "prefetch_factor" in self.model_fields_set:
            raise ValueError(
                "prefetch_factor needs num_workers > 0 (PyTorch refuses it for loading in the main process)"
            )
        return self


class StorageSpec(_Documented):
    """A storage system checkpoints are written to and read from (a shared file system or object
    store, or node-local drives)."""

    name: str = "custom"
    display_name: str = ""
    write_bandwidth: Bandwidth
    """Bytes/s the whole file system sustains for writes (aggregate over all clients)."""
    read_bandwidth: Bandwidth
    """Bytes/s the whole file system sustains for reads (aggregate)."""
    node_bandwidth: Bandwidth
    """Bytes/s one node (client) can move to or from storage (its storage NICs, or its local drives)."""
    gds: bool = False
    """GPUDirect Storage available: GPU memory is read and written by DMA to the storage path without
    a bounce buffer in host memory."""
    sources: dict[str, str] = {}
    notes: list[str] = []


class CheckpointSpec(_Documented):
    """How a training run saves its state (docs/system.md, "Checkpoints")."""

    mode: Literal["sync", "async", "distributed"] = "sync"
    """``sync``: ``torch.save`` of the model and optimizer state from the data-parallel rank-0
    replica, the step waits for the copy to host memory and the write. ``distributed``: every rank
    writes its own shard (PyTorch DCP ``save``, Megatron's distributed checkpoint), the step waits.
    ``async``: sharded as ``distributed``, the step waits only for the copy of its shard to pinned host
    memory; the write runs in the background (DCP ``async_save``, Megatron ``--async-save``)."""
    interval: Seconds | None = Field(default=None, gt=0)
    """Wall seconds between checkpoints; ``None``: the Young/Daly optimum when a ``reliability``
    section is given (otherwise the checkpoint is priced once, with no interval)."""
    gds: bool = False
    """Use GPUDirect Storage (the storage system must support it): no device-to-host copy. Not with
    ``async``, whose point is the copy to host memory."""

    @model_validator(mode="after")
    def _gds(self) -> CheckpointSpec:
        if self.gds and self.mode == "async":
            raise ValueError(
                "gds: true needs mode sync or distributed (async saving stages through host memory)"
            )
        return self


class ReliabilitySpec(_Documented):
    """Failure rates and restart cost of the cluster (docs/system.md, "Failures and goodput").
    Rates add: ``gpus / mtbf + nodes / node_mtbf + failures_per_day / 86400`` per second; with none
    given, the per-GPU rate of ``failure_record``."""

    mtbf: Seconds | None = Field(default=None, gt=0)
    """Mean time between job-interrupting failures of one GPU (its own faults and its share of the
    node's and network's), seconds (YAML may say ``"50000 h"``)."""
    node_mtbf: Seconds | None = Field(default=None, gt=0)
    """Mean time between job-interrupting failures of one node (system), on top of ``mtbf``."""
    failures_per_day: float | None = Field(default=None, gt=0)
    """Job-interrupting failures per day of the whole job, on top of the per-GPU and per-node rates."""
    failure_record: str = "llama3-16k-h100"
    """Published failure record (``hardware_specs/reliability``) whose per-GPU rate is used when no
    rate is given: Llama 3's 419 unexpected interruptions in 54 days on 16,384 H100s."""
    restart_time: Seconds | None = None
    """Seconds from a failure to training again, besides reading the checkpoint: detection, job
    rescheduling, process start, NCCL initialisation. ``None``: not counted (the prediction says so)."""


class FailureRecord(_Documented):
    """A published count of job interruptions (``hardware_specs/reliability/*.yaml``)."""

    name: str
    display_name: str
    interruptions: float = Field(gt=0)
    period: Seconds = Field(gt=0)
    gpus: Int = Field(gt=0)
    sources: dict[str, str]
    notes: list[str] = []

    @property
    def gpu_mtbf(self) -> float:
        """Seconds between interruptions per GPU: ``period x gpus / interruptions``."""
        return self.period * self.gpus / self.interruptions


class MigProfile(_Documented):
    """One MIG GPU-instance profile: fractions of the GPU from NVIDIA's MIG user guide."""

    name: str
    """``<compute slices>g.<memory>gb``, e.g. ``1g.10gb``."""
    memory_fraction: float = Field(gt=0, le=1)
    """Share of the memory slices (of 8): memory capacity, bandwidth (memory controllers) and L2."""
    sm_fraction: float = Field(gt=0, le=1)
    """Share of the compute slices (of 7)."""
    instances: Int = Field(gt=0)
    """How many of this profile one GPU holds at most."""


class MigTable(_Documented):
    """The MIG profiles of one device (``hardware_specs/mig/*.yaml``)."""

    device: str
    profiles: list[MigProfile]
    sources: dict[str, str]
    notes: list[str] = []

    def find(self, name: str) -> MigProfile:
        key = name.strip().lower().removeprefix("mig").strip(" -")
        for p in self.profiles:
            if p.name == key:
                return p
        raise SpecError(
            f"unknown MIG profile {name!r} for {self.device}; known: {', '.join(p.name for p in self.profiles)}",
            field="cluster.mig",
        )


class SharingSpec(_Documented):
    """Several processes running the scenario's inference job on one GPU (docs/system.md, "MPS and
    time-slicing")."""

    mode: Literal["time_slicing", "mps"]
    """``time_slicing``: the driver's default between processes, one context's kernels at a time;
    ``mps``: the Multi-Process Service, kernels of all processes at once on shared SMs."""
    processes: Int = Field(ge=2)
    """Processes sharing the GPU, each with its own copy of the model and KV cache."""


class CoolingTable(_Documented):
    """The sustained board power limit of one device under each cooling it is sold with
    (``hardware_specs/cooling/*.yaml``; docs/system.md, "Cooling")."""

    device: str
    air: Watts | None = None
    """Board power limit (W) the GPU sustains air-cooled; ``None``: not sold air-cooled."""
    liquid: Watts | None = None
    """Board power limit (W) the GPU sustains liquid-cooled; ``None``: not sold liquid-cooled."""
    sources: dict[str, str]
    notes: list[str] = []

    def limit(self, cooling: Literal["air", "liquid"]) -> float:
        """The board power limit (W) under ``cooling``; an error when the device is not sold so."""
        w = self.air if cooling == "air" else self.liquid
        if w is None:
            raise SpecError(
                f"{self.device} is not sold {cooling}-cooled (hardware_specs/cooling)",
                field="cluster.cooling",
            )
        return float(w)


class ComputeCapability(_Documented):
    """Per-SM resource limits of one CUDA compute capability (``hardware_specs/cuda``)."""

    name: str
    architectures: list[str]
    """Architecture names (the first words of a device spec's ``architecture``) of this capability."""
    max_threads_per_block: Int = Field(gt=0)
    max_threads_per_sm: Int = Field(gt=0)
    max_warps_per_sm: Int = Field(gt=0)
    max_blocks_per_sm: Int = Field(gt=0)
    registers_per_sm: Int = Field(gt=0)
    max_registers_per_thread: Int = Field(gt=0)
    register_allocation_unit: Int = Field(gt=0)
    """Registers are given to a warp in multiples of this many."""
    sm_subpartitions: Int = Field(gt=0)
    """Processing blocks per SM, each with its share of the register file; a warp lives in one."""
    shared_memory_per_sm: Bytes
    max_shared_memory_per_block: Bytes
    shared_memory_allocation_unit: Bytes
    reserved_shared_memory_per_block: Bytes
    """Shared memory the system keeps per resident block."""


class ComputeCapabilities(_Documented):
    capabilities: list[ComputeCapability]
    sources: dict[str, str]


@cache
def compute_capability(architecture: str) -> ComputeCapability:
    """The CUDA limits of a device whose spec's ``architecture`` is ``architecture`` (e.g. ``Hopper
    (GH100)``): the capability listing its longest matching architecture name."""
    path = builtin_dir() / "cuda" / "compute_capabilities.yaml"
    table = validate(ComputeCapabilities, read_yaml(path), str(path))
    best: tuple[int, ComputeCapability] | None = None
    for cc in table.capabilities:
        for a in cc.architectures:
            if architecture.startswith(a) and (best is None or len(a) > best[0]):
                best = (len(a), cc)
    if best is None:
        raise SpecError(f"no CUDA compute capability known for architecture {architecture!r}", field="device")
    return best[1]


def _data(kind: str, name: str, model: type[S], field: str | None = None) -> S:
    """The built-in ``hardware_specs/KIND/NAME.yaml``; an unknown name is an error naming ``field`` (the
    scenario key that named it)."""
    folder = builtin_dir() / kind
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise SpecError(f"no built-in {kind} spec {name!r}; known: {', '.join(known)}", field=field)
    return validate(model, read_yaml(path), str(path))


@cache
def storage_spec(name: str) -> StorageSpec:
    """The built-in storage system ``name`` (``hardware_specs/storage/NAME.yaml``)."""
    return _data("storage", name, StorageSpec, "cluster.storage")


@cache
def failure_record(name: str) -> FailureRecord:
    """The published failure record ``name`` (``hardware_specs/reliability/NAME.yaml``)."""
    return _data("reliability", name, FailureRecord, "reliability.failure_record")


@cache
def mig_table(device: str) -> MigTable:
    """The MIG profiles of ``device`` (``hardware_specs/mig/DEVICE.yaml``)."""
    try:
        return _data("mig", device, MigTable)
    except SpecError as e:
        raise SpecError(f"no MIG profiles for {device}: {e.problem}", field="cluster.mig") from None


@cache
def cooling_table(device: str) -> CoolingTable:
    """The board power limits of ``device`` by cooling (``hardware_specs/cooling/DEVICE.yaml``)."""
    try:
        return _data("cooling", device, CoolingTable)
    except SpecError as e:
        raise SpecError(f"no cooling limits for {device}: {e.problem}", field="cluster.cooling") from None


__all__ = [
    "CheckpointSpec",
    "CoolingTable",
    "ComputeCapability",
    "DataLoaderSpec",
    "FailureRecord",
    "MigProfile",
    "MigTable",
    "ReliabilitySpec",
    "SharingSpec",
    "StorageSpec",
    "compute_capability",
    "cooling_table",
    "failure_record",
    "mig_table",
    "storage_spec",
]
