"""``simcore calibrate`` knows which GPU its inputs ran on: from the traces' ``deviceProperties`` or the
files the collection scripts wrote beside an op CSV; a ``--device`` that contradicts them, inputs of two
GPUs, or inputs that say nothing without ``--device``, are one line and exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simcore.calibration.calibrate import detect_device, sort_inputs
from tests.cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]
H100_OPS = REPO / "traces/h100/round117/ops.csv.gz"
H200_OPS = REPO / "traces/h200/ops.csv.gz"


@pytest.mark.parametrize(
    ("path", "device"),
    [
        (H100_OPS, "h100"),  # ops_env.json beside it
        (H200_OPS, "h200"),
        (REPO / "traces/h100/round118/cold.csv.gz", "h100"),  # nvidia-smi's table in env.txt
        (REPO / "traces/h200/round59/eager_ops.csv.gz", "h200"),  # env_round59.txt
    ],
)
def test_device_read_beside_op_csvs(path: Path, device: str) -> None:
    hit = detect_device(sort_inputs([path]), [])
    assert hit is not None and hit[0] == device


def test_device_from_a_trace() -> None:
    from simcore.workload.replay import load_analyses

    t = REPO / "traces/h100/round117/profile_train_gpt_gelu_ln.json.gz"
    hit = detect_device(sort_inputs([t]), load_analyses([str(t)]))
    assert hit is not None and hit[0] == "h100" and "H100" in hit[1]


def test_contradicting_device_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "calibrate", str(H100_OPS), "--device", "h200", "--no-comm")
    assert code == 2 and "Traceback" not in err
    assert "--device h200 but the measurements ran on h100" in err and "pass --device h100" in err


def test_two_gpus_at_once_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "calibrate", str(H100_OPS), str(H200_OPS), "--no-comm")
    assert code == 2 and "ran on different GPUs" in err and "Traceback" not in err


def test_nothing_says_which_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lone = tmp_path / "ops.csv.gz"
    shutil.copy(H100_OPS, lone)
    code, _out, err = run_cli(capsys, "calibrate", str(lone), "--no-comm")
    assert code == 2 and "cannot tell which GPU" in err and "pass --device" in err
    # with --device it calibrates
    out = tmp_path / "p.yaml"
    code, text, err = run_cli(capsys, "calibrate", str(lone), "--device", "h100", "--no-comm", "-o", str(out))
    assert code == 0, err
    assert out.is_file() and "compute profile for h100" in text


def test_unknown_gpu_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    shutil.copy(H100_OPS, folder / "ops.csv.gz")
    (folder / "ops_env.json").write_text('{"gpu": "Tesla V100-SXM2-32GB"}')
    code, _out, err = run_cli(capsys, "calibrate", str(folder / "ops.csv.gz"), "--no-comm")
    assert code == 2 and "a GPU simcore does not know: 'Tesla V100-SXM2-32GB'" in err and "Traceback" not in err
    # told which device to fit for, it does (the sweep says nothing simcore can check against)
    assert detect_device(sort_inputs([folder / "ops.csv.gz"]), []) is None
