"""Rewrite the per-trace table of ``docs/validation.md`` section 5 from a trace report.

  python -m simcore.validation.trace_report --json > /tmp/report.json
  python tools/validation_table.py /tmp/report.json [--doc docs/validation.md]

Replaces the block of table rows that start with ``| `h200`` (one row per ``traces/validate.csv`` case: scenario,
round, held apart, measured and predicted step, step and GPU-busy errors, the three largest class errors in ms) and
prints the report's summary line (all cases and the held-apart ones: median |error|, within 10 %, worst).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def signed(v: float, digits: int) -> str:
    """``v`` with its sign, the minus a typographic one (``−0.0`` for small negatives)."""
    s = f"{v:+.{digits}f}"
    return s.replace("-", "\u2212")


def row(r: dict) -> str:  # type: ignore[type-arg]
    ms = 1e3
    gpu = r.get("gpu_busy_error_pct")
    classes = ", ".join(f"{k} {signed(v * ms, 2)}" for k, v in r["largest_class_errors_s"].items())
    return (
        f"| `{r['scenario']}.yaml` | {r['round']} | {'yes' if r['held_apart'] else ''} | "
        f"{r['measured_step_time_s'] * ms:.1f} ms | {r['predicted_step_time_s'] * ms:.1f} ms | "
        f"{signed(r['error_pct'], 1)} % | {signed(gpu, 1) + ' %' if gpu is not None else '—'} | {classes} |"
    )


def summary(report: dict) -> str:  # type: ignore[type-arg]
    """The report's own summary (``trace_report.summary``), one line."""

    def part(d: dict) -> str:  # type: ignore[type-arg]
        return (
            f"{d['n']}: median {d['median_abs_error_pct']:.1f} %, {d['within_10pct']} within 10 %, "
            f"worst {d['worst_abs_error_pct']:.1f} %"
        )

    return f"all {part(report['summary']['all'])}; held apart {part(report['summary']['held_apart'])}"


def main() -> None:
    args = sys.argv[1:]
    doc = REPO / "docs" / "validation.md"
    if "--doc" in args:
        i = args.index("--doc")
        doc = Path(args[i + 1])
        del args[i : i + 2]
    report = json.loads(Path(args[0]).read_text())
    rows = report["rows"]
    lines = doc.read_text(encoding="utf-8").split("\n")
    idx = [i for i, line in enumerate(lines) if line.startswith("| `h200")]
    if not idx or idx[-1] - idx[0] + 1 != len(idx):
        raise SystemExit(f"{doc}: no contiguous block of '| `h200' rows")
    lines[idx[0] : idx[-1] + 1] = [row(r) for r in rows]
    doc.write_text("\n".join(lines), encoding="utf-8")
    print(f"{doc}: {len(idx)} -> {len(rows)} rows; {summary(report)}")


if __name__ == "__main__":
    main()
