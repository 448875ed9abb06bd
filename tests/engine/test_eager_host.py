"""transformers' eager-attention layers: their host entries (round 61) in inference and in generate()."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.specs.profile import load_profile
from simcore.specs.registry import default_registry
from simcore.specs.resolve import load_scenario

SC = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "trace_scenarios"
    / "h200_r62_generate_mistral_l8_h2048_b4_eager_attn.yaml"
)


def _decode_host(backend: str, loop: str) -> float:
    from simcore.prediction import predict

    over = [
        "runtime.implementation=huggingface",
        "runtime.profiler=true",
        f"runtime.attention_backend={backend}",
        f"runtime.decode_loop={loop}",
    ]
    r = predict(load_scenario(str(SC), over)).model_dump()
    return float(r["decode_host_s"])


def test_eager_attention_decode_host() -> None:
    """An eager-attention decode pass costs its layers' and its fixed host entries; in generate() the
    SDPA-measured generate() host plus what eager attention adds outside the layers (its mask)."""
    prof = load_profile(default_registry().device("h200"))
    layers = 8.0

    def h(name: str) -> float:
        return prof.host_of(name, True, "huggingface")

    manual = layers * h("infer_decode_swiglu_eager") + h("infer_decode_fixed_swiglu_eager")
    gen = (
        layers * h("infer_decode_swiglu_eager")
        + h("infer_generate_fixed_swiglu")
        + h("infer_decode_fixed_swiglu_eager")
        - h("infer_decode_fixed_swiglu")
    )
    assert _decode_host("eager", "manual") == pytest.approx(manual, rel=1e-6)
    assert _decode_host("eager", "generate") == pytest.approx(gen, rel=1e-6)
    # SDPA's generate(): its own measured entries only
    sdpa = layers * h("infer_decode_swiglu") + h("infer_generate_fixed_swiglu")
    assert _decode_host("cudnn", "generate") == pytest.approx(sdpa, rel=1e-6)
    assert gen > sdpa


def test_ops_with_and_without_rows_are_priced_apart() -> None:
    """The pricer stacks ops of one name into one call: a softmax with a row count (eager attention's)
    and one without (an MoE router's) must not share it (review: the row count was dropped for both)."""
    from simcore.engine.pricing import Pricer
    from simcore.specs.resolve import resolve_cluster
    from simcore.workload.lowering import Op, fused_mem_op

    sc = load_scenario(str(SC))
    pricer = Pricer(resolve_cluster(sc.cluster, default_registry()))
    attn = fused_mem_op("softmax", 2**28, 4.0, 8.0, 12.0, "elementwise", rows=2**17)
    router = Op(
        "router_softmax",
        "memory",
        "moe",
        {"name": "softmax", "nbytes": 1e6, "flops": 1e5, "numel": 1e5, "elt": 4.0},
    )
    alone, _ = pricer.times([attn])
    both, _ = pricer.times([attn, router])
    assert float(both[0]) == pytest.approx(float(alone[0]))


def test_pass_ops_scale_the_host_beyond_the_layers() -> None:
    """runtime.pass_ops scales a pass's fixed host by its ratio to the calibrated code's weight
    (the profile's host_ops.pass_ops, HostOps.pass_op_weight): half the weight of the calibrated generate()
    halves it; the layers' host is untouched; the calibrated weight itself changes nothing. A compiled
    decode's weight is its loop between the graph's launches: each op beyond the calibrated compiled
    loop's costs what a generate() op does."""
    from simcore.prediction import predict

    prof = load_profile(default_registry().device("h200"))
    calibrated_pass_ops, table = prof.host_ops.calibrated_pass_ops, prof.host_ops.pass_ops["huggingface"]
    fixed = prof.host_of("infer_generate_fixed_swiglu", True, "huggingface")
    base = ["runtime.implementation=huggingface", "runtime.profiler=true", "runtime.attention_backend=cudnn",
            "runtime.decode_loop=generate"]

    def host(extra: list[str]) -> float:
        return float(predict(load_scenario(str(SC), base + extra)).model_dump()["decode_host_s"])

    ref = calibrated_pass_ops("huggingface", True, "swiglu", False)
    assert ref == table["generate"]["swiglu"]
    assert host([f"runtime.pass_ops={ref}"]) == pytest.approx(host([]), rel=1e-9)
    assert host([]) - host([f"runtime.pass_ops={ref / 2}"]) == pytest.approx(fixed / 2, rel=1e-6)
    # eager attention in generate(): generate()'s weight plus what eager attention's forward adds
    eager = table["manual_eager_attention"]["swiglu"]
    sdpa = table["manual"]["swiglu"]
    assert calibrated_pass_ops("huggingface", True, "swiglu", True) == pytest.approx(ref + eager - sdpa)
    # a compiled decode: the calibrated compiled loop's weight changes nothing, 10 more cost 10 generate() ops
    cref = calibrated_pass_ops("huggingface", True, "swiglu", False, compiled_decode=True)
    assert cref == table["compiled_generate"]["swiglu"]
    comp = [*base, "runtime.compiled_decode=true"]

    def chost(extra: list[str]) -> float:
        return float(predict(load_scenario(str(SC), comp + extra)).model_dump()["decode_host_s"])

    assert chost([f"runtime.pass_ops={cref}"]) == pytest.approx(chost([]), rel=1e-9)
    assert chost([f"runtime.pass_ops={cref + 10}"]) - chost([]) == pytest.approx(fixed * 10 / ref, rel=1e-6)
    # a count the calibrated code was not measured at: nothing to scale by
    assert calibrated_pass_ops("huggingface", False, "gelu", True) is None
    assert calibrated_pass_ops("huggingface", True, "gelu", False, compiled_decode=True) is None
    assert calibrated_pass_ops("reference", True, "gelu", False) == prof.host_ops.pass_ops["reference"]["manual"]["gelu"]
