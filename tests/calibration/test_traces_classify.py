"""Kernel classification, shape recovery, collective metadata and step detection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from simcore.traces import read_trace
from simcore.traces.classify import analyze, class_of, collective_info, step_class_times
from simcore.traces.model import GpuEvent
from simcore.traces.synth import SynthConfig, write_trace

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "traces" / "h200"
H200X2 = REPO / "traces" / "h200x2"

# parameters of the 4-layer GPT of the committed traces (tools/gpt.py: no biases, LayerNorm
# without bias, untied head): embedding + head 2*V*h, per layer 12*h^2 + two norm weights, final norm
GPT4_PARAMS = 2 * 50304 * 1024 + 4 * (12 * 1024 * 1024 + 2 * 1024) + 1024


def _synth(tmp_path: Path, **kw: object) -> tuple[Path, dict[str, object]]:
    p = tmp_path / "t.json.gz"
    info = write_trace(p, SynthConfig(**kw))  # type: ignore[arg-type]
    return p, info


def test_classes_per_step_synthetic(tmp_path: Path) -> None:
    L = 3
    p, _ = _synth(tmp_path, layers=L, steps=2)
    a = analyze(read_trace(p))
    assert a.step_source == "annotation" and len(a.steps) == 2
    c = Counter(k.cls for k in a.steps[0].kernels)
    # forward 4 Linears/layer + head, backward 2 GEMMs per Linear (head included)
    assert c["gemm"] == 4 * L + 1 + 2 * (4 * L + 1)
    assert c["attention"] == 2 * L
    assert c["norm"] == (2 * L + 1) + 2 * L
    assert c["elementwise"] == 3 * L  # gelu + two residual adds per layer
    assert c["embedding"] == 2  # lookup and its backward
    assert c["loss"] == 2  # log_softmax and nll_loss
    assert c["optimizer"] == 1


def test_shapes_recovered(tmp_path: Path) -> None:
    p, _ = _synth(tmp_path, layers=1, hidden=256, heads=4, seq=128, batch=2, steps=1)
    a = analyze(read_trace(p))
    gemms = [k.shape for k in a.kernels if k.cls == "gemm"]
    T = 2 * 128
    assert gemms[0] == {"kind": "gemm", "m": T, "n": 3 * 256, "k": 256, "batch": 1.0, "dtype": "bf16"}
    att = [k.shape for k in a.kernels if k.cls == "attention"]
    assert att[0] is not None and att[1] is not None
    assert (att[0]["batch"], att[0]["heads"], att[0]["seq"], att[0]["head_dim"], att[0]["backward"]) == (
        2,
        4,
        128,
        64,
        False,
    )
    assert att[1]["backward"] is True
    ln = next(k.shape for k in a.kernels if k.op == "aten::native_layer_norm")
    assert ln is not None and ln["name"] == "layernorm"
    # simcore's convention: a norm reads and writes each element once (2 bytes per bf16 element)
    assert ln["nbytes"] == pytest.approx(2 * 2 * T * 256)


def test_collective_metadata_and_name_is_not_the_algorithm() -> None:
    ev = GpuEvent(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 0.0, 1e-3, 0, 21,
        args={"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "Float",
              "Group size": 2, "Process Group Ranks": "[0, 1]", "Process Group Name": "0"},
    )  # fmt: skip
    info = collective_info(ev)
    assert info["op"] == "all_reduce" and info["nbytes"] == 4000.0 and info["group_size"] == 2
    assert info["ranks"] == [0, 1] and info["dtype"] == "fp32"
    assert "algorithm" not in info and "protocol" not in info
    # without metadata the collective (never the algorithm) comes from the name
    bare = GpuEvent(
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 0.0, 1e-3, 0, 21
    )
    assert collective_info(bare)["op"] == "all_gather" and collective_info(bare)["nbytes"] is None


@pytest.mark.parametrize(
    "name, op, want",
    [
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "aten::mm", "gemm"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel", "", "gemm"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>(Flash_fwd_params)",
            "",
            "attention",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "aten::add",
            "elementwise",
        ),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "", "norm"),
        ("Memcpy DtoD (Device -> Device)", "", "memcpy"),
        ("Memset (Device)", "aten::zero_", "memset"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "", "comm"),
        (
            "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float>",
            "aten::nll_loss_forward",
            "loss",
        ),
    ],
)
def test_class_of(name: str, op: str, want: str) -> None:
    cat = (
        "gpu_memcpy" if name.startswith("Memcpy") else "gpu_memset" if name.startswith("Memset") else "kernel"
    )
    assert class_of(name, cat, op)[0] == want


def test_optimizer_range_wins(tmp_path: Path) -> None:
    # kernels launched inside Optimizer.step#... are the optimizer's, whatever their name
    assert (
        class_of("void at::native::vectorized_elementwise_kernel<4, mul>", "kernel", "aten::mul", True)[0]
        == "optimizer"
    )


def test_step_times_from_annotations(tmp_path: Path) -> None:
    p, info = _synth(tmp_path, steps=3)
    a = analyze(read_trace(p))
    spans = info["step_spans_us"]
    assert isinstance(spans, list)
    # period = next step's first kernel start - this one's; the file's clock starts 5 µs in
    assert a.steps[0].time_s == pytest.approx((spans[1][0] - spans[0][0]) * 1e-6, abs=2e-9)
    assert a.steps[1].time_s == pytest.approx((spans[2][0] - spans[1][0]) * 1e-6, abs=2e-9)
    assert a.step_time_s == pytest.approx(sorted(s.time_s for s in a.steps)[1])


def test_single_unannotated_step_spans_gpu_work(tmp_path: Path) -> None:
    p, info = _synth(tmp_path, steps=1, annotate_steps=False)
    a = analyze(read_trace(p))
    assert a.step_source == "single" and len(a.steps) == 1
    ((s0, s1),) = info["step_spans_us"]  # type: ignore[misc]
    assert a.step_time_s == pytest.approx((s1 - s0) * 1e-6, rel=1e-6)


def test_repeated_unannotated_steps_are_found(tmp_path: Path) -> None:
    p, info = _synth(tmp_path, steps=4, annotate_steps=False)
    a = analyze(read_trace(p))
    assert a.step_source == "repeat" and len(a.steps) == 4
    spans = info["step_spans_us"]
    assert isinstance(spans, list)
    assert a.steps[0].time_s == pytest.approx((spans[1][0] - spans[0][0]) * 1e-6, abs=2e-9)


def test_exposed_class_times_sum_to_step(tmp_path: Path) -> None:
    p, _ = _synth(tmp_path, steps=2, world=2, rank=0)
    a = analyze(read_trace(p))
    for s in a.steps:
        t = step_class_times(s)
        assert sum(t.values()) == pytest.approx(s.time_s, rel=1e-9)
        kern = step_class_times(s, exposed=False)
        assert kern["comm:all_reduce"] > 0
        # exposed communication never exceeds the collective kernels' own time
        assert t.get("comm:all_reduce", 0.0) <= kern["comm:all_reduce"] + 1e-12


# ---------------------------------------------------------------------------------------------
# the committed H200 traces


def test_real_training_trace() -> None:
    a = analyze(read_trace(H200 / "profile_train_gpt_gelu_ln.json.gz"))
    assert a.step_source == "annotation" and len(a.steps) == 2
    opt = [k.shape for k in a.kernels if k.cls == "optimizer" and k.shape]
    assert opt and opt[0]["params"] == GPT4_PARAMS
    att = {(s["batch"], s["heads"], s["kv_heads"], s["seq"], s["head_dim"], s["causal"])
           for k in a.kernels if k.cls == "attention" and (s := k.shape)}  # fmt: skip
    assert att == {(4, 16, 16, 1024, 64, True)}
    lm_head = [
        k.shape
        for k in a.kernels
        if k.shape and k.shape.get("kind") == "gemm" and 50304 in (k.shape["n"], k.shape["k"])
    ]
    assert lm_head and all(s["dtype"] == "bf16" for s in lm_head)
    cls = set(a.class_times())
    assert {"gemm", "attention", "norm", "elementwise", "loss", "embedding", "optimizer"} <= cls
    # the step is compute; nothing here is communication
    assert not any(c.startswith("comm") for c in cls)


def test_real_ddp_gradient_bytes() -> None:
    for rank in (0, 1):
        a = analyze(read_trace(H200X2 / f"profile_ddp_rank{rank}.json.gz"))
        for s in a.steps:
            ar = [k.shape for k in s.kernels if k.cls == "comm:all_reduce"]
            assert ar and all(x is not None and x["group_size"] == 2 and x["dtype"] == "fp32" for x in ar)
            # DDP all-reduces every fp32 gradient once per step
            assert sum(x["nbytes"] for x in ar if x) == 4 * GPT4_PARAMS


def test_real_gqa_trace_kv_heads() -> None:
    a = analyze(read_trace(H200 / "profile_train_llama_swiglu_rms_gqa_selective.json.gz"))
    kv = {k.shape["kv_heads"] for k in a.kernels if k.cls == "attention" and k.shape}
    assert kv == {4}
    # selective recompute runs the attention forward again in backward: 2 forwards per layer
    fwd = [
        k
        for k in a.steps[0].kernels
        if k.shape and k.shape.get("kind") == "attention" and not k.shape["backward"]
    ]
    assert len(fwd) == 2 * 4


@pytest.mark.parametrize(
    "strategy, want",
    [
        # traces/README.md (round 2): TP all-reduces 48 bf16 forward, 48 fp32 backward per step;
        # FSDP 49 all-gathers and 25 reduce-scatters; PP stage 0 sends 4 activations, receives 4 grads
        ("tp", {("comm:all_reduce", "bf16"): 48, ("comm:all_reduce", "fp32"): 48}),
        ("fsdp", {("comm:all_gather", "bf16"): 49, ("comm:reduce_scatter", "fp32"): 25}),
        ("pp", {("comm:send_recv", "fp32"): 8}),
    ],
)
def test_real_parallel_collectives(strategy: str, want: dict[tuple[str, str], int]) -> None:
    a = analyze(read_trace(H200X2 / f"profile_{strategy}_rank0.json.gz"))
    assert len(a.steps) == 2
    for s in a.steps:
        got = Counter((k.cls, (k.shape or {}).get("dtype")) for k in s.kernels if k.base == "comm")
        assert dict(got) == want


def _op(name: str, dims: list, types: list, strides: list | None = None):  # type: ignore[no-untyped-def]
    from simcore.traces.model import CpuOp

    return CpuOp(name, 0.0, 1e-6, 1, 1, dims, types, None, strides)


def test_memory_variants_from_dtypes_and_strides() -> None:
    """Round 36: an op whose operands mix dtypes runs PyTorch's unrolled loop, one with a
    non-contiguous operand the strided loop, a broadcast one the offset loop (round 59); the trace's
    types, shapes and strides say which."""
    from simcore.traces.classify import memory_shape

    bf, f32 = "c10::BFloat16", "float"
    x = [4, 2048, 2048]
    row = [2048 * 2048, 2048, 1]
    # copy_(dst, src): an upcast, a downcast, a copy from a transposed view
    assert (
        memory_shape(_op("aten::copy_", [x, x, []], [f32, bf, "Scalar"], [row, row, []]))["name"] == "cast_up"
    )
    assert memory_shape(_op("aten::copy_", [x, x, []], [bf, f32, "Scalar"], [row, row, []]))["name"] == "cast"
    t = [[4, 16, 1024, 64], [4, 16, 1024, 64], []]
    st = [[16 * 1024 * 64, 1024 * 64, 64, 1], [16 * 1024 * 64, 64, 1024, 1], []]
    assert memory_shape(_op("aten::copy_", t, [bf, bf, "Scalar"], st))["name"] == "copy_strided"
    assert memory_shape(_op("aten::copy_", t, [bf, bf, "Scalar"], [st[0], st[0], []]))["name"] == "copy"
    # binary ops: mixed dtypes; a strided half of a fused gate/up output; a broadcast operand
    assert (
        memory_shape(_op("aten::add", [x, x, []], [f32, bf, "Scalar"], [row, row, []]))["name"] == "add_mixed"
    )
    half = [[4, 2048, 8192], [4, 2048, 8192]]
    hst = [[2048 * 8192, 8192, 1], [2048 * 16384, 16384, 1]]
    assert memory_shape(_op("aten::mul", half, [bf, bf], hst))["name"] == "mul_strided"
    # round 59: a broadcast operand (RMSNorm's per-row statistic) takes the offset loop, priced on the
    # fp32 rows' own fit, moving the full-size operand's bytes twice; a broadcast fp32 mask added to
    # bf16 scores the mixed loop with offsets; a Python scalar the vectorised loop
    bc = memory_shape(_op("aten::mul", [x, [4, 2048, 1]], [f32, f32], [row, [2048, 1, 1]]))
    assert bc["name"] == "mul_bcast_fp32" and bc["nbytes"] == 2 * 4 * 4 * 2048 * 2048
    assert memory_shape(_op("aten::mul", [x, [2048]], [bf, bf], [row, [1]]))["name"] == "mul_bcast"
    s4 = [2, 32, 2048, 2048]
    m4 = [2, 1, 2048, 2048]
    mixed = memory_shape(_op("aten::add", [s4, m4, []], [bf, f32, "Scalar"], [[2**27, 2**22, 2048, 1], [2**22, 2**22, 2048, 1], []]))
    assert mixed["name"] == "add_bcast_mixed" and mixed["nbytes"] == 6 * 2 * 32 * 2048 * 2048
    scalar = memory_shape(_op("aten::mul", [s4, []], [bf, "Scalar"], [[2**27, 2**22, 2048, 1], []]))
    assert scalar["name"] == "mul_scalar" and scalar["nbytes"] == 4 * 2 * 32 * 2048 * 2048
    assert memory_shape(_op("aten::mul", [x, x], [bf, bf], [row, row]))["name"] == "mul"
    # without recorded strides (older traces): the plain op
    assert memory_shape(_op("aten::silu", [half[1]], [bf]))["name"] == "silu"
    assert memory_shape(_op("aten::silu", [half[1]], [bf], [hst[1]]))["name"] == "silu_strided"
    # transformers' KV-cache cat of a transposed view
    cat = [[[4, 16, 0, 64], [4, 16, 1024, 64]], []]
    cst = [[[0, 0, 64, 1], [16 * 1024 * 64, 64, 1024, 1]], []]
    assert memory_shape(_op("aten::cat", cat, ["TensorList", "Scalar"], cst))["name"] == "cat_strided"


def test_gemm_misalignment_from_recorded_strides() -> None:
    """PyTorch's weight gradient of GPT-2's LM head reads the output gradient transposed, strided by
    the vocabulary (50257: not a 16-byte multiple in bf16); round 31's trace measured it 4.3 ms."""
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry
    from simcore.traces.classify import gemm_shape
    from simcore.workload.replay import price_shape

    bf = ["c10::BFloat16", "c10::BFloat16"]
    wgrad = gemm_shape(_op("aten::mm", [[50257, 8192], [8192, 768]], bf, [[1, 50257], [768, 1]]))
    assert wgrad is not None and wgrad["misaligned"] is True
    dense = gemm_shape(_op("aten::mm", [[50304, 8192], [8192, 768]], bf, [[1, 50304], [768, 1]]))
    assert dense is not None and dense["misaligned"] is False
    # without strides the row-major rule stands (m is no stride): no flag, priced as before
    bare = gemm_shape(_op("aten::mm", [[50257, 8192], [8192, 768]], bf, None))
    assert bare is not None and "misaligned" not in bare
    dev = default_registry().device("h200")
    prof = load_profile(dev)
    t_odd, t_pad, t_bare = (price_shape(s, dev, prof) for s in (wgrad, dense, bare))
    assert t_odd is not None and t_pad is not None and t_bare is not None
    assert t_odd > 3 * t_pad and t_bare == pytest.approx(
        price_shape({**wgrad, "misaligned": False}, dev, prof)
    )
