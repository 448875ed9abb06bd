"""Validation against published training throughput (Megatron-LM papers and README tables).

``python -m simcore.validation published [--plot out.png] [--json] [--engine analytic|des]``

Every row of ``data/published_training.csv`` (a copy of the project's reference table, see
``data/README.md``) becomes a training scenario: the model's dimensions, the GPU count on the system
of the row's GPU type (A100 -> ``hgx-a100``, H100 -> ``hgx-h100``, ...), the row's tp/pp/dp/vp,
micro/global batch and recompute. ``simcore.predict`` gives a step time; the row's metric is then
computed from that step time *with the paper's own FLOP formula* (not simcore's MFU), so that the
predicted and published numbers count the same FLOPs:

* Narayanan et al. 2021 (Megatron-LM, Tables 1-2): ``96 B s l h^2 (1 + s/6h + V/16lh)`` per step
  (model FLOPs with full recompute counted), per GPU and per second;
* Korthikanti et al. 2022: model FLOPs ``72 B s l h^2 (1 + s/6h + V/16lh)`` for MFU, hardware FLOPs
  ``72 B s l h^2 (1 + s/3h + V/16lh)`` (selective) or the 96 form (full) for HFU; iteration time as is;
* Megatron-Core README (H100): Megatron-LM's ``num_floating_point_operations``,
  ``12 B s l h^2 ((1 + g/a + s/h) + f/h + V/2lh)``.

The error of a row is the relative error of per-GPU throughput, ``predicted/published - 1``
(for iteration-time rows ``published_time/predicted_time - 1``): positive means simcore is
optimistic. Where a row does not give a field, the value used and why is listed per row.

Nothing here is fitted: the tables only check the models.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcore.errors import SimcoreError

DATA_DIR = Path(__file__).resolve().parent / "data"
PUBLISHED_CSV = DATA_DIR / "published_training.csv"
TARGET_MEDIAN = 0.10
"""Issue 5 target: median |error| of per-GPU throughput."""
TARGET_WORST = 0.25
"""Issue 5 target: no row beyond this |error|."""

_SYSTEM_BY_GPU = (
    # most specific first
    ("GB300", "gb300-nvl72"),
    ("GB200", "gb200-nvl72"),
    ("B300", "dgx-b300"),
    ("B200", "dgx-b200"),
    ("H800", "hgx-h800"),
    ("H200", "hgx-h200"),
    ("H100", "hgx-h100"),
    ("A100", "hgx-a100"),
    ("MI300X", "mi300x-platform"),
)

_PRIMARY_ORDER = (
    "achieved_tflops_per_gpu",
    "iteration_time",
    "mfu",
    "hfu",
    "pct_of_peak",
    "aggregate_pflops",
    "tokens_per_s_per_gpu",
    "tokens_per_s",
)


@dataclass
class PublishedRow:
    """One configuration of a published table, ready to predict."""

    index: int
    """Row number in the CSV (0-based, header excluded)."""
    source: str
    """Short label of the table (``Narayanan21 T1``, ``Korthikanti22 T5``, ``MCore H100 weak`` ...)."""
    family: str
    """FLOP-counting convention: ``narayanan``, ``korthikanti`` or ``mcore``."""
    model: str
    gpus: int
    system: str
    metric: str
    unit: str
    published: float
    scenario: dict[str, Any]
    dims: dict[str, float]
    """B (global batch), s, l, h, V, ffn, heads, kv_heads, glu: what the FLOP formula needs."""
    assumptions: list[str] = field(default_factory=list)
    problem: str | None = None
    """Why the row cannot be predicted (a field missing or not understood); ``None`` if it can."""
    release: str = ""
    """The software release the row's number comes from (:func:`release_of`)."""


@dataclass
class RowResult:
    """Prediction for one published row."""

    index: int
    source: str
    model: str
    gpus: int
    layout: str
    metric: str
    unit: str
    published: float
    predicted: float
    error: float
    """Relative error of per-GPU throughput (predicted/published - 1; >0: simcore optimistic)."""
    primary: bool
    """The row counted in the summary (one metric per configuration)."""
    step_time_s: float
    published_tflops_per_gpu: float
    """Published throughput in the row's own FLOP convention, TFLOP/s per GPU."""
    predicted_tflops_per_gpu: float
    fractions: dict[str, float]
    """Share of the predicted step: compute, recompute, tp/cp/ep comm, bubble, dp comm, optimizer."""
    fits_in_memory: bool
    memory_gib: float
    assumptions: list[str]
    problem: str | None = None
    """Why the row was not predicted (then ``predicted``/``error`` are NaN and it is left out of the
    summary); ``None`` when it was."""
    release: str = ""
    system: str = ""
    precision: str = ""
    moe: bool = False
    job: str = ""
    """The job apart from its layout (table, model, GPUs, global batch, sequence, precision): rows of
    one job with several layouts give the rank fidelity."""


# ---------------------------------------------------------------------------------------- parsing


def _num(s: str | None) -> float | None:
    if s is None:
        return None
    s = s.strip()
    if not s:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _int(s: str | None) -> int | None:
    v = _num(s)
    return None if v is None else int(round(v))


def _short_source(src: str) -> tuple[str, str]:
    """(label, FLOP family) of a source string."""
    if src.startswith("Korthikanti"):
        return "Korthikanti22 T5", "korthikanti"
    if "Table 2" in src and src.startswith("Narayanan"):
        return "Narayanan21 T2", "narayanan"
    if src.startswith("Narayanan"):
        return "Narayanan21 T1", "narayanan"
    if "strong scaling" in src:
        return "MCore H100 strong", "mcore"
    if "Megatron-LM" in src:
        return "MCore H100 weak", "mcore"
    if src.startswith("Megatron-Bridge"):
        # "Megatron-Bridge 25.11 DGX-GB200 (...)": one label per release and system
        parts = src.split()
        return f"MBridge {parts[1]} {parts[2].removeprefix('DGX-')}", "mcore"
    return src[:24], "mcore"


def precision_recipe(column: str) -> str:
    """The ``training.precision`` recipe a table's precision column names: ``FP8-CS`` (current
    scaling), ``FP8-DS`` (delayed), ``FP8-MX`` / ``MXFP8``, ``FP8-SS`` / blockwise / subchannel
    (DeepSeek-V3's 128-blocks), ``NVFP4``, a bare ``FP8`` (Transformer Engine's default: delayed),
    else bf16 (fp16 where the column says only fp16)."""
    c = column.lower()
    if "nvfp4" in c or "fp4" in c:
        return "nvfp4"
    if "fp8" in c:
        if "mx" in c:
            return "mxfp8"
        if "cs" in c or "current" in c:
            return "fp8_current"
        if any(k in c for k in ("block", "ss", "subchannel", "128")):
            return "fp8_blockwise"
        return "fp8_delayed" if "ds" in c or "delayed" in c else "fp8"
    if "fp16" in c and "bf16" not in c:
        return "fp16"
    return "bf16"


def release_of(src: str) -> str:
    """The software release a table's numbers come from (the same configuration moves by up to 40 %
    between releases)."""
    if src.startswith("Megatron-Bridge") or src.startswith("NeMo"):
        return " ".join(src.split()[:2])
    if src.startswith("Narayanan"):
        return "Megatron-LM 2021 (paper)"
    if src.startswith("Korthikanti"):
        return "Megatron-LM 2022 (paper)"
    m = re.search(r"r\d+\.\d+\.\d+", src)
    return (
        f"Megatron-Core {m.group(0)}" if m else ("Megatron-Core r0.8.0" if "Megatron-LM" in src else src[:24])
    )


def _system_for(gpu: str) -> str:
    g = gpu.upper()
    for key, system in _SYSTEM_BY_GPU:
        if key in g:
            return system
    raise ValueError(f"no system for GPU type {gpu!r}")


def _smallest_divisor_above_one(n: int) -> int:
    for d in range(2, n + 1):
        if n % d == 0:
            return d
    return 1


def read_rows(path: str | Path | None = None) -> list[dict[str, str]]:
    """The published table as a list of CSV records (strings)."""
    p = Path(path) if path is not None else PUBLISHED_CSV
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def normalize_metric(metric: str) -> str | None:
    """The metric of a row in this module's names: tables spell them many ways (``Tokens / sec / GPU``,
    ``model_tflops_per_gpu``, ``step_time_s``...). ``None`` if it is not one simcore predicts."""
    m = re.sub(r"[^a-z0-9]+", "_", metric.lower()).strip("_")
    if m in _PRIMARY_ORDER:
        return m
    if "token" in m:
        return "tokens_per_s_per_gpu" if "gpu" in m else "tokens_per_s"
    if "tflop" in m and "gpu" in m:
        return "achieved_tflops_per_gpu"
    if "pflop" in m:
        return "aggregate_pflops"
    if m in ("step_time", "step_time_s", "time_per_step", "iteration_time_s", "time_per_iteration"):
        return "iteration_time"
    return None


def _norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_MBRIDGE_HYBRID = "NVIDIA-NeMo/Megatron-Bridge scripts/performance perf_recipes/nemotronh"
_MBRIDGE_HYBRID_RECOMPUTE: dict[str, tuple[str, ...]] = {"H100": ("layernorm",)}
"""Selective-recompute modules of the hybrid (Nemotron-H / Nemotron 3) performance recipes by GPU: the
H100 recipe recomputes the norms, the Blackwell ones nothing (:data:`_MBRIDGE_HYBRID`)."""

_MBRIDGE_GRAD_REDUCE = "scripts/performance/configs/*/*_llm_pretrain.py, set_*_common_configs"
"""Where every Megatron-Bridge performance recipe of the tables' releases (tags v0.2.0 to v0.5.0, every
model: Llama 3 / 3.1, DeepSeek-V3, GPT-OSS, Qwen3, Kimi-K2, Nemotron-H / Nemotron 3) sets
``cfg.mixed_precision.grad_reduce_in_fp32 = False`` and ``cfg.ddp.grad_reduce_in_fp32 = False``: bf16
``main_grad`` buffers and a bf16 gradient reduce-scatter, unlike the pre-training recipes' fp32
(``recipes/common.py``, the megatron stack's default; v0.6.0's ``perf_recipes/_common.py
_benchmark_common`` keeps the rule). docs/parallelism.md, "Gradient reduction dtype"."""


_MBRIDGE_FSDP_OFFLOAD: dict[tuple[str, str, str], int] = {
    ("llama370b", "GB300", "bf16"): 30,
    ("llama370b", "GB300", "fp8_current"): 20,
    ("llama370b", "GB200", "bf16"): 20,
    ("llama370b", "GB200", "fp8_current"): 40,
    ("llama370b", "B200", "fp8_current"): 5,
    ("llama31405b", "GB300", "bf16"): 40,
    ("llama31405b", "GB300", "fp8_current"): 10,
    ("llama31405b", "GB200", "fp8_current"): 92,
}
"""Layers whose activations the Megatron-FSDP dense performance recipes offload to the host, by (model, GPU,
precision): ``use_megatron_fsdp=True`` with ``cpu_offloading_num_layers`` in ``LLAMA3_70B_*`` and
``LLAMA31_405B_*`` of ``scripts/performance/configs/llama{3,31,}/*workload_base_configs.py`` (the same
values at every tag v0.2.0 to v0.5.0; ``set_megatron_fsdp_overrides`` in ``utils/helpers.py`` sets
``data_parallel_sharding_strategy = "optim_grads_params"``)."""

MBRIDGE_MOE_RECIPES = DATA_DIR / "mbridge_moe_recipes.csv"
"""The MoE dispatcher, A2A overlap, fused grouped MLP and selective-recompute modules of each Megatron-Bridge
release's performance recipes, per model, GPU and precision (written by ``tools/mbridge_moe_recipes.py`` from the release tags'
``scripts/performance/configs/*workload_base_configs.py``)."""

_MBRIDGE_TAG = {
    "25.11": "v0.2.0",
    "26.02": "v0.3.0",
    "26.02.01": "v0.3.1",
    "26.04": "v0.4.0",
    "26.04.01": "v0.4.2",
    "26.06": "v0.5.0",
    "26.06.01": "v0.5.0",
    "26.08": "v0.5.0",
}
"""The NVIDIA-NeMo/Megatron-Bridge tag whose performance recipes a table release ran. 26.04.01 is v0.4.2,
the first with the B200 DeepSeek-V3 EP 32 recipe (DeepEP) the table lists; 26.06 to 26.08 use v0.5.0's,
the last with ``workload_base_configs.py`` (v0.6.0's ``src/megatron/bridge/perf_recipes`` set the same
HybridEP and ``overlap_moe_expert_parallel_comm`` for the NVL72 MXFP8 recipes those tables list)."""


@lru_cache(maxsize=1)
def _mbridge_moe_recipes() -> list[dict[str, str]]:
    with MBRIDGE_MOE_RECIPES.open(newline="") as fh:
        return list(csv.DictReader(fh))


def mbridge_moe_recipe(
    release: str, model: str, gpu: str, precision: str, ep: int, global_batch: int
) -> dict[str, str] | None:
    """The performance recipe of a Megatron-Bridge table row (:data:`MBRIDGE_MOE_RECIPES`): of the release's
    configs of the model on that GPU, the first with the row's expert parallelism, precision and global
    batch, else its expert parallelism and precision, its expert parallelism, its precision; ``None``
    where the release's recipes have no config of the model on that GPU."""
    tag = _MBRIDGE_TAG.get(release.removeprefix("Megatron-Bridge ").strip())
    prec = {"mxfp8": "fp8-mx", "fp8_current": "fp8-cs", "fp8_blockwise": "fp8-sc"}.get(precision, precision)
    mine = [
        r
        for r in _mbridge_moe_recipes()
        if r["tag"] == tag and _norm_name(r["model"]) == _norm_name(model) and r["gpu"] == gpu
    ]
    want = {"ep": str(ep), "precision": prec, "global_batch": str(global_batch)}
    for keys in (("ep", "precision", "global_batch"), ("ep", "precision"), ("ep",), ("precision",)):
        for r in mine:
            if all(r[k] == want[k] for k in keys):
                return r
    return None


_DSV3_CHUNKS: dict[tuple[int, int], list[int]] = {
    (4, 1): [16, 16, 16, 13],
    (8, 1): [8] * 7 + [5],
    (4, 2): [8] * 7 + [5],
    (16, 1): [4] * 15 + [1],
    (8, 2): [4] * 15 + [1],
    (4, 4): [4] * 15 + [1],
    # the GB300 recipes of 26.02 on (workload_base_configs.py): pp_layout "Et*4|(t*4|)*14tmL"
    (2, 8): [4] * 15 + [1],
}
"""Decoder layers of each pipeline chunk of Megatron-Bridge's DeepSeek-V3 layouts, by (pp, vp): the first
chunk also holds the embedding, the last the MTP layer and the loss (``set_deepseek_v3_pipeline_model_
parallel_layout`` in ``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``, v0.2.0 to v0.5.0). Other
(pp, vp) run Megatron's even split, MTP on the last stage on top."""


def dsv3_stage_layers(pp: int, vp: int) -> list[int] | None:
    """Decoder layers per pipeline rank of the DeepSeek-V3 recipe layout (rank ``r`` holds chunks ``r, r +
    pp, ...``), ``None`` where the recipes give no layout for ``(pp, vp)``."""
    chunks = _DSV3_CHUNKS.get((pp, vp))
    return None if chunks is None else [sum(chunks[r::pp]) for r in range(pp)]


_MBRIDGE_V060 = "NVIDIA-NeMo/Megatron-Bridge@v0.6.0 src/megatron/bridge/perf_recipes/nemotronh"
_MBRIDGE_RECIPES_AFTER_V050: dict[tuple[str, str], dict[str, Any]] = {
    # gb300/nemotronh.py _nemotron_3_ultra_gb300_fp8mx_config and gb200/nemotronh.py
    # nemotron_3_ultra_pretrain_256gpu_gb200_fp8mx_config: flex / hybridep, recompute_modules ["moe_act"],
    # common.py _apply_nemotron_3_ultra_fsdp_hsdp: Megatron-FSDP optim_grads_params, cuda_graph_impl "none"
    ("nemotron3ultra", "GB300"): {"dispatcher": "hybridep", "recompute": ("moe_act",), "megatron_fsdp": True,
                                  "config": f"{_MBRIDGE_V060}/gb300/nemotronh.py"},
    ("nemotron3ultra", "GB200"): {"dispatcher": "hybridep", "recompute": ("moe_act",), "megatron_fsdp": True,
                                  "config": f"{_MBRIDGE_V060}/gb200/nemotronh.py"},
    # the Lightning recipes (after v0.6.0: NVIDIA-NeMo/Megatron-Bridge@067f987d perf_recipes/nemotronh/gb200/
    # nemotronh.py, tests/unit_tests/recipes/test_nemotron_3_5_lightning_perf_recipes.py): the Nano recipe's
    # layout and policy with HybridEP, no MoE A2A overlap, no recompute
    ("nemotron35lightning", "GB200"): {"dispatcher": "hybridep", "recompute": (), "megatron_fsdp": False,
                                       "config": "NVIDIA-NeMo/Megatron-Bridge@067f987d perf_recipes/nemotronh/gb200"},
    # DeepSeek-V4 Flash, 26.08 (NVIDIA-NeMo/Megatron-Bridge@067f987d src/megatron/bridge/perf_recipes/deepseek/
    # gb200/deepseek_v4.py deepseek_v4_flash_pretrain_128gpu_gb200_fp8mx_config; gb300/deepseek_v4.py's 128-GPU
    # config is it with other environment variables): TP1 PP1 EP64 ETP1, flex / hybridep, selective recompute of
    # ["mla_up_proj"], moe_router_force_load_balancing, full-iteration CUDA graph, no Megatron-FSDP;
    # moe_expert_rank_capacity_factor 1.5 with moe_paged_stash (buffer_size_factor_cuda 1.2), no
    # moe_expert_capacity_factor and no moe_pad_expert_input_to_capacity (dropless: docs/parallelism.md, "Capacity
    # factor")
    ("deepseekv4flash", "GB300"): {"dispatcher": "hybridep", "recompute": ("mla_up_proj",), "megatron_fsdp": False,
                                   "rank_capacity_factor": 1.5,
                                   "config": "NVIDIA-NeMo/Megatron-Bridge@067f987d perf_recipes/deepseek/gb300/"
                                             "deepseek_v4.py"},
    ("deepseekv4flash", "GB200"): {"dispatcher": "hybridep", "recompute": ("mla_up_proj",), "megatron_fsdp": False,
                                   "rank_capacity_factor": 1.5,
                                   "config": "NVIDIA-NeMo/Megatron-Bridge@067f987d perf_recipes/deepseek/gb200/"
                                             "deepseek_v4.py"},
}  # fmt: skip
"""The performance recipes of the 26.08 table's models that v0.5.0's ``workload_base_configs.py`` (the source of
:data:`MBRIDGE_MOE_RECIPES`) does not have: dispatcher, selective-recompute modules, Megatron-FSDP, and HybridEP's
per-rank receive budget where the recipe sets one (``rank_capacity_factor``: an assumption line, not a capacity)."""


_MBRIDGE_NVFP4_BF16_LAST: dict[str, int] = {"nemotron3super": 14}
"""Trailing layers the NVFP4 performance recipe keeps in bf16, by model: Nemotron 3 Super's
``first_last_layers_bf16 = True``, ``num_layers_at_end_in_bf16 = 14`` (NVIDIA-NeMo/Megatron-Bridge v0.4.0 to v0.5.0
``scripts/performance/configs/nemotronh/nemotron_3_llm_pretrain.py`` ``set_nemotron_3_super_common_configs``; v0.6.0
``training/mixed_precision.py`` ``nemotron_3_super_bf16_with_nvfp4_mixed``). Its ``te_quant.cfg`` also keeps the
attention projections, the latent projections and the MTP block in bf16 and Mamba's ``out_proj`` in MXFP8: per-module
precision simcore does not express (those GEMMs are priced in NVFP4)."""


def _preset_for(model: str, layers: int | None, hidden: int | None) -> dict[str, Any] | None:
    """The built-in model preset a row's model name names (name or alias, ignoring case and
    punctuation: ``LLAMA3.1_405B`` is ``llama3.1-405b``), if its layers and width agree with the row
    (``None``: any)."""
    from simcore.specs.registry import default_registry

    reg = default_registry()
    key = _norm_name(model)
    names: dict[str, str] = {_norm_name(n): n for n in reg.models}
    names.update({_norm_name(a): n for (kind, a), n in reg.aliases.items() if kind == "model preset"})
    data = reg.models.get(names.get(key, ""))
    if data is None or (layers is not None and data.get("layers") != layers):
        return None
    if hidden is not None and data.get("hidden") != hidden:
        return None
    return {k: v for k, v in data.items() if k != "name"}


def _no_tp_overlap(precision: str, source: str) -> bool:
    """Whether the row's software turns TP communication overlap off whatever the layout: Megatron-Bridge's
    performance recipes do under NVFP4, for every model (``cfg.comm_overlap.tp_comm_overlap = False if
    precision == "nvfp4" else ...``). ``precision`` is :func:`precision_recipe`'s name, ``source`` the short
    source (``MBridge ...``). Used by :func:`build_row` for the recipe and :func:`_row_space` for the
    planner's search."""
    return precision == "nvfp4" and source.startswith("MBridge")


def _no_param_gather_overlap(tag: str, model: str, gpu: str, precision: str, global_batch: int) -> str:
    """The source of a dense Megatron-Bridge recipe that turns the distributed optimizer's parameter
    all-gather overlap off (``overlap_param_gather = False``), or ``""``: v0.2.0's Llama 3 70B and 3.1 405B
    MXFP8 recipes on GB300, GB200 and B200 ("keeping this enabled causes NaN grad norm"; the 8B recipes keep
    it, v0.3.0 on dropped it), and v0.4.2 / v0.5.0's GB200 405B NVFP4 ``v2`` recipe (256 GPUs, global batch
    1,536: ``disable_param_gather_overlap``, "to reduce training peak memory and avoid OOM")."""
    name = _norm_name(model)
    if tag == "v0.2.0" and precision == "mxfp8" and name in ("llama370b", "llama31405b"):
        return (
            "NVIDIA-NeMo/Megatron-Bridge@v0.2.0 scripts/performance/configs/llama3/llama3_llm_pretrain.py, "
            "llama31/llama31_llm_pretrain.py: overlap_param_gather = False if precision == 'fp8_mx'"
        )
    v2 = name == "llama31405b" and gpu == "GB200" and precision == "nvfp4" and global_batch == 1536
    if tag in ("v0.4.2", "v0.5.0") and v2:
        return (
            f"NVIDIA-NeMo/Megatron-Bridge@{tag} scripts/performance/configs/llama/llama31_llm_pretrain.py "
            "llama31_405b_pretrain_config_gb200: disable_param_gather_overlap for nvfp4 v2, "
            "LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2 of llama31_workload_base_configs.py"
        )
    return ""


def build_row(index: int, rec: dict[str, str]) -> PublishedRow:
    """Turn one CSV record into a scenario dict and the FLOP-formula dimensions.

    Missing fields are filled with the documented assumption, recorded in ``assumptions``.
    """
    src, family = _short_source(rec["source"])
    notes = rec.get("notes", "")
    assume: list[str] = []
    gpus = int(rec["num_gpus"])
    if not (rec.get("layers") or "").strip():
        # a row whose table gives no architecture: a built-in preset of that name, else not expressible
        named = _preset_for(rec["model"], None, None)
        if named is None:
            raise ValueError(f"model {rec['model']!r}: no architecture in the row and no built-in preset of that name")
        rec = {**rec, **{k: str(named[k]) for k in ("layers", "hidden", "heads") if k in named}}
    layers = int(rec["layers"])
    hidden = int(rec["hidden"])
    heads = int(rec["heads"])
    seq = int(rec["seq_len"])
    ffn = _int(rec.get("ffn_hidden"))
    # the architecture: a built-in preset the model name names (Llama: SwiGLU, RMSNorm, GQA), else GPT
    preset = _preset_for(rec["model"], layers, hidden)
    arch: dict[str, Any] = {"activation": "gelu", "norm": "layernorm", "tied_embeddings": True}
    if preset is not None:
        keep = ("activation", "norm", "kv_heads", "head_dim", "moe", "mla", "tied_embeddings", "mtp_layers",
                "hybrid_pattern", "mamba", "csa", "residual_streams")
        arch = {k: preset[k] for k in keep if k in preset}
        arch.setdefault("tied_embeddings", False)
        assume.append(f"architecture of the built-in preset matching {rec['model']!r}")
        if ffn is None and "ffn_hidden" in preset:
            ffn = int(preset["ffn_hidden"])
    if ffn is None:
        ffn = 4 * hidden
        assume.append("ffn_hidden = 4h (GPT MLP; not in the table)")
    mv = re.search(r"vocab (\d+)", notes) or re.search(r"(\d{5,}) vocab", rec["model"])
    if mv:
        vocab = int(mv.group(1))
    elif preset is not None and "vocab" in preset:
        vocab = int(preset["vocab"])
    else:
        vocab = 51200
        assume.append("vocab 51200 (Megatron GPT-2 BPE padded; not in the row)")
    system = _system_for(rec["gpu"])

    tp = _int(rec.get("tp"))
    pp = _int(rec.get("pp"))
    cp = _int(rec.get("cp")) or 1
    ep = _int(rec.get("ep")) or 1
    dp_col = _int(rec.get("dp"))
    zero = 0
    deepspeed_2021 = False
    if notes.startswith("ZeRO-3") and family == "narayanan":
        # Table 2's ZeRO-3 rows run "without any model parallelism": batch = micro-batch x GPUs in
        # every row, so dp = GPUs (the transcribed dp column disagrees for two rows).
        tp, pp, zero = 1, 1, 3
        deepspeed_2021 = True
        assume.append(
            "ZeRO-3 as DeepSpeed ran it in spring 2021: one synchronous all-gather / reduce-scatter per "
            "weight tensor, nothing overlapped (zero3_gather per_tensor)"
        )
        if dp_col != gpus:
            assume.append(f"ZeRO-3 without model parallelism: dp = {gpus} GPUs (CSV dp column says {dp_col})")
    if tp is None or pp is None:
        # strong-scaling rows: the README gives no TP/PP; use the weak-scaling table's 177B split
        tp, pp = 8, 6
        assume.append("tp 8 x pp 6 as in the weak-scaling GPT-175B row (strong-scaling TP/PP not stated)")
    problem: str | None = None
    if tp * pp * cp > gpus or gpus % (tp * pp * cp):
        problem = f"tp*pp*cp = {tp * pp * cp} does not divide the {gpus} GPUs"
    if ep > 1 and "moe" not in arch:
        problem = f"ep {ep} on a model simcore knows no experts of (name it as a built-in MoE preset)"
    metric = normalize_metric(rec["metric"])
    if metric is None:
        problem = f"metric {rec['metric']!r} is not one simcore predicts"
    dp = max(gpus // (tp * pp * cp), 1)
    if dp_col is not None and dp_col != dp and zero == 0:
        assume.append(f"dp = GPUs/(tp*pp*cp) = {dp} (CSV dp column {dp_col})")

    mb = _int(rec.get("micro_batch"))
    if mb is None:
        mb = 1
        assume.append("micro_batch 1 (not in the table)")
    gb = _int(rec.get("global_batch")) or mb * dp

    vp_col = _int(rec.get("vp"))
    if vp_col is not None:
        vp = vp_col
    elif family == "narayanan" and pp > 1:
        vp = _smallest_divisor_above_one(layers // pp)
        assume.append(
            f"interleaved schedule with vp {vp} (smallest interleaving of {layers // pp} layers/stage; "
            "the paper's runs interleave but the table gives no vp)"
        )
    else:
        vp = 1
        if pp > 1:
            assume.append("non-interleaved 1F1B (interleaving not stated)")
    schedule = "interleaved" if vp > 1 else "1f1b"

    rc = rec.get("recompute", "").lower()
    mbridge = family == "mcore" and src.startswith("MBridge")
    mbridge_moe = mbridge and "moe" in arch
    mbridge_hybrid = mbridge and "hybrid_pattern" in arch
    precision = precision_recipe(rec.get("precision", ""))
    # the release's performance recipe of the model on that GPU (dispatcher, A2A overlap, recompute modules)
    release = release_of(rec["source"])
    recipe = mbridge_moe_recipe(release, rec["model"], rec["gpu"], precision, ep, gb) if mbridge_moe else None
    later = _MBRIDGE_RECIPES_AFTER_V050.get((_norm_name(rec["model"]), rec["gpu"])) if mbridge_moe else None
    recompute_modules: tuple[str, ...] = _MBRIDGE_HYBRID_RECOMPUTE.get(rec["gpu"], ()) if mbridge_hybrid else ()
    recompute_src = f"{_MBRIDGE_HYBRID}: the {rec['gpu']} recipe"
    if recipe is not None:
        # an unset or empty recompute_modules: no recompute (Qwen3's and GPT-OSS's recompute_granularity None)
        recompute_modules = tuple(x for x in recipe.get("recompute_modules", "").split(";") if x)
        recompute_src = f"NVIDIA-NeMo/Megatron-Bridge@{recipe['tag']} {recipe['config']}"
    elif later is not None:  # a recipe newer than the tool's tags, transcribed (hybrids, DeepSeek-V4 Flash)
        recompute_modules, recompute_src = later["recompute"], later["config"]
    # (an empty list is Megatron's default, core_attn)
    if "full" in rc:
        recompute = "full"
    elif "selective" in rc:
        recompute = "selective"
    elif mbridge_hybrid or recipe is not None or later is not None:
        recompute = "selective" if recompute_modules else "none"
        what = f"selective recompute of {', '.join(recompute_modules)}" if recompute_modules else "no recompute"
        assume.append(f"{what} ({recompute_src})")
    else:
        recompute = "none"
        assume.append("no activation recompute (not stated; memory checked per row)")

    sp = "sequence parallel" in rc
    tp_overlap = False
    dp_overlap = True
    if family == "mcore":
        # --tp-comm-overlap needs sequence parallelism; --overlap-param-gather needs the distributed
        # optimizer (ZeRO-1)
        sp, tp_overlap, zero = tp > 1, tp > 1, max(zero, 1)
        assume.append(
            "sequence parallel + TP comm overlap + distributed optimizer (zero 1), as the README's "
            "--tp-comm-overlap/--overlap-param-gather flags imply"
        )
    elif zero < 3:
        # Megatron-LM 2021-22 reduced gradients after the backward pass (no bucketed overlap yet)
        dp_overlap = False
        if dp > 1:
            assume.append("data-parallel all-reduce after backward, not overlapped (Megatron-LM 2021 DDP)")

    if precision == "fp16":
        precision = "bf16"
        assume.append("fp16 priced as bf16 (same tensor-core peak)")
    if tp_overlap and _no_tp_overlap(precision, src):
        tp_overlap = False
        assume.append(
            "no TP comm overlap under NVFP4 (NVIDIA-NeMo/Megatron-Bridge@2a0d46e2 scripts/performance/configs/"
            "llama/llama3_llm_pretrain.py, likewise llama31 and gpt_oss: tp_comm_overlap = False if precision "
            "== 'nvfp4')"
        )
    tag = _MBRIDGE_TAG.get(release_of(rec["source"]).removeprefix("Megatron-Bridge "), "") if mbridge else ""
    no_gather_overlap = _no_param_gather_overlap(tag, rec["model"], rec["gpu"], precision, gb)
    if no_gather_overlap:
        assume.append(f"parameter all-gather after the optimizer step, not overlapped ({no_gather_overlap})")
    fsdp = bool(re.search(r"\bfsdp\s*[=:]?\s*(1|true|yes)\b", notes, re.IGNORECASE))
    offload = _MBRIDGE_FSDP_OFFLOAD.get((_norm_name(rec["model"]), rec["gpu"], precision), 0) if mbridge else 0
    # the performance scripts' only FSDP is Megatron-FSDP (``--use_megatron_fsdp``, ``use_megatron_fsdp`` in the
    # workload configs: helpers.py set_megatron_fsdp_overrides), never PyTorch's FSDP2
    megatron_fsdp = fsdp and mbridge
    if megatron_fsdp:
        fsdp = False
        assume.append(
            "Megatron-FSDP (optim_grads_params: NVIDIA-NeMo/Megatron-Bridge scripts/performance/utils/helpers.py "
            "set_megatron_fsdp_overrides, v0.2.0 to v0.5.0)"
            + (
                f" offloading {offload} layers' activations to the host (the {rec['gpu']} recipe's "
                "cpu_offloading_num_layers: scripts/performance/configs/llama*/*workload_base_configs.py)"
                if offload
                else ""
            )
        )
    if later is not None and later["megatron_fsdp"] and pp == 1 and not megatron_fsdp:
        # the recipe's Megatron-FSDP (optim_grads_params; its HSDP replicas over NVLink domains are not modelled:
        # sharded over the whole data-parallel group here)
        megatron_fsdp = True
        assume.append(f"Megatron-FSDP, optim_grads_params ({later['config']}; HSDP priced as FSDP over all of DP)")
    folding: dict[str, Any] = {"zero3_gather": "per_tensor"} if deepspeed_2021 else {}
    if mbridge:
        if "moe" in arch:
            # Megatron-Bridge's MoE recipes set expert_tensor_parallel_size = 1 (parallel folding)
            folding["etp"] = 1
            assume.append("etp 1 (Megatron-Bridge MoE recipes' expert_tensor_parallel_size)")
        if _norm_name(rec["model"]).startswith("qwen3235b") and pp > 1:
            # qwen3_moe.py's qwen3_235b_a22b_pretrain_config: account_for_{embedding,loss}_in_pipeline_split
            folding["account_for_embedding_in_pipeline_split"] = True
            folding["account_for_loss_in_pipeline_split"] = True
            assume.append(
                "embedding and loss counted as pipeline layers (NVIDIA-NeMo/Megatron-Bridge@00b7660b "
                "src/megatron/bridge/recipes/qwen/qwen3_moe.py, Qwen3-235B-A22B recipe)"
            )
        stages = dsv3_stage_layers(pp, vp) if arch.get("mtp_layers") and layers == 61 else None
        if stages is not None:
            folding["pipeline_layers"] = stages
            assume.append(
                f"pipeline layers {stages} per rank: the DeepSeek-V3 recipe layout, the MTP layer and the loss "
                "on the last chunk (Megatron-Bridge recipes/deepseek/deepseek_v3.py)"
            )
        if layers == 126 and pp > 1:
            # Megatron-Bridge's Llama 3.1 405B recipe counts the embedding and the loss as pipeline layers
            folding["account_for_embedding_in_pipeline_split"] = True
            folding["account_for_loss_in_pipeline_split"] = True
            assume.append(
                "embedding and loss counted as pipeline layers (Megatron-Bridge Llama 3.1 405B recipe)"
            )

    if mbridge:
        assume.append(
            f"bf16 gradient buffers and reduction (grad_reduce_in_fp32 False: NVIDIA-NeMo/Megatron-Bridge@{tag} "
            f"{_MBRIDGE_GRAD_REDUCE})"
        )
    moments_bf16 = mbridge and _norm_name(rec["model"]).startswith(("deepseekv3", "deepseekv4"))
    if moments_bf16:
        assume.append(
            "bf16 Adam moments beside fp32 master weights (the DeepSeek recipes' precision-aware optimizer, "
            "exp_avg_dtype = exp_avg_sq_dtype = bf16: Megatron-Bridge src/megatron/bridge/recipes/deepseek/"
            "deepseek_v3.py, v0.2.0 to v0.5.0; gb200/deepseek_v4.py@067f987d)"
        )
    bf16_last = _MBRIDGE_NVFP4_BF16_LAST.get(_norm_name(rec["model"]), 0) if mbridge and precision == "nvfp4" else 0
    if bf16_last:
        assume.append(f"the last {bf16_last} layers in bf16 (the NVFP4 recipe's num_layers_at_end_in_bf16)")
    runtime: dict[str, Any] = {}
    if mbridge_moe:
        if recipe is None and later is not None:
            runtime["moe_dispatcher"] = later["dispatcher"]
            assume.append(f"MoE dispatcher {later['dispatcher']}, no A2A overlap ({later['config']})")
            if (rcf := later.get("rank_capacity_factor")) is not None:
                # Megatron-Core's moe_expert_rank_capacity_factor sizes HybridEP's static receive buffer; the
                # grouped GEMMs run the received split sizes, and a step over budget reruns dropless
                assume.append(
                    f"dropless, no padding to capacity: moe_expert_rank_capacity_factor {rcf:g} only sizes "
                    f"HybridEP's receive buffer (force-balanced routing stays under it) ({later['config']})"
                )
        elif recipe is None:
            assume.append("MoE dispatcher alltoall, no A2A overlap (no performance recipe of this model and GPU)")
        else:
            runtime["moe_dispatcher"] = recipe["dispatcher"]
            runtime["moe_a2a_overlap"] = recipe["a2a_overlap"] == "true"
            runtime["moe_fused_mlp"] = recipe["fused_mlp"] == "true"
            assume.append(
                f"MoE dispatcher {recipe['dispatcher']}"
                f"{', 1F1B A2A overlap' if runtime['moe_a2a_overlap'] else ''}"
                f"{', fused grouped MLP' if runtime['moe_fused_mlp'] else ''} (NVIDIA-NeMo/Megatron-Bridge@"
                f"{recipe['tag']} {recipe['config']})"
            )
    scenario: dict[str, Any] = {
        "name": f"{src} {rec['model']} {gpus}gpu #{index}",
        "kind": "training",
        "cluster": {"system": system, "gpus": gpus},
        "model": {
            "name": rec["model"],
            "layers": layers,
            "hidden": hidden,
            "heads": heads,
            "ffn_hidden": ffn,
            "vocab": vocab,
            "seq_len": seq,
            **arch,
        },
        "training": {
            "micro_batch": mb,
            "global_batch": gb,
            "precision": precision,
            "optimizer": "adamw",
            "recompute": recompute,
            **({"activation_offload_layers": offload} if megatron_fsdp and offload else {}),
            **({"recompute_modules": list(recompute_modules)} if recompute == "selective" and mbridge_moe else {}),
            **({"grad_reduce_in_fp32": False} if mbridge else {}),
            **({"optimizer_moments_dtype": "bf16"} if moments_bf16 else {}),
            **({"bf16_layers_end": bf16_last} if bf16_last else {}),
        },
        "parallel": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "vp": vp,
            "schedule": schedule,
            "sequence_parallel": sp,
            "zero": 3 if fsdp or megatron_fsdp else zero,
            "fsdp": fsdp,
            **({"megatron_fsdp": True} if megatron_fsdp else {}),
            "ep": ep,
            "dp_overlap": dp_overlap,
            "tp_overlap": tp_overlap,
            **({"param_gather_overlap": False} if no_gather_overlap else {}),
            **folding,
        },
        # every published table is a Megatron-LM / Megatron-Core / Megatron-Bridge run
        "runtime": {"stack": "megatron", **runtime},
    }
    dims = {
        "B": float(gb),
        "s": float(seq),
        "l": float(layers),
        "h": float(hidden),
        "V": float(vocab),
        "ffn": float(ffn),
        "heads": float(heads),
        "kv_heads": float(arch.get("kv_heads") or heads),
        "glu": 1.5 if arch.get("activation") == "swiglu" else 1.0,
    }
    mval = re.search(r"[-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?", rec.get("value", ""))
    published = float(mval.group(0).replace(",", "")) if mval else math.nan
    if not math.isfinite(published) or published <= 0:
        problem = f"value {rec.get('value', '')!r} is not a positive number"
    return PublishedRow(
        index=index,
        source=src,
        family=family,
        model=rec["model"],
        gpus=gpus,
        system=system,
        metric=metric or rec["metric"],
        unit=rec.get("unit", ""),
        published=published,
        scenario=scenario,
        dims=dims,
        assumptions=assume,
        problem=problem,
        release=release_of(rec["source"]),
    )


def load_published(path: str | Path | Sequence[str | Path] | None = None) -> list[PublishedRow]:
    """Every row of the published table as a :class:`PublishedRow`; a row that cannot be read (a
    column missing, a GPU type simcore has no system for) keeps its index with ``problem`` set. Several
    tables (a sequence of paths): their rows pooled, numbered on from one table to the next."""
    if isinstance(path, Sequence) and not isinstance(path, str):
        pooled: list[PublishedRow] = []
        for p in path:
            offset = len(pooled)
            pooled.extend(replace(r, index=r.index + offset) for r in load_published(p))
        return pooled
    out: list[PublishedRow] = []
    for i, rec in enumerate(read_rows(path)):
        try:
            out.append(build_row(i, rec))
        except (KeyError, ValueError, TypeError) as e:
            what = f"column {e} missing" if isinstance(e, KeyError) else str(e)
            out.append(
                PublishedRow(
                    index=i,
                    source=_short_source(rec.get("source") or "?")[0],
                    family="mcore",
                    model=rec.get("model") or "?",
                    gpus=_int(rec.get("num_gpus")) or 0,
                    system="",
                    metric=rec.get("metric") or "?",
                    unit=rec.get("unit") or "",
                    published=_num(rec.get("value")) or math.nan,
                    scenario={},
                    dims={},
                    problem=what,
                    release=release_of(rec.get("source") or "?"),
                )
            )
    return out


# ------------------------------------------------------------------------------------ FLOP formulas


def megatron_flops(dims: dict[str, float], recompute: str, convention: str) -> float:
    """FLOPs per step in a paper's convention.

    ``narayanan``: 96 B s l h^2 (1 + s/6h + V/16lh) (full recompute counted);
    ``model``: 72 B s l h^2 (1 + s/6h + V/16lh) (Korthikanti model FLOPs);
    ``hardware``: the model form plus what ``recompute`` re-runs (selective: s/3h, full: the 96 form);
    ``mcore``: Megatron-LM ``num_floating_point_operations`` (12 B s l h^2 ((1+g/a+s/h) + f/h + V/2lh)).
    """
    B, s, L, h, V = dims["B"], dims["s"], dims["l"], dims["h"], dims["V"]
    base = B * s * L * h * h
    if convention == "narayanan":
        return 96.0 * base * (1 + s / (6 * h) + V / (16 * L * h))
    if convention == "model":
        return 72.0 * base * (1 + s / (6 * h) + V / (16 * L * h))
    if convention == "hardware":
        if recompute == "full":
            return 96.0 * base * (1 + s / (6 * h) + V / (16 * L * h))
        if recompute == "selective":
            return 72.0 * base * (1 + s / (3 * h) + V / (16 * L * h))
        return 72.0 * base * (1 + s / (6 * h) + V / (16 * L * h))
    if convention == "mcore":
        g_a = dims["kv_heads"] / dims["heads"]
        glu = dims.get("glu", 1.0)  # Megatron's gated_linear_multiplier: 3/2 for SwiGLU
        return 12.0 * base * ((1 + g_a + s / h) + glu * dims["ffn"] / h + V / (2 * L * h))
    raise ValueError(convention)


def _convention(row: PublishedRow) -> str:
    if row.family == "narayanan":
        return "narayanan"
    if row.family == "mcore":
        return "mcore"
    return "hardware" if row.metric == "hfu" else "model"


def metric_from_step(row: PublishedRow, step_time_s: float, peak_flops: float) -> float:
    """The row's metric, in the row's unit, for a step of ``step_time_s`` seconds."""
    rc = str(row.scenario["training"]["recompute"])
    flops = megatron_flops(row.dims, rc, _convention(row))
    per_gpu = flops / step_time_s / row.gpus
    m = row.metric
    if m == "achieved_tflops_per_gpu":
        return per_gpu / 1e12
    if m == "aggregate_pflops":
        return flops / step_time_s / 1e15
    if m in ("pct_of_peak", "mfu", "hfu"):
        return 100.0 * per_gpu / peak_flops
    if m == "iteration_time":
        return step_time_s
    tokens = row.dims["B"] * row.dims["s"] / step_time_s
    if m == "tokens_per_s":
        return tokens
    if m == "tokens_per_s_per_gpu":
        return tokens / row.gpus
    raise ValueError(f"unknown metric {m!r}")


def step_from_metric(row: PublishedRow, value: float, peak_flops: float) -> float:
    """Invert :func:`metric_from_step`: the step time a published value implies (seconds)."""
    if row.metric == "iteration_time":
        return value
    one = metric_from_step(row, 1.0, peak_flops)  # metric is proportional to 1/step
    return one / value


# ---------------------------------------------------------------------------------------- predict


def _layout_str(sc: dict[str, Any]) -> str:
    p = sc["parallel"]
    t = sc["training"]
    s = f"t{p['tp']}p{p['pp']}d{p['dp']}"
    if p.get("cp", 1) > 1:
        s += f"c{p['cp']}"
    if p["vp"] > 1:
        s += f"v{p['vp']}"
    s += f" mb{t['micro_batch']}"
    s += {"full": " rc-full", "selective": " rc-sel", "none": ""}[t["recompute"]]
    if p["sequence_parallel"]:
        s += " sp"
    if p["zero"]:
        s += f" z{p['zero']}"
    return s


def _fractions(bd: dict[str, float], step: float) -> dict[str, float]:
    comm = sum(v for k, v in bd.items() if k in ("tp_comm", "cp_comm", "ep_comm"))
    rec = sum(v for k, v in bd.items() if k.startswith("recompute_"))
    bubble = bd.get("pipeline_bubble", 0.0)
    dpc = bd.get("dp_comm", 0.0)
    opt = bd.get("optimizer", 0.0)
    compute = step - comm - rec - bubble - dpc - opt
    return {
        "compute": compute / step,
        "recompute": rec / step,
        "tp_comm": comm / step,
        "bubble": bubble / step,
        "dp_comm": dpc / step,
        "optimizer": opt / step,
    }


def _config_key(row: PublishedRow) -> str:
    sc = row.scenario
    if not sc:
        return f"unreadable row {row.index}"
    return json.dumps([row.source, row.model, row.gpus, sc["parallel"], sc["training"]], sort_keys=True)


def predict_rows(
    rows: list[PublishedRow] | None = None, engine: str = "analytic", calibration: str | None = None
) -> list[RowResult]:
    """Predict every published row with ``simcore.predict`` and compare (see the module doc).

    ``calibration`` (a profile name or path) replaces each device's default profile: a what-if.
    """
    from simcore.prediction import TrainingResult, predict
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import scenario_from_dict

    rows = load_published() if rows is None else rows
    reg = default_registry()
    cache: dict[str, TrainingResult] = {}
    # one metric per configuration counts in the summary (the others restate the same step time)
    primary: dict[str, int] = {}
    for r in rows:
        k = _config_key(r)
        rank = _PRIMARY_ORDER.index(r.metric) if r.metric in _PRIMARY_ORDER else 99
        cur = primary.get(k)
        if cur is None:
            primary[k] = r.index
        else:
            other = next(x for x in rows if x.index == cur)
            if rank < (_PRIMARY_ORDER.index(other.metric) if other.metric in _PRIMARY_ORDER else 99):
                primary[k] = r.index
    out: list[RowResult] = []
    failed: dict[str, str] = {}
    for r in rows:
        k = _config_key(r)
        if r.problem is not None:
            out.append(_unpredicted(r, r.problem, primary[k] == r.index))
            continue
        res = cache.get(k)
        problem = failed.get(k)
        if res is None and problem is None:
            data = dict(r.scenario)
            if calibration is not None:
                data["calibration"] = calibration
            try:
                sc = scenario_from_dict(data, reg)
                pr = predict(sc, engine=engine)
            except SimcoreError as e:
                problem = failed[k] = str(e)
            else:
                assert isinstance(pr, TrainingResult)
                res = cache[k] = pr
        if res is None:
            out.append(_unpredicted(r, problem or "not predicted", primary[k] == r.index))
            continue
        peak = reg.device(reg.system(r.system).device).peak_flops("bf16")
        step = res.step_time_s
        pred = metric_from_step(r, step, peak)
        pub_step = step_from_metric(r, r.published, peak)
        err = pub_step / step - 1.0
        rc = str(r.scenario["training"]["recompute"])
        fl = megatron_flops(r.dims, rc, _convention(r))
        out.append(
            RowResult(
                index=r.index,
                source=r.source,
                model=r.model,
                gpus=r.gpus,
                layout=_layout_str(r.scenario),
                metric=r.metric,
                unit=r.unit,
                published=r.published,
                predicted=pred,
                error=err,
                primary=primary[k] == r.index,
                step_time_s=step,
                published_tflops_per_gpu=fl / pub_step / r.gpus / 1e12,
                predicted_tflops_per_gpu=fl / step / r.gpus / 1e12,
                fractions=_fractions(res.breakdown, step),
                fits_in_memory=res.fits_in_memory,
                memory_gib=res.memory_per_gpu_bytes / 1024.0**3,
                assumptions=r.assumptions,
                **_row_tags(r),
            )
        )
    return out


def _row_tags(r: PublishedRow) -> dict[str, Any]:
    """The grouping fields of a row's result: release, system, precision, dense/MoE, job."""
    sc = r.scenario
    tr = sc.get("training", {}) if sc else {}
    precision = str(tr.get("precision", ""))
    job = json.dumps(
        [r.source, r.model, r.gpus, tr.get("global_batch"), sc["model"]["seq_len"] if sc else 0, precision]
    )
    return {
        "release": r.release,
        "system": r.system,
        "precision": precision,
        "moe": bool(sc and "moe" in sc["model"]),
        "job": job,
    }


def _unpredicted(r: PublishedRow, problem: str, primary: bool) -> RowResult:
    nan = math.nan
    return RowResult(
        index=r.index,
        source=r.source,
        model=r.model,
        gpus=r.gpus,
        layout=_layout_str(r.scenario) if r.scenario else "",
        metric=r.metric,
        unit=r.unit,
        published=r.published,
        predicted=nan,
        error=nan,
        primary=primary,
        step_time_s=nan,
        published_tflops_per_gpu=nan,
        predicted_tflops_per_gpu=nan,
        fractions={},
        fits_in_memory=False,
        memory_gib=nan,
        assumptions=r.assumptions,
        problem=problem,
        **_row_tags(r),
    )


def summarize(results: list[RowResult]) -> dict[str, Any]:
    """Median and worst |error| over the primary rows (one per configuration) and over all rows."""

    def stats(rs: list[RowResult]) -> dict[str, Any]:
        if not rs:
            return {"rows": 0}
        errs = [abs(r.error) for r in rs]
        worst = max(rs, key=lambda r: abs(r.error))
        return {
            "rows": len(rs),
            "median_abs_error": statistics.median(errs),
            # the 90th percentile, interpolated between ranks (numpy's default)
            "p90_abs_error": statistics.quantiles(errs, n=10, method="inclusive")[8] if len(errs) > 1 else errs[0],
            "mean_abs_error": statistics.fmean(errs),
            "worst_abs_error": abs(worst.error),
            "worst_row": worst.index,
            "worst_label": f"{worst.source} {worst.model} {worst.gpus} GPUs {worst.layout}",
            "within_10pct": sum(e <= 0.10 for e in errs),
            "beyond_25pct": sum(e > 0.25 for e in errs),
        }

    skipped = [r for r in results if r.problem is not None and r.primary]
    results = [r for r in results if r.problem is None]
    prim = [r for r in results if r.primary]
    by_source: dict[str, Any] = {}
    for src in sorted({r.source for r in prim}):
        by_source[src] = stats([r for r in prim if r.source == src])
        by_source[src]["release"] = ", ".join(sorted({r.release for r in prim if r.source == src}))
    by_group: dict[str, Any] = {}
    for key in sorted({_group(r) for r in prim}):
        by_group[key] = stats([r for r in prim if _group(r) == key])
    s = stats(prim)
    return {
        "configurations": s,
        "all_rows": stats(results),
        "by_kind": {"dense": stats([r for r in prim if not r.moe]), "MoE": stats([r for r in prim if r.moe])},
        "by_source": by_source,
        "by_system_precision_kind": by_group,
        "rank_fidelity": rank_fidelity(prim),
        "not_predicted": [{"row": r.index, "problem": r.problem} for r in skipped],
        "target_median": TARGET_MEDIAN,
        "target_worst": TARGET_WORST,
        "meets_target": bool(
            prim and s["median_abs_error"] <= TARGET_MEDIAN and s["worst_abs_error"] <= TARGET_WORST
        ),
    }


def _group(r: RowResult) -> str:
    return f"{r.system} {r.precision} {'MoE' if r.moe else 'dense'}"


def _ranks(xs: list[float]) -> list[float]:
    """Ranks (1-based, ties averaged)."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long lists (Pearson's of their ranks; NaN when
    either has no spread)."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else math.nan


def rank_fidelity(results: list[RowResult]) -> dict[str, Any]:
    """Whether the predicted order of layouts matches the measured one, over the jobs (table, model,
    GPUs, global batch, sequence, precision) that a table gives with several layouts: per job, the
    Spearman correlation of predicted and published throughput (the step time's reciprocal); overall,
    their mean weighted by the layouts each job has, and the share of layout pairs ordered right."""
    jobs: dict[str, list[RowResult]] = {}
    for r in results:
        jobs.setdefault(r.job, []).append(r)
    per: list[dict[str, Any]] = []
    pairs = right = 0
    for rs in jobs.values():
        if len(rs) < 2:
            continue
        pub = [1.0 / step_from_metric_row(r) for r in rs]
        pred = [1.0 / r.step_time_s for r in rs]
        rho = spearman(pub, pred)
        if math.isnan(rho):
            continue
        per.append(
            {
                "job": f"{rs[0].source} {rs[0].model} {rs[0].gpus} GPUs {rs[0].precision}",
                "layouts": len(rs),
                "spearman": rho,
            }
        )
        for i in range(len(rs)):
            for j in range(i + 1, len(rs)):
                if pub[i] != pub[j]:
                    pairs += 1
                    right += (pub[i] - pub[j]) * (pred[i] - pred[j]) > 0
    n = sum(p["layouts"] for p in per)
    return {
        "jobs": per,
        "spearman": sum(p["spearman"] * p["layouts"] for p in per) / n if n else math.nan,
        "pairs": pairs,
        "pairs_ordered": right,
    }


def step_from_metric_row(r: RowResult) -> float:
    """The published step seconds of a predicted row (from its error: ``published / predicted - 1``)."""
    return r.step_time_s * (1.0 + r.error)


# ------------------------------------------------------------------------------------------ report


def format_table(results: list[RowResult], all_rows: bool = False) -> str:
    """A plain-text table: one line per (primary) row."""
    hdr = (
        f"{'#':>3} {'source':<18} {'model':<15} {'gpus':>5} {'layout':<30} {'metric':<24} "
        f"{'published':>10} {'predicted':>10} {'err%':>7}  {'cmp':>4} {'rec':>4} {'tp':>4} {'bub':>4} "
        f"{'dp':>4} {'opt':>4} {'GiB':>5}"
    )
    lines = [hdr, "-" * len(hdr)]
    for r in results:
        if not (all_rows or r.primary):
            continue
        if r.problem is not None:
            lines.append(
                f"{r.index:>3} {r.source:<18} {r.model[:15]:<15} {r.gpus:>5} not predicted: {r.problem}"
            )
            continue
        f = r.fractions
        mark = "" if r.fits_in_memory else " !mem"
        lines.append(
            f"{r.index:>3} {r.source:<18} {r.model[:15]:<15} {r.gpus:>5} {r.layout[:30]:<30} "
            f"{r.metric[:24]:<24} {r.published:>10.4g} {r.predicted:>10.4g} {100 * r.error:>+7.1f}  "
            f"{100 * f['compute']:>4.0f} {100 * f['recompute']:>4.0f} {100 * f['tp_comm']:>4.0f} "
            f"{100 * f['bubble']:>4.0f} {100 * f['dp_comm']:>4.0f} {100 * f['optimizer']:>4.0f} "
            f"{r.memory_gib:>5.1f}{mark}"
        )
    return "\n".join(lines)


def format_summary(summary: dict[str, Any]) -> str:
    c = summary["configurations"]
    a = summary["all_rows"]
    if not c["rows"]:
        return f"no configuration predicted ({len(summary['not_predicted'])} not predicted)"
    out = [
        f"configurations: {c['rows']}  median |err| {100 * c['median_abs_error']:.1f}%  "
        f"mean {100 * c['mean_abs_error']:.1f}%  worst {100 * c['worst_abs_error']:.1f}% "
        f"(row {c['worst_row']}: {c['worst_label']})  within 10%: {c['within_10pct']}  "
        f"beyond 25%: {c['beyond_25pct']}",
        f"all rows: {a['rows']}  median |err| {100 * a['median_abs_error']:.1f}%  "
        f"worst {100 * a['worst_abs_error']:.1f}%",
    ]
    if summary["not_predicted"]:
        out.append(f"not predicted: {len(summary['not_predicted'])} configuration(s) (listed in the table)")
    for kind, k in summary.get("by_kind", {}).items():
        if k["rows"]:
            out.append(
                f"  {kind:<6} n={k['rows']:>3}  median {100 * k['median_abs_error']:5.1f}%  "
                f"p90 {100 * k['p90_abs_error']:5.1f}%  worst {100 * k['worst_abs_error']:5.1f}%"
            )
    for src, s in summary["by_source"].items():
        out.append(
            f"  {src:<18} n={s['rows']:>2}  median {100 * s['median_abs_error']:5.1f}%  "
            f"worst {100 * s['worst_abs_error']:5.1f}%  release: {s.get('release', '')}"
        )
    groups = summary.get("by_system_precision_kind", {})
    if groups:
        out.append("by system x precision x dense/MoE:")
        for key, g in groups.items():
            out.append(
                f"  {key:<32} n={g['rows']:>2}  median {100 * g['median_abs_error']:5.1f}%  "
                f"worst {100 * g['worst_abs_error']:5.1f}%"
            )
    rf = summary.get("rank_fidelity", {})
    if rf.get("jobs"):
        out.append(
            f"rank fidelity over {len(rf['jobs'])} job(s) with several layouts: Spearman {rf['spearman']:.2f}, "
            f"{rf['pairs_ordered']}/{rf['pairs']} layout pairs ordered right"
        )
        for j in rf["jobs"]:
            out.append(f"  {j['job']:<48} layouts {j['layouts']:>2}  Spearman {j['spearman']:+.2f}")
    verdict = "meets" if summary["meets_target"] else "misses"
    out.append(f"target: median <= {100 * TARGET_MEDIAN:.0f}%, worst <= {100 * TARGET_WORST:.0f}%: {verdict}")
    return "\n".join(out)


def format_assumptions(results: list[RowResult]) -> str:
    """What each configuration assumed where its row did not say: one line per distinct set of
    assumptions, with the rows that share it."""
    lines: list[str] = []
    seen: set[str] = set()
    for r in results:
        if not r.primary:
            continue
        key = "; ".join(r.assumptions)
        if key in seen:
            continue
        seen.add(key)
        rows = [str(x.index) for x in results if x.primary and "; ".join(x.assumptions) == key]
        lines.append(f"rows {','.join(rows)}: {key or '(none)'}")
    return "\n".join(lines)


# ------------------------------------------------------------------- own 2 x H200 measurements

OWN_CSV = Path("traces/h200x2/parallel.csv.gz")
"""Measured DDP / TP / PP / FSDP steps on two NVLinked H200s (relative to the repository root)."""


def _find_own(path: str | Path | None) -> Path | None:
    if path is not None:
        return Path(path)
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        p = base / OWN_CSV
        if p.is_file():
            return p
    return None


def _own_scenario(rec: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The scenario of one 2 x H200 measurement (``tools/bench_parallel.py``; see traces/README.md)."""
    strat = rec["strategy"]
    mb = int(rec["micro_batch"])
    n_micro = int(rec["n_micro"])
    world = int(rec["world"])
    notes: list[str] = []
    par: dict[str, Any] = {"tp": 1, "pp": 1, "dp": 1, "dp_overlap": True}
    gpus = world
    gb = int(rec["global_batch"])
    if strat == "single":
        gpus, gb = 1, mb
        notes.append("one replica per GPU, no communication: priced as 1 GPU")
    elif strat == "ddp":
        par["dp"] = world
    elif strat == "tp":
        # tools/gpt.py keeps the embedding, norms and LM head replicated on both TP ranks
        par.update(tp=world, vocab_parallel=False)
    elif strat == "pp":
        # tools/bench_parallel.py's own GPipe loop of isend / irecv, not torch.distributed.pipelining
        par.update(pp=world, schedule="gpipe", pipeline_library="own")
        notes.append("fp32 activations between stages in the measured code (simcore sends bf16)")
    elif strat == "fsdp":
        par.update(dp=world, fsdp=True)
    else:
        raise ValueError(f"unknown strategy {strat!r}")
    sc: dict[str, Any] = {
        "name": f"h200x2 {strat} {rec['name']} n_micro={n_micro}",
        "kind": "training",
        "cluster": {"system": "hgx-h200", "gpus": gpus},
        "model": {
            "name": rec["name"],
            "layers": int(rec["layers"]),
            "hidden": int(rec["hidden"]),
            "heads": int(rec["heads"]),
            "ffn_hidden": int(rec["ffn_hidden"]),
            "vocab": int(rec["vocab"]),
            "seq_len": int(rec["seq_len"]),
            "activation": "gelu",
            "norm": "layernorm",
            "tied_embeddings": False,
        },
        "training": {
            "micro_batch": mb,
            "global_batch": gb,
            "precision": "bf16",
            "optimizer": "adamw",
            "recompute": "none",
            "param_dtype": "fp32",
            # tools/bench_parallel.py: AdamW fused=True (the impl column), SDPA forced to flash (tools/gpt.py)
            "optimizer_impl": "fused" if "fused" in rec.get("impl", "fused") else "foreach",
        },
        "parallel": par,
        "runtime": {"framework": "eager", "attention_backend": "flash"},
    }
    return sc, notes


def own_report(
    path: str | Path | None = None, engine: str = "analytic", calibration: str | None = None
) -> dict[str, Any]:
    """Predict the 2 x H200 measurements (``traces/h200x2/parallel.csv.gz``: single, DDP, TP, PP,
    FSDP steps of two GPTs) and compare step times. Error = measured/predicted - 1 (throughput)."""
    import gzip

    from simcore.prediction import TrainingResult, predict
    from simcore.specs.resolve import scenario_from_dict

    p = _find_own(path)
    if p is None or not p.is_file():
        return {"available": False, "path": str(OWN_CSV), "rows": [], "summary": {}}
    opener: Any = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", newline="") as fh:
        recs = [r for r in csv.DictReader(fh) if r.get("status", "ok") == "ok"]
    rows: list[dict[str, Any]] = []
    for rec in recs:
        sc, notes = _own_scenario(rec)
        if calibration is not None:
            sc["calibration"] = calibration
        res = predict(scenario_from_dict(sc), engine=engine)
        assert isinstance(res, TrainingResult)
        measured = float(rec["step_time_max_s"] or rec["step_time_s"])
        bd = res.breakdown
        rows.append(
            {
                "strategy": rec["strategy"],
                "model": rec["name"],
                "micro_batch": int(rec["micro_batch"]),
                "n_micro": int(rec["n_micro"]),
                "measured_s": measured,
                "predicted_s": res.step_time_s,
                "error": measured / res.step_time_s - 1.0,
                "measured_mem_gib": float(rec["peak_mem_max_bytes"]) / 1024.0**3,
                "predicted_mem_gib": res.memory_per_gpu_bytes / 1024.0**3,
                "fractions": _fractions(bd, res.step_time_s),
                "notes": notes,
            }
        )
    errs = [abs(r["error"]) for r in rows]
    summary: dict[str, Any] = {}
    if errs:
        worst = max(rows, key=lambda r: abs(r["error"]))
        summary = {
            "rows": len(rows),
            "median_abs_error": statistics.median(errs),
            "worst_abs_error": abs(worst["error"]),
            "worst": f"{worst['strategy']} {worst['model']} n_micro={worst['n_micro']}",
            "within_10pct": sum(e <= 0.10 for e in errs),
            "meets_target": max(errs) <= TARGET_MEDIAN,
        }
    return {"available": True, "path": str(p), "rows": rows, "summary": summary}


def format_own(doc: dict[str, Any]) -> str:
    """Plain-text table of :func:`own_report`."""
    if not doc.get("available"):
        return f"own 2xH200 runs: {doc['path']} not found (not collected yet)"
    lines = [
        f"own 2xH200 runs ({doc['path']}): step time, measured vs predicted",
        f"{'strategy':<8} {'model':<9} {'mb':>3} {'n_mb':>4} {'measured ms':>12} {'predicted ms':>13} "
        f"{'err%':>7} {'mem GiB meas/pred':>18}",
    ]
    for r in doc["rows"]:
        lines.append(
            f"{r['strategy']:<8} {r['model']:<9} {r['micro_batch']:>3} {r['n_micro']:>4} "
            f"{1e3 * r['measured_s']:>12.1f} {1e3 * r['predicted_s']:>13.1f} {100 * r['error']:>+7.1f} "
            f"{r['measured_mem_gib']:>8.1f}/{r['predicted_mem_gib']:<8.1f}"
        )
    s = doc["summary"]
    if s:
        lines.append(
            f"median |err| {100 * s['median_abs_error']:.1f}%  worst {100 * s['worst_abs_error']:.1f}% "
            f"({s['worst']})  within 10%: {s['within_10pct']}/{s['rows']}  target: every run <= 10%"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ the planner's claims over recipes

PLAN_CLAIM_TABLES = (DATA_DIR / "published_training_2025.csv", DATA_DIR / "published_training_mbridge.csv")
"""The tables of tuned recipes :func:`plan_claims` checks by default (Megatron-Bridge 25.11, 26.02-26.08)."""
CLAIM_THRESHOLD = 0.10
"""A predicted speed-up over a tuned recipe above this is a claim the docs must explain (issue 44 item 8)."""
PLAN_CLAIM_SPACE: dict[str, Any] = {"schedule": ("1f1b", "interleaved"), "zero": (0, 1, 3)}
"""The search of :func:`plan_claims`: ``simcore plan``'s space narrowed to what Megatron-Core runs, the
software the recipes were tuned in: its pipeline schedules (1F1B and interleaved; no zero-bubble, DualPipe or
GPipe) and its data-parallel sharding (none, the distributed optimizer as ZeRO-1, Megatron-FSDP as ZeRO-3).
Everything else (TP, PP, CP, DP, EP and expert-TP folding, virtual stages, micro-batch, recompute, sequence
parallelism, TP overlap) is searched as ``simcore plan`` searches it."""


@dataclass
class PlanClaim:
    """The planner's best layout for one published recipe's job against the recipe's own layout, both
    predicted by simcore (analytic engine)."""

    table: str
    """The CSV's file name (row indices count per table)."""
    index: int
    source: str
    model: str
    gpus: int
    system: str
    precision: str
    moe: bool
    recipe: str
    """The recipe's layout (:func:`_recipe_str`)."""
    best: str
    """The planner's best layout (``simcore plan``'s summary), ``""`` when none fits in memory."""
    published_tokens_per_s_per_gpu: float
    recipe_tokens_per_s_per_gpu: float
    """Predicted for the recipe's layout (the row's own prediction)."""
    best_tokens_per_s_per_gpu: float
    claim: float
    """Predicted speed-up of the best layout over the recipe: ``recipe step / best step - 1`` (same GPUs and
    global batch, so the same ratio of tokens per second); NaN where no layout fits."""
    row_error: float
    """The recipe row's own error (``predicted / published - 1`` of throughput; < 0: simcore pessimistic)."""
    recipe_step_s: float
    best_step_s: float
    recipe_fractions: dict[str, float]
    """Shares of the predicted step (:func:`_fractions`: compute, recompute, tp_comm (TP, CP and EP), bubble,
    dp_comm, optimizer)."""
    best_fractions: dict[str, float]
    recipe_memory_gib: float
    best_memory_gib: float
    capacity_gib: float
    """Device memory the planner allows per GPU (capacity less the reserved bytes)."""
    verdict: str
    """``""`` (claim at most :data:`CLAIM_THRESHOLD`), else ``beyond row error`` or ``within row error``: a
    claim ``1 + claim`` not above the row's own error as a speed factor, ``max(1 + e, 1 / (1 + e))``, is not a
    finding (a recipe predicted 15 % slow explains a claim of up to 17.6 %); ``, recipe over memory`` added
    where the recipe itself is predicted not to fit (the planner may not pick it)."""
    problem: str | None = None
    """Why the planner gave no layout for the job (none fits in memory, or its one-line error)."""


def _job_key(table: str, sc: dict[str, Any]) -> str:
    """One plan per job: the scenario without its layout (parallel plan, micro-batch, recompute) and name; the
    recipe's other settings (precision, dispatcher, A2A overlap, offload, recompute modules) stay in it."""
    tr = {k: v for k, v in sc["training"].items() if k not in ("micro_batch", "recompute")}
    rest = {k: v for k, v in sc.items() if k not in ("name", "parallel", "training")}
    return json.dumps([table, rest, tr], sort_keys=True)


def _recipe_str(row: PublishedRow) -> str:
    """A row's layout (:func:`_layout_str`) with its expert parallelism."""
    ep = int(row.scenario["parallel"].get("ep", 1))
    return _layout_str(row.scenario) + (f" ep{ep}" if ep > 1 else "")


def _across_releases(results: list[RowResult], rows: dict[int, PublishedRow]) -> list[RowResult]:
    """The rows of one job (system, model, GPUs, global batch, sequence, precision) that releases ran with
    different layouts, as one job each: per distinct layout the row of the latest release (releases sort as
    their names do, ``26.02 < 26.02.01 < 26.04``). Their order mixes the layouts' effect with the software's
    (the same layout moves by up to 40 % between releases)."""
    latest: dict[tuple[str, str], RowResult] = {}
    for r in results:
        job = json.loads(r.job)
        job[0] = r.system
        key = (json.dumps(job), _recipe_str(rows[r.index]))
        if key not in latest or r.release > latest[key].release:
            latest[key] = replace(r, job=key[0], source=f"{r.system} (latest release)")
    return list(latest.values())


def _row_space(row: PublishedRow, space: dict[str, Any]) -> dict[str, Any]:
    """``space`` with what the row's software does not let the planner choose: no TP communication overlap
    where the recipe runs TP without it, or where the row's software turns it off (:func:`_no_tp_overlap`)."""
    p, tr = row.scenario["parallel"], row.scenario["training"]
    if (int(p["tp"]) > 1 and not p["tp_overlap"]) or _no_tp_overlap(tr["precision"], row.source):
        return {**space, "tp_overlap": (False,)}
    return space


def plan_claims(
    tables: list[str | Path] | None = None,
    options: dict[str, Any] | None = None,
    calibration: str | None = None,
) -> tuple[list[PlanClaim], dict[str, Any]]:
    """For each predicted published recipe of ``tables`` (default :data:`PLAN_CLAIM_TABLES`), run the planner
    (:func:`simcore.planning.plan`, objective time, search :data:`PLAN_CLAIM_SPACE` unless ``options``) on
    the recipe's job (model, GPUs, global batch, sequence, precision, system and the recipe's settings that
    are not layout choices, :func:`_row_space` too) and compare its best layout with the recipe's layout.
    One plan per job: the rows of a job with several layouts share it. Returns the claims (one per predicted
    configuration) and per table the rank fidelity of the rows (:func:`rank_fidelity`; also across releases,
    :func:`_across_releases`) and the rows not predicted. A job the planner rejects keeps its claim NaN
    with the reason in ``problem``."""
    from simcore.memory import RESERVED_BYTES
    from simcore.planning import plan
    from simcore.planning.plan import scenario_for
    from simcore.prediction import TrainingResult, predict
    from simcore.specs.registry import default_registry
    from simcore.specs.resolve import scenario_from_dict

    reg = default_registry()
    space = PLAN_CLAIM_SPACE if options is None else options
    claims: list[PlanClaim] = []
    per_table: dict[str, Any] = {}
    for path in tables if tables is not None else PLAN_CLAIM_TABLES:
        name = Path(path).name
        rows = {r.index: r for r in load_published(path)}
        results = predict_rows(list(rows.values()), calibration=calibration)
        prim = [r for r in results if r.primary]
        predicted = [r for r in prim if r.problem is None]
        per_table[name] = {
            "rank_fidelity": rank_fidelity(predicted),
            "releases": sorted({r.release for r in predicted}),
            "across_releases": rank_fidelity(_across_releases(predicted, rows)),
            "not_predicted": [{"row": r.index, "problem": r.problem} for r in prim if r.problem is not None],
        }
        plans: dict[str, tuple[dict[str, Any] | None, TrainingResult | None, str | None]] = {}
        for r in prim:
            if r.problem is not None:
                continue
            data = dict(rows[r.index].scenario)
            if calibration is not None:
                data["calibration"] = calibration
            row_space = _row_space(rows[r.index], space)
            key = _job_key(name, data) + json.dumps(row_space, sort_keys=True)
            if key not in plans:
                best: dict[str, Any] | None = None
                pr: TrainingResult | None = None
                why: str | None = "no layout fits in memory"
                try:
                    sc = scenario_from_dict(data, reg)
                    res = plan(sc, objective="time", top=1, options=row_space, des_top=0)
                    if res.top:
                        best = res.top[0]
                        p = predict(scenario_for(sc, {**best["layout"], "gpus": best["gpus"]}))
                        assert isinstance(p, TrainingResult)
                        pr, why = p, None
                except SimcoreError as e:
                    why = f"not planned: {e}"
                plans[key] = (best, pr, why)
            best, pr, why = plans[key]
            dims = rows[r.index].dims
            cap = reg.device(reg.system(r.system).device).memory.capacity - RESERVED_BYTES
            tok = dims["B"] * dims["s"] / r.gpus
            pub_step = step_from_metric_row(r)
            if best is None or pr is None:
                best_str, best_step, best_fr, best_mem = "", math.nan, {}, math.nan
            else:
                best_str, best_step = str(best["summary"]), pr.step_time_s
                best_fr = _fractions(pr.breakdown, best_step)
                best_mem = pr.memory_per_gpu_bytes / 1024.0**3
            claim = r.step_time_s / best_step - 1.0
            verdict = ""
            if claim > CLAIM_THRESHOLD:
                # the row's error as a speed factor, either way (under-predicted by 15 %: x1.176)
                bias = max(1.0 + r.error, 1.0 / (1.0 + r.error)) - 1.0
                verdict = "beyond row error" if claim > bias else "within row error"
                if not r.fits_in_memory:
                    verdict += ", recipe over memory"
            claims.append(
                PlanClaim(
                    table=name,
                    index=r.index,
                    source=r.source,
                    model=r.model,
                    gpus=r.gpus,
                    system=r.system,
                    precision=r.precision,
                    moe=r.moe,
                    recipe=_recipe_str(rows[r.index]),
                    best=best_str,
                    published_tokens_per_s_per_gpu=tok / pub_step,
                    recipe_tokens_per_s_per_gpu=tok / r.step_time_s,
                    best_tokens_per_s_per_gpu=tok / best_step,
                    claim=claim,
                    row_error=r.error,
                    recipe_step_s=r.step_time_s,
                    best_step_s=best_step,
                    recipe_fractions=r.fractions,
                    best_fractions=best_fr,
                    recipe_memory_gib=r.memory_gib,
                    best_memory_gib=best_mem,
                    capacity_gib=cap / 1024.0**3,
                    verdict=verdict,
                    problem=why,
                )
            )
    return claims, per_table


def summarize_claims(
    claims: list[PlanClaim], per_table: dict[str, Any], options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """How many recipes the planner claims to beat by more than :data:`CLAIM_THRESHOLD` (and of those: how
    many distinct layouts of a job, the releases that ran one counted once; how many beyond the row's own
    error; how many where the recipe is predicted over memory), the median and largest claim, dense and MoE
    apart, each table's rank fidelity and rows not predicted, and the search (``options`` as given to
    :func:`plan_claims`)."""

    def stats(cs: list[PlanClaim]) -> dict[str, Any]:
        ok = [c for c in cs if math.isfinite(c.claim)]
        big = [c for c in ok if c.claim > CLAIM_THRESHOLD]
        top = max(ok, key=lambda c: c.claim, default=None)
        return {
            "recipes": len(cs),
            "no_layout_fits": len(cs) - len(ok),
            "median_claim": statistics.median(c.claim for c in ok) if ok else math.nan,
            "max_claim": top.claim if top else math.nan,
            "max_label": f"{top.table} row {top.index}: {top.source} {top.model} {top.gpus} GPUs"
            if top
            else "",
            "over_threshold": len(big),
            "distinct_over_threshold": len({(c.system, c.model, c.gpus, c.precision, c.recipe) for c in big}),
            "beyond_row_error": sum(c.verdict.startswith("beyond") for c in big),
            "recipe_over_memory": sum("over memory" in c.verdict for c in big),
        }

    return {
        "all": stats(claims),
        "dense": stats([c for c in claims if not c.moe]),
        "moe": stats([c for c in claims if c.moe]),
        "threshold": CLAIM_THRESHOLD,
        "search": {k: list(v) for k, v in (PLAN_CLAIM_SPACE if options is None else options).items()},
        "tables": per_table,
    }


_WHY = {
    "compute": "compute",
    "bubble": "bubble",
    "tp_comm": "tp/cp/ep",
    "dp_comm": "dp",
    "recompute": "recompute",
    "optimizer": "optimizer",
}


def _why(step_s: float, f: dict[str, float]) -> str:
    """A step's parts in milliseconds (its exposed time: compute, bubble, TP/CP/EP and DP communication,
    recompute, optimizer)."""
    if not f:
        return "-"
    parts = ", ".join(f"{label} {1e3 * step_s * f[k]:.0f}" for k, label in _WHY.items())
    return f"{1e3 * step_s:.0f} ms: {parts}"


def format_claims(claims: list[PlanClaim], summary: dict[str, Any]) -> str:
    """Plain-text table of :func:`plan_claims` (tokens/s/GPU published, predicted for the recipe and for the
    planner's best; memory GiB of both against the capacity) with each claim above the threshold followed
    by the two predicted steps' parts (:func:`_why`), then :func:`summarize_claims`."""
    hdr = (
        f"{'table':<8} {'#':>3} {'model':<15} {'gpus':>5} {'system':<11} {'prec':<11} {'recipe':<28} "
        f"{'planner best':<58} {'pub':>7} {'recipe':>7} {'best':>7} {'claim':>7} {'err%':>6} "
        f"{'GiB rec/best/cap':>16}  verdict"
    )
    lines = [hdr, "-" * len(hdr)]
    for c in claims:
        lines.append(
            f"{c.table.removeprefix('published_training_').removesuffix('.csv')[:8]:<8} {c.index:>3} "
            f"{c.model[:15]:<15} {c.gpus:>5} {c.system[:11]:<11} {c.precision[:11]:<11} {c.recipe[:28]:<28} "
            f"{(c.best or c.problem or '')[:58]:<58} {c.published_tokens_per_s_per_gpu:>7.0f} "
            f"{c.recipe_tokens_per_s_per_gpu:>7.0f} {c.best_tokens_per_s_per_gpu:>7.0f} "
            f"{100 * c.claim:>+6.1f}% {100 * c.row_error:>+6.1f} "
            f"{c.recipe_memory_gib:>5.0f}/{c.best_memory_gib:>4.0f}/{c.capacity_gib:>4.0f}  {c.verdict}"
        )
        if c.verdict:
            lines.append(f"{'':>13}why: recipe {_why(c.recipe_step_s, c.recipe_fractions)}")
            lines.append(f"{'':>13}     best   {_why(c.best_step_s, c.best_fractions)}")
    s = summary
    lines.append("")
    narrowed = "; ".join(f"{k} {', '.join(str(v) for v in vs)}" for k, vs in s["search"].items())
    lines.append(f"search: simcore plan's space, {narrowed or 'in full'}; one plan per job")
    for kind in ("all", "dense", "moe"):
        k = s[kind]
        if not k["recipes"]:
            continue
        lines.append(
            f"{kind:<5} recipes {k['recipes']:>3}: planner claims > {100 * s['threshold']:.0f}% on "
            f"{k['over_threshold']} ({k['distinct_over_threshold']} distinct layouts of a job; "
            f"{k['beyond_row_error']} beyond the row's own error, {k['recipe_over_memory']} with the recipe "
            f"predicted over memory); median claim {100 * k['median_claim']:+.1f}%, largest "
            f"{100 * k['max_claim']:+.1f}% ({k['max_label']})"
            + (f"; no layout fits: {k['no_layout_fits']}" if k["no_layout_fits"] else "")
        )
    for name, t in s["tables"].items():
        rf = t["rank_fidelity"]
        if rf.get("jobs"):
            lines.append(
                f"{name}: rank fidelity over {len(rf['jobs'])} job(s) with several layouts: Spearman "
                f"{rf['spearman']:.2f}, {rf['pairs_ordered']}/{rf['pairs']} layout pairs ordered right"
            )
        else:
            lines.append(f"{name}: no job with several layouts (no rank fidelity)")
        rx = t["across_releases"]
        if len(t["releases"]) > 1 and rx.get("jobs"):
            lines.append(
                f"{name}: across releases (one row per distinct layout of a job, the latest release's; "
                f"software changes included): Spearman {rx['spearman']:.2f} over {len(rx['jobs'])} job(s), "
                f"{rx['pairs_ordered']}/{rx['pairs']} layout pairs ordered right"
            )
            for j in rx["jobs"]:
                lines.append(f"  {j['job']:<52} layouts {j['layouts']:>2}  Spearman {j['spearman']:+.2f}")
        if t["not_predicted"]:
            lines.append(f"{name}: {len(t['not_predicted'])} configuration(s) not predicted, so not planned")
    return "\n".join(lines)
