"""What a newcomer meets first: --version, the list of built-in scenarios, --help that shows flags as flags,
costs with their currency, ``simcore op`` saying how its three times relate, and messages that print
brackets as they are (rich markup never eats ``[dask]``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import simcore
from simcore.cli.common import add_row, note
from simcore.cli.op import launch_relation
from simcore.specs.registry import builtin_dir, set_user_dirs
from tests.cli_runner import run_cli


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    set_user_dirs([])
    yield
    set_user_dirs([])


def one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- --version ----------------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "--version")
    assert code == 0, err
    assert out.strip() == f"simcore {simcore.__version__}"


# --- built-in scenarios -------------------------------------------------------------------------------


def test_scenarios_lists_every_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "scenarios", "--json")
    assert code == 0, err
    rows = json.loads(out)["scenarios"]
    names = [r["name"] for r in rows]
    assert names == sorted(p.stem for p in builtin_dir("scenarios").glob("*.yaml"))
    assert "default" in names
    by = {r["name"]: r for r in rows}
    assert by["default"]["kind"] == "training" and "predict" in by["default"]["commands"]
    assert (
        by["serve_llama3_8b_h200"]["kind"] == "serving" and "serve" in by["serve_llama3_8b_h200"]["commands"]
    )
    assert all(r["description"] and "\n" not in r["description"] for r in rows)
    # every name listed is what the commands take
    code, _out, err = run_cli(capsys, "check", *names, "--json")
    assert code == 0, err

    code, out, err = run_cli(capsys, "scenarios")
    assert code == 0, err
    for n in names:
        assert n in out
    assert "simcore predict NAME" in out


def test_help_and_hw_list_point_to_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert "scenarios" in out and "--version" in out
    code, out, _ = run_cli(capsys, "hw", "list")
    assert code == 0
    assert "built-in scenarios: simcore scenarios" in out


# --- --help: flags are flags --------------------------------------------------------------------------


def _all_commands() -> list[list[str]]:
    import typer

    from simcore.cli import _register
    from simcore.cli.common import app

    _register()
    out: list[list[str]] = [[]]

    def walk(cmd: Any, prefix: list[str]) -> None:
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            out.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(typer.main.get_command(app), [])
    return out


def test_flags_show_no_value_type_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    cmds = _all_commands()
    assert ["predict"] in cmds and ["hw", "list"] in cmds
    for cmd in cmds:
        code, out, err = run_cli(capsys, *cmd, "--help")
        assert code == 0, (cmd, err)
        assert "<bool>" not in out, (cmd, out)
    code, out, _ = run_cli(capsys, "predict", "--help")
    assert "--json" in out and "<str>" in out  # options that take a value keep their type


# --- costs carry a currency ---------------------------------------------------------------------------


def _cost_line(out: str) -> str:
    return next(line for line in out.splitlines() if "│ cost" in line)


def test_predict_cost_has_currency(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "predict", "default")
    assert code == 0, err
    assert _cost_line(out).rstrip(" │").endswith("USD")
    code, out, err = run_cli(capsys, "predict", "default", "--set", "cost.currency=EUR")
    assert code == 0, err
    assert _cost_line(out).rstrip(" │").endswith("EUR")


def test_plan_cost_column_has_currency(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "default", "--top", "1", "--des", "0", "--tp", "1,2")
    assert code == 0, err
    assert "cost USD" in out


def test_currency_is_a_scenario_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((builtin_dir("scenarios") / "default.yaml").read_text())
    data["cost"]["currency"] = ""
    bad = tmp_path / "s.yaml"
    bad.write_text(yaml.safe_dump(data))
    code, _out, err = run_cli(capsys, "check", str(bad))
    assert "cost.currency" in one_error_line(code, err)


# --- simcore op: how the three times relate -----------------------------------------------------------


def test_op_explains_time_per_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "op", "attention", "--batch", "1", "--heads", "32", "--seq", "1",
                             "--kv-seq", "512", "--head-dim", "128")  # fmt: skip
    assert code == 0, err
    assert "time per kernel = launch overhead" in " ".join(out.split())


@pytest.mark.parametrize(
    ("time_s", "kernel_s", "launch_s", "says"),
    [
        (26.4e-6, 11e-6, 26.4e-6, "time per kernel = launch overhead"),
        (43.4e-6, 41.7e-6, 26.4e-6, "time per kernel = kernel + 1.7 us idle gap"),
        (10e-6, 6e-6, 4e-6, "time per kernel = kernel + launch overhead (6 us + 4 us)"),
        (2e-3, 2e-3, 26.4e-6, "time per kernel = kernel: the 26.4 us launch overhead is hidden"),
    ],
)
def test_launch_relation(time_s: float, kernel_s: float, launch_s: float, says: str) -> None:
    text = launch_relation(time_s, kernel_s, launch_s)
    assert text.startswith(says), text
    assert "\n" not in text


# --- brackets survive rich ----------------------------------------------------------------------------


def test_install_hint_keeps_its_brackets(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    code, _out, err = run_cli(
        capsys, "sweep", "default", "--grid", "cluster.gpus=8", "--executor", "dask", "--quiet"
    )
    assert "pip install 'simcore[dask]'" in one_error_line(code, err)


def test_path_with_brackets_keeps_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "check", "runs/[dask]/x.yaml")
    assert "runs/[dask]/x.yaml" in one_error_line(code, err)
    folder = tmp_path / "[bold]" / "[dask]"
    folder.mkdir(parents=True)
    p = folder / "x.yaml"
    p.write_text("kind: training\ncluster: {system: hgx-h200\n")
    code, _out, err = run_cli(capsys, "check", str(p))
    assert str(p) in one_error_line(code, err)


def test_tables_print_names_as_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((builtin_dir("scenarios") / "default.yaml").read_text())
    data["name"] = "run [dask] [/]"
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(capsys, "check", str(p))
    assert code == 0, err
    assert "run [dask] [/]" in out
    code, out, err = run_cli(capsys, "predict", str(p))
    assert code == 0, err
    assert "run [dask] [/]" in out


def test_note_and_rows_are_literal(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.table import Table

    from simcore.cli.common import console

    note("install 'simcore[dask]' or [red]x[/red]")
    t = Table()
    t.add_column("a")
    add_row(t, "[bold]b[/]")
    console.print(t)
    out = capsys.readouterr().out
    assert "note: install 'simcore[dask]' or [red]x[/red]" in out
    assert "[bold]b[/]" in out


def test_python_m_simcore_cli() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-m", "simcore.cli", "--version"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"simcore {simcore.__version__}"


@pytest.mark.parametrize(
    ("args", "flag"),
    [(["--top", "0"], "--top"), (["--des", "-1"], "--des"), (["--max-days", "-1"], "--max-days"), (["--max-cost", "0"], "--max-cost")],
)
def test_plan_bounds_name_the_flag(capsys: pytest.CaptureFixture[str], args: list[str], flag: str) -> None:
    code, _out, err = run_cli(capsys, "plan", "default", *args)
    assert code == 2 and err.strip().startswith(f"error: {flag}:") and err.count("\n") == 1, err
