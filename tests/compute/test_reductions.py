"""Reductions of a tensor (sum, mean, max, amax, vector norms) as memory-bound ops: hand-computed
traffic and the priced-as-``argmax`` rule (docs/compute.md, "Reductions")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.compute import ops
from simcore.errors import SimcoreError
from simcore.specs.ops import memory_op_traffic
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry

H200 = default_registry().device("h200")
PROF = load_profile(H200)


@pytest.mark.parametrize(("name", "flop"), [("sum", 1.0), ("mean", 1.0), ("max", 1.0), ("amax", 1.0), ("norm", 2.0)])
def test_reduction_reads_each_element_once(name: str, flop: float) -> None:
    # 1M bf16 elements: 2 MB read, the scalar result negligible
    nbytes, flops = memory_op_traffic(name, 1_000_000, 2.0)
    assert nbytes == 2_000_000.0
    assert flops == 1_000_000 * flop
    r = simcore.op_time("reduction", "h200", name=name, numel=1_000_000)
    assert r.bytes == 2_000_000.0
    assert r.flops == 1_000_000 * flop
    assert r.bound in ("memory", "latency")


def test_reduction_priced_as_the_measured_reduce_kernel() -> None:
    # no profile measures sum: it runs PyTorch's reduce_kernel, fitted as argmax (same bytes, same time)
    assert "sum" not in PROF.memory.ops
    nb = 256e6
    s = ops.memory_op(H200, PROF, "sum", nb, None, 2.0)
    a = ops.memory_op(H200, PROF, "argmax", nb, None, 2.0)
    assert s.time_s == pytest.approx(a.time_s, rel=1e-12)
    # 256 MB at the HBM's 4.8 TB/s is 53 us; the fitted kernel takes at least that and within 2x of it
    assert 256e6 / 4.8e12 <= s.time_s < 2 * 256e6 / 4.8e12


def test_reduction_names_and_aliases() -> None:
    assert simcore.op_time("reduction", "h200", numel=4096).shape["name"] == "sum"
    assert simcore.op_time("memory", "h200", name="amin", numel=4096).shape["name"] == "amax"
    assert simcore.op_time("reduction", "h200", name="linalg_vector_norm", numel=4096).shape["name"] == "norm"
    with pytest.raises(SimcoreError, match="reduction name must be one of"):
        simcore.op_time("reduction", "h200", name="gelu", numel=4096)


def test_fp32_reduction_moves_twice_the_bytes() -> None:
    a = simcore.op_time("reduction", "h200", dtype="fp32", name="sum", numel=1 << 24)
    b = simcore.op_time("reduction", "h200", dtype="bf16", name="sum", numel=1 << 24)
    assert a.bytes == 2 * b.bytes


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1 << 10, 1 << 28), f=st.floats(1.01, 8.0))
def test_reduction_time_grows_with_size(n: int, f: float) -> None:
    t1 = ops.memory_op(H200, PROF, "mean", n * 2.0, None, 2.0).time_s
    t2 = ops.memory_op(H200, PROF, "mean", n * 2.0 * f, None, 2.0).time_s
    assert t2 >= t1
