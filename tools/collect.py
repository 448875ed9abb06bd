"""The one entry point of the GPU measurements: named suites, each running one bench script of tools/.

    python tools/collect.py --list                       # every suite: what it measures, its script, default args
    python tools/collect.py SUITE [--out DIR] [--smoke] [--timeout S] [--gpus N] [--runs N] [--env K=V]... [ARGS...]
    python tools/collect.py SUITE --dry-run [ARGS...]    # print the command and the manifest, run nothing
    python tools/collect.py merge-host-median RUN.csv... --out F   # host-infer-median's merge (no torch)

A suite is a row of ``SUITES`` below: the bench script it runs, its default arguments, how many GPUs it needs
(more than one: ``torchrun --standalone --nproc_per_node N``) and, for suites measured as the median of
independent processes, how many runs and which script merges them. ARGS after the suite name are appended to
the default arguments (argparse keeps the last value of an option, so ``--set r99`` overrides a default
``--set``). ``{out}`` in an argument is the output folder, ``{run}`` the run number (1..runs).

Every run writes into ``--out`` (default ``$TMPDIR/simcore_collect/SUITE``):
  - the bench script's own outputs (CSVs are gzipped at the end, written row by row so a killed run keeps data);
  - ``SUITE.log``: the script's stdout and stderr;
  - ``env.txt``: ``nvidia-smi`` (clocks, power, topology) before and after the run;
  - ``dmon.txt``: ``nvidia-smi dmon -s pucm`` during the run (power, temperature, SM / memory clocks);
  - ``manifest.json``: suite, script, command, arguments, GPU, driver, CUDA / cuDNN / NCCL / torch /
    transformers versions, simcore git commit, start and end time, exit status and the files written.
    It is written before the run (``"rc": null``) and rewritten after it.

Everything measured needs torch and an NVIDIA GPU; ``--list`` and ``--dry-run`` need neither. NVLink multicast
stays off (``NCCL_NVLS_ENABLE=0`` and the like, this workplace's rule for its multi-GPU machines). Commit a result
set under ``traces/<gpu>/<name>/`` with its ``manifest.json``; ``traces/README.md`` says how the older sets were
made. The timing method every script shares is in ``tools/benchutil.py``; the models are ``tools/gpt.py``'s.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import glob
import gzip
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent

# this workplace's multi-GPU machines: NVLink multicast off
BASE_ENV = {
    "PYTHONUNBUFFERED": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class Split:
    """Rows of the CSV ``src`` for which ``where(row)`` holds move to the CSV ``dst``, with the columns
    ``columns`` (new name, old name; default: every column, ``kind`` renamed ``op`` so that no calibration reads them
    as a sweep's rows)."""

    src: str
    dst: str
    where: Callable[[dict[str, str]], bool]
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Suite:
    measures: str
    script: str  # a file of tools/
    args: tuple[str, ...] = ()
    gpus: int = 1  # > 1: torchrun
    runs: int = 1  # independent processes; {run} in args numbers them
    merge: tuple[str, ...] = ()  # a tools/ script and its args, run after the runs (medians over processes)
    env: dict[str, str] = field(default_factory=dict)
    splits: tuple[Split, ...] = ()  # rows moved to a file of their own after the run


# bench_ops.py's CSV layout
OP_COLS = ("kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal",
           "backward", "name", "bytes", "time_s", "flops", "framework")  # fmt: skip

S = Suite
SUITES: dict[str, Suite] = {
    # --- kernels and ops (the compute profile's sweeps, simcore calibrate's inputs)
    "ops": S(
        "GEMMs (every dtype), attention, memory-bound ops, optimizer, launch overhead: the op sweep",
        "bench_ops.py",
        ("--out", "{out}/ops.csv", "--env-json", "{out}/ops_env.json"),
    ),
    "cold": S(
        "decode-regime kernels hot vs cold (L2 flushed) in CUDA graphs",
        "bench_cold.py",
        ("--out", "{out}/cold.csv"),
    ),
    "elementwise": S(
        "mixed-dtype (unrolled) and strided elementwise kernels, and the plain ops of the same run",
        "bench_elementwise.py",
        ("--out", "{out}/elementwise.csv", "--ref", "{out}/elementwise_plain.csv"),
    ),
    "eager-ops": S(
        "elementwise ops of written-out attention and norms (scalar, broadcast operands), softmax fwd/bwd",
        "bench_eager_ops.py",
        ("--out", "{out}/eager_ops.csv"),
    ),
    "norm-ops": S(
        "LayerNorm / RMSNorm forward and backward, the loss's log-softmax, at training shapes; the embedding's "
        "rows split out in their own layout",
        "bench_norm_ops.py",
        ("--out", "{out}/norm_ops.csv"),
        splits=(
            Split(
                "norm_ops.csv",
                "embedding_ops.csv",
                lambda r: r["name"] == "embedding",
                (
                    ("op", "name"),
                    ("dtype", "dtype"),
                    ("tokens", "m"),
                    ("hidden", "n"),
                    ("vocab", "k"),
                    ("backward", "backward"),
                    ("bytes", "bytes"),
                    ("seconds", "time_s"),
                    ("timing", "framework"),
                ),
            ),
        ),
    ),
    "attention": S(
        "cuDNN and FlashAttention-2 SDPA kernels: causal / full / mask / dropout, fwd and bwd, "
        "training, prefill and decode shapes; --set efficient | short | kvlen for the other sweeps",
        "bench_attention.py",
        ("--out", "{out}/attention.csv", "--choice", "{out}/sdpa_choice.csv"),
    ),
    "attention-efficient": S(
        "PyTorch's memory-efficient attention kernels, fp32 and bf16 (K/V repeated to every head)",
        "bench_attention.py",
        ("--set", "efficient", "--out", "{out}/attention_efficient.csv"),
    ),
    "attention-one-query": S(
        "cuDNN attention at one query (decode) and short sequences over many sequences and heads; "
        "the masked one-query rows over repeated heads (a kernel family of their own) split out",
        "bench_attention.py",
        ("--set", "short", "--out", "{out}/attention_short.csv"),
        splits=(
            Split(
                "attention_short.csv",
                "attention_masked_decode.csv",
                lambda r: r["name"] == "sdpa_cudnn_mask" and r["seq"] == "1" and r["heads"] == r["kv_heads"],
                tuple((c, c) for c in OP_COLS),
            ),
        ),
    ),
    "attention-kvlen": S(
        "cuDNN one-query attention against the KV length",
        "bench_attention.py",
        ("--set", "kvlen", "--out", "{out}/attention_kvlen.csv"),
    ),
    "attention-compiled": S(
        "a static-cache decode layer's attention eager and under torch.compile "
        "(--variants: the mask and neighbouring shapes)",
        "bench_attention_compiled.py",
        ("--out", "{out}/attention_compiled.csv"),
    ),
    "gemm-align": S(
        "GEMMs whose row strides are not 16-byte multiples beside aligned twins, CUDA-graph kernel times",
        "bench_gemm_align.py",
        ("--out", "{out}/gemm_align.csv"),
    ),
    "gemm-kernels": S(
        "the op sweep's non-fp8 GEMM shapes timed by their kernels' own durations (profiler); "
        "--ops names the sweep whose shapes it re-times",
        "bench_gemm_kernels.py",
        ("--ops", "traces/h200/ops.csv.gz", "--out", "{out}/gemm_kernels.csv"),
    ),
    "trace-gemms": S(
        "the GEMMs of profiler traces (positional args) re-timed alone",
        "bench_trace_gemms.py",
        (
            "--top",
            "8",
            "--out",
            "{out}/trace_gemms.csv",
            "traces/h200/profile_train_llama-1b_s2048_b4_eager.json.gz",
            "traces/h200/profile_train_gpt-125m_s1024_b8_eager.json.gz",
            "traces/h200/profile_infer_llama-1b-infer_b8_p1024.json.gz",
            "traces/h200/profile_train_gpt_gelu_ln.json.gz",
        ),
    ),
    "insitu": S(
        "kernels in their in-step form: GEMM time vs GEMM duty, SwiGLU parts strided vs contiguous, casts",
        "bench_insitu.py",
        ("--out", "{out}/insitu.csv"),
    ),
    "optimizer": S(
        "torch.optim.AdamW on bf16 parameters, fused and foreach; the fp32 rows measured beside them (a reference) "
        "split out",
        "bench_optimizer.py",
        ("--out", "{out}/optimizer_bf16.csv"),
        splits=(Split("optimizer_bf16.csv", "optimizer_fp32_ref.csv", lambda r: r["name"].endswith("_ref")),),
    ),
    "embedding-bwd": S(
        "aten::embedding_dense_backward under the profiler, kernel time by group",
        "bench_embedding_bwd.py",
        ("--out", "{out}/embedding_bwd.csv"),
    ),
    "moe": S(
        "one MoE layer (router, top-k, permutation, grouped GEMMs) at 1k-32k tokens, and its profiled kernels",
        "bench_moe.py",
        ("--out", "{out}/moe.csv", "--profile-dir", "{out}"),
    ),
    "power": S(
        "board power and SM clock of HBM-streaming memory-bound kernels (--set gemm_dtypes: back-to-back "
        "GEMMs of each dtype); read with dmon.txt",
        "bench_mem_power.py",
        ("--seconds", "6"),
    ),
    # --- whole steps (validation's measured runs, and profiled traces)
    "steps": S(
        "training steps, prefills and decode steps of tools/gpt.py's models, and profiled traces",
        "bench_steps.py",
        ("--out", "{out}/steps.csv", "--configs-json", "{out}/steps_configs.json", "--profile-dir", "{out}"),
    ),
    "compiled-steps": S(
        "training steps under torch.compile beside their eager twins (--names: the configs)",
        "bench_steps.py",
        (
            "--compile",
            "--only",
            "train",
            "--out",
            "{out}/compiled_steps.csv",
            "--configs-json",
            "{out}/steps_configs.json",
        ),
    ),
    "profiles": S(
        "full-size profiled steps (--profile-names TRAIN,..., --profile-infer MODEL:BATCH:PROMPT), "
        "eager and compiled",
        "bench_steps.py",
        (
            "--compile",
            "--only",
            "profiles",
            "--out",
            "{out}/profiles_unused.csv",
            "--profile-names",
            "gpt-125m,llama-1b",
            "--profile-infer",
            "llama-1b-infer:8:1024",
            "--profile-dir",
            "{out}",
            "--configs-json",
            "{out}/profiles_configs.json",
        ),
    ),
    "graph-trace": S(
        "profiler trace of CUDA-graph decode replays", "bench_graph_trace.py", ("--out-dir", "{out}")
    ),
    "ref-decode": S(
        "a profiled prefill + decode of tools/gpt.py's GPT block with its preallocated KV cache",
        "bench_ref_decode.py",
        ("--out", "{out}/profile_infer_gpt_gelu_decode.json.gz"),
    ),
    "hf": S(
        "Hugging Face transformers twins: profiled training, inference and generate() runs of a named set "
        "(--set: fit, generate_fit, r99, h100_twins, ... see bench_hf.py's SETS)",
        "bench_hf.py",
        ("--set", "fit", "--outdir", "{out}"),
    ),
    "user-models": S(
        "profiled training written the way users write it (nanoGPT, encoders, Llama; --set r75)",
        "bench_user_models.py",
        ("--outdir", "{out}"),
    ),
    "user-infer": S(
        "profiled decode loops written by users (KV cache by torch.cat; --set r78, r79, ...)",
        "bench_user_infer.py",
        ("--outdir", "{out}"),
    ),
    "generate-insitu": S(
        "what a large-batch compiled static-cache generate() does: SDPA inputs in situ "
        "(--part rerecord: CUDA-graph re-recording)",
        "bench_generate_insitu.py",
        ("--part", "sdpa", "--outdir", "{out}"),
    ),
    "serving": S(
        "a Llama-shaped model served under load (issue 41): the reference static-cache CUDA-graph engine and "
        "transformers' continuous batching, Poisson / bursty arrivals at scenarios/served/'s rates, per request",
        "bench_serving.py",
        ("--out", "{out}"),
    ),
    # --- host (CPU) time
    "host": S(
        "eager host time per layer, training (--infer: inference; --profiled: under the profiler)",
        "bench_host.py",
        ("--out", "{out}/host.csv"),
    ),
    "host-infer-median": S(
        "inference host time per layer, the median over independent processes",
        "bench_host.py",
        ("--infer", "--out", "{out}/host_infer_run{run}.csv"),
        runs=7,
        merge=(
            "collect.py",
            "merge-host-median",
            "{out}/host_infer_run*.csv",
            "--out",
            "{out}/host_infer_median.csv.gz",
        ),
    ),
    "host-size": S(
        "eager host time per layer vs layer width, interleaved in one process, several processes",
        "bench_host_size.py",
        ("--run", "{run}", "--out", "{out}/host_size_run{run}.csv"),
        runs=5,
    ),
    "host-pace": S(
        "host time per layer of a profiled GPT-2-small step vs micro-batch, vocab, sync, optimizer, "
        "with a per-op CPU speed probe",
        "bench_host_pace.py",
        ("--passes", "3", "--out", "{out}/host_pace.csv"),
    ),
    "host-steps": S(
        "whole profiled training steps and decode passes for the host model (--set r25 | r40 | r42 | r47 | r48)",
        "bench_host_steps.py",
        ("--passes", "2", "--outdir", "{out}"),
    ),
    "host-compiled": S(
        "host time per layer, compiled vs eager, with and without the profiler (--widths HIDDEN:SEQ:MB,...)",
        "bench_compiled_host.py",
        ("--passes", "5", "--out", "{out}/host_compiled.csv"),
    ),
    "host-compiled-steps": S(
        "profiled torch.compile steps beside eager ones, with the compiled region's CPU probe",
        "bench_compiled_steps.py",
        ("--set", "r30", "--outdir", "{out}"),
    ),
    "graph-sync": S(
        "CUDA-graph decode loops: a synchronize every R replays, with and without the profiler",
        "bench_graph_sync.py",
        ("--outdir", "{out}"),
    ),
    # --- several GPUs (torchrun)
    "nccl": S("NCCL collectives over message sizes", "bench_comm.py", ("--out", "{out}/nccl.csv"), gpus=2),
    "parallel": S(
        "single / DDP / TP / PP / FSDP training steps, and profiled ranks (--profile-strategies)",
        "bench_parallel.py",
        ("--out", "{out}/parallel.csv", "--profile-dir", "{out}"),
        gpus=2,
    ),
    "overlap": S(
        "compute kernels alone and beside NCCL all-reduces on another stream",
        "bench_overlap.py",
        ("--out", "{out}/overlap.csv"),
        gpus=2,
    ),
    "dist-steps": S(
        "whole profiled steps under DDP / FSDP2 / TP and plain replicas, every rank",
        "bench_dist_steps.py",
        ("--outdir", "{out}"),
        gpus=2,
    ),
    "host-dist": S(
        "host time per layer of the distributed wrappers (DDP, FSDP2, TP)",
        "bench_host.py",
        ("--dist", "--passes", "2", "--dist-timeout", "60", "--out", "{out}/host_dist.csv"),
        gpus=2,
    ),
    "host-pace-dist": S(
        "profiled host pace per layer under DDP / FSDP2 / TP=2 with the CPU speed probe, every rank",
        "bench_host_pace_dist.py",
        ("--passes", "3", "--out", "{out}/host_pace_dist.csv"),
        gpus=2,
    ),
    "dist-units": S(
        "host per DDP bucket, FSDP2 group and pipelining action (unprofiled, host-bound steps); any GPU count",
        "bench_dist_steps.py",
        ("--units", "{out}/host_dist_units.csv"),
        gpus=2,
    ),
    "hf-ddp": S(
        "Hugging Face transformers training under DDP, every rank profiled (--set r39 | r68)",
        "bench_hf.py",
        ("--set", "r39", "--outdir", "{out}"),
        gpus=2,
    ),
}
del S


def supports_smoke(suite: Suite) -> bool:
    """Whether the suite's script takes ``--smoke`` (a tiny run, on the CPU where it can, to test the harness)."""
    return '"--smoke"' in (TOOLS / suite.script).read_text(encoding="utf-8")


def _fill(args: tuple[str, ...] | list[str], out: Path, run: int) -> list[str]:
    return [a.replace("{out}", str(out)).replace("{run}", str(run)) for a in args]


def commands(
    name: str, out: Path, extra: list[str], smoke: bool, gpus: int | None, runs: int | None
) -> list[list[str]]:
    """The command lines the suite runs, in order: one per run, then the merge (if any)."""
    suite = SUITES[name]
    n_gpus = gpus or suite.gpus
    launcher = [sys.executable] if n_gpus == 1 else ["torchrun", "--standalone", f"--nproc_per_node={n_gpus}"]
    script = f"tools/{suite.script}"  # run from the repository root
    cmds = []
    for run in range(1, (runs or suite.runs) + 1):
        cmds.append(
            launcher + [script] + _fill(suite.args, out, run) + (["--smoke"] if smoke else []) + extra
        )
    if suite.merge:
        cmds.append([sys.executable, f"tools/{suite.merge[0]}"] + _fill(suite.merge[1:], out, 0))
    return cmds


def _run_text(cmd: list[str], timeout: float = 30) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


_VERSIONS = """
import json, sys
v = {"python": sys.version.split()[0]}
try:
    import torch
    v.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    try:
        v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
except ImportError:
    pass
try:
    import transformers
    v["transformers"] = transformers.__version__
except ImportError:
    pass
print(json.dumps(v))
"""


def environment() -> dict[str, object]:
    """GPU names, driver and library versions of this machine (None where there is no GPU or no torch)."""
    smi = (
        _run_text(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
        if shutil.which("nvidia-smi")
        else None
    )
    gpus = [line.split(",")[0].strip() for line in smi.splitlines()] if smi else []
    versions = json.loads(_run_text([sys.executable, "-c", _VERSIONS], timeout=120) or "{}")
    return {
        "gpu": gpus[0] if gpus else None,
        "gpu_count": len(gpus),
        "driver": smi.splitlines()[0].split(",")[1].strip() if smi else None,
        "cuda": versions.get("cuda"),
        "cudnn": versions.get("cudnn"),
        "nccl": versions.get("nccl"),
        "torch": versions.get("torch"),
        "transformers": versions.get("transformers"),
        "python": versions.get("python", platform.python_version()),
        "host": platform.node(),
        "cpus": os.cpu_count(),
    }


ENV_KEYS = (
    "gpu",
    "gpu_count",
    "driver",
    "cuda",
    "cudnn",
    "nccl",
    "torch",
    "transformers",
    "python",
    "host",
    "cpus",
)


@functools.lru_cache(maxsize=1)
def git_commit() -> dict[str, object]:
    """The simcore commit the scripts ran from, and whether the work tree had changes."""
    head = _run_text(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    status = _run_text(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": head, "dirty": bool(status) if status is not None else None}


def manifest(
    name: str, cmds: list[list[str]], extra: list[str], env: dict[str, str], smoke: bool, probe: bool
) -> dict[str, object]:
    suite = SUITES[name]
    return {
        "suite": name,
        "measures": suite.measures,
        "script": f"tools/{suite.script}",
        "args": extra,
        "smoke": smoke,
        "commands": [shlex.join(c) for c in cmds],
        "env": env,
        **(environment() if probe else dict.fromkeys(ENV_KEYS)),
        "simcore": git_commit(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "finished": None,
        "rc": None,
        "files": [],
    }


ENV_COMMANDS = [
    ["nvidia-smi"],
    ["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE,POWER"],
    ["nvidia-smi", "topo", "-m"],
    ["nvidia-smi", "nvlink", "-s"],
    ["nproc"],
    ["lscpu"],
]


def _write_env(path: Path, title: str, cmds: list[list[str]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(f"### {title} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        for c in cmds:
            f.write(f"### {shlex.join(c)}\n{_run_text(c) or '(not available)'}\n")


def apply_split(out: Path, split: Split) -> int:
    """Move the rows of ``split.src`` that ``split.where`` selects into ``split.dst``; returns how many moved."""
    src = out / split.src
    if not src.is_file():
        return 0
    with src.open(newline="") as f:
        reader = csv.DictReader(f)
        cols = list(reader.fieldnames or [])
        rows = list(reader)
    moved = [r for r in rows if split.where(r)]
    columns = split.columns or tuple(("op" if c == "kind" else c, c) for c in cols)
    with (out / split.dst).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([new for new, _ in columns])
        w.writerows([r[old] for _, old in columns] for r in moved)
    with src.open("w", newline="") as f:
        dw = csv.DictWriter(f, fieldnames=cols)
        dw.writeheader()
        dw.writerows(r for r in rows if not split.where(r))
    return len(moved)


def run(
    name: str,
    out: Path,
    cmds: list[list[str]],
    man: dict[str, object],
    env: dict[str, str],
    timeout: float | None,
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    man_path = out / "manifest.json"
    man_path.write_text(json.dumps(man, indent=1) + "\n", encoding="utf-8")
    _write_env(out / "env.txt", "before", ENV_COMMANDS)
    dmon = None
    if shutil.which("nvidia-smi"):
        dmon = subprocess.Popen(
            ["nvidia-smi", "dmon", "-s", "pucm", "-d", "2", "-o", "T"],
            stdout=(out / "dmon.txt").open("w"),
            stderr=subprocess.STDOUT,
        )
    t0, rc = time.time(), 0
    with (out / f"{name}.log").open("a", encoding="utf-8") as log:
        for cmd in cmds:
            cmd = [x for a in cmd for x in ((sorted(glob.glob(a)) or [a]) if "*" in a else [a])]
            log.write(f"### {shlex.join(cmd)}\n")
            log.flush()
            try:
                rc = (
                    subprocess.run(
                        cmd,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=REPO,
                        timeout=timeout,
                        env={**os.environ, **env},
                    ).returncode
                    or rc
                )
            except subprocess.TimeoutExpired:
                rc = 124
            print(f"{name}: {shlex.join(cmd)} -> rc {rc}", flush=True)
    if dmon is not None:
        dmon.terminate()
    _write_env(out / "env.txt", "after", [["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE"]])
    for split in SUITES[name].splits:
        apply_split(out, split)
    for path in out.glob("*.csv"):
        with path.open("rb") as src, gzip.open(f"{path}.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
    man.update(
        finished=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        seconds=round(time.time() - t0, 1),
        rc=rc,
        files=sorted(
            str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
        ),
    )
    man_path.write_text(json.dumps(man, indent=1) + "\n", encoding="utf-8")
    return rc


def list_suites() -> str:
    lines = []
    for name, s in SUITES.items():
        how = f"torchrun x{s.gpus} " if s.gpus > 1 else ""
        runs = (
            f", {s.runs} runs" + (f" merged by tools/{s.merge[0]}" if s.merge else "") if s.runs > 1 else ""
        )
        lines.append(f"{name:20s} {s.measures}\n{'':20s}   {how}tools/{s.script} {shlex.join(s.args)}{runs}")
    return "\n".join(lines)


# --- the median-of-runs merge of host-infer-median (python tools/collect.py merge-host-median RUN.csv... --out F)

HOST_COLS = ["name", "framework", "calls", "host_s_per_call", "gpu_s_per_call", "notes"]
"""tools/bench_host.py's CSV layout."""
HOST_VARIANTS = ("gpt_ln_gelu", "llama_rms_swiglu_gqa")
MERGE_HOST_MEDIAN_DOC = """Median-of-runs merge of several ``tools/bench_host.py --infer`` CSVs (no torch needed):

    python tools/collect.py merge-host-median run1.csv.gz run2.csv.gz ... --out host_infer_r6.csv

Every run's derived quantities are computed from that run's own points only (each run is one process, so runs
are independent samples; a minimum per point across runs would mix them: a 1-layer point from one run and a
4-layer point from another give a slope neither run saw), and the value written is the MEDIAN over runs of
those per-run values; the notes give the interquartile range (statistics.quantiles, method 'inclusive') and
every run's value (traces/README.md, round 6).

Rows written (framework ``derived`` unless said):
  env                                   versions (run 1's) + how merged
  <derived name>                        median over runs (host and gpu columns separately): per_layer_{decode,
                                        prefill}_<v>, per_layer_*_<v>_1to8, {decode,prefill}_fixed_<v>,
                                        per_layer_decode_infmode_<v>, graph_decode_per_layer_<v>(_1to8),
                                        graph_decode_fixed_<v>, graph_decode_per_kernel_<v>
  <measured name>  (framework eager)    median over runs of that point (for reference; derived rows do not use it)
  kernels_*        (framework profiler) run 1's profiler counts (deterministic)
  <derived name>_run<k>                 run k's own derived value
  <measured name>_run<k>                run k's raw row
"""


def _read_csv(path: str) -> list[dict[str, str]]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return list(csv.DictReader(f))


def _f(s: str | None) -> float | None:
    s = (s or "").strip()
    return float(s) if s else None


def host_derived_of_run(rows: list[dict[str, str]]) -> dict[str, tuple[float | None, float | None, str]]:
    """name -> (host, gpu, formula) of one run's derived quantities, from that run's measured points only."""
    host = {r["name"]: _f(r["host_s_per_call"]) for r in rows if r["framework"] == "eager"}
    gpu = {r["name"]: _f(r["gpu_s_per_call"]) for r in rows if r["framework"] == "eager"}
    kpl: dict[str, float] = {}
    for r in rows:
        if r["name"].startswith("kernels_per_layer_decode_") and r["calls"]:
            kpl[r["name"].removeprefix("kernels_per_layer_decode_")] = float(r["calls"])
    out: dict[str, tuple[float | None, float | None, str]] = {}

    def lin(name: str, terms: list[tuple[float, str]], div: float, formula: str) -> None:
        def comb(d: dict[str, float | None]) -> float | None:
            vals = [d.get(t) for _, t in terms]
            if any(v is None for v in vals):
                return None
            return sum(c * v for (c, _), v in zip(terms, vals, strict=True)) / div  # type: ignore[operator]

        h, g = comb(host), comb(gpu)
        if h is not None:
            out[name] = (h, g, formula)

    for v in HOST_VARIANTS:
        for stem in ("decode", "prefill"):
            a, b, c = (f"{stem}_layers{L}_{v}" for L in (1, 4, 8))
            lin(f"per_layer_{stem}_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
            lin(f"per_layer_{stem}_{v}_1to8", [(1, c), (-1, a)], 7, f"({c} - {a}) / 7")
            lin(f"{stem}_fixed_{v}", [(4 / 3, a), (-1 / 3, b)], 1, f"4/3 {a} - 1/3 {b}")
        a, b = f"decode_infmode_layers1_{v}", f"decode_infmode_layers4_{v}"
        lin(f"per_layer_decode_infmode_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
        a, b, c = (f"graph_decode_layers{L}_{v}" for L in (1, 4, 8))
        lin(f"graph_decode_per_layer_{v}", [(1, b), (-1, a)], 3, f"({b} - {a}) / 3")
        lin(f"graph_decode_per_layer_{v}_1to8", [(1, c), (-1, a)], 7, f"({c} - {a}) / 7")
        lin(f"graph_decode_fixed_{v}", [(4 / 3, a), (-1 / 3, b)], 1, f"4/3 {a} - 1/3 {b}")
        gpl = out.get(f"graph_decode_per_layer_{v}")
        k = kpl.get(v)
        if gpl and k:
            out[f"graph_decode_per_kernel_{v}"] = (
                gpl[0] / k if gpl[0] is not None else None,
                gpl[1] / k if gpl[1] is not None else None,
                f"graph_decode_per_layer_{v} / kernels_per_layer_decode_{v} ({k:g})",
            )
    return out


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    """(median, q1, q3); quartiles by statistics.quantiles(method='inclusive'), equal to the value for one run."""
    med = statistics.median(xs)
    if len(xs) < 2:
        return med, med, med
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return med, q1, q3


def merge_host_median(paths: list[str], out_path: str) -> dict[str, tuple[float, float, float, list[float]]]:
    """Write the median-merged CSV; returns host-column name -> (median, q1, q3, per-run values) in seconds."""
    runs = [_read_csv(p) for p in paths]
    if not runs:
        raise SystemExit("no input CSVs")
    n = len(runs)
    per_run = [host_derived_of_run(rs) for rs in runs]
    names: list[str] = []
    for d in per_run:
        names += [k for k in d if k not in names]
    summary: dict[str, tuple[float, float, float, list[float]]] = {}
    gz = out_path.endswith(".gz")
    opener = gzip.open(out_path, "wt", newline="") if gz else open(out_path, "w", newline="")  # noqa: SIM115
    with opener as f:
        w = csv.DictWriter(f, HOST_COLS)
        w.writeheader()
        env = [r for r in runs[0] if r["name"] == "env"]
        w.writerow(
            dict(
                name="env",
                framework="",
                notes=(env[0]["notes"] if env else "")
                + f"; merged: median over {n} independent runs (separate processes) of each run's own derived "
                "values (tools/collect.py merge-host-median)",
            )
        )
        for name in names:
            hs = [d[name][0] for d in per_run if name in d and d[name][0] is not None]
            gs = [d[name][1] for d in per_run if name in d and d[name][1] is not None]
            if not hs:
                continue
            formula = next(d[name][2] for d in per_run if name in d)
            mh, q1, q3 = _quartiles(hs)  # type: ignore[arg-type]
            summary[name] = (mh, q1, q3, hs)  # type: ignore[assignment]
            mg = statistics.median(gs) if gs else None  # type: ignore[type-var]
            per = ", ".join(f"{x * 1e6:.1f}" for x in hs)  # type: ignore[operator]
            gnote = ""
            if gs:
                _, g1, g3 = _quartiles(gs)  # type: ignore[arg-type]
                gnote = f"; gpu IQR {g1 * 1e6:.2f}-{g3 * 1e6:.2f} us"
            w.writerow(
                dict(
                    name=name,
                    framework="derived",
                    host_s_per_call=f"{mh:.6g}",
                    gpu_s_per_call="" if mg is None else f"{mg:.6g}",
                    notes=f"median over {len(hs)} runs of each run's own {formula}; host IQR "
                    f"{q1 * 1e6:.1f}-{q3 * 1e6:.1f} us; per run (us): {per}{gnote}",
                )
            )
        measured: dict[str, list[dict[str, str]]] = {}
        for rs in runs:
            for r in rs:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    measured.setdefault(r["name"], []).append(r)
        for name, rs in measured.items():
            hs = [float(r["host_s_per_call"]) for r in rs]
            gs = [float(r["gpu_s_per_call"]) for r in rs if r["gpu_s_per_call"]]
            mh, q1, q3 = _quartiles(hs)
            w.writerow(
                dict(
                    name=name,
                    framework="eager",
                    calls=rs[0]["calls"],
                    host_s_per_call=f"{mh:.6g}",
                    gpu_s_per_call=f"{statistics.median(gs):.6g}" if gs else "",
                    notes=rs[0]["notes"].split("; spread")[0]
                    + f"; median over {len(hs)} runs (host IQR {q1 * 1e6:.1f}-{q3 * 1e6:.1f} us; per run: "
                    + ", ".join(f"{x * 1e6:.1f}" for x in hs)
                    + ")",
                )
            )
        for r in runs[0]:
            if r["name"].startswith("kernels_"):
                w.writerow({c: r.get(c, "") for c in HOST_COLS})
        for k, d in enumerate(per_run, 1):
            for name, (h, g, formula) in d.items():
                if h is None:
                    continue
                w.writerow(
                    dict(
                        name=f"{name}_run{k}",
                        framework="derived",
                        host_s_per_call=f"{h:.6g}",
                        gpu_s_per_call="" if g is None else f"{g:.6g}",
                        notes=f"run {k} alone: {formula}",
                    )
                )
        for k, rs in enumerate(runs, 1):
            for r in rs:
                if r["framework"] == "eager" and r["host_s_per_call"]:
                    w.writerow(dict({c: r.get(c, "") for c in HOST_COLS}, name=f"{r['name']}_run{k}"))
    return summary


def merge_host_median_main(argv: list[str]) -> int:
    """``python tools/collect.py merge-host-median``: :data:`MERGE_HOST_MEDIAN_DOC`."""
    ap = argparse.ArgumentParser(
        prog="python tools/collect.py merge-host-median",
        description=MERGE_HOST_MEDIAN_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("runs", nargs="+", help="CSV(.gz) files of bench_host.py --infer runs")
    ap.add_argument("--out", required=True, help="merged CSV (.gz compresses)")
    args = ap.parse_args(argv)
    s = merge_host_median(args.runs, args.out)
    print(f"{'quantity':52s} {'median':>9s} {'q1':>9s} {'q3':>9s}  per run (us)")
    for name, (m, q1, q3, xs) in s.items():
        print(
            f"{name:52s} {m * 1e6:9.1f} {q1 * 1e6:9.1f} {q3 * 1e6:9.1f}  "
            + " ".join(f"{x * 1e6:.0f}" for x in xs)
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["merge-host-median"]:
        return merge_host_median_main(args[1:])
    ap = argparse.ArgumentParser(
        prog="python tools/collect.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    ap.add_argument("suite", nargs="?", help="a suite name (--list)")
    ap.add_argument("--list", action="store_true", help="print the suites and exit")
    ap.add_argument(
        "--out", type=Path, default=None, help="output folder (default $TMPDIR/simcore_collect/SUITE)"
    )
    ap.add_argument(
        "--smoke", action="store_true", help="a tiny run of the script (its --smoke), to test the harness"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the commands and the manifest; run nothing")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per command")
    ap.add_argument("--gpus", type=int, default=None, help="processes (GPUs) of a torchrun suite")
    ap.add_argument("--runs", type=int, default=None, help="independent runs of a multi-run suite")
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="environment of the script")
    ns, extra = ap.parse_known_args(args)
    if ns.list:
        print(list_suites())
        return 0
    if ns.suite not in SUITES:
        ap.error(f"unknown suite {ns.suite!r}; python tools/collect.py --list names them")
    if ns.smoke and not supports_smoke(SUITES[ns.suite]):
        ap.error(f"tools/{SUITES[ns.suite].script} has no --smoke")
    extra = [a for a in extra if a != "--"]
    out = (ns.out or Path(tempfile.gettempdir()) / "simcore_collect" / ns.suite).resolve()
    env = {**BASE_ENV, **SUITES[ns.suite].env, **dict(e.split("=", 1) for e in ns.env)}
    cmds = commands(ns.suite, out, extra, ns.smoke, ns.gpus, ns.runs)
    man = manifest(ns.suite, cmds, extra, env, ns.smoke, probe=not ns.dry_run)
    if ns.dry_run:
        for c in cmds:
            print(shlex.join(c))
        print(f"# would write {out / 'manifest.json'}:")
        print(json.dumps(man, indent=1))
        return 0
    return run(ns.suite, out, cmds, man, env, ns.timeout)


if __name__ == "__main__":
    sys.exit(main())
