"""The model presets of today's families: each one's parameter count against the total its source
publishes (a check of the transcribed shapes, not of simcore's counting), and each trains on a system."""

from __future__ import annotations

import pytest

from simcore.prediction import predict
from simcore.specs.resolve import scenario_from_dict
from simcore.workload.model import param_counts

# (preset, published total parameters, relative tolerance): the model cards / reports cited in each YAML
PUBLISHED = [
    ("qwen3-8b", 8.2e9, 0.02),
    ("qwen3-32b", 32.8e9, 0.02),
    ("kimi-k2", 1.04e12, 0.03),  # includes its MTP layer, not modelled
    ("gpt-oss-120b", 116.8e9, 0.02),
    ("gpt-oss-20b", 20.9e9, 0.02),
    ("nemotron4-340b", 341e9, 0.02),
    ("nemotron4-15b", 15.6e9, 0.03),
    ("mixtral-8x22b", 141e9, 0.02),
    ("llama4-scout", 109e9, 0.02),
    ("llama4-maverick", 400e9, 0.02),
    ("deepseek-v3", 671e9, 0.01),
    ("mistral-7b", 7.24e9, 0.01),
    ("qwen3-235b-a22b", 235e9, 0.01),
    ("deepseek-v4-flash", 284e9, 0.01),  # the model card: 284B total, 13B active
]


def _sc(preset: str, **model: object) -> object:
    return scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "dgx-b200", "gpus": 64},
            "model": {"preset": preset, "seq_len": 1024, **model},
            "training": {"micro_batch": 1, "global_batch": 64, "precision": "mxfp8"},
            "parallel": {"tp": 8, "pp": 8 if preset in ("nemotron4-340b", "kimi-k2") else 1},
        }
    )


@pytest.mark.parametrize(("preset", "total", "tol"), PUBLISHED)
def test_preset_parameter_count(preset: str, total: float, tol: float) -> None:
    sc = _sc(preset)
    assert param_counts(sc.model).total == pytest.approx(total, rel=tol)  # type: ignore[attr-defined]


@pytest.mark.parametrize("preset", ["qwen3-8b", "nemotron4-15b", "gpt-oss-20b", "llama4-scout"])
def test_preset_trains(preset: str) -> None:
    r = predict(_sc(preset))  # type: ignore[arg-type]
    assert r.step_time_s > 0


def test_imbalance_beside_a_preset_slows_its_moe_step() -> None:
    base = predict(_sc("gpt-oss-20b")).step_time_s  # type: ignore[arg-type]
    skew = predict(_sc("gpt-oss-20b", moe={"imbalance": 1.5})).step_time_s  # type: ignore[arg-type]
    assert skew > base
