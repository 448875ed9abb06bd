"""Serving specs: the ``serving`` section of a scenario (arrivals, request lengths, scheduler, KV cache
policy, replicas, disaggregation, SLOs). Pure data; the simulation is :mod:`simcore.serving`.

All times in seconds, rates in requests per second, lengths in tokens.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from simcore.errors import SpecError
from simcore.specs.docstrings import field_docstrings
from simcore.specs.quantities import Int, Seconds, Spec

Engine = Literal["vllm", "sglang", "trtllm"]
Scheduler = Literal["fcfs", "priority", "shortest_prompt_first"]
StepOrder = Literal["decode_first", "prefill_first"]


class _Documented(Spec):
    """A spec whose fields' docstrings become their descriptions in the JSON Schema."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, json_schema_extra=field_docstrings
    )


def _length_shorthand(v: Any) -> Any:
    """``prompt: 512`` means a fixed length of 512 tokens."""
    if isinstance(v, int) and not isinstance(v, bool):
        return {"dist": "fixed", "value": v}
    return v


class LengthDist(_Documented):
    """A request-length distribution in tokens: ``fixed`` (``value``), ``uniform`` (``low``..``high``
    inclusive) or ``lognormal`` (``mean`` of the lengths and ``sigma`` of their logarithm, truncated at
    ``max`` when given: a dataset's lengths are bounded, a lognormal's are not)."""

    dist: Literal["fixed", "uniform", "lognormal"] = "fixed"
    value: Int | None = Field(default=None, gt=0)
    low: Int | None = Field(default=None, gt=0)
    high: Int | None = Field(default=None, gt=0)
    mean: float | None = Field(default=None, gt=0)
    sigma: float | None = Field(default=None, ge=0)
    max: Int | None = Field(default=None, gt=0)
    """Lognormal only: lengths above this are set to ``max`` (tokens; the truncation is the
    user's choice, stated here, never a silent clip of the workload)."""

    @model_validator(mode="after")
    def _fields(self) -> LengthDist:
        need = {"fixed": ("value",), "uniform": ("low", "high"), "lognormal": ("mean", "sigma")}[self.dist]
        for k in need:
            if getattr(self, k) is None:
                raise ValueError(f"{self.dist} length needs '{k}'")
        extra = [
            k
            for k in ("value", "low", "high", "mean", "sigma", "max")
            if k not in need + (("max",) if self.dist == "lognormal" else ()) and getattr(self, k) is not None
        ]
        if extra:
            raise ValueError(f"{self.dist} length does not take '{extra[0]}'")
        if self.dist == "uniform" and self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low ({self.low}) exceeds high ({self.high})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths (int64 tokens, at least 1)."""
        if self.dist == "fixed":
            assert self.value is not None
            out = np.full(n, self.value, dtype=np.int64)
        elif self.dist == "uniform":
            assert self.low is not None and self.high is not None
            out = rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)
        else:
            assert self.mean is not None and self.sigma is not None
            mu = np.log(self.mean) - 0.5 * self.sigma**2
            out = np.rint(rng.lognormal(mu, self.sigma, size=n)).astype(np.int64)
            if self.max is not None:
                out = np.minimum(out, self.max)
        return np.maximum(out, 1)

    @property
    def mean_tokens(self) -> float:
        """Mean length before the ``max`` truncation (tokens)."""
        if self.dist == "fixed":
            return float(self.value or 0)
        if self.dist == "uniform":
            return 0.5 * float((self.low or 0) + (self.high or 0))
        return float(self.mean or 0.0)


Length = Annotated[LengthDist, BeforeValidator(_length_shorthand)]


class DisaggSpec(_Documented):
    """Prefill/decode disaggregation: two pools of GPUs; a request's KV cache moves from the
    prefill instance that computed it to a decode instance."""

    prefill_gpus: Int = Field(gt=0)
    """GPUs of the prefill pool (instances of ``prefill_tp`` x ``parallel.pp`` GPUs each)."""
    decode_gpus: Int = Field(gt=0)
    """GPUs of the decode pool (instances of ``decode_tp`` x ``parallel.pp`` GPUs each)."""
    prefill_tp: Int | None = Field(default=None, gt=0)
    """Tensor-parallel degree of a prefill instance; default ``parallel.tp``."""
    decode_tp: Int | None = Field(default=None, gt=0)
    """Tensor-parallel degree of a decode instance; default ``parallel.tp``."""
    prefill_attention_dp: Int | None = Field(default=None, gt=0)
    """Attention data-parallel ranks of a prefill instance (``serving.attention_dp``); default
    ``serving.attention_dp``."""
    decode_attention_dp: Int | None = Field(default=None, gt=0)
    """Attention data-parallel ranks of a decode instance; default ``serving.attention_dp``."""
    gpudirect: bool = True
    """KV moves GPU to GPU (GPUDirect RDMA); ``false`` bounces through host memory."""
    transfers_per_request: Int | None = Field(default=None, gt=0)
    """Separate RDMA operations per request (each pays the point-to-point latency); default one per
    layer."""


class SpeculativeSpec(_Documented):
    """Speculative decoding: each decode round drafts ``tokens`` tokens per sequence and the target
    model verifies them (and one more) in one forward pass; a drafted token is accepted with
    probability ``acceptance``, independently, until the first rejection."""

    method: Literal["mtp", "draft"] = "mtp"
    """``mtp``: MTP/EAGLE-style draft heads on the target (one decoder layer of the target's shape
    plus its LM head per drafted token); ``draft``: a separate draft model (``draft_model``)."""
    draft_model: str | None = None
    """Model preset of the draft model (``method: draft``); it must share the target's vocabulary."""
    tokens: Int = Field(gt=0)
    """Draft length k: tokens drafted per sequence per round."""
    acceptance: float = Field(ge=0.0, le=1.0)
    """Probability that a drafted token is accepted (per token, i.i.d.)."""

    @model_validator(mode="after")
    def _draft(self) -> SpeculativeSpec:
        if (self.method == "draft") != (self.draft_model is not None):
            raise ValueError("method: draft needs draft_model (a model preset), and only it takes one")
        return self

    @property
    def tokens_per_round(self) -> float:
        """Expected tokens per sequence per verification round, ``(1 - a^(k+1)) / (1 - a)``
        (``k + 1`` at ``a = 1``): the accepted prefix of the draft plus the target's own token."""
        a, k = self.acceptance, self.tokens
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


class SharedPrefixSpec(_Documented):
    """Shared system prompts: every request's prompt starts with one of ``groups`` system prompts of
    ``tokens`` tokens (drawn uniformly per request), followed by its own part (``serving.prompt``)."""

    tokens: Int = Field(gt=0)
    """Length of each shared system prompt (tokens)."""
    groups: Int = Field(default=1, gt=0)
    """Distinct system prompts."""


class SLOSpec(_Documented):
    """Latency targets for goodput: a request counts when it meets every target given."""

    ttft_s: Seconds | None = None
    """Time to first token (seconds; YAML may say ``"500 ms"``)."""
    tpot_s: Seconds | None = None
    """Mean time per output token after the first (seconds)."""


class ServingSpec(_Documented):
    """Request-level serving simulation: who arrives when, how long they are, how they are served."""

    rate: float | None = Field(default=None, gt=0)
    """Mean arrival rate (requests/s) of a renewal process (Poisson when ``arrival_cv`` is 1)."""
    arrival_cv: float = Field(default=1.0, gt=0)
    """Coefficient of variation of the gaps between arrivals: 1 is Poisson, above 1 is burstier
    (gamma-distributed gaps)."""
    concurrency: Int | None = Field(default=None, gt=0)
    """Closed loop instead of ``rate``: this many users, each sending its next request the moment
    its previous one finishes (no think time), as throughput-interactivity benchmarks load an
    engine."""
    trace: str | None = None
    """CSV of ``arrival_s,prompt_len,output_len`` (header row), instead of ``rate`` and lengths;
    a relative path is relative to the scenario file."""
    prompt: Length = LengthDist(dist="fixed", value=1024)
    output: Length = LengthDist(dist="fixed", value=128)
    requests: Int | None = Field(default=None, gt=0)
    """Requests to simulate (default 1000 unless ``duration_s`` is given)."""
    duration_s: Seconds | None = Field(default=None, gt=0)
    """Arrivals stop after this time (seconds); requests in flight then run to completion."""
    replicas: Int | None = Field(default=None, gt=0)
    """Model replicas (each ``attention_dp`` x ``parallel.tp`` x ``parallel.pp`` GPUs); default: as many as the
    cluster holds. Ignored when ``disaggregated`` is given."""
    attention_dp: Int = Field(default=1, gt=0)
    """Attention data parallelism with wide expert parallelism (DeepSeek-V3/R1 serving; SGLang
    ``--enable-dp-attention``, TensorRT-LLM ``enable_attention_dp``): an instance is ``attention_dp`` ranks of
    ``parallel.tp`` GPUs, each rank running attention and the dense layers on its own sequences and KV cache,
    while every MoE layer's routed experts are sharded over all the instance's GPUs (EP = ``attention_dp`` x
    ``tp``), each token dispatched to and combined from its experts' GPUs by all-to-alls. ``max_batch`` and
    ``max_batch_tokens`` are the instance's (all ranks together). 1: no attention DP, experts split by TP (or,
    with ``parallel.ep`` = ``tp``, whole on the TP ranks)."""
    ep_exchange: Literal["all_to_all", "all_gather"] | None = None
    """How an attention-DP instance's MoE layers move tokens between its GPUs: ``all_to_all`` (each token to its
    experts' GPUs and back: SGLang/DeepEP, TensorRT-LLM over multi-node NVLink) or ``all_gather`` (every GPU
    gathers all ranks' tokens in FP8, runs its experts on those routed to them, and a reduce-scatter returns the
    sums: TensorRT-LLM's CUTLASS MoE when its all-to-all is not available). Default: the engine's
    (``hardware_specs/engines/serving.yaml``, :func:`engine_settings`): ``all_gather`` for ``engine: trtllm`` on a
    system without multi-node NVLink (HGX/DGX baseboards), else ``all_to_all``; none: ``all_to_all``. Without attention DP (``parallel.ep`` = ``tp``) the tokens are on
    every GPU already and the layer's TP all-reduce sums the experts' outputs: no exchange, this is not read."""
    two_batch_overlap: bool = False
    """Split each step's batch in two micro-batches so that one's expert all-to-alls run under the other's
    computation (SGLang ``--enable-two-batch-overlap``, off by default; DeepSeek's inference system): a step's
    GPU time becomes ``max(compute, ep all-to-all)`` instead of their sum. No effect without expert parallelism
    (``attention_dp`` > 1)."""
    max_batch: Int = Field(default=256, gt=0)
    """Sequences running at once per replica (vLLM ``max_num_seqs``)."""
    max_batch_tokens: Int = Field(default=8192, gt=0)
    """Tokens per engine step, decodes first, prefill chunks in the rest (vLLM
    ``max_num_batched_tokens``, chunked prefill)."""
    kv_block_tokens: Int = Field(default=16, gt=0)
    """Tokens per paged KV-cache block."""
    memory_utilization: float = Field(default=0.9, gt=0, le=1.0)
    """Fraction of device memory the engine may use (vLLM ``gpu_memory_utilization``); the KV
    cache gets what weights and step activations leave of it."""
    memory_fraction_of: Literal["device", "free"] = "device"
    """What ``memory_utilization`` is a fraction of: ``device`` (vLLM's ``gpu_memory_utilization``: of the
    whole device; the KV cache gets what weights and activations leave) or ``free`` (TensorRT-LLM's
    ``free_gpu_memory_fraction``: of the memory left after the weights, the activations and the runtime's
    reserve, measured once the model is loaded)."""
    reserve_output_kv: bool = False
    """Admit a request only when KV blocks for its prompt and whole output are free, and hold them
    from the start (TensorRT-LLM's ``GUARANTEED_NO_EVICT``): never preempts, admits fewer. Default:
    blocks on demand with preemption by recompute (vLLM)."""
    prefix_cache_hit: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Fraction of each prompt's tokens found in a prefix cache (not recomputed): a fixed hit rate,
    without the cache's memory; ``prefix_caching`` models the cache itself."""
    shared_prefix: SharedPrefixSpec | None = None
    """Prompts that start with shared system prompts (a workload a prefix cache can reuse)."""
    prefix_caching: bool = False
    """Automatic prefix caching: full KV blocks of prompts stay in a radix tree keyed by block hash
    after their request leaves, a new request reuses the longest cached prefix of its prompt (at
    least one token is always computed), and unreferenced blocks are evicted least recently used
    first when blocks run short (vLLM's automatic prefix caching, SGLang's radix cache)."""
    engine: Engine | None = None
    """Take the scheduler and KV-cache settings this engine ships with
    (``hardware_specs/engines/serving.yaml``, sources cited there and in docs/serving.md): every
    field below that the scenario does not set. ``None``: the fields' own defaults (vLLM V1's
    scheduler with 256 sequences and 8192 tokens per step)."""
    scheduler: Scheduler = "fcfs"
    """Order of the waiting queue: ``fcfs`` (arrival; a preempted request goes back to the head),
    ``priority`` (lowest ``priority`` class first, then arrival; the lowest-priority running request
    is the one preempted, as vLLM's ``priority`` policy), ``shortest_prompt_first`` (shortest
    prompt first, then arrival)."""
    step_order: StepOrder = "decode_first"
    """``decode_first``: every step advances the running decodes and fills the rest of the token
    budget with prefill chunks (vLLM V1, TensorRT-LLM in-flight batching). ``prefill_first``: a step
    with prefill work to do runs prefill chunks only and the decodes wait (SGLang without mixed
    chunks)."""
    priority_mix: list[float] | None = None
    """Fractions of the requests in priority classes 0, 1, ... (0 is served first by the
    ``priority`` scheduler); drawn at random per request (normalised to sum to 1). Default: all
    class 0."""
    cuda_graph_sizes: list[int] | None = None
    """Decode batch sizes captured as CUDA graphs: a decode batch is padded up to the next size (and
    priced at it); a batch above the largest runs unpadded. ``None``: no padding."""
    graphs_before_kv: bool = False
    """Whether the engine captures its decode CUDA graphs before it sizes the KV cache, so that their memory pool
    (the largest captured step's activations and logits) comes off the KV budget: TensorRT-LLM's PyTorch backend
    captures them in the executor's warm-up and then sizes the cache from the free memory it measures
    (``hardware_specs/engines/serving.yaml``, docs/serving.md "KV cache"). ``False``: the graphs are captured after
    the cache is allocated, in the memory ``memory_utilization`` leaves (vLLM), and the KV budget holds instead the
    fp32 logits of ``max_batch`` sequences of the engine's profiling run."""
    graph_logit_bytes: float = Field(default=4.0, gt=0)
    """Bytes per logit a captured decode step holds at its end, per sequence and vocabulary entry (read with
    ``graphs_before_kv``). Default: fp32 logits alone; TensorRT-LLM's engine profile says 6 (its model forward ends
    in a ``LogitsProcessor`` that keeps the LM head's 16-bit output beside its fp32 copy)."""
    prefill_framework: Literal["eager", "compiled", "cuda_graphs"] | None = None
    """The framework the engine runs its prefill passes in where it differs from ``runtime.framework`` (which
    then prices the decode steps): e.g. ``eager`` for an engine that replays CUDA graphs for decode but prefills
    eagerly, paying the eager host time of a pass. ``None``: ``runtime.framework`` for both."""
    decode_gemms: Literal["call", "kernel"] = "call"
    """The rate the decode steps' GEMMs run at: ``kernel``, their kernels' own in-step rate (the profile's
    ``gemm_kernel``, fitted on GEMMs timed by their kernels' durations): a serving engine's decode step is one
    CUDA-graph replay of fused kernels without launch gaps, as a compiled step is (vLLM, SGLang, TensorRT-LLM);
    ``call``: the call-timed rate of back-to-back calls, whose power-cap gaps an eager step's other kernels hide
    behind. Prefills keep the call-timed rate (compute-bound at the power cap). docs/compute.md, "Served models'
    GEMMs: the decode grid"."""
    decode_context_buckets: list[int] | None = None
    """Context lengths (tokens) an engine's decode attention is padded up to (CUDA graphs captured per context
    bucket attend over the whole bucket): a step at context ``c`` is priced at the smallest bucket ``>= c``
    (above the last bucket: unpadded), ``c`` the step's longest context (the engine pads every sequence to that
    one's bucket). ``None``: the actual context, the step's mean."""
    mixed_step: Literal["fused", "separate"] = "fused"
    """A step with both prompts and decodes: one ``fused`` forward pass over the prompt chunks and the decode
    tokens (vLLM, SGLang, TensorRT-LLM, ``transformers``' continuous batching), or ``separate`` passes: the
    prompts prefilled in passes of their own, one per distinct prompt length (equal lengths batched), then the
    decode pass (``tools/bench_serving.py``'s reference engine). Each separate pass reads the weights and pays
    its host time; ``separate`` prompts are admitted whole (never chunked), first come first served while their
    tokens fit ``max_batch_tokens`` (the first one whatever its length)."""
    step_profile: str | None = None
    """A measured engine step profile (a name in ``hardware_specs/calibration/`` or a YAML path, written by
    ``simcore calibrate`` from ``tools/bench_serving.py --steps``): the steps are priced by its fitted decode and
    prefill times instead of the roofline step model; queueing, batching, KV blocks and scheduling stay
    simcore's. The scenario's model and GPU count must be the profiled ones (docs/serving.md, "Measured under
    load"). ``None``: the roofline step model."""
    speculative: SpeculativeSpec | None = None
    """Speculative decoding (draft length, acceptance rate, draft model or heads); ``None``: off
    (the default of vLLM, SGLang and TensorRT-LLM)."""
    router: Literal["least_loaded", "round_robin", "cache_aware"] = "least_loaded"
    """How arrivals pick a replica: fewest requests in the replica, in turn, or KV-cache aware (SGLang router's
    ``cache_aware`` policy with its default thresholds: the replica already holding the request's shared system
    prompt while the loads are balanced, the least loaded otherwise)."""
    disaggregated: DisaggSpec | None = None
    slo: SLOSpec = SLOSpec()
    seed: Int = 0

    @model_validator(mode="after")
    def _check(self) -> ServingSpec:
        if sum(x is not None for x in (self.rate, self.trace, self.concurrency)) != 1:
            raise ValueError(
                "give exactly one of 'rate' (requests/s), 'concurrency' (closed-loop users) or 'trace' (CSV file)"
            )
        if self.trace is not None and (
            "prompt" in self.model_fields_set or "output" in self.model_fields_set
        ):
            raise ValueError("a trace gives the request lengths; drop 'prompt' and 'output'")
        if self.priority_mix is not None and (
            not self.priority_mix or min(self.priority_mix) < 0 or sum(self.priority_mix) <= 0
        ):
            raise ValueError("priority_mix needs non-negative fractions with a positive sum")
        if self.cuda_graph_sizes is not None and (
            not self.cuda_graph_sizes or min(self.cuda_graph_sizes) < 1
        ):
            raise ValueError("cuda_graph_sizes needs batch sizes of at least 1")
        if self.decode_context_buckets is not None and (
            not self.decode_context_buckets or min(self.decode_context_buckets) < 1
        ):
            raise ValueError("decode_context_buckets needs context lengths of at least 1 token")
        if self.max_batch_tokens < self.max_batch:
            raise ValueError(
                f"max_batch_tokens ({self.max_batch_tokens}) must be at least max_batch ({self.max_batch}):"
                " every running sequence decodes one token per step"
            )
        return self


class DecodeFit(_Documented):
    """A decode step's fitted time: ``t = c0 + c_batch * b + c_kv * b * ctx`` seconds for ``b`` sequences
    attending over ``ctx`` tokens each (the context padded to the engine's buckets where it has them)."""

    c0: float = Field(ge=0)
    """Seconds a step costs whatever its batch (host work, kernel launches, the weights' read)."""
    c_batch: float = Field(ge=0)
    """Seconds per sequence of the batch."""
    c_kv: float = Field(ge=0)
    """Seconds per KV-cache token attended."""
    points: list[list[float]] = []
    """The fitted points: ``[batch, context, measured s, fitted s]``."""
    rms_rel: float = 0.0
    """Root-mean-square of the points' relative residuals (fitted / measured - 1)."""


class PrefillFit(_Documented):
    """A prefill pass of ``k`` prompts of ``n_i`` tokens: ``t = max(c0, c_token * sum(n_i) + c_token2 * sum(n_i**2))``
    seconds: the host's issue time of the pass (eager kernels, launched while the GPU runs) or its GPU work, GEMMs
    linear in the pass's tokens plus each prompt's causal attention, whichever is longer (docs/serving.md,
    "Measured under load"). ``c_shape``: what the first pass of a shape ``(k, n)`` the engine has not run yet adds
    (the eager engine's setup of its kernels for an input shape, cached per shape)."""

    c0: float = Field(ge=0)
    """Seconds of host work a pass takes whatever its tokens (the GPU work runs under it)."""
    c_token: float = Field(ge=0)
    """GPU seconds per prompt token of the pass (GEMMs)."""
    c_token2: float = Field(ge=0)
    """GPU seconds per squared prompt length (causal attention)."""
    c_shape: float = Field(default=0.0, ge=0)
    """Seconds the first pass of a new input shape adds (0: not measured)."""
    points: list[list[float]] = []
    """The fitted points: ``[prompt tokens, measured s, fitted s]``."""
    rms_rel: float = 0.0


class StepProfile(_Documented):
    """An engine's measured step costs on one GPU (``hardware_specs/calibration/served-<engine>-<gpu>.yaml``),
    fitted by :mod:`simcore.calibration.fit_served` from ``tools/bench_serving.py --steps``."""

    kind: Literal["serving_step_profile"] = "serving_step_profile"
    name: str
    engine: str
    """The engine measured (``runtime.implementation`` of its scenarios)."""
    gpu: str
    """The GPU it ran on, as the driver names it."""
    device: str
    """That GPU's device spec name (``h100``); a scenario on another device is an error."""
    gpus: Int = Field(default=1, gt=0)
    model: str
    """The model measured (``model.name``); a scenario naming another is an error."""
    precision: str = "bf16"
    context_buckets: list[int] | None = None
    """Context lengths the engine padded its decode attention up to when measured (the fit's contexts are the
    padded ones; a scenario states its engine's as ``serving.decode_context_buckets``). ``None``: none."""
    decode: DecodeFit
    prefill: PrefillFit
    source: str = ""
    """The measurements fitted."""
    fitted: str = ""
    """When (UTC date)."""

    def decode_time(self, b: float, ctx: float) -> float:
        """:class:`DecodeFit`'s time of a decode step of ``b`` sequences attending over ``ctx`` tokens each (s)."""
        d = self.decode
        return d.c0 + d.c_batch * b + d.c_kv * b * ctx

    def prefill_time(self, n: float) -> float:
        """:class:`PrefillFit`'s time of one ``n``-token prompt prefilled alone, of a shape run before (s)."""
        p = self.prefill
        return max(p.c0, p.c_token * n + p.c_token2 * n * n)


def padded_context(buckets: list[int] | None, ctx: float) -> float:
    """The context a decode step attends over: the smallest of ``buckets`` ``>= ctx`` (``ctx`` itself without
    buckets or above the last)."""
    for c in sorted(buckets or ()):
        if c >= ctx:
            return float(c)
    return float(ctx)


def load_step_profile(name_or_path: str) -> StepProfile:
    """The step profile ``name_or_path``: a ``calibration/<name>.yaml`` of the spec folders, else a file path."""
    from pathlib import Path

    from simcore.specs.loader import load_file
    from simcore.specs.registry import default_registry

    reg = default_registry()
    path = reg.calibration_path(name_or_path)
    if path is None:
        path = Path(name_or_path)
        if not path.is_file():
            known = sorted(k for k in reg.calibration_files if k.startswith("served-"))
            raise SpecError(
                f"unknown step profile {name_or_path!r}; known: {', '.join(known) or 'none'}",
                field="serving.step_profile",
            )
    return load_file(StepProfile, path)


ENGINE_FIELDS = (
    "scheduler",
    "prefix_caching",
    "step_order",
    "max_batch",
    "max_batch_tokens",
    "kv_block_tokens",
    "memory_utilization",
    "reserve_output_kv",
    "cuda_graph_sizes",
    "ep_exchange",
    "decode_gemms",
    "graphs_before_kv",
    "graph_logit_bytes",
)
"""The serving fields an engine profile sets."""


@lru_cache(maxsize=1)
def engine_profiles() -> dict[str, dict[str, Any]]:
    """The engine profiles of ``hardware_specs/engines/serving.yaml`` by name."""
    from simcore.specs.loader import read_yaml
    from simcore.specs.registry import builtin_dir

    return read_yaml(builtin_dir() / "engines" / "serving.yaml")


def engine_settings(
    engine: str, device: str, memory_bytes: float, multi_node_nvlink: bool = False
) -> dict[str, Any]:
    """The settings ``engine`` ships with on a GPU named ``device`` with ``memory_bytes`` of memory, in a system
    whose NVLink domain spans hosts or not (``multi_node_nvlink``, :attr:`System.multi_node_nvlink`): its
    defaults with the first memory tier it reaches applied, the CUDA-graph capture sizes expanded into a list
    (``None`` when the engine does not pad batches) and the MoE token exchange for the system
    (``ep_exchange``). Also ``overlap``: whether it overlaps scheduling with execution."""
    prof = engine_profiles().get(engine)
    if prof is None:
        raise SpecError(f"unknown engine {engine!r}; known: {', '.join(sorted(engine_profiles()))}")
    vals: dict[str, Any] = dict(prof["defaults"])
    graphs: dict[str, Any] = dict(vals.pop("cuda_graph_sizes"))
    gib = memory_bytes / 2**30
    for tier in prof.get("tiers", []):
        if gib >= tier["min_memory_gib"] and device.lower() not in tier.get("exclude_devices", []):
            vals.update({k: v for k, v in tier.items() if k not in ("min_memory_gib", "exclude_devices")})
            break
    top = int(vals.pop("cuda_graph_max", graphs["max"]))
    sizes = sorted({x for a, b, c in graphs["ranges"] for x in range(a, b, c) if x <= top})
    vals["cuda_graph_sizes"] = sizes if graphs.get("padding", False) else None
    vals["ep_exchange"] = engine_ep_exchange(engine, multi_node_nvlink)
    return vals


def engine_ep_exchange(engine: str, multi_node_nvlink: bool) -> str:
    """How ``engine``'s attention-DP MoE layers exchange tokens by default (its profile's ``ep_exchange``: one
    value, or one for systems whose NVLink domain spans hosts, ``multi_node_nvlink``, and a ``default``)."""
    ex = engine_profiles()[engine]["defaults"]["ep_exchange"]
    return str(ex["multi_node_nvlink" if multi_node_nvlink else "default"] if isinstance(ex, dict) else ex)


def with_engine(
    spec: ServingSpec, device: str, memory_bytes: float, multi_node_nvlink: bool = False
) -> ServingSpec:
    """``spec`` with its engine's settings (:func:`engine_settings`) in every field of
    :data:`ENGINE_FIELDS` the scenario did not set; ``spec`` itself without an engine."""
    if spec.engine is None:
        return spec
    vals = engine_settings(spec.engine, device, memory_bytes, multi_node_nvlink)
    update = {k: vals[k] for k in ENGINE_FIELDS if k in vals and k not in spec.model_fields_set}
    merged = spec.model_dump(exclude_unset=True) | update
    from simcore.specs.loader import validate

    return validate(ServingSpec, merged, prefix="serving")


__all__ = [
    "ENGINE_FIELDS",
    "DisaggSpec",
    "Engine",
    "LengthDist",
    "SLOSpec",
    "Scheduler",
    "SharedPrefixSpec",
    "ServingSpec",
    "SpeculativeSpec",
    "StepOrder",
    "DecodeFit",
    "PrefillFit",
    "StepProfile",
    "load_step_profile",
    "padded_context",
    "engine_profiles",
    "engine_ep_exchange",
    "engine_settings",
    "with_engine",
]
