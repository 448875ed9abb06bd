"""The host a pipeline stage issues per micro-batch: its layers, the last stage's LM head and loss,
and the point-to-point calls (``simcore.engine.training._host_overhead``, docs/parallelism.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.engine.training import comm_call_host, pipeline_p2p_calls
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario, resolve_cluster
from simcore.specs.scenario import CpuOpTime, Scenario

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests/data/trace_scenarios/h200x2_pp_gpt350m.yaml"  # profiled GPipe, pp 2, 24 x 1024
SLOW = 30e-6  # seconds per CPU op: the host bounds every stage


def test_p2p_calls_per_micro_batch() -> None:
    ends, middles = pipeline_p2p_calls(np.array([1, 2, 4]))
    assert ends.tolist() == [0.0, 2.0, 2.0]  # first: send acts, recv grads; last: recv acts, send grads
    assert middles.tolist() == [0.0, 2.0, 4.0]  # a middle stage does both


def _host_bound(sc: Scenario, micro_batch: int, m: int) -> Scenario:
    tr = sc.training.model_copy(update={"micro_batch": micro_batch, "global_batch": micro_batch * m})
    rt = sc.runtime.model_copy(
        update={"step_sync": False, "cpu_op_time": CpuOpTime(main=SLOW, backward=SLOW)}
    )
    model = sc.model.model_copy(update={"seq_len": 128})
    return sc.model_copy(update={"training": tr, "runtime": rt, "model": model})


def test_a_host_bound_pipeline_waits_for_the_last_stages_host() -> None:
    """Each micro-batch on the last stage costs at least its host: 12 layers' forward and backward,
    the head and loss outside them and 2 send/recv calls (by hand from the profile's entries)."""
    sc = load_scenario(str(SC))
    m = 8
    r = simcore.predict(_host_bound(sc, 1, m))
    p = load_profile(default_registry().device("h200")).at_cpu_speed(SLOW, SLOW)

    def h(n: str) -> float:
        return p.host(n, True)

    layers = sc.model.layers // 2
    layer = h("train_fwd_gelu") + h("train_bwd_gelu")
    outside = (
        h("step_fwd_gelu")
        + h("step_bwd_gelu")
        + layers * (h("step_fwd_layer_gelu") + h("step_bwd_layer_gelu"))
    )
    call = comm_call_host(resolve_cluster(sc.cluster, default_registry()), "send_recv")
    assert call > 0
    per_mb = layers * layer + outside + 2 * call
    # GPipe: m micro-batches through the slowest stage, plus the other stage's fill
    assert r.step_time_s >= m * per_mb
    assert r.step_time_s <= (m + 1) * per_mb * 1.5


def test_the_last_stage_pays_the_head_and_loss_host(tmp_path: Path) -> None:
    """Host-bound, the last stage's work outside its layers (LM head, loss, their backward: the
    profile's per-micro-batch entries) adds to every micro-batch of a GPipe step, less the head's GPU
    time that hides it: the step with those entries zeroed is ``(m + pp - 1) x`` that much faster."""
    import yaml

    from simcore.specs.registry import builtin_dir

    sc = _host_bound(load_scenario(str(SC)), 1, 8)
    sc = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"profiler": False})})
    shipped = yaml.safe_load((builtin_dir() / "calibration" / "h200.yaml").read_text())
    keys = ("step_fwd_gelu", "step_bwd_gelu", "step_fwd_layer_gelu", "step_bwd_layer_gelu")
    for k in keys:
        shipped["host_layer"][k] = 0.0
    off = tmp_path / "no_outside.yaml"
    off.write_text(yaml.safe_dump(shipped))
    p = load_profile(default_registry().device("h200")).at_cpu_speed(SLOW, SLOW)
    layers = sc.model.layers // 2
    outside = sum(p.host(k, False) * (1 if i < 2 else layers) for i, k in enumerate(keys))
    diff = (
        simcore.predict(sc).step_time_s
        - simcore.predict(sc.model_copy(update={"calibration": str(off)})).step_time_s
    )
    slots = 8 + 2 - 1
    assert 0.8 * slots * outside <= diff <= slots * outside * (1 + 1e-9)


def test_more_micro_batches_cost_the_stage_host_each() -> None:
    """Host-bound, each added micro-batch adds at least the last stage's per-micro-batch host."""
    sc = load_scenario(str(SC))
    t8, t16 = (simcore.predict(_host_bound(sc, 1, m)).step_time_s for m in (8, 16))
    p = load_profile(default_registry().device("h200")).at_cpu_speed(SLOW, SLOW)
    outside = p.host("step_fwd_gelu", True) + p.host("step_bwd_gelu", True)
    assert t16 - t8 >= 8 * outside
    assert t16 > t8


@settings(max_examples=8, deadline=None)
@given(st.floats(min_value=1e-6, max_value=40e-6), st.floats(min_value=1.0, max_value=3.0))
def test_a_slower_cpu_never_speeds_a_pipeline_up(op_s: float, factor: float) -> None:
    """The stage's host per micro-batch grows with the CPU's per-op time, and the step never shrinks."""
    base = _host_bound(load_scenario(str(SC)), 1, 8)

    def at(t: float) -> float:
        rt = base.runtime.model_copy(update={"cpu_op_time": CpuOpTime(main=t, backward=t)})
        return simcore.predict(base.model_copy(update={"runtime": rt})).step_time_s

    assert at(op_s * factor) >= at(op_s) * (1 - 1e-12)


def test_each_micro_batch_pays_two_send_recv_calls_on_a_two_stage_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Host-bound, a 2-stage GPipe step with the send/recv floor at 0 is ``(m + pp - 1) x 2`` floors faster."""
    import simcore.engine.training as T

    sc = _host_bound(load_scenario(str(SC)), 1, 8)
    call = comm_call_host(resolve_cluster(sc.cluster, default_registry()), "send_recv")
    with_calls = simcore.predict(sc).step_time_s
    real = T.comm_call_host
    monkeypatch.setattr(
        T, "comm_call_host", lambda c, op="all_reduce": 0.0 if op == "send_recv" else real(c, op)
    )
    without = simcore.predict(sc).step_time_s
    assert with_calls - without == pytest.approx((8 + 2 - 1) * 2 * call, rel=1e-6)
