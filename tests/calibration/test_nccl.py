"""Readers for nccl-tests text and JSON output and the torch.distributed sweep CSV."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from simcore.calibration.nccl import canonical_op, read_measurements
from simcore.errors import TraceError

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
