"""The analytic engine over a numpy grid gives exactly what it gives one layout at a time."""

import numpy as np
import pytest

from simcore.engine import training as T
from simcore.specs import cluster_for
from simcore.specs.resolve import load_scenario


def test_grid_equals_scalar_evaluations() -> None:
    sc = load_scenario("default")
    cl = cluster_for("hgx-h100", nodes=16)
    assert sc.training is not None
    tp = np.array([1, 2, 4, 8, 2, 4])[:, None]
    pp = np.array([1, 2, 4, 8])[None, :]
    mb = np.array([[1, 2, 1, 2]])
    dp = 128 // (tp * pp)
    sp = tp > 1
    rec = np.array([["none", "selective", "full", "none"]])
    sched = np.array([["1f1b", "1f1b", "zero_bubble", "gpipe"]])
    grid = T.evaluate(
        sc.model,
        sc.training,
        T.TrainingLayout(
            tp=tp,
            pp=pp,
            dp=dp,
            micro_batch=mb,
            global_batch=512,
            sp=sp,
            recompute=rec,
            schedule=sched,
            zero=1,
        ),
        cl,
    )
    assert grid.step_time_s.shape == (6, 4)
    for i in range(6):
        for j in range(4):
            one = T.evaluate(
                sc.model,
                sc.training,
                T.TrainingLayout(
                    tp=int(tp[i, 0]),
                    pp=int(pp[0, j]),
                    dp=int(dp[i, j]),
                    micro_batch=int(mb[0, j]),
                    global_batch=512,
                    sp=bool(sp[i, 0]),
                    recompute=str(rec[0, j]),
                    schedule=str(sched[0, j]),
                    zero=1,
                ),
                cl,
            )
            assert float(one.step_time_s) == pytest.approx(float(grid.step_time_s[i, j]), rel=1e-12)
            assert float(one.memory_per_gpu_bytes) == pytest.approx(
                float(grid.memory_per_gpu_bytes[i, j]), rel=1e-12
            )


def test_more_nic_bandwidth_is_never_slower() -> None:
    slow = load_scenario(
        "default",
        [
            "cluster.nodes=4",
            "parallel.tp=8",
            "cluster.fabric.link=ib-ndr",
            "cluster.fabric.nic_bandwidth=25 GB/s",
        ],
    )
    fast = load_scenario(
        "default",
        [
            "cluster.nodes=4",
            "parallel.tp=8",
            "cluster.fabric.link=ib-ndr",
            "cluster.fabric.nic_bandwidth=100 GB/s",
        ],
    )
    import simcore

    assert simcore.predict(fast).step_time_s <= simcore.predict(slow).step_time_s


@pytest.mark.parametrize("framework", ["eager", "compiled"])
def test_inference_grid_over_tp_equals_scalar_calls(framework: str) -> None:
    """A collective whose bytes do not depend on the layout priced over a grid of communicator sizes:
    each layout gets its own time (a tp grid once took the first layout's for all: tp=2's decode step lost
    its all-reduces)."""
    from simcore.engine import inference as I
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster

    sc = load_scenario("tests/data/trace_scenarios/h200_r66_generate_gpt2_l12_b8.yaml")
    assert sc.inference is not None
    cl = resolve_cluster(sc.cluster.model_copy(update={"gpus": 8}), default_registry())
    tps = np.array([1.0, 2.0, 4.0])
    grid = I.evaluate(sc.model, sc.inference, cl, tp=tps, framework=framework)
    for i, tp in enumerate(tps):
        one = I.evaluate(sc.model, sc.inference, cl, tp=float(tp), framework=framework)
        assert np.ravel(grid.decode_step_time_s)[i] == pytest.approx(float(one.decode_step_time_s), rel=1e-9)
        assert np.ravel(grid.prefill_time_s)[i] == pytest.approx(float(one.prefill_time_s), rel=1e-9)
