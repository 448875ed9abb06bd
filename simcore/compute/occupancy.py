"""Occupancy of a CUDA kernel: resident blocks and warps per SM, waves over the GPU and the tail
(docs/system.md, "Occupancy").

For a block of ``T`` threads (``w = ceil(T / 32)`` warps) using ``r`` registers per thread and ``S`` bytes
of shared memory, the resident blocks per SM are the least of

* warps: ``floor(max_warps / w)``;
* blocks: the hardware's ``max_blocks_per_sm``;
* registers: a warp takes ``ceil(32 r / 256) x 256`` registers from one of the SM's 4 sub-partitions
  (``registers_per_sm / 4`` each), so ``4 floor((registers_per_sm / 4) / regs_per_warp)`` warps fit,
  ``floor`` of that over ``w`` blocks;
* shared memory: ``floor(shared_memory_per_sm / (ceil((S + 1 KB reserved) / 128) x 128))``.

Occupancy is the resident warps over ``max_warps``. A grid of ``B`` blocks runs in
``waves = ceil(B / (blocks_per_sm x sm_count))``; the last wave fills ``tail`` of the GPU, and the wave
efficiency is ``B / (waves x blocks_per_sm x sm_count)``. The limits are the compute capability's
(``hardware_specs/cuda``; sm_90: 64K registers, 2048 threads, 32 blocks, 228 KB of shared memory per SM).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from simcore.errors import SimcoreError
from simcore.specs.arguments import byte_size, show
from simcore.specs.hardware import Device
from simcore.specs.registry import default_registry
from simcore.specs.system import ComputeCapability, compute_capability

WARP = 32


@dataclass(frozen=True)
class Occupancy:
    """A kernel's residency on one SM and its waves over a device."""

    capability: str
    sm_count: int
    warps_per_block: int
    blocks_per_sm: int
    """Resident blocks per SM: the least of ``limits``."""
    warps_per_sm: int
    occupancy: float
    """Resident warps over the SM's maximum (0..1)."""
    limiter: str
    """The resource that sets ``blocks_per_sm`` (``warps``, ``blocks``, ``registers``, ``shared memory``)."""
    limits: dict[str, int]
    """Blocks per SM each resource allows."""
    blocks: int | None = None
    """The grid's blocks, when given."""
    waves: int | None = None
    tail: float | None = None
    """Share of a full wave the last wave fills (1: no tail)."""
    wave_efficiency: float | None = None
    """Blocks over the slots of all waves: the share of the GPU the grid keeps busy."""


def _count(v: object, field: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer():
        raise SimcoreError(f"expected an integer, got {type(v).__name__} {show(v)}", field=field)
    n = int(v)
    if not lo <= n <= hi:
        raise SimcoreError(f"must be {lo}..{hi} (got {n})", field=field)
    return n


def blocks_per_sm(
    cc: ComputeCapability, threads_per_block: int, registers_per_thread: int, shared_memory_per_block: float
) -> dict[str, int]:
    """Blocks per SM each resource allows (module docstring), for a capability's limits."""
    w = math.ceil(threads_per_block / WARP)
    limits = {"warps": cc.max_warps_per_sm // w, "blocks": cc.max_blocks_per_sm}
    if registers_per_thread > 0:
        unit = cc.register_allocation_unit
        per_warp = math.ceil(registers_per_thread * WARP / unit) * unit
        warps = cc.sm_subpartitions * ((cc.registers_per_sm // cc.sm_subpartitions) // per_warp)
        limits["registers"] = warps // w
    unit_s = cc.shared_memory_allocation_unit
    per_block = math.ceil((shared_memory_per_block + cc.reserved_shared_memory_per_block) / unit_s) * unit_s
    limits["shared memory"] = int(cc.shared_memory_per_sm // per_block)
    return limits


def occupancy(
    threads_per_block: int,
    registers_per_thread: int = 0,
    shared_memory_per_block: float | int | str = 0,
    blocks: int | None = None,
    device: str | Device = "h100",
) -> Occupancy:
    """Occupancy, waves and tail of a kernel of ``threads_per_block`` threads using
    ``registers_per_thread`` registers (0: not counted) and ``shared_memory_per_block`` bytes (a number or
    a string such as ``"48 KiB"``) on ``device`` (a name or a :class:`Device`, e.g. a MIG slice); with
    ``blocks`` (the grid), its waves over the device's SMs."""
    dev = device
    if isinstance(device, str):
        kind, spec = default_registry().find(device)
        if not isinstance(spec, Device):
            raise SimcoreError(f"{device!r} is a {kind}, not a device", field="device")
        dev = spec
    if not isinstance(dev, Device):
        raise SimcoreError(f"expected a device name, got {type(device).__name__}", field="device")
    cc = compute_capability(dev.architecture)
    t = _count(threads_per_block, "threads_per_block", 1, cc.max_threads_per_block)
    r = _count(registers_per_thread, "registers_per_thread", 0, cc.max_registers_per_thread)
    s = (
        0.0
        if shared_memory_per_block in (0, "0")
        else byte_size(shared_memory_per_block, "shared_memory_per_block", "shared memory per block")
    )
    if s > cc.max_shared_memory_per_block:
        raise SimcoreError(
            f"{s:,.0f} bytes exceed the {cc.max_shared_memory_per_block:,.0f} a block may take on {cc.name}",
            field="shared_memory_per_block",
        )
    limits = blocks_per_sm(cc, t, r, s)
    limiter = min(limits, key=lambda k: limits[k])
    n = limits[limiter]
    if n < 1:
        raise SimcoreError(f"one block does not fit on an SM ({limiter})", field="threads_per_block")
    w = math.ceil(t / WARP)
    out = Occupancy(
        capability=cc.name,
        sm_count=dev.sm_count,
        warps_per_block=w,
        blocks_per_sm=n,
        warps_per_sm=n * w,
        occupancy=n * w / cc.max_warps_per_sm,
        limiter=limiter,
        limits=limits,
    )
    if blocks is None:
        return out
    b = _count(blocks, "blocks", 1, 2**31 - 1)
    slots = n * dev.sm_count
    waves = math.ceil(b / slots)
    tail = (b - (waves - 1) * slots) / slots
    return dataclasses.replace(out, blocks=b, waves=waves, tail=tail, wave_efficiency=b / (waves * slots))


__all__ = ["Occupancy", "blocks_per_sm", "occupancy"]
