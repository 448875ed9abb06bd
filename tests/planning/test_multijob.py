"""Several training jobs on one fabric (docs/parallelism.md, Several jobs on one fabric): hand-computed
contention factors on a small fat tree, no slowdown on a non-blocking one, the placement rules and the
one-line errors of bad multi-job files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcore.comm.flow import data_parallel_groups
from simcore.errors import SpecError
from simcore.planning.multijob import predict_jobs
from simcore.specs.multijob import load_multi_job
from tests.cli_runner import run_cli

JOB: dict[str, Any] = {
    "kind": "training",
    "model": {"preset": "llama3-8b"},
    "training": {"micro_batch": 1, "global_batch": 16},
    "parallel": {"tp": 8, "zero": 1, "dp_overlap": False},
    "runtime": {"stack": "megatron"},
}


def _file(oversubscription: float, a: Any = (0, 2), b: Any = (1, 3)) -> dict[str, Any]:
    """Two TP 8 x DP 2 jobs on 4 HGX H100 of a fat tree of radix-32 leaves (16 ports down: two nodes'
    eight NICs each, so leaf 0 holds nodes 0 and 1, leaf 1 nodes 2 and 3)."""
    return {
        "name": "two",
        "cluster": {
            "system": "hgx-h100",
            "nodes": 4,
            "fabric": {"topology": "fat_tree", "oversubscription": oversubscription, "switch_radix": 32},
        },
        "jobs": [
            {"name": "a", "nodes": list(a) if not isinstance(a, int) else a, "scenario": copy.deepcopy(JOB)},
            {"name": "b", "nodes": list(b) if not isinstance(b, int) else b, "scenario": copy.deepcopy(JOB)},
        ],
    }


def test_groups_in_megatron_rank_order() -> None:
    assert data_parallel_groups(2, 1, 2, 2) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert data_parallel_groups(1, 2, 2) == [[0, 2], [1, 3]]


def test_scattered_jobs_on_an_oversubscribed_spine() -> None:
    # Each job's 8 data-parallel pairs join node 0 (or 1) to node 2 (or 3): every pair's ring sends one
    # flow up out of each leaf. A leaf's uplink is 16 ports x 50 GB/s / 4 = 200 GB/s. One pair alone
    # moves at its NIC's 50 GB/s; a job's 8 flows share the 200 GB/s: 25 GB/s each, 2x slower; with the
    # other job's 8 on the same uplink, 16 share it: 12.5 GB/s, 4x.
    r = predict_jobs(_file(4.0))
    for j in r.jobs:
        assert j.dp_contention_alone == pytest.approx(2.0, rel=1e-6)
        assert j.dp_contention_together == pytest.approx(4.0, rel=1e-6)
        # nothing overlaps the gradient all-reduce (dp_overlap false): latency + 2 wire alone, latency +
        # 4 wire together, so what is left unslowed is the all-reduce's latency (tens of microseconds)
        wire = j.dp_comm_together_s - j.dp_comm_alone_s
        assert 0 < j.dp_comm_alone_s - wire < 1e-3
        assert j.step_time_together_s - j.step_time_alone_s == pytest.approx(wire, rel=1e-6)
        assert j.slowdown > 1.0
    assert [j.systems for j in r.jobs] == [[0, 2], [1, 3]]


def test_phased_jobs_weigh_the_other_by_its_duty_cycle() -> None:
    # two jobs: job a's reduction meets b's a fraction u_b of the time (b's data-parallel seconds over its
    # step, alone), so a's factor is 2 + u_b (4 - 2); its step lies between alone and together
    r = predict_jobs(_file(4.0))
    a, b = r.jobs
    for me, other in ((a, b), (b, a)):
        assert 0.0 < other.dp_duty < 1.0
        assert me.dp_contention_phased == pytest.approx(2.0 + other.dp_duty * 2.0, rel=1e-9)
        assert me.step_time_alone_s < me.step_time_phased_s < me.step_time_together_s
    # the duty cycle: ZeRO-1's reduce-scatter and all-gather of the gradients' and weights' bytes, no
    # overlap here, so exactly the exposed data-parallel seconds of the step alone
    assert a.dp_duty == pytest.approx(a.dp_comm_alone_s / a.step_time_alone_s, rel=1e-6)
    assert any("phased" in n for n in r.notes)


def test_non_blocking_fabric_no_slowdown() -> None:
    r = predict_jobs(_file(1.0))
    for j in r.jobs:
        assert j.dp_contention_alone == pytest.approx(1.0)
        assert j.dp_contention_together == pytest.approx(1.0)
        assert j.slowdown == pytest.approx(1.0)


def test_jobs_on_their_own_leaves_do_not_meet() -> None:
    # counts fill the lowest free systems in order: a on 0-1 (leaf 0), b on 2-3 (leaf 1); each job's
    # rings stay inside its leaf
    r = predict_jobs(_file(4.0, 2, 2))
    assert [j.systems for j in r.jobs] == [[0, 1], [2, 3]]
    assert all(j.slowdown == pytest.approx(1.0) for j in r.jobs)


def test_placement_counts_after_listed_systems() -> None:
    spec, jobs = load_multi_job({**_file(4.0, 2, [0, 3]), "cluster": {"system": "hgx-h100"}})
    assert [j.systems for j in jobs] == [(1, 2), (0, 3)]
    assert spec.cluster.nodes == 4


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d["jobs"][1].update(nodes=[2, 3]), "jobs[1].nodes: system 2 is held by jobs[0]"),
        (lambda d: d["cluster"].update(nodes=3), "cluster.nodes"),
        (
            lambda d: d["jobs"][0]["scenario"].update(cluster={"system": "hgx-h100"}),
            "jobs[0].scenario.cluster",
        ),
        (lambda d: d["jobs"][0]["scenario"].update(kind="inference", training=None), "jobs[0].scenario"),
        (lambda d: d["jobs"][1].update(name="a"), "two jobs are named 'a'"),
        (lambda d: d.update(jobs=[]), "jobs"),
        (lambda d: d["jobs"][0]["scenario"]["parallel"].update(tp=3), "jobs[0].scenario.parallel"),
    ],
)
def test_bad_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: Any, needle: str
) -> None:
    d = _file(4.0)
    change(d)
    p = tmp_path / "jobs.yaml"
    p.write_text(yaml.safe_dump(d))
    code, _out, err = run_cli(capsys, "predict", str(p))
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err
    with pytest.raises(SpecError):
        predict_jobs(p)


def test_cli_json_and_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "predict", "multi-job-llama3-8b-fat-tree-4to1", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["kind"] == "jobs" and [j["name"] for j in r["jobs"]] == ["a", "b"]
    assert all(j["slowdown"] > 1.0 for j in r["jobs"])
    code, _out, err = run_cli(capsys, "predict", "multi-job-llama3-8b-fat-tree-4to1", "--engine", "des")
    assert code == 2 and "--engine" in err
    code, out, err = run_cli(capsys, "schema", "--jobs")
    assert code == 0, err
    assert "jobs" in json.loads(out)["properties"]


def _with_job_file(tmp_path: Path, cluster: dict[str, Any] | None) -> Path:
    job = {**copy.deepcopy(JOB), **({"cluster": cluster} if cluster else {})}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    d = _file(4.0)
    d["jobs"][0]["scenario"] = str(tmp_path / "job.yaml")
    p = tmp_path / "jobs.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_a_job_files_own_cluster_is_replaced_and_noted(tmp_path: Path) -> None:
    r = predict_jobs(_with_job_file(tmp_path, {"system": "hgx-h100", "gpus": 64}))
    assert any(n.startswith("jobs[0].scenario (") and "own cluster replaced" in n for n in r.notes)
    assert r.jobs[0].gpus == 16
    plain = predict_jobs(_with_job_file(tmp_path, None))
    assert not any("own cluster" in n for n in plain.notes)


@pytest.mark.parametrize(
    ("cluster", "needle"),
    [({"system": "hgx-h200", "gpus": 16}, "runs on hgx-h200"), (None, "not found")],
)
def test_a_job_file_on_another_system_or_missing_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cluster: dict[str, Any] | None, needle: str
) -> None:
    p = _with_job_file(tmp_path, cluster)
    if cluster is None:
        (tmp_path / "job.yaml").unlink()
    code, _out, err = run_cli(capsys, "predict", str(p))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(p) in err and "jobs[0].scenario" in err and needle in err


def test_cli_set_cluster_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    name = "multi-job-llama3-8b-fat-tree-4to1"
    code, out, err = run_cli(
        capsys, "predict", name, "--set", "cluster.fabric.oversubscription=1", "--explain", "--json"
    )
    assert code == 0, err
    r = json.loads(out)
    assert r["fabric"]["oversubscription"] == 1 and all(j["slowdown"] == pytest.approx(1.0) for j in r["jobs"])
    assert set(r["stack_defaults"]) == {"a", "b"}
    assert any(d["field"] == "parallel.dp_overlap" for d in r["stack_defaults"]["a"])
    assert any(n.startswith("job a: stack megatron defaults") for n in r["notes"])
    code, _out, err = run_cli(capsys, "predict", name, "--set", "jobs.0.nodes=3")
    assert code == 2 and "cluster.* only" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, "check", name, "--set", "cluster.nodes=5", "--json")
    assert code == 0 and json.loads(out)["nodes"] == 5, err
