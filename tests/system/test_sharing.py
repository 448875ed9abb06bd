"""GPU sharing (``cluster.sharing``): time-slicing and MPS between processes of a small inference job,
by hand and through predict (docs/system.md, "MPS and time-slicing")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simcore
from simcore.prediction import InferenceResult
from simcore.specs.resolve import load_scenario
from simcore.system.sharing import shared_decode

# one process alone: 10 ms per step, 5.5 ms of it kernels; 16 GB read and 20 GFLOP per step on a GPU of
# 4.8 TB/s and 989 TFLOP/s: the resource floor is 16e9 / 4.8e12 = 3.33 ms
ARGS = dict(
    batch=2,
    alone_step_s=10e-3,
    device_step_s=5.5e-3,
    step_bytes=16e9,
    step_flops=20e9,
    bandwidth=4.8e12,
    peak_flops=989e12,
)


def test_time_slicing_by_hand() -> None:
    r = shared_decode("time_slicing", 4, **ARGS)  # type: ignore[arg-type]
    assert r.step_s == pytest.approx(4 * 5.5e-3) and r.bound == "gpu"
    assert r.tokens_per_s_per_gpu == pytest.approx(4 * 2 / 22e-3)
    one = shared_decode("time_slicing", 1, **ARGS)  # type: ignore[arg-type]
    assert one.step_s == 10e-3 and one.bound == "process"


def test_mps_by_hand() -> None:
    r = shared_decode("mps", 2, **ARGS)  # type: ignore[arg-type]
    assert r.floor_step_s == pytest.approx(16e9 / 4.8e12)
    assert r.step_s == 10e-3 and r.bound == "process"  # 2 x 3.33 ms fits in one process's own 10 ms
    r4 = shared_decode("mps", 4, **ARGS)  # type: ignore[arg-type]
    assert r4.step_s == pytest.approx(4 * 16e9 / 4.8e12)


@given(
    n=st.integers(1, 16),
    alone=st.floats(1e-4, 1.0),
    dev_share=st.floats(0.05, 1.0),
    nbytes=st.floats(1e6, 1e11),
)
def test_more_processes_never_lower_the_gpus_throughput(
    n: int, alone: float, dev_share: float, nbytes: float
) -> None:
    kw = dict(
        batch=1,
        alone_step_s=alone,
        device_step_s=alone * dev_share,
        step_bytes=nbytes,
        step_flops=0.0,
        bandwidth=4.8e12,
        peak_flops=1e15,
    )
    for mode in ("time_slicing", "mps"):
        a, b = shared_decode(mode, n, **kw), shared_decode(mode, n + 1, **kw)  # type: ignore[arg-type]
        assert b.tokens_per_s_per_gpu >= a.tokens_per_s_per_gpu * (1 - 1e-12)
        assert b.tokens_per_s_per_process <= a.tokens_per_s_per_process * (1 + 1e-12)


def _predict(*sets: str) -> InferenceResult:
    r = simcore.predict(load_scenario("contrast-gpu-sharing-alone", overrides=list(sets)))
    assert isinstance(r, InferenceResult)
    return r


def test_sharing_in_predict() -> None:
    alone = _predict()
    assert alone.sharing is None
    ts = _predict("cluster.sharing.mode=time_slicing", "cluster.sharing.processes=2")
    assert ts.sharing is not None and ts.decode_step_time_s == ts.sharing.step_s
    assert ts.sharing.alone_step_s == pytest.approx(alone.decode_step_time_s)
    # the eager decode idles the GPU half the time: two time-sliced processes nearly double its throughput
    assert 1.5 * alone.tokens_per_s < ts.sharing.tokens_per_s_per_gpu < 2 * alone.tokens_per_s
    assert ts.prefill_time_s == alone.prefill_time_s  # priced alone
    mps = _predict("cluster.sharing.mode=mps", "cluster.sharing.processes=4")
    assert mps.sharing is not None and mps.sharing.tokens_per_s_per_gpu > ts.sharing.tokens_per_s_per_gpu


def test_sharing_errors() -> None:
    with pytest.raises(simcore.SimcoreError, match="cluster.sharing.processes"):
        _predict("cluster.sharing.mode=mps", "cluster.sharing.processes=9")  # 9 x 15.5 GiB
    with pytest.raises(simcore.SimcoreError, match="cluster.sharing"):
        simcore.predict(
            load_scenario("default", overrides=["cluster.sharing.mode=mps", "cluster.sharing.processes=2"])
        )
    with pytest.raises(simcore.SimcoreError, match="processes"):
        _predict("cluster.sharing.mode=mps", "cluster.sharing.processes=1")
