"""The distributed wrappers' host per unit (``simcore.calibration.fit_dist_units``) from
``tools/bench_dist_steps.py --units`` rows."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from simcore.calibration.calibrate import calibrate, kind_of
from simcore.calibration.fit_dist_units import (
    UNIT_COLUMNS,
    check,
    dist_unit_costs,
    fit_half,
    is_dist_units_run,
    not_fitted,
)
from simcore.calibration.fit_host import fit_host
from simcore.errors import TraceError

BUCKET, GROUP, ACTION = 40e-6, 150e-6, 60e-6  # seconds per unit the synthetic steps are built from


def _rows(noise: float = 0.0, world: int = 2) -> list[dict[str, str]]:
    """Host-bound steps as the bench writes them on ``world`` ranks: DDP at 2-100 buckets over a 2 ms
    step, FSDP2 at 2-9 groups over 3 ms, pipelining at 2-16 micro-batches x 2 or 4 stages beside
    accumulation at 0.5 ms per micro-batch; every third row ``noise`` slower (a shared CPU only ever adds)."""
    rows: list[dict[str, str]] = []

    def add(**kw: object) -> None:
        row = {c: "" for c in ("pass", "rank", "world", *UNIT_COLUMNS)}
        row["world"] = str(world)
        row.update({k: str(v) for k, v in kw.items()})
        if len(rows) % 3 == 2:
            row["host_s"] = str(float(row["host_s"]) * (1 + noise))
        rows.append(row)

    for p in range(3):
        for rank in range(world):
            common = {"pass": p, "rank": rank, "micro_batches": 1, "stages": "", "actions": ""}
            add(family="ddp", variant="plain", host_s=1.5e-3, buckets=0, groups="", **common)
            for cap, nb in (("cap25", 2), ("cap0.5", 5), ("cap0.2", 11), ("cap0.07", 23), ("cap1e-06", 100)):
                add(family="ddp", variant=cap, host_s=2e-3 + BUCKET * nb, buckets=nb, groups="", **common)
            add(family="fsdp", variant="plain", host_s=1.5e-3, buckets="", groups=0, **common)
            for k, g in ((1, 9), (2, 5), (4, 3), (8, 2)):
                add(
                    family="fsdp",
                    variant=f"group{k}",
                    host_s=3e-3 + GROUP * g,
                    buckets="",
                    groups=g,
                    **common,
                )
            for m in (2, 4, 8, 16):
                for s in (2, 4):
                    base = {
                        "pass": p,
                        "rank": rank,
                        "micro_batches": m,
                        "stages": s,
                        "buckets": "",
                        "groups": "",
                    }
                    acc = 0.5e-3 * m
                    add(family="pp", variant=f"accum_s{s}", host_s=acc, actions=0, **base)
                    for order in ("gpipe", "1f1b"):
                        acts = 2 * m * s
                        add(
                            family="pp",
                            variant=f"{order}_s{s}",
                            host_s=acc + ACTION * acts,
                            actions=acts,
                            **base,
                        )
    return rows


def test_exact_steps_give_back_their_units() -> None:
    rows = _rows()
    assert is_dist_units_run(rows)
    got = dist_unit_costs(rows, "units.csv")
    assert got["ddp_bucket"] == pytest.approx(BUCKET, rel=1e-9)
    assert got["fsdp_group"] == pytest.approx(GROUP, rel=1e-9)
    assert got["pp_action"] == pytest.approx(ACTION, rel=1e-9)
    errs = check(rows, "units.csv")
    assert {"ddp", "fsdp", "pp", "pp_gpipe_m2", "pp_1f1b_m16"} <= set(errs)
    assert max(errs.values()) < 1e-9
    assert not_fitted(rows) == []


def test_one_rank_fits_what_its_code_path_runs() -> None:
    """At world size 1 DDP's Reducer and the pipelining actions run as on several ranks, FSDP2 skips its
    reduce-scatter: its group cost is not fitted, not checked, and said so."""
    rows = _rows(world=1)
    got = dist_unit_costs(rows, "units.csv")
    assert got == pytest.approx({"ddp_bucket": BUCKET, "pp_action": ACTION}, rel=1e-9)
    assert "fsdp" not in check(rows, "units.csv")
    (line,) = not_fitted(rows)
    assert line.startswith("fsdp_group not fitted") and "world size 1" in line
    # rows of two ranks beside them give it back
    assert dist_unit_costs(rows + _rows(world=2), "units.csv")["fsdp_group"] == pytest.approx(GROUP, rel=1e-9)


def test_the_split_keeps_both_halves_and_checks_only_the_other() -> None:
    rows = _rows(noise=0.05)
    fit = [r for r in rows if fit_half(r)]
    assert 0.3 < len(fit) / len(rows) < 0.7
    errs = check(rows, "units.csv")
    # 5 % slower on a third of the rows: the held-out errors are of that order, never beyond it
    assert all(0.0 <= e <= 0.05 for e in errs.values())
    got = dist_unit_costs(rows, "units.csv")
    assert got["ddp_bucket"] == pytest.approx(BUCKET, rel=0.5)
    assert got["pp_action"] == pytest.approx(ACTION, rel=0.5)


def test_fit_host_reads_the_units_files(tmp_path: Path) -> None:
    rows = _rows()
    for rank in ("0", "1"):
        with gzip.open(tmp_path / f"host_dist_units_rank{rank}.csv.gz", "wt", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(r for r in rows if r["rank"] == rank)
    out = fit_host(sorted(tmp_path.glob("host_dist_units_rank*.csv.gz")))
    assert out["ddp_bucket"] == pytest.approx(BUCKET, rel=1e-9)
    assert out["pp_action"] == pytest.approx(ACTION, rel=1e-9)


def test_a_bad_number_names_its_file_and_column() -> None:
    rows = _rows()
    rows[1]["host_s"] = "fast"
    with pytest.raises(TraceError, match="host_s") as e:
        check(rows, "units.csv")
    assert "units.csv" in str(e.value)


def test_points_with_point_to_point_calls_do_not_enter_the_action_cost() -> None:
    """Stages on different ranks also send and receive (priced apart at the send/recv floor): their
    rows, however slow, leave ``pp_action`` as the one-rank points give it."""
    rows = _rows()
    slow = [
        {**r, "rank": "1", "p2p_ops": "64", "host_s": str(float(r["host_s"]) * 3)}
        for r in rows
        if r["family"] == "pp" and not r["variant"].startswith("accum")
    ]
    got = dist_unit_costs(rows + slow, "units.csv")
    assert got["pp_action"] == pytest.approx(ACTION, rel=1e-9)


def test_calibrate_takes_a_units_file_over_a_base_profile(tmp_path: Path) -> None:
    """``simcore calibrate DIR --device h100 --base h100``: the shipped profile with the entries the
    fit gives, the file among its sources and the held-out errors and the families left out in its notes."""
    rows = _rows(world=1)
    path = tmp_path / "host_dist_units_rank0.csv.gz"
    with gzip.open(path, "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert kind_of(path) == "dist_units"
    res = calibrate([tmp_path], "h100", fit_comm_profile=False, base="h100")
    prof = res.compute_profile
    assert prof is not None
    assert prof.host_layer["ddp_bucket"] == pytest.approx(BUCKET, rel=1e-9)
    assert prof.host_layer["pp_action"] == pytest.approx(ACTION, rel=1e-9)
    assert "fsdp_group" not in prof.host_layer
    assert str(path) in prof.source
    assert any(n.startswith("fsdp_group not fitted") for n in prof.notes)
    assert any("held-out median |err| ddp 0.0%" in n for n in res.notes)
