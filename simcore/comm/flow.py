"""Flow-level network simulation: concurrent transfers share links max-min fairly (simpy).

Each transfer (:class:`Flow`) follows its path in a :class:`~simcore.comm.topology.Topology` (or an
explicit path). Whenever a flow starts or finishes, the rates of all active flows are recomputed by
progressive filling (max-min fairness): the link with the smallest fair share saturates first, its
flows are frozen at that share, and the rest fill up what remains. So two collectives through one NIC
each get half of it, an oversubscribed spine slows every flow that crosses it, and all-to-all traffic
congests the links it piles onto. The rate computation is numpy over a flat (flow, edge) incidence
list; simpy orders the events (starts after dependencies and latency, completions).

:func:`collective_flows` expands a collective into the per-step flows of its algorithm (rings with one
channel per GPU of the domain when the ring leaves the domain, as NCCL lays rings out on rail-optimised
nodes; pairwise all-to-all; point-to-point; NVLS through the switch). The flows carry the calibration of
the analytic model (their bytes are scaled so a flow alone on its links takes exactly the analytic wire
time, and each step waits the analytic latency per step), so with nothing shared the simulated time
equals :func:`simcore.comm.collectives.collective_cost` (a test holds them within 1 %).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy
from numpy.typing import NDArray

from simcore.comm.collectives import (
    ALGORITHMS,
    CollCost,
    CommProfile,
    collective_cost,
    link_rates,
    load_profile,
    normalize_op,
)
from simcore.comm.groups import GroupPlacement
from simcore.comm.topology import Edge, Topology, build_topology
from simcore.errors import SimcoreError
from simcore.specs.resolve import ClusterInfo

_TOL = 1e-9


@dataclass(frozen=True)
class Flow:
    """One transfer of ``nbytes`` from GPU ``src`` to GPU ``dst``.

    Attributes:
        src, dst: ranks (graph nodes ``("gpu", rank)``).
        nbytes: bytes to move.
        start: earliest start, seconds.
        latency: seconds between becoming ready and the first byte moving; ``None`` = the path latency.
        deps: indices of flows that must finish first.
        path: explicit directed edges (default: ``topo.path(src, dst)``).
    """

    src: int
    dst: int
    nbytes: float
    start: float = 0.0
    latency: float | None = None
    deps: tuple[int, ...] = ()
    path: tuple[Edge, ...] | None = None


def maxmin_rates(
    capacity: NDArray[np.float64], entry_flow: NDArray[np.int64], entry_edge: NDArray[np.int64], nflows: int
) -> NDArray[np.float64]:
    """Max-min fair rates (bytes/s) by progressive filling.

    ``entry_flow[k]`` crosses edge ``entry_edge[k]``; ``capacity[e]`` is edge ``e``'s bytes/s. Flows
    that cross no edge get ``inf``.
    """
    rate = np.full(nflows, np.inf)
    if entry_flow.size == 0:
        return rate
    # work on the edges actually used, renumbered 0..ne-1
    used_edges, ee = np.unique(entry_edge, return_inverse=True)
    rem = capacity[used_edges].astype(np.float64)
    ne = used_edges.shape[0]
    ef = entry_flow
    while ef.size:
        cnt = np.bincount(ee, minlength=ne)
        share = np.full(ne, np.inf)
        on = cnt > 0
        share[on] = np.maximum(rem[on], 0.0) / cnt[on]
        # Shares only grow as flows freeze, so an edge whose share is no larger than that of any edge
        # its flows cross is a bottleneck now: freeze all such edges' flows in one round.
        es = share[ee]
        fmin = np.full(nflows, np.inf)
        np.minimum.at(fmin, ef, es)
        emin = np.full(ne, np.inf)
        np.minimum.at(emin, ee, fmin[ef])
        local = on & (share <= emin * (1.0 + 1e-9))
        frozen_f = np.zeros(nflows, dtype=bool)
        frozen_f[ef[local[ee]]] = True
        rate[frozen_f] = fmin[frozen_f]
        frozen = frozen_f[ef]
        rem -= np.bincount(ee[frozen], weights=rate[ef[frozen]], minlength=ne)
        keep = ~frozen
        ef = ef[keep]
        ee = ee[keep]
    return rate


class _Sim:
    def __init__(self, topo: Topology, flows: Sequence[Flow]) -> None:
        self.topo = topo
        self.flows = list(flows)
        g = topo.graph
        edge_id: dict[Edge, int] = {}
        caps: list[float] = []
        lat_of: list[float] = []
        offs = [0]
        flat: list[int] = []
        path_cache: dict[tuple[int, int], tuple[list[int], float]] = {}
        for f in self.flows:
            if f.nbytes < 0 or not math.isfinite(f.nbytes):
                raise SimcoreError(f"flow {f.src}->{f.dst}: bytes must be finite and >= 0", field="nbytes")
            if f.path is not None:
                ids = []
                plat = 0.0
                for e in f.path:
                    if e not in edge_id:
                        d = g.edges[e]
                        edge_id[e] = len(caps)
                        caps.append(float(d["bandwidth"]))
                    ids.append(edge_id[e])
                    plat += float(g.edges[e].get("latency", 0.0))
            else:
                key = (f.src, f.dst)
                if key not in path_cache:
                    p = topo.path(f.src, f.dst)
                    ids = []
                    plat = 0.0
                    for e in p:
                        if e not in edge_id:
                            edge_id[e] = len(caps)
                            caps.append(float(g.edges[e]["bandwidth"]))
                        ids.append(edge_id[e])
                        plat += float(g.edges[e].get("latency", 0.0))
                    path_cache[key] = (ids, plat)
                ids, plat = path_cache[key]
            flat.extend(ids)
            offs.append(len(flat))
            lat_of.append(plat if f.latency is None else f.latency)
        self.cap = np.asarray(caps, dtype=np.float64)
        self.flat = np.asarray(flat, dtype=np.int64)
        self.off = np.asarray(offs, dtype=np.int64)
        self.lat = np.asarray(lat_of, dtype=np.float64)
        self.size = np.asarray([f.nbytes for f in self.flows], dtype=np.float64)
        self.remaining = self.size.copy()
        self.finish = np.full(len(self.flows), np.nan)
        self.active: list[int] = []
        self.env = simpy.Environment()
        self.done = [self.env.event() for _ in self.flows]
        self.wake: simpy.Event = self.env.event()
        self.dependents: list[list[int]] = [[] for _ in self.flows]
        self.waiting = np.zeros(len(self.flows), dtype=np.int64)
        for i, f in enumerate(self.flows):
            for j in f.deps:
                if not 0 <= j < len(self.flows) or j == i:
                    raise SimcoreError(f"flow {i}: dependency {j} is not another flow", field="deps")
                self.dependents[j].append(i)
            self.waiting[i] = len(f.deps)

    # incidence of the active set
    def _rates(self, act: NDArray[np.int64]) -> NDArray[np.float64]:
        lens = self.off[act + 1] - self.off[act]
        total = int(lens.sum())
        if total == 0:
            return np.full(act.shape[0], np.inf)
        local = np.repeat(np.arange(act.shape[0]), lens)
        starts = np.repeat(self.off[act], lens)
        within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        edges = self.flat[starts + within]
        return maxmin_rates(self.cap, local, edges, act.shape[0])

    def _ready(self, i: int) -> None:
        """Flow i's dependencies are done: start after its start time and latency."""
        delay = max(self.flows[i].start - self.env.now, 0.0) + float(self.lat[i])
        if delay <= 0.0:
            self._activate(i)
        else:
            ev = self.env.timeout(delay)
            ev.callbacks.append(functools.partial(self._activated, i))

    def _activated(self, i: int, _ev: Any) -> None:
        self._activate(i)

    def _activate(self, i: int) -> None:
        self.active.append(i)
        if not self.wake.triggered:
            self.wake.succeed()

    def _complete(self, i: int) -> None:
        self.finish[i] = self.env.now
        for j in self.dependents[i]:
            self.waiting[j] -= 1
            if self.waiting[j] == 0:
                self._ready(j)

    def _fabric(self) -> Any:
        env = self.env
        while True:
            if not self.active:
                self.wake = env.event()
                yield self.wake
                continue
            act = np.asarray(self.active, dtype=np.int64)
            rate = self._rates(act)
            rem = self.remaining[act]
            with np.errstate(divide="ignore", invalid="ignore"):
                ttf = np.where(rem <= 0, 0.0, rem / rate)
            dt = float(ttf.min())
            self.wake = env.event()
            t0 = env.now
            if dt > 0:
                yield env.any_of([env.timeout(dt), self.wake])
            el = env.now - t0
            moved = np.where(np.isinf(rate), rem, np.where(np.isinf(rate), 0.0, rate) * el)
            self.remaining[act] = rem - moved
            # flows whose remaining time falls under a relative tolerance are done
            left = self.remaining[act]
            fin = (left <= _TOL * np.maximum(self.size[act], 1.0)) | (ttf <= el * (1.0 + 1e-12))
            if fin.any():
                done_ids = act[fin].tolist()
                done_set = set(done_ids)
                self.active = [i for i in self.active if i not in done_set]
                for i in done_ids:
                    self.remaining[i] = 0.0
                    self._complete(i)

    def run(self) -> list[float]:
        self.env.process(self._fabric())
        for i in range(len(self.flows)):
            if self.waiting[i] == 0:
                self._ready(i)
        self.env.run()
        if np.isnan(self.finish).any():
            bad = int(np.flatnonzero(np.isnan(self.finish))[0])
            raise SimcoreError(f"flow {bad} never ran (circular dependencies?)", field="deps")
        return [float(x) for x in self.finish]


def simulate_flows(topo: Topology, flows: Sequence[Flow]) -> list[float]:
    """Completion time (seconds from 0) of every flow, links shared max-min fairly."""
    if not flows:
        return []
    return _Sim(topo, flows).run()


# ---------------------------------------------------------------------------------------------------
# Collectives as flows
# ---------------------------------------------------------------------------------------------------


def _domains_of(topo: Topology, ranks: Sequence[int]) -> list[list[int]]:
    order: dict[int, list[int]] = {}
    for r in ranks:
        dom = topo.nvlink_domain(r)[0]
        order.setdefault(dom, []).append(r)
    return list(order.values())


def collective_flows(
    topo: Topology,
    op: str,
    nbytes: float,
    ranks: Sequence[int],
    algorithm: str = "auto",
    profile: CommProfile | None = None,
    start: float = 0.0,
    dtype: str = "bf16",
    rounds: int | None = None,
) -> tuple[list[Flow], CollCost]:
    """Expand one collective over ``ranks`` into flows; returns them with the analytic cost they mirror.
    ``rounds``: a ring-type collective's first ``rounds`` rounds only (every round moves the same
    pattern, so one round is enough to see how links are shared).

    Ring-type collectives become ``steps`` rounds of one flow per rank and channel (each depending on
    the previous round's flow into its sender); with several domains there is one ring per GPU of the
    domain, each leaving the domain through a different GPU's NIC. All-to-all is one round of
    pairwise flows, send/recv one flow per rank, NVLS one flow to and one from the switch per rank.
    Tree and hierarchical choices are expanded as rings (the analytic cost is then the ring's).
    """
    opn = normalize_op(op)
    ranks = list(ranks)
    n = len(ranks)
    if n < 1 or len(set(ranks)) != n:
        raise SimcoreError("ranks must be distinct and non-empty", field="ranks")
    doms = _domains_of(topo, ranks)
    g = max(len(d) for d in doms)
    if any(len(d) != g for d in doms):
        raise SimcoreError(
            "every NVLink domain must hold the same number of the group's ranks", field="ranks"
        )
    group = GroupPlacement.of(n, g)
    cluster = topo.cluster
    prof = profile or load_profile(cluster.system.name).profile
    cost = collective_cost(opn, nbytes, group, cluster, algorithm, dtype, prof)
    algo = ALGORITHMS[int(cost.algorithm)]
    if n == 1:
        return [], cost
    flows, cost = _expand(topo, opn, nbytes, ranks, doms, g, algo, cost, prof, start, rounds)
    floor = prof.op_overhead.get(opn, 0.0)
    if floor > 0:
        # the per-call floor (host issue rate) as an empty flow that ends at start + floor
        flows.append(Flow(ranks[0], ranks[0], 0.0, start=start, latency=floor, path=()))
    return flows, cost


def _expand(
    topo: Topology,
    opn: str,
    nbytes: float,
    ranks: list[int],
    doms: list[list[int]],
    g: int,
    algo: str,
    cost: CollCost,
    prof: CommProfile,
    start: float,
    rounds: int | None = None,
) -> tuple[list[Flow], CollCost]:
    n = len(ranks)
    cluster = topo.cluster
    assert cost.latency_s is not None and cost.load_nvlink is not None and cost.load_network is not None
    assert cost.wire_nvlink_s is not None and cost.wire_network_s is not None
    lat = float(cost.latency_s)
    # Scale factors from bytes to "wire bytes": a lone flow at the rate the analytic model assumed
    # takes the analytic wire time of its class. The rates exclude nothing the graph models itself:
    # spine oversubscription is divided out here because the graph's spine links carry it.
    rates = link_rates(cluster, GroupPlacement.of(n, g))
    nv_bw = float(rates.nvlink)
    net_bw = float(rates.network)
    ln, lw = float(cost.load_nvlink), float(cost.load_network)
    k_nv = float(cost.wire_nvlink_s) * nv_bw / ln if ln > 0 else 1.0
    k_net = float(cost.wire_network_s) * net_bw / lw if lw > 0 else 1.0
    flows: list[Flow] = []
    multi = len(doms) > 1

    def wire(a: int, b: int, nb: float) -> float:
        return nb * (k_nv if topo.same_nvlink_domain(a, b) else k_net)

    if algo == "ring":
        if opn in ("all_reduce", "all_gather", "reduce_scatter"):
            steps = (2 if opn == "all_reduce" else 1) * (n - 1)
            chunk = nbytes / n
            chained = True
        else:  # broadcast / reduce: a pipelined chain, all links stream at once
            steps = 1
            chunk = nbytes
            chained = False
        nch = g if multi else 1
        rings: list[list[int]] = []
        for c in range(nch):
            order: list[int] = []
            for d in doms:
                order += d[c:] + d[:c] if multi else d
            rings.append(order)
        base = _base_latency(prof, cost)
        step_lat = (lat - base) / steps
        if rounds is not None:
            steps = min(steps, rounds)
        # Each round of a channel waits for the whole previous round of that channel (the analytic
        # model's step-by-step schedule; NCCL's chunk pipelining overlaps a little more).
        prev: list[tuple[int, ...]] = [() for _ in rings]
        for s in range(steps):
            for c, order in enumerate(rings):
                m = len(order)
                pairs = [(order[i], order[(i + 1) % m]) for i in range(m if chained else m - 1)]
                first = len(flows)
                for a, b in pairs:
                    flows.append(
                        Flow(
                            src=a,
                            dst=b,
                            nbytes=wire(a, b, chunk / nch),
                            start=start + (base if s == 0 else 0.0),
                            latency=step_lat if chained else lat - base,
                            deps=prev[c],
                        )
                    )
                prev[c] = tuple(range(first, len(flows)))
        return flows, cost
    if algo == "pairwise":
        per = nbytes / n
        for a in ranks:
            for b in ranks:
                if a != b:
                    flows.append(Flow(src=a, dst=b, nbytes=wire(a, b, per), start=start, latency=lat))
        return flows, cost
    if algo == "p2p":
        for i, a in enumerate(ranks):
            b = ranks[(i + 1) % n]
            flows.append(Flow(src=a, dst=b, nbytes=wire(a, b, nbytes), start=start, latency=lat))
        return flows, cost
    if algo == "nvls":
        for a in ranks:
            p = topo.path(a, ranks[0] if a != ranks[0] else ranks[1])
            up = (p[0],)
            down = ((p[0][1], p[0][0]),)
            flows.append(Flow(a, a, ln * k_nv, start=start, latency=lat, path=up))
            flows.append(Flow(a, a, ln * k_nv, start=start, latency=lat, path=down))
        return flows, cost
    if algo in ("tree", "hierarchical"):
        # Pipelined stages as concurrent streams: each rank streams its NVLink-stage load to the next
        # rank of its domain (or to the switch and back for NVLS) and its network-stage load to the
        # rank with the same local index in the next domain (its rail).
        nvls_inner = bool(cost.nvls_stage) if cost.nvls_stage is not None else False
        for di, d in enumerate(doms):
            nxt = doms[(di + 1) % len(doms)]
            for li, a in enumerate(d):
                if ln > 0 and len(d) > 1:
                    if nvls_inner:
                        p = topo.path(a, d[(li + 1) % len(d)])
                        flows.append(Flow(a, a, ln * k_nv, start=start, latency=lat, path=(p[0],)))
                        flows.append(
                            Flow(a, a, ln * k_nv, start=start, latency=lat, path=((p[0][1], p[0][0]),))
                        )
                    else:
                        flows.append(Flow(a, d[(li + 1) % len(d)], ln * k_nv, start=start, latency=lat))
                if lw > 0 and len(doms) > 1:
                    flows.append(Flow(a, nxt[li], lw * k_net, start=start, latency=lat))
        return flows, cost
    raise SimcoreError(f"no flow expansion for {opn} with {algo}", field="algorithm")


def _base_latency(prof: CommProfile, cost: CollCost) -> float:
    algo = ALGORITHMS[int(cost.algorithm)]
    proto = ("LL", "LL128", "Simple")[int(cost.protocol)]
    key = {"pairwise": "p2p"}.get(algo, algo)
    b = prof.base_latency.get(key)
    v = b.get(proto) if b is not None else None
    return float(v or 0.0)


def collective_time_flow(
    topo: Topology,
    op: str,
    nbytes: float,
    ranks: Sequence[int],
    algorithm: str = "auto",
    profile: CommProfile | None = None,
) -> float:
    """Seconds one collective takes in the flow simulation (alone on the fabric)."""
    flows, _ = collective_flows(topo, op, nbytes, ranks, algorithm, profile)
    return max(simulate_flows(topo, flows), default=0.0)


def concurrent_collectives(
    topo: Topology,
    jobs: Sequence[tuple[str, float, Sequence[int]]],
    algorithm: str = "auto",
    profile: CommProfile | None = None,
) -> list[float]:
    """Run several collectives ``(op, nbytes, ranks)`` at once; seconds until each one finishes."""
    all_flows: list[Flow] = []
    spans: list[tuple[int, int]] = []
    for op, nb, ranks in jobs:
        flows, _ = collective_flows(topo, op, nb, ranks, algorithm, profile)
        off = len(all_flows)
        all_flows += [
            Flow(f.src, f.dst, f.nbytes, f.start, f.latency, tuple(d + off for d in f.deps), f.path)
            for f in flows
        ]
        spans.append((off, len(all_flows)))
    fin = simulate_flows(topo, all_flows)
    return [max(fin[a:b], default=0.0) for a, b in spans]


def _one_round(
    topo: Topology,
    jobs: Sequence[tuple[str, float, Sequence[int]]],
    algorithm: str,
    profile: CommProfile | None,
) -> tuple[list[Flow], list[tuple[int, int]], NDArray[np.int64], NDArray[np.int64], list[Edge]]:
    """One round of each collective's moving flows (:func:`collective_flows` with ``rounds=1``), the span
    of each collective's flows, and the (flow, edge) incidence of them all over the listed edges."""
    flows: list[Flow] = []
    spans: list[tuple[int, int]] = []
    for op, nb, ranks in jobs:
        fl, _ = collective_flows(topo, op, nb, ranks, algorithm, profile, rounds=1)
        off = len(flows)
        flows += [f for f in fl if f.nbytes > 0 and f.src != f.dst]
        spans.append((off, len(flows)))
    edges: dict[Edge, int] = {}
    ent_f: list[int] = []
    ent_e: list[int] = []
    for i, f in enumerate(flows):
        for e in f.path if f.path is not None else topo.path(f.src, f.dst):
            ent_f.append(i)
            ent_e.append(edges.setdefault(e, len(edges)))
    return flows, spans, np.asarray(ent_f, dtype=np.int64), np.asarray(ent_e, dtype=np.int64), list(edges)


def round_slowdown(
    topo: Topology,
    jobs: Sequence[tuple[str, float, Sequence[int]]],
    algorithm: str = "auto",
    profile: CommProfile | None = None,
) -> list[float]:
    """How much slower each collective ``(op, nbytes, ranks)`` moves its bytes when all of ``jobs`` run at
    once on ``topo`` than when it runs alone there (>= 1).

    One round of each (:func:`collective_flows` with ``rounds=1``: a ring's rounds all move the same
    pattern; all-to-all, point-to-point and tree expansions are one round already) is laid on the graph,
    alone and then together with the others, the links shared max-min fairly (:func:`maxmin_rates`); a
    round ends with its slowest flow, so a job's slowdown is ``max(bytes / rate together) / max(bytes /
    rate alone)``. Latencies are left out: they do not depend on the traffic."""
    flows, spans, ef, ee, edges = _one_round(topo, jobs, algorithm, profile)
    if not flows:
        return [1.0 for _ in jobs]
    cap = np.array([topo.graph.edges[e]["bandwidth"] for e in edges], dtype=np.float64)
    shared = maxmin_rates(cap, ef, ee, len(flows))
    nbytes = np.array([f.nbytes for f in flows])
    out = []
    for a, b in spans:
        if a == b:
            out.append(1.0)
            continue
        mine = (ef >= a) & (ef < b)
        own = maxmin_rates(cap, ef[mine] - a, ee[mine], b - a)
        alone = float(np.max(nbytes[a:b] / own))
        together = float(np.max(nbytes[a:b] / shared[a:b]))
        out.append(max(together / alone, 1.0) if alone > 0 else 1.0)
    return out


FABRIC_EDGE_KINDS = ("spine", "core")
"""Switch-to-switch edges of the scale-out fabric: what the analytic collective model does not see
(its network rate is the GPU's share of its node's NICs)."""
_TIER = {"leaf": 0, "spine": 1, "core": 2}


def network_slowdown(
    topo: Topology,
    jobs: Sequence[tuple[str, float, Sequence[int]]],
    algorithm: str = "auto",
    profile: CommProfile | None = None,
) -> list[float]:
    """How many times slower each collective's network flows (those between NVLink domains) move with
    all of ``jobs`` on ``topo`` than at the rate the analytic model gives them, the GPU's NIC share
    (>= 1; 1 for a collective with no network flow).

    One round of each (as :func:`round_slowdown`) is laid on the graph: together, links shared max-min
    fairly; and the collective alone with the fabric's switch-to-switch links (:data:`FABRIC_EDGE_KINDS`)
    unlimited, which leaves a network flow its NIC share (NICs, PCIe and NVLink still shared among its own
    flows as the analytic loads count them). A switch's links to its equal-cost upper switches count as
    one link of their summed bandwidth, up and down: traffic spread evenly over them (adaptive routing, or
    InfiniBand's destination-based fat-tree routes on shift patterns such as rings), not the graph's one
    hashed route per pair. The factor is ``max(bytes / rate together) / max(bytes / rate unloaded)`` over
    the network flows. It is the whole of what oversubscribed uplinks cost: the collective's own flows
    crossing one leaf's uplinks and the other collectives' alike. :func:`simcore.comm.collectives.link_rates`
    divides the NIC share by it (``contention=``) in place of its rule of thumb for oversubscription
    (docs/parallelism.md, Contention on an oversubscribed fabric)."""
    flows, spans, ef, ee, edges = _one_round(topo, jobs, algorithm, profile)
    if not flows:
        return [1.0 for _ in jobs]
    g = topo.graph
    # a switch's equal-cost links up (and down) as one link of their summed bandwidth
    links: dict[Any, int] = {}
    cap_of: list[float] = []
    fabric: list[bool] = []
    of_edge = np.empty(len(edges), dtype=np.int64)
    for i, (u, v) in enumerate(edges):
        d = g.edges[u, v]
        on_fabric = d.get("kind") in FABRIC_EDGE_KINDS
        key = (("up", u) if _TIER[u[0]] < _TIER[v[0]] else ("down", v)) if on_fabric else (u, v)
        if key not in links:
            links[key] = len(cap_of)
            fabric.append(on_fabric)
            if not on_fabric:
                cap_of.append(float(d["bandwidth"]))
            elif key[0] == "up":
                cap_of.append(
                    sum(
                        float(b)
                        for _, w, b in g.out_edges(u, data="bandwidth")
                        if _TIER.get(w[0], -1) > _TIER[u[0]]
                    )
                )
            else:
                cap_of.append(
                    sum(
                        float(b)
                        for w, _, b in g.in_edges(v, data="bandwidth")
                        if _TIER.get(w[0], -1) > _TIER[v[0]]
                    )
                )
        of_edge[i] = links[key]
    cap = np.asarray(cap_of)
    free = np.where(fabric, np.inf, cap)
    ee = of_edge[ee]
    shared = maxmin_rates(cap, ef, ee, len(flows))
    nbytes = np.array([f.nbytes for f in flows])
    net = np.array([not topo.same_nvlink_domain(f.src, f.dst) for f in flows])
    out = []
    for a, b in spans:
        sel = net[a:b]
        if not sel.any():
            out.append(1.0)
            continue
        mine = (ef >= a) & (ef < b)
        own = maxmin_rates(free, ef[mine] - a, ee[mine], b - a)
        unloaded = float(np.max((nbytes[a:b] / own)[sel]))
        together = float(np.max((nbytes[a:b] / shared[a:b])[sel]))
        out.append(max(together / unloaded, 1.0) if unloaded > 0 else 1.0)
    return out


def data_parallel_groups(tp: int, cp: int, dp: int, pp: int = 1) -> list[list[int]]:
    """The data-parallel groups of a Megatron layout (rank order tp, cp, dp, pp: group ``(j, p)`` holds
    ranks ``j + k tp cp + p tp cp dp`` for ``k < dp``), stage by stage (``tp x cp`` groups each), the
    first ``pp`` stages."""
    width = tp * cp
    return [[j + k * width + p * width * dp for k in range(dp)] for p in range(pp) for j in range(width)]


ROUND_BYTES = 1e9
"""Bytes of the all-reduce whose one round :func:`data_parallel_contention` lays on the graph (the factor
is a ratio of rates, the same for any size the bandwidth bounds)."""


def data_parallel_contention(topo: Topology, groups: Sequence[Sequence[int]]) -> float:
    """The network slowdown (:func:`network_slowdown`, >= 1) of the slowest of a job's data-parallel
    ``groups`` (ranks of ``topo``) all reducing at once: every group of every pipeline stage
    (:func:`data_parallel_groups`), the worst case of the stages' reductions coinciding."""
    calls = [("all_reduce", ROUND_BYTES, g) for g in groups if len(g) > 1]
    return max(network_slowdown(topo, calls), default=1.0)


def data_parallel_slowdown(cluster: ClusterInfo, tp: int, cp: int, dp: int, pp: int = 1) -> float | None:
    """:func:`data_parallel_contention` of a Megatron layout on ``cluster`` (its ranks from 0, every
    stage's groups); ``None`` where the groups stay inside one system (no network flow to price)."""
    width = tp * cp
    if dp <= 1 or width * dp <= cluster.gpus_per_node:
        return None
    return data_parallel_contention(build_topology(cluster), data_parallel_groups(tp, cp, dp, pp))


__all__ = [
    "Flow",
    "collective_flows",
    "collective_time_flow",
    "concurrent_collectives",
    "data_parallel_contention",
    "data_parallel_groups",
    "data_parallel_slowdown",
    "maxmin_rates",
    "network_slowdown",
    "round_slowdown",
    "simulate_flows",
]
