"""Where a compiled static-cache ``generate()`` step's time goes, measured and predicted, per phase.

For every trace whose decode passes replay a compiled CUDA graph (``host_trace.compiled_decode_graphs``): round 85's,
96's and 100's fit traces (no scenario: measured columns only) and the compiled rows of ``traces/validate.csv`` (with
``simcore validate``'s prediction). Measured, medians over the profiled steps:

- ``period``: the interval between consecutive graph launches inside a step (a decode pass's period);
- ``call``: the compiled call (``host_trace.compiled_decode_calls``: dynamo's lookup and the compiled region);
- ``loop``: the loop's top-level ops between the launches (``host_trace.loop_passes``: their host summed) and their
  ``weight`` (``HostOps.pass_op_weight``), ``gap`` = period - call - loop (the Python between them, or a wait);
- ``per_op``: ``period - call`` over ``weight`` and ``pace`` (``aten::empty`` a typical op of the loop, Python included);
- ``pace``: the decode's ``aten::empty`` (us), ``wait``/``lead`` (``compiled_decode_calls``: a GPU-bound decode
  waits longer than it leads);
- ``pre``: the step less its decode passes (``decode_steps`` x ``period``): the call's setup, the eager prefill.
- ``setup``: the generate() call before its prefill (``host_trace.generate_call``), ``to_launch``: from the prefill's first
  ``aten::embedding`` to the first graph launch; ``n``: graph launches a step (measured / predicted decode steps).

Predicted (``ValidationReport.phases``): ``p.dec`` a decode step, ``p.dh`` its host, ``p.pre`` the prefill phase
(the prefills' time and the generate() setup). Times in ms.

  python tools/compiled_decode_breakdown.py [--held-apart-only]
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcore.traces.classify import analyze  # noqa: E402
from simcore.calibration.host_trace import (  # noqa: E402
    _step_windows,
    compiled_decode_calls,
    compiled_decode_graphs,
    generate_call,
    graph_capture_steps,
    graph_launches,
    loop_passes,
    trace_host_ops,
)
from simcore.traces import read_trace  # noqa: E402
from simcore.validation.traces import validate  # noqa: E402

FIT_ROUNDS = ("round85", "round96", "round100")


def measured(a) -> dict[str, float] | None:  # type: ignore[no-untyped-def]
    """The measured columns of a compiled decode trace (``None``: not one)."""
    if not compiled_decode_graphs([a]):
        return None
    cd = compiled_decode_calls(a)
    launches = [c.ts for c in graph_launches(a.trace)]
    # steps that recorded a graph are left out, as simcore validate leaves them out
    warm = set(graph_capture_steps(a))
    windows = [(st, lo, hi, win) for st, lo, hi, win in _step_windows(a) if a.steps.index(st) not in warm]
    windows = windows or list(_step_windows(a))
    periods, per_step, to_launch, steps = [], [], [], []
    for st, lo, hi, win in windows:
        ts = [t for t in launches if lo <= t <= hi]
        periods += [b - x for x, b in zip(ts, ts[1:], strict=False)]
        per_step.append(len(ts))
        steps.append(st.time_s)
        # from the prefill's first aten::embedding to the step's first graph launch
        e = next((o.ts for o in win if o.name == "aten::embedding"), None)
        if ts and e is not None:
            to_launch.append(ts[0] - e)
    if not periods or cd is None:
        return None
    passes = [(pace, ops) for pace, ops in loop_passes(a) if ops]
    step = statistics.median(steps)
    period = statistics.median(periods)
    loop = statistics.median(sum(o.dur for o in ops) for _, ops in passes) if passes else 0.0
    w = trace_host_ops(a)
    weight = statistics.median(w.pass_op_weight((o.name, o.extra) for o in ops) for _, ops in passes) if passes else 0.0
    n = statistics.median(per_step)
    gc = generate_call(a)
    return {
        "step": step,
        "passes": n,
        "period": period,
        "mean": statistics.fmean(periods),
        "call": cd.call_s,
        "loop": loop,
        "weight": weight,
        "gap": period - cd.call_s - loop,
        "pace": cd.empty_main_s,
        "wait": cd.wait_s,
        "lead": cd.lead_s,
        "kernels": cd.kernels_per_replay,
        "pre": step - n * period,
        "setup": gc.setup_s if gc else 0.0,
        "to_launch": statistics.median(to_launch) if to_launch else 0.0,
        # (period - call) over the loop's weight and pace: aten::empty a typical op of the loop, Python included
        "per_op": (period - cd.call_s) / (weight * cd.empty_main_s) if weight and cd.empty_main_s else 0.0,
    }


def main() -> None:
    held_only = "--held-apart-only" in sys.argv
    rows: list[tuple[str, str, dict[str, float], dict[str, float] | None]] = []
    if not held_only:
        for rnd in FIT_ROUNDS:
            for p in sorted((REPO / "traces/h200" / rnd).glob("*.json.gz")):
                m = measured(analyze(read_trace(p)))
                if m is not None:
                    rows.append((p.name.removesuffix(".json.gz"), "fit", m, None))
    with open(REPO / "traces/validate.csv") as f:
        for r in csv.DictReader(f):
            files = [REPO / "traces" / t for t in r["traces"].split()]
            if len(files) != 1 or (held_only and r["held_apart"] != "1"):
                continue
            m = measured(analyze(read_trace(files[0])))
            if m is None:
                continue
            rep = validate([str(files[0])], REPO / "tests/data/trace_scenarios" / f"{r['scenario']}.yaml")
            ph = rep.phases or {}
            pred = {
                "err": rep.error_pct,
                "dec": ph.get("decode_step_s", 0.0),
                "dh": ph.get("decode_host_s", 0.0),
                "pre": rep.predicted_step_time_s - ph.get("decode_steps", 0.0) * ph.get("decode_step_s", 0.0),
                "n": ph.get("decode_steps", 0.0),
                "ph": ph.get("prefill_host_s", 0.0),
            }
            rows.append((r["scenario"].removeprefix("h200_"), "held" if r["held_apart"] == "1" else "", m, pred))
    ms = 1e3
    print(
        f"{'trace':52s} {'':4s} {'kern':>5s} {'pace':>5s} {'wait':>6s} {'lead':>6s} {'weight':>6s} {'loop':>6s} "
        f"{'call':>6s} {'gap':>6s} {'period':>6s} {'p.dec':>6s} {'p.dh':>6s} {'pre':>7s} {'p.pre':>7s} {'err%':>6s}"
    )
    for name, tag, m, p in rows:
        pc = (
            f"{p['dec'] * ms:6.3f} {p['dh'] * ms:6.3f} {m['pre'] * ms:7.2f} {p['pre'] * ms:7.2f} {p['err']:+6.1f}"
            if p
            else f"{'':6s} {'':6s} {m['pre'] * ms:7.2f}"
        )
        print(
            f"{name[:52]:52s} {tag:4s} {m['kernels']:5.0f} {m['pace'] * 1e6:5.2f} {m['wait'] * ms:6.3f} "
            f"{m['lead'] * ms:6.3f} {m['weight']:6.1f} {m['loop'] * ms:6.3f} {m['call'] * ms:6.3f} {m['gap'] * ms:6.3f} "
            f"{m['period'] * ms:6.3f} {pc} | per_op {m['per_op']:.2f} mean/median {m['mean'] / m['period']:.3f} n {m['passes']:.0f}/{p['n'] if p else 0:.0f} setup {m['setup'] * ms:5.2f} "
            f"to_launch {m['to_launch'] * ms:6.2f}" + (f" p.ph {p['ph'] * ms:6.2f}" if p else "")
        )


if __name__ == "__main__":
    main()
