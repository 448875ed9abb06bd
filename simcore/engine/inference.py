"""Analytic engine for inference: one prefill and one decode step, over numpy grids.

Prefill runs the forward pass over ``batch x prompt_len`` tokens (causal attention) and writes the
KV cache; the LM head runs on the last token of each sequence. A decode step runs the forward pass
for one new token per sequence with attention over ``context_len`` cached tokens. Tensor
parallelism adds two all-reduces per layer; pipeline stages run one after another for a single
batch (no micro-batching), with a point-to-point transfer between them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simcore import memory as M
from simcore.compute.ops import PAGED_DECODE
from simcore.engine.pricing import Priced, Pricer, breakdown_power_cap
from simcore.engine.training import comm_call_host
from simcore.errors import SpecError
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.profile import FP8_TENSOR, ComputeProfile, load_profile
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import InferenceSpec, ModelSpec
from simcore.workload import hybrid as H
from simcore.workload import lowering as L
from simcore.workload.model import param_counts
from simcore.workload.precision import inference_gemm_family
from simcore.workload.ssm import layer_kinds, mamba_state_elements

Num = Any


LAUNCH_QUEUE_KERNELS = 1024
"""Kernels the host can have launched ahead of the GPU before a launch blocks (CUDA's pending-launch
queue; a committed batch-32 decode trace holds at most 1022 launched and not started,
then launches of 1-5 ms; see docs/traces.md)."""


@dataclass
class InferenceEval:
    prefill: Priced
    decode: Priced
    prefill_time_s: Num
    decode_step_time_s: Num
    prefill_host_s: Num
    """Host seconds to issue the prefill (eager layer host model; 0 where not modelled): hidden under
    the GPU when the prefill is GPU-bound, but a loop that never waits issues the decode steps behind it."""
    decode_host_s: Num
    """Host seconds to issue one decode step (as ``prefill_host_s``)."""
    memory: dict[str, Num]
    memory_per_gpu_bytes: Num
    context_len: Num


def _forward(
    pricer: Pricer, model: ModelSpec, lw: L.Layout, head_tokens: Num, pp: Num, sample_rows: Num | None = None,
    quantize_inputs: bool = False,
) -> Priced:
    """One forward pass: the layers over ``lw``'s tokens, the LM head over ``head_tokens`` rows and the
    next-token sampling over ``sample_rows`` sequences (default ``head_tokens``); ``quantize_inputs``: a serving
    engine's quantize kernels before its FP8/FP4 linears (:func:`~simcore.workload.lowering.activation_quantize_fwd`)."""
    rows = head_tokens if sample_rows is None else sample_rows
    out = pricer.price(L.embedding_fwd(model, lw))
    # each kind of layer once, times its count (a hybrid: its pattern's Mamba, attention, MLP, MoE layers)
    for kind, count in layer_kinds(model):
        ops = H.layer_fwd(model, lw, kind)
        out = out.merged(pricer.price(ops, count))
        if quantize_inputs:
            out = out.merged(pricer.price(L.activation_quantize_fwd(ops, lw), count))
    out = out.merged(pricer.price(L.head_fwd(model, lw, tokens=head_tokens)))
    # sampling the next token: an argmax over each sequence's logits (PyTorch's reduce kernel, an
    # elementwise-class kernel in a trace), row-wise: a few sequences' vocabulary-wide rows run on few
    # SMs (decode_argmax in traces/h200/cold.csv.gz: ~26 us over 1-8 rows of 128,256 logits,
    # where their bytes alone give ~3 us)
    out = out.merged(
        pricer.price([L.mem_op("argmax", rows * model.vocab / lw.tp, 2.0, "elementwise", rows=rows)])
    )
    p2p_bytes = head_tokens * 0 + lw.tokens * model.hidden * lw.act_bytes
    out.add("pp_p2p", (np.asarray(pp, dtype=float) - 1) * pricer.comm_time("send_recv", p2p_bytes, "pp"))
    return out


@dataclass
class _Run:
    """The run's options and compute profiles: what every part of :func:`evaluate` reads."""

    model: ModelSpec
    inf: InferenceSpec
    cluster: ClusterInfo
    tp: Num
    pp: Num
    framework: str
    calibration: str | None
    profiler: bool
    gate_up: str
    implementation: str
    decode_loop: str
    attention_backend: str
    layer_ops: float | None
    pass_ops: float | None
    compiled_decode: bool
    decode_sync_every: int | None
    decode_graph_records: float
    prof: ComputeProfile
    """The profile at the run's CPU speed (the prefill's)."""
    dec_prof: ComputeProfile
    """The profile at the decode passes' CPU speed."""
    act_key: str
    layer_host: bool
    """Eager host time from the profile's measured per-layer host tables (else per op, in the pricer)."""
    lk: str
    """The profile's host-table key of a prefill layer."""
    lk_dec: str
    """The profile's host-table key of a decode layer."""
    ep: Num = 1
    """Expert-parallel ranks the MoE layers' experts are sharded over (1: experts split by ``tp``)."""
    ep_exchange: str = "all_to_all"
    """How the MoE layers move tokens between the ``ep`` ranks (:attr:`simcore.workload.layout.Layout.ep_exchange`)."""
    decode_kernel_gemms: bool = False
    """The decode step's GEMMs at their kernels' own in-step rate (:attr:`simcore.engine.pricing.Pricer.kernel_gemms`)."""
    quantize_inputs: bool = False
    """A serving engine's dense FP8/FP4 layers quantize their 16-bit inputs in kernels of their own
    (:func:`~simcore.workload.lowering.activation_quantize_fwd`)."""

    @property
    def host_cal(self) -> dict[str, float]:
        return self.prof.host_layer


def _layouts(r: _Run, batch: Num, kvb: float, ctx: Num) -> tuple[L.Layout, L.Layout]:
    """The lowering layouts of a prefill over ``batch x prompt_len`` tokens and of a decode step of
    one token per sequence attending to ``ctx`` cached tokens. A compiled decode (``compiled_decode``)
    runs compiled code's fused kernels over transformers' static cache, whose every slot its attention
    walks, masked: ``max_length - 1`` of them (the prompt and the new tokens but the last, which is
    never fed back; as the traces' SDPA inputs show)."""
    inf, tp, dt, act = r.inf, r.tp, r.inf.precision, 2.0
    pre = L.Layout(
        micro_batch=batch,
        seq=float(inf.prompt_len),
        tp=tp,
        dtype=dt,
        act_bytes=act,
        kv_cache=True,
        kv_elt=kvb,
        fused=r.framework == "compiled",
        strided_gate_up=L.strided_gate_up(r.framework, r.gate_up),
        implementation=r.implementation,
        attention_backend=r.attention_backend,
        ep=r.ep,
        etp=1 if r.ep > 1 else None,
        dispatch_bytes=_dispatch_bytes(r),
        ep_exchange=r.ep_exchange,
    )
    batched = L.batched_experts(r.implementation, r.decode_loop, r.model.moe is not None)
    dec = L.Layout(
        micro_batch=batch,
        seq=1.0,
        tp=tp,
        dtype=dt,
        act_bytes=act,
        kv_cache=True,
        kv_elt=kvb,
        fused=r.framework == "compiled" or r.compiled_decode,
        strided_gate_up=L.strided_gate_up(r.framework, r.gate_up),
        implementation=r.implementation,
        attention_backend=r.attention_backend,
        kv_seq=float(ctx),
        static_cache=float(max(inf.prompt_len + inf.output_len - 1, 1)) if r.compiled_decode else None,
        batched_experts=batched,
        ep=r.ep,
        etp=1 if r.ep > 1 else None,
        dispatch_bytes=_dispatch_bytes(r),
        ep_exchange=r.ep_exchange,
    )
    return pre, dec


FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
"""Bytes an element of a token an FP8 expert-parallel dispatch sends: E4M3 values with an fp32 scale per 128
(DeepEP's low-latency and normal dispatch in FP8, as SGLang and TensorRT-LLM run wide EP under FP8 weights)."""


def _dispatch_bytes(r: _Run) -> float | None:
    """Bytes an element of a dispatched token: FP8 (:data:`FP8_DISPATCH_BYTES`) where a wide-EP serving run
    (``ep > 1``) has FP8 or FP4 weights, else the activations' (``None``)."""
    return FP8_DISPATCH_BYTES if r.ep > 1 and r.inf.precision in ("fp8", "fp4") else None


def _graph_gap(r: _Run) -> float:
    """Device idle seconds between the kernels of a replayed decode step (measured on the profile's
    device; more under the profiler), unless the profile's kernel fits carry that gap already (its
    ``gap``)."""
    if "cuda_graphs" in r.prof.gap:
        return 0.0
    host_cal = r.host_cal
    return host_cal.get(
        "profiled_graph_kernel_gap" if r.profiler else "graph_kernel_gap",
        host_cal.get("graph_kernel_gap", 0.0),
    )


def _price_passes(r: _Run, pre: L.Layout, dec: L.Layout, logit_rows: Num, batch: Num) -> tuple[Priced, Priced]:
    """GPU seconds by category of the prefill and of one decode step. Under CUDA graphs each kernel
    takes at least the graph's per-kernel floor plus the replay's gap; a compiled decode replays a
    captured graph of inductor's kernels (no host per kernel, the replay's floor and gaps)."""
    graph_floor = r.host_cal.get(f"graph_kernel_{r.act_key}", 0.0) if r.framework == "cuda_graphs" else 0.0
    pricer = Pricer.for_layout(
        r.cluster,
        tp=r.tp,
        pp=r.pp,
        ep=r.ep,
        framework=r.framework,
        calibration=r.calibration,
        per_op_host=not r.layer_host,
        profile=r.prof,
    )
    pricer.kernel_floor = graph_floor
    # inference FP8 is per-tensor scaled, as FP8 checkpoints ship; NVFP4 block-scaled in Blackwell's MMA: both the
    # per-tensor kernel family (docs/compute.md, "FP8 GEMMs by scaling")
    pricer.per_tensor = True
    pricer.expert_per_tensor = expert_family_per_tensor(r.prof)
    prefill = _forward(pricer, r.model, pre, logit_rows, r.pp, sample_rows=batch, quantize_inputs=r.quantize_inputs)
    graph_gap = _graph_gap(r)
    if r.framework == "cuda_graphs":
        pricer.kernel_gap = graph_gap
    dec_pricer = pricer
    if r.compiled_decode:
        dec_pricer = Pricer.for_layout(
            r.cluster,
            tp=r.tp,
            pp=r.pp,
            ep=r.ep,
            framework="cuda_graphs",
            calibration=r.calibration,
            per_op_host=True,
            profile=r.prof,
        )
        dec_pricer.kernel_floor = r.host_cal.get(f"graph_kernel_{r.act_key}", 0.0)
        dec_pricer.kernel_gap = graph_gap
    dec_pricer.kernel_gemms = r.decode_kernel_gemms
    dec_pricer.per_tensor = True
    dec_pricer.expert_per_tensor = expert_family_per_tensor(r.prof)
    decode = _forward(dec_pricer, r.model, dec, batch, r.pp, quantize_inputs=r.quantize_inputs)
    pricer.kernel_gap = 0.0
    pricer.kernel_gemms = False
    return prefill, decode


def expert_family_per_tensor(prof: ComputeProfile) -> bool | None:
    """Whether a serving engine's MoE expert GEMMs run the per-tensor family (:attr:`Pricer.expert_per_tensor`): the
    engines' fused MoE is a CUTLASS grouped GEMM with per-expert scales, nearer PyTorch's CUTLASS row-wise kernel
    than cuBLASLt's per-tensor one (``False``), except on a GPU whose per-tensor family was measured on its own die
    (an engine table, ``prof.gemm_measured``): the transferred row-wise family is further from that die's kernels
    than its own measurement (``None``: as the dense GEMMs). docs/compute.md, "FP8 GEMMs by scaling"."""
    return None if FP8_TENSOR in prof.gemm_measured else False


def _pass_fixed_host(r: _Run, mode: str, key: str, hp: ComputeProfile) -> tuple[float, float]:
    """(host seconds of a ``mode`` pass outside its layers, generate()'s per-token host where measured).

    generate(): the host of a token beyond its layers, where measured (the prefill's pass makes the
    first token; measured on SDPA layers: eager attention's own host outside the layers, its 4-D mask
    built every pass, comes on top). A run's own loop (``pass_ops``) scales it by its ops outside the
    layers over the calibrated code's; a compiled decode weighs the loop between the graph's launches
    (none given: the calibrated compiled loop's), each op at a generate() op's cost, and the eager
    prefill's pass also issues what a decode pass's graph holds (``HostOps.compiled_prefill_pass_weight``)."""
    profiler, implementation, act_key = r.profiler, r.implementation, r.act_key
    pass_ops, compiled_decode = r.pass_ops, r.compiled_decode
    fixed = hp.host_of(f"infer_{mode}_fixed_{key}", profiler, implementation)
    gen = hp.host_of(f"infer_generate_fixed_{act_key}", profiler, implementation)
    if r.decode_loop == "generate" and gen > 0:
        sdpa = key.removesuffix("_eager")
        extra = fixed - hp.host_of(f"infer_{mode}_fixed_{sdpa}", profiler, implementation)
        fixed = gen + max(extra, 0.0) if sdpa != key else gen
    if pass_ops is not None or compiled_decode:
        args = (implementation, r.decode_loop == "generate" and gen > 0, act_key, key.endswith("_eager"))
        ref_ops = r.prof.host_ops.calibrated_pass_ops(*args)
        weight: float | None = pass_ops
        if compiled_decode:
            weight = (
                r.prof.host_ops.compiled_prefill_pass_weight(pass_ops, *args)
                if mode == "prefill"
                else pass_ops
                if pass_ops is not None
                else r.prof.host_ops.calibrated_pass_ops(*args, compiled_decode=True)
            )
        if weight is not None and ref_ops:
            fixed = fixed * weight / ref_ops
    return fixed, gen


def _add_pass_host(
    r: _Run, pr: Priced, mode: str, hp: ComputeProfile, comm_calls: Num, ops: float, decode_kernels: Num
) -> Num:
    """Add to ``pr`` the host seconds the GPU waits for in a ``mode`` pass (``host_overhead``); return
    the pass's host seconds.

    The host issues every op of every layer (``infer_{mode}_{key}`` per layer, scaled by the run's
    own ops per layer, ``ops``) plus the pass's work outside them and the collectives' calls; the pass
    takes ``max(GPU, host)``. An eager prefill in a run that compiles its decode issues its ops slower
    than a plain eager run's at the same aten::linear pace (``compiled_decode_prefill_*_ratio``). A
    compiled decode runs its layers inside the replayed graph: its host is the loop's ops and the
    compiled call (dynamo's guards, the inputs' copies into the graph's buffers, the launch), a line
    over the graph's kernels; after each wait for the tokens the GPU idles while the host runs the
    loop's ops before the call, the call and the launch (``compiled_decode_lead_*``: a host that waits
    milliseconds runs it 1.0-1.3x slower than one that barely waits). Before its prefill, generate()
    sets itself up (its config, logits processors and stopping criteria built, the cache created or a
    static one reset), serially; a call that records its decode graph again (capture, instantiate, the
    old pool freed, a sync, the GPU idle meanwhile) does so once, in its first decode pass, at the
    decode passes' pace (see docs/compute.md, host model)."""
    profiler, implementation, compiled_decode = r.profiler, r.implementation, r.compiled_decode
    key = r.lk_dec if mode == "decode" else r.lk
    fixed, gen = _pass_fixed_host(r, mode, key, hp)
    per_layer = hp.host_of(f"infer_{mode}_{key}", profiler, implementation)
    if mode == "prefill" and compiled_decode:
        per_layer *= r.host_cal.get("compiled_decode_prefill_layer_ratio", 1.0)
        fixed = fixed * r.host_cal.get("compiled_decode_prefill_fixed_ratio", 1.0)
    scale = ops if mode == "decode" or implementation == "reference" else 1.0
    layers = float(r.model.layers) / np.asarray(r.pp, dtype=float)
    host = layers * scale * per_layer + fixed
    exposed: Num = 0.0
    if mode == "decode" and compiled_decode:
        compiled_call = (
            hp.host("compiled_decode_call_fixed", profiler)
            + hp.host("compiled_decode_call_per_kernel", profiler) * pr.kernels
        )
        host = fixed + compiled_call
        if r.decode_sync_every:
            exposed = (
                hp.host("compiled_decode_lead_fixed", profiler)
                + hp.host("compiled_decode_lead_per_kernel", profiler) * pr.kernels
            ) / r.decode_sync_every
    call = 0.0
    if mode == "prefill" and r.decode_loop == "generate" and gen > 0:
        call = hp.host_of(
            "compiled_decode_generate_call" if compiled_decode else "infer_generate_call",
            profiler,
            implementation,
        )
    if mode == "prefill" and compiled_decode and r.decode_graph_records:
        call = call + r.decode_graph_records * (
            r.dec_prof.host("compiled_decode_record_fixed", profiler)
            + r.dec_prof.host("compiled_decode_record_per_kernel", profiler) * decode_kernels
        )
    pr.add("host_overhead", np.maximum(host + comm_calls - pr.total(), exposed) + call)
    return host + comm_calls + call


def _add_host(r: _Run, prefill: Priced, decode: Priced) -> dict[str, Num]:
    """Eager PyTorch inference is host-bound for small batches: the host issues every op of every
    layer (measured per layer, traces/h200/host_infer.csv.gz); a pass takes max(GPU, host). Adds the
    exposed host to both passes; returns each pass's host seconds (see docs/compute.md, host model)."""
    prof = r.prof
    layers = float(r.model.layers) / np.asarray(r.pp, dtype=float)
    comm_calls = np.where(np.asarray(r.tp, dtype=float) > 1, 2.0, 0.0) * comm_call_host(r.cluster) * layers
    # a run's own code: its ops per decode layer over the calibrated code's; a reference layer's
    # prefill issues the same ops, transformers' the same 62 with either cache
    cal_ops = prof.host_ops.calibrated_decode_layer_ops(r.implementation, r.lk_dec)
    ops = r.layer_ops / cal_ops if r.layer_ops is not None and cal_ops else 1.0
    return {
        "prefill": _add_pass_host(r, prefill, "prefill", prof, comm_calls, ops, decode.kernels),
        "decode": _add_pass_host(r, decode, "decode", r.dec_prof, comm_calls, ops, decode.kernels),
    }


def _add_graph_sync(r: _Run, decode: Priced) -> None:
    """CUDA graphs: after each wait for the tokens the GPU idles until the host has launched the next
    graph, a call whose time grows with the graph's kernels (fit_host.graph_loop_costs), once every
    ``decode_sync_every`` steps; under the profiler the device also idles between back-to-back
    replays."""
    if r.framework == "cuda_graphs" and r.decode_sync_every:
        sync = (
            r.dec_prof.host("graph_sync_fixed", r.profiler)
            + r.dec_prof.host("graph_sync_per_kernel", r.profiler) * decode.kernels
        )
        decode.add("graph_sync", sync / r.decode_sync_every)
    if r.framework == "cuda_graphs" and r.profiler:
        decode.add("graph_sync", r.host_cal.get("profiled_graph_replay_gap", 0.0))


def inference_memory(
    model: ModelSpec, inf: InferenceSpec, tp: Num, pp: Num, batch: Num, ctx: Num, kvb: float, logit_rows: Num,
    ep: Num = 1,
) -> dict[str, Num]:
    """Bytes per GPU by part: weights (over ``tp x pp``; with ``ep > 1`` the routed experts over
    ``ep x pp``; the embedding and LM head in 16 bits under FP8/FP4 weights, a vision encoder's
    ``vision_params`` in 16 bits on every GPU), the KV cache of ``ctx + output_len`` tokens
    (``kvb`` bytes an element; a hybrid's attention layers only), the Mamba layers' recurrent state
    (:func:`~simcore.workload.ssm.mamba_state_elements`, in the activations' dtype, constant in the context;
    ``mamba_state``, part of ``kv_cache``), and the transient activations of the prefill or a decode step.

    Transient activations: the widest layer intermediate (plus the residual stream) of a prefill over
    ``prompt_len`` tokens or a decode step over one token per sequence, plus fp32 logits of the last
    position. The MLP is the widest point: SwiGLU holds the fused gate/up output (2f), silu(gate) (f)
    and the product (f) at once; GELU holds fc1's output and its activation (2f). With
    ``prefill_logits: all`` every prompt position's logits are held in the activations' dtype."""
    act = 2.0
    dt = inf.precision
    tpf = np.asarray(tp, dtype=float)
    pc = param_counts(model)
    experts = float(pc.moe_layer_experts * pc.moe_layers) if np.any(np.asarray(ep) > 1) else 0.0
    # FP8/FP4 checkpoints quantize the linear layers inside the transformer blocks only: the embedding and the LM
    # head stay in 16 bits, as does a multimodal checkpoint's vision encoder, held whole on every GPU
    wb = DTYPE_BYTES[dt]
    edge = float(pc.embedding + pc.lm_head)
    body = (pc.total - experts - edge) * wb + edge * max(wb, act)
    weights = (body / tpf + experts * wb / np.asarray(ep, dtype=float)) / np.asarray(pp, dtype=float)
    weights = weights + model.vision_params * act
    kv = M.kv_cache_bytes(model, batch, ctx + inf.output_len, tp, kvb) / np.asarray(pp, dtype=float)
    state = mamba_state_elements(model, batch, tp) * act / np.asarray(pp, dtype=float)
    kv = kv + state
    width = max(model.ffn_hidden * (4 if model.activation == "swiglu" else 2), 3 * model.hidden)
    per_token = (width / tpf + 2 * model.hidden) * act
    acts_prefill = batch * inf.prompt_len * per_token
    acts_decode = batch * per_token
    logits = batch * model.vocab / tpf * 4.0
    all_logits = logit_rows * model.vocab / tpf * act if inf.prefill_logits == "all" else 0.0
    prefill_peak = weights + kv + acts_prefill + np.maximum(logits, all_logits)
    decode_peak = weights + kv + acts_decode + logits
    out = {
        "weights": weights,
        "kv_cache": kv,
        "activations": acts_prefill,
        "logits": logits,
        "prefill_peak": prefill_peak,
        "decode_peak": decode_peak,
        "total": np.maximum(prefill_peak, decode_peak),
    }
    if model.mamba is not None:
        out["mamba_state"] = state
    return out


def evaluate(
    model: ModelSpec,
    inf: InferenceSpec,
    cluster: ClusterInfo,
    tp: Num = 1,
    pp: Num = 1,
    framework: str = "eager",
    calibration: str | None = None,
    profiler: bool = False,
    gate_up: str = "separate",
    cpu_op_time: tuple[float, float | None] | None = None,
    decode_sync_every: int | None = 1,
    implementation: str = "reference",
    decode_loop: str = "manual",
    attention_backend: str = "flash",
    layer_ops: float | None = None,
    pass_ops: float | None = None,
    compiled_decode: bool = False,
    decode_cpu_op_time: float | None = None,
    decode_graph_records: float = 0.0,
    paged_kv: bool = False,
    ep: int = 1,
    ep_exchange: str = "all_to_all",
    decode_kernel_gemms: bool = False,
) -> InferenceEval:
    """Price a prefill of ``prompt_len`` tokens and a decode step at ``context_len`` for ``batch``.
    ``cpu_op_time``: the CPU's probe speed (``RuntimeSpec.cpu_op_time``), scaling host times;
    ``decode_sync_every``: decode steps per host synchronization (``None``: never), which under CUDA
    graphs exposes the next graph's launch each time; ``attention_backend``: whose fused attention
    kernels (``RuntimeSpec.attention_backend``); ``layer_ops``: ops a decode layer of the run's own
    code issues (``RuntimeSpec.layer_ops.fwd``), scaling the eager host per layer by their ratio to the
    calibrated code's (``HostOps.calibrated_decode_layer_ops``: the reference code's prefill and decode
    layers, ``transformers``' decode layers); ``pass_ops``: ops a pass of the run's code issues
    outside its layers (``RuntimeSpec.pass_ops``), scaling the host of a pass beyond its layers by their
    ratio to the calibrated code's (``HostOps.calibrated_pass_ops``); ``compiled_decode``: each decode pass
    a CUDA-graph replay of torch.compile's fused kernels (``RuntimeSpec.compiled_decode``), the prefill
    under ``framework``: the pass's host is the loop's own ops outside the layers plus the compiled
    call (``compiled_decode_call_fixed`` + ``_per_kernel`` of the graph), none per layer;
    ``decode_cpu_op_time``: the CPU's probe speed in the decode passes where it differs from the prefill's
    (``RuntimeSpec.cpu_op_time.decode``: a compiled decode's loop paced by its own ops, seconds), scaling
    the decode passes' host (``None``: ``cpu_op_time``'s); ``decode_graph_records``: decode graphs each call
    records again (``RuntimeSpec.decode_graph_records``), each idling the GPU for
    ``compiled_decode_record_fixed`` + ``_per_kernel`` of the graph at the decode passes' pace, once a call;
    ``ep``: expert-parallel ranks (a serving engine's attention data parallelism with wide EP: ``tp`` is then
    the attention's, every rank's experts ``experts / ep`` whole, ``etp`` 1, the dispatch and combine
    all-to-alls over ``ep`` ranks of the cluster's fabric; the weights per GPU follow); ``ep_exchange``: those
    all-to-alls, or an all-gather of every rank's tokens and a reduce-scatter (``all_gather``: TensorRT-LLM
    without multi-node NVLink);
    ``paged_kv``: a serving engine's paged KV cache, whose decode steps run the engines' paged decode
    attention kernels (:data:`simcore.compute.ops.PAGED_DECODE`: the KV stream at the device's streaming
    rate) instead of ``attention_backend``'s; the prefill keeps ``attention_backend``; ``decode_kernel_gemms``:
    the decode step's GEMMs at their kernels' own in-step rate (``gemm_kernel``; a serving engine's CUDA-graph
    replay, ``ServingSpec.decode_gemms``), the prefill's at the profile's call-timed rate.

    The parts: GPU time of the passes (:func:`_price_passes`), the host (:func:`_add_host`), CUDA
    graphs' sync (:func:`_add_graph_sync`), the power cap and memory (:func:`inference_memory`)."""
    if inf.precision == "fp4" and "fp4" not in cluster.device.peak:
        raise SpecError(
            f"fp4 (NVFP4) needs FP4 tensor cores, which {cluster.device.name} lacks (Blackwell: b200, b300, "
            "gb200, gb300); use fp8 or bf16",
            field="inference.precision",
        )
    base = load_profile(cluster.device, calibration)
    prof = base.at_cpu_speed(cpu_op_time[0], inference=True) if cpu_op_time is not None else base
    act_key = "swiglu" if model.activation == "swiglu" else "gelu"
    # transformers' MoE layers have their own host entries (bf16 weights, the native grouped GEMM;
    # generate()'s decode passes, whose experts are batched GEMMs over gathered weights)
    moe = model.moe is not None
    r = _Run(
        model, inf, cluster, tp, pp, framework, calibration, profiler, gate_up, implementation,
        decode_loop, attention_backend, layer_ops, pass_ops, compiled_decode, decode_sync_every,
        decode_graph_records,
        prof=prof,
        # the decode passes' host at their own pace, where the run's probe gives one
        dec_prof=base.at_cpu_speed(decode_cpu_op_time, inference=True) if decode_cpu_op_time else prof,
        ep=ep,
        ep_exchange=ep_exchange,
        decode_kernel_gemms=decode_kernel_gemms,
        # a serving engine's low-precision linears quantize their inputs (models without experts; MoE serving prices its own)
        quantize_inputs=paged_kv and inf.precision in L.LOW_PRECISION and not moe,
        act_key=act_key,
        layer_host=framework == "eager" and f"infer_decode_{act_key}" in prof.host_layer,
        lk=prof.layer_key(act_key, "moe_native" if moe else None, implementation, "infer_decode", attention_backend),
        lk_dec=prof.layer_key(
            act_key, L.decode_moe_key(implementation, decode_loop, moe), implementation, "infer_decode",
            attention_backend,
        ),
    )
    dt = inf.precision
    batch = np.asarray(inf.batch, dtype=float)
    ctx = inf.context_len if inf.context_len is not None else inf.prompt_len
    kvb = DTYPE_BYTES[M.kv_cache_dtype(dt, inf.kv_cache_dtype)]
    pre, dec = _layouts(r, batch, kvb, ctx)
    if paged_kv:
        dec = replace(dec, attention_backend=PAGED_DECODE)
    # the prefill's LM head: each sequence's last position, or every prompt token (``prefill_logits``)
    logit_rows = batch * (float(inf.prompt_len) if inf.prefill_logits == "all" else 1.0)
    prefill, decode = _price_passes(r, pre, dec, logit_rows, batch)
    hosts: dict[str, Num] = _add_host(r, prefill, decode) if r.layer_host else {"prefill": 0.0, "decode": 0.0}
    _add_graph_sync(r, decode)
    # a power-capped GPU stretches a phase whose kernels would draw more than its TDP on average
    for pr in (prefill, decode):
        pr.add("power_cap", breakdown_power_cap(cluster.device, prof, pr.time, inference_gemm_family(dt)))
    memory = inference_memory(model, inf, tp, pp, batch, ctx, kvb, logit_rows, ep)
    return InferenceEval(
        prefill=prefill,
        decode=decode,
        prefill_time_s=prefill.total(),
        decode_step_time_s=decode.total(),
        prefill_host_s=hosts["prefill"],
        decode_host_s=hosts["decode"],
        memory=memory,
        memory_per_gpu_bytes=memory["total"],
        context_len=ctx,
    )
