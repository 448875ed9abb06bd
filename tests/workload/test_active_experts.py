"""Experts an MoE layer runs (and whose weights it reads) at few tokens: ``lowering.active_experts``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.specs.scenario import ModelSpec, MoESpec
from simcore.workload import lowering as L


def test_one_token_reads_top_k_experts_and_a_large_batch_nearly_all() -> None:
    # one rank: the mean number of experts hit, E (1 - (1 - k/E)^T)
    assert L.active_experts(128, 8, 1, 1) == pytest.approx(8.0)
    assert L.active_experts(128, 8, 1, 256) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 256))
    assert L.active_experts(128, 8, 1, 256) > 127.99
    # Mixtral (8 experts, top 2) decoding 4 sequences: 8 (1 - 0.75^4) = 5.46875, not 8
    assert L.active_experts(8, 2, 1, 4) == pytest.approx(5.46875)


def test_the_busiest_rank_sets_the_count() -> None:
    # 4 experts top-1 over 2 ranks, 4 tokens: an expert is hit with p = 1 - 0.75^4; a rank's count is
    # Binomial(2, p); the larger of two: P(max >= 1) + P(max >= 2) = (1 - (1-p)^4) + (1 - (1 - p^2)^2)
    p = 1 - 0.75**4
    want = (1 - (1 - p) ** 4) + (1 - (1 - p**2) ** 2)
    assert L.active_experts(4, 1, 2, 4) == pytest.approx(want)
    assert want > 2 * p  # above the mean
    # at least one expert a rank (its kernels run with no token), at most its share
    assert L.active_experts(256, 8, 8, 0) == 1.0
    assert L.active_experts(256, 8, 8, 1e6) == pytest.approx(32.0)


def test_arrays_of_tokens_and_ep() -> None:
    got = L.active_experts(128, 8, np.array([1, 8]), np.array([1, 8]))
    assert got[0] == pytest.approx(L.active_experts(128, 8, 1, 1))
    assert got[1] == pytest.approx(L.active_experts(128, 8, 8, 8))


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([(8, 2), (16, 1), (64, 6), (128, 8), (256, 8)]),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(1, 5000),
    st.floats(1.01, 4),
)
def test_more_tokens_never_run_fewer_experts(ek, ep, tokens, grow) -> None:  # type: ignore[no-untyped-def]
    e, k = ek
    a, b = L.active_experts(e, k, ep, tokens), L.active_experts(e, k, ep, tokens * grow)
    assert 1.0 <= a <= b + 1e-9 <= e / ep + 1e-6


def _moe_model(experts: int, top_k: int) -> ModelSpec:
    return ModelSpec(
        layers=1, hidden=1024, heads=16, ffn_hidden=4096, vocab=128, seq_len=4096, activation="swiglu",
        norm="rmsnorm", moe=MoESpec(experts=experts, top_k=top_k, expert_ffn_hidden=512),
    )  # fmt: skip


def test_a_decode_step_reads_k_experts_per_token_at_batch_1_and_nearly_all_at_256() -> None:
    m = _moe_model(128, 8)

    def experts_run(batch: int, ep: int = 1) -> float:
        lay = L.Layout(micro_batch=batch, seq=1.0, ep=ep, etp=1 if ep > 1 else None, kv_seq=512.0)
        gemm = next(o for o in L.moe_block_fwd(m, lay) if o.name == "expert_mlp_in")
        return float(gemm.args["batch"])

    assert experts_run(1) == pytest.approx(8.0)  # top_k experts' weights
    assert experts_run(256) > 127.9  # nearly every expert's
    assert experts_run(16) == pytest.approx(128 * (1 - (120 / 128) ** 16))  # 82.3: between
    # EP 8 at one sequence a rank: the group routes 8 tokens, 64 expert hits over 8 ranks of 16 experts
    assert 8 < experts_run(1, ep=8) < 16
