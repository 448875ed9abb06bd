"""The system around the GPU: input pipeline, checkpoints and storage, failures and goodput, power caps
and MIG slices (docs/system.md).

Each submodule is a model of one part (pure functions over numbers and specs); this module applies the
scenario's keys (``runtime.dataloader``, ``runtime.checkpoint``, ``cluster.storage``, ``reliability``,
``cluster.power_cap``, ``cluster.mig``) to a priced training step (and, for the power cap and MIG, an
inference prefill and decode step) for :func:`simcore.predict`. With none of them given the prediction
is the engines' alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from simcore.comm.host import transfer_time
from simcore.engine.inference import InferenceEval
from simcore.errors import SpecError
from simcore.memory import RESERVED_BYTES
from simcore.specs.hardware import Device
from simcore.specs.profile import load_profile
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import Scenario
from simcore.specs.system import StorageSpec, cooling_table, storage_spec
from simcore.system.checkpoint import CheckpointResult, checkpoint_bytes, checkpoint_cost
from simcore.system.dataloader import LoaderResult, loader_wait
from simcore.system.mig import mig_slice
from simcore.system.power import PowerCapResult, board_limit, cap_clocks, clock_scaled, family_seconds
from simcore.system.reliability import GoodputResult, goodput, whole_steps
from simcore.system.sharing import SharingResult, shared_decode
from simcore.workload.precision import inference_gemm_family, recipe

SAMPLE_BYTES_PER_TOKEN = 16.0
"""Default bytes a language-model sample carries per token: an int64 token id and an int64 label."""


class SystemResult(BaseModel):
    """What the system around the GPU adds to a training step and run (seconds; SI units)."""

    model_config = ConfigDict(frozen=True)

    step_time_s: float
    """The step with the data wait (and priced under the power cap)."""
    added: dict[str, float]
    """Seconds added to the step by breakdown category (``data_wait``)."""
    dataloader: LoaderResult | None = None
    power: PowerCapResult | None = None
    checkpoint: CheckpointResult | None = None
    checkpoint_overhead: float | None = None
    """Share of wall time spent in checkpoint stalls at ``runtime.checkpoint.interval`` (no failures)."""
    reliability: GoodputResult | None = None
    time_to_train_s: float | None = None
    """Wall-clock time to train ``training.tokens``: the failure-free time over the goodput (or with
    the checkpoint stalls alone)."""
    notes: list[str] = []


def on_mig(cluster: ClusterInfo, profile: str | None) -> ClusterInfo:
    """``cluster`` with its device cut to the MIG slice ``profile`` (unchanged when ``None``); a MIG job
    runs on one slice."""
    if profile is None:
        return cluster
    if cluster.gpus != 1:
        raise SpecError(
            f"a MIG slice is priced as a one-GPU job (got {cluster.gpus} GPUs): slices do not communicate over NVLink",
            field="cluster.mig",
        )
    return dataclasses.replace(cluster, device=mig_slice(cluster.device, profile))


def scenario_limit(sc: Scenario, device: Device) -> float | None:
    """The board power limit (W) of the scenario's GPUs: ``cluster.power_cap``, at most (and by default)
    the limit of ``cluster.cooling`` (``hardware_specs/cooling``); ``None`` with neither: the TDP
    (:func:`simcore.system.power.board_limit`)."""
    cooling = sc.cluster.cooling
    cooled = None if cooling is None else cooling_table(device.name).limit(cooling)
    return board_limit(device, sc.cluster.power_cap, cooling, cooled)


def power_capped(
    sc: Scenario, cluster: ClusterInfo, breakdown: Mapping[str, Any]
) -> tuple[PowerCapResult, ClusterInfo] | None:
    """``cluster.power_cap`` and ``cluster.cooling`` applied to a step of ``breakdown`` (seconds by
    category): the clocks at the TDP and at the board limit (:func:`scenario_limit`), and the cluster
    whose device runs at the limit's clock (peaks scaled by their ratio) to price the step on again;
    ``None`` with neither key."""
    cap = scenario_limit(sc, cluster.device)
    if cap is None:
        return None
    prof = load_profile(cluster.device, sc.calibration)
    if sc.training is not None:
        gemm_dtype = recipe(sc.training.precision).gemm_family(cluster.device)
    else:
        gemm_dtype = inference_gemm_family(sc.inference.precision) if sc.inference is not None else "bf16"
    clocks = cap_clocks(cluster.device, prof, breakdown, cap, gemm_dtype)
    ratio = clocks.clock_hz / clocks.uncapped_clock_hz
    sys_max = cluster.system.power_max - cluster.system.gpus * (cluster.device.tdp - cap)
    clocks = dataclasses.replace(clocks, system_power_max_w=sys_max, cooling=sc.cluster.cooling)
    return clocks, dataclasses.replace(cluster, device=clock_scaled(cluster.device, ratio))


class InferencePower(BaseModel):
    """The power cap's clocks and slowdowns of an inference prefill and decode step."""

    model_config = ConfigDict(frozen=True)

    prefill: PowerCapResult
    decode: PowerCapResult


def inference_capped(
    sc: Scenario, cluster: ClusterInfo, ev: InferenceEval, run: Callable[[ClusterInfo], InferenceEval]
) -> tuple[InferenceEval, InferenceEval, ClusterInfo, InferencePower]:
    """``cluster.power_cap`` applied to an inference evaluation ``ev``: the prefill and the decode hold
    their own clocks under the cap, so each is priced again (``run`` on a cluster) on its own capped
    device. Returns (prefill evaluation, decode evaluation, the decode's cluster, the clocks)."""
    pre = power_capped(sc, cluster, ev.prefill.time)
    dec = power_capped(sc, cluster, ev.decode.time)
    assert pre is not None and dec is not None, "inference_capped needs cluster.power_cap"
    ev_pre, ev_dec = run(pre[1]), run(dec[1])
    clocks = InferencePower(
        prefill=dataclasses.replace(
            pre[0], slowdown_s=float(ev_pre.prefill_time_s) - float(ev.prefill_time_s)
        ),
        decode=dataclasses.replace(
            dec[0], slowdown_s=float(ev_dec.decode_step_time_s) - float(ev.decode_step_time_s)
        ),
    )
    return ev_pre, ev_dec, dec[1], clocks


def inference_shared(
    sc: Scenario, cluster: ClusterInfo, ev: InferenceEval, memory: Mapping[str, float]
) -> SharingResult:
    """``cluster.sharing`` applied to an inference evaluation ``ev`` on ``cluster`` (``memory`` per
    process by part): the processes' decode step from the step alone, its kernel seconds (the step's
    breakdown outside host and idle time) and its bytes (weights and KV cache) and FLOPs
    (:func:`simcore.system.sharing.shared_decode`). Every process holds its own copy of the job's memory:
    more than fit the GPU is an error."""
    sh, inf = sc.cluster.sharing, sc.inference
    assert sh is not None and inf is not None
    dev = cluster.device
    usable = dev.memory.capacity - RESERVED_BYTES
    need = sh.processes * memory["total"]
    if need > usable:
        raise SpecError(
            f"{sh.processes} processes need {need / 2**30:.1f} GiB ({memory['total'] / 2**30:.1f} GiB each), "
            f"more than the {usable / 2**30:.1f} GiB usable on {dev.name}",
            field="cluster.sharing.processes",
        )
    kernels = sum(v for k, v in family_seconds(ev.decode.time).items() if k != "idle")
    peak = dev.peak_flops(inf.precision)
    return shared_decode(
        sh.mode,
        sh.processes,
        inf.batch,
        float(ev.decode_step_time_s),
        float(kernels),
        memory.get("weights", 0.0) + memory.get("kv_cache", 0.0),
        float(ev.decode.flops),
        dev.memory.bandwidth,
        peak,
    )


def host_gpus(cluster: ClusterInfo) -> int:
    """GPUs per host (the node with its own CPUs, memory and storage NICs): an HGX server's GPUs, an
    NVL72 rack's compute tray (``tray_gpus``)."""
    return min(cluster.system.tray_gpus or cluster.gpus_per_node, cluster.gpus_per_node)


def energy_cluster(cluster: ClusterInfo, power_cap: float | None) -> ClusterInfo:
    """``cluster`` whose device draws at most ``power_cap`` watts, the board limit (the energy model's
    upper end; above the TDP for a liquid-cooled board's higher limit)."""
    if power_cap is None or power_cap == cluster.device.tdp:
        return cluster
    return dataclasses.replace(cluster, device=cluster.device.model_copy(update={"tdp": power_cap}))


LOADER_DEFAULTS = {
    "num_workers": "0 (PyTorch's default: loading in the main process)",
    "pin_memory": "false (PyTorch's default: pageable copies)",
    "batch_size": "the micro-batch",
    "sample_bytes": "seq_len x 16 (int64 token ids and labels)",
}
CHECKPOINT_DEFAULTS = {"mode": "sync (torch.save from the data-parallel rank-0 replica)"}


def _assumed(section: str, spec: BaseModel, defaults: dict[str, str]) -> list[str]:
    """A note naming the defaults of ``section`` the scenario left to simcore (where a prediction says
    which users' software defaults it assumed); empty when it set them all."""
    left = [f"{k} = {v}" for k, v in defaults.items() if k not in spec.model_fields_set]
    return [f"{section}: assumed {'; '.join(left)}"] if left else []


def _storage(sc: Scenario) -> StorageSpec:
    st = sc.cluster.storage
    if st is None:
        raise SpecError(
            "runtime.checkpoint needs cluster.storage (a built-in storage system such as llama3-tectonic, or its fields)",
            field="cluster.storage",
        )
    return storage_spec(st) if isinstance(st, str) else st


def _loader(sc: Scenario, cluster: ClusterInfo, lay: dict[str, Any], step_s: float) -> LoaderResult:
    dl = sc.runtime.dataloader
    tr = sc.training
    assert dl is not None and tr is not None
    batch = dl.batch_size or tr.micro_batch
    samples = lay["global_batch"] // lay["dp"]
    if samples % batch:
        raise SpecError(
            f"batch_size {batch} does not divide the {samples} samples a rank takes per step (global_batch / dp)",
            field="runtime.dataloader.batch_size",
        )
    slow = dl.numa_remote_slowdown if dl.numa == "remote" else 1.0
    assert slow is not None
    nbytes = batch * (dl.sample_bytes or sc.model.seq_len * SAMPLE_BYTES_PER_TOKEN)
    copy = (
        transfer_time(nbytes, "host", "gpu", pinned=dl.pin_memory, system=cluster.system.name).time_s * slow
    )
    n = samples // batch
    return loader_wait(batch * dl.sample_time * slow, step_s / n, copy, dl.num_workers, n, dl.prefetch_factor)


def scenario_checkpoint(
    sc: Scenario, cluster: ClusterInfo, dp: int, state_per_gpu_bytes: float, param_dtype: str
) -> CheckpointResult:
    """One checkpoint of the training scenario ``sc`` (``runtime.checkpoint`` to ``cluster.storage``) on
    ``cluster`` with ``dp`` data-parallel replicas, each GPU holding ``state_per_gpu_bytes`` of weights
    and optimizer state (:func:`simcore.system.checkpoint.checkpoint_cost`)."""
    assert sc.training is not None and sc.runtime.checkpoint is not None
    return checkpoint_cost(
        sc.runtime.checkpoint,
        _storage(sc),
        checkpoint_bytes(sc.model, sc.training, param_dtype),
        state_per_gpu_bytes,
        cluster.gpus,
        int(dp),
        host_gpus(cluster),
        cluster.system.name,
    )


def scenario_goodput(
    sc: Scenario, cluster: ClusterInfo, step_s: float, ckpt: CheckpointResult
) -> GoodputResult:
    """Goodput of the scenario's ``reliability`` on ``cluster`` for ``step_s``-second steps and checkpoints
    costing ``ckpt``, at ``runtime.checkpoint.interval`` or the Young/Daly optimum
    (:func:`simcore.system.reliability.goodput`)."""
    assert sc.reliability is not None and sc.runtime.checkpoint is not None
    hosts = -(-cluster.gpus // host_gpus(cluster))
    return goodput(sc.reliability, cluster.gpus, hosts, step_s, ckpt, sc.runtime.checkpoint.interval)


def training_system(
    sc: Scenario,
    cluster: ClusterInfo,
    lay: dict[str, Any],
    step_s: float,
    memory: dict[str, float],
    tokens_per_step: float,
    param_dtype: str,
    power: PowerCapResult | None = None,
) -> SystemResult | None:
    """The scenario's system keys applied to a training step of ``step_s`` seconds (``memory`` per GPU by
    part; already priced under the power cap whose clocks ``power`` gives, :func:`power_capped`);
    ``None`` when it gives none of them."""
    rt, tr, rel = sc.runtime, sc.training, sc.reliability
    assert tr is not None
    if rt.dataloader is None and rt.checkpoint is None and rel is None and power is None:
        return None
    added: dict[str, float] = {}
    notes: list[str] = []
    loader = None
    if rt.dataloader is not None:
        loader = _loader(sc, cluster, lay, step_s)
        added["data_wait"] = loader.wait_per_step_s
        notes.extend(_assumed("runtime.dataloader", rt.dataloader, LOADER_DEFAULTS))
        if loader.bound != "copy":
            notes.append(
                f"data loader: the GPU waits {loader.wait_per_step_s:.3g} s per step for data ({loader.bound}); "
                f"{loader.workers_needed} workers per rank would leave only the batch copy"
            )
    step = step_s + sum(added.values())
    if rel is not None and rt.checkpoint is None:
        raise SpecError(
            "reliability needs runtime.checkpoint (and cluster.storage): failures restart from checkpoints",
            field="reliability",
        )
    ckpt = overhead = rl = ttt = None
    steps = tr.tokens / tokens_per_step if tr.tokens else None
    if rt.checkpoint is not None:
        notes.extend(_assumed("runtime.checkpoint", rt.checkpoint, CHECKPOINT_DEFAULTS))
        state = memory.get("weights", 0.0) + memory.get("optimizer", 0.0)
        ckpt = scenario_checkpoint(sc, cluster, lay["dp"], state, param_dtype)
        if rel is not None:
            rl = scenario_goodput(sc, cluster, step, ckpt)
            if rel.restart_time is None:
                notes.append("reliability.restart_time not given: a restart counts only the checkpoint read")
            ttt = None if steps is None else steps * step / rl.goodput
        elif rt.checkpoint.interval is not None:
            tau, _ = whole_steps(rt.checkpoint.interval, step)
            overhead = ckpt.stall_s / (tau + ckpt.stall_s)
            ttt = None if steps is None else steps * step / (1.0 - overhead)
    return SystemResult(
        step_time_s=step,
        added=added,
        dataloader=loader,
        power=power,
        checkpoint=ckpt,
        checkpoint_overhead=overhead,
        reliability=rl,
        time_to_train_s=ttt,
        notes=notes,
    )


__all__ = [
    "InferencePower",
    "SystemResult",
    "energy_cluster",
    "inference_capped",
    "inference_shared",
    "on_mig",
    "power_capped",
    "scenario_checkpoint",
    "scenario_goodput",
    "scenario_limit",
    "training_system",
]
