"""A scenario's ``runtime`` section as the engines' keyword arguments, so that predict, plan and serve
price the same run; and the software stack's defaults (``runtime.stack``) applied to a scenario, the
attention backend ``auto`` resolved on its device (docs/stacks.md)."""

from __future__ import annotations

from typing import Any

from simcore.compute.ops import pick_attention_backend
from simcore.specs.memo import SpecMemo
from simcore.specs.registry import default_registry
from simcore.specs.resolve import resolve_cluster
from simcore.specs.scenario import Scenario
from simcore.specs.stack import Chosen, apply_stack, attention_choice, generation, load_stack
from simcore.workload.lowering import hp_dtype
from simcore.workload.precision import recipe

_STACKED = SpecMemo(256)
""":func:`with_stack`'s results, pinned to the scenario, its stack and the registry its device comes from."""


def with_stack(sc: Scenario) -> tuple[Scenario, list[Chosen]]:
    """``sc`` with its stack's defaults in every field it did not give (:func:`~simcore.specs.stack.apply_stack`)
    and ``runtime.attention_backend: auto`` resolved (:func:`attention_backend`), and the defaults chosen,
    each with its source. Applying it again changes nothing. A pure function of the frozen scenario, the
    stack file and the registry's device: remembered for the process (the same scenario object gives the
    same stacked object back; docs/architecture.md, Speed)."""
    pins = (sc, load_stack(sc.runtime.stack), default_registry())
    hit = _STACKED.get(pins, None)
    if hit is None:
        hit = _STACKED.put(pins, None, _with_stack(sc))
    return hit[0], list(hit[1])


def _with_stack(sc: Scenario) -> tuple[Scenario, list[Chosen]]:
    sc, chosen = apply_stack(sc)
    if sc.model.moe is None:  # the MoE defaults change nothing on a dense model: not worth a note
        chosen = [c for c in chosen if not c.key.startswith("runtime.moe_")]
    if sc.runtime.attention_backend == "auto":
        backend, why = attention_backend(sc)
        sc = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"attention_backend": backend})})
        chosen.append(Chosen("runtime.attention_backend", backend, why))
    return sc, chosen


def attention_backend(sc: Scenario) -> tuple[str, str]:
    """The attention kernels the scenario's stack runs on its device (``runtime.attention_backend`` where
    given, else the first of the stack's order for the GPU generation that takes the run's attention dtype
    and head dimension: :func:`~simcore.compute.ops.pick_attention_backend`), and why, in words."""
    rt = sc.runtime
    if rt.attention_backend != "auto":
        return rt.attention_backend, "given"
    stack = load_stack(rt.stack)
    if sc.model.csa is not None:
        return "cudnn", (
            "auto: DeepSeek-V4's hybrid attention runs its own fused sparse kernels whatever the stack picks for a "
            f"{sc.model.d_head}-wide head (cuDNN's DSA where Megatron-Bridge finds it, "
            "deepseek_v4_supports_fused_dsa_kernels), priced on cuDNN's fused-attention curve"
        )
    dev = resolve_cluster(sc.cluster, default_registry()).device
    # the fused attention runs in the recipe's high precision (bf16 under fp8*, mxfp8, nvfp4, fp4 inference)
    if sc.training is not None:
        dtype = hp_dtype(recipe(sc.training.precision).gemm_dtype)
    else:
        dtype = hp_dtype("bf16" if sc.inference is None else sc.inference.precision)
    ch = attention_choice(stack, dev)
    head = sc.model.d_head
    gqa = sc.model.n_kv_heads < sc.model.heads
    backend = pick_attention_backend(ch.order, dtype, head, False, ch.cudnn_max_head_dim, gqa)
    gen = generation(dev)
    why = f"auto: {stack.display_name} on {dev.name} ({gen}) runs {ch.kernel}"
    if backend != ch.order[0]:
        why += f"; {ch.order[0]} does not take {dtype} attention at head dim {head}{' with GQA' if gqa else ''}, so {backend}"
    else:
        why += f" for {dtype} attention at head dim {head}"
    if ch.priced_as:
        why += f", priced as {ch.priced_as}"
    return backend, f"{why} ({ch.source})"


def training_runtime(sc: Scenario) -> dict[str, Any]:
    """The scenario's runtime section as keyword arguments of :func:`simcore.engine.training.evaluate`
    (everything but the framework and calibration), so predict and plan price the same run."""
    rt = sc.runtime
    return {
        "profiler": rt.profiler,
        "gate_up": rt.gate_up,
        "step_sync": rt.step_sync,
        "cpu_op_time": cpu_op_time(sc),
        "implementation": rt.implementation,
        "dropout": 0.0 if sc.training is None else sc.training.dropout,
        "attention_backend": attention_backend(sc)[0],
        "profiler_record": tuple(rt.profiler_record),
        "layer_ops": None if rt.layer_ops is None else (rt.layer_ops.fwd, rt.layer_ops.bwd or 0.0),
        "moe_expert_calls": rt.moe_expert_calls,
        "moe_host_sync": rt.moe_host_sync,
        "moe_dispatcher": rt.moe_dispatcher,
        "moe_a2a_overlap": rt.moe_a2a_overlap,
        "moe_fused_mlp": rt.moe_fused_mlp,
    }


def inference_runtime(sc: Scenario) -> dict[str, Any]:
    """The scenario's runtime section as keyword arguments of :func:`simcore.engine.inference.evaluate`
    (everything but the framework and calibration), so every caller prices the same run."""
    rt = sc.runtime
    return {
        "profiler": rt.profiler,
        "gate_up": rt.gate_up,
        "cpu_op_time": cpu_op_time(sc),
        "decode_sync_every": rt.decode_sync_every,
        "implementation": rt.implementation,
        "decode_loop": rt.decode_loop,
        "attention_backend": attention_backend(sc)[0],
        "layer_ops": None if rt.layer_ops is None else rt.layer_ops.fwd,
        "pass_ops": rt.pass_ops,
        "compiled_decode": rt.compiled_decode,
        "decode_graph_records": rt.decode_graph_records,
        "decode_cpu_op_time": None if rt.cpu_op_time is None else rt.cpu_op_time.decode,
    }


def cpu_op_time(sc: Scenario) -> tuple[float, float | None] | None:
    """The scenario's CPU probe speed (main, backward seconds) for the engines, if it gives one."""
    c = sc.runtime.cpu_op_time
    return None if c is None else (c.main, c.backward)
