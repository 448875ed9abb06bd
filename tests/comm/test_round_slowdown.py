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
    assert any("data-parallel collectives" in n for n in fat.notes)
    assert not any("data-parallel collectives" in n for n in rail.notes)
    flat = run("fat_tree", 1.0)
    assert not any("data-parallel collectives" in n for n in flat.notes)


def test_data_parallel_groups_inside_one_system_do_not_contend() -> None:
    from simcore.comm.flow import data_parallel_slowdown
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster, scenario_from_dict

    sc = scenario_from_dict({**_training("fat_tree", 4.0), "cluster": {"system": "hgx-h100", "gpus": 8}})
    cluster = resolve_cluster(sc.cluster, default_registry())
    assert data_parallel_slowdown(cluster, 2, 1, 4) == 1.0
