"""Synthetic PyTorch-profiler traces in the real Kineto layout, for tests, docs and benchmarks.

A small GPT training step is laid out the way an eager PyTorch run records it: ``cpu_op`` events
with ``Input Dims``/``Input type``, ``cudaLaunchKernel`` runtime calls, kernels with the names
cuBLAS/FlashAttention/ATen/NCCL give them on a Hopper GPU, ``ac2g`` flows, ``ProfilerStep#N``
annotations, ``Optimizer.step#AdamW.step`` ranges and, for data-parallel ranks, NCCL all-reduce
kernels carrying the collective metadata Kineto copies from ``record_param_comms``.

Kernel durations are plain formulas of the shapes (``flops / rate + latency``); nothing here
claims to be a measurement. The generator writes events one by one, so it can produce files of
hundreds of megabytes with little memory.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

GEMM_KERNEL = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
FLASH_FWD = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, "
    "false, false, true, false, false>(pytorch_flash::Flash_fwd_params)"
)
FLASH_BWD = (
    "void pytorch_flash::flash_bwd_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 2, 2, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> >, false, true, false, "
    "false, false, true, false, false>(pytorch_flash::Flash_bwd_params)"
)
LN_FWD = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
LN_BWD = (
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float, false>"
    "(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)"
)
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
    "::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)"
)
NLL = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)"
EMBED = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)"
ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
    "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>"
    "(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)"
    "::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, "
    "double, bool, double*, double*)"
)
NCCL_AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@dataclass
class SynthConfig:
    """Shape of the synthetic run and the rates its kernel durations are computed with."""

    layers: int = 2
    hidden: int = 256
    heads: int = 4
    seq: int = 128
    batch: int = 2
    vocab: int = 1024
    steps: int = 3
    rank: int = 0
    world: int = 1
    layout: str = "new"
    """``new``: ts relative to ``baseTimeNanoseconds``; ``old``: absolute epoch microseconds."""
    annotate_steps: bool = True
    device_name: str | None = "NVIDIA H200"
    with_gpu: bool = True
    gemm_rate: float = 400e12
    """FLOP/s the synthetic GEMM durations assume."""
    mem_rate: float = 3.0e12
    """Bytes/s the synthetic memory-bound durations assume."""
    kernel_latency: float = 4e-6
    host_per_op: float = 12e-6
    """Host time per launched op (seconds): sets the launch gaps of small kernels."""
    comm_rate: float = 100e9
    pad_cpu_events: int = 0
    """Extra ``python_function`` events per op (makes large files for the reader benchmark)."""
    extra_meta: dict[str, Any] = field(default_factory=dict)


class _Writer:
    def __init__(self, fh: IO[str], cfg: SynthConfig) -> None:
        self.fh = fh
        self.cfg = cfg
        self.first = True
        self.base_us = 1_750_000_000_000_000.0 if cfg.layout == "old" else 0.0
        self.ext = 1000
        self.corr = 50000
        self.host = 5.0  # µs
        self.stream_free: dict[int, float] = {7: 10.0, 21: 10.0}
        self.pid = 4242 + cfg.rank
        self.kernels: list[tuple[str, float, float]] = []
        self.seq = 0

    def ev(self, e: dict[str, Any]) -> None:
        # Kineto's own layout: one event per indented block, ", " and ": " separators
        self.fh.write(("  " if self.first else ",\n  ") + json.dumps(e))
        self.first = False

    def t(self, us: float) -> float:
        return round(self.base_us + us, 3)

    def op(
        self,
        cpu_name: str,
        kernel: str | None,
        dur_s: float,
        dims: list[Any],
        types: list[str],
        stream: int = 7,
        cat: str = "kernel",
        extra: dict[str, Any] | None = None,
        host_us: float | None = None,
    ) -> None:
        cfg = self.cfg
        h = host_us if host_us is not None else cfg.host_per_op * 1e6
        self.ext += 1
        t0 = self.host
        for i in range(cfg.pad_cpu_events):
            self.ev(
                {
                    "ph": "X",
                    "cat": "python_function",
                    "name": f"torch/nn/modules/module.py(1740): _call_impl #{i}",
                    "pid": self.pid,
                    "tid": self.pid,
                    "ts": self.t(t0),
                    "dur": 0.5,
                    "args": {
                        "Python id": self.ext * 10 + i,
                        "Python parent id": self.ext,
                        "Python thread": 0,
                    },
                }
            )
        self.ev(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": cpu_name,
                "pid": self.pid,
                "tid": self.pid,
                "ts": self.t(t0),
                "dur": round(h, 3),
                "args": {
                    "External id": self.ext,
                    "Record function id": 0,
                    "Ev Idx": self.ext,
                    "Input Dims": dims,
                    "Input type": types,
                    "Input Strides": [[] for _ in dims],
                    "Concrete Inputs": ["" for _ in dims],
                },
            }
        )
        self.host = t0 + h
        if kernel is None or not cfg.with_gpu:
            return
        self.corr += 1
        launch_ts = t0 + 0.6 * h
        self.ev(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": self.pid,
                "tid": self.pid,
                "ts": self.t(launch_ts),
                "dur": 3.0,
                "args": {"External id": self.ext, "cbid": 211, "correlation": self.corr},
            }
        )
        start = max(self.stream_free.get(stream, 0.0), launch_ts + 3.0)
        dur_us = dur_s * 1e6
        args: dict[str, Any] = {
            "External id": self.ext,
            "queued": 0,
            "device": 0,
            "context": 1,
            "stream": stream,
            "correlation": self.corr,
            "registers per thread": 128,
            "shared memory": 0,
            "grid": [132, 1, 1],
            "block": [256, 1, 1],
        }
        if cat != "kernel":
            args = {k: args[k] for k in ("External id", "device", "context", "stream", "correlation")}
            args["bytes"] = (extra or {}).get("bytes", 0)
        if extra:
            args.update(extra)
        self.ev(
            {
                "ph": "X",
                "cat": cat,
                "name": kernel,
                "pid": 0,
                "tid": stream,
                "ts": self.t(start),
                "dur": round(dur_us, 3),
                "args": args,
            }
        )
        self.ev(
            {
                "ph": "s",
                "id": self.corr,
                "pid": self.pid,
                "tid": self.pid,
                "ts": self.t(launch_ts),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        self.ev(
            {
                "ph": "f",
                "id": self.corr,
                "pid": 0,
                "tid": stream,
                "ts": self.t(start),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        self.stream_free[stream] = start + dur_us
        self.kernels.append((kernel, start, dur_us))


def _gemm_s(cfg: SynthConfig, m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k / cfg.gemm_rate + cfg.kernel_latency


def _mem_s(cfg: SynthConfig, nbytes: float) -> float:
    return nbytes / cfg.mem_rate + cfg.kernel_latency


def _step(w: _Writer, cfg: SynthConfig) -> None:
    T, h, B, S = cfg.batch * cfg.seq, cfg.hidden, cfg.batch, cfg.seq
    H, d, V = cfg.heads, cfg.hidden // cfg.heads, cfg.vocab
    bf = "c10::BFloat16"
    act = 2 * T * h * 2.0

    def mm(m: int, n: int, k: int) -> None:
        w.op("aten::mm", GEMM_KERNEL, _gemm_s(cfg, m, n, k), [[m, k], [k, n]], [bf, bf])

    w.op("aten::embedding", EMBED, _mem_s(cfg, act), [[V, h], [B, S]], ["float", "long int"])
    for _ in range(cfg.layers):
        w.op(
            "aten::native_layer_norm",
            LN_FWD,
            _mem_s(cfg, act),
            [[B, S, h], [h], [], []],
            [bf, "float", "", ""],
        )
        mm(T, 3 * h, h)
        fl = 2.0 * B * H * S * S * d
        w.op(
            "aten::_flash_attention_forward",
            FLASH_FWD,
            fl / cfg.gemm_rate + cfg.kernel_latency,
            [[B, S, H, d], [B, S, H, d], [B, S, H, d], [], [], [], [], [], []],
            [bf, bf, bf] + [""] * 6,
        )
        mm(T, h, h)
        w.op("aten::add", ADD, _mem_s(cfg, 1.5 * act), [[B, S, h], [B, S, h], []], [bf, bf, "Scalar"])
        w.op(
            "aten::native_layer_norm",
            LN_FWD,
            _mem_s(cfg, act),
            [[B, S, h], [h], [], []],
            [bf, "float", "", ""],
        )
        mm(T, 4 * h, h)
        w.op("aten::gelu", GELU, _mem_s(cfg, 4 * act), [[B, S, 4 * h]], [bf])
        mm(T, h, 4 * h)
        w.op("aten::add", ADD, _mem_s(cfg, 1.5 * act), [[B, S, h], [B, S, h], []], [bf, bf, "Scalar"])
    w.op("aten::native_layer_norm", LN_FWD, _mem_s(cfg, act), [[B, S, h], [h], [], []], [bf, "float", "", ""])
    mm(T, V, h)
    w.op("aten::_log_softmax", SOFTMAX, _mem_s(cfg, 8.0 * T * V), [[T, V], [], []], ["float", "", ""])
    w.op(
        "aten::nll_loss_forward",
        NLL,
        _mem_s(cfg, 4.0 * T),
        [[T, V], [T], [], [], []],
        ["float", "long int", "", "", ""],
    )
    # backward (reverse order, two GEMMs per Linear)
    w.op("aten::mm", GEMM_KERNEL, _gemm_s(cfg, T, h, V), [[T, V], [V, h]], [bf, bf])
    w.op("aten::mm", GEMM_KERNEL, _gemm_s(cfg, V, h, T), [[V, T], [T, h]], [bf, bf])
    buckets = 0
    for li in range(cfg.layers):
        for n_out, k_in in ((h, 4 * h), (4 * h, h)):
            mm(T, k_in, n_out)
            mm(k_in, n_out, T)
        w.op(
            "aten::native_layer_norm_backward",
            LN_BWD,
            _mem_s(cfg, 1.5 * act),
            [[B, S, h], [B, S, h], [], [], [], [h], [], []],
            [bf, bf, "", "", "", "float", "", ""],
        )
        w.op(
            "aten::_flash_attention_backward",
            FLASH_BWD,
            2.5 * (2.0 * B * H * S * S * d) / cfg.gemm_rate + cfg.kernel_latency,
            [[B, S, H, d]] * 6 + [[], []],
            [bf] * 6 + ["", ""],
        )
        for n_out, k_in in ((h, h), (3 * h, h)):
            mm(T, k_in, n_out)
            mm(k_in, n_out, T)
        w.op(
            "aten::native_layer_norm_backward",
            LN_BWD,
            _mem_s(cfg, 1.5 * act),
            [[B, S, h], [B, S, h], [], [], [], [h], [], []],
            [bf, bf, "", "", "", "float", "", ""],
        )
        if cfg.world > 1 and (li % 2 == 1 or li == cfg.layers - 1):
            nel = 12 * h * h * (2 if li % 2 == 1 else 1)
            w.seq += 1
            meta = {
                "Collective name": "allreduce",
                "In msg nelems": nel,
                "Out msg nelems": nel,
                "Group size": cfg.world,
                "dtype": "Float",
                "Process Group Name": "0",
                "Process Group Description": "default_pg",
                "Process Group Ranks": str(list(range(cfg.world))),
                "Seq": w.seq,
            }
            w.op(
                "record_param_comms",
                NCCL_AR,
                nel * 4.0 * 2 * (cfg.world - 1) / cfg.world / cfg.comm_rate + 10e-6,
                [[nel]],
                ["float"],
                stream=21,
                extra=meta,
                host_us=8.0,
            )
            buckets += 1
    w.op(
        "aten::embedding_dense_backward", ADD, _mem_s(cfg, 4.0 * V * h), [[B, S, h], [B, S]], [bf, "long int"]
    )
    if cfg.world > 1:
        # the optimizer waits for the last all-reduce
        w.stream_free[7] = max(w.stream_free[7], w.stream_free[21])
    t_opt = w.host
    nparam = cfg.layers * 12 * h * h + 2 * V * h
    w.op("aten::_fused_adamw_", ADAM, _mem_s(cfg, 28.0 * nparam), [[], [], [], [], [], []], [""] * 6)
    w.ev(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "Optimizer.step#AdamW.step",
            "pid": w.pid,
            "tid": w.pid,
            "ts": w.t(t_opt - 1.0),
            "dur": round(w.host - t_opt + 2.0, 3),
            "args": {"External id": w.ext},
        }
    )


def write_trace(path: str | Path, cfg: SynthConfig | None = None) -> dict[str, Any]:
    """Write a synthetic trace to ``path`` (gzip when it ends with ``.gz``).

    Returns what the trace contains, for checks: ``kernels`` (name, start µs, duration µs per GPU
    event, relative to the file's clock), ``step_spans_us`` (first start, last end per step).
    """
    cfg = cfg or SynthConfig()
    p = Path(path)
    opener: Any = gzip.open if p.name.endswith(".gz") else open
    spans: list[tuple[float, float]] = []
    with opener(p, "wt", encoding="utf-8") as fh:
        fh.write('{\n"schemaVersion": 1,\n')
        if cfg.device_name is not None:
            props = [
                {
                    "id": 0,
                    "name": cfg.device_name,
                    "totalGlobalMem": 150_022_750_208,
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "maxThreadsPerBlock": 1024,
                    "maxThreadsPerMultiprocessor": 2048,
                    "regsPerBlock": 65536,
                    "warpSize": 32,
                    "sharedMemPerBlock": 49152,
                    "numSms": 132,
                }
            ]
            fh.write('"deviceProperties": ' + json.dumps(props) + ",\n")
        if cfg.world > 1:
            di = {
                "backend": "nccl",
                "rank": cfg.rank,
                "world_size": cfg.world,
                "pg_count": 1,
                "pg_config": [
                    {
                        "pg_name": "0",
                        "pg_desc": "default_pg",
                        "backend_config": "cuda:nccl",
                        "pg_size": cfg.world,
                        "ranks": list(range(cfg.world)),
                    }
                ],
                "nccl_version": "2.26.2",
            }
            fh.write('"distributedInfo": ' + json.dumps(di) + ",\n")
        fh.write('"record_shapes": 1,\n')
        for k, v in cfg.extra_meta.items():
            fh.write(f"{json.dumps(k)}: {json.dumps(v)},\n")
        fh.write('"traceEvents": [\n')
        w = _Writer(fh, cfg)
        w.ev({"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}})
        w.ev({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}})
        for s in range(cfg.steps):
            k0 = len(w.kernels)
            t_start = w.host
            _step(w, cfg)
            if cfg.annotate_steps:
                w.ev(
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": f"ProfilerStep#{s + 2}",
                        "pid": w.pid,
                        "tid": w.pid,
                        "ts": w.t(t_start - 1.0),
                        "dur": round(w.host - t_start + 2.0, 3),
                        "args": {"External id": w.ext},
                    }
                )
            ks = w.kernels[k0:]
            if ks:
                spans.append((min(k[1] for k in ks), max(k[1] + k[2] for k in ks)))
            w.host += 20.0
        fh.write("\n],\n")
        fh.write('"traceName": "synthetic.pt.trace.json",\n"displayTimeUnit": "ms"')
        if cfg.layout == "new":
            fh.write(',\n"baseTimeNanoseconds": 1759276800000000000')
        fh.write("\n}\n")
    return {"kernels": w.kernels, "step_spans_us": spans}
