"""Power caps (simcore.system.power) and MIG slices (simcore.system.mig), by hand and through predict."""

from __future__ import annotations

import pytest

import simcore
from simcore.errors import SimcoreError
from simcore.specs.profile import load_profile
from simcore.specs.resolve import load_scenario
from simcore.system.mig import mig_slice
from simcore.system.power import cap_clocks, clock_scaled, family_seconds

H200 = simcore.load_hardware("h200")
PROF = load_profile(H200)  # type: ignore[arg-type]
STEP = {"gemm": 0.6, "attention": 0.15, "elementwise": 0.2, "pipeline_bubble": 0.05}


def _avg_power(fams: dict[str, float], f: float) -> float:
    """The step's average board power at SM clock f, written out: each family draws
    P_idle + (P_k - P_idle)(f / f_k)^3 watts, compute-bound time scales with f_k / f."""
    tdp, pf, cf = H200.tdp, PROF.power_fraction, PROF.clock_fraction
    idle = pf["idle"] * tdp
    num = den = 0.0
    for k, t in fams.items():
        if k == "idle":
            num, den = num + t * idle, den + t
            continue
        fk = cf[k] * H200.boost_clock
        tk = t * fk / f if k in ("gemm", "attention") else t
        num += tk * (idle + (pf[k] * tdp - idle) * (f / fk) ** 3)
        den += tk
    return num / den


def test_family_seconds() -> None:
    assert family_seconds(STEP) == {"gemm": 0.6, "attention": 0.15, "memory": 0.2, "idle": 0.05}


def test_cap_at_tdp_changes_nothing() -> None:
    r = cap_clocks(H200, PROF, STEP, H200.tdp)
    assert r.clock_hz == r.uncapped_clock_hz


def test_capped_clock_fits_the_cap() -> None:
    fams = family_seconds(STEP)
    r = cap_clocks(H200, PROF, STEP, 450.0)
    assert r.clock_hz < r.uncapped_clock_hz
    assert _avg_power(fams, r.clock_hz) == pytest.approx(450.0, rel=1e-6)
    assert cap_clocks(H200, PROF, STEP, 350.0).clock_hz < r.clock_hz
    slow = clock_scaled(H200, 0.8)  # type: ignore[arg-type]
    assert slow.peak["bf16"] == pytest.approx(0.8 * H200.peak["bf16"])  # type: ignore[union-attr]
    assert slow.memory.bandwidth == H200.memory.bandwidth  # type: ignore[union-attr]


def test_power_cap_in_predict() -> None:
    base = simcore.predict("default")
    r = simcore.predict(load_scenario("default", overrides=["cluster.power_cap=500 W"]))
    p = r.system_effects.power
    ratio = p.uncapped_clock_hz / p.clock_hz
    assert r.step_time_s == pytest.approx(base.step_time_s + p.slowdown_s) and p.slowdown_s > 0
    # compute-bound kernels slow by at most the clock ratio, bandwidth-bound ones not at all
    assert base.breakdown["gemm"] < r.breakdown["gemm"] <= base.breakdown["gemm"] * ratio * (1 + 1e-9)
    assert r.breakdown["gemm"] > base.breakdown["gemm"] * (1 + 0.8 * (ratio - 1))
    assert r.breakdown["elementwise"] == pytest.approx(base.breakdown["elementwise"], rel=1e-4)
    assert r.mfu == pytest.approx(base.mfu * base.step_time_s / r.step_time_s)  # against the nominal peak
    assert r.power_per_gpu_w < 500.0 < base.power_per_gpu_w
    assert p.system_power_max_w == pytest.approx(10.2e3 - 8 * (700.0 - 500.0))  # HGX H200: 10.2 kW
    assert r.energy_per_token_j < base.energy_per_token_j
    same = simcore.predict(load_scenario("default", overrides=["cluster.power_cap=700 W"]))
    assert same.step_time_s == pytest.approx(base.step_time_s)
    with pytest.raises(SimcoreError, match="cluster.power_cap"):
        simcore.predict(load_scenario("default", overrides=["cluster.power_cap=800 W"]))
    with pytest.raises(SimcoreError, match="too low"):  # the H200 idles at 78 W
        simcore.predict(load_scenario("default", overrides=["cluster.power_cap=60 W"]))


def test_power_cap_in_inference() -> None:
    base = simcore.predict("llama3-8b-decode-h200")
    r = simcore.predict(load_scenario("llama3-8b-decode-h200", overrides=["cluster.power_cap=500 W"]))
    pre, dec = r.system_effects.prefill, r.system_effects.decode
    assert r.prefill_time_s == pytest.approx(base.prefill_time_s + pre.slowdown_s)
    assert r.decode_step_time_s == pytest.approx(base.decode_step_time_s + dec.slowdown_s)
    # the prefill is compute-bound, a batch-32 decode streams weights and KV: it slows far less
    pre_slow = r.prefill_time_s / base.prefill_time_s - 1
    dec_slow = r.decode_step_time_s / base.decode_step_time_s - 1
    assert 0 < dec_slow < 0.5 * pre_slow
    assert pre_slow <= pre.uncapped_clock_hz / pre.clock_hz - 1 + 1e-9
    assert base.e2e_latency_s < r.e2e_latency_s
    assert "system_effects" not in base.model_dump()
    with pytest.raises(SimcoreError, match="cluster.power_cap"):
        load_scenario("serve_llama3_8b_h200", overrides=["cluster.power_cap=500 W"])


def test_mig_slice_by_hand() -> None:
    h100 = simcore.load_hardware("h100")
    s = mig_slice(h100, "MIG 1g.10gb")  # type: ignore[arg-type]
    assert s.sm_count == 18  # floor(132 / 7)
    assert s.peak["bf16"] == pytest.approx(989e12 * 18 / 132)
    assert s.memory.capacity == pytest.approx(h100.memory.capacity / 8)  # type: ignore[union-attr]
    assert s.memory.bandwidth == pytest.approx(3.35e12 / 8)
    assert s.l2_cache == pytest.approx(h100.l2_cache / 8) and s.nvlink is None  # type: ignore[union-attr]
    three = mig_slice(h100, "3g.40gb")  # type: ignore[arg-type]
    assert three.sm_count == 56 and three.memory.capacity == pytest.approx(h100.memory.capacity / 2)  # type: ignore[union-attr]


def test_mig_in_predict() -> None:
    whole = simcore.predict("llama3-8b-decode-h200")
    full = simcore.predict(load_scenario("llama3-8b-decode-h200", overrides=["cluster.mig=7g.141gb"]))
    assert full.decode_step_time_s == pytest.approx(whole.decode_step_time_s)  # 7 of 7, 8 of 8
    half = simcore.predict(load_scenario("llama3-8b-decode-h200", overrides=["cluster.mig=3g.71gb"]))
    # the decode step streams the weights: half the bandwidth, about twice the time
    assert 1.6 < half.decode_step_time_s / whole.decode_step_time_s < 2.4
    with pytest.raises(SimcoreError, match="unknown MIG profile"):
        simcore.predict(load_scenario("llama3-8b-decode-h200", overrides=["cluster.mig=1g.10gb"]))
    with pytest.raises(SimcoreError, match="one-GPU job"):
        simcore.predict(load_scenario("default", overrides=["cluster.mig=1g.18gb"]))
    with pytest.raises(SimcoreError, match="no MIG profiles"):
        simcore.predict(
            load_scenario("gpt3-175b-1024xa100", overrides=["cluster.mig=1g.10gb", "cluster.gpus=1"])
        )
