"""simcore.moe_layer_time: one MoE layer's cost, by category (docs/parallelism.md, "MoE layer")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.errors import SpecError

QWEN = {
    "layers": 1, "hidden": 2048, "heads": 16, "ffn_hidden": 768, "vocab": 128, "seq_len": 4096,
    "moe": {"experts": 128, "top_k": 8, "expert_ffn_hidden": 768},
}  # fmt: skip


def test_parts_sum_and_permute_priced() -> None:
    t = simcore.moe_layer_time(QWEN, 4096)
    assert t["total_s"] == pytest.approx(t["fwd_s"] + t["bwd_s"])
    assert sum(t["by_category"].values()) == pytest.approx(t["total_s"])
    # permute gather + scale + unpermute scatter-add, forward and backward: at least 6 passes over the
    # routed rows (4096 x 8 x 2048 bf16) at H200's 4.8 TB/s
    routed_bytes = 4096 * 8 * 2048 * 2
    assert t["by_category"]["moe_permute"] > 6 * routed_bytes / 4.8e12
    assert "ep_comm" not in t["by_category"] or t["by_category"]["ep_comm"] == 0.0


def test_ep_adds_the_all_to_all_and_skew_slows_it() -> None:
    one = simcore.moe_layer_time(QWEN, 4096, "dgx-b200", ep=8)
    skewed = simcore.moe_layer_time({**QWEN, "moe": {**QWEN["moe"], "imbalance": 2.0}}, 4096, "dgx-b200", ep=8)
    assert one["by_category"]["ep_comm"] > 0
    assert skewed["by_category"]["ep_comm"] > one["by_category"]["ep_comm"]


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([512, 1024, 2048, 4096]))
def test_more_tokens_more_time(tokens: int) -> None:
    assert simcore.moe_layer_time(QWEN, 2 * tokens)["total_s"] > simcore.moe_layer_time(QWEN, tokens)["total_s"]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16384), st.integers(1, 512), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2]))
def test_any_more_tokens_never_cost_less(tokens: int, more: int, ep: int, etp: int) -> None:
    """Any token count, not only powers of two (an expert's rows then are a fractional expected share)."""
    t = simcore.moe_layer_time(QWEN, tokens, ep=ep, etp=etp)["total_s"]
    assert simcore.moe_layer_time(QWEN, tokens + more, ep=ep, etp=etp)["total_s"] >= t


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"tokens": 0}, "tokens"), ({"ep": 3}, "ep"), ({"model": {**QWEN, "moe": None}}, "model.moe")],
)
def test_bad_arguments_name_the_field(kw: dict, field: str) -> None:  # type: ignore[type-arg]
    args = {"model": QWEN, "tokens": 1024, **kw}
    with pytest.raises(SpecError) as e:
        simcore.moe_layer_time(**args)
    assert e.value.field == field


def test_a_preset_name_is_its_model() -> None:
    from simcore.specs.registry import default_registry

    by_name = simcore.moe_layer_time("qwen3-30b-a3b", 4096)
    fields = {k: v for k, v in default_registry().model_preset("qwen3-30b-a3b").items() if k != "aliases"}
    assert by_name["total_s"] == simcore.moe_layer_time(fields, 4096)["total_s"]
