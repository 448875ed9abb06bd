"""Small shared helpers for the collection scripts: timing, incremental CSV, environment info."""

from __future__ import annotations

import csv
import gzip
import os
import platform
import statistics
import subprocess
import sys
import time

import torch


def fp8_gemm(m: int, n: int, k: int, dev: torch.device, scaling: str = "row"):
    """An FP8 GEMM call, as the sweeps build it: ``torch._scaled_mm`` of e4m3 ``A[m,k]`` and column-major
    ``B[k,n]`` (as ``_scaled_mm`` wants), bf16 out, with row-wise fp32 scales (``scaling="row"``:
    ``scaled_mm_e4m3_rowwise``) or one per tensor (``"tensor"``: ``scaled_mm_e4m3_tensorwise``, cuBLASLt's
    per-tensor FP8 GEMM, TensorRT-LLM's FP8 linear layers). Returns (the call, its kernel family's name)."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        raise RuntimeError("no fp8")
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    if scaling == "row":
        sa = torch.rand(m, 1, device=dev, dtype=torch.float32) + 0.5
        sb = torch.rand(1, n, device=dev, dtype=torch.float32) + 0.5
        name = "scaled_mm_e4m3_rowwise"
    else:
        sa = torch.tensor(1.0, device=dev)
        sb = torch.tensor(1.0, device=dev)
        name = "scaled_mm_e4m3_tensorwise"
    return (lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)), name


def log(*a) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


class CsvOut:
    """CSV written and flushed row by row, so a killed run keeps what it measured."""

    def __init__(self, path: str, cols: list[str]):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.cols = cols
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=cols)
        self.w.writeheader()
        self.f.flush()
        self.n = 0

    def row(self, **kw) -> None:
        bad = set(kw) - set(self.cols)
        if bad:
            raise KeyError(f"unknown columns {bad}")
        out = {}
        for c in self.cols:
            v = kw.get(c, "")
            if v is None:
                v = ""
            elif isinstance(v, bool):
                v = int(v)
            elif isinstance(v, float):
                v = f"{v:.6g}"
            out[c] = v
        self.w.writerow(out)
        self.f.flush()
        self.n += 1

    def close(self) -> None:
        self.f.close()


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(fn, n: int, dev: torch.device) -> float:
    """Seconds per call of fn, averaged over n back-to-back calls (CUDA events on GPU)."""
    if dev.type == "cuda":
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3 / n
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def run_for(fn, seconds: float, dev: torch.device, batch: int = 10) -> None:
    """Call fn back to back for about ``seconds`` (batches of ``batch``, synchronizing between), so
    that a power-capped GPU settles into its sustained state before a measurement."""
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        for _ in range(batch):
            fn()
        sync(dev)


def time_eager(fn, dev: torch.device, target: float = 0.01, max_iters: int = 2000, reps: int = 5,
               warmup: int = 2) -> tuple[float, int, float]:
    """Warm up, estimate, then `reps` repeats of n calls sized to take ~target seconds each.

    Returns (median seconds per call, n calls per repeat, relative spread (max-min)/median)."""
    for _ in range(warmup):
        fn()
    sync(dev)
    t1 = measure(fn, 1, dev)
    n = max(1, min(max_iters, int(target / max(t1, 1e-7))))
    if t1 * n > 0.15:
        reps = min(reps, 3)
    ts = [measure(fn, n, dev) for _ in range(reps)]
    med = statistics.median(ts)
    return med, n, (max(ts) - min(ts)) / med if med > 0 else 0.0


def time_graph(fn, dev: torch.device, n_inner: int, reps: int = 5) -> float:
    """Capture n_inner back-to-back calls of fn in one CUDA graph; median seconds per call over replays."""
    assert dev.type == "cuda"
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n_inner):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3 / n_inner)
    del g
    return statistics.median(ts)


def save_trace(prof, path: str) -> None:
    """Write a torch.profiler's Chrome trace to ``path`` (gzip; ``path`` ends in ``.json.gz``)."""
    tmp = path[: -len(".gz")]
    prof.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.open(path, "wb", compresslevel=9) as g:
        g.write(f.read())
    os.remove(tmp)


def sh(cmd: str, timeout: int = 30) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout).stdout
    except Exception as e:  # noqa: BLE001
        return f"<{cmd} failed: {e}>"


def env_info(dev: torch.device) -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    try:
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        info["nccl"] = None
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        info.update(gpu=p.name, sm_count=p.multi_processor_count, gpu_mem_bytes=p.total_memory,
                    capability=f"{p.major}.{p.minor}",
                    l2_bytes=getattr(p, "L2_cache_size", None))
        info["driver"] = sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader").strip()
    return info


def token_batch(dev: torch.device, rank: int, vocab: int, mb: int, seq: int, seed: int = 1234) -> torch.Tensor:
    """Random token ids of shape ``(mb, seq)`` on ``dev``, seeded ``seed + rank`` (each rank its own batch)."""
    g = torch.Generator(device=dev).manual_seed(seed + rank)
    return torch.randint(0, vocab, (mb, seq), device=dev, generator=g)


def train_step(model, opt, x, ac):
    """One eager training step of a GPT taking ``x`` as input and target: forward under ``ac`` (autocast),
    backward, optimizer step, gradients set to None."""

    def step():
        with ac:
            loss = model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def capture_graph(fn, warmup: int = 3) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of one call of ``fn``, captured after ``warmup`` calls on a side stream (as
    PyTorch's CUDA-graph recipe asks); replay it with ``.replay()``."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def profile(step, n: int, acts, path: str, one_step: bool = False, **options) -> None:
    """``n`` calls of ``step`` under ``torch.profiler`` (``record_shapes=True`` unless ``options`` say
    otherwise: ``with_stack``, ``profile_memory``), the last two recorded, written to ``path``
    (``tools/bench_hf.py``, ``bench_user_models.py``, ``bench_user_infer.py``).
    ``one_step``: as a user who profiles one step does: two more steps unprofiled (no host wait after
    them), then one step in a ``with profile(...)`` block, no schedule, no ``prof.step()`` (no
    ``ProfilerStep`` annotation)."""
    from torch.profiler import profile as prof_
    from torch.profiler import schedule

    options = {"record_shapes": True, **options}
    if one_step:
        for _ in range(2):
            step()
        with prof_(activities=acts, **options) as p:
            step()
        save_trace(p, path)
        return
    with prof_(activities=acts, schedule=schedule(wait=1, warmup=1, active=2, repeat=1), **options) as p:
        for _ in range(n):
            step()
            p.step()
    save_trace(p, path)
