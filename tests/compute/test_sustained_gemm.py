"""Blackwell's sustained GEMM rate (``Device.sustained_gemm``): a GEMM stream at the board's power limit
sustains less than its burst rate; the power model slows compute-bound GEMM time to it, never
memory-bound work (docs/compute.md, "SM clock and the power cap")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.calibration.fit_engine_gemm import without_table
from simcore.compute import ops
from simcore.engine.pricing import breakdown_power_cap
from simcore.specs.hardware import Device
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry

REG = default_registry()
GB200 = REG.device("gb200")
B200 = REG.device("b200")
H200 = REG.device("h200")
PROF = load_profile(GB200)  # the H200's profile transferred, GEMMs from GB200's engine table (burst clock)
IDLE = PROF.power_fraction["idle"]


def _r(dev: Device, dtype: str = "fp8_tensor") -> float:
    return ops.gemm_sustained_fraction(dev, load_profile(dev), dtype)


def test_gb200_fraction_hand_computed() -> None:
    # GB200's GEMM families come from its own engine table, timed over a few CUDA-graph replays (the burst
    # clock): the sustained fraction measured at its own 1200 W applies whole
    assert PROF.transferred_from == "h200" and "fp8_tensor" in PROF.gemm_measured
    assert _r(GB200) == pytest.approx(0.804)
    # the row-wise family (FP8 blockwise) is still the H200's transferred: over the H200's own sustained rate
    assert _r(GB200, "fp8") == pytest.approx(0.804 / 0.940)
    # without the table, the families are the H200's call-timed (sustained) rates: GB200's fraction over the
    # H200's, both at their TDPs
    assert ops.gemm_sustained_fraction(GB200, without_table(GB200), "fp8") == pytest.approx(0.804 / 0.940)
    # a stream of GEMMs is stretched by exactly 1 / r
    r = _r(GB200)
    assert ops.power_cap_time(GB200, PROF, {"gemm": 1.0}, gemm_dtype="fp8_tensor") == pytest.approx(1.0 / r - 1.0)
    # and sustained_clock's power law gives the stream the clock r x the calibration clock
    f = ops.sustained_clock(GB200, PROF, {"gemm": 1.0}, gemm_dtype="fp8_tensor")
    assert f == pytest.approx(r * PROF.clock_fraction["gemm"] * GB200.boost_clock, rel=1e-6)


def test_b200_through_the_power_law() -> None:
    # the same die at 1000 W: r = r0 ((T - P_idle) / (P0 - P_idle))^(1/3) (its engine table is at the burst clock)
    p_idle = IDLE * 1000.0
    want = 0.804 * ((1000.0 - p_idle) / (1200.0 - p_idle)) ** (1 / 3)
    assert _r(B200) == pytest.approx(want)
    assert _r(B200) < _r(GB200) < _r(REG.device("gb300")) < 1.0


def test_no_field_is_todays_behaviour() -> None:
    bare = GB200.model_copy(update={"sustained_gemm": None})
    assert ops.gemm_sustained_fraction(bare, PROF, "fp8") == 1.0
    assert ops.power_fractions(bare, PROF, "fp8") == PROF.power_fraction
    assert ops.power_cap_time(bare, PROF, {"gemm": 1.0}, gemm_dtype="fp8") == 0.0
    # a profile measured on the device itself is the sustained rate already
    assert _r(H200) == 1.0
    # a dtype the fact does not list (FP4: no sign of the limit in the sustained FP4 rows)
    assert _r(GB200, "fp4") == 1.0
    assert ops.power_cap_time(GB200, PROF, {"gemm": 1.0}, gemm_dtype="fp4") == 0.0


def test_capped_device_slows_compute_bound_work_never_memory_bound() -> None:
    # memory-bound work and attention draw as measured: no stretch
    assert ops.power_cap_time(GB200, PROF, {"memory": 1.0}, gemm_dtype="fp8") == 0.0
    assert ops.power_cap_time(GB200, PROF, {"attention": 1.0}, gemm_dtype="fp8") == 0.0
    # GEMMs are; memory-bound time beside them absorbs part of the excess (the board averages its power)
    alone = ops.power_cap_time(GB200, PROF, {"gemm": 1.0}, gemm_dtype="fp8")
    mixed = ops.power_cap_time(GB200, PROF, {"gemm": 1.0, "memory": 0.1}, gemm_dtype="fp8")
    assert 0.0 < mixed < alone
    # through the engines' breakdown: optimizer and communication are memory-bound
    assert breakdown_power_cap(GB200, PROF, {"optimizer": 1.0, "dp_comm": 2.0}, "fp8") == 0.0
    assert breakdown_power_cap(GB200, PROF, {"gemm": 1.0, "recompute_gemm": 1.0}, "bf16") > 0.0


def test_op_time_stays_the_burst_rate_memory_ops_unchanged() -> None:
    # the op-level rate is the transferred profile's; the cap is a step term (power_cap)
    bare = GB200.model_copy(update={"sustained_gemm": None})
    a = ops.gemm(GB200, PROF, 8192, 8192, 8192, "fp8").time_s
    b = ops.gemm(bare, PROF, 8192, 8192, 8192, "fp8").time_s
    assert a == b
    assert ops.memory_op(GB200, PROF, "copy", 2**30).time_s == ops.memory_op(bare, PROF, "copy", 2**30).time_s


@settings(max_examples=60, deadline=None)
@given(
    t1=st.floats(min_value=300.0, max_value=2500.0),
    t2=st.floats(min_value=300.0, max_value=2500.0),
    dtype=st.sampled_from(["bf16", "fp8"]),
)
def test_power_law_monotone_in_tdp(t1: float, t2: float, dtype: str) -> None:
    lo, hi = sorted((t1, t2))
    d_lo, d_hi = (GB200.model_copy(update={"tdp": t}) for t in (lo, hi))
    r_lo, r_hi = (ops.gemm_sustained_fraction(d, PROF, dtype) for d in (d_lo, d_hi))
    assert 0.0 <= r_lo <= r_hi <= 1.0
    s_lo, s_hi = (
        ops.power_cap_time(d, PROF, {"gemm": 1.0, "memory": 0.2}, gemm_dtype=dtype) for d in (d_lo, d_hi)
    )
    assert s_lo >= s_hi >= 0.0


def test_published_check_prices_azure_rows_as_sustained_streams() -> None:
    from simcore.calibration.fit_compute import check_published
    from simcore.validation.published import DATA_DIR

    rows = check_published(load_profile(H200), DATA_DIR / "published_kernels.csv")
    row = next(
        r for r in rows if r["device"] == "gb200" and r["dtype"] == "FP8" and "8192x8192x8192" in r["shape"]
    )
    # cuBLASLt's per-tensor FP8: the per-tensor family, GB200's own (its engine table: the burst clock)
    burst = ops.gemm(GB200, PROF, 8192, 8192, 8192, "fp8", per_tensor=True)
    r = ops.gemm_sustained_fraction(GB200, PROF, "fp8_tensor")
    assert r == pytest.approx(0.804)
    assert row["predicted"] == pytest.approx(burst.flops / burst.time_s / 1e12 * r, abs=0.1)
    # burst rows (stas00 MAMF) are the op's own rate
    mamf = next(r for r in rows if r["gpu"] == "NVIDIA GB200 SXM" and "FP8" in r["dtype"])
    b = ops.gemm(GB200, PROF, 19456, 5120, 1536, "fp8", per_tensor=True)
    assert mamf["predicted"] == pytest.approx(b.flops / b.time_s / 1e12, abs=0.1)


def test_power_cap_what_if_takes_the_steps_gemm_dtype() -> None:
    from simcore.system.power import cap_clocks

    bd = {"gemm": 0.7, "attention": 0.1, "elementwise": 0.2}
    bare = GB200.model_copy(update={"sustained_gemm": None})
    fp4 = cap_clocks(GB200, PROF, bd, 1000.0, "fp4")
    assert fp4 == cap_clocks(bare, PROF, bd, 1000.0, "fp4")  # FP4 GEMMs: no sustained limit listed
    fp8 = cap_clocks(GB200, PROF, bd, 1000.0, "fp8")
    assert fp8.uncapped_clock_hz < fp4.uncapped_clock_hz and fp8.clock_hz < fp4.clock_hz
