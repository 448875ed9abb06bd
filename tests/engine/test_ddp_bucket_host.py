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


def _fitted_profile(tmp_path: Path, **host: float) -> str:
    """The H200's shipped profile with ``host`` entries added to its ``host_layer`` (as
    ``simcore calibrate`` writes them from ``host_dist_units_rank*.csv.gz``)."""
    import yaml

    data = yaml.safe_load((REPO / "hardware_specs/calibration/h200.yaml").read_text())
    data["host_layer"].update(host)
    path = tmp_path / "h200-units.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_fitted_bucket_cost_replaces_the_call_floor(tmp_path: Path) -> None:
    """With ``ddp_bucket`` fitted, each further bucket costs it in place of the call floor (13 buckets
    beyond the first; the entry, as every host entry, at the run's CPU speed)."""
    cal = _fitted_profile(tmp_path, ddp_bucket=1e-3)
    plain = simcore.predict(_run(1, slow=40e-6)).step_time_s
    sc = _run(1, slow=40e-6).model_copy(update={"calibration": cal})
    fitted = simcore.predict(sc).step_time_s
    floor = T.comm_call_host(resolve_cluster(sc.cluster, default_registry()), "all_reduce")
    from simcore.specs.profile import load_profile

    per_bucket = (
        load_profile(default_registry().device("h200"), cal).at_cpu_speed(40e-6, 40e-6).host("ddp_bucket")
    )
    assert per_bucket >= 1e-3  # a CPU slower than the profile's
    assert fitted - plain == pytest.approx(13 * (per_bucket - floor), rel=1e-6)


def test_a_fitted_group_cost_replaces_the_fsdp_ratio(tmp_path: Path) -> None:
    """FSDP2 with ``fsdp_group`` fitted: each block's group and the root's cost it per micro-batch in
    place of the per-layer ratio; a larger group cost never makes a host-bound step faster."""
    fsdp = REPO / "tests/data/trace_scenarios/h200x2_r44_fsdp_llama8l.yaml"
    sc = load_scenario(str(fsdp), ["runtime.profiler=false"])
    steps = []
    for g in (1e-4, 1e-3, 1e-2):
        (tmp_path / f"g{g}").mkdir()
        cal = _fitted_profile(tmp_path / f"g{g}", fsdp_group=g)
        steps.append(simcore.predict(sc.model_copy(update={"calibration": cal})).step_time_s)
    assert steps[0] <= steps[1] <= steps[2]
    # host-bound at 10 ms a group: 9 groups (8 blocks and the root) per micro-batch at least
    assert steps[2] >= 9 * 1e-2
