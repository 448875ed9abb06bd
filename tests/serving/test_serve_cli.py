"""``simcore serve``: JSON keys, table, plot and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_runner import run_cli

SCEN = Path(__file__).resolve().parents[2] / "scenarios" / "serve_llama3_8b_h200.yaml"
FAST = ["--set", "serving.requests=200"]


def test_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "serve", str(SCEN), *FAST, "--json")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    r = json.loads(lines[0])
    for k in (
        "requests_per_s",
        "output_tokens_per_s",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "goodput",
        "slo_attainment",
        "kv_utilization",
        "mean_queue",
        "max_queue",
        "gpus",
        "events",
    ):
        assert k in r, k
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(r[k]) == {"mean", "p50", "p90", "p99", "max"}
        assert 0 < r[k]["p50"] <= r[k]["p90"] <= r[k]["p99"] <= r[k]["max"]
    assert r["requests"] == 200
    assert r["kind"] == "serving"
    assert r["events"] > r["requests"]


def test_set_and_table_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "serve.png"
    code, out, err = run_cli(capsys, "serve", str(SCEN), *FAST, "--set", "serving.rate=2", "--plot", str(png))
    assert code == 0, err
    assert "TTFT" in out and "goodput" in out and "2 offered" in out
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    "sets,needles",
    [
        (["serving.rate=-1"], ["serving.rate", "greater than 0"]),
        (["serving.bogus=1"], ["serving.bogus", "unknown field"]),
        (["serving.max_batch_tokens=8"], ["max_batch_tokens"]),
        (["serving.replicas=4"], ["serving.replicas", "4 replica"]),
        (["kind=training"], ["kind", "serving"]),
        (["serving.disaggregated.prefill_gpus=1"], ["decode_gpus", "required"]),
        (["serving.memory_utilization=0.12"], ["KV cache"]),
        (["serving.trace=t.csv"], ["serving", "exactly one"]),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], sets: list[str], needles: list[str]
) -> None:
    args = ["serve", str(SCEN)]
    for s in sets:
        args += ["--set", s]
    code, out, err = run_cli(capsys, *args)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_bad_trace_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,prompt_len,output_len\n0,10,2\n1,x,3\n", encoding="utf-8")
    data = yaml.safe_load(SCEN.read_text(encoding="utf-8"))
    data["serving"] = {"trace": "t.csv"}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, _, err = run_cli(capsys, "serve", str(f))
    assert code == 2
    assert "line 3" in err and "t.csv" in err
    assert len(err.strip().splitlines()) == 1
    data["serving"] = {"trace": "missing.csv"}
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, _, err = run_cli(capsys, "serve", str(f))
    assert code == 2
    assert "missing.csv" in err and "not found" in err
    assert len(err.strip().splitlines()) == 1
