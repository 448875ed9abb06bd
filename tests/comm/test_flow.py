"""Flow-level simulation: max-min sharing, dependencies, agreement with the analytic model."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.comm.collectives import collective_cost
from simcore.comm.flow import (
    Flow,
    collective_flows,
    collective_time_flow,
    concurrent_collectives,
    maxmin_rates,
    simulate_flows,
)
from simcore.comm.groups import GroupPlacement
from simcore.comm.topology import Topology, topology_for


@pytest.fixture(scope="module")
def two_nodes() -> Topology:
    return topology_for("hgx-h200", nodes=2)


def _ref_maxmin(cap: np.ndarray, ef: np.ndarray, ee: np.ndarray, nf: int) -> np.ndarray:
    """Textbook progressive filling: one bottleneck level per round."""
    rate = np.full(nf, np.inf)
    rem = cap.astype(float).copy()
    live = np.ones(len(ef), bool)
    while live.any():
        cnt = np.bincount(ee[live], minlength=len(cap))
        share = np.where(cnt > 0, rem / np.maximum(cnt, 1), np.inf)
        lv = share.min()
        fl = np.unique(ef[live & (share <= lv * (1 + 1e-12))[ee]])
        rate[fl] = lv
        newly = live & np.isin(ef, fl)
        rem -= np.bincount(ee[newly], weights=rate[ef[newly]], minlength=len(cap))
        live &= ~newly
    return rate


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_maxmin_matches_textbook_filling(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ne, nf = int(rng.integers(1, 25)), int(rng.integers(1, 40))
    cap = rng.uniform(1, 10, ne)
    ef: list[int] = []
    ee: list[int] = []
    for f in range(nf):
        k = int(rng.integers(1, min(ne, 4) + 1))
        es = rng.choice(ne, k, replace=False)
        ef += [f] * k
        ee += list(es)
    a = maxmin_rates(cap, np.array(ef), np.array(ee), nf)
    b = _ref_maxmin(cap, np.array(ef), np.array(ee), nf)
    np.testing.assert_allclose(a, b, rtol=1e-7)
    # feasibility: no edge over capacity
    load = np.bincount(np.array(ee), weights=a[np.array(ef)], minlength=ne)
    assert np.all(load <= cap * (1 + 1e-9))


def test_single_flow_and_dependency(two_nodes: Topology) -> None:
    t = two_nodes
    f0 = Flow(0, 8, 1e9, latency=2e-6)
    bw = t.bottleneck_bandwidth(0, 8)
    fin = simulate_flows(t, [f0, Flow(8, 0, 5e8, latency=1e-6, deps=(0,))])
    assert fin[0] == pytest.approx(2e-6 + 1e9 / bw, rel=1e-9)
    assert fin[1] == pytest.approx(fin[0] + 1e-6 + 5e8 / t.bottleneck_bandwidth(8, 0), rel=1e-9)
    # path latency by default
    fin = simulate_flows(t, [Flow(0, 1, 1e6)])
    assert fin[0] == pytest.approx(t.path_latency(0, 1) + 1e6 / t.bottleneck_bandwidth(0, 1), rel=1e-9)


def test_two_flows_share_a_link_fairly(two_nodes: Topology) -> None:
    bw = two_nodes.bottleneck_bandwidth(0, 8)
    fin = simulate_flows(two_nodes, [Flow(0, 8, 1e9, latency=0.0), Flow(0, 8, 5e8, latency=0.0)])
    # both at bw/2 until the small one ends at 1e9/bw, then the big one alone
    assert fin[1] == pytest.approx(2 * 5e8 / bw, rel=1e-9)
    assert fin[0] == pytest.approx(fin[1] + 5e8 / bw, rel=1e-9)


CASES = [
    ("hgx-h200", 1, list(range(8))),
    ("hgx-h200", 1, [0, 3, 5]),
    ("hgx-h200", 2, list(range(16))),
    ("hgx-h200", 4, [0, 8, 16, 24]),
    ("hgx-h200", 4, [0, 1, 8, 9, 16, 17, 24, 25]),
]


@pytest.mark.parametrize(("system", "nodes", "ranks"), CASES)
@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"]
)
def test_flow_equals_analytic_uncontended(system: str, nodes: int, ranks: list[int], op: str) -> None:
    topo = topology_for(system, nodes=nodes)
    for S in (3e4, 2e8):
        flows, cost = collective_flows(topo, op, S, ranks)
        t_flow = max(simulate_flows(topo, flows))
        assert t_flow == pytest.approx(float(cost.time_s), rel=0.01)


def test_two_all_reduces_sharing_a_nic_take_twice_as_long() -> None:
    # 4 NICs for 8 GPUs: GPUs 0 and 1 share NIC 0 (on both nodes)
    topo = topology_for("hgx-h200", nodes=2, nics_per_node=4)
    assert topo.nic_of(0) == topo.nic_of(1)
    S = 1e9
    a, b = [0, 8], [1, 9]
    alone = collective_time_flow(topo, "all_reduce", S, a)
    both = concurrent_collectives(topo, [("all_reduce", S, a), ("all_reduce", S, b)])
    assert both[0] / alone == pytest.approx(2.0, rel=0.05)
    # different NICs: no slowdown
    sep = concurrent_collectives(topo, [("all_reduce", S, [0, 8]), ("all_reduce", S, [2, 10])])
    assert sep[0] / alone == pytest.approx(1.0, rel=1e-6)


def test_oversubscribed_spine_slows_all_to_all() -> None:
    # fat tree of radix-16 switches: one node per leaf, so every inter-node byte crosses a spine
    ranks = [0, 8, 16, 24]
    times = []
    for over in (1.0, 4.0):
        topo = topology_for("hgx-h200", nodes=4, topology="fat_tree", switch_radix=16, oversubscription=over)
        jobs = [("all_to_all", 4e8, [r + k for r in ranks]) for k in range(8)]
        times.append(max(concurrent_collectives(topo, jobs)))
    assert times[1] > 1.5 * times[0]


def test_all_to_all_congests_more_than_ring() -> None:
    # same bytes per rank; pairwise all-to-all across 4 nodes piles onto NICs, ring all-gather does not
    topo = topology_for("hgx-h200", nodes=4)
    ranks = list(range(32))
    a2a = collective_time_flow(topo, "all_to_all", 1e9, ranks)
    ag = collective_time_flow(topo, "all_gather", 1e9, ranks)
    assert a2a > 2 * ag


def test_analytic_grid_matches_flow_for_one_placement() -> None:
    topo = topology_for("hgx-h200", nodes=2)
    t_an = collective_cost("all_gather", 1e8, GroupPlacement.of(16, 8), topo.cluster).time_s
    assert collective_time_flow(topo, "all_gather", 1e8, list(range(16))) == pytest.approx(
        float(t_an), rel=0.01
    )


def test_thousand_flows_are_fast() -> None:
    topo = topology_for("hgx-h200", nodes=32)
    rng = np.random.default_rng(0)
    n = topo.gpus
    src = rng.integers(0, n, 1000)
    dst = (src + rng.integers(1, n, 1000)) % n
    flows = [
        Flow(int(a), int(b), float(s)) for a, b, s in zip(src, dst, rng.uniform(1e6, 1e8, 1000), strict=True)
    ]
    t0 = time.perf_counter()
    fin = simulate_flows(topo, flows)
    assert time.perf_counter() - t0 < 4.0
    assert len(fin) == 1000 and min(fin) > 0


@pytest.mark.parametrize("algorithm", ["tree", "hierarchical", "ring"])
def test_flow_equals_analytic_for_forced_algorithms(algorithm: str) -> None:
    topo = topology_for("hgx-h200", nodes=3)
    ranks = list(range(24))
    for S in (1e5, 1e9):
        flows, cost = collective_flows(topo, "all_reduce", S, ranks, algorithm=algorithm)
        assert cost.algorithm_names().item() == algorithm
        assert max(simulate_flows(topo, flows)) == pytest.approx(float(cost.time_s), rel=0.01)
