"""``simcore hw list|show``: the hardware spec library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, add_row, app, console, emit_json, esc

if TYPE_CHECKING:
    from simcore.specs.hardware import Device, Link, System

hw_app = typer.Typer(
    help="Built-in and user hardware specs: devices, links and systems.", no_args_is_help=True
)
app.add_typer(hw_app, name="hw")


@hw_app.command("list")
def hw_list(as_json: JsonOpt = False) -> None:
    """List every device, link and system."""
    from simcore.specs.registry import default_registry

    reg = default_registry()
    if as_json:
        emit_json(
            {
                "devices": sorted(reg.devices),
                "systems": sorted(reg.systems),
                "links": sorted(reg.links),
                "models": sorted(reg.models),
            }
        )
        return
    t = Table(title="devices")
    for col in ("name", "device", "bf16 dense", "fp8 dense", "HBM", "HBM bandwidth", "NVLink /dir"):
        t.add_column(col)
    for d in sorted(reg.devices.values(), key=lambda d: d.name):
        add_row(
            t,
            d.name,
            d.display_name,
            units.fmt(d.peak_flops("bf16"), "flop_rate"),
            units.fmt(d.peak["fp8"], "flop_rate") if "fp8" in d.peak else "-",
            units.fmt(d.memory.capacity, "bytes"),
            units.fmt(d.memory.bandwidth, "bandwidth"),
            units.fmt(d.nvlink.bandwidth, "bandwidth") if d.nvlink else "-",
        )
    console.print(t)
    t = Table(title="systems")
    for col in ("name", "system", "GPUs", "NVLink domain", "NICs"):
        t.add_column(col)
    for s in sorted(reg.systems.values(), key=lambda s: s.name):
        nic = reg.link(s.nic)
        add_row(
            t,
            s.name,
            s.display_name,
            f"{s.gpus} x {s.device}",
            str(s.nvlink_domain),
            f"{s.nics} x {nic.name}",
        )
    console.print(t)
    t = Table(title="links and switches")
    for col in ("name", "kind", "link", "bandwidth /dir", "latency"):
        t.add_column(col)
    for lk in sorted(reg.links.values(), key=lambda x: (x.kind, x.name)):
        add_row(
            t,
            lk.name,
            lk.kind,
            lk.display_name,
            units.fmt(lk.bandwidth, "bandwidth"),
            units.fmt(lk.latency, "time"),
        )
    console.print(t)
    if reg.models:
        console.print(esc("model presets: " + ", ".join(sorted(reg.models))))
    console.print("built-in scenarios: simcore scenarios", highlight=False)


_FIELD_DIM: dict[str, units.Dimension] = {
    "capacity": "bytes",
    "l2_cache": "bytes",
    "smem_per_sm": "bytes",
    "host_memory": "bytes",
    "bandwidth": "bandwidth",
    "nvlink_bandwidth": "bandwidth",
    "pcie_bandwidth": "bandwidth",
    "nic_bandwidth": "bandwidth",
    "boost_clock": "frequency",
    "tdp": "power",
    "idle_power": "power",
    "power_max": "power",
    "latency": "time",
}


def _rows(prefix: str, obj: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "sources":
                continue
            _rows(f"{prefix}.{k}" if prefix else str(k), v, out)
        return
    leaf = prefix.rsplit(".", 1)[-1]
    if isinstance(obj, float) and prefix.startswith("peak."):
        out.append((prefix, units.fmt(obj, "flop_rate")))
    elif isinstance(obj, float) and leaf in _FIELD_DIM:
        out.append((prefix, units.fmt(obj, _FIELD_DIM[leaf])))
    elif isinstance(obj, list):
        out.append((prefix, ", ".join(map(str, obj)) if obj else "-"))
    else:
        out.append((prefix, "-" if obj is None else str(obj)))


def describe(spec: Device | System | Link, kind: str) -> dict[str, Any]:
    """A spec as a JSON-ready dict with derived facts people ask for."""
    from simcore.specs.hardware import Device, System
    from simcore.specs.registry import default_registry

    d: dict[str, Any] = {"kind": kind, **spec.model_dump(), "category": kind}
    reg = default_registry()
    if isinstance(spec, System):
        dev = reg.device(spec.device)
        nvbw = spec.nvlink_bandwidth or (dev.nvlink.bandwidth if dev.nvlink else dev.pcie_bandwidth)
        d["derived"] = {
            "nvlink_domains": spec.gpus // spec.nvlink_domain,
            "nvlink_bandwidth_per_gpu": nvbw,
            "nvlink_bandwidth_per_gpu_bidirectional": 2 * nvbw,
            "gpu_memory_total": dev.memory.capacity * spec.gpus,
            "bf16_dense_total": dev.peak_flops("bf16") * spec.gpus,
            "scaleout_bandwidth": spec.nics * reg.link(spec.nic).bandwidth,
        }
    if isinstance(spec, Device):
        d["derived"] = {
            "ridge_point_bf16_flop_per_byte": spec.peak_flops("bf16") / spec.memory.bandwidth,
        }
    return d


@hw_app.command("show")
def hw_show(
    name: Annotated[
        str, typer.Argument(help="Device, system or link name (e.g. h200, gb200-nvl72, ib-ndr).")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Show one device, system or link as a table (or JSON)."""
    from simcore.specs.registry import default_registry

    kind, spec = default_registry().find(name)
    d = describe(spec, kind)
    if as_json:
        emit_json(d)
        return
    rows: list[tuple[str, str]] = []
    for k, v in d.items():
        if k in ("sources", "kind", "derived", "category"):
            continue
        _rows(k, v, rows)
    for k, v in d.get("derived", {}).items():
        dim: units.Dimension | None = None
        if "bandwidth" in k:
            dim = "bandwidth"
        elif "memory" in k:
            dim = "bytes"
        elif k.startswith("bf16"):
            dim = "flop_rate"
        rows.append((f"derived.{k}", units.fmt(v, dim) if dim else f"{v:.4g}"))
    t = Table(title=esc(f"{kind} {spec.name}: {spec.display_name}"))
    t.add_column("field")
    t.add_column("value")
    for k, v in rows:
        add_row(t, k, v)
    console.print(t)
    src = Table(title="sources")
    src.add_column("field")
    src.add_column("source")
    for k, v in spec.sources.items():
        add_row(src, k, v)
    console.print(src)
