"""Host speed from a profiler trace: how long the CPU took per transformer layer.

Eager PyTorch issues kernels from Python without waiting for the GPU, so the CPU timestamps of a
profiler trace show the host's own pace whatever the GPU does. A pre-norm decoder calls its norm
twice per layer and once at the end (``2 L + 1`` norm ops per forward, and as many norm backward
nodes per backward), so the spacing of those ops gives the host time per layer:

* training step: the forward norms before the first autograd node, the backward norm nodes after
  it; steps with recomputation (norms or attention forwards rerun inside the backward) are left out;
* inference step: each forward pass's norms (a decode step: one token per sequence, read from the
  norm's recorded input shape).

:func:`host_scale` compares these with the compute profile's ``host_layer`` entries under the
profiler (a trace is always recorded with it) and returns the ratio: this machine's host speed
relative to the one the profile was measured on. Traces of distributed runs (NCCL kernels) are
skipped: their per-layer host includes the wrapper's work.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from simcore.calibration.classify import Analysis
from simcore.calibration.profile import ComputeProfile
from simcore.calibration.traces.model import CpuOp

FWD_NORMS = ("aten::layer_norm", "aten::rms_norm")
_BWD_NORM = "autograd::engine::evaluate_function: "
_ATTN_FWD = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention")


@dataclass(frozen=True)
class LayerHost:
    """Measured host seconds per layer in one step of a trace, and what the profile expects."""

    mode: str
    """``train`` or ``decode``."""
    act: str
    """``gelu`` or ``swiglu`` (from the trace's activation ops)."""
    layers: int
    measured_s: float
    """Host seconds per layer (training: forward + backward)."""
    expected_s: float
    """The profile's profiled ``host_layer`` value for the same work."""

    @property
    def ratio(self) -> float:
        return self.measured_s / self.expected_s


def _tokens_of(dims: object) -> int | None:
    """Token count (second dim) of a norm's first input [batch, tokens, hidden], if recorded."""
    if isinstance(dims, list) and dims and isinstance(dims[0], list) and len(dims[0]) == 3:
        try:
            return int(dims[0][1])
        except (TypeError, ValueError):
            return None
    return None


def layer_host_times(a: Analysis, prof: ComputeProfile) -> list[LayerHost]:
    """Per-layer host times of every annotated step of a single-GPU trace (empty when the trace
    has no usable norm pattern, no step annotations, NCCL kernels, or the profile no host model)."""
    if not prof.host_layer or any(k.base == "comm" for s in a.steps for k in s.kernels):
        return []
    ops = sorted(a.trace.cpu_ops.values(), key=lambda o: o.ts)
    out: list[LayerHost] = []
    for st in a.steps:
        if st.cpu_start is None or st.cpu_end is None:
            continue
        win = [o for o in ops if st.cpu_start <= o.ts <= st.cpu_end]
        act = "swiglu" if any(o.name == "aten::silu" for o in win) else "gelu"
        first_bwd = next((o.ts for o in win if o.name.startswith(_BWD_NORM)), None)
        norms = _outermost([o for o in win if o.name in FWD_NORMS])
        if first_bwd is not None:
            fwd = [o.ts for o in norms if o.ts < first_bwd]
            bwd = [o.ts for o in win if o.name.startswith(_BWD_NORM) and "NormBackward" in o.name]
            n = len(fwd)
            if n < 5 or n % 2 == 0 or len(bwd) != n:
                continue
            # recomputation (norms rerun inside the backward: full; attention forwards: selective) adds
            # checkpointing host work whose model is a single width-64 measurement: such steps would
            # measure that model rather than the host's speed, so they are left out
            if any(o.ts > first_bwd and (o.name in FWD_NORMS or o.name in _ATTN_FWD) for o in win):
                continue
            layers = (n - 1) // 2
            meas = (fwd[-1] - fwd[0] + bwd[-1] - bwd[0]) / layers
            exp = prof.host(f"train_fwd_{act}", True) + prof.host(f"train_bwd_{act}", True)
            if exp > 0 and meas > 0:
                out.append(LayerHost("train", act, layers, meas, exp))
            continue
        # inference: split the norms into forward passes (2 L + 1 each, one token shape per pass)
        exp = prof.host(f"infer_decode_{act}", True)
        if exp <= 0:
            continue
        for p in _split_passes(norms, [o.ts for o in win if o.name == "aten::embedding"]):
            if len(p) >= 5 and len(p) % 2 == 1 and _tokens_of(p[0].input_dims) == 1:
                layers = (len(p) - 1) // 2
                meas = (p[-1].ts - p[0].ts) / layers
                out.append(LayerHost("decode", act, layers, meas, exp))
    return out


def _outermost(ops: list[CpuOp]) -> list[CpuOp]:
    """Drop ops nested in the previous kept one (autocast dispatches a norm twice)."""
    out: list[CpuOp] = []
    for o in ops:
        if out and o.ts < out[-1].ts + out[-1].dur:
            continue
        out.append(o)
    return out


def _split_passes(norms: list[CpuOp], starts: list[float]) -> list[list[CpuOp]]:
    """Norm ops grouped into forward passes: a pass starts at each token-embedding lookup."""
    out: list[list[CpuOp]] = []
    bounds = sorted(starts)
    k = 0
    for o in norms:
        while k < len(bounds) and bounds[k] <= o.ts:
            k += 1
            out.append([])
        if not out:
            out.append([])
        out[-1].append(o)
    return [p for p in out if p]


def host_scale(analyses: list[Analysis], prof: ComputeProfile) -> tuple[float | None, list[LayerHost]]:
    """Median measured / expected per-layer host time over the traces' steps (``None`` when no
    step could be measured), and the per-step measurements."""
    found = [x for a in analyses for x in layer_host_times(a, prof)]
    if not found:
        return None, []
    return float(statistics.median(x.ratio for x in found)), found


# ---------------------------------------------------------------------------------------------
# the CPU's per-op speed

PROBE_OP = "aten::t"
"""A metadata-only operator (a transposed view) every GPT / Llama layer calls in its forward and in its
backward: its duration is the CPU's speed of the moment, whatever the tensors."""
BWD_LAYER_PROBES = 332.0
"""Host time of a GPT-2-small backward layer under the profiler in units of the backward thread's
``aten::t`` (round 23, ``traces/h200/round23/host_pace.csv.gz``: quartiles 323-348 over 36 points whose
``aten::t`` ranged 2.4-7.4 µs; a forward layer is 152 of the main thread's)."""


@dataclass(frozen=True)
class OpSpeed:
    """Median ``aten::t`` seconds on a training trace's main (forward) and backward (autograd) thread."""

    main_s: float | None
    backward_s: float | None


def op_speed(a: Analysis) -> OpSpeed | None:
    """The CPU's per-op speed in a trace (None when it never calls ``aten::t``). The backward thread is
    the one that runs the autograd nodes; the main thread the other one that calls ``aten::t``."""
    by: dict[int, list[float]] = {}
    bwd_tids: set[int] = set()
    for o in a.trace.cpu_ops.values():
        if o.name == PROBE_OP:
            by.setdefault(o.tid, []).append(o.dur)
        elif o.name.startswith(_BWD_NORM):
            bwd_tids.add(o.tid)
    if not by:
        return None
    bwd = [d for tid, v in by.items() if tid in bwd_tids for d in v]
    main = max((v for tid, v in by.items() if tid not in bwd_tids), key=len, default=[])
    return OpSpeed(
        main_s=statistics.median(main) if main else None,
        backward_s=statistics.median(bwd) if bwd else None,
    )


# ---------------------------------------------------------------------------------------------
# PyTorch DDP's host work in the backward, from a profiled DDP rank's CPU timeline

_ACC_NODE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
_ACC_INNER = "torch::autograd::AccumulateGrad"
_COPY_BACK = "torch.distributed.ddp.reducer::copy_bucket_to_grad"
_BUCKET_CALL = "c10d::allreduce_"

DDP_HOOK_COLUMNS = (
    "trace",
    "rank",
    "steps",
    "params_per_step",
    "buckets_per_step",
    "per_param_s",
    "per_bucket_s",
)


@dataclass(frozen=True)
class DdpHooks:
    """DDP's host seconds in one profiled rank: per gradient tensor and per gradient bucket.

    ``per_param_s``: the autograd hook DDP registers on every parameter (its gradient scaled into
    the flat bucket: the ``AccumulateGrad`` node's time beyond the plain accumulation) plus the copy
    of the reduced bucket back into the gradient at the end of the backward
    (``copy_bucket_to_grad``); ``per_bucket_s``: the host call that launches a bucket's all-reduce
    (``c10d::allreduce_``). Medians over the trace's events, so a bucket's call is not counted in
    the per-parameter part (it runs inside one hook of each bucket)."""

    trace: str
    rank: int
    steps: int
    params_per_step: float
    buckets_per_step: float
    per_param_s: float
    per_bucket_s: float

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in DDP_HOOK_COLUMNS}


def ddp_hooks(a: Analysis) -> DdpHooks | None:
    """DDP's per-parameter and per-bucket host seconds in a profiled DDP trace (None when the trace
    has no DDP reducer hooks or bucket all-reduces)."""
    by: dict[str, list[float]] = {}
    for o in a.trace.cpu_ops.values():
        if o.name in (_ACC_NODE, _ACC_INNER, _COPY_BACK, _BUCKET_CALL):
            by.setdefault(o.name, []).append(o.dur)
    if not all(by.get(k) for k in (_ACC_NODE, _ACC_INNER, _COPY_BACK, _BUCKET_CALL)):
        return None
    med = {k: statistics.median(v) for k, v in by.items()}
    steps = max(len(a.steps), 1)
    return DdpHooks(
        trace=a.trace.path,
        rank=a.trace.rank,
        steps=steps,
        params_per_step=len(by[_ACC_NODE]) / steps,
        buckets_per_step=len(by[_BUCKET_CALL]) / steps,
        per_param_s=max(med[_ACC_NODE] - med[_ACC_INNER], 0.0) + med[_COPY_BACK],
        per_bucket_s=med[_BUCKET_CALL],
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m simcore.calibration.host_trace --ddp TRACE... -o OUT.csv[.gz]``: DDP's host costs
    per gradient tensor and per bucket from profiled DDP ranks, one CSV row per trace (the input of
    ``fit_host``'s ``profiled_ddp_param`` / ``profiled_ddp_bucket``)."""
    import argparse
    import csv
    import gzip
    import sys

    from simcore.calibration.classify import analyze
    from simcore.calibration.traces import read_trace
    from simcore.errors import SimcoreError

    ap = argparse.ArgumentParser(prog="python -m simcore.calibration.host_trace", description=main.__doc__)
    ap.add_argument("--ddp", nargs="+", required=True, metavar="TRACE", help="profiled DDP ranks' traces")
    ap.add_argument("-o", "--out", required=True, help="CSV to write (.gz: compressed)")
    args = ap.parse_args(argv)
    rows = []
    try:
        for p in args.ddp:
            h = ddp_hooks(analyze(read_trace(p)))
            if h is None:
                print(f"error: {p}: no DDP reducer hooks or bucket all-reduces in the trace", file=sys.stderr)
                return 2
            rows.append(h.row())
    except SimcoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        with (
            gzip.open(args.out, "wt", newline="")
            if args.out.endswith(".gz")
            else open(args.out, "w", newline="")
        ) as f:
            w = csv.DictWriter(f, fieldnames=list(DDP_HOOK_COLUMNS))
            w.writeheader()
            for r in rows:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    except OSError as e:
        print(f"error: {args.out}: cannot write ({e.strerror})", file=sys.stderr)
        return 2
    for r in rows:
        print(
            f"{r['trace']}: {r['params_per_step']:.0f} gradients / {r['buckets_per_step']:.0f} buckets per step, "
            f"{r['per_param_s'] * 1e6:.1f} us per gradient, {r['per_bucket_s'] * 1e6:.1f} us per bucket"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
