"""Analytic collective model: hand-computed cases, nccl-tests conventions, properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.comm.collectives import (
    ALGORITHMS,
    OPS,
    CommProfile,
    LinkCurve,
    LinkRates,
    busbw_factor,
    collective_cost,
    collective_time,
    cost_from_profile,
    kv_transfer_time,
    load_profile,
    read_profile,
)
from simcore.comm.groups import GroupPlacement, megatron_groups, placement
from simcore.errors import SimcoreError
from simcore.specs.registry import builtin_dir
from simcore.specs.resolve import cluster_for
from tests.cli_runner import run_cli

US = 1e-6


@pytest.fixture(scope="module")
def profile() -> CommProfile:
    """The provisional-style profile with a ramp so the ramp code is exercised."""
    p = load_profile("hgx-h200").profile
    links = {
        "nvlink": LinkCurve(efficiency=0.8, ramp_bytes=2e6, ramp_exponent=0.7),
        "network": LinkCurve(efficiency=0.9, ramp_bytes=1e6, ramp_exponent=0.8),
    }
    return p.model_copy(update={"links": links})


def neutral() -> CommProfile:
    """Latencies and bandwidth fractions written out here, so expectations can be computed by hand."""
    return CommProfile.model_validate(
        {
            "system": "test",
            "base_latency": {
                "ring": {"LL": "2 us", "LL128": "5 us", "Simple": "8 us"},
                "tree": {"Simple": "8 us"},
                "nvls": {"Simple": "20 us"},
                "hierarchical": {"Simple": "8 us"},
                "p2p": {"Simple": "6 us"},
            },
            "hop_latency": {
                "nvlink": {"LL": "0.5 us", "LL128": "1 us", "Simple": "3 us"},
                "network": {"LL": "3 us", "LL128": "4 us", "Simple": "10 us"},
            },
            "protocol_bandwidth": {"LL": 0.25, "LL128": 0.9, "Simple": 1.0},
            "links": {"nvlink": {}, "network": {}},
        }
    )


# ------------------------------------------------------------------ hand-computed


def test_ring_all_reduce_by_hand() -> None:
    cl = cluster_for("hgx-h200", gpus=8)
    S = 1e9
    c = collective_cost("all_reduce", S, GroupPlacement.of(8), cl, "ring", profile=neutral())
    # Simple wins at 1 GB: 8 us + 14 steps x 3 us + 2*7/8*S / 450 GB/s
    expect = 8 * US + 14 * 3 * US + 2 * 7 / 8 * S / 450e9
    assert float(c.time_s) == pytest.approx(expect, rel=1e-12)
    assert ALGORITHMS[int(c.algorithm)] == "ring"


def test_small_message_takes_low_latency_protocol() -> None:
    cl = cluster_for("hgx-h200", gpus=8)
    c = collective_cost("all_reduce", 1024, GroupPlacement.of(8), cl, "ring", profile=neutral())
    expect = 2 * US + 14 * 0.5 * US + 2 * 7 / 8 * 1024 / (450e9 * 0.25)
    assert float(c.time_s) == pytest.approx(expect, rel=1e-12)
    assert c.protocol_names().item() == "LL"


def test_nvls_all_reduce_by_hand() -> None:
    cl = cluster_for("hgx-h200", gpus=8)
    S = 4e9
    c = collective_cost("all_reduce", S, GroupPlacement.of(8), cl, "nvls", profile=neutral())
    # NVLS: S (n+1)/n per rank each way through the switch: 20 us + 1 NVLink hop + 9/8 S / 450 GB/s
    assert float(c.time_s) == pytest.approx(20 * US + 3 * US + 9 / 8 * S / 450e9, rel=1e-12)
    assert float(c.bytes_nvlink) == pytest.approx(9 / 8 * S)


def test_two_nodes_ring_is_limited_by_nic_share() -> None:
    cl = cluster_for("hgx-h200", gpus=16)
    S = 8e9
    c = collective_cost("all_reduce", S, GroupPlacement.of(16, 8), cl, "ring", profile=neutral())
    per_rank = 2 * 15 / 16 * S
    # 8 rings, each leaving a node through a different NIC: per_rank/8 per 50 GB/s NIC
    wire = max(per_rank * 7 / 8 / 450e9, per_rank / 8 / 50e9)
    lat = 8 * US + (30 - 2) * 3 * US + 2 * 10 * US
    assert float(c.time_s) == pytest.approx(lat + wire, rel=1e-12)


def test_all_to_all_splits_nvlink_and_network() -> None:
    cl = cluster_for("hgx-h200", gpus=16)
    S = 1.6e9
    c = collective_cost("all_to_all", S, GroupPlacement.of(16, 8), cl, profile=neutral())
    assert float(c.bytes_nvlink) == pytest.approx(7 / 16 * S)
    assert float(c.bytes_network) == pytest.approx(8 / 16 * S)
    assert float(c.time_s) > 8 / 16 * S / 50e9


def test_busbw_factors_follow_nccl_tests() -> None:
    assert float(busbw_factor("all_reduce", 8)) == pytest.approx(1.75)
    assert float(busbw_factor("all_gather", 8)) == pytest.approx(7 / 8)
    assert float(busbw_factor("reduce_scatter", 4)) == pytest.approx(0.75)
    assert float(busbw_factor("all_to_all", 2)) == pytest.approx(0.5)
    assert float(busbw_factor("broadcast", 8)) == 1.0
    assert float(busbw_factor("send_recv", 8)) == 1.0


# ------------------------------------------------------------------ placements


def test_megatron_placements() -> None:
    cl = cluster_for("hgx-h200", nodes=4)
    grp = megatron_groups(cl, tp=8, dp=4)
    assert (float(grp["tp"].per_domain), float(grp["tp"].domains)) == (8, 1)
    assert (float(grp["dp"].per_domain), float(grp["dp"].domains)) == (1, 4)
    g = megatron_groups(cl, tp=4, dp=8)["dp"]
    assert (float(g.per_domain), float(g.domains)) == (2, 4)
    p = placement(cl, np.array([2, 4, 8, 16]), np.array([1, 2, 4, 1]))
    np.testing.assert_array_equal(p.per_domain, [2, 4, 2, 8])
    np.testing.assert_array_equal(p.domains, [1, 1, 4, 2])


# ------------------------------------------------------------------ public API


def test_collective_time_public() -> None:
    r = simcore.collective_time("all_reduce", nbytes="256 MB", gpus=8, system="hgx-h200")
    assert r.time_s > 0 and r.algbw == pytest.approx(256e6 / r.time_s)
    assert r.busbw == pytest.approx(r.algbw * 1.75)
    assert r.nodes == 1 and r.system == "hgx-h200"
    assert r.bytes_network_per_rank == 0
    r2 = collective_time("all_gather", nbytes=1 << 20, gpus=16, system="hgx-h200", algorithm="ring")
    assert r2.nodes == 2 and r2.algorithm == "ring" and r2.bytes_network_per_rank > 0
    assert r2.count == pytest.approx((1 << 20) / 2 / 16)


def test_collective_time_errors() -> None:
    with pytest.raises(SimcoreError, match="unknown collective"):
        collective_time("all_sum", nbytes=1e6, gpus=8, system="hgx-h200")
    with pytest.raises(SimcoreError, match="does not apply"):
        collective_time("all_reduce", nbytes=1e6, gpus=16, system="hgx-h200", algorithm="nvls")
    with pytest.raises(SimcoreError, match="unknown algorithm"):
        collective_time("all_reduce", nbytes=1e6, gpus=8, system="hgx-h200", algorithm="magic")
    with pytest.raises(SimcoreError):
        collective_time("all_reduce", nbytes="lots", gpus=8, system="hgx-h200")


def test_system_without_profile_transfers_and_says_so() -> None:
    r = collective_time("all_reduce", nbytes=1e8, gpus=8, system="hgx-h100")
    assert r.transferred_from == "hgx-h200"
    assert any("transferred" in n for n in r.notes)


def test_profile_files_are_valid() -> None:
    files = sorted((builtin_dir() / "calibration").glob("comm-*.yaml"))
    assert files
    for f in files:
        read_profile(f)


def test_nvl72_keeps_72_gpus_on_nvlink() -> None:
    r = collective_time("all_reduce", nbytes=1e9, gpus=72, system="gb200-nvl72")
    h = collective_time("all_reduce", nbytes=1e9, gpus=72, system="hgx-h200", nodes=9)
    assert r.bytes_network_per_rank == 0 and h.bytes_network_per_rank > 0
    assert r.time_s < h.time_s


def test_kv_transfer() -> None:
    cl = cluster_for("hgx-h200", nodes=2)
    t = kv_transfer_time(np.array([1e6, 1e8, 1e9]), cl, src_tp=8, dst_tp=8, same_domain=False)
    assert np.all(np.diff(t) > 0)
    same = kv_transfer_time(1e9, cl, 8, 8, same_domain=True)
    assert float(same) < float(t[2])
    staged = kv_transfer_time(1e9, cl, 8, 8, same_domain=False, gpudirect=False)
    assert float(staged) > float(t[2])
    # fewer decode GPUs means each receives more
    assert float(kv_transfer_time(1e9, cl, 8, 2)) > float(kv_transfer_time(1e9, cl, 8, 8))


# ------------------------------------------------------------------ vectorisation


def test_grid_equals_scalar_calls(profile: CommProfile) -> None:
    cl = cluster_for("hgx-h200", nodes=4)
    sizes = np.logspace(3, 9.5, 9)[:, None]
    grp = GroupPlacement.of(np.array([2, 8, 16, 32]), np.array([2, 8, 8, 8]))
    for op in OPS:
        grid = collective_cost(op, sizes, grp, cl, profile=profile)
        assert grid.time_s.shape == (9, 4)
        for i in (0, 4, 8):
            for j in range(4):
                one = collective_cost(op, float(sizes[i, 0]), grp[j], cl, profile=profile)
                assert float(grid.time_s[i, j]) == pytest.approx(float(one.time_s), rel=1e-12)
                assert int(grid.algorithm[i, j]) == int(one.algorithm)


# ------------------------------------------------------------------ properties

ops = st.sampled_from(OPS)
algos = st.sampled_from(["auto", *ALGORITHMS])
sizes = st.floats(min_value=1.0, max_value=8e9)
shapes = st.tuples(st.integers(1, 16), st.integers(1, 8)).map(lambda t: (t[0] * t[1], t[1]))
bws = st.floats(min_value=1e9, max_value=2e12)


def rates(nv: float, net: float) -> LinkRates:
    return LinkRates(nvlink=np.asarray(nv), network=np.asarray(net), nvls=True)


@settings(max_examples=150, deadline=None)
@given(op=ops, algo=algos, S=sizes, shape=shapes, nv=bws, net=bws, k=st.floats(1.0, 10.0))
def test_more_bandwidth_is_never_slower(
    profile: CommProfile,
    op: str,
    algo: str,
    S: float,
    shape: tuple[int, int],
    nv: float,
    net: float,
    k: float,
) -> None:
    g = GroupPlacement.of(shape[0], shape[1])
    base = float(cost_from_profile(op, S, g, rates(nv, net), profile, algo).time_s)
    more_nv = float(cost_from_profile(op, S, g, rates(nv * k, net), profile, algo).time_s)
    more_net = float(cost_from_profile(op, S, g, rates(nv, net * k), profile, algo).time_s)
    assert more_nv <= base * (1 + 1e-12)
    assert more_net <= base * (1 + 1e-12)


@settings(max_examples=150, deadline=None)
@given(op=ops, algo=algos, S=sizes, shape=shapes, k=st.floats(1.0, 100.0))
def test_bigger_message_is_never_faster(
    profile: CommProfile, op: str, algo: str, S: float, shape: tuple[int, int], k: float
) -> None:
    cl = cluster_for("hgx-h200", nodes=16)
    g = GroupPlacement.of(shape[0], shape[1])
    t1 = collective_cost(op, np.array([S, S * k]), g, cl, algo, profile=profile).time_s
    assert t1[1] >= t1[0] * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(S=sizes, shape=shapes)
def test_bytes_per_rank_match_the_algorithm(profile: CommProfile, S: float, shape: tuple[int, int]) -> None:
    cl = cluster_for("hgx-h200", nodes=16)
    n, per = shape
    g = GroupPlacement.of(n, per)
    expect = {
        ("all_reduce", "ring"): 2 * (n - 1) / n * S,
        ("all_gather", "ring"): (n - 1) / n * S,
        ("reduce_scatter", "ring"): (n - 1) / n * S,
        ("all_to_all", "pairwise"): (n - 1) / n * S,
        ("send_recv", "p2p"): S if n > 1 else 0.0,
        ("broadcast", "ring"): (n - 1) / n * S,
    }
    for (op, algo), want in expect.items():
        c = collective_cost(op, S, g, cl, algo, profile=profile)
        assert float(c.bytes_nvlink + c.bytes_network) == pytest.approx(want, rel=1e-9, abs=1e-9)
        if n > 1 and per == 1:
            assert float(c.bytes_nvlink) == 0.0
    if n > 1 and per == n:
        c = collective_cost("all_reduce", S, g, cl, "ring", profile=profile)
        assert float(c.bytes_network) == 0.0


# ------------------------------------------------------------------ CLI


def test_cli_json_matches_api(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = run_cli(
        capsys, *["collective", "all_reduce", "--bytes", "64 MB", "--gpus", "16", "--json"]
    )
    assert code == 0
    d = json.loads(out)
    r = collective_time("all_reduce", nbytes=64e6, gpus=16, system="hgx-h200")
    assert d["time_s"] == pytest.approx(r.time_s) and d["nodes"] == 2 and d["busbw"] == pytest.approx(r.busbw)


def test_cli_sweep_with_measured_overlay(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    from pathlib import Path

    tmp = Path(str(tmp_path))
    csv = tmp / "m.csv"
    csv.write_text(
        "op,dtype,nbytes,gpus,time_s\nall_gather,bf16,1048576,2,1e-5\nall_gather,bf16,1024,2,5e-6\n"
    )
    png = tmp / "curve.png"
    code, out, _ = run_cli(
        capsys,
        *[
            "collective",
            "all_gather",
            "--sweep",
            "--gpus",
            "2",
            "--measured",
            str(csv),
            "-o",
            str(png),
            "--json",
        ],
    )
    assert code == 0 and png.stat().st_size > 1000
    import json

    d = json.loads(out)
    assert len(d["points"]) == 23
    with_meas = [p for p in d["points"] if "measured_time_s" in p]
    assert [p["nbytes"] for p in with_meas] == [1024.0, 1048576.0]


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "collective", "all_reduce", "--gpus", "8")
    assert code == 2 and "--bytes" in err
    code, _, err = run_cli(capsys, "collective", "all_reduce", "--bytes", "1 MB", "--system", "nope")
    assert code == 2 and "unknown system" in err and err.count("\n") == 1


def test_single_gpu_costs_nothing() -> None:
    r = collective_time("all_reduce", nbytes=1e6, gpus=1, system="hgx-h200")
    assert r.time_s == 0.0 and r.algbw == 0.0 and r.busbw == 0.0


def test_explicit_algorithm_falls_back_to_auto_where_it_does_not_apply() -> None:
    cl = cluster_for("hgx-h200", nodes=2)
    grp = GroupPlacement.of(np.array([8, 16]), np.array([8, 8]))
    forced = collective_cost("all_reduce", 1e9, grp, cl, "nvls")
    auto = collective_cost("all_reduce", 1e9, grp, cl)
    assert forced.algorithm_names().tolist()[0] == "nvls"
    assert float(forced.time_s[1]) == float(auto.time_s[1])


def test_host_floor_only_lifts_small_messages() -> None:
    cl = cluster_for("hgx-h200", gpus=8)
    prof = load_profile("hgx-h200").profile
    floor = prof.op_overhead.get("all_reduce", 0.0)
    S = np.array([1e3, 1e9])
    on = collective_cost("all_reduce", S, GroupPlacement.of(8), cl)
    off = collective_cost("all_reduce", S, GroupPlacement.of(8), cl, host_floor=False)
    assert np.all(on.time_s >= off.time_s)
    assert float(on.time_s[0]) == pytest.approx(max(floor, float(off.time_s[0])))
    assert float(on.time_s[1]) == float(off.time_s[1])
