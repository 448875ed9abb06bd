"""What-if sweeps: grid parsing, resumable result files (kill half-way, rerun), Dask = local, CLI."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simcore.cli import main
from simcore.errors import SpecError
from simcore.planning.sweep import grid_points, parse_grid, point_key, run_sweep

ROOT = Path(__file__).resolve().parents[2]
GPT3 = str(ROOT / "scenarios" / "plan_gpt3_175b_h100.yaml")
GRID = [
    "cluster.system=hgx-h100,hgx-h200,dgx-b200",
    "cluster.gpus=256,512,1024",
    "scale.fabric_bandwidth=0.5,1",
]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_parse_grid_values_ranges_and_product() -> None:
    a = parse_grid("cluster.gpus=256:2048:*2")
    assert a.values == (256, 512, 1024, 2048)
    b = parse_grid("training.recompute=none, full")
    assert b.values == ("none", "full")
    c = parse_grid("model.seq_len=2048:8192:2048")
    assert c.values == (2048, 4096, 6144, 8192)
    pts = grid_points([a, b])
    assert len(pts) == 8 and point_key(pts[1]) == "cluster.gpus=256|training.recompute=full"


@pytest.mark.parametrize(
    "spec",
    [
        "cluster.gpus",
        "=1,2",
        "cluster.gpus=",
        "cluster.gpus=1,,2",
        "cluster.gpus=1,1",
        "scale.pcie=2",
        "scale.fabric_bandwidth=-1",
        "a b=1",
        "cluster.gpus=8:1:1",
        "x=[1]",
    ],
)
def test_bad_grid_specs_are_one_clear_error(spec: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_grid(spec)
    assert "\n" not in str(e.value) and "--grid" in str(e.value)


def test_bad_grid_values_are_checked_against_the_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for grid, what in (
        ("cluster.system=hgx-h100,nope", "unknown system 'nope'"),
        ("clusterr.gpus=8", "unknown field"),
        ("training.micro_batch=0", "greater than 0"),
    ):
        with pytest.raises(SystemExit) as ex:
            main(["sweep", "default", "--grid", grid, "-o", str(tmp_path / "x.csv")])
        assert ex.value.code == 2
        err = capsys.readouterr().err.strip()
        assert (
            err.startswith("error:")
            and "\n" not in err
            and what in err
            and grid.split(",")[0].split("=")[0] in err
        )
    assert not (tmp_path / "x.csv").exists()


def test_interrupted_sweep_resumes_without_recomputing_or_duplicating(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(GPT3, GRID, out, executor="serial", progress=False, _stop_after=7)
    first = _rows(out)
    assert len(first) == 7
    # a torn last line (killed in the middle of a write) is cut off on resume
    with out.open("a") as fh:
        fh.write("cluster.system=hgx-h100|cluster.gpus=999,abc,hgx")
    res = run_sweep(GPT3, GRID, out, executor="serial", progress=False)
    assert res.skipped == 7 and res.computed == 18 - 7
    rows = _rows(out)
    keys = [r["key"] for r in rows]
    assert len(keys) == 18 and len(set(keys)) == 18
    assert set(keys) == {point_key(p) for p in grid_points([parse_grid(g) for g in GRID])}
    # the rows written before the interruption are untouched
    assert rows[:7] == first
    # a third run computes nothing
    again = run_sweep(GPT3, GRID, out, executor="serial", progress=False)
    assert again.computed == 0 and len(_rows(out)) == 18
    # results: faster systems give shorter steps, more GPUs give shorter steps (same layout)
    by = {
        (r["cluster.system"], r["cluster.gpus"], r["scale.fabric_bandwidth"]): float(r["step_time_s"])
        for r in rows
    }
    assert by[("dgx-b200", "1024", "1")] < by[("hgx-h100", "1024", "1")]
    assert by[("hgx-h100", "1024", "1")] < by[("hgx-h100", "256", "1")]
    assert by[("hgx-h100", "1024", "0.5")] >= by[("hgx-h100", "1024", "1")]


def test_killed_process_resumes(tmp_path: Path) -> None:
    """SIGKILL a `simcore sweep` subprocess after a few rows, rerun it: every row exactly once."""
    out = tmp_path / "k.csv"
    grid = ["cluster.gpus=256,512,1024", "training.global_batch=512,1024,2048"]
    args = [
        "sweep",
        GPT3,
        "--grid",
        grid[0],
        "--grid",
        grid[1],
        "-o",
        str(out),
        "--mode",
        "plan",
        "--executor",
        "serial",
        "--quiet",
    ]
    code = f"from simcore.cli import main; main({args!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    t0 = time.time()
    try:
        while time.time() - t0 < 60 and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 3:  # header + 2 rows
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = _rows(out)
    assert 2 <= len(before) < 9, "the sweep finished before it could be killed"
    with pytest.raises(SystemExit) as ex:
        main(args)
    assert ex.value.code == 0
    rows = _rows(out)
    keys = [r["key"] for r in rows]
    assert len(keys) == 9 and len(set(keys)) == 9
    assert rows[: len(before)] == before
    assert all(r["status"] == "ok" for r in rows)


def test_local_processes_match_serial(tmp_path: Path) -> None:
    grid = ["cluster.gpus=256,512", "scale.nvlink_bandwidth=0.5,1,2"]
    a = run_sweep(GPT3, grid, tmp_path / "a.csv", executor="local", workers=2, progress=False)
    b = run_sweep(GPT3, grid, None, executor="serial", progress=False)
    assert [r["key"] for r in a.rows] == [r["key"] for r in b.rows]
    for ra, rb in zip(a.rows, b.rows, strict=True):
        assert ra["step_time_s"] == pytest.approx(rb["step_time_s"], rel=1e-12)
    steps = {r["key"]: r["step_time_s"] for r in a.rows}
    assert (
        steps["cluster.gpus=512|scale.nvlink_bandwidth=0.5"]
        > steps["cluster.gpus=512|scale.nvlink_bandwidth=2"]
    )


def test_dask_matches_local(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    grid = ["cluster.system=hgx-h100,dgx-b200", "cluster.gpus=256,512", "training.recompute=selective,full"]
    local = run_sweep(GPT3, grid, tmp_path / "l.csv", executor="local", progress=False)
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        dask = run_sweep(
            GPT3,
            grid,
            tmp_path / "d.csv",
            executor="dask",
            scheduler=cluster.scheduler_address,
            progress=False,
        )
    assert dask.computed == 8
    assert [r["key"] for r in dask.rows] == [r["key"] for r in local.rows]
    for rd, rl in zip(dask.rows, local.rows, strict=True):
        for k in ("step_time_s", "mfu", "memory_per_gpu_bytes", "energy_per_token_j"):
            assert rd[k] == pytest.approx(rl[k], rel=1e-12)


def test_plan_mode_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "s.png"
    with pytest.raises(SystemExit) as ex:
        main(
            [
                "sweep",
                GPT3,
                "--grid",
                "cluster.gpus=512,1024",
                "--mode",
                "plan",
                "--executor",
                "serial",
                "--plot",
                str(png),
                "--y",
                "mfu",
                "--quiet",
                "-o",
                str(tmp_path / "p.csv"),
            ]
        )
    assert ex.value.code == 0
    rows = _rows(tmp_path / "p.csv")
    assert len(rows) == 2 and all(r["status"] == "ok" and r["summary"] for r in rows)
    assert all(int(r["valid_configs"]) > 0 for r in rows)
    assert png.stat().st_size > 1000
    heat = tmp_path / "h.png"
    with pytest.raises(SystemExit) as ex:
        main(
            [
                "sweep",
                GPT3,
                "--grid",
                "cluster.gpus=512,1024",
                "--grid",
                "cluster.system=hgx-h100,hgx-h200",
                "--executor",
                "serial",
                "--plot",
                str(heat),
                "--kind",
                "heatmap",
                "--hue",
                "cluster.system",
                "--quiet",
            ]
        )
    assert ex.value.code == 0 and heat.stat().st_size > 1000


def test_output_and_executor_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--executor", "local", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler needs --executor dask"),
        (["--executor", "threads"], "unknown executor"),
        (["-o", str(tmp_path / "r.txt")], ".csv or .parquet"),
        (["--mode", "search"], "unknown mode"),
    ]
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        cases.append((["-o", str(tmp_path / "r.parquet")], "needs pyarrow"))
    for extra, what in cases:
        with pytest.raises(SystemExit) as ex:
            main(["sweep", "default", "--grid", "cluster.gpus=8", "--quiet", *extra])
        assert ex.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err and what in err


def test_results_file_of_another_sweep_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    run_sweep("default", ["cluster.gpus=8,16"], out, executor="serial", progress=False)
    with pytest.raises(SpecError, match="another sweep"):
        run_sweep("default", ["training.micro_batch=1,2"], out, executor="serial", progress=False)
    # the same grid over a changed base scenario computes its own rows (the base hash differs)
    res = run_sweep(
        "default",
        ["cluster.gpus=8,16"],
        out,
        executor="serial",
        overrides=["training.global_batch=128"],
        progress=False,
    )
    assert res.computed == 2 and len(_rows(out)) == 4
