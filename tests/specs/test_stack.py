"""Software stacks (``runtime.stack``): the defaults each sets, that a scenario's own keys win, the
attention backend ``auto`` resolved per device, dtype and head dim, and ``simcore predict --explain``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import simcore
from simcore.compute.ops import attention_kernel_accepts, pick_attention_backend
from simcore.engine.runtime import attention_backend, with_stack
from simcore.errors import SpecError
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario
from simcore.specs.stack import STACKS, apply_stack, generation, load_stack
from tests.cli_runner import run_cli


def _train(stack: str | None = None, system: str = "hgx-h200", **training: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "kind": "training",
        "cluster": {"system": system, "gpus": 8},
        "model": {"layers": 2, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 32000, "seq_len": 2048},
        "training": {"micro_batch": 1, **training},
    }
    if stack:
        sc["runtime"] = {"stack": stack}
    return sc


def test_every_stack_file_loads_and_cites_its_sources() -> None:
    for name in STACKS:
        st = load_stack(name)
        assert st.name == name
        assert all(d.source for d in st.defaults.values())
        assert all(a.source for a in st.attention.values())


@pytest.mark.parametrize(
    ("stack", "param_dtype", "master", "impl", "zero"),
    [
        ("pytorch", "fp32", False, "foreach", 0),
        ("torchtitan", "fp32", False, "fused", 0),
        ("megatron", "bf16", True, "fused", 1),
        ("deepspeed", "bf16", True, "fused", 0),
    ],
)
def test_training_stack_defaults(stack: str, param_dtype: str, master: bool, impl: str, zero: int) -> None:
    sc, chosen = with_stack(load_scenario(_train(stack)))
    assert sc.training is not None
    assert (sc.training.param_dtype, sc.training.master_weights, sc.training.optimizer_impl) == (
        param_dtype,
        master,
        impl,
    )
    assert sc.parallel.zero == zero
    keys = {c.key for c in chosen}
    assert {"training.param_dtype", "runtime.attention_backend"} <= keys


def test_a_key_the_scenario_gives_wins() -> None:
    sc, chosen = with_stack(load_scenario(_train("megatron", param_dtype="fp32", optimizer_impl="foreach")))
    assert sc.training is not None
    assert sc.training.param_dtype == "fp32" and sc.training.optimizer_impl == "foreach"
    assert sc.training.master_weights  # the stack's, not given
    assert "training.param_dtype" not in {c.key for c in chosen}
    # --set counts as given too
    sc2, _ = with_stack(load_scenario(_train("pytorch"), ["training.param_dtype=bf16"]))
    assert sc2.training is not None and sc2.training.param_dtype == "bf16"


def test_with_stack_is_idempotent() -> None:
    once, _ = with_stack(load_scenario(_train("megatron")))
    twice, chosen = with_stack(once)
    assert twice == once and chosen == []


def test_deepspeed_overlaps_communication_only_at_stage_3() -> None:
    for zero, overlap in ((0, False), (2, False), (3, True)):
        data = _train("deepspeed")
        data["parallel"] = {"zero": zero}
        sc, _ = with_stack(load_scenario(data))
        assert sc.parallel.dp_overlap is overlap


def test_inference_stack_on_a_training_scenario_is_one_clear_error() -> None:
    with pytest.raises(SpecError, match="stack vllm runs inference and serving scenarios, not training"):
        apply_stack(load_scenario(_train("vllm")))


def test_inference_scenario_gets_no_parallel_defaults() -> None:
    sc = load_scenario(
        {
            "kind": "inference",
            "cluster": {"system": "hgx-h200", "gpus": 1},
            "model": {"preset": "llama3-8b"},
            "runtime": {"stack": "vllm"},
        }
    )
    out, chosen = with_stack(sc)
    assert out.runtime.framework == "cuda_graphs"
    assert not any(c.key.startswith("parallel.") for c in chosen)


def test_generations() -> None:
    reg = default_registry()
    assert [generation(reg.device(d)) for d in ("a100", "h100", "h200", "b200", "gb300", "mi300x")] == [
        "ampere",
        "hopper",
        "hopper",
        "blackwell",
        "blackwell",
        "other",
    ]


def test_kernel_limits_as_sdpa_checks_them() -> None:
    # cuDNN: 16-bit, head dim a multiple of 8 up to 128 (cuDNN 9.19)
    assert attention_kernel_accepts("cudnn", "bf16", 128)
    assert not attention_kernel_accepts("cudnn", "bf16", 256)
    assert not attention_kernel_accepts("cudnn", "bf16", 100)
    assert not attention_kernel_accepts("cudnn", "fp32", 64)
    # flash: 16-bit, head dim up to 256, no arbitrary mask
    assert attention_kernel_accepts("flash", "fp16", 256)
    assert not attention_kernel_accepts("flash", "bf16", 64, mask=True)
    assert not attention_kernel_accepts("flash", "bf16", 320)
    # efficient: fp32 too, head dim a multiple of 4 there
    assert attention_kernel_accepts("efficient", "fp32", 60)
    assert not attention_kernel_accepts("efficient", "bf16", 60)
    order = ["cudnn", "flash", "efficient", "eager"]
    assert pick_attention_backend(order, "bf16", 128) == "cudnn"
    assert pick_attention_backend(order, "bf16", 256) == "flash"
    assert pick_attention_backend(order, "fp32", 128) == "efficient"
    assert pick_attention_backend(order, "bf16", 320, mask=True) == "efficient"  # no head-dim cap
    assert pick_attention_backend(order, "bf16", 300, mask=True) == "eager"
    # the memory-efficient kernels take no grouped kv heads: fp32 GQA runs SDPA's math fallback (as the
    # committed fp32 Mistral trace of round 60 did)
    assert pick_attention_backend(order, "fp32", 128, gqa=True) == "eager"
    assert pick_attention_backend(order, "bf16", 128, gqa=True) == "cudnn"


@pytest.mark.parametrize(
    ("stack", "system", "precision", "expect"),
    [
        ("pytorch", "hgx-h200", "bf16", "cudnn"),
        ("pytorch", "hgx-h100", "fp8", "cudnn"),  # attention in bf16 under fp8 GEMMs
        ("pytorch", "hgx-a100", "bf16", "flash"),
        ("pytorch", "dgx-b200", "bf16", "cudnn"),
        ("pytorch", "hgx-h200", "fp32", "efficient"),
        ("torchtitan", "hgx-a100", "bf16", "cudnn"),  # cuDNN first on every GPU
        ("megatron", "hgx-a100", "bf16", "flash"),
        ("megatron", "hgx-h100", "bf16", "cudnn"),
    ],
)
def test_auto_attention_per_stack_and_device(stack: str, system: str, precision: str, expect: str) -> None:
    sc = load_scenario(_train(stack, system, precision=precision))
    backend, why = attention_backend(sc)
    assert backend == expect
    assert why.startswith("auto:")


def test_head_dim_256_falls_back_to_flash_on_hopper() -> None:
    data = _train("pytorch")
    data["model"]["head_dim"] = 256
    backend, why = attention_backend(load_scenario(data))
    assert backend == "flash"
    assert "cudnn does not take bf16 attention at head dim 256" in why


def test_op_time_without_backend_is_plain_pytorch_on_the_device() -> None:
    shape = {"batch": 4, "heads": 16, "seq": 2048, "head_dim": 128}
    assert simcore.op_time("attention", "h200", **shape).shape["backend"] == "cudnn"
    assert simcore.op_time("attention", "a100", **shape).shape["backend"] == "flash"
    auto = simcore.op_time("attention", "h200", **shape).time_s
    assert auto == simcore.op_time("attention", "h200", backend="cudnn", **shape).time_s
    assert auto < simcore.op_time("attention", "h200", backend="flash", **shape).time_s


def test_op_time_math_fallback_is_a_clear_error() -> None:
    with pytest.raises(simcore.SimcoreError, match="math fallback"):
        simcore.op_time("attention", "h200", batch=1, heads=4, seq=128, head_dim=300, mask=True)


def test_pytorch_amp_weights_cost_less_memory_than_megatron_states() -> None:
    # fp32 weights, fp32 grads, fp32 moments (16 B/param) vs bf16 weights + fp32 grads, master and moments
    # (18 B/param): the weights + grads + optimizer states of one GPU follow the stack's param dtype (one
    # GPU: no DDP bucket copies of the gradients, no distributed optimizer)
    pt = simcore.predict(load_scenario(_train("pytorch"), ["cluster.gpus=1"]))
    mg = simcore.predict(load_scenario(_train("megatron"), ["cluster.gpus=1"]))
    b = pt.memory_breakdown
    m = mg.memory_breakdown
    pt_states = b["weights"] + b["gradients"] + b["optimizer"]
    mg_states = m["weights"] + m["gradients"] + m["optimizer"]
    assert pt_states / mg_states == pytest.approx(16 / 18, rel=1e-6)


def test_prediction_notes_list_the_chosen_defaults() -> None:
    r = simcore.predict(load_scenario(_train("megatron")))
    note = next(n for n in r.notes if n.startswith("stack megatron defaults"))
    assert "training.param_dtype=bf16" in note and "parallel.zero=1" in note
    assert "runtime.attention_backend=cudnn" in note


def test_cli_explain(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_train("megatron")))
    code, out, _ = run_cli(capsys, "predict", str(p), "--json", "--explain")
    assert code == 0
    rows = {r["field"]: r for r in json.loads(out)["stack_defaults"]}
    assert rows["parallel.zero"]["value"] == 1
    assert "use_distributed_optimizer" in rows["parallel.zero"]["source"]
    code, out, _ = run_cli(capsys, "predict", str(p), "--explain")
    assert code == 0 and "defaults of stack megatron" in out


def test_unknown_stack_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "predict", "default", "--set", "runtime.stack=jax")
    assert code != 0
    assert "runtime.stack" in err and "Traceback" not in err


def test_docs_table_matches_the_stack_data() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "stacks.md").read_text()
    for name in STACKS:
        st = load_stack(name)
        for key, d in st.defaults.items():
            v = str(d.value).lower() if isinstance(d.value, bool) else d.value
            assert f"| {name} | `{key.partition('@')[0]}` | `{v}`" in doc, (name, key)
            assert d.source in doc, (name, key)
        for gen, a in st.attention.items():
            assert f"| {name} | attention ({gen}) | {a.kernel}: `{' > '.join(a.order)}`" in doc, (name, gen)
