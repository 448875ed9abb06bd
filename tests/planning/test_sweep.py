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


# --------------------------------------------------------------------------------------------------
# Memory feasibility: a point that does not fit is never `ok`
# --------------------------------------------------------------------------------------------------

FIT_GRID = ["training.micro_batch=1,2,4", "cluster.system=hgx-h100,hgx-h200"]


def test_points_that_do_not_fit_are_not_ok(tmp_path: Path) -> None:
    """The default scenario (plain PyTorch: AMP's fp32 weights) needs 99 GB per GPU at micro-batch 1 (an
    80 GB H100 cannot hold it) and 179 GB at micro-batch 4 (neither can a 141 GB H200): those points are `does_not_fit`, agree with
    `predict`, and the fastest point (micro-batch 4) is not the best."""
    from simcore import predict
    from simcore.specs.resolve import load_scenario

    out = tmp_path / "f.csv"
    res = run_sweep("default", FIT_GRID, out, executor="serial", progress=False)
    rows = _rows(out)
    assert len(rows) == 6 and {"fits_in_memory", "fits_reason", "memory_per_gpu_bytes"} <= set(rows[0])
    for r in rows:
        p = predict(
            load_scenario(
                "default",
                [
                    f"training.micro_batch={r['training.micro_batch']}",
                    f"cluster.system={r['cluster.system']}",
                ],
            )
        )
        assert r["fits_in_memory"] == str(p.fits_in_memory)
        assert r["fits_reason"] == p.fits_reason
        assert float(r["memory_per_gpu_bytes"]) == pytest.approx(p.memory_per_gpu_bytes)
        assert r["status"] == ("ok" if p.fits_in_memory else "does_not_fit")
        assert r["error"] == "" and float(r["step_time_s"]) > 0  # its numbers are kept
    status = {(r["training.micro_batch"], r["cluster.system"]): r["status"] for r in rows}
    assert status == {
        ("1", "hgx-h100"): "does_not_fit",
        ("1", "hgx-h200"): "ok",
        ("2", "hgx-h100"): "does_not_fit",
        ("2", "hgx-h200"): "ok",
        ("4", "hgx-h100"): "does_not_fit",
        ("4", "hgx-h200"): "does_not_fit",
    }
    assert "needs" in next(r for r in rows if r["status"] == "does_not_fit")["fits_reason"]
    assert (res.ok, res.does_not_fit, res.errors) == (2, 4, 0)
    # micro-batch 4 is the fastest point, but it does not fit: the best is micro-batch 2 on the H200
    fastest = min(res.rows, key=lambda r: r["step_time_s"])
    assert fastest["training.micro_batch"] == 4
    best = res.best("step_time_s")
    assert best is not None and best["key"] == "training.micro_batch=2|cluster.system=hgx-h200"
    best_mfu = res.best("mfu")  # higher is better
    assert best_mfu is not None and best_mfu["key"] == best["key"]
    assert res.best("memory_per_gpu_bytes", largest=True)["training.micro_batch"] == 2  # type: ignore[index]
    with pytest.raises(SpecError, match="no column"):
        res.best("nope")
    # resumed from the file, the same statuses
    again = run_sweep("default", FIT_GRID, out, executor="serial", progress=False)
    assert again.computed == 0 and [r["status"] for r in again.rows] == [r["status"] for r in res.rows]
    assert again.rows[0]["fits_in_memory"] is False and again.does_not_fit == 4


def test_sweep_table_counts_and_best_skip_points_that_do_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ex:
        main(
            [
                "sweep",
                "default",
                *[a for g in FIT_GRID for a in ("--grid", g)],
                "--executor",
                "serial",
                "--quiet",
            ]
        )
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert "2 ok, 4 do not fit, 0 failed" in " ".join(out.split())
    assert out.count("does_not_fit") >= 4
    assert "4 point(s) do not fit in device memory" in out and "needs 92.2 GiB per GPU" in " ".join(
        out.split()
    )
    flat = " ".join(out.split())
    assert (
        "lowest step_time_s among the points that fit: training.micro_batch=2|cluster.system=hgx-h200" in flat
    )
    assert "99 GB" in out  # memory per GPU in bytes units, not 9.898e+10
    # --json rows carry the status and the reason
    with pytest.raises(SystemExit):
        main(["sweep", "default", "--grid", "cluster.system=hgx-h100", "--executor", "serial", "--json"])
    import json

    row = json.loads(capsys.readouterr().out.strip().splitlines()[0])
    assert row["status"] == "does_not_fit" and row["fits_in_memory"] is False and "h100" in row["fits_reason"]


def test_sweep_plot_marks_points_that_do_not_fit(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from simcore.report import plots

    res = run_sweep("default", FIT_GRID, None, executor="serial", progress=False)
    drawn: dict[str, object] = {}
    real = plots.save

    def spy(fig: object, path: object, **kw: object) -> None:
        drawn["fig"] = fig
        real(fig, path, **kw)  # type: ignore[arg-type]

    plots.save = spy  # type: ignore[assignment]
    try:
        png = tmp_path / "l.png"
        plots.sweep(res.rows, "training.micro_batch", "step_time_s", png, hue="cluster.system")
        ax = drawn["fig"].axes[0]  # type: ignore[attr-defined]
        labels = [ln.get_label() for ln in ax.get_lines()]
        assert "does not fit in memory" in labels
        cross = ax.get_lines()[labels.index("does not fit in memory")]
        assert len(cross.get_xdata()) == 4
        h200 = ax.get_lines()[labels.index("cluster.system=hgx-h200")]
        assert list(h200.get_xdata()) == [1, 2]  # the lines join only points that fit
        plots.sweep(
            res.rows, "training.micro_batch", "step_time_s", tmp_path / "h.png", "cluster.system", "heatmap"
        )
        texts = [t.get_text() for t in drawn["fig"].axes[0].texts]  # type: ignore[attr-defined]
        assert texts.count("no fit") == 4
        # a point with no value (plan mode: no layout fits) is still marked, on the x axis
        rows = [dict(r) for r in res.rows]
        rows[0]["step_time_s"] = None
        plots.sweep(rows, "training.micro_batch", "step_time_s", tmp_path / "n.png", hue="cluster.system")
        crosses = [ln for ln in drawn["fig"].axes[0].get_lines() if ln.get_marker() == "x"]  # type: ignore[attr-defined]
        assert sorted(len(ln.get_xdata()) for ln in crosses) == [1, 3]
    finally:
        plots.save = real  # type: ignore[assignment]
    assert png.stat().st_size > 1000


def test_plan_mode_reports_fit_and_no_layout_that_fits(tmp_path: Path) -> None:
    """Plan mode: the best layout per point fits (and says by how much); where no layout fits the
    memory (a 175B model on 8 GPUs), the row is `does_not_fit`, not an error."""
    out = tmp_path / "p.csv"
    res = run_sweep(
        GPT3,
        ["cluster.gpus=8,512"],
        out,
        executor="serial",
        mode="plan",
        plan_args={"des_top": 0},
        progress=False,
    )
    rows = {r["cluster.gpus"]: r for r in _rows(out)}
    small, big = rows["8"], rows["512"]
    assert small["status"] == "does_not_fit" and small["fits_in_memory"] == "False" and small["error"] == ""
    assert "none of the" in small["fits_reason"] and int(small["evaluated_configs"]) > 0
    assert int(small["valid_configs"]) == 0 and small["device"]
    assert big["status"] == "ok" and big["fits_in_memory"] == "True" and "GiB usable" in big["fits_reason"]
    assert (res.ok, res.does_not_fit, res.errors) == (1, 1, 0)
    assert res.best() is not None and res.best()["cluster.gpus"] == 512  # type: ignore[index]


def test_plan_mode_best_layout_that_predict_says_does_not_fit_is_not_ok(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should the planner's pick not fit by `predict`'s memory model, the row says so."""
    import importlib

    P = importlib.import_module("simcore.planning.plan")
    real = P._predict_entry

    def over(*a: object, **k: object) -> dict[str, object]:
        e = real(*a, **k)  # type: ignore[arg-type]
        return {**e, "fits_in_memory": False, "memory_per_gpu_bytes": 1e12}

    monkeypatch.setattr(P, "_predict_entry", over)
    res = run_sweep(GPT3, ["cluster.gpus=512"], None, executor="serial", mode="plan", progress=False)
    r = res.rows[0]
    assert r["status"] == "does_not_fit" and r["fits_in_memory"] is False
    assert r["fits_reason"].startswith("needs 931.3 GiB per GPU") and res.best() is None


def test_result_file_of_an_older_simcore_is_upgraded_on_resume(tmp_path: Path) -> None:
    """A CSV written before the fits_reason column (and the does_not_fit status) resumes: its header
    gains the column, an `ok` row that did not fit becomes `does_not_fit`, nothing is recomputed."""
    out = tmp_path / "old.csv"
    run_sweep("default", FIT_GRID, out, executor="serial", progress=False)
    rows = _rows(out)
    header = [c for c in rows[0] if c != "fits_reason"]
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        for r in rows[:4]:  # an interrupted old sweep: 4 of 6 rows, the misfits as `ok`
            w.writerow({**r, "status": "ok"})
    res = run_sweep("default", FIT_GRID, out, executor="serial", progress=False)
    assert res.skipped == 4 and res.computed == 2
    new = _rows(out)
    assert list(new[0]) == list(rows[0]) and len(new) == 6
    assert {r["key"]: r["status"] for r in new} == {r["key"]: r["status"] for r in rows}
    assert "does_not_fit" in {r["status"] for r in new[:4]}  # an old `ok` row that did not fit
    assert all(r["fits_reason"] == "" for r in new[:4]) and all("GiB" in r["fits_reason"] for r in new[4:])
    # a file of another sweep is still refused
    bad = tmp_path / "bad.csv"
    bad.write_text("key,base,x,status\n")
    with pytest.raises(SpecError, match="another sweep"):
        run_sweep("default", FIT_GRID, bad, executor="serial", progress=False)


def test_older_plan_mode_rows_are_upgraded() -> None:
    from simcore.planning.sweep import _upgrade

    none_fit = {
        "status": "error",
        "error": "no layout fits in memory",
        "fits_in_memory": "",
        "fits_reason": "",
    }
    assert _upgrade(dict(none_fit)) == {
        "status": "does_not_fit",
        "error": "",
        "fits_in_memory": "False",
        "fits_reason": "no layout fits in memory",
    }
    assert _upgrade({"status": "ok", "error": "", "fits_in_memory": ""})["fits_in_memory"] == "True"
    other = {"status": "error", "error": "tp 3 does not divide 8", "fits_in_memory": ""}
    assert _upgrade(dict(other)) == other


# --------------------------------------------------------------------------------------------------
# Ctrl-C and SIGKILL of a sweep on local worker processes
# --------------------------------------------------------------------------------------------------

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()  # [state, ppid, pgrp, ...]


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None and st[1] == str(pid) and st[0] not in ("Z", "X"):
                out.append(int(d.name))
    return out


def _local_sweep(out: Path) -> tuple[list[str], subprocess.Popen[bytes]]:
    """A plan-mode sweep of 6 points on 2 local worker processes, started in its own session."""
    args = [
        "sweep",
        GPT3,
        "--grid",
        "cluster.gpus=256,512,1024",
        "--grid",
        "training.global_batch=512,2048",
        "-o",
        str(out),
        "--mode",
        "plan",
        "--executor",
        "local",
        "--workers",
        "2",
        "--quiet",
    ]
    code = f"from simcore.cli import main; main({args!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=ROOT,
    )
    t0 = time.time()
    while time.time() - t0 < 120 and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 2 and len(_children(proc.pid)) >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    return args, proc


def _gone(pids: list[int], within_s: float) -> bool:
    t0 = time.time()
    while time.time() - t0 < within_s:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@needs_proc
@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_keeps_rows_says_how_to_resume_and_ends_workers(tmp_path: Path, to: str) -> None:
    """Ctrl-C in a terminal (SIGINT to the whole process group) or `kill -INT` of the sweep: exit 130
    with one line saying the rows are kept and a rerun resumes; no worker is left; the rerun resumes."""
    out = tmp_path / "c.csv"
    args, proc = _local_sweep(out)
    workers = _children(proc.pid)
    try:
        if to == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert proc.returncode == 130, err.decode()
    kept = len(_rows(out))
    assert len(lines) == 1 and "Traceback" not in err.decode()
    assert lines[0] == f"interrupted: {kept} of 6 points are kept in {out}; rerun the same command to resume"
    assert 1 <= kept < 6
    assert _gone(workers, 5), "worker processes outlived the interrupted sweep"
    if to == "parent":
        return
    with pytest.raises(SystemExit) as ex:
        main([*args[:-5], "--executor", "serial", "--quiet"])  # the same sweep, resumed (any executor)
    assert ex.value.code == 0
    keys = [r["key"] for r in _rows(out)]
    assert len(keys) == 6 and len(set(keys)) == 6


@needs_proc
def test_sigkill_of_a_sweep_leaves_no_worker_running(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up in the sweep: its workers notice their parent is gone and exit."""
    out = tmp_path / "k.csv"
    _, proc = _local_sweep(out)
    workers = _children(proc.pid)
    assert len(workers) >= 2
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _gone(workers, 5), "worker processes outlived the killed sweep"
    finally:
        for p in workers:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_ctrl_c_without_an_output_file_says_nothing_was_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import simcore.planning.sweep as S

    real = S.run_point
    calls = []

    def interrupt(task: S.SweepTask) -> dict[str, object]:
        calls.append(task.key)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(S, "run_point", interrupt)
    with pytest.raises(SystemExit) as ex:
        main(["sweep", "default", "--grid", "cluster.gpus=8,16,32", "--executor", "serial", "--quiet"])
    assert ex.value.code == 130 and len(calls) == 2  # stopped at once, not after the window
    err = capsys.readouterr().err.strip()
    assert err == (
        "interrupted after 0 of 3 points; without -o nothing was kept (give -o results.csv to make a sweep resumable)"
    )
