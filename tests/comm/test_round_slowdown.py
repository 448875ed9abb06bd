"""One round of each collective on the graph, shared max-min fairly: the contention between concurrent
collectives without simulating every round (``flow.round_slowdown``)."""

from __future__ import annotations

import pytest

from simcore.comm.flow import collective_flows, collective_time_flow, concurrent_collectives, round_slowdown
from simcore.comm.topology import topology_for


def test_one_round_of_a_ring() -> None:
    topo = topology_for("hgx-h100", nodes=4)
    ranks = [n * 8 for n in range(4)]
    full, _ = collective_flows(topo, "all_reduce", 1e8, ranks)
    one, _ = collective_flows(topo, "all_reduce", 1e8, ranks, rounds=1)
    moving = [f for f in one if f.nbytes > 0]
    assert len(moving) == 4 and all(not f.deps for f in moving)
    assert len([f for f in full if f.nbytes > 0]) == 2 * 3 * 4  # 2 (n - 1) rounds of n flows


def test_a_collective_alone_is_not_slowed() -> None:
    topo = topology_for("hgx-h100", nodes=8, oversubscription=4.0, switch_radix=8)
    assert round_slowdown(topo, [("all_to_all", 1e8, [n * 8 for n in range(8)])]) == [1.0]


@pytest.mark.parametrize(
    ("kind", "over", "jobs"),
    [
        # two jobs' all-to-alls on alternate nodes share the leaves' uplinks of a rail-optimised fabric
        ("rail_optimized", 4.0, [("all_to_all", 6.4e7, list(range(0, 128, 16))), ("all_to_all", 6.4e7, list(range(8, 128, 16)))]),
        # one job's 8 data-parallel rings (one per GPU of a node) on a fat tree
        ("fat_tree", 2.0, [("all_reduce", 2.5e8, [n * 8 + i for n in range(16)]) for i in range(8)]),
    ],
)  # fmt: skip
def test_round_slowdown_matches_the_full_flow_simulation(kind: str, over: float, jobs: list) -> None:
    """The one-round estimate against every round simulated (simpy): within 5 %."""
    topo = topology_for("hgx-h100", nodes=16, oversubscription=over, topology=kind, switch_radix=8)
    est = round_slowdown(topo, jobs)
    together = concurrent_collectives(topo, jobs)
    for (op, nb, ranks), e, t in zip(jobs, est, together, strict=True):
        alone = collective_time_flow(topo, op, nb, ranks)
        assert e > 1.05
        assert e == pytest.approx(t / alone, rel=0.05)


def test_disjoint_leaves_do_not_contend() -> None:
    topo = topology_for("hgx-h100", nodes=16, oversubscription=4.0, switch_radix=8)
    a = [n * 8 for n in range(0, 2)]
    b = [n * 8 for n in range(14, 16)]
    assert round_slowdown(topo, [("all_to_all", 1e8, a), ("all_to_all", 1e8, b)]) == [1.0, 1.0]
