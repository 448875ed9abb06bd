"""``python -m simcore.validation [REPORT] [options]``: every accuracy report, one entry point.

Each report predicts measurements the models were not fitted on and prints the errors (see
docs/validation.md):

* ``steps``: whole training steps, prefills and decode steps on one H200 (``traces/h200/steps.csv.gz``);
* ``published``: the published Megatron-LM training tables, row by row (``--own``: and our runs after them);
* ``own``: our DDP / tensor / pipeline / FSDP runs on two NVLinked H200s (``traces/h200x2``);
* ``kernels``: the compute profile's held-out kernels (a refit on ``traces/h200/ops.csv.gz``);
* ``comm``: the collective profile's held-out sizes and ops, and the published 8xH100 curves;
* ``traces``: ``simcore validate`` on every committed profiler trace (``traces/validate.csv``);
* ``devices``: the H100 and the H200, each priced by its own profile and by the other's transferred;
* ``moe``: one MoE layer on one H200 (a diagnostic, not part of ``all``);
* ``intervals``: how often the prediction intervals cover measurements they were not fitted on;
* ``served``: served models under load (``tools/bench_serving.py``), measured vs ``simcore serve`` per rate
  (not part of ``all``; ``--predict`` writes the predictions committed before a run).

Without a report, or with ``all``, or with report names only (``steps kernels``), the reports run one
after the other with their defaults, each under a ``=== name ===`` header and followed by its time.
A report with options prints its own output alone (``--json`` gives one JSON document).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, NoReturn

import typer

from simcore.errors import SimcoreError

app = typer.Typer(
    name="python -m simcore.validation",
    help="Accuracy reports: predicted vs measured on data the models were not fitted on.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=False,
)

SUITE = ("steps", "published", "own", "kernels", "comm", "traces", "devices")
"""The reports ``python -m simcore.validation`` (and ``all``) runs, in this order."""

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
CalibrationOpt = Annotated[
    str | None,
    typer.Option("--calibration", metavar="NAME|PATH", help="What-if: predict with this compute profile."),
]


def _fail(message: object) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


@app.command("steps")
def steps(
    csv: Annotated[str | None, typer.Argument(help="A steps CSV (default traces/h200/steps.csv.gz).")] = None,
    as_json: JsonOpt = False,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Write predicted vs measured to this PNG.")
    ] = None,
    calibration: CalibrationOpt = None,
    system: Annotated[
        str | None,
        typer.Option(
            "--system", help="The system whose GPU ran the rows (default: recorded beside the CSV)."
        ),
    ] = None,
    predict_only: Annotated[
        bool,
        typer.Option(
            "--predict", help="A planned run's rows (no measured times yet): print each row's prediction only."
        ),
    ] = False,
) -> None:
    """Whole training steps, prefills and decode steps: predicted vs measured per row."""
    from simcore.validation.steps import format_report, validate

    try:
        res = validate(csv, calibration, system, predict_only)
    except SimcoreError as e:
        _fail(e)
    print(json.dumps(res) if as_json else format_report(res))
    if plot:
        from simcore.report import validation_plots

        validation_plots.steps(res, plot)
        print(f"wrote {plot}")


def _engine(value: str) -> str:
    if value not in ("analytic", "des"):
        raise typer.BadParameter(f"{value!r} is not one of 'analytic', 'des'")
    return value


@app.command("published")
def published(
    plot: Annotated[
        str | None, typer.Option("--plot", metavar="PNG", help="Write predicted vs published to this PNG.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (rows and summary).")] = False,
    engine: Annotated[str, typer.Option("--engine", callback=_engine, help="analytic | des.")] = "analytic",
    all_rows: Annotated[
        bool, typer.Option("--all", help="List every metric row, not one per configuration.")
    ] = False,
    csv: Annotated[
        list[str] | None,
        typer.Option(
            "--csv",
            metavar="PATH",
            help="Another table in the same format; repeated, the tables' rows pooled (numbered in order).",
        ),
    ] = None,
    own: Annotated[
        bool, typer.Option("--own", help="Also validate the 2xH200 measurements in traces/.")
    ] = False,
    calibration: Annotated[
        str | None,
        typer.Option(
            "--calibration", metavar="NAME|PATH", help="What-if: use this compute profile for every device."
        ),
    ] = None,
    assumptions: Annotated[
        bool, typer.Option("--assumptions", help="Print the per-row assumptions.")
    ] = False,
    plan_claims: Annotated[
        bool,
        typer.Option(
            "--plan-claims",
            help="Instead: the planner's best layout against each tuned recipe's own, both predicted "
            "(default: the Megatron-Bridge 25.11 and 26.x tables; --csv: that table).",
        ),
    ] = False,
) -> None:
    """The published Megatron-LM training tables, row by row (each paper's FLOP formula)."""
    from simcore.validation import published as P

    if plan_claims:
        if engine != "analytic":
            _fail("--plan-claims: the planner prices layouts with the analytic engine; drop --engine des")
        given = (("--plot", plot), ("--own", own), ("--all", all_rows), ("--assumptions", assumptions))
        extra = [o for o, on in given if on]
        if extra:
            _fail(f"--plan-claims prints its own table; drop {', '.join(extra)}")
        try:
            claims, per_table = P.plan_claims(list(csv) if csv else None, calibration=calibration)
        except SimcoreError as e:
            _fail(e)
        summary = P.summarize_claims(claims, per_table)
        if as_json:
            claims_doc = {"claims": [asdict(c) for c in claims], "summary": summary}
            print(json.dumps(claims_doc, indent=1, default=_jsonable))
        else:
            print(P.format_claims(claims, summary))
        return
    results = P.predict_rows(P.load_published(csv), engine=engine, calibration=calibration)
    summary = P.summarize(results)
    own_doc = P.own_report(engine=engine, calibration=calibration) if own else None
    if plot:
        from simcore.report import validation_plots

        validation_plots.published(results, plot)
    if as_json:
        doc: dict[str, Any] = {"rows": [asdict(r) for r in results], "summary": summary}
        if own_doc is not None:
            doc["own"] = own_doc
        print(json.dumps(doc, indent=1, default=_jsonable))
        return
    print(P.format_table(results, all_rows=all_rows))
    print()
    print(P.format_summary(summary))
    if assumptions:
        print()
        print(P.format_assumptions(results))
    if own_doc is not None:
        print()
        print(P.format_own(own_doc))
    if plot:
        print(f"\nplot: {plot}")


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


@app.command("own")
def own(
    engine: Annotated[str, typer.Option("--engine", callback=_engine, help="analytic | des.")] = "analytic",
    calibration: CalibrationOpt = None,
) -> None:
    """Our runs on two NVLinked H200s, measured vs predicted (``published --own`` prints them after the
    published tables)."""
    from simcore.validation import published as P

    print(P.format_own(P.own_report(engine=engine, calibration=calibration)))


@app.command("kernels")
def kernels(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help="Op CSVs (.csv or .csv.gz; default: the H200 sweeps, checked against the published kernels)."
        ),
    ] = None,
    output: Annotated[str | None, typer.Option("-o", "--output", help="Write the profile YAML here.")] = None,
    device: Annotated[str, typer.Option("--device", help="Device the sweeps were measured on.")] = "h200",
    published_csv: Annotated[
        str | None, typer.Option("--published", help="published_kernels.csv to check against (never fitted).")
    ] = None,
    reference_specs: Annotated[
        str | None,
        typer.Option(
            "--reference-specs", help="Reference hardware_specs.yaml for devices not in the registry."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """A compute profile fitted on op sweeps, and its error on the rows the fit held out (by shape hash)."""
    from simcore.calibration import fit_compute as FC
    from simcore.specs.profile import save_profile
    from simcore.specs.registry import default_registry
    from simcore.validation.inputs import report_inputs
    from simcore.validation.published import DATA_DIR
    from simcore.validation.steps import traces_dir

    if not files:
        files = [str(traces_dir() / p) for p in report_inputs()["kernels"]]
        published_csv = published_csv or str(DATA_DIR / "published_kernels.csv")
    try:
        dev = default_registry().device(device)
        prof, report = FC.fit(files, dev)
        if output:
            save_profile(prof, output)
        pub = FC.check_published(prof, published_csv, reference_specs) if published_csv else []
    except SimcoreError as e:
        _fail(e)
    if as_json:
        print(json.dumps({"report": report, "published": pub}, default=float))
        return
    print(FC.format_report(report))
    print("launch overhead per kernel (s):", {k: f"{v:.3g}" for k, v in report["launch_s"].items()})
    if report.get("clocks_hz"):
        print(
            "SM clock during the sweeps:", {k: f"{v / 1e9:.3g} GHz" for k, v in report["clocks_hz"].items()}
        )
    if pub:
        print()
        print(FC.format_published(pub))
    if output:
        print(f"wrote {output}")


@app.command("comm")
def comm(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help="Collective measurements to fit on (default: the built-in profile is checked, nothing fitted)."
        ),
    ] = None,
    system: Annotated[str, typer.Option("--system", help="System the measurements ran on.")] = "hgx-h200",
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Fit (on traces/h200x2/nccl.csv.gz by default) and write hardware_specs/calibration/comm-<system>.yaml.",
        ),
    ] = False,
) -> None:
    """The collective profile's error on held-out sizes and ops and on the published 8xH100 curves (with
    measurement files or --write: a fit first)."""
    from simcore.calibration import fit_comm as FM
    from simcore.specs.registry import builtin_dir

    try:
        if not files and not write:
            FM.report_comm(system=system)
            return
        files = files or [FM.DEFAULT_TRACE]
        res, base = FM.fit_files(files, system)
        print(FM.format_fit(res))
        if write:
            path = builtin_dir() / "calibration" / f"comm-{system}.yaml"
            path.write_text(FM.profile_yaml(res, base, ",".join(files), FM.overlap_beside(files[0])))
            print(f"wrote {path}")
        FM.report_comm(files[0], system)
    except SimcoreError as e:
        _fail(e)


@app.command("traces")
def traces(
    index: Annotated[
        str | None, typer.Option("--index", help="Trace index CSV (default: traces/validate.csv).")
    ] = None,
    as_json: JsonOpt = False,
    calibration: CalibrationOpt = None,
    ops: Annotated[
        bool, typer.Option("--ops", help="Also list each memory-bound op over all the traces.")
    ] = False,
    single_step: Annotated[
        bool,
        typer.Option(
            "--single-step",
            help="Cut each single-rank trace to its last step without step annotations (what users send).",
        ),
    ] = False,
    probe_window: Annotated[
        int | None,
        typer.Option(
            "--probe-window",
            metavar="N",
            help="What-if: an inference trace's CPU pace over windows of N probe calls (0: one median; default 16).",
        ),
    ] = None,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Replay each trace on its own hardware with its measured durations instead (the graph's own error).",
        ),
    ] = False,
) -> None:
    """simcore validate on every committed profiler trace: step and class errors, and their summary."""
    from simcore.validation import trace_report as T

    if replay:
        try:
            rows = T.replay_on_source(T.read_index(index))
        except SimcoreError as e:
            _fail(e)
        summ = T.replay_summary(rows)
        print(
            json.dumps({"rows": rows, "summary": summ}, indent=1) if as_json else T.format_replay(rows, summ)
        )
        return
    if probe_window is not None and probe_window < 0:
        _fail("--probe-window: give 0 (one median) or a window of calls")
    try:
        rows = T.run(T.read_index(index), calibration, single_step, probe_window)
    except SimcoreError as e:
        _fail(e)
    summ = T.summary(rows)
    print(
        json.dumps({"rows": rows, "summary": summ}, indent=1) if as_json else T.format_table(rows, summ, ops)
    )


@app.command("devices")
def devices(
    as_json: JsonOpt = False,
    parts: Annotated[
        str, typer.Option("--parts", help="Comma list of kernels, steps, traces, replay, ops.")
    ] = "kernels,steps,traces,replay,ops",
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot", metavar="PNG", help="Kernels and traces, own profile against transferred, as a figure."
        ),
    ] = None,
) -> None:
    """The H100 and the H200, each priced by its own profile and by the other's transferred."""
    from simcore.validation import cross_device as X

    chosen = tuple(p for p in parts.split(",") if p)
    bad = [p for p in chosen if p not in X.PARTS]
    if bad:
        _fail(f"--parts: unknown part {bad[0]!r} (known: {', '.join(X.PARTS)})")
    try:
        res = X.report(chosen)
    except SimcoreError as e:
        _fail(e)
    text = json.dumps(res, indent=1) if as_json else X.format_report(res)
    if text:
        print(text)
    if plot:
        if not {"kernels", "traces"} <= set(chosen):
            _fail("--plot needs the kernels and traces parts")
        from simcore.report import validation_plots

        validation_plots.cross_device(res, plot)
        print(f"wrote {plot}")


@app.command("moe")
def moe(
    csv: Annotated[
        str | None, typer.Argument(help="A tools/bench_moe.py CSV (default traces/h200/moe.csv.gz).")
    ] = None,
) -> None:
    """One MoE layer on one H200: measured vs simcore's MoE lowering (a diagnostic)."""
    from simcore.validation.moe import compare, format_table

    try:
        rows = compare(csv)
    except SimcoreError as e:
        _fail(e)
    print(format_table(rows))


@app.command("hybrid")
def hybrid(
    csv: Annotated[
        str | None,
        typer.Argument(
            help="A published training table in the Megatron-Bridge format; its rows of hybrid presets are run "
            "(default simcore/validation/data/published_training_mbridge.csv)."
        ),
    ] = None,
) -> None:
    """Nemotron 3 Nano (hybrid Mamba-Transformer MoE) pre-training: published tokens/s per GPU vs predicted."""
    from simcore.validation.hybrid import report

    try:
        print(report(csv))
    except SimcoreError as e:
        _fail(e)


@app.command("ssd")
def ssd(
    csv: Annotated[
        str | None,
        typer.Argument(
            help="A tools/bench_ssd.py CSV, measured or planned (default: the pre-registered plan, "
            "simcore/validation/data/ssd_predicted_h100.csv)."
        ),
    ] = None,
    system: Annotated[str, typer.Option(help="The system whose one GPU prices the rows.")] = "hgx-h100",
    out: Annotated[str | None, typer.Option("--out", metavar="CSV", help="Also write the prices here.")] = None,
) -> None:
    """Mamba-2's kernels (SSD scan, conv1d, gated norm, decode state update): simcore's price vs measured."""
    from simcore.validation.ssd import PREDICTED_H100_CSV, report

    try:
        print(report(csv or PREDICTED_H100_CSV, system, out))
    except SimcoreError as e:
        _fail(e)


@app.command("gemms")
def gemms(
    devices: Annotated[
        list[str] | None, typer.Argument(help="Devices whose decode grid to price (default: h200 h100).")
    ] = None,
    calibration: Annotated[
        str | None,
        typer.Option(help="Price the decode grid with this compute profile (name or YAML) instead of the device's."),
    ] = None,
) -> None:
    """Measured GEMM tables: the served models' decode grid (traces/<gpu>/kernel_rates_decode) and the engines'
    linear-layer tables (traces/<gpu>/<engine>_gemm, their check half) against simcore's price."""
    from simcore.validation import gemms as G

    try:
        print(G.grid_report(devices or ["h200", "h100"], calibration))
        print()
        print(G.tables_report(G.engine_tables()))
    except SimcoreError as e:
        _fail(e)


@app.command("intervals")
def intervals(
    as_json: JsonOpt = False,
    path: Annotated[
        str | None,
        typer.Option(
            "--intervals", metavar="YAML", help="Check these intervals (default: the shipped ones)."
        ),
    ] = None,
    no_traces: Annotated[
        bool, typer.Option("--no-traces", help="Leave the (slow) profiler-trace rows out of the check.")
    ] = False,
) -> None:
    """Prediction intervals: the check half's coverage (rows not used to fit the shipped intervals)."""
    from simcore.specs.intervals import load_intervals
    from simcore.validation import intervals as IV

    try:
        iv = load_intervals(path)
        if iv is None:
            _fail("no intervals file: write one with `simcore calibrate --intervals PATH`")
        rows = IV.collect(progress=_progress, traces=not no_traces)
    except SimcoreError as e:
        _fail(e)
    cov = IV.coverage(iv, rows)
    if as_json:
        print(json.dumps({"intervals": iv.model_dump(), "coverage": cov}, indent=1))
        return
    print(IV.format_report(iv, cov))


@app.command("serving")
def serving(
    csv: Annotated[
        str | None,
        typer.Option("--csv", metavar="PATH", help="Another table in published_inference.csv's format."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Only rows whose model name contains this (e.g. '8B').")
    ] = None,
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            metavar="attention-dp|tp|tp-ep",
            help="What-if for the MoE rows: attention DP + EP over the GPUs (the validation's), TP attention with "
            "TP-sharded experts, or TP attention with EP = tp.",
        ),
    ] = "attention-dp",
    imbalance: Annotated[
        float | None,
        typer.Option("--imbalance", help="What-if: model.moe.imbalance on every MoE layer (default: the model's, 1)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """simcore serve against published engine throughput (TensorRT-LLM's performance overview and others):
    every row's error, median and 90th percentile per engine x GPU x precision; each row's engine settings."""
    from simcore.validation import serving as S

    try:
        doc = S.report(csv, model, layout, imbalance)
    except SimcoreError as e:
        _fail(e)
    print(json.dumps(doc, indent=1) if as_json else S.format_report(doc))


@app.command("served")
def served(
    predict: Annotated[
        bool,
        typer.Option(
            "--predict", help="Write scenarios/served/predicted.json (simcore's predictions, before a run)."
        ),
    ] = False,
    data: Annotated[
        str | None,
        typer.Option("--data", metavar="DIR", help="A measurement folder (default: every traces/*/served/)."),
    ] = None,
    scenarios: Annotated[
        str | None, typer.Option("--scenarios", metavar="DIR", help="The served scenarios' folder.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Served models under load (tools/bench_serving.py): measured vs predicted TTFT, TPOT and throughput
    per rate, and the saturation rate's error."""
    from pathlib import Path

    from simcore.validation import served as V

    folder = Path(scenarios) if scenarios else None
    try:
        if predict:
            print(f"wrote {V.write_predictions(folder)}")
            return
        res = V.compare(folder, Path(data) if data else None)
    except SimcoreError as e:
        _fail(e)
    print(json.dumps(V.jsonable(res)) if as_json else V.format_report(res), end="" if not as_json else "\n")


@app.command("all")
def run_all() -> None:
    """Every report of the suite with its defaults (what python -m simcore.validation runs)."""
    raise typer.Exit(run_suite(SUITE))


REPORTS: dict[str, Callable[[], None]] = {
    "steps": steps,
    "published": published,
    "own": own,
    "kernels": kernels,
    "comm": comm,
    "traces": traces,
    "devices": devices,
    "moe": moe,
    "hybrid": hybrid,
    "ssd": ssd,
    "intervals": intervals,
    "serving": serving,
    "served": served,
    "gemms": gemms,
}


def _progress(text: str) -> None:
    """A short progress line on stderr (stdout carries the reports alone)."""
    print(text, file=sys.stderr, flush=True)


class _Heartbeat:
    """While a report runs and stderr is a terminal, a line every ``every`` seconds saying it still runs."""

    def __init__(self, label: str, every: float = 30.0) -> None:
        self.label, self.every = label, every
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> _Heartbeat:
        if sys.stderr.isatty():
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        t0 = time.perf_counter()
        while not self.stop.wait(self.every):
            _progress(f"{self.label} still running ({time.perf_counter() - t0:.0f} s)")

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()


def run_suite(names: tuple[str, ...] | list[str]) -> int:
    """Run reports with their defaults, each under a ``=== name ===`` header and followed by its time in
    seconds; the first non-zero exit status. Progress goes to stderr: a line as each report starts and
    ends (and, on a terminal, every 30 s while one runs)."""
    code = 0
    start = time.perf_counter()
    for i, n in enumerate(names, 1):
        label = f"[{i}/{len(names)}] {n}"
        _progress(f"{label}: running")
        print(f"\n=== {n} ===", flush=True)
        t0 = time.perf_counter()
        rc = 0
        with _Heartbeat(label):
            try:
                REPORTS[n]()
            except typer.Exit as e:
                rc = e.exit_code
            except SimcoreError as e:
                print(f"error: {e}", file=sys.stderr)
                rc = 2
        sys.stdout.flush()
        dt = time.perf_counter() - t0
        print(f"({n}: {dt:.1f} s)", flush=True)
        _progress(f"{label}: {'done' if rc == 0 else f'failed (exit {rc})'} in {dt:.1f} s")
        code = code or rc
    if len(names) > 1:
        _progress(f"{len(names)} reports in {time.perf_counter() - start:.0f} s")
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simcore.validation``; the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args == ["all"]:
        return run_suite(SUITE)
    if all(a in REPORTS for a in args):
        return run_suite(args)
    try:
        app(args=args, prog_name="python -m simcore.validation", standalone_mode=True)
    except SystemExit as e:
        if e.code is None:
            return 0
        return e.code if isinstance(e.code, int) else 2
    except SimcoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
