"""``simcore op KIND ...``: predicted time of one kernel, its FLOPs, bytes and roofline bound."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simcore import units
from simcore.cli.common import JsonOpt, add_row, app, console, emit_json, esc, image_file, say
from simcore.errors import SimcoreError

_KIND_HELP = "gemm | attention | elementwise | norm | softmax | copy | memory | optimizer"


@app.command("op")
def op_cmd(
    kind: Annotated[str, typer.Argument(help=_KIND_HELP)],
    device: Annotated[str, typer.Option("--device", help="Device (or system) name.")] = "h200",
    dtype: Annotated[
        str, typer.Option("--dtype", help="bf16 | fp16 | fp8 | tf32 | fp32 (element type).")
    ] = "bf16",
    framework: Annotated[str, typer.Option("--framework", help="eager | cuda_graphs | compiled.")] = "eager",
    calibration: Annotated[
        str | None, typer.Option("--calibration", help="Calibration profile name or YAML path.")
    ] = None,
    m: Annotated[int | None, typer.Option("--m", help="GEMM rows of A and C.")] = None,
    n: Annotated[int | None, typer.Option("--n", help="GEMM columns of B and C.")] = None,
    k: Annotated[int | None, typer.Option("--k", help="GEMM reduction depth.")] = None,
    batch: Annotated[
        int | None, typer.Option("--batch", help="Batch (GEMM batch count or sequences).")
    ] = None,
    heads: Annotated[int | None, typer.Option("--heads", help="Attention query heads.")] = None,
    seq: Annotated[
        int | None, typer.Option("--seq", help="Query tokens per sequence (1 for decode).")
    ] = None,
    head_dim: Annotated[int | None, typer.Option("--head-dim", help="Attention head dimension.")] = None,
    causal: Annotated[bool | None, typer.Option("--causal/--no-causal", help="Causal mask.")] = None,
    backward: Annotated[bool, typer.Option("--backward", help="Backward kernel instead of forward.")] = False,
    kv_heads: Annotated[int | None, typer.Option("--kv-heads", help="KV heads (GQA/MQA).")] = None,
    kv_seq: Annotated[
        int | None, typer.Option("--kv-seq", help="Keys per sequence (KV cache length).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Attention kernels: auto (default: what PyTorch's SDPA picks on the device) | flash "
            "(FlashAttention-2) | cudnn | efficient (memory-efficient).",
        ),
    ] = None,
    scaling: Annotated[
        str | None,
        typer.Option(
            "--scaling",
            help="FP8 GEMM scaling: row (default: PyTorch's row-wise scaled_mm) | tensor (one scale per tensor: "
            "Transformer Engine's delayed/current scaling, TensorRT-LLM).",
        ),
    ] = None,
    mask: Annotated[
        bool | None,
        typer.Option("--mask/--no-mask", help="Attention reads an explicit additive mask tensor."),
    ] = None,
    dropout: Annotated[float | None, typer.Option("--dropout", help="Attention dropout probability.")] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Memory-bound op: add, gelu, rmsnorm, ...")
    ] = None,
    nbytes: Annotated[str | None, typer.Option("--bytes", help="Bytes moved, e.g. '64 MB'.")] = None,
    numel: Annotated[
        int | None, typer.Option("--numel", help="Elements (bytes from the op's convention).")
    ] = None,
    flops: Annotated[
        str | None, typer.Option("--flops", help="FLOP of a memory-bound op, e.g. '1 GFLOP'.")
    ] = None,
    rows: Annotated[
        int | None, typer.Option("--rows", help="Rows of a row-wise op (softmax, norms, cross-entropy).")
    ] = None,
    params: Annotated[str | None, typer.Option("--params", help="Optimizer: parameters, e.g. 7e9.")] = None,
    optimizer: Annotated[str | None, typer.Option("--optimizer", help="adamw | sgd.")] = None,
    fused: Annotated[bool | None, typer.Option("--fused/--no-fused", help="Fused optimizer kernel.")] = None,
    master_weights: Annotated[
        bool | None, typer.Option("--master-weights/--no-master-weights", help="fp32 master weights.")
    ] = None,
    clock: Annotated[
        str | None, typer.Option("--clock", help="SM clock to price compute at, e.g. '1.98 GHz'.")
    ] = None,
    cold_cache: Annotated[
        bool, typer.Option("--cold-cache", help="Operands come from HBM even if they would fit the L2.")
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a roofline plot (PNG, SVG, PDF, ...).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict one kernel's time on a device, with its FLOPs, bytes and roofline bound."""
    from simcore.compute.ops import KINDS, SHAPE_KEYS, op_time, shape_family

    image_file(plot, "--plot")
    if kind not in KINDS:
        raise SimcoreError(f"unknown op kind {kind!r}; known: {', '.join(KINDS)}", field="op")
    given: dict[str, Any] = {
        "m": m, "n": n, "k": k, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
        "causal": causal, "backward": backward or None, "kv_heads": kv_heads, "kv_seq": kv_seq,
        "backend": backend, "scaling": scaling, "mask": mask, "dropout": dropout, "name": name, "bytes": nbytes, "numel": numel,
        "flops": flops, "rows": rows, "params": params, "optimizer": optimizer, "fused": fused,
        "master_weights": master_weights,
    }  # fmt: skip
    given = {key: v for key, v in given.items() if v is not None}
    # which options belong to which kind (the rest are rejected with one line)
    allowed = SHAPE_KEYS[shape_family(kind)]
    wrong = [key for key in given if key not in allowed]
    if wrong:
        opts = ", ".join("--" + w.replace("_", "-") for w in wrong)
        raise SimcoreError(f"{opts} not an option of {kind} (it takes {', '.join(allowed)})", field="op")
    if "params" in given:
        given["params"] = _number(given["params"], "params")
    res = op_time(
        kind,
        device=device,
        dtype=dtype,
        framework=framework,
        calibration=calibration,
        cold_cache=cold_cache,
        clock_hz=clock,
        **given,
    )
    if plot is not None:
        from simcore.report.plots import roofline

        roofline(res, plot)
    if as_json:
        emit_json(res.model_dump())
        return
    t = Table(title=esc(f"{kind} on {res.device} ({res.dtype}, {res.framework})"), show_header=False)
    t.add_column("quantity")
    t.add_column("value")
    shape = ", ".join(f"{key}={_short(v)}" for key, v in res.shape.items())
    lines = [
        ("shape", shape),
        ("time per kernel", units.fmt(res.time_s, "time")),
        ("  kernel (device)", units.fmt(res.kernel_time_s, "time")),
        ("  launch overhead", units.fmt(res.launch_overhead_s, "time")),
        ("FLOPs", units.fmt(res.flops, "flops")),
        ("bytes", units.fmt(res.bytes, "bytes")),
        ("arithmetic intensity", f"{res.arithmetic_intensity:.3g} FLOP/B"),
        ("bound", res.bound),
        ("efficiency (roofline / time)", f"{res.efficiency:.1%}"),
        ("achieved", f"{units.fmt(res.achieved_flops_per_s, 'flop_rate')}, {units.fmt(res.achieved_bytes_per_s, 'bandwidth')}"),
        ("peak", f"{units.fmt(res.peak_flops_per_s, 'flop_rate')}, {units.fmt(res.bandwidth_bytes_per_s, 'bandwidth')}"),
        ("calibration", res.calibration),
    ]  # fmt: skip
    for a, b in lines:
        add_row(t, a, b)
    console.print(t)
    console.print(esc(launch_relation(res.time_s, res.kernel_time_s, res.launch_overhead_s)), highlight=False)
    if plot is not None:
        say(f"roofline plot: {plot}")


def launch_relation(time_s: float, kernel_s: float, launch_s: float) -> str:
    """One line saying how "time per kernel", "kernel (device)" and "launch overhead" relate.

    In a stream of back-to-back launches a kernel costs ``max(kernel + gap, launch)`` when the host
    runs ahead of the GPU (``gap``: the device's idle time between kernels), or ``kernel + launch``
    when the profile finds the host work exposed; which case applies shows in the three numbers.
    """
    t, k, lo = (units.fmt(v, "time") for v in (time_s, kernel_s, launch_s))
    tol = 1e-12 + 1e-6 * max(time_s, 0.0)
    if launch_s > 0 and abs(time_s - launch_s) <= tol and launch_s >= kernel_s:
        return (
            f"time per kernel = launch overhead: back to back, the host takes {lo} to launch each call, "
            f"longer than the {k} kernel runs, so the GPU waits for it (launch bound)"
        )
    if launch_s > 0 and abs(time_s - (kernel_s + launch_s)) <= tol:
        return (
            f"time per kernel = kernel + launch overhead ({k} + {lo}): the host's launch work is not "
            "hidden behind the previous kernel"
        )
    gap = time_s - kernel_s
    if gap > tol:
        return (
            f"time per kernel = kernel + {units.fmt(gap, 'time')} idle gap between back-to-back kernels; "
            f"the {lo} launch overhead is hidden (the host queues launches ahead of the GPU): "
            "time per kernel = max(kernel + gap, launch overhead)"
        )
    return (
        f"time per kernel = kernel: the {lo} launch overhead is hidden (the host queues launches ahead "
        "of the GPU): time per kernel = max(kernel + gap, launch overhead)"
    )


def _number(v: str, field: str) -> float:
    """A count such as ``7e9``, ``7B``, ``350M`` or ``1.5T``."""
    text = v.strip().replace("_", "")
    scale = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}.get(text[-1:], 1.0)
    if scale != 1.0:
        text = text[:-1]
    try:
        return float(text) * scale
    except ValueError:
        raise SimcoreError(f"cannot read {v!r} as a count (e.g. 7e9 or 7B)", field=field) from None


def _short(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
