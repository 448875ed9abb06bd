"""Layouts: the per-rank shape of the work (:class:`Layout`, what lowering reads) and the rules a
parallel layout must obey to run at all (:func:`valid_layouts`, used by predict, plan and serve).

Both take numpy arrays as readily as scalars: a field or a parallel degree may be one value or an
array with one element per layout (broadcasting), so the planner checks and prices a table of
layouts with the same code that handles one scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.errors import SpecError
from simcore.specs.scenario import ModelSpec

Num = Any
"""A float or a numpy array of floats (one per layout)."""


@dataclass(frozen=True)
class Layout:
    """Per-rank shape of the work: one value or one numpy array element per layout.

    The parallel degrees and the batch may be arrays; the settings of the run's code (dtypes,
    fusion, implementation, kernels) are scalars. The lowering functions in
    :mod:`simcore.workload.lowering` read it; see docs/compute.md ("The op list of one layer", "Whose
    modelling code", "torch.compile") for the kernels each setting adds.
    """

    micro_batch: Num
    """Sequences per micro-batch (in inference: the batch)."""
    seq: Num
    """Tokens per sequence this pass processes, before context-parallel splitting (1 in a decode step)."""
    tp: Num = 1
    cp: Num = 1
    ep: Num = 1
    etp: Num | None = None
    """Expert tensor parallelism (``None``: ``tp``): each expert's matrices split over ``etp`` ranks, each
    seeing ``tokens x etp / tp`` of the routed tokens (Megatron-Core's parallel folding)."""
    dispatch_bytes: float | None = None
    """Bytes an element of the tokens the expert-parallel dispatch sends (``None``: ``act_bytes``; the combine
    always returns ``act_bytes``): serving engines' FP8 dispatch (DeepEP's) sends 1 + 4/128 (E4M3 values, an fp32
    scale per 128)."""
    ep_exchange: str = "all_to_all"
    """How the MoE layers move tokens between the ``ep`` ranks: ``all_to_all`` (each token to its experts' ranks and
    back: DeepEP, SGLang, TensorRT-LLM over multi-node NVLink), ``all_gather`` (every rank gathers all ``ep``
    ranks' tokens, runs its experts on the ones routed to them and a reduce-scatter returns the sums: TensorRT-LLM's
    attention-DP MoE without multi-node NVLink; docs/serving.md, "Expert parallelism with attention DP") or
    ``tp_all_reduce`` (``ep`` = ``tp``, TP attention without sequence parallelism: every rank already holds all the
    tokens, runs its experts on the ones routed to them, and the layer's TP all-reduce sums the partial outputs, no
    exchange of its own: TensorRT-LLM's ``--ep`` without attention DP, vLLM's expert parallelism under TP;
    docs/serving.md, "Expert parallelism inside a TP instance")."""
    dispatcher: str = "alltoall"
    """How the expert-parallel dispatch and combine move the routed tokens (``RuntimeSpec.moe_dispatcher``):
    ``alltoall`` (an NCCL all-to-all of every routed copy) or ``deepep`` / ``hybridep`` (once per destination
    NVLink domain, then NVLink forwarding; :func:`simcore.comm.dispatch.dispatch_cost`)."""
    capacity_factor: float | None = None
    """Training's expert capacity (``ModelSpec.moe.capacity_factor``): each expert takes at most
    :func:`~simcore.workload.model.expert_capacity` of a rank's routed copies (``None``: dropless, as serving
    engines and Megatron-Core's default route; the inference engines leave it so)."""
    pad_to_capacity: bool = False
    """Every expert's input padded to its capacity (``ModelSpec.moe.pad_to_capacity``; with
    :attr:`capacity_factor`)."""
    eager_expert_ops: bool = False
    """The routed experts' activation clamp and output bias run as Megatron-Core's eager kernels beside the
    grouped GEMMs and the activation (:func:`~simcore.workload.lowering.expert_eager_ops`): training without
    ``RuntimeSpec.moe_fused_mlp``. Off: fused into the experts' kernels (the fused grouped MLP, serving
    engines' fused MoE kernels)."""
    sp: Num = False
    """Sequence parallelism (bool or array of bools)."""
    tp_overlap: Num = False
    """Userbuffers TP communication overlap (``parallel.tp_overlap``, bool or array): with sequence
    parallelism its ring-exchange GEMMs run as ``tp`` chunks (:attr:`tp_chunks`)."""
    dtype: str = "bf16"
    """The GEMMs' dtype."""
    gather_bytes: float | None = None
    """Bytes per element a Transformer Engine linear layer's sequence-parallel all-gather moves under a
    low-precision recipe (``None``: :attr:`act_bytes`): TE quantizes the input (forward) and the output
    gradient (backward) before gathering them (``gather_along_first_dim(..., quantizer=...)``), so the
    gather carries the recipe's values and block scales; the reduce-scatters stay in ``act_bytes``."""
    act_bytes: float = 2.0
    """Bytes per activation element (bf16)."""
    residual: float | None = None
    """Bytes per element of the residual stream (``None``: ``act_bytes``); read it as
    :attr:`residual_bytes`."""
    vocab_parallel: bool = True
    """TP shards the embedding, LM head and loss (``parallel.vocab_parallel``; false: replicated)."""
    fused: bool = False
    """Memory-bound ops fused by a compiler (``torch.compile``/inductor): each residual add, the norm
    after it and the norm's dtype cast run as one kernel, and the loss reads the bf16 logits without an
    fp32 copy (see :func:`~simcore.workload.lowering.norm_ops`, :func:`~simcore.workload.lowering.loss_fwd`)."""
    implementation: str = "reference"
    """Whose modelling code (``runtime.implementation``): ``reference`` or ``huggingface``."""
    strided_gate_up: bool = False
    """A gated MLP's SiLU and product read the strided halves of one fused gate/up GEMM output
    (:func:`~simcore.workload.lowering.strided_gate_up`)."""
    dropout: float = 0.0
    """Dropout probability on the residual branches and the embedding (training; 0: none)."""
    attention_backend: str = "flash"
    """Whose attention kernels (``runtime.attention_backend``; ``eager``: written out of PyTorch ops)."""
    kv_cache: bool = False
    """Inference: this pass writes its keys and values into a KV cache."""
    kv_elt: float | None = None
    """Bytes per element of the KV cache (``None``: ``act_bytes``); read it as :attr:`kv_bytes`."""
    kv_seq: Num | None = None
    """A decode step: the keys each new token attends to (the context); ``None``: a causal pass over
    ``seq`` tokens (training, prefill)."""
    static_cache: float | None = None
    """The length of a static KV cache a decode step's attention walks (``transformers``' static cache
    under a compiled decode: the prompt and every new token's slot, masked), else ``None``. Its
    attention gets a 4-D mask, so ``transformers`` repeats the keys and values to every query head
    (``repeat_kv``) over the whole cache before SDPA, and cuDNN walks the expanded heads."""
    batched_experts: bool = False
    """``transformers``' ``batched_mm`` experts (:func:`~simcore.workload.lowering.batched_experts`):
    each routed token's expert weights gathered (``index`` over the stacked ``[experts, out, in]``
    parameters) and one batched GEMV per token, instead of the grouped GEMM over tokens sorted by expert."""

    @property
    def residual_bytes(self) -> float:
        """Bytes per element of the residual stream: fp32 under PyTorch autocast with fp32 weights
        (the embedding output is fp32 and residual adds promote), else the activation dtype."""
        return float(self.act_bytes if self.residual is None else self.residual)

    @property
    def kv_bytes(self) -> float:
        """Bytes per element of the KV cache (the activation dtype unless the cache has its own)."""
        return float(self.act_bytes if self.kv_elt is None else self.kv_elt)

    @property
    def vocab_div(self) -> Num:
        """Divisor of the vocabulary: TP shards the embedding, LM head and loss unless the framework
        keeps them replicated (``parallel.vocab_parallel: false``)."""
        return self.tp if self.vocab_parallel else 1.0

    @property
    def hf_code(self) -> bool:
        """Hugging Face ``transformers`` modelling code (``runtime.implementation: huggingface``), in
        eager kernels or compiled: GPT-2's projection biases, the KV cache it fills in training."""
        return self.implementation == "huggingface"

    @property
    def hf(self) -> bool:
        """Hugging Face ``transformers`` modelling code in eager kernels (``runtime.implementation:
        huggingface`` outside compiled code): GPT-2's tanh GELU and Llama's RMSNorm and rotary
        embedding are written out of elementwise ops (:func:`~simcore.workload.lowering.composite_ops`)."""
        return self.hf_code and not self.fused

    @property
    def fp32_experts(self) -> bool:
        """``transformers``' experts (``torch._grouped_mm``, which autocast does not cast) run in the
        residual stream's dtype: fp32 GEMMs under AMP with fp32 weights, eager. On the H200 the fp32
        grouped GEMM is a loop of per-expert GEMMs that reads each expert's token count on the host."""
        return self.hf_code and not self.fused and self.residual_bytes == 4.0

    @property
    def dense_mask(self) -> bool:
        """Attention over a materialised causal mask: ``transformers`` builds a ``[b, 1, s, s]`` mask
        instead of passing ``is_causal`` when ``torch.compile`` traces it (its SDPA mask helper skips
        the mask only outside tracing), so the attention kernel walks every query-key block (no
        causal skipping) in training and prefill."""
        return self.hf_code and self.fused and self.kv_seq is None

    @property
    def tokens(self) -> Num:
        """Tokens a rank processes per micro-batch (sequence split by CP)."""
        return self.micro_batch * self.seq / self.cp

    @property
    def tp_chunks(self) -> tuple[Num, Num] | None:
        """How TP overlap runs its ring-exchange GEMMs: ``(tp, on)``, ``on`` where userbuffers overlap runs
        with sequence parallelism (bool or array), each such GEMM ``tp`` calls of ``tokens / tp`` rows;
        ``None`` where no layout overlaps. Transformer Engine's ``CommOverlapP2PBase``
        (``split_overlap_ag`` / ``split_overlap_rs``) computes the GEMM on one row chunk while the next
        chunk moves to (from) the neighbouring rank, one cuBLAS call per chunk (docs/parallelism.md, "The
        dense rows' layouts", TP overlap in chunks)."""
        on = np.asarray(self.tp_overlap, dtype=bool) & np.asarray(self.sp, dtype=bool) & (np.asarray(self.tp) > 1)
        if not np.any(on):
            return None
        return self.tp, (bool(on) if on.ndim == 0 else on)

    @property
    def sp_div(self) -> Num:
        """Divisor of activation work outside the tensor-parallel region."""
        return np.where(self.sp, self.tp, 1) if not isinstance(self.sp, bool) else (self.tp if self.sp else 1)


# --------------------------------------------------------------------------------------------
# which parallel layouts can run

Values = dict[str, Any]
"""A layout's parallel degrees and batch (numpy arrays, broadcast), and the model's ``heads``,
``layers``, ``experts`` (0: a dense model) and ``gpus``."""


@dataclass(frozen=True)
class _Rule:
    needs: tuple[str, ...]
    """The values the rule reads; it is skipped when a caller does not give one of them."""
    broken: Callable[[Values], np.ndarray]
    field: str
    message: Callable[[Values], str]
    """The one-line message for one layout (scalar values)."""


def _inner(v: Values) -> Any:
    return v["tp"] * v["pp"] * v.get("cp", 1)


def _safe(x: Any) -> Any:
    return np.maximum(x, 1)


def _etp(v: Values) -> Any:
    return v.get("etp", v["tp"])


def _dense(v: Values) -> Any:
    return v["tp"] * v["cp"] * v["dp"]


def _chunks_units(v: Values) -> Any:
    """Layers the pipeline split counts: the model's plus the embedding and loss where they count."""
    return v["layers"] + v.get("extra_units", 0)


RULES: tuple[_Rule, ...] = (
    _Rule(
        ("gpus", "tp", "pp"),
        lambda v: _inner(v) > v["gpus"],
        "parallel",
        lambda v: (
            f"{'tp*pp*cp' if 'cp' in v else 'tp*pp'} ({_inner(v)}) exceeds the cluster's {v['gpus']} GPUs"
        ),
    ),
    _Rule(
        ("gpus", "tp", "pp", "cp", "dp"),
        lambda v: (v["dp"] < 1) | (_inner(v) * v["dp"] != v["gpus"]),
        "parallel",
        lambda v: (
            f"tp*pp*cp*dp = {v['tp']}*{v['pp']}*{v['cp']}*{v['dp']} = {_inner(v) * v['dp']} does not "
            f"match the cluster's {v['gpus']} GPUs"
        ),
    ),
    # Megatron-Core's MoE parallel folding: the expert grid (etp x ep x expert-dp) re-lays the same
    # tp x cp x dp ranks of a pipeline stage, so EP may exceed DP
    _Rule(
        ("tp", "dp", "cp", "ep"),
        lambda v: (v["ep"] > 1) & (_dense(v) % _safe(v["ep"] * _etp(v)) != 0),
        "parallel.ep",
        lambda v: f"ep*etp ({v['ep']}*{_etp(v)}) must divide tp*cp*dp ({_dense(v)})",
    ),
    _Rule(
        ("ep",),
        lambda v: (v["ep"] > 1) & (v["experts"] == 0),
        "parallel.ep",
        lambda v: f"ep ({v['ep']}) needs an MoE model (model.moe)",
    ),
    _Rule(
        ("ep",),
        lambda v: (v["experts"] > 0) & (v["experts"] % _safe(v["ep"]) != 0),
        "parallel.ep",
        lambda v: f"model.moe.experts ({v['experts']}) is not divisible by ep ({v['ep']})",
    ),
    _Rule(
        ("tp",),
        lambda v: v["heads"] % _safe(v["tp"]) != 0,
        "parallel.tp",
        lambda v: f"model.heads ({v['heads']}) is not divisible by tp ({v['tp']})",
    ),
    # DeepSeek-V4's grouped output projection splits its head groups over TP (``wo_a``: o_groups / tp a rank)
    _Rule(
        ("tp",),
        lambda v: (v["o_groups"] > 0) & (v["o_groups"] % _safe(v["tp"]) != 0),
        "parallel.tp",
        lambda v: f"model.csa.o_groups ({v['o_groups']}) is not divisible by tp ({v['tp']})",
    ),
    # Megatron-Core's MambaMixer splits the SSM heads and the B/C groups over TP, and under CP the heads of
    # a TP rank over the CP ranks (MambaContextParallel: groups split too, or one group repeated)
    _Rule(
        ("tp",),
        lambda v: (v["ssm_heads"] > 0)
        & ((v["ssm_heads"] % _safe(v["tp"]) != 0) | (v["ssm_groups"] % _safe(v["tp"]) != 0)),
        "parallel.tp",
        lambda v: (
            f"model.mamba.heads ({v['ssm_heads']}) and groups ({v['ssm_groups']}) must be divisible by "
            f"tp ({v['tp']})"
        ),
    ),
    _Rule(
        ("tp", "cp"),
        lambda v: (v["ssm_heads"] > 0)
        & (
            ((v["ssm_heads"] // _safe(v["tp"])) % _safe(v["cp"]) != 0)
            | (
                ((v["ssm_groups"] // _safe(v["tp"])) % _safe(v["cp"]) != 0)
                & (v["cp"] % _safe(v["ssm_groups"] // _safe(v["tp"])) != 0)
            )
        ),
        "parallel.cp",
        lambda v: (
            f"model.mamba.heads per TP rank ({v['ssm_heads'] // max(v['tp'], 1)}) must be divisible by cp "
            f"({v['cp']}), and its groups per TP rank ({v['ssm_groups'] // max(v['tp'], 1)}) divide or be "
            f"divided by cp"
        ),
    ),
    # layers that do not divide pp (or pp*vp) evenly go one extra to the first stages or model chunks
    # (as Megatron's uneven splits), so only too few layers is an error
    _Rule(
        ("pp", "vp"),
        lambda v: (v["vp"] > 1) & (_chunks_units(v) < v["pp"] * v["vp"]),
        "parallel.vp",
        lambda v: (
            f"model.layers ({v['layers']}{' + embedding/loss ' + str(v['extra_units']) if v.get('extra_units') else ''}) "
            f"is fewer than pp*vp model chunks ({v['pp'] * v['vp']})"
        ),
    ),
    _Rule(
        ("pp",),
        lambda v: _chunks_units(v) < v["pp"],
        "parallel.pp",
        lambda v: f"model.layers ({v['layers']}) is fewer than pipeline stages ({v['pp']})",
    ),
    _Rule(
        ("micro_batch", "dp", "global_batch"),
        lambda v: v["global_batch"] % _safe(v["micro_batch"] * v["dp"]) != 0,
        "training.global_batch",
        lambda v: (
            f"global_batch ({v['global_batch']}) is not a multiple of micro_batch*dp "
            f"({v['micro_batch']}*{v['dp']})"
        ),
    ),
)
"""The rules in the order they are reported: a layout's reason is the first rule it breaks."""


@dataclass(frozen=True)
class LayoutCheck:
    """:func:`valid_layouts`' answer: which layouts can run and, for the others, why not."""

    ok: np.ndarray
    """True where the layout obeys every rule (the broadcast shape of the inputs)."""
    rule: np.ndarray
    """Index into :data:`RULES` of the first rule a layout breaks; -1 where it is valid."""
    values: Values

    def _at(self, index: tuple[int, ...]) -> Values:
        return {k: np.broadcast_to(v, self.ok.shape)[index].item() for k, v in self.values.items()}

    def reason(self, index: tuple[int, ...] = ()) -> str:
        """The one-line reason the layout at ``index`` is invalid ('' where it is valid)."""
        r = int(self.rule[index])
        return "" if r < 0 else RULES[r].message(self._at(index))

    def field(self, index: tuple[int, ...] = ()) -> str:
        """The scenario field the reason at ``index`` names ('' where the layout is valid)."""
        r = int(self.rule[index])
        return "" if r < 0 else RULES[r].field

    def reasons(self) -> np.ndarray:
        """The reason of every layout, an array of strings of the inputs' shape ('' where valid)."""
        out = np.full(self.ok.shape, "", dtype=object)
        for index in zip(*np.nonzero(~self.ok), strict=True):
            out[index] = self.reason(tuple(int(i) for i in index))
        return out

    def require(self, field: str | None = None) -> None:
        """Raise the user's error (:class:`SpecError`, naming ``field`` or the rule's own) for the first
        invalid layout, in C order."""
        bad = np.flatnonzero(~self.ok)
        if bad.size:
            index = tuple(int(i) for i in np.unravel_index(int(bad[0]), self.ok.shape))
            raise SpecError(self.reason(index), field=field or self.field(index))


def valid_layouts(
    model: ModelSpec,
    gpus: Num | None = None,
    *,
    tp: Num | None = None,
    pp: Num | None = None,
    cp: Num | None = None,
    dp: Num | None = None,
    ep: Num | None = None,
    vp: Num | None = None,
    micro_batch: Num | None = None,
    global_batch: Num | None = None,
    etp: Num | None = None,
    extra_units: Num = 0,
) -> LayoutCheck:
    """Check parallel layouts of ``model`` on ``gpus`` GPUs (integers or broadcasting integer arrays).

    A rule applies when every value it reads is given (inference gives ``tp`` and ``pp``, and its
    first rule names ``tp*pp``; training gives all). In the order reported: ``tp*pp*cp`` fits the
    cluster and ``tp*pp*cp*dp`` fills it; ``ep*etp`` divides ``tp*cp*dp`` (parallel folding; ``etp``
    default ``tp``) and ``ep`` the experts, and needs an MoE model; ``tp`` divides the heads (and DeepSeek-V4's output groups, a Mamba
    mixer's heads and groups; ``cp`` its heads per TP rank); ``pp*vp`` chunks (``vp > 1``) and ``pp`` stages have a layer
    each (uneven splits allowed; ``extra_units``: the embedding and loss counted as layers); ``micro_batch*dp`` divides the global batch. Search-space pruning
    (TP inside the NVLink domain, redundant knobs) is the planner's, not a rule here. See
    docs/parallelism.md section 1 (parallel plan)."""
    given = {
        "gpus": gpus,
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "dp": dp,
        "ep": ep,
        "vp": vp,
        "micro_batch": micro_batch,
        "global_batch": global_batch,
        "etp": etp,
    }
    v: Values = {k: np.asarray(x) for k, x in given.items() if x is not None}
    v["heads"] = np.asarray(model.heads)
    v["layers"] = np.asarray(model.layers)
    v["experts"] = np.asarray(model.moe.experts if model.moe is not None else 0)
    v["ssm_heads"] = np.asarray(model.mamba.heads if model.mamba is not None else 0)
    v["ssm_groups"] = np.asarray(model.mamba.groups if model.mamba is not None else 0)
    v["o_groups"] = np.asarray(model.csa.o_groups if model.csa is not None else 0)
    if np.any(extra_units):
        v["extra_units"] = np.asarray(extra_units)
    shape = np.broadcast_shapes(*(x.shape for x in v.values()))
    rule = np.full(shape, -1, dtype=np.int64)
    # the last rule first, so that an earlier broken rule overwrites a later one
    for i in reversed(range(len(RULES))):
        r = RULES[i]
        if all(k in v for k in r.needs):
            rule = np.where(r.broken(v), i, rule)
    return LayoutCheck(ok=rule < 0, rule=rule, values=v)


__all__ = ["RULES", "Layout", "LayoutCheck", "valid_layouts"]
