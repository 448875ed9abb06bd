"""Prediction intervals: how far measurements have fallen from simcore's predictions, per class.

``hardware_specs/calibration/intervals.yaml`` (written by ``simcore calibrate --intervals``, from
:mod:`simcore.validation.intervals`) holds, for each *class* of prediction, the quantiles of the
measured-to-predicted ratio over the measurements of that class in the fit half of the accuracy
reports' rows (held-apart profiler traces, measured steps, published tables). A prediction ``t`` of that
class gets the interval ``[t * low, t * high]``: the stated ``level`` (80 %) of such measurements fell
inside it. See ``docs/accuracy.md``, "Prediction intervals".

A class is ``<calibrated|transferred>/<single|node|cluster>/<training|inference>``: whether the GPU's
own measurements calibrated the compute profile or it was transferred from another GPU
(``ComputeProfile.transferred_from``), how many GPUs the run spans (1; one node, at most
:data:`NODE_GPUS`; more), and the workload. Classes with fewer than ``min_n`` measurements fall back
to the pooled classes above them (:func:`parents`: ``cluster/training``, then ``training``, then ``all``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from simcore.specs.loader import read_yaml, validate
from simcore.specs.registry import default_registry

NODE_GPUS = 8
"""Runs of at most this many GPUs count as one node (an HGX/DGX node's NVSwitch domain)."""


class IntervalClass(BaseModel):
    """The measured/predicted ratio's quantiles over one class's fit rows (dimensionless)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=1)
    """Measurements the quantiles were taken over."""
    low: float = Field(gt=0)
    """Lower quantile ``(1 - level) / 2`` of measured / predicted."""
    high: float = Field(gt=0)
    """Upper quantile ``(1 + level) / 2`` of measured / predicted."""
    median: float = Field(gt=0)
    """Median of measured / predicted (1: unbiased; > 1: predictions fast)."""


class Intervals(BaseModel):
    """The intervals file: level, the minimum class size, and the classes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: float = Field(gt=0, lt=1)
    """Fraction of measurements each interval is meant to cover (central)."""
    min_n: int = Field(ge=1)
    """A class with fewer fit rows is not used; its pooled parent is."""
    split: str
    """How rows were split into the fit half and the held-apart check half."""
    sources: dict[str, int]
    """Fit rows per report (steps, traces, published ...)."""
    classes: dict[str, IntervalClass]


def scale_of(gpus: int) -> str:
    """``single`` (1 GPU), ``node`` (at most :data:`NODE_GPUS`) or ``cluster``."""
    return "single" if gpus <= 1 else "node" if gpus <= NODE_GPUS else "cluster"


def class_key(calibrated: bool, gpus: int, kind: str) -> str:
    """The most specific class of a prediction (``kind``: ``training`` or ``inference``)."""
    return f"{'calibrated' if calibrated else 'transferred'}/{scale_of(gpus)}/{kind}"


def parents(key: str) -> list[str]:
    """``key`` and the pooled classes it falls back to, most specific first: the same scale and
    workload on any GPU (a cluster's errors come more from communication and layout than from the
    kernels' calibration), the workload, everything."""
    _cal, scale, kind = key.split("/")
    return [key, f"{scale}/{kind}", kind, "all"]


def lookup(iv: Intervals, key: str) -> tuple[str, IntervalClass] | None:
    """The first class along :func:`parents` with at least ``min_n`` rows, or ``None``."""
    for k in parents(key):
        c = iv.classes.get(k)
        if c is not None and c.n >= iv.min_n:
            return k, c
    return None


def intervals_path() -> Path | None:
    """The shipped intervals file (``calibration/intervals.yaml`` in the spec folders), if any."""
    return default_registry().calibration_path("intervals")


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> Intervals:
    return validate(Intervals, read_yaml(Path(path)), path)


def load_intervals(path: str | Path | None = None) -> Intervals | None:
    """The intervals at ``path`` (default: :func:`intervals_path`), or ``None`` when none ship."""
    p = Path(path) if path is not None else intervals_path()
    if p is None or not p.exists():
        return None
    return _load(str(p), p.stat().st_mtime_ns)  # (a file rewritten in this process is read again)
