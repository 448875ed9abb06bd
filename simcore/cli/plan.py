"""``simcore plan`` (search the parallel layout) and ``simcore sweep`` (what-if grids)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from simcore import units
from simcore.cli.common import (
    JsonOpt,
    add_row,
    app,
    console,
    emit_json,
    err_console,
    esc,
    fail,
    image_file,
    note,
    output_file,
    say,
)
from simcore.errors import SpecError

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a field of the scenario: key.path=value (repeatable)."),
]


def _ints(text: str, name: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SpecError(f"{name} {text!r}: expected integers separated by commas", field=name) from None
    if not vals or any(v < 1 for v in vals):
        raise SpecError(f"{name} {text!r}: expected positive integers", field=name)
    return vals


def _strs(text: str | None) -> list[str] | None:
    return None if text is None else [v.strip() for v in text.split(",") if v.strip()]


def _range(lo: float, hi: float) -> str:
    """``lo-hi`` with one unit (``5.93-7.05 s``): the prediction interval in a narrow column."""
    unit = units.fmt(hi, "time").split()[-1]
    scale = units.parse(f"1 {unit}", "time")
    return f"{lo / scale:.3g}-{hi / scale:.3g} {unit}"


def _days(s: float | None) -> str:
    return "-" if s is None else f"{s / 86400:.1f} d"


@app.command("plan")
def plan_cmd(
    scenario: Annotated[str, typer.Argument(help="Training scenario file or built-in name.")],
    gpus: Annotated[
        str | None,
        typer.Option("--gpus", help="GPUs to plan for; several as 512,1024,2048 (default: the scenario's)."),
    ] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="time | cost | energy (per token) | goodput (wall-clock time per token with failures: needs "
            "reliability and runtime.checkpoint).",
        ),
    ] = "time",
    top: Annotated[int, typer.Option("--top", help="Layouts to show.")] = 5,
    des: Annotated[
        int, typer.Option("--des", help="Re-check this many of the best with the discrete-event engine.")
    ] = 3,
    tp: Annotated[
        str | None, typer.Option("--tp", help="Restrict tensor parallel degrees, e.g. 4,8.")
    ] = None,
    pp: Annotated[str | None, typer.Option("--pp", help="Restrict pipeline degrees.")] = None,
    cp: Annotated[str | None, typer.Option("--cp", help="Restrict context-parallel degrees.")] = None,
    micro_batch: Annotated[
        str | None, typer.Option("--micro-batch", help="Restrict micro-batch sizes.")
    ] = None,
    schedules: Annotated[
        str | None,
        typer.Option(
            "--schedules",
            help="Pipeline schedules to try (default all: 1f1b,interleaved,zero_bubble,dualpipe,gpipe).",
        ),
    ] = None,
    recompute: Annotated[
        str | None, typer.Option("--recompute", help="Recompute modes to try (none,selective,full).")
    ] = None,
    max_cp: Annotated[int, typer.Option("--max-cp", help="Largest context-parallel degree searched.")] = 8,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            help="Budget for the run (in the scenario's cost.currency with a price, else GPU-hours).",
        ),
    ] = None,
    max_days: Annotated[
        float | None, typer.Option("--max-days", help="Deadline for the run in days.")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw the time-vs-cost Pareto front to this file (PNG, SVG, PDF, ...)."),
    ] = None,
    set_: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search every valid parallel layout (tp, pp, dp, cp, ep, vp, micro-batch, recompute, ZeRO,
    schedule, overlap) that divides the cluster and fits in memory; rank by the objective."""
    from simcore.planning.plan import plan
    from simcore.planning.space import SearchOptions
    from simcore.specs.resolve import load_scenario

    image_file(plot, "--plot")
    sc = load_scenario(scenario, set_ or [])
    kw: dict[str, Any] = {"max_cp": max_cp}
    for name, val in (("tp", tp), ("pp", pp), ("cp", cp), ("micro_batch", micro_batch)):
        if val is not None:
            kw[name] = _ints(val, f"--{name.replace('_', '-')}")
    if schedules is not None:
        kw["schedule"] = _strs(schedules)
    if recompute is not None:
        kw["recompute"] = _strs(recompute)
    sizes = _ints(gpus, "--gpus") if gpus is not None else None
    # the options' own bounds, said in the flags' terms before the planner checks its arguments
    for flag, count, low in (("--top", top, 1), ("--des", des, 0), ("--max-cp", max_cp, 1)):
        if count < low:
            fail(f"{flag}: must be at least {low} (got {count})")
    for flag, fval in (("--max-cost", max_cost), ("--max-days", max_days)):
        if fval is not None and not (math.isfinite(fval) and fval > 0):
            fail(f"{flag}: must be a positive number (got {fval:g})")
    res = plan(
        sc,
        sizes,
        objective,
        top,
        SearchOptions(**kw),
        des_top=des,
        pareto=plot is not None,
        max_cost=max_cost,
        max_time_s=None if max_days is None else max_days * 86400.0,
    )
    if plot is not None:
        from simcore.report.plan_plots import plot_pareto

        priced = sc.cost.price_per_gpu_hour is not None or sc.cost.price_per_kwh is not None
        plot_pareto(res, str(plot), cost_unit=sc.cost.currency if priced else None)
    if as_json:
        emit_json(res.to_json())
        return
    console.print(
        f"[bold]{esc(res.scenario)}[/]: "
        + esc(
            f"best layouts by {objective} on {', '.join(map(str, res.gpus))} GPUs ({res.evaluated_configs:,} "
            f"layouts priced, {res.valid_configs:,} fit in memory, {res.elapsed_s:.1f} s)"
        )
    )
    t = Table(pad_edge=False)  # (ten columns in 80 characters)
    goodput = objective == "goodput"
    # the DES column only where a layout was re-checked; the interval as "low-high" in the step's unit
    des_col = any(e.get("des_step_time_s") is not None for e in [*res.top, res.baseline or {}])
    cols = ["#", "GPUs", "step", "80% range", *(["DES step"] if des_col else []), "MFU", "memory"]
    cols += ["goodput", "train (wall)"] if goodput else ["train"]
    for c in (*cols, f"cost {sc.cost.currency}", "MWh"):
        t.add_column(esc(c), justify="right", no_wrap=True)
    rows = list(res.top)
    if res.baseline is not None:
        rows.append({**res.baseline, "rank": "base"})
    for e in rows:
        lo, hi = e.get("step_time_s_low"), e.get("step_time_s_high")
        train = [_days(e["time_to_train_s"])]
        if goodput:
            g = e.get("goodput")
            train = ["-" if g is None else f"{g:.1%}", _days(e.get("wall_time_to_train_s"))]
        add_row(
            t,
            f"{e['rank']} tie" if e.get("tie") else str(e["rank"]),
            str(e["gpus"]),
            units.fmt(e["step_time_s"], "time"),
            "-" if lo is None or hi is None else _range(lo, hi),
            *(
                ["-" if e["des_step_time_s"] is None else units.fmt(e["des_step_time_s"], "time")]
                if des_col
                else []
            ),
            f"{e['mfu']:.1%}",
            units.fmt(e["memory_per_gpu_bytes"], "bytes"),
            *train,
            "-" if e["cost"] is None else f"{e['cost']:,.0f}",
            "-" if e["energy_run_kwh"] is None else f"{e['energy_run_kwh'] / 1000:,.0f}",
        )
    console.print(t)
    for e in rows:
        console.print(esc(f"  {e['rank']}: {e['summary']}"), highlight=False)
    if res.baseline is not None and res.top:
        b, w = res.baseline, res.top[0]
        if b["gpus"] == w["gpus"]:
            console.print(
                f"best layout vs the scenario's own on {b['gpus']} GPUs: "
                f"{b['step_time_s'] / w['step_time_s']:.2f}x faster step"
            )
    ties = [str(e["rank"]) for e in res.top if e.get("tie")]
    if ties:
        say(
            f"#{', #'.join(ties)} within #1's prediction interval ({res.top[0].get('interval') or 'interval'}): "
            "a tie, the models cannot tell them apart"
        )
    if plot is not None:
        say(f"wrote {plot} ({len(res.pareto)} Pareto-optimal layouts)")
    for n in res.notes:
        note(n)


@app.command("sweep")
def sweep_cmd(
    scenario: Annotated[str, typer.Argument(help="Base scenario file or built-in name.")],
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            help="key.path=v1,v2,... (repeatable: cartesian product). Also scale.fabric_bandwidth=0.5,1,2 "
            "and scale.nvlink_bandwidth=...; ranges as 256:4096:*2.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Results file (.csv, appended and resumable; or .parquet)."),
    ] = None,
    executor: Annotated[str, typer.Option("--executor", help="local (processes) | dask | serial.")] = "local",
    workers: Annotated[int, typer.Option("--workers", help="Local worker processes.")] = 2,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler address tcp://host:port (with --executor dask)."),
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="predict (the scenario's layout) | plan (best layout per point).")
    ] = "predict",
    engine: Annotated[str, typer.Option("--engine", help="analytic | des (predict mode).")] = "analytic",
    objective: Annotated[
        str, typer.Option("--objective", help="Plan mode: time | cost | energy | goodput.")
    ] = "time",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Draw a result against a swept key to this PNG.")
    ] = None,
    x: Annotated[
        str | None, typer.Option("--x", help="Swept key on the x axis (default: the first grid key).")
    ] = None,
    y: Annotated[str, typer.Option("--y", help="Result column to plot.")] = "step_time_s",
    hue: Annotated[
        str | None, typer.Option("--hue", help="Swept key giving one line per value (or heatmap rows).")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help="line | heatmap.")] = "line",
    set_: SetOpt = None,
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Predict a scenario over grids of what-ifs (hardware, fabric, cluster size, sequence, batch)."""
    from simcore.planning.sweep import HIGHER_IS_BETTER, SweepInterrupted, parse_grid, run_sweep
    from simcore.report.plots import sweep as plot_sweep

    output_file(output, "-o", (".csv", ".parquet"), make_parents=True)
    image_file(plot, "--plot")
    if not grid:
        raise SpecError("give at least one --grid key.path=v1,v2,...", field="--grid")
    if executor != "dask" and scheduler is not None:
        raise SpecError("--scheduler needs --executor dask", field="--scheduler")
    axes = [parse_grid(g) for g in grid]
    keys = [a.key for a in axes]
    if plot is not None:
        x = x or keys[0]
        for k, what in ((x, "--x"), (hue, "--hue")):
            if k is not None and k not in keys:
                raise SpecError(f"{what} {k!r} is not a swept key ({', '.join(keys)})", field=what)
    try:
        res = run_sweep(
            scenario,
            grid,
            output,
            executor=executor,
            workers=workers,
            scheduler=scheduler,
            overrides=set_ or [],
            engine=engine,
            mode=mode,
            plan_args={"objective": objective, "des_top": 0} if mode == "plan" else None,
            progress=not (quiet or as_json),
        )
    except SweepInterrupted as e:
        err_console.print(e.message(), markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(130) from None
    if plot is not None:
        assert x is not None
        plot_sweep(res.rows, x, y, plot, hue, kind)
    if as_json:
        for r in res.rows:
            emit_json(r)
        return
    counts = f"{res.ok} ok, {res.does_not_fit} do not fit, {res.errors} failed"
    t = Table(
        title=f"sweep: {len(res.rows)} points ({res.computed} computed, {res.skipped} from "
        f"{res.output or 'memory'}): {counts}"
    )
    show = [*keys, "status", y]
    show += [c for c in ("mfu", "memory_per_gpu_bytes") if c != y and c in res.columns]
    show += ["summary"] if mode == "plan" else []
    for c in show:
        t.add_column(c, no_wrap=c == "status")
    for r in res.rows:
        status = str(r.get("status"))
        if status in ("ok", "does_not_fit"):
            cells = [_cell(r.get(c), c) for c in show]
            cells[len(keys)] = Text(status, style="bold red" if status == "does_not_fit" else "")
            t.add_row(*cells)
        else:
            err = [Text(str(r.get("error", ""))[:80])] + [""] * (len(show) - len(keys) - 2)
            t.add_row(*[_cell(r.get(c), c) for c in keys], Text("error", style="yellow"), *err)
    console.print(t)
    if res.does_not_fit:
        first = next(r for r in res.rows if r.get("status") == "does_not_fit")
        console.print(
            f"note: {res.does_not_fit} point(s) do not fit in device memory (status does_not_fit; "
            f"see the fits_reason column), e.g. {first['key']}: {first.get('fits_reason')}",
            markup=False,
            highlight=False,
        )
    if res.errors:
        console.print(
            f"note: {res.errors} point(s) failed; see the error column", markup=False, highlight=False
        )
    if y in res.columns:
        best = res.best(y)
        if best is not None:
            better = "highest" if y in HIGHER_IS_BETTER else "lowest"
            console.print(
                f"{better} {y} among the points that fit: {best['key']} ({_cell(best[y], y)})",
                markup=False,
                highlight=False,
            )
        elif res.rows:
            console.print(f"no point that fits in memory has a {y}", markup=False, highlight=False)
    if output is not None:
        console.print(f"results in {res.output}", markup=False, highlight=False)
    if plot is not None:
        console.print(f"wrote {plot}", markup=False, highlight=False)


def _cell(v: Any, column: str = "") -> Text:
    if isinstance(v, float) and column == "memory_per_gpu_bytes":
        return Text(units.fmt(v, "bytes"))
    if isinstance(v, float):
        return Text(f"{v:.4g}")
    return Text("" if v is None else str(v))
