"""Readers for collective measurements: nccl-tests text tables, nccl-tests ``-J`` JSON, and the
torch.distributed sweep CSV written by ``tools/bench_comm.py``.

All three become one :class:`CommMeasurements` table of numpy columns in SI units (bytes, seconds,
bytes/s), keyed on ``(op, dtype, nbytes, gpus, nodes)``. ``busbw`` is always recomputed with the
nccl-tests factors from ``nbytes`` and ``time_s``, so files that used other factors compare cleanly.
A file that cannot be read raises :class:`~simcore.errors.TraceError` with one line naming the file
(and line) and the problem.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simcore.errors import SimcoreError, TraceError
from simcore.specs.comm_profile import OPS, busbw_factor

_NCCL_TYPES = {
    "float": "fp32",
    "float32": "fp32",
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "double": "fp64",
    "float64": "fp64",
    "int8": "int8",
    "uint8": "int8",
    "int32": "int32",
    "uint32": "int32",
    "int64": "int64",
    "uint64": "int64",
    "f8e4m3": "fp8",
    "f8e5m2": "fp8",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp32": "fp32",
    "fp8": "fp8",
}

_OP_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
    "sendrecvbidir": "send_recv_bidir",
    "broadcast": "broadcast",
    "reduce": "reduce",
}


def canonical_op(name: str) -> str | None:
    """``all_reduce_perf`` / ``AllReduce`` / ``all-reduce`` -> ``all_reduce``; None when unknown."""
    key = re.sub(r"[^a-z]", "", name.lower().removesuffix("_perf").removesuffix("perf"))
    return _OP_NAMES.get(key)


def op_from_filename(path: str) -> str | None:
    """The collective a file name starts with (``all_reduce_perf_8gpu.log`` -> ``all_reduce``)."""
    letters = re.sub(r"[^a-z]", "", Path(path).name.lower())
    for key in sorted(_OP_NAMES, key=len, reverse=True):
        if letters.startswith(key):
            return _OP_NAMES[key]
    return None


@dataclass(frozen=True)
class CommMeasurements:
    """Measured collectives, one row per (op, dtype, size, group, in-place) point. SI units."""

    op: NDArray[np.str_]
    dtype: NDArray[np.str_]
    nbytes: NDArray[np.float64]
    gpus: NDArray[np.int64]
    nodes: NDArray[np.int64]
    time_s: NDArray[np.float64]
    in_place: NDArray[np.bool_]
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.nbytes.shape[0])

    @property
    def algbw(self) -> NDArray[np.float64]:
        """Bytes/s: nbytes / time_s."""
        return self.nbytes / self.time_s

    @property
    def busbw(self) -> NDArray[np.float64]:
        """Bytes/s with the nccl-tests factor of each op."""
        out = np.empty(len(self))
        for op in np.unique(self.op):
            m = self.op == op
            base = "send_recv" if op == "send_recv_bidir" else str(op)
            out[m] = self.algbw[m] * busbw_factor(base, self.gpus[m])
        return out

    def select(self, mask: NDArray[np.bool_]) -> CommMeasurements:
        return CommMeasurements(
            op=self.op[mask],
            dtype=self.dtype[mask],
            nbytes=self.nbytes[mask],
            gpus=self.gpus[mask],
            nodes=self.nodes[mask],
            time_s=self.time_s[mask],
            in_place=self.in_place[mask],
            source=self.source,
            meta=self.meta,
        )

    @staticmethod
    def concat(parts: list[CommMeasurements]) -> CommMeasurements:
        if not parts:
            raise SimcoreError("no measurements")
        return CommMeasurements(
            op=np.concatenate([p.op for p in parts]),
            dtype=np.concatenate([p.dtype for p in parts]),
            nbytes=np.concatenate([p.nbytes for p in parts]),
            gpus=np.concatenate([p.gpus for p in parts]),
            nodes=np.concatenate([p.nodes for p in parts]),
            time_s=np.concatenate([p.time_s for p in parts]),
            in_place=np.concatenate([p.in_place for p in parts]),
            source=";".join(p.source for p in parts),
        )


def _build(rows: list[dict[str, Any]], source: str, meta: dict[str, Any] | None = None) -> CommMeasurements:
    if not rows:
        raise TraceError("no measurement rows found", file=source)
    return CommMeasurements(
        op=np.array([r["op"] for r in rows], dtype=str),
        dtype=np.array([r["dtype"] for r in rows], dtype=str),
        nbytes=np.array([r["nbytes"] for r in rows], dtype=np.float64),
        gpus=np.array([r["gpus"] for r in rows], dtype=np.int64),
        nodes=np.array([r.get("nodes", 1) for r in rows], dtype=np.int64),
        time_s=np.array([r["time_s"] for r in rows], dtype=np.float64),
        in_place=np.array([bool(r.get("in_place", False)) for r in rows], dtype=bool),
        source=source,
        meta=meta or {},
    )


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceError("file not found", file=str(path)) from None
    except OSError as e:
        raise TraceError(f"cannot read: {e}", file=str(path)) from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise TraceError(f"corrupt gzip: {e}", file=str(path)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError("not UTF-8 text", file=str(path)) from None


def _num(tok: str, what: str, src: str, line: int) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise TraceError(f"line {line}: {what} {tok!r} is not a number", file=src) from None
    if not np.isfinite(v):
        raise TraceError(f"line {line}: {what} {tok!r} is not finite", file=src)
    return v


# ---------------------------------------------------------------------------------------------
# nccl-tests text table
# ---------------------------------------------------------------------------------------------

_RANK_RE = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device", re.I)
_START_RE = re.compile(r"Collective test starting:\s*(\S+)", re.I)
_THREAD_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)", re.I)


def parse_nccl_tests_text(
    text: str,
    source: str = "<text>",
    op: str | None = None,
    gpus: int | None = None,
    nodes: int | None = None,
) -> CommMeasurements:
    """Parse nccl-tests stdout (``#  size  count  type  redop  root  time  algbw  busbw  #wrong ...``).

    Each data row gives an out-of-place and an in-place point (both are kept, flagged by
    ``in_place``). The op comes from ``op``, a ``Collective test starting:`` line, or the file name
    (``all_reduce_perf.log``); the group size from ``gpus`` or the ``# Rank`` lines; the node count
    from the distinct host names there.
    """
    lines = text.splitlines()
    ranks: dict[int, str] = {}
    header: list[str] | None = None
    found_op = canonical_op(op) if op else None
    if op and found_op is None:
        raise TraceError(f"unknown collective {op!r}", file=source)
    rows: list[dict[str, Any]] = []
    saw_table = False
    for i, line in enumerate(lines, start=1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = _RANK_RE.search(s)
            if m:
                ranks[int(m.group(1))] = m.group(2)
                continue
            m = _START_RE.search(s)
            if m and found_op is None:
                found_op = canonical_op(m.group(1))
                continue
            body = s.lstrip("#").split()
            if body and body[0] == "size" and any(t in ("time", "cputime") for t in body):
                header = body
                saw_table = True
            continue
        toks = s.split()
        if not toks[0].isdigit():
            # nccl-tests also prints lines such as "nccl-tests: ..." or NCCL INFO logs; skip them,
            # but a line that looks like a row (number first) must parse.
            continue
        if header is None and not saw_table:
            header = [
                "size",
                "count",
                "type",
                "redop",
                "root",
                "time",
                "algbw",
                "busbw",
                "#wrong",
                "time",
                "algbw",
                "busbw",
                "#wrong",
            ]
            saw_table = True
        assert header is not None
        tpos = [k for k, h in enumerate(header) if h in ("time", "cputime")]
        if len(toks) < tpos[0] + 3:
            raise TraceError(
                f"line {i}: expected at least {tpos[0] + 3} columns ({' '.join(header)}), got {len(toks)}",
                file=source,
            )
        size = _num(toks[0], "size", source, i)
        dtype_tok = toks[header.index("type")] if "type" in header else "float"
        dtype = _NCCL_TYPES.get(dtype_tok.lower())
        if dtype is None:
            raise TraceError(f"line {i}: unknown data type {dtype_tok!r}", file=source)
        for k, pos in enumerate(tpos):
            if pos + 2 >= len(toks):
                break
            t_us = _num(toks[pos], "time", source, i)
            if t_us <= 0:
                raise TraceError(f"line {i}: time {toks[pos]!r} must be positive", file=source)
            rows.append({"nbytes": size, "dtype": dtype, "time_s": t_us * 1e-6, "in_place": k == 1})
    if not saw_table or not rows:
        raise TraceError("no nccl-tests result table found", file=source)
    if found_op is None:
        found_op = op_from_filename(source)
    if found_op is None:
        raise TraceError("cannot tell which collective this is; pass op=", file=source)
    n = gpus or len(ranks)
    if not n:
        m = _THREAD_RE.search(text)
        n = int(m.group(1)) * int(m.group(2)) if m else 0
    if not n:
        raise TraceError("cannot tell the number of GPUs (no '# Rank' lines); pass gpus=", file=source)
    k_nodes = nodes or max(len(set(ranks.values())), 1)
    for r in rows:
        r.update(op=found_op, gpus=n, nodes=k_nodes)
    return _build(rows, source, {"format": "nccl-tests-text"})


# ---------------------------------------------------------------------------------------------
# nccl-tests -J JSON
# ---------------------------------------------------------------------------------------------


def parse_nccl_tests_json(
    data: Any,
    source: str = "<json>",
    op: str | None = None,
    gpus: int | None = None,
    nodes: int | None = None,
) -> CommMeasurements:
    """Parse the document written by nccl-tests ``-J file.json`` (``results[]`` with
    ``out_of_place``/``in_place`` ``{time, alg_bw, bus_bw, nwrong}``; times in microseconds)."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise TraceError("not an nccl-tests JSON document (no 'results' list)", file=source)
    cfg_raw = data.get("config")
    cfg: dict[str, Any] = cfg_raw if isinstance(cfg_raw, dict) else {}
    found = canonical_op(op) if op else None
    if found is None:
        for cand in (data.get("collective"), cfg.get("collective"), data.get("test"), data.get("args")):
            if isinstance(cand, str):
                m = re.search(r"([a-z_]+)_perf", cand)
                found = canonical_op(m.group(1) if m else cand)
                if found:
                    break
    if found is None:
        found = op_from_filename(source)
    if found is None:
        raise TraceError("cannot tell which collective this is; pass op=", file=source)
    dev_raw = data.get("devices")
    devices: list[Any] = dev_raw if isinstance(dev_raw, list) else []
    n = gpus or len(devices)
    if not n:
        ng = cfg.get("ngpus")
        n = int(ng) if isinstance(ng, int | float) else 0
    if not n:
        raise TraceError("cannot tell the number of GPUs ('devices' empty); pass gpus=", file=source)
    hosts = {d.get("hostname") or d.get("host") for d in devices if isinstance(d, dict)}
    hosts.discard(None)
    k_nodes = nodes or max(len(hosts), 1)
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(data["results"]):
        where = f"results[{i}]"
        if not isinstance(r, dict) or "size" not in r:
            raise TraceError(f"{where}: expected an object with 'size'", file=source)
        try:
            size = float(r["size"])
        except (TypeError, ValueError):
            raise TraceError(f"{where}.size: {r['size']!r} is not a number", file=source) from None
        dt = _NCCL_TYPES.get(str(r.get("type", "float")).lower())
        if dt is None:
            raise TraceError(f"{where}.type: unknown data type {r.get('type')!r}", file=source)
        got = False
        for key, inplace in (("out_of_place", False), ("in_place", True)):
            part = r.get(key)
            if part is None:
                continue
            if not isinstance(part, dict):
                raise TraceError(f"{where}.{key}: expected an object", file=source)
            t = part.get("time", part.get("cpu_time"))
            try:
                t_us = float(t)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise TraceError(f"{where}.{key}.time: {t!r} is not a number", file=source) from None
            if not t_us > 0:
                raise TraceError(f"{where}.{key}.time must be positive", file=source)
            rows.append({"nbytes": size, "dtype": dt, "time_s": t_us * 1e-6, "in_place": inplace})
            got = True
        if not got:
            raise TraceError(f"{where}: neither out_of_place nor in_place timings", file=source)
    for row in rows:
        row.update(op=found, gpus=n, nodes=k_nodes)
    return _build(rows, source, {"format": "nccl-tests-json", "nccl_version": data.get("nccl_version")})


# ---------------------------------------------------------------------------------------------
# torch.distributed sweep CSV (tools/bench_comm.py)
# ---------------------------------------------------------------------------------------------

_CSV_REQUIRED = ("op", "dtype", "nbytes", "gpus", "time_s")


def parse_sweep_csv(text: str, source: str = "<csv>") -> CommMeasurements:
    """Parse ``op,dtype,nbytes,gpus,time_s[,time_max_s,algbw,busbw,...,nodes]`` (SI units)."""
    reader = csv.DictReader(io.StringIO(text))
    cols = reader.fieldnames or []
    missing = [c for c in _CSV_REQUIRED if c not in cols]
    if missing:
        raise TraceError(
            f"CSV lacks column(s) {', '.join(missing)} (has {', '.join(cols) or 'none'})", file=source
        )
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(reader, start=2):
        op = canonical_op(r["op"] or "")
        if op is None:
            raise TraceError(f"line {i}: unknown op {r['op']!r}", file=source)
        dt = _NCCL_TYPES.get((r["dtype"] or "").lower())
        if dt is None:
            raise TraceError(f"line {i}: unknown dtype {r['dtype']!r}", file=source)
        nb = _num(r["nbytes"] or "", "nbytes", source, i)
        g = _num(r["gpus"] or "", "gpus", source, i)
        t = _num(r["time_s"] or "", "time_s", source, i)
        if nb <= 0 or t <= 0 or g < 1 or g != int(g):
            raise TraceError(
                f"line {i}: nbytes, time_s must be positive and gpus a whole number", file=source
            )
        nodes = int(_num(r["nodes"], "nodes", source, i)) if r.get("nodes") else 1
        rows.append({"op": op, "dtype": dt, "nbytes": nb, "gpus": int(g), "time_s": t, "nodes": nodes})
    return _build(rows, source, {"format": "sweep-csv"})


def read_measurements(
    path: str | Path, op: str | None = None, gpus: int | None = None, nodes: int | None = None
) -> CommMeasurements:
    """Read any supported file: ``.json`` (nccl-tests -J), ``.csv[.gz]`` (our sweep), else nccl-tests
    stdout text (optionally gzipped). ``op``/``gpus``/``nodes`` fill what a text log does not say."""
    p = Path(path)
    text = _read_text(p)
    name = p.name.lower().removesuffix(".gz")
    stripped = text.lstrip()
    if name.endswith(".json") or stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise TraceError(f"malformed JSON at line {e.lineno}: {e.msg}", file=str(p)) from None
        return parse_nccl_tests_json(data, str(p), op, gpus, nodes)
    if name.endswith(".csv"):
        return parse_sweep_csv(text, str(p))
    return parse_nccl_tests_text(text, str(p), op, gpus, nodes)


KNOWN_OPS = (*OPS, "send_recv_bidir")

__all__ = [
    "KNOWN_OPS",
    "CommMeasurements",
    "canonical_op",
    "parse_nccl_tests_json",
    "parse_nccl_tests_text",
    "parse_sweep_csv",
    "read_measurements",
]
