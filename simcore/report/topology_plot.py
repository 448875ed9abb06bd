"""Drawing of a :class:`~simcore.comm.topology.Topology` as a layered picture (matplotlib, Agg).

Layers from the bottom: GPUs grouped by system (CPUs under them when asked), the NVSwitch plane of each
NVLink domain, NICs, leaf switches, spines and cores on top. Edges are coloured by bandwidth (log
scale) and listed in a legend by kind and bandwidth. Big clusters are drawn as a representative
subset -- the first few systems and the switches they use -- and the title says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simcore import units
from simcore.comm.topology import Node, Topology
from simcore.errors import SimcoreError

_LAYER_Y = {"cpu": -1.0, "gpu": 0.0, "nvswitch": 1.0, "nic": 2.0, "leaf": 3.3, "spine": 4.6, "core": 5.9}
_STYLE: dict[str, tuple[str, str, float]] = {  # marker, colour, size
    "gpu": ("s", "#2e7d32", 60.0),
    "cpu": ("D", "#795548", 45.0),
    "nvswitch": ("h", "#6a1b9a", 140.0),
    "nic": ("o", "#ef6c00", 40.0),
    "leaf": ("^", "#1565c0", 90.0),
    "spine": ("^", "#c62828", 110.0),
    "core": ("^", "#212121", 130.0),
}


_PLURAL = {"gpu": "GPUs", "cpu": "CPUs", "nvswitch": "NVSwitch planes", "nic": "NICs", "leaf": "leaves"}


def _pick(
    topo: Topology, max_nodes: int, max_gpus: int, max_switches: int, show_cpus: bool
) -> tuple[list[Node], dict[str, int], dict[str, int]]:
    """Nodes to draw, with per-kind counts drawn and in total."""
    g = topo.graph
    per = topo.cluster.system.gpus
    systems = min(max_nodes, topo.systems)
    gpus: list[Node] = []
    for s in range(systems):
        lo, hi = s * per, min((s + 1) * per, topo.gpus)
        gpus += [("gpu", r) for r in range(lo, min(hi, lo + max_gpus))]
    chosen: list[Node] = list(gpus)
    seen: set[Node] = set(gpus)

    def add_neighbours(frm: list[Node], kind: str, cap: int | None) -> list[Node]:
        out: list[Node] = []
        for u in frm:
            for v in g.successors(u):
                if v not in seen and g.nodes[v]["kind"] == kind and (cap is None or len(out) < cap):
                    seen.add(v)
                    out.append(v)
        out.sort(key=lambda n: n[1:])
        chosen.extend(out)
        return out

    add_neighbours(gpus, "nvswitch", None)
    if show_cpus:
        add_neighbours(gpus, "cpu", None)
    nics = add_neighbours(gpus, "nic", None)
    leaves = add_neighbours(nics, "leaf", max_switches)
    spines = add_neighbours(leaves, "spine", max_switches)
    add_neighbours(spines, "core", max_switches)
    drawn: dict[str, int] = {}
    for n in chosen:
        k = g.nodes[n]["kind"]
        drawn[k] = drawn.get(k, 0) + 1
    total = {k: topo.count(k) for k in _LAYER_Y}
    return chosen, drawn, total


def _positions(topo: Topology, nodes: list[Node], max_gpus: int) -> dict[Node, tuple[float, float]]:
    g = topo.graph
    per = topo.cluster.system.gpus
    width_per_sys = min(per, max_gpus) + 2
    pos: dict[Node, tuple[float, float]] = {}
    for n in nodes:
        if n[0] == "gpu":
            r = n[1]
            pos[n] = ((r // per) * width_per_sys + (r % per), _LAYER_Y["gpu"])
    # nodes sitting over their GPUs: mean x of the drawn GPUs they serve
    for n in nodes:
        kind = g.nodes[n]["kind"]
        if kind in ("nvswitch", "nic", "cpu"):
            xs = [pos[v][0] for v in g.successors(n) if v in pos and v[0] == "gpu"]
            pos[n] = (sum(xs) / len(xs) if xs else 0.0, _LAYER_Y[kind])
    gx = [p[0] for p in pos.values()] or [0.0]
    lo, hi = min(gx), max(gx)
    for kind in ("leaf", "spine", "core"):
        row = [n for n in nodes if g.nodes[n]["kind"] == kind]
        for i, n in enumerate(row):
            x = lo + (hi - lo) * (i + 0.5) / len(row) if len(row) > 1 else (lo + hi) / 2
            pos[n] = (x, _LAYER_Y[kind])
    return pos


def draw_topology(
    topo: Topology,
    path: str | Path,
    max_nodes: int = 4,
    *,
    max_gpus_per_node: int = 16,
    max_switches: int = 16,
    show_cpus: bool = False,
    dpi: int = 120,
) -> Path:
    """Draw ``topo`` to an image file (PNG, SVG, PDF by suffix) and return its path.

    At most ``max_nodes`` systems, ``max_gpus_per_node`` GPUs of each and ``max_switches`` switches per
    tier are drawn; the title says when the picture shows a subset. Bandwidths in the legend are per
    direction.
    """
    g = topo.graph
    nodes, drawn, total = _pick(topo, max_nodes, max_gpus_per_node, max_switches, show_cpus)
    pos = _positions(topo, nodes, max_gpus_per_node)
    shown = set(nodes)

    n_gpu = drawn.get("gpu", 0)
    fig = Figure(figsize=(min(max(9.0, 0.32 * (n_gpu + 2 * min(max_nodes, topo.systems))), 32.0), 7.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    pairs: list[tuple[Node, Node, dict[str, Any]]] = []
    done: set[frozenset[Node]] = set()
    for u, v, d in g.edges(data=True):
        if u in shown and v in shown:
            pair = frozenset((u, v))
            if pair not in done:
                done.add(pair)
                pairs.append((u, v, d))
    bws = [d["bandwidth"] for _, _, d in pairs] or [1.0]
    lo, hi = min(bws), max(bws)
    norm = LogNorm(vmin=lo, vmax=hi if hi > lo else lo * 1.0001)
    cmap = colormaps["viridis"]
    legend_edges: dict[tuple[str, float], Line2D] = {}
    for u, v, d in pairs:
        bw = d["bandwidth"]
        frac = 0.0 if hi <= lo else (math.log(bw) - math.log(lo)) / (math.log(hi) - math.log(lo))
        colour = cmap(norm(bw))
        (x0, y0), (x1, y1) = pos[u], pos[v]
        if y0 == y1:  # links within a row (direct GPU-GPU NVLink, inter-socket): arcs above the row
            steps = [i / 16 for i in range(17)]
            rise = 0.06 * abs(x1 - x0) + 0.1
            xs = [x0 + (x1 - x0) * f for f in steps]
            ys = [y0 + rise * math.sin(math.pi * f) for f in steps]
            ax.plot(xs, ys, color=colour, lw=0.6 + 2.4 * frac, alpha=0.75, zorder=1)
            y0 = y1 = y0 + rise
        else:
            ax.plot([x0, x1], [y0, y1], color=colour, lw=0.6 + 2.4 * frac, alpha=0.75, zorder=1)
        key = (d["kind"], round(bw, -6))
        if key not in legend_edges:
            ax.annotate(
                units.fmt(bw, "bandwidth"),
                ((x0 + x1) / 2, (y0 + y1) / 2),
                fontsize=6,
                ha="center",
                va="center",
                zorder=4,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": colour, "lw": 0.6, "alpha": 0.9},
            )
            legend_edges[key] = Line2D(
                [], [], color=colour, lw=0.6 + 2.4 * frac, label=f"{d['kind']}: {units.fmt(bw, 'bandwidth')}"
            )
    legend_nodes = []
    for kind, (marker, colour, size) in _STYLE.items():
        pts = [pos[n] for n in nodes if g.nodes[n]["kind"] == kind]
        if not pts:
            continue
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, c=colour, s=size, zorder=3)
        label = f"{kind} ({drawn.get(kind, 0)}" + (
            f" of {total[kind]})" if total[kind] > drawn[kind] else ")"
        )
        legend_nodes.append(Line2D([], [], marker=marker, color=colour, ls="", markersize=7, label=label))
    if n_gpu <= 64:
        for n in nodes:
            if n[0] == "gpu":
                x, y = pos[n]
                ax.annotate(
                    str(n[1]), (x, y), xytext=(0, -11), textcoords="offset points", ha="center", fontsize=6
                )
    per = topo.cluster.system.gpus
    for s in range(min(max_nodes, topo.systems)):
        xs = [pos[("gpu", r)][0] for r in range(s * per, (s + 1) * per) if ("gpu", r) in pos]
        if xs:
            ax.text(
                (min(xs) + max(xs)) / 2,
                -0.55 if not show_cpus else -1.55,
                f"system {s}",
                ha="center",
                fontsize=8,
            )

    c = topo.cluster
    title = (
        f"{c.system.name}: {topo.gpus} GPUs in {topo.systems} system{'s' if topo.systems > 1 else ''}, "
        f"NVLink domain {c.system.nvlink_domain} @ {units.fmt(c.nvlink_bandwidth, 'bandwidth')}/GPU"
    )
    if topo.systems > 1:
        title += (
            f"; {c.fabric.link} {c.fabric.topology.replace('_', '-')} {topo.tiers}-tier "
            f"{c.fabric.oversubscription:g}:1"
        )
    subset = [k for k in _LAYER_Y if total.get(k, 0) > drawn.get(k, 0) and (k != "cpu" or show_cpus)]
    if subset:
        title += "\nrepresentative subset: " + ", ".join(
            f"{drawn.get(k, 0)} of {total[k]} {_PLURAL.get(k, k + 's')}" for k in subset
        )
    ax.set_title(title, fontsize=10)
    leg1 = ax.legend(
        handles=legend_nodes,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        title="nodes",
        title_fontsize=8,
    )
    ax.add_artist(leg1)
    ax.legend(
        handles=[legend_edges[k] for k in sorted(legend_edges, key=lambda k: -k[1])],
        loc="lower left",
        bbox_to_anchor=(1.01, 0.0),
        fontsize=7,
        title="links (per direction)",
        title_fontsize=8,
    )
    ys = [p[1] for p in pos.values()] or [0.0]
    ax.set_ylim(min(ys) - 1.0, max(ys) + 1.6)
    layers = sorted({g.nodes[n]["kind"] for n in nodes}, key=lambda k: _LAYER_Y[k])
    ax.set_yticks([_LAYER_Y[k] for k in layers])
    ax.set_yticklabels(layers, fontsize=8)
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out, dpi=dpi)
    except (OSError, ValueError) as e:
        raise SimcoreError(f"cannot write the picture: {e}", file=str(out)) from None
    return out


__all__ = ["draw_topology"]
