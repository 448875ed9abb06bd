"""What-if sweeps: a scenario predicted over the cartesian product of grids of field values.

A grid is ``key.path=v1,v2,...`` over any scenario field (``cluster.system=hgx-h100,dgx-b200``,
``cluster.gpus=512,1024``, ``model.seq_len=4096,8192``, ``training.global_batch=...``) or one of the
pseudo-keys

* ``scale.fabric_bandwidth=0.5,1,2``: multiplies the NIC bandwidth of the scale-out fabric;
* ``scale.nvlink_bandwidth=0.5,1,2``: multiplies the per-GPU NVLink bandwidth of the system (a
  derived system spec ``<system>-nvlink-x<f>`` is registered in the worker);

several grids give their cartesian product. Each point runs :func:`simcore.predict` (``mode="predict"``)
or the layout search :func:`simcore.planning.plan.plan` (``mode="plan"``, the best layout per point)
on an executor with the :mod:`concurrent.futures` interface: local processes
(:class:`~concurrent.futures.ProcessPoolExecutor`, the default), in-process (``serial``), or a Dask
cluster (``dask``: ``distributed.Client(address).get_executor()``; ``pip install simcore[dask]``).

Results are appended to a CSV file as they complete, one row per point with a ``key`` column (the
point's ``key=value`` list) and a ``base`` column (a hash of the base scenario, mode and engine);
rerunning the same sweep skips the points already in the file, so an interrupted sweep resumes
without recomputing or duplicating rows. ``.parquet`` output is written from that CSV when the
sweep completes (needs ``pyarrow``).

Every row has a ``status`` (:data:`STATUSES`): ``ok``; ``does_not_fit`` when the point needs more
memory per GPU than the device has (its numbers are kept; ``fits_in_memory`` is false and
``fits_reason`` says by how much; in plan mode, when no layout fits); ``error`` otherwise.
:meth:`SweepResult.best` picks among the ``ok`` rows only.

An interruption (Ctrl-C) ends the local workers at once and raises :class:`SweepInterrupted` (a
:class:`KeyboardInterrupt`) saying what was kept; local workers also end by themselves when the
sweep's process dies (SIGKILL), within :data:`PARENT_POLL_S`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import csv
import hashlib
import importlib
import io
import itertools
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simcore.errors import SimcoreError, SpecError

PSEUDO_KEYS = ("scale.fabric_bandwidth", "scale.nvlink_bandwidth")
MODES = ("predict", "plan")
EXECUTORS = ("local", "serial", "dask")
STATUSES = ("ok", "does_not_fit", "error")
"""A row's ``status``: ``ok`` (computed and fits in device memory), ``does_not_fit`` (computed, but
needs more memory per GPU than the device has: ``fits_reason`` says how much; in plan mode, no layout
fits), ``error`` (not computed: ``error`` says why)."""
ADDED_COLUMNS = ("fits_reason", "fits_in_memory")
"""Columns added since result files were first written; a file without them is upgraded on resume."""
HIGHER_IS_BETTER = frozenset(
    {
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "prefill_tokens_per_s",
        "model_tflops_per_gpu",
        "mfu",
        "hfu",
        "valid_configs",
    }
)

TRAINING_COLUMNS = (
    "name",
    "device",
    "system",
    "gpus",
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "model_tflops_per_gpu",
    "mfu",
    "hfu",
    "memory_per_gpu_bytes",
    "fits_in_memory",
    "fits_reason",
    "bubble_fraction",
    "microbatches",
    "tokens_per_step",
    "time_to_train_s",
    "gpu_hours",
    "cost",
    "power_per_gpu_w",
    "energy_per_step_j",
    "energy_per_token_j",
    "layout",
    "breakdown",
)
INFERENCE_COLUMNS = (
    "name",
    "device",
    "system",
    "gpus",
    "prefill_time_s",
    "decode_step_time_s",
    "ttft_s",
    "tpot_s",
    "e2e_latency_s",
    "tokens_per_s",
    "prefill_tokens_per_s",
    "memory_per_gpu_bytes",
    "fits_in_memory",
    "fits_reason",
    "layout",
    "breakdown_prefill",
    "breakdown_decode",
)
PLAN_COLUMNS = (
    "gpus",
    "device",
    "system",
    "summary",
    "step_time_s",
    "des_step_time_s",
    "tokens_per_s",
    "mfu",
    "memory_per_gpu_bytes",
    "fits_in_memory",
    "fits_reason",
    "time_to_train_s",
    "gpu_hours",
    "cost",
    "energy_per_token_j",
    "energy_run_kwh",
    "evaluated_configs",
    "valid_configs",
    "search_s",
    "layout",
)


# --------------------------------------------------------------------------------------------------
# Grid specifications
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridAxis:
    """One swept key and its values (parsed as YAML scalars; ``raw`` keeps the text)."""

    key: str
    values: tuple[Any, ...]
    raw: tuple[str, ...]


def parse_grid(spec: str) -> GridAxis:
    """Parse ``key.path=v1,v2,...`` (values are YAML scalars: numbers, booleans, strings).

    A range ``start:stop:step`` (numbers, stop included) or ``start:stop:*factor`` (geometric)
    also works: ``cluster.gpus=256:4096:*2``.
    """
    if "=" not in spec:
        raise SpecError(f"--grid {spec!r}: expected key.path=v1,v2,...", field="--grid")
    key, _, rhs = spec.partition("=")
    key = key.strip()
    parts = [p for p in key.split(".") if p]
    if not parts or any(not p.replace("_", "").replace("-", "").isalnum() for p in parts):
        raise SpecError(f"--grid {spec!r}: {key!r} is not a key path like cluster.gpus", field="--grid")
    key = ".".join(parts)
    if key.startswith("scale.") and key not in PSEUDO_KEYS:
        raise SpecError(f"--grid {spec!r}: unknown scale key; use {', '.join(PSEUDO_KEYS)}", field="--grid")
    raw = [r.strip() for r in rhs.split(",")]
    if not rhs.strip() or any(r == "" for r in raw):
        raise SpecError(f"--grid {spec!r}: empty value in the list", field="--grid")
    if len(raw) == 1 and raw[0].count(":") == 2:
        raw = _expand_range(spec, raw[0])
    values = []
    for r in raw:
        try:
            v = yaml.safe_load(r)
        except yaml.YAMLError:
            v = r
        if isinstance(v, (dict, list)):
            raise SpecError(f"--grid {spec!r}: value {r!r} is not a scalar", field="--grid")
        values.append(v)
    if len(set(raw)) != len(raw):
        raise SpecError(f"--grid {spec!r}: repeated value", field="--grid")
    if key in PSEUDO_KEYS:
        for r, v in zip(raw, values, strict=True):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise SpecError(f"--grid {spec!r}: {key} needs positive factors, got {r!r}", field="--grid")
    return GridAxis(key, tuple(values), tuple(raw))


def _expand_range(spec: str, text: str) -> list[str]:
    a, b, c = text.split(":")
    try:
        start, stop = float(a), float(b)
        geometric = c.startswith("*")
        step = float(c[1:] if geometric else c)
    except ValueError:
        raise SpecError(
            f"--grid {spec!r}: range must be start:stop:step or start:stop:*factor", field="--grid"
        ) from None
    if (geometric and step <= 1) or (not geometric and step <= 0) or stop < start:
        raise SpecError(f"--grid {spec!r}: range does not advance from {a} to {b}", field="--grid")
    out: list[str] = []
    v = start
    while v <= stop * (1 + 1e-12) and len(out) < 10_000:
        out.append(str(int(v)) if float(v).is_integer() else repr(v))
        v = v * step if geometric else v + step
    return out


def grid_points(axes: Sequence[GridAxis]) -> list[list[tuple[str, Any, str]]]:
    """Cartesian product of the axes: each point a list of (key, value, raw text), first axis outermost."""
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise SpecError(f"--grid {dup} given twice", field="--grid")
    per_axis = [[(a.key, v, r) for v, r in zip(a.values, a.raw, strict=True)] for a in axes]
    return [list(p) for p in itertools.product(*per_axis)]


def point_key(point: Sequence[tuple[str, Any, str]]) -> str:
    """The row key of a point: ``key=value`` pairs joined by ``|``."""
    return "|".join(f"{k}={r}" for k, _v, r in point)


# --------------------------------------------------------------------------------------------------
# One point
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepTask:
    """Everything a worker needs to compute one point (picklable, no open files)."""

    key: str
    base: dict[str, Any]
    point: tuple[tuple[str, Any, str], ...]
    mode: str = "predict"
    engine: str = "analytic"
    spec_dirs: tuple[str, ...] = ()
    plan_args: dict[str, Any] = field(default_factory=dict)


def apply_point(
    base: dict[str, Any], point: Iterable[tuple[str, Any, str]]
) -> tuple[dict[str, Any], dict[str, float]]:
    """The scenario dict of a point (``cluster.gpus`` and ``cluster.nodes`` replace each other) and
    its pseudo-key scale factors."""
    from simcore.specs.resolve import apply_overrides

    data = copy.deepcopy(base)
    scales: dict[str, float] = {}
    for key, value, raw in point:
        if key in PSEUDO_KEYS:
            scales[key] = float(value)
            continue
        if key in ("cluster.gpus", "cluster.nodes") and isinstance(data.get("cluster"), dict):
            data["cluster"].pop("nodes" if key == "cluster.gpus" else "gpus", None)
        if key.startswith("model.") and key != "model.preset" and isinstance(data.get("model"), dict):
            data["model"] = _expand_preset(data["model"])
        if key == "model.preset" and isinstance(data.get("model"), dict):
            data["model"] = {"preset": value}
            continue
        apply_overrides(data, [f"{key}={raw}"])
    return data, scales


def _expand_preset(model: dict[str, Any]) -> dict[str, Any]:
    from simcore.specs.registry import default_registry

    if not model.get("preset"):
        return model
    preset = default_registry().model_preset(str(model["preset"]))
    preset.pop("aliases", None)
    return {**preset, **{k: v for k, v in model.items() if k != "preset"}}


def _derived_system(system: Any, factor: float, nvlink_bw: float) -> str:
    """Register (idempotently) a copy of ``system`` with its NVLink bandwidth scaled; its name."""
    from simcore.specs.registry import set_user_dirs, user_dirs

    name = f"{system.name}-nvlink-x{factor:g}"
    spec = system.model_dump(mode="json")
    spec.update(name=name, aliases=[], nvlink_bandwidth=nvlink_bw * factor)
    spec["sources"] = {**spec.get("sources", {}), "nvlink_bandwidth": f"what-if: {factor:g} x {system.name}"}
    text = yaml.safe_dump(spec, sort_keys=True)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"simcore-derived-{digest}"
    target = root / "systems" / f"{name}.yaml"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, target)
    if root not in user_dirs():
        set_user_dirs([*user_dirs(), root])
    return name


def _apply_scales(data: dict[str, Any], scales: dict[str, float]) -> dict[str, Any]:
    if not scales:
        return data
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster
    from simcore.specs.scenario import ClusterSpec

    cl = resolve_cluster(ClusterSpec.model_validate(data["cluster"]), default_registry())
    f = scales.get("scale.fabric_bandwidth")
    if f is not None and f != 1.0:
        fab = dict(data["cluster"].get("fabric") or cl.fabric.model_dump(mode="json", exclude_none=True))
        fab["nic_bandwidth"] = cl.nic_bandwidth * f
        data["cluster"]["fabric"] = fab
    f = scales.get("scale.nvlink_bandwidth")
    if f is not None and f != 1.0:
        if "fabric" not in data["cluster"]:
            data["cluster"]["fabric"] = cl.fabric.model_dump(mode="json", exclude_none=True)
        data["cluster"]["system"] = _derived_system(cl.system, f, cl.nvlink_bandwidth)
    return data


def _scalar(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def run_point(task: SweepTask) -> dict[str, Any]:
    """Compute one point; user errors become a row with ``status=error`` (never an exception), a point
    that needs more memory per GPU than the device has a row with ``status=does_not_fit`` (its numbers
    kept, ``fits_reason`` saying by how much)."""
    from simcore.specs.registry import set_user_dirs

    row: dict[str, Any] = {"key": task.key, "status": "ok", "error": ""}
    for k, _v, raw in task.point:
        row[k] = raw
    try:
        if task.spec_dirs:
            set_user_dirs([Path(p) for p in task.spec_dirs])
        data, scales = apply_point(task.base, task.point)
        data = _apply_scales(data, scales)
        from simcore.specs.resolve import scenario_from_dict

        sc = scenario_from_dict(data)
        if task.mode == "plan":
            _plan_point(sc, task.plan_args, row)
        else:
            from simcore.prediction import predict

            res_d = predict(sc, engine=task.engine).model_dump()
            for c in TRAINING_COLUMNS + INFERENCE_COLUMNS:
                if c in res_d:
                    row[c] = _scalar(res_d[c])
            if not res_d["fits_in_memory"]:
                row["status"] = "does_not_fit"
    except SimcoreError as e:
        row["status"] = "error"
        row["error"] = str(e)
    except Exception as e:  # noqa: BLE001 - one broken point must not stop a long sweep
        row["status"] = "error"
        row["error"] = f"internal error: {type(e).__name__}: {e}".replace("\n", " ")
    return row


def _plan_point(sc: Any, plan_args: dict[str, Any], row: dict[str, Any]) -> None:
    """Fill ``row`` with the best layout of the point (``does_not_fit`` when no layout fits)."""
    from simcore.planning.plan import plan

    res = plan(sc, top=1, **plan_args)
    cl = _cluster(sc)
    row.update(device=cl.device.name, system=cl.system.name)
    row["evaluated_configs"] = res.evaluated_configs
    row["valid_configs"] = res.valid_configs
    row["search_s"] = res.search_s
    if not res.top:
        if res.evaluated_configs == 0 or res.valid_configs > 0:
            # no layout divides the cluster, or none meets a budget or deadline: not a memory question
            raise SimcoreError("; ".join(res.notes) or "no layout found")
        row["status"] = "does_not_fit"
        row["fits_in_memory"] = False
        row["fits_reason"] = (
            f"none of the {res.evaluated_configs:,} layouts priced fits in the "
            f"{_usable(cl) / GIB:.1f} GiB usable per GPU on {cl.device.name}; "
            "try more GPUs, recompute, ZeRO or a smaller micro-batch"
        )
        return
    best = res.top[0]
    for c in PLAN_COLUMNS:
        if c in best:
            row[c] = _scalar(best[c])
    mem = float(best["memory_per_gpu_bytes"])
    fits = bool(best.get("fits_in_memory", mem <= _usable(cl)))
    row["fits_in_memory"] = fits
    row["fits_reason"] = _fit_reason(mem, _usable(cl), cl.device.name, fits)
    if not fits:
        row["status"] = "does_not_fit"


GIB = 1024**3


def _usable(cl: Any) -> float:
    from simcore.memory import RESERVED_BYTES

    return float(cl.device.memory.capacity) - RESERVED_BYTES


def _fit_reason(needed: float, usable: float, device: str, fits: bool | None = None) -> str:
    """Why a point fits or not, in the words of :func:`simcore.predict`'s ``fits_reason``."""
    if fits if fits is not None else needed <= usable:
        return f"{needed / GIB:.1f} GiB of {usable / GIB:.1f} GiB usable"
    return f"needs {needed / GIB:.1f} GiB per GPU, {usable / GIB:.1f} GiB usable on {device}"


def _cluster(sc: Any) -> Any:
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import resolve_cluster

    return resolve_cluster(sc.cluster, default_registry())


# --------------------------------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------------------------------


class SerialExecutor(cf.Executor):
    """Runs each task in the calling thread at submit time (debugging, tests, tiny sweeps)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - Ctrl-C (KeyboardInterrupt) stops the sweep at once
            fut.set_exception(e)
        return fut


PARENT_POLL_S = 0.5
"""How often a local worker checks that the sweep that started it is still alive."""


def _worker_init(parent: int) -> None:
    """Set up a local worker process: Ctrl-C is left to the sweep (which stops the workers itself), and
    a daemon thread ends the worker within :data:`PARENT_POLL_S` of the sweep's death (a SIGKILL
    runs no clean-up in the parent; the orphan is re-parented, so ``os.getppid()`` changes)."""
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), name="sweep-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _stop_now(ex: cf.Executor, inflight: Iterable[cf.Future[Any]]) -> None:
    """On an interruption: cancel what has not started and end the local worker processes now,
    instead of waiting for the points they are computing (those rows are not written)."""
    for f in inflight:
        f.cancel()
    if isinstance(ex, cf.ProcessPoolExecutor):
        procs = list((getattr(ex, "_processes", None) or {}).values())
        manager = getattr(ex, "_executor_manager_thread", None)
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(5)
        ex.shutdown(wait=False, cancel_futures=True)
        # the pool's thread sees its workers gone and ends; wait for it, or the interpreter's exit
        # hook can race it on Python 3.11 and print "Bad file descriptor"
        if manager is not None:
            manager.join(10)


def make_executor(
    kind: str = "local", workers: int = 2, scheduler: str | None = None
) -> tuple[cf.Executor, Callable[[], None]]:
    """An executor and a function that releases it.

    ``local``: a process pool of ``workers``; ``serial``: in-process; ``dask``: the Dask cluster at
    ``scheduler`` (``tcp://host:port``), or a local Dask cluster of ``workers`` processes when none
    is given.
    """
    if kind == "local":
        ex = cf.ProcessPoolExecutor(
            max_workers=max(1, workers), initializer=_worker_init, initargs=(os.getpid(),)
        )
        return ex, lambda: ex.shutdown(wait=True, cancel_futures=True)
    if kind == "serial":
        s = SerialExecutor()
        return s, lambda: None
    if kind == "dask":
        try:
            distributed = importlib.import_module("distributed")
        except ImportError:
            raise SimcoreError(
                "the dask executor needs dask.distributed: pip install 'simcore[dask]'", field="--executor"
            ) from None
        Client: Any = distributed.Client
        try:
            client: Any = (
                Client(scheduler, timeout=10)
                if scheduler
                else Client(n_workers=max(1, workers), threads_per_worker=1, dashboard_address=None)
            )
        except (OSError, TimeoutError) as e:
            raise SimcoreError(
                f"cannot reach the Dask scheduler {scheduler!r}: {e}", field="--scheduler"
            ) from None
        dex = client.get_executor()

        def close() -> None:
            client.close()

        return dex, close
    raise SpecError(f"unknown executor {kind!r}; use {', '.join(EXECUTORS)}", field="--executor")


# --------------------------------------------------------------------------------------------------
# Result files
# --------------------------------------------------------------------------------------------------


class ResultFile:
    """An append-only CSV of rows with a fixed header; tolerant of a torn last line."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = list(columns)
        self.done: set[tuple[str, str]] = set()
        self._fh: io.TextIOWrapper | None = None
        self._writer: Any = None

    def load(self) -> list[dict[str, str]]:
        """Rows already in the file (the torn tail of an interrupted write is cut off)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        raw = self.path.read_bytes()
        if not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            with self.path.open("r+b") as fh:
                fh.truncate(cut)
            raw = raw[:cut]
        text = raw.decode("utf-8")
        reader = csv.DictReader(io.StringIO(text))
        header = list(reader.fieldnames or [])
        older = bool(header) and header != self.columns and self._older(header)
        if header and header != self.columns and not older:
            raise SpecError(
                f"{self.path} holds another sweep's columns ({', '.join(header[:6])}...); "
                "write to a new file or delete it",
                field="--output",
            )
        rows = []
        for r in reader:
            if None in r or any(v is None for v in r.values()):
                continue  # a malformed row (should not happen after the cut)
            rows.append(_upgrade(dict(r)) if older else dict(r))
            self.done.add((r["base"], r["key"]))
        if older:
            self._rewrite(rows)
        return rows

    def _older(self, header: list[str]) -> bool:
        """Whether ``header`` is this sweep's columns as an older simcore wrote them (without some of
        :data:`ADDED_COLUMNS`)."""
        missing = set(self.columns) - set(header)
        return (
            bool(missing)
            and missing <= set(ADDED_COLUMNS)
            and header == [c for c in self.columns if c in header]
        )

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        """Write ``rows`` under the current header (atomically: a temporary file, then a rename)."""
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=self.columns, extrasaction="ignore")
                w.writeheader()
                for r in rows:
                    w.writerow({c: r.get(c, "") for c in self.columns})
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._fh, fieldnames=self.columns, extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._fh.flush()

    def append(self, row: dict[str, Any]) -> None:
        assert self._writer is not None and self._fh is not None
        self._writer.writerow({c: ("" if row.get(c) is None else row.get(c)) for c in self.columns})
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _upgrade(row: dict[str, str]) -> dict[str, str]:
    """A row written before sweeps had the ``does_not_fit`` status, in today's terms: a computed point
    that did not fit was ``ok``, and a plan-mode point where no layout fits was an ``error``."""
    if row.get("status") == "ok" and row.get("fits_in_memory") == "False":
        row["status"] = "does_not_fit"
    elif row.get("status") == "error" and row.get("error") == "no layout fits in memory":
        row.update(
            status="does_not_fit", error="", fits_in_memory="False", fits_reason="no layout fits in memory"
        )
    elif row.get("status") == "ok" and not row.get("fits_in_memory"):
        row["fits_in_memory"] = "True"  # plan mode: the best layout was chosen among those that fit
    return row


# --------------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------------


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (or another interruption) stopped a sweep; the rows already written are kept."""

    def __init__(self, kept: int, total: int, output: Path | None) -> None:
        self.kept = kept
        self.total = total
        self.output = output
        super().__init__(self.message())

    def message(self) -> str:
        """One line for the user: what was kept and how to go on."""
        if self.output is None:
            return (
                f"interrupted after {self.kept} of {self.total} points; without -o nothing was kept "
                "(give -o results.csv to make a sweep resumable)"
            )
        return (
            f"interrupted: {self.kept} of {self.total} points are kept in {self.output}; "
            "rerun the same command to resume"
        )


@dataclass
class SweepResult:
    """Rows of the whole grid (previously written ones included), in grid order.

    ``errors`` counts rows with ``status == "error"``, ``does_not_fit`` those with
    ``status == "does_not_fit"`` (see :data:`STATUSES`)."""

    rows: list[dict[str, Any]]
    columns: list[str]
    computed: int
    skipped: int
    errors: int
    output: Path | None
    does_not_fit: int = 0

    @property
    def ok(self) -> int:
        """Rows computed that fit in memory."""
        return sum(1 for r in self.rows if r.get("status") == "ok")

    def best(self, by: str = "step_time_s", largest: bool | None = None) -> dict[str, Any] | None:
        """The best row by the numeric column ``by`` among the points that fit in memory (``ok``);
        ``does_not_fit`` and ``error`` rows are never chosen. ``largest`` defaults to whether higher is
        better for that column (:data:`HIGHER_IS_BETTER`: throughput, MFU; else lower: times, cost,
        memory, energy). ``None`` when no ``ok`` row has a number there."""
        if by not in self.columns:
            raise SpecError(f"no column {by!r}; columns: {', '.join(self.columns)}", field="by")
        up = by in HIGHER_IS_BETTER if largest is None else largest
        cand = [r for r in self.rows if r.get("status") == "ok" and _number(r.get(by)) is not None]
        if not cand:
            return None
        pick = max if up else min
        return pick(cand, key=lambda r: _number(r.get(by)) or 0.0)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return None
    return float(v)


def base_hash(base: dict[str, Any], mode: str, engine: str, plan_args: dict[str, Any]) -> str:
    """Short hash identifying the base scenario and how points are computed."""
    blob = json.dumps(
        {"base": base, "mode": mode, "engine": engine, "plan": plan_args}, sort_keys=True, default=str
    )
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def columns_for(kind: str, mode: str, keys: Sequence[str]) -> list[str]:
    res = PLAN_COLUMNS if mode == "plan" else (TRAINING_COLUMNS if kind == "training" else INFERENCE_COLUMNS)
    return ["key", "base", *keys, "status", "error", *res]


def validate_grid(base: dict[str, Any], axes: Sequence[GridAxis]) -> None:
    """Check every value of every axis alone against the base scenario (one clear error line)."""
    from simcore.specs.resolve import scenario_from_dict

    for a in axes:
        if a.key in PSEUDO_KEYS:
            continue
        for v, r in zip(a.values, a.raw, strict=True):
            try:
                data, _ = apply_point(base, [(a.key, v, r)])
                scenario_from_dict(data)
            except SimcoreError as e:
                raise SpecError(f"--grid {a.key}={r}: {e.problem}", field=None) from None


def _coerce(v: str) -> Any:
    if v in ("True", "False"):
        return v == "True"
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f


def run_sweep(
    scenario: str | Path,
    grids: Sequence[str],
    output: str | Path | None = None,
    executor: str = "local",
    workers: int = 2,
    scheduler: str | None = None,
    overrides: Sequence[str] = (),
    engine: str = "analytic",
    mode: str = "predict",
    plan_args: dict[str, Any] | None = None,
    progress: bool = True,
    _stop_after: int | None = None,
) -> SweepResult:
    """Run a what-if sweep (see the module docstring); returns every row of the grid.

    Args:
        scenario: base scenario file or built-in name.
        grids: ``key.path=v1,v2,...`` specifications (cartesian product).
        output: ``.csv`` (appended as rows complete; resumable) or ``.parquet``; ``None`` keeps rows
            in memory only.
        executor: ``local`` (process pool), ``serial`` or ``dask``.
        workers: local processes (or local Dask workers when no scheduler is given).
        scheduler: Dask scheduler address ``tcp://host:port``.
        overrides: ``key.path=value`` applied to the base scenario first.
        engine: ``analytic`` or ``des`` (predict mode).
        mode: ``predict`` or ``plan`` (best layout per point).
        plan_args: keyword arguments for :func:`~simcore.planning.plan.plan` in plan mode.
        progress: show a progress bar.
    """
    from simcore.specs.loader import read_yaml
    from simcore.specs.registry import user_dirs
    from simcore.specs.resolve import apply_overrides, find_scenario, scenario_from_dict

    if mode not in MODES:
        raise SpecError(f"unknown mode {mode!r}; use predict or plan", field="--mode")
    if engine not in ("analytic", "des"):
        raise SpecError(f"unknown engine {engine!r}; use analytic or des", field="--engine")
    if executor not in EXECUTORS:
        raise SpecError(f"unknown executor {executor!r}; use {', '.join(EXECUTORS)}", field="--executor")
    if not grids:
        raise SpecError("give at least one --grid key.path=v1,v2,...", field="--grid")
    axes = [parse_grid(g) for g in grids]
    points = grid_points(axes)
    path = find_scenario(str(scenario))
    base = read_yaml(path)
    apply_overrides(base, list(overrides), str(path))
    sc = scenario_from_dict(base, file=str(path))
    if mode == "plan" and sc.kind != "training":
        raise SpecError("--mode plan needs a training scenario", field="--mode")
    validate_grid(base, axes)
    pargs = dict(plan_args or {})
    bh = base_hash(base, mode, engine, pargs)
    columns = columns_for(sc.kind, mode, [a.key for a in axes])

    out_path = Path(output) if output is not None else None
    final_parquet: Path | None = None
    if out_path is not None and out_path.suffix == ".parquet":
        try:
            importlib.import_module("pyarrow")
        except ImportError:
            raise SpecError(
                "parquet output needs pyarrow (pip install pyarrow); or use -o results.csv", field="--output"
            ) from None
        final_parquet = out_path
        out_path = out_path.with_name(out_path.name + ".partial.csv")
    elif out_path is not None and out_path.suffix != ".csv":
        raise SpecError(f"{out_path}: results are written as .csv or .parquet", field="--output")

    rf = ResultFile(out_path, columns) if out_path is not None else None
    existing = rf.load() if rf is not None else []
    by_key: dict[str, dict[str, Any]] = {r["key"]: r for r in existing if r["base"] == bh}
    todo = [p for p in points if point_key(p) not in by_key]
    spec_dirs = tuple(str(p) for p in user_dirs())
    tasks = [SweepTask(point_key(p), base, tuple(p), mode, engine, spec_dirs, pargs) for p in todo]

    computed = 0
    new_rows: dict[str, dict[str, Any]] = {}
    if tasks:
        ex, close = make_executor(executor, workers, scheduler)
        if rf is not None:
            rf.open()
        window = max(2 * max(workers, 1), 4)
        bar = None
        inflight: set[cf.Future[Any]] = set()
        try:
            it = iter(tasks)
            for t in itertools.islice(it, window):
                inflight.add(ex.submit(run_point, t))
            bar = _progress(progress, len(points), len(points) - len(todo))  # after workers start
            while inflight:
                done, inflight = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    row = fut.result()
                    row["base"] = bh
                    if rf is not None:
                        rf.append(row)
                    new_rows[row["key"]] = row
                    computed += 1
                    if bar is not None:
                        bar[0].advance(bar[1])
                    if _stop_after is not None and computed >= _stop_after:
                        raise KeyboardInterrupt(f"stopped after {computed} rows (test hook)")
                    nxt = next(it, None)
                    if nxt is not None:
                        inflight.add(ex.submit(run_point, nxt))
        except KeyboardInterrupt as e:
            _stop_now(ex, inflight)
            kept = len(by_key) + computed if rf is not None else computed
            raise SweepInterrupted(kept, len(points), out_path) from e
        finally:
            if bar is not None:
                bar[0].stop()
            if rf is not None:
                rf.close()
            close()

    rows: list[dict[str, Any]] = []
    for p in points:
        k = point_key(p)
        r = new_rows.get(k) or by_key.get(k)
        if r is not None:
            rows.append({c: _coerce(str(r[c])) if isinstance(r.get(c), str) else r.get(c) for c in columns})
    errors = sum(1 for r in rows if r.get("status") == "error")
    no_fit = sum(1 for r in rows if r.get("status") == "does_not_fit")
    if final_parquet is not None and len(rows) == len(points):
        _write_parquet(rows, columns, final_parquet)
    return SweepResult(
        rows, columns, computed, len(points) - len(todo), errors, final_parquet or out_path, no_fit
    )


def _write_parquet(rows: list[dict[str, Any]], columns: list[str], path: Path) -> None:
    pa: Any = importlib.import_module("pyarrow")
    pq: Any = importlib.import_module("pyarrow.parquet")

    data = {c: [None if r.get(c) in ("", None) else str(r.get(c)) for r in rows] for c in columns}
    pq.write_table(pa.table(data), path)


def _progress(enabled: bool, total: int, completed: int) -> tuple[Any, Any] | None:
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    p = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    p.start()
    task = p.add_task("sweep", total=total, completed=completed)
    return p, task


__all__ = [
    "STATUSES",
    "GridAxis",
    "SweepInterrupted",
    "SweepResult",
    "SweepTask",
    "grid_points",
    "make_executor",
    "parse_grid",
    "point_key",
    "run_point",
    "run_sweep",
]
