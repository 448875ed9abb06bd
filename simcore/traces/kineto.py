"""Streaming reader of PyTorch profiler (Kineto) Chrome-trace JSON, ``.json`` or ``.json.gz``.

The file is never loaded whole: a small incremental tokenizer walks the top-level object, decodes
every member except ``traceEvents`` with :meth:`json.JSONDecoder.raw_decode`, and decodes the
``traceEvents`` array a batch of whole events at a time from a sliding text buffer (4 MiB chunks).
Each batch is decoded by ``msgspec`` into small typed records that hold only the fields simcore reads
(unknown fields, ``python_function`` arguments and flow events are skipped without building a dict);
a batch ``msgspec`` refuses (NaN literals, odd types) and a cut that falls inside an event take the
standard library's decoder, with the same result. Only the events simcore uses are kept (GPU
kernels/memcpy/memset, ``cpu_op`` with shapes, CUDA runtime calls, annotations), in compact slotted
objects whose names and shape lists are shared between repeats, so memory grows with the number of GPU
activities, not with the file's size (``benchmarks/bench_trace_read.py`` measures both).

Both layouts are read: old traces with absolute epoch-microsecond ``ts``, and newer ones with
``ts`` relative to ``baseTimeNanoseconds`` (written after ``traceEvents``). Times come out in seconds
from the first event of the file; :attr:`Trace.t0_ns` is that instant in epoch nanoseconds.
A bare JSON array of events (the Chrome "array format") is read too.
"""

from __future__ import annotations

import codecs
import gc
import gzip
import json
import multiprocessing
import os
import re
import sys
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from simcore.errors import TraceError
from simcore.traces.model import Annotation, CpuOp, GpuEvent, RuntimeCall, Trace

try:
    import msgspec
except ImportError:  # pragma: no cover - a declared dependency; the stdlib path reads the same
    msgspec = None  # type: ignore[assignment]

CHUNK = 4 << 20
"""Bytes read (decompressed) per refill."""
MAX_EVENT = 32 << 20
"""Longest single JSON value the tokenizer will buffer before calling the file invalid."""

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})
_CAT_ALIAS = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "runtime"})
_ANNOT_CATS = frozenset({"user_annotation", "gpu_user_annotation"})
_KERNEL_ARGS = (
    "grid",
    "block",
    "bytes",
    "registers per thread",
    "shared memory",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "In msg size",
    "Out msg size",
    "dtype",
    "Group size",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Seq",
    "Rank",
    "In split size",
    "Out split size",
    "Src Rank",
    "Dst Rank",
)

_SHAPE_ARGS = (
    ("dims", "Input Dims"),
    ("types", "Input type"),
    ("conc", "Concrete Inputs"),
    ("strides", "Input Strides"),
)
"""A ``cpu_op``'s recorded inputs: kept as raw JSON text while decoding, decoded once per distinct text."""
_KEPT_ATTRS = tuple((key, f"k{i}") for i, key in enumerate(_KERNEL_ARGS))
"""(argument, attribute of the typed arguments record) of the GPU arguments simcore keeps."""

_FAST = msgspec is not None
"""Decode event batches with ``msgspec`` into typed records (tests switch it off to compare)."""
_decode_events: Callable[[str], list[Any]] | None = None
if msgspec is not None:
    _U: Any = msgspec.UNSET
    _Args: Any = msgspec.defstruct(
        "_Args",
        [
            ("device", Any, _U),
            ("stream", Any, _U),
            ("correlation", Any, _U),
            ("ext", Any, msgspec.field(default=_U, name="External id")),
            ("labels", Any, _U),
            *(
                (a, msgspec.Raw | msgspec.UnsetType, msgspec.field(default=_U, name=k))
                for a, k in _SHAPE_ARGS
            ),
            *((a, Any, msgspec.field(default=_U, name=k)) for k, a in _KEPT_ATTRS),
        ],
        gc=False,
    )
    # the defaults are those of ``dict.get`` in :func:`_extract`, so both paths read an event alike
    _Ev: Any = msgspec.defstruct(
        "_Ev",
        [
            ("ph", Any, None),
            ("cat", Any, ""),
            ("name", Any, ""),
            ("ts", Any, None),
            ("dur", Any, 0.0),
            ("pid", Any, None),
            ("tid", Any, 0),
            ("args", _Args | None, None),
        ],
        gc=False,
    )
    _decode_events = msgspec.json.Decoder(list[_Ev]).decode
    _DecodeError: type[Exception] = msgspec.DecodeError
else:  # pragma: no cover
    _DecodeError = ValueError


class _Tag(str):
    """The key of an item :func:`iter_trace` makes itself (a batch, a count): equal to its name, but
    told apart by identity from a top-level member of that name in the file (a plain ``str``), so a
    file with a member ``"python"`` or ``"events"`` cannot pass for one."""

    __slots__ = ()


K_EVENTS, K_TYPED, K_SEGMENT, K_SKIPPED, K_PYTHON, K_BYTES = (
    _Tag(k) for k in ("events", "typed", "segment", "skipped", "python", "__bytes__")
)


class _Source:
    """Decompressed text of a file, read in chunks through a sliding buffer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            raw: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise TraceError(f"cannot read: {e.strerror or e}", file=str(path)) from None
        head = raw.read(2)
        raw.seek(0)
        self.fh: IO[bytes] = (
            cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if head == b"\x1f\x8b" else raw
        )
        self.raw = raw
        self.dec = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.nbytes = 0
        self.consumed = 0  # characters dropped from the front of the buffer

    def close(self) -> None:
        self.fh.close()
        self.raw.close()

    def fail(self, problem: str) -> TraceError:
        return TraceError(problem, file=str(self.path))

    def refill(self) -> bool:
        """Append one chunk; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.fh.read(CHUNK)
        except EOFError:
            raise self.fail(
                f"truncated: the gzip stream ends early (after {self.nbytes / 1e6:.1f} MB of JSON)"
            ) from None
        except (OSError, zlib.error) as e:
            raise self.fail(f"not a readable trace file ({e})") from None
        try:
            text = self.dec.decode(data, final=not data)
        except UnicodeDecodeError:
            raise self.fail(f"not UTF-8 text near byte {self.nbytes} (not a JSON trace?)") from None
        self.nbytes += len(data)
        if not data:
            self.eof = True
            return False
        if self.pos > 0:
            self.consumed += self.pos
            self.buf = self.buf[self.pos :] + text
            self.pos = 0
        else:
            self.buf += text
        return True

    def skip_ws(self) -> str:
        """Skip whitespace; return the next character ('' at the end of the file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.refill():
                return ""

    def expect(self, chars: str, where: str) -> str:
        c = self.skip_ws()
        if c == "":
            raise self.fail(f"truncated: the JSON ends inside {where}")
        if c not in chars:
            raise self.fail(
                f"invalid JSON in {where} at character {self.consumed + self.pos}: "
                f"expected {' or '.join(repr(x) for x in chars)}, found {c!r}"
            )
        self.pos += 1
        return c

    def value(self, where: str) -> Any:
        """Decode one JSON value at the cursor, reading more text as needed."""
        self.skip_ws()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if len(self.buf) - self.pos > MAX_EVENT:
                    raise self.fail(
                        f"invalid JSON in {where} at character {self.consumed + e.pos}: {e.msg}"
                    ) from None
                if self.refill():
                    continue
                near_end = e.pos >= len(self.buf) - 2 or e.msg.startswith("Unterminated")
                if near_end or self.buf[self.pos :].strip() == "" or _incomplete(self.buf[self.pos :]):
                    raise self.fail(f"truncated: the JSON ends inside {where}") from None
                raise self.fail(
                    f"invalid JSON in {where} at character {self.consumed + e.pos}: {e.msg}"
                ) from None
            # a number or literal at the very end of the buffer may continue in the next chunk
            if (
                end == len(self.buf)
                and not self.eof
                and not isinstance(obj, dict | list | str)
                and self.refill()
            ):
                continue
            self.pos = end
            return obj


def _incomplete(tail: str) -> bool:
    """True when ``tail`` is a JSON prefix that only lacks its end (balanced brackets never close)."""
    depth = 0
    in_str = False
    esc = False
    for ch in tail:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth < 0:
                return False
    return depth > 0 or in_str


def iter_trace(path: str | Path, segments: bool = False, typed: bool = False) -> Iterator[tuple[str, Any]]:
    """Stream a Chrome-trace JSON file: yields ``("events", [dict, ...])`` batches of the elements
    of ``traceEvents`` and ``(key, value)`` for every other top-level member, in file order, then
    ``("__bytes__", n)`` with the decompressed size. ``typed=True`` (with ``msgspec``): most batches
    come as ``("typed", [record, ...])``, records with only the fields :func:`read_kineto` reads.
    The keys of the items the reader makes are :data:`K_EVENTS`, :data:`K_TYPED`, ... (equal to those
    names, and told apart by identity from top-level members that happen to be called so).

    Raises :class:`~simcore.errors.TraceError` (one line naming the file) on truncated or
    malformed input.
    """
    src = _Source(Path(path))
    try:
        c = src.skip_ws()
        if c == "":
            raise src.fail("empty file (not a JSON trace)")
        if c == "[":
            src.pos += 1
            yield from _iter_array(src, "the event array", typed)
            yield K_BYTES, src.nbytes
            return
        if c != "{":
            raise src.fail(f"not a JSON trace (starts with {c!r}, expected '{{')")
        src.pos += 1
        first = True
        while True:
            c = src.skip_ws()
            if c == "}":
                src.pos += 1
                break
            if not first:
                src.expect(",", "the top-level object")
                if src.skip_ws() == "}":
                    src.pos += 1
                    break
            first = False
            if src.skip_ws() != '"':
                src.expect('"', "the top-level object")
            key = src.value("a top-level key")
            src.expect(":", f"the top-level member {key!r}")
            if key == "traceEvents":
                if src.expect("[", "traceEvents") != "[":  # pragma: no cover - expect raises
                    break
                yield from (
                    _iter_segments(src, "traceEvents", typed)
                    if segments
                    else _iter_array(src, "traceEvents", typed)
                )
            else:
                yield str(key), src.value(f"the top-level member {key!r}")
        yield K_BYTES, src.nbytes
    finally:
        src.close()


_SKIP = re.compile(
    r'\{\s*"ph":\s*"(?:X",\s*"cat":\s*"python_function"|[sf]")[^{}]*(?:\{[^{}]*\}[^{}]*)?\}\s*,\s*'
)
"""An event simcore never uses (a ``python_function`` range or an ``s``/``f`` flow arrow) followed by
a comma. It can only match at an object start (inside a JSON string every quote is escaped), and a
match in an unexpected place breaks the batch's JSON, which then takes the exact slow path."""
_PY_CAT = '"python_function"'
"""How a ``python_function`` event's category reads in the file: counted where they are skipped."""
_BOUNDARY = re.compile(r"\}\s*,\s*\{")
_SEP = re.compile(r"[ \t\n\r,]*")


def _iter_array(src: _Source, where: str, typed: bool = False) -> Iterator[tuple[str, Any]]:
    """Elements of a JSON array, yielded as ``("events", [dict, ...])`` batches (``typed``: mostly
    ``("typed", [record, ...])`` batches decoded by ``msgspec``, see :func:`_typed_batch`).

    Fast path: the text from the cursor to the last ``}, {`` in the buffer is parsed in one
    ``json.loads`` call. A successful parse of ``[`` + that text + ``]`` proves the cut fell between
    two elements (parsing is deterministic from an element start), so no event is split; when the
    cut falls inside a string or a nested value the parse fails and the slow path decodes events
    one by one with the C scanner.
    """
    n = 0
    loads = json.loads
    need_value = True  # at the start, and after a comma
    first = True
    while True:
        c = src.skip_ws()
        if c == "":
            raise src.fail(f"truncated: the JSON ends inside {where} after {n} events")
        if c == "]" and (not need_value or first):
            src.pos += 1
            return
        if not need_value:
            if c != ",":
                raise src.fail(
                    f"invalid JSON in {where} at character {src.consumed + src.pos}: expected ',' or ']' "
                    f"after event {n}, found {c!r}"
                )
            src.pos += 1
            need_value = True
            continue
        first = False
        buf, pos = src.buf, src.pos
        if typed:
            got = _typed_batch(buf, pos)
            if got is not None:
                src.pos, tb = got
                n += len(tb)
                need_value = False
                yield K_TYPED, tb
                continue
        batch: list[Any] | None = None
        limit = len(buf)
        for _ in range(6):
            cuts = [m.start() for m in _BOUNDARY.finditer(buf, max(pos, limit - 65536), limit)]
            if not cuts:
                break
            cut = cuts[-1]
            raw = buf[pos : cut + 1]
            text, skipped = _SKIP.subn("", raw)
            try:
                batch = loads("[" + text + "]")
            except json.JSONDecodeError as e:
                if skipped:
                    try:
                        batch = loads("[" + buf[pos : cut + 1] + "]")
                    except json.JSONDecodeError:
                        pass
                    else:
                        skipped = 0
                        src.pos = cut + 1
                        break
                # everything before the failure point parses: retry with a cut before it
                limit = min(cut, pos + max(e.pos - 1, 0)) if not skipped else cut
                continue
            src.pos = cut + 1
            if skipped:
                yield K_SKIPPED, skipped
                # (those left in the text, which the skip could not match, are counted when parsed)
                py = raw.count(_PY_CAT) - text.count(_PY_CAT)
                if py:
                    yield K_PYTHON, py
            break
        if batch is None:
            # slow path: one event, reading more text as needed
            batch = [src.value(f"{where} (event {n})")]
        n += len(batch)
        need_value = False
        yield K_EVENTS, batch


def _typed_batch(buf: str, pos: int) -> tuple[int, list[Any]] | None:
    """(the position after the batch, its typed records) for the events from ``pos`` to the last
    event boundary in ``buf``, or None where there is none or ``msgspec`` refuses the text. As on the
    standard library's fast path, a successful decode of ``[`` + text + ``]`` proves the cut fell
    between two events."""
    if _decode_events is None or not _FAST:
        return None
    m = None
    for m in _BOUNDARY.finditer(buf, max(pos, len(buf) - 65536)):  # noqa: B007 - the last one
        pass
    if m is None:
        return None
    cut = m.start() + 1
    try:
        return cut, _decode_events("[" + buf[pos:cut] + "]")
    except _DecodeError:
        return None


def _str(v: Any) -> str:
    return v if v.__class__ is str else str(v)


def _int(v: Any, default: int = -1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _attention_kernel(name: str) -> bool:
    """Whether a kernel's name is an attention kernel's (its launch grid is kept: a prefill or a decode pass)."""
    return "flash" in name or "fmha" in name or "sdpa" in name or "ttention" in name


def read_kineto(
    path: str | Path,
    keep_cpu_op: Callable[[str], bool] | None = None,
    workers: int | None = None,
) -> Trace:
    """Read a PyTorch profiler trace into a :class:`Trace` (seconds from the first event).

    ``keep_cpu_op(name)`` selects the ``cpu_op`` events kept (default: every op with an External
    id); GPU events, runtime calls and annotations are always kept. ``workers``: processes that
    parse large Kineto-formatted traces in parallel (default: ``SIMCORE_TRACE_WORKERS``, else one
    process, which ``msgspec`` makes faster than several on a few busy cores and which keeps memory
    down; without ``msgspec``, up to 4 CPUs for files of more than about 48 MB of JSON; 0 or 1 reads
    in this process only). The result does not depend on it.
    """
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived containers: the cyclic collector only slows this down
    try:
        p = Path(path)
        n = _workers(p) if workers is None else workers
        if n >= 2:
            try:
                return _read(p, keep_cpu_op, n)
            except _Fallback:
                pass
        return _read(p, keep_cpu_op, 0)
    finally:
        if was_enabled:
            gc.enable()


PARALLEL_MIN_BYTES = 48 << 20
"""Approximate JSON size above which a trace is parsed by several processes."""
SEGMENT = 4 << 20
"""Characters of events sent to a worker at a time."""
_KINETO_BOUNDARY = "},\n  {"
"""How Kineto separates two top-level events (a newline never occurs inside a JSON string)."""


class _Fallback(Exception):
    """The parallel reader met text it cannot split safely: read the file in one process."""


def _workers(p: Path) -> int:
    env = os.environ.get("SIMCORE_TRACE_WORKERS")
    if env is not None:
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
    except OSError:
        return 0
    est = size * (10 if gz else 1)
    if _FAST or est < PARALLEL_MIN_BYTES or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return min(4, os.cpu_count() or 1)


@dataclass
class _Acc:
    """Events of one batch or segment, as tuples with raw (microsecond) timestamps."""

    first_ts: float | None = None
    gpu: list[tuple[Any, ...]] = field(default_factory=list)
    cpu: list[tuple[Any, ...]] = field(default_factory=list)
    rt: list[tuple[Any, ...]] = field(default_factory=list)
    ann: list[tuple[Any, ...]] = field(default_factory=list)
    gpu_pids: set[str] = field(default_factory=set)
    n: int = 0
    py: int = 0
    """``python_function`` events (the profiler ran ``with_stack=True``)."""
    mem: int = 0
    """``[memory]`` events (``profile_memory=True``)."""


_KEEP_ARGS = frozenset(_KERNEL_ARGS)


def _extract(batch: list[Any], acc: _Acc) -> None:
    """Append the events simcore uses from ``batch`` to ``acc``."""
    gpu_cats, rt_cats, an_cats, keep_args = _GPU_CATS, _RUNTIME_CATS, _ANNOT_CATS, _KEEP_ARGS
    gpu, cpu, rt, ann = acc.gpu, acc.cpu, acc.rt, acc.ann
    acc.n += len(batch)
    for ev in batch:
        if not isinstance(ev, dict):
            continue
        ph = ev.get("ph")
        if ph != "X":
            if ph == "i" and ev.get("name") == "[memory]":
                acc.mem += 1
            elif ph == "M" and ev.get("name") == "process_labels":
                lab = str((ev.get("args") or {}).get("labels", ""))
                if lab.startswith("GPU"):
                    acc.gpu_pids.add(str(ev.get("pid")))
            continue
        cat = ev.get("cat", "")
        if cat in gpu_cats:
            kind = 0
        elif cat == "cpu_op":
            kind = 1
        elif cat in rt_cats:
            kind = 2
        elif cat in an_cats or (cat == "" and str(ev.get("name", "")).startswith("ProfilerStep#")):
            kind = 3
        else:
            acc.py += cat == "python_function"
            continue
        ts_us: Any = ev.get("ts")
        dur = ev.get("dur", 0.0)
        if ts_us.__class__ is not float or dur.__class__ is not float:
            try:
                ts_us = float(ts_us)
                dur = float(dur)
            except (TypeError, ValueError):
                continue
        dur *= 1e-6
        if acc.first_ts is None:
            acc.first_ts = ts_us
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            args = {}  # arguments that are not an object: none simcore can read
        if kind == 0:
            dev = args.get("device", ev.get("pid", 0))
            stream = args.get("stream", ev.get("tid", 0))
            corr = args.get("correlation", -1)
            ext = args.get("External id", -1)
            kcat = _CAT_ALIAS.get(cat, cat)
            name = _str(ev.get("name", ""))
            # only collectives and copies carry arguments simcore reads, and attention kernels their
            # launch grid (a prefill or a decode pass, where no op with shapes launched them)
            if kcat != "kernel" or "Collective name" in args:
                kept = {k: v for k, v in args.items() if k in keep_args}
            elif "grid" in args and _attention_kernel(name):
                kept = {"grid": args["grid"]}
            else:
                kept = {}
            # written out in both decoders, not a helper: a call per GPU activity costs ~10 % of ingest
            gpu.append(
                (
                    name,
                    str(kcat),
                    ts_us,
                    dur,
                    dev if dev.__class__ is int else _int(dev, 0),
                    stream if stream.__class__ is int else _int(stream, 0),
                    corr if corr.__class__ is int else _int(corr),
                    ext if ext.__class__ is int else _int(ext),
                    kept,
                )
            )
        elif kind == 1:
            ext = args.get("External id", -1)
            if ext.__class__ is not int:
                ext = _int(ext)
            if ext < 0:
                continue
            cpu.append(
                (
                    _str(ev.get("name", "")),
                    ts_us,
                    dur,
                    ext,
                    _int(ev.get("tid"), 0),
                    args.get("Input Dims"),
                    args.get("Input type"),
                    args.get("Concrete Inputs"),
                    args.get("Input Strides"),
                )
            )
        elif kind == 2:
            corr = args.get("correlation", -1)
            tid = ev.get("tid", 0)
            ext = args.get("External id", -1)
            rt.append(
                (
                    _str(ev.get("name", "")),
                    ts_us,
                    dur,
                    corr if corr.__class__ is int else _int(corr),
                    tid if tid.__class__ is int else _int(tid, 0),
                    ext if ext.__class__ is int else _int(ext),
                )
            )
        else:
            ann.append(
                (str(ev.get("name", "")), ts_us, dur, cat == "gpu_user_annotation", _int(ev.get("tid"), 0))
            )


def _extract_typed(batch: list[Any], acc: _Acc, raws: dict[bytes, Any]) -> None:
    """:func:`_extract` for the typed records of :func:`_typed_batch`: the same tuples, with names
    interned and each distinct shape text decoded once (``raws``: text to value, shared by the
    file's batches)."""
    kinds, U, miss = _KIND, _U, _MISSING
    gpu, cpu, rt, ann = acc.gpu.append, acc.cpu.append, acc.rt.append, acc.ann.append
    intern = sys.intern
    decode = msgspec.json.decode
    get = raws.get
    py = mem = 0
    acc.n += len(batch)
    for ev in batch:
        ph = ev.ph
        if ph != "X":
            if ph == "i" and ev.name == "[memory]":
                mem += 1
            elif ph == "M" and ev.name == "process_labels":
                a = ev.args
                lab = "" if a is None or a.labels is U else str(a.labels)
                if lab.startswith("GPU"):
                    acc.gpu_pids.add(str(ev.pid))
            continue
        cat = ev.cat
        kind = kinds.get(cat) if cat.__class__ is str else None
        if kind is None:
            if cat == "" and str(ev.name).startswith("ProfilerStep#"):
                kind = 3
            else:
                py += cat == "python_function"
                continue
        ts_us: Any = ev.ts
        dur = ev.dur
        if ts_us.__class__ is not float or dur.__class__ is not float:
            try:
                ts_us = float(ts_us)
                dur = float(dur)
            except (TypeError, ValueError):
                continue
        dur *= 1e-6
        if acc.first_ts is None:
            acc.first_ts = ts_us
        a = ev.args
        if a is None:
            a = _NO_ARGS
        name = ev.name
        name = intern(name) if name.__class__ is str else str(name)
        if kind == 1:
            ext = a.ext
            if ext.__class__ is not int:
                ext = -1 if ext is U else _int(ext)
            if ext < 0:
                continue
            # the recorded inputs, each distinct text decoded once and its value shared
            shapes: list[Any] = []
            for raw in (a.dims, a.types, a.conc, a.strides):
                if raw is U:
                    shapes.append(None)
                    continue
                key = bytes(raw)
                v = get(key, miss)
                if v is miss:
                    v = raws[key] = decode(key)
                shapes.append(v)
            cpu((name, ts_us, dur, ext, _int(ev.tid, 0), *shapes))
        elif kind == 0:
            dev = a.device
            if dev is U:
                dev = 0 if ev.pid is None else ev.pid
            stream = a.stream
            if stream is U:
                stream = ev.tid
            corr = -1 if a.correlation is U else a.correlation
            ext = -1 if a.ext is U else a.ext
            kcat = _CAT_ALIAS.get(cat, cat)
            if kcat != "kernel" or a.k5 is not U:  # "Collective name"
                kept = {k: v for k, attr in _KEPT_ATTRS if (v := getattr(a, attr)) is not U}
            elif a.k0 is not U and _attention_kernel(name):
                kept = {"grid": a.k0}
            else:
                kept = {}
            gpu(
                (
                    name,
                    kcat,
                    ts_us,
                    dur,
                    dev if dev.__class__ is int else _int(dev, 0),
                    stream if stream.__class__ is int else _int(stream, 0),
                    corr if corr.__class__ is int else _int(corr),
                    ext if ext.__class__ is int else _int(ext),
                    kept,
                )
            )
        elif kind == 2:
            corr = -1 if a.correlation is U else a.correlation
            tid = ev.tid
            ext = -1 if a.ext is U else a.ext
            rt(
                (
                    name,
                    ts_us,
                    dur,
                    corr if corr.__class__ is int else _int(corr),
                    tid if tid.__class__ is int else _int(tid, 0),
                    ext if ext.__class__ is int else _int(ext),
                )
            )
        else:
            ann((name, ts_us, dur, cat == "gpu_user_annotation", _int(ev.tid, 0)))
    acc.py += py
    acc.mem += mem


_KIND = {
    **dict.fromkeys(_GPU_CATS, 0),
    "cpu_op": 1,
    **dict.fromkeys(_RUNTIME_CATS, 2),
    **dict.fromkeys(_ANNOT_CATS, 3),
}
"""Category to kind in :func:`_extract`'s order: 0 GPU, 1 ``cpu_op``, 2 runtime, 3 annotation."""
_MISSING = object()
_NO_ARGS: Any = _Args() if msgspec is not None else None
assert _KEPT_ATTRS[0] == ("grid", "k0") and _KEPT_ATTRS[5] == ("Collective name", "k5")


class _Builder:
    """Turns accumulated tuples into the :class:`Trace`'s records, part by part in file order."""

    def __init__(self, tr: Trace, keep_cpu_op: Callable[[str], bool] | None) -> None:
        self.tr = tr
        self.keep = keep_cpu_op
        self.t0: float | None = None
        self.nev = 0
        self.gpu_pids: set[str] = set()

    def add(self, acc: _Acc) -> None:
        tr = self.tr
        self.nev += acc.n
        tr.python_events += acc.py
        tr.memory_events += acc.mem
        self.gpu_pids |= acc.gpu_pids
        if self.t0 is None:
            self.t0 = acc.first_ts
        t0 = self.t0
        if t0 is None:
            return
        gev = tr.gpu_events
        for name, kcat, ts, dur, dev, stream, corr, ext, kept in acc.gpu:
            gev.append(GpuEvent(name, kcat, (ts - t0) * 1e-6, dur, dev, stream, corr, ext, kept))
        ops, keep = tr.cpu_ops, self.keep
        for name, ts, dur, ext, tid, dims, types, conc, strides in acc.cpu:
            if keep is not None and not keep(name):
                continue
            t = (ts - t0) * 1e-6
            prev = ops.get(ext)
            # the same External id marks nested ops; keep the innermost (latest-starting) one
            if prev is None or t >= prev.ts:
                ops[ext] = CpuOp(name, t, dur, ext, tid, dims, types, conc, strides)
        calls, runtime = tr.host_calls, tr.runtime
        for name, ts, dur, corr, tid, ext in acc.rt:
            rc = RuntimeCall(name, (ts - t0) * 1e-6, dur, corr, tid, ext)
            calls.append(rc)
            if corr >= 0:
                runtime[corr] = rc
        for name, ts, dur, on_gpu, tid in acc.ann:
            tr.annotations.append(Annotation(name, (ts - t0) * 1e-6, dur, on_gpu, tid))


def _parse_segment(text: str) -> _Acc | None:
    """Worker: parse a segment of whole events (``ev, ev, ..., ev``); None when it is not one."""
    was = gc.isenabled()
    gc.disable()
    try:
        acc = _Acc()
        if _decode_events is not None and _FAST:
            try:
                typed = _decode_events("[" + text + "]")
            except _DecodeError:
                pass
            else:
                _extract_typed(typed, acc, {})
                return acc
        stripped, skipped = _SKIP.subn("", text)
        try:
            batch = json.loads("[" + stripped + "]")
        except json.JSONDecodeError:
            try:
                batch = json.loads("[" + text + "]")
            except json.JSONDecodeError:
                return None
            skipped = 0
        acc.n = skipped
        if skipped:
            acc.py = text.count(_PY_CAT) - stripped.count(_PY_CAT)
        _extract(batch, acc)
        return acc
    finally:
        if was:
            gc.enable()


def _iter_segments(src: _Source, where: str, typed: bool = False) -> Iterator[tuple[str, Any]]:
    """``("segment", text)`` runs of whole events split at Kineto's own event boundaries, then the
    rest of the array through the one-process path."""
    while True:
        while len(src.buf) - src.pos < SEGMENT and src.refill():
            pass
        i = src.buf.rfind(_KINETO_BOUNDARY, src.pos)
        if i <= src.pos:
            break
        yield K_SEGMENT, src.buf[src.pos : i + 1]
        src.pos = i + 2
    yield from _iter_array(src, where, typed)


def _read(p: Path, keep_cpu_op: Callable[[str], bool] | None, workers: int) -> Trace:
    tr = Trace(path=str(p), format="kineto")
    b = _Builder(tr, keep_cpu_op)
    base_ns: float | None = None
    pool: Any = None
    pending: deque[Any] = deque()  # futures (parallel) and finished parts, in file order
    raws: dict[bytes, Any] = {}  # shape texts decoded once, their values shared

    def drain(limit: int) -> None:
        while len(pending) > limit:
            item = pending.popleft()
            acc = item.result() if hasattr(item, "result") else item
            if acc is None:
                raise _Fallback
            b.add(acc)

    if workers >= 2:
        import concurrent.futures
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pool = concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("fork")
            )
    try:
        for key, val in iter_trace(p, segments=pool is not None, typed=_FAST):
            if key is K_TYPED:
                acc = _Acc()
                _extract_typed(val, acc, raws)
                pending.append(acc)
                drain(2 * workers if pool is not None else 0)
            elif key is K_SEGMENT:
                pending.append(pool.submit(_parse_segment, val))
                drain(2 * workers)
            elif key is K_EVENTS:
                acc = _Acc()
                _extract(val, acc)
                pending.append(acc)
                drain(2 * workers if pool is not None else 0)
            elif key is K_SKIPPED:
                b.nev += int(val)
            elif key is K_PYTHON:
                tr.python_events += int(val)
            elif key == "deviceProperties" and isinstance(val, list):
                tr.device_properties = [d for d in val if isinstance(d, dict)]
            elif key == "distributedInfo" and isinstance(val, dict):
                tr.distributed = val
            elif key == "baseTimeNanoseconds":
                try:
                    base_ns = float(val)
                except (TypeError, ValueError):
                    base_ns = None
            elif key is K_BYTES:
                tr.bytes_read = int(val)
            elif not isinstance(val, list | dict):
                tr.metadata[key] = val
        drain(0)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    tr.events_seen = b.nev
    t0_us = b.t0
    if t0_us is not None:
        if base_ns is not None:
            tr.relative_timestamps = True
            tr.t0_ns = base_ns + t0_us * 1e3
        elif t0_us > 1e14:  # absolute epoch microseconds (old layout)
            tr.t0_ns = t0_us * 1e3
    tr.metadata["gpu_pids"] = sorted(b.gpu_pids)
    return tr
