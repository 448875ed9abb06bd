"""``python -m simcore.validation devices``: the same runs on two GPUs, each predicted by its own
calibration and by the other GPU's, transferred.

simcore prices a GPU it has no measurements of with the profile of the nearest calibrated one,
efficiencies kept and the target's peaks, bandwidth and SMs used (:func:`simcore.specs.profile.transfer`).
Two calibrated GPUs measure how far that goes: the H200 (``traces/h200``) and the H100 SXM (``traces/h100``:
the H200's calibration sweeps run again, and twins of committed H200 runs, ``traces/h100/twins.csv``).
Five parts, every error on measurements the profile in use was not fitted on (see docs/validation.md,
the H100 section):

* ``kernels``: each GPU's op sweeps priced by the other GPU's profile transferred (every row), beside its own
  profile on the rows its fit held out (by shape hash);
* ``steps``: the H100's whole steps (``tools/bench_steps.py``: 22 training steps, 18 prefills, 44 decode
  steps) by the H100 profile and by the H200 profile transferred;
* ``traces``: ``simcore validate`` on the H100 profiler traces (held apart) with both profiles;
* ``replay``: ``simcore replay`` of each H200 twin onto the H100 (kernels re-priced, host gaps kept)
  against the H100's own trace of the same run, and back;
* ``ops``: each memory-bound op at the same shapes on both GPUs, the time ratio and each one's fraction of its
  peak bandwidth (why fraction-of-peak transfer misses: not every such kernel is bound by HBM).

  python -m simcore.validation devices [--json] [--parts kernels,steps,traces,replay,ops] [--plot out.png]
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from simcore.errors import SimcoreError
from simcore.validation.inputs import calibration_inputs, report_inputs
from simcore.validation.steps import traces_dir

TWINS = "h100/twins.csv"
DEVICES = ("h200", "h100")


def _sweep_table(device: str) -> Any:
    """The op rows of ``device``'s calibration sweeps (``fit_compute.Table``; the embedding-kernel file aside)."""
    from simcore.calibration import fit_compute as FC

    return FC.read_ops([p for p in calibration_inputs(device) if not FC.is_embedding_kernels_csv(p)])


def _stats(pred: Any, meas: Any) -> dict[str, Any]:
    p, m = np.asarray(pred, dtype=float), np.asarray(meas, dtype=float)
    ok = np.isfinite(p) & np.isfinite(m) & (m > 0)
    e = p[ok] / m[ok] - 1.0
    if e.size == 0:
        return {"n": 0}
    return {
        "n": int(e.size),
        "median_abs_error_pct": float(100 * np.median(np.abs(e))),
        "bias_pct": float(100 * np.median(e)),
        "within_10pct": int(np.sum(np.abs(e) <= 0.10)),
    }


def kernels() -> dict[str, Any]:
    """Per device and op family: its sweeps priced by its own profile (held-out rows) and by the other
    device's profile transferred (every row). Kernel-dominated rows (kernel over twice the launch
    floor) are summarised apart: the launch floor is the sweeping machine's CPU, not its GPU."""
    from simcore.calibration import fit_compute as FC
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    reg = default_registry()
    out: dict[str, Any] = {}
    for dev_name in DEVICES:
        dev = reg.device(dev_name)
        t = _sweep_table(dev_name)
        fam = np.array([FC.family_of(t, i) for i in range(len(t))])
        held = ~np.array([FC.is_fit_row(FC.shape_key(t, i)) for i in range(len(t))])
        meas = t.num["time_s"]
        per: dict[str, Any] = {}
        for prof_name in DEVICES:
            prof = load_profile(dev, prof_name)
            kern = FC.kernel_rows(dev, prof, t)
            pred = FC.predict_rows(dev, prof, t)
            rows = held if prof_name == dev_name else np.ones(len(t), dtype=bool)
            dominated = kern > 2.0 * FC.floor_rows(prof, t)
            fams: dict[str, Any] = {}
            for f in ("gemm", "attention_fwd", "attention_bwd", "memory", "memory_bwd", "optimizer"):
                m = rows & (fam == f)
                fams[f] = _stats(pred[m], meas[m])
            m = rows & (fam != "launch")
            fams["all"] = _stats(pred[m], meas[m])
            fams["kernel_dominated"] = _stats(pred[m & dominated], meas[m & dominated])
            per[prof_name] = fams
        out[dev_name] = per
    return out


def steps() -> dict[str, Any]:
    """The H100's measured steps by its own profile and by the H200 profile transferred."""
    from simcore.validation import steps as S

    path = traces_dir() / report_inputs()["h100_steps"]
    return {prof: S.validate(path, prof)["summary"] for prof in ("h100", "h200")}


def _h100_cases() -> list[Any]:
    from simcore.validation.trace_report import read_index

    return [c for c in read_index() if c.name.startswith("h100_")]


def traces() -> dict[str, Any]:
    """``simcore validate`` on the H100 traces with each profile: per trace and in summary."""
    from simcore.validation.trace_report import run, summary

    cases = _h100_cases()
    out: dict[str, Any] = {"rows": {}, "summary": {}}
    for prof in ("h100", "h200"):
        rows = run(cases, calibration=prof)
        out["summary"][prof] = summary(rows)["all"]
        for r in rows:
            out["rows"].setdefault(r["scenario"], {"measured_step_time_s": r["measured_step_time_s"]})[
                prof
            ] = r["error_pct"]
    return out


def read_twins() -> list[tuple[str, str]]:
    """(H100 scenario, its H200 twin) pairs of ``traces/h100/twins.csv``."""
    path = traces_dir() / TWINS
    try:
        return [
            (r["scenario"], r["twin"]) for r in csv.DictReader(path.read_text(encoding="utf-8").splitlines())
        ]
    except (OSError, KeyError) as e:
        raise SimcoreError(f"cannot read the twins table: {e}", file=str(path)) from None


def _busy(a: Any) -> float:
    """The share of a trace's step the GPU is busy (its classes' exposed time over the step)."""
    ct = a.class_times()
    step = a.step_time_s
    return float(sum(v for k, v in ct.items() if k != "idle") / step) if step > 0 else 0.0


def replay(only: set[str] | None = None) -> list[dict[str, Any]]:
    """Each twin pair replayed across: the H200 trace onto the H100 against the H100's measured step, and
    the H100 trace onto the H200 against the H200's. Replay keeps each trace's host gaps, so runs whose
    step the CPU sets carry the two machines' CPU difference (the GPU-busy share says which those are).
    ``only``: these H100 scenarios alone."""
    from simcore.validation.trace_report import read_index
    from simcore.workload.replay import load_analyses
    from simcore.workload.replay import replay as do_replay

    everything = {c.name: c for c in read_index()}
    out = []
    for h100, h200 in read_twins():
        a, b = everything.get(h100), everything.get(h200)
        if a is None or b is None or (only is not None and h100 not in only):
            continue
        ans = {
            "h100": load_analyses([str(t) for t in a.traces]),
            "h200": load_analyses([str(t) for t in b.traces]),
        }
        meas = {k: max(x.step_time_s for x in v) for k, v in ans.items()}
        busy = {k: min(_busy(x) for x in v) for k, v in ans.items()}
        row: dict[str, Any] = {"scenario": h100, "twin": h200, "measured_s": meas, "gpu_busy": busy}
        for src, dst in (("h200", "h100"), ("h100", "h200")):
            pred = do_replay([], dst, analyses=ans[src]).predicted_step_time_s
            row[f"{src}_to_{dst}_error_pct"] = 100.0 * (pred / meas[dst] - 1.0)
        out.append(row)
    return out


def memory_ops(min_bytes: float = 2e8) -> list[dict[str, Any]]:
    """Per memory-bound op: its kernels at the same shapes on both GPUs (at least ``min_bytes`` moved, so
    HBM-bound), the median H100/H200 time ratio and each GPU's achieved fraction of its peak bandwidth.
    A kernel bound by HBM takes the bandwidth ratio (4.8 / 3.35 = 1.43) longer on the H100; one bound by
    its arithmetic (same SMs and clock) takes 1.0x. Fraction-of-peak transfer assumes the first for all."""
    from simcore.calibration import fit_compute as FC
    from simcore.specs.registry import default_registry

    reg = default_registry()
    tabs = {d: _sweep_table(d) for d in DEVICES}
    bw = {d: reg.device(d).memory.bandwidth for d in DEVICES}

    def keyed(t: Any) -> dict[tuple[str, str, str], int]:
        return {
            (t.kind[i], FC.shape_key(t, i), t.framework[i]): i
            for i in range(len(t))
            if FC.family_of(t, i) in ("memory", "memory_bwd") and t.num["bytes"][i] >= min_bytes
        }

    a, b = keyed(tabs["h200"]), keyed(tabs["h100"])
    per: dict[str, list[tuple[float, float, float]]] = {}
    for k, j in b.items():
        i = a.get(k)
        if i is None:
            continue
        ta, tb = tabs["h200"], tabs["h100"]
        nbytes = tb.num["bytes"][j]
        per.setdefault(FC.memory_name(tb, j), []).append(
            (
                tb.num["time_s"][j] / ta.num["time_s"][i],
                nbytes / ta.num["time_s"][i] / bw["h200"],
                nbytes / tb.num["time_s"][j] / bw["h100"],
            )
        )
    out = [
        {
            "op": name,
            "n": len(v),
            "h100_over_h200": float(np.median([x[0] for x in v])),
            "h200_fraction_of_peak": float(np.median([x[1] for x in v])),
            "h100_fraction_of_peak": float(np.median([x[2] for x in v])),
        }
        for name, v in per.items()
    ]
    return sorted(out, key=lambda r: r["h100_over_h200"])


PARTS = ("kernels", "steps", "traces", "replay", "ops")


def report(parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The parts asked for, as a dict (the JSON of ``--json``)."""
    fns: dict[str, Callable[[], Any]] = {
        "kernels": kernels,
        "steps": steps,
        "traces": traces,
        "replay": replay,
        "ops": memory_ops,
    }
    return {p: fns[p]() for p in parts}


def _fmt_stats(s: dict[str, Any]) -> str:
    if not s.get("n"):
        return "-"
    return f"{s['median_abs_error_pct']:5.1f}% ({s['bias_pct']:+5.1f}%) n={s['n']}"


def format_report(res: dict[str, Any]) -> str:
    """:func:`report`'s parts as text tables (errors in %, median |error| with the median signed error
    in brackets)."""
    lines: list[str] = []
    if "kernels" in res:
        lines.append(
            "kernels: median |err| (median signed) by the device's own profile (held-out rows) / the other's, transferred"
        )
        for dev, per in res["kernels"].items():
            other = next(d for d in DEVICES if d != dev)
            for fam in per[dev]:
                lines.append(
                    f"  {dev} {fam:17s} own {_fmt_stats(per[dev][fam]):28s} from {other} {_fmt_stats(per[other][fam])}"
                )
    if "steps" in res:
        lines.append("H100 whole steps (tools/bench_steps.py), median |err| / worst:")
        for prof, summ in res["steps"].items():
            cells = ", ".join(
                f"{mode} {s['median_abs_error_pct']:.1f}% / {s['max_abs_error_pct']:.1f}%"
                for mode, s in summ.items()
            )
            lines.append(f"  {prof} profile{' (transferred)' if prof != 'h100' else ''}: {cells}")
    if "traces" in res:
        tr = res["traces"]
        lines.append(f"H100 profiler traces (held apart), step error %:  {'h100':>7s} {'h200->h100':>10s}")
        for name, r in tr["rows"].items():
            lines.append(f"  {name:50s} {r['h100']:+7.1f} {r['h200']:+10.1f}")
        for prof, s in tr["summary"].items():
            lines.append(
                f"  {prof} profile: n={s['n']} median |err| {s['median_abs_error_pct']:.1f}%  worst "
                f"{s['worst_abs_error_pct']:.1f}%  within 10%: {s['within_10pct']}/{s['n']}"
            )
    if "ops" in res:
        lines.append(
            "memory-bound ops at the same shapes (>= 200 MB): H100 / H200 time, fraction of each GPU's peak bandwidth"
        )
        lines.append(
            f"  {'op':26s} {'n':>3s} {'h100/h200':>9s} {'h200 % of peak':>15s} {'h100 % of peak':>15s}"
        )
        for r in res["ops"]:
            lines.append(
                f"  {r['op']:26s} {r['n']:3d} {r['h100_over_h200']:9.2f} {100 * r['h200_fraction_of_peak']:14.0f}% "
                f"{100 * r['h100_fraction_of_peak']:14.0f}%"
            )
    if "replay" in res:
        rows = res["replay"]
        lines.append(
            f"replay across (host gaps kept), step error %:     {'busy':>5s} {'h200->h100':>10s} {'h100->h200':>10s}"
        )
        for r in rows:
            lines.append(
                f"  {r['scenario']:50s} {min(r['gpu_busy'].values()):5.2f} {r['h200_to_h100_error_pct']:+10.1f} "
                f"{r['h100_to_h200_error_pct']:+10.1f}"
            )
        for lo, label in ((0.0, "all"), (0.8, "GPU-bound (busy >= 0.8 on both)")):
            sel = [r for r in rows if min(r["gpu_busy"].values()) >= lo]
            for k in ("h200_to_h100_error_pct", "h100_to_h200_error_pct"):
                errs = [abs(r[k]) for r in sel]
                if errs:
                    lines.append(
                        f"  {label}: {k.removesuffix('_error_pct').replace('_to_', '->')} n={len(errs)} median |err| "
                        f"{statistics.median(errs):.1f}%  within 10%: {sum(e <= 10 for e in errs)}"
                    )
    return "\n".join(lines)
