"""Request-level inference serving simulation (``simcore serve``, ``kind: serving``)."""

from simcore.serving.sim import RequestLog, ServingResult, ServingRun, Stats, StepModel, serve, simulate
from simcore.serving.spec import DisaggSpec, LengthDist, ServingSpec, SLOSpec, load_serving, load_trace

__all__ = [
    "DisaggSpec",
    "LengthDist",
    "RequestLog",
    "SLOSpec",
    "ServingResult",
    "ServingRun",
    "ServingSpec",
    "Stats",
    "StepModel",
    "load_serving",
    "load_trace",
    "serve",
    "simulate",
]
