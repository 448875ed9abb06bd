"""Trace -> task graph -> replay on the same and on other hardware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.cli import main
from simcore.traces import read_trace
from simcore.traces.classify import analyze
from simcore.traces.synth import SynthConfig, write_trace
from simcore.workload.replay import build_graph, load_analyses, match_device_name, replay, simulate
from tests.nsys_db import NSYS_CORE_TABLES

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "traces" / "h200"
H200X2 = REPO / "traces" / "h200x2"


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("Voodoo Graphics", None),
    ],
)
def test_device_names(name: str, key: str | None) -> None:
    assert match_device_name(name) == key


@pytest.mark.parametrize(
    "files, tol",
    [
        ([H200 / "profile_train_gpt_gelu_ln.json.gz"], 0.01),
        ([H200 / "profile_infer_prefill_decode.json.gz"], 0.01),
        ([H200X2 / "profile_ddp_rank0.json.gz", H200X2 / "profile_ddp_rank1.json.gz"], 0.01),
        ([H200X2 / "profile_pp_rank0.json.gz"], 0.01),
        # ranks whose traces started 19.6 ms apart: their collectives meet on the epoch clock
        (
            [
                H200X2 / "round44" / "profile_tp_llama8l_rank0.json.gz",
                H200X2 / "round44" / "profile_tp_llama8l_rank1.json.gz",
            ],
            0.01,
        ),
    ],
)
def test_replay_on_source_reproduces_measurement(files: list[Path], tol: float) -> None:
    ans = load_analyses([str(f) for f in files])
    g = build_graph(ans)
    sched = simulate(g)
    measured = max(a.step_time_s for a in ans)
    assert sched.step_time_s == pytest.approx(measured, rel=tol)


def test_collectives_matched_across_ranks(tmp_path: Path) -> None:
    paths = []
    for r in (0, 1):
        p = tmp_path / f"rank{r}.json.gz"
        write_trace(p, SynthConfig(layers=2, steps=2, world=2, rank=r, host_per_op=12e-6 + 3e-6 * r))
        paths.append(p)
    ans = [analyze(read_trace(p)) for p in paths]
    g = build_graph(ans)
    per_rank = sum(1 for k in ans[0].kernels if k.cls.startswith("comm") and k.step >= 0)
    assert len(g.collectives) == per_rank and all(len(m) == 2 for m in g.collectives)
    sched = simulate(g)
    for members in g.collectives:
        assert sched.start[members[0]] == pytest.approx(sched.start[members[1]])


def test_host_bound_run_does_not_speed_up(tmp_path: Path) -> None:
    # tiny kernels behind 300 µs of host work each: a faster GPU changes nothing
    p = tmp_path / "cpu_bound.json.gz"
    write_trace(
        p, SynthConfig(layers=1, hidden=64, heads=2, seq=16, batch=1, vocab=64, steps=3, host_per_op=300e-6)
    )
    r = replay([str(p)], "b200")
    assert r.predicted_step_time_s == pytest.approx(r.replayed_source_step_time_s, rel=0.02)


def test_gpu_bound_run_speeds_up_on_b200() -> None:
    r = replay([str(H200 / "profile_train_gpt_gelu_ln.json.gz")], "b200")
    rows = {c["class"]: c for c in r.classes}
    assert rows["gemm"]["target_s"] < rows["gemm"]["source_s"]
    assert r.how.get("shape", 0) > 0.8 * sum(r.how.values())
    assert r.target == {"device": "b200", "system": "dgx-b200"}
    # host gaps are kept: the replay cannot beat the measured step by more than the GPU work saved
    saved = sum(max(0.0, c["source_s"] - c["target_s"]) for c in r.classes)
    assert r.predicted_step_time_s >= r.replayed_source_step_time_s - saved - 1e-9


def test_replay_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        main(["replay", str(H200X2 / "profile_ddp_rank0.json.gz"), str(H200X2 / "profile_ddp_rank1.json.gz"),
              "--device", "gb200", "--json"])  # fmt: skip
    except SystemExit as e:
        assert e.code in (0, None)
    d = json.loads(capsys.readouterr().out)
    assert d["source"]["device"] == "h200" and d["target"]["system"] == "gb200-nvl72"
    assert d["how"].get("collective model", 0) == 32  # 16 all-reduces per rank, 2 ranks
    assert {"measured_step_time_s", "replayed_source_step_time_s", "predicted_step_time_s", "classes"} <= set(
        d
    )


def test_replayed_timeline_is_a_kineto_trace(tmp_path: Path) -> None:
    out = tmp_path / "replay_{rank}.json.gz"
    files = [str(H200X2 / f"profile_ddp_rank{r}.json.gz") for r in (0, 1)]
    r = replay(files, "b200", trace_out=str(out))
    assert r.written == [str(tmp_path / "replay_0.json.gz"), str(tmp_path / "replay_1.json.gz")]
    back = [analyze(read_trace(p)) for p in r.written]
    assert [a.trace.rank for a in back] == [0, 1]
    assert match_device_name(str(back[0].trace.device_name)) == "b200"
    assert back[0].step_source == "annotation" and len(back[0].steps) == 2
    # simcore reads its own replay back with the step time the replay reported
    assert max(a.step_time_s for a in back) == pytest.approx(r.predicted_step_time_s, rel=0.02)
    n_in = sum(1 for k in load_analyses(files)[0].kernels if k.step >= 0)
    assert len(back[0].kernels) == n_in


def test_process_group_placement_from_ranks() -> None:
    from simcore.workload.replay import group_nodes

    # global ranks fill systems in order: ranks 0, 8, 16, 24 are on four HGX nodes, on one NVL72 rack
    assert group_nodes([0, 1], "hgx-h200") == 1
    assert group_nodes([0, 8, 16, 24], "hgx-h200") == 4
    assert group_nodes([0, 8, 16, 24], "gb200-nvl72") == 1
    assert group_nodes(None, "hgx-h200") is None


def _cuda_app_db(path: Path) -> None:
    """An Nsight Systems export of a plain CUDA program (no PyTorch): each kernel launched and waited for
    (cudaDeviceSynchronize), then three synchronous cudaMemcpy from pageable memory, each of which returns
    once its data is staged, before its copy ends (the next call starts while the copy runs, and its copy
    waits 40 us for that staging after the one ahead ends), as real exports of such a program show."""
    import sqlite3

    rows_k, rows_m, rows_r = [], [], []
    t, corr = 0, 1
    for i in range(40):
        rows_r.append((t, t + 5_000, corr, 2))  # cudaLaunchKernel
        rows_k.append((t + 9_000, t + 9_000 + 30_000 + 1_000 * (i % 3), corr))
        k_end = rows_k[-1][1]
        corr += 1
        rows_r.append((t + 6_000, k_end + 3_000, corr, 3))  # cudaDeviceSynchronize
        corr += 1
        t = k_end + 10_000
        if i % 8 == 7:
            prev_end = None
            for _ in range(3):
                rows_r.append((t, t + 4_000, corr, 4))  # cudaMemcpy, back before its copy ends
                start = t + 30_000 if prev_end is None else prev_end + 40_000
                rows_m.append((start, start + 25_000, corr))
                prev_end = start + 25_000
                corr += 1
                t += 5_000
            t = prev_end + 8_000
    c = sqlite3.connect(path)
    c.executescript(
        NSYS_CORE_TABLES
        + """
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INT, end INT, deviceId INT, contextId INT, streamId INT,
          correlationId INT, globalPid INT, bytes INT, copyKind INT);
        CREATE TABLE TARGET_INFO_GPU(id INT, name TEXT, smCount INT);
        INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA A100-SXM4-80GB', 108);
        INSERT INTO StringIds VALUES (1, 'void stencil_kernel<double>(double*, double const*, int, int)'),
          (2, 'cudaLaunchKernel_v7000'), (3, 'cudaDeviceSynchronize_v3020'), (4, 'cudaMemcpy_v3020');
        """
    )
    c.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, 1, 1, 1, 1024, 1, 1, 256, 1, 1)",
        rows_k,
    )
    c.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, ?, 1, 1048576, 1)", rows_m)
    c.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, 7, ?, ?, 0)", rows_r)
    c.commit()
    c.close()


def test_replay_of_a_synchronous_cuda_program_reproduces_it(tmp_path: Path) -> None:
    # the copies staged behind one another are not the device's queue gap: taken for one, they delayed
    # every later kernel (pipit's CloverLeaf export on an A100: +14.7 % on the source)
    p = tmp_path / "app.sqlite"
    _cuda_app_db(p)
    ans = load_analyses([str(p)])
    g = build_graph(ans)
    assert g.ranks[0].queue_gap < 2e-6
    assert simulate(g).step_time_s == pytest.approx(ans[0].step_time_s, rel=0.01)
