"""Cluster topologies: NVLink domains, rail-optimised / fat-tree fabrics, routing, flows, CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.cli import main
from simcore.comm.topology import Topology, build_topology, resolve_with_fabric, topology_for
from simcore.errors import SpecError
from simcore.specs.registry import Registry, registry, set_user_dirs
from simcore.specs.resolve import cluster_for
from simcore.specs.scenario import ClusterSpec

DATA = Path(__file__).parent / "data"
GB = 1e9


@pytest.fixture(scope="module")
def reg() -> Registry:
    """Built-in specs plus the fixtures in tests/comm/data (which replace same-named built-ins)."""
    return registry([DATA])


def topo(
    reg: Registry, system: str, nodes: int | None = None, gpus: int | None = None, **fabric: object
) -> Topology:
    return topology_for(system, gpus=gpus, nodes=nodes, registry=reg, **fabric)


def kinds(t: Topology, path: list[tuple[tuple[object, ...], tuple[object, ...]]]) -> list[str]:
    return [t.graph.edges[e]["kind"] for e in path]


def via(t: Topology, path: list[tuple[tuple[object, ...], tuple[object, ...]]]) -> list[str]:
    """Kinds of the nodes a path goes through (without its two ends)."""
    return [t.graph.nodes[v]["kind"] for _, v in path[:-1]]


# ---------------------------------------------------------------------------------- inside a system


@pytest.mark.parametrize("system", ["hgx-h100", "hgx-h200"])
def test_hgx_any_two_gpus_one_nvswitch_hop_at_450(reg: Registry, system: str) -> None:
    t = topo(reg, system, nodes=1)
    assert t.gpus == 8
    for a in range(8):
        assert t.nvlink_domain(a) == list(range(8))
        for b in range(8):
            if a == b:
                assert t.path(a, b) == []
                continue
            p = t.path(a, b)
            assert via(t, p) == ["nvswitch"]
            assert kinds(t, p) == ["nvswitch", "nvswitch"]
            assert t.bottleneck_bandwidth(a, b) == pytest.approx(450 * GB)
            assert t.same_nvlink_domain(a, b)
    # the NVSwitch hop costs the switch's latency, once
    assert t.path_latency(0, 5) == pytest.approx(t.cluster.nvswitch.latency)  # type: ignore[union-attr]


def test_nvl72_all_72_one_hop_at_900(reg: Registry) -> None:
    t = topo(reg, "gb200-nvl72", nodes=1)
    assert t.gpus == 72
    assert len(t.nvlink_domains()) == 1
    for a in range(72):
        for b in range(72):
            if a != b:
                p = t.path(a, b)
                assert len(p) == 2 and t.graph.nodes[p[0][1]]["kind"] == "nvswitch"
                assert t.bottleneck_bandwidth(a, b) == pytest.approx(900 * GB)
    s = t.summary()
    assert s["nvswitch_planes"] == 1 and s["nvswitch_chips"] == 18
    assert s["nics"] == 0 and s["leaves"] == 0
    # fixture's host link is NVLink-C2C: GPU-Grace edges are c2c at 450 GB/s, 2 GPUs per Grace
    cpu = ("cpu", 0, 0)
    gpus_on_cpu = sorted(v[1] for v in t.graph.successors(cpu) if v[0] == "gpu")
    assert gpus_on_cpu == [0, 1]
    assert t.edge(("gpu", 0), cpu)["kind"] == "c2c"
    assert t.edge(("gpu", 0), cpu)["bandwidth"] == pytest.approx(450 * GB)


def test_builtin_nvl72_is_one_domain_at_900(reg: Registry) -> None:
    t = topology_for("gb200-nvl72", nodes=1)  # the shipped spec, not the fixture
    assert t.bottleneck_bandwidth(0, 71) == pytest.approx(900 * GB)
    assert t.hops(3, 70) == 2


def test_single_system_bisection_is_half_the_gpus_nvlink(reg: Registry) -> None:
    # 4 GPUs on each side, each with 450 GB/s into the switch plane
    assert topo(reg, "hgx-h100", nodes=1).bisection_bandwidth() == pytest.approx(4 * 450 * GB)
    assert topo(reg, "gb200-nvl72", nodes=1).bisection_bandwidth() == pytest.approx(36 * 900 * GB)


def test_no_nvswitch_full_mesh_and_host_between_domains(reg: Registry) -> None:
    # pcie-pairs: 8 GPUs, NVLink bridges in pairs (300 GB/s), 2 sockets, PCIe gen5 64 GB/s
    t = topo(reg, "pcie-pairs", nodes=1)
    assert t.nvlink_domain(5) == [4, 5]
    assert kinds(t, t.path(4, 5)) == ["nvlink"]
    assert t.bottleneck_bandwidth(4, 5) == pytest.approx(300 * GB)
    assert via(t, t.path(0, 2)) == ["cpu"]  # same socket
    assert via(t, t.path(0, 6)) == ["cpu", "cpu"]  # across sockets
    assert t.bottleneck_bandwidth(0, 6) == pytest.approx(64 * GB)


def test_subset_of_a_system_and_partial_last_system(reg: Registry) -> None:
    t = topo(reg, "hgx-h100", gpus=4)
    assert t.gpus == 4 and t.systems == 1 and t.nvlink_domain(0) == [0, 1, 2, 3]
    # GPUs spread evenly over the systems (ClusterInfo.gpus_per_node): 6 + 6, not 8 + 4
    t = topo(reg, "hgx-h100", nodes=2, gpus=12)
    assert t.systems == 2 and t.nvlink_domain(9) == [6, 7, 8, 9, 10, 11]
    assert t.system_of(5) == 0 and t.system_of(6) == 1
    assert via(t, t.path(5, 6))[0] == "nic"
    with pytest.raises(SpecError, match="outside"):
        t.gpu(12)


def test_part_used_nvl72_racks() -> None:
    """256 GB200 GPUs (built-in spec): 4 racks of 64 (16 of each rack's 18 trays); NVLink within a rack."""
    t = topology_for("gb200-nvl72", gpus=256)
    assert t.systems == 4 and t.cluster.gpus_per_node == 64
    assert t.nvlink_domain(70) == list(range(64, 128))
    assert t.system_of(63) == 0 and t.system_of(64) == 1
    assert via(t, t.path(0, 63)) == ["nvswitch"]
    assert "nic" in via(t, t.path(63, 64))


# ---------------------------------------------------------------------------------- across systems


def test_same_rail_stays_on_the_leaf_other_rail_crosses_a_spine(reg: Registry) -> None:
    t = topo(reg, "hgx-h100", nodes=2)
    same_rail = t.path(3, 8 + 3)
    assert via(t, same_rail) == ["nic", "leaf", "nic"]
    assert kinds(t, same_rail) == ["pcie", "nic", "nic", "pcie"]
    other_rail = t.path(3, 8 + 4)
    assert via(t, other_rail) == ["nic", "leaf", "spine", "leaf", "nic"]
    for b in (11, 12):
        assert t.bottleneck_bandwidth(3, b) == pytest.approx(50 * GB)  # NDR 400 Gb/s NIC
    fab = t.cluster.fabric_link.latency
    pcie = reg.link("pcie5").latency
    assert t.path_latency(3, 11) == pytest.approx(2 * pcie + fab)
    assert t.path_latency(3, 12) == pytest.approx(2 * pcie + 3 * fab)


def test_ecmp_is_deterministic_and_spreads_over_spines(reg: Registry) -> None:
    t1 = topo(reg, "hgx-h100", nodes=4)
    t2 = topo(reg, "hgx-h100", nodes=4)
    used: Counter[tuple[object, ...]] = Counter()
    for a in range(8):
        for b in range(8, 32):
            p = t1.path(a, b)
            assert p == t2.path(a, b)
            used.update(v for _, v in p if v[0] == "spine")
    assert len(used) == t1.summary()["spines"] > 1


def test_oversubscription_halves_leaf_uplinks(reg: Registry) -> None:
    def uplink(t: Topology) -> dict[tuple[object, ...], float]:
        g = t.graph
        return {
            leaf: sum(g.edges[leaf, s]["bandwidth"] for s in g.successors(leaf) if s[0] == "spine")
            for leaf in g.nodes
            if leaf[0] == "leaf"
        }

    one = uplink(topo(reg, "hgx-h100", nodes=128))
    two = uplink(topo(reg, "hgx-h100", nodes=128, oversubscription=2))
    assert one.keys() == two.keys() and len(one) == 32  # 8 rails x 4 groups of 32 nodes
    for leaf, bw in one.items():
        assert bw == pytest.approx(32 * 50 * GB)  # radix 64: 32 ports down, 32 up at 400 Gb/s
        assert two[leaf] == pytest.approx(bw / 2)
    # bisection of 128 nodes: 64 nodes x 8 NICs x 50 GB/s non-blocking; 2:1 halves it
    # (the 16 leaves of one half have 800 GB/s of uplinks each)
    assert topo(reg, "hgx-h100", nodes=128).bisection_bandwidth() == pytest.approx(512 * 50 * GB)
    assert topo(reg, "hgx-h100", nodes=128, oversubscription=2).bisection_bandwidth() == pytest.approx(
        16 * 800 * GB
    )


def test_ring_over_two_nodes_puts_one_flow_on_the_boundary_nics(reg: Registry) -> None:
    t = topo(reg, "hgx-h100", nodes=2)
    flows = t.links_crossed(range(16), "ring")
    # 14 flows stay on NVSwitch; 7->8 leaves by NIC 7 of node 0 and enters by NIC 0 of node 1,
    # 15->0 leaves by NIC 7 of node 1 and enters by NIC 0 of node 0
    per_nic_out = {nic: flows.get((nic, leaf), 0) for nic, leaf in t._nic_leaf.items()}
    per_nic_in = {nic: flows.get((leaf, nic), 0) for nic, leaf in t._nic_leaf.items()}
    expect_out = {("nic", 0, 7): 1, ("nic", 1, 7): 1}
    expect_in = {("nic", 1, 0): 1, ("nic", 0, 0): 1}
    for nic in per_nic_out:
        assert per_nic_out[nic] == expect_out.get(nic, 0), nic
        assert per_nic_in[nic] == expect_in.get(nic, 0), nic
    sw_out = {r: flows.get((("gpu", r), t._rank_switch[r]), 0) for r in range(16)}
    assert sw_out == {r: 0 if r in (7, 15) else 1 for r in range(16)}
    assert sum(1 for e in flows if e[1][0] == "spine") == 2  # rail 7 -> rail 0 twice


def test_all_to_all_counts_every_ordered_pair(reg: Registry) -> None:
    t = topo(reg, "hgx-h100", nodes=1)
    flows = t.links_crossed(range(8), "all_to_all")
    # every GPU sends 7 flows into the switch plane and receives 7
    assert all(n == 7 for n in flows.values()) and len(flows) == 16
    with pytest.raises(SpecError):
        t.links_crossed(range(8), "tree")  # type: ignore[arg-type]


def test_fat_tree_puts_a_node_on_one_leaf(reg: Registry) -> None:
    t = topo(reg, "hgx-h100", nodes=8, topology="fat_tree")
    leaves = {t._nic_leaf[t.nic_of(r)] for r in range(8)}  # type: ignore[index]
    assert len(leaves) == 1
    assert t.summary()["leaves"] == 2  # 32 down ports hold 4 nodes of 8 NICs
    assert via(t, t.path(0, 8 + 5)) == ["nic", "leaf", "nic"]  # node 1 shares the leaf, any rail
    assert "spine" in via(t, t.path(0, 32 + 5))  # node 4 is on the other leaf


def test_shared_nics(reg: Registry) -> None:
    t = topo(reg, "hgx-h100-4nic", nodes=2)
    assert t.nic_of(0) == t.nic_of(1) == ("nic", 0, 0)
    assert t.nic_of(7) == ("nic", 0, 3)
    assert t.summary()["nics"] == 8
    assert t.bisection_bandwidth() == pytest.approx(4 * 50 * GB)


def test_three_tiers(reg: Registry) -> None:
    # radix 8: 4 nodes per rail group; 16 nodes -> 4 groups x 8 rails = 32 leaves, pods of 4 leaves
    t = topo(reg, "hgx-h100", nodes=16, switch_radix=8, tiers=3)
    s = t.summary()
    assert s["fabric_tiers"] == 3 and s["leaves"] == 32 and not s["notes"]
    assert via(t, t.path(0, 8 + 1)) == ["nic", "leaf", "spine", "leaf", "nic"]  # same pod
    far = t.path(0, 15 * 8 + 1)
    assert via(t, far) == ["nic", "leaf", "spine", "core", "spine", "leaf", "nic"]
    assert t.bottleneck_bandwidth(0, 15 * 8 + 1) == pytest.approx(50 * GB)
    # two tiers cannot join 32 leaves of radix 8: three are built and a note says so
    t2 = topo(reg, "hgx-h100", nodes=16, switch_radix=8, tiers=2)
    assert t2.tiers == 3 and t2.notes
    # non-blocking: the cut through the cores carries every NIC of one half
    assert t.bisection_bandwidth() == pytest.approx(8 * 8 * 50 * GB)


def test_errors(reg: Registry) -> None:
    with pytest.raises(SpecError, match="cluster.system"):
        topo(reg, "no-such-system", nodes=2)
    with pytest.raises(SpecError, match="oversubscription"):
        topo(reg, "hgx-h100", nodes=2, oversubscription=0.5)
    with pytest.raises(SpecError, match="pods"):
        topo(reg, "gb200-nvl72", nodes=2, switch_radix=4, tiers=3)


def test_build_from_scenario_cluster(reg: Registry) -> None:
    c = resolve_with_fabric(ClusterSpec(system="hgx-h100", gpus=32), reg)
    t = build_topology(c, registry=reg)
    assert t.systems == 4
    c2 = cluster_for("hgx-h100", nodes=4, reg=reg)
    assert build_topology(c2, registry=reg).summary() == t.summary()


def test_summary_counts(reg: Registry) -> None:
    s = topo(reg, "hgx-h100", nodes=4).summary()
    assert (s["gpus"], s["nvlink_domains"], s["nvswitch_chips"], s["nics"], s["leaves"], s["spines"]) == (
        32,
        4,
        16,
        32,
        8,
        4,
    )
    assert s["nvlink_bandwidth_per_gpu"] == pytest.approx(450 * GB)
    assert s["bisection_bandwidth"] == pytest.approx(16 * 50 * GB)
    json.dumps(s)


# ---------------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    system=st.sampled_from(["hgx-h100", "hgx-h100-4nic", "pcie-pairs", "gb200-nvl72", "mi300x-platform"]),
    nodes=st.integers(1, 5),
    ratio=st.sampled_from([1.0, 2.0, 3.0]),
    topology=st.sampled_from(["rail_optimized", "fat_tree"]),
    radix=st.sampled_from([16, 64]),
    tiers=st.sampled_from([2, 3]),
    data=st.data(),
)
def test_bottleneck_never_exceeds_endpoint_links(
    reg: Registry,
    system: str,
    nodes: int,
    ratio: float,
    topology: str,
    radix: int,
    tiers: int,
    data: st.DataObject,
) -> None:
    t = topo(
        reg, system, nodes=nodes, oversubscription=ratio, topology=topology, switch_radix=radix, tiers=tiers
    )
    g = t.graph
    a = data.draw(st.integers(0, t.gpus - 1))
    b = data.draw(st.integers(0, t.gpus - 1))
    if a == b:
        return
    p = t.path(a, b)
    # a chain of graph edges from a to b that never transits another GPU
    assert p[0][0] == ("gpu", a) and p[-1][1] == ("gpu", b)
    assert all(p[i][1] == p[i + 1][0] for i in range(len(p) - 1))
    assert all(v[0] != "gpu" for _, v in p[:-1])
    # shortest by hops among such paths
    keep = [n for n in g.nodes if n[0] != "gpu" or n in (("gpu", a), ("gpu", b))]
    assert len(p) == nx.shortest_path_length(g.subgraph(keep), ("gpu", a), ("gpu", b))
    bw = t.bottleneck_bandwidth(a, b)
    out_a = max(g.edges[e]["bandwidth"] for e in g.out_edges(("gpu", a)))
    in_b = max(g.edges[e]["bandwidth"] for e in g.in_edges(("gpu", b)))
    assert bw <= out_a and bw <= in_b
    if t.same_nvlink_domain(a, b):
        assert bw <= t.cluster.nvlink_bandwidth
    elif t.system_of(a) != t.system_of(b):
        assert bw <= t.cluster.nic_bandwidth
    assert t.path_latency(a, b) >= 0.0


# ---------------------------------------------------------------------------------- CLI


@pytest.fixture
def reset_user_dirs() -> object:
    yield None
    set_user_dirs([])


def test_cli_topo_writes_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reset_user_dirs: object
) -> None:
    out = tmp_path / "x.png"
    with pytest.raises(SystemExit) as e:
        main(["topo", "hgx-h100", "--nodes", "4", "-o", str(out)])
    assert e.value.code == 0
    assert out.is_file() and out.stat().st_size > 10_000
    text = capsys.readouterr().out
    assert "NVLink" in text and "spines" in text


def test_cli_topo_json_and_options(capsys: pytest.CaptureFixture[str], reset_user_dirs: object) -> None:
    with pytest.raises(SystemExit) as e:
        main(
            ["--specs", str(DATA), "topo", "hgx-h100", "--nodes", "128", "--oversubscription", "2", "--json"]
        )
    assert e.value.code == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert d["gpus"] == 1024 and d["oversubscription"] == 2.0
    assert d["bisection_bandwidth"] == pytest.approx(16 * 800 * GB)


def test_cli_topo_bad_system(capsys: pytest.CaptureFixture[str], reset_user_dirs: object) -> None:
    with pytest.raises(SystemExit) as e:
        main(["topo", "no-such-system"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no-such-system" in err and len(err.splitlines()) == 1


def test_cli_topo_scenario_file_keeps_its_fabric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reset_user_dirs: object
) -> None:
    sc = tmp_path / "sc.yaml"
    sc.write_text(
        "name: t\nkind: training\n"
        "cluster: {system: hgx-h200, nodes: 8, fabric: {link: ib-ndr, topology: fat_tree, oversubscription: 2}}\n"
        "model: {layers: 2, hidden: 256, heads: 4, ffn_hidden: 1024, vocab: 1000, seq_len: 128}\n"
    )
    with pytest.raises(SystemExit) as e:
        main(["topo", str(sc), "--json"])
    assert e.value.code == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (d["systems"], d["topology"], d["oversubscription"], d["leaves"]) == (8, "fat_tree", 2.0, 2)
    # options override single fabric fields and the size, the rest of the scenario's fabric stays
    with pytest.raises(SystemExit) as e:
        main(["topo", str(sc), "--oversubscription", "1", "--nodes", "16", "--json"])
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (d["systems"], d["topology"], d["oversubscription"], d["leaves"]) == (16, "fat_tree", 1.0, 4)
    with pytest.raises(SystemExit) as e:
        main(["topo", str(tmp_path / "missing.yaml")])
    assert e.value.code == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_plot_draws_a_subset_of_big_clusters(reg: Registry, tmp_path: Path) -> None:
    from simcore.report.topology_plot import _pick, draw_topology

    t = topo(reg, "hgx-h100", nodes=128)
    nodes, drawn, total = _pick(t, max_nodes=3, max_gpus=16, max_switches=16, show_cpus=False)
    assert drawn["gpu"] == 24 and total["gpu"] == 1024
    assert drawn["leaf"] == 8 and drawn["spine"] == 16  # rails 0-7 of group 0, every spine
    assert all(n[0] != "cpu" for n in nodes)
    out = draw_topology(t, tmp_path / "big.png", max_nodes=3)
    assert out.stat().st_size > 10_000
    t = topo(reg, "pcie-pairs", nodes=2)
    assert draw_topology(t, tmp_path / "pairs.svg", show_cpus=True).read_text().startswith("<?xml")
