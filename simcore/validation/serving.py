"""Serving against what engines published (``published_inference.csv``): ``simcore serve`` replays each row.

``python -m simcore.validation serving`` runs every row of the table (TensorRT-LLM's performance-overview
offline max-throughput rows and the others there) through the request-level serving simulation
(:func:`simcore.serving.simulate`) with the engine's settings as the row and the engine's documented
defaults give them, and reports each row's error and, per engine x GPU x precision, the median and 90th
percentile of the absolute errors. A row simcore cannot price says why (no preset of its model, a layout
the simulation does not build) and counts as not run. Nothing is fitted to a row: the settings below are
the engines' defaults or the row's own, written once here (docs/serving.md, "Validation against
published engines").

How a row is run
----------------
* ``offline max-throughput`` (``trtllm-bench throughput``): every request of the overview's dataset queued at
  t = 0 (:data:`NUM_REQUESTS` of the row's ISL and OSL), throughput = output tokens over first arrival to
  last completion (trtllm-bench's ``total_output_throughput``). TensorRT-LLM's defaults (PyTorch backend,
  ``docs/stacks``: ``/work/shared/reference/stacks.md`` section 7): the ``GUARANTEED_NO_EVICT`` capacity
  scheduler (``reserve_output_kv``: a request is admitted with KV blocks for its whole output), chunked
  context off, ``max_batch_size`` and ``max_num_tokens`` as trtllm-bench picks them when not given
  (:func:`bench_limits`, dense and MoE rows alike; with attention DP each rank takes the whole group's limits;
  the LLM API's 2048 and 8192 only where the row names no model preset or system), ``kv_cache_free_gpu_mem_fraction``
  0.95 (the row's note, :data:`KV_FRACTION`),
  CUDA graphs with padding to the overview's ``batch_sizes`` (:func:`graph_sizes`, per attention-DP rank; a decode
  batch runs the next captured graph, whose dummy rows add GEMM rows but no KV; captured before the KV cache is sized,
  so the graph pool comes off its budget: the trtllm engine profile's ``graphs_before_kv``), its own paged decode
  kernels (``paged_kv``), FP8 (ModelOpt) weights with an FP8 KV cache,
  NVFP4 weights with an FP8 KV cache.
* a fixed concurrency (a batch of ``batch_or_concurrency`` requests kept full): ten times that many requests
  queued at t = 0, at most that many running; tokens/s as output tokens over the run. Where the row states
  no precision or engine, bf16 weights and cache and the same engine settings are assumed, and said.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import SimcoreError
from simcore.specs.registry import default_registry
from simcore.specs.scenario import ModelSpec
from simcore.specs.serving import ServingSpec, engine_ep_exchange, engine_profiles
from simcore.workload.model import layer_shape, param_counts

DATA = Path(__file__).resolve().parent / "data" / "published_inference.csv"

OFFLINE_REQUESTS = 1000
"""Requests of an offline max-throughput row whose ISL/OSL pair :data:`NUM_REQUESTS` does not list."""

NUM_REQUESTS = {
    (128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
    (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000,
}  # fmt: skip
"""``$num_requests`` of TensorRT-LLM's performance overview by (ISL, OSL) (its "Preparing a Dataset" table,
NVIDIA/TensorRT-LLM@00f37686 docs/source/performance/perf-overview.md): the dataset each row ran. It matters:
with uniform requests queued at once the batch runs in waves of the KV cache's capacity, and the last, partial
wave decodes a whole output at a small batch, a share of the run that shrinks with the request count."""

MAX_BATCH = 2048
"""``max_batch_size`` of TensorRT-LLM's LLM API (stacks.md section 7; UNCERTAIN there, not a fit): the limit of a
fixed-concurrency row (an offline row takes :func:`bench_limits`)."""
MAX_TOKENS = 8192
"""``max_num_tokens`` of TensorRT-LLM's LLM API (stacks.md section 7)."""
KV_FRACTION = 0.95
"""``kv_cache_free_gpu_mem_fraction`` the performance-overview rows state (the row's note)."""

OVERVIEW_SOURCE = "NVIDIA/TensorRT-LLM@00f37686"
"""The ``source`` of the performance-overview rows (``trtllm-bench throughput`` with the overview's options)."""

OVERVIEW_GRAPH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
"""``cuda_graph_config.batch_sizes`` of the ``llm_options.yml`` the performance overview runs with (``enable_padding:
true``; NVIDIA/TensorRT-LLM@00f37686 docs/source/performance/perf-overview.md, "Running the Benchmark")."""


TRTLLM_MEMORY = ("kv_block_tokens", "graphs_before_kv", "graph_logit_bytes")
"""The trtllm engine profile's KV-cache memory fields a performance-overview row takes (its ``tokens_per_block``,
and the CUDA graphs captured before the KV cache is sized: docs/serving.md, "KV cache")."""


def graph_sizes(max_batch: int, max_tokens: int) -> list[int]:
    """The decode batches TensorRT-LLM captures from :data:`OVERVIEW_GRAPH_SIZES` with padding on
    (``_torch/pyexecutor/model_engine.py`` ``_filter_cuda_graph_batch_sizes``): the sizes up to ``min(max_batch_size,
    max_num_tokens)``, then that bound itself when a listed size exceeds it (a decode batch between the last size
    and the bound is padded to the bound)."""
    top = min(max_batch, max_tokens)
    sizes = [b for b in OVERVIEW_GRAPH_SIZES if b <= top]
    if top > sizes[-1] and top < OVERVIEW_GRAPH_SIZES[-1]:
        sizes.append(top)
    return sizes


PRESETS = {
    "llama 3.1 8b": "llama3.1-8b",
    "llama 3.1 70b": "llama3.1-70b",
    "llama 3.3 70b": "llama3.3-70b",
    "llama 3.1 405b": "llama3.1-405b",
    "llama 3 8b": "llama3-8b",
    "llama 3 70b": "llama3-70b",
    "llama 3 405b": "llama3-405b",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "deepseek-v3": "deepseek-v3",
    "llama 4 scout": "llama4-scout",
    "llama 4 maverick": "llama4-maverick",
    "mistral 7b": "mistral-7b",
}
"""Model names as the table spells them (lower case) -> simcore presets."""

SYSTEMS = (("gb200", "gb200-nvl72"), ("b200", "dgx-b200"), ("h200", "hgx-h200"), ("h100", "hgx-h100"))
"""GPU names (a fragment, lower case, most specific first) -> the system the row ran on."""

PRECISIONS = {"fp8": "fp8", "fp4": "fp4", "nvfp4": "fp4", "bf16": "bf16", "fp16": "fp16"}

AZURE = "Azure/AI-benchmarking-guide"
"""The source of the rows that state neither engine nor precision. The guide's ``Benchmarks/LLMBenchmark.py``
builds TensorRT-LLM engines (``trtllm-build``) and times them with TensorRT-LLM's
``benchmarks/python/benchmark.py -m dec`` (a static batch of ``batch_size`` requests); its ``config.json``
(stored version 091b83d) quantizes Mistral 7B, Llama 3 8B and Llama 3 70B with
``quantize.py --qformat fp8 --kv_cache_dtype fp8`` and converts Meta's ``Meta-Llama-3.1-405B-FP8``
checkpoint (FP8 weights, no ``--kv_cache_dtype``: the KV cache in the activations' 16 bits)."""
AZURE_PRECISION = {"llama 3 405b": ("fp8", "bf16")}
"""(weights, KV cache) of an Azure row by model; every other model ``("fp8", "fp8")`` (:data:`AZURE`)."""

def _model(preset: str) -> ModelSpec:
    return ModelSpec(**{k: v for k, v in default_registry().model_preset(preset).items() if k not in ("name", "aliases")})


MOE_LAYOUTS = ("attention-dp", "tp", "tp-ep")
"""How an MoE row's instance is laid out (``python -m simcore.validation serving --layout``; docs/serving.md,
"third round"): ``attention-dp`` (the validation's: attention DP over the row's GPUs, experts EP over all of them,
what the overview's MoE yaml asks for), ``tp`` (TP attention, experts TP-sharded: TensorRT-LLM's ``Mapping``
without ``--ep``) or ``tp-ep`` (TP attention, each expert whole on one TP rank: ``--ep`` = ``--tp``, ``moe_tp_size``
1). The last two are what-ifs; the row then takes trtllm-bench's limits for ``--tp``, as a dense row."""


SGLANG_KV = "bf16"
"""SGLang's ``--kv-cache-dtype auto``: the KV cache in the model's activation dtype (bf16 for DeepSeek-V3's FP8
checkpoint); stacks.md section 6."""


@dataclass
class ServingRow:
    """One published row and what simcore made of it."""

    index: int
    source: str
    engine: str
    gpu: str
    precision: str
    model: str
    gpus: int
    tp: int
    isl: int
    osl: int
    concurrency: int | None
    """Requests kept running (a fixed-concurrency row); ``None``: offline, every request queued."""
    published: float
    unit: str
    preset: str | None = None
    system: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """The engine settings the row ran with (from the row or the engine's defaults), as simcore ran it."""
    assumed: list[str] = field(default_factory=list)
    """What the row does not state and simcore assumed."""
    metric: str = ""
    rate: str | None = None
    """``prefill`` or ``decode``: a per-node rate of a disaggregated wide-EP pool (priced from its step model);
    ``None``: a serving run."""
    attention_dp: int = 1
    """Attention data-parallel ranks of the instance (experts sharded over all its GPUs)."""
    ep: int = 1
    """Without attention DP: ``parallel.ep``, 1 (experts TP-sharded) or ``tp`` (each expert whole on a TP rank)."""
    per_device: int | None = None
    """A rate row's tokens a device runs in a prefill step, or sequences it decodes."""
    two_batch_overlap: bool = False
    """The engine overlaps two micro-batches' expert all-to-alls with computation (SGLang's TBO)."""
    kv_cache_dtype: str | None = None
    """The KV cache's dtype where the engine's default is not simcore's (``None``: ``memory.kv_cache_dtype``)."""
    predicted: float | None = None
    error: float | None = None
    """predicted / published - 1."""
    problem: str | None = None
    """Why the row did not run (``None``: it ran)."""


def _int(s: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", s or "")
    return int(m.group(1)) if m else None


def _engine(framework: str) -> str:
    for name in ("TensorRT-LLM", "SGLang", "vLLM"):
        if framework.startswith(name):
            return name
    return "not stated"


def read_rows(path: str | Path | None = None, layout: str = "attention-dp") -> list[ServingRow]:
    """The table's rows as :class:`ServingRow` (the model, system and precision resolved where simcore
    has them; ``problem`` set where a row cannot be run); an MoE serving row laid out as ``layout``
    (:data:`MOE_LAYOUTS`)."""
    if layout not in MOE_LAYOUTS:
        raise SimcoreError(f"{layout!r} is not one of {', '.join(MOE_LAYOUTS)}", field="layout")
    p = Path(path) if path is not None else DATA
    try:
        with p.open(encoding="utf-8", newline="") as f:
            recs = list(csv.DictReader(f))
    except OSError as e:
        raise SimcoreError(f"cannot read the published inference table: {e}", file=str(p)) from None
    return [_row(i, r, layout) for i, r in enumerate(recs)]


def _row(i: int, r: dict[str, str], layout: str = "attention-dp") -> ServingRow:
    engine = _engine(r.get("framework", ""))
    prec = r.get("precision", "").strip().lower()
    tp = _int(r.get("tp")) or 1
    conc = r.get("batch_or_concurrency", "")
    row = ServingRow(
        index=i,
        source=r["source"].split(" ")[0],
        engine=engine,
        gpu=r["gpu"],
        precision=prec.split(" ")[0] if prec else "",
        model=r["model"],
        gpus=_int(r.get("num_gpus")) or tp,
        tp=tp,
        isl=_int(r.get("input_len")) or 0,
        osl=_int(r.get("output_len")) or 0,
        concurrency=None if conc.startswith("offline") else _int(conc),
        published=float(r["value"]),
        unit=r.get("unit", ""),
    )
    row.preset = PRESETS.get(row.model.lower())
    row.system = next((s for frag, s in SYSTEMS if frag in row.gpu.lower()), None)
    row.metric = r.get("metric", "")
    row.kv_cache_dtype = None
    if row.metric not in ("total_output_throughput", "throughput"):
        _rate_row(row, r)
    if row.preset is None:
        row.problem = f"no simcore preset of {row.model}"
    elif row.system is None:
        row.problem = f"no simcore system for {row.gpu}"
    elif row.problem is None and row.rate is None and (not row.isl or not row.osl):
        row.problem = "input or output length not stated"
    if row.source.startswith(AZURE) and engine == "not stated":
        row.engine = "TensorRT-LLM"
        w, kv = AZURE_PRECISION.get(row.model.lower(), ("fp8", "fp8"))
        row.precision, row.kv_cache_dtype = w, kv
        row.assumed.append(
            f"engine and precision not stated in the results: TensorRT-LLM, {w} weights, {kv} KV cache, from the "
            "guide's LLMBenchmark.py and config.json"
        )
    elif row.precision not in PRECISIONS:
        row.assumed.append(f"precision not stated: bf16 weights and KV cache assumed (table: {prec or '-'})")
        row.precision = "bf16"
    else:
        row.precision = PRECISIONS[row.precision]
    if row.engine == "SGLang":
        row.kv_cache_dtype = SGLANG_KV
    if not r.get("num_gpus"):
        row.assumed.append(f"GPU count not stated: tp {tp} assumed")
    moe = row.preset is not None and default_registry().model_preset(row.preset).get("moe")
    if moe and row.rate is None and layout != "attention-dp":
        row.ep = row.tp if layout == "tp-ep" else 1
        experts = "each expert whole on one TP rank (EP = tp)" if row.ep > 1 else "experts TP-sharded"
        row.assumed.append(
            f"MoE layout {layout} (what-if, not the validation's): TP{row.tp} attention, {experts}; trtllm-bench's "
            "max_batch_size and max_num_tokens for --tp, the overview's request count"
        )
    elif moe and row.rate is None:
        # the performance overview's MoE rows: "attention DP enabled in MoE yaml", --ep $ep_size; the yaml nests
        # the key inside cuda_graph_config, which TensorRT-LLM refuses; the overview's next version states the
        # layout (docs/serving.md, "Which layout ran")
        row.attention_dp, row.tp = row.tp, 1
        row.assumed.append(
            f"MoE: attention DP over the {row.attention_dp} GPUs with experts sharded EP{row.attention_dp} (the v1.0 "
            "MoE yaml's enable_attention_dp sits inside cuda_graph_config, which TensorRT-LLM v1.0 refuses as an "
            "extra field; the overview's next version, NVIDIA/TensorRT-LLM@03e27c7d docs/source/developer-guide/"
            "perf-overview.md, sets it at the top level for Qwen3 MoE and Llama 4 Maverick and labels those cells "
            "DEP8/DEP4, attention DP with EP over every GPU, and its Qwen3 H100 DEP8 and Maverick H200 DEP8 1000/1000 "
            "cells are within 5 % of these rows'); trtllm-bench's max_batch_size and max_num_tokens (its heuristic "
            "for the command's TP size) per DP rank, CUDA graphs padded per rank, the overview's request count"
        )
    return row


def _rate_row(row: ServingRow, r: dict[str, str]) -> None:
    """A per-node prefill or decode rate of disaggregated wide-EP serving (the LMSYS large-scale EP rows):
    the pool's GPUs (``num_gpus``, or the EP size), its attention-DP ranks (one per GPU, experts EP-wide),
    the tokens a device runs in a step or the sequences it decodes, and the prompt or KV length."""
    m = row.metric
    pool = "decode" if m.startswith("decode") else "prefill"
    # "prefill EP32 / decode EP72" (both pools) or the pool's EP size alone
    parts = [p for p in (r.get("ep") or "").split("/") if pool in p or "EP" not in p]
    ep = _int(parts[0].replace(f"{pool} EP", "")) if parts else None
    row.gpus = _int(r.get("num_gpus")) or ep or 1
    row.tp = 1
    # the blog's system: DeepEP all-to-alls (FP8 dispatch under FP8 weights), two-batch overlap, EPLB
    row.two_batch_overlap = True
    per_device = _int(r.get("batch_or_concurrency"))
    length = _int((r.get("input_len") or "").replace("KV", ""))
    if "simulated_MTP" in m:
        row.problem = "the source's own simulation of MTP decoding (acceptance not stated), not a measurement"
        return
    if m.startswith("decode"):
        row.rate = "decode"
        row.attention_dp = row.gpus
        row.per_device = per_device
        row.isl = length or 0
        if row.per_device is None or not row.isl:
            row.problem = "decode batch per device or KV length not stated"
    elif m.startswith(("prefill", "input_throughput")):
        row.rate = "prefill"
        if m.startswith("input_throughput"):
            # the headline: 96 GPUs are both pools; its prefill pool is the EP column's
            row.gpus = ep or row.gpus
            per_device = per_device or 16384
            row.assumed.append(
                f"headline input rate: the prefill pool of EP{row.gpus} ({row.gpus} GPUs; the system column says 3 "
                "prefill nodes) at 16,384 tokens a device, as the prefill table"
            )
        row.attention_dp = row.gpus
        row.per_device = per_device
        row.isl = length or 0
        if "perfect_eplb" in m:
            row.assumed.append("perfect EPLB: simcore's experts are balanced in every row (MoE imbalance 1)")
    else:
        row.problem = f"{m}: not a metric the study knows"


BENCH_KV_FRACTION = 0.95
"""``kv_cache_gpu_mem_fraction`` default of trtllm-bench's ``calc_engine_setting`` (``bench/build/tuning.py``): the
share of memory its limit heuristic assumes for the KV cache. Kept apart from :data:`KV_FRACTION`, the runtime's
``kv_cache_free_gpu_mem_fraction`` the rows state: two settings of two code paths (the tuning's is a function
default, the runtime's the command's option) that happen to be equal here; a row run at another runtime fraction
would change only the latter."""


def bench_limits(row: ServingRow, dp: int = 1) -> tuple[int, int]:
    """``max_batch_size`` and ``max_num_tokens`` that ``trtllm-bench throughput`` picks when neither is given (the
    performance overview gives neither): NVIDIA/TensorRT-LLM ``tensorrt_llm/bench/build/tuning.py``
    ``calc_engine_setting`` + ``finetune_setting``, called from ``bench/benchmark/utils/general.py``
    ``get_settings`` with the dataset's ISL and OSL (docs/serving.md, "Validation against published engines").

    Requests the group's KV cache holds: ``r = f (G M - P b) / (2 L max(tp, kv_heads) d b_kv (ISL + OSL))`` with
    ``M`` the device memory, ``G`` GPUs, ``P`` the checkpoint's stored element count at ``b`` bytes each (FP8: 1;
    NVFP4: 0.5, over safetensors elements that pack two 4-bit weights into one byte, beside an FP8 scale per 16
    weights and the bf16 embedding and head), ``b_kv`` 1 (FP8 cache), ``f`` 0.95. Then ``max_batch_size`` is
    ``min(r, 4096)`` rounded up (to 32s below 256 with 64 at least, to 128s below 1,024, else to 256s) and
    ``max_num_tokens`` is ``min(r (1 + ISL / OSL), 32768)`` rounded up (to 256s below 4,096 with 2,048 at least,
    to 512s below 8,192, else to 1,024s), raised to ``ISL + max_batch_size`` (chunked prefill off). With attention
    DP (``dp`` ranks) the command's ``--tp`` is every GPU of the row (``G = dp x tp``) and each rank takes these
    limits."""
    from simcore.specs.scenario import ModelSpec

    reg = default_registry()
    m = ModelSpec.model_validate(reg.model_preset(row.preset or ""))
    pc = param_counts(m)
    linear = (pc.attention_per_layer * m.layers + pc.dense_mlp_per_layer * pc.dense_layers
              + (pc.moe_layer_experts + pc.moe_layer_shared) * pc.moe_layers)  # fmt: skip
    gpus = row.tp * dp
    rest = pc.embedding + pc.lm_head + pc.norms_per_layer * m.layers
    if row.precision == "fp4":
        stored, elem = linear / 2 + linear / 16 + rest, 0.5
    else:
        stored, elem = linear + rest, float(1 if row.precision == "fp8" else 2)
    mem = reg.device(reg.system(row.system or "").device).memory.capacity * gpus
    kv = 2 * m.layers * max(gpus, m.kv_heads or m.heads) * layer_shape(m).head_dim * 1.0 * (row.isl + row.osl)
    r = BENCH_KV_FRACTION * (mem - stored * elem) / kv
    raw_bs = min(r, 4096)
    raw_tok = min(raw_bs * (1 + row.isl / row.osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    elif raw_tok < 8192:
        tok = 512 * math.ceil(raw_tok / 512)
    else:
        tok = 1024 * math.ceil(raw_tok / 1024)
    return bs, max(tok, row.isl + bs)


def settings(row: ServingRow) -> dict[str, Any]:
    """The scenario and serving fields a row runs with (module docstring: the engine's defaults)."""
    kv = row.kv_cache_dtype or ("fp8" if row.precision in ("fp8", "fp4") else row.precision)
    dp = row.attention_dp
    s: dict[str, Any] = {"precision": row.precision, "kv_cache_dtype": kv, "tp": row.tp, "framework": "cuda_graphs"}
    if row.ep > 1:
        s["ep"] = row.ep
    if dp > 1:
        s.update(attention_dp=dp, ep=dp * row.tp)
        if row.engine == "TensorRT-LLM" and row.system:
            # TensorRT-LLM's MoE token exchange on this system (its engine profile: all-gather + reduce-scatter
            # without multi-node NVLink)
            mnnvl = default_registry().system(row.system).multi_node_nvlink
            s["ep_exchange"] = engine_ep_exchange("trtllm", mnnvl)
    if row.two_batch_overlap:
        s["two_batch_overlap"] = True
    if row.rate is not None:
        what = "tokens a device a prefill step" if row.rate == "prefill" else "sequences a device decodes"
        return {**s, row.rate: f"{row.per_device} {what} at {row.isl} tokens", "decode_attention": "paged (engine kernels)"}
    if row.concurrency is None:
        n = NUM_REQUESTS.get((row.isl, row.osl), OFFLINE_REQUESTS * dp)
        batch, tokens = bench_limits(row, dp) if row.preset and row.system else (MAX_BATCH, max(MAX_TOKENS, row.isl))
    else:
        n, batch, tokens = 10 * row.concurrency * dp, row.concurrency, max(MAX_TOKENS, row.isl)
    if row.concurrency is None and row.source == OVERVIEW_SOURCE:
        # the overview's llm_options.yml pads decode batches to its CUDA graphs, its MoE rows too; with attention DP
        # every rank captures the sizes up to its own limits and the instance's mean-field batch is dp ranks' worth
        s["cuda_graph_sizes"] = [dp * b for b in graph_sizes(batch, tokens)]
        # the PyTorch backend captures them before it sizes the KV cache, on a cache of its own block size (the
        # engine profile's memory fields)
        prof = engine_profiles()["trtllm"]["defaults"]
        s.update({k: prof[k] for k in TRTLLM_MEMORY})
    return {
        **s,
        "requests": n,
        "arrival": "all queued at t = 0",
        "max_batch": batch * dp,
        "max_batch_tokens": tokens * dp,
        "kv_cache_free_gpu_mem_fraction": KV_FRACTION,
        "reserve_output_kv": True,
        "decode_attention": "paged (engine kernels)",
    }


def run_row(row: ServingRow, imbalance: float | None = None) -> ServingRow:
    """Simulate one row (in place): its predicted output tokens/s (input tokens/s per node of a prefill rate row)
    and error, or the problem. ``imbalance``: a what-if ``model.moe.imbalance`` (the busiest rank's share of the
    routed tokens over the uniform one) on every MoE layer of an MoE model; ``None``: the model's (1, uniform
    routing)."""
    from simcore.serving import simulate
    from simcore.specs.resolve import scenario_from_dict

    if row.problem is not None:
        return row
    s = settings(row)
    row.settings = s
    dp = row.attention_dp
    model: dict[str, Any] = {"preset": row.preset}
    if imbalance is not None and default_registry().model_preset(row.preset or "").get("moe"):
        model["moe"] = {"imbalance": imbalance}
    try:
        sc = scenario_from_dict(
            {
                "name": f"published-{row.index}",
                "kind": "serving",
                "cluster": {"system": row.system, "gpus": row.gpus},
                "model": model,
                "parallel": {"tp": row.tp, "ep": row.ep},
                "inference": {"precision": s["precision"], "kv_cache_dtype": s["kv_cache_dtype"]},
                "runtime": {"framework": s["framework"]},
                "serving": {"rate": 1.0},
            }
        )
        if row.rate is not None:
            row.predicted = _pool_rate(sc, row)
        else:
            spec = ServingSpec(
                # arrivals a nanosecond apart: every request queued at the start
                rate=1e9,
                requests=s["requests"],
                prompt=row.isl,
                output=row.osl,
                replicas=1,
                max_batch=s["max_batch"],
                max_batch_tokens=s["max_batch_tokens"],
                reserve_output_kv=s["reserve_output_kv"],
                attention_dp=dp,
                ep_exchange=s.get("ep_exchange"),
                cuda_graph_sizes=s.get("cuda_graph_sizes"),
                # TensorRT-LLM's kv_cache_free_gpu_mem_fraction: of the memory left once the model is loaded
                memory_utilization=KV_FRACTION,
                memory_fraction_of="free",
                **{k: s[k] for k in TRTLLM_MEMORY if k in s},
            )
            row.predicted = simulate(sc, spec).result.output_tokens_per_s
    except SimcoreError as e:
        row.problem = str(e)
        return row
    row.error = row.predicted / row.published - 1.0
    return row


GPUS_PER_NODE = 8
"""GPUs of an HGX H100 node (the LMSYS rows' rates are per node)."""


def _pool_rate(sc: Any, row: ServingRow) -> float:
    """Tokens/s per node of a wide-EP pool in steady state, from the step model ``simcore serve`` builds for it
    (:func:`simcore.serving.sim.build_step_model` with ``attention_dp`` = the pool's GPUs): a prefill pool's step
    runs ``per_device`` prompt tokens on every GPU (prompts of ``isl`` tokens), a decode pool's step decodes
    ``per_device`` sequences on every GPU at a context of ``isl`` tokens."""
    from simcore.serving import ServingSpec
    from simcore.serving.sim import build_step_model
    from simcore.specs.resolve import resolve_cluster

    cluster = resolve_cluster(sc.cluster, default_registry())
    g, n = row.gpus, int(row.per_device or 0)
    if row.rate == "prefill":
        tokens = n * g
        eng = ServingSpec(rate=1.0, max_batch=g, max_batch_tokens=tokens, two_batch_overlap=row.two_batch_overlap)
        sm = build_step_model(sc, cluster, 1, g, row.isl, tokens, eng, g)
        step = sm.step_time(0, 0.0, tokens, tokens / row.isl * sm.chunk_attention(0.0, row.isl))
        return tokens / step / (g / GPUS_PER_NODE)
    b = n * g
    eng = ServingSpec(rate=1.0, max_batch=b, max_batch_tokens=b, two_batch_overlap=row.two_batch_overlap)
    sm = build_step_model(sc, cluster, 1, b, row.isl + 1, b, eng, g)
    return b / sm.decode(b, row.isl) / (g / GPUS_PER_NODE)


def _stats(errs: list[float]) -> dict[str, Any]:
    a = np.abs(np.asarray(errs, dtype=float))
    return {
        "rows": len(errs),
        "median_abs_error": float(np.median(a)) if a.size else None,
        "p90_abs_error": float(np.percentile(a, 90)) if a.size else None,
        "median_signed_error": float(statistics.median(errs)) if errs else None,
    }


def report(
    path: str | Path | None = None,
    model: str | None = None,
    layout: str = "attention-dp",
    imbalance: float | None = None,
) -> dict[str, Any]:
    """Every row run (``model``: only rows whose model name contains it; ``layout`` and ``imbalance``: the MoE
    what-ifs of :func:`read_rows` and :func:`run_row`); the rows, the summary per engine x GPU x precision and
    over every row that ran."""
    if imbalance is not None and not imbalance >= 1.0:
        raise SimcoreError(f"{imbalance} is below 1 (1: uniform routing)", field="imbalance")
    rows = [r for r in read_rows(path, layout) if model is None or model.lower() in r.model.lower()]
    for r in rows:
        run_row(r, imbalance)
    ran = [r for r in rows if r.error is not None]
    groups: dict[str, list[float]] = {}
    for r in ran:
        groups.setdefault(f"{r.engine} | {r.gpu} | {r.precision}", []).append(r.error or 0.0)
    return {
        "rows": [asdict(r) for r in rows],
        "groups": {k: _stats(v) for k, v in sorted(groups.items())},
        "overall": {**_stats([r.error or 0.0 for r in ran]), "published_rows": len(rows)},
    }


def _pct(x: float | None, signed: bool = True) -> str:
    return "-" if x is None else (f"{100 * x:+.1f} %" if signed else f"{100 * x:.1f} %")


def format_report(doc: dict[str, Any]) -> str:
    """The rows (published, simulated, error, or why not run), the per-group and overall summary, and the
    engine settings each kind of row ran with."""
    lines = [f"{'#':>3s} {'model':18s} {'gpu':14s} {'prec':4s} {'tp':>2s} {'ISL':>6s} {'OSL':>5s} "
             f"{'published':>10s} {'simulated':>10s} {'error':>8s}"]  # fmt: skip
    for r in doc["rows"]:
        head = (
            f"{r['index']:3d} {r['model'][:18]:18s} {r['gpu'][:14]:14s} {r['precision']:4s} {r['tp']:2d} "
            f"{r['isl']:6d} {r['osl']:5d} {r['published']:10,.0f}"
        )
        if r["problem"] is not None:
            lines.append(f"{head}   not run: {r['problem']}")
        else:
            lines.append(f"{head} {r['predicted']:10,.0f} {_pct(r['error']):>8s}")
    lines.append("")
    lines.append(f"{'engine | GPU | precision':52s} {'rows':>4s} {'median |err|':>12s} {'p90 |err|':>10s} {'median err':>10s}")
    for k, s in list(doc["groups"].items()) + [("all rows that ran", doc["overall"])]:
        lines.append(
            f"{k[:52]:52s} {s['rows']:4d} {_pct(s['median_abs_error'], False):>12s} "
            f"{_pct(s['p90_abs_error'], False):>10s} "
            f"{_pct(s['median_signed_error']):>10s}"
        )
    o = doc["overall"]
    lines.append(f"{o['rows']} of {o['published_rows']} rows ran")
    shown: set[str] = set()
    for r in doc["rows"]:
        if r["settings"]:
            text = ", ".join(f"{k} {v}" for k, v in r["settings"].items() if k not in ("tp", "requests"))
            text = f"{r['engine']}: {text}" + "".join(f"; {a}" for a in r["assumed"])
            if text not in shown:
                shown.add(text)
                lines.append("settings: " + text)
    return "\n".join(lines)
