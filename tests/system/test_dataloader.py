"""The input pipeline's wait (simcore.system.dataloader): hand-computed cases and through predict."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simcore
from simcore.errors import SimcoreError
from simcore.specs.resolve import load_scenario
from simcore.specs.scenario import Scenario
from simcore.system.dataloader import loader_wait


def test_starved_loader_by_hand() -> None:
    # batch of 8 samples at 10 ms each: c = 80 ms of CPU per batch; the GPU works 30 ms per batch and
    # copies each in 1 ms. Two workers deliver a batch every 40 ms: the GPU waits 40 - 30 = 10 ms.
    r = loader_wait(0.080, 0.030, 0.001, num_workers=2, batches_per_step=4)
    assert r.bound == "workers"
    assert r.wait_per_batch_s == pytest.approx(0.010)
    assert r.wait_per_step_s == pytest.approx(0.040)
    # ceil(80 / (30 + 1)) = 3 workers: a batch every 26.7 ms, only the 1 ms copy is left
    assert r.workers_needed == 3
    fixed = loader_wait(0.080, 0.030, 0.001, num_workers=3, batches_per_step=4)
    assert fixed.bound == "copy" and fixed.wait_per_step_s == pytest.approx(0.004)
    assert fixed.queue_batches == 6  # 3 workers x prefetch_factor 2


def test_main_process_loading_is_serial() -> None:
    # num_workers=0 (PyTorch's default): load (80 ms) and copy (1 ms) each batch while the GPU waits
    r = loader_wait(0.080, 0.030, 0.001, num_workers=0, batches_per_step=4)
    assert r.bound == "main process"
    assert r.wait_per_step_s == pytest.approx(4 * 0.081)


@given(
    c=st.floats(1e-4, 1.0),
    t=st.floats(1e-4, 1.0),
    x=st.floats(0.0, 1e-2),
    w=st.integers(0, 64),
)
def test_more_workers_never_wait_longer(c: float, t: float, x: float, w: int) -> None:
    a = loader_wait(c, t, x, w, 1).wait_per_step_s
    b = loader_wait(c, t, x, w + 1, 1).wait_per_step_s
    assert b <= a + 1e-12
    needed = loader_wait(c, t, x, w, 1).workers_needed
    assert loader_wait(c, t, x, needed, 1).wait_per_step_s == pytest.approx(x, abs=1e-12)


def _default(*sets: str) -> Scenario:
    return load_scenario("default", overrides=list(sets))


def test_starved_loader_in_predict_and_the_workers_that_fix_it() -> None:
    base = simcore.predict(_default())
    assert base.system_effects is None and "system_effects" not in base.model_dump()
    # Llama-3 8B, 8 H200, TP 2 x DP 4, global batch 64: each rank takes 16 batches of one 8192-token
    # sequence per step (~0.49 s of GPU work each); 1.2 s of CPU per sample (heavy preprocessing) on one
    # worker starves it
    r = simcore.predict(_default("runtime.dataloader.sample_time=1.2 s", "runtime.dataloader.num_workers=1"))
    dl = r.system_effects.dataloader
    assert dl.batches_per_step == 16 and dl.batch_cpu_s == pytest.approx(1.2)
    t = base.step_time_s / 16  # GPU seconds per batch
    copy = simcore.transfer_time(8192 * 16, pinned=False, system="hgx-h200").time_s  # int64 ids + labels
    assert dl.copy_s == pytest.approx(copy)
    expected = 16 * (1.2 - t)  # a batch every 1.2 s, the GPU busy t of it
    assert dl.bound == "workers" and dl.wait_per_step_s == pytest.approx(expected)
    assert r.step_time_s == pytest.approx(base.step_time_s + expected)
    assert r.breakdown["data_wait"] == pytest.approx(expected)
    assert dl.workers_needed == math.ceil(1.2 / (t + copy)) == 3
    assert any("3 workers per rank" in n for n in r.notes)
    assumed = next(n for n in r.notes if n.startswith("runtime.dataloader: assumed"))
    assert "pin_memory = false" in assumed and "num_workers" not in assumed  # given, not assumed
    fixed = simcore.predict(
        _default("runtime.dataloader.sample_time=1.2 s", "runtime.dataloader.num_workers=3")
    )
    assert fixed.system_effects.dataloader.bound == "copy"
    assert fixed.step_time_s == pytest.approx(base.step_time_s + 16 * copy)
    two = simcore.predict(
        _default("runtime.dataloader.sample_time=1.2 s", "runtime.dataloader.num_workers=2")
    )
    assert two.system_effects.dataloader.bound == "workers"  # 0.6 s per batch > 0.49 s


def test_pinned_memory_copies_faster() -> None:
    # 16 MB samples (e.g. video clips): the copy is bandwidth-bound, pinned beats pageable
    sets = (
        "runtime.dataloader.sample_time=1 ms",
        "runtime.dataloader.num_workers=8",
        "runtime.dataloader.sample_bytes=16 MB",
    )
    a = simcore.predict(_default(*sets))
    b = simcore.predict(_default(*sets, "runtime.dataloader.pin_memory=true"))
    pageable = simcore.transfer_time(16e6, pinned=False, system="hgx-h200").time_s
    pinned = simcore.transfer_time(16e6, pinned=True, system="hgx-h200").time_s
    assert a.system_effects.dataloader.copy_s == pytest.approx(pageable)
    assert b.system_effects.dataloader.copy_s == pytest.approx(pinned) and pinned < pageable


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["runtime.dataloader.num_workers=2"], "runtime.dataloader.sample_time"),
        (
            ["runtime.dataloader.sample_time=1 ms", "runtime.dataloader.prefetch_factor=4"],
            "runtime.dataloader",
        ),
        (["runtime.dataloader.sample_time=1 ms", "runtime.dataloader.numa=remote"], "runtime.dataloader"),
        (
            ["runtime.dataloader.sample_time=1 ms", "runtime.dataloader.batch_size=3"],
            "runtime.dataloader.batch_size",
        ),
    ],
)
def test_bad_loader_keys_are_one_line_errors(sets: list[str], field: str) -> None:
    with pytest.raises(SimcoreError) as e:
        simcore.predict(_default(*sets))
    assert field in str(e.value) and "\n" not in str(e.value)
