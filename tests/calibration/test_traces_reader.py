"""Trace readers: Kineto JSON (both timestamp layouts, gzip, bare arrays, streaming boundaries),
Nsight Systems SQLite, and one-line errors for broken input."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.errors import TraceError
from simcore.traces import kineto, read_trace
from simcore.traces.synth import SynthConfig, write_trace
from tests.cli_runner import run_cli
from tests.nsys_db import NSYS_CORE_TABLES

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "traces" / "h200"
H200X2 = REPO / "traces" / "h200x2"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    p = tmp_path_factory.mktemp("synth") / "rank0.json.gz"
    info = write_trace(p, SynthConfig(steps=3))
    return p, info


def test_new_layout_counts_and_times(synth: tuple[Path, dict[str, object]]) -> None:
    path, info = synth
    tr = read_trace(path)
    kernels = info["kernels"]
    assert isinstance(kernels, list)
    assert len(tr.gpu_events) == len(kernels)
    assert tr.device_name == "NVIDIA H200"
    assert tr.relative_timestamps
    # base 1759276800 s + the first event's offset (5 µs), in epoch ns
    assert tr.t0_ns == pytest.approx(1759276800e9 + 5e3, abs=1.0)
    # durations in seconds, as written in microseconds
    got = sorted(e.dur for e in tr.gpu_events)
    want = sorted(k[2] * 1e-6 for k in kernels)
    assert got == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert sum(1 for a in tr.annotations if a.name.startswith("ProfilerStep#")) == 3


def test_old_layout_absolute_timestamps(tmp_path: Path) -> None:
    p = tmp_path / "old.json"
    info = write_trace(p, SynthConfig(layout="old", steps=2))
    tr = read_trace(p)
    assert not tr.relative_timestamps
    assert tr.t0_ns == pytest.approx(1_750_000_000_000_005e3, rel=1e-12)
    spans = info["step_spans_us"]
    assert isinstance(spans, list)
    first = min(e.ts for e in tr.gpu_events)
    # the first kernel starts 10.2 µs after the first event (the first cpu_op at 5 µs)
    assert first == pytest.approx((spans[0][0] - 5.0) * 1e-6, abs=1e-6)


def test_bare_array_and_plain_json(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": 0,
            "tid": 7,
            "ts": 10.0,
            "dur": 5.0,
            "args": {"stream": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": 2.5,
            "args": {"stream": 7},
        },
    ]
    p = tmp_path / "arr.json"
    p.write_text(json.dumps(events))
    tr = read_trace(p)
    assert [e.name for e in tr.gpu_events] == ["k1", "k2"]
    assert tr.gpu_events[1].ts == pytest.approx(10e-6)
    assert tr.gpu_events[1].dur == pytest.approx(2.5e-6)


@settings(max_examples=15, deadline=None)
@given(chunk=st.integers(min_value=7, max_value=5000))
def test_streaming_is_independent_of_chunk_size(chunk: int) -> None:
    # every chunk boundary (inside strings, numbers, between events) must give the same result
    global _SMALL
    if "_SMALL" not in globals():
        import tempfile

        d = Path(tempfile.mkdtemp())
        write_trace(d / "s.json", SynthConfig(layers=1, hidden=64, heads=2, seq=16, vocab=64, steps=1))
        _SMALL = (d / "s.json", read_trace(d / "s.json"))
    path, ref = _SMALL
    old = kineto.CHUNK
    kineto.CHUNK = chunk
    try:
        tr = read_trace(path)
    finally:
        kineto.CHUNK = old
    assert [(e.name, e.ts, e.dur) for e in tr.gpu_events] == [(e.name, e.ts, e.dur) for e in ref.gpu_events]
    assert tr.cpu_ops.keys() == ref.cpu_ops.keys()
    assert tr.metadata == ref.metadata


_SMALL: tuple[Path, object]


def test_truncated_gzip(tmp_path: Path, synth: tuple[Path, dict[str, object]]) -> None:
    data = synth[0].read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: truncated"):
        read_trace(p)


def test_truncated_json(tmp_path: Path, synth: tuple[Path, dict[str, object]]) -> None:
    text = gzip.decompress(synth[0].read_bytes()).decode()
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 3])
    with pytest.raises(TraceError, match=r"cut\.json: truncated: the JSON ends inside traceEvents"):
        read_trace(p)


@pytest.mark.parametrize(
    "text, msg",
    [
        ('{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}', "invalid JSON in traceEvents"),
        ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "invalid JSON"),
        ("hello", "not a JSON trace"),
        ("", "empty file"),
        ('{"schemaVersion": 1 "traceEvents": []}', "invalid JSON in the top-level object"),
    ],
)
def test_wrong_json(tmp_path: Path, text: str, msg: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(TraceError, match=msg) as ei:
        read_trace(p)
    assert str(ei.value).startswith(str(p))
    assert "\n" not in str(ei.value)


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "x.json.gz"
    p.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    with pytest.raises(TraceError, match="x.json.gz"):
        read_trace(p)


def test_no_gpu_events_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "cpu_only.json"
    write_trace(p, SynthConfig(with_gpu=False, steps=1))
    code, _out, err = run_cli(capsys, "replay", str(p), "--device", "b200")
    assert code == 2
    assert "cpu_only.json" in err and "no GPU activity" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_gpu_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "weird.json.gz"
    write_trace(p, SynthConfig(device_name="Voodoo Graphics 3dfx", steps=1))
    code, _out, err = run_cli(capsys, "replay", str(p), "--device", "b200")
    assert code == 2
    assert "weird.json.gz" in err and "unknown GPU 'Voodoo Graphics 3dfx'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_truncated_trace_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synth: tuple[Path, dict[str, object]]
) -> None:
    p = tmp_path / "half.json.gz"
    p.write_bytes(synth[0].read_bytes()[:2000])
    code, _out, err = run_cli(capsys, "validate", str(p), "--scenario", "default")
    assert code == 2 and "half.json.gz: truncated" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# the committed H200 traces


def test_real_single_gpu_trace() -> None:
    tr = read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz")
    assert tr.device_name == "NVIDIA H200"
    assert tr.relative_timestamps and tr.t0_ns is not None
    assert len(tr.gpu_events) > 300
    assert {a.name for a in tr.annotations if a.name.startswith("ProfilerStep#")} == {
        "ProfilerStep#2",
        "ProfilerStep#3",
    }
    shaped = [op for op in tr.cpu_ops.values() if op.name == "aten::mm" and op.input_dims]
    assert shaped and all(len(op.input_dims[0]) == 2 for op in shaped)  # type: ignore[index]


def test_real_ddp_ranks() -> None:
    r0 = read_trace(H200X2 / "profile_ddp_rank0.json.gz")
    r1 = read_trace(H200X2 / "profile_ddp_rank1.json.gz")
    assert (r0.rank, r1.rank, r0.world_size) == (0, 1, 2)
    nccl = [e for e in r0.gpu_events if "Collective name" in e.args]
    assert nccl and all(e.args["Group size"] == 2 for e in nccl)


# ---------------------------------------------------------------------------------------------
# Nsight Systems


def _nsys_db(path: Path, with_gpu_table: bool = True) -> None:
    c = sqlite3.connect(path)
    c.executescript(
        NSYS_CORE_TABLES
        + """
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(start INT, end INT, deviceId INT, contextId INT, streamId INT,
          correlationId INT, globalPid INT, value INT, bytes INT);
        CREATE TABLE NVTX_EVENTS(start INT, end INT, eventType INT, rangeId INT, category INT, color INT,
          text TEXT, globalTid INT, endGlobalTid INT, textId INT);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INT);
        INSERT INTO StringIds VALUES (1, 'nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT'), (2, 'cudaLaunchKernel'),
          (3, 'ProfilerStep#1'), (4, 'cudaMemsetAsync');
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000);
        INSERT INTO NVTX_EVENTS VALUES (1000, 100000, 59, 0, 0, 0, NULL, 7, 7, 3);
        INSERT INTO NVTX_EVENTS VALUES (2000, 5000, 59, 0, 0, 0,
          'aten::mm, seq = 1, sizes = [[4096, 1024], [1024, 3072]]', 7, 7, NULL);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (3000, 4000, 0, 7, 11, 2, 0);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (6000, 6500, 0, 7, 12, 4, 0);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (6000, 60000, 0, 1, 7, 11, 1, 1, 1, 132, 1, 1, 256, 1, 1);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (61000, 62000, 0, 1, 7, 12, 1, 0, 4096);
        """
    )
    if with_gpu_table:
        c.executescript(
            "CREATE TABLE TARGET_INFO_GPU(id INT, name TEXT, smCount INT);"
            "INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200', 132);"
        )
    c.commit()
    c.close()


def test_nsys_reader(tmp_path: Path) -> None:
    from simcore.traces.classify import analyze

    p = tmp_path / "run.sqlite"
    _nsys_db(p)
    tr = read_trace(p)
    assert tr.format == "nsys" and tr.device_name == "NVIDIA H200"
    assert tr.t0_ns == pytest.approx(1700000000000000000 + 1000)
    a = analyze(tr)
    gemm = [k for k in a.kernels if k.cls == "gemm"]
    assert len(gemm) == 1 and gemm[0].ev.dur == pytest.approx(54e-6)
    assert gemm[0].shape == {
        "kind": "gemm",
        "m": 4096.0,
        "n": 3072.0,
        "k": 1024.0,
        "batch": 1.0,
        "dtype": "bf16",
    }
    assert [k.cls for k in a.kernels] == ["gemm", "memset"]
    assert a.step_source == "annotation" and len(a.steps) == 1


def test_nsys_without_gpu_table_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "nogpu.sqlite"
    _nsys_db(p, with_gpu_table=False)
    code, _out, err = run_cli(capsys, "replay", str(p), "--device", "b200")
    assert code == 2 and "nogpu.sqlite" in err and "--source-device" in err
    code, out, _err = run_cli(
        capsys, "replay", str(p), "--device", "b200", "--source-device", "h200", "--json"
    )
    assert code == 0
    assert json.loads(out)["source"]["device"] == "h200"


def test_not_an_nsys_export(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE t(x INT)")
    c.commit()
    c.close()
    with pytest.raises(TraceError, match="other.sqlite: not an Nsight Systems export"):
        read_trace(p)


@pytest.mark.parametrize("name", ["synthetic", "real"])
def test_skipping_unused_events_changes_nothing(name: str, tmp_path: Path) -> None:
    import re

    if name == "real":
        path = H200X2 / "profile_ddp_rank0.json.gz"
    else:
        path = tmp_path / "pad.json"
        write_trace(path, SynthConfig(layers=1, steps=2, pad_cpu_events=2, world=2))
        # an unused event whose text the fast skip must leave alone (braces in its name)
        text = path.read_text().replace('"traceEvents": [\n', '"traceEvents": [\n  {"ph": "X", "cat": "python_function", '
                                        '"name": "f{}", "ts": 1, "dur": 1, "args": {"a": {"b": 1}}},\n', 1)  # fmt: skip
        path.write_text(text)

    def sig(tr: object) -> object:
        t = tr  # type: ignore[assignment]
        return (
            [
                (e.name, e.ts, e.dur, e.stream, e.correlation, e.ext_id, sorted(map(str, e.args.items())))
                for e in t.gpu_events
            ],  # type: ignore[attr-defined]
            {k: (v.name, v.ts, v.input_dims) for k, v in t.cpu_ops.items()},  # type: ignore[attr-defined]
            [(h.name, h.ts) for h in t.host_calls],  # type: ignore[attr-defined]
            t.events_seen,  # type: ignore[attr-defined]
            (t.python_events, t.memory_events),  # type: ignore[attr-defined]
        )

    fast = read_trace(path)
    old = kineto._SKIP
    kineto._SKIP = re.compile(r"(?!x)x")
    try:
        slow = read_trace(path)
    finally:
        kineto._SKIP = old
    assert sig(fast) == sig(slow)


@pytest.mark.parametrize("workers", [0, 2])
def test_profiler_options_are_counted(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """with_stack's python_function ranges (skipped unparsed on the fast path) and profile_memory's
    [memory] events are counted, in one process and in segments: what the profiler recorded."""
    from simcore.calibration.host_trace import profiler_record

    monkeypatch.setattr(kineto, "SEGMENT", 200_000)
    stack = kineto.read_kineto(
        REPO / "traces/h200/round46/hf_train_llama_L4_h1024_b4_stack.json.gz", workers=workers
    )
    assert (stack.python_events, stack.memory_events) == (3809, 2664)
    assert profiler_record(stack) == ["stack", "memory"]  # record_shapes=False
    hta = kineto.read_kineto(REPO / "traces/h200/round48/hf_train_gpt2_L12_b8_hta.json.gz", workers=workers)
    assert profiler_record(hta) == ["shapes", "stack", "memory"]
    plain = read_trace(H200X2 / "profile_ddp_rank0.json.gz")
    assert (plain.python_events, plain.memory_events) == (0, 0) and profiler_record(plain) == ["shapes"]


def test_emit_nvtx_range_texts() -> None:
    from simcore.traces.nsys import _parse_nvtx_op

    text = (
        "aten::mm, seq = 3, op_id = 12, sizes = [[4096, 1024], [1024, 1024]], input_op_ids = [(1, 0), (2, 0)]"
    )
    assert _parse_nvtx_op(text) == ("aten::mm", [[4096, 1024], [1024, 1024]])
    assert _parse_nvtx_op("aten::relu") == ("aten::relu", None)
    assert _parse_nvtx_op("aten::mm, sizes = [[1, 2], [") == ("aten::mm", None)


def _sig(t: object) -> object:
    tr = t  # type: ignore[assignment]
    return (
        [(e.name, e.cat, e.ts, e.dur, e.stream, e.correlation, e.ext_id, sorted(map(str, e.args.items()))) for e in tr.gpu_events],  # type: ignore[attr-defined]
        {k: (v.name, v.ts, v.dur, v.input_dims, v.input_types) for k, v in tr.cpu_ops.items()},  # type: ignore[attr-defined]
        [(h.name, h.ts, h.correlation) for h in tr.host_calls],  # type: ignore[attr-defined]
        [(a.name, a.ts, a.gpu) for a in tr.annotations],  # type: ignore[attr-defined]
        tr.events_seen, tr.t0_ns, tr.metadata, tr.bytes_read,  # type: ignore[attr-defined]
        tr.python_events, tr.memory_events,  # type: ignore[attr-defined]
    )  # fmt: skip


def test_parallel_reader_matches_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "big.json.gz"
    write_trace(p, SynthConfig(layers=2, steps=6, pad_cpu_events=1, world=2))
    monkeypatch.setattr(kineto, "SEGMENT", 20_000)  # many segments
    serial = kineto.read_kineto(p, workers=0)
    parallel = kineto.read_kineto(p, workers=2)
    assert _sig(parallel) == _sig(serial)


def test_parallel_reader_falls_back_on_unexpected_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kineto's event separator inside an event's arguments: the split is wrong, the worker's parse
    # fails and the file is read in one process
    ev = '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d.0, "dur": 1.0, "args": {"stream": 7}}'
    odd = '{"ph": "X", "cat": "kernel", "name": "odd", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0, "args": {"l": [{"a": 1},\n  {"b": 2}]}}'
    body = ",\n  ".join([ev % (i, 10 + i) for i in range(100)] + [odd])
    p = tmp_path / "odd.json"
    p.write_text('{"traceEvents": [\n  ' + body + "\n]}")
    monkeypatch.setattr(kineto, "SEGMENT", 200)
    segments = [v for k, v in kineto.iter_trace(p, segments=True) if k == "segment"]
    assert segments and kineto._parse_segment(segments[-1]) is None  # the split is wrong
    serial = kineto.read_kineto(p, workers=0)
    assert len(serial.gpu_events) == 101
    assert _sig(kineto.read_kineto(p, workers=2)) == _sig(serial)


# ---------------------------------------------------------------------------------------------
# the typed (msgspec) decoding path: the same Trace as the standard library's, less memory


def _full_sig(tr: object) -> object:
    """Every field of every record the reader keeps (``_sig`` plus arguments, inputs and metadata)."""
    t = tr  # type: ignore[assignment]
    return (
        [(e.name, e.cat, e.ts, e.dur, e.device, e.stream, e.correlation, e.ext_id, e.args) for e in t.gpu_events],  # type: ignore[attr-defined]
        {k: (v.name, v.ts, v.dur, v.tid, v.input_dims, v.input_types, v.concrete, v.input_strides) for k, v in t.cpu_ops.items()},  # type: ignore[attr-defined]
        [(h.name, h.ts, h.dur, h.correlation, h.tid, h.ext_id) for h in t.host_calls],  # type: ignore[attr-defined]
        sorted(t.runtime),  # type: ignore[attr-defined]
        [(a.name, a.ts, a.dur, a.gpu, a.tid) for a in t.annotations],  # type: ignore[attr-defined]
        t.events_seen, t.t0_ns, t.metadata, t.bytes_read, t.python_events, t.memory_events,  # type: ignore[attr-defined]
        t.device_properties, t.distributed, t.relative_timestamps,  # type: ignore[attr-defined]
    )  # fmt: skip


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    typed = kineto.read_kineto(path, workers=0)
    monkeypatch.setattr(kineto, "_FAST", False)
    plain = kineto.read_kineto(path, workers=0)
    monkeypatch.setattr(kineto, "_FAST", True)
    return typed, plain


@pytest.mark.parametrize(
    "trace",
    [
        "h200x2/profile_ddp_rank0.json.gz",  # NCCL kernels with the collective arguments
        "h200/round46/hf_train_llama_L4_h1024_b4_stack.json.gz",  # with_stack, profile_memory
        "h200/round48/hf_train_gpt2_L12_b8_hta.json.gz",  # HTA-profiled: shapes, stack and memory
        "h200/profile_decode_cuda_graphs.json.gz",  # graph replays: attention kernels' launch grids
        "h200/profile_train_gpt_gelu_ln_compiled.json.gz",  # torch.compile
    ],
)
def test_typed_decoding_reads_real_traces_as_the_standard_library(
    trace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcore.traces.classify import analyze

    assert kineto._FAST, "msgspec is a dependency: the typed path is the default"
    typed, plain = _both(REPO / "traces" / trace, monkeypatch)
    assert _full_sig(typed) == _full_sig(plain)
    # and so do their classification (shapes recovered once per distinct shared input) and steps
    a, b = analyze(typed), analyze(plain)  # type: ignore[arg-type]
    assert [(k.cls, k.op, k.shape, k.step, k.launch_ts) for k in a.kernels] == [
        (k.cls, k.op, k.shape, k.step, k.launch_ts) for k in b.kernels
    ]
    assert [(s.name, s.time_s) for s in a.steps] == [(s.name, s.time_s) for s in b.steps]


@pytest.mark.parametrize("layout", ["new", "old"])
def test_typed_decoding_of_synthetic_traces(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "t.json.gz"
    write_trace(p, SynthConfig(layers=2, steps=3, pad_cpu_events=2, world=2, layout=layout))
    typed, plain = _both(p, monkeypatch)
    assert _full_sig(typed) == _full_sig(plain)


def test_what_msgspec_refuses_takes_the_standard_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events msgspec will not decode into its records (NaN literals, arguments that are not an
    object) or that need converting (string numbers, string ids) read as the standard library reads
    them, and the rest of the file stays on the typed path."""
    ev = '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d.5, "dur": 1.0, "args": {"stream": 7, "correlation": %d}}'
    odd = [
        '{"ph": "X", "cat": "python_function", "name": "f", "ts": 3.0, "dur": 1.0, "args": {"x": NaN}}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": "9", "ts": "4.0", "dur": "2", '
        '"args": {"External id": "12", "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}}',
        '{"ph": "X", "cat": "kernel", "name": "listargs", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0, "args": [1, 2]}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 9, "ts": 6.0, "dur": 1.0, '
        '"args": {"correlation": "77", "External id": 12}}',
        '{"ph": "X", "cat": null, "name": "nullcat", "ts": 7.0, "dur": 1.0}',
        '{"ph": "i", "name": "[memory]", "ts": 8.0, "args": {"Bytes": 64}}',
        '{"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}}',
        "17",
    ]
    body = ",\n  ".join(
        [ev % (i, 10 + i, 100 + i) for i in range(300)]
        + odd
        + [ev % (i, 500 + i, 900 + i) for i in range(300)]
    )
    p = tmp_path / "odd.json"
    p.write_text('{"traceEvents": [\n  ' + body + '\n], "baseTimeNanoseconds": 1700000000000000000}')
    monkeypatch.setattr(kineto, "CHUNK", 4096)  # many batches: some typed, the odd ones not
    typed, plain = _both(p, monkeypatch)
    assert _full_sig(typed) == _full_sig(plain)
    t = typed  # type: ignore[assignment]
    assert t.events_seen == 608 and t.memory_events == 1  # type: ignore[attr-defined]
    assert t.cpu_ops[12].input_dims == [[2, 3], [3, 4]] and t.cpu_ops[12].tid == 9  # type: ignore[attr-defined]
    assert t.runtime[77].ext_id == 12 and t.metadata["gpu_pids"] == ["0"]  # type: ignore[attr-defined]
    assert "listargs" in {e.name for e in t.gpu_events} and t.python_events == 1  # type: ignore[attr-defined]


def test_repeated_inputs_and_names_are_shared(tmp_path: Path) -> None:
    """A step's ops recur with the same shapes: each distinct recorded input is one object, each
    kernel name one string, and classification gives what it gives unshared copies."""
    import copy
    import dataclasses

    from simcore.traces.classify import analyze

    p = tmp_path / "t.json"
    write_trace(p, SynthConfig(layers=2, steps=4))
    tr = kineto.read_kineto(p, workers=0)
    mms = [o for o in tr.cpu_ops.values() if o.name == "aten::mm"]
    dims = {id(o.input_dims) for o in mms}
    assert len(mms) > 4 * len(dims)  # shared, not one list per op
    assert len({id(e.name) for e in tr.gpu_events}) == len({e.name for e in tr.gpu_events})
    unshared = copy.deepcopy(tr)
    for k, o in unshared.cpu_ops.items():  # every op its own lists, as a reader that shares nothing gives
        unshared.cpu_ops[k] = dataclasses.replace(
            o,
            **{
                f: json.loads(json.dumps(getattr(o, f)))
                for f in ("input_dims", "input_types", "concrete", "input_strides")
            },
        )
    assert len({id(o.input_dims) for o in unshared.cpu_ops.values() if o.name == "aten::mm"}) == len(mms)
    a, b = analyze(tr), analyze(unshared)
    assert [(k.cls, k.shape, k.step) for k in a.kernels] == [(k.cls, k.shape, k.step) for k in b.kernels]
    # each kernel's shape is its own dict
    shaped = [k for k in a.kernels if k.shape is not None]
    assert len({id(k.shape) for k in shaped}) == len(shaped)


def test_memory_follows_gpu_activity_not_file_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two traces of the same kernels, one three times the size in events simcore skips (a
    ``with_stack=True`` trace's ``python_function`` ranges): reading the larger one holds about the
    same memory. (The text buffer and a batch's records are bounded by the chunk read, small here.)"""
    import tracemalloc

    monkeypatch.setattr(kineto, "CHUNK", 1 << 16)

    def peak(pad: int) -> tuple[int, int]:
        p = tmp_path / f"pad{pad}.json"
        write_trace(p, SynthConfig(layers=2, steps=30, pad_cpu_events=pad))
        tracemalloc.start()
        try:
            tr = kineto.read_kineto(p, workers=0)
            _cur, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert tr.gpu_events
        return p.stat().st_size, top

    (small, m_small), (big, m_big) = peak(0), peak(8)
    assert big > 2.5 * small
    assert m_big - m_small < 0.1 * (big - small), (m_small, m_big, small, big)


def test_one_reader_process_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.json"
    write_trace(p, SynthConfig(steps=1))
    monkeypatch.delenv("SIMCORE_TRACE_WORKERS", raising=False)
    monkeypatch.setattr(kineto, "PARALLEL_MIN_BYTES", 0)
    assert kineto._workers(p) == 0  # msgspec: one process reads faster than several on few cores
    monkeypatch.setattr(kineto, "_FAST", False)
    assert kineto._workers(p) == min(4, os.cpu_count() or 1)
    monkeypatch.setenv("SIMCORE_TRACE_WORKERS", "3")
    assert kineto._workers(p) == 3


def test_top_level_members_named_like_the_readers_own_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON file whose members are called ``python``, ``skipped``, ``events``, ... (an environment
    record such as ``traces/h200/ops_env.json``, or a trace with such metadata) is read as members, not
    as the reader's batches and counts: metadata, or "no GPU activity" (one line, exit 2), never a
    traceback."""
    ev = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 1.0,
        "dur": 2.0,
        "args": {"stream": 7},
    }
    meta = {
        "python": "3.12.3",
        "skipped": "no",
        "events": [1, 2],
        "typed": 3,
        "segment": "s",
        "__bytes__": "b",
    }
    p = tmp_path / "meta.json"
    p.write_text(json.dumps({**meta, "traceEvents": [ev]}))
    tr = read_trace(p)
    assert len(tr.gpu_events) == 1 and tr.events_seen == 1 and tr.python_events == 0
    assert {k: tr.metadata[k] for k in ("python", "skipped", "typed", "segment", "__bytes__")} == {
        k: meta[k] for k in ("python", "skipped", "typed", "segment", "__bytes__")
    }
    assert tr.bytes_read == p.stat().st_size
    env = REPO / "traces" / "h200" / "ops_env.json"
    code, _out, err = run_cli(capsys, "validate", str(env), "--scenario", "default")
    assert code == 2 and "ops_env.json" in err and "no GPU activity" in err and "Traceback" not in err
