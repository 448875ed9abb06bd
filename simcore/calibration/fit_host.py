"""Host (CPU) overheads of eager PyTorch, measured per transformer layer and per optimizer tensor.

``tools/bench_host.py`` times eager constructs with tiny tensors so the GPU never bounds them
(``traces/h200/host.csv.gz``, ``host_infer.csv.gz``). This module turns those rows into the
``host_layer`` section of a compute profile (seconds):

* ``train_fwd_<act>`` / ``train_bwd_<act>``: host time of one layer's forward (grad enabled, autocast)
  and of its backward, for ``gelu`` (GPT: LayerNorm, GELU MLP) and ``swiglu`` (Llama: RMSNorm,
  SwiGLU, GQA) blocks — the slope between 1- and 4-layer models;
* ``ckpt_full_fwd_<act>`` / ``ckpt_full_bwd_<act>``: extra host time of checkpointing a whole layer
  (``torch.utils.checkpoint``, non-reentrant) in forward and in backward (recompute included);
* ``ckpt_selective``: extra host time of checkpointing the attention core of a layer;
* ``adamw_fused_per_tensor`` / ``adamw_fused_fixed`` (and ``adamw_foreach_*``): optimizer step host time;
* ``infer_decode_<act>`` / ``infer_prefill_<act>`` / ``infer_<mode>_fixed_<act>``: no-grad bf16 forward
  per layer for a decode step and a prefill, and the per-step cost outside the layers;
* ``fsdp_ratio_<fwd|bwd>`` / ``tp_ratio_<fwd|bwd>`` / ``ddp_ratio_<fwd|bwd>``: per-layer host time of
  a layer under FSDP2 (``fully_shard``), tensor parallelism or PyTorch DDP over the plain layer's,
  measured in one run; ``ddp_fixed``: DDP's extra host time per forward + backward outside the
  layers;
* ``profiled_ddp_param`` / ``profiled_ddp_bucket``: DDP's backward host work per gradient tensor (its
  autograd hook and the copy back from the bucket) and per bucket (the all-reduce call) while the
  profiler records, read from profiled DDP ranks' CPU timelines (``host_ddp_hooks.csv.gz``, made by
  ``python -m simcore.calibration.host_trace --ddp``); without the profiler these costs are within the
  per-layer ``ddp_ratio_bwd`` measured at width 64;
* ``graph_kernel_<act>``: device time of one small kernel replayed in a CUDA graph (the floor of a
  kernel inside a captured decode step);
* ``compiled_ratio_<fwd|bwd>_<act>`` (and ``profiled_compiled_ratio_...``): host time of a layer under
  ``torch.compile`` over the eager layer's, measured in one process (``tools/bench_compiled_host.py``,
  ``host_compiled.csv.gz``);
* ``profiled_<entry>``: the entry while the PyTorch profiler records, the entry times the profiler's
  ratio measured in one process (``profiler_ratio_<decode|train>_<act>`` from the interleaved
  multi-process runs of ``tools/bench_host_size.py`` where they exist).

The engines take a phase's time as ``max(GPU time, host time)``: eager PyTorch queues kernels
asynchronously, so the slower of the two sides sets the pace.
"""

from __future__ import annotations

import csv
import gzip
import io
import statistics
from pathlib import Path

from simcore.errors import TraceError

_ACT = {"gpt_ln_gelu": "gelu", "llama_rms_swiglu_gqa": "swiglu"}


def _csv_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a CSV file (gzip or plain), as dicts."""
    p = Path(path)
    try:
        raw = gzip.open(p, "rt") if p.suffix == ".gz" else open(p)  # noqa: SIM115
        with raw as f:
            text = f.read()
    except (OSError, EOFError) as e:
        raise TraceError(f"cannot read: {e}", file=str(p)) from None
    return list(csv.DictReader(io.StringIO(text)))


def _is_size_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and "profiled" in rows[0] and "run" in rows[0]


def _is_ddp_hook_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"per_param_s", "per_bucket_s"} <= set(rows[0])


def ddp_hook_costs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """``profiled_ddp_param`` / ``profiled_ddp_bucket``: PyTorch DDP's host seconds per gradient
    tensor and per gradient bucket while the profiler records, the medians over the profiled ranks
    of ``python -m simcore.calibration.host_trace --ddp`` (one row per rank's trace)."""
    try:
        param = [float(r["per_param_s"]) for r in rows]
        bucket = [float(r["per_bucket_s"]) for r in rows]
    except (KeyError, ValueError) as e:
        raise TraceError(f"bad DDP hook row: {e}", file=str(path)) from None
    return {"profiled_ddp_param": statistics.median(param), "profiled_ddp_bucket": statistics.median(bucket)}


def _is_compiled_run(rows: list[dict[str, str]]) -> bool:
    return bool(rows) and {"framework", "fwd_host_s", "bwd_host_s", "layers"} <= set(rows[0])


def compiled_ratios(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    """Host time of a compiled layer over an eager one, from ``tools/bench_compiled_host.py`` rows
    (columns arch, framework, profiled, layers, pass, fwd_host_s, bwd_host_s, and ``hidden`` where
    the run measured several widths; rows without it are width 64).

    Per architecture, width, framework and profiler flag the per-layer host time of the forward and
    of the backward is the slope between the two layer counts (medians over the passes); the
    returned ``compiled_ratio_<fwd|bwd>_<act>`` is compiled / eager without the profiler,
    ``profiled_compiled_ratio_<fwd|bwd>_<act>`` the same under the profiler (seconds cancel: one
    process, interleaved). Where layers wider than 64 were measured, the ratio is the mean over those
    widths: inductor issues other kernels for real tensor sizes (split reductions), and the host time
    of a compiled backward grows with them (round 16: GPT x0.69 at width 64, x0.88 / x1.01 at 768 /
    1536 under the profiler); the GPU-trivial width 64 is used only when nothing wider was measured."""
    acts = {"gpt": "gelu", "llama": "swiglu"}
    t: dict[tuple[str, int, str, int, int, str], list[float]] = {}
    for r in rows:
        try:
            prof = 1 if r["profiled"].strip().lower() in ("1", "true") else 0
            width = int(float(r.get("hidden") or 64))
            key = (r["arch"], width, r["framework"], prof, int(float(r["layers"])))
            for phase in ("fwd", "bwd"):
                t.setdefault((*key, phase), []).append(float(r[f"{phase}_host_s"]))
        except (KeyError, ValueError) as e:
            raise TraceError(f"bad compiled-host row: {e}", file=str(path)) from None
    out: dict[str, float] = {}
    for arch, act in acts.items():
        widths = sorted({k[1] for k in t if k[0] == arch})
        wide = [w for w in widths if w > 64] or widths
        for prof in (0, 1):
            for phase in ("fwd", "bwd"):
                ratios = []
                for w in wide:
                    slopes = {}
                    for fw in ("eager", "compiled"):
                        sel = (arch, w, fw, prof)
                        counts = sorted({k[4] for k in t if k[:4] == sel and k[5] == phase})
                        if len(counts) < 2:
                            break
                        lo, hi = counts[0], counts[-1]
                        a = statistics.median(t[(*sel, lo, phase)])
                        b = statistics.median(t[(*sel, hi, phase)])
                        slopes[fw] = (b - a) / (hi - lo)
                    if len(slopes) == 2 and slopes["eager"] > 0 and slopes["compiled"] > 0:
                        ratios.append(slopes["compiled"] / slopes["eager"])
                if ratios:
                    name = f"compiled_ratio_{phase}_{act}"
                    out[("profiled_" if prof else "") + name] = statistics.fmean(ratios)
    return out


def read_host_rows(path: str | Path) -> dict[str, float]:
    """``name -> host_s_per_call`` of a host-overhead CSV (gzip or plain)."""
    return _host_rows(_csv_rows(path), path)


def _host_rows(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        v = (row.get("host_s_per_call") or "").strip()
        if row.get("name") and v:
            try:
                out[row["name"]] = float(v)
            except ValueError:
                raise TraceError(
                    f"host_s_per_call {v!r} is not a number", file=str(path), field=row["name"]
                ) from None
    if not out:
        raise TraceError("no host-overhead rows", file=str(path))
    return out


def read_size_runs(path: str | Path) -> dict[str, float] | None:
    """Profiler ratios from an interleaved multi-process host run (``tools/bench_host_size.py``:
    columns run, rep, mode, arch, hidden, layers, profiled, host_s), or ``None`` for other files.

    Per run, width and profiled flag the per-layer slope is ``(median t(4 layers) - median
    t(1 layer)) / 3`` over the repeats (medians: single calls spike when the allocator or the garbage
    collector runs); the ratio profiled / plain is taken per run and width, and the median over those
    is returned as ``profiler_ratio_<decode|train>_<act>`` (``train`` is forward + backward); the
    unprofiled decode slope at width 64 (median over the processes) as ``per_layer_decode_<tag>``."""
    rows = _csv_rows(path)
    return _size_runs(rows, path) if _is_size_run(rows) else None


def _size_runs(rows: list[dict[str, str]], path: str | Path) -> dict[str, float]:
    # (run, mode, arch, hidden, profiled 0/1, layers) -> host seconds of each repeat
    times: dict[tuple[str, str, str, str, int, str], list[float]] = {}
    for r in rows:
        try:
            prof = 1 if r["profiled"].strip().lower() in ("1", "true") else 0
            key = (r["run"], r["mode"], r["arch"], r["hidden"], prof, r["layers"])
            times.setdefault(key, []).append(float(r["host_s"]))
        except (KeyError, ValueError):
            raise TraceError("malformed host-size row", file=str(path), field=str(r)) from None

    def slope(run: str, mode: str, arch: str, hidden: str, prof: int) -> float | None:
        one, four = (
            times.get((run, mode, arch, hidden, prof, "1")),
            times.get((run, mode, arch, hidden, prof, "4")),
        )
        return None if one is None or four is None else (statistics.median(four) - statistics.median(one)) / 3

    out: dict[str, list[float]] = {}
    for run, mode, arch, hidden in sorted({k[:4] for k in times}):
        act = "swiglu" if arch == "llama" else "gelu"
        sp, su = slope(run, mode, arch, hidden, 1), slope(run, mode, arch, hidden, 0)
        if sp is not None and su is not None and sp > 0 and su > 0:
            out.setdefault(f"profiler_ratio_{mode}_{act}", []).append(sp / su)
        # the unprofiled decode slope at width 64 (the other rounds' convention), one value per process
        if mode == "decode" and hidden == "64" and su is not None:
            tag = "llama_rms_swiglu_gqa" if arch == "llama" else "gpt_ln_gelu"
            out.setdefault(f"per_layer_decode_{tag}", []).append(su)
    return {k: float(statistics.median(v)) for k, v in out.items()}


def fit_host(paths: list[str | Path]) -> dict[str, float]:
    """The ``host_layer`` profile section from host-overhead CSVs (seconds; missing rows are skipped).

    A file with rows measured while the PyTorch profiler records (``profiled_<name>`` beside
    ``<name>``, taken back to back in one process) gives the profiler's *ratio* per entry; the
    ``profiled_`` entries are the other files' values times that ratio, so a noisier machine on the
    day of that measurement does not leak into the absolute host times."""
    rows: dict[str, float] = {}
    profiled_files: list[dict[str, float]] = []
    dist_files: list[dict[str, float]] = []
    size_ratios: dict[str, float] = {}
    compiled_rows: list[dict[str, str]] = []
    compiled_paths: list[str] = []
    ddp_hooks: dict[str, float] = {}
    for p in paths:
        csv_rows = _csv_rows(p)
        if _is_ddp_hook_run(csv_rows):
            ddp_hooks.update(ddp_hook_costs(csv_rows, p))
            continue
        if _is_compiled_run(csv_rows):
            compiled_rows.extend(csv_rows)
            compiled_paths.append(str(p))
            continue
        if _is_size_run(csv_rows):
            sr = _size_runs(csv_rows, p)
            size_ratios.update({k: v for k, v in sr.items() if k.startswith("profiler_ratio_")})
            # its per-layer slopes (median over its processes) join the other rounds' lower envelope
            for k, v in sr.items():
                if k.startswith("per_layer_"):
                    rows[k] = min(rows[k], v) if k in rows else v
            continue
        r = _host_rows(csv_rows, p)
        if any(k.startswith("profiled_") for k in r):
            profiled_files.append(r)
        elif any(k.startswith(("per_layer_fsdp2_", "per_layer_tp2_", "per_layer_ddp2_")) for k in r):
            dist_files.append(r)
        else:
            # the same quantity measured in several rounds: keep the smallest (host-time noise on a
            # shared machine only ever adds; the lower envelope is the intrinsic cost)
            for k, v in r.items():
                rows[k] = min(rows[k], v) if k in rows else v
    out = _section(rows)
    for r in dist_files:
        # distributed wrappers (FSDP2, tensor parallel): their per-layer host time over the plain
        # model's in the same run, applied to the reference per-layer values
        plain = _section(r)
        for wrap in ("fsdp2", "tp2", "ddp2"):
            wrapped = _section({k.replace(f"_{wrap}_", "_", 1): v for k, v in r.items() if f"_{wrap}_" in k})
            for phase in ("fwd", "bwd"):
                ratios = [
                    wrapped[k] / plain[k]
                    for k in (f"train_{phase}_gelu", f"train_{phase}_swiglu")
                    if plain.get(k, 0.0) > 0 and wrapped.get(k, 0.0) > 0
                ]
                if ratios:
                    out[f"{wrap.rstrip('2')}_ratio_{phase}"] = sum(ratios) / len(ratios)
        # DDP's per-step host work outside the layers (prepare_for_backward, bucket finalisation):
        # the difference of the 0-layer intercepts of a forward + backward
        fixed_ddp = r.get("train_fixed_ddp2_gpt_ln_gelu_rc_none_fwd_bwd")
        fixed_plain = r.get("train_fixed_gpt_ln_gelu_rc_none_fwd_bwd")
        if fixed_ddp is not None and fixed_plain is not None:
            out["ddp_fixed"] = max(fixed_ddp - fixed_plain, 0.0)
        for part in ("per_tensor", "fixed"):
            opt = r.get(f"adamw_fused_dtensor_step_{part}")
            if opt is not None:
                out[f"adamw_fused_dtensor_{part}"] = max(opt, 0.0)
    for r in profiled_files:
        plain = _section({k: v for k, v in r.items() if not k.startswith("profiled_")})
        prof = _section({k.removeprefix("profiled_"): v for k, v in r.items() if k.startswith("profiled_")})
        for k, v in prof.items():
            base = plain.get(k, 0.0)
            if k in out and base > 0 and v > 0:
                out[f"profiled_{k}"] = out[k] * v / base
    # interleaved multi-process ratios (round 9) supersede the one-run ratios they cover: decode, and
    # training forward + backward (one ratio for both phases)
    for key, ratio in size_ratios.items():
        mode, act = key.removeprefix("profiler_ratio_").split("_", 1)
        names = (
            [f"infer_decode_{act}", f"infer_decode_fixed_{act}"]
            if mode == "decode"
            else [f"train_fwd_{act}", f"train_bwd_{act}", f"ckpt_full_fwd_{act}", f"ckpt_full_bwd_{act}"]
            # the selective checkpoint's extra was measured on the GELU block
            + (["ckpt_selective"] if act == "gelu" else [])
        )
        for k in names:
            if k in out:
                out[f"profiled_{k}"] = out[k] * ratio
        out[key] = ratio
    if compiled_rows:  # the runs of every width together (one file per round)
        out.update(compiled_ratios(compiled_rows, ", ".join(compiled_paths)))
    out.update(ddp_hooks)
    return out


def _section(rows: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for tag, act in _ACT.items():
        fwd = rows.get(f"per_layer_{tag}_rc_none_fwd")
        fb = rows.get(f"per_layer_{tag}_rc_none_fwd_bwd")
        if fwd is not None and fb is not None:
            out[f"train_fwd_{act}"] = fwd
            out[f"train_bwd_{act}"] = max(fb - fwd, 0.0)
        cf = rows.get(f"per_layer_{tag}_full_ckpt_extra_fwd")
        cfb = rows.get(f"per_layer_{tag}_full_ckpt_extra_fwd_bwd")
        if cf is not None and cfb is not None:
            out[f"ckpt_full_fwd_{act}"] = max(cf, 0.0)
            out[f"ckpt_full_bwd_{act}"] = max(cfb - cf, 0.0)
        for mode in ("decode", "prefill"):
            v = rows.get(f"per_layer_{mode}_{tag}")
            if v is not None:
                out[f"infer_{mode}_{act}"] = v
        for mode in ("decode", "prefill"):
            v = rows.get(f"{mode}_fixed_{tag}")
            if v is not None:
                out[f"infer_{mode}_fixed_{act}"] = max(v, 0.0)
        v = rows.get(f"graph_decode_per_kernel_{tag}")
        if v is not None:
            out[f"graph_kernel_{act}"] = v
    sel = rows.get("per_layer_gpt_ln_gelu_selective_extra_fwd_bwd")
    if sel is not None:
        out["ckpt_selective"] = max(sel, 0.0)
    for opt in ("adamw_fused", "adamw_foreach"):
        for part in ("per_tensor", "fixed"):
            v = rows.get(f"{opt}_step_{part}")
            if v is not None:
                out[f"{opt}_{part}"] = max(v, 0.0)
    return out


def host_files_beside(ops_csv: str | Path) -> list[Path]:
    """Host-overhead CSVs in the folder of an ops CSV (``host*.csv.gz``) and in its multi-GPU
    sibling folders (``<folder>x2/`` and the like, for distributed wrappers)."""
    folder = Path(ops_csv).parent
    found = [*folder.glob("host*.csv*"), *folder.parent.glob(f"{folder.name}x*/host*.csv*")]
    return sorted(p for p in found if p.is_file())
