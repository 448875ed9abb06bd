"""The occupancy calculator (simcore.occupancy) against hand computation of CUDA's rules (sm_90: 64K
registers in 4 sub-partitions, 2048 threads, 32 blocks, 228 KB of shared memory per SM)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import simcore
from simcore.errors import SimcoreError
from simcore.system.mig import mig_slice


def test_full_occupancy_and_a_tail() -> None:
    # 128 threads = 4 warps; 32 registers: 1024 per warp, 16 warps per 16K sub-partition, 64 warps: 16 blocks;
    # warps allow 64 / 4 = 16; 1 KB reserved smem allows 228: 16 blocks, 64 warps, 100 %
    o = simcore.occupancy(128, 32, 0, blocks=132 * 16 + 1, device="h100")
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy) == (16, 64, 1.0)
    assert o.limits == {"warps": 16, "blocks": 32, "registers": 16, "shared memory": 228}
    # 2113 blocks over 132 x 16 = 2112 slots: 2 waves, the second holds one block
    assert (
        o.waves == 2 and o.tail == pytest.approx(1 / 2112) and o.wave_efficiency == pytest.approx(2113 / 4224)
    )


def test_register_and_shared_memory_limits() -> None:
    # 256 threads = 8 warps, 64 registers: 2048 per warp, 8 warps per sub-partition, 32 warps: 4 blocks;
    # 48 KiB + 1 KiB reserved = 50,176 B: floor(233,472 / 50,176) = 4 blocks; occupancy 32 / 64
    o = simcore.occupancy(256, 64, "48 KiB", device="h100")
    assert o.limits["registers"] == 4 and o.limits["shared memory"] == 4 and o.occupancy == 0.5
    # 80 registers: 2560 per warp, floor(16384 / 2560) = 6 warps per sub-partition = 24 warps: 3 blocks
    o = simcore.occupancy(256, 80, 0, device="h100")
    assert o.blocks_per_sm == 3 and o.limiter == "registers" and o.occupancy == pytest.approx(24 / 64)
    # 100 KiB of shared memory: 101 KiB per block, 2 blocks of 228 KiB
    o = simcore.occupancy(64, 0, "100 KiB", device="h100")
    assert o.blocks_per_sm == 2 and o.limiter == "shared memory"
    # tiny blocks hit the 32-block limit: 32 threads x 32 blocks = 32 warps, 50 %
    o = simcore.occupancy(32, 16, 0, device="h100")
    assert o.blocks_per_sm == 32 and o.limiter == "blocks" and o.occupancy == 0.5


def test_a100_has_less_shared_memory_and_a_slice_fewer_sms() -> None:
    o = simcore.occupancy(64, 0, "100 KiB", device="a100")  # 164 KiB per SM: one block
    assert o.capability == "sm_80" and o.blocks_per_sm == 1
    one = mig_slice(simcore.load_hardware("h100"), "1g.10gb")  # 18 of 132 SMs
    o = simcore.occupancy(128, 32, 0, blocks=16 * 18 * 3, device=one)
    assert o.sm_count == 18 and o.waves == 3 and o.tail == 1.0


def _blocks(t: int, r: int, s: int) -> int:
    """Resident blocks, 0 where one block does not fit (CUDA's 'too many resources requested')."""
    try:
        return simcore.occupancy(t, r, s).blocks_per_sm
    except SimcoreError as e:
        assert "does not fit" in str(e)
        return 0


@given(t=st.integers(1, 1024), r=st.integers(1, 254), s=st.integers(0, 200 * 1024))
def test_more_resources_never_raise_occupancy(t: int, r: int, s: int) -> None:
    n = _blocks(t, r, s)
    assert n * -(-t // 32) <= 64
    assert _blocks(t, r + 1, s) <= n
    assert _blocks(t, r, s + 1024) <= n


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((2048, 32, 0), "threads_per_block"),
        ((128, 300, 0), "registers_per_thread"),
        ((128, 32, "300 KiB"), "shared_memory_per_block"),
        ((128.5, 32, 0), "threads_per_block"),
    ],
)
def test_bad_arguments_name_the_argument(args: tuple[object, ...], field: str) -> None:
    with pytest.raises(SimcoreError, match=field):
        simcore.occupancy(*args)  # type: ignore[arg-type]
