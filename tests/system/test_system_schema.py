"""The JSON Schema (``simcore schema``) carries the system keys, each with a description."""

from __future__ import annotations

import json

import pytest

from tests.cli_runner import run_cli


def test_schema_carries_the_system_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    defs = schema["$defs"]
    for section, key in (
        ("ClusterSpec", "storage"),
        ("ClusterSpec", "power_cap"),
        ("ClusterSpec", "mig"),
        ("ClusterSpec", "cooling"),
        ("ClusterSpec", "sharing"),
        ("SharingSpec", "mode"),
        ("RuntimeSpec", "dataloader"),
        ("RuntimeSpec", "checkpoint"),
        ("DataLoaderSpec", "pin_memory"),
        ("DataLoaderSpec", "num_workers"),
        ("ReliabilitySpec", "mtbf"),
        ("CheckpointSpec", "mode"),
    ):
        assert defs[section]["properties"][key].get("description"), f"{section}.{key}"
    assert "reliability" in schema["properties"]
