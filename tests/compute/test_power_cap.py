"""The power cap: a step whose kernels would draw more than the TDP is stretched (seconds)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

import simcore
from simcore.calibration.fit_compute import (
    gemm_power_stretch,
    power_fractions,
    read_ops,
    superseded_gemm_rows,
)
from simcore.compute import ops
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry

H200 = default_registry().device("h200")
PROF = load_profile(H200)


def _prof(gemm: float) -> object:
    return PROF.model_copy(
        update={"power_fraction": {"gemm": gemm, "attention": 0.9, "memory": 0.5, "idle": 0.1}}
    )


def test_power_cap_time_hand_computed() -> None:
    p = _prof(1.2)
    # GEMMs alone at 1.2 x TDP for 1 s: 0.2 TDP-seconds too many, repaid at TDP - idle = 0.9 TDP
    assert ops.power_cap_time(H200, p, {"gemm": 1.0}) == pytest.approx(0.2 / 0.9)
    # an equal share of memory-bound work brings the average to 0.85 TDP: nothing added
    assert ops.power_cap_time(H200, p, {"gemm": 1.0, "memory": 1.0}) == 0.0
    # idle time lowers the average too
    assert ops.power_cap_time(H200, p, {"gemm": 1.0}, idle_s=1.0) == 0.0
    # vectorised over layouts, never negative, more GEMM time never less stretch
    g = np.array([0.0, 1.0, 2.0, 4.0])
    x = ops.power_cap_time(H200, p, {"gemm": g, "memory": np.ones(4)})
    assert np.all(x >= 0) and np.all(np.diff(x) >= 0)
    assert x[3] == pytest.approx((4 * 1.2 + 0.5 - 5.0) / 0.9)


def test_families_below_tdp_add_nothing() -> None:
    # the shipped profile's GEMM power is the power-capped sweep's (< TDP): no stretch at all
    assert PROF.power_fraction.get("gemm", 0.0) <= 1.0
    assert ops.power_cap_time(H200, PROF, {"gemm": 1.0}) == 0.0
    from simcore.engine.pricing import power_family

    assert power_family("recompute_gemm") == "gemm" and power_family("pipeline_bubble") == "idle"
    assert power_family("elementwise") == "memory" and power_family("attention") == "attention"


def test_training_step_carries_the_stretch(tmp_path: Path) -> None:
    sc = "scenarios/default.yaml"
    base = simcore.predict(sc)
    assert base.breakdown.get("power_cap", 0.0) == 0.0
    # the same run with a profile whose GEMM kernels draw 1.5 x TDP: a stretch, booked and summed
    import yaml

    d = yaml.safe_load(Path(PROF_PATH()).read_text())
    d["power_fraction"]["gemm"] = 1.5
    p = tmp_path / "hot.yaml"
    p.write_text(yaml.safe_dump(d))
    from simcore.specs.resolve import load_scenario

    hot = simcore.predict(load_scenario(sc, [f"calibration={p}"]))
    assert hot.breakdown["power_cap"] > 0
    assert sum(hot.breakdown.values()) == pytest.approx(hot.step_time_s, rel=1e-9)
    assert hot.step_time_s == pytest.approx(base.step_time_s + hot.breakdown["power_cap"], rel=1e-6)
    des = simcore.predict(load_scenario(sc, [f"calibration={p}"]), engine="des")
    assert des.step_time_s > simcore.predict(sc, engine="des").step_time_s


def PROF_PATH() -> Path:  # noqa: N802
    return Path(__file__).resolve().parents[2] / "hardware_specs" / "calibration" / "h200.yaml"


def test_kernel_duration_rows_supersede_call_timed_ones(tmp_path: Path) -> None:
    head = "kind,dtype,m,n,k,batch,heads,kv_heads,seq,kv_seq,head_dim,causal,backward,name,bytes,time_s,flops,framework\n"
    rows = []
    for i in range(6):
        m = 1024 * (i + 1)
        # called back to back: 1.2 x the kernel's own duration
        rows.append(f"gemm,bf16,{m},4096,4096,,,,,,,,0,matmul,1,{1.2e-3 * (i + 1)},1,eager\n")
        rows.append(f"gemm,bf16,{m},4096,4096,,,,,,,,0,matmul,1,{1.0e-3 * (i + 1)},1,\n")
    rows.append("gemm,bf16,64,64,64,,,,,,,,0,matmul,1,5e-6,1,eager\n")  # no kernel row: kept
    f = tmp_path / "g.csv.gz"
    with gzip.open(f, "wt") as z:
        z.write(head + "".join(rows))
    t = read_ops([f])
    fam = np.array(["gemm"] * len(t))
    fws = np.array(t.framework)
    sup = superseded_gemm_rows(t, fam, fws)
    assert list(sup) == [True, False] * 6 + [False]
    assert gemm_power_stretch(t, fam, fws) == pytest.approx(1.2)
    # the GEMM power that makes the cap model stretch a GEMM stream by exactly that
    pf = power_fractions({"gemm": 650.0, "idle": 70.0}, 700.0, 1.2)
    assert pf["gemm"] == pytest.approx(1 + 0.2 * (1 - 0.1))
    assert ops.power_cap_time(H200, _prof(pf["gemm"]), {"gemm": 1.0}) == pytest.approx(0.2)


def test_fp32_gemms_draw_their_own_measured_power() -> None:
    """Round 67: fp32 GEMM streams (CUDA-core FFMA) hold ~670 W at full clock, below the H200's 700 W
    TDP, while bf16 / fp16 / tf32 streams are capped: a step of fp32 GEMMs is not stretched."""
    from simcore.engine.pricing import breakdown_power_cap

    kr = load_profile(H200, "h200-kernels")
    assert kr.power_fraction["gemm"] > 1.0 > kr.power_fraction["gemm_fp32"] > 0.9
    bd = {"gemm": 0.1}
    assert float(breakdown_power_cap(H200, kr, bd)) > 0.0
    assert float(breakdown_power_cap(H200, kr, bd, "fp32")) == 0.0
    # a profile without the fp32 entry keeps pricing fp32 GEMMs as the GEMM family
    no32 = kr.model_copy(update={"power_fraction": {k: v for k, v in kr.power_fraction.items() if k != "gemm_fp32"}})
    assert float(breakdown_power_cap(H200, no32, bd, "fp32")) == pytest.approx(float(breakdown_power_cap(H200, kr, bd)))
