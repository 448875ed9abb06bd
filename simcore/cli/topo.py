"""``simcore topo``: the graph of a cluster (NVLink domains, NICs, leaf/spine fabric), as a table or PNG."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, add_row, app, console, emit_json, esc, image_file, say
from simcore.errors import SpecError

if TYPE_CHECKING:
    from simcore.comm.topology import Topology

TOPO_MAX_GPUS = 131_072
"""The largest cluster ``simcore topo`` builds a graph of: the graph has a node per GPU, NIC and switch
(64K GPUs take about 9 s and 0.7 GB); predict, plan and collective price larger clusters without it."""


def topology_from_arg(
    target: str,
    gpus: int | None = None,
    nodes: int | None = None,
    fabric: dict[str, Any] | None = None,
) -> Topology:
    """A topology from a system name or a scenario (file or built-in name), with size/fabric overrides."""
    from simcore.comm.topology import build_topology, resolve_with_fabric
    from simcore.specs.loader import validate
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import find_scenario, load_scenario
    from simcore.specs.scenario import ClusterSpec

    reg = default_registry()
    path = find_scenario(target)
    file: str | None = None
    if path.is_file():
        sc = load_scenario(path, (), reg)
        file = str(path)
        spec = sc.cluster
        if gpus is not None or nodes is not None:
            spec = spec.model_copy(update={"gpus": gpus, "nodes": nodes})
    else:
        if target.endswith((".yaml", ".yml")):
            raise SpecError("scenario file not found", file=target)
        spec = validate(ClusterSpec, {"system": target, "gpus": gpus, "nodes": nodes}, None, "cluster")
    cluster = resolve_with_fabric(spec, reg, fabric, file)
    if cluster.gpus > TOPO_MAX_GPUS:
        raise SpecError(
            f"{cluster.gpus:,} GPUs ({cluster.nodes:,} x {cluster.system.name}) is more than the "
            f"{TOPO_MAX_GPUS:,} GPUs simcore topo draws a graph of (a node per GPU, NIC and switch); "
            "simcore collective, predict and plan price larger clusters",
            field="--nodes" if nodes is not None else "--gpus" if gpus is not None else "cluster",
        )
    return build_topology(cluster, registry=reg)


def _bw(v: float | None) -> str:
    return units.fmt(v, "bandwidth") if v else "-"


def _table(t: Topology) -> Table:
    s = t.summary()
    tab = Table(title=esc(f"topology: {s['gpus']} x {s['device']} in {s['systems']} x {s['system']}"))
    tab.add_column("field")
    tab.add_column("value")
    rows: list[tuple[str, str]] = [
        ("GPUs", f"{s['gpus']} ({s['gpus_per_system']} per system)"),
        ("NVLink domains", f"{s['nvlink_domains']} of {s['nvlink_domain_size']} GPUs"),
        ("NVLink bandwidth per GPU", f"{_bw(s['nvlink_bandwidth_per_gpu'])} per direction"),
        (
            "NVSwitch",
            f"{s['nvswitch_planes']} plane(s), {s['nvswitch_chips']} chips"
            if s["nvswitch_planes"]
            else "none",
        ),
        ("NICs", f"{s['nics']} x {_bw(s['nic_bandwidth'])}" if s["nics"] else "0 (one system)"),
    ]
    if s["systems"] > 1:
        rows += [
            (
                "fabric",
                f"{s['fabric']} {str(s['topology']).replace('_', '-')}, {s['fabric_tiers']} tier(s), "
                f"{s['oversubscription']:g}:1, radix {s['switch_radix']}",
            ),
            ("leaves", str(s["leaves"])),
            ("spines", str(s["spines"])),
            ("cores", str(s["cores"])),
        ]
    rows += [
        ("bisection bandwidth", f"{_bw(s['bisection_bandwidth'])} per direction"),
        ("graph", f"{s['graph_nodes']} nodes, {s['graph_edges']} directed edges"),
    ]
    rows += [("note", n) for n in s["notes"]]
    for k, v in rows:
        add_row(tab, k, v)
    return tab


@app.command()
def topo(
    target: Annotated[
        str, typer.Argument(help="System name (hgx-h100, gb200-nvl72...) or scenario file/name.")
    ],
    gpus: Annotated[int | None, typer.Option("--gpus", help="Total GPUs.")] = None,
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", help=f"Systems (nodes or racks); at most {TOPO_MAX_GPUS:,} GPUs in all."),
    ] = None,
    oversubscription: Annotated[
        float | None,
        typer.Option("--oversubscription", help="Leaf downlink:uplink ratio (1 = non-blocking)."),
    ] = None,
    tiers: Annotated[
        int | None, typer.Option("--tiers", help="Switch tiers: 2 (leaf/spine) or 3 (+core).")
    ] = None,
    topology: Annotated[str | None, typer.Option("--topology", help="rail_optimized or fat_tree.")] = None,
    switch_radix: Annotated[
        int | None, typer.Option("--switch-radix", help="Ports per fabric switch.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write a picture (PNG, SVG, PDF, ...).")
    ] = None,
    max_nodes: Annotated[int, typer.Option("--max-nodes", help="Systems drawn at most.")] = 4,
    as_json: JsonOpt = False,
) -> None:
    """Show the topology of a cluster: NVLink domains, NICs, leaves, spines, bisection bandwidth."""
    fabric = {
        "oversubscription": oversubscription,
        "tiers": tiers,
        "topology": topology.replace("-", "_") if topology else None,
        "switch_radix": switch_radix,
    }
    image_file(output, "-o")
    t = topology_from_arg(target, gpus, nodes, fabric)
    if output is not None:
        from simcore.report.topology_plot import draw_topology

        draw_topology(t, output, max_nodes=max_nodes)
    if as_json:
        d = t.summary()
        if output is not None:
            d["output"] = str(output)
        emit_json(d)
        return
    console.print(_table(t))
    if output is not None:
        say(f"wrote {output}")
