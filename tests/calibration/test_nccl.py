"""Readers for nccl-tests text and JSON output and the torch.distributed sweep CSV."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from simcore.errors import TraceError
from simcore.traces.nccl import canonical_op, read_measurements

TEXT = """\
# nccl-tests version 2.13.8 nccl-headers=21903 nccl-library=21903
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41000 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41001 on     node01 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41002 on     node02 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41003 on     node02 device  1 [0x2a] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    42.42    0.00    0.00      0    42.31    0.00    0.00      0
        1024           256     float     sum      -1    43.10    0.02    0.04      0    42.90    0.02    0.04    N/A
   134217728      33554432     float     sum      -1   1200.5  111.80  167.70      0   1190.2  112.77  169.15      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 56.7
"""

JSON_DOC = {
    "version": 3,
    "nccl_version": "2.27.3",
    "config": {"ngpus": 1, "iterations": 20},
    "devices": [{"rank": 0, "hostname": "h1"}, {"rank": 1, "hostname": "h1"}],
    "results": [
        {
            "size": 1048576,
            "count": 262144,
            "type": "bfloat16",
            "redop": "none",
            "root": -1,
            "out_of_place": {"time": 20.5, "alg_bw": 51.1, "bus_bw": 25.6, "nwrong": 0},
            "in_place": {"time": 19.5, "alg_bw": 53.7, "bus_bw": 26.9, "nwrong": 0},
        },
        {
            "size": 2097152,
            "count": 524288,
            "type": "bfloat16",
            "redop": "none",
            "root": -1,
            "out_of_place": {"time": 30.0, "alg_bw": 69.9, "bus_bw": 34.9, "nwrong": 0},
        },
    ],
}

CSV = """\
op,dtype,nbytes,gpus,time_s,time_max_s,algbw,busbw,iters,reps,spread
all_reduce,bf16,1024,2,1.2e-05,1.3e-05,85333333.3,85333333.3,50,7,0.05
all_to_all,fp32,1048576,2,2.0e-05,2.1e-05,52428800000.0,52428800000.0,50,7,0.02
send_recv_bidir,bf16,4096,2,8.0e-06,8.0e-06,512000000.0,512000000.0,50,7,0.01
"""


def write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def test_text_table(tmp_path: Path) -> None:
    m = read_measurements(write(tmp_path, "log.txt", TEXT))
    assert len(m) == 6  # 3 sizes x (out-of-place, in-place)
    assert set(m.op) == {"all_reduce"} and set(m.dtype) == {"fp32"}
    assert m.gpus[0] == 4 and m.nodes[0] == 2
    big = (m.nbytes == 134217728) & ~m.in_place
    assert m.time_s[big][0] == pytest.approx(1200.5e-6)
    # busbw recomputed with the nccl-tests factor matches the printed column
    assert m.busbw[big][0] / 1e9 == pytest.approx(167.70, rel=1e-3)
    assert m.in_place.sum() == 3


def test_text_table_op_from_file_name_and_gz(tmp_path: Path) -> None:
    body = "\n".join(line for line in TEXT.splitlines() if "Collective test" not in line)
    p = write(tmp_path, "all_gather_perf.log.gz", gzip.compress(body.encode()))
    m = read_measurements(p)
    assert set(m.op) == {"all_gather"}


def test_json(tmp_path: Path) -> None:
    m = read_measurements(write(tmp_path, "alltoall_perf.json", json.dumps(JSON_DOC)))
    assert len(m) == 3
    assert set(m.op) == {"all_to_all"} and set(m.dtype) == {"bf16"}
    assert m.gpus[0] == 2 and m.nodes[0] == 1
    np.testing.assert_allclose(m.time_s, [20.5e-6, 19.5e-6, 30.0e-6])
    # all_to_all busbw factor (n-1)/n
    assert m.busbw[0] == pytest.approx(1048576 / 20.5e-6 * 0.5)


def test_sweep_csv(tmp_path: Path) -> None:
    m = read_measurements(write(tmp_path, "nccl.csv.gz", gzip.compress(CSV.encode())))
    assert list(m.op) == ["all_reduce", "all_to_all", "send_recv_bidir"]
    assert list(m.dtype) == ["bf16", "fp32", "bf16"]
    assert m.time_s[1] == pytest.approx(2.0e-5)
    # the CSV used factor 1 for all_to_all; we recompute the nccl-tests one
    assert m.busbw[1] == pytest.approx(1048576 / 2.0e-5 * 0.5)


def test_canonical_op_names() -> None:
    assert canonical_op("all_reduce_perf") == "all_reduce"
    assert canonical_op("AllGather") == "all_gather"
    assert canonical_op("reduce-scatter") == "reduce_scatter"
    assert canonical_op("foo") is None


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("bad.txt", TEXT.replace("1200.5", "12x0.5"), "line 16: time '12x0.5' is not a number"),
        ("bad2.txt", "# nothing here\n", "no nccl-tests result table"),
        ("noop.txt", TEXT.replace("# Collective test starting: all_reduce_perf\n", ""), "which collective"),
        ("bad.json", '{"results": 3}', "no 'results' list"),
        ("bad2.json", '{"results": [', "malformed JSON"),
        ("alltoall_bad3.json", json.dumps({**JSON_DOC, "results": [{"size": 8}]}), "neither out_of_place"),
        ("bad.csv", "op,dtype,nbytes\nall_reduce,bf16,8\n", "lacks column"),
        ("bad2.csv", CSV.replace("all_to_all", "all_sum"), "unknown op 'all_sum'"),
        ("bad3.csv", CSV.replace("2.0e-05", "-1"), "must be positive"),
        ("bad.csv.gz", b"\x1f\x8b\x08garbage", "corrupt gzip"),
    ],
)
def test_malformed_inputs_raise_one_line(tmp_path: Path, name: str, content: str | bytes, match: str) -> None:
    p = write(tmp_path, name, content)
    with pytest.raises(TraceError, match=match) as e:
        read_measurements(p)
    assert "\n" not in str(e.value) and name in str(e.value)


def test_missing_file() -> None:
    with pytest.raises(TraceError, match="file not found"):
        read_measurements("/nonexistent/nccl.csv")


# ------------------------------------------------------------------ fitting (simcore.calibration.fit_comm)


def _synthetic(truth: object) -> tuple[object, object]:
    from simcore.calibration import fit_comm as F
    from simcore.traces.nccl import CommMeasurements

    base = F._provisional_base("hgx-h200")
    prof = F.apply(base, truth)  # type: ignore[arg-type]
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"]
    sizes = [float(1 << i) for i in range(10, 33, 2)]
    rows = [(o, s) for o in ops for s in sizes]
    n = len(rows)
    m = CommMeasurements(
        op=np.array([r[0] for r in rows]),
        dtype=np.array(["bf16"] * n),
        nbytes=np.array([r[1] for r in rows]),
        gpus=np.full(n, 2),
        nodes=np.ones(n, dtype=np.int64),
        time_s=np.ones(n),
        in_place=np.zeros(n, dtype=bool),
    )
    t = F.predict(m, prof, "hgx-h200")
    noise = np.exp(np.random.default_rng(0).normal(0.0, 0.02, n))
    return base, CommMeasurements(m.op, m.dtype, m.nbytes, m.gpus, m.nodes, t * noise, m.in_place)


def test_fit_recovers_a_known_profile() -> None:
    from simcore.calibration import fit_comm as F

    truth = F.Params(
        0.8,
        1e6,
        0.5,
        dict.fromkeys(F.PROTOCOLS, 1.0),
        {"all_reduce": 1.0, "ring": 0.85, "rooted": 1.1, "p2p": 0.95},
        1.0,
        {"all_reduce": 20e-6, "ring": 28e-6, "rooted": 18e-6, "p2p": 35e-6},
    )
    base, m = _synthetic(truth)
    res = F.fit(m, "hgx-h200", base, iters=120, grid=((3e5, 1e6), (0.5, 0.8)))  # type: ignore[arg-type]
    p = res.params
    assert (p.ramp_bytes, p.ramp_exponent) == (1e6, 0.5)
    assert p.efficiency == pytest.approx(0.8, rel=0.05)
    assert p.family["ring"] == pytest.approx(0.85, rel=0.05)
    assert p.overhead["send_recv"] == pytest.approx(35e-6, rel=0.1)
    assert p.overhead["all_to_all"] == pytest.approx(35e-6, rel=0.1)
    # never fitted: the mean of its family (broadcast)
    assert p.overhead["reduce"] == pytest.approx(p.overhead["broadcast"])
    # 'reduce' was never fitted; it borrows the rooted family and is still close
    assert res.report["held_out"]["by_op"]["reduce"] < 0.05
    assert "reduce" not in set(res.train.op.tolist())
    assert res.report["held_out"]["median_abs_error_ge_1MB"] < 0.05


def test_held_out_split_is_deterministic() -> None:
    from simcore.calibration import fit_comm as F
    from simcore.traces.nccl import CommMeasurements

    sizes = np.array([2.0**k for k in range(10, 20)])
    m = CommMeasurements(
        op=np.array(["all_reduce"] * 9 + ["reduce"]),
        dtype=np.array(["bf16"] * 10),
        nbytes=sizes,
        gpus=np.full(10, 2),
        nodes=np.ones(10, dtype=np.int64),
        time_s=np.ones(10),
        in_place=np.zeros(10, dtype=bool),
    )
    mask = F.held_out_mask(m)
    # log2 sizes 10..19: every third (k % 3 == 1: 10, 13, 16, 19) plus every "reduce" row
    assert mask.tolist() == [True, False, False, True, False, False, True, False, False, True]


def test_fitted_profile_has_provenance() -> None:
    from simcore.comm.collectives import load_profile

    prof = load_profile("hgx-h200").profile
    if prof.provisional:
        pytest.skip("no fitted profile yet")
    assert prof.fitted_on and "held_out" in prof.fit_report
    assert prof.fit_report["held_out"]["median_abs_error_ge_1MB"] <= 0.10
    assert prof.fit_report["held_out"]["median_abs_error_lt_1MB"] <= 0.25


def test_report_comm_prints_tables(tmp_path: Path) -> None:
    import io

    from simcore.calibration.fit_comm import report_comm

    p = write(tmp_path, "m.csv", CSV)
    buf = io.StringIO()
    summary = report_comm(p, out=buf)
    text = buf.getvalue()
    assert "held-out" in text or "train" in text
    assert summary["heldout"]


def test_fit_uses_multi_node_points_for_the_network_curve() -> None:
    from simcore.calibration import fit_comm as F
    from simcore.comm.collectives import LinkCurve
    from simcore.traces.nccl import CommMeasurements

    truth = F.Params(
        0.8,
        1e6,
        0.5,
        dict.fromkeys(F.PROTOCOLS, 1.0),
        dict.fromkeys(F.FAMILY_NAMES, 1.0),
        1.0,
        dict.fromkeys(F.FAMILY_NAMES, 20e-6),
    )
    base = F._provisional_base("hgx-h200")
    net = LinkCurve(efficiency=0.85, ramp_bytes=4e6, ramp_exponent=0.6)
    prof = F.apply(base, truth)
    prof = prof.model_copy(update={"links": {**prof.links, "network": net}})
    sizes = [float(1 << i) for i in range(12, 33, 2)]
    rows = [
        (o, s, g, k)
        for o in ("all_reduce", "all_gather")
        for s in sizes
        for g, k in ((2, 1), (16, 2), (4, 4))
    ]
    n = len(rows)
    m = CommMeasurements(
        op=np.array([r[0] for r in rows]),
        dtype=np.array(["bf16"] * n),
        nbytes=np.array([r[1] for r in rows]),
        gpus=np.array([r[2] for r in rows]),
        nodes=np.array([r[3] for r in rows]),
        time_s=np.ones(n),
        in_place=np.zeros(n, dtype=bool),
    )
    m = CommMeasurements(m.op, m.dtype, m.nbytes, m.gpus, m.nodes, F.predict(m, prof, "hgx-h200"), m.in_place)
    res = F.fit(m, "hgx-h200", base, iters=40, grid=((1e6,), (0.5,)))
    got = res.profile.links["network"]
    assert got.efficiency == pytest.approx(0.85, rel=0.05)
    assert res.report["held_out_multi_node"]["median_abs_error_ge_1MB"] < 0.03
