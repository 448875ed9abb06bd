"""``simcore collective OP``: predicted time, algbw and busbw of one collective, or a size sweep."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, add_row, app, console, emit_json, esc, image_file, note, say
from simcore.errors import SimcoreError

if TYPE_CHECKING:
    import numpy as np

SWEEP_SIZES = [float(1 << i) for i in range(10, 33)]
"""1 KiB .. 4 GiB in powers of two."""


def _parse_bytes(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = units.parse(text, "bytes")
    except units.UnitError as e:
        raise SimcoreError(str(e), field="--bytes") from None
    if v <= 0:
        raise SimcoreError("must be positive", field="--bytes")
    return v


def _measured_points(
    path: Path, op: str, gpus: int, dtype: str, nodes: int | None
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]], str]:
    """Sizes and times (s) of measurements of ``op`` on ``gpus`` GPUs (out-of-place), and a label."""
    import numpy as np

    from simcore.traces.nccl import read_measurements

    m = read_measurements(path, op=op, gpus=gpus, nodes=nodes)
    ops = {op, "send_recv_bidir"} if op == "send_recv" else {op}
    sel = np.isin(m.op, list(ops)) & (m.gpus == gpus) & ~m.in_place
    if nodes is not None:
        sel &= m.nodes == nodes
    label = f"measured ({path.name})"
    if np.any(sel & (m.dtype == dtype)):
        sel &= m.dtype == dtype
    elif np.any(sel):
        label = f"measured {sorted(set(m.dtype[sel]))[0]} ({path.name})"
        sel &= m.dtype == sorted(set(m.dtype[sel]))[0]
    if not np.any(sel):
        raise SimcoreError(f"no {op} measurements on {gpus} GPUs", file=str(path))
    m = m.select(sel)
    # median over repeated points of the same size
    sizes = np.unique(m.nbytes)
    times = np.array([np.median(m.time_s[m.nbytes == s]) for s in sizes])
    return sizes, times, label


@app.command("collective")
def collective(
    op: Annotated[
        str,
        typer.Argument(
            help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv"
        ),
    ],
    nbytes: Annotated[
        str | None, typer.Option("--bytes", help="Bytes per rank (nccl-tests convention), e.g. '256 MB'.")
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs in the communicator.")] = 8,
    system: Annotated[
        str, typer.Option("--system", help="System (node or rack) name, e.g. hgx-h200.")
    ] = "hgx-h200",
    nodes: Annotated[int | None, typer.Option("--nodes", help="Systems the GPUs are spread over.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Element type (bf16, fp32, ...).")] = "bf16",
    algorithm: Annotated[
        str, typer.Option("--algorithm", help="auto, ring, tree, nvls, hierarchical, pairwise, p2p.")
    ] = "auto",
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Sweep 1 KiB .. 4 GiB and print the busbw curve.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the busbw curve (PNG, SVG, PDF, ...).")
    ] = None,
    measured: Annotated[
        Path | None,
        typer.Option("--measured", help="Overlay measurements (nccl-tests text or JSON, or sweep CSV)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict one collective's time, algorithm bandwidth and bus bandwidth (nccl-tests conventions)."""
    from simcore.comm.collectives import collective_time, normalize_op

    image_file(output, "-o")
    opn = normalize_op(op)
    size = _parse_bytes(nbytes)
    if not sweep and size is None:
        raise SimcoreError("give --bytes SIZE, or --sweep", field="--bytes")
    sizes = SWEEP_SIZES if sweep else [size or 0.0]
    results = [
        collective_time(
            opn, nbytes=s, gpus=gpus, system=system, nodes=nodes, dtype=dtype, algorithm=algorithm
        )
        for s in sizes
    ]
    meas = _measured_points(measured, opn, gpus, dtype, nodes) if measured is not None else None
    meas_t: dict[float, float] = {}
    if meas is not None:
        meas_t = {float(s): float(t) for s, t in zip(meas[0], meas[1], strict=True)}
    if output is not None:
        from simcore.report.plots import collective_busbw

        collective_busbw(results, meas, output)
    if as_json:
        rows = []
        for r in results:
            d = r.model_dump()
            if r.nbytes in meas_t:
                d["measured_time_s"] = meas_t[r.nbytes]
            rows.append(d)
        emit_json(
            rows[0] if not sweep else {"op": opn, "gpus": gpus, "system": results[0].system, "points": rows}
        )
        return
    r0 = results[0]
    title = f"{opn} on {gpus} GPUs ({r0.nodes} x {r0.system}), {dtype}"
    t = Table(title=esc(title))
    cols = ["size", "time", "algbw", "busbw", "algo", "proto", "NVLink/rank", "net/rank"]
    if meas_t:
        cols += ["measured", "error"]
    for c in cols:
        t.add_column(c, justify="right" if c not in ("algo", "proto") else "left")
    for r in results:
        row = [
            units.fmt(r.nbytes, "bytes"),
            units.fmt(r.time_s, "time"),
            units.fmt(r.algbw, "bandwidth"),
            units.fmt(r.busbw, "bandwidth"),
            r.algorithm,
            r.protocol,
            units.fmt(r.bytes_nvlink_per_rank, "bytes"),
            units.fmt(r.bytes_network_per_rank, "bytes"),
        ]
        if meas_t:
            mt = meas_t.get(r.nbytes)
            row += ["-", "-"] if mt is None else [units.fmt(mt, "time"), f"{(r.time_s - mt) / mt:+.1%}"]
        add_row(t, *row)
    console.print(t)
    for n in r0.notes:
        note(n)
    if output is not None:
        say(f"busbw curve written to {output}")
