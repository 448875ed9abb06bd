"""The eager host runs ahead of the GPU inside a one-stage step (``training.host_run_ahead``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.training import host_run_ahead


def _simulate(units: list[tuple[float, float]], m: int) -> tuple[float, float]:
    """Reference: op-by-op host/GPU pipeline with an unbounded queue (host issues unit i after
    unit i-1; the GPU runs unit i once it is issued and the GPU is free)."""
    h_t = g_t = 0.0
    for _ in range(m):
        for h, g in units:
            h_t += h
            g_t = max(g_t, h_t) + g if h == 0 else max(g_t + g, h_t)
    return g_t, h_t


def test_hand_computed_host_bound_layers_behind_a_gpu_bound_head() -> None:
    # 4 layers of 1 ms host / 0.5 ms GPU forward and backward, a 3 ms LM head + loss on the GPU:
    # forward: GPU done at 4 ms (host-bound); head to 7 ms while the host already issues the
    # backward (done at 8 ms); backward GPU: max(7 + 2, 4 + 1 + 3 * 1) = 9 ms
    period, lag = host_run_ahead(4e-3, 4e-3, 2e-3, 2e-3, 0.0, 0.0, 3e-3, 0.0, 4, 1)
    assert period == np.float64(9e-3) or abs(period - 9e-3) < 1e-12
    assert abs(lag - 1e-3) < 1e-12  # host done issuing at 8 ms, GPU at 9 ms
    # the per-layer max model would say 4 + 3 + 4 = 11 ms


def test_gpu_bound_is_the_gpu_sum() -> None:
    period, lag = host_run_ahead(1e-3, 1e-3, 4e-3, 8e-3, 1e-4, 2e-4, 3e-3, 5e-3, 8, 3)
    assert abs(period - (1e-4 + 4e-3 + 3e-3 + 5e-3 + 8e-3 + 2e-4)) < 1e-12
    assert lag > 0


@settings(max_examples=60, deadline=None)
@given(
    h_f=st.floats(1e-5, 1e-2), h_b=st.floats(1e-5, 1e-2), g_f=st.floats(1e-5, 1e-2),
    g_b=st.floats(1e-5, 1e-2), head=st.floats(0, 1e-2), n=st.integers(1, 12),
)  # fmt: skip
def test_matches_an_op_by_op_pipeline_for_one_micro_batch(
    h_f: float, h_b: float, g_f: float, g_b: float, head: float, n: int
) -> None:
    units = [(h_f / n, g_f / n)] * n + [(0.0, head)] + [(h_b / n, g_b / n)] * n
    g_ref, h_ref = _simulate(units, 1)
    period, lag = host_run_ahead(h_f, h_b, g_f, g_b, 0.0, 0.0, head, 0.0, n, 1)
    assert abs(period - g_ref) <= 1e-9 * max(g_ref, 1e-9)
    assert abs(lag - (g_ref - h_ref)) <= 1e-9 * max(g_ref, 1e-9)
    # never faster than either resource alone, never slower than their sum
    assert period >= max(g_f + g_b + head, h_f + h_b) * (1 - 1e-12)
    assert period <= g_f + g_b + head + h_f + h_b + 1e-12


@settings(max_examples=60, deadline=None)
@given(
    h_f=st.floats(1e-5, 1e-2), h_b=st.floats(1e-5, 1e-2), g_f=st.floats(1e-5, 1e-2),
    g_b=st.floats(1e-5, 1e-2), head_f=st.floats(0, 1e-2), head_b=st.floats(0, 1e-2),
    h_sf=st.floats(0, 5e-3), h_sb=st.floats(0, 5e-3), n=st.integers(1, 12), m=st.integers(1, 4),
)  # fmt: skip
def test_step_host_outside_the_layers_matches_the_pipeline(
    h_f: float, h_b: float, g_f: float, g_b: float, head_f: float, head_b: float,
    h_sf: float, h_sb: float, n: int, m: int,
) -> None:  # fmt: skip
    """The LM head and loss issued in ``h_sf`` host seconds (main thread) and their backward in
    ``h_sb`` (autograd thread): the head's kernels end no earlier than the host has issued them."""
    units = [(h_f / n, g_f / n)] * n + [(h_sf, head_f), (h_sb, head_b)] + [(h_b / n, g_b / n)] * n
    g_ref, h_ref = _simulate(units, 1)
    period, lag = host_run_ahead(h_f, h_b, g_f, g_b, 0.0, 0.0, head_f, head_b, n, 1, h_sf, h_sb)
    assert abs(period - g_ref) <= 1e-9 * max(g_ref, 1e-9)
    assert abs(lag - (g_ref - h_ref)) <= 1e-9 * max(g_ref, 1e-9)
    # later micro-batches repeat at the slower side's per-micro-batch total
    p_m, _ = host_run_ahead(h_f, h_b, g_f, g_b, 0.0, 0.0, head_f, head_b, n, m, h_sf, h_sb)
    per_mb = max(g_f + g_b + head_f + head_b, h_f + h_b + h_sf + h_sb)
    assert abs(p_m * m - (period + (m - 1) * per_mb)) <= 1e-9 * max(p_m * m, 1e-9)
