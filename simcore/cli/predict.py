"""``simcore predict`` and ``simcore timeline``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import (
    TRACE_FORMATS,
    JsonOpt,
    add_row,
    app,
    console,
    emit_json,
    esc,
    image_file,
    note,
    of_scenario,
    output_file,
    say,
)
from simcore.errors import SpecError

if TYPE_CHECKING:
    from simcore.prediction import InferenceResult, TrainingResult
    from simcore.specs.scenario import Scenario
    from simcore.system import SystemResult
    from simcore.system.power import PowerCapResult

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a field: key.path=value (repeatable).")
]
EngineOpt = Annotated[str, typer.Option("--engine", help="analytic (closed forms) or des (discrete-event).")]
ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="List the defaults the software stack (runtime.stack) chose for fields the scenario does not "
        "give, each with its source (with --json: a 'stack_defaults' list in the object).",
    ),
]


def _explain(sc: Scenario) -> list[dict[str, Any]]:
    """The defaults ``sc``'s stack chose, as rows (field, value, source)."""
    from simcore.engine.runtime import with_stack

    return [{"field": c.key, "value": c.value, "source": c.source} for c in with_stack(sc)[1]]


def _explain_table(sc: Scenario, rows: list[dict[str, Any]]) -> None:
    from simcore.specs.stack import load_stack

    st = load_stack(sc.runtime.stack)
    t = Table(
        title=esc(f"defaults of stack {st.name} ({st.display_name}, {st.version}) not given by {sc.name}")
    )
    t.add_column("field")
    t.add_column("value")
    t.add_column("source")
    for r in rows:
        add_row(t, r["field"], str(r["value"]), r["source"])
    if not rows:
        add_row(t, "(none)", "", "the scenario gives every field the stack sets")
    console.print(t)


MEMORY_PART_OF = {"mamba_state": "kv_cache"}
"""Memory rows that are a part of another row (indented and named so that the rows add up)."""


def _memory_rows(t: Table, r: TrainingResult | InferenceResult) -> None:
    fits = "fits" if r.fits_in_memory else "DOES NOT FIT"
    add_row(t, "memory per GPU", f"{units.fmt(r.memory_per_gpu_bytes, 'bytes')} ({fits}: {r.fits_reason})")
    mem = r.memory_breakdown
    for k, v in mem.items():
        if k == "total" or k in MEMORY_PART_OF:
            continue
        add_row(t, f"  memory {k}", units.fmt(v, "bytes"))
        for part in (p for p, whole in MEMORY_PART_OF.items() if whole == k and p in mem):
            add_row(t, f"    memory {part} (in {k})", units.fmt(mem[part], "bytes"))


def _interval_row(t: Table, label: str, low: float | None, high: float | None, what: str | None) -> None:
    """One row ``low - high`` of a prediction interval, when the result carries one."""
    if low is not None and high is not None:
        level = (what or "").split(" ", 1)[0]
        add_row(t, f"{label} ({level})", f"{units.fmt(low, 'time')} - {units.fmt(high, 'time')}")


def _table_training(r: TrainingResult, currency: str = "USD") -> None:
    t = Table(title=esc(f"{r.name}: {r.gpus} x {r.device} ({r.system}), {r.engine} engine"))
    t.add_column("metric")
    t.add_column("value", justify="right")
    lay = r.layout
    add_row(
        t,
        "layout",
        f"tp {lay['tp']} pp {lay['pp']} dp {lay['dp']} cp {lay['cp']} ep {lay['ep']} vp {lay['vp']}, "
        f"mb {lay['micro_batch']} x {r.microbatches}, {lay['schedule']}, recompute {lay['recompute']}",
    )
    add_row(t, "step time", units.fmt(r.step_time_s, "time"))
    _interval_row(t, "  interval", r.step_time_s_low, r.step_time_s_high, r.interval)
    add_row(t, "tokens/s (job)", f"{r.tokens_per_s:,.0f}")
    add_row(t, "tokens/s per GPU", f"{r.tokens_per_s_per_gpu:,.0f}")
    add_row(t, "model TFLOP/s per GPU", f"{r.model_tflops_per_gpu:.1f}")
    add_row(t, "MFU / HFU", f"{r.mfu:.1%} / {r.hfu:.1%}")
    add_row(t, "bubble fraction", f"{r.bubble_fraction:.1%}")
    _memory_rows(t, r)
    if r.time_to_train_s is not None:
        add_row(t, "time to train", f"{r.time_to_train_s / 86400:.1f} days ({r.gpu_hours:,.0f} GPU-hours)")
    if r.cost is not None:
        add_row(t, "cost", f"{r.cost:,.0f} {currency}")
    add_row(t, "power per GPU", units.fmt(r.power_per_gpu_w, "power"))
    add_row(t, "energy per token", f"{r.energy_per_token_j:.3g} J")
    add_row(t, "calibration", r.calibration)
    if r.system_effects is not None:
        _system_rows(t, r.system_effects)
    console.print(t)
    b = Table(title="where the step goes")
    b.add_column("category")
    b.add_column("seconds", justify="right")
    b.add_column("share", justify="right")
    for k, v in sorted(r.breakdown.items(), key=lambda kv: -kv[1]):
        if v > 1e-9 * max(r.step_time_s, 1e-30):
            add_row(b, k, units.fmt(v, "time"), f"{v / r.step_time_s:.1%}")
    console.print(b)
    for n in r.notes:
        note(n)


def _tf(seconds: float) -> str:
    return units.fmt(seconds, "time")


def _limit_label(p: PowerCapResult) -> str:
    return f"power limit ({p.cooling}-cooled)" if p.cooling else "power cap"


def _limit_text(p: PowerCapResult) -> str:
    """The board limit's clock against the TDP's and what it adds to (or, above the TDP, takes off) the step."""
    sign = "+" if p.slowdown_s >= 0 else "-"
    return (
        f"{units.fmt(p.cap_w, 'power')}: SM clock {p.clock_hz / 1e9:.2f} GHz "
        f"(at the {units.fmt(p.tdp_w, 'power')} TDP {p.uncapped_clock_hz / 1e9:.2f}), {sign}{_tf(abs(p.slowdown_s))}"
    )


def _system_rows(t: Table, s: SystemResult) -> None:
    """The system around the GPU (docs/system.md): data loading, power cap, checkpoints, goodput."""
    if (d := s.dataloader) is not None:
        add_row(
            t,
            "data wait per step",
            f"{_tf(d.wait_per_step_s)} ({d.bound}; {d.num_workers} workers, {d.workers_needed} needed)",
        )
    if (p := s.power) is not None:
        add_row(t, _limit_label(p), _limit_text(p) + " per step")
        if p.system_power_max_w is not None:
            add_row(t, "system power max (at the limit)", units.fmt(p.system_power_max_w, "power"))
    if (c := s.checkpoint) is not None:
        add_row(
            t,
            "checkpoint",
            f"{units.fmt(c.size_bytes, 'bytes')} {c.mode} to {c.storage}: stall {_tf(c.stall_s)}, "
            f"write {_tf(c.write_s)}, restore {_tf(c.restore_s)}",
        )
    if s.checkpoint_overhead is not None:
        add_row(t, "checkpoint overhead", f"{s.checkpoint_overhead:.1%}")
    if (g := s.reliability) is not None:
        kind = "Young/Daly" if g.optimal else "given"
        add_row(t, "job MTBF", f"{g.job_mtbf_s / 3600:.2f} h")
        add_row(t, "checkpoint interval", f"{_tf(g.interval_s)} ({g.interval_steps} steps, {kind})")
        add_row(t, "goodput", f"{g.goodput:.1%}")
    if s.time_to_train_s is not None:
        add_row(t, "time to train (wall clock)", f"{s.time_to_train_s / 86400:.1f} days")


def _table_inference(r: InferenceResult) -> None:
    t = Table(
        title=esc(
            f"{r.name}: {r.gpus} x {r.device}, batch {r.batch}, prompt {r.prompt_len}, context {r.context_len}"
        )
    )
    t.add_column("metric")
    t.add_column("value", justify="right")
    add_row(t, "prefill (TTFT)", units.fmt(r.prefill_time_s, "time"))
    _interval_row(t, "  interval", r.prefill_time_s_low, r.prefill_time_s_high, r.interval)
    add_row(t, "decode step (TPOT)", units.fmt(r.decode_step_time_s, "time"))
    _interval_row(t, "  interval", r.decode_step_time_s_low, r.decode_step_time_s_high, r.interval)
    add_row(t, "end-to-end latency", units.fmt(r.e2e_latency_s, "time"))
    add_row(t, "decode tokens/s", f"{r.tokens_per_s:,.0f}")
    add_row(t, "prefill tokens/s", f"{r.prefill_tokens_per_s:,.0f}")
    _memory_rows(t, r)
    add_row(t, "calibration", r.calibration)
    if (pc := r.system_effects) is not None:
        for phase, c in (("prefill", pc.prefill), ("decode", pc.decode)):
            add_row(t, f"{_limit_label(c)} ({phase})", _limit_text(c))
    if (sh := r.sharing) is not None:
        add_row(
            t,
            f"GPU shared ({sh.mode})",
            f"{sh.processes} processes: {sh.tokens_per_s_per_gpu:,.0f} tokens/s per GPU "
            f"(alone {_tf(sh.alone_step_s)} per step; {sh.bound}-bound)",
        )
    console.print(t)
    for title, bd, tot in (
        ("prefill", r.breakdown_prefill, r.prefill_time_s),
        ("decode step", r.breakdown_decode, r.decode_step_time_s),
    ):
        b = Table(title=f"where the {title} goes")
        b.add_column("category")
        b.add_column("seconds", justify="right")
        b.add_column("share", justify="right")
        for k, v in sorted(bd.items(), key=lambda kv: -kv[1]):
            if v > 1e-9 * max(tot, 1e-30):
                add_row(b, k, units.fmt(v, "time"), f"{v / tot:.1%}")
        console.print(b)
    for n in r.notes:
        note(n)


@app.command("predict")
def predict_cmd(
    scenarios: Annotated[
        list[str] | None,
        typer.Argument(help="Scenario files or built-in names (default: the built-in 'default')."),
    ] = None,
    set_: SetOpt = None,
    as_json: JsonOpt = False,
    engine: EngineOpt = "analytic",
    explain: ExplainOpt = False,
) -> None:
    """Predict step time, throughput, MFU, memory and where time goes (one JSON line per scenario with --json)."""
    from simcore.prediction import InferenceResult, TrainingResult, predict
    from simcore.specs.multijob import multi_job_file
    from simcore.specs.resolve import load_scenario

    if engine not in ("analytic", "des"):
        raise SpecError(f"unknown engine {engine!r}; use analytic or des", field="--engine")
    for path in scenarios or ["default"]:
        if multi_job_file(path):
            _predict_jobs(path, set_ or [], engine, explain, as_json)
            continue
        sc = load_scenario(path, set_ or [])
        with of_scenario(path):
            r = predict(sc, engine=engine)
        if as_json:
            emit_json({**r.model_dump(), "stack_defaults": _explain(sc)} if explain else r.model_dump())
            continue
        if explain:
            _explain_table(sc, _explain(sc))
        if isinstance(r, TrainingResult):
            _table_training(r, sc.cost.currency)
        elif isinstance(r, InferenceResult):
            _table_inference(r)
        else:
            from simcore.cli.serve import _table as serving_table

            serving_table(r)


def _span(systems: list[int]) -> str:
    """``0-3`` for consecutive systems, else ``0, 2, 5``."""
    if systems == list(range(systems[0], systems[0] + len(systems))) and len(systems) > 1:
        return f"{systems[0]}-{systems[-1]}"
    return ", ".join(map(str, systems))


def _predict_jobs(path: str, overrides: list[str], engine: str, explain: bool, as_json: bool) -> None:
    """``simcore predict`` of a multi-job file (a ``jobs`` list): each job's step alone and together on
    the shared fabric (:func:`simcore.planning.multijob.predict_jobs`), with ``--set cluster.*`` and, under
    ``--explain``, each job's stack defaults."""
    from simcore.planning.multijob import predict_jobs
    from simcore.specs.multijob import load_multi_job

    if engine != "analytic":
        raise SpecError("--engine is not taken by a multi-job file (edit the jobs' scenarios)", file=path)
    r = predict_jobs(path, overrides)
    placed = load_multi_job(path, overrides=overrides)[1] if explain else []
    if as_json:
        stack = {"stack_defaults": {p.name: _explain(p.scenario) for p in placed}} if explain else {}
        emit_json({**r.model_dump(), **stack})
        return
    for p in placed:
        _explain_table(p.scenario, _explain(p.scenario))
    f = r.fabric
    t = Table(
        title=esc(
            f"{r.name}: {len(r.jobs)} jobs on {r.nodes} x {r.system}, {f['topology']} fabric "
            f"{f['oversubscription']:g}:1"
        )
    )
    cols = ("job", "systems", "layout", "DP contention alone / together / phased", "step alone", "step together")
    for col in (*cols, "slowdown (phased)"):
        t.add_column(col, justify="left" if col in ("job", "layout") else "right")
    for j in r.jobs:
        lay = j.layout
        add_row(
            t,
            j.name,
            f"{_span(j.systems)} ({j.gpus} GPUs)",
            f"tp {lay['tp']} pp {lay['pp']} dp {lay['dp']} cp {lay['cp']}",
            f"{j.dp_contention_alone:.2f}x / {j.dp_contention_together:.2f}x / {j.dp_contention_phased:.2f}x",
            units.fmt(j.step_time_alone_s, "time"),
            units.fmt(j.step_time_together_s, "time"),
            f"{j.slowdown:.3f}x ({j.slowdown_phased:.3f}x)",
        )
    console.print(t)
    for n in r.notes:
        note(n)


@app.command("timeline")
def timeline_cmd(
    scenario: Annotated[str, typer.Argument(help="Training scenario file or built-in name.")] = "default",
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Chrome/Perfetto trace (.json or .json.gz).")
    ] = Path("trace.json"),
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw a pipeline Gantt chart (PNG, SVG, PDF, ...).")
    ] = None,
    set_: SetOpt = None,
) -> None:
    """Simulate one training step with the discrete-event engine and write its timeline."""
    from simcore.engine.timeline import simulate_training
    from simcore.prediction import evaluate_training
    from simcore.report.chrome_trace import gantt, write_trace
    from simcore.specs.resolve import load_scenario

    output_file(output, "-o", TRACE_FORMATS)
    image_file(png, "--png")
    sc = load_scenario(scenario, set_ or [])
    with of_scenario(scenario):
        if sc.kind != "training" or sc.training is None:
            raise SpecError("timeline needs a training scenario", field="kind")
        cluster, lay, ev = evaluate_training(sc)
        res = simulate_training(sc, cluster, lay, ev)
    write_trace(res, output, cluster.device.display_name)
    say(
        f"wrote {output}: {len(res.events)} events, step {units.fmt(res.step_time_s, 'time')}, "
        f"bubble {res.bubble_fraction:.1%}"
    )
    if png is not None:
        gantt(res, png, f"{sc.name}: step {res.step_time_s:.3f} s, bubble {res.bubble_fraction:.1%}")
        say(f"wrote {png}")
