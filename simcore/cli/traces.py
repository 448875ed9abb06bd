"""``simcore calibrate``, ``simcore validate`` and ``simcore replay``: measured traces in."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import (
    TRACE_FORMATS,
    YAML_FORMATS,
    JsonOpt,
    add_row,
    app,
    console,
    emit_json,
    esc,
    fail,
    image_file,
    note,
    output_file,
    say,
    writing,
)

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a scenario field: key.path=value (repeatable).")
]


def _ms(x: float | None) -> str:
    return "-" if x is None else units.fmt(x, "time")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _write_intervals(path: Path) -> None:
    """``simcore calibrate --intervals``: fit, write, and print the check half's coverage."""
    from simcore.validation import intervals as IV

    output_file(path, "--intervals", YAML_FORMATS, make_parents=True)
    rows = IV.collect(progress=lambda text: print(f"calibrate: {text}", file=sys.stderr, flush=True))
    fitted = IV.fit(rows)
    with writing(path, "--intervals"):
        path.write_text(IV.to_yaml(fitted))
    print(IV.format_report(fitted, IV.coverage(fitted, rows)))
    print(f"wrote {path}")


def _write_step_profiles(manifests: list[Path], output: Path | None) -> None:
    """``simcore calibrate`` of ``tools/bench_serving.py --steps`` collections: the engines' step profiles,
    written to ``-o`` (a folder) or the checkout's ``hardware_specs/calibration/``."""
    from simcore.calibration import fit_served
    from simcore.specs.registry import builtin_dir

    folder = output if output is not None else builtin_dir() / "calibration"
    if folder.suffix in (".yaml", ".yml"):
        fail(f"-o: {folder}: step profiles go to a folder (one <name>.yaml per engine)")
    for m in manifests:
        profiles = fit_served.fit(m)
        with writing(folder, "-o"):
            paths = fit_served.write(profiles, folder)
        for prof, path in zip(profiles, paths, strict=True):
            print(fit_served.summary(prof))
            print(f"wrote {path}")


def _write_device_fits(folders: list[Path], device: str | None, output: Path | None, what: str, prefix: str) -> None:
    """``simcore calibrate`` of collections fitted one device at a time (``what``: ``SSD``, ``tools/bench_ssd.py``
    folders, the SSD kernels' rates; ``engine GEMM``, ``--import-aiconfigurator`` folders, an engine's linear layers
    fitted to the GEMM model), each written to ``-o`` (a YAML file) or the checkout's
    ``hardware_specs/calibration/<prefix><device>.yaml``."""
    from simcore.calibration import fit_engine_gemm, fit_ssd
    from simcore.specs.registry import builtin_dir

    mod: Any = fit_ssd if what == "SSD" else fit_engine_gemm
    for f in folders:
        fitted = mod.fit(f, device)
        path = output if output is not None else builtin_dir() / "calibration" / f"{prefix}{fitted.device}.yaml"
        output_file(path, "-o", YAML_FORMATS, make_parents=True)
        with writing(path, "-o"):
            path.write_text(mod.to_yaml(fitted))
        print(mod.summary(fitted))
        print(f"wrote {path}")


def _import_aiconfigurator(spec: str, output: Path | None) -> None:
    """``--import-aiconfigurator REPO:SYSTEM:VERSION -o FOLDER``: an engine GEMM collection from AIConfigurator."""
    from simcore.calibration import fit_engine_gemm

    repo, _, rest = spec.rpartition(":")
    repo, _, system = repo.rpartition(":")
    if not repo or not system or not rest:
        fail(f"--import-aiconfigurator {spec!r}: give REPO:SYSTEM:VERSION (e.g. ../aiconfigurator:b200_sxm:1.2.0rc5)")
    if output is None or output.suffix:
        fail("--import-aiconfigurator: -o names the collection folder to write (e.g. traces/b200/trtllm_gemm)")
    n = fit_engine_gemm.import_aiconfigurator(repo, system, rest, output)
    print(f"wrote {output}/{fit_engine_gemm.TABLE} ({n} rows) and {fit_engine_gemm.MANIFEST}; fit it: simcore calibrate {output}")


def _host_copies(inputs: list[str], table: Path | None, profile: Path | None, system: str | None) -> None:
    """``--extract-copies`` and ``--host-copy`` (docs/hardware.md, host<->GPU copies): the copy table from traces,
    and/or the profile's ``host_copy`` section fitted on copy tables (on the table just written when both)."""
    from simcore.calibration.calibrate import extract_copy_table, write_host_copy

    if table is not None:
        output_file(table, "--extract-copies", (".csv", ".csv.gz"), make_parents=True)
        with writing(table, "--extract-copies"):
            n_traces, n_rows = extract_copy_table(inputs, table, Path.cwd())
        print(f"wrote {table}: {n_rows} host<->GPU copies of {n_traces} traces")
        inputs = [str(table)]
    if profile is not None:
        with writing(profile, "--host-copy"):
            hc, note = write_host_copy(inputs, profile, system)
        for kind, rep in hc.held_out.items():
            print(f"{kind}: held-out median |err| {rep['median_abs_err']:.1%} on {int(rep['n'])} copies")
        print(f"wrote host_copy into {profile} ({note})")


@app.command()
def calibrate(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Profiler traces (.json[.gz], .sqlite), op CSVs, nccl-tests logs, sweep CSVs, or folders "
            "(a tools/bench_ssd.py folder: the SSD kernels' rates, hardware_specs/calibration/ssd-<device>.yaml; a "
            "--import-aiconfigurator folder: an engine's linear layers, hardware_specs/calibration/gemm-<device>.yaml)."
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="GPU the measurements ran on (e.g. h200; default: read from the traces or the files beside the CSVs).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the compute calibration profile here (YAML).")
    ] = None,
    system: Annotated[
        str | None,
        typer.Option("--system", help="System of the collective measurements (default: the device's)."),
    ] = None,
    comm_output: Annotated[
        Path | None,
        typer.Option(
            "--comm-output",
            help="Write the communication profile here (default: comm-<system>.yaml beside -o).",
        ),
    ] = None,
    no_comm: Annotated[bool, typer.Option("--no-comm", help="Do not fit the communication profile.")] = False,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Start from this profile (name or path, e.g. h200): entries the inputs do not cover are kept from it.",
        ),
    ] = None,
    kernel_gemms_apart: Annotated[
        bool,
        typer.Option(
            "--kernel-gemms-apart",
            help="GEMM tables timed by their kernels' own durations fit only the profile's gemm_kernel block "
            "(compiled code's GEMMs) instead of superseding the call-timed rows of their shapes.",
        ),
    ] = False,
    gemm_kernel_from: Annotated[
        str | None,
        typer.Option(
            "--gemm-kernel-from",
            metavar="PROFILE:FAMILY",
            help="Take these GEMM families' gemm_kernel entries from another device's profile (e.g. h100:fp8_tensor: "
            "the H200 has no per-tensor FP8 grid), as fractions of peak and bandwidth.",
        ),
    ] = None,
    intervals: Annotated[
        Path | None,
        typer.Option(
            "--intervals",
            metavar="YAML",
            help="Instead: fit the prediction intervals on the fit half of the accuracy reports' rows and write "
            "them here (hardware_specs/calibration/intervals.yaml ships); takes no inputs, needs a checkout's traces/.",
        ),
    ] = None,
    extract_copies: Annotated[
        Path | None,
        typer.Option(
            "--extract-copies",
            metavar="CSV",
            help="Instead: write the host<->GPU copies (Memcpy HtoD/DtoH events) of the input profiler traces "
            "(files or folders) into this copy table (e.g. traces/h200/memcpy_host_gpu.csv.gz).",
        ),
    ] = None,
    host_copy: Annotated[
        Path | None,
        typer.Option(
            "--host-copy",
            metavar="YAML",
            help="Instead: fit only the host_copy section of this compute profile on the input copy tables (over "
            "--system's host link, default the profile device's) and replace that section in the file.",
        ),
    ] = None,
    import_aiconfigurator: Annotated[
        str | None,
        typer.Option(
            "--import-aiconfigurator",
            metavar="REPO:SYSTEM:VERSION",
            help="Instead: write an engine GEMM collection (to -o, a folder) from NVIDIA AIConfigurator's TensorRT-LLM "
            "GEMM table (a checkout of ai-dynamo/aiconfigurator, e.g. ../aiconfigurator:b200_sxm:1.2.0rc5; needs pyarrow); "
            "then `simcore calibrate FOLDER` fits it.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Fit calibration profiles (compute efficiency curves, collective costs) from measurements."""
    from simcore.calibration.calibrate import calibrate as run
    from simcore.specs.profile import save_profile

    if import_aiconfigurator is not None:
        _import_aiconfigurator(import_aiconfigurator, output)
        return
    if intervals is not None:
        if inputs:
            fail("--intervals takes no measurement inputs")
        _write_intervals(intervals)
        return
    if not inputs:
        fail("calibrate: give measurement files or folders (or --intervals YAML)")
    if extract_copies is not None or host_copy is not None:
        _host_copies([str(p) for p in inputs], extract_copies, host_copy, system)
        return
    from simcore.calibration import fit_served

    steps = [p for p in inputs if fit_served.steps_manifest(p) is not None]
    if steps:
        _write_step_profiles(steps, output)
        inputs = [p for p in inputs if p not in steps]
        if not inputs:
            return
    from simcore.calibration import fit_engine_gemm, fit_ssd

    ssd = [p for p in inputs if fit_ssd.is_collection(p)]
    tables = [p for p in inputs if fit_engine_gemm.is_collection(p)]
    if output is not None and len(ssd) + len(tables) > 1:
        fail("-o: one SSD or engine GEMM collection at a time when -o names the file")
    for found, what, prefix in ((ssd, "SSD", "ssd-"), (tables, "engine GEMM", "gemm-")):
        if found:
            _write_device_fits(found, device, output, what, prefix)
            inputs = [p for p in inputs if p not in found]
    if (ssd or tables) and not inputs:
        return

    output_file(output, "-o", YAML_FORMATS, make_parents=True)
    output_file(comm_output, "--comm-output", YAML_FORMATS, make_parents=True)
    res = run(
        [str(p) for p in inputs],
        device,
        system,
        fit_comm_profile=not no_comm,
        base=base,
        kernel_gemms_apart=kernel_gemms_apart,
        gemm_kernel_from=gemm_kernel_from,
        progress=lambda text: print(f"calibrate: {text}", file=sys.stderr, flush=True),
    )
    written: list[str] = []
    if output is not None and res.compute_profile is not None:
        with writing(output, "-o"):
            save_profile(res.compute_profile, output)
        written.append(str(output))
    if res.comm_yaml is not None and (comm_output is not None or output is not None):
        from simcore.specs.registry import default_registry
        from simcore.workload.replay import default_system

        sysname = system or default_system(default_registry().device(res.device).name)
        cpath = comm_output or (output.parent / f"comm-{sysname}.yaml" if output else None)
        if cpath is not None:
            with writing(cpath, "--comm-output"):
                cpath.write_text(res.comm_yaml)
            written.append(str(cpath))
    if json_out:
        emit_json({**res.to_dict(), "written": written})
        return
    inp = res.inputs
    console.print(
        f"inputs: {len(inp.ops_csv)} op CSV, {len(inp.traces)} trace(s) ({res.trace_rows} shaped ops), "
        f"{len(inp.comm)} collective log(s)"
    )
    if res.compute_profile is not None:
        t = Table(title=esc(f"compute profile for {res.device}: error on held-out measurements (not fitted)"))
        for c in ("family", "n", "median |err|", "worst |err|"):
            t.add_column(c, justify="left" if c == "family" else "right")
        for fam, v in (res.compute_profile.fit_report.get("held_out") or {}).items():
            add_row(t, fam, str(v["n_check"]), f"{v['median_abs_err']:.1%}", f"{v['worst_abs_err']:.1%}")
        if res.trace_check:
            h = res.trace_check["held_out"]
            if h.get("n"):
                add_row(
                    t, "trace kernels", str(h["n"]), f"{h['median_abs_err']:.1%}", f"{h['worst_abs_err']:.1%}"
                )
        console.print(t)
    if res.comm_report:
        ho = res.comm_report.get("held_out", {})
        console.print(
            f"communication profile: held-out median |err| {ho.get('median_abs_error_ge_1MB', float('nan')):.1%} "
            f"(>= 1 MB), {ho.get('median_abs_error_lt_1MB', float('nan')):.1%} (< 1 MB) over {ho.get('points')} points"
        )
    for n in res.notes:
        note(n)
    for w in written:
        say(f"wrote {w}")


@app.command()
def validate(
    traces: Annotated[
        list[Path], typer.Argument(help="Profiler trace(s) of one run (one file per rank) or a folder.")
    ],
    scenario: Annotated[
        str, typer.Option("--scenario", help="Scenario file (or built-in name) describing the run.")
    ],
    set_: SetOpt = None,
    engine: Annotated[str, typer.Option("--engine", help="analytic or des.")] = "analytic",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a predicted-vs-measured bar chart (PNG).")
    ] = None,
    kernels: Annotated[int, typer.Option("--kernels", help="Show this many per-op rows.")] = 10,
    json_out: JsonOpt = False,
) -> None:
    """Predict a traced run with simcore and compare: per step, per op class, per kernel."""
    from simcore.report.trace_plots import plot_validation as plot_report
    from simcore.validation.traces import validate as run

    image_file(plot, "--plot")
    rep = run([str(t) for t in traces], scenario, set_ or [], engine=engine, top_kernels=max(kernels, 0))
    if plot is not None:
        plot_report(rep, plot)
    if json_out:
        emit_json(rep.to_dict())
        return
    t = Table(
        title=esc(
            f"{rep.scenario} vs {len(rep.traces)} trace(s) on {rep.device} "
            f"({len(rep.step_times_s)} steps, {rep.step_source})"
        )
    )
    for c in ("class", "measured", "(kernels)", "predicted", "error", "error %"):
        t.add_column(c, justify="left" if c == "class" else "right")
    for r in rep.classes:
        add_row(
            t, r["class"], _ms(r["measured_s"]), _ms(r["measured_kernel_s"]), _ms(r["predicted_s"]),
            _ms(r["error_s"]), _pct(r["error_pct"]),
        )  # fmt: skip
    t.add_section()
    mb, pb = rep.measured_gpu_busy_s, rep.predicted_gpu_busy_s
    add_row(
        t,
        "GPU busy",
        _ms(mb),
        "",
        _ms(pb),
        _ms(pb - mb),
        _pct(100 * (pb / mb - 1) if mb > 0 else None),
    )
    t.add_row(
        "[bold]step[/]", _ms(rep.measured_step_time_s), "", _ms(rep.predicted_step_time_s),
        _ms(rep.predicted_step_time_s - rep.measured_step_time_s), f"[bold]{rep.error_pct:+.1f}%[/]",
    )  # fmt: skip
    console.print(t)
    if rep.kernels:
        k = Table(title="per op (shapes from the trace), largest total error first")
        for c in ("op", "per step", "measured", "predicted", "error %"):
            k.add_column(c, justify="left" if c == "op" else "right", overflow="fold")
        for r in rep.kernels:
            add_row(
                k,
                r["op"][:90],
                f"{r['count_per_step']:g}",
                _ms(r["measured_s"]),
                _ms(r["predicted_s"]),
                _pct(r["error_pct"]),
            )
        console.print(k)
    for n in rep.notes:
        note(n)
    if plot is not None:
        say(f"wrote {plot}")


@app.command()
def replay(
    traces: Annotated[
        list[Path], typer.Argument(help="Profiler trace(s) of one run (one file per rank) or a folder.")
    ],
    device: Annotated[str, typer.Option("--device", help="Target GPU (e.g. b200, gb200).")],
    system: Annotated[
        str | None, typer.Option("--system", help="Target system (default: the device's).")
    ] = None,
    source_device: Annotated[
        str | None, typer.Option("--source-device", help="GPU the trace ran on, when the trace does not say.")
    ] = None,
    source_system: Annotated[
        str | None, typer.Option("--source-system", help="System the trace ran on.")
    ] = None,
    trace_out: Annotated[
        Path | None,
        typer.Option(
            "--trace-out", help="Write the replayed timeline as a PyTorch-profiler trace ({rank} = rank)."
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Replay a measured run on other hardware: every kernel re-priced, host gaps kept."""
    from simcore.workload.replay import replay as run

    if trace_out is not None:
        output_file(
            Path(str(trace_out).replace("{rank}", "0")), "--trace-out", TRACE_FORMATS, make_parents=True
        )
    res = run(
        [str(t) for t in traces], device, system, source_device, source_system,
        trace_out=str(trace_out) if trace_out else None,
    )  # fmt: skip
    if json_out:
        emit_json(res.to_dict())
        return
    src, dst = res.source, res.target
    t = Table(title=esc(f"replay: {src['device']} ({src['system']}) -> {dst['device']} ({dst['system']})"))
    for c in ("class", src["device"], dst["device"], "change"):
        t.add_column(esc(c), justify="left" if c == "class" else "right")
    for r in res.classes:
        add_row(t, r["class"], _ms(r["source_s"]), _ms(r["target_s"]), _ms(r["change_s"]))
    t.add_section()
    t.add_row("[bold]step[/]", _ms(res.replayed_source_step_time_s), _ms(res.predicted_step_time_s),
              f"[bold]x{res.speedup:.2f}[/]")  # fmt: skip
    console.print(t)
    console.print(
        f"measured step {_ms(res.measured_step_time_s)}; replay on the source reproduces it as "
        f"{_ms(res.replayed_source_step_time_s)} ({_pct(100 * (res.replayed_source_step_time_s / res.measured_step_time_s - 1))})"
    )
    console.print(
        esc(
            "kernels priced by "
            + ", ".join(f"{k}: {v}" for k, v in sorted(res.how.items(), key=lambda kv: -kv[1]))
        )
    )
    for w in res.written:
        say(f"wrote {w}")
    for n in res.notes:
        note(n)
