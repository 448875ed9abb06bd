"""The one YAML reader refuses oversized files at once and names unknown fields quickly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simcore import load_scenario
from simcore.errors import SpecError
from simcore.specs.loader import MAX_YAML_BYTES, read_yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "scenarios" / "default.yaml").read_text()


def _unknown_keys(n: int, start: int = 0) -> str:
    return "".join(f"unknown_key_{i}: {i}\n" for i in range(start, start + n))


def test_oversized_file_is_refused_without_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    chunk = _unknown_keys(100_000)  # ~2.4 MB
    with big.open("w") as fh:
        fh.write(BASE)
        for _ in range(21):  # ~50 MB, like the report
            fh.write(chunk)
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as e:
        load_scenario(big)
    assert time.perf_counter() - t0 < 2.0
    msg = str(e.value)
    assert msg == f"{big}: larger than the {MAX_YAML_BYTES / 1e6:g} MB limit for scenario and spec YAML files"
    assert "\n" not in msg


def test_limit_is_a_parameter(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(BASE)
    assert read_yaml(f)["kind"] == "training"
    with pytest.raises(SpecError, match="larger than the 0.0001 MB limit"):
        read_yaml(f, max_bytes=100)


def test_many_unknown_keys_name_the_first_few(tmp_path: Path) -> None:
    f = tmp_path / "unknown.yaml"
    f.write_text(BASE + _unknown_keys(40_000))  # ~1 MB, under the limit
    assert f.stat().st_size < MAX_YAML_BYTES
    with pytest.raises(SpecError) as e:
        load_scenario(f)
    assert str(e.value) == (
        f"{f}: unknown_key_0: unknown field (+39999 more: 'unknown_key_1', 'unknown_key_2', ...)"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("modle: x\n", "modle: unknown field"),
        ("a: 1\nb: 2\n", "a: unknown field (+1 more: 'b')"),
        ("  mikro: 2\n", "training.mikro: unknown field"),
    ],
)
def test_unknown_keys_message(tmp_path: Path, extra: str, expected: str) -> None:
    if extra.startswith(" "):  # inside the training section
        body = BASE.replace("  micro_batch: 1\n", "  micro_batch: 1\n" + extra)
    else:
        body = BASE + extra
    f = tmp_path / "s.yaml"
    f.write_text(body)
    with pytest.raises(SpecError) as e:
        load_scenario(f)
    assert str(e.value) == f"{f}: {expected}"


def test_not_utf8_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"kind: \xff\xfe training\n")
    with pytest.raises(SpecError, match=r"bin\.yaml: cannot read: not UTF-8 text"):
        read_yaml(f)


@pytest.mark.parametrize("path", ["a\x00b", "scenarios/\x00.yaml"])
def test_a_path_with_a_nul_is_one_line(path: str) -> None:
    """A NUL character cannot be in a path: a SpecError naming it, not the OS layer's ValueError."""
    with pytest.raises(SpecError, match="not a valid path"):
        read_yaml(path)
    with pytest.raises(SpecError, match="not a valid path"):
        load_scenario(path)
