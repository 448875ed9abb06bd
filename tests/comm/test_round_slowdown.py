"""One round of each collective on the graph, shared max-min fairly: the contention between concurrent
collectives without simulating every round (``flow.round_slowdown``)."""

from __future__ import annotations

import pytest

from simcore.comm.collectives import collective_cost
from simcore.comm.flow import (
    collective_flows,
    collective_time_flow,
    concurrent_collectives,
    data_parallel_groups,
    network_slowdown,
    round_slowdown,
)
from simcore.comm.groups import GroupPlacement
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


def test_ring_all_reduce_over_a_4to1_fat_tree_by_hand() -> None:
    """Four HGX H100 on a fat tree of radix-32 leaves (16 ports down: nodes 0-1 on leaf 0, 2-3 on leaf
    1), 4:1: a leaf's uplink is 16 x 50 GB/s / 4 = 200 GB/s, to the one spine. A TP 8 x DP 4 job: 8
    data-parallel rings (GPU j of every node), each 0 -> 1 -> 2 -> 3 -> 0, so each ring sends one flow up
    out of each leaf (1 -> 2, 3 -> 0) and the other two stay in their leaf. Alone a ring's flow gets its
    NIC's 50 GB/s; the 8 rings together put 8 x 50 = 400 GB/s on a 200 GB/s uplink: 25 GB/s each, and a
    round ends with its slowest flow, so the network term takes twice the non-blocking fabric's. The
    oversubscription is counted once: the rule of thumb (the NIC share / 4 once the ring leaves a leaf)
    is replaced by the flow model's factor, not multiplied by it (that gave 4 x 2 = 8x)."""
    over = topology_for("hgx-h100", nodes=4, oversubscription=4.0, topology="fat_tree", switch_radix=32)
    flat = topology_for("hgx-h100", nodes=4, oversubscription=1.0, topology="fat_tree", switch_radix=32)
    S, n = 1e9, 4
    rings = [("all_reduce", S, g) for g in data_parallel_groups(8, 1, n)]
    assert network_slowdown(over, rings) == pytest.approx([2.0] * 8, rel=1e-9)
    assert network_slowdown(over, rings[:1]) == [1.0]  # one ring alone: one flow per uplink
    assert network_slowdown(flat, rings) == [1.0] * 8
    group, cluster = GroupPlacement.of(n, 1), over.cluster
    free = collective_cost("all_reduce", S, group, flat.cluster)
    shared = collective_cost("all_reduce", S, group, cluster, contention=2.0)
    # the ring's wire: 2 (n - 1) / n x S through each GPU's NIC at 50 GB/s, then at 25 GB/s
    assert float(free.wire_network_s) == pytest.approx(2 * (n - 1) / n * S / 50e9, rel=0.05)
    assert float(shared.wire_network_s) == pytest.approx(2.0 * float(free.wire_network_s), rel=1e-12)
    assert float(shared.time_s) == pytest.approx(float(free.latency_s) + 2.0 * float(free.wire_network_s))
    # every round of all 8 rings simulated on the 4:1 graph (simpy) agrees
    assert concurrent_collectives(over, rings)[0] == pytest.approx(float(shared.time_s), rel=0.01)
    # the rule of thumb alone (no flow model): 4x, an upper bound that assumes every NIC sends up
    rule = collective_cost("all_reduce", S, group, cluster)
    assert float(rule.wire_network_s) == pytest.approx(4.0 * float(free.wire_network_s), rel=1e-12)


@pytest.mark.parametrize(
    ("kind", "over", "expect"), [("fat_tree", 4.0, 4.0), ("fat_tree", 2.0, 2.0), ("rail_optimized", 4.0, 1.0)]
)
def test_every_nic_of_a_leaf_sending_up(kind: str, over: float, expect: float) -> None:
    """32 HGX H100 on radix-16 switches: a fat tree puts one node (8 NICs) on each leaf, so each of a TP 8
    job's 8 rings sends one flow up out of every leaf: 8 x 50 GB/s onto 400 / over GB/s of uplinks, the
    oversubscription itself (spread over the leaf's equal-cost spines, not one hashed route per pair). A
    rail-optimised fabric keeps ring ``i`` on rail ``i``: one flow per rail leaf's uplinks, no slowdown."""
    topo = topology_for("hgx-h100", nodes=32, oversubscription=over, topology=kind, switch_radix=16)
    rings = [("all_reduce", 1e9, g) for g in data_parallel_groups(8, 1, 32)]
    assert network_slowdown(topo, rings) == pytest.approx([expect] * 8, rel=1e-9)


def test_disjoint_leaves_do_not_contend() -> None:
    topo = topology_for("hgx-h100", nodes=16, oversubscription=4.0, switch_radix=8)
    a = [n * 8 for n in range(0, 2)]
    b = [n * 8 for n in range(14, 16)]
    assert round_slowdown(topo, [("all_to_all", 1e8, a), ("all_to_all", 1e8, b)]) == [1.0, 1.0]


def _training(kind: str, over: float, tp: int = 8) -> dict:
    return {
        "kind": "training",
        "cluster": {
            "system": "hgx-h100", "gpus": 256,
            "fabric": {"topology": kind, "oversubscription": over, "switch_radix": 16},
        },
        "model": {"preset": "llama3-8b"},
        "training": {"micro_batch": 1, "global_batch": 256 // tp * 4, "precision": "bf16"},
        "parallel": {"tp": tp, "zero": 1},
        "runtime": {"stack": "megatron"},
    }  # fmt: skip


def test_predict_prices_data_parallel_contention_on_an_oversubscribed_fabric() -> None:
    """A fat tree's leaves carry all 8 data-parallel rings of a TP-8 job (one per GPU of a node): on an
    oversubscribed one the flow model slows the gradient reduction and the prediction says so; a
    rail-optimised fabric keeps each ring on its own rail (no contention), and a non-blocking one is
    priced as before."""
    from simcore.prediction import TrainingResult, predict
    from simcore.specs.resolve import scenario_from_dict

    def run(kind: str, over: float) -> TrainingResult:
        r = predict(scenario_from_dict(_training(kind, over)))
        assert isinstance(r, TrainingResult)
        return r

    fat, rail = run("fat_tree", 2.0), run("rail_optimized", 2.0)
    assert fat.breakdown["dp_comm"] > 2.0 * rail.breakdown["dp_comm"] > 0
    assert fat.step_time_s > rail.step_time_s
    assert any("data-parallel network flows at 1/" in n for n in fat.notes)
    # each rail's ring puts one flow on its leaf's uplinks: the NIC share, as on a non-blocking fabric
    assert any("data-parallel network flows at 1/1.00 " in n for n in rail.notes)
    flat = run("fat_tree", 1.0)
    assert not any("data-parallel network flows" in n for n in flat.notes)
    assert rail.breakdown["dp_comm"] == pytest.approx(flat.breakdown["dp_comm"], rel=1e-9)


def test_predict_counts_the_oversubscription_once() -> None:
    """The hand case above through ``predict`` (no overlap, DDP all-reduce): the exposed data-parallel
    seconds on the 4:1 fat tree are the non-blocking fabric's with the wire term doubled."""
    from simcore.prediction import TrainingResult, predict
    from simcore.specs.resolve import scenario_from_dict

    def dp_comm(over: float) -> float:
        d = {
            "kind": "training",
            "cluster": {
                "system": "hgx-h100", "nodes": 4,
                "fabric": {"topology": "fat_tree", "oversubscription": over, "switch_radix": 32},
            },
            "model": {"preset": "llama3-8b"},
            "training": {"micro_batch": 1, "global_batch": 16, "precision": "bf16"},
            "parallel": {"tp": 8, "zero": 0, "dp_overlap": False},
            "runtime": {"stack": "megatron"},
        }  # fmt: skip
        r = predict(scenario_from_dict(d))
        assert isinstance(r, TrainingResult)
        return r.breakdown["dp_comm"]

    free, shared = dp_comm(1.0), dp_comm(4.0)
    topo = topology_for("hgx-h100", nodes=4)
    lat = float(collective_cost("all_reduce", 1e9, GroupPlacement.of(4, 1), topo.cluster).latency_s)
    assert shared - lat == pytest.approx(2.0 * (free - lat), rel=1e-6)


def test_data_parallel_groups_inside_one_system_are_left_alone() -> None:
    from simcore.comm.flow import data_parallel_slowdown
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster, scenario_from_dict

    sc = scenario_from_dict({**_training("fat_tree", 4.0), "cluster": {"system": "hgx-h100", "gpus": 8}})
    cluster = resolve_cluster(sc.cluster, default_registry())
    assert data_parallel_slowdown(cluster, 2, 1, 4) is None
