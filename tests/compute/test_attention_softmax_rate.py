"""Attention's softmax work transferred at the special-function units' rate (docs/parallelism.md, section 9)."""

from __future__ import annotations

import pytest

from simcore.compute.ops import attention
from simcore.specs.profile import attention_score_scale, load_profile
from simcore.specs.registry import default_registry


def _dev(name: str):  # type: ignore[no-untyped-def]
    return default_registry().device(name)


def test_scale_by_hand() -> None:
    h200, b200, gb300 = _dev("h200"), _dev("b200"), _dev("gb300")
    # H200: 989e12 / (16 x 132 x 1.98e9) FLOP per exp; B200: 2.25e15 / (16 x 148 x 1.965e9)
    ratio_h = 989e12 / (16 * 132 * 1.98e9)
    ratio_b = 2.25e15 / (16 * 148 * 1.965e9)
    assert attention_score_scale(h200, b200) == pytest.approx(ratio_b / ratio_h, rel=1e-9)
    assert attention_score_scale(h200, h200) == pytest.approx(1.0)
    # Blackwell Ultra doubled the exp rate: about Hopper's balance again
    assert attention_score_scale(h200, gb300) == pytest.approx(
        (2.5e15 / (32 * 148 * 2.032e9)) / ratio_h, rel=1e-9
    )


def test_unknown_exp_rate_keeps_the_fit() -> None:
    assert attention_score_scale(_dev("h200"), _dev("mi300x")) == 1.0


def test_transferred_profile_carries_the_scale() -> None:
    assert load_profile(_dev("b200")).attention_score_scale == pytest.approx(2.04, abs=0.02)
    assert load_profile(_dev("b300")).attention_score_scale == pytest.approx(0.99, abs=0.02)


def test_same_tensor_peak_more_exps_is_faster() -> None:
    """GB200 and GB300 share the bf16 peak; GB300's doubled exp rate makes its attention faster,
    most where the head is small (the softmax a larger share per score)."""
    gb200, gb300 = _dev("gb200"), _dev("gb300")
    kw = dict(batch=1, heads=32, seq=8192, head_dim=128, causal=True, kv_heads=8, dtype="bf16", backend="cudnn")
    t200 = float(attention(gb200, load_profile(gb200), **kw).time_s)  # type: ignore[arg-type]
    t300 = float(attention(gb300, load_profile(gb300), **kw).time_s)  # type: ignore[arg-type]
    assert t300 < t200 * 0.85
