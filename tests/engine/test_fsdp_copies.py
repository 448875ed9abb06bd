"""FSDP2's copy kernels around its collectives (``simcore.engine.training._fsdp_copies``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import simcore
from simcore.compute.ops import op_time
from simcore.specs.resolve import load_scenario
from simcore.specs.scenario import Scenario
from simcore.workload.model import param_counts

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests/data/trace_scenarios/h200x2_fsdp_gpt350m.yaml"  # FSDP2 over 2 H200s, gpt-350m
PARAMS = 405_062_656  # gpt-350m, untied (traces/h200x2/parallel.csv.gz params_per_rank)


def _plain(m: int = 1) -> Scenario:
    sc = load_scenario(str(SC))
    rt = sc.runtime.model_copy(update={"profiler": False})
    tr = sc.training.model_copy(update={"global_batch": sc.training.micro_batch * 2 * m})
    return sc.model_copy(update={"runtime": rt, "training": tr})


def test_copy_out_copies_each_gathered_bf16_parameter() -> None:
    """Forward and backward all-gathers of the layers, one of the root (embedding, LM head), each
    copy the gathered bf16 parameters out: 2 + 2 bytes read + written per element, priced on the
    fitted copy curve."""
    sc = _plain()
    pc = param_counts(sc.model)
    gathered = 2 * pc.dense_layers * pc.per_dense_layer + pc.embedding + pc.lm_head
    assert gathered == pytest.approx(2 * PARAMS - (pc.embedding + pc.lm_head), rel=0.01)  # gpt-350m's count
    r = simcore.predict(sc)
    want = op_time("copy", "h200", name="copy", bytes=4.0 * gathered).time_s
    assert r.breakdown["fsdp_copy"] == pytest.approx(want, rel=0.02)


def test_copy_out_scales_with_micro_batches_and_ddp_has_none() -> None:
    one, four = (simcore.predict(_plain(m)).breakdown["fsdp_copy"] for m in (1, 4))
    assert four == pytest.approx(4 * one, rel=1e-9)
    sc = _plain()
    ddp = sc.model_copy(update={"parallel": sc.parallel.model_copy(update={"fsdp": False, "zero": 0})})
    assert simcore.predict(ddp).breakdown.get("fsdp_copy", 0.0) == 0.0
