"""``simcore serve``: request-level inference serving simulation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, add_row, app, console, emit_json, esc, image_file, note, say
from simcore.errors import SpecError

if TYPE_CHECKING:
    from simcore.serving.curve import CurvePoint
    from simcore.serving.sim import ServingResult

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a field: key.path=value (repeatable).")
]


def _table(r: ServingResult, wall_s: float | None = None) -> None:
    inst = ", ".join(f"{n} {role}" for role, n in r.instances.items())
    lay = " ".join(f"{k} {v}" for k, v in r.layout.items())
    t = Table(title=esc(f"{r.name}: {r.gpus} x {r.device} ({inst} instance(s), {lay})"))
    t.add_column("metric")
    t.add_column("value", justify="right")
    offered = f" of {r.offered_rate:g} offered" if r.offered_rate is not None else ""
    add_row(t, "requests", f"{r.requests} over {r.duration_s:,.1f} s")
    add_row(t, "throughput", f"{r.requests_per_s:,.2f} requests/s{offered}")
    if r.steady_requests_per_s is not None:
        add_row(t, "steady throughput (2nd half)", f"{r.steady_requests_per_s:,.2f} requests/s")
    add_row(
        t, "output tokens/s", f"{r.output_tokens_per_s:,.0f} ({r.output_tokens_per_s_per_gpu:,.0f} per GPU)"
    )
    add_row(t, "input tokens/s", f"{r.input_tokens_per_s:,.0f}")
    for label, s in (
        ("TTFT", r.ttft_s),
        ("TPOT", r.tpot_s),
        ("end-to-end", r.e2e_s),
        ("queue wait", r.queue_wait_s),
    ):
        add_row(
            t,
            f"{label} p50 / p90 / p99 (mean)",
            " / ".join(units.fmt(v, "time") for v in (s.p50, s.p90, s.p99))
            + f" ({units.fmt(s.mean, 'time')})",
        )
    add_row(t, "goodput (SLOs met)", f"{r.goodput:,.2f} requests/s ({r.slo_attainment:.1%} of requests)")
    add_row(t, "in system mean / max", f"{r.mean_in_system:,.1f} / {r.max_in_system}")
    add_row(t, "queue mean / max", f"{r.mean_queue:,.1f} / {r.max_queue}")
    kv = ", ".join(f"{role} {n:,} tokens" for role, n in r.kv_tokens_per_instance.items())
    add_row(t, "KV cache per instance", kv)
    add_row(t, "KV utilisation mean / peak", f"{r.kv_utilization:.1%} / {r.kv_peak_utilization:.1%}")
    add_row(t, "busy fraction", f"{r.busy_fraction:.1%}")
    add_row(t, "preemptions", str(r.preemptions))
    wall = f" (simulated in {wall_s:.2f} s)" if wall_s is not None else ""
    add_row(t, "steps / events", f"{r.steps:,} / {r.events:,}{wall}")
    console.print(t)
    for n in r.notes:
        note(n)


def _levels(text: str) -> list[int]:
    """``"1,2,4,8"`` -> ``[1, 2, 4, 8]``; anything else is a one-line error naming the flag."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(
            f"expected comma-separated integers, got {text!r}", field="--sweep-concurrency"
        ) from None
    if not levels or min(levels) < 1:
        raise SpecError(f"expected positive integers, got {text!r}", field="--sweep-concurrency")
    return levels


def _curve_table(name: str, points: list[CurvePoint]) -> None:
    t = Table(title=esc(f"{name}: throughput vs interactivity (closed loop)"))
    for col in ("concurrency", "tokens/s per GPU", "tokens/s per user", "TTFT p50", "TTFT p99", "requests/s"):
        t.add_column(col, justify="right")
    for p in points:
        t.add_row(
            str(p.concurrency),
            f"{p.tokens_per_s_per_gpu:,.0f}",
            f"{p.tokens_per_s_per_user:,.1f}",
            units.fmt(p.ttft_p50_s, "time"),
            units.fmt(p.ttft_p99_s, "time"),
            f"{p.requests_per_s:,.2f}",
        )
    console.print(t)


@app.command("serve")
def serve_cmd(
    scenario: Annotated[str, typer.Argument(help="A kind: serving scenario file or built-in name.")],
    set_: SetOpt = None,
    as_json: JsonOpt = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write latency CDFs and throughput over time (PNG, SVG, PDF, ...); with "
            "--sweep-concurrency, the throughput-interactivity curve.",
        ),
    ] = None,
    sweep_concurrency: Annotated[
        str | None,
        typer.Option(
            "--sweep-concurrency",
            help="Comma-separated closed-loop concurrencies (e.g. 1,4,16,64,256): tokens/s per GPU "
            "against tokens/s per user at each.",
        ),
    ] = None,
) -> None:
    """Simulate request-level serving: latency percentiles (TTFT, TPOT, end-to-end), throughput,
    goodput, KV-cache use and queues; or, with --sweep-concurrency, the throughput-interactivity
    curve."""
    image_file(plot, "--plot")
    from simcore.serving.sim import simulate
    from simcore.serving.spec import load_serving

    levels = _levels(sweep_concurrency) if sweep_concurrency is not None else None
    sc, spec = load_serving(scenario, set_ or [])
    if levels is not None:
        from simcore.serving.curve import concurrency_curve

        points = concurrency_curve(sc, spec, levels)
        if as_json:
            emit_json([p.model_dump() for p in points])
        else:
            _curve_table(sc.name, points)
        if plot is not None:
            from simcore.report.serving_plots import curve

            curve(points, sc.name, plot)
            if not as_json:
                say(f"plot written to {plot}")
        return
    run = simulate(sc, spec)
    if as_json:
        emit_json(run.result.model_dump())
    else:
        _table(run.result, run.wall_s)
    if plot is not None:
        from simcore.report.plots import serving

        serving(run.result, run.log, plot)
        if not as_json:
            say(f"plot written to {plot}")
