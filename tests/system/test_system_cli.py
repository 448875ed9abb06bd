"""``simcore predict`` with the system keys: table rows, JSON, one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.cli_runner import run_cli

SETS = [
    "--set", "cluster.storage=llama3-tectonic",
    "--set", "runtime.checkpoint.mode=async",
    "--set", "reliability.restart_time=5 min",
    "--set", "runtime.dataloader.sample_time=2 s",
    "--set", "runtime.dataloader.num_workers=2",
]  # fmt: skip


def test_predict_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "predict", "default", *SETS)
    assert code == 0
    for row in ("data wait per step", "checkpoint", "goodput", "time to train (wall clock)"):
        assert row in out
    code, out, _ = run_cli(capsys, "predict", "default", *SETS, "--json")
    assert code == 0
    r = json.loads(out)
    fx = r["system_effects"]
    assert fx["dataloader"]["bound"] == "workers" and fx["dataloader"]["workers_needed"] == 5
    assert fx["checkpoint"]["mode"] == "async" and 0 < fx["reliability"]["goodput"] < 1
    assert r["breakdown"]["data_wait"] == pytest.approx(fx["dataloader"]["wait_per_step_s"])
    code, out, _ = run_cli(capsys, "predict", "default", "--json")
    assert "system_effects" not in json.loads(out)


@pytest.mark.parametrize(
    ("sets", "needle"),
    [
        (["runtime.checkpoint.mode=sometimes"], "runtime.checkpoint.mode"),
        (["cluster.storage=nfs-at-home", "runtime.checkpoint.mode=sync"], "cluster.storage"),
        (["cluster.power_cap=-5"], "cluster.power_cap"),
        (["reliability.mtbf=0"], "reliability.mtbf"),
        (["cluster.cooling=water"], "cluster.cooling"),
        (["cluster.system=gb200-nvl72", "cluster.gpus=8", "cluster.cooling=air"], "cluster.cooling"),
        (["cluster.system=hgx-a100", "cluster.cooling=liquid"], "cluster.cooling"),
        (["cluster.system=dgx-b200", "cluster.cooling=air", "cluster.power_cap=1200"], "cluster.power_cap"),
    ],
)
def test_bad_system_keys_one_line(capsys: pytest.CaptureFixture[str], sets: list[str], needle: str) -> None:
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = run_cli(capsys, "predict", "default", *args)
    assert code == 2
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
