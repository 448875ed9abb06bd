"""Whole-step validation on a real GPU: training steps, prefill and decode steps.

The measurements (``traces/h200/steps.csv.gz``, made by ``tools/bench_steps.py``) are of a plain
PyTorch GPT (``tools/gpt.py``) on one H200: training with fp32 parameters under bf16 autocast and
fused AdamW, eager; inference with bf16 parameters, eager or CUDA graphs. None of these rows is used
to fit anything — the compute profile is fitted on single-kernel micro-benchmarks
(``traces/h200/ops.csv.gz``) — so every row here is held out.

``python -m simcore.validation steps [CSV] [--json] [--plot out.png]`` prints predicted vs measured
per row and the median and worst |error| for step time, peak memory, prefill and decode.
``traces/h200/compiled_steps.csv.gz`` holds training steps under ``torch.compile`` each
beside the same step in eager PyTorch, measured in one process; its compiled rows are summarised as
``train_compiled``.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import SimcoreError, TraceError
from simcore.prediction import InferenceResult, TrainingResult, predict
from simcore.specs.registry import builtin_dir, default_registry
from simcore.specs.resolve import scenario_from_dict

DEFAULT_CSV = "h200/steps.csv.gz"


def traces_dir() -> Path:
    """The repository's ``traces/`` folder (measurements ship with the source tree)."""
    here = Path(__file__).resolve().parents[2] / "traces"
    if here.is_dir():
        return here
    try:
        return builtin_dir("traces")
    except SimcoreError:
        return here


def read_rows(path: str | Path) -> list[dict[str, str]]:
    p = Path(path)
    try:
        raw = gzip.open(p, "rt") if p.suffix == ".gz" else open(p)  # noqa: SIM115
        with raw as f:
            text = f.read()
    except FileNotFoundError:
        raise TraceError("file not found", file=str(p)) from None
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read: {e}", file=str(p)) from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or "mode" not in rows[0]:
        raise TraceError("not a steps CSV (no 'mode' column)", file=str(p))
    return rows


def _i(v: str) -> int:
    return int(float(v))


def system_for(path: str | Path) -> str:
    """The built-in system of the GPU a steps CSV was measured on, as the collection scripts recorded it
    beside the file (:func:`~simcore.calibration.calibrate.recorded_gpu`: ``NVIDIA H100 80GB HBM3`` ->
    ``hgx-h100``); ``hgx-h200`` when nothing is recorded there."""
    from simcore.calibration.calibrate import recorded_gpu
    from simcore.workload.replay import default_system, match_device_name

    hit = recorded_gpu(path)
    if hit is None:
        return "hgx-h200"
    key = match_device_name(hit[0])
    if key is None:
        raise TraceError(f"unknown GPU {hit[0]!r}; pass --system", file=str(hit[1]))
    return default_system(key)


def attention_backend_for(path: str | Path) -> str:
    """The attention backend a steps CSV's runs used, from the ``steps_configs.json`` that
    ``tools/bench_steps.py`` wrote beside it: ``flash`` (tools/gpt.py forces SDPA's flash backend) unless
    its ``env.sdpa.force_flash`` is false (``SIMCORE_SDPA=default``), then ``auto`` (PyTorch's own choice:
    cuDNN's kernels on Hopper, docs/stacks.md)."""
    import json

    f = Path(path).parent / "steps_configs.json"
    try:
        sdpa = json.loads(f.read_text(encoding="utf-8")).get("env", {}).get("sdpa", {})
    except (OSError, ValueError, AttributeError):
        return "flash"
    return "auto" if sdpa.get("force_flash") is False else "flash"


def scenario_for(row: dict[str, str], system: str = "hgx-h200", attention_backend: str = "flash") -> dict[str, Any]:
    """The scenario (as a dict) of one measured row, on one GPU of ``system``, its SDPA calls run by
    ``attention_backend`` (:func:`attention_backend_for`)."""
    model = {
        "name": row["name"],
        "layers": _i(row["layers"]),
        "hidden": _i(row["hidden"]),
        "heads": _i(row["heads"]),
        "kv_heads": _i(row["kv_heads"] or row["heads"]),
        "ffn_hidden": _i(row["ffn_hidden"]),
        "vocab": _i(row["vocab"]),
        "seq_len": _i(row["seq_len"]),
        "activation": row["activation"],
        "norm": row["norm"],
        "tied_embeddings": row["tied"].strip().lower() in ("true", "1"),
    }
    base: dict[str, Any] = {
        "name": f"{row['mode']}:{row['name']}",
        "cluster": {"system": system, "gpus": 1},
        "model": model,
        "runtime": {
            "framework": row.get("framework") or "eager",
            # tools/gpt.py runs a gated MLP's gate and up projections as one Linear unless told not to
            "gate_up": "fused"
            if (row.get("swiglu_fused") or "").strip().lower() in ("1", "true")
            else "separate",
            # bench_steps times back-to-back calls (CUDA graph replays) between two CUDA events: no
            # host wait between steps
            "decode_sync_every": None,
            # tools/gpt.py forces SDPA's flash backend (sdpa_kernel([FLASH_ATTENTION])) unless
            # SIMCORE_SDPA=default
            "attention_backend": attention_backend,
        },
    }
    mb = _i(row["micro_batch"])
    if row["mode"] == "train":
        base["kind"] = "training"
        base["training"] = {
            "micro_batch": mb,
            "global_batch": mb,
            "precision": "bf16",
            "param_dtype": "fp32",
            # bench_steps: torch.optim.AdamW(fused=True) (tools/bench_steps.py)
            "optimizer_impl": "fused",
            "recompute": row["recompute"] or "none",
        }
    else:
        L = _i(row["seq_len"])
        # the measured program has no position limit: its context holds the L prompt (or cached) tokens and
        # the one it generates, which the scenario's context check counts (model.seq_len does not price
        # inference)
        model["seq_len"] = L + 1
        base["kind"] = "inference"
        base["inference"] = (
            {"batch": mb, "prompt_len": L, "output_len": 1, "precision": "bf16"}
            if row["mode"] == "prefill"
            else {"batch": mb, "prompt_len": L, "context_len": L, "output_len": 1, "precision": "bf16"}
        )
    return base


def validate(
    path: str | Path | None = None,
    calibration: str | None = None,
    system: str | None = None,
    predict_only: bool = False,
) -> dict[str, Any]:
    """Predict every ok row; return per-row comparisons and summary statistics. ``calibration``
    (a profile name or path) replaces the device's default profile: a what-if. ``system`` is the
    system whose GPU ran the rows (default: :func:`system_for` the file). ``predict_only``: a planned
    run's rows (no measured time yet): each row's prediction alone, written down before the run."""
    p = Path(path) if path else traces_dir() / DEFAULT_CSV
    reg = default_registry()
    system = system or system_for(p)
    backend = attention_backend_for(p)
    rows_out: list[dict[str, Any]] = []
    for row in read_rows(p):
        if (row.get("status") or "ok") != "ok" or not (predict_only or row.get("step_time_s")):
            continue
        data = scenario_for(row, system, backend)
        if calibration is not None:
            data["calibration"] = calibration
        sc = scenario_from_dict(data, reg, str(p))
        r = predict(sc)
        if isinstance(r, TrainingResult):
            pred = r.step_time_s
            kind = "train"
        else:
            assert isinstance(r, InferenceResult)
            kind = row["mode"]
            pred = r.prefill_time_s if kind == "prefill" else r.decode_step_time_s
        out: dict[str, Any] = {
            "mode": kind,
            "name": row["name"],
            "framework": row.get("framework") or "eager",
            "micro_batch": _i(row["micro_batch"]),
            "seq_len": _i(row["seq_len"]),
            "recompute": row.get("recompute", ""),
            "predicted_s": pred,
        }
        if predict_only:
            out["predicted_mem"] = r.memory_per_gpu_bytes
            rows_out.append(out)
            continue
        measured = float(row["step_time_s"])
        out |= {"measured_s": measured, "error_pct": (pred / measured - 1) * 100}
        if row.get("peak_mem_bytes"):
            mem_meas = float(row["peak_mem_bytes"])
            out["measured_mem"] = mem_meas
            pm = r.memory_per_gpu_bytes
            if isinstance(r, InferenceResult):
                pm = r.memory_breakdown["prefill_peak" if kind == "prefill" else "decode_peak"]
            out["predicted_mem"] = pm
            out["mem_error_pct"] = (pm / mem_meas - 1) * 100
        rows_out.append(out)
    summary: dict[str, Any] = {}

    def group(r: dict[str, Any]) -> str:
        # torch.compile rows are summarised apart from the eager ones
        return str(r["mode"]) + ("_compiled" if r["framework"] == "compiled" else "")

    for mode in ("train", "prefill", "decode", "train_compiled", "prefill_compiled", "decode_compiled"):
        errs = np.array([abs(r["error_pct"]) for r in rows_out if group(r) == mode and "error_pct" in r])
        if errs.size:
            summary[mode] = {
                "n": int(errs.size),
                "median_abs_error_pct": float(np.median(errs)),
                "max_abs_error_pct": float(errs.max()),
            }
        merr = np.array(
            [abs(r["mem_error_pct"]) for r in rows_out if group(r) == mode and "mem_error_pct" in r]
        )
        if merr.size:
            summary[mode]["memory_median_abs_error_pct"] = float(np.median(merr))
            summary[mode]["memory_max_abs_error_pct"] = float(merr.max())
    device = reg.system(system).device
    return {
        "file": str(p),
        "system": system,
        "device": device,
        "attention_backend": backend,
        "rows": rows_out,
        "summary": summary,
    }


def format_report(res: dict[str, Any]) -> str:
    """:func:`validate`'s result as text: one line per row (by mode, largest |error| first; times in ms,
    errors in %), then per mode the median and worst |error| of step time and peak memory."""
    lines = [
        f"{'mode':8} {'name':26} {'fw':11} {'mb':>4} {'seq':>6} {'rec':>9} {'meas ms':>9} {'pred ms':>9} {'err%':>7} {'mem err%':>8}"
    ]
    for r in sorted(res["rows"], key=lambda r: (r["mode"], -abs(r.get("error_pct", 0.0)))):
        me = f"{r['mem_error_pct']:8.1f}" if "mem_error_pct" in r else ""
        meas, err = (f"{r['measured_s'] * 1e3:9.3f}", f"{r['error_pct']:7.1f}") if "error_pct" in r else (" " * 9, " " * 7)
        lines.append(
            f"{r['mode']:8} {r['name'][:26]:26} {r['framework'][:11]:11} {r['micro_batch']:>4} {r['seq_len']:>6} "
            f"{r['recompute'][:9]:>9} {meas} {r['predicted_s'] * 1e3:9.3f} {err} {me}"
        )
    for mode, s in res["summary"].items():
        line = f"{mode}: n={s['n']} median |err| {s['median_abs_error_pct']:.1f}%  worst {s['max_abs_error_pct']:.1f}%"
        if "memory_median_abs_error_pct" in s:
            line += f"  memory median {s['memory_median_abs_error_pct']:.1f}% worst {s['memory_max_abs_error_pct']:.1f}%"
        lines.append(line)
    return "\n".join(lines)
