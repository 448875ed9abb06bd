"""``python -m simcore.validation traces``: ``simcore validate`` on every committed profiler trace.

The traces and the scenario that describes each run are listed in ``traces/validate.csv`` (scenario
name under ``tests/data/trace_scenarios/``, the trace files of its ranks, the collection they came from
(``round``), and ``held_apart``: 1 where the trace was collected after the model it checks and nothing
was shaped on it). For each, the step-time error and the largest class errors; then the summary over
all traces and over the held-apart ones.

``--single-step``: each single-rank trace cut to its last step without the ``ProfilerStep`` annotations
(:func:`one_step_trace`), the most common thing users send: the same runs read without step markers.

  python -m simcore.validation traces [--json] [--index traces/validate.csv] [--calibration NAME]
      [--single-step] [--probe-window N] [--ops]

``--probe-window N``: what-if for inference traces' CPU pace (``host_trace.PROBE_WINDOW`` is 16; 0 is one
median over the trace).

``--replay``: instead of predicting, replay each case's traces on their own hardware with their measured
durations (``simcore replay``'s task graph, :func:`replay_on_source`): how far the trace-to-graph conversion
alone is from the measured step, the floor under every replay's error.
"""

from __future__ import annotations

import csv
import gzip
import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcore.errors import SimcoreError
from simcore.validation.steps import traces_dir


@dataclass(frozen=True)
class TraceCase:
    """One committed trace (all its ranks) and the scenario of its run."""

    scenario: Path
    traces: tuple[Path, ...]
    round: str
    held_apart: bool
    what: str

    @property
    def name(self) -> str:
        return self.scenario.stem


def default_index() -> Path:
    return traces_dir() / "validate.csv"


def scenarios_dir() -> Path:
    return traces_dir().parent / "tests" / "data" / "trace_scenarios"


def read_index(path: str | Path | None = None) -> list[TraceCase]:
    """The cases of a trace index CSV (columns scenario, traces, round, held_apart, what); trace
    paths are relative to the index's folder, scenarios are names under ``tests/data/trace_scenarios``."""
    p = Path(path) if path is not None else default_index()
    try:
        rows = list(csv.DictReader(p.read_text(encoding="utf-8").splitlines()))
    except OSError as e:
        raise SimcoreError(f"cannot read the trace index: {e.strerror}", file=str(p)) from None
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            out.append(
                TraceCase(
                    scenario=scenarios_dir() / f"{r['scenario'].strip()}.yaml",
                    traces=tuple(p.parent / t for t in r["traces"].split()),
                    round=r.get("round", "").strip(),
                    held_apart=r.get("held_apart", "0").strip() == "1",
                    what=r.get("what", "").strip(),
                )
            )
        except (KeyError, AttributeError):
            raise SimcoreError(f"row {i} lacks the scenario or traces column", file=str(p)) from None
    return out


def one_step_trace(src: str | Path, dst: str | Path) -> bool:
    """Write the last ``ProfilerStep`` of the profiler trace ``src`` as a trace without step annotations
    ``dst`` (``.json.gz``): its CPU events within the step, the GPU events its runtime calls launched
    (by ``correlation``), and the metadata; what a user who profiles one step without a schedule sends.
    False (nothing written) where ``src`` has no step annotation: it is such a trace already."""
    try:
        with gzip.open(src, "rt", encoding="utf-8") if str(src).endswith(".gz") else open(src) as f:
            d = json.load(f)
    except (OSError, ValueError) as err:
        raise SimcoreError(f"cannot read the trace to cut a step from: {err}", file=str(src)) from None
    ev = d.get("traceEvents", [])
    marks = [
        e
        for e in ev
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") != "gpu_user_annotation"
    ]
    if not marks:
        return False
    st = max(marks, key=lambda e: e["ts"])
    lo, hi = st["ts"], st["ts"] + st["dur"]
    launched = {
        e.get("args", {}).get("correlation")
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and lo <= e["ts"] <= hi
    }
    keep = []
    for e in ev:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            continue
        if e.get("ph") == "M":
            keep.append(e)
        elif e.get("ph") == "X":
            gpu = e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
            if (gpu and e.get("args", {}).get("correlation") in launched) or (
                not gpu and lo <= e["ts"] <= hi
            ):
                keep.append(e)
    d["traceEvents"] = keep
    with gzip.open(dst, "wt", encoding="utf-8") as f:
        json.dump(d, f)
    return True


def run(
    cases: list[TraceCase],
    calibration: str | None = None,
    single_step: bool = False,
    probe_window: int | None = None,
) -> list[dict[str, Any]]:
    """``simcore validate`` on each case: step errors and the three largest class errors.
    ``calibration``: predict with this compute profile (name or path) instead of the scenario's;
    ``single_step``: each single-rank trace cut to one unannotated step (:func:`one_step_trace`; a
    trace recorded so already is taken as it is), multi-rank cases left out."""
    from simcore.specs.resolve import load_scenario
    from simcore.validation.traces import validate

    out = []
    over = [f"calibration={calibration}"] if calibration else None
    tmp = tempfile.TemporaryDirectory() if single_step else None
    for c in cases:
        traces = [str(t) for t in c.traces]
        if tmp is not None:
            if len(traces) != 1:
                continue
            cut = Path(tmp.name) / Path(traces[0]).name
            if one_step_trace(traces[0], cut):
                traces = [str(cut)]
        rep = validate(
            traces, c.scenario, overrides=over, top_kernels=1 << 30, probe_window=probe_window
        ).to_dict()
        training = load_scenario(str(c.scenario), over or []).kind == "training"
        worst = sorted(rep["classes"], key=lambda r: -abs(r["error_s"]))[:3]
        out.append(
            {
                "scenario": c.name,
                "round": c.round,
                "held_apart": c.held_apart,
                "what": c.what,
                "measured_step_time_s": rep["measured_step_time_s"],
                "predicted_step_time_s": rep["predicted_step_time_s"],
                "error_pct": rep["error_pct"],
                "gpu_busy_error_pct": rep["gpu_busy_error_pct"],
                "largest_class_errors_s": {r["class"]: r["error_s"] for r in worst},
                # what the prediction took from the trace: the CPU's per-op speed, a loop that syncs
                "cpu_op_time_s": rep["runtime"].get("cpu_op_time"),
                "step_sync": rep["runtime"].get("step_sync", True) if training else None,
                # per class, and per memory-bound op at the trace's own shapes: (measured, predicted) s
                "classes_s": {r["class"]: (r["measured_s"], r["predicted_s"]) for r in rep["classes"]},
                "memory_ops_s": _memory_ops(rep["kernels"]),
            }
        )
    return out


def replay_on_source(cases: list[TraceCase]) -> list[dict[str, Any]]:
    """Each case's traces as a task graph run with their measured durations
    (:func:`~simcore.workload.replay.build_graph`, :func:`~simcore.workload.replay.simulate`): the replayed
    and the measured step (the slowest rank's median, seconds) and the error in percent."""
    from simcore.workload.replay import build_graph, load_analyses, simulate

    out = []
    for c in cases:
        ans = load_analyses([str(t) for t in c.traces])
        replayed = simulate(build_graph(ans)).step_time_s
        measured = max(a.step_time_s for a in ans)
        out.append(
            {
                "scenario": c.name,
                "round": c.round,
                "measured_step_time_s": measured,
                "replayed_step_time_s": replayed,
                "error_pct": 100.0 * (replayed / measured - 1.0),
            }
        )
    return out


# per-op classes that are not bandwidth-bound kernels
_NOT_MEMORY = ("gemm", "attention", "optimizer", "communication")


def _memory_ops(kernels: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    """Per simcore memory-bound op (``cast_up``, ``layernorm_bwd``, ...): kernels per step and their
    measured and predicted seconds per step, summed over the trace's shapes."""
    out: dict[str, tuple[float, float, float]] = {}
    for k in kernels:
        if k["class"] in _NOT_MEMORY or not k.get("priced_as"):
            continue
        n, m, p = out.get(k["priced_as"], (0.0, 0.0, 0.0))
        c = k["count_per_step"]
        out[k["priced_as"]] = (n + c, m + c * k["measured_s"], p + c * k["predicted_s"])
    return out


def class_totals(rows: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(measured, predicted) seconds per step of each class, summed over the traces (GPU kernels
    only: the idle class is the step's, not a kernel class)."""
    out: dict[str, tuple[float, float]] = {}
    for r in rows:
        for c, (m, p) in r["classes_s"].items():
            if c != "idle":
                a, b = out.get(c, (0.0, 0.0))
                out[c] = (a + m, b + p)
    return out


def memory_op_totals(
    rows: list[dict[str, Any]],
) -> tuple[dict[str, tuple[float, float, float]], float, float]:
    """Memory-bound kernels priced at the traces' own shapes, over every trace: per op (kernels,
    measured, predicted seconds per step summed over the traces); the predicted/measured ratio of
    their total; and the time-weighted median |error| of the per-trace per-op totals."""
    per: dict[str, tuple[float, float, float]] = {}
    pairs: list[tuple[float, float]] = []
    for r in rows:
        for op, (n, m, p) in r["memory_ops_s"].items():
            a, b, c = per.get(op, (0.0, 0.0, 0.0))
            per[op] = (a + n, b + m, c + p)
            if m > 0:
                pairs.append((abs(p / m - 1.0), m))
    tm = sum(v[1] for v in per.values())
    tp = sum(v[2] for v in per.values())
    pairs.sort()
    acc, half, med = 0.0, sum(w for _e, w in pairs) / 2.0, 0.0
    for e, w in pairs:
        acc += w
        if acc >= half:
            med = e
            break
    return per, (tp / tm if tm > 0 else float("nan")), med


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst |step error| and the count within 10 %, over all rows and the held-apart ones."""
    out: dict[str, Any] = {}
    for label, sel in (("all", rows), ("held_apart", [r for r in rows if r["held_apart"]])):
        errs = [abs(r["error_pct"]) for r in sel]
        if errs:
            out[label] = {
                "n": len(errs),
                "median_abs_error_pct": statistics.median(errs),
                "worst_abs_error_pct": max(errs),
                "within_10pct": sum(e <= 10.0 for e in errs),
            }
    return out


def format_table(rows: list[dict[str, Any]], summ: dict[str, Any], ops: bool = False) -> str:
    """:func:`run`'s rows and :func:`summary` as text: per trace the measured and predicted step (ms),
    the step and GPU-busy errors (%), the CPU speed the host was scaled by, whether the loop syncs, and
    the largest class errors; then the summaries, the classes over all traces and the memory-bound
    kernels (each op too with ``ops``)."""
    lines = [
        f"{'scenario':42s} {'round':>5s} {'held':>4s} {'meas ms':>9s} {'pred ms':>9s} {'err%':>7s} {'busy%':>7s} "
        f"{'cpu us':>9s} {'sync':>4s}  largest class errors (ms)"
    ]
    for r in rows:
        cls = ", ".join(f"{k} {v * 1e3:+.2f}" for k, v in r["largest_class_errors_s"].items())
        cpu = r["cpu_op_time_s"]
        probe = (
            "-"
            if not cpu
            else f"{cpu['main'] * 1e6:.1f}" + (f"/{cpu['backward'] * 1e6:.1f}" if cpu.get("backward") else "")
        )
        lines.append(
            f"{r['scenario']:42s} {r['round']:>5s} {'yes' if r['held_apart'] else '':>4s} "
            f"{r['measured_step_time_s'] * 1e3:9.2f} {r['predicted_step_time_s'] * 1e3:9.2f} "
            f"{r['error_pct']:+7.1f} {r['gpu_busy_error_pct']:+7.1f} {probe:>9s} "
            f"{'-' if r['step_sync'] is None else 'yes' if r['step_sync'] else 'no':>4s}  {cls}"
        )
    lines.append(
        "cpu us: the trace's aten::t (main / backward thread) the host was scaled by; sync: the loop waits "
        "for the GPU every step (no: a step takes max(host, GPU) totals)"
    )
    for label, s in summ.items():
        lines.append(
            f"{label}: n={s['n']} median |err| {s['median_abs_error_pct']:.1f}%  worst {s['worst_abs_error_pct']:.1f}%"
            f"  within 10%: {s['within_10pct']}/{s['n']}"
        )
    totals = class_totals(rows)
    lines.append(
        "classes over all traces, predicted/measured (measured ms per step, summed): "
        + ", ".join(
            f"{c} {p / m:.2f} ({m * 1e3:.0f})"
            for c, (m, p) in sorted(totals.items(), key=lambda x: -x[1][0])
            if m > 0
        )
    )
    per, ratio, med = memory_op_totals(rows)
    lines.append(
        f"memory-bound kernels at the traces' own shapes: predicted/measured {ratio:.2f}, "
        f"time-weighted median |err| {100 * med:.1f}% (--ops: per op)"
    )
    if ops:
        for op, (n, m, p) in sorted(per.items(), key=lambda x: -x[1][1]):
            if m > 0:
                lines.append(
                    f"  {op:22s} {n:8.0f} kernels/step  measured {m * 1e3:8.2f} ms  predicted/measured {p / m:5.2f}"
                )
    return "\n".join(lines)


def replay_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst |error| (%) of :func:`replay_on_source`'s rows and the count within 1 %."""
    errs = [abs(r["error_pct"]) for r in rows]
    return {
        "n": len(errs),
        "median_abs_error_pct": statistics.median(errs) if errs else None,
        "worst_abs_error_pct": max(errs, default=None),
        "within_1pct": sum(e <= 1.0 for e in errs),
    }


def format_replay(rows: list[dict[str, Any]], summ: dict[str, Any]) -> str:
    """:func:`replay_on_source`'s rows and :func:`replay_summary` as text (steps in ms, errors in %)."""
    lines = [f"{'scenario':52s} {'round':>5s} {'meas ms':>9s} {'replay ms':>9s} {'err%':>7s}"]
    for r in rows:
        lines.append(
            f"{r['scenario']:52s} {r['round']:>5s} {r['measured_step_time_s'] * 1e3:9.2f} "
            f"{r['replayed_step_time_s'] * 1e3:9.2f} {r['error_pct']:+7.2f}"
        )
    if summ["n"]:
        lines.append(
            f"replayed on the source: n={summ['n']} median |err| {summ['median_abs_error_pct']:.3f}%  "
            f"worst {summ['worst_abs_error_pct']:.2f}%  within 1%: {summ['within_1pct']}/{summ['n']}"
        )
    return "\n".join(lines)
