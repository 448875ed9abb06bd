"""Bad input gives ONE line naming the file and the field, exit status 2, and no traceback.

Scenario files go through ``simcore check``; broken user spec folders come in through ``--specs DIR``
and the ``SIMCORE_SPECS`` environment variable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcore.specs.registry import builtin_dir, set_user_dirs
from tests.cli_runner import run_cli

GOOD = {"kind": "training", "cluster": {"system": "hgx-h200", "nodes": 2}, "model": {"preset": "llama3-8b"}}


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SIMCORE_SPECS", raising=False)
    set_user_dirs([])
    yield
    set_user_dirs([])


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], (n, lines[0])


def scenario(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(yaml.safe_dump(GOOD))
    for key, value in changes.items():
        node = data
        parts = key.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return data


def write(tmp_path: Path, data: dict[str, Any] | str, name: str = "scenario.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def test_good_scenario_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "check", str(write(tmp_path, GOOD)))
    assert code == 0, err
    assert "hgx-h200" in out


# --- scenario files ------------------------------------------------------------------------------------

SCENARIO_CASES: list[tuple[str, Callable[[Path], dict[str, Any] | str], tuple[str, ...]]] = [
    (
        "malformed YAML",
        lambda t: "kind: training\ncluster: {system: hgx-h200\n",
        ("malformed YAML at line",),
    ),
    ("unknown top-level field", lambda t: scenario(t, colour="red"), ("colour", "unknown field")),
    ("unknown nested field", lambda t: scenario(t, model__colour="red"), ("model.colour", "unknown field")),
    (
        "wrong units for a bandwidth",
        lambda t: scenario(t, cluster__fabric={"nic_bandwidth": "4.8 TB"}),
        ("cluster.fabric.nic_bandwidth", "'4.8 TB'", "not a bandwidth unit"),
    ),
    (
        "negative rate",
        lambda t: scenario(t, cluster__fabric={"nic_bandwidth": "-400 Gb/s"}),
        ("cluster.fabric.nic_bandwidth", "greater than 0"),
    ),
    (
        "zero rate",
        lambda t: scenario(t, cluster__fabric={"nic_bandwidth": 0}),
        ("cluster.fabric.nic_bandwidth", "greater than 0"),
    ),
    (
        "unknown system name",
        lambda t: scenario(t, cluster__system="hgx-h999"),
        ("cluster.system", "unknown system 'hgx-h999'", "hgx-h200"),
    ),
    ("gpus zero", lambda t: scenario(t, cluster__gpus=0), ("cluster.gpus", "greater than 0")),
    ("gpus negative", lambda t: scenario(t, cluster__gpus=-8), ("cluster.gpus", "greater than 0")),
    (
        "gpus exceed nodes x system GPUs",
        lambda t: scenario(t, cluster__gpus=24),
        ("cluster.gpus", "24 GPUs exceed", "16"),
    ),
    (
        "unknown model preset",
        lambda t: scenario(t, model__preset="llama9"),
        ("model.preset", "unknown model preset 'llama9'"),
    ),
    (
        "fabric link that is not a network",
        lambda t: scenario(t, cluster__fabric={"link": "nvlink4"}),
        ("cluster.fabric.link", "expected infiniband or ethernet"),
    ),
    ("wrong kind", lambda t: scenario(t, kind="trainign"), ("kind",)),
    (
        "MoE dispatcher on a dense model",
        lambda t: scenario(t, runtime__moe_dispatcher="deepep"),
        ("runtime.moe_dispatcher", "applies to an MoE model", "llama3-8b"),
    ),
    (
        "MoE A2A overlap on an inference scenario",
        lambda t: scenario(t, kind="inference", model__preset="mixtral-8x7b", runtime__moe_a2a_overlap=True),
        ("runtime.moe_a2a_overlap", "kind: inference"),
    ),
    (
        "pipeline library without pipeline stages",
        lambda t: scenario(t, parallel__pipeline_library="own"),
        ("parallel.pipeline_library", "pp 1"),
    ),
    ("empty file", lambda t: "", ("file is empty",)),
    ("not a mapping", lambda t: "- a\n- b\n", ("expected a mapping",)),
]


@pytest.mark.parametrize("case,make,needles", SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
def test_bad_scenario(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    case: str,
    make: Callable[[Path], dict[str, Any] | str],
    needles: tuple[str, ...],
) -> None:
    path = write(tmp_path, make(tmp_path))
    code, _, err = run_cli(capsys, "check", str(path))
    assert_one_line_error(code, err, str(path), *needles)


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    code, _, err = run_cli(capsys, "check", str(path))
    assert_one_line_error(code, err, str(path), "file not found")


def test_bad_set_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    code, _, err = run_cli(capsys, "check", str(path), "--set", "cluster.gpus=-1")
    assert_one_line_error(code, err, str(path), "cluster.gpus")


# --- user spec folders ------------------------------------------------------------------------------


def h100_like(**changes: Any) -> dict[str, Any]:
    d: dict[str, Any] = yaml.safe_load((builtin_dir() / "devices" / "h100.yaml").read_text())
    d.update(name="my-gpu", aliases=[])
    for key, value in changes.items():
        node = d
        parts = key.split("__")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    return d


SPEC_CASES: list[tuple[str, str, dict[str, Any] | str, tuple[str, ...]]] = [
    ("malformed YAML", "devices/my-gpu.yaml", "name: my-gpu\npeak: [\n", ("malformed YAML",)),
    ("unknown field", "devices/my-gpu.yaml", h100_like(colour="red"), ("colour", "unknown field")),
    (
        "wrong units",
        "devices/my-gpu.yaml",
        h100_like(memory__bandwidth="4.8 TB"),
        ("memory.bandwidth", "'4.8 TB'", "not a bandwidth unit"),
    ),
    (
        "flops given as bytes",
        "devices/my-gpu.yaml",
        h100_like(peak__bf16="989 GB"),
        ("peak.bf16", "not a flop_rate unit"),
    ),
    (
        "negative rate",
        "devices/my-gpu.yaml",
        h100_like(peak__bf16="-989 TFLOP/s"),
        ("peak.bf16", "greater than 0"),
    ),
    (
        "zero rate",
        "devices/my-gpu.yaml",
        h100_like(nvlink__bandwidth=0),
        ("nvlink.bandwidth", "greater than 0"),
    ),
    (
        "missing required field",
        "devices/my-gpu.yaml",
        {k: v for k, v in h100_like().items() if k != "tdp"},
        ("tdp", "required field is missing"),
    ),
    ("empty file", "devices/my-gpu.yaml", "", ("file is empty",)),
    (
        "system naming an unknown device",
        "systems/my-node.yaml",
        {
            **yaml.safe_load((builtin_dir() / "systems" / "hgx-h200.yaml").read_text()),
            "name": "my-node",
            "aliases": [],
            "device": "h999",
        },
        ("device", "unknown device 'h999'"),
    ),
    (
        "system gpus not a multiple of the NVLink domain",
        "systems/my-node.yaml",
        {
            **yaml.safe_load((builtin_dir() / "systems" / "hgx-h200.yaml").read_text()),
            "name": "my-node",
            "aliases": [],
            "gpus": 12,
        },
        ("multiple of nvlink_domain",),
    ),
    (
        "link with a negative latency",
        "links/my-link.yaml",
        {
            **yaml.safe_load((builtin_dir() / "links" / "ib-ndr.yaml").read_text()),
            "name": "my-link",
            "aliases": [],
            "latency": "-1 us",
        },
        ("latency", "greater than or equal to 0"),
    ),
]


def spec_folder(tmp_path: Path, rel: str, content: dict[str, Any] | str) -> tuple[Path, Path]:
    root = tmp_path / "specs"
    f = root / rel
    f.parent.mkdir(parents=True)
    f.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return root, f


@pytest.mark.parametrize("via", ["option", "env"])
@pytest.mark.parametrize("case,rel,content,needles", SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_bad_user_spec(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    via: str,
    case: str,
    rel: str,
    content: dict[str, Any] | str,
    needles: tuple[str, ...],
) -> None:
    root, f = spec_folder(tmp_path, rel, content)
    scen = write(tmp_path, GOOD)
    if via == "option":
        code, _, err = run_cli(capsys, "--specs", str(root), "check", str(scen))
    else:
        monkeypatch.setenv("SIMCORE_SPECS", str(root))
        code, _, err = run_cli(capsys, "check", str(scen))
    assert_one_line_error(code, err, str(f), *needles)


def test_missing_spec_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = tmp_path / "no-such-dir"
    code, _, err = run_cli(capsys, "--specs", str(root), "check", str(write(tmp_path, GOOD)))
    assert_one_line_error(code, err, str(root), "spec folder not found")


def test_good_user_system_is_usable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    node = yaml.safe_load((builtin_dir() / "systems" / "hgx-h200.yaml").read_text())
    node.update(name="my-node", aliases=[], gpus=16, nvlink_domain=16)
    root, _ = spec_folder(tmp_path, "systems/my-node.yaml", node)
    scen = write(tmp_path, scenario(tmp_path, cluster__system="my-node", cluster__nodes=1))
    code, out, err = run_cli(capsys, "--specs", str(root), "check", str(scen), "--json")
    assert code == 0, err
    assert '"gpus": 16' in out


def test_real_process_prints_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, scenario(tmp_path, cluster__gpus=24))
    env = {k: v for k, v in os.environ.items() if k != "SIMCORE_SPECS"}
    p = subprocess.run(
        [sys.executable, "-c", "from simcore.cli import main; main()", "check", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 2
    assert p.stdout == ""
    assert_one_line_error(p.returncode, p.stderr, str(path), "cluster.gpus")


@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        ({"training__activation_offload_layers": 1000}, ("training.activation_offload_layers", "1000 layers")),
        ({"parallel__pp": 4, "parallel__pipeline_layers": [1, 2]}, ("parallel.pipeline_layers", "pp (4) entries")),
    ],
)
def test_errors_of_the_model_code_name_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, changes: dict[str, Any], needles: tuple[str, ...]
) -> None:
    """Values the file's validation passes but the prediction cannot honour: one line naming the file too."""
    path = write(tmp_path, scenario(tmp_path, **changes))
    code, _, err = run_cli(capsys, "predict", str(path))
    assert_one_line_error(code, err, str(path), *needles)


def test_a_scenario_written_out_whole_with_its_stacks_values_passes() -> None:
    """The planner writes a stacked scenario out whole (every field given): the stack's MoE defaults on a dense
    model, and the fields' own defaults, change nothing and are not errors; a value of the user's own is (when
    the stack is applied, as every prediction does)."""
    from simcore.engine.runtime import with_stack
    from simcore.errors import SpecError
    from simcore.specs.resolve import scenario_from_dict

    sc = scenario_from_dict({**GOOD, "runtime": {"stack": "megatron"}})
    data = with_stack(sc)[0].model_dump(mode="json", exclude_none=True)
    assert data["runtime"]["moe_expert_calls"] == "per_expert"
    with_stack(scenario_from_dict(data))
    data["runtime"]["moe_dispatcher"] = "hybridep"
    with pytest.raises(SpecError, match="runtime.moe_dispatcher"):
        with_stack(scenario_from_dict(data))
