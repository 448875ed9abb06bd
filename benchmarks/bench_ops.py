"""Speed of the op cost models: a vectorised grid of 1e6 GEMM shapes, and single scalar calls.

python benchmarks/bench_ops.py
"""

from __future__ import annotations

import time

import numpy as np

import simcore
from simcore.compute import ops
from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry


def per_second(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t0)


def main() -> None:
    dev = default_registry().device("h200")
    prof = load_profile(dev)
    rng = np.random.default_rng(0)
    size = 1_000_000
    m = rng.integers(1, 32768, size)
    n = rng.integers(64, 32768, size)
    k = rng.integers(64, 32768, size)
    t0 = time.perf_counter()
    c = ops.gemm(dev, prof, m, n, k, "bf16")
    dt = time.perf_counter() - t0
    assert c.time_s.shape == (size,)
    print(f"gemm grid      : {size:.0e} shapes in {dt:.2f} s = {size / dt:,.0f} shapes/s")
    b = rng.integers(1, 64, size)
    s = rng.integers(1, 16384, size)
    t0 = time.perf_counter()
    ops.attention(dev, prof, b, 32, s, 128, True, False, 8)
    dt = time.perf_counter() - t0
    print(f"attention grid : {size:.0e} shapes in {dt:.2f} s = {size / dt:,.0f} shapes/s")
    t0 = time.perf_counter()
    ops.memory_op(dev, prof, "rmsnorm", rng.uniform(1e3, 1e10, size))
    dt = time.perf_counter() - t0
    print(f"memory-op grid : {size:.0e} sizes in {dt:.2f} s = {size / dt:,.0f} sizes/s")
    print(f"gemm scalar    : {per_second(lambda: ops.gemm(dev, prof, 4096, 4096, 4096), 2000):,.0f} calls/s")
    print(
        f"attn scalar    : {per_second(lambda: ops.attention(dev, prof, 4, 32, 4096, 128), 2000):,.0f} calls/s"
    )
    print(f"memory scalar  : {per_second(lambda: ops.memory_op(dev, prof, 'add', 6e7), 5000):,.0f} calls/s")
    print(
        "op_time scalar : "
        f"{per_second(lambda: simcore.op_time('gemm', m=4096, n=4096, k=4096), 1000):,.0f} calls/s"
    )


if __name__ == "__main__":
    main()
