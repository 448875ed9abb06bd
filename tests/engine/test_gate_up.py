"""``runtime.gate_up: fused``: eager SiLU and product on the strided halves of one gate/up GEMM."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import simcore
from simcore.calibration.fit_compute import strided_swiglu_ratios
from simcore.compute import ops as C
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario
from simcore.workload import lowering as L

SC = "tests/data/trace_scenarios/h200_train_llama1b_eager.yaml"


def _ops(sc: str, over: list[str]) -> list[str]:
    s = load_scenario(sc, over)
    lay = L.Layout(micro_batch=1, seq=1024, strided_gate_up=s.runtime.gate_up == "fused")
    return [o.args["name"] for o in L.mlp_block_fwd(s.model, lay) if o.kind == "memory"]


def test_lowering_names_the_strided_op() -> None:
    assert _ops(SC, ["runtime.gate_up=fused"]) == ["swiglu_strided"]
    assert _ops(SC, ["runtime.gate_up=separate"]) == ["swiglu"]


def test_default_profile_prices_it_as_the_contiguous_op() -> None:
    dev = default_registry().device("h200")
    prof = load_profile(dev)
    assert "swiglu_strided" not in prof.memory.ops
    nb = 3 * 2 * 8192 * 8192.0
    assert C.memory_op(dev, prof, "swiglu_strided", nb).time_s == C.memory_op(dev, prof, "swiglu", nb).time_s
    fused = simcore.predict(load_scenario(SC, ["runtime.gate_up=fused"])).step_time_s
    separate = simcore.predict(load_scenario(SC, ["runtime.gate_up=separate"])).step_time_s
    # priced alike; the fused projection is one weight tensor fewer per layer (optimizer, AMP casts)
    assert fused == pytest.approx(separate, rel=2e-3)
    # the kernel-rate profile measured it: about twice as slow, so the step grows
    kr = load_profile(dev, "h200-kernels")
    assert C.memory_op(dev, kr, "swiglu_strided", nb).time_s > 1.5 * C.memory_op(dev, kr, "swiglu", nb).time_s
    over = ["calibration=h200-kernels"]
    slow = simcore.predict(load_scenario(SC, [*over, "runtime.gate_up=fused"])).step_time_s
    fast = simcore.predict(load_scenario(SC, [*over, "runtime.gate_up=separate"])).step_time_s
    assert slow > fast
    # compiled code fuses the product into one kernel: no strided penalty
    comp = ["runtime.framework=compiled"]
    a = simcore.predict(load_scenario(SC, [*over, *comp, "runtime.gate_up=fused"])).step_time_s
    b = simcore.predict(load_scenario(SC, [*over, *comp, "runtime.gate_up=separate"])).step_time_s
    assert a == pytest.approx(b, rel=2e-3)  # (one weight tensor fewer per layer, as above)


def test_strided_ratios_hand_computed(tmp_path: Path) -> None:
    head = "kind,name,m,n,k,filler,duty,time_s,time_p10_s,time_p90_s,bytes,flops,variant,n_samples\n"
    t = {("silu", "strided"): 4.0, ("mul", "strided"): 4.0, ("silu_bwd", "strided"): 6.0}
    t |= {("silu", "contiguous"): 2.0, ("mul", "contiguous"): 2.0, ("silu_bwd", "contiguous"): 3.0}
    rows = "".join(f"mem,{n},8,8,,,,{v},,,,,{var},5\n" for (n, var), v in t.items())
    rows += "gemm_duty,mm_bf16,8,8,8,0,1.0,1.0,,,,,x,5\n"  # other rows are ignored
    p = tmp_path / "insitu.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write(head + rows)
    # forward (4 + 4) / (2 + 2); backward (6 + 2 x 4) / (3 + 2 x 2)
    assert strided_swiglu_ratios(p) == pytest.approx((2.0, 2.0))
