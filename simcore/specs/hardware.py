"""Hardware specs: devices (GPUs), links and switches, systems (a node or a rack).

Every number is an SI float after loading; YAML files under ``hardware_specs/`` give values with
units and name a source for each. Peak rates are *dense* (vendor sheets often quote 2:4 sparse).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from simcore.specs.quantities import Bandwidth, Bytes, FlopRate, Hertz, Int, PosBytes, Seconds, Spec, Watts

DType = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8"]
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    # NVFP4: 4-bit E2M1 values plus one E4M3 scale per 16-element block (NVIDIA, "Introducing NVFP4
    # for Efficient and Accurate Low-Precision Inference", 2025; Blackwell's block-scaled MMA), 0.5 + 1/16
    "fp4": 0.5 + 1.0 / 16.0,
    "int8": 1.0,
}
"""Bytes an element of each dtype occupies in memory (block scales included)."""


class MemorySpec(Spec):
    """Device memory (HBM)."""

    type: str
    capacity: PosBytes
    """Bytes of device memory."""
    bandwidth: Bandwidth
    """Peak bytes/s (datasheet)."""


class NVLinkPort(Spec):
    """A GPU's NVLink (or Infinity Fabric) attachment."""

    generation: Int = Field(ge=1)
    links: Int = Field(ge=1)
    bandwidth: Bandwidth
    """Bytes/s per GPU per direction, all links together."""


class SustainedGemm(Spec):
    """What a stream of dense tensor-core GEMMs sustains at the board's power limit, measured against its
    burst rate (docs/compute.md, "SM clock and the power cap")."""

    board_power: Watts
    """The board power limit the measurement ran at (W)."""
    fraction: dict[Literal["bf16", "fp16", "fp8", "fp4"], Annotated[float, Field(gt=0, le=1)]]
    """Per GEMM dtype, the sustained rate of a GEMM stream held at ``board_power`` (thousands of warm-up
    iterations) over its burst rate (the first few milliseconds), both on the same device (dimensionless,
    in (0, 1]). A dtype not listed is not limited beyond the transferred profile."""


class Device(Spec):
    """One accelerator."""

    name: str
    aliases: list[str] = []
    display_name: str
    vendor: Literal["nvidia", "amd", "intel", "other"]
    architecture: str
    sm_count: Int = Field(gt=0)
    boost_clock: Hertz
    peak: dict[DType, FlopRate]
    """Dense peak FLOP/s per dtype (tensor cores where they exist; fp32 is the non-tensor rate)."""
    block_scaling: list[Literal["mxfp8", "mxfp6", "mxfp4", "nvfp4"]] = []
    """Block-scaled formats the tensor cores run natively (per-block scales applied inside the MMA:
    Blackwell's MXFP8/MXFP6/MXFP4 and NVFP4), at the rate of ``peak`` for the element type (``fp8``,
    ``fp4``). Training recipes that need one (``mxfp8``, ``nvfp4``) are refused on a device without it."""
    block_gemm_rate: dict[Literal["mxfp8", "mxfp6", "mxfp4", "nvfp4"], Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=dict
    )
    """Per block-scaled format, the rate its GEMMs reach as a fraction of the per-tensor-scaled GEMMs of
    the same element type, as the vendor's library runs them (the scale factors swizzled into the
    tensor cores' layout and staged beside the operands); a format not listed: 1 (dimensionless, in
    (0, 1]). Published kernel benchmarks, cited in the device file (docs/parallelism.md, "Precision
    recipes")."""
    exp_per_clock_per_sm: float | None = Field(default=None, gt=0)
    """Exponentials (``MUFU.EX2`` results) per SM per clock of the special-function units: the rate of
    attention's softmax, which runs beside the tensor cores, not on them. ``None``: unknown (attention's
    score work is then transferred at the tensor-core rate). See docs/parallelism.md, "Attention's softmax
    across generations"."""
    memory: MemorySpec
    l2_cache: Bytes
    smem_per_sm: Bytes | None = None
    tdp: Watts
    idle_power: Watts | None = None
    sustained_gemm: SustainedGemm | None = None
    """Measured sustained-vs-burst rate of GEMM streams on this device's silicon, for a device whose
    compute profile is transferred from one that sustains its burst rate (Hopper): the power model
    (:func:`simcore.compute.ops.gemm_sustained_fraction`) derives this device's own fraction at its TDP
    through the power law ``P = P_idle + (P_burst - P_idle) (f / f_burst)^3`` and makes the GEMM family
    draw accordingly, so that compute-bound GEMM time stretches to the sustained rate and memory-bound work
    does not. ``None``: the transferred profile's power fractions (docs/compute.md, "SM clock and the power
    cap")."""
    nvlink: NVLinkPort | None = None
    pcie_generation: Int = Field(ge=3)
    pcie_bandwidth: Bandwidth
    """Bytes/s per direction of the host link (x16)."""
    calibration: str | None = None
    """Name of the calibration profile this device uses; ``None`` means the nearest calibrated
    device's curves are transferred (and predictions say so)."""
    sources: dict[str, str]
    notes: list[str] = []

    def exp_rate(self) -> float | None:
        """Exponentials per second of the whole device at the boost clock (``None`` if unknown)."""
        if self.exp_per_clock_per_sm is None:
            return None
        return self.exp_per_clock_per_sm * self.sm_count * self.boost_clock

    @model_validator(mode="after")
    def _needs_bf16(self) -> Device:
        if "bf16" not in self.peak and "fp16" not in self.peak:
            raise ValueError("peak must give at least bf16 or fp16")
        return self

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; falls back to the nearest wider type the device has."""
        order = {
            "fp4": ["fp4", "fp8", "bf16"],
            "fp8": ["fp8", "bf16"],
            "int8": ["int8", "fp8", "bf16"],
            "bf16": ["bf16", "fp16"],
            "fp16": ["fp16", "bf16"],
            "tf32": ["tf32", "fp32"],
            "fp32": ["fp32"],
            "fp64": ["fp64", "fp32"],
        }[dtype]
        for d in order:
            if d in self.peak:
                return self.peak[d]  # type: ignore[index,unused-ignore]
        raise KeyError(dtype)


LinkKind = Literal["nvlink", "nvswitch", "c2c", "pcie", "infiniband", "ethernet"]


class Link(Spec):
    """A link, port or switch generation (NVLink, NVSwitch, PCIe, InfiniBand, Ethernet)."""

    name: str
    aliases: list[str] = []
    display_name: str
    kind: LinkKind
    generation: str
    bandwidth: Bandwidth
    """Bytes/s per direction of one port (NIC, switch port) or of one GPU's attachment (NVLink)."""
    latency: Seconds
    """Seconds added per traversal (a switch hop or a NIC-to-NIC link)."""
    radix: Int | None = Field(default=None, gt=0)
    """Ports per switch, for switches."""
    in_network_reduction: bool = False
    """NVLink SHARP (NVLS) on NVSwitch, SHARP on InfiniBand switches."""
    sources: dict[str, str]
    notes: list[str] = []


class FabricSpec(Spec):
    """The scale-out network joining systems."""

    link: str = "ib-ndr"
    """Name of the NIC/switch generation (a link spec of kind infiniband or ethernet)."""
    topology: Literal["rail_optimized", "fat_tree"] = "rail_optimized"
    tiers: Literal[2, 3] = 2
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Leaf downlink:uplink ratio (1 = non-blocking)."""
    nics_per_node: Int | None = Field(default=None, gt=0)
    """Compute NICs (rails) per system; default from the system spec."""
    nic_bandwidth: Bandwidth | None = None
    """Override of the NIC's bytes/s per direction."""
    switch_radix: Int | None = Field(default=None, gt=1)


class System(Spec):
    """A node (HGX/DGX) or a rack (NVL72): GPUs, their NVLink domain, NICs and host."""

    name: str
    aliases: list[str] = []
    display_name: str
    device: str
    gpus: Int = Field(gt=0)
    nvlink_domain: Int = Field(gt=0)
    """GPUs that reach each other over NVLink/NVSwitch (8 for HGX, 72 for NVL72)."""
    tray_gpus: Int | None = Field(default=None, gt=0)
    """GPUs of the smallest part of the system a job can be given (a compute tray of an NVL72 rack: 4).
    ``None``: the whole system. A cluster of a GPU count that does not fill whole systems spreads over
    as few systems as hold it evenly in whole trays (256 GPUs of GB200 NVL72: 4 racks x 64 GPUs)."""
    nvswitch: str | None = None
    """Link spec of the NVSwitch generation; ``None`` for direct GPU-GPU links."""
    nvswitch_count: Int = Field(default=0, ge=0)
    nvlink_bandwidth: Bandwidth | None = None
    """Bytes/s per GPU per direction when the system limits it below the device's (H800)."""
    nics: Int = Field(ge=0)
    """Compute (scale-out) NICs per system."""
    nic: str
    """Link spec of the compute NIC."""
    pcie: str
    host_link: str | None = None
    """Link spec joining a GPU to its host CPU's memory when it is not ``pcie`` (``nvlink-c2c`` on Grace
    systems); ``None``: the PCIe link."""
    cpu: str
    cpus: Int = Field(ge=0)
    host_memory: Bytes
    host_memory_bandwidth: Bandwidth | None = None
    """Peak bytes/s of the system's CPU memory, all sockets together (channels x transfer rate x 8 bytes;
    Grace: NVIDIA's figure per CPU x CPUs): what a CPU optimizer step streams its states through
    (docs/parallelism.md, Offload). ``None``: unknown (CPU optimizer offload cannot be priced)."""
    host_memory_stream: Bandwidth | None = None
    """STREAM triad bytes/s of the system's CPU memory, all sockets together, from a published measurement
    of its CPUs: what a CPU optimizer step sustains (below the peak). ``None``: none cited (the peak
    ``host_memory_bandwidth`` is used, an upper bound)."""
    power_max: Watts
    cooling: Literal["air", "liquid", "hybrid"]
    fabric: FabricSpec = FabricSpec()
    """Default scale-out fabric when a scenario names none."""
    sources: dict[str, str]
    notes: list[str] = []

    @property
    def multi_node_nvlink(self) -> bool:
        """The NVLink domain spans several hosts (multi-node NVLink: an NVL72 rack's compute trays, each a
        host of ``tray_gpus`` GPUs, share one NVSwitch fabric); an HGX/DGX baseboard's domain is one host's."""
        return self.tray_gpus is not None and self.nvlink_domain > self.tray_gpus

    @model_validator(mode="after")
    def _domain(self) -> System:
        if self.gpus % self.nvlink_domain != 0:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of nvlink_domain ({self.nvlink_domain})")
        if self.tray_gpus is not None and self.gpus % self.tray_gpus != 0:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of tray_gpus ({self.tray_gpus})")
        return self
