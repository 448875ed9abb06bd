"""PyTorch DDP's Reducer host per gradient bucket (``simcore.engine.training.ddp_bucket_host``,
docs/parallelism.md, DDP's host per bucket)."""

from __future__ import annotations

from pathlib import Path

import pytest

import simcore
import simcore.engine.training as T
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario, resolve_cluster
from simcore.specs.scenario import CpuOpTime, Scenario

REPO = Path(__file__).resolve().parents[2]
SC = REPO / "tests/data/trace_scenarios/h200x2_ddp_gpt125m.yaml"  # DDP, 2 H200s, GPT-2 small (12 x 768)


def _run(micro_batch: int, profiler: bool = False, slow: float | None = None) -> Scenario:
    sc = load_scenario(str(SC))
    tr = sc.training.model_copy(update={"micro_batch": micro_batch, "global_batch": 2 * micro_batch})
    upd: dict[str, object] = {"profiler": profiler}
    if slow is not None:
        upd["cpu_op_time"] = CpuOpTime(main=slow, backward=slow)
    return sc.model_copy(update={"training": tr, "runtime": sc.runtime.model_copy(update=upd)})


def test_buckets_of_gpt2_small() -> None:
    sc = load_scenario(str(SC))
    grads, buckets = T.ddp_gradients_and_buckets(sc.model, 1, 4.0)
    assert buckets == 14  # 12 x 7.1M fp32 gradients over 25 MiB, the embedding and the head on their own


def test_host_bound_step_pays_each_further_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host-bound (micro-batch 1 on a slow CPU): the step grows by 13 further buckets, each at the
    system's eager all-reduce call floor (the first bucket is inside ``ddp_fixed``)."""
    sc = _run(1, slow=40e-6)
    with_buckets = simcore.predict(sc)
    monkeypatch.setattr(T, "ddp_bucket_host", lambda s: 0.0 * s.dp)
    without = simcore.predict(_run(1, slow=40e-6))
    floor = T.comm_call_host(resolve_cluster(sc.cluster, default_registry()), "all_reduce")
    assert floor > 0
    assert with_buckets.step_time_s - without.step_time_s == pytest.approx(13 * floor, rel=1e-6)
    assert with_buckets.breakdown["host_overhead"] > without.breakdown["host_overhead"]


def test_gpu_bound_step_hides_the_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large micro-batch: the GPU is behind the host, the Reducer's host work hides under it."""
    with_buckets = simcore.predict(_run(32))
    monkeypatch.setattr(T, "ddp_bucket_host", lambda s: 0.0 * s.dp)
    without = simcore.predict(_run(32))
    assert with_buckets.step_time_s == pytest.approx(without.step_time_s, rel=1e-9)


def test_profiled_hooks_are_per_gradient_and_per_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the profiler the hooks' measured costs: 75 gradient tensors and 14 buckets."""
    sc = _run(1, profiler=True, slow=40e-6)
    seen: list[float] = []
    orig = T.ddp_bucket_host

    def spy(s: object) -> object:
        v = orig(s)  # type: ignore[arg-type]
        seen.append(float(v))
        return v

    monkeypatch.setattr(T, "ddp_bucket_host", spy)
    simcore.predict(sc)
    from simcore.specs.profile import load_profile

    p = load_profile(default_registry().device("h200")).at_cpu_speed(40e-6, 40e-6)
    want = 75 * p.host("ddp_param", True) + 14 * p.host("ddp_bucket", True)
    assert seen and seen[0] == pytest.approx(want, rel=1e-9)
