"""MoE capacity factor, token dropping and padding to capacity (Megatron-Core's ``get_capacity``,
``apply_router_token_dropping``, ``moe_pad_expert_input_to_capacity``; docs/parallelism.md, "Capacity factor")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcore
from simcore.memory import activation_bytes_per_layer
from simcore.specs.scenario import ModelSpec
from simcore.workload import lowering as L
from simcore.workload.model import dropped_share, expert_capacity, routed_load
from tests.cli_runner import run_cli

MIX = {
    "layers": 1, "hidden": 1024, "heads": 8, "ffn_hidden": 2048, "vocab": 128, "seq_len": 4096,
    "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 2048},
}  # fmt: skip


def _model(**moe: object) -> ModelSpec:
    return ModelSpec.model_validate({**MIX, "moe": {**MIX["moe"], **moe}})


def _ops(m: ModelSpec, **lay: object) -> dict[str, L.Op]:
    assert m.moe is not None
    layout = L.Layout(
        micro_batch=1,
        seq=4096,
        ep=8,
        capacity_factor=m.moe.capacity_factor,
        pad_to_capacity=m.moe.pad_to_capacity,
        **lay,  # type: ignore[arg-type]
    )
    return {o.name: o for o in L.moe_block_fwd(m, layout)}


def test_capacity_is_megatrons_get_capacity() -> None:
    # ceil(4096 tokens x top-2 / 8 experts x 1.2) = ceil(1228.8)
    assert float(expert_capacity(4096, 2, 8, 1.2)) == 1229.0
    assert float(expert_capacity(4096, 2, 8, 1.0)) == 1024.0
    assert float(expert_capacity(1, 1, 8, 1.0)) == 1.0  # a fraction of a row rounds up to one


def test_load_drop_and_pad_by_hand() -> None:
    c = 1229 * 8 / (4096 * 2)  # 1.2001953125: the capacity over the mean, up to the ceiling
    assert routed_load(4096, 2, 8, 1.5, None, False) == 1.5  # dropless: the imbalance
    assert float(routed_load(4096, 2, 8, 1.5, 1.2, False)) == pytest.approx(c)  # capped at the capacity
    assert float(routed_load(4096, 2, 8, 1.1, 1.2, False)) == pytest.approx(1.1)  # under it: nothing dropped
    assert float(routed_load(4096, 2, 8, 1.1, 1.2, True)) == pytest.approx(c)  # padded up to it
    assert float(dropped_share(4096, 2, 8, 1.5, 1.2)) == pytest.approx(1.0 - c / 1.5)
    assert float(dropped_share(4096, 2, 8, 1.0, 1.0)) == 0.0
    assert float(dropped_share(4096, 2, 8, 1.5, None)) == 0.0


def test_lowering_rows_and_exchange_by_hand() -> None:
    h, b = 1024, 2.0
    free = _ops(_model(imbalance=1.5))
    capped = _ops(_model(imbalance=1.5, capacity_factor=1.2))
    padded = _ops(_model(capacity_factor=2.0, pad_to_capacity=True))
    # dropless: 4096 x 2 x 1.5 routed rows; capped: ceil(4096 x 2 / 8 x 1.2) x 8 = 9832; padded (imbalance 1):
    # ceil(4096 x 2 / 8 x 2) x 8 = 16384, whatever the routing
    for ops, rows in ((free, 4096 * 2 * 1.5), (capped, 1229 * 8), (padded, 2048 * 8)):
        assert ops["ep_dispatch"].args["nbytes"] == pytest.approx(rows * h * b)
        assert ops["ep_combine"].args["nbytes"] == pytest.approx(rows * h * b)
        assert ops["permute"].args["numel"] == pytest.approx(rows * h)
        # each of the rank's experts: its share of the rows (padded: all 8 / ep 8 = 1 local expert, 2048 x 8)
        for name in ("expert_mlp_in", "expert_mlp_out"):
            assert ops[name].args["m"] * ops[name].args["batch"] == pytest.approx(rows)
    assert padded["expert_mlp_in"].args["batch"] == 1.0


def test_inference_layout_stays_dropless() -> None:
    """The serving engines route every token: a layout without the factor ignores the model's (the inference
    engines build it so; a serving scenario that sets the factor is refused, see the CLI test)."""
    m = _model(imbalance=1.5, capacity_factor=1.0)
    plain = {o.name: o for o in L.moe_block_fwd(m, L.Layout(micro_batch=1, seq=4096, ep=8))}
    assert plain["ep_dispatch"].args["nbytes"] == pytest.approx(4096 * 2 * 1.5 * 1024 * 2.0)


def test_saved_activations_follow_the_rows() -> None:
    def mem(**moe: object) -> float:
        return float(
            activation_bytes_per_layer(_model(**moe), 1, 4096, 1, 1, False, "none", 2.0, moe_layer=True)
        )

    assert mem(imbalance=1.5, capacity_factor=1.2) < mem(imbalance=1.5)
    assert mem(capacity_factor=1.5, pad_to_capacity=True) > mem()
    assert mem(capacity_factor=8.0) == mem()  # a capacity above the busiest expert's rows drops nothing


QWEN = {
    "layers": 1, "hidden": 2048, "heads": 16, "ffn_hidden": 768, "vocab": 128, "seq_len": 4096,
    "moe": {"experts": 128, "top_k": 8, "expert_ffn_hidden": 768},
}  # fmt: skip


def _layer(tokens: int, ep: int, **moe: object) -> float:
    model = {**QWEN, "moe": {**QWEN["moe"], **moe}}
    return float(simcore.moe_layer_time(model, tokens, "dgx-b200", ep=ep)["total_s"])


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from([256, 1024, 4096]),
    st.sampled_from([1, 8]),
    st.floats(0.25, 4.0),
    st.floats(0.0, 2.0),
)
def test_larger_factor_never_faster_when_padded(tokens: int, ep: int, factor: float, more: float) -> None:
    small = _layer(tokens, ep, capacity_factor=factor, pad_to_capacity=True)
    assert _layer(tokens, ep, capacity_factor=factor + more, pad_to_capacity=True) >= small * (1 - 1e-12)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([1024, 4096]), st.floats(1.0, 3.0), st.floats(0.5, 4.0))
def test_dropping_never_slower_than_dropless(tokens: int, imbalance: float, factor: float) -> None:
    """A factor caps the busiest expert's rows (never adds any without padding); none is dropless."""
    free = _layer(tokens, 8, imbalance=imbalance)
    assert _layer(tokens, 8, imbalance=imbalance, capacity_factor=None) == free
    assert _layer(tokens, 8, imbalance=imbalance, capacity_factor=factor) <= free * (1 + 1e-12)


SCENARIO = "scenarios/mixtral-8x7b-h100.yaml"


def test_cli_capacity_note_and_bad_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys,
        "predict",
        SCENARIO,
        "--set",
        "model.moe.imbalance=1.5",
        "--set",
        "model.moe.capacity_factor=1.2",
    )
    assert code == 0 and "Traceback" not in err
    flat = " ".join(out.split())
    # a rank's 4096 tokens, top-2 of 8 experts: ceil(1228.8) rows; the busiest expert keeps 1.2/1.5 of its copies
    assert "1229 rows per expert" in flat and f"{1 - 1229 * 8 / 8192 / 1.5:.1%}" in flat
    for setting, word in (
        ("model.moe.capacity_factor=-1", "capacity_factor"),
        ("model.moe.pad_to_capacity=true", "pad_to_capacity"),
    ):
        code, _out, err = run_cli(capsys, "predict", SCENARIO, "--set", setting)
        assert code == 2 and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and word in err


def test_cli_deepep_padding_and_serving_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(
        capsys,
        "predict",
        SCENARIO,
        "--set",
        "model.moe.capacity_factor=1.0",
        "--set",
        "model.moe.pad_to_capacity=true",
        "--set",
        "runtime.moe_dispatcher=deepep",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "deepep" in err
    code, _out, err = run_cli(
        capsys,
        "predict",
        "scenarios/serve_deepseek_v3_disagg_h100.yaml",
        "--set",
        "model.moe.capacity_factor=1.0",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "dropless" in err


def test_schema_describes_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "schema")
    assert code == 0
    assert "moe_pad_expert_input_to_capacity" in out and "moe_expert_capacity_factor" in out
