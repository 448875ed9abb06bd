"""In-memory form of a measured trace: GPU activities, the CPU ops that launched them, runtime
calls and annotations. Times are seconds from the start of the trace (``Trace.t0_ns`` gives that
start as epoch nanoseconds when the trace says it), durations seconds, sizes bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class GpuEvent:
    """One kernel, memcpy or memset on a device stream."""

    name: str
    cat: str
    """``kernel``, ``gpu_memcpy`` or ``gpu_memset``."""
    ts: float
    dur: float
    device: int
    stream: int
    correlation: int = -1
    ext_id: int = -1
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments simcore uses: grid, block, bytes, and the collective metadata keys."""


@dataclass(slots=True)
class CpuOp:
    """A ``cpu_op`` (an aten operator or a module-level op) with its recorded shapes."""

    name: str
    ts: float
    dur: float
    ext_id: int
    tid: int
    input_dims: list[Any] | None = None
    input_types: list[Any] | None = None
    concrete: list[Any] | None = None
    input_strides: list[Any] | None = None
    """Element strides of each input (``Input Strides``, PyTorch >= 2.2 with ``record_shapes``)."""


@dataclass(slots=True)
class RuntimeCall:
    """A CUDA runtime or driver call on the host (launch, sync, memcpy)."""

    name: str
    ts: float
    dur: float
    correlation: int
    tid: int
    ext_id: int = -1


@dataclass(slots=True)
class Annotation:
    """A named range: ``ProfilerStep#N``, ``Optimizer.step#...``, NVTX ranges, ``nccl:all_reduce``."""

    name: str
    ts: float
    dur: float
    gpu: bool = False
    tid: int = 0


@dataclass
class Trace:
    """One rank's trace."""

    path: str
    format: str
    """``kineto`` or ``nsys``."""
    gpu_events: list[GpuEvent] = field(default_factory=list)
    cpu_ops: dict[int, CpuOp] = field(default_factory=dict)
    """By External id (the innermost op of that id)."""
    runtime: dict[int, RuntimeCall] = field(default_factory=dict)
    """Launch-type calls by correlation id."""
    host_calls: list[RuntimeCall] = field(default_factory=list)
    """Every runtime call in time order (launches, syncs, copies), for host-gap replay."""
    annotations: list[Annotation] = field(default_factory=list)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    t0_ns: float | None = None
    """Epoch nanoseconds of time 0 (None when the trace's clock is not an epoch clock)."""
    relative_timestamps: bool = False
    """True when the file's ``ts`` were relative to ``baseTimeNanoseconds`` (new layout)."""
    bytes_read: int = 0
    events_seen: int = 0
    python_events: int = 0
    """``python_function`` ranges: the profiler recorded Python stacks (``with_stack=True``)."""
    memory_events: int = 0
    """``[memory]`` allocation events: the profiler recorded memory (``profile_memory=True``)."""

    @property
    def rank(self) -> int:
        """Rank from ``distributedInfo`` (0 when absent)."""
        r = self.distributed.get("rank", 0)
        return int(r) if isinstance(r, int | float | str) and str(r).lstrip("-").isdigit() else 0

    @property
    def world_size(self) -> int:
        """World size from ``distributedInfo`` (1 when absent)."""
        w = self.distributed.get("world_size", 1)
        try:
            return max(int(w), 1)
        except (TypeError, ValueError):
            return 1

    @property
    def device_name(self) -> str | None:
        """The GPU name from ``deviceProperties`` (the first device that ran work, else the first)."""
        if not self.device_properties:
            return None
        used = {e.device for e in self.gpu_events[:1000]}
        for d in self.device_properties:
            if d.get("id") in used and d.get("name"):
                return str(d["name"])
        n = self.device_properties[0].get("name")
        return str(n) if n else None

    def kernels(self) -> list[GpuEvent]:
        """GPU events sorted by start time."""
        return sorted(self.gpu_events, key=lambda e: e.ts)
