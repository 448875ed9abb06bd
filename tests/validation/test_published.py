"""The published-table validation: row parsing, the papers' FLOP formulas, and the report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simcore.cli.validation import main as validation
from simcore.specs.resolve import scenario_from_dict
from simcore.validation import published as P


@pytest.fixture(scope="module")
def rows() -> list[P.PublishedRow]:
    return P.load_published()


@pytest.fixture(scope="module")
def results(rows: list[P.PublishedRow]) -> list[P.RowResult]:
    return P.predict_rows(rows)


def test_data_ships_with_package() -> None:
    assert P.PUBLISHED_CSV.is_file()
    assert (P.DATA_DIR / "README.md").is_file()


def test_every_row_is_a_valid_scenario(rows: list[P.PublishedRow]) -> None:
    assert len(rows) >= 80
    for r in rows:
        sc = scenario_from_dict(r.scenario)
        p = sc.parallel
        assert p.tp * p.pp * (p.dp or 1) * p.cp == r.gpus, r.index


def test_row_mapping(rows: list[P.PublishedRow]) -> None:
    by = {r.index: r for r in rows}
    # Narayanan Table 1, 1T on 3072 A100: tp 8, pp 64, dp 6, interleaved, full recompute
    one_t = next(r for r in rows if r.source == "Narayanan21 T1" and r.gpus == 3072)
    assert one_t.system == "hgx-a100"
    par = one_t.scenario["parallel"]
    assert (par["tp"], par["pp"], par["dp"]) == (8, 64, 6)
    assert par["schedule"] == "interleaved" and par["vp"] > 1
    assert one_t.scenario["training"]["recompute"] == "full"
    # Korthikanti selective rows use sequence parallelism, the baseline rows do not
    kor = [r for r in rows if r.source == "Korthikanti22 T5"]
    for r in kor:
        sel = r.scenario["training"]["recompute"] == "selective"
        assert r.scenario["parallel"]["sequence_parallel"] == sel
    # H100 rows run on hgx-h100 with the README's vocabulary
    h100 = [r for r in rows if r.source.startswith("MCore")]
    assert h100 and all(r.system == "hgx-h100" and r.dims["V"] == 131072 for r in h100)
    # ZeRO-3 rows: no model parallelism, every GPU a data-parallel rank
    z3 = [r for r in rows if r.scenario["parallel"]["zero"] == 3]
    assert z3 and all(r.scenario["parallel"]["dp"] == r.gpus for r in z3)
    # missing fields are documented per row
    assert any("micro_batch" in a for a in by[0].assumptions)


def test_flop_formulas_reproduce_the_papers_own_pairs(rows: list[P.PublishedRow]) -> None:
    """Each paper states several metrics of one run; converting one into a step time with our
    formula and back into another must reproduce the other published value (<2 %)."""
    groups: dict[str, list[P.PublishedRow]] = {}
    for r in rows:
        groups.setdefault(P._config_key(r), []).append(r)
    checked = 0
    for rs in groups.values():
        if len(rs) < 2:
            continue
        peak = 312e12 if rs[0].system == "hgx-a100" else 989e12
        step = P.step_from_metric(rs[0], rs[0].published, peak)
        for other in rs[1:]:
            if other.metric == "hfu":
                continue  # HFU counts recompute FLOPs the MFU row does not; checked below
            got = P.metric_from_step(other, step, peak)
            assert got == pytest.approx(other.published, rel=0.02), (other.index, other.metric)
            checked += 1
    assert checked >= 30


def test_megatron_flops_hand_computed() -> None:
    d = {
        "B": 4.0,
        "s": 2048.0,
        "l": 48.0,
        "h": 6144.0,
        "V": 51200.0,
        "ffn": 24576.0,
        "heads": 64.0,
        "kv_heads": 64.0,
    }
    base = 4 * 2048 * 48 * 6144**2
    assert P.megatron_flops(d, "full", "narayanan") == pytest.approx(
        96 * base * (1 + 2048 / (6 * 6144) + 51200 / (16 * 48 * 6144))
    )
    # selective recompute re-runs the attention scores: s/6h -> s/3h
    assert P.megatron_flops(d, "selective", "hardware") > P.megatron_flops(d, "selective", "model")
    assert P.megatron_flops(d, "full", "hardware") == pytest.approx(P.megatron_flops(d, "full", "narayanan"))
    # Megatron-LM's num_floating_point_operations for a GPT (ffn 4h, no GQA): 72 B s l h^2 (1 + s/6h + V/12lh)
    assert P.megatron_flops(d, "none", "mcore") == pytest.approx(
        72 * base * (1 + 2048 / (6 * 6144) + 51200 / (12 * 48 * 6144))
    )


def test_predictions_and_summary(results: list[P.RowResult]) -> None:
    prim = [r for r in results if r.primary]
    keys = {(r.source, r.model, r.gpus, r.layout) for r in prim}
    assert len(keys) == len(prim)  # one primary row per configuration
    for r in results:
        assert r.step_time_s > 0
        assert abs(sum(r.fractions.values()) - 1.0) < 1e-6
        # the error is the throughput ratio, whatever the metric's direction
        if r.metric == "iteration_time":
            assert r.error == pytest.approx(r.published / r.predicted - 1.0)
        else:
            assert r.error == pytest.approx(r.predicted / r.published - 1.0, rel=1e-9, abs=1e-9)
    s = P.summarize(results)
    assert s["configurations"]["rows"] == len(prim)
    assert 0 <= s["configurations"]["median_abs_error"] <= s["configurations"]["worst_abs_error"]
    assert set(s["by_source"]) >= {"Narayanan21 T1", "Korthikanti22 T5", "MCore H100 weak"}


def test_dense_and_moe_summaries_by_hand() -> None:
    def row(i: int, err: float, moe: bool) -> P.RowResult:
        return P.RowResult(
            index=i, source="s", model="m", gpus=8, layout="l", metric="tokens_per_s_per_gpu", unit="",
            published=1.0, predicted=1.0 + err, error=err, primary=True, step_time_s=1.0,
            published_tflops_per_gpu=1.0, predicted_tflops_per_gpu=1.0, fractions={}, fits_in_memory=True,
            memory_gib=1.0, assumptions=[], moe=moe,
        )  # fmt: skip

    # dense |errors| 0.1 .. 1.0: median 0.55, p90 between the 9th and 10th (0.9 + 0.9 x 0.1 = 0.91)
    rows = [row(i, (i + 1) / 10, False) for i in range(10)] + [row(10, -0.3, True)]
    k = P.summarize(rows)["by_kind"]
    assert k["dense"]["rows"] == 10 and k["dense"]["median_abs_error"] == pytest.approx(0.55)
    assert k["dense"]["p90_abs_error"] == pytest.approx(0.91)
    assert k["MoE"]["rows"] == 1 and k["MoE"]["p90_abs_error"] == pytest.approx(0.3)


def test_several_tables_pool_their_rows() -> None:
    t25, t26 = P.PLAN_CLAIM_TABLES  # the Megatron-Bridge 25.11 and 26.x tables
    a, b = P.load_published(t25), P.load_published(t26)
    both = P.load_published([t25, t26])
    assert len(both) == len(a) + len(b)
    assert [r.index for r in both] == list(range(len(both)))
    assert [r.model for r in both] == [r.model for r in a + b]


def test_cli_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "pv.png"
    assert validation(["published", "--json", "--plot", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["configurations"]["rows"] > 30
    assert png.stat().st_size > 1000
    assert validation(["published", "--all"]) == 0
    out = capsys.readouterr().out
    assert "median |err|" in out and "Narayanan21 T1" in out


_PREDATES_HEADER_RULE = {"llama3-8b-decode-h200"}
SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_library_checks_and_predicts(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every ready-made scenario passes ``simcore check`` and ``simcore predict``."""
    from simcore.cli import main

    for cmd in (["check", str(path)], ["predict", str(path), "--json"]):
        with pytest.raises(SystemExit) as e:
            main(cmd)
        assert e.value.code == 0, (cmd, capsys.readouterr())
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    if doc["kind"] == "training":
        assert doc["step_time_s"] > 0 and 0 < doc["mfu"] < 1
        assert doc["fits_in_memory"], doc["fits_reason"]
    if path.stem not in _PREDATES_HEADER_RULE:
        assert path.read_text().lstrip().startswith("#"), "each scenario says where its layout comes from"


# ------------------------------------------------------------------ tables in other spellings


def _rec(**kw: str) -> dict[str, str]:
    base = {
        "source": "Some lab 2026 table 3",
        "system": "DGX-GB200",
        "gpu": "GB200",
        "num_gpus": "256",
        "model": "LLAMA3.1_405B",
        "params_b": "405",
        "layers": "126",
        "hidden": "16384",
        "heads": "128",
        "ffn_hidden": "",
        "seq_len": "8192",
        "global_batch": "1536",
        "micro_batch": "1",
        "tp": "4",
        "pp": "16",
        "cp": "1",
        "ep": "1",
        "vp": "4",
        "dp": "",
        "precision": "FP8-CS",
        "recompute": "",
        "metric": "Tokens / sec / GPU",
        "value": "813 (790)",
        "unit": "tokens/s/GPU",
        "notes": "",
    }
    base.update(kw)
    return base


def test_a_newer_table_row_is_read_in_its_own_spelling() -> None:
    """A Megatron-Bridge style row: model named by a preset, FP8, tokens/s per GPU, 256 GPUs of NVL72
    racks (4 x 64) and 126 layers on pp 16 x vp 4 (uneven chunks) all predict."""
    r = P.build_row(0, _rec())
    assert r.problem is None and r.metric == "tokens_per_s_per_gpu" and r.published == 813
    m = r.scenario["model"]
    assert (m["activation"], m["norm"], m["kv_heads"], m["ffn_hidden"]) == ("swiglu", "rmsnorm", 8, 53248)
    assert r.scenario["training"]["precision"] == "fp8_current"
    assert "account_for_embedding_in_pipeline_split" not in r.scenario["parallel"]  # not a Megatron-Bridge row
    mb = P.build_row(0, _rec(source="Megatron-Bridge 25.11 DGX-GB200 (performance summary)", vp="8"))
    assert mb.scenario["parallel"]["account_for_embedding_in_pipeline_split"] is True
    assert mb.release == "Megatron-Bridge 25.11"
    (res,) = P.predict_rows([mb])  # 126 layers + embedding + loss on pp 16 x vp 8 = 128 chunks
    assert res.problem is None
    assert r.dims["glu"] == 1.5 and r.dims["kv_heads"] == 8
    (res,) = P.predict_rows([r])
    assert res.problem is None and res.predicted > 0
    # tokens per second per GPU straight from the step time: B s / step / gpus
    assert res.predicted == pytest.approx(1536 * 8192 / res.step_time_s / 256)


def test_mbridge_nvfp4_rows_run_without_tp_comm_overlap() -> None:
    """Megatron-Bridge's performance recipes turn TP communication overlap off under NVFP4 and keep it
    under FP8 (sequence parallel stays on either way); other tables keep the README's overlap."""
    src = "Megatron-Bridge 26.04 DGX-GB200 (performance summary)"
    fp4 = P.build_row(0, _rec(source=src, precision="NVFP4"))
    fp8 = P.build_row(0, _rec(source=src))
    other = P.build_row(0, _rec(precision="NVFP4"))
    assert fp4.scenario["parallel"]["tp_overlap"] is False and fp4.scenario["parallel"]["sequence_parallel"]
    assert any("no TP comm overlap under NVFP4" in a for a in fp4.assumptions)
    assert fp8.scenario["parallel"]["tp_overlap"] is True
    assert other.scenario["parallel"]["tp_overlap"] is True


def test_mbridge_recipes_that_turn_the_parameter_gather_overlap_off() -> None:
    """v0.2.0's (25.11) Llama 70B / 405B MXFP8 recipes and v0.4.2 / v0.5.0's GB200 405B NVFP4 v2 recipe (256
    GPUs, global batch 1,536) set overlap_param_gather False; the same jobs in other releases or precisions,
    and other tables, keep it."""
    def off(source: str, **kw: str) -> bool:
        r = P.build_row(0, _rec(source=f"Megatron-Bridge {source} (performance summary)", **kw))
        return r.scenario["parallel"].get("param_gather_overlap", True) is False

    assert off("25.11 DGX-B200", gpu="B200", system="DGX-B200", precision="MXFP8", num_gpus="128", pp="8", cp="2")
    assert not off("25.11 DGX-B200", gpu="B200", system="DGX-B200", num_gpus="128", pp="8", cp="2")
    assert not off("26.02 DGX-GB200", precision="MXFP8")
    assert off("26.04.01 DGX-GB200", precision="NVFP4", vp="8") and off("26.06 DGX-GB200", precision="NVFP4", vp="8")
    assert not off("26.04 DGX-GB200", precision="NVFP4", vp="8")  # v0.4.0: before disable_param_gather_overlap
    assert not off("26.06 DGX-GB300", gpu="GB300", system="DGX-GB300", precision="NVFP4", pp="8", vp="4")
    other = P.build_row(0, _rec(precision="MXFP8"))
    assert "param_gather_overlap" not in other.scenario["parallel"]


@pytest.mark.parametrize(
    ("column", "recipe"),
    [
        ("FP8-CS", "fp8_current"), ("FP8-DS", "fp8_delayed"), ("FP8-MX", "mxfp8"), ("MXFP8", "mxfp8"),
        ("NVFP4", "nvfp4"), ("FP8-SS", "fp8_blockwise"), ("FP8 (blockwise)", "fp8_blockwise"), ("FP8", "fp8"),
        ("BF16", "bf16"), ("fp16", "fp16"), ("", "bf16"),
    ],
)
def test_precision_columns_name_their_recipe(column: str, recipe: str) -> None:
    assert P.precision_recipe(column) == recipe


def test_spearman_and_rank_fidelity_by_hand() -> None:
    assert P.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert P.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert P.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert math.isnan(P.spearman([1, 1], [1, 2]))


def test_validation_reports_groups_and_releases() -> None:
    rows = P.predict_rows(P.load_published())
    s = P.summarize(rows)
    assert "hgx-a100 bf16 dense" in s["by_system_precision_kind"]
    assert all(r.release for r in rows)
    rf = s["rank_fidelity"]
    assert rf["jobs"] and -1.0 <= rf["spearman"] <= 1.0 and 0 <= rf["pairs_ordered"] <= rf["pairs"]


def test_metric_spellings() -> None:
    assert P.normalize_metric("Tokens / sec / GPU") == "tokens_per_s_per_gpu"
    assert P.normalize_metric("tokens per second") == "tokens_per_s"
    assert P.normalize_metric("Model TFLOP / sec / GPU") == "achieved_tflops_per_gpu"
    assert P.normalize_metric("step_time_s") == "iteration_time"
    assert P.normalize_metric("mfu") == "mfu"
    assert P.normalize_metric("loss") is None


def test_rows_that_cannot_be_predicted_are_reported_not_fatal(tmp_path: Path) -> None:
    bad_metric = _rec(metric="validation loss", num_gpus="512")
    experts_unknown = _rec(model="SomeMoE-100B", ep="8", tp="1", pp="1", vp="")
    no_system = _rec(gpu="TPU v5p")
    path = tmp_path / "t.csv"
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(_rec()))
        w.writeheader()
        for rec in (_rec(), bad_metric, experts_unknown, no_system):
            w.writerow(rec)
    rows = P.load_published(path)
    assert [r.problem is None for r in rows] == [True, False, False, False]
    res = P.predict_rows(rows)
    s = P.summarize(res)
    assert s["configurations"]["rows"] == 1
    assert {d["row"] for d in s["not_predicted"]} == {1, 2, 3}
    assert "not predicted" in P.format_table(res) and "not predicted" in P.format_summary(s)


def test_gpt_rows_keep_the_gpt_architecture(rows: list[P.PublishedRow]) -> None:
    """Preset matching goes by name and dimensions: the GPT rows of the papers stay GELU/LayerNorm."""
    for r in rows:
        assert r.scenario["model"]["activation"] == "gelu", r.index
        assert r.problem is None


def test_mbridge_moe_rows_carry_their_recipes_settings() -> None:
    """The 25.11 MoE rows take what Megatron-Bridge's performance recipes set (recompute modules, the
    Qwen3-235B pipeline split), each named with the recipe's file and commit."""
    rows = P.load_published(P.DATA_DIR / "published_training_2025.csv")
    by = {(r.model, r.system): r for r in rows}
    ds = by[("DeepSeekV3", "dgx-b200")]
    assert ds.scenario["training"]["recompute"] == "selective"
    assert ds.scenario["training"]["recompute_modules"] == ["mla_up_proj"]
    assert any("mla_up_proj" in a and "Megatron-Bridge@v0.2.0 DEEPSEEK_V3_B200" in a for a in ds.assumptions)
    assert by[("DeepSeekV3", "gb300-nvl72")].scenario["training"]["recompute_modules"] == ["moe_act"]
    qwen = by[("Qwen3_30B_a3B", "dgx-b200")]
    assert qwen.scenario["training"]["recompute"] == "none"
    assert "recompute_modules" not in qwen.scenario["training"]
    assert any(a.startswith("no recompute (") for a in qwen.assumptions)
    # each release's own modules: GB300 DeepSeek-V3 MXFP8 recomputes moe_act in 25.11, mla_up_proj from 26.02,
    # nothing from 26.06 (recompute_modules=[] beside the full-iteration CUDA graph)
    later = P.load_published(P.DATA_DIR / "published_training_mbridge.csv")
    gb300 = {
        r.release: r.scenario["training"]
        for r in later
        if (r.model, r.system) == ("DeepSeekV3", "gb300-nvl72") and r.scenario["training"]["precision"] == "mxfp8"
    }
    assert gb300["Megatron-Bridge 26.04"]["recompute_modules"] == ["mla_up_proj"]
    assert gb300["Megatron-Bridge 26.08"]["recompute"] == "none"
    big = by[("Qwen3_235B_a22B", "dgx-b200")].scenario["parallel"]
    assert big["account_for_embedding_in_pipeline_split"] and big["account_for_loss_in_pipeline_split"]


def test_mbridge_moe_rows_take_their_releases_dispatcher() -> None:
    """Each release's performance recipe names the dispatcher and the A2A overlap (mbridge_moe_recipes.csv,
    from the release tags' workload_base_configs.py): 25.11 runs NCCL's all-to-all on B200 and HybridEP on
    NVL72; 26.04.01's B200 DeepSeek-V3 at EP 32 runs DeepEP with the 1F1B A2A overlap."""
    r = P.mbridge_moe_recipe("Megatron-Bridge 26.04.01", "DeepSeekV3", "B200", "mxfp8", 32, 4096)
    assert r is not None and (r["dispatcher"], r["a2a_overlap"], r["tag"]) == ("deepep", "true", "v0.4.2")
    r = P.mbridge_moe_recipe("Megatron-Bridge 26.04", "DeepSeekV3", "B200", "mxfp8", 8, 4096)
    assert r is not None and r["dispatcher"] == "hybridep"
    assert P.mbridge_moe_recipe("Megatron-Bridge 24.01", "DeepSeekV3", "B200", "mxfp8", 8, 4096) is None
    rows = P.load_published(P.DATA_DIR / "published_training_2025.csv")
    by = {(r.model, r.system): r for r in rows}
    b200 = by[("Qwen3_30B_a3B", "dgx-b200")]
    assert b200.scenario["runtime"]["moe_dispatcher"] == "alltoall"
    assert by[("Qwen3_30B_a3B", "gb200-nvl72")].scenario["runtime"]["moe_dispatcher"] == "hybridep"
    h100 = by[("Qwen3_30B_a3B", "hgx-h100")]
    assert h100.scenario["runtime"]["moe_a2a_overlap"] is True
    assert any("1F1B A2A overlap" in a and "@v0.2.0 QWEN3_30B_A3B_H100" in a for a in h100.assumptions)
    # GPT-OSS on GB200 in 26.04: the V2 recipe of the table's global batch 1280 (HybridEP), not V1's 512
    r = P.mbridge_moe_recipe("Megatron-Bridge 26.04", "GPT_OSS_120B", "GB200", "bf16", 64, 1280)
    assert r is not None and r["config"].endswith("_V2") and r["dispatcher"] == "hybridep"
    # the fused grouped MLP (cutedsl_fused_grouped_mlp) of the NVL72 MXFP8 recipes from 26.06, not B300's
    later = {
        (r.release, r.system): r.scenario["runtime"]
        for r in P.load_published(P.DATA_DIR / "published_training_mbridge.csv")
        if r.model == "GPT_OSS_120B"
    }
    assert later[("Megatron-Bridge 26.08", "gb300-nvl72")]["moe_fused_mlp"] is True
    assert later[("Megatron-Bridge 26.06", "dgx-b300")]["moe_fused_mlp"] is False
    assert later[("Megatron-Bridge 26.04", "gb300-nvl72")]["moe_fused_mlp"] is False
    # dense rows say nothing of a dispatcher
    assert "moe_dispatcher" not in by[("LLAMA3_8B", "dgx-b200")].scenario["runtime"]


def test_deepseek_rows_take_the_recipe_pipeline_layout() -> None:
    """Megatron-Bridge's DeepSeek-V3 layouts give the last chunk one decoder layer beside the MTP layer and
    the loss (16 chunks of 4, the last of 1): per rank, chunks r, r + pp, ..."""
    assert P.dsv3_stage_layers(16, 1) == [4] * 15 + [1]
    assert P.dsv3_stage_layers(2, 8) == [32, 29]
    assert P.dsv3_stage_layers(4, 4) == [16, 16, 16, 13]
    assert P.dsv3_stage_layers(2, 4) is None
    rows = P.load_published(P.DATA_DIR / "published_training_2025.csv")
    ds = next(r for r in rows if r.model == "DeepSeekV3" and r.system == "dgx-b200")
    assert ds.scenario["model"]["mtp_layers"] == 1
    assert ds.scenario["parallel"]["pipeline_layers"] == [4] * 15 + [1]


def test_mbridge_rows_reduce_gradients_in_bf16_as_their_recipes() -> None:
    """Every Megatron-Bridge performance recipe of the tables' releases sets ``grad_reduce_in_fp32 = False``
    (dense, MoE and hybrid alike); each row names its release's tag. The papers' and the Megatron-LM README
    rows keep the stack's default (fp32)."""
    for csv_name in ("published_training_2025.csv", "published_training_mbridge.csv"):
        for r in P.load_published(P.DATA_DIR / csv_name):
            if not r.scenario:
                continue
            assert r.scenario["training"]["grad_reduce_in_fp32"] is False, r.index
            tag = P._MBRIDGE_TAG[r.release.removeprefix("Megatron-Bridge ")]
            assert any(f"grad_reduce_in_fp32 False: NVIDIA-NeMo/Megatron-Bridge@{tag}" in a for a in r.assumptions)
    assert all("grad_reduce_in_fp32" not in r.scenario.get("training", {}) for r in P.load_published())


def test_mbridge_fsdp_rows_run_megatron_fsdp_with_their_recipes_offload() -> None:
    """The Llama 3 70B rows the table marks fsdp=1 run the recipes' Megatron-FSDP (optim_grads_params) and
    offload the recipe's number of layers' activations (GB300 FP8-CS 20 layers, GB200 40)."""
    rows = P.load_published(P.DATA_DIR / "published_training_2025.csv")
    by = {(r.model, r.system): r for r in rows if r.model == "LLAMA3_70B"}
    for system, n in (("gb300-nvl72", 20), ("gb200-nvl72", 40)):
        sc = by[("LLAMA3_70B", system)].scenario
        assert sc["parallel"]["megatron_fsdp"] is True and sc["parallel"]["fsdp"] is False
        assert sc["parallel"]["zero"] == 3
        assert sc["training"]["activation_offload_layers"] == n
    h100 = by[("LLAMA3_70B", "hgx-h100")].scenario
    assert "megatron_fsdp" not in h100["parallel"] and "activation_offload_layers" not in h100["training"]


def test_mbridge_fsdp_row_without_offload_is_megatron_fsdp_not_fsdp2() -> None:
    """The performance scripts' only FSDP is Megatron-FSDP: the 25.11 H100 Llama 3 8B row (fsdp=1, a recipe
    that offloads nothing) runs it, not PyTorch's FSDP2 and its copy kernels, and offloads nothing."""
    rows = P.load_published(P.DATA_DIR / "published_training_2025.csv")
    (r,) = [r for r in rows if r.model == "LLAMA3_8B" and r.system == "hgx-h100"]
    assert r.scenario["parallel"]["megatron_fsdp"] is True and r.scenario["parallel"]["fsdp"] is False
    assert r.scenario["parallel"]["zero"] == 3
    assert "activation_offload_layers" not in r.scenario["training"]
    assert any("set_megatron_fsdp_overrides" in a for a in r.assumptions)


def test_deepseek_v3_rows_keep_bf16_moments_as_their_recipe() -> None:
    """Megatron-Bridge's DeepSeek-V3 recipe runs the precision-aware optimizer with bf16 moments; the other
    models' recipes keep fp32 moments."""
    for r in P.load_published(P.DATA_DIR / "published_training_2025.csv"):
        want = "bf16" if r.model == "DeepSeekV3" else None
        assert r.scenario["training"].get("optimizer_moments_dtype") == want, r.index


def test_mbridge_rows_name_the_preset_they_run() -> None:
    """A row whose table gives no architecture runs the built-in preset its model names, and its notes name that
    preset (no row says "no simcore preset" while one exists)."""
    import csv

    with open(P.DATA_DIR / "published_training_mbridge.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for rec in rows:
        if (rec["layers"] or "").strip():
            continue
        named = P._preset_for(rec["model"], None, None)
        assert named is not None, rec["model"]
        assert "no simcore preset" not in rec["notes"], rec["model"]
        assert "preset" in rec["notes"], rec["model"]
