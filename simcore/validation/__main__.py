"""``python -m simcore.validation [steps|published|own|kernels|comm|traces|all]``: every accuracy report.

Each report predicts measurements the models were not fitted on and prints the errors:

* ``steps``: whole training steps, prefills and decode steps on one H200 (``traces/h200/steps.csv.gz``);
* ``published``: the published Megatron-LM training tables, row by row;
* ``own``: our DDP / tensor / pipeline / FSDP runs on two NVLinked H200s (``traces/h200x2``);
* ``kernels``: the compute profile's held-out kernels (a refit on ``traces/h200/ops.csv.gz``);
* ``comm``: the collective profile's held-out sizes and ops, and the published 8xH100 curves;
* ``traces``: ``simcore validate`` on every committed profiler trace (``traces/validate.csv``);
* ``devices``: the H100 and the H200, each priced by its own profile and by the other's transferred
  (kernels, whole steps, profiler traces, replays across; :mod:`simcore.validation.cross_device`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from simcore.validation.steps import traces_dir


def _steps() -> int:
    from simcore.validation import steps

    return steps.main([])


def _published() -> int:
    from simcore.validation import published

    return published.main([])


def _own() -> int:
    from simcore.validation import published

    return published.main(["--own"])


def _kernels() -> int:
    from simcore.calibration import fit_compute

    published = Path(__file__).resolve().parent / "data" / "published_kernels.csv"
    h200 = traces_dir() / "h200"
    return fit_compute.main(
        [
            str(h200 / "ops.csv.gz"),
            str(h200 / "cold.csv.gz"),
            str(h200 / "elementwise.csv.gz"),
            str(h200 / "attention.csv.gz"),
            str(h200 / "gemm_align.csv.gz"),
            str(h200 / "round59" / "eager_ops.csv.gz"),
            str(h200 / "round60" / "attention_efficient.csv.gz"),
            "--published",
            str(published),
        ]
    )


def _comm() -> int:
    from simcore.calibration import fit_comm

    return fit_comm.main(["--report"])


def _traces() -> int:
    from simcore.validation import trace_report

    return trace_report.main([])


def _devices() -> int:
    from simcore.validation import cross_device

    return cross_device.main([])


REPORTS: dict[str, Callable[[], int]] = {
    "steps": _steps,
    "published": _published,
    "own": _own,
    "kernels": _kernels,
    "comm": _comm,
    "traces": _traces,
    "devices": _devices,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    names = list(REPORTS) if not args or args == ["all"] else args
    unknown = [n for n in names if n not in REPORTS]
    if unknown:
        print(f"error: unknown report {unknown[0]!r}; known: {', '.join(REPORTS)}, all", file=sys.stderr)
        return 2
    code = 0
    for n in names:
        print(f"\n=== {n} ===", flush=True)
        t0 = time.perf_counter()
        rc = REPORTS[n]()
        print(f"({n}: {time.perf_counter() - t0:.1f} s)", flush=True)
        code = code or rc
    return code


if __name__ == "__main__":
    raise SystemExit(main())
