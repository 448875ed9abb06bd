"""A scenario's ``runtime`` section as the engines' keyword arguments, so that predict, plan and serve
price the same run."""

from __future__ import annotations

from typing import Any

from simcore.specs.scenario import Scenario


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
        "attention_backend": rt.attention_backend,
        "profiler_record": tuple(rt.profiler_record),
        "layer_ops": None if rt.layer_ops is None else (rt.layer_ops.fwd, rt.layer_ops.bwd or 0.0),
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
        "attention_backend": rt.attention_backend,
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
