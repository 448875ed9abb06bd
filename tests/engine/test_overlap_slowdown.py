"""Compute beside an overlapped data-parallel collective runs slower (the system's measured
``compute_slowdown``); the step carries the extra time, the breakdown books it."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import simcore
from simcore.calibration.fit_comm import overlap_slowdown
from simcore.comm.collectives import load_profile
from simcore.specs.resolve import load_scenario

DDP = "scenarios/gpt2-xl-ddp-2xh200.yaml"


def test_measured_slowdown_is_in_the_h200_profile() -> None:
    s = load_profile("hgx-h200").profile.compute_slowdown
    assert s == pytest.approx(
        overlap_slowdown(Path(__file__).resolve().parents[2] / "traces/h200x2/overlap.csv.gz"), rel=1e-3
    )
    assert 1.1 < s < 2.0


def test_overlap_slowdown_hand_computed(tmp_path: Path) -> None:
    p = tmp_path / "overlap.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write(
            "op,shape,comm_op,comm_bytes,alone_s,overlapped_s,comm_alone_s,comm_overlapped_s,calls,world\n"
        )
        for a, o in ((1.0, 1.2), (1.0, 1.5), (2.0, 2.2)):
            f.write(f"mm,x,all_reduce,1,{a},{o},1,1,20,2\n")
    assert overlap_slowdown(p) == pytest.approx(1.2)  # median of 1.2, 1.5, 1.1


def test_ddp_step_books_the_slowdown(monkeypatch: pytest.MonkeyPatch) -> None:
    r = simcore.predict(DDP)
    bd = r.breakdown
    assert sum(bd.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    if bd.get("overlap_slowdown", 0.0) == 0.0:
        pytest.skip("this layout hides no data-parallel collective behind GPU-bound compute")
    # without overlap nothing is hidden, so nothing runs beside compute
    off = simcore.predict(load_scenario(DDP, ["parallel.dp_overlap=false"]))
    assert off.breakdown.get("overlap_slowdown", 0.0) == 0.0
    # the DES carries the same term: with a large slowdown both engines grow by it
    import simcore.engine.training as T

    monkeypatch.setattr(T, "overlap_slowdown", lambda cluster: 4.0)
    big = simcore.predict(DDP)
    assert big.breakdown["overlap_slowdown"] > 5 * bd["overlap_slowdown"]
    des = simcore.predict(DDP, engine="des")
    assert des.step_time_s == pytest.approx(big.step_time_s, rel=0.02)
