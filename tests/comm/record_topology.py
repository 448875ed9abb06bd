"""Recorded topology graphs: a few clusters' graphs, every node and edge with its attributes, plus the
routing tables, as :func:`simcore.comm.topology.build_topology` builds them.

``python -m tests.comm.record_topology`` (from the repository root) rewrites
``tests/comm/topology_graphs.json.gz``; ``tests/comm/test_topology_graphs.py`` checks that the builder
still builds exactly these graphs. Record only when a change of the topology model is intended.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from simcore.comm.topology import Topology, topology_for
from simcore.specs.registry import Registry, default_registry, registry

DATA = Path(__file__).parent / "data"
GRAPHS = Path(__file__).with_name("topology_graphs.json.gz")

Case = tuple[str, bool, str, int | None, int | None, dict[str, Any]]
"""(name, with the tests/comm/data fixtures?, system, nodes, gpus, fabric overrides)."""

CASES: list[Case] = [
    ("hgx-h100 x4", False, "hgx-h100", 4, None, {}),
    ("gb200-nvl72 x2", False, "gb200-nvl72", 2, None, {}),
    ("dgx-b200 x16", False, "dgx-b200", 16, None, {}),
    ("gb200-nvl72 256 gpus", False, "gb200-nvl72", None, 256, {}),
    ("mi300x-platform x2", False, "mi300x-platform", 2, None, {}),
    ("hgx-h100 x1", False, "hgx-h100", 1, None, {}),
    ("hgx-h100 12 gpus on 2", False, "hgx-h100", 2, 12, {}),
    ("hgx-h100 x8 fat_tree", False, "hgx-h100", 8, None, {"topology": "fat_tree"}),
    ("gb200-nvl72 x2 fat_tree", False, "gb200-nvl72", 2, None, {"topology": "fat_tree", "switch_radix": 64}),
    ("hgx-h100 x8 oversubscribed", False, "hgx-h100", 8, None, {"oversubscription": 2.0}),
    ("hgx-h100 x16 radix 8 three tiers", True, "hgx-h100", 16, None, {"switch_radix": 8, "tiers": 3}),
    ("hgx-h100 x16 radix 8 two tiers", True, "hgx-h100", 16, None, {"switch_radix": 8, "tiers": 2}),
    (
        "hgx-h100 x12 radix 8 three tiers 3:1",
        True,
        "hgx-h100",
        12,
        None,
        {"switch_radix": 8, "tiers": 3, "oversubscription": 3.0},
    ),
    ("pcie-pairs x2", True, "pcie-pairs", 2, None, {}),
    ("hgx-h100-4nic x2", True, "hgx-h100-4nic", 2, None, {}),
]


def build(case: Case) -> Topology:
    """The topology of one recorded case."""
    _, fixtures, system, nodes, gpus, fabric = case
    reg: Registry = registry([DATA]) if fixtures else default_registry()
    return topology_for(system, gpus=gpus, nodes=nodes, registry=reg, **fabric)


def snapshot(t: Topology) -> dict[str, Any]:
    """Everything the builder produced, as JSON data (tuples become lists; insertion order kept)."""
    g = t.graph
    out = {
        "nodes": [[n, dict(d)] for n, d in g.nodes(data=True)],
        "edges": [[u, v, dict(d)] for u, v, d in g.edges(data=True)],
        "gpus": t.gpus,
        "systems": t.systems,
        "tiers": t.tiers,
        "switch_radix": t.switch_radix,
        "notes": t.notes,
        "rank_switch": t._rank_switch,
        "rank_domain": t._rank_domain,
        "domains": t._domains,
        "rank_cpu": t._rank_cpu,
        "rank_nic": t._rank_nic,
        "nic_leaf": list(t._nic_leaf.items()),
        "leaf_pod": list(t._leaf_pod.items()),
        "pod_spines": t._pod_spines,
        "plane_cores": t._plane_cores,
    }
    data: dict[str, Any] = json.loads(json.dumps(out))
    return data


def record() -> None:
    out = {case[0]: snapshot(build(case)) for case in CASES}
    with gzip.open(GRAPHS, "wt", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"{GRAPHS}: {len(out)} topologies")


if __name__ == "__main__":
    record()
