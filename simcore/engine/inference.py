"""Analytic engine for inference: one prefill and one decode step, over numpy grids.

Prefill runs the forward pass over ``batch x prompt_len`` tokens (causal attention) and writes the
KV cache; the LM head runs on the last token of each sequence. A decode step runs the forward pass
for one new token per sequence with attention over ``context_len`` cached tokens. Tensor
parallelism adds two all-reduces per layer; pipeline stages run one after another for a single
batch (no micro-batching), with a point-to-point transfer between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore import memory as M
from simcore.engine.pricing import Priced, Pricer, breakdown_power_cap
from simcore.engine.training import comm_call_host
from simcore.specs.hardware import DTYPE_BYTES
from simcore.specs.profile import load_profile
from simcore.specs.resolve import ClusterInfo
from simcore.specs.scenario import InferenceSpec, ModelSpec
from simcore.workload import lowering as L
from simcore.workload.model import param_counts

Num = Any


LAUNCH_QUEUE_KERNELS = 1024
"""Kernels the host can have launched ahead of the GPU before a launch blocks (CUDA's pending-launch
queue; round 52's trace: at most 1022 launched and not started, then launches of 1-5 ms)."""


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
    pricer: Pricer, model: ModelSpec, lw: L.Layout, head_tokens: Num, pp: Num, sample_rows: Num | None = None
) -> Priced:
    """One forward pass: the layers over ``lw``'s tokens, the LM head over ``head_tokens`` rows and the
    next-token sampling over ``sample_rows`` sequences (default ``head_tokens``)."""
    rows = head_tokens if sample_rows is None else sample_rows
    pc = param_counts(model)
    out = pricer.price(L.embedding_fwd(model, lw))
    for moe, count in ((False, pc.dense_layers), (True, pc.moe_layers)):
        if count:
            out = out.merged(pricer.price(L.layer_fwd(model, lw, moe_layer=moe), count))
    out = out.merged(pricer.price(L.head_fwd(model, lw, tokens=head_tokens)))
    # sampling the next token: an argmax over each sequence's logits (PyTorch's reduce kernel, an
    # elementwise-class kernel in a trace), row-wise: a few sequences' vocabulary-wide rows run on few
    # SMs (round 8's decode_argmax, traces/h200/cold.csv.gz: ~26 us over 1-8 rows of 128,256 logits,
    # where their bytes alone give ~3 us)
    out = out.merged(
        pricer.price([L.mem_op("argmax", rows * model.vocab / lw.tp, 2.0, "elementwise", rows=rows)])
    )
    p2p_bytes = head_tokens * 0 + lw.tokens * model.hidden * lw.act_bytes
    out.add("pp_p2p", (np.asarray(pp, dtype=float) - 1) * pricer.comm_time("send_recv", p2p_bytes, "pp"))
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
    ``compiled_decode_record_fixed`` + ``_per_kernel`` of the graph at the decode passes' pace, once a call."""
    base = load_profile(cluster.device, calibration)
    prof = base.at_cpu_speed(cpu_op_time[0], inference=True) if cpu_op_time is not None else base
    # the decode passes' host at their own pace, where the run's probe gives one
    dec_prof = base.at_cpu_speed(decode_cpu_op_time, inference=True) if decode_cpu_op_time else prof
    act_key = "swiglu" if model.activation == "swiglu" else "gelu"
    host_cal = prof.host_layer
    layer_host = framework == "eager" and f"infer_decode_{act_key}" in host_cal
    # transformers' MoE layers have their own host entries (round 51: bf16 weights, the native grouped GEMM;
    # round 109: generate()'s decode passes, whose experts are batched GEMMs over gathered weights)
    batched = L.batched_experts(implementation, decode_loop, model.moe is not None)
    lk = prof.layer_key(
        act_key,
        "moe_native" if model.moe is not None else None,
        implementation,
        "infer_decode",
        attention_backend,
    )
    lk_dec = prof.layer_key(
        act_key,
        L.decode_moe_key(implementation, decode_loop, model.moe is not None),
        implementation,
        "infer_decode",
        attention_backend,
    )
    graph_floor = host_cal.get(f"graph_kernel_{act_key}", 0.0) if framework == "cuda_graphs" else 0.0
    pricer = Pricer.for_layout(
        cluster,
        tp=tp,
        pp=pp,
        framework=framework,
        calibration=calibration,
        per_op_host=not layer_host,
        profile=prof,
    )
    pricer.kernel_floor = graph_floor
    dt = inf.precision
    act = 2.0
    batch = np.asarray(inf.batch, dtype=float)
    ctx = inf.context_len if inf.context_len is not None else inf.prompt_len
    kv_dtype = inf.kv_cache_dtype or ("bf16" if dt == "fp32" else ("fp8" if dt == "fp8" else "bf16"))
    kvb = DTYPE_BYTES[kv_dtype]
    kv_extra = {
        "kv_cache": True,
        "kv_bytes": kvb,
        "fused": framework == "compiled",
        "strided_gate_up": L.strided_gate_up(framework, gate_up),
        "impl": implementation,
        "attention_backend": attention_backend,
    }
    pre = L.Layout(
        micro_batch=batch, seq=float(inf.prompt_len), tp=tp, dtype=dt, act_bytes=act, extra=kv_extra
    )
    # the prefill's LM head: each sequence's last position, or every prompt token (``prefill_logits``)
    logit_rows = batch * (float(inf.prompt_len) if inf.prefill_logits == "all" else 1.0)
    prefill = _forward(pricer, model, pre, logit_rows, pp, sample_rows=batch)
    # a compiled decode (``compiled_decode``) runs compiled code's fused kernels over transformers'
    # static cache, whose every slot its attention walks, masked: ``max_length - 1`` of them (the prompt
    # and the new tokens but the last, which is never fed back; the traces' SDPA inputs, round 95)
    fused_decode = (
        {"fused": True, "static_kv_seq": float(max(inf.prompt_len + inf.output_len - 1, 1))}
        if compiled_decode
        else {}
    )
    dec = L.Layout(
        micro_batch=batch,
        seq=1.0,
        tp=tp,
        dtype=dt,
        act_bytes=act,
        extra={**kv_extra, **fused_decode, "kv_seq": float(ctx), "batched_experts": batched},
    )
    # the device idles between the kernels of a replayed decode step (round 26: 0.37 us, 0.48 under the
    # profiler), unless the profile's kernel fits carry that gap already (its ``gap``)
    graph_gap = (
        host_cal.get(
            "profiled_graph_kernel_gap" if profiler else "graph_kernel_gap",
            host_cal.get("graph_kernel_gap", 0.0),
        )
        if "cuda_graphs" not in prof.gap
        else 0.0
    )
    if framework == "cuda_graphs":
        pricer.kernel_gap = graph_gap
    dec_pricer = pricer
    if compiled_decode:
        # the decode pass replays a captured graph of inductor's kernels: launched as a graph's (no host
        # per kernel, the replay's floor and gaps)
        dec_pricer = Pricer.for_layout(
            cluster,
            tp=tp,
            pp=pp,
            framework="cuda_graphs",
            calibration=calibration,
            per_op_host=True,
            profile=prof,
        )
        dec_pricer.kernel_floor = host_cal.get(f"graph_kernel_{act_key}", 0.0)
        dec_pricer.kernel_gap = graph_gap
    decode = _forward(dec_pricer, model, dec, batch, pp)
    pricer.kernel_gap = 0.0

    hosts: dict[str, Num] = {"prefill": 0.0, "decode": 0.0}
    if layer_host:
        # eager PyTorch inference is host-bound for small batches: the host issues every op of every
        # layer (measured per layer, traces/h200/host_infer.csv.gz); a step takes max(GPU, host)
        layers = float(model.layers) / np.asarray(pp, dtype=float)
        comm_calls = np.where(np.asarray(tp, dtype=float) > 1, 2.0, 0.0) * comm_call_host(cluster) * layers
        # a run's own code: its ops per decode layer over the calibrated code's; a reference layer's
        # prefill issues the same ops, transformers' the same 62 with either cache (round 85)
        cal_ops = prof.host_ops.calibrated_decode_layer_ops(implementation, lk_dec)
        ops = layer_ops / cal_ops if layer_ops is not None and cal_ops else 1.0
        for pr, mode, hp in ((prefill, "prefill", prof), (decode, "decode", dec_prof)):
            key = lk_dec if mode == "decode" else lk
            fixed = hp.host_of(f"infer_{mode}_fixed_{key}", profiler, implementation)
            gen = hp.host_of(f"infer_generate_fixed_{act_key}", profiler, implementation)
            if decode_loop == "generate" and gen > 0:
                # generate(): the host of a token beyond its layers, where measured (the prefill's
                # pass makes the first token; measured on SDPA layers: eager attention's own host
                # outside the layers, its 4-D mask built every pass, comes on top)
                sdpa = key.removesuffix("_eager")
                extra = fixed - hp.host_of(f"infer_{mode}_fixed_{sdpa}", profiler, implementation)
                fixed = gen + max(extra, 0.0) if sdpa != key else gen
            if pass_ops is not None or compiled_decode:
                # the run's own loop: its ops outside the layers over the calibrated code's
                args = (implementation, decode_loop == "generate" and gen > 0, act_key, key.endswith("_eager"))
                ref_ops = prof.host_ops.calibrated_pass_ops(*args)
                weight: float | None = pass_ops
                if compiled_decode:
                    # pass_ops weighs the loop between the graph's launches (none given: the calibrated
                    # compiled loop's), each op at a generate() op's cost; the eager prefill's pass also
                    # issues what a decode pass's graph holds (compiled_prefill_pass_weight)
                    weight = (
                        prof.host_ops.compiled_prefill_pass_weight(pass_ops, *args)
                        if mode == "prefill"
                        else pass_ops
                        if pass_ops is not None
                        else prof.host_ops.calibrated_pass_ops(*args, compiled_decode=True)
                    )
                if weight is not None and ref_ops:
                    fixed = fixed * weight / ref_ops
            per_layer = hp.host_of(f"infer_{mode}_{key}", profiler, implementation)
            if mode == "prefill" and compiled_decode:
                # an eager prefill in a run that compiles its decode issues its ops slower than a plain
                # eager run's at the same aten::linear pace, its layers' and those outside them (rounds 85
                # and 100's fit traces, fit_host.compiled_decode_costs)
                per_layer *= host_cal.get("compiled_decode_prefill_layer_ratio", 1.0)
                fixed = fixed * host_cal.get("compiled_decode_prefill_fixed_ratio", 1.0)
            scale = ops if mode == "decode" or implementation == "reference" else 1.0
            host = layers * scale * per_layer + fixed
            exposed: Num = 0.0
            if mode == "decode" and compiled_decode:
                # the layers run inside the replayed graph; the compiled call (dynamo's guards, the
                # inputs' copies into the graph's buffers, the launch) grows with the graph's kernels
                compiled_call = (
                    hp.host("compiled_decode_call_fixed", profiler)
                    + hp.host("compiled_decode_call_per_kernel", profiler) * pr.kernels
                )
                host = fixed + compiled_call
                if decode_sync_every:
                    # after each wait for the tokens the GPU idles while the host runs the loop's ops
                    # before the call, the call and the graph's launch: a line over the graph's kernels
                    # (rounds 96's and 106's GPU-bound fit traces, fit_host.compiled_decode_costs: a host that
                    # waits milliseconds runs it 1.0-1.3x slower than one that barely waits)
                    exposed = (
                        hp.host("compiled_decode_lead_fixed", profiler)
                        + hp.host("compiled_decode_lead_per_kernel", profiler) * pr.kernels
                    ) / decode_sync_every
            call = 0.0
            if mode == "prefill" and decode_loop == "generate" and gen > 0:
                # generate()'s own setup before its prefill (its config, logits processors and stopping
                # criteria built, the cache created or a static one reset): before any kernel, serial
                call = hp.host_of(
                    "compiled_decode_generate_call" if compiled_decode else "infer_generate_call",
                    profiler,
                    implementation,
                )
            if mode == "prefill" and compiled_decode and decode_graph_records:
                # a call that records its decode graph again: capture, instantiate, the old pool freed, a
                # sync, the GPU idle meanwhile; once a call (in its first decode pass), serial, at the decode
                # passes' pace (round 96's fit traces)
                call = call + decode_graph_records * (
                    dec_prof.host("compiled_decode_record_fixed", profiler)
                    + dec_prof.host("compiled_decode_record_per_kernel", profiler) * decode.kernels
                )
            hosts[mode] = host + comm_calls + call
            pr.add("host_overhead", np.maximum(host + comm_calls - pr.total(), exposed) + call)

    if framework == "cuda_graphs" and decode_sync_every:
        # after each wait for the tokens the GPU idles until the host has launched the next graph, a
        # call whose time grows with the graph's kernels (round 26, fit_host.graph_loop_costs)
        sync = (
            dec_prof.host("graph_sync_fixed", profiler)
            + dec_prof.host("graph_sync_per_kernel", profiler) * decode.kernels
        )
        decode.add("graph_sync", sync / decode_sync_every)
    if framework == "cuda_graphs" and profiler:
        # under the profiler the device also idles between back-to-back replays (round 26's traces)
        decode.add("graph_sync", host_cal.get("profiled_graph_replay_gap", 0.0))

    # a power-capped GPU stretches a phase whose kernels would draw more than its TDP on average
    for pr in (prefill, decode):
        pr.add("power_cap", breakdown_power_cap(cluster.device, prof, pr.time, dt))

    pc = param_counts(model)
    wbytes = DTYPE_BYTES[dt] if dt != "fp8" else 1.0
    weights = pc.total * wbytes / (np.asarray(tp, dtype=float) * np.asarray(pp, dtype=float))
    kv = M.kv_cache_bytes(model, batch, ctx + inf.output_len, tp, kvb) / np.asarray(pp, dtype=float)
    # transient activations: the widest layer intermediate (plus the residual stream) of a prefill
    # over prompt_len tokens or a decode step over one token per sequence, plus fp32 logits of the
    # last position
    # the MLP is the widest point: SwiGLU holds the fused gate/up output (2f), silu(gate) (f) and the
    # product (f) at once; GELU holds fc1's output and its activation (2f)
    width = max(model.ffn_hidden * (4 if model.activation == "swiglu" else 2), 3 * model.hidden)
    per_token = (width / np.asarray(tp, dtype=float) + 2 * model.hidden) * act
    acts_prefill = batch * inf.prompt_len * per_token
    acts_decode = batch * per_token
    logits = batch * model.vocab / np.asarray(tp, dtype=float) * 4.0
    # every prompt position's logits (``prefill_logits: all``): held in the activations' dtype
    all_logits = (
        logit_rows * model.vocab / np.asarray(tp, dtype=float) * act if inf.prefill_logits == "all" else 0.0
    )
    prefill_peak = weights + kv + acts_prefill + np.maximum(logits, all_logits)
    decode_peak = weights + kv + acts_decode + logits
    total = np.maximum(prefill_peak, decode_peak)
    return InferenceEval(
        prefill=prefill,
        decode=decode,
        prefill_time_s=prefill.total(),
        decode_step_time_s=decode.total(),
        prefill_host_s=hosts["prefill"],
        decode_host_s=hosts["decode"],
        memory={
            "weights": weights,
            "kv_cache": kv,
            "activations": acts_prefill,
            "logits": logits,
            "prefill_peak": prefill_peak,
            "decode_peak": decode_peak,
            "total": total,
        },
        memory_per_gpu_bytes=total,
        context_len=ctx,
    )
