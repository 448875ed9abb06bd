"""Checkpoint size, write/read time and stall (simcore.system.checkpoint), by hand and through predict."""

from __future__ import annotations

import pytest

import simcore
from simcore.errors import SimcoreError
from simcore.specs.resolve import load_scenario
from simcore.specs.scenario import ModelSpec, TrainingSpec
from simcore.specs.system import CheckpointSpec, StorageSpec, storage_spec
from simcore.system.checkpoint import checkpoint_bytes, checkpoint_cost, storage_time
from simcore.workload.model import param_counts

FS = StorageSpec(name="fs", write_bandwidth=1e12, read_bandwidth=2e12, node_bandwidth=50e9, gds=True)


def test_size_is_weights_and_optimizer_state() -> None:
    m = ModelSpec(name="m", layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=1000, seq_len=128)
    n = param_counts(m).total
    # bf16 weights (2) + fp32 master (4) + Adam m, v (8) = 14 bytes per parameter; no gradients
    assert checkpoint_bytes(m, TrainingSpec(master_weights=True), "bf16") == pytest.approx(14 * n)
    # bf16 weights without a master copy: the optimizer keeps its moments in bf16 too: 2 + 4
    assert checkpoint_bytes(m, TrainingSpec(), "bf16") == pytest.approx(6 * n)
    # fp32 weights under AMP: 4 + 8
    assert checkpoint_bytes(m, TrainingSpec(), "fp32") == pytest.approx(12 * n)
    # quantized recipes save the bf16 weights, not their fp8/fp4 copies
    for p in ("fp8", "mxfp8", "nvfp4"):
        assert checkpoint_bytes(m, TrainingSpec(precision=p, master_weights=True), "bf16") == pytest.approx(14 * n)


def test_storage_time_node_or_aggregate_bound() -> None:
    # 10 nodes: each gets min(50 GB/s, 1 TB/s / 10 = 100 GB/s) = 50 GB/s: 1 TB / 10 / 50 GB/s = 2 s
    assert storage_time(1e12, 10, 50e9, 1e12) == pytest.approx(2.0)
    # 100 nodes share the 1 TB/s: 10 GB/s each, 1 TB / 100 / 10 GB/s = 1 s
    assert storage_time(1e12, 100, 50e9, 1e12) == pytest.approx(1.0)


def test_modes_by_hand() -> None:
    size, state, gpus, dp, per_node = 1.6e12, 10e9, 128, 16, 8
    sync = checkpoint_cost(CheckpointSpec(mode="sync"), FS, size, state, gpus, dp, per_node, "hgx-h200")
    # one replica of 128 / 16 = 8 GPUs (1 node) writes 1.6 TB at its 50 GB/s: 32 s, after a pageable copy
    # of 200 GB per GPU
    copy = simcore.transfer_time(200e9, "gpu", "host", pinned=False, system="hgx-h200").time_s
    assert (sync.writer_gpus, sync.nodes_writing) == (8, 1)
    assert sync.write_s == pytest.approx(32.0) and sync.copy_s == pytest.approx(copy)
    assert sync.stall_s == pytest.approx(32.0 + copy) and sync.lag_s == 0.0
    dist = checkpoint_cost(
        CheckpointSpec(mode="distributed"), FS, size, state, gpus, dp, per_node, "hgx-h200"
    )
    # all 16 nodes: min(50, 1000 / 16 = 62.5) = 50 GB/s each, 100 GB each: 2 s
    assert dist.nodes_writing == 16 and dist.write_s == pytest.approx(2.0)
    asyn = checkpoint_cost(CheckpointSpec(mode="async"), FS, size, state, gpus, dp, per_node, "hgx-h200")
    pinned = simcore.transfer_time(size / gpus, "gpu", "host", pinned=True, system="hgx-h200").time_s
    assert asyn.stall_s == pytest.approx(pinned) and asyn.lag_s == pytest.approx(2.0)
    gds = checkpoint_cost(
        CheckpointSpec(mode="distributed", gds=True), FS, size, state, gpus, dp, per_node, "hgx-h200"
    )
    assert gds.copy_s == 0.0 and gds.stall_s == pytest.approx(2.0)
    assert asyn.stall_s < gds.stall_s < dist.stall_s < sync.stall_s
    # restore: 128 GPUs x 10 GB over 16 nodes at min(50, 2000 / 16) GB/s = 1.6 s, plus each GPU's copy in
    load = simcore.transfer_time(state, "host", "gpu", pinned=False, system="hgx-h200").time_s
    assert sync.restore_s == pytest.approx(1.6 + load)


def test_gds_needs_a_gds_storage_and_not_async() -> None:
    with pytest.raises(SimcoreError, match="GPUDirect"):
        checkpoint_cost(
            CheckpointSpec(mode="sync", gds=True),
            storage_spec("llama3-tectonic"),
            1e9,
            1e9,
            8,
            1,
            8,
            "hgx-h200",
        )
    with pytest.raises(ValueError, match="async"):
        CheckpointSpec(mode="async", gds=True)


def test_checkpoint_in_predict_needs_storage() -> None:
    with pytest.raises(SimcoreError, match="cluster.storage") as e:
        simcore.predict(load_scenario("default", overrides=["runtime.checkpoint.mode=sync"]))
    assert "\n" not in str(e.value)
    r = simcore.predict(
        load_scenario(
            "default", overrides=["runtime.checkpoint.mode=async", "cluster.storage=llama3-tectonic"]
        )
    )
    ck = r.system_effects.checkpoint
    # the pytorch stack's AMP: fp32 weights (4) + Adam m, v (8) per parameter
    assert ck.size_bytes == pytest.approx(12 * param_counts(load_scenario("default").model).total)
    assert r.step_time_s == pytest.approx(
        simcore.predict("default").step_time_s
    )  # no interval: priced, not added


def test_an_nvl72_writes_from_its_compute_trays() -> None:
    # a host is a 4-GPU compute tray of the rack, with its own storage path, not the 72-GPU rack
    sc = load_scenario(
        "llama3-405b-gb200-nvl72",
        overrides=[
            "cluster.storage=llama3-tectonic",
            "runtime.checkpoint.mode=sync",
            "reliability.node_mtbf=10000 h",
        ],
    )
    r = simcore.predict(sc)
    ck, rel = r.system_effects.checkpoint, r.system_effects.reliability
    assert ck.nodes_writing == ck.writer_gpus // 4
    assert rel.job_mtbf_s == pytest.approx(10000 * 3600 / (r.gpus / 4))
