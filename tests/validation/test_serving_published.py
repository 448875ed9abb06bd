"""``python -m simcore.validation serving``: published engine rows replayed by simcore serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcore.validation import serving as S

HEADER = (
    "source,system,gpu,num_gpus,model,precision,framework,tp,pp,ep,dp,input_len,output_len,"
    "batch_or_concurrency,metric,value,unit,notes\n"
)
TRT = '"NVIDIA/TensorRT-LLM@x perf-overview",DGX,{gpu},{n},{model},{prec},"TensorRT-LLM (trtllm-bench)",{n},1,,,{isl},{osl},offline max-throughput,total_output_throughput,{value},tok/s,\n'


def _table(tmp_path: Path, *rows: dict[str, object]) -> Path:
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "".join(TRT.format(**r) for r in rows), encoding="utf-8")
    return p


def test_rows_run_with_stated_settings_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "OFFLINE_REQUESTS", 200)
    monkeypatch.setattr(S, "NUM_REQUESTS", {})
    p = _table(
        tmp_path,
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP8", "isl": 1000, "osl": 1000, "value": 15000},
        {"gpu": "B200 180GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP4", "isl": 1000, "osl": 1000, "value": 30000},
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP4", "isl": 1000, "osl": 1000, "value": 1},
        {"gpu": "H100 SXM 80GB", "n": 4, "model": "Mystery 9B", "prec": "FP8", "isl": 128, "osl": 128, "value": 1},
    )  # fmt: skip
    doc = S.report(p)
    h100, b200, h100_fp4, scout = doc["rows"]
    assert h100["predicted"] > 0 and h100["error"] == pytest.approx(h100["predicted"] / 15000 - 1)
    assert h100["settings"]["kv_cache_dtype"] == "fp8" and h100["settings"]["reserve_output_kv"] is True
    # FP4 runs on Blackwell, faster than FP8 on the H100; is refused on the H100 with the reason
    assert b200["precision"] == "fp4" and b200["predicted"] > h100["predicted"]
    assert h100_fp4["predicted"] is None and "FP4 tensor cores" in h100_fp4["problem"]
    assert scout["problem"] == "no simcore preset of Mystery 9B"
    assert doc["overall"]["rows"] == 2 and doc["overall"]["published_rows"] == 4
    errs = sorted(abs(r["error"]) for r in (h100, b200))
    assert doc["overall"]["median_abs_error"] == pytest.approx(sum(errs) / 2)
    assert set(doc["groups"]) == {"TensorRT-LLM | H100 SXM 80GB | fp8", "TensorRT-LLM | B200 180GB | fp4"}
    text = S.format_report(doc)
    assert "not run: no simcore preset of Mystery 9B" in text and "2 of 4 rows ran" in text


def test_offline_rows_run_trtllm_benchs_dataset_and_limits(tmp_path: Path) -> None:
    """trtllm-bench's own max_batch_size / max_num_tokens (its tuning heuristic, by hand) and the overview's
    num_requests per ISL/OSL."""
    short, long_ = S.read_rows(_table(
        tmp_path,
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP8", "isl": 128, "osl": 2048, "value": 1},
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP8", "isl": 20000, "osl": 2000, "value": 1},
    ))  # fmt: skip
    # 8B FP8 on 80 GiB: r = 0.95 (85.9e9 - 8.03e9 B) / (2 x 32 layers x 8 heads x 128 x 1 B x 2,176) = 519 requests
    # -> 640 (128s); tokens 519 x (1 + 128/2048) = 551 -> 2,048 (at least), above 128 + 640
    assert S.bench_limits(short) == (640, 2048)
    # 22,000-token requests: r = 51 -> 64 (the floor); tokens raised to ISL + 64 (chunked prefill off)
    assert S.bench_limits(long_) == (64, 20064)
    s = S.settings(short)
    assert (s["requests"], s["max_batch"], s["max_batch_tokens"]) == (3000, 640, 2048)
    assert S.settings(long_)["requests"] == 1000


def test_overview_rows_capture_trtllm_benchs_cuda_graphs() -> None:
    """The overview's llm_options.yml batch sizes, filtered as TensorRT-LLM does (model_engine.py
    _filter_cuda_graph_batch_sizes): sizes up to min(max_batch_size, max_num_tokens), then that bound (hand-checked)."""
    assert S.graph_sizes(384, 2048) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]
    assert S.graph_sizes(160, 2048)[-2:] == [128, 160]
    assert S.graph_sizes(4096, 2048)[-1] == 2048  # a pure decode batch holds at most max_num_tokens sequences
    assert S.graph_sizes(8192, 16384)[-1] == 8192
    row = next(r for r in S.read_rows() if r.source == S.OVERVIEW_SOURCE and r.attention_dp == 1)
    s = S.settings(row)
    assert s["cuda_graph_sizes"] == S.graph_sizes(s["max_batch"], s["max_batch_tokens"])
    # an MoE row with attention DP (Scout, 4 ranks): each rank pads to its own captured sizes, the instance's
    # mean-field batch being 4 ranks' worth (Scout 128/2048 on H100: 1,280 sequences and 2,048 tokens a rank)
    moe = next(r for r in S.read_rows() if r.source == S.OVERVIEW_SOURCE and r.attention_dp == 4 and r.osl == 2048)
    s = S.settings(moe)
    assert (s["max_batch"], s["max_batch_tokens"]) == (4 * 1280, 4 * 2048)
    assert s["cuda_graph_sizes"] == [4 * b for b in S.graph_sizes(1280, 2048)]
    assert s["cuda_graph_sizes"][-2:] == [4 * 1024, 4 * 1280]


def test_a_longer_published_row_than_the_context_is_reported_not_clipped(tmp_path: Path) -> None:
    row = S.read_rows(
        _table(tmp_path, {"gpu": "H100", "n": 1, "model": "Llama 3 8B", "prec": "FP8", "isl": 9000, "osl": 10, "value": 1})
    )[0]  # fmt: skip
    S.run_row(row)
    assert row.predicted is None and "context of 8192" in (row.problem or "")


def test_cli_serving_bad_table_is_one_line(tmp_path: Path) -> None:
    from simcore.cli.validation import main

    assert main(["serving", "--csv", str(tmp_path / "missing.csv")]) == 2


def test_moe_rows_run_with_attention_dp_and_wide_ep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "OFFLINE_REQUESTS", 100)
    monkeypatch.setattr(S, "NUM_REQUESTS", {})
    p = _table(tmp_path, {"gpu": "H100 SXM 80GB", "n": 4, "model": "Llama 4 Scout", "prec": "FP8", "isl": 128, "osl": 128,
                          "value": 1000})  # fmt: skip
    row = S.report(p)["rows"][0]
    assert row["problem"] is None and row["predicted"] > 0
    assert row["settings"]["attention_dp"] == 4 and row["settings"]["ep"] == 4 and row["tp"] == 1
    assert row["settings"]["requests"] == 4 * 100
    # trtllm-bench's heuristic limits for --tp 4, taken by each DP rank
    assert row["settings"]["max_batch"] % 4 == 0 and row["settings"]["max_batch"] // 4 >= 64
    assert "attention DP over the 4 GPUs" in " ".join(row["assumed"])
    # the printed yaml nests enable_attention_dp in cuda_graph_config, which TensorRT-LLM refuses; the overview's
    # next version states the layout (DEP8/DEP4): both said
    assert "refuses as an extra field" in " ".join(row["assumed"]) and "DEP8" in " ".join(row["assumed"])


def test_bench_limits_under_attention_dp_are_the_whole_groups(tmp_path: Path) -> None:
    """With attention DP the command's --tp is every GPU of the row: ``dp`` ranks of tp 1 take the limits of one
    group of ``dp`` GPUs (each rank then holds them), and MoE experts count in the checkpoint."""
    (row,) = S.read_rows(_table(tmp_path, {"gpu": "H100 SXM 80GB", "n": 4, "model": "Llama 4 Scout", "prec": "FP8",
                                            "isl": 128, "osl": 2048, "value": 1}))  # fmt: skip
    import dataclasses

    one = dataclasses.replace(row, tp=1)
    assert S.bench_limits(one, dp=4) == S.bench_limits(dataclasses.replace(row, tp=4))
    # Scout's 16 experts of 109 B parameters leave less KV room on 4 GPUs than its attention alone would
    assert S.bench_limits(one, dp=4)[0] < S.bench_limits(dataclasses.replace(row, tp=4, preset="llama3.1-8b"))[0]


AZURE = (
    "Azure/AI-benchmarking-guide@x results.md,ND H100 v5,H100 80GB HBM3,{n},{model},not stated,not stated,{tp},,,,128,8,"
    "{c},throughput,{value},tokens/s,\n"
)
LMSYS = (
    "LMSYS blog,SGLang,H100 80GB,{n},DeepSeek-V3,FP8,SGLang,,,{ep},,{isl},,{per},{metric},{value},tok/s per node,\n"
)


def test_azure_rows_use_the_guides_engine_and_precision(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text(HEADER + AZURE.format(n=8, model="Llama 3 405B", tp=8, c=16, value=250)
                 + AZURE.format(n="", model="Mistral 7B", tp="", c=16, value=2000), encoding="utf-8")  # fmt: skip
    big, small = S.read_rows(p)
    assert big.engine == "TensorRT-LLM" and (big.precision, big.kv_cache_dtype) == ("fp8", "bf16")
    assert (small.precision, small.kv_cache_dtype) == ("fp8", "fp8") and small.preset == "mistral-7b"
    S.run_row(big)
    assert big.problem is None and big.predicted is not None and big.predicted > 0  # 405B fits 8 H100s in FP8


def test_wide_ep_rates_per_node(tmp_path: Path) -> None:
    """The LMSYS rows: a prefill pool's input tokens/s per node and a decode pool's output tokens/s per node,
    from the step model of an attention-DP instance over the pool; more tokens a device never lowers the rate."""
    p = tmp_path / "d.csv"
    rows = [
        LMSYS.format(n=32, ep=32, isl=2000, per="16384 tokens per device", metric="prefill_throughput_per_node",
                     value=50000),
        LMSYS.format(n=32, ep=32, isl=2000, per="4096", metric="prefill_throughput_per_node", value=50000),
        LMSYS.format(n=72, ep=72, isl=2000, per="256 per device", metric="decode_output_throughput_per_node",
                     value=20000),
        LMSYS.format(n=72, ep=72, isl="KV 4000", per="128", metric="decode_output_throughput_per_node_simulated_MTP",
                     value=1),
    ]  # fmt: skip
    p.write_text(HEADER + "".join(rows), encoding="utf-8")
    pre, pre_small, dec, mtp = (S.run_row(r) for r in S.read_rows(p))
    assert pre.rate == "prefill" and pre.attention_dp == 32 and pre.predicted is not None
    assert pre_small.predicted is not None and pre_small.predicted <= pre.predicted * (1 + 1e-9)
    assert dec.rate == "decode" and dec.attention_dp == 72 and dec.kv_cache_dtype == "bf16"
    assert dec.predicted is not None and dec.predicted > 0 and dec.settings["two_batch_overlap"] is True
    assert mtp.predicted is None and "MTP" in (mtp.problem or "")


def test_moe_layout_what_ifs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--layout tp / tp-ep: TP attention over the row's GPUs, experts TP-sharded (ep 1) or whole on the TP ranks
    (ep = tp), each with trtllm-bench's limits for --tp as a dense row; the row says it is a what-if."""
    monkeypatch.setattr(S, "OFFLINE_REQUESTS", 100)
    monkeypatch.setattr(S, "NUM_REQUESTS", {})
    p = _table(tmp_path, {"gpu": "H100 SXM 80GB", "n": 4, "model": "Llama 4 Scout", "prec": "FP8", "isl": 128, "osl": 128,
                          "value": 1000})  # fmt: skip
    (tp,) = S.read_rows(p, "tp")
    (tp_ep,) = S.read_rows(p, "tp-ep")
    for row, ep in ((tp, 1), (tp_ep, 4)):
        assert (row.tp, row.attention_dp, row.ep) == (4, 1, ep)
        s = S.settings(row)
        assert s.get("ep", 1) == ep and "attention_dp" not in s
        assert (s["max_batch"], s["max_batch_tokens"]) == S.bench_limits(row) and s["requests"] == 100
        assert "what-if" in " ".join(row.assumed)
        S.run_row(row)
        assert row.problem is None and row.predicted is not None and row.predicted > 0
    with pytest.raises(S.SimcoreError, match="'ep' is not one of"):
        S.read_rows(p, "ep")


def test_moe_imbalance_what_if_slows_the_moe_rows_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "OFFLINE_REQUESTS", 50)
    monkeypatch.setattr(S, "NUM_REQUESTS", {})
    p = _table(
        tmp_path,
        {"gpu": "H100 SXM 80GB", "n": 4, "model": "Llama 4 Scout", "prec": "FP8", "isl": 128, "osl": 128, "value": 1},
        {"gpu": "H100 SXM 80GB", "n": 1, "model": "Llama 3.1 8B", "prec": "FP8", "isl": 128, "osl": 128, "value": 1},
    )  # fmt: skip
    (moe, dense), (moe_hot, dense_hot) = S.report(p)["rows"], S.report(p, imbalance=1.5)["rows"]
    assert moe_hot["problem"] is None and moe_hot["predicted"] < moe["predicted"]
    assert dense_hot["predicted"] == dense["predicted"]
    with pytest.raises(S.SimcoreError, match="0.5 is below 1"):
        S.report(p, imbalance=0.5)


def test_cli_serving_bad_what_if_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from simcore.cli.validation import main

    assert main(["serving", "--model", "Scout", "--layout", "ep"]) == 2
    assert main(["serving", "--model", "Scout", "--imbalance", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: layout: 'ep' is not one of attention-dp, tp, tp-ep",
        "error: imbalance: 0.5 is below 1 (1: uniform routing)",
    ]


def test_held_out_h200_moe_cells_pair_with_the_h100_rows() -> None:
    """published_inference_moe_h200.csv: the overview's H200 cells of the MoE tables at the H100 rows' ISL/OSL
    pairs (held out of the table), run as the H100 rows are."""
    h200 = S.read_rows(S.DATA.parent / "published_inference_moe_h200.csv")
    h100 = {(r.model, r.isl, r.osl): r for r in S.read_rows() if r.attention_dp > 1 and r.rate is None}
    assert len(h200) == len(h100) == 22
    for r in h200:
        twin = h100[(r.model, r.isl, r.osl)]
        assert r.system == "hgx-h200" and r.problem is None and r.published > twin.published
        assert (r.attention_dp, r.tp, r.precision) == (twin.attention_dp, twin.tp, twin.precision)
