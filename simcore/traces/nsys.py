"""Reader of Nsight Systems SQLite exports (``nsys export --type sqlite``).

The schema changes between nsys versions, so every table and column is probed
(``sqlite_master``, ``PRAGMA table_info``) before it is used: kernels from
``CUPTI_ACTIVITY_KIND_KERNEL`` (names through ``StringIds``: ``demangledName``, else ``shortName``,
else a ``name``/``value`` column), copies and fills from ``CUPTI_ACTIVITY_KIND_MEMCPY``/``MEMSET``,
launches and synchronisations from ``CUPTI_ACTIVITY_KIND_RUNTIME``, ranges from ``NVTX_EVENTS``
(``text`` or ``StringIds[textId]``), the GPU name from ``TARGET_INFO_GPU`` or
``TARGET_INFO_CUDA_DEVICE``, the epoch of time 0 from ``TARGET_INFO_SESSION_START_TIME``.

Times in the file are nanoseconds from the session start; the :class:`Trace` holds seconds from the
first event. NVTX ranges named like PyTorch's ``emit_nvtx`` ranges (``aten::mm, seq = 3, sizes =
[[4096, 1024], [1024, 1024]]``) become ``cpu_op`` records with their shapes, linked to the kernels
launched inside them (the innermost range on the launching thread).
"""

from __future__ import annotations

import ast
import sqlite3
from bisect import bisect_right
from collections import defaultdict
from pathlib import Path
from typing import Any

from simcore.errors import TraceError
from simcore.traces.model import Annotation, CpuOp, GpuEvent, RuntimeCall, Trace

_LAUNCH_WORDS = ("Launch", "launch", "Memcpy", "Memset", "memcpy", "memset")


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def _cols(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _parse_nvtx_op(text: str) -> tuple[str, list[Any] | None]:
    """(op name, input dims) of a PyTorch ``emit_nvtx`` range text such as
    ``aten::mm, seq = 3, op_id = 12, sizes = [[4096, 1024], [1024, 1024]], input_op_ids = [...]``."""
    name = text.split(",", 1)[0].strip()
    i = text.find("sizes = [")
    if i < 0:
        return name, None
    j = i + len("sizes = ")
    depth = 0
    for k in range(j, len(text)):
        if text[k] == "[":
            depth += 1
        elif text[k] == "]":
            depth -= 1
            if depth == 0:
                try:
                    v = ast.literal_eval(text[j : k + 1])
                except (ValueError, SyntaxError):
                    return name, None
                return name, v if isinstance(v, list) else None
    return name, None


def read_nsys(path: str | Path) -> Trace:
    """Read an Nsight Systems SQLite export into a :class:`Trace`."""
    p = Path(path)
    try:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        tables = _tables(con)
    except sqlite3.DatabaseError as e:
        raise TraceError(f"not a readable SQLite file ({e})", file=str(p)) from None
    try:
        return _read(con, tables, p)
    except sqlite3.DatabaseError as e:
        raise TraceError(f"cannot read the Nsight Systems tables ({e})", file=str(p)) from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, tables: set[str], p: Path) -> Trace:
    if (
        "CUPTI_ACTIVITY_KIND_KERNEL" not in tables
        and "NVTX_EVENTS" not in tables
        and "StringIds" not in tables
    ):
        raise TraceError(
            "not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS or StringIds table)",
            file=str(p),
        )
    tr = Trace(path=str(p), format="nsys")
    strings: dict[int, str] = {}
    if "StringIds" in tables:
        strings = {int(i): str(v) for i, v in con.execute("SELECT id, value FROM StringIds")}

    def sname(v: Any) -> str:
        if isinstance(v, int):
            return strings.get(v, str(v))
        return str(v) if v is not None else ""

    raw: list[tuple[str, str, int, int, int, int, int, dict[str, Any]]] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        c = _cols(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        name_col = next((n for n in ("demangledName", "shortName", "name", "mangledName") if n in c), None)
        if name_col is None:
            raise TraceError("CUPTI_ACTIVITY_KIND_KERNEL has no name column", file=str(p))
        grid = [x for x in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ") if x in c]
        corr = "correlationId" if "correlationId" in c else "NULL"
        dev = "deviceId" if "deviceId" in c else "0"
        stream = "streamId" if "streamId" in c else "0"
        q = f"SELECT start, end, {dev}, {stream}, {corr}, {name_col}{''.join(', ' + g for g in grid)} FROM CUPTI_ACTIVITY_KIND_KERNEL"
        for row in con.execute(q):
            args: dict[str, Any] = {}
            if len(grid) == 6:
                args = {"grid": list(row[6:9]), "block": list(row[9:12])}
            raw.append(
                (
                    "kernel",
                    sname(row[5]),
                    row[0],
                    row[1],
                    row[2] or 0,
                    row[3] or 0,
                    row[4] if row[4] is not None else -1,
                    args,
                )
            )
    for table, cat, label in (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy", "Memcpy"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset", "Memset"),
    ):
        if table not in tables:
            continue
        c = _cols(con, table)
        corr = "correlationId" if "correlationId" in c else "NULL"
        nb = "bytes" if "bytes" in c else "0"
        kind = "copyKind" if "copyKind" in c else "NULL"
        for row in con.execute(f"SELECT start, end, deviceId, streamId, {corr}, {nb}, {kind} FROM {table}"):
            nm = label if cat == "gpu_memset" else f"Memcpy {_COPY_KIND.get(row[6], 'Unknown')}"
            raw.append(
                (
                    cat,
                    nm,
                    row[0],
                    row[1],
                    row[2] or 0,
                    row[3] or 0,
                    row[4] if row[4] is not None else -1,
                    {"bytes": row[5]},
                )
            )
    host: list[tuple[str, int, int, int, int]] = []
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        c = _cols(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        ncol = "nameId" if "nameId" in c else "name" if "name" in c else None
        tid = "globalTid" if "globalTid" in c else "0"
        if ncol is not None:
            for row in con.execute(
                f"SELECT start, end, correlationId, {ncol}, {tid} FROM CUPTI_ACTIVITY_KIND_RUNTIME"
            ):
                host.append(
                    (sname(row[3]), row[0], row[1], row[2] if row[2] is not None else -1, row[4] or 0)
                )
    nvtx: list[tuple[str, int, int, int]] = []
    if "NVTX_EVENTS" in tables:
        c = _cols(con, "NVTX_EVENTS")
        text = "text" if "text" in c else "NULL"
        tid_col = "textId" if "textId" in c else "NULL"
        gt = "globalTid" if "globalTid" in c else "0"
        for row in con.execute(
            f"SELECT start, end, {text}, {tid_col}, {gt} FROM NVTX_EVENTS WHERE end IS NOT NULL"
        ):
            label_txt = (
                row[2] if row[2] is not None else (strings.get(row[3], "") if row[3] is not None else "")
            )
            if label_txt:
                nvtx.append((str(label_txt), row[0], row[1], row[4] or 0))
    starts = [r[2] for r in raw] + [h[1] for h in host] + [n[1] for n in nvtx]
    if not starts:
        tr.device_properties = _gpus(con, tables)
        return tr
    t0 = min(starts)

    def s(ns: int) -> float:
        return (ns - t0) * 1e-9

    # NVTX ranges: op ranges (with shapes) per thread, annotations for the rest
    by_tid: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for i, (txt, a, b, gtid) in enumerate(nvtx):
        if txt.startswith("aten::") or txt.startswith("c10d::") or "sizes = " in txt:
            opname, dims = _parse_nvtx_op(txt)
            tr.cpu_ops[i] = CpuOp(opname, s(a), (b - a) * 1e-9, i, gtid & 0xFFFFFF, dims, None, None)
            by_tid[gtid].append((a, b, i))
        else:
            tr.annotations.append(Annotation(txt, s(a), (b - a) * 1e-9, False, gtid & 0xFFFFFF))
    for v in by_tid.values():
        v.sort()
    tid_starts = {k: [x[0] for x in v] for k, v in by_tid.items()}

    def innermost(gtid: int, ts: int) -> int:
        v = by_tid.get(gtid)
        if not v:
            return -1
        j = bisect_right(tid_starts[gtid], ts) - 1
        best = -1
        k = j
        while k >= 0 and j - k < 256:
            a, b, idx = v[k]
            if a <= ts <= b:
                best = idx
                break
            k -= 1
        return best

    ext_of_corr: dict[int, int] = {}
    for hname, ha, hb, hcorr, gtid in sorted(host, key=lambda h: h[1]):
        rc = RuntimeCall(hname, s(ha), (hb - ha) * 1e-9, hcorr, gtid & 0xFFFFFF)
        tr.host_calls.append(rc)
        if hcorr >= 0 and any(w in hname for w in _LAUNCH_WORDS):
            tr.runtime[hcorr] = rc
            ext = innermost(gtid, ha)
            if ext >= 0:
                ext_of_corr[hcorr] = ext
                rc.ext_id = ext
    for cat, kname, ka, kb, kdev, kstream, kcorr, args in raw:
        tr.gpu_events.append(
            GpuEvent(
                kname,
                cat,
                s(ka),
                (kb - ka) * 1e-9,
                int(kdev),
                int(kstream),
                int(kcorr),
                ext_of_corr.get(int(kcorr), -1),
                args,
            )
        )
    tr.device_properties = _gpus(con, tables)
    if "TARGET_INFO_SESSION_START_TIME" in tables and "utcEpochNs" in _cols(
        con, "TARGET_INFO_SESSION_START_TIME"
    ):
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        if row and row[0] is not None:
            tr.t0_ns = float(row[0]) + t0
    tr.events_seen = len(raw) + len(host) + len(nvtx)
    return tr


_COPY_KIND = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}


def _gpus(con: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE"):
        if table not in tables:
            continue
        c = _cols(con, table)
        if "name" not in c:
            continue
        idc = next((x for x in ("cudaId", "id", "deviceId", "cuDevice") if x in c), None)
        q = f"SELECT {idc or 'NULL'}, name{', smCount' if 'smCount' in c else ''} FROM {table}"
        out: list[dict[str, Any]] = []
        for row in con.execute(q):
            d: dict[str, Any] = {"id": row[0] if row[0] is not None else len(out), "name": row[1]}
            if len(row) > 2:
                d["numSms"] = row[2]
            out.append(d)
        if out:
            return out
    return []
