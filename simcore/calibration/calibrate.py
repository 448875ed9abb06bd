"""``simcore calibrate``: fit calibration profiles from whatever measurements the user has.

Inputs (files or folders, mixed freely):

* op micro-benchmark CSVs (``kind,...,time_s`` columns, e.g. ``traces/h200/ops.csv.gz``);
* profiler traces (Kineto ``.json[.gz]``, Nsight Systems ``.sqlite``): every op whose shape the
  trace recorded (GEMM, attention, memory-bound ops, fused optimizer) becomes one kernel-time row
  (median over its occurrences), NCCL kernels become collective measurements (bytes from
  ``In msg nelems`` x dtype, group size from the metadata; matched across ranks, the shortest
  rank's time);
* collective measurements: nccl-tests text or ``-J`` JSON logs, ``bench_comm`` sweep CSVs.

The compute profile is fitted by :func:`simcore.calibration.fit_compute.fit` (its deterministic
shape-hash split holds 30 % of the rows out and reports the error on them); the communication
profile by :func:`simcore.calibration.fit_comm.fit` (held-out sizes and op). With only op CSVs as
input the compute profile is exactly what ``python -m simcore.validation kernels CSV... -o OUT`` writes.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simcore.calibration.fit_compute import attention_row_name
from simcore.errors import SimcoreError, TraceError
from simcore.specs.profile import HostOps
from simcore.traces.classify import Analysis

OPS_COLUMNS = (
    "kind", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim", "causal",
    "backward", "name", "bytes", "time_s", "flops", "framework", "params",
)  # fmt: skip


@dataclass
class Inputs:
    """Calibration inputs sorted by type."""

    ops_csv: list[Path] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    comm: list[Path] = field(default_factory=list)
    copies: list[Path] = field(default_factory=list)
    """Host<->GPU copy tables (:func:`simcore.calibration.fit_copy.write_copies`'s layout)."""
    dist_units: list[Path] = field(default_factory=list)
    """The distributed wrappers' host per unit (``tools/bench_dist_steps.py --units``)."""
    skipped: list[Path] = field(default_factory=list)


def _head(path: Path, n: int = 8192) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(n)
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as gz:
                raw = gz.read(n)
    except (OSError, EOFError):
        return ""
    return raw.decode("utf-8", errors="replace")


def kind_of(path: Path) -> str | None:
    """``ops``, ``trace``, ``comm``, ``copies``, ``dist_units`` or None (not a calibration input)."""
    name = path.name.lower()
    base = name.removesuffix(".gz")
    if base.endswith((".sqlite", ".db")):
        return "trace"
    head = _head(path)
    if base.endswith(".json"):
        if any(k in head for k in ('"traceEvents"', '"schemaVersion"', '"deviceProperties"')):
            return "trace"
        if '"results"' in head or '"nccl_version"' in head or '"config"' in head:
            return "comm"
        return "trace" if head.lstrip().startswith("[") else None
    if base.endswith(".csv"):
        first = head.splitlines()[0] if head else ""
        cols = [c.strip() for c in first.split(",")]
        if {"kind", "time_s", "framework"} <= set(cols):  # the op-sweep layout (bench_ops.py)
            return "ops"
        from simcore.calibration.fit_compute import EMBEDDING_KERNEL_COLS

        if set(cols) >= EMBEDDING_KERNEL_COLS:  # the embedding backward's kernels (bench_embedding_bwd.py)
            return "ops"
        if "op" in cols and "nbytes" in cols and "time_s" in cols:
            return "comm"
        if {"direction", "memory", "nbytes", "dur_s"} <= set(cols):  # host<->GPU copies (fit_copy)
            return "copies"
        from simcore.calibration.fit_dist_units import UNIT_COLUMNS

        if set(UNIT_COLUMNS) <= set(cols):  # DDP buckets, FSDP2 groups, pipelining actions (fit_dist_units)
            return "dist_units"
        return None
    if "nccl-tests" in head or "Avg bus bandwidth" in head or "out-of-place" in head:
        return "comm"
    return None


def sort_inputs(paths: list[str] | list[Path]) -> Inputs:
    """Sort files (and the files inside folders) into op CSVs, traces and comm logs.

    A file named explicitly must be recognised; unknown files inside a folder are skipped."""
    out = Inputs()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise TraceError("no such file or folder", file=str(p))
        files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for f in files:
            k = kind_of(f)
            if k is None and not p.is_dir() and f.name.lower().removesuffix(".gz").endswith(".json"):
                k = "trace"  # named explicitly: let the trace reader say what is wrong with it
            if k is None:
                if not p.is_dir():
                    raise TraceError(
                        "not a calibration input (expected an ops CSV, a profiler trace, an nccl-tests log "
                        "or a collective sweep CSV)",
                        file=str(f),
                    )
                out.skipped.append(f)
            elif k == "ops":
                out.ops_csv.append(f)
            elif k == "trace":
                out.traces.append(f)
            elif k == "copies":
                out.copies.append(f)
            elif k == "dist_units":
                out.dist_units.append(f)
            else:
                out.comm.append(f)
    return out


# ---------------------------------------------------------------------------------------------
# trace -> op rows


def trace_op_rows(analyses: list[Analysis]) -> list[dict[str, Any]]:
    """Kernel-time rows in the ops-CSV layout from the ops with recovered shapes.

    One row per distinct (op, shape): the median over occurrences of the summed duration of the
    op's kernels (an op such as flash-attention backward launches several). ``framework`` is empty:
    these are device times without host launch gaps."""
    per: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    proto: dict[tuple[Any, ...], dict[str, Any]] = {}
    for a in analyses:
        inst: dict[tuple[int, int], list[Any]] = {}
        for k in a.kernels:
            s = k.shape
            if (
                s is None
                or k.step < 0
                or k.ev.ext_id < 0
                or s.get("kind") not in ("gemm", "attention", "memory", "optimizer")
            ):
                continue
            key = (k.step, k.ev.ext_id)
            if key in inst:
                inst[key][1] += k.ev.dur
            else:
                inst[key] = [s, k.ev.dur]
        for s, dur in inst.values():
            row = _row(s)
            if row is None:
                continue
            sig = tuple(sorted((c, str(v)) for c, v in row.items()))
            per[sig].append(dur)
            proto[sig] = row
    out = []
    for sig, durs in per.items():
        row = dict(proto[sig])
        row["time_s"] = float(statistics.median(durs))
        out.append(row)
    return out


def _row(s: dict[str, Any]) -> dict[str, Any] | None:
    kind = s["kind"]
    if kind == "gemm":
        return {"kind": "gemm", "dtype": s["dtype"], "m": s["m"], "n": s["n"], "k": s["k"], "batch": s["batch"],
                "flops": 2.0 * s["m"] * s["n"] * s["k"] * s["batch"], "framework": ""}  # fmt: skip
    if kind == "attention":
        name = attention_row_name(s.get("backend", "flash"), bool(s.get("mask")), s.get("dropout", 0.0))
        return {"kind": "attention", "dtype": s["dtype"], "batch": s["batch"], "heads": s["heads"],
                "kv_heads": s["kv_heads"], "seq": s["seq"], "kv_seq": s["kv_seq"], "head_dim": s["head_dim"],
                "causal": int(bool(s["causal"])), "backward": int(bool(s["backward"])), "framework": "",
                "name": name}  # fmt: skip
    if kind == "memory":
        name = str(s["name"])
        bwd = name.endswith("_bwd")
        return {"kind": "memory", "dtype": s["dtype"], "name": name.removesuffix("_bwd"), "backward": int(bwd),
                "bytes": s["nbytes"], "framework": ""}  # fmt: skip
    if kind == "optimizer":
        fused = "fused" if s.get("fused") else "foreach"
        return {"kind": "optimizer", "dtype": "fp32", "name": f"{s['optimizer']}_{fused}", "m": s["params"],
                "params": s["params"], "bytes": 28.0 * s["params"], "framework": ""}  # fmt: skip
    return None


def write_ops_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Write rows in the ops-CSV layout read by :func:`simcore.calibration.fit_compute.read_ops`."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(OPS_COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None else r.get(c, "")) for c in OPS_COLUMNS})


def trace_comm_rows(analyses: list[Analysis]) -> list[dict[str, Any]]:
    """Collective measurements from NCCL kernels: op, dtype, nbytes, gpus, time_s (the shortest
    rank's kernel of each collective matched across ranks)."""
    rows: list[dict[str, Any]] = []
    for group in runs(analyses):
        rows.extend(_comm_rows_of_run(group))
    return rows


def runs(analyses: list[Analysis]) -> list[list[Analysis]]:
    """Group traces into runs: the ranks of one multi-GPU run (same folder and world size, distinct
    ranks) go together; every other trace is a run of its own."""
    groups: dict[tuple[str, int], list[Analysis]] = defaultdict(list)
    out: list[list[Analysis]] = []
    for a in analyses:
        if a.trace.world_size > 1:
            groups[(str(Path(a.trace.path).parent), a.trace.world_size)].append(a)
        else:
            out.append([a])
    for g in groups.values():
        ranks = [a.trace.rank for a in g]
        if len(set(ranks)) == len(ranks):
            out.append(g)
        else:
            out.extend([a] for a in g)
    return out


def _comm_rows_of_run(analyses: list[Analysis]) -> list[dict[str, Any]]:
    from simcore.workload.replay import build_graph

    g = build_graph(analyses)
    rows = []
    seen: set[int] = set()
    for t in g.tasks:
        if not t.kernel.cls.startswith("comm") or t.id in seen:
            continue
        members = g.collectives[t.coll] if t.coll >= 0 else [t.id]
        seen.update(members)
        s = t.kernel.shape or {}
        nb, gs, op = s.get("nbytes"), s.get("group_size"), s.get("op")
        if not nb or not gs or gs < 2 or op in (None, "unknown", "barrier"):
            continue
        rows.append(
            {"op": op, "dtype": s.get("dtype", "bf16"), "nbytes": float(nb), "gpus": int(gs), "time_s": t.dur}
        )
    return rows


# ---------------------------------------------------------------------------------------------
# driver


@dataclass
class CalibrationResult:
    """What ``calibrate`` fitted and how well."""

    inputs: Inputs
    compute_profile: Any | None
    compute_report: dict[str, Any] | None
    trace_rows: int
    trace_check: dict[str, Any] | None
    comm_yaml: str | None
    comm_report: dict[str, Any] | None
    notes: list[str]
    host: list[dict[str, Any]] = field(default_factory=list)
    """Per-step host seconds per layer measured in the traces vs the profile's (see host_trace)."""
    device: str = ""
    """The registry device the profile is for (given, or read from the inputs)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "ops_csv": [str(p) for p in self.inputs.ops_csv],
            "traces": [str(p) for p in self.inputs.traces],
            "comm": [str(p) for p in self.inputs.comm],
            "trace_rows": self.trace_rows,
            "compute_held_out": (
                self.compute_profile.fit_report.get("held_out") if self.compute_profile else None
            ),
            "trace_check": self.trace_check,
            "comm_report": self.comm_report,
            "host_scale": self.compute_profile.host_scale if self.compute_profile else None,
            "host_steps": self.host,
            "notes": self.notes,
        }


def _errors(pred: np.ndarray[Any, Any], meas: np.ndarray[Any, Any]) -> dict[str, Any]:
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    e = np.abs(pred[ok] / meas[ok] - 1.0)
    if e.size == 0:
        return {"n": 0}
    return {"n": int(e.size), "median_abs_err": float(np.median(e)), "worst_abs_err": float(np.max(e))}


_ENV_FILES = ("ops_env.json", "steps_configs.json", "profiles_configs.json", "env.txt")


def recorded_gpu(path: str | Path) -> tuple[str, Path] | None:
    """The GPU name the collection scripts in ``tools/`` recorded beside a measurement file, and the file
    it was read from (``ops_env.json``'s ``gpu``, a configs file's ``env.gpu``, or the GPU row of
    ``nvidia-smi`` in ``env.txt`` / ``env_round*.txt``); None when none of them is there."""
    import json
    import re

    folder = Path(path).parent
    for f in [*(folder / n for n in _ENV_FILES), *sorted(folder.glob("env_round*.txt"))]:
        if not f.is_file():
            continue
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if f.suffix == ".json":
            try:
                d = json.loads(text)
            except ValueError:
                continue
            gpu = d.get("gpu") or (d.get("env") or {}).get("gpu") if isinstance(d, dict) else None
            if gpu:
                return str(gpu), f
        else:  # nvidia-smi's table: "|   0  NVIDIA H100 80GB HBM3          On  |"
            m = re.search(r"^\|\s+\d+\s+(NVIDIA [^|]*?)\s{2,}(?:On|Off)\s+\|", text, re.M)
            if m:
                return m.group(1).strip(), f
    return None


def detect_device(inp: Inputs, analyses: list[Any], required: bool = False) -> tuple[str, str] | None:
    """(registry device, where it was read) for the GPU the inputs ran on: the traces'
    ``deviceProperties``, else what the collection scripts recorded beside the op CSVs; None when
    nothing says. Raises :class:`SimcoreError` when the inputs name two different GPUs, or, when
    ``required``, only GPUs the registry does not know."""
    from simcore.workload.replay import match_device_name

    found: dict[str, str] = {}
    unknown: list[str] = []
    named = [(a.trace.device_name, str(a.trace.path)) for a in analyses]
    named += [(hit[0], str(hit[1])) for hit in map(recorded_gpu, inp.ops_csv) if hit is not None]
    for name, where in named:
        if not name:
            continue
        key = match_device_name(name)
        if key:
            found.setdefault(key, f"{where} ({name})")
        else:
            unknown.append(f"{name!r} ({where})")
    if len(found) > 1:
        where = "; ".join(f"{k}: {v}" for k, v in sorted(found.items()))
        raise SimcoreError(f"the inputs ran on different GPUs ({where}); calibrate one device at a time")
    if required and not found and unknown:
        raise SimcoreError(
            f"the inputs ran on a GPU simcore does not know: {unknown[0]}; add a device spec "
            "(SIMCORE_SPECS) and pass --device",
            field="device",
        )
    return next(iter(found.items()), None)


BASE_KEPT_GROUPS = ("host_layer", "host_ops", "host_overhead", "attention", "memory.ops", "optimizer", "gemm")
"""The parts of a profile whose entries a fit on top of a base may leave as the base's (reported in its notes)."""


def _note_base(prof: Any, base: Any, name: str) -> Any:
    """``prof`` with notes naming its base and the entries it kept from it unchanged."""
    fitted = prof.model_dump()
    kept_from = base.model_dump()
    kept: list[str] = []
    for group in BASE_KEPT_GROUPS:
        a: Any = fitted
        b: Any = kept_from
        for part in group.split("."):
            a, b = a.get(part, {}), b.get(part, {})
        same = sorted(k for k in b if k in a and a[k] == b[k])
        if same:
            kept.append(f"{group} {len(same)} of {len(a)}")
    src = base.transferred_from or base.device
    note = (
        f"fitted on top of the {name} profile (measured on {src}): entries the measurements here do not "
        f"cover stay {src}'s, transferred ({'; '.join(kept) or 'none'})"
    )
    return prof.model_copy(update={"notes": [*prof.notes, note], "source": [*prof.source, f"base: {name}"]})


HOST_OP_WEIGHTS = ("loop_op_weights", "extra_launch_ops", "layer_op_weights")
"""The :class:`~simcore.specs.profile.HostOps` tables ``calibrate`` fits from profiled traces (the others, what the
code the ``host_layer`` entries were measured on issues, go with those entries)."""


def fit_host_ops(analyses: list[Analysis], start: HostOps) -> tuple[HostOps, list[str]]:
    """The host op tables of a profile whose host model is ``start``'s, and notes saying where each came from.

    Where the traces hold what a fitter needs, the op weights are fitted on them
    (:mod:`simcore.calibration.host_trace`): ``loop_op_weights`` on eager decode loops
    (``fit_loop_op_weights``), ``extra_launch_ops`` on two or more traces of one decode code with different
    launch counts (``fit_extra_launch_ops``), ``layer_op_weights`` on ``transformers``' eager training layers
    (``fit_layer_op_weights``). Everything else is ``start``'s: the calibrated code's op counts and pass
    weights describe the code the ``host_layer`` entries were measured on, which ``calibrate`` keeps."""
    from simcore.calibration import host_trace as H

    fitted: dict[str, Any] = {}
    decode = [a for a in analyses if H.loop_passes(a)]
    train_hf = [
        a for a in analyses if H.hf_layers(list(a.trace.cpu_ops.values())) and H.layer_op_counts(a) is not None
    ]
    fitters: list[tuple[str, list[Analysis], Any]] = [
        ("loop_op_weights", decode, H.fit_loop_op_weights),
        ("extra_launch_ops", decode, lambda ans: H.fit_extra_launch_ops(ans)[0]),
        ("layer_op_weights", train_hf, H.fit_layer_op_weights),
    ]
    notes: list[str] = []
    for name, ans, fitter in fitters:
        if not ans:
            continue
        try:
            fitted[name] = fitter(ans)
        except ValueError as e:
            notes.append(f"host_ops.{name} not fitted: {e}")
            continue
        notes.append(f"host_ops.{name} fitted on {len(ans)} profiled trace(s)")
    kept = [k for k in type(start).model_fields if k not in fitted]
    if fitted:
        notes.append(
            f"host_ops: {', '.join(kept)} kept from the starting profile (the weighed pass_ops and hf_layer_weights "
            "were weighed with its op weights)"
        )
    return start.model_copy(update=fitted), notes


def fit_host_copy(copies: list[Path], system: str) -> tuple[Any, str]:
    """``host_copy`` (:class:`~simcore.specs.profile.HostCopies`) fitted on the copy tables ``copies`` over
    ``system``'s host link (:func:`simcore.calibration.fit_copy.fit_copies`), and a note saying on what."""
    from simcore.calibration.fit_copy import fit_copies, read_copies
    from simcore.comm.host import host_link
    from simcore.specs.registry import default_registry

    rows = [r for path in copies for r in read_copies(path)]
    link = host_link(default_registry().system(system))
    try:
        fitted = fit_copies(rows, link=link.name, bandwidth=link.bandwidth, source=[str(p) for p in copies])
    except ValueError as e:
        raise TraceError(str(e), file=", ".join(str(p) for p in copies)) from None
    return fitted, f"host_copy fitted on {len(rows)} host<->GPU copies over {link.name}"


def write_host_copy(inputs: list[str], profile: Path, system: str | None = None) -> tuple[Any, str]:
    """``simcore calibrate COPIES.csv --host-copy PROFILE``: :func:`fit_host_copy` on the copy tables ``inputs``
    over the host link of ``system`` (default: the profile device's system), written into the compute profile
    file ``profile`` in place of its ``host_copy`` section, the rest of the file as it was
    (:func:`simcore.calibration.fit_copy.write_section`); the section and the note."""
    import yaml

    from simcore.calibration.fit_copy import write_section
    from simcore.specs.registry import default_registry
    from simcore.workload.replay import default_system

    inp = sort_inputs(inputs)
    other = next(iter(inp.ops_csv + inp.traces + inp.comm), None)
    if other is not None or not inp.copies:
        what = "--host-copy fits host<->GPU copy tables only (--extract-copies writes one)"
        raise TraceError(what, file=str(other or inputs[0]))
    try:
        device = yaml.safe_load(profile.read_text(encoding="utf-8"))["device"]
    except (OSError, yaml.YAMLError, TypeError, KeyError) as e:
        raise TraceError(f"not a compute profile with a device: {e}", file=str(profile)) from None
    reg = default_registry()
    fitted, note = fit_host_copy(inp.copies, system or default_system(reg.device(device).name, reg))
    write_section(fitted, profile)
    return fitted, note


def extract_copy_table(inputs: list[str], out: Path, root: Path) -> tuple[int, int]:
    """``simcore calibrate TRACES... --extract-copies CSV``: the host<->GPU copies of the Kineto traces among
    ``inputs`` (files, or folders searched for them; only traces holding a ``Memcpy HtoD`` / ``Memcpy DtoH``
    event are read) into the copy table ``out`` (:func:`simcore.calibration.fit_copy.extract_copies`, trace
    names relative to ``root``); (traces read, copies written)."""
    from simcore.calibration.fit_copy import extract_copies, write_copies

    traces = []
    for t in sort_inputs(inputs).traces:
        if t.name.lower().removesuffix(".gz").endswith(".json"):
            raw = t.read_bytes()
            raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            if b"Memcpy HtoD" in raw or b"Memcpy DtoH" in raw:
                traces.append(t)
    rows = extract_copies(sorted(traces), root=root)
    write_copies(rows, out)
    return len(traces), len(rows)


def _host_copy(prof: Any, copies: list[Path], dev: Any, system: str, notes: list[str]) -> Any:
    """The profile with its host<->GPU copy section (``host_copy``): fitted on the copy tables among the inputs
    over ``system``'s host link (:func:`fit_host_copy`), else kept from the starting profile (which keeps its
    base's or the device's shipped section), said in the notes."""
    from simcore.specs.profile import load_profile

    if copies:
        fitted, note = fit_host_copy(copies, system)
        notes.append(note)
        return prof.model_copy(update={"host_copy": fitted})
    if prof.host_copy is None:
        prof = prof.model_copy(update={"host_copy": load_profile(dev).host_copy})
    if prof.host_copy is not None:
        notes.append("host_copy (host<->GPU copies) kept from the starting profile (no copy table among the inputs)")
    return prof


def gemm_kernel_donor(spec: str) -> tuple[str, list[str], Any]:
    """``PROFILE:FAMILY[,FAMILY]`` (``--gemm-kernel-from``) read and checked: the profile's name, the families, and
    the profile (one clear error where the spec, the profile or a family's ``gemm_kernel`` entry is missing)."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    name, _, fams = spec.partition(":")
    families = [f.strip() for f in fams.split(",") if f.strip()]
    if not name or not families:
        raise SimcoreError(f"--gemm-kernel-from {spec!r}: give PROFILE:FAMILY[,FAMILY] (e.g. h100:fp8_tensor)",
                           field="gemm_kernel_from")  # fmt: skip
    reg = default_registry()
    if name not in reg.devices:
        raise SimcoreError(f"--gemm-kernel-from {spec!r}: no device profile {name!r}", field="gemm_kernel_from")
    donor = load_profile(reg.device(name), name)
    missing = [f for f in families if f not in donor.gemm_kernel]
    if missing:
        raise SimcoreError(
            f"--gemm-kernel-from {spec!r}: {name}'s profile has no gemm_kernel entry {', '.join(missing)}",
            field="gemm_kernel_from",
        )
    return name, families, donor


def borrow_gemm_kernel(prof: Any, spec: str) -> Any:
    """``prof`` with the ``gemm_kernel`` entries of the families named in ``spec`` (``PROFILE:FAMILY[,FAMILY]``)
    taken from that profile: efficiencies are fractions of the peak and the HBM bandwidth, so they carry over to
    a device whose kernels are the same (Hopper: H100 -> H200; the transfer's error on the row-wise FP8 grid
    is in docs/compute.md, "FP8 GEMMs by scaling"). Said in the source and the notes."""
    name, families, donor = gemm_kernel_donor(spec)
    return prof.model_copy(
        update={
            "gemm_kernel": {**prof.gemm_kernel, **{f: donor.gemm_kernel[f] for f in families}},
            "source": [*prof.source, f"gemm_kernel {','.join(families)}: {name}"],
            "notes": [*prof.notes, f"gemm_kernel {', '.join(families)} taken from {name}'s profile (fractions of "
                      "peak and bandwidth; no kernel-timed rows of those families here)"],
        }
    )  # fmt: skip


def calibrate(
    paths: list[str] | list[Path],
    device: str | None = None,
    system: str | None = None,
    fit_comm_profile: bool = True,
    base: str | None = None,
    progress: Callable[[str], None] | None = None,
    kernel_gemms_apart: bool = False,
    gemm_kernel_from: str | None = None,
) -> CalibrationResult:
    """Fit the compute (and, when there are collective measurements, the communication) profile.

    ``base`` (a profile name or path) is the profile the fit starts from, transferred to ``device``:
    what the measurements here cover is refitted, everything else (the host model, kernels no input
    timed) stays the base's, and the notes say which parts those are. Without it the fit starts from
    a neutral profile, as the shipped H200 profile was made; its host model (``host_layer`` from host CSVs
    beside the op CSVs) is then stated against the host op tables of ``device``'s own profile. Profiled
    traces among the inputs refit the host op weights they cover (:func:`fit_host_ops`).

    ``kernel_gemms_apart``: GEMM tables timed by their kernels' own durations fit the profile's
    ``gemm_kernel`` block only (:func:`simcore.calibration.fit_compute.fit`).

    ``gemm_kernel_from`` (``PROFILE:FAMILY[,FAMILY]``, e.g. ``h100:fp8_tensor``): GEMM families no input here
    times by kernel duration, their ``gemm_kernel`` entries taken from another device's profile
    (:func:`borrow_gemm_kernel`).

    ``progress`` (if given) is called with a short line as each step starts (``simcore calibrate``
    prints them on stderr)."""
    from simcore.calibration import fit_compute as FC
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry
    from simcore.workload.replay import default_system, load_analyses

    reg = default_registry()
    say = progress or (lambda _text: None)
    if gemm_kernel_from:
        gemm_kernel_donor(gemm_kernel_from)  # checked before any fit
    inp = sort_inputs(paths)
    say(
        f"inputs: {len(inp.ops_csv)} op CSV(s), {len(inp.traces)} profiler trace(s), "
        f"{len(inp.comm)} collective log(s)"
    )
    notes: list[str] = []
    if inp.traces:
        say(f"reading and classifying {len(inp.traces)} profiler trace(s)")
    analyses = load_analyses([str(p) for p in inp.traces]) if inp.traces else []
    seen = detect_device(inp, analyses, required=device is None)
    if device is None:
        if seen is None:
            raise SimcoreError(
                "cannot tell which GPU the measurements ran on (no deviceProperties in the traces, no "
                "ops_env.json or env.txt beside the op CSVs); pass --device", field="device"
            )
        device = seen[0]
        notes.append(f"device {device}, read from {seen[1]}")
    dev = reg.device(device)
    if seen is not None and seen[0] != dev.name:
        raise SimcoreError(
            f"--device {device} but the measurements ran on {seen[0]} ({seen[1]}); pass --device {seen[0]}",
            field="device",
        )
    rows = trace_op_rows(analyses)
    prof = report = None
    trace_check = None
    with tempfile.TemporaryDirectory(prefix="simcore-calibrate-") as tmp:
        csvs: list[Path] = list(inp.ops_csv)
        tpath = Path(tmp) / "trace_ops.csv"
        if rows:
            write_ops_csv(rows, tpath)
            csvs.append(tpath)
        if csvs:
            say(f"fitting the compute profile for {dev.name} on {len(csvs)} table(s) of kernel times")
            base_prof = load_profile(dev, base) if base else None
            prof, report = FC.fit([str(p) for p in csvs], dev, base=base_prof, kernel_gemms_apart=kernel_gemms_apart)
            if base_prof is not None:
                prof = _note_base(prof, base_prof, base or "")
            if gemm_kernel_from:
                prof = borrow_gemm_kernel(prof, gemm_kernel_from)
            if rows:
                src = sorted({*(x for x in prof.source if x != str(tpath)), *(str(p) for p in inp.traces)})
                prof = prof.model_copy(
                    update={
                        "source": src,
                        "notes": [
                            *prof.notes,
                            f"{len(rows)} kernel-time rows from {len(inp.traces)} profiler trace(s)",
                        ],
                    }
                )
                t = FC.read_ops([tpath])
                pred = FC.predict_rows(dev, prof, t)
                fit_mask = np.array([FC.is_fit_row(FC.shape_key(t, i)) for i in range(len(t))])
                meas = t.num["time_s"]
                trace_check = {
                    "held_out": _errors(pred[~fit_mask], meas[~fit_mask]),
                    "fit": _errors(pred[fit_mask], meas[fit_mask]),
                }
        elif not inp.comm and not analyses and not inp.dist_units:
            raise SimcoreError(
                "nothing to calibrate from: no op CSV, trace or collective log among the inputs"
            )
        else:
            notes.append(
                "no compute measurements (op CSV or traces with recorded shapes): compute profile not fitted"
                + (f" (the profile written is {base or dev.name}'s with the host per unit below)" if inp.dist_units else "")
            )
    # host speed: the CPU timeline of eager single-GPU traces against the profile's host model
    host_rows: list[dict[str, Any]] = []
    if analyses:
        from simcore.calibration.host_trace import host_scale

        say("fitting the host speed and op tables on the traces' CPU timelines")
        shipped = load_profile(dev)
        start = prof if prof is not None else shipped
        borrowed = not start.host_layer and bool(shipped.host_layer)
        if borrowed:
            start = start.model_copy(update={"host_layer": dict(shipped.host_layer), "host_ops": shipped.host_ops})
        scale, found = host_scale(analyses, start.model_copy(update={"host_scale": 1.0}))
        if scale is not None:
            host_rows = [{**dataclasses.asdict(x), "ratio": x.ratio} for x in found]
            if borrowed:
                notes.append(f"host model (host_layer, host_ops) taken from the {dev.name} profile")
            if prof is None:
                notes.append(
                    f"no compute measurements: the profile written is the shipped {dev.name} profile with "
                    "only its host speed (host_scale) calibrated; its held-out errors are the shipped fit's"
                )
            prof = start.model_copy(update={"host_scale": scale})
            notes.append(
                f"host speed: {len(found)} step(s) measured per layer, x{scale:.3f} the profile's host times"
            )
    if prof is not None and analyses:
        host_ops, host_notes = fit_host_ops(analyses, prof.host_ops)
        prof = prof.model_copy(update={"host_ops": host_ops})
        notes.extend(host_notes)
    if prof is not None and base is None and prof.host_layer:
        notes.append(
            f"host op tables (host_ops) are the {dev.name} profile's, which the host entries are stated against, "
            "except where fitted above"
        )
    if prof is not None:
        prof = _host_copy(prof, inp.copies, dev, system or default_system(dev.name, reg), notes)
    if inp.dist_units:
        prof = _dist_units(prof if prof is not None else load_profile(dev, base), inp.dist_units, notes)
    # communication
    comm_yaml = comm_report = None
    if fit_comm_profile and (inp.comm or analyses):
        say("fitting the communication profile")
    if fit_comm_profile:
        comm_yaml, comm_report, n = _fit_comm(inp, analyses, system or default_system(dev.name, reg), notes)
        if n == 0:
            notes.append("no collective measurements: communication profile not fitted")
    return CalibrationResult(
        inp, prof, report, len(rows), trace_check, comm_yaml, comm_report, notes, host_rows, dev.name
    )


def _dist_units(prof: Any, files: list[Path], notes: list[str]) -> Any:
    """The profile with the distributed wrappers' host per unit fitted on ``files``
    (:func:`simcore.calibration.fit_host.fit_dist_unit_files`) over its ``host_layer``; the entries,
    their held-out errors and the families left out go in its notes and ``notes``."""
    from simcore.calibration.fit_host import fit_dist_unit_files

    entries, errs, left = fit_dist_unit_files(list(files))
    said = [
        *left,
        "host per unit fitted on " + ", ".join(str(f) for f in files) + ": "
        + (", ".join(f"{k} {v * 1e6:.1f} us" for k, v in sorted(entries.items())) or "nothing")
        + ("; held-out median |err| " + ", ".join(f"{k} {v:.1%}" for k, v in errs.items()) if errs else ""),
    ]
    notes.extend(said)
    return prof.model_copy(
        update={
            "host_layer": {**prof.host_layer, **entries},
            "source": [*prof.source, *(str(f) for f in files if str(f) not in prof.source)],
            "notes": [*prof.notes, *said],
        }
    )


def _fit_comm(
    inp: Inputs, analyses: list[Analysis], system: str, notes: list[str]
) -> tuple[str | None, dict[str, Any] | None, int]:
    from simcore.calibration import fit_comm as FM
    from simcore.traces.nccl import CommMeasurements, read_measurements

    parts = [read_measurements(p) for p in inp.comm]
    trows = trace_comm_rows(analyses) if analyses else []
    if trows:
        parts.append(
            CommMeasurements(
                op=np.array([r["op"] for r in trows]),
                dtype=np.array([r["dtype"] for r in trows]),
                nbytes=np.array([r["nbytes"] for r in trows], dtype=np.float64),
                gpus=np.array([r["gpus"] for r in trows], dtype=np.int64),
                nodes=np.ones(len(trows), dtype=np.int64),
                time_s=np.array([r["time_s"] for r in trows], dtype=np.float64),
                in_place=np.zeros(len(trows), dtype=bool),
                source="traces",
            )
        )
    if not parts:
        return None, None, 0
    m = CommMeasurements.concat(parts)
    base_fn = getattr(FM, "_provisional_base", None)
    try:
        base = base_fn(system) if base_fn is not None else None
        res = FM.fit(m, system, base)
    except SimcoreError as e:
        notes.append(f"communication profile not fitted: {e}")
        return None, None, len(m)
    fitted_on = ",".join(
        [
            *(str(p) for p in inp.comm),
            *(["NCCL kernels of " + ",".join(str(p) for p in inp.traces)] if trows else []),
        ]
    )
    slowdown = FM.overlap_beside(inp.comm[0]) if inp.comm else None
    text = FM.profile_yaml(res, base if base is not None else res.profile, fitted_on, slowdown)
    return text, dict(res.report), len(m)


def ops_table(rows: list[dict[str, Any]]) -> str:
    """Rows in the ops-CSV layout as CSV text."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(OPS_COLUMNS))
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, "") for c in OPS_COLUMNS})
    return buf.getvalue()
