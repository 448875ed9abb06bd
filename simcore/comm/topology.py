"""Cluster topologies as graphs: which links a transfer between two GPUs crosses, and how fast they are.

:func:`build_topology` turns a resolved cluster (:class:`simcore.specs.resolve.ClusterInfo`) into a
:class:`Topology`: a ``networkx.DiGraph`` with one directed edge per direction of every link, plus
routing that is deterministic and fast (closed-form over the tree structure, no graph search on the hot
path), so the collective models can ask thousands of path questions per second.

Graph
-----
Node ids are tuples; node attributes are ``kind``, ``node`` (system index or ``None`` for shared
switches), ``rail`` and ``rank`` (``None`` where they do not apply):

* ``("gpu", rank)`` -- global ranks ``0..gpus-1``, filled system by system (rank ``r`` sits in system
  ``r // g``, local index ``r % g``, with ``g = ClusterInfo.gpus_per_node`` the GPUs used per system:
  ``system.gpus`` unless the job uses part of each system, e.g. 64 GPUs of each NVL72 rack).
* ``("nvswitch", node, domain)`` -- **one aggregated switch node per NVLink domain**. A system's
  ``nvswitch_count`` switch chips are modelled as a single logical switch plane: every GPU of the domain
  has one edge to it carrying the GPU's full per-direction NVLink bandwidth
  (``ClusterInfo.nvlink_bandwidth``), so any two GPUs of a domain are one switch hop apart at the per-GPU
  NVLink bandwidth (HGX H100/H200: 450 GB/s; GB200 NVL72: 900 GB/s between all 72 GPUs). The chip count
  is kept as the node attribute ``chips``. Systems without NVSwitch (``nvswitch: null``) get a full mesh
  of direct ``nvlink`` edges inside each domain, each carrying ``nvlink_bandwidth / (domain - 1)``.
* ``("cpu", node, socket)`` -- host CPUs; GPU ``i`` of a system hangs off socket
  ``i * cpus // gpus`` by a ``pcie`` edge (``c2c`` when the system's host link is NVLink-C2C, Grace).
  Sockets of one system are joined to each other only when the system has several NVLink domains (then
  GPUs of different domains talk through the host); that inter-socket edge reuses the host link's
  bandwidth for want of a spec for it.
* ``("nic", node, j)`` -- compute NICs, only when the cluster spans more than one system. GPU ``i`` uses
  NIC ``i * nics // gpus`` (GPUs share NICs when a system has fewer NICs than GPUs); the GPU-NIC edge is
  ``pcie`` at the device's PCIe bandwidth, the NIC-leaf edge is ``nic`` at ``ClusterInfo.nic_bandwidth``.
* ``("leaf", i)``, ``("spine", pod, j)``, ``("core", plane, i)`` -- a folded-Clos (fat-tree) scale-out fabric of
  switches of radix ``k`` (``fabric.switch_radix`` or the fabric link's ``radix``):

  - ``rail_optimized`` (default): NIC ``j`` of every system is rail ``j``; one leaf per rail per group
    of ``k/2`` systems, so same-rail NICs of a group share a leaf;
  - ``fat_tree``: all NICs of a system sit on the same leaf (``k/2`` NIC ports per leaf; a system with
    more NICs than that fills consecutive leaves).

  A rack-scale system (NVL72: 72 NICs) has as many rails, hence one leaf per rail even for two racks;
  cross-rail traffic then climbs to the spines (cores). One system alone has no NICs in the graph.

  A leaf has ``k/2`` ports down; its total uplink capacity is ``(k/2) * port_bandwidth /
  oversubscription``. Two tiers: ``ceil(L / (2 * oversubscription))`` spines, every leaf linked to every
  spine (edge kind ``spine``), ``L <= k``. Three tiers: pods of ``k/2`` leaves with
  ``ceil(leaves_in_pod / oversubscription)`` spines each; spine ``j`` of every pod links to the
  ``ceil(pods / 2)`` cores of plane ``j`` (edge kind ``core``); spines are non-blocking. Parallel
  cables between two switches are one edge carrying their summed bandwidth. Capacities are those of
  the switches as built (full leaves), whichever share of them this cluster's NICs occupy. When two tiers
  cannot join the leaves (more than ``k``), three are built and :attr:`Topology.notes` says so.

Edges carry ``bandwidth`` (bytes/s, that direction), ``latency`` (s) and ``kind`` (``nvlink``,
``nvswitch``, ``pcie``, ``c2c``, ``nic``, ``spine``, ``core``). Latency is charged per switch traversal:
an edge into or out of a switch carries half the switch's latency, a switch-to-switch edge the full
latency, so a path's latency is the sum of the switches it crosses (one NVSwitch hop = the NVSwitch's
latency; leaf-spine-leaf = three fabric hops) plus the PCIe/C2C traversals. Direct NVLink edges carry no
latency (the specs give none).

Routing
-------
Shortest by hops, never through another GPU: inside a domain GPU-switch-GPU; across systems
GPU-NIC-leaf-NIC-GPU when both NICs share a leaf (same rail of the same group), otherwise up through a
spine (and a core across pods). Among equal-cost spines and cores (ECMP) the choice is a deterministic
hash of ``(a, b)``. Everything is in SI units: bytes/s and seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx

from simcore.errors import SpecError
from simcore.specs.hardware import FabricSpec, Link
from simcore.specs.loader import validate
from simcore.specs.registry import Registry, default_registry
from simcore.specs.resolve import ClusterInfo, resolve_cluster
from simcore.specs.scenario import ClusterSpec

Node = tuple[Any, ...]
"""A graph node id, e.g. ``("gpu", 3)`` or ``("leaf", 0)``."""
Edge = tuple[Node, Node]
"""A directed edge ``(u, v)``."""
Pattern = Literal["ring", "all_to_all"]

NODE_KINDS = ("gpu", "nvswitch", "cpu", "nic", "leaf", "spine", "core")
EDGE_KINDS = ("nvlink", "nvswitch", "pcie", "c2c", "nic", "spine", "core")


def _mix(a: int, b: int) -> int:
    """A deterministic 32-bit hash of an ordered pair (ECMP choice); independent of PYTHONHASHSEED."""
    x = (a * 0x9E3779B1 + b * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


@dataclass
class Topology:
    """A cluster as a directed graph plus fast routing over it (see the module docstring)."""

    graph: nx.DiGraph
    cluster: ClusterInfo
    gpus: int
    """GPUs (ranks) in the graph."""
    systems: int
    """Systems that hold at least one of the GPUs."""
    tiers: int
    """Switch tiers above the NICs actually built: 0 (one system), 1 (one leaf), 2 or 3."""
    switch_radix: int | None
    notes: list[str]
    """What the builder changed or assumed beyond the spec (e.g. a third tier added)."""
    # routing tables (internal)
    _rank_switch: list[Node | None] = field(repr=False)
    _rank_domain: list[int] = field(repr=False)
    _domains: list[list[int]] = field(repr=False)
    _rank_cpu: list[Node | None] = field(repr=False)
    _rank_nic: list[Node | None] = field(repr=False)
    _nic_leaf: dict[Node, Node] = field(repr=False)
    _leaf_pod: dict[Node, int] = field(repr=False)
    _pod_spines: list[list[Node]] = field(repr=False)
    _plane_cores: list[list[Node]] = field(repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ basic queries
    def gpu(self, rank: int) -> Node:
        """The graph node of GPU ``rank``."""
        if not 0 <= rank < self.gpus:
            raise SpecError(f"rank {rank} is outside 0..{self.gpus - 1}")
        return ("gpu", rank)

    def system_of(self, rank: int) -> int:
        """Index of the system holding ``rank``."""
        self.gpu(rank)
        return rank // self.cluster.gpus_per_node

    def same_nvlink_domain(self, a: int, b: int) -> bool:
        """Whether GPUs ``a`` and ``b`` reach each other over NVLink/NVSwitch alone."""
        self.gpu(a)
        self.gpu(b)
        return self._rank_domain[a] == self._rank_domain[b]

    def nvlink_domain(self, rank: int) -> list[int]:
        """Ranks of the NVLink domain that holds ``rank`` (including it), ascending."""
        self.gpu(rank)
        return list(self._domains[self._rank_domain[rank]])

    def nvlink_domains(self) -> list[list[int]]:
        """Every NVLink domain as a list of ranks."""
        return [list(d) for d in self._domains]

    def nic_of(self, rank: int) -> Node | None:
        """The NIC GPU ``rank`` sends through (``None`` for a single-system cluster)."""
        self.gpu(rank)
        return self._rank_nic[rank]

    def edge(self, u: Node, v: Node) -> dict[str, Any]:
        """Attributes (``bandwidth``, ``latency``, ``kind``) of the directed edge ``u -> v``."""
        data: dict[str, Any] = self.graph.edges[u, v]
        return data

    # ------------------------------------------------------------------ routing
    def path(self, a: int, b: int) -> list[Edge]:
        """Directed edges a transfer from GPU ``a`` to GPU ``b`` crosses, in order (empty if ``a == b``).

        Shortest by hops, never transiting another GPU; ties among spines/cores broken by a hash of
        ``(a, b)``.
        """
        ga, gb = self.gpu(a), self.gpu(b)
        if a == b:
            return []
        if self._rank_domain[a] == self._rank_domain[b]:
            sw = self._rank_switch[a]
            if sw is None:
                return [(ga, gb)]
            return [(ga, sw), (sw, gb)]
        per = self.cluster.gpus_per_node
        if a // per == b // per:
            ca, cb = self._rank_cpu[a], self._rank_cpu[b]
            assert ca is not None and cb is not None
            if ca == cb:
                return [(ga, ca), (ca, gb)]
            return [(ga, ca), (ca, cb), (cb, gb)]
        na, nb = self._rank_nic[a], self._rank_nic[b]
        assert na is not None and nb is not None
        la, lb = self._nic_leaf[na], self._nic_leaf[nb]
        out: list[Edge] = [(ga, na), (na, la)]
        if la != lb:
            h = _mix(a, b)
            pa, pb = self._leaf_pod[la], self._leaf_pod[lb]
            if pa == pb:
                spines = self._pod_spines[pa]
                s = spines[h % len(spines)]
                out += [(la, s), (s, lb)]
            else:
                planes = min(len(self._pod_spines[pa]), len(self._pod_spines[pb]))
                j = h % planes
                cores = self._plane_cores[j]
                c = cores[(h // planes) % len(cores)]
                sa, sb = self._pod_spines[pa][j], self._pod_spines[pb][j]
                out += [(la, sa), (sa, c), (c, sb), (sb, lb)]
        out += [(lb, nb), (nb, gb)]
        return out

    def hops(self, a: int, b: int) -> int:
        """Edges on the path from ``a`` to ``b``."""
        return len(self.path(a, b))

    def bottleneck_bandwidth(self, a: int, b: int) -> float:
        """Smallest per-direction bandwidth (bytes/s) on the path from ``a`` to ``b``; ``inf`` if ``a == b``."""
        g = self.graph
        return min((g.edges[e]["bandwidth"] for e in self.path(a, b)), default=math.inf)

    def path_latency(self, a: int, b: int) -> float:
        """Sum of edge latencies (s) on the path from ``a`` to ``b`` (switch and host-link traversals)."""
        g = self.graph
        return float(sum(g.edges[e]["latency"] for e in self.path(a, b)))

    def links_crossed(self, ranks: Sequence[int], pattern: Pattern = "ring") -> dict[Edge, int]:
        """How many flows of a communication pattern over ``ranks`` cross each directed edge.

        ``ring``: one flow ``ranks[i] -> ranks[i+1]`` for every ``i`` (cyclic), as in one step of a ring
        collective; ``all_to_all``: one flow for every ordered pair of distinct ranks. Edges no flow
        crosses are absent.
        """
        rs = list(ranks)
        counts: Counter[Edge] = Counter()
        if len(rs) < 2:
            return {}
        if pattern == "ring":
            pairs: list[tuple[int, int]] = [(rs[i], rs[(i + 1) % len(rs)]) for i in range(len(rs))]
        elif pattern == "all_to_all":
            pairs = [(x, y) for x in rs for y in rs if x != y]
        else:
            raise SpecError(f"unknown pattern {pattern!r}; known: ring, all_to_all")
        for x, y in pairs:
            counts.update(self.path(x, y))
        return dict(counts)

    # ------------------------------------------------------------------ summary
    def count(self, kind: str) -> int:
        """Graph nodes of a kind (``gpu``, ``nvswitch``, ``cpu``, ``nic``, ``leaf``, ``spine``, ``core``)."""
        counts: Counter[str] = self._cache.get("kinds") or Counter(
            k for _, k in self.graph.nodes(data="kind")
        )
        self._cache["kinds"] = counts
        return counts[kind]

    def bisection_bandwidth(self) -> float:
        """Bytes/s per direction across the cut between the first and second half of the cluster.

        Several systems: the first ``n // 2`` systems against the last ``n // 2`` (the middle one is
        left out when ``n`` is odd), as a max-flow over NIC links and switches (NVLink inside a system
        is never cut). One system: the first half of its GPUs against the second half, as a max-flow
        over its NVLink/host graph.
        """
        if "bisection" not in self._cache:
            self._cache["bisection"] = self._bisection()
        value: float = self._cache["bisection"]
        return value

    def _bisection(self) -> float:
        if self.gpus < 2:
            return 0.0
        g = self.graph
        h = nx.DiGraph()
        if self.systems == 1:
            half = self.gpus // 2
            for u, v, d in g.edges(data=True):
                h.add_edge(u, v, capacity=d["bandwidth"])
            for r in range(half):
                h.add_edge("S", ("gpu", r))
            for r in range(self.gpus - half, self.gpus):
                h.add_edge(("gpu", r), "T")
            return float(nx.maximum_flow_value(h, "S", "T"))
        n = self.systems
        side_a = set(range(n // 2))
        side_b = set(range(n - n // 2, n))
        for u, v, d in g.edges(data=True):
            if g.nodes[u]["kind"] in ("leaf", "spine", "core") and g.nodes[v]["kind"] in (
                "leaf",
                "spine",
                "core",
            ):
                h.add_edge(u, v, capacity=d["bandwidth"])
        cap_in: Counter[Node] = Counter()
        cap_out: Counter[Node] = Counter()
        for nic, leaf in self._nic_leaf.items():
            sysidx = nic[1]
            gpu_bw = sum(g.edges[p, nic]["bandwidth"] for p in g.predecessors(nic) if p[0] == "gpu")
            if sysidx in side_a:
                cap_in[leaf] += min(g.edges[nic, leaf]["bandwidth"], gpu_bw)
            elif sysidx in side_b:
                cap_out[leaf] += min(g.edges[leaf, nic]["bandwidth"], gpu_bw)
        for leaf, c in cap_in.items():
            h.add_edge("S", leaf, capacity=c)
        for leaf, c in cap_out.items():
            h.add_edge(leaf, "T", capacity=c)
        if "S" not in h or "T" not in h:
            return 0.0
        return float(nx.maximum_flow_value(h, "S", "T"))

    def summary(self) -> dict[str, Any]:
        """Counts and headline bandwidths (bytes/s per direction) of the topology, JSON-ready."""
        c = self.cluster
        nvsw = self.count("nvswitch")
        return {
            "system": c.system.name,
            "device": c.device.name,
            "gpus": self.gpus,
            "systems": self.systems,
            "gpus_per_system": c.system.gpus,
            "nvlink_domains": len(self._domains),
            "nvlink_domain_size": c.system.nvlink_domain,
            "nvlink_bandwidth_per_gpu": c.nvlink_bandwidth,
            "nvswitch_planes": nvsw,
            "nvswitch_chips": (c.system.nvswitch_count * nvsw * c.system.nvlink_domain) // c.system.gpus
            if nvsw
            else 0,
            "cpus": self.count("cpu"),
            "nics": self.count("nic"),
            "nic_bandwidth": c.nic_bandwidth if self.count("nic") else None,
            "fabric": c.fabric.link if self.systems > 1 else None,
            "topology": c.fabric.topology if self.systems > 1 else None,
            "fabric_tiers": self.tiers,
            "oversubscription": c.fabric.oversubscription if self.systems > 1 else None,
            "switch_radix": self.switch_radix,
            "leaves": self.count("leaf"),
            "spines": self.count("spine"),
            "cores": self.count("core"),
            "bisection_bandwidth": self.bisection_bandwidth(),
            "notes": list(self.notes),
            "graph_nodes": self.graph.number_of_nodes(),
            "graph_edges": self.graph.number_of_edges(),
        }


# ---------------------------------------------------------------------- building


def _host_links(cluster: ClusterInfo, reg: Registry | None) -> tuple[Link | None, Link | None]:
    """(host link of the system, PCIe link of the device generation), each ``None`` if unknown."""
    reg = reg or default_registry()
    host: Link | None
    try:
        host = reg.link(cluster.system.pcie)
    except SpecError:
        host = None
    pcie: Link | None = host if host is not None and host.kind == "pcie" else None
    if pcie is None:
        try:
            cand = reg.link(f"pcie{cluster.device.pcie_generation}")
            pcie = cand if cand.kind == "pcie" else None
        except SpecError:
            pcie = None
    return host, pcie


@dataclass
class _Builder:
    """The graph's nodes and edges in the order they are added, and the routing tables filled alongside.

    Each ``_add_*`` function below adds one part of the topology (see the module docstring);
    :func:`build_topology` calls them in a fixed order, so the graph's node and edge order is stable.
    """

    cluster: ClusterInfo
    nodes: list[tuple[Node, dict[str, Any]]] = field(default_factory=list)
    edges: list[tuple[Node, Node, dict[str, Any]]] = field(default_factory=list)
    rank_switch: list[Node | None] = field(init=False)
    rank_domain: list[int] = field(init=False)
    rank_cpu: list[Node | None] = field(init=False)
    rank_nic: list[Node | None] = field(init=False)
    domains: list[list[int]] = field(default_factory=list)
    nic_leaf: dict[Node, Node] = field(default_factory=dict)
    leaf_pod: dict[Node, int] = field(default_factory=dict)
    pod_spines: list[list[Node]] = field(default_factory=list)
    plane_cores: list[list[Node]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = self.cluster.gpus
        self.rank_switch = [None] * n
        self.rank_domain = [0] * n
        self.rank_cpu = [None] * n
        self.rank_nic = [None] * n

    def node(
        self, n: Node, kind: str, node: int | None = None, rail: int | None = None, **extra: Any
    ) -> None:
        """Add node ``n`` with attributes ``kind``, ``node`` (system index), ``rail``, ``rank``, ``extra``."""
        rank = n[1] if kind == "gpu" else None
        self.nodes.append((n, {"kind": kind, "node": node, "rail": rail, "rank": rank, **extra}))

    def link(self, u: Node, v: Node, bw: float, lat: float, kind: str) -> None:
        """Add a link as two directed edges, each carrying ``bw`` bytes/s and ``lat`` seconds."""
        self.edges.append((u, v, {"bandwidth": bw, "latency": lat, "kind": kind}))
        self.edges.append((v, u, {"bandwidth": bw, "latency": lat, "kind": kind}))


def _system_ranks(cluster: ClusterInfo, s: int) -> range:
    """Global ranks held by system ``s`` (``gpus_per_node`` of them, fewer in a partial last system)."""
    per = cluster.gpus_per_node
    return range(s * per, min((s + 1) * per, cluster.gpus))


def _add_nvlink_domains(b: _Builder, s: int) -> None:
    """System ``s``'s GPUs and NVLink domains: one aggregated NVSwitch node per domain, every GPU linked to
    it at the per-GPU NVLink bandwidth and half the switch latency; without NVSwitch a full mesh of
    direct ``nvlink`` edges of ``nvlink_bandwidth / (domain - 1)`` each, no latency."""
    cluster = b.cluster
    sysm = cluster.system
    dom = sysm.nvlink_domain
    nvbw = cluster.nvlink_bandwidth
    nvs_lat = cluster.nvswitch.latency if cluster.nvswitch is not None else 0.0
    ranks_s = _system_ranks(cluster, s)
    for r in ranks_s:
        b.node(("gpu", r), "gpu", s)
    lo, hi = ranks_s.start, ranks_s.stop
    for d in range(sysm.gpus // dom):
        ranks = list(range(lo + d * dom, min(lo + (d + 1) * dom, hi)))
        if not ranks:
            continue
        did = len(b.domains)
        b.domains.append(ranks)
        for r in ranks:
            b.rank_domain[r] = did
        if cluster.nvswitch is not None:
            sw: Node = ("nvswitch", s, d)
            b.node(sw, "nvswitch", s, chips=sysm.nvswitch_count * dom // sysm.gpus)
            for r in ranks:
                b.rank_switch[r] = sw
                b.link(("gpu", r), sw, nvbw, nvs_lat / 2, "nvswitch")
        elif dom > 1:
            bw = nvbw / (dom - 1)
            for i, x in enumerate(ranks):
                for y in ranks[i + 1 :]:
                    b.link(("gpu", x), ("gpu", y), bw, 0.0, "nvlink")


def _add_host_cpus(b: _Builder, s: int, kind: str, bw: float, lat: float) -> None:
    """System ``s``'s CPU sockets: GPU ``i`` hangs off socket ``i * cpus // gpus`` by a host link (``kind``
    ``pcie`` or ``c2c``, ``bw`` bytes/s, ``lat`` s); sockets are joined pairwise by the same link when the
    system has several NVLink domains (which then talk through the host)."""
    sysm = b.cluster.system
    n_cpu = sysm.cpus
    if n_cpu == 0:
        return
    ranks_s = _system_ranks(b.cluster, s)
    sockets: set[int] = set()
    for r in ranks_s:
        sock = (r - ranks_s.start) * n_cpu // sysm.gpus
        cpu: Node = ("cpu", s, sock)
        if sock not in sockets:
            sockets.add(sock)
            b.node(cpu, "cpu", s)
        b.rank_cpu[r] = cpu
        b.link(("gpu", r), cpu, bw, lat, kind)
    if sysm.gpus // sysm.nvlink_domain > 1:
        socks = sorted(sockets)
        for i, x in enumerate(socks):
            for y in socks[i + 1 :]:
                b.link(("cpu", s, x), ("cpu", s, y), bw, lat, kind)


def _leaf_index(cluster: ClusterInfo, s: int, j: int, down: int) -> int:
    """The leaf switch of NIC ``j`` of system ``s`` under leaves of ``down`` ports down.

    ``rail_optimized``: one leaf per rail per group of ``down`` systems; ``fat_tree``: a system's NICs on
    one leaf (``down // nics`` systems a leaf), or on consecutive leaves when it has more NICs than ports.
    """
    n_nics = cluster.nics_per_node
    if cluster.fabric.topology == "rail_optimized":
        return (s // down) * n_nics + j
    if n_nics <= down:
        return s // (down // n_nics)
    return s * -(-n_nics // down) + j // down


def _add_nics_and_leaves(b: _Builder, n_sys: int, down: int, pcie_bw: float, pcie_lat: float) -> int:
    """Compute NICs and leaf switches; returns the number of leaves.

    GPU ``i`` of a system uses NIC ``i * nics // gpus`` over a ``pcie`` edge (``pcie_bw`` bytes/s,
    ``pcie_lat`` s); each NIC links to its leaf (:func:`_leaf_index`) at the NIC bandwidth and half the
    fabric switch latency. A rail-optimised leaf carries its rail as ``rail``.
    """
    cluster = b.cluster
    n_nics = cluster.nics_per_node
    rail_opt = cluster.fabric.topology == "rail_optimized"
    half_lat = cluster.fabric_link.latency / 2
    leaf_rail: dict[int, int | None] = {}
    for s in range(n_sys):
        ranks_s = _system_ranks(cluster, s)
        for r in ranks_s:
            j = (r - ranks_s.start) * n_nics // cluster.system.gpus
            nic: Node = ("nic", s, j)
            if nic not in b.nic_leaf:
                li = _leaf_index(cluster, s, j, down)
                if rail_opt:
                    leaf_rail[li] = j
                else:
                    leaf_rail.setdefault(li, None)
                leaf: Node = ("leaf", li)
                b.nic_leaf[nic] = leaf
                b.node(nic, "nic", s, j)
                b.link(nic, leaf, cluster.nic_bandwidth, half_lat, "nic")
            b.rank_nic[r] = nic
            b.link(("gpu", r), nic, pcie_bw, pcie_lat, "pcie")
    n_leaves = max(leaf_rail) + 1
    for li in range(n_leaves):
        b.node(("leaf", li), "leaf", None, leaf_rail.get(li))
    return n_leaves


def _add_two_tiers(b: _Builder, n_leaves: int, leaf_up: float) -> None:
    """``ceil(leaves / (2 * oversubscription))`` spines, every leaf linked to every spine; a leaf's uplink
    capacity ``leaf_up`` (bytes/s) is split evenly over its spine edges."""
    fab_lat = b.cluster.fabric_link.latency
    n_sp = math.ceil(n_leaves / (2 * b.cluster.fabric.oversubscription))
    spines: list[Node] = [("spine", 0, i) for i in range(n_sp)]
    b.pod_spines.append(spines)
    for i, sp in enumerate(spines):
        b.node(sp, "spine", pod=0, plane=i)
    for li in range(n_leaves):
        b.leaf_pod[("leaf", li)] = 0
        for sp in spines:
            b.link(("leaf", li), sp, leaf_up / n_sp, fab_lat, "spine")


def _add_three_tiers(b: _Builder, n_leaves: int, radix: int, leaf_up: float) -> None:
    """Pods of ``radix // 2`` leaves with ``ceil(leaves_in_pod / oversubscription)`` spines each, every
    leaf of a pod linked to every spine of it; with several pods, spine ``j`` of every pod links to the
    ``ceil(pods / 2)`` cores of plane ``j``, non-blocking (as much bandwidth up as comes up from the
    leaves)."""
    down = radix // 2
    fab_lat = b.cluster.fabric_link.latency
    ratio = b.cluster.fabric.oversubscription
    n_pods = -(-n_leaves // down)
    if n_pods > radix:
        raise SpecError(
            f"{n_leaves} leaf switches need {n_pods} pods, more than a three-tier fabric of "
            f"radix-{radix} switches joins ({radix})",
            field="cluster.fabric.switch_radix",
        )
    pod_up: list[float] = []
    for p in range(n_pods):
        pleaves = list(range(p * down, min((p + 1) * down, n_leaves)))
        n_sp = math.ceil(len(pleaves) / ratio)
        spines: list[Node] = []
        for j in range(n_sp):
            sp: Node = ("spine", p, j)
            spines.append(sp)
            b.node(sp, "spine", pod=p, plane=j)
        b.pod_spines.append(spines)
        pod_up.append(len(pleaves) * leaf_up)
        for li in pleaves:
            b.leaf_pod[("leaf", li)] = p
            for sp in spines:
                b.link(("leaf", li), sp, leaf_up / n_sp, fab_lat, "spine")
    if n_pods == 1:
        return
    for j in range(max(len(x) for x in b.pod_spines)):
        members = [x[j] for x in b.pod_spines if len(x) > j]
        n_core = math.ceil(len(members) / 2)
        cores: list[Node] = []
        for ci in range(n_core):
            c: Node = ("core", j, ci)
            cores.append(c)
            b.node(c, "core", plane=j)
        b.plane_cores.append(cores)
        for sp in members:
            # non-blocking spine: as much bandwidth up to the cores as comes up from leaves
            spine_down = pod_up[sp[1]] / len(b.pod_spines[sp[1]])
            for c in cores:
                b.link(sp, c, spine_down / n_core, fab_lat, "core")


def _add_fabric(b: _Builder, n_sys: int, pcie_bw: float, pcie_lat: float) -> tuple[int, int, list[str]]:
    """The scale-out fabric joining ``n_sys`` systems: NICs, leaves, and spines (and cores) as a folded
    Clos of radix-``k`` switches; returns (tiers built, radix, notes).

    A leaf's uplink capacity is ``(k/2) * port_bandwidth / oversubscription``. Two tiers join at most
    ``k`` leaves; beyond that three are built and a note says so.
    """
    cluster = b.cluster
    radix = cluster.fabric.switch_radix or cluster.fabric_link.radix
    if radix is None or radix < 2:
        raise SpecError(
            f"fabric link {cluster.fabric_link.name!r} gives no switch radix; set it",
            field="cluster.fabric.switch_radix",
        )
    down = radix // 2
    n_leaves = _add_nics_and_leaves(b, n_sys, down, pcie_bw, pcie_lat)
    # design capacity of a leaf: k/2 ports down, (k/2) * port bandwidth / oversubscription up
    leaf_up = down * cluster.fabric_link.bandwidth / cluster.fabric.oversubscription
    notes: list[str] = []
    want = cluster.fabric.tiers
    if want == 2 and n_leaves > radix:
        notes.append(
            f"{n_leaves} leaf switches exceed what a two-tier fabric of radix-{radix} switches joins "
            f"({radix}); built three tiers"
        )
        want = 3
    if n_leaves == 1:
        b.leaf_pod[("leaf", 0)] = 0
        b.pod_spines.append([])
        return 1, radix, notes
    if want == 2:
        _add_two_tiers(b, n_leaves, leaf_up)
        return 2, radix, notes
    _add_three_tiers(b, n_leaves, radix, leaf_up)
    return 3, radix, notes


def build_topology(cluster: ClusterInfo, *, registry: Registry | None = None) -> Topology:
    """Build the graph of ``cluster`` (see the module docstring for the model).

    Inside each system its NVLink domains (:func:`_add_nvlink_domains`) and host CPUs
    (:func:`_add_host_cpus`); across several systems the scale-out fabric (:func:`_add_fabric`).
    ``registry`` resolves the system's host link (PCIe or NVLink-C2C); the default registry is used when
    it is not given. Raises :class:`~simcore.errors.SpecError` when the fabric cannot hold the cluster
    (too many leaves for two tiers, too many pods for three, systems without NICs).
    """
    sysm = cluster.system
    n_sys = -(-cluster.gpus // cluster.gpus_per_node)
    doms_per_sys = sysm.gpus // sysm.nvlink_domain
    if doms_per_sys > 1 and sysm.cpus == 0:
        raise SpecError(
            f"system {sysm.name!r} has {doms_per_sys} NVLink domains but no CPUs to join them", field="cpus"
        )
    if n_sys > 1 and cluster.nics_per_node == 0:
        raise SpecError(
            f"system {sysm.name!r} has no compute NICs, so {n_sys} of them cannot be joined",
            field="cluster.fabric.nics_per_node",
        )
    host, pcie = _host_links(cluster, registry)
    host_kind = "c2c" if host is not None and host.kind == "c2c" else "pcie"
    host_bw = host.bandwidth if host is not None else cluster.device.pcie_bandwidth
    host_lat = host.latency if host is not None else 0.0
    pcie_lat = pcie.latency if pcie is not None else host_lat

    b = _Builder(cluster)
    for s in range(n_sys):
        _add_nvlink_domains(b, s)
        _add_host_cpus(b, s, host_kind, host_bw, host_lat)
    tiers, radix, notes = 0, None, list[str]()
    if n_sys > 1:
        tiers, radix, notes = _add_fabric(b, n_sys, cluster.device.pcie_bandwidth, pcie_lat)

    g = nx.DiGraph()
    g.add_nodes_from(b.nodes)
    g.add_edges_from(b.edges)
    return Topology(
        graph=g,
        cluster=cluster,
        gpus=cluster.gpus,
        systems=n_sys,
        tiers=tiers,
        switch_radix=radix,
        notes=notes,
        _rank_switch=b.rank_switch,
        _rank_domain=b.rank_domain,
        _domains=b.domains,
        _rank_cpu=b.rank_cpu,
        _rank_nic=b.rank_nic,
        _nic_leaf=b.nic_leaf,
        _leaf_pod=b.leaf_pod,
        _pod_spines=b.pod_spines,
        _plane_cores=b.plane_cores,
    )


def resolve_with_fabric(
    spec: ClusterSpec,
    registry: Registry | None = None,
    fabric: Mapping[str, Any] | None = None,
    file: str | None = None,
) -> ClusterInfo:
    """Resolve a cluster spec with fabric fields overridden (``None`` values are ignored).

    ``fabric`` keys are those of :class:`~simcore.specs.hardware.FabricSpec` (``oversubscription``,
    ``tiers``, ``topology``, ``switch_radix``, ``link``, ...); they replace the scenario's fabric, or the
    system's default fabric when the scenario names none.
    """
    reg = registry or default_registry()
    over = {k: v for k, v in (fabric or {}).items() if v is not None}
    if over:
        base = spec.fabric
        if base is None:
            try:
                base = reg.system(spec.system).fabric
            except SpecError as e:
                raise SpecError(e.problem, file=file, field="cluster.system") from None
        merged = validate(FabricSpec, {**base.model_dump(exclude_none=True), **over}, file, "cluster.fabric")
        spec = spec.model_copy(update={"fabric": merged})
    return resolve_cluster(spec, reg, file)


def topology_for(
    system: str,
    gpus: int | None = None,
    nodes: int | None = None,
    *,
    registry: Registry | None = None,
    **fabric: Any,
) -> Topology:
    """Build the topology of ``nodes`` systems (or ``gpus`` GPUs) of a named system.

    Extra keyword arguments override the system's default fabric (``oversubscription=2.0``,
    ``tiers=3``, ``topology="fat_tree"``, ``switch_radix=64``...).
    """
    reg = registry or default_registry()
    spec = validate(ClusterSpec, {"system": system, "gpus": gpus, "nodes": nodes}, None, "cluster")
    return build_topology(resolve_with_fabric(spec, reg, fabric), registry=reg)


__all__ = [
    "EDGE_KINDS",
    "NODE_KINDS",
    "Edge",
    "Node",
    "Topology",
    "build_topology",
    "resolve_with_fabric",
    "topology_for",
]
