"""``simcore predict`` and ``simcore timeline``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    output_file,
    say,
)
from simcore.errors import SpecError

if TYPE_CHECKING:
    from simcore.prediction import InferenceResult, TrainingResult

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a field: key.path=value (repeatable).")
]
EngineOpt = Annotated[str, typer.Option("--engine", help="analytic (closed forms) or des (discrete-event).")]


def _memory_rows(t: Table, r: TrainingResult | InferenceResult) -> None:
    fits = "fits" if r.fits_in_memory else "DOES NOT FIT"
    add_row(t, "memory per GPU", f"{units.fmt(r.memory_per_gpu_bytes, 'bytes')} ({fits}: {r.fits_reason})")
    for k, v in r.memory_breakdown.items():
        if k != "total":
            add_row(t, f"  memory {k}", units.fmt(v, "bytes"))


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


def _table_inference(r: InferenceResult) -> None:
    t = Table(
        title=esc(
            f"{r.name}: {r.gpus} x {r.device}, batch {r.batch}, prompt {r.prompt_len}, context {r.context_len}"
        )
    )
    t.add_column("metric")
    t.add_column("value", justify="right")
    add_row(t, "prefill (TTFT)", units.fmt(r.prefill_time_s, "time"))
    add_row(t, "decode step (TPOT)", units.fmt(r.decode_step_time_s, "time"))
    add_row(t, "end-to-end latency", units.fmt(r.e2e_latency_s, "time"))
    add_row(t, "decode tokens/s", f"{r.tokens_per_s:,.0f}")
    add_row(t, "prefill tokens/s", f"{r.prefill_tokens_per_s:,.0f}")
    _memory_rows(t, r)
    add_row(t, "calibration", r.calibration)
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
) -> None:
    """Predict step time, throughput, MFU, memory and where time goes (one JSON line per scenario with --json)."""
    from simcore.prediction import InferenceResult, TrainingResult, predict
    from simcore.specs.resolve import load_scenario

    if engine not in ("analytic", "des"):
        raise SpecError(f"unknown engine {engine!r}; use analytic or des", field="--engine")
    for path in scenarios or ["default"]:
        sc = load_scenario(path, set_ or [])
        r = predict(sc, engine=engine)
        if as_json:
            emit_json(r.model_dump())
        elif isinstance(r, TrainingResult):
            _table_training(r, sc.cost.currency)
        elif isinstance(r, InferenceResult):
            _table_inference(r)
        else:
            from simcore.cli.serve import _table as serving_table

            serving_table(r)


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
