"""``python -m simcore.validation hybrid``: the Megatron-Bridge table's Nemotron 3 Nano rows run, held out, built
as ``python -m simcore.validation published`` builds them (one table)."""

from __future__ import annotations

import pytest

from simcore.validation.hybrid import MBRIDGE_CSV, compare, report
from simcore.validation.published import load_published, predict_rows


def _nano() -> list:  # type: ignore[type-arg]
    return [r for r in load_published(MBRIDGE_CSV) if r.model == "Nemotron_3_Nano"]


def test_the_nano_rows_use_the_hybrid_preset_and_the_recipes_settings() -> None:
    rows = _nano()
    assert len(rows) == 20 and all(r.problem is None and r.release for r in rows)
    h100 = next(r for r in rows if r.system == "hgx-h100")
    sc = h100.scenario
    assert sc["cluster"] == {"system": "hgx-h100", "gpus": 16}
    assert sc["model"]["hybrid_pattern"].count("M") == 23 and sc["model"]["mamba"]["heads"] == 64
    assert sc["training"]["precision"] == "fp8_current"
    # the release's recipe (v0.5.0 nemotron_3_workload_base_configs.py NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1)
    assert h100.release == "Megatron-Bridge 26.06"
    assert sc["training"]["recompute"] == "selective"
    assert sc["training"]["recompute_modules"] == ["moe", "layernorm", "core_attn", "moe_act"]
    assert sc["runtime"]["moe_dispatcher"] == "hybridep"
    assert sc["parallel"]["ep"] == 8
    # a release before the recipes had a Nemotron 3 config (v0.3.1): the hybrid recipes' norms, all-to-all
    old = next(r for r in rows if r.system == "hgx-h100" and r.release == "Megatron-Bridge 26.02.01").scenario
    assert old["training"]["recompute_modules"] == ["layernorm"] and "moe_dispatcher" not in old["runtime"]
    assert sc["training"]["grad_reduce_in_fp32"] is False  # perf_recipes/_common.py _benchmark_common
    gb = next(r for r in rows if r.system == "gb300-nvl72").scenario
    assert gb["training"]["recompute"] == "none" and gb["training"]["precision"] == "mxfp8"


def test_bf16_gradients_halve_the_gradient_memory() -> None:
    """The megatron stack's default (fp32 gradients, the pre-training recipes') against the performance
    recipes' bf16 gradients the rows are run with."""
    from simcore.prediction import predict

    sc = _nano()[0].scenario
    bf16 = predict(sc).memory_breakdown["gradients"]
    sc = {**sc, "training": {k: v for k, v in sc["training"].items() if k != "grad_reduce_in_fp32"}}
    res = predict(sc)
    assert res.memory_breakdown["gradients"] == pytest.approx(2 * bf16)


def test_every_row_is_predicted_and_equals_the_published_report() -> None:
    rows = compare()
    # Nano 20, Super 30, Ultra 2, Lightning 1 (the hybrid rows of the table)
    assert len(rows) == 53 and sum(r["model"] == "Nemotron_3_Nano" for r in rows) == 20
    hybrid = [r for r in load_published(MBRIDGE_CSV) if "hybrid_pattern" in r.scenario.get("model", {})]
    pub = {r.index: r for r in predict_rows(hybrid)}
    for r, row in zip(rows, hybrid, strict=True):
        assert r["error"] is not None, r
        assert r["error"] == pytest.approx(r["predicted"] / r["published"] - 1.0)
        assert r["predicted"] == pytest.approx(pub[row.index].predicted)
    assert "median |error|" in report()


def test_the_latent_moe_rows_use_their_presets_and_recipes() -> None:
    rows = load_published(MBRIDGE_CSV)
    b300 = next(
        r for r in rows
        if r.model == "Nemotron_3_Super" and r.system == "dgx-b300" and r.release == "Megatron-Bridge 26.06"
        and r.scenario["training"]["precision"] == "nvfp4"
    )  # fmt: skip
    sc = b300.scenario
    assert sc["model"]["moe"]["latent_dim"] == 1024 and sc["model"]["mtp_layers"] == 2
    # v0.5.0 NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B300_NVFP4_V1: HybridEP, recompute moe_act and layernorm
    assert sc["runtime"]["moe_dispatcher"] == "hybridep"
    assert sc["training"]["recompute_modules"] == ["moe_act", "layernorm"]
    assert sc["training"]["bf16_layers_end"] == 14  # the NVFP4 recipe's num_layers_at_end_in_bf16
    ultra = next(r for r in rows if r.model == "Nemotron_3_Ultra" and r.system == "gb300-nvl72").scenario
    assert ultra["model"]["moe"]["latent_dim"] == 2048
    assert ultra["parallel"]["megatron_fsdp"] and ultra["training"]["recompute_modules"] == ["moe_act"]


def test_deepseek_v4_flash_rows_use_the_preset_and_the_128gpu_recipe() -> None:
    rows = [r for r in load_published(MBRIDGE_CSV) if r.model == "DeepSeekV4_Flash"]
    assert len(rows) == 2 and all(r.problem is None for r in rows)
    for r in rows:
        sc = r.scenario
        assert sc["model"]["csa"]["indexer_topk"] == 512 and sc["model"]["residual_streams"] == 4
        assert sc["model"]["moe"]["hash_layers"] == 3 and sc["model"]["layers"] == 43
        # perf_recipes/deepseek/gb200/deepseek_v4.py@067f987d: TP1 PP1 EP64, hybridep, recompute mla_up_proj
        assert (sc["parallel"]["tp"], sc["parallel"]["pp"], sc["parallel"]["ep"]) == (1, 1, 64)
        assert sc["runtime"]["moe_dispatcher"] == "hybridep"
        assert sc["training"]["recompute_modules"] == ["mla_up_proj"]
        assert sc["training"]["precision"] == "mxfp8"
        # its moe_expert_rank_capacity_factor 1.5 is HybridEP's receive budget, not a capacity: priced dropless
        assert sc["model"]["moe"].get("capacity_factor") is None
        assert any("moe_expert_rank_capacity_factor 1.5" in a for a in r.assumptions)
