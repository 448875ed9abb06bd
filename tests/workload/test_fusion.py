"""Compiled (torch.compile) lowering: fused memory-bound kernels move fewer bytes, and nothing else
changes; compiled memory keeps fewer activations and no fp32 logits."""

from __future__ import annotations

import numpy as np
import pytest

from simcore import memory as M
from simcore.specs.resolve import load_scenario
from simcore.workload import lowering as L


def _lay(fused: bool, rb: float = 4.0) -> L.Layout:
    return L.Layout(micro_batch=4, seq=1024, residual=rb, fused=fused)


def _bytes(ops: list[L.Op], kind: str = "memory") -> float:
    return float(sum(np.sum(o.args["nbytes"]) * o.count for o in ops if o.kind == kind))


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_scenario("default").model


def test_fused_norm_is_one_kernel_with_counted_tensors(model) -> None:  # type: ignore[no-untyped-def]
    T, h = 4 * 1024, model.hidden
    (op,) = L.norm_ops(model, _lay(True), T)
    # reads the branch output (bf16) and the fp32 residual, writes both again: 2 x 4 + 2 x 2 bytes
    assert op.args["nbytes"] == pytest.approx(T * h * 12.0)
    (bwd,) = L.backward_of(op)
    # dy (bf16), x (fp32), the residual's gradient in and out (fp32), dy and x again for the weight
    assert bwd.args["nbytes"] == pytest.approx(T * h * (2 * 2 + 4 * 4))
    assert L.residual_add(model, _lay(True), T) == []
    assert len(L.residual_add(model, _lay(False), T)) == 1
    # a Triton kernel, priced as a plain streaming one (the add curve) both ways, not on PyTorch's
    # eager norm kernels' fit (measured: their backward's weight-gradient reduction is slow per byte)
    assert op.args["name"] == bwd.args["name"] == "compiled_norm"


def test_fused_layer_moves_fewer_bytes_and_same_gemms(model) -> None:  # type: ignore[no-untyped-def]
    for moe in (False,):
        eager = L.layer_fwd(model, _lay(False), moe)
        fused = L.layer_fwd(model, _lay(True), moe)
        assert _bytes(fused) < _bytes(eager)
        assert _bytes(L.backward(fused)) < _bytes(L.backward(eager))
        g = [o.args for o in eager if o.kind == "gemm"]
        assert g == [o.args for o in fused if o.kind == "gemm"]


def test_fused_loss_reads_bf16_logits(model) -> None:  # type: ignore[no-untyped-def]
    lay = _lay(True)
    (op,) = L.loss_fwd(model, lay)
    n = lay.tokens * model.vocab
    assert op.args["nbytes"] == pytest.approx(n * 2.0) and op.category == "loss"
    (b,) = L.backward_of(op)
    assert b.args["nbytes"] == pytest.approx(n * 4.0)
    assert _bytes(L.loss_fwd(model, _lay(False))) > 3 * op.args["nbytes"]


def test_compiled_keeps_fewer_activations_and_no_fp32_logits(model) -> None:  # type: ignore[no-untyped-def]
    kw = dict(micro_batch=4, seq=1024, act_bytes=2.0, residual_bytes=4.0)
    eager = M.activation_bytes_per_layer(model, **kw)  # type: ignore[arg-type]
    comp = M.activation_bytes_per_layer(model, **kw, compiled=True)  # type: ignore[arg-type]
    T, h, f = 4096, model.hidden, model.ffn_hidden
    # two normalised outputs (bf16) and the GELU output are recomputed, not kept
    assert eager - comp == pytest.approx(T * (2 * h + f) * 2.0)
    assert M.logits_bytes(model, 4, 1024, compiled=True) == pytest.approx(T * model.vocab * 4.0)
    assert M.logits_bytes(model, 4, 1024, unfused=True) == pytest.approx(T * model.vocab * 12.0)


def test_compiled_step_is_faster_and_smaller_than_eager() -> None:
    import simcore

    e = simcore.predict(load_scenario("default", ["runtime.framework=eager"]))
    c = simcore.predict(load_scenario("default", ["runtime.framework=compiled"]))
    assert c.step_time_s < e.step_time_s
    assert c.memory_per_gpu_bytes <= e.memory_per_gpu_bytes
    assert c.breakdown.get("loss", 0.0) < e.breakdown["loss"]


def test_eager_norm_is_row_wise_and_its_backward_one_fitted_op(model) -> None:  # type: ignore[no-untyped-def]
    """The eager norm says its row count (the fitted norm curves give each row to one CTA), and its
    backward is the fitted norm backward alone: the sweep took the gradient of the input and the
    weight in one measurement, so no separate weight-gradient kernel is added."""
    T = 4 * 1024
    norm = L.norm_ops(model, _lay(False), T)[0]
    assert norm.args["rows"] == T
    (bwd,) = L.backward_of(norm)
    assert bwd.args["name"].endswith("_bwd") and bwd.args["rows"] == T
    # the row count makes the same bytes slower when rows are long (few CTAs' worth of work each)
    from simcore.compute import ops as C
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    dev = default_registry().device("h200")
    prof = load_profile(dev)
    nb = bwd.args["nbytes"]
    assert (
        C.memory_op(dev, prof, bwd.args["name"], nb, rows=T).time_s
        >= C.memory_op(dev, prof, bwd.args["name"], nb).time_s
    )


def test_compiled_norm_prices_on_the_streaming_curve() -> None:
    from simcore.compute.ops import memory_op
    from simcore.specs.profile import load_profile
    from simcore.specs.registry import default_registry

    dev = default_registry().device("h200")
    prof = load_profile(dev)
    nb = 64e6
    assert memory_op(dev, prof, "compiled_norm", nb, 0.0).time_s == pytest.approx(
        memory_op(dev, prof, "add", nb, 0.0).time_s
    )
    # eager LayerNorm's backward at a training shape (8192 x 768 fp32, rows known) is slower per byte
    eager = memory_op(dev, prof, "layernorm_bwd", 3 * 4 * 8192 * 768, None, 4.0, 8192).time_s
    assert eager > memory_op(dev, prof, "compiled_norm", 3 * 4 * 8192 * 768, 0.0, 4.0).time_s


def test_transformers_rmsnorm_chain_is_elementwise_class(model) -> None:  # type: ignore[no-untyped-def]
    # transformers' RMSNorm is written out in elementwise kernels: a trace has no norm kernel for it
    lay = L.Layout(micro_batch=2, seq=512, residual=4.0, implementation="huggingface")
    ops = L.norm_ops(model.model_copy(update={"norm": "rmsnorm"}), lay, 1024)
    assert ops and all(o.category != "norm" for o in ops)
