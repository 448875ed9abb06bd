"""A serving engine's quantize kernels before its FP8/FP4 linears (lowering.activation_quantize_fwd), by hand."""

import numpy as np
import pytest

from simcore.engine import inference as INF
from simcore.specs import default_registry, scenario_from_dict
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.resolve import resolve_cluster
from simcore.specs.scenario import InferenceSpec
from simcore.workload import lowering as L


def _layer(dtype: str, tp: int, tokens: int = 64) -> tuple[list[L.Op], L.Layout]:
    m = default_registry().model_preset("llama3.1-8b")
    from simcore.specs.scenario import ModelSpec

    model = ModelSpec(**{k: v for k, v in m.items() if k not in ("name", "aliases")})
    lay = L.Layout(micro_batch=tokens, seq=1.0, tp=tp, dtype=dtype, act_bytes=2.0, kv_cache=True)
    return L.layer_fwd(model, lay, moe_layer=False), lay


def test_one_gpu_quantizes_qkv_gate_up_and_down_inputs_by_hand() -> None:
    """Llama 3.1 8B, 64 tokens, NVFP4, one GPU: the QKV and gate/up inputs (64 x 4096) and the down projection's
    (64 x 14336) each read in bf16 and written as E2M1 with an E4M3 scale per 16; the out-projection's input comes
    quantized from the attention kernel."""
    ops, lay = _layer("fp4", 1)
    q = {o.name: o for o in L.activation_quantize_fwd(ops, lay)}
    assert set(q) == {"quantize_qkv_input", "quantize_mlp_in_input", "quantize_mlp_out_input"}
    per = 2.0 + 0.5 + 1.0 / 16.0
    assert q["quantize_qkv_input"].args["nbytes"] == pytest.approx(64 * 4096 * per)
    assert q["quantize_mlp_out_input"].args["nbytes"] == pytest.approx(64 * 14336 * per)
    assert all(o.category == "quantize" and float(o.count) == 1.0 for o in q.values())


def test_tensor_parallel_leaves_the_nvfp4_down_projection_only() -> None:
    """With TP the all-reduce + RMSNorm fusion writes the QKV and gate/up inputs quantized: under NVFP4 only the
    down projection's input (its TP shard, 14336 / 4 wide) is quantized by a kernel of its own; under FP8 none."""
    ops, lay = _layer("fp4", 4)
    q = [o for o in L.activation_quantize_fwd(ops, lay) if float(np.asarray(o.count)) > 0]
    assert [o.name for o in q] == ["quantize_mlp_out_input"]
    assert q[0].args["nbytes"] == pytest.approx(64 * 14336 / 4 * (2.0 + DTYPE_BYTES["fp4"]))
    ops, lay = _layer("fp8", 4)
    assert all(float(np.asarray(o.count)) == 0.0 for o in L.activation_quantize_fwd(ops, lay))


def test_fp8_swiglu_writes_fp8_itself_and_the_cast_writes_a_byte() -> None:
    """FP8 on one GPU: the QKV and gate/up inputs (64 x 4096, 1 byte written an element); SwiGLU writes the down
    projection's input in FP8 (TensorRT-LLM's ``swiglu(quant_type=float8_e4m3fn)``), so no kernel for it."""
    ops, lay = _layer("fp8", 1)
    q = {o.name: o for o in L.activation_quantize_fwd(ops, lay)}
    assert set(q) == {"quantize_qkv_input", "quantize_mlp_in_input"}
    assert q["quantize_mlp_in_input"].args["nbytes"] == pytest.approx(64 * 4096 * 3.0)


def test_bf16_linears_quantize_nothing() -> None:
    ops, lay = _layer("bf16", 1)
    assert L.activation_quantize_fwd(ops, lay) == []


def _step(precision: str, paged_kv: bool) -> INF.InferenceEval:
    sc = scenario_from_dict(
        {"kind": "inference", "cluster": {"system": "dgx-b200", "gpus": 1}, "model": {"preset": "llama3.1-8b"},
         "inference": {"batch": 64, "prompt_len": 512, "output_len": 2, "precision": precision},
         "runtime": {"framework": "cuda_graphs"}},  # fmt: skip
        default_registry(),
    )
    assert sc.inference is not None
    inf = InferenceSpec.model_construct(**{**sc.inference.model_dump(), "batch": 64})
    cluster = resolve_cluster(sc.cluster, default_registry())
    return INF.evaluate(sc.model, inf, cluster, 1, 1, "cuda_graphs", paged_kv=paged_kv)


def test_a_serving_fp4_step_pays_its_quantize_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Priced only in a serving engine's step (``paged_kv``), as kernels on top of the rest: the step without them
    is that much faster (the graph's sync grows with the kernel count), and a bf16 step has none."""
    served = _step("fp4", True)
    assert "quantize" not in _step("fp4", False).decode.time
    assert "quantize" not in _step("bf16", True).decode.time
    monkeypatch.setattr(L, "activation_quantize_fwd", lambda ops, lay: [])
    without = _step("fp4", True)
    for a, b in ((served.decode, without.decode), (served.prefill, without.prefill)):
        q = float(np.asarray(a.time["quantize"]))
        assert q > 0.0 and "quantize" not in b.time
        assert a.total() - q >= b.total() - 1e-12
