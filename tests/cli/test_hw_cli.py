"""``simcore hw list|show`` through the CLI entry point (in process) and one real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simcore.cli.common import console
from simcore.specs.registry import builtin_dir, set_user_dirs
from tests.cli_runner import run_cli


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SIMCORE_SPECS", raising=False)
    set_user_dirs([])
    yield
    set_user_dirs([])


@pytest.fixture
def wide() -> Iterator[None]:
    """Tables wide enough that cells are not wrapped (pytest's capture looks like an 80-column tty)."""
    old = console._width
    console.width = 300
    yield
    console._width = old


def user_device(tmp_path: Path, name: str = "my-gpu") -> Path:
    """A user spec folder holding one device derived from the built-in H100."""
    d = yaml.safe_load((builtin_dir() / "devices" / "h100.yaml").read_text())
    d.update(name=name, aliases=[], display_name="My GPU")
    d["peak"]["bf16"] = "1234 TFLOP/s"
    d["peak"]["fp16"] = "1234 TFLOP/s"
    (tmp_path / "devices").mkdir(parents=True)
    (tmp_path / "devices" / f"{name}.yaml").write_text(yaml.safe_dump(d))
    return tmp_path


@pytest.mark.usefixtures("wide")
def test_hw_list_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "hw", "list")
    assert code == 0, err
    for name in ("h100", "h200", "b200", "gb200", "a100", "mi300x", "ib-ndr", "nvswitch4", "hgx-h200"):
        assert name in out
    assert "989 TFLOP/s" in out  # H100/H200 dense bf16 in the devices table
    assert "model presets:" in out and "llama3-70b" in out


def test_hw_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "list", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d) == {"devices", "systems", "links", "models"}
    assert "gb300-nvl72" in d["systems"] and "ib-xdr" in d["links"] and "deepseek-v3" in d["models"]
    assert d["devices"] == sorted(d["devices"])


def test_hw_show_device_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "h100", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["kind"] == "device"
    assert d["peak"]["bf16"] == 989e12
    assert d["memory"]["bandwidth"] == 3.35e12
    assert d["nvlink"]["bandwidth"] == 450e9
    assert d["derived"]["ridge_point_bf16_flop_per_byte"] == pytest.approx(989e12 / 3.35e12)
    assert "peak" in d["sources"]


def test_hw_show_alias_and_case(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "DGX-H100", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["kind"] == "system" and d["name"] == "hgx-h100"
    assert d["derived"]["scaleout_bandwidth"] == 8 * 50e9


def test_hw_show_link_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "ib-ndr", "--json")
    assert code == 0
    d = json.loads(out)
    # describe() puts kind="link" first, then the Link's own ``kind`` field (infiniband) overrides it
    assert d["kind"] == "infiniband" and d["bandwidth"] == 50e9 and d["radix"] == 64


@pytest.mark.usefixtures("wide")
def test_hw_show_table_has_sources(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "b200")
    assert code == 0
    assert "2.25 PFLOP/s" in out and "sources" in out


def test_hw_show_h800_system_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "hw", "show", "hgx-h800", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["nvlink_bandwidth"] == 200e9 and d["derived"]["nvlink_bandwidth_per_gpu"] == 200e9


def test_hw_show_unknown_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "hw", "show", "h900")
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "unknown device, system or link 'h900'" in err


def test_user_specs_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = user_device(tmp_path)
    code, out, _ = run_cli(capsys, "--specs", str(folder), "hw", "show", "my-gpu", "--json")
    assert code == 0
    assert json.loads(out)["peak"]["bf16"] == 1234e12
    code, out, _ = run_cli(capsys, "--specs", str(folder), "hw", "list", "--json")
    assert "my-gpu" in json.loads(out)["devices"]
    code, out, _ = run_cli(capsys, "hw", "list", "--json")  # without --specs the user device is gone
    assert "my-gpu" not in json.loads(out)["devices"]


def test_user_spec_replaces_builtin(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = user_device(tmp_path, name="h100")
    code, out, _ = run_cli(capsys, "--specs", str(folder), "hw", "show", "h100", "--json")
    assert code == 0
    assert json.loads(out)["peak"]["bf16"] == 1234e12


def test_env_var_specs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMCORE_SPECS", str(user_device(tmp_path)))
    code, out, _ = run_cli(capsys, "hw", "show", "my-gpu", "--json")
    assert code == 0
    assert json.loads(out)["display_name"] == "My GPU"


def test_subprocess_console_script() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SIMCORE_SPECS"}
    p = subprocess.run(
        [sys.executable, "-c", "from simcore.cli import main; main()", "hw", "show", "h200", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["memory"]["capacity"] == 150109880320.0 and d["calibration"] == "h200"


def test_docs_user_spec_example_loads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The user-device example in docs/hardware.md is a valid spec."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "hardware.md").read_text()
    m = re.search(r"```yaml\n(# my_specs/devices/(\S+)\.yaml\n.*?)```", text, re.S)
    assert m, "docs/hardware.md lost its user-device example"
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / f"{m.group(2)}.yaml").write_text(m.group(1))
    code, out, err = run_cli(capsys, "--specs", str(tmp_path), "hw", "show", m.group(2), "--json")
    assert code == 0, err
    assert json.loads(out)["tdp"] == 500.0
