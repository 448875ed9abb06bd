"""Mamba-2's kernels on one GPU, forward and backward: the SSD scan, the decode state update, the causal
conv1d fallback and the gated group RMSNorm, as mamba_ssm runs them.

* ``scan``: ``mamba_chunk_scan_combined`` (``mamba_ssm/ops/triton/ssd_combined.py``: ``_chunk_cumsum``,
  ``_chunk_state``, ``_state_passing``, ``_bmm_chunk`` (``C B^T``), ``_chunk_scan`` with the ``D`` skip and
  the ``silu(z)`` gate; the backward recomputes the cumsum, ``C B^T``, the chunk states and their passing),
  ``dt`` with its bias and softplus, bf16 inputs, fp32 ``A``, ``D``, ``dt_bias``, at the per-rank shapes of
  the hybrid presets (Nemotron-H 8B / 56B, Nemotron 3 Nano, Mamba-2 2.7B), sequence, batch and chunk sweeps;
* ``state_update``: ``selective_state_update`` (one decode token a sequence over each head's ``P x N``
  state; ``A``, ``dt``, ``D``, ``dt_bias`` broadcast over the head's channels as ``Mamba2.step`` passes them),
  batch 1-256;
* ``conv1d``: the convolution as ``Mamba2`` runs it without the causal_conv1d CUDA extension
  (``nn.Conv1d(groups=channels, padding=K-1)``, the last ``K-1`` outputs dropped, SiLU), ``b l d`` in and out;
* ``gated_rmsnorm``: ``layernorm_gated.rmsnorm_fn`` (``norm_before_gate=False``, ``group_size = d_inner /
  G``: Megatron-Core's ``MambaMixer`` norm) over ``(tokens, d_inner)`` with ``z``.

Each row: the median seconds per call over 5 repeats of back-to-back calls (CUDA events; each repeat
sized to ~20 ms) after warm-ups (the warm-ups run Triton's autotuning); ``fwd_bwd_s`` is the forward and
``torch.autograd.grad`` of all inputs (no gradient accumulation kernels); ``graph_s`` (``state_update``) the
median per call of 20 calls captured in one CUDA graph (device time, as a graphed decode step runs it). ``--profile`` records, for the
first case of each op, every kernel's device time per call under torch.profiler (``*_kernels.csv.gz``).
Rows are written as they are measured; cases are skipped once ``--budget-s`` has passed.

mamba_ssm is not a dependency of simcore: put a folder holding its ``mamba_ssm/ops/triton`` modules,
``utils/torch.py``, ``utils/determinism.py`` (and an ``__init__.py`` that imports nothing) on
``PYTHONPATH``; einops must be importable. ``--smoke`` runs tiny shapes, on the CPU under
``TRITON_INTERPRET=1`` where no GPU is present. ``--plan-only`` writes the planned rows (shapes, no times)
and exits: ``python -m simcore.validation ssd`` predicts them.

  python tools/bench_ssd.py --out ssd/ssd.csv [--smoke] [--budget-s 300] [--profile] [--plan-only]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import statistics
import sys
import time
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, env_info, log, sync, time_eager, time_graph  # noqa: E402

COLS = ["op", "case", "batch", "seq", "heads", "head_dim", "state", "groups", "chunk", "channels", "width",
        "fwd_s", "fwd_bwd_s", "fwd_spread", "fwd_bwd_spread", "n", "graph_s", "error"]
KCOLS = ["op", "case", "phase", "kernel", "calls", "time_s"]

# (model, heads, head_dim, state, groups, chunk) of one rank (TP 1 unless named)
MODELS = {
    "nemotron-h-8b": (128, 64, 128, 8, 128),
    "nemotron3-nano": (64, 64, 128, 8, 128),
    "mamba2-2.7b": (80, 64, 128, 1, 256),
    "nemotron-h-56b-tp8": (32, 64, 256, 1, 128),
}
CONV_K = 4


def scan(case: str, model: str, b: int, s: int, chunk: int | None = None) -> dict:
    h, p, n, g, q = MODELS[model]
    return dict(op="scan", case=case, batch=b, seq=s, heads=h, head_dim=p, state=n, groups=g, chunk=chunk or q)


def state_update(model: str, b: int) -> dict:
    h, p, n, g, _q = MODELS[model]
    return dict(op="state_update", case=f"{model}-b{b}", batch=b, seq=1, heads=h, head_dim=p, state=n, groups=g)


def conv1d(model: str, b: int, s: int) -> dict:
    h, p, n, g, _q = MODELS[model]
    return dict(op="conv1d", case=f"{model}-b{b}-s{s}", batch=b, seq=s, heads=h, head_dim=p, state=n, groups=g,
                channels=h * p + 2 * g * n, width=CONV_K)


def norm(model: str, b: int, s: int) -> dict:
    h, p, n, g, _q = MODELS[model]
    return dict(op="gated_rmsnorm", case=f"{model}-b{b}-s{s}", batch=b, seq=s, heads=h, head_dim=p, state=n,
                groups=g, channels=h * p)


def plan(smoke: bool) -> list[dict]:
    """The cases in the order they run (the most wanted first, since the budget may cut the tail)."""
    if smoke:
        MODELS["smoke"] = (4, 16, 16, 2, 16)
        return [scan("smoke", "smoke", 1, 64), state_update("smoke", 2), conv1d("smoke", 1, 64),
                norm("smoke", 1, 64)]
    return [
        scan("nemotron-h-8b-s8192", "nemotron-h-8b", 1, 8192),
        *(state_update("nemotron-h-8b", b) for b in (1, 8, 32, 64, 128, 256)),
        norm("nemotron-h-8b", 1, 8192),
        conv1d("nemotron-h-8b", 1, 8192),
        scan("nemotron3-nano-s8192", "nemotron3-nano", 1, 8192),
        scan("mamba2-2.7b-b4-s2048", "mamba2-2.7b", 4, 2048),
        scan("nemotron-h-8b-s2048", "nemotron-h-8b", 1, 2048),
        scan("nemotron-h-8b-s4096", "nemotron-h-8b", 1, 4096),
        scan("nemotron-h-8b-b2-s8192", "nemotron-h-8b", 2, 8192),
        scan("nemotron-h-8b-b4-s2048", "nemotron-h-8b", 4, 2048),
        scan("nemotron-h-8b-s8192-c256", "nemotron-h-8b", 1, 8192, chunk=256),
        scan("nemotron3-nano-s8192-c256", "nemotron3-nano", 1, 8192, chunk=256),
        *(state_update("nemotron3-nano", b) for b in (1, 64, 256)),
        norm("nemotron3-nano", 1, 8192),
        conv1d("nemotron3-nano", 1, 8192),
        norm("mamba2-2.7b", 4, 2048),
        conv1d("mamba2-2.7b", 4, 2048),
        scan("mamba2-2.7b-b1-s8192", "mamba2-2.7b", 1, 8192),
        scan("nemotron-h-56b-tp8-s8192", "nemotron-h-56b-tp8", 1, 8192),
    ]


def make(c: dict, dev: torch.device):
    """(forward, forward + backward) closures of one case on fresh random inputs."""
    bf = dict(device=dev, dtype=torch.bfloat16)
    f32 = dict(device=dev, dtype=torch.float32)
    b, s = c["batch"], c["seq"]
    if c["op"] == "scan":
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined

        h, p, n, g, q = c["heads"], c["head_dim"], c["state"], c["groups"], c["chunk"]
        x = torch.randn(b, s, h, p, **bf)
        z = torch.randn(b, s, h, p, **bf)
        dt = torch.randn(b, s, h, **bf)
        B = torch.randn(b, s, g, n, **bf)
        C = torch.randn(b, s, g, n, **bf)
        A = -torch.empty(h, **f32).uniform_(1.0, 16.0)  # Mamba2's A_init_range
        D = torch.ones(h, **f32)
        dt_bias = torch.rand(h, **f32)
        ins = [x, z, dt, B, C, A, D, dt_bias]
        for t in ins:
            t.requires_grad_(True)

        def run():
            return mamba_chunk_scan_combined(x, dt, A, B, C, q, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)

        grad = torch.randn(b, s, h, p, **bf)
    elif c["op"] == "state_update":
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update

        h, p, n, g = c["heads"], c["head_dim"], c["state"], c["groups"]
        state = torch.randn(b, h, p, n, **bf)
        x = torch.randn(b, h, p, **bf)
        dt = torch.randn(b, h, **bf).unsqueeze(-1).expand(b, h, p)
        A = -torch.rand(h, **f32)[:, None, None].expand(h, p, n)
        B = torch.randn(b, g, n, **bf)
        C = torch.randn(b, g, n, **bf)
        D = torch.ones(h, **f32)[:, None].expand(h, p)
        dt_bias = torch.rand(h, **f32)[:, None].expand(h, p)
        z = torch.randn(b, h, p, **bf)

        def step():
            return selective_state_update(state, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, dt_softplus=True)

        return step, None
    elif c["op"] == "conv1d":
        ch, k = c["channels"], c["width"]
        conv = torch.nn.Conv1d(ch, ch, k, groups=ch, padding=k - 1, **bf)
        xbc = torch.randn(b, s, ch, **bf, requires_grad=True)
        ins = [xbc, conv.weight, conv.bias]

        def run():
            return torch.nn.functional.silu(conv(xbc.transpose(1, 2)).transpose(1, 2)[:, : -(k - 1)])

        grad = torch.randn(b, s, ch, **bf)
    elif c["op"] == "gated_rmsnorm":
        from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn

        d, g = c["channels"], c["groups"]
        x = torch.randn(b * s, d, **bf, requires_grad=True)
        z = torch.randn(b * s, d, **bf, requires_grad=True)
        w = torch.ones(d, **bf, requires_grad=True)
        ins = [x, z, w]

        def run():
            return rmsnorm_fn(x, w, None, z=z, eps=1e-5, group_size=d // g, norm_before_gate=False)

        grad = torch.randn(b * s, d, **bf)
    else:
        raise ValueError(c["op"])

    def fwd():
        with torch.no_grad():
            return run()

    def fwd_bwd():
        return torch.autograd.grad(run(), ins, grad)

    return fwd, fwd_bwd


def kernels(fn, dev: torch.device, reps: int = 3) -> dict[str, tuple[float, float]]:
    """{kernel name: (calls per call of fn, device seconds per call of fn)} under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    gpu = dev.type == "cuda"  # (on the CPU, --smoke: the CPU ops, so that this code runs there too)
    runs: list[dict[str, list[float]]] = []
    for _ in range(reps):
        with profile(activities=[ProfilerActivity.CUDA if gpu else ProfilerActivity.CPU]) as p:
            fn()
            sync(dev)
        acc: dict[str, list[float]] = {}
        for e in p.events():
            if e.device_type.name == ("CUDA" if gpu else "CPU"):
                a = acc.setdefault(e.name, [0.0, 0.0])
                a[0] += 1
                a[1] += (e.device_time_total if gpu else e.self_cpu_time_total) * 1e-6
        runs.append(acc)
    names = set().union(*runs)
    return {k: (statistics.median(r.get(k, [0, 0])[0] for r in runs),
                statistics.median(r.get(k, [0, 0])[1] for r in runs)) for k in sorted(names)}


def gzip_file(path: str) -> str:
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    return path + ".gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="CSV path (gzipped at the end to <out>.gz)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (CPU under TRITON_INTERPRET=1 if no GPU)")
    ap.add_argument("--budget-s", type=float, default=300.0, help="start no case after this many seconds")
    ap.add_argument("--profile", action="store_true", help="per-kernel times of each op's first case")
    ap.add_argument("--plan-only", action="store_true", help="write the planned rows (no times) and exit")
    a = ap.parse_args()
    t0 = time.perf_counter()
    cases = plan(a.smoke)
    for c in cases:
        print("plan:", " ".join(f"{k}={v}" for k, v in c.items()), flush=True)
    if a.plan_only:
        out = CsvOut(a.out, COLS)
        for c in cases:
            out.row(**c)
        out.close()
        return
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cpu" and not (a.smoke and os.environ.get("TRITON_INTERPRET") == "1"):
        raise SystemExit("bench_ssd: no GPU; only --smoke with TRITON_INTERPRET=1 runs on the CPU")
    if dev.type == "cpu":
        # the interpreter has no benchmarker: one autotune config a kernel (mamba_ssm's deterministic
        # mode); mamba_ssm's wrappers enter ``torch.cuda.device(x.device.index)`` and size grids by the SMs
        os.environ["MAMBA_DETERMINISTIC"] = "1"
        torch.cuda.device = lambda _idx: contextlib.nullcontext()  # type: ignore[assignment]
        torch.cuda.get_device_properties = lambda _d: types.SimpleNamespace(multi_processor_count=4)
    import mamba_ssm
    import triton

    base = os.path.splitext(a.out)[0]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    info = {"suite": "ssd", "args": vars(a), "triton": triton.__version__, "mamba_ssm": mamba_ssm.__version__,
            "mamba_ssm_source": (mamba_ssm.__doc__ or "").strip() or None, **env_info(dev)}
    with open(base + ".manifest.json", "w") as fh:
        json.dump(info, fh, indent=1)
    log("env", info)
    out = CsvOut(a.out, COLS)
    kout = CsvOut(base + "_kernels.csv", KCOLS) if a.profile else None
    profiled: set[str] = set()
    target = 1e-4 if dev.type == "cpu" else 0.02
    for c in cases:
        if time.perf_counter() - t0 > a.budget_s:
            log(f"budget reached: {c['op']} {c['case']} skipped")
            continue
        t1 = time.perf_counter()
        try:
            fwd, fwd_bwd = make(c, dev)
            tf, nf, sf = time_eager(fwd, dev, target=target, warmup=3)
            tb = sb = None
            if fwd_bwd is not None:
                tb, _nb, sb = time_eager(fwd_bwd, dev, target=target, warmup=3)
            # a decode step's kernels replay in a CUDA graph (vLLM): device time without Triton's launch
            tg = time_graph(fwd, dev, 20) if c["op"] == "state_update" and dev.type == "cuda" else None
        except Exception as e:  # noqa: BLE001  (one failing case must not cost the run's other rows)
            log(f"{c['op']} {c['case']} failed: {type(e).__name__}: {str(e)[:300]}")
            out.row(**c, error=f"{type(e).__name__}: {str(e)[:200]}")
            continue
        out.row(**c, fwd_s=tf, fwd_bwd_s=tb, fwd_spread=sf, fwd_bwd_spread=sb, n=nf, graph_s=tg)
        msg = f"{c['op']} {c['case']}: fwd {tf * 1e6:.1f} us"
        msg += f", fwd+bwd {tb * 1e6:.1f} us" if tb is not None else ""
        msg += f", graph {tg * 1e6:.1f} us" if tg is not None else ""
        log(f"{msg} ({time.perf_counter() - t1:.0f} s)")
        if kout is not None and c["op"] not in profiled:
            profiled.add(c["op"])
            for phase, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
                if fn is None:
                    continue
                try:
                    for k, (calls, t) in kernels(fn, dev).items():
                        kout.row(op=c["op"], case=c["case"], phase=phase, kernel=k, calls=calls, time_s=t)
                except Exception as e:  # noqa: BLE001
                    log(f"profile of {c['case']} {phase} failed: {type(e).__name__}: {str(e)[:300]}")
        del fwd, fwd_bwd
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    out.close()
    gzip_file(a.out)
    if kout is not None:
        kout.close()
        gzip_file(base + "_kernels.csv")
    log(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
