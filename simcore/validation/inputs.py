"""The committed measurement files each accuracy report reads: ``traces/report_inputs.yaml`` (paths under
``traces/``; how each set was made: ``traces/README.md``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from simcore.errors import SimcoreError
from simcore.validation.steps import traces_dir


@lru_cache(maxsize=1)
def report_inputs() -> dict[str, Any]:
    """The parsed ``report_inputs.yaml``: ``calibration`` (device -> its op sweeps, in the order ``simcore
    calibrate`` takes them), ``kernel_gemms`` (device -> its GEMMs timed by their kernels' own durations,
    fitted apart into the profile's ``gemm_kernel`` block), ``kernels`` (the kernels report's sweeps),
    ``h100_steps`` (the H100's step table)."""
    path = traces_dir() / "report_inputs.yaml"
    if not path.is_file():
        raise SimcoreError(f"{path}: not found (the accuracy reports need a checkout's traces/ folder)")
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def calibration_inputs(device: str) -> list[Path]:
    """The op sweeps the shipped profile of ``device`` is fitted on (absolute paths)."""
    return [traces_dir() / p for p in report_inputs()["calibration"][device]]
