"""Megatron's interleaved schedule syncs each model chunk's gradients (parameters) at that chunk's last
backward (first forward): v buckets whose boundaries lie p virtual micro-batches apart (docs/parallelism.md,
"Data-parallel overlap under the interleaved schedule")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.engine.training import _bucketed
from simcore.prediction import evaluate_training
from simcore.specs.resolve import load_scenario

SC = "scenarios/llama3-70b-h100.yaml"  # TP 4, PP 4 x VP 5 interleaved, CP 2, DP 4 over InfiniBand, ZeRO-1


def test_the_chunks_are_the_buckets_and_their_spacing_the_window() -> None:
    _cl, lay, ev = evaluate_training(load_scenario(SC, []))
    st_ = ev.stage_times
    p, v = float(lay["pp"]), float(lay["vp"])
    assert float(st_["buckets"]) == v
    assert float(st_["dp_window_s"]) == pytest.approx(p * float(st_["backward_s"]))
    # hand check of the exposed gradient reduce-scatter: the last chunk's share, or what the other
    # chunks' (v - 1) p virtual micro-batches of backward cannot cover
    C, B = float(st_["dp_comm_s"]), float(st_["backward_s"])
    want = max(C / v, C - (v - 1.0) * p * B / v)
    assert float(_bucketed(C, p * B, v, True)) == pytest.approx(want)
    # without interleaving (1F1B, the same layers): one bucket per layer in the last micro-batch's backward
    _cl, _lay1, ev1 = evaluate_training(load_scenario(SC, ["parallel.schedule=1f1b", "parallel.vp=1"]))
    assert float(ev1.stage_times["buckets"]) == 80 / 4  # Llama 3 70B's 80 layers on 4 stages


def test_interleaved_exposes_less_than_one_window() -> None:
    """Llama 3 70B on 64 H100: the interleaved step's exposed data-parallel time is below what the same
    collectives expose behind one micro-batch's backward."""
    r = simcore.predict(load_scenario(SC, []))
    _cl, _lay, ev = evaluate_training(load_scenario(SC, []))
    C, B = float(ev.stage_times["dp_comm_s"]), float(ev.stage_times["backward_s"])
    assert r.exposed_comm["dp_comm"] < float(_bucketed(C, B, 20.0, True)) + 1e-12


@settings(max_examples=60, deadline=None)
@given(v=st.integers(2, 12), p=st.integers(2, 16), per_mb=st.floats(1e-3, 10.0), comm=st.floats(0.0, 100.0))
def test_more_chunks_never_expose_more(v: int, p: int, per_mb: float, comm: float) -> None:
    a = float(_bucketed(comm, p * per_mb, float(v), True))
    b = float(_bucketed(comm, p * per_mb, float(v + 1), True))
    assert 0.0 <= b <= a + 1e-9 <= comm + 1e-9
