"""``runtime.stack`` and ``serving.engine`` are one choice: either names the serving engine, both must agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.errors import SpecError
from simcore.serving import load_serving
from simcore.serving.spec import with_serving_stack
from tests.cli_runner import run_cli

SCEN = Path(__file__).resolve().parents[2] / "scenarios" / "serve_llama3_8b_h200.yaml"
FAST = ["--set", "serving.requests=100"]


def test_the_stack_names_the_engine_and_the_engine_the_stack() -> None:
    sc, spec = load_serving(SCEN, ["runtime.stack=sglang"])
    sc2, spec2, _ = with_serving_stack(sc, spec)
    assert spec2.engine == "sglang" and sc2.runtime.stack == "sglang"
    sc, spec = load_serving(SCEN, ["serving.engine=trtllm"])
    sc3, spec3, _ = with_serving_stack(sc, spec)
    assert spec3.engine == "trtllm" and sc3.runtime.stack == "trtllm"
    # a field the scenario gives still wins over the engine's default
    assert "max_batch" in spec3.model_fields_set and spec3.max_batch == 256


def test_the_stacks_runtime_defaults_fill_what_the_scenario_leaves() -> None:
    sc, spec = load_serving(SCEN, ["runtime.stack=vllm"])
    data = sc.model_dump(exclude_unset=True)
    data["runtime"].pop("framework", None)
    from simcore.specs.resolve import scenario_from_dict

    bare = scenario_from_dict(data)
    sc2, _, chosen = with_serving_stack(bare, spec)
    assert sc2.runtime.framework == "cuda_graphs"
    assert "runtime.framework" in {c.key for c in chosen}


def test_different_engine_and_stack_is_one_error() -> None:
    sc, spec = load_serving(SCEN, ["runtime.stack=vllm", "serving.engine=sglang"])
    with pytest.raises(SpecError, match="name different software"):
        with_serving_stack(sc, spec)


def test_cli_reports_the_stack_and_refuses_a_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "serve", str(SCEN), *FAST, "--set", "runtime.stack=vllm", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["settings"]["engine"] == "vllm" and r["settings"]["stack"] == "vllm"
    code, out, err = run_cli(capsys, "serve", str(SCEN), *FAST, "--set", "runtime.stack=trtllm",
                             "--set", "serving.engine=vllm")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "serving.engine" in err
