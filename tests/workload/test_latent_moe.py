"""LatentMoE (``model.moe.latent_dim``, Nemotron 3 Super / Ultra): the weights, the FLOPs and the lowered ops of
an MoE layer whose routed experts work in a latent width, checked by hand against Megatron-Bridge's counts
(``theoretical_memory_utils``: ``2 h latent`` of projections, ``latent x ffn`` experts; ``flop_utils``), and
the Nemotron 3 presets against their published sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.prediction import predict
from simcore.specs.registry import registry
from simcore.specs.resolve import scenario_from_dict
from simcore.specs.scenario import ModelSpec, MoESpec
from simcore.workload import lowering as L
from simcore.workload.model import expert_width, model_flops_per_token, param_counts

H, LAT, F, E, K = 1024, 256, 512, 64, 4


def _model(latent: int | None) -> ModelSpec:
    return ModelSpec(
        layers=2, hidden=H, heads=16, ffn_hidden=4096, vocab=1000, seq_len=1024, activation="squared_relu",
        norm="rmsnorm", tied_embeddings=True,
        moe=MoESpec(experts=E, top_k=K, shared_experts=1, expert_ffn_hidden=F, latent_dim=latent),
    )  # fmt: skip


def test_weights_by_hand() -> None:
    plain, lat = param_counts(_model(None)), param_counts(_model(LAT))
    assert plain.moe_layer_experts == E * 2 * H * F + H * E  # experts at the hidden width, and the router
    assert lat.moe_layer_experts == E * 2 * LAT * F + H * E  # experts at the latent width, the router on h
    # the shared expert at the hidden width plus the two latent projections, every token's
    assert lat.moe_layer_shared == 2 * H * F + 2 * H * LAT
    assert lat.moe_layer_active == K * 2 * LAT * F + 2 * H * F + 2 * H * LAT + H * E
    assert expert_width(_model(LAT)) == LAT and expert_width(_model(None)) == H


def test_model_flops_by_hand() -> None:
    # Megatron-Bridge flop_utils.moe_layer_flops per token: routed 4 latent ffn k (forward + backward: x3 / 2
    # of its 6-per-weight convention) + 4 h latent for the projections; both conventions are 6 x active weights
    d = model_flops_per_token(_model(LAT), seq_len=1) - model_flops_per_token(_model(None), seq_len=1)
    per_layer = 6.0 * (K * 2 * (LAT - H) * F + 2 * H * LAT)
    assert d == pytest.approx(2 * per_layer)


def test_lowered_ops_move_latent_rows() -> None:
    lay = L.Layout(micro_batch=1, seq=1024.0, ep=8, etp=1)
    plain = {o.name: o for o in L.moe_block_fwd(_model(None), lay)}
    lat = {o.name: o for o in L.moe_block_fwd(_model(LAT), lay)}
    # the down projection after the router, the up projection after the combine, h <-> latent
    assert (lat["latent_down"].args["n"], lat["latent_down"].args["k"]) == (LAT, H)
    assert (lat["latent_up"].args["n"], lat["latent_up"].args["k"]) == (H, LAT)
    assert "latent_down" not in plain
    names = [o.name for o in L.moe_block_fwd(_model(LAT), lay)]
    assert names.index("topk") < names.index("latent_down") < names.index("ep_dispatch")
    assert names.index("ep_combine") < names.index("latent_up") < names.index("shared_mlp_in")
    # the dispatch and the combine carry latent-wide rows: h / latent times fewer bytes
    for nm in ("ep_dispatch", "ep_combine"):
        assert lat[nm].args["nbytes"] * H == pytest.approx(plain[nm].args["nbytes"] * LAT)
    # the routed experts' GEMMs read latent-wide inputs; the shared expert's stay at h
    assert lat["expert_mlp_in"].args["k"] == LAT and lat["expert_mlp_out"].args["n"] == LAT
    assert lat["shared_mlp_in"].args["k"] == H


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([32, 64, 128, 256]), st.sampled_from([1, 2, 4, 8]))  # 2 x latent < H
def test_a_wider_latent_never_moves_fewer_bytes(latent: int, ep: int) -> None:
    lay = L.Layout(micro_batch=1, seq=1024.0, ep=ep, etp=1)

    def a2a(lat: int) -> float:
        return float(next(o for o in L.moe_block_fwd(_model(lat), lay) if o.name == "ep_dispatch").args["nbytes"])

    assert a2a(latent) <= a2a(2 * latent)


def preset(name: str) -> ModelSpec:
    d = dict(registry().model_preset(name))
    d.pop("aliases", None)
    return ModelSpec(**d)


@pytest.mark.parametrize(
    ("name", "total", "active"),
    # published: Super 120B total / 12B active, Ultra 550B / 55B, Lightning 30B / ~3B (the names; the model
    # cards round); this count adds the embeddings to "active"
    [("nemotron3-super", 120e9, 12.7e9), ("nemotron3-ultra", 550e9, 55e9), ("nemotron3.5-lightning", 31.6e9, 3.6e9)],
)
def test_nemotron3_presets_sizes(name: str, total: float, active: float) -> None:
    pc = param_counts(preset(name))
    assert pc.total == pytest.approx(total, rel=0.02)
    assert pc.active == pytest.approx(active, rel=0.03)


def test_latent_dim_beside_a_preset_overrides_it() -> None:
    sc = scenario_from_dict(
        {
            "kind": "training",
            "cluster": {"system": "gb200-nvl72", "gpus": 64},
            "model": {"preset": "nemotron3-super", "moe": {"latent_dim": 2048}},
            "training": {"micro_batch": 1, "global_batch": 64, "precision": "mxfp8"},
            "parallel": {"tp": 1, "ep": 64, "etp": 1},
        }
    )
    assert sc.model.moe is not None and sc.model.moe.latent_dim == 2048 and sc.model.moe.experts == 512
    assert predict(sc).step_time_s > 0


def _super_scenario(tmp_path: Path) -> Path:
    sc = tmp_path / "super.yaml"
    sc.write_text(
        "kind: training\n"
        "cluster: {system: gb300-nvl72, gpus: 64}\n"
        "model: {preset: nemotron3-super}\n"
        "training: {micro_batch: 1, global_batch: 512, precision: nvfp4}\n"
        "parallel: {tp: 1, ep: 64, etp: 1}\n"
        "runtime: {stack: megatron, moe_dispatcher: hybridep}\n"
    )
    return sc


def test_cli_predicts_super_and_rejects_a_bad_latent_dim(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.cli_runner import predicts_then_rejects

    predicts_then_rejects(capsys, str(_super_scenario(tmp_path)), "model.moe.latent_dim=0", "latent_dim")


def test_hash_layers_count_the_hybrid_patterns_moe_layers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.cli_runner import predicts_then_rejects

    # Nemotron 3 Super: 88 layers, 40 of them MoE (E)
    m = preset("nemotron3-super")
    assert m.moe_layers == 40 == param_counts(m).moe_layers
    assert m.moe is not None
    hashed = m.model_copy(update={"moe": m.moe.model_copy(update={"hash_layers": 10})})
    router = next(o for o in L.moe_block_fwd(hashed, L.Layout(micro_batch=1, seq=1024.0, ep=8, etp=1)) if o.name == "router")
    assert router.count == pytest.approx(1 - 10 / 40)  # not 1 - 10 / 88
    predicts_then_rejects(capsys, str(_super_scenario(tmp_path)), "model.moe.hash_layers=41", "hash_layers")


@pytest.mark.parametrize("latent", [4096, 8192])
def test_a_latent_dim_not_below_hidden_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, latent: int
) -> None:
    from tests.cli_runner import run_cli

    # Nemotron 3 Super's hidden is 4096: a "latent" of 8192 projected up predicted a 21 s step
    code, _out, err = run_cli(capsys, "predict", str(_super_scenario(tmp_path)), "--set", f"model.moe.latent_dim={latent}")
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "latent_dim" in err and "hidden (4096)" in err


def test_expert_bias_kernels_cover_the_latent_rows() -> None:
    m = _model(LAT)
    assert m.moe is not None
    biased = m.model_copy(update={"moe": m.moe.model_copy(update={"expert_bias": True})})
    lay = L.Layout(micro_batch=1, seq=1024.0, ep=8, etp=1, eager_expert_ops=True)
    ops = {o.name: o for o in L.moe_block_fwd(biased, lay)}
    routed = ops["permute"].args["numel"] / LAT  # the rank's routed rows
    assert ops["fc2_bias_scale"].args["numel"] == pytest.approx(routed * LAT)  # not routed x H


def test_a_clamp_on_an_ungated_activation_is_refused() -> None:
    with pytest.raises(ValueError, match="activation_clamp"):
        ModelSpec(**{**_model(None).model_dump(), "moe": {**_model(None).model_dump()["moe"], "activation_clamp": 7.0}})
