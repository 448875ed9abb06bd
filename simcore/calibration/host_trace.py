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
