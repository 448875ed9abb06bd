"""``simcore serve``: request-level inference serving simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, app, console, emit_json
from simcore.errors import SimcoreError
from simcore.serving.sim import RequestLog, ServingResult, simulate
from simcore.serving.spec import load_serving

SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="Override a field: key.path=value (repeatable).")
]


def _table(r: ServingResult, wall_s: float | None = None) -> None:
    inst = ", ".join(f"{n} {role}" for role, n in r.instances.items())
    lay = " ".join(f"{k} {v}" for k, v in r.layout.items())
    t = Table(title=f"{r.name}: {r.gpus} x {r.device} ({inst} instance(s), {lay})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    offered = f" of {r.offered_rate:g} offered" if r.offered_rate is not None else ""
    t.add_row("requests", f"{r.requests} over {r.duration_s:,.1f} s")
    t.add_row("throughput", f"{r.requests_per_s:,.2f} requests/s{offered}")
    if r.steady_requests_per_s is not None:
        t.add_row("steady throughput (2nd half)", f"{r.steady_requests_per_s:,.2f} requests/s")
    t.add_row(
        "output tokens/s", f"{r.output_tokens_per_s:,.0f} ({r.output_tokens_per_s_per_gpu:,.0f} per GPU)"
    )
    t.add_row("input tokens/s", f"{r.input_tokens_per_s:,.0f}")
    for label, s in (
        ("TTFT", r.ttft_s),
        ("TPOT", r.tpot_s),
        ("end-to-end", r.e2e_s),
        ("queue wait", r.queue_wait_s),
    ):
        t.add_row(
            f"{label} p50 / p90 / p99 (mean)",
            " / ".join(units.fmt(v, "time") for v in (s.p50, s.p90, s.p99))
            + f" ({units.fmt(s.mean, 'time')})",
        )
    t.add_row("goodput (SLOs met)", f"{r.goodput:,.2f} requests/s ({r.slo_attainment:.1%} of requests)")
    t.add_row("in system mean / max", f"{r.mean_in_system:,.1f} / {r.max_in_system}")
    t.add_row("queue mean / max", f"{r.mean_queue:,.1f} / {r.max_queue}")
    kv = ", ".join(f"{role} {n:,} tokens" for role, n in r.kv_tokens_per_instance.items())
    t.add_row("KV cache per instance", kv)
    t.add_row("KV utilisation mean / peak", f"{r.kv_utilization:.1%} / {r.kv_peak_utilization:.1%}")
    t.add_row("busy fraction", f"{r.busy_fraction:.1%}")
    t.add_row("preemptions", str(r.preemptions))
    wall = f" (simulated in {wall_s:.2f} s)" if wall_s is not None else ""
    t.add_row("steps / events", f"{r.steps:,} / {r.events:,}{wall}")
    console.print(t)
    for n in r.notes:
        console.print(f"[yellow]note:[/] {n}")


def _plot(r: ServingResult, log: RequestLog, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, x in (("TTFT", log.ttft), ("TPOT", log.tpot), ("end-to-end", log.e2e)):
        v = np.sort(x[np.isfinite(x)])
        if v.size:
            ax1.plot(v, np.arange(1, v.size + 1) / v.size, label=label)
    ax1.set_xscale("log")
    ax1.set_xlabel("seconds")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("latency CDFs")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()
    t0, t1 = float(log.arrival.min()), float(log.finish.max())
    bins = np.linspace(t0, t1, max(min(int(t1 - t0), 200), 10) + 1)
    width = np.diff(bins)
    # output tokens spread evenly between each request's first token and its finish
    span = np.maximum(log.finish - log.first_token, 1e-12)
    rate = (log.output - 1) / span
    tok = np.zeros(bins.size - 1)
    for i in range(bins.size - 1):
        lo = np.maximum(log.first_token, bins[i])
        hi = np.minimum(log.finish, bins[i + 1])
        tok[i] = float(np.sum(np.clip(hi - lo, 0.0, None) * rate))
    tok += np.histogram(log.first_token, bins)[0]
    arr = np.histogram(log.arrival, bins)[0] / width
    done = np.histogram(log.finish, bins)[0] / width
    ax2.plot(bins[:-1], tok / width, label="output tokens/s")
    ax2.set_xlabel("time (s)")
    ax2.set_ylabel("output tokens/s")
    ax3 = ax2.twinx()
    ax3.plot(bins[:-1], arr, ":", color="gray", label="arrivals/s")
    ax3.plot(bins[:-1], done, "--", color="tab:red", label="completions/s")
    ax3.set_ylabel("requests/s")
    ax2.set_title("throughput over time")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax3.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower center")
    fig.suptitle(f"{r.name}: {r.gpus} x {r.device}")
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=120)
    except (OSError, ValueError) as e:
        raise SimcoreError(f"cannot write plot: {e}", file=str(out)) from None
    finally:
        plt.close(fig)


@app.command("serve")
def serve_cmd(
    scenario: Annotated[str, typer.Argument(help="A kind: serving scenario file or built-in name.")],
    set_: SetOpt = None,
    as_json: JsonOpt = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write latency CDFs and throughput over time (PNG/SVG/PDF).")
    ] = None,
) -> None:
    """Simulate request-level serving: latency percentiles (TTFT, TPOT, end-to-end), throughput,
    goodput, KV-cache use and queues."""
    sc, spec = load_serving(scenario, set_ or [])
    run = simulate(sc, spec)
    if as_json:
        emit_json(run.result.model_dump())
    else:
        _table(run.result, run.wall_s)
    if plot is not None:
        _plot(run.result, run.log, plot)
        if not as_json:
            console.print(f"plot written to {plot}")
