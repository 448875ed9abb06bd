"""FSDP2's all-gather issue order: a layer's compute waits for the gather the host issued at the layer's
start (forward) or one layer ahead (backward prefetch) (``training.host_run_ahead``'s ``a_f`` / ``a_b``,
``training.fsdp_gather_wait``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.engine.training import host_run_ahead
from simcore.specs.resolve import load_scenario

REPO = Path(__file__).resolve().parents[2]


def _simulate(units: list[tuple[float, float, float, int]]) -> tuple[float, float]:
    """Reference: op-by-op host/GPU pipeline (as tests/engine/test_host_run_ahead.py) where unit ``i``
    ``(h, g, a, lead)`` also ends no earlier than ``a + g`` after the host started issuing unit
    ``i - lead`` (its all-gather was issued there)."""
    h_t = g_t = 0.0
    starts: list[float] = []
    for h, g, a, lead in units:
        starts.append(h_t)
        issued = starts[max(len(starts) - 1 - lead, 0)]
        h_t += h
        g_t = max(g_t + g, h_t, issued + a + g) if h > 0 else max(g_t, h_t) + g
    return g_t, h_t


def test_hand_computed_gather_waits() -> None:
    # 4 layers of 1 ms host / 0.8 ms GPU each way, gathers of 1.5 ms: forward layer i ends no earlier
    # than i + 1.5 + 0.8 ms (5.3 ms for the last); backward (host from 4 ms): the first layer's gather is
    # issued at its own start (ends >= 6.3 ms), the others one layer ahead: 6.3, 7.1, 7.9, 8.7 ms
    period, lag = host_run_ahead(
        4e-3, 4e-3, 3.2e-3, 3.2e-3, 0.0, 0.0, 0.0, 0.0, 4, 1, 0.0, 0.0, 1.5e-3, 1.5e-3
    )
    assert period == pytest.approx(8.7e-3, rel=1e-12)
    assert lag == pytest.approx(0.7e-3, rel=1e-9)  # the host is done issuing at 8 ms
    # without the gathers the host-bound backward paces the step: 8 ms
    assert host_run_ahead(4e-3, 4e-3, 3.2e-3, 3.2e-3, 0.0, 0.0, 0.0, 0.0, 4, 1)[0] == pytest.approx(8e-3)


@settings(max_examples=80, deadline=None)
@given(
    h_f=st.floats(1e-5, 1e-2), h_b=st.floats(1e-5, 1e-2), g_f=st.floats(1e-5, 1e-2),
    g_b=st.floats(1e-5, 1e-2), head_f=st.floats(0, 1e-2), head_b=st.floats(0, 1e-2),
    h_sf=st.floats(0, 5e-3), h_sb=st.floats(0, 5e-3), a=st.floats(0, 3e-3), n=st.integers(1, 12),
)  # fmt: skip
def test_matches_the_op_by_op_pipeline_with_gathers(
    h_f: float, h_b: float, g_f: float, g_b: float, head_f: float, head_b: float,
    h_sf: float, h_sb: float, a: float, n: int,
) -> None:  # fmt: skip
    units = (
        [(h_f / n, g_f / n, a, 0)] * n
        + [(h_sf, head_f, 0.0, 0), (h_sb, head_b, 0.0, 0)]
        + [(h_b / n, g_b / n, a, 0)]
        + [(h_b / n, g_b / n, a, 1)] * (n - 1)
    )
    g_ref, h_ref = _simulate(units)
    period, lag = host_run_ahead(h_f, h_b, g_f, g_b, 0.0, 0.0, head_f, head_b, n, 1, h_sf, h_sb, a, a)
    assert period == pytest.approx(g_ref, rel=1e-9, abs=1e-15)
    assert lag == pytest.approx(g_ref - h_ref, rel=1e-9, abs=1e-12)
    # a gather never speeds a step up, and costs at most its own time per layer and direction
    plain, _ = host_run_ahead(h_f, h_b, g_f, g_b, 0.0, 0.0, head_f, head_b, n, 1, h_sf, h_sb)
    assert plain * (1 - 1e-12) <= period <= plain + 2 * n * a + 1e-12


def test_far_ahead_host_hides_every_gather() -> None:
    """GPU-bound layers (host 0.1 ms, GPU 2 ms a layer): the host issues each gather long before the
    GPU reaches the layer; only the first forward layer's gather (issued at the step's start) shows."""
    plain, _ = host_run_ahead(8e-4, 8e-4, 16e-3, 32e-3, 0.0, 0.0, 1e-3, 1e-3, 8, 4)
    gathered, _ = host_run_ahead(8e-4, 8e-4, 16e-3, 32e-3, 0.0, 0.0, 1e-3, 1e-3, 8, 4, 0.0, 0.0, 5e-4, 5e-4)
    assert gathered == pytest.approx(plain + 5e-4 / 4, rel=1e-12)  # once in 4 micro-batches


def _fsdp(micro_batch: int, profiler: bool):  # type: ignore[no-untyped-def]
    sc = load_scenario(str(REPO / "tests/data/trace_scenarios/h200x2_r44_fsdp_llama8l.yaml"))
    tr = sc.training.model_copy(update={"micro_batch": micro_batch, "global_batch": 2 * micro_batch})
    return sc.model_copy(
        update={"training": tr, "runtime": sc.runtime.model_copy(update={"profiler": profiler})}
    )


def test_a_wait_where_host_and_gpu_are_close_none_where_the_host_is_far_ahead() -> None:
    """One micro-batch of 2 layers, gathers of 0.5 ms (hand-computed, as :func:`_simulate` runs it).

    Host close to the GPU (host 1 ms, GPU 0.8 ms a layer each way): forward layer 0 ends at 0.5 + 0.8 = 1.3 ms,
    layer 1 at 1 + 1.3 = 2.3 ms (its gather issued at 1 ms); backward layer 0's gather is issued at its own
    start, 2 ms (host done with the forward), so it ends at 2 + 1.3 = 3.3 ms; layer 1's was issued one layer
    ahead (2 ms) and the host issues it until 4 ms, so it ends at max(3.3 + 0.8, 4, 2 + 1.3) = 4.1 ms: 0.1 ms
    of wait over the host-bound 4.0 ms.

    Host far ahead (0.1 ms host, 2 ms GPU a layer): only the first forward layer's gather (issued at the step's
    start) shows, 0.5 ms over 8 ms; every later one was issued long before the GPU reached its layer."""
    close = host_run_ahead(2e-3, 2e-3, 1.6e-3, 1.6e-3, 0.0, 0.0, 0.0, 0.0, 2, 1, 0.0, 0.0, 5e-4, 5e-4)[0]
    assert close == pytest.approx(4.1e-3, rel=1e-12)
    assert host_run_ahead(2e-3, 2e-3, 1.6e-3, 1.6e-3, 0.0, 0.0, 0.0, 0.0, 2, 1)[0] == pytest.approx(4.0e-3)
    far = host_run_ahead(2e-4, 2e-4, 4e-3, 4e-3, 0.0, 0.0, 0.0, 0.0, 2, 1, 0.0, 0.0, 5e-4, 5e-4)[0]
    assert far == pytest.approx(8.5e-3, rel=1e-12)
    layer = (1e-3, 0.8e-3, 5e-4)
    units = [(*layer, 0)] * 2 + [(0.0, 0.0, 0.0, 0)] * 2 + [(*layer, 0), (*layer, 1)]
    assert _simulate(units)[0] == pytest.approx(close, rel=1e-12)


def test_fsdp_step_is_never_faster_than_the_gpu() -> None:
    """Priced end to end: FSDP2's gathers of a per-block-sharded Llama 8L on 2 H200s; the step is never faster
    than the GPU's own work."""
    for mb in (1, 2, 8):
        r = simcore.predict(_fsdp(mb, False))
        gpu = sum(v for k, v in r.breakdown.items() if k not in ("host_overhead", "pipeline_bubble"))
        assert r.step_time_s >= gpu * (1 - 1e-9)
