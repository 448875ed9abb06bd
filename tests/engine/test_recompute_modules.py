"""Selective recompute of named modules (Megatron-Core's ``recompute_modules``): which forward ops each
module re-runs, that the engine prices them once more before the backward, and the scenario check."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from simcore.errors import SpecError
from simcore.prediction import predict
from simcore.specs.resolve import scenario_from_dict
from simcore.workload import lowering as L
from simcore.workload.layout import Layout

MLA_MOE: dict[str, Any] = {
    "layers": 8,
    "hidden": 1024,
    "heads": 16,
    "head_dim": 64,
    "ffn_hidden": 4096,
    "vocab": 32000,
    "seq_len": 2048,
    "activation": "swiglu",
    "norm": "rmsnorm",
    "moe": {"experts": 16, "top_k": 2, "shared_experts": 1, "expert_ffn_hidden": 512, "dense_layers": 2},
    "mla": {
        "q_lora_rank": 384,
        "kv_lora_rank": 128,
        "qk_nope_head_dim": 64,
        "qk_rope_head_dim": 32,
        "v_head_dim": 64,
    },
}


def _sc(recompute: str = "none", modules: list[str] | None = None, model: dict[str, Any] = MLA_MOE) -> Any:
    training: dict[str, Any] = {"micro_batch": 1, "global_batch": 16, "recompute": recompute}
    if modules is not None:
        training["recompute_modules"] = modules
    return scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "hgx-h100", "gpus": 8},
            "model": model,
            "training": training,
            "parallel": {"tp": 1, "pp": 1, "ep": 8},
            "runtime": {"stack": "megatron"},
        }
    )


def _names(modules: list[str], moe_layer: bool) -> list[str]:
    m = _sc().model
    lay = Layout(micro_batch=1, seq=2048, ep=8)
    return [o.name for o in L.recompute_fwd(m, lay, moe_layer, modules)]


def test_modules_pick_their_forward_ops() -> None:
    assert _names(["mla_up_proj"], True) == ["q_up", "kv_up"]
    assert _names(["mlp"], True) == []  # Megatron recomputes "mlp" on dense layers only
    assert {"mlp_in", "mlp_out"} <= set(_names(["mlp"], False))
    act = _names(["moe_act"], True)
    assert act and all(n.startswith("expert_") for n in act) and "expert_mlp_in" not in act
    assert {"ep_dispatch", "ep_combine", "router"} <= set(_names(["moe"], True))
    assert all(n.startswith("shared_") for n in _names(["shared_experts"], True))
    assert len(_names(["layernorm"], False)) == 2  # input_layernorm and pre_mlp_layernorm
    assert _names(["core_attn", "mla_up_proj"], True)[-2:] == ["q_up", "kv_up"]


def _rec(recompute: str = "none", modules: list[str] | None = None) -> float:
    r = predict(_sc(recompute, modules))
    return sum(v for k, v in r.breakdown.items() if k.startswith("recompute_"))


def test_recomputed_modules_cost_their_forward_once_more() -> None:
    up = _rec("selective", ["mla_up_proj"])
    more = _rec("selective", ["mla_up_proj", "moe"])
    assert _rec() == 0.0 < up < more < _rec("full")
    # core_attn named explicitly is Megatron's default selective recompute
    assert _rec("selective", ["core_attn"]) == pytest.approx(_rec("selective"), rel=1e-12)
    # the step never gets shorter for recomputing more
    steps = [
        predict(_sc(*a)).step_time_s
        for a in (("none", None), ("selective", ["mla_up_proj"]), ("selective", ["mla_up_proj", "moe"]))
    ]
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(steps))  # up to float rounding


def test_modules_need_selective() -> None:
    with pytest.raises(SpecError, match="recompute_modules"):
        _sc("none", ["moe_act"])
    with pytest.raises(SpecError, match="recompute_modules"):
        _sc("selective", ["experts"])


def test_planner_keeps_the_modules_only_under_selective() -> None:
    from simcore.planning.plan import scenario_for

    sc = _sc("selective", ["moe_act"])
    lay = {
        "gpus": 8,
        "micro_batch": 1,
        "global_batch": 16,
        "tp": 1,
        "pp": 1,
        "dp": 8,
        "cp": 1,
        "ep": 8,
        "vp": 1,
        "sp": False,
        "zero": 1,
        "schedule": "1f1b",
        "dp_overlap": True,
        "tp_overlap": False,
    }
    assert scenario_for(sc, {**lay, "recompute": "selective"}).training.recompute_modules == ["moe_act"]
    assert scenario_for(sc, {**lay, "recompute": "full"}).training.recompute_modules == []
