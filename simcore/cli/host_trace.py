"""``simcore host-trace (--ddp | --steps | --decode | ...) TRACE... -o OUT``: host costs from profiler traces.

The CSV it writes is an input of the host-model fit (``simcore.calibration.fit_host``); what each kind
measures is :func:`simcore.calibration.host_trace.host_trace_rows`'s docstring (see docs/traces.md).
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Annotated, Any

import typer

from simcore.cli.common import app, fail, output_file

_STRATEGIES = ("single", "single_x2", "ddp", "fsdp", "tp")


def _flag(name: str, help_: str) -> Any:
    return typer.Option(name, help=help_)


@app.command("host-trace")
def host_trace_cmd(
    traces: Annotated[list[Path], typer.Argument(help="Profiler traces (.json[.gz]).", show_default=False)],
    out: Annotated[Path, typer.Option("-o", "--out", help="CSV to write (.gz: compressed).")],
    ddp: Annotated[
        bool, _flag("--ddp", "Profiled DDP ranks' traces: host per gradient and per bucket.")
    ] = False,
    steps: Annotated[
        bool, _flag("--steps", "Profiled eager training traces: each step's host timeline.")
    ] = False,
    decode: Annotated[bool, _flag("--decode", "Profiled eager inference traces: each decode pass.")] = False,
    graphs: Annotated[bool, _flag("--graphs", "Traces of CUDA-graph replays.")] = False,
    compiled: Annotated[bool, _flag("--compiled", "Profiled torch.compile training traces.")] = False,
    compiled_decode: Annotated[
        bool, _flag("--compiled-decode", "Inference traces with compiled decode graphs.")
    ] = False,
    graph_records: Annotated[
        bool, _flag("--graph-records", "Compiled decode traces that re-record their graph.")
    ] = False,
    generate: Annotated[bool, _flag("--generate", "transformers generate() traces.")] = False,
    prefill: Annotated[bool, _flag("--prefill", "With --decode: the prefill passes too (seq > 1).")] = False,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="With --steps: the runs' distributed wrapper, a label in the rows (single | single_x2 | ddp | "
            "fsdp | tp; single_x2: plain replicas of a distributed run, the baseline of its wrappers).",
        ),
    ] = "single",
) -> None:
    """Host costs from profiler traces, one CSV row per trace or step (the input of the host-model fit)."""
    from simcore.calibration.host_trace import HOST_TRACE_KINDS, host_trace_rows

    output_file(out, "-o", (".csv", ".csv.gz"))
    chosen = dict(
        zip(
            HOST_TRACE_KINDS,
            (ddp, steps, decode, graphs, compiled, compiled_decode, graph_records, generate),
            strict=True,
        )
    )
    kinds = [k for k, on in chosen.items() if on]
    if len(kinds) != 1:
        flags = ", ".join("--" + k.replace("_", "-") for k in HOST_TRACE_KINDS)
        fail(f"give one of {flags}")
    kind = kinds[0]
    if strategy not in _STRATEGIES:
        fail(f"--strategy: {strategy!r} is not one of {', '.join(_STRATEGIES)}")
    if strategy != "single" and kind != "steps":
        fail("--strategy labels --steps rows; it means nothing with --ddp or --decode")
    if prefill and kind != "decode":
        fail("--prefill adds prefill passes to --decode rows; it means nothing without --decode")
    rows, columns = host_trace_rows(kind, [str(t) for t in traces], strategy, prefill)
    try:
        with (
            gzip.open(out, "wt", newline="") if out.name.endswith(".gz") else open(out, "w", newline="")
        ) as f:
            w = csv.DictWriter(f, fieldnames=list(columns))
            w.writeheader()
            for r in rows:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    except OSError as e:
        fail(f"{out}: cannot write ({e.strerror})")
    for r in rows:
        print(_line(kind, r))


def _line(kind: str, r: dict[str, Any]) -> str:
    """One row as the line printed for it (times in ms or us)."""
    if kind == "ddp":
        return (
            f"{r['trace']}: {r['params_per_step']:.0f} gradients / {r['buckets_per_step']:.0f} buckets per step, "
            f"{r['per_param_s'] * 1e6:.1f} us per gradient, {r['per_bucket_s'] * 1e6:.1f} us per bucket"
        )
    if kind == "compiled":
        return (
            f"{r['trace']} {r['step']}: compiled forward {r['fwd_region_s'] * 1e3:.2f} ms, backward "
            f"{r['bwd_region_s'] * 1e3:.2f} ms, optimizer {r['optimizer_s'] * 1e3:.2f} ms (step {r['step_s'] * 1e3:.2f} ms)"
        )
    if kind == "generate":
        return f"{r['trace']}: generate() call before its prefill {r['setup_s'] * 1e3:.2f} ms ({r['steps']} steps)"
    if kind == "compiled_decode":
        return (
            f"{r['trace']}: {r['calls']} compiled decode calls of {r['kernels_per_replay']:.0f} kernels, "
            f"{r['call_s'] * 1e6:.0f} us a call, aten::linear {r['linear_main_s'] * 1e6:.1f} us"
        )
    if kind == "graph_records":
        return (
            f"{r['trace']}: {r['records']} graph recordings of {r['kernels_per_replay']:.0f} kernels, "
            f"{r['record_s'] * 1e3:.2f} ms idle each beyond the call, aten::empty {r['empty_main_s'] * 1e6:.2f} us"
        )
    if kind == "graphs":
        return (
            f"{r['trace']}: {r['replays']} replays of {r['kernels_per_replay']:.0f} kernels, "
            f"{r['gap_per_kernel_s'] * 1e6:.2f} us idle between kernels, launch call {r['graph_launch_s'] * 1e6:.1f} us"
        )
    if kind == "decode":
        return (
            f"{r['trace']} {r['step']}: decode pass of {r['layers']} layers, host {r['pass_s'] * 1e3:.3f} ms "
            f"({r['layer_s'] * 1e6:.0f} us per layer), aten::t {r['probe_main_s'] * 1e6:.1f} us"
        )
    return (
        f"{r['trace']} {r['step']}: {r['layers']} layers, host {r['step_s'] * 1e3:.2f} ms "
        f"(layer {r['fwd_layer_s'] * 1e3:.3f} + {r['bwd_layer_s'] * 1e3:.3f} ms), GPU {r['gpu_step_s'] * 1e3:.2f} ms, "
        f"aten::t {r['probe_main_s'] * 1e6:.1f} / {r['probe_bwd_s'] * 1e6:.1f} us"
        + (", synchronized" if r["synchronized"] else "")
    )
