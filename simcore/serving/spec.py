"""Serving specs: the ``serving`` section of a scenario (arrivals, request lengths, scheduler,
KV cache policy, replicas, disaggregation, SLOs) and a loader for ``kind: serving`` files.

All times in seconds, rates in requests per second, lengths in tokens.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from simcore.engine.runtime import with_stack
from simcore.errors import SpecError
from simcore.specs.resolve import find_scenario, load_scenario
from simcore.specs.scenario import Scenario
from simcore.specs.serving import DisaggSpec, LengthDist, ServingSpec, SLOSpec
from simcore.specs.stack import Chosen

SERVING_STACKS = ("vllm", "sglang", "trtllm")
"""The stacks (``runtime.stack``) that are serving engines (``serving.engine``): one choice, named either way."""


def with_serving_stack(sc: Scenario, spec: ServingSpec) -> tuple[Scenario, ServingSpec, list[Chosen]]:
    """The scenario and serving section with their engine resolved, and the stack defaults chosen.

    ``serving.engine`` and ``runtime.stack`` name one piece of software: the engine's scheduler and KV-cache
    defaults live in ``hardware_specs/engines/serving.yaml`` (:func:`~simcore.specs.serving.with_engine`), its
    runtime defaults (framework, attention kernels) in ``hardware_specs/stacks/<engine>.yaml``. A scenario that
    names only the stack gets that engine's profile; one that names only the engine runs on that stack; naming
    two different ones is an error. The stack's defaults then fill the runtime fields the scenario did not give
    (:func:`~simcore.engine.runtime.with_stack`, as ``simcore predict`` does)."""
    stack_given = "stack" in sc.runtime.model_fields_set
    stack, engine = sc.runtime.stack, spec.engine
    if engine is None and stack in SERVING_STACKS:
        spec = ServingSpec.model_validate(spec.model_dump(exclude_unset=True) | {"engine": stack})
    elif engine is not None and not stack_given:
        sc = sc.model_copy(update={"runtime": sc.runtime.model_copy(update={"stack": engine})})
    elif engine is not None and stack != engine:
        raise SpecError(
            f"serving.engine {engine!r} and runtime.stack {stack!r} name different software: give one of them "
            "(they are one choice: the engine's scheduler defaults and the stack's runtime defaults)",
            field="serving.engine",
        )
    sc, chosen = with_stack(sc)
    return sc, spec, chosen


def load_trace(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a request trace CSV (``arrival_s,prompt_len,output_len``): arrays sorted by arrival
    (seconds, tokens, tokens)."""
    p = Path(path)
    rows: list[tuple[float, int, int]] = []
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols = {"arrival_s", "prompt_len", "output_len"}
            if reader.fieldnames is None or not cols <= set(reader.fieldnames):
                raise SpecError(f"trace needs the columns {', '.join(sorted(cols))}", file=str(p))
            for i, row in enumerate(reader, start=2):
                try:
                    a, pl, ol = float(row["arrival_s"]), int(row["prompt_len"]), int(row["output_len"])
                except (TypeError, ValueError):
                    raise SpecError(f"line {i}: not a number", file=str(p)) from None
                if a < 0 or pl < 1 or ol < 1 or not np.isfinite(a):
                    raise SpecError(f"line {i}: need arrival_s >= 0 and lengths >= 1", file=str(p))
                rows.append((a, pl, ol))
    except FileNotFoundError:
        raise SpecError("trace file not found", file=str(p)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read trace: {e}", file=str(p)) from None
    if not rows:
        raise SpecError("trace has no requests", file=str(p))
    arr = np.array(rows, dtype=float)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return arr[:, 0], arr[:, 1].astype(np.int64), arr[:, 2].astype(np.int64)


def load_serving(
    path: str | Path, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[Scenario, ServingSpec]:
    """Load a ``kind: serving`` scenario file (or built-in name) with ``--set`` overrides: the
    scenario (model, cluster, parallel plan, precision, runtime) and its ``serving`` section, with a
    relative ``serving.trace`` path made relative to the scenario file."""
    p = find_scenario(path)
    sc = load_scenario(p, overrides)
    if sc.kind != "serving" or sc.serving is None:
        raise SpecError(f"simcore serve needs kind: serving, got {sc.kind!r}", file=str(p), field="kind")
    return sc, with_trace_path(sc.serving, p)


def with_trace_path(spec: ServingSpec, scenario_file: str | Path) -> ServingSpec:
    """``spec`` with a relative trace path resolved against the scenario file's folder."""
    if spec.trace is not None and not Path(spec.trace).is_absolute():
        return spec.model_copy(update={"trace": str(Path(scenario_file).parent / spec.trace)})
    return spec


__all__ = [
    "DisaggSpec",
    "LengthDist",
    "SLOSpec",
    "ServingSpec",
    "load_serving",
    "load_trace",
    "with_serving_stack",
    "with_trace_path",
]
