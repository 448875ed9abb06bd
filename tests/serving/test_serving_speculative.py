"""Speculative decoding in the serving simulation: the expected tokens per round, the per-token step
cost, and the property that acceptance 0 is never faster than no speculation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.errors import SpecError
from simcore.serving import ServingSpec, simulate
from simcore.specs.serving import SpeculativeSpec
from tests.serving.test_serving import run, scen


@pytest.mark.parametrize(
    ("k", "a", "expected"),
    [(3, 0.0, 1.0), (3, 1.0, 4.0), (1, 0.5, 1.5), (2, 0.5, 1.75), (4, 0.8, (1 - 0.8**5) / 0.2)],
)
def test_tokens_per_round(k: int, a: float, expected: float) -> None:
    assert SpeculativeSpec(tokens=k, acceptance=a).tokens_per_round == pytest.approx(expected, rel=1e-12)


def test_a_lone_request_pays_draft_and_verification_per_expected_token() -> None:
    spec = {"tokens": 3, "acceptance": 0.6}
    r = run(requests=1, prompt=512, output=10, speculative=spec)
    base = run(requests=1, prompt=512, output=10)
    target = base.step_models["tp1"]
    spec_m = r.step_models["tp1-speculative"]
    e = (1 - 0.6**4) / 0.4
    draft_only = r.step_models["tp1-speculative"]
    for b in (1.0, 8.0, 64.0):
        for c in (513.0, 2048.0):
            # recover the draft's cost from the table and check it is positive and the formula holds
            verify = target.decode_gpu(b, c) + target.rest_gpu(b * 4) - target.rest_gpu(b)
            draft = (spec_m.decode_gpu(b, c) * e - verify) / 3
            assert draft > 0
            assert draft < target.decode_gpu(b, c)  # one layer + head, cheaper than the model
    ttft = target.rest_gpu(512) + target.attention(512)
    decode = sum(draft_only.decode(1, 512 + 1 + j) for j in range(9))
    assert r.log.ttft[0] == pytest.approx(ttft, rel=1e-12)
    assert r.log.e2e[0] == pytest.approx(ttft + decode, rel=1e-12)
    assert r.log.e2e[0] < base.log.e2e[0]


def test_higher_acceptance_is_faster() -> None:
    tpots = [
        run(rate=10.0, requests=200, speculative={"tokens": 3, "acceptance": a}).result.tpot_s.mean
        for a in (0.2, 0.5, 0.8)
    ]
    assert tpots[0] > tpots[1] > tpots[2]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.integers(1, 6),
    rate=st.sampled_from([2.0, 10.0, 30.0]),
    draft=st.booleans(),
)
def test_acceptance_zero_is_never_faster(k: int, rate: float, draft: bool) -> None:
    sd: dict[str, object] = {"tokens": k, "acceptance": 0.0}
    if draft:
        sd |= {"method": "draft", "draft_model": "llama3-8b"}
    load = {"rate": rate, "requests": 150, "prompt": 512, "output": 64}
    plain = run(**load)
    spec = run(**load, speculative=sd)
    assert spec.result.tpot_s.mean >= plain.result.tpot_s.mean
    assert spec.result.e2e_s.mean >= plain.result.e2e_s.mean * (1 - 1e-12)
    assert spec.result.kv_tokens_per_instance["mixed"] <= plain.result.kv_tokens_per_instance["mixed"]
    t, d = plain.step_models["tp1"], spec.step_models["tp1-speculative"]
    assert all(x >= y for rs, rt in zip(d.dec, t.dec, strict=True) for x, y in zip(rs, rt, strict=True))


def test_draft_model_must_share_the_vocabulary() -> None:
    spec = ServingSpec.model_validate(
        {
            "rate": 1.0,
            "requests": 5,
            "speculative": {"method": "draft", "draft_model": "gpt2-small", "tokens": 2, "acceptance": 0.5},
        }
    )
    with pytest.raises(SpecError, match="vocabulary"):
        simulate(scen(), spec)


@pytest.mark.parametrize(
    "bad",
    [
        {"tokens": 0, "acceptance": 0.5},
        {"tokens": 2, "acceptance": 1.5},
        {"method": "draft", "tokens": 2, "acceptance": 0.5},
        {"draft_model": "llama3-8b", "tokens": 2, "acceptance": 0.5},
    ],
)
def test_bad_speculative_fields(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SpeculativeSpec.model_validate(bad)
