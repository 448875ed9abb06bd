"""Scenario specs: what to run (model, training or inference), on what (cluster), and how
(parallel plan, runtime)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from simcore.specs.docstrings import field_docstrings
from simcore.specs.hardware import FabricSpec
from simcore.specs.quantities import Int, Seconds, Spec, Watts, integer_value
from simcore.specs.serving import ServingSpec
from simcore.specs.system import CheckpointSpec, DataLoaderSpec, ReliabilitySpec, SharingSpec, StorageSpec

Precision = Literal["bf16", "fp16", "fp8", "fp32"]
InferencePrecision = Literal["bf16", "fp16", "fp8", "fp4", "fp32"]
"""Weights and GEMM inputs of inference: ``fp8`` (per-tensor scaled E4M3, as FP8 checkpoints ship) and
``fp4`` (NVFP4 block-scaled, Blackwell devices only) besides the 16/32-bit types."""

TrainingPrecision = Literal[
    "bf16", "fp16", "fp8", "fp32", "fp8_delayed", "fp8_current", "fp8_blockwise", "mxfp8", "nvfp4"
]
"""Training precision recipes (:mod:`simcore.workload.precision`): ``fp8`` is ``fp8_delayed``."""


class ClusterSpec(Spec):
    """Which systems and how many. Give ``nodes`` (systems) or ``gpus`` (total), not both needed."""

    system: str
    nodes: Int | None = Field(default=None, gt=0)
    gpus: Int | None = Field(default=None, gt=0)
    fabric: FabricSpec | None = None
    storage: str | StorageSpec | None = Field(
        default=None,
        description=(
            "Where checkpoints go: a built-in storage system (``hardware_specs/storage``, e.g. "
            "``llama3-tectonic``) or its fields inline (aggregate write/read bandwidth, per-node "
            "bandwidth, GDS). Needed by ``runtime.checkpoint``."
        ),
    )
    power_cap: Watts | None = Field(
        default=None,
        gt=0,
        description=(
            "Board power limit per GPU in watts (``nvidia-smi -pl``), at most the device's TDP (or the "
            "limit of ``cluster.cooling``): the SM "
            "clock drops until the step's average draw fits it (docs/system.md, 'Power caps'). "
            "``None``: the TDP."
        ),
    )
    cooling: Literal["air", "liquid"] | None = Field(
        default=None,
        description=(
            "How the GPUs are cooled: the board power limit they sustain under load is the device's "
            "figure for that cooling (``hardware_specs/cooling``: B200 1000 W air, 1200 W liquid; H100 "
            "and H200 700 W either way), and the SM clock is the one whose average draw fits it "
            "(docs/system.md, 'Cooling'). ``None``: the device's TDP (the system's own cooling)."
        ),
    )
    sharing: SharingSpec | None = Field(
        default=None,
        description=(
            "Inference: several processes, each running this job with its own weights and KV cache, "
            "share each GPU by time-slicing or MPS: each one's decode step and the GPU's throughput "
            "(docs/system.md, 'MPS and time-slicing'). ``None``: one process per GPU."
        ),
    )
    mig: str | None = Field(
        default=None,
        description=(
            "Run on one MIG slice of each GPU (``1g.10gb`` ... ``7g.80gb`` on H100, ``1g.18gb`` ... on "
            "H200; ``hardware_specs/mig``): the slice's SMs, memory, L2 and memory bandwidth. ``None``: "
            "whole GPUs."
        ),
    )


class MoESpec(Spec):
    """The mixture-of-experts layers of a model (``model.moe``): a router picks ``top_k`` of ``experts`` routed
    experts per token, beside ``shared_experts`` every token runs (docs/parallelism.md, MoE)."""

    # each field's docstring is its description in the JSON Schema (``simcore schema``)
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    experts: Int = Field(gt=0)
    """Routed experts per MoE layer (Megatron-Core's ``num_moe_experts``, HF ``n_routed_experts``)."""
    top_k: Int = Field(gt=0)
    """Routed experts each token visits (``moe_router_topk``, HF ``num_experts_per_tok``)."""
    shared_experts: Int = Field(default=0, ge=0)
    """Experts every token runs besides the routed ones, each ``expert_ffn_hidden`` wide (HF
    ``n_shared_experts``; Megatron-Core's ``moe_shared_expert_intermediate_size`` is their summed width)."""
    expert_ffn_hidden: Int = Field(gt=0)
    """Intermediate width of one expert's MLP (``moe_ffn_hidden_size``, HF ``moe_intermediate_size``)."""
    dense_layers: Int = Field(default=0, ge=0)
    """Leading layers with a dense MLP instead of experts."""
    expert_bias: bool = False
    """The routed experts' projections carry biases (GPT-OSS). Unless ``runtime.moe_fused_mlp``, Megatron-Core's
    ``TEGroupedMLP`` adds the output projection's bias outside the GEMM, per local expert, scaled by the
    fp32 router probability, then concatenates and casts back (``_apply_bias``): four eager passes over the
    routed rows (docs/parallelism.md, "GPT-OSS's experts")."""
    activation_clamp: float | None = Field(default=None, gt=0)
    """The experts' gated activation (``activation: swiglu``) clamps its inputs at this limit (GPT-OSS: 7, on
    the gate's upper side and both sides of the linear half). Unless ``runtime.moe_fused_mlp``, Megatron-Core clamps the two
    halves of the gate/up output and concatenates them before its fused activation kernel
    (``weighted_bias_quick_geglu_impl``): two eager passes over the routed rows' ``2 x expert_ffn_hidden``
    values (docs/parallelism.md, "GPT-OSS's experts")."""
    capacity_factor: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Training: each expert takes at most ``ceil(tokens x top_k / experts x capacity_factor)`` of a rank's "
            "routed token copies and the router drops the rest (Megatron-Core's ``moe_expert_capacity_factor``, "
            "``get_capacity``): the busiest expert computes and exchanges ``min(imbalance, capacity_factor)`` "
            "times the mean rows. Not Megatron's ``moe_expert_rank_capacity_factor`` (HybridEP's per-rank receive "
            "budget, which drops nothing once the step reruns dropless). ``None``: dropless, Megatron-Core's "
            "default. Serving engines route dropless: an inference or serving scenario that sets it is an error "
            "(docs/parallelism.md, 'Capacity factor')."
        ),
    )
    pad_to_capacity: bool = Field(
        default=False,
        description=(
            "Training with ``capacity_factor``: every expert's input is padded to its capacity (Megatron-Core's "
            "``moe_pad_expert_input_to_capacity``, next to the factor in its TransformerConfig): the permute, the "
            "dispatch and combine all-to-alls and the grouped GEMMs move ``capacity x experts`` rows a rank "
            "whatever the routing (static shapes, no host sync for the split sizes). Not with "
            "``runtime.moe_dispatcher: deepep`` (Megatron-Core rejects it). Default off, as in Megatron-Core "
            "(docs/parallelism.md, 'Capacity factor')."
        ),
    )
    imbalance: float = Field(default=1.0, ge=1.0)
    """Tokens on the busiest expert over the mean (1 = perfectly balanced)."""
    hash_layers: Int = Field(
        default=0,
        ge=0,
        description=(
            "Leading MoE layers routed by a fixed token-id -> experts table instead of a learned router "
            "(DeepSeek-V4's hash routing, Megatron-Core's ``moe_n_hash_layers``): no router GEMM, softmax or top-k "
            "on them, and each expert's share of the tokens is fixed (priced balanced). 0: every MoE layer routes "
            "with its router (docs/hardware.md, 'DeepSeek-V4')."
        ),
    )
    latent_dim: Int | None = Field(
        default=None,
        gt=0,
        description=(
            "LatentMoE (Nemotron 3 Super / Ultra; Megatron-Core's ``moe_latent_size``): after the router (on the "
            "hidden states) a shared ``hidden -> latent_dim`` projection, the dispatch, routed experts of input and "
            "output width ``latent_dim`` and the combine all in the latent width, then a shared ``latent_dim -> "
            "hidden`` projection; the shared experts stay at the hidden width. None: experts at the hidden width "
            "(docs/hardware.md, 'LatentMoE')."
        ),
    )

    @model_validator(mode="after")
    def _k(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.pad_to_capacity and self.capacity_factor is None:
            raise ValueError("pad_to_capacity needs a capacity_factor (each expert's input is padded to its capacity)")
        return self


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    q_lora_rank: Int = Field(gt=0)
    kv_lora_rank: Int = Field(gt=0)
    qk_nope_head_dim: Int = Field(gt=0)
    qk_rope_head_dim: Int = Field(gt=0)
    v_head_dim: Int = Field(gt=0)


class CSASpec(Spec):
    """DeepSeek-V4's hybrid attention (Megatron-Core's ``dsv4_hybrid`` variant): per layer, queries of
    ``heads x head_dim`` from a low-rank latent, one shared key/value head of ``head_dim`` (MQA), attention over
    a sliding window of raw keys plus compressed keys (``compress_ratios``), and a grouped low-rank output
    projection (docs/hardware.md, 'DeepSeek-V4')."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    compress_ratios: list[Annotated[Int, Field(ge=0)]] = Field(min_length=1)
    """Per decoder layer, tokens pooled into one compressed key/value entry (``compress_ratios`` of the HF
    config, one per layer): 0 a sliding-window layer only; ``sparse_ratio`` compressed sparse attention (CSA:
    the lightning indexer picks ``indexer_topk`` of the compressed entries); any other ratio, at least 2,
    heavily compressed attention (HCA: every compressed entry). Its length is ``layers``."""
    sparse_ratio: Int = Field(default=4, gt=0)
    """The ratio of the CSA layers: their compressor pools overlapping windows (two projections of twice the
    width) and an indexer selects their entries (DeepSeek-V4 ``Compressor`` / ``Indexer``: ``compress_ratio == 4``)."""
    window: Int = Field(default=128, gt=0)
    """Raw keys every query attends besides the compressed ones (``sliding_window``)."""
    q_lora_rank: Int = Field(gt=0)
    """Query latent width (``q_lora_rank``): ``hidden -> q_lora_rank -> heads x head_dim``."""
    qk_rope_head_dim: Int = Field(default=64, gt=0)
    """Rotary dims of ``head_dim`` (``qk_rope_head_dim``: the last of each query's and key's ``head_dim``, below it).
    Checked, not priced apart: the rotation is fused into the kernels around it, as the other attention's in
    Megatron-Core."""
    o_groups: Int = Field(gt=0)
    """Head groups of the grouped low-rank output projection (``o_groups``): each group's
    ``heads / o_groups x head_dim`` outputs project to ``o_lora_rank``, then ``o_groups x o_lora_rank -> hidden``."""
    o_lora_rank: Int = Field(gt=0)
    """Rank of each group's output projection (``o_lora_rank``)."""
    indexer_heads: Int = Field(gt=0)
    """Lightning-indexer heads (``index_n_heads``)."""
    indexer_head_dim: Int = Field(gt=0)
    """Lightning-indexer head dimension (``index_head_dim``)."""
    indexer_topk: Int = Field(gt=0)
    """Compressed entries each query of a CSA layer attends (``index_topk``)."""

    @model_validator(mode="after")
    def _ratios(self) -> CSASpec:
        bad = sorted({r for r in self.compress_ratios if r == 1 and r != self.sparse_ratio})
        if bad:
            raise ValueError(
                f"compress_ratios has {bad}: a ratio is 0 (window only), sparse_ratio ({self.sparse_ratio}) or, "
                "for a heavily compressed layer, at least 2 tokens pooled into one entry"
            )
        return self


class MambaSpec(Spec):
    """The Mamba-2 mixer (SSD, Dao & Gu 2024) of a model's ``M`` layers (``model.hybrid_pattern``),
    as Megatron-Core's ``MambaMixer`` and Hugging Face's ``NemotronH`` configs give it
    (docs/compute.md, "Mamba-2 layers and hybrid models")."""

    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    heads: Int = Field(gt=0)
    """SSM heads ``H`` (``mamba_num_heads``); the inner width is ``heads x head_dim``."""
    head_dim: Int = Field(default=64, gt=0)
    """Channels per head ``P`` (``mamba_head_dim``; Megatron's and mamba_ssm's default 64)."""
    state_dim: Int = Field(default=128, gt=0)
    """State size ``N`` per head and channel (``ssm_state_size``, ``mamba_state_dim``; default 128)."""
    groups: Int = Field(default=8, gt=0)
    """Groups ``G`` sharing one ``B`` and ``C`` projection (``n_groups``, ``mamba_num_groups``; Megatron's
    default 8)."""
    conv_kernel: Int = Field(default=4, gt=0)
    """Width of the causal depthwise convolution over ``x``, ``B``, ``C`` (``conv_kernel``, ``d_conv``: 4)."""
    chunk_size: Int = Field(default=128, gt=0)
    """Tokens per chunk of the SSD scan (Megatron-Core's ``MambaMixer`` default 128, the Nemotron-H configs'
    ``chunk_size``; mamba_ssm's own ``Mamba2`` module uses 256)."""

    @model_validator(mode="after")
    def _groups(self) -> MambaSpec:
        if self.heads % self.groups != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of groups ({self.groups})")
        return self


HYBRID_SYMBOLS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
"""The layer symbols of ``model.hybrid_pattern`` (Megatron-Core's ``hybrid_override_pattern``)."""


class ModelSpec(Spec):
    """A decoder-only transformer. ``preset`` fills the fields from ``hardware_specs/models``;
    fields given beside it override the preset."""

    # each field's docstring is its description in the JSON Schema (``simcore schema``)
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    preset: str | None = None
    name: str = "custom"
    layers: Int = Field(gt=0)
    hidden: Int = Field(gt=0)
    heads: Int = Field(gt=0)
    kv_heads: Int | None = Field(default=None, gt=0)
    head_dim: Int | None = Field(default=None, gt=0)
    ffn_hidden: Int = Field(gt=0)
    vocab: Int = Field(gt=0)
    seq_len: Int = Field(gt=0)
    activation: Literal["gelu", "swiglu", "squared_relu"] = "gelu"
    """MLP activation: ``gelu`` (two matrices), ``swiglu`` (gated, three matrices) or ``squared_relu``
    (``relu(x)**2``, two matrices: Nemotron-4, Megatron's ``squared_relu``)."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    tied_embeddings: bool = False
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    vision_params: Int = Field(default=0, ge=0)
    """Parameters of a multimodal checkpoint's vision encoder and projector (Llama 4's), which inference engines
    load beside the language model and keep on every GPU in 16 bits (quantized checkpoints leave them
    unquantized); they hold memory, not time, for text requests. 0: a text-only model."""
    mamba: MambaSpec | None = Field(
        default=None, description="The Mamba-2 mixer of the ``M`` layers of ``hybrid_pattern``."
    )
    csa: CSASpec | None = Field(
        default=None,
        description=(
            "DeepSeek-V4's compressed sparse / heavily compressed / sliding-window attention, per layer "
            "(replaces multi-head attention; ``head_dim`` is its query and shared key/value head width)."
        ),
    )
    residual_streams: Int = Field(
        default=1,
        gt=0,
        description=(
            "Parallel residual streams of manifold-constrained hyper-connections (DeepSeek-V4's ``hc_mult``, "
            "Megatron-Core's ``num_residual_streams``): each layer keeps ``residual_streams x hidden`` per token "
            "and mixes the streams before and after each block. 1: a plain residual."
        ),
    )
    hybrid_pattern: str | None = Field(
        default=None,
        description=(
            "A hybrid model's layers, one symbol each (Megatron-Core's ``hybrid_override_pattern``, "
            "Nemotron-H's config): ``M`` a Mamba-2 layer (norm, mixer, residual), ``*`` an attention layer "
            "(norm, self-attention, residual), ``-`` an MLP layer (norm, MLP, residual), ``E`` an MoE layer "
            "(norm, ``model.moe``, residual). Its length is ``layers``. ``None``: every layer is a "
            "transformer layer (attention then MLP or MoE). Costs sum over the pattern and pipeline stages "
            "hold their slice of it (docs/compute.md, 'Mamba-2 layers and hybrid models')."
        ),
    )

    mtp_layers: Int = Field(default=0, ge=0)
    """Multi-token prediction depth (DeepSeek-V3's MTP modules, Megatron-Core's ``mtp_num_layers``): each
    depth adds, on the last pipeline stage, the embedding of the tokens shifted by it, two RMSNorms, a
    ``2h -> h`` projection, one more transformer layer (an MoE layer in an MoE model), the shared LM
    head and its cross-entropy loss, forward and backward, every micro-batch; in memory, that depth's
    parameters' state and its saved activations and loss softmax on the last rank (with pipeline stages, an
    embedding copy there too: ``simcore.engine.training.mtp_memory``; docs/parallelism.md, "Multi-token
    prediction"). 0: none. Training only: inference runs the main model."""

    @model_validator(mode="after")
    def _hybrid(self) -> ModelSpec:
        p = self.hybrid_pattern
        if p is None:
            if self.mamba is not None:
                raise ValueError("mamba needs a hybrid_pattern naming its M layers")
            return self
        bad = sorted(set(p) - set(HYBRID_SYMBOLS))
        if bad:
            raise ValueError(f"hybrid_pattern has unknown symbols {bad} (M Mamba, * attention, - MLP, E MoE)")
        if len(p) != self.layers:
            raise ValueError(f"hybrid_pattern has {len(p)} symbols but layers is {self.layers}")
        if "M" in p and self.mamba is None:
            raise ValueError("hybrid_pattern has M layers but the model has no mamba section")
        if "E" in p and self.moe is None:
            raise ValueError("hybrid_pattern has E layers but the model has no moe section")
        if self.moe is not None and self.moe.dense_layers:
            raise ValueError("moe.dense_layers does not apply with a hybrid_pattern: its - layers are the dense MLPs")
        if self.mla is not None:
            raise ValueError("hybrid_pattern with mla is not modelled")
        return self

    @model_validator(mode="after")
    def _csa(self) -> ModelSpec:
        c = self.csa
        if c is None:
            return self
        if len(c.compress_ratios) != self.layers:
            raise ValueError(f"csa.compress_ratios has {len(c.compress_ratios)} entries but layers is {self.layers}")
        if self.mla is not None or self.hybrid_pattern is not None:
            raise ValueError("csa does not combine with mla or hybrid_pattern")
        if self.head_dim is None:
            raise ValueError("csa needs head_dim (the query and shared key/value head width)")
        if self.heads % c.o_groups != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of csa.o_groups ({c.o_groups})")
        if c.qk_rope_head_dim >= self.head_dim:
            raise ValueError(f"csa.qk_rope_head_dim ({c.qk_rope_head_dim}) must be below head_dim ({self.head_dim})")
        return self

    @model_validator(mode="after")
    def _heads(self) -> ModelSpec:
        kv = self.kv_heads or self.heads
        if self.heads % kv != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        if self.head_dim is None and self.hidden % self.heads != 0:
            raise ValueError(
                f"hidden ({self.hidden}) must be divisible by heads ({self.heads}) or give head_dim"
            )
        return self

    @model_validator(mode="after")
    def _moe_layers(self) -> ModelSpec:
        moe = self.moe
        if moe is not None and moe.hash_layers > self.moe_layers:
            raise ValueError(f"moe.hash_layers ({moe.hash_layers}) exceeds the model's {self.moe_layers} MoE layers")
        if moe is not None and moe.activation_clamp is not None and self.activation != "swiglu":
            raise ValueError(f"moe.activation_clamp clamps a gated activation (swiglu), not {self.activation}")
        if moe is not None and moe.latent_dim is not None and moe.latent_dim >= self.hidden:
            raise ValueError(
                f"moe.latent_dim ({moe.latent_dim}) must be below hidden ({self.hidden}): LatentMoE projects down"
            )
        return self

    @property
    def moe_layers(self) -> int:
        """Layers with experts: a hybrid pattern's ``E`` layers, else all but ``moe.dense_layers`` (0 without
        ``moe``)."""
        if self.moe is None:
            return 0
        if self.hybrid_pattern is not None:
            return self.hybrid_pattern.count("E")
        return self.layers - self.moe.dense_layers

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads


class TrainingSpec(Spec):
    # each field's docstring is its description in the JSON Schema (``simcore schema``)
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    micro_batch: Int = Field(default=1, gt=0)
    global_batch: Int | None = Field(default=None, gt=0)
    """Sequences per optimizer step; default micro_batch x dp (one micro-batch per rank)."""
    precision: TrainingPrecision = "bf16"
    """The GEMMs' precision recipe: ``bf16``, ``fp16``, ``fp32``; FP8 per-tensor ``fp8`` (=
    ``fp8_delayed``, Transformer Engine's default) or ``fp8_current``; ``fp8_blockwise`` (1x128 / 128x128
    blocks, DeepSeek-V3); ``mxfp8`` and ``nvfp4`` (Blackwell block-scaled formats). Each prices its GEMMs
    at the device's rate for the format plus its quantize kernels and weight copies (docs/parallelism.md,
    "Precision recipes"); a format the device lacks is an error."""
    bf16_layers_start: Int = Field(default=0, ge=0)
    """Leading transformer layers kept in bf16 under a low-precision recipe (Megatron's
    ``first_last_layers_bf16`` with ``num_layers_at_start_in_bf16``; Megatron-Bridge's NVFP4 recipe: 0)."""
    bf16_layers_end: Int = Field(default=0, ge=0)
    """Trailing transformer layers kept in bf16 (``num_layers_at_end_in_bf16``; NVIDIA's NVFP4
    pre-training examples keep the last 4)."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    optimizer_impl: Literal["fused", "foreach"] = "foreach"
    """How the optimizer's update runs: ``fused`` (one kernel per parameter group, ``fused=True`` in
    ``torch.optim``, Megatron's and Apex's optimizers) or ``foreach`` (``torch.optim``'s default on CUDA:
    one multi-tensor kernel per arithmetic step, ~3x the memory traffic and more host time:
    13.1 ms for 617M fp32 parameters on the H200). Default: the stack's (``runtime.stack``; pytorch:
    ``foreach``, torchtitan, megatron, deepspeed: ``fused``; docs/stacks.md). ``simcore validate`` reads
    it from the trace (``aten::_fused_adamw_`` or ``aten::_foreach_*`` ops)."""
    master_weights: bool = False
    """fp32 master copy of the weights kept by the optimizer (mixed precision with low-precision weights;
    fp32 weights need none). Default: the stack's (pytorch, torchtitan: none, ``torch.optim`` updates the
    weights themselves; megatron, deepspeed: kept; docs/stacks.md)."""
    grad_reduce_in_fp32: bool | None = None
    """Gradients accumulated and reduced in fp32 (Megatron's ``grad_reduce_in_fp32``: fp32 ``main_grad``
    buffers and an fp32 reduce-scatter / all-reduce) rather than in the weights' dtype. ``None``: fp32
    exactly when the optimizer keeps an fp32 master copy (``master_weights``). Default: the stack's
    (megatron: true, as Megatron-Bridge's pre-training recipes set it; its performance recipes set false;
    docs/stacks.md). fp32 weights always have fp32 gradients."""
    optimizer_moments_dtype: Literal["fp32", "bf16"] | None = None
    """Dtype of the optimizer's moments (Adam's ``exp_avg`` / ``exp_avg_sq``, SGD's momentum) beside an fp32
    master copy: ``bf16`` is Megatron-Core's precision-aware optimizer with ``exp_avg_dtype`` and
    ``exp_avg_sq_dtype`` bf16 (Megatron-Bridge's DeepSeek-V3 recipes), 4 bytes per parameter instead of 8 for
    AdamW, in memory and in the update's traffic. ``None``: fp32 with a master copy, else the weights' dtype
    (PyTorch's optimizers on bf16 parameters)."""
    fp8_param_gather: bool = False
    """Under a quantized recipe, the weights are kept only as their quantized (FP8) copies, with no bf16
    copy, and the distributed optimizer's parameter all-gather moves those (Megatron's
    ``fp8_param_gather``: the model built under Transformer Engine's ``fp8_model_init``; the fp32 master
    copy stays in the optimizer). Default: the stack's (megatron: true under ``fp8_current`` and ``mxfp8``,
    as Megatron-Bridge's mixed-precision presets set it; docs/stacks.md). No effect on bf16/fp32."""
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_modules: list[
        Literal["core_attn", "mla_up_proj", "layernorm", "mlp", "moe", "moe_act", "shared_experts"]
    ] = Field(default_factory=list)
    """Modules that ``selective`` recompute re-runs in backward (Megatron-Core's ``recompute_modules``;
    empty: its default, ``core_attn``). Each is priced as its forward ops once more before the backward:
    ``core_attn`` the attention core, ``mla_up_proj`` MLA's query and key/value up-projection GEMMs,
    ``layernorm`` the two norms of a layer, ``mlp`` a dense layer's MLP, ``moe`` an MoE layer's whole
    block (dispatch and combine included), ``moe_act`` the routed experts' activation, ``shared_experts``
    the shared experts (docs/parallelism.md, section 9). Needs ``recompute: selective``."""
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Dropout probability on the embedding, each residual branch and the attention scores (GPT-2's
    default 0.1 for all three): its own kernels outside attention; inside the fused attention kernel,
    random numbers per score (priced where the calibration profile measured them: cuDNN's fwd 2.3x). 0: no dropout. ``simcore validate`` reads it from the trace (``aten::native_dropout``)."""
    param_dtype: Literal["bf16", "fp32"] = "fp32"
    """Dtype the weights are stored in: ``bf16`` (Megatron-style, fp32 master copy in the optimizer)
    or ``fp32`` (PyTorch AMP: fp32 weights, autocast to ``precision`` for the GEMMs). Default: the
    stack's (``runtime.stack``; pytorch, torchtitan: ``fp32``; megatron, deepspeed: ``bf16``;
    docs/stacks.md)."""
    tokens: float | None = Field(default=None, gt=0)
    """Tokens to train on, for time-to-train and GPU-hours."""
    activation_offload_layers: Int = Field(default=0, ge=0)
    """Transformer layers whose saved activations go to host memory during the forward and come back
    for the backward (Megatron-Core's ``cpu_offloading`` with ``cpu_offloading_num_layers``, Transformer
    Engine's ``get_cpu_offload_context``: the first ``n`` layers, over the host link, PCIe or NVLink-C2C,
    on a copy stream beside the compute). The step pays what the link cannot hide behind the other
    layers' compute; the GPU keeps ``layers - n`` layers' activations. Fewer than the model's layers, one
    pipeline stage, no recompute (Megatron-Core's checks; docs/parallelism.md, Offload). 0: none."""
    optimizer_offload_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of each rank's optimizer state (fp32 master weights and moments) kept and updated in host
    memory by the CPU (Megatron-Core's ``optimizer_cpu_offload`` with ``optimizer_offload_fraction``;
    DeepSpeed's ZeRO-Offload ``offload_optimizer: {device: cpu}`` is 1): each step the share's gradients
    go to the host, the CPU runs the update at its memory bandwidth, the updated weights come back; the
    rest updates on the GPU at the same time (docs/parallelism.md, Offload). 0: none."""
    optimizer_offload_overlap: bool = False
    """Pipeline the offloaded optimizer's gradient copies, CPU update and weight copies per parameter
    (Megatron-Core's ``overlap_cpu_optimizer_d2h_h2d``, default off): the slowest of the three sets the
    time instead of their sum."""

    @model_validator(mode="after")
    def _recompute_modules(self) -> TrainingSpec:
        if self.recompute_modules and self.recompute != "selective":
            raise ValueError(
                f"recompute_modules {self.recompute_modules} need recompute: selective (got {self.recompute!r})"
            )
        if self.activation_offload_layers and self.recompute != "none":
            # Megatron-Core's TransformerConfig: "CPU offloading does not work when activation
            # recomputation is enabled"
            raise ValueError(
                f"activation_offload_layers needs recompute: none (got {self.recompute!r}; Megatron-Core "
                "does not offload with recomputation)"
            )
        return self


class ParallelSpec(Spec):
    # each field's docstring is its description in the JSON Schema (``simcore schema``)
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    tp: Int = Field(default=1, gt=0)
    """Tensor parallelism: ranks each layer's weight matrices are split over (Megatron's column/row
    split: two all-reduces, or with ``sequence_parallel`` all-gathers and reduce-scatters, per layer and
    direction); within one NVLink domain for the rates to hold."""
    pp: Int = Field(default=1, gt=0)
    """Pipeline parallelism: stages the layers are split over (``pipeline_layers``, or evenly), each
    micro-batch's activations sent from stage to stage under ``schedule``."""
    dp: Int | None = Field(default=None, gt=0)
    """Data-parallel degree; default: whatever GPUs tp x pp x cp leave."""
    cp: Int = Field(default=1, gt=0)
    """Context parallelism: ranks each sequence is split over (Megatron's ring attention: every rank's
    keys and values pass around the ring); activations per rank shrink by ``cp``."""
    ep: Int = Field(default=1, gt=0)
    """Expert parallelism: ranks the routed experts are split over. Megatron-Core's parallel folding
    lays the expert ranks over ``tp x cp x dp`` (independently of the attention's layout): ``ep x etp``
    must divide ``tp x cp x dp``. In a serving scenario: 1 (experts split as the attention is), ``tp`` (TP
    attention with each expert whole on one of the instance's GPUs: TensorRT-LLM's ``--ep`` without attention
    DP, vLLM's expert parallelism) or ``serving.attention_dp x tp``."""
    etp: Int | None = Field(default=None, gt=0)
    """Expert tensor parallelism (Megatron's ``expert_tensor_parallel_size``): ranks each expert's
    matrices are split over; default: ``tp``."""
    vp: Int = Field(default=1, gt=0)
    """Virtual pipeline stages per rank (interleaved schedule)."""
    account_for_embedding_in_pipeline_split: bool = False
    """The embedding counts as one layer when the pipeline splits the layers (Megatron's flag of that
    name): the first stage holds one layer fewer (Llama 3.1 405B: 126 layers + embedding + loss on
    128 chunks)."""
    account_for_loss_in_pipeline_split: bool = False
    """The LM head and loss count as one layer in the split: the last stage holds one layer fewer."""
    pipeline_layers: list[Int] | None = None
    """Transformer layers on each pipeline stage, first to last (Megatron's
    ``num_layers_in_first_pipeline_stage`` / ``..._last_...`` or ``pipeline_model_parallel_layout``
    written out); ``pp`` entries summing to ``model.layers``. Default: even, the remainder on the first
    stages."""
    sequence_parallel: bool = False
    """Megatron's sequence parallelism with ``tp``: the norms, dropout and residuals outside the
    tensor-parallel region are split over the TP ranks by sequence, and the TP all-reduces become an
    all-gather and a reduce-scatter (same bytes); activations outside the region shrink by ``tp``."""
    zero: Annotated[Literal[0, 1, 2, 3], BeforeValidator(integer_value)] = 0
    """ZeRO stage over the data-parallel ranks: 0 plain data parallelism (gradient all-reduce), 1 optimizer
    states sharded (Megatron's distributed optimizer: reduce-scatter the gradients, all-gather the
    parameters), 2 gradients too, 3 parameters too (gathered per layer in forward and backward)."""
    fsdp: bool = False
    """PyTorch FSDP2 (``fully_shard`` per block): parameters, gradients and optimizer states sharded over
    the data-parallel ranks, as ZeRO-3, with FSDP2's copy kernels around its collectives and its
    all-gather issue order (docs/parallelism.md)."""
    megatron_fsdp: bool = False
    """Megatron-Core's own FSDP (``use_megatron_fsdp``) instead of PyTorch's: ``zero`` is its
    ``data_parallel_sharding_strategy`` (0 ``no_shard``, 1 ``optim``, 2 ``optim_grads``, 3
    ``optim_grads_params``; 3 when ``zero`` is not given, as its examples run it). Its buckets are
    gathered and reduced in place (no FSDP2 copy kernels) and, with ``megatron_fsdp_main_grads_dtype:
    auto`` (Megatron-LM's default), the gradients are kept and reduced in the weights' dtype (bf16: 2
    bytes, not fp32's 4); fp32 main weights stay in the optimizer (docs/parallelism.md, Megatron-FSDP)."""
    zero3_gather: Literal["bucketed", "per_tensor"] = "bucketed"
    """How ZeRO-3 moves the parameters: ``bucketed`` (today's DeepSpeed, FSDP2, Megatron-FSDP: coalesced
    all-gathers into one flat buffer, prefetched behind the compute) or ``per_tensor`` (DeepSpeed's first
    ZeRO-3, spring 2021, the runs of Narayanan et al. Table 2: every weight tensor gathered and every
    gradient reduce-scattered by its own collective over a list of per-rank views, after a device
    synchronize, nothing overlapped; docs/parallelism.md, ZeRO-3 as DeepSpeed shipped it in 2021)."""
    schedule: Literal["gpipe", "1f1b", "interleaved", "zero_bubble", "dualpipe"] = "1f1b"
    """Pipeline schedule; when not given, ``interleaved`` if ``vp > 1`` (Megatron's virtual stages imply
    it), else ``1f1b``."""
    pipeline_library: Literal["torch", "megatron", "deepspeed", "own"] = "torch"
    """The code that runs the pipeline schedule (with ``pp > 1``): ``torch``
    (torch.distributed.pipelining's ``PipelineStage`` and schedules), ``megatron`` (Megatron-Core's
    schedules), ``deepspeed`` (its ``PipelineEngine``), ``own`` (a hand-written loop of sends,
    receives, forwards and backwards). ``torch`` pays pipelining's host per schedule action where the
    calibration profile fitted it (``pp_action``; docs/parallelism.md, pipeline host costs). Given with
    ``pp`` 1: an error (:func:`simcore.specs.stack.check_given`; a stack's default is set only with pipeline
    stages)."""
    dp_overlap: bool = True
    """The data-parallel gradient reduction runs in buckets during the backward (DDP, Megatron's
    ``overlap_grad_reduce``; ZeRO-1/2: the parameter all-gather during the next forward,
    ``overlap_param_gather``), so only the part the compute cannot cover shows; ``false``: after it."""
    param_gather_overlap: bool = True
    """With ``dp_overlap`` and the distributed optimizer (ZeRO-1/2): the parameter all-gather after the
    optimizer step runs in buckets behind the next forward (Megatron's ``overlap_param_gather``, on in
    Megatron-Bridge's performance recipes); ``false``: it runs whole after the optimizer step, exposed
    (Megatron-Bridge v0.2.0's Llama MXFP8 recipes and the v0.4.2+ GB200 405B NVFP4 ``v2`` recipe turn it
    off; docs/parallelism.md, the dense rows' recipe facts). Without ZeRO-1/2 it has no effect."""
    tp_overlap: bool = False
    """Tensor-parallel communication overlapped with the GEMMs (Megatron's ``tp_comm_overlap``,
    Transformer Engine's userbuffers: the all-gather / reduce-scatter split into chunks pipelined with
    the GEMM), at the contention cost of running both at once."""
    vocab_parallel: bool = True
    """Shard the embedding, LM head and loss over the tensor-parallel ranks (Megatron); ``false``
    keeps them replicated on every TP rank."""
    data_parallel: Literal["ddp", "dataparallel"] = "ddp"
    """``ddp``: one process per GPU, bucketed all-reduce overlapped with backward.
    ``dataparallel``: PyTorch's single-process ``nn.DataParallel`` (parameters broadcast from GPU 0
    every step, replicas driven by threads of one Python process, gradients reduced to GPU 0)."""

    @model_validator(mode="before")
    @classmethod
    def _vp_means_interleaved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schedule" not in data:
            try:
                vp = int(data.get("vp", 1))
            except (TypeError, ValueError):
                return data  # the field's own validation reports it
            if vp > 1:
                return {**data, "schedule": "interleaved"}
        return data

    @model_validator(mode="after")
    def _fsdp_is_zero3(self) -> ParallelSpec:
        # FSDP shards the weights, gradients and optimizer state: ZeRO-3, never ZeRO-1/2
        if self.fsdp and self.zero in (1, 2):
            raise ValueError(f"fsdp shards everything (ZeRO-3): it cannot run with zero {self.zero}; drop one of them")
        if self.megatron_fsdp and self.fsdp:
            raise ValueError("fsdp (PyTorch's FSDP2) and megatron_fsdp (Megatron-Core's) are two implementations; keep one")
        if self.megatron_fsdp and "zero" not in self.model_fields_set:
            object.__setattr__(self, "zero", 3)  # optim_grads_params
        return self


class InferenceSpec(Spec):
    batch: Int = Field(default=1, gt=0)
    prompt_len: Int = Field(default=1024, gt=0)
    context_len: Int | None = Field(default=None, ge=0)
    """Tokens already in the KV cache for the decode step; default prompt_len."""
    output_len: Int = Field(default=128, gt=0)
    precision: InferencePrecision = "bf16"
    """Weights and GEMM inputs: bf16, fp16, fp32, fp8 or fp4 (NVFP4: devices with FP4 tensor cores, the
    Blackwell generation); attention and activations stay 16-bit (docs/serving.md, contexts and precisions)."""
    kv_cache_dtype: Precision | None = None
    """KV-cache element type; default fp8 under fp8 or fp4 weights (as FP8/NVFP4 checkpoints quantize
    it), else bf16. Reaches the KV memory and the decode attention's bytes."""
    prefill_logits: Literal["last", "all"] = "last"
    """Which prompt positions the prefill's LM head computes logits for: ``last``, each sequence's
    final token (serving engines, ``transformers``' ``generate()``, ``logits_to_keep=1``), or ``all``,
    every prompt token (a plain ``model(input_ids)`` forward in ``transformers``: a batch x prompt x
    vocabulary GEMM and its logits in memory: a 16 x 1,024-token prefill of 8 Llama-3-8B-shaped
    layers on the H200 spent 22.5 of its 106 ms of GEMMs on it, ``docs/compute.md``). ``simcore validate`` reads it
    from the trace (the LM head GEMM's row count)."""


class CpuOpTime(Spec):
    """The host CPU's per-op speed while the PyTorch profiler records: the median duration of
    ``aten::t`` (a metadata-only op every layer calls) on each thread, seconds. ``simcore validate``
    reads it from a trace; where a thread calls ``aten::t`` too rarely (GPT-2's ``Conv1D`` layers) or
    not at all (torch.compile), its ``aten::empty`` or compiled-region ``aten::transpose`` stands in,
    stated as ``aten::t`` through the calibration profile's measured ratios."""

    main: Seconds = Field(gt=0, le=1e-3)
    """On the main (Python) thread: the forward, the loss, the optimizer; inference (e.g. ``"5 us"``)."""
    backward: Seconds | None = Field(default=None, gt=0, le=1e-3)
    """On PyTorch's autograd thread (the backward); ``None``: as ``main``."""
    decode: Seconds | None = Field(default=None, gt=0, le=1e-3)
    """Inference: on the main thread in the decode passes, where they run other code than the prefill
    (a compiled decode: graph replays and the loop's own ops, paced by their ``aten::empty``); ``None``:
    as ``main``."""


class LayerOps(Spec):
    """The ops a transformer layer of the run's code issues in eager PyTorch: top-level PyTorch ops of
    a forward layer on the main thread (a training step's forward; in inference a decode step's), and
    top-level autograd nodes (and ops) of a backward layer on the backward thread (training), per layer
    (``simcore validate`` counts them between a trace's norms)."""

    fwd: float = Field(gt=0)
    bwd: float | None = Field(default=None, gt=0)


class RuntimeSpec(Spec):
    model_config = ConfigDict(**Spec.model_config, json_schema_extra=field_docstrings)

    stack: Literal["pytorch", "torchtitan", "megatron", "deepspeed", "vllm", "sglang", "trtllm"] = "pytorch"
    """The software that runs the scenario, whose defaults fill every field the scenario does not give
    (``hardware_specs/stacks/<stack>.yaml``, each with its source; docs/stacks.md): ``pytorch`` (eager
    PyTorch 2.11: SDPA's own attention choice, AMP with fp32 weights, ``torch.optim``'s foreach AdamW, DDP),
    ``torchtitan`` (FSDP2, fused AdamW, cuDNN-first SDPA), ``megatron`` (Megatron-Core with Transformer
    Engine as Megatron-Bridge's recipes run it: bf16 weights, fp32 master, distributed optimizer, overlapped
    gradient reduction, TE's attention), ``deepspeed`` (ZeRO with its overlap default), and for inference
    ``vllm``, ``sglang``, ``trtllm`` (their attention kernels per GPU generation, CUDA graphs). A prediction's
    notes list the defaults the stack chose (``simcore predict --explain``: with their sources)."""
    framework: Literal["eager", "compiled", "cuda_graphs"] = "eager"
    compiled_decode: bool = False
    """Inference: each decode pass is a CUDA-graph replay of torch.compile's fused kernels while the
    prefill runs under ``framework`` (transformers' ``generate()`` with ``cache_implementation="static"``
    compiles its decode forward with ``mode="reduce-overhead"``). A pass's host is then the
    loop's own ops outside the layers plus the compiled call (guards, input copies, the graph's launch),
    none per layer. ``simcore validate`` reads it from the trace."""
    decode_graph_records: float = Field(default=0.0, ge=0)
    """Inference with ``compiled_decode``: CUDA graphs each ``generate()`` call records again (torch.compile's
    cudagraph trees re-record the decode graph at a call's first decode pass when its static inputs moved:
    measured in every call at batches of 512 and more, in some at 128, in none at 8 after warm-up).
    Each recording idles the GPU for ``compiled_decode_record_fixed`` + ``_per_kernel`` of the graph at the
    decode passes' pace. 0 (default): the steady state, no recording. ``simcore validate`` reads
    it from the trace (the median per profiled step)."""
    profiler: bool = False
    """The run is recorded by the PyTorch profiler (CPU + CUDA activities, shapes): eager host time
    per op grows, which matters wherever the host bounds the step. Set it to compare with a trace."""
    profiler_record: list[Literal["shapes", "stack", "memory"]] = ["shapes"]
    """What the profiler records beside the timeline (with ``profiler: true``): ``shapes``
    (``record_shapes``), ``stack`` (``with_stack``: Python stacks), ``memory`` (``profile_memory``).
    Each changes the host's time per op differently (ratios per kind of host time, measured on
    profiled steps); ``simcore validate`` reads them from the trace."""
    gate_up: Literal["separate", "fused"] = "separate"
    """A gated MLP's gate and up projections: ``separate`` GEMMs (Hugging Face Llama) or one ``fused``
    GEMM whose output is split in two (``w13(x).chunk(2, -1)``). In eager PyTorch SiLU and the product
    then read the strided halves, at 0.4-0.6x the contiguous rate; priced so where the
    calibration profile measured it (``swiglu_strided``), else as the contiguous op."""
    implementation: Literal["reference", "huggingface"] = "reference"
    """Whose modelling code issues the ops. ``reference``: PyTorch's fused ops where it has them
    (``F.layer_norm`` / ``F.rms_norm``, ``F.gelu``, ``F.silu``, SDPA; ``tools/gpt.py``).
    ``huggingface``: ``transformers``' code, which writes GPT-2's tanh GELU (``gelu_new``) and, in the
    Llama family, RMSNorm (in fp32) and the rotary embedding out of elementwise ops, one kernel each
    in eager PyTorch (compiled code fuses them); GPT-2 also adds learned positions. ``simcore
    validate`` reads it from the trace (those ops' signatures)."""
    attention_backend: Literal["auto", "flash", "cudnn", "efficient", "eager"] = "auto"
    """Whose attention kernels run: ``auto`` (the default: what the stack picks on the device for the
    run's dtype and head dimension, e.g. PyTorch 2.11's SDPA takes cuDNN's kernels on Hopper and Blackwell
    for 16-bit tensors with head dims up to 128, FlashAttention-2 on Ampere; docs/stacks.md), ``flash`` (FlashAttention-2: the flash-attn package, PyTorch's
    flash SDPA backend, what simcore's own traces forced), ``cudnn`` (cuDNN's fused attention, the
    backend ``F.scaled_dot_product_attention`` picks by itself on Hopper with torch 2.11: every
    committed ``transformers`` trace; 1.6-1.9x faster than flash at head dims 64 and 128), ``efficient`` (PyTorch's memory-efficient CUTLASS kernels; fp32 attention runs them whatever
    this says, as flash and cuDNN take only 16-bit tensors) or ``eager`` (no fused kernel:
    batched GEMMs over the whole score matrix, scale, mask, an fp32 softmax and a cast, as
    ``transformers``' ``attn_implementation="eager"``). ``simcore validate`` reads it from the trace
    (``aten::_cudnn_attention_forward``, ``aten::_efficient_attention_forward``; 4-D softmaxes and no
    fused attention)."""
    step_sync: bool = True
    """The training loop waits for the GPU once per step (``loss.item()``, a logged metric, a gradient
    norm check), so each step starts with host and GPU together. ``false``: nothing synchronizes, the
    host runs ahead into the next step while the GPU finishes this one, and an eager single-stage step
    takes the larger of the host's and the GPU's total. ``simcore validate`` reads it from the trace."""
    moe_expert_calls: Literal["grouped", "per_expert"] = "grouped"
    """Training an MoE model: how the host issues a rank's routed-expert GEMMs. ``grouped``: one grouped
    kernel per projection (``torch._grouped_mm``, a CUTLASS grouped GEMM), a host cost that does not grow
    with the local experts. ``per_expert``: a loop over the local experts issuing each one's GEMMs (and,
    under an FP8-family recipe, its input's and gradient's quantize) as separate calls, as Transformer
    Engine's ``GroupedLinear`` does by default (``general_grouped_gemm``, ``split_quantize``): each call
    costs the host one op of the calibrated eager layer (docs/parallelism.md, "MoE host costs")."""
    moe_host_sync: bool = False
    """Training an MoE model: each MoE layer's forward copies the per-expert token counts to the host and
    waits for them (Megatron-Core's dropless ``alltoall`` and ``flex`` dispatchers size the all-to-all and
    the grouped GEMMs on the host), so the host cannot run ahead of the GPU across MoE layers: a forward
    layer takes the larger of its host and GPU time, instead of the step's host slack hiding it."""
    moe_dispatcher: Literal["alltoall", "deepep", "hybridep"] = "alltoall"
    """Training an MoE model: what moves the routed tokens to their experts and back
    (Megatron-Core's ``moe_token_dispatcher_type``, with ``flex`` and ``moe_flex_dispatcher_backend``).
    ``alltoall``: an NCCL all-to-all of every (token, expert) copy, so a token routed to two experts on one
    node crosses the fabric twice. ``deepep`` (DeepSeek's DeepEP normal kernels) and ``hybridep`` (NVIDIA's
    HybridEP): a token crosses the fabric once per destination NVLink domain and is forwarded over NVLink
    to each GPU holding one of its experts there (once per GPU), at the kernels' published bandwidths
    (``hardware_specs/comm/moe_dispatchers.yaml``; docs/parallelism.md, "The MoE dispatcher")."""
    moe_a2a_overlap: bool = False
    """Training an MoE model: the expert-parallel dispatch and combine of one micro-batch run while another
    micro-batch computes (Megatron-Core's ``overlap_moe_expert_parallel_comm``, "1F1B A2A overlap"; the same
    pairing DualPipe makes), so only the all-to-all time beyond the layer's compute shows. Default off, as
    in Megatron-Core."""
    moe_fused_mlp: bool = False
    """Training an MoE model: the routed experts run Megatron-Core's Transformer Engine op-fuser path
    (``use_transformer_engine_op_fuser``; Megatron-Bridge's ``cutedsl_fused_grouped_mlp``): the grouped
    GEMMs with the gated activation (clamped where the model clamps), the probability scale and the biases
    fused, so no eager clamp or bias kernels (``moe.activation_clamp``, ``moe.expert_bias``). Default off,
    as in Megatron-Core."""
    decode_loop: Literal["manual", "generate"] = "manual"
    """What drives the decode steps: a hand-written loop of forward passes (``manual``), or
    transformers' ``generate()``, whose logits processors, stopping criteria and cache bookkeeping add
    host time per token (measured for ``implementation: huggingface``). ``simcore validate`` reads it
    from the trace (the stopping criteria's ``aten::isin``, or their verdict's ``unfinished & ~done``)."""
    decode_sync_every: Int | None = Field(default=1, ge=1)
    """Decode steps between the host's waits for the GPU (reading the sampled tokens, checking for the
    end of a sequence): a serving loop waits every step (1); ``null``: never (replays back to back).
    Under CUDA graphs each wait exposes the next graph's launch; a profiled step of a loop that never
    waits (``simcore validate``) has its decode steps issued while the GPU still runs the prefill.
    ``simcore validate`` reads it from the trace (decode passes per synchronize)."""
    layer_ops: LayerOps | None = None
    """Ops a layer of the run's own code issues, where it is neither ``tools/gpt.py`` nor ``transformers``'
    code the eager host entries were measured on (e.g. ``nn.TransformerEncoderLayer``: 35 forward ops, 66
    backward nodes). Training: the eager host per layer scales with ``fwd`` / ``bwd`` over the calibrated code's
    (``HostOps.layer_ops`` of the calibration profile); with ``implementation: huggingface`` both are the ops'
    host weight in ``aten::t`` units (``HostOps.layer_op_weight``) over the fit code's (``HostOps.hf_layer_weights``).
    Inference: the prefill and decode host per layer scale with ``fwd`` over the calibrated decode layer's
    (``HostOps.decode_layer_ops``; ``transformers``: ``HostOps.hf_decode_layer_ops``, its dynamic-cache decode
    layer, whose prefill layers issue the same ops with either cache). ``None``: the calibrated code's. ``simcore
    validate`` reads it from a single-GPU trace (see docs/compute.md, "The host model")."""
    pass_ops: float | None = Field(default=None, gt=0)
    """The host weight, in typical ops, of the top-level ops an eager inference forward pass issues
    outside its layers (the token embedding, the final norm, the LM head and the loop's own sampling and
    bookkeeping: ``generate()``'s logits processors, stopping criteria and cache updates; a compiled
    decode's loop between its graph's launches): each op at its name's host per call, an op not weighed
    by name one plus a share per extra stream launch (``HostOps.pass_op_weight``). The host of a pass
    beyond its layers scales with it over the calibrated code's (``HostOps.pass_ops``). ``None``: the
    calibrated code's. ``simcore validate`` reads it from a single-GPU trace."""
    cpu_op_time: CpuOpTime | None = None
    """The CPU's per-op speed of the run, where known (``simcore validate`` reads it from the trace):
    host times scale by its ratio to the speed the calibration profile measured them at. ``None``: the
    calibration machine's speed."""
    straggler_sigma: float = Field(default=0.0, ge=0.0, le=1.0)
    """Spread of per-GPU compute speed: each GPU takes ``exp(N(0, sigma))`` times the nominal time
    (drawn with ``seed``). The discrete-event engine runs each tensor-parallel group at its slowest
    member's pace and each pipeline stage at the slowest of its data-parallel replicas' (an upper
    bound: replicas sync only at the gradient reduction). The analytic engine ignores it."""
    seed: Int = 0
    dataloader: DataLoaderSpec | None = Field(
        default=None,
        description=(
            "Training: the input pipeline feeding each rank (PyTorch ``DataLoader``): the GPU's wait for "
            "data per step joins the step (``data_wait``). ``None``: input is always ready (not "
            "modelled)."
        ),
    )
    checkpoint: CheckpointSpec | None = Field(
        default=None,
        description=(
            "Training: how checkpoints are saved (needs ``cluster.storage``): their size, write and read "
            "time and the stall each leaves. ``None``: no checkpoints modelled."
        ),
    )


class CostSpec(Spec):
    price_per_gpu_hour: float | None = Field(default=None, ge=0)
    """Currency units per GPU-hour."""
    pue: float = Field(default=1.2, ge=1.0)
    """Power usage effectiveness of the data centre (cooling overhead)."""
    price_per_kwh: float | None = Field(default=None, ge=0)
    """Currency units per kWh of facility energy, added to the cost when given."""
    currency: str = Field(default="USD", min_length=1, max_length=16)
    """The currency of the prices above, printed beside every cost (``USD``, ``EUR``, ...)."""


def _not_null(v: Any) -> Any:
    """A kind's section given as ``null`` (``training:`` with nothing under it) is an error: leaving
    it out gives the defaults, an empty value is more likely a mistake in the file."""
    if v is None:
        raise ValueError("expected a section of fields, got null (leave the section out for its defaults)")
    return v


class Scenario(Spec):
    """One what-if: the top-level object of a scenario YAML file."""

    name: str = "scenario"
    description: str = ""
    kind: Literal["training", "inference", "serving"]
    cluster: ClusterSpec
    model: ModelSpec
    training: Annotated[TrainingSpec | None, BeforeValidator(_not_null)] = None
    inference: Annotated[InferenceSpec | None, BeforeValidator(_not_null)] = None
    serving: Annotated[ServingSpec | None, BeforeValidator(_not_null)] = None
    parallel: ParallelSpec = ParallelSpec()
    runtime: RuntimeSpec = RuntimeSpec()
    calibration: str | None = None
    """Calibration profile name or path; default: the device's own or the nearest one."""
    cost: CostSpec = CostSpec()
    reliability: ReliabilitySpec | None = Field(
        default=None,
        description=(
            "Training: failure rates and restart cost; gives goodput, the Young/Daly checkpoint interval "
            "and the wall-clock time to train (docs/system.md). ``None``: a failure-free run."
        ),
    )

    @model_validator(mode="after")
    def _section(self) -> Scenario:
        if self.kind == "serving":
            if self.serving is None:
                raise ValueError(
                    "a serving scenario needs a 'serving' section (rate or trace, lengths, scheduler)"
                )
            if self.training is not None:
                raise ValueError(
                    "a serving scenario takes 'serving' (and 'inference' for precision), not 'training'"
                )
            if self.inference is None:
                object.__setattr__(self, "inference", InferenceSpec())
        if self.kind != "serving" and self.serving is not None:
            raise ValueError(f"a 'serving' section needs kind: serving (got {self.kind})")
        if self.kind == "inference" and self.training is not None:
            raise ValueError("an inference scenario takes an 'inference' section, not 'training'")
        if self.kind == "training" and self.inference is not None:
            raise ValueError("a training scenario takes a 'training' section, not 'inference'")
        if self.kind != "training":
            given = [
                k
                for k, v in (
                    ("runtime.dataloader", self.runtime.dataloader),
                    ("runtime.checkpoint", self.runtime.checkpoint),
                    ("reliability", self.reliability),
                )
                if v is not None
            ]
            if given:
                raise ValueError(
                    f"{given[0]} is modelled for training scenarios (this one is kind: {self.kind})"
                )
        if self.kind != "inference" and self.cluster.sharing is not None:
            raise ValueError(
                f"cluster.sharing is modelled for inference scenarios (this one is kind: {self.kind})"
            )
        served = {
            "cluster.mig": self.cluster.mig,
            "cluster.power_cap": self.cluster.power_cap,
            "cluster.cooling": self.cluster.cooling,
        }
        if self.kind == "serving" and (key := next((k for k, v in served.items() if v is not None), None)):
            raise ValueError(
                f"{key} is modelled for training and inference scenarios (this one is kind: serving)"
            )
        moe = self.model.moe
        if moe is not None and moe.capacity_factor is not None and self.kind != "training":
            raise ValueError(
                f"model.moe.capacity_factor is modelled for training scenarios (this one is kind: {self.kind}; "
                "serving engines route every token, dropless)"
            )
        if moe is not None and moe.pad_to_capacity and self.runtime.moe_dispatcher == "deepep":
            raise ValueError(
                "model.moe.pad_to_capacity does not run with runtime.moe_dispatcher: deepep (Megatron-Core's flex "
                "dispatcher with the DeepEP backend rejects moe_pad_expert_input_to_capacity); use alltoall or hybridep"
            )
        if self.kind == "training" and self.training is None:
            object.__setattr__(self, "training", TrainingSpec())
        if self.kind == "inference" and self.inference is None:
            object.__setattr__(self, "inference", InferenceSpec())
        inf = self.inference
        if self.kind == "inference" and inf is not None:
            # a request longer than the model's context is an error, never a different workload
            for what, n in (
                ("prompt_len + output_len", inf.prompt_len + inf.output_len),
                ("context_len", inf.context_len or 0),
            ):
                if n > self.model.seq_len:
                    raise ValueError(
                        f"inference: {what} = {n} tokens exceed {self.model.name}'s context of "
                        f"{self.model.seq_len} tokens (model.seq_len); shorten them or choose a longer-context model"
                    )
        return self
