"""Profiler traces of Hugging Face ``transformers`` models: another implementation than ``tools/gpt.py``.

Every other trace of this repository runs the models of ``tools/gpt.py`` (fused norms, one gate/up
GEMM, SDPA). A user's trace more often runs a Hugging Face model, whose layers issue other ops: GPT-2's
``Conv1D`` (``addmm`` with a bias), its tanh-approximated GELU written out of eight elementwise ops
(``gelu_new``), Llama's RMSNorm written out of elementwise ops in fp32, its rotary embedding
(``rotate_half``), ``repeat_kv`` for grouped-query attention where SDPA does not take GQA, and the loss
on fp32 logits. These traces are held apart: simcore is validated on them, not fitted to them.

Per run (random weights from a config: the device has no network), ``torch.profiler`` (CPU + CUDA,
``record_shapes=True``, schedule wait 1 / warm-up 1 / active 2), written as ``hf_<name>.json.gz``:

* training steps (``model(input_ids, labels=input_ids).loss``, ``backward()``, fused AdamW,
  ``zero_grad(set_to_none=True)``; fp32 weights under bf16 autocast as the ``Trainer``'s ``bf16=True``
  does), eager, with and without a ``loss.item()`` per step, and ``torch.compile``'d;
* inference (bf16 weights, ``torch.no_grad``): each profiled step is one prefill and 8 decode steps
  with the model's KV cache (``past_key_values``), greedy, no host wait but the last token's.

Round 32 (``--set fit``): GPT-2 and Llama (h 1024, 16 / 4 heads) at 2 and 8 layers, training steps of
1 x 512 tokens and batch-1 decode (prompt 128, 8 new tokens), twice each: the host per layer of
Hugging Face layers in CPU-speed units, fitted (``fit_host``).

Round 33 (``--set decode``): the same two models' decode at 2 and 8 layers, batch 1 / 4 / 16 and prompt
128 / 512: whether a decode layer's host depends on batch and context.

Round 34 (``--set generate``): ``model.generate()`` (greedy, 8 new tokens) of GPT-2 small at batch 1
and the 8-layer Llama at batch 4: the library's own loop, held apart.

Round 35 (``--set generate_fit``): ``generate()`` at round 32's fit configs, twice: its per-token host
beyond the forward pass, fitted.

Round 36 (``--set r36``): four more held-apart runs (``RUNS_R36``): the 8-layer Llama under
``torch.compile``, GPT-2 medium, a 6-layer Llama of hidden 1536, a 16-layer Llama's batch-1 decode.

Round 37 (``--set tokens``): round 32's fit models at 2 and 8 layers, 512 / 2048 / 8192
tokens per step, twice (``RUNS_TOKENS``): the host of a ``transformers`` layer against the tokens.

Round 38 (``--set r38``): five more held-apart runs of common setups (``RUNS_R38``): the 8-layer Llama
with bf16 weights and no autocast, eager and compiled; GPT-2 small with 2 micro-batches per optimizer
step; Mistral's modelling code; GPT-2 small's decode at batch 8.

Round 39 (``--set r39``, under ``torchrun --nproc_per_node 2``): DistributedDataParallel training of
GPT-2 small (4 x 1024 per rank) and the 8-layer Llama (1 x 2048 per rank), both ranks profiled
(``hf_<name>_rank<r>.json.gz``).

Round 46 (``--set r46``): held-apart runs of setups no earlier trace had (``RUNS_R46``): the optimizer
as ``torch.optim`` makes it by default (``foreach`` AdamW, SGD with momentum), fp16 autocast with a
``GradScaler`` (whose ``step`` reads ``found_inf`` on the host: a sync per step), ``transformers``'
gradient checkpointing, Qwen2's modelling code (biased q/k/v, a 151,936-token vocabulary), and a trace
recorded without shapes but with Python stacks and memory events.

Round 48 (``--set r48``): held-apart runs with ``torch.nn.utils.clip_grad_norm_`` (as the ``Trainer``
does every step), fp32 training without autocast, and a trace recorded with every option Holistic Trace
Analysis asks for (``record_shapes``, ``with_stack``, ``profile_memory``).

Round 50 (``--set r50``): held-apart runs of a mixture-of-experts model (``MixtralForCausalLM``, 8 experts,
top 2; ``transformers``' own expert dispatch), training and inference.

Round 51 (``--set moe_fit``): the same Mixtral layers at round 32's fit configs (2 and 8 layers,
training steps of 1 x 512 tokens, batch-1 decode of prompt 128 and 8 new tokens), twice: the host of a
``transformers`` MoE layer, fitted.

Round 52 (``--set r52``): held-apart runs: Llama with ``attn_implementation="eager"`` (attention as
matmuls and a softmax), Phi-3's modelling code (fused q/k/v and gate/up projections), a seq-8192
Llama step, batch-32 Llama decode, GPT-2 at 16 x 512 tokens.

Round 53 (``--set r53``): held-apart runs collected after every change of stop 17, combining its setups:
Qwen2 under fp16 with a ``GradScaler``, foreach AdamW and gradient clipping; Mistral with bf16 weights
and gradient checkpointing; a Llama profiled with HTA's options and foreach AdamW; GPT-2 medium's
prefill + decode at batch 4; ``generate()`` on Mixtral.

Round 54 (``--set prof_fit``): round 32's training fit runs (GPT-2 and Llama h1024, 2 and 8 layers, 1 x
512 tokens) under the profiler's other option sets (with_stack; with_stack + profile_memory; that without
shapes; profile_memory): the host of ``transformers`` layers under them, against round 32's rows.

Round 55 (``--set r55``): held-apart runs after every change of stop 17 and its review: fp16 with a
``GradScaler`` and fused AdamW (which takes the inf flag on the GPU: no host wait), GPT-2 with foreach
AdamW under HTA's profiler options, Qwen2 ``generate()`` at batch 8, Mixtral with bf16 weights (the
native grouped GEMM), and Llama at seq 4096 with clipping, foreach AdamW and gradient checkpointing.

Round 56 (``--set moe_fit_bf16``): round 51's Mixtral training fit runs with bf16 weights (no autocast:
the native bf16 grouped GEMM, no per-expert host reads), twice: that path's host of an MoE layer.

Round 57 (``--set r57``): held-apart runs after every change of stop 17: a 16-layer Llama, GPT-2 large,
Qwen2 inference at batch 16, a compiled Llama with foreach AdamW, Mistral with bf16 weights and SGD.

Round 58 (``--set fit_bf16``): round 32's training fit runs with bf16 weights and no autocast, twice: the
host of ``transformers`` layers without autocast's per-op dispatch and casts, against round 32's rows.

Round 60 (``--set r60``): held-apart runs of what round 59 measured (collected with it, before simcore
used it): GPT-2 small and a 6-layer Mistral in fp32 without autocast (PyTorch's memory-efficient
attention), and ``attn_implementation="eager"`` in a Llama with bf16 weights, a Qwen2 under AMP, GPT-2
(its own eager attention: a division by a 0-d tensor, ``where`` with its causal buffer) and a Llama's
prefill + decode.

Round 61 (``--set eager_fit``): round 32's fit runs (GPT-2 and Llama h1024, 2 and 8 layers, training 1 x
512 and batch-1 decode) with ``attn_implementation="eager"``, twice: the host of layers whose attention is
written out of PyTorch ops, fitted (round 60's eager runs stay held apart).

Round 62 (``--set r62``): held-apart runs after stop 18's changes: one profiled step without a schedule
or ``prof.step()`` (``one_step``: what users send) of a Llama training step, GPT-2 training with
``loss.item()`` and a Llama prefill + decode; eager attention with bf16 weights (Qwen2) and in
Mistral's ``generate()``; GPT-2 in fp32 with eager attention.

Round 63 (``--set r63``): held-apart runs after the review mends of stop 18, each one unannotated
profiled step (``one_step``): Qwen2, GPT-2 medium, a compiled Llama, a Llama's ``generate()``, Mistral with
bf16 weights, a Llama at seq 8192.

Round 66 (``--set r66``): held-apart runs after round 65's norms: GPT-2 at h 1280, a Llama of h 4096,
GPT-2 over 16 x 1024 tokens, GPT-2's ``generate()``, a batch-1 prefill of 4096 tokens, a Qwen2-1.5B-shaped
model as one unannotated step.

Round 68 (``--set r68``, under ``torchrun --nproc_per_node 2``): held-apart DDP runs after round 65: GPT-2
at h 1024, Qwen2-1.5B's shapes, a Llama-3-8B layer.

Round 69 (``--set r69``): held-apart GEMM-heavy runs after stop 19's changes: a Llama-3-8B layer compiled,
with bf16 weights, with gradient checkpointing at seq 4096 (Mistral's code), its prefill + decode and its
``generate()``; GPT-2 at h 1280 compiled.

Round 70 (``--set compiled_fit``): round 32's training fit runs under torch.compile (GPT-2 and Llama h1024, 2
and 8 layers, 1 x 512 tokens): the host of ``transformers``' compiled steps, fitted.

Round 71 (``--set r71``): held-apart runs at full-size layer widths (stop 20): a Llama-3-8B-shaped model
(8 layers, vocabulary 128,256) with bf16 weights at seq 4096, GPT-2 XL's width (h 1600), Qwen2-7B's shapes
(h 3584, SwiGLU 18,944, vocabulary 152,064) in training and ``generate()``, the Llama-3-8B shapes' prefill of
16 x 1024 + decode, a Llama-3.2-3B-shaped step as one unannotated profiled step.

Round 73 (``--set r73``): held-apart runs after stop 20's changes (every prompt position's logits, bf16
AdamW, the embedding's backward): a Qwen2-7B-shaped prefill of 8 x 1024 (vocabulary 152,064) + decode, the
Llama-3-8B shapes with bf16 weights and foreach AdamW, Qwen2-7B's shapes with bf16 weights at seq 2048,
GPT-2 XL's width in ``generate()``, Mistral's code at h 4096 and seq 8192 with gradient checkpointing and bf16
weights, a Llama-3.2-3B-shaped prefill of 4 x 2048 + decode.

Round 79 (``--set r79``): held-apart ``generate()`` runs after ``runtime.pass_ops`` (stop 21): a Llama sampling
with temperature, top-k and top-p, GPT-2 greedy with a repetition penalty, a Qwen2 (no end-of-sequence id in
its config) sampling with top-p, Mistral's code sampling with top-k at batch 8, GPT-2 medium sampling 32
tokens at batch 1, a Qwen2 given an end-of-sequence id.

Round 80 (``--set sample_fit``, fitted, not held apart): ``generate()`` with each sampling step on its own and
together, beside greedy, on GPT-2 and the Llama family (temperature only: ``torch.multinomial``; top-k; top-p:
``torch.sort``; a repetition penalty with sampling): the host of a sampling pass's extra kernel launches, fitted.

Round 81 (``--set r81``): held-apart ``generate()`` runs after ``profile.EXTRA_LAUNCH_OPS`` (stop 22): top-p on a
12-layer Llama at batch 8, GPT-2 top-k at batch 8, Mistral's code with a repetition penalty and top-p, Qwen2 with
min-p (a logits processor not in round 80), a Llama sampling with the defaults at batch 1, GPT-2 medium with
temperature alone.

Round 82 (``--set r82``): held-apart runs after ``host_trace.PROBE_WINDOW`` (stop 22): ``generate()`` of GPT-2 with
top-p at batch 2, a Llama of h 3072 (vocab 128256) with top-k, a Qwen2 of h 1536 greedy; a greedy decode loop of
GPT-2 at batch 16; eager training steps of GPT-2 (8 layers, 8 x 512) and a Llama of h 1536 (4 x 512).

Round 83 (``--set r83``): held-apart runs after ``PROBE_WINDOW`` was kept to inference traces (stop 22): a 4-layer
Llama ``generate()`` with top-k at batch 16, GPT-2 (6 layers) greedy ``generate()`` after 4 x 512, a 12-layer Llama
of h 1024 decode loop at batch 8; eager training of GPT-2 (10 layers, 6 x 1024), a Llama of h 2048 (2 x 2048) and a
Qwen2 of h 1536 (4 x 1024).

Round 84 (``--set r84``): held-apart runs of stop 23, before any change of that stop: ``generate()`` with
``cache_implementation="static"`` (transformers then compiles the decode forward, ``mode="reduce-overhead"``:
CUDA-graph replays of inductor's kernels) on a Llama at batch 4 and a Qwen2 at batch 8, the same Llama's static cache
with ``disable_compile`` (eager), a Llama decode loop at batch 8, an eager Llama training step (2 x 1024) and GPT-2
of 16 layers at h 1024 under ``torch.compile``.

Round 85 (``--set static_fit``, fitted, not held apart): ``generate()`` with a static cache, compiled and eager
(``disable_compile``), on Llama, Mistral and Qwen2 configs, and one dynamic-cache run beside them: the host of a
compiled decode pass (the loop's own ops, the compiled call and its graph replay) and of an eager static cache's.

Round 86 (``--set r86``): held-apart runs after ``runtime.compiled_decode`` (stop 23): static-cache ``generate()`` on a
16-layer Llama at batch 1, a Mistral of h 4096 at batch 2, a Qwen2 of h 2048 at batch 16, and a Llama of h 3072
sampling with top-k.

Round 87 (``--set r87``): held-apart runs after the compiled decode's pass ops and ``aten::empty`` pace (stop 23):
static-cache ``generate()`` on a Llama of h 2560 at batch 2, a Qwen2 of h 1024, a Mistral of h 3072 at batch 8
sampling with temperature, and an 8-layer Llama at batch 1 after 512 tokens.

Round 88 (``--set r88``): held-apart runs after the ``generate()`` call's host (stop 23): dynamic-cache ``generate()``
of a 6-layer Llama at batch 8, GPT-2 (8 layers) sampling top-k at batch 2, a Qwen2 of h 1536 at batch 2; static-cache
``generate()`` of a Mistral at batch 4 and a 12-layer Llama of h 1536 sampling top-p at batch 8.

Round 89 (``--set r89``): held-apart runs after the compiled decode's per-phase pace and its eager prefill's layer ratio
(stop 24): static-cache ``generate()`` of a 12-layer Llama at batch 4, a 10-layer Qwen2 of h 1536 at batch 2, a Mistral
of h 3072 sampling top-k, a 4-layer Llama of h 4096 at batch 8, an 8-layer Llama of h 2560 at batch 1 sampling with
temperature, and a Qwen2 of h 1024 at batch 16.

Round 90 (``--set r90``): held-apart runs after ``runtime.layer_ops`` for transformers' decode layers (stop 24): an eager
static cache (``disable_compile``) on a 12-layer Llama of h 1536, a Qwen2 of h 2048, a Mistral of h 3072 sampling top-k
and a 16-layer Llama of h 1024 at batch 1; compiled static caches on a 6-layer Llama sampling top-p and a 10-layer
Mistral at batch 1.

Round 91 (``--set r91``): held-apart runs where a compiled decode's graph outlasts its host (stop 24): static-cache
``generate()`` at batches of 512-1536 after 16-32 prompt tokens, an 8-layer Llama of h 4096, a 6-layer Qwen2 of
h 3584 and a 16-layer Llama of h 2048.

Round 96 (``--set rec_fit``, fitted, not held apart): large-batch static-cache ``generate()`` whose calls re-record
their decode graph (cudagraph trees: "static input data pointer changed", round 95) on a 4-layer Llama of h 4096, a
12-layer Llama of h 2048 and an 8-layer Qwen2 of h 1536: the record's host per graph kernel.

Round 97 (``--set r97``): held-apart large-batch static-cache ``generate()`` after the record's cost and the cache's
``max_length - 1`` slots (stop 25): a 10-layer Llama of h 3072 at batch 640, an 8-layer Qwen2 of h 2048 at batch
1024 and a 12-layer Mistral of h 2048 at batch 384.

Round 98 (``--set r98``): held-apart static-cache ``generate()`` after stops 25-26's decode-graph changes (the odd slot
count, the recording, the GPU-bound lead, the separate projections): a 6-layer Llama of h 4096 at batch 768, an
8-layer Mistral of h 3072 at 512, a 10-layer Qwen2 of h 1536 at 768, and an 8-layer Llama of h 2048 at batch 64
(between host- and GPU-bound).

Round 99 (``--set r99``): held-apart ``generate()`` after the loop's ops weighed by name (``profile.LOOP_OP_WEIGHTS``,
stop 27): static caches of a 12-layer Qwen2 of h 1024 at batch 8, a 6-layer Qwen2 of h 2048 with top-k, an 8-layer
Llama of h 1536 with top-p and an 8-layer Qwen2 of h 1536 with an end-of-sequence id; dynamic caches of an 8-layer
Mistral of h 1536 with top-p and a 6-layer Qwen2 of h 1536 at batch 8.

Round 100 (``--set static_fit2``, fitted, not held apart): eight more host-bound compiled static-cache ``generate()``
runs beside round 85's (Llama, Mistral, Qwen2 with and without an end-of-sequence id, greedy and sampling).

Round 101 (``--set r101``): held-apart static-cache ``generate()`` after stop 28's compiled-decode changes: a 10-layer
Llama of h 1536, a 12-layer Qwen2 of h 1536, a 4-layer Mistral of h 4096 after a 512-token prompt, a 6-layer Llama of
h 2560 with top-p at batch 8, a 4-layer Qwen2 of h 2048 with an end-of-sequence id at batch 16, a 14-layer Llama at
batch 1.

Round 102 (``--set train_fit2``, fitted, not held apart): round 32's eight training fit runs again, on another day.

Round 103 (``--set r103``): held-apart host-bound training steps after round 102's refit: a 6-layer Llama of h 1536 at
2 x 1024, GPT-2 small at 4 x 512, a 4-layer Qwen2 of h 1536 at 2 x 1024, an 8-layer Mistral of h 2048 at 1 x 1024.

  python tools/bench_hf.py --outdir DIR [--set r31|fit|decode|generate|generate_fit|r36|tokens|r38|r39|r46|r48|r50|moe_fit|r52|r53|prof_fit|r55|moe_fit_bf16|r57|fit_bf16|r60|eager_fit|r62|r63|width_fit|r66|r68|r69|compiled_fit|r71|r73|r79|sample_fit|r81|r82|r83|r84|static_fit|r86|r87|r88|r89|r90|r91|rec_fit|r97|r98|r99|static_fit2|r101|train_fit2|r103|train_fit3|r105|static_fit3|r107|r108|moe_fit2|r110|r111|r112|r113|r114|r115|foreach_fit] [--budget S] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import env_info, log, profile, sync  # noqa: E402


def mixtral(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, experts: int, top_k: int, smoke: bool):
    """``MixtralForCausalLM``: Llama-like layers whose MLP is ``experts`` SwiGLU experts of ``ffn``,
    ``top_k`` per token (no sliding window, untied, vocab 32000)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    cfg = MixtralConfig(
        num_hidden_layers=layers, hidden_size=64 if smoke else hidden, num_attention_heads=4 if smoke else heads,
        num_key_value_heads=2 if smoke else kv_heads, intermediate_size=128 if smoke else ffn,
        num_local_experts=experts, num_experts_per_tok=top_k, vocab_size=512 if smoke else 32000,
        max_position_embeddings=4096, sliding_window=None, tie_word_embeddings=False,
    )  # fmt: skip
    return MixtralForCausalLM(cfg), cfg


def gpt2(layers: int, hidden: int, heads: int, smoke: bool, attn: str | None = None):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_layer=layers, n_embd=64 if smoke else hidden, n_head=4 if smoke else heads, n_positions=1024,
        vocab_size=512 if smoke else 50257,
    )  # fmt: skip
    if attn:  # e.g. "eager": attention as matmuls and a softmax instead of SDPA
        cfg._attn_implementation = attn
    return GPT2LMHeadModel(cfg), cfg


def llama(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, smoke: bool,
          family: str = "llama", attn: str | None = None):  # fmt: skip
    """A Llama-family model: ``LlamaForCausalLM``, ``MistralForCausalLM`` (``family="mistral"``, no
    sliding window: the same layers through Mistral's modelling code) or ``Qwen2ForCausalLM``
    (``family="qwen2"``: biased q/k/v projections, no sliding window)."""
    import transformers

    name = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "phi3": "Phi3"}[family]
    extra = {"sliding_window": None} if family == "mistral" else {"use_sliding_window": False} if family == "qwen2" else {}
    cfg = getattr(transformers, f"{name}Config")(
        num_hidden_layers=layers, hidden_size=64 if smoke else hidden, num_attention_heads=4 if smoke else heads,
        num_key_value_heads=2 if smoke else kv_heads, intermediate_size=128 if smoke else ffn,
        vocab_size=512 if smoke else vocab, max_position_embeddings=8192, tie_word_embeddings=False, **extra,
    )  # fmt: skip
    if attn:  # e.g. "eager": attention as matmuls and a softmax instead of SDPA
        cfg._attn_implementation = attn
    return getattr(transformers, f"{name}ForCausalLM")(cfg), cfg


# round 32's fit models, by their layer count: GPT-2 small's layers and a Llama of h 1024
FIT_MODELS = (
    ("gpt2", lambda L: (lambda s: gpt2(L, 768, 12, s))),
    ("llama", lambda L: (lambda s: llama(L, 1024, 16, 4, 4096, 32000, s))),
)


# (name, builder, kind, batch, seq or (prompt, new tokens), options)
RUNS = [
    ("train_gpt2_L12_b8", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {}),
    ("train_gpt2_L12_b4_item", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {"item": True}),
    ("train_gpt2_L6_b2", lambda s: gpt2(6, 768, 12, s), "train", 2, 512, {}),
    ("train_llama_L8_h2048_b2", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {}),
    ("train_llama_L4_h1024_b2_item", lambda s: llama(4, 1024, 16, 4, 4096, 32000, s), "train", 2, 1024, {"item": True}),
    ("train_gpt2_L12_b8_compiled", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"compile": True}),
    ("infer_llama_L8_h2048_b4", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "infer", 4, (512, 8), {}),
    ("infer_gpt2_L12_b1", lambda s: gpt2(12, 768, 12, s), "infer", 1, (256, 8), {}),
]


# round 32 (--set fit): the host of Hugging Face layers, fitted (round 31's runs stay held apart):
# 2 and 8 layers, small host-bound steps and batch-1 decode, twice each
RUNS_FIT = [
    (f"fit_{kind}_{arch}_L{L}_p{rep}", build, kind, 1, (512 if kind == "train" else (128, 8)), {})
    for rep in (0, 1)
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
    for kind, build in (("train", build_of(L)), ("infer", build_of(L)))
]


# round 33 (--set decode): decode host vs batch and context (does a layer's host depend on them?)
RUNS_DECODE = [
    (f"dec_{arch}_L{L}_b{b}_p{p}", build_of(L), "infer", b, (p, 8), {})
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
    for b, p in ((1, 128), (4, 128), (1, 512), (4, 512), (16, 512))
]


# round 34 (--set generate): model.generate() loops, held apart (greedy, 8 new tokens)
RUNS_GENERATE = [
    ("generate_gpt2_L12_b1", lambda s: gpt2(12, 768, 12, s), "generate", 1, (256, 8), {}),
    ("generate_llama_L8_h2048_b4", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4, (512, 8), {}),
]


# round 35 (--set generate_fit): generate() at round 32's fit configs (2 and 8 layers, batch 1, prompt
# 128, 8 new tokens), twice: its per-token host beyond the forward pass, fitted
RUNS_GENERATE_FIT = [
    (f"genfit_{arch}_L{L}_p{rep}", build_of(L), "generate", 1, (128, 8), {})
    for rep in (0, 1)
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
]


# round 36 (--set r36): more held-apart runs, after the fits and the compiled-mask finding: Llama
# under torch.compile (its materialised causal mask), GPT-2 medium, another Llama shape, batch-1
# Llama decode
RUNS_R36 = [
    ("train_llama_L8_h2048_b2_compiled", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"compile": True}),
    ("train_gpt2_L24_h1024_b4", lambda s: gpt2(24, 1024, 16, s), "train", 4, 1024, {}),
    ("train_llama_L6_h1536_b4", lambda s: llama(6, 1536, 12, 4, 6144, 32000, s), "train", 4, 1024, {}),
    ("infer_llama_L16_h2048_b1", lambda s: llama(16, 2048, 32, 8, 8192, 32000, s), "infer", 1, (256, 8), {}),
]


# round 37 (--set tokens): round 32's fit models (2 and 8 layers) at 512, 2048 and 8192 tokens per
# step (b1 s512, b2 s1024, b8 s1024), twice: does a transformers layer's host grow with the tokens?
RUNS_TOKENS = [
    (f"tok_train_{arch}_L{L}_b{b}_s{seq}_p{rep}", build_of(L), "train", b, seq, {})
    for rep in (0, 1)
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
    for b, seq in ((1, 512), (2, 1024), (8, 1024))
]


# round 38 (--set r38): more held-apart runs of common setups: bf16 weights without autocast (eager and
# compiled), gradient accumulation over 2 micro-batches, Mistral's modelling code, batch-8 GPT-2 decode
RUNS_R38 = [
    ("train_llama_L8_h2048_b2_bf16", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"bf16": True}),
    ("train_llama_L8_h2048_b2_bf16_compiled", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"bf16": True, "compile": True}),
    ("train_gpt2_L12_b4_accum2", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {"accum": 2}),
    ("train_mistral_L8_h2048_b2", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"), "train", 2, 2048, {}),
    ("infer_gpt2_L12_b8", lambda s: gpt2(12, 768, 12, s), "infer", 8, (256, 8), {}),
]


# round 39 (--set r39, under torchrun --nproc_per_node 2): held-apart DistributedDataParallel training
# of transformers models over 2 H200s, both ranks profiled
RUNS_R39 = [
    ("ddp_train_gpt2_L12_b4", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {}),
    ("ddp_train_llama_L8_h2048_b1", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 1, 2048, {}),
]


# round 46 (--set r46): held-apart runs of setups no earlier trace had: torch.optim's default optimizers
# (foreach AdamW, SGD), fp16 autocast + GradScaler, gradient checkpointing, Qwen2 (q/k/v bias, vocab
# 151936), a trace without shapes but with stacks and memory events
QWEN2 = dict(layers=8, hidden=2048, heads=16, kv_heads=4, ffn=5632, vocab=151936)
RUNS_R46 = [
    ("train_llama_L8_h2048_b2_foreach", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"optim": "foreach"}),
    ("train_qwen2_L8_h2048_b2", lambda s: llama(**QWEN2, smoke=s, family="qwen2"), "train", 2, 2048, {}),
    ("train_llama_L8_h2048_b1_s4096_gc", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 1, 4096, {"gc": True}),
    ("train_gpt2_L12_b8_fp16_scaler", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"fp16": True, "optim": "foreach"}),
    ("train_gpt2_L12_b4_sgd", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {"optim": "sgd"}),
    ("train_llama_L4_h1024_b4_stack", lambda s: llama(4, 1024, 16, 4, 4096, 32000, s), "train", 4, 1024,
     {"prof": {"record_shapes": False, "with_stack": True, "profile_memory": True}}),
    ("infer_qwen2_L8_h2048_b4", lambda s: llama(**QWEN2, smoke=s, family="qwen2"), "infer", 4, (512, 8), {}),
]


# round 48 (--set r48): held-apart runs with gradient clipping, fp32 without autocast, HTA's profiler options
_HTA = {"record_shapes": True, "with_stack": True, "profile_memory": True}
RUNS_R48 = [
    ("train_gpt2_L12_b4_clip", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {"clip": 1.0}),
    ("train_llama_L8_h2048_b2_clip_foreach", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048,
     {"clip": 1.0, "optim": "foreach"}),
    ("train_gpt2_L6_b4_fp32", lambda s: gpt2(6, 768, 12, s), "train", 4, 1024, {"fp32": True}),
    ("train_llama_L8_h2048_b2_hta", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"prof": _HTA}),
    ("train_gpt2_L12_b8_hta", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"prof": _HTA}),
]


# round 50 (--set r50): held-apart runs of a mixture-of-experts model (transformers' Mixtral)
RUNS_R50 = [
    ("train_mixtral_L4_h1024_e8_b4", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "train", 4, 1024, {}),
    ("infer_mixtral_L4_h1024_e8_b4", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "infer", 4, (512, 8), {}),
]


# round 51 (--set moe_fit): the host of transformers' MoE layers, fitted (round 50's runs stay held apart)
RUNS_MOE_FIT = [
    (f"fit_{kind}_mixtral_L{L}_p{rep}", (lambda L: (lambda s: mixtral(L, 1024, 16, 4, 2048, 8, 2, s)))(L), kind, 1,
     512 if kind == "train" else (128, 8), {})
    for rep in (0, 1)
    for L in (2, 8)
    for kind in ("train", "infer")
]  # fmt: skip


# round 52 (--set r52): held-apart runs: eager attention, Phi-3's fused projections, seq 8192, batch-32
# decode, GPT-2 at 16 x 512
RUNS_R52 = [
    ("train_llama_L8_h2048_b2_eager_attn", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, attn="eager"), "train", 2, 2048, {}),
    ("train_phi3_L8_h2048_b2", lambda s: llama(8, 2048, 32, 8, 8192, 32064, s, "phi3"), "train", 2, 2048, {}),
    ("train_llama_L4_h2048_b1_s8192", lambda s: llama(4, 2048, 32, 8, 8192, 32000, s), "train", 1, 8192, {}),
    ("infer_llama_L8_h2048_b32", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "infer", 32, (1024, 8), {}),
    ("train_gpt2_L12_b16_s512", lambda s: gpt2(12, 768, 12, s), "train", 16, 512, {}),
]


# round 53 (--set r53): held-apart runs after every change of stop 17, combining its setups
RUNS_R53 = [
    ("train_qwen2_L6_h1536_b2_fp16_clip_foreach", lambda s: llama(6, 1536, 12, 2, 4096, 151936, s, "qwen2"), "train", 2, 1024,
     {"fp16": True, "optim": "foreach", "clip": 1.0}),
    ("train_mistral_L8_h2048_b2_bf16_gc", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"), "train", 2, 2048,
     {"bf16": True, "gc": True}),
    ("train_llama_L6_h2048_b4_hta_foreach", lambda s: llama(6, 2048, 16, 4, 5632, 32000, s), "train", 4, 1024,
     {"prof": _HTA, "optim": "foreach"}),
    ("infer_gpt2_L24_h1024_b4", lambda s: gpt2(24, 1024, 16, s), "infer", 4, (512, 8), {}),
    ("generate_mixtral_L4_h1024_e8_b2", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "generate", 2, (256, 8), {}),
]  # fmt: skip


# round 54 (--set prof_fit): round 32's training fit runs under the profiler's other option sets
_PROF_SETS = {
    "stack": {"with_stack": True},
    "stack_memory": {"with_stack": True, "profile_memory": True},
    "stack_noshapes": {"record_shapes": False, "with_stack": True, "profile_memory": True},
    "memory": {"profile_memory": True},
}
RUNS_PROF_FIT = [
    (f"fit_train_{arch}_L{L}_{tag}", build_of(L), "train", 1, 512, {"prof": po})
    for tag, po in _PROF_SETS.items()
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
]


# round 55 (--set r55): held-apart runs after every change of stop 17 and its review
RUNS_R55 = [
    ("train_llama_L8_h2048_b2_fp16_fused", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048, {"fp16": True}),
    ("train_gpt2_L12_b8_hta_foreach", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"prof": _HTA, "optim": "foreach"}),
    ("generate_qwen2_L8_h2048_b8", lambda s: llama(**QWEN2, smoke=s, family="qwen2"), "generate", 8, (512, 8), {}),
    ("train_mixtral_L4_h1024_e8_b4_bf16", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "train", 4, 1024, {"bf16": True}),
    ("train_llama_L8_h2048_b1_s4096_gc_clip_foreach", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 1, 4096,
     {"gc": True, "clip": 1.0, "optim": "foreach"}),
]  # fmt: skip


# round 56 (--set moe_fit_bf16): round 51's Mixtral training fit runs with bf16 weights (the native path)
RUNS_MOE_FIT_BF16 = [
    (f"fit_train_mixtral_L{L}_bf16_p{rep}", (lambda L: (lambda s: mixtral(L, 1024, 16, 4, 2048, 8, 2, s)))(L), "train", 1,
     512, {"bf16": True})
    for rep in (0, 1)
    for L in (2, 8)
]  # fmt: skip


# round 57 (--set r57): held-apart runs after every change of stop 17
RUNS_R57 = [
    ("train_llama_L16_h2048_b1", lambda s: llama(16, 2048, 32, 8, 8192, 32000, s), "train", 1, 2048, {}),
    ("train_gpt2_L36_h1280_b2", lambda s: gpt2(36, 1280, 20, s), "train", 2, 1024, {}),
    ("infer_qwen2_L8_h2048_b16", lambda s: llama(**QWEN2, smoke=s, family="qwen2"), "infer", 16, (256, 8), {}),
    ("train_llama_L8_h2048_b2_compiled_foreach", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048,
     {"compile": True, "optim": "foreach"}),
    ("train_mistral_L8_h2048_b4_bf16_sgd", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"), "train", 4, 1024,
     {"bf16": True, "optim": "sgd"}),
]  # fmt: skip


# round 58 (--set fit_bf16): round 32's training fit runs with bf16 weights (no autocast)
RUNS_FIT_BF16 = [
    (f"fit_train_{arch}_L{L}_bf16_p{rep}", build_of(L), "train", 1, 512, {"bf16": True})
    for rep in (0, 1)
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
]


# round 60 (--set r60): held-apart runs of fp32 training (memory-efficient attention) and eager attention
RUNS_R60 = [
    ("train_gpt2_L12_b8_fp32", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"fp32": True}),
    ("train_llama_L8_h2048_b2_bf16_eager_attn", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, attn="eager"), "train", 2,
     2048, {"bf16": True}),
    ("train_qwen2_L6_h1536_b4_eager_attn", lambda s: llama(6, 1536, 12, 2, 4096, 151936, s, "qwen2", attn="eager"), "train",
     4, 1024, {}),
    ("train_gpt2_L12_b4_eager_attn", lambda s: gpt2(12, 768, 12, s, attn="eager"), "train", 4, 1024, {}),
    ("infer_llama_L8_h2048_b4_eager_attn", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, attn="eager"), "infer", 4,
     (512, 8), {}),
    ("train_mistral_L6_h2048_b1_fp32", lambda s: llama(6, 2048, 32, 8, 8192, 32000, s, "mistral"), "train", 1, 2048,
     {"fp32": True}),
]  # fmt: skip


# round 61 (--set eager_fit): round 32's fit runs with attn_implementation="eager", twice: the host of
# transformers' layers whose attention is written out of PyTorch ops (round 60's runs stay held apart)
RUNS_EAGER_FIT = [
    (f"fit_{kind}_{arch}_L{L}_eager_p{rep}", build, kind, 1, (512 if kind == "train" else (128, 8)), {})
    for rep in (0, 1)
    for arch, build_of in (
        ("gpt2", lambda L: (lambda s: gpt2(L, 768, 12, s, attn="eager"))),
        ("llama", lambda L: (lambda s: llama(L, 1024, 16, 4, 4096, 32000, s, attn="eager"))),
    )
    for L in (2, 8)
    for kind, build in (("train", build_of(L)), ("infer", build_of(L)))
]


# round 62 (--set r62): held-apart runs after stop 18's changes: one unannotated profiled step as users
# record it (``one_step``), eager attention with bf16 weights and in generate(), fp32 with eager attention
RUNS_R62 = [
    ("train_llama_L8_h2048_b2_onestep", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048,
     {"one_step": True}),
    ("train_gpt2_L12_b8_item_onestep", lambda s: gpt2(12, 768, 12, s), "train", 8, 1024, {"item": True, "one_step": True}),
    ("infer_llama_L8_h2048_b8_onestep", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "infer", 8, (512, 8),
     {"one_step": True}),
    ("train_qwen2_L6_h1536_b4_bf16_eager_attn", lambda s: llama(6, 1536, 12, 2, 4096, 151936, s, "qwen2", attn="eager"),
     "train", 4, 1024, {"bf16": True}),
    ("generate_mistral_L8_h2048_b4_eager_attn", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral", attn="eager"),
     "generate", 4, (512, 8), {}),
    ("train_gpt2_L12_b4_fp32_eager_attn", lambda s: gpt2(12, 768, 12, s, attn="eager"), "train", 4, 1024, {"fp32": True}),
]  # fmt: skip


# round 63 (--set r63): held-apart runs after the review mends of stop 18, each one unannotated profiled step
RUNS_R63 = [
    ("train_qwen2_L8_h2048_b2_onestep", lambda s: llama(**QWEN2, smoke=s, family="qwen2"), "train", 2, 2048, {"one_step": True}),
    ("train_gpt2_L24_h1024_b4_onestep", lambda s: gpt2(24, 1024, 16, s), "train", 4, 1024, {"one_step": True}),
    ("train_llama_L8_h2048_b2_compiled_onestep", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "train", 2, 2048,
     {"compile": True, "one_step": True}),
    ("generate_llama_L8_h2048_b4_onestep", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4, (512, 8),
     {"one_step": True}),
    ("train_mistral_L8_h2048_b2_bf16_onestep", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"), "train", 2,
     2048, {"bf16": True, "one_step": True}),
    ("train_llama_L4_h2048_b1_s8192_onestep", lambda s: llama(4, 2048, 32, 8, 8192, 32000, s), "train", 1, 8192,
     {"one_step": True}),
]  # fmt: skip


# round 64 (--set width_fit): round 32's Llama training fit runs (2 and 8 layers, 1 x 512 tokens) at hidden 1024
# (16 / 4 heads, round 32's), 1536 (12 / 4) and 2048 (32 / 8), twice: does a transformers layer's host grow with
# the model's width? (diagnostic: the held-apart h2048 traces take ~10 % more forward host per layer)
RUNS_WIDTH_FIT = [
    (f"wfit_train_llama_h{h}_L{L}_p{rep}", (lambda L, h, nh, kv, f: (lambda s: llama(L, h, nh, kv, f, 32000, s)))(L, h, nh, kv, f),
     "train", 1, 512, {})
    for rep in (0, 1)
    for h, nh, kv, f in ((1024, 16, 4, 4096), (1536, 12, 4, 6144), (2048, 32, 8, 8192))
    for L in (2, 8)
]  # fmt: skip


# round 66 (--set r66): held-apart runs after round 65's norms (stop 19), shapes no earlier run had: GPT-2
# at h 1280, a Llama layer of h 4096 (GEMM-bound), GPT-2 over 16 x 1024 tokens, GPT-2's generate(), a
# batch-1 prefill of 4096 tokens, and a Qwen2-1.5B-shaped model over 8 x 1024 tokens as one unannotated step
RUNS_R66 = [
    ("train_gpt2_L12_h1280_b4", lambda s: gpt2(12, 1280, 20, s), "train", 4, 1024, {}),
    ("train_llama_L4_h4096_b2", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "train", 2, 2048, {}),
    ("train_gpt2_L6_b16", lambda s: gpt2(6, 768, 12, s), "train", 16, 1024, {}),
    ("generate_gpt2_L12_b8", lambda s: gpt2(12, 768, 12, s), "generate", 8, (128, 16), {}),
    ("infer_llama_L8_h2048_b1_p4096", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "infer", 1, (4096, 8), {}),
    ("train_qwen2_L4_h1536_b8_onestep", lambda s: llama(4, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 8, 1024,
     {"one_step": True}),
]  # fmt: skip


# round 68 (--set r68, torchrun on 2 GPUs): held-apart DDP runs after round 65 (stop 19): GPT-2 at h 1024,
# Qwen2-1.5B's shapes, a Llama-3-8B layer (1.1 B parameters: 4.4 GB of fp32 gradients a step)
RUNS_R68 = [
    ("ddp_train_gpt2_L12_h1024_b4", lambda s: gpt2(12, 1024, 16, s), "train", 4, 1024, {}),
    ("ddp_train_qwen2_L4_h1536_b4", lambda s: llama(4, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 4, 1024, {}),
    ("ddp_train_llama_L4_h4096_b1", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "train", 1, 2048, {}),
]  # fmt: skip


# round 69 (--set r69): held-apart runs after stop 19's changes, GEMM-heavy: a Llama-3-8B layer compiled, with
# bf16 weights, with gradient checkpointing at seq 4096, its prefill + decode and generate(); GPT-2 at h 1280 compiled
RUNS_R69 = [
    ("train_llama_L4_h4096_b2_compiled", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "train", 2, 2048,
     {"compile": True}),
    ("train_gpt2_L12_h1280_b4_compiled", lambda s: gpt2(12, 1280, 20, s), "train", 4, 1024, {"compile": True}),
    ("train_llama_L4_h4096_b2_bf16", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "train", 2, 2048, {"bf16": True}),
    ("train_mistral_L4_h4096_b1_s4096_gc", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s, "mistral"), "train", 1,
     4096, {"gc": True}),
    ("infer_llama_L4_h4096_b8", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "infer", 8, (512, 8), {}),
    ("generate_llama_L4_h4096_b1", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "generate", 1, (256, 16), {}),
]  # fmt: skip


# round 70 (--set compiled_fit): round 32's training fit runs under torch.compile (2 and 8 layers, 1 x 512 tokens):
# the host of transformers' compiled steps (round 69's compiled GPT-2 ran ~2x simcore's compiled layer host)
RUNS_COMPILED_FIT = [
    (f"cfit_train_{arch}_L{L}", build_of(L), "train", 1, 512, {"compile": True})
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
]


# round 71 (--set r71): held-apart runs at full-size layer widths (stop 20): Llama-3-8B's shapes (vocabulary
# 128,256) with bf16 weights at seq 4096, GPT-2 XL's width, Qwen2-7B's shapes in training and generate(), the
# Llama-3-8B shapes' prefill of 16 x 1024 + decode, Llama-3.2-3B's shapes as one unannotated step
RUNS_R71 = [
    ("train_llama_L8_h4096_b1_s4096_bf16", lambda s: llama(8, 4096, 32, 8, 14336, 128256, s), "train", 1, 4096,
     {"bf16": True}),
    ("train_gpt2_L24_h1600_b2", lambda s: gpt2(24, 1600, 25, s), "train", 2, 1024, {}),
    ("train_qwen2_L6_h3584_b2", lambda s: llama(6, 3584, 28, 4, 18944, 152064, s, "qwen2"), "train", 2, 1024, {}),
    ("infer_llama_L8_h4096_b16_p1024", lambda s: llama(8, 4096, 32, 8, 14336, 128256, s), "infer", 16, (1024, 8), {}),
    ("generate_qwen2_L8_h3584_b4", lambda s: llama(8, 3584, 28, 4, 18944, 152064, s, "qwen2"), "generate", 4,
     (512, 16), {}),
    ("train_llama_L8_h3072_b4_onestep", lambda s: llama(8, 3072, 24, 8, 8192, 128256, s), "train", 4, 1024,
     {"one_step": True}),
]  # fmt: skip


# round 73 (--set r73): held-apart runs after stop 20's changes (every prompt position's logits, bf16 AdamW, the
# embedding's backward), at full-size layer widths
RUNS_R73 = [
    ("infer_qwen2_L8_h3584_b8_p1024", lambda s: llama(8, 3584, 28, 4, 18944, 152064, s, "qwen2"), "infer", 8,
     (1024, 8), {}),
    ("train_llama_L8_h4096_b2_bf16_foreach", lambda s: llama(8, 4096, 32, 8, 14336, 128256, s), "train", 2, 2048,
     {"bf16": True, "optim": "foreach"}),
    ("train_qwen2_L6_h3584_b1_s2048_bf16", lambda s: llama(6, 3584, 28, 4, 18944, 152064, s, "qwen2"), "train", 1,
     2048, {"bf16": True}),
    ("generate_gpt2_L24_h1600_b4", lambda s: gpt2(24, 1600, 25, s), "generate", 4, (256, 16), {}),
    ("train_mistral_L4_h4096_b1_s8192_gc_bf16", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s, "mistral"), "train",
     1, 8192, {"bf16": True, "gc": True}),
    ("infer_llama_L8_h3072_b4_p2048", lambda s: llama(8, 3072, 24, 8, 8192, 128256, s), "infer", 4, (2048, 8), {}),
]  # fmt: skip


# round 79 (--set r79): held-apart generate() runs after runtime.pass_ops (stop 21): sampling (temperature,
# top-k, top-p), a repetition penalty, a config with an end-of-sequence id and one without, other batch sizes
RUNS_R79 = [
    ("generate_llama_L8_h2048_b4_sample", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4, (256, 16),
     {"gen": {"do_sample": True, "temperature": 0.8, "top_k": 50, "top_p": 0.9}}),
    ("generate_gpt2_L12_b4_reppen", lambda s: gpt2(12, 768, 12, s), "generate", 4, (128, 16),
     {"gen": {"repetition_penalty": 1.3}}),
    ("generate_qwen2_L8_h2048_b2_sample", lambda s: llama(8, 2048, 16, 4, 5632, 151936, s, "qwen2"), "generate", 2,
     (512, 16), {"gen": {"do_sample": True, "temperature": 0.7, "top_p": 0.95}}),
    ("generate_mistral_L8_h2048_b8_topk", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"), "generate", 8,
     (256, 16), {"gen": {"do_sample": True, "top_k": 20}}),
    ("generate_gpt2_L24_h1024_b1_sample", lambda s: gpt2(24, 1024, 16, s), "generate", 1, (128, 32),
     {"gen": {"do_sample": True, "top_p": 0.9}}),
    ("generate_qwen2_L8_h2048_b4_eos", lambda s: llama(8, 2048, 16, 4, 5632, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {"gen": {"eos_token_id": 2}}),
]  # fmt: skip


# round 80 (--set sample_fit): fitted, not held apart: each sampling step alone and together beside greedy, the
# host of a sampling pass's kernel launches (top_k=0 turns off transformers' default top-k of 50)
_TEMP = {"do_sample": True, "temperature": 0.9, "top_k": 0}
RUNS_SAMPLE_FIT = [
    ("generate_gpt2_L12_b4_greedy", lambda s: gpt2(12, 768, 12, s), "generate", 4, (128, 24), {}),
    ("generate_gpt2_L12_b4_temp", lambda s: gpt2(12, 768, 12, s), "generate", 4, (128, 24), {"gen": _TEMP}),
    ("generate_gpt2_L12_b4_topk", lambda s: gpt2(12, 768, 12, s), "generate", 4, (128, 24),
     {"gen": {"do_sample": True, "top_k": 50}}),
    ("generate_gpt2_L12_b4_topp", lambda s: gpt2(12, 768, 12, s), "generate", 4, (128, 24),
     {"gen": {**_TEMP, "top_p": 0.9}}),
    ("generate_llama_L8_h2048_b4_greedy", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4, (256, 24),
     {}),
    ("generate_llama_L8_h2048_b4_temp", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4, (256, 24),
     {"gen": _TEMP}),
    ("generate_llama_L8_h2048_b4_topk_topp", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 4,
     (256, 24), {"gen": {"do_sample": True, "top_k": 50, "top_p": 0.9}}),
    ("generate_qwen2_L8_h2048_b4_topp_reppen", lambda s: llama(8, 2048, 16, 4, 5632, 151936, s, "qwen2"), "generate",
     4, (256, 24), {"gen": {**_TEMP, "top_p": 0.8, "repetition_penalty": 1.2}}),
]  # fmt: skip


# round 81 (--set r81): held-apart generate() runs after EXTRA_LAUNCH_OPS (stop 22): sampling at other widths,
# depths and batches, min-p (a logits processor round 80 did not measure), a repetition penalty with top-p
RUNS_R81 = [
    ("generate_llama_L12_h2048_b8_topp", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 8, (256, 16),
     {"gen": {"do_sample": True, "temperature": 0.6, "top_p": 0.9}}),
    ("generate_gpt2_L12_b8_topk", lambda s: gpt2(12, 768, 12, s), "generate", 8, (256, 16),
     {"gen": {"do_sample": True, "temperature": 0.7, "top_k": 40}}),
    ("generate_mistral_L8_h2048_b2_reppen_topp", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s, "mistral"),
     "generate", 2, (512, 16), {"gen": {"do_sample": True, "top_p": 0.95, "repetition_penalty": 1.1}}),
    ("generate_qwen2_L8_h2048_b8_minp", lambda s: llama(8, 2048, 16, 4, 5632, 151936, s, "qwen2"), "generate", 8,
     (128, 16), {"gen": {"do_sample": True, "min_p": 0.05, "top_k": 0}}),
    ("generate_llama_L8_h2048_b1_sample", lambda s: llama(8, 2048, 32, 8, 8192, 32000, s), "generate", 1, (128, 32),
     {"gen": {"do_sample": True}}),
    ("generate_gpt2_L24_h1024_b4_temp", lambda s: gpt2(24, 1024, 16, s), "generate", 4, (128, 16),
     {"gen": {"do_sample": True, "temperature": 1.2, "top_k": 0}}),
]  # fmt: skip


# round 82 (--set r82): held-apart runs after host_trace.PROBE_WINDOW (stop 22: the run's CPU pace the mean of
# windowed medians): generate() sampling and greedy, a greedy decode loop, small eager training steps
RUNS_R82 = [
    ("generate_gpt2_L12_b2_topp", lambda s: gpt2(12, 768, 12, s), "generate", 2, (256, 24),
     {"gen": {"do_sample": True, "temperature": 0.8, "top_p": 0.9}}),
    ("generate_llama_L6_h3072_b4_topk", lambda s: llama(6, 3072, 24, 8, 8192, 128256, s), "generate", 4, (128, 16),
     {"gen": {"do_sample": True, "top_k": 20}}),
    ("generate_qwen2_L12_h1536_b4", lambda s: llama(12, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {}),
    ("infer_gpt2_L12_b16_p128", lambda s: gpt2(12, 768, 12, s), "infer", 16, (128, 8), {}),
    ("train_gpt2_L8_b8_s512", lambda s: gpt2(8, 768, 12, s), "train", 8, 512, {}),
    ("train_llama_L6_h1536_b4_s512", lambda s: llama(6, 1536, 12, 4, 6144, 32000, s), "train", 4, 512, {}),
]  # fmt: skip


# round 83 (--set r83): held-apart runs after PROBE_WINDOW for inference only (stop 22): generate() sampling and
# greedy, a decode loop, eager training steps of three families
RUNS_R83 = [
    ("generate_llama_L4_h2048_b16_topk", lambda s: llama(4, 2048, 16, 4, 5632, 32000, s), "generate", 16, (128, 16),
     {"gen": {"do_sample": True, "top_k": 50}}),
    ("generate_gpt2_L6_b4", lambda s: gpt2(6, 768, 12, s), "generate", 4, (512, 24), {}),
    ("infer_llama_L12_h1024_b8_p512", lambda s: llama(12, 1024, 16, 4, 4096, 32000, s), "infer", 8, (512, 8), {}),
    ("train_gpt2_L10_b6", lambda s: gpt2(10, 768, 12, s), "train", 6, 1024, {}),
    ("train_llama_L4_h2048_b2_s2048", lambda s: llama(4, 2048, 16, 8, 5632, 32000, s), "train", 2, 2048, {}),
    ("train_qwen2_L4_h1536_b4", lambda s: llama(4, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 4, 1024, {}),
]  # fmt: skip


# round 84 (--set r84): held apart, stop 23: generate() with a static cache (transformers compiles its decode forward
# with CUDA graphs) and eagerly, a decode loop, an eager and a compiled training step
RUNS_R84 = [
    ("generate_llama_L8_h2048_b4_static", lambda s: llama(8, 2048, 32, 8, 5632, 32000, s), "generate", 4, (256, 16),
     {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L8_h1536_b8_static", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 8,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L8_h2048_b4_static_eager", lambda s: llama(8, 2048, 32, 8, 5632, 32000, s), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static", "disable_compile": True}}),
    ("infer_llama_L8_h2048_b8_p256", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "infer", 8, (256, 8), {}),
    ("train_llama_L6_h2048_b2_s1024", lambda s: llama(6, 2048, 16, 4, 5632, 32000, s), "train", 2, 1024, {}),
    ("train_gpt2_L16_h1024_b4_compiled", lambda s: gpt2(16, 1024, 16, s), "train", 4, 1024, {"compile": True}),
]  # fmt: skip


# round 85 (--set static_fit): fit runs, not held apart: generate() with a static cache, compiled (CUDA graphs) and
# eager, on four models: the host of a compiled decode pass (the loop's ops, the compiled call) and of an eager one
RUNS_STATIC_FIT = [
    ("sfit_generate_llama_L4_h1024_b1_static", lambda s: llama(4, 1024, 16, 4, 4096, 32000, s), "generate", 1, (128, 32),
     {"gen": {"cache_implementation": "static"}}),
    ("sfit_generate_llama_L12_h2048_b2_static", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 2,
     (512, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit_generate_mistral_L6_h2048_b8_static", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s, "mistral"), "generate",
     8, (128, 24), {"gen": {"cache_implementation": "static"}}),
    ("sfit_generate_qwen2_L4_h1536_b4_static", lambda s: llama(4, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit_generate_llama_L4_h1024_b1_static_eager", lambda s: llama(4, 1024, 16, 4, 4096, 32000, s), "generate", 1,
     (128, 32), {"gen": {"cache_implementation": "static", "disable_compile": True}}),
    ("sfit_generate_mistral_L6_h2048_b8_static_eager", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s, "mistral"),
     "generate", 8, (128, 24), {"gen": {"cache_implementation": "static", "disable_compile": True}}),
    ("sfit_generate_llama_L12_h2048_b2", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 2, (512, 16), {}),
]  # fmt: skip


# round 86 (--set r86): held apart after runtime.compiled_decode (stop 23): static-cache generate() on other depths,
# widths, batches, and with sampling
RUNS_R86 = [
    ("generate_llama_L16_h2048_b1_static", lambda s: llama(16, 2048, 16, 8, 5632, 32000, s), "generate", 1, (128, 24),
     {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L8_h4096_b2_static", lambda s: llama(8, 4096, 32, 8, 14336, 32000, s, "mistral"), "generate", 2,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L6_h2048_b16_static", lambda s: llama(6, 2048, 16, 2, 11008, 151936, s, "qwen2"), "generate", 16,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L6_h3072_b4_static_topk", lambda s: llama(6, 3072, 24, 8, 8192, 32000, s), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_k": 50}}),
]  # fmt: skip


# round 87 (--set r87): held apart after the compiled decode's pass ops and aten::empty pace (stop 23)
RUNS_R87 = [
    ("generate_llama_L10_h2560_b2_static", lambda s: llama(10, 2560, 20, 4, 6912, 32000, s), "generate", 2, (256, 24),
     {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L8_h1024_b4_static", lambda s: llama(8, 1024, 16, 4, 4864, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L4_h3072_b8_static_temp", lambda s: llama(4, 3072, 24, 8, 8192, 32000, s, "mistral"), "generate",
     8, (128, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "temperature": 0.7, "top_k": 0}}),
    ("generate_llama_L8_h2048_b1_static_p512", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 1,
     (512, 32), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 88 (--set r88): held apart after the generate() call's host (stop 23): dynamic-cache and static-cache runs
RUNS_R88 = [
    ("generate_llama_L6_h2048_b8", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s), "generate", 8, (256, 16), {}),
    ("generate_gpt2_L8_b2_topk", lambda s: gpt2(8, 768, 12, s), "generate", 2, (128, 24),
     {"gen": {"do_sample": True, "top_k": 20}}),
    ("generate_qwen2_L6_h1536_b2", lambda s: llama(6, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 2, (256, 16),
     {}),
    ("generate_mistral_L8_h2048_b4_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s, "mistral"), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L12_h1536_b8_static_topp", lambda s: llama(12, 1536, 12, 4, 4096, 32000, s), "generate", 8,
     (128, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_p": 0.9}}),
]  # fmt: skip


# round 89 (--set r89): held apart after the compiled decode's per-phase pace and prefill layer ratio (stop 24)
RUNS_R89 = [
    ("generate_llama_L12_h2048_b4_static", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 4, (256, 16),
     {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L10_h1536_b2_static", lambda s: llama(10, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 2,
     (128, 24), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L6_h3072_b4_static_topk", lambda s: llama(6, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 4, (256, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_k": 40}}),
    ("generate_llama_L4_h4096_b8_static", lambda s: llama(4, 4096, 32, 8, 11008, 32000, s), "generate", 8, (128, 16),
     {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L8_h2560_b1_static_temp", lambda s: llama(8, 2560, 20, 4, 6912, 32000, s), "generate", 1,
     (256, 24), {"gen": {"cache_implementation": "static", "do_sample": True, "temperature": 0.8, "top_k": 0}}),
    ("generate_qwen2_L6_h1024_b16_static", lambda s: llama(6, 1024, 16, 4, 4864, 151936, s, "qwen2"), "generate", 16,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 90 (--set r90): held apart after runtime.layer_ops for transformers' decode layers (stop 24)
_EAGER_STATIC = {"cache_implementation": "static", "disable_compile": True}
RUNS_R90 = [
    ("generate_llama_L12_h1536_b4_static_eager", lambda s: llama(12, 1536, 12, 4, 4096, 32000, s), "generate", 4,
     (128, 16), {"gen": _EAGER_STATIC}),
    ("generate_qwen2_L8_h2048_b2_static_eager", lambda s: llama(8, 2048, 16, 2, 11008, 151936, s, "qwen2"),
     "generate", 2, (256, 16), {"gen": _EAGER_STATIC}),
    ("generate_mistral_L6_h3072_b8_static_eager_topk", lambda s: llama(6, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 8, (128, 16), {"gen": {**_EAGER_STATIC, "do_sample": True, "top_k": 50}}),
    ("generate_llama_L16_h1024_b1_static_eager", lambda s: llama(16, 1024, 16, 4, 4096, 32000, s), "generate", 1,
     (256, 24), {"gen": _EAGER_STATIC}),
    ("generate_llama_L6_h2048_b2_static_topp", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s), "generate", 2,
     (256, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_p": 0.9}}),
    ("generate_mistral_L10_h2048_b1_static", lambda s: llama(10, 2048, 16, 8, 5632, 32000, s, "mistral"),
     "generate", 1, (128, 24), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 91 (--set r91): held apart, compiled decodes whose graph outlasts the host (large batches, stop 24)
RUNS_R91 = [
    ("generate_llama_L8_h4096_b512_static", lambda s: llama(8, 4096, 32, 8, 14336, 32000, s), "generate", 512,
     (32, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L6_h3584_b512_static", lambda s: llama(6, 3584, 28, 4, 18944, 152064, s, "qwen2"), "generate",
     512, (32, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L16_h2048_b1536_static", lambda s: llama(16, 2048, 16, 8, 5632, 32000, s), "generate", 1536,
     (16, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 96 (--set rec_fit): fit runs, not held apart: large-batch static caches whose calls re-record their graph
RUNS_REC_FIT = [
    ("rfit_generate_llama_L4_h4096_b512_static", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s), "generate", 512,
     (32, 16), {"gen": {"cache_implementation": "static"}}),
    ("rfit_generate_llama_L12_h2048_b768_static", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 768,
     (16, 16), {"gen": {"cache_implementation": "static"}}),
    ("rfit_generate_qwen2_L8_h1536_b1024_static", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"),
     "generate", 1024, (24, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 97 (--set r97): held apart, large-batch static caches after the record's cost (stop 25)
RUNS_R97 = [
    ("generate_llama_L10_h3072_b640_static", lambda s: llama(10, 3072, 24, 8, 8192, 32000, s), "generate", 640,
     (24, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L8_h2048_b1024_static", lambda s: llama(8, 2048, 16, 2, 11008, 151936, s, "qwen2"), "generate",
     1024, (16, 24), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L12_h2048_b384_static", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s, "mistral"),
     "generate", 384, (64, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 98 (--set r98): held apart, static caches after stops 25-26's decode-graph changes
RUNS_R98 = [
    ("generate_llama_L6_h4096_b768_static", lambda s: llama(6, 4096, 32, 8, 14336, 32000, s), "generate", 768,
     (16, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L8_h3072_b512_static", lambda s: llama(8, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 512, (32, 24), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L10_h1536_b768_static", lambda s: llama(10, 1536, 12, 2, 8960, 151936, s, "qwen2"),
     "generate", 768, (24, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L8_h2048_b64_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 64,
     (64, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 99 (--set r99): held apart, generate() loops after their ops weighed by name (stop 27)
RUNS_R99 = [
    ("generate_qwen2_L12_h1024_b8_static", lambda s: llama(12, 1024, 16, 4, 4864, 151936, s, "qwen2"), "generate",
     8, (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L6_h2048_b4_static_topk", lambda s: llama(6, 2048, 16, 2, 11008, 151936, s, "qwen2"),
     "generate", 4, (128, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_k": 40}}),
    ("generate_llama_L8_h1536_b4_static_topp", lambda s: llama(8, 1536, 12, 4, 4096, 32000, s), "generate", 4,
     (128, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_p": 0.9}}),
    ("generate_qwen2_L8_h1536_b4_static_eos", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate",
     4, (128, 16), {"gen": {"cache_implementation": "static", "eos_token_id": 2}}),
    ("generate_mistral_L8_h1536_b2_topp", lambda s: llama(8, 1536, 12, 4, 4096, 32000, s, "mistral"), "generate", 2,
     (128, 24), {"gen": {"do_sample": True, "top_p": 0.9}}),
    ("generate_qwen2_L6_h1536_b8", lambda s: llama(6, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 8,
     (256, 16), {}),
]  # fmt: skip

# round 100 (--set static_fit2): fit runs, not held apart: more host-bound static-cache generate() compiled, as round 85's
# (stop 28: round 85's four traces ran the compiled loop, the call and the eager prefill ~7 % faster per probe than the
# held-apart rounds 86-99 that followed)
RUNS_STATIC_FIT2 = [
    ("sfit2_generate_llama_L8_h2048_b2_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 2,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit2_generate_llama_L6_h1536_b4_static", lambda s: llama(6, 1536, 12, 4, 4096, 32000, s), "generate", 4,
     (128, 24), {"gen": {"cache_implementation": "static"}}),
    ("sfit2_generate_mistral_L10_h2048_b1_static", lambda s: llama(10, 2048, 16, 8, 5632, 32000, s, "mistral"),
     "generate", 1, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit2_generate_qwen2_L6_h1536_b2_static", lambda s: llama(6, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate",
     2, (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit2_generate_qwen2_L8_h1024_b8_static_eos", lambda s: llama(8, 1024, 16, 4, 4864, 151936, s, "qwen2"),
     "generate", 8, (128, 16), {"gen": {"cache_implementation": "static", "eos_token_id": 2}}),
    ("sfit2_generate_llama_L12_h1024_b1_static", lambda s: llama(12, 1024, 16, 4, 4096, 32000, s), "generate", 1,
     (128, 24), {"gen": {"cache_implementation": "static"}}),
    ("sfit2_generate_llama_L4_h3072_b4_static_topk", lambda s: llama(4, 3072, 24, 8, 8192, 32000, s), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "top_k": 40}}),
    ("sfit2_generate_mistral_L6_h2560_b2_static_temp", lambda s: llama(6, 2560, 20, 4, 6912, 32000, s, "mistral"),
     "generate", 2, (128, 16), {"gen": {"cache_implementation": "static", "do_sample": True, "temperature": 0.7}}),
]  # fmt: skip


# round 101 (--set r101): held apart, static-cache generate() after the compiled decode's loop priced without the ops its
# graph holds and round 100's fit rows (stop 28)
RUNS_R101 = [
    ("generate_llama_L10_h1536_b2_static", lambda s: llama(10, 1536, 12, 4, 4096, 32000, s), "generate", 2,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L12_h1536_b4_static", lambda s: llama(12, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 4,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L4_h4096_b1_static_p512", lambda s: llama(4, 4096, 32, 8, 14336, 32000, s, "mistral"),
     "generate", 1, (512, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L6_h2560_b8_static_topp", lambda s: llama(6, 2560, 20, 4, 6912, 32000, s), "generate", 8,
     (128, 24), {"gen": {"cache_implementation": "static", "do_sample": True, "top_p": 0.9}}),
    ("generate_qwen2_L4_h2048_b16_static_eos", lambda s: llama(4, 2048, 16, 2, 11008, 151936, s, "qwen2"), "generate",
     16, (128, 16), {"gen": {"cache_implementation": "static", "eos_token_id": 2}}),
    ("generate_llama_L14_h2048_b1_static", lambda s: llama(14, 2048, 16, 8, 5632, 32000, s), "generate", 1,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip


# round 102 (--set train_fit2): round 32's training fit runs again (GPT-2 small's layers and a Llama of h 1024, 2 and 8
# layers, 1 x 512 tokens, twice), on another day: held-apart host-bound training steps came out ~5 % short (stop 28)
RUNS_TRAIN_FIT2 = [(n.replace("fit_", "fit2_", 1), b, k, mb, sh, o) for n, b, k, mb, sh, o in RUNS_FIT if k == "train"]


# round 103 (--set r103): held apart, host-bound training steps after round 102's refit (stop 28)
RUNS_R103 = [
    ("train_llama_L6_h1536_b2_s1024", lambda s: llama(6, 1536, 12, 4, 4096, 32000, s), "train", 2, 1024, {}),
    ("train_gpt2_L12_h768_b4_s512", lambda s: gpt2(12, 768, 12, s), "train", 4, 512, {}),
    ("train_qwen2_L4_h1536_b2_s1024", lambda s: llama(4, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 2, 1024, {}),
    ("train_mistral_L8_h2048_b1_s1024", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s, "mistral"), "train", 1, 1024,
     {}),
]  # fmt: skip

# round 104 (--set train_fit3): round 32's training fit runs at 4 and 12 layers (GPT-2 small's layers and a Llama of h
# 1024, 1 x 512 tokens, twice): the step's host outside the layers as a line over four layer counts, not two (stop 29)
RUNS_TRAIN_FIT3 = [
    (f"fit3_train_{arch}_L{L}_p{rep}", build_of(L), "train", 1, 512, {})
    for rep in (0, 1)
    for arch, build_of in FIT_MODELS
    for L in (4, 12)
]

# round 105 (--set r105): held apart, after the training steps' main-thread probe became the geometric mean of aten::t
# and aten::empty (stop 29)
RUNS_R105 = [
    ("train_llama_L10_h1536_b2_s1024", lambda s: llama(10, 1536, 12, 4, 4096, 32000, s), "train", 2, 1024, {}),
    ("train_qwen2_L6_h1024_b4_s512", lambda s: llama(6, 1024, 16, 2, 4864, 151936, s, "qwen2"), "train", 4, 512, {}),
    ("train_gpt2_L8_h1024_b2_s1024", lambda s: gpt2(8, 1024, 16, s), "train", 2, 1024, {}),
    ("train_mistral_L4_h2560_b2_s1024", lambda s: llama(4, 2560, 20, 4, 6912, 32000, s, "mistral"), "train", 2, 1024,
     {}),
    ("train_phi3_L6_h1536_b2_s1024", lambda s: llama(6, 1536, 24, 8, 4096, 32064, s, "phi3"), "train", 2, 1024, {}),
    ("generate_llama_L8_h1024_b4", lambda s: llama(8, 1024, 16, 4, 4096, 32000, s), "generate", 4, (128, 16), {}),
    ("generate_qwen2_L10_h1536_b2_static", lambda s: llama(10, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 2,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("infer_llama_L8_h2048_b4", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "infer", 4, (512, 8), {}),
]  # fmt: skip

# round 106 (--set static_fit3): fit runs, not held apart: compiled static-cache generate() at batches where the decode graph
# about matches the host (waits of 0.1-2 ms between round 85's and 100's host-bound runs and round 96's GPU-bound ones):
# how long the loop leads the graph after a short wait (stop 29)
RUNS_STATIC_FIT3 = [
    ("sfit3_generate_llama_L8_h2048_b96_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 96,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_llama_L8_h2048_b160_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 160,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_llama_L8_h2048_b224_static", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 224,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_qwen2_L8_h1536_b160_static", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"),
     "generate", 160, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_qwen2_L8_h1536_b320_static", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"),
     "generate", 320, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_mistral_L6_h3072_b96_static", lambda s: llama(6, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 96, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_mistral_L6_h3072_b192_static", lambda s: llama(6, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 192, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("sfit3_generate_llama_L12_h1536_b192_static", lambda s: llama(12, 1536, 12, 4, 4096, 32000, s), "generate", 192,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip

# round 107 (--set r107): held apart, compiled static-cache generate() at batches where the decode graph about matches the
# host, before round 106's fit rows were used (stop 29)
RUNS_R107 = [
    ("generate_llama_L10_h2048_b144_static", lambda s: llama(10, 2048, 16, 8, 5632, 32000, s), "generate", 144,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L10_h1536_b192_static", lambda s: llama(10, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate",
     192, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_mistral_L8_h3072_b128_static", lambda s: llama(8, 3072, 24, 8, 8192, 32000, s, "mistral"), "generate",
     128, (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L12_h1536_b256_static", lambda s: llama(12, 1536, 12, 4, 4096, 32000, s), "generate", 256,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L6_h2048_b96_static", lambda s: llama(6, 2048, 16, 2, 11008, 151936, s, "qwen2"), "generate", 96,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L6_h2560_b160_static", lambda s: llama(6, 2560, 20, 4, 6912, 32000, s), "generate", 160,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
]  # fmt: skip

# round 108 (--set r108): held apart after stop 29's changes (the probes' geometric means, rounds 104's and 106's fit rows)
RUNS_R108 = [
    ("generate_qwen2_L8_h1536_b4_static", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L12_h1024_b2_static", lambda s: llama(12, 1024, 16, 2, 4864, 151936, s, "qwen2"), "generate", 2,
     (128, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_llama_L10_h2048_b4_static", lambda s: llama(10, 2048, 16, 8, 5632, 32000, s), "generate", 4,
     (256, 16), {"gen": {"cache_implementation": "static"}}),
    ("generate_qwen2_L8_h1024_b4", lambda s: llama(8, 1024, 16, 2, 4864, 151936, s, "qwen2"), "generate", 4,
     (128, 16), {}),
    ("infer_qwen2_L6_h1536_b8", lambda s: llama(6, 1536, 12, 2, 8960, 151936, s, "qwen2"), "infer", 8, (256, 8), {}),
    ("generate_mixtral_L6_h1024_e8_b4", lambda s: mixtral(6, 1024, 16, 4, 2048, 8, 2, s), "generate", 4, (128, 8), {}),
    ("train_qwen2_L8_h1536_b2_s1024", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 2, 1024, {}),
    ("train_llama_L6_h2048_b4_s512", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s), "train", 4, 512, {}),
]  # fmt: skip

# round 109 (--set moe_fit2): fit runs, not held apart: round 51's Mixtral decode fit runs (2 and 8 layers, manual loop,
# 128-token prompts and 8 decode steps) at batch 4, and generate() at batches 2 and 4 (stop 29: transformers' Mixtral
# generate() comes out 15-17 % over, its MoE decode layers fitted on batch-1 passes only)
RUNS_MOE_FIT2 = [
    *[(f"fit2_infer_mixtral_L{L}_b4_p{rep}", (lambda L: (lambda s: mixtral(L, 1024, 16, 4, 2048, 8, 2, s)))(L), "infer", 4,
       (128, 8), {}) for rep in (0, 1) for L in (2, 8)],
    ("fit2_generate_mixtral_L4_b2", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "generate", 2, (128, 8), {}),
    ("fit2_generate_mixtral_L4_b4", lambda s: mixtral(4, 1024, 16, 4, 2048, 8, 2, s), "generate", 4, (128, 8), {}),
]  # fmt: skip

# round 110 (--set r110): held apart after stop 31's change (a transformers training step of the fit code paced by the
# mean of its GEMM ops): eight training steps of that code (separate projections, fp32 weights + bf16 autocast, fused
# AdamW, no recompute), host-bound to GPU-heavy
RUNS_R110 = [
    ("train_llama_L8_h1536_b2_s1024", lambda s: llama(8, 1536, 12, 4, 4096, 32000, s), "train", 2, 1024, {}),
    ("train_qwen2_L6_h2048_b2_s512", lambda s: llama(6, 2048, 16, 2, 11008, 151936, s, "qwen2"), "train", 2, 512, {}),
    ("train_mistral_L6_h2048_b2_s1024", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s, "mistral"), "train", 2, 1024,
     {}),
    ("train_gpt2_L10_h1280_b2_s1024", lambda s: gpt2(10, 1280, 20, s), "train", 2, 1024, {}),
    ("train_gpt2_L16_h1024_b2_s1024", lambda s: gpt2(16, 1024, 16, s), "train", 2, 1024, {}),
    ("train_llama_L12_h1024_b4_s512", lambda s: llama(12, 1024, 16, 4, 2816, 32000, s), "train", 4, 512, {}),
    ("train_qwen2_L10_h1024_b2_s1024", lambda s: llama(10, 1024, 16, 2, 4864, 151936, s, "qwen2"), "train", 2, 1024, {}),
    ("train_llama_L4_h3072_b1_s2048", lambda s: llama(4, 3072, 24, 8, 8192, 32000, s), "train", 1, 2048, {}),
]  # fmt: skip

# round 111 (--set r111): held apart after stop 31's last change (a transformers training layer's host scales with its
# op count over the fit code's: Qwen2's biased projections): eight training steps, four of them Qwen2
RUNS_R111 = [
    ("train_qwen2_L8_h1024_b4_s512", lambda s: llama(8, 1024, 16, 2, 4864, 151936, s, "qwen2"), "train", 4, 512, {}),
    ("train_qwen2_L4_h2048_b2_s1024", lambda s: llama(4, 2048, 16, 2, 11008, 151936, s, "qwen2"), "train", 2, 1024,
     {}),
    ("train_qwen2_L12_h1536_b1_s1024", lambda s: llama(12, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 1, 1024,
     {}),
    ("train_qwen2_L6_h1536_b4_s512", lambda s: llama(6, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 4, 512, {}),
    ("train_mistral_L10_h1024_b2_s1024", lambda s: llama(10, 1024, 16, 8, 3584, 32000, s, "mistral"), "train", 2,
     1024, {}),
    ("train_llama_L6_h2560_b1_s2048", lambda s: llama(6, 2560, 20, 4, 6912, 32000, s), "train", 1, 2048, {}),
    ("train_gpt2_L6_h1536_b4_s512", lambda s: gpt2(6, 1536, 16, s), "train", 4, 512, {}),
    ("train_llama_L16_h1024_b2_s512", lambda s: llama(16, 1024, 16, 4, 2816, 32000, s), "train", 2, 512, {}),
]  # fmt: skip

# round 112 (--set r112): held apart after stop 32's change (a transformers compiled training step paced by its kernel
# launches' median): seven compiled training steps of round 70's fit code (fp32 weights + bf16 autocast, fused AdamW,
# no recompute), host-bound to GPU-heavy
RUNS_R112 = [
    ("train_gpt2_L12_h768_b2_s512_compiled", lambda s: gpt2(12, 768, 12, s), "train", 2, 512, {"compile": True}),
    ("train_gpt2_L14_h1024_b1_s1024_compiled", lambda s: gpt2(14, 1024, 16, s), "train", 1, 1024, {"compile": True}),
    ("train_gpt2_L8_h1536_b4_s1024_compiled", lambda s: gpt2(8, 1536, 16, s), "train", 4, 1024, {"compile": True}),
    ("train_llama_L8_h1024_b2_s512_compiled", lambda s: llama(8, 1024, 16, 4, 2816, 32000, s), "train", 2, 512,
     {"compile": True}),
    ("train_llama_L12_h1536_b1_s1024_compiled", lambda s: llama(12, 1536, 12, 4, 4096, 32000, s), "train", 1, 1024,
     {"compile": True}),
    ("train_llama_L6_h2048_b2_s1024_compiled", lambda s: llama(6, 2048, 16, 8, 5632, 32000, s), "train", 2, 1024,
     {"compile": True}),
    ("train_mistral_L8_h1024_b4_s512_compiled", lambda s: llama(8, 1024, 16, 8, 3584, 32000, s, "mistral"), "train", 4,
     512, {"compile": True}),
]  # fmt: skip

# round 113 (--set r113): held apart after stop 32's second change (a transformers training layer's host scales with
# its ops' host weight, profile.LAYER_OP_WEIGHTS, over the fit code's): four Phi-3 steps (fused projections), two
# Qwen2 (biased q / k / v), a Llama and a GPT-2 of the fit code (fp32 weights + bf16 autocast, fused AdamW, eager)
RUNS_R113 = [
    ("train_phi3_L8_h1024_b2_s512", lambda s: llama(8, 1024, 16, 8, 2816, 32064, s, "phi3"), "train", 2, 512, {}),
    ("train_phi3_L12_h1536_b1_s1024", lambda s: llama(12, 1536, 24, 8, 4096, 32064, s, "phi3"), "train", 1, 1024, {}),
    ("train_phi3_L6_h2048_b2_s1024", lambda s: llama(6, 2048, 32, 8, 5632, 32064, s, "phi3"), "train", 2, 1024, {}),
    ("train_phi3_L4_h3072_b1_s2048", lambda s: llama(4, 3072, 32, 8, 8192, 32064, s, "phi3"), "train", 1, 2048, {}),
    ("train_qwen2_L8_h1536_b2_s512", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"), "train", 2, 512, {}),
    ("train_qwen2_L10_h2048_b1_s1024", lambda s: llama(10, 2048, 16, 2, 11008, 151936, s, "qwen2"), "train", 1, 1024,
     {}),
    ("train_llama_L10_h1024_b2_s1024", lambda s: llama(10, 1024, 16, 4, 2816, 32000, s), "train", 2, 1024, {}),
    ("train_gpt2_L8_h1024_b4_s512", lambda s: gpt2(8, 1024, 16, s), "train", 4, 512, {}),
]  # fmt: skip

# round 114 (--set r114): held apart after stop 33's one-step changes (a one-step static-cache generate() counts its
# decode graph's record over the whole trace; an inference trace whose steps came from repeated kernels is one step):
# every run one unannotated profiled step as users record it (``one_step``): four compiled static-cache generate()
# calls at batches 4-256, a dynamic-cache one, two eager training steps and a compiled one
_STATIC = {"cache_implementation": "static"}
RUNS_R114 = [
    ("generate_llama_L8_h2048_b4_static_onestep", lambda s: llama(8, 2048, 16, 8, 5632, 32000, s), "generate", 4,
     (256, 16), {"gen": _STATIC, "one_step": True}),
    ("generate_qwen2_L8_h1536_b8_static_onestep", lambda s: llama(8, 1536, 12, 2, 8960, 151936, s, "qwen2"),
     "generate", 8, (128, 16), {"gen": _STATIC, "one_step": True}),
    ("generate_mistral_L8_h3072_b64_static_onestep", lambda s: llama(8, 3072, 24, 8, 8192, 32000, s, "mistral"),
     "generate", 64, (128, 16), {"gen": _STATIC, "one_step": True}),
    ("generate_llama_L12_h2048_b256_static_onestep", lambda s: llama(12, 2048, 16, 8, 5632, 32000, s), "generate", 256,
     (128, 16), {"gen": _STATIC, "one_step": True}),
    ("generate_qwen2_L8_h2048_b4_onestep", lambda s: llama(8, 2048, 16, 2, 11008, 151936, s, "qwen2"), "generate", 4,
     (256, 16), {"one_step": True}),
    ("train_llama_L8_h1536_b2_s1024_onestep", lambda s: llama(8, 1536, 12, 4, 4096, 32000, s), "train", 2, 1024,
     {"one_step": True}),
    ("train_gpt2_L12_h768_b4_s1024_onestep", lambda s: gpt2(12, 768, 12, s), "train", 4, 1024, {"one_step": True}),
    ("train_qwen2_L6_h2048_b2_s1024_compiled_onestep", lambda s: llama(6, 2048, 16, 2, 11008, 151936, s, "qwen2"),
     "train", 2, 1024, {"compile": True, "one_step": True}),
]  # fmt: skip

# round 115 (--set r115): held apart, the three training misses of transformers code re-run as they were (round 38's
# bf16 Llama, round 53's Llama with foreach AdamW under HTA's profiler options, round 113's 4-layer Phi-3 of h 3072):
# does another run of the same step miss the same way, or was the miss that run's?
_RERUN = {"train_llama_L8_h2048_b2_bf16", "train_llama_L6_h2048_b4_hta_foreach", "train_phi3_L4_h3072_b1_s2048"}
RUNS_R115 = [r for runs in (RUNS_R38, RUNS_R53, RUNS_R113) for r in runs if r[0] in _RERUN]

# round 116 (--set foreach_fit, fitted, not held apart): round 32's training fit runs with torch.optim.AdamW's default
# foreach update, profiled plain and with HTA's options (stacks and memory events): transformers' foreach step() and
# what the profiler's options add to it (round 53's and 115's HTA-profiled foreach Llama missed twice)
RUNS_FOREACH_FIT = [
    (f"fit_train_{arch}_L{L}_foreach{'_' + tag if tag else ''}", build_of(L), "train", 1, 512,
     {"optim": "foreach", **({"prof": _PROF_SETS[tag]} if tag else {})})
    for tag in ("", "stack_memory")
    for arch, build_of in FIT_MODELS
    for L in (2, 8)
]  # fmt: skip

# round 117 (--set h100_twins, on an H100 SXM: kind nvidia-h100-x1): held apart, runs of earlier held-apart rounds
# again on another GPU, each the twin of a committed H200 trace: simcore's H200 calibration transferred to the H100 is
# judged on them, and each H200 twin replayed onto the H100 is compared with its H100 trace. GPU-bound steps first
# (fp32 GEMMs, bf16 weights, long sequences, gradient checkpointing, prefill and decode), then host-bound ones (the
# H100 machine's CPU), then torch.compile. In this order, as the budget allows.
_H100_TWINS = (
    "train_gpt2_L12_b8_fp32", "train_llama_L8_h4096_b1_s4096_bf16", "train_qwen2_L6_h3584_b2",
    "train_llama_L4_h4096_b2", "train_llama_L4_h2048_b1_s8192", "train_mistral_L4_h4096_b1_s8192_gc_bf16",
    "infer_llama_L8_h4096_b16_p1024", "infer_llama_L8_h2048_b32", "train_gpt2_L8_h1024_b4_s512",
    "train_llama_L16_h2048_b1", "infer_llama_L8_h3072_b4_p2048", "train_llama_L4_h4096_b2_compiled",
    "generate_llama_L8_h4096_b512_static",
)
_ALL_RUNS = {r[0]: r for k, v in list(globals().items()) if k.startswith("RUNS") for r in v}
RUNS_H100_TWINS = [_ALL_RUNS[n] for n in _H100_TWINS]
# round 118 (--set h100_twins_rest --label r117b): the three twins round 117's budget left out
RUNS_H100_TWINS_REST = RUNS_H100_TWINS[10:]

# --set NAME: its runs and the round whose ``r<N>_runs.json`` records them
SETS = {
    "r31": (RUNS, "r31"),
    "fit": (RUNS_FIT, "r32"),
    "decode": (RUNS_DECODE, "r33"),
    "generate": (RUNS_GENERATE, "r34"),
    "generate_fit": (RUNS_GENERATE_FIT, "r35"),
    "r36": (RUNS_R36, "r36"),
    "tokens": (RUNS_TOKENS, "r37"),
    "r38": (RUNS_R38, "r38"),
    "r39": (RUNS_R39, "r39"),
    "r46": (RUNS_R46, "r46"),
    "r48": (RUNS_R48, "r48"),
    "r50": (RUNS_R50, "r50"),
    "moe_fit": (RUNS_MOE_FIT, "r51"),
    "r52": (RUNS_R52, "r52"),
    "r53": (RUNS_R53, "r53"),
    "prof_fit": (RUNS_PROF_FIT, "r54"),
    "r55": (RUNS_R55, "r55"),
    "moe_fit_bf16": (RUNS_MOE_FIT_BF16, "r56"),
    "r57": (RUNS_R57, "r57"),
    "fit_bf16": (RUNS_FIT_BF16, "r58"),
    "r60": (RUNS_R60, "r60"),
    "eager_fit": (RUNS_EAGER_FIT, "r61"),
    "r62": (RUNS_R62, "r62"),
    "r63": (RUNS_R63, "r63"),
    "width_fit": (RUNS_WIDTH_FIT, "r64"),
    "r66": (RUNS_R66, "r66"),
    "r68": (RUNS_R68, "r68"),
    "r69": (RUNS_R69, "r69"),
    "compiled_fit": (RUNS_COMPILED_FIT, "r70"),
    "r71": (RUNS_R71, "r71"),
    "r73": (RUNS_R73, "r73"),
    "r79": (RUNS_R79, "r79"),
    "sample_fit": (RUNS_SAMPLE_FIT, "r80"),
    "r81": (RUNS_R81, "r81"),
    "r82": (RUNS_R82, "r82"),
    "r83": (RUNS_R83, "r83"),
    "r84": (RUNS_R84, "r84"),
    "static_fit": (RUNS_STATIC_FIT, "r85"),
    "r86": (RUNS_R86, "r86"),
    "r87": (RUNS_R87, "r87"),
    "r88": (RUNS_R88, "r88"),
    "r89": (RUNS_R89, "r89"),
    "r90": (RUNS_R90, "r90"),
    "r91": (RUNS_R91, "r91"),
    "rec_fit": (RUNS_REC_FIT, "r96"),
    "r97": (RUNS_R97, "r97"),
    "r98": (RUNS_R98, "r98"),
    "r99": (RUNS_R99, "r99"),
    "static_fit2": (RUNS_STATIC_FIT2, "r100"),
    "r101": (RUNS_R101, "r101"),
    "train_fit2": (RUNS_TRAIN_FIT2, "r102"),
    "r103": (RUNS_R103, "r103"),
    "train_fit3": (RUNS_TRAIN_FIT3, "r104"),
    "r105": (RUNS_R105, "r105"),
    "static_fit3": (RUNS_STATIC_FIT3, "r106"),
    "r107": (RUNS_R107, "r107"),
    "r108": (RUNS_R108, "r108"),
    "moe_fit2": (RUNS_MOE_FIT2, "r109"),
    "r110": (RUNS_R110, "r110"),
    "r111": (RUNS_R111, "r111"),
    "r112": (RUNS_R112, "r112"),
    "r113": (RUNS_R113, "r113"),
    "r114": (RUNS_R114, "r114"),
    "r115": (RUNS_R115, "r115"),
    "foreach_fit": (RUNS_FOREACH_FIT, "r116"),
    "h100_twins": (RUNS_H100_TWINS, "r117"),
    "h100_twins_rest": (RUNS_H100_TWINS_REST, "r117b"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--budget", type=float, default=400.0)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--set", choices=list(SETS), default="r31", help="which runs (the module docstring says each round's)")
    ap.add_argument("--kinds", default="", help="only these kinds of run (train, infer, generate; default all)")
    ap.add_argument("--label", default="", help="the round label of the runs file (default: the set's)")
    args = ap.parse_args()
    runs, round_label = SETS[args.set]
    if args.kinds:
        runs = [r for r in runs if r[2] in args.kinds.split(",")]
    round_label = args.label or round_label
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    # under torchrun (round 39): DistributedDataParallel, one trace per rank (``_rank<r>``)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    suffix = f"_rank{rank}" if world > 1 else ""
    if world > 1:
        import torch.distributed as dist

        if dev.type == "cuda":
            dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(dev)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    os.makedirs(args.outdir, exist_ok=True)
    from torch.profiler import ProfilerActivity

    import transformers

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    meta = {"env": {**env_info(dev), "transformers": transformers.__version__}, "runs": {}}
    t0 = time.time()
    for name, build, kind, batch, shape, opt in runs:
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        try:
            a = time.time()
            torch.manual_seed(0)
            model, cfg = build(args.smoke)
            model = model.to(dev)
            vocab = cfg.vocab_size
            if kind == "train":
                seq = 64 if args.smoke else shape
                model.train()
                if opt.get("bf16"):  # bf16 weights, no autocast (a common fine-tuning setup)
                    model = model.to(torch.bfloat16)
                if world > 1:
                    from torch.nn.parallel import DistributedDataParallel

                    model = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
                if opt.get("gc"):  # transformers' gradient checkpointing (every decoder layer recomputed)
                    model.gradient_checkpointing_enable()
                params = model.parameters()
                if opt.get("optim") == "foreach":  # torch.optim's default implementation on CUDA
                    optim = torch.optim.AdamW(params, lr=1e-4)
                elif opt.get("optim") == "sgd":
                    optim = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
                else:
                    optim = torch.optim.AdamW(params, lr=1e-4, **({"fused": True} if dev.type == "cuda" else {}))
                x = torch.randint(0, vocab, (batch, seq), device=dev)
                run = torch.compile(model) if opt.get("compile") else model
                accum = int(opt.get("accum", 1))  # micro-batches of `batch` per optimizer step
                half = torch.float16 if opt.get("fp16") else torch.bfloat16
                scaler = torch.amp.GradScaler(dev.type) if opt.get("fp16") else None

                def step():
                    for _ in range(accum):
                        amp = not (opt.get("bf16") or opt.get("fp32"))
                        with torch.autocast(device_type=dev.type, dtype=half, enabled=amp):
                            loss = run(input_ids=x, labels=x).loss
                        (scaler.scale(loss) if scaler else loss).backward()
                    if opt.get("clip"):  # as transformers' Trainer does every step (max_grad_norm)
                        if scaler:
                            scaler.unscale_(optim)
                        torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip"])
                    if scaler:  # GradScaler.step reads found_inf on the host before the optimizer step
                        scaler.step(optim)
                        scaler.update()
                    else:
                        optim.step()
                    optim.zero_grad(set_to_none=True)
                    if opt.get("item"):
                        loss.item()

                for _ in range(3 if opt.get("compile") else 1):  # compile (or warm up) outside the profile
                    step()
                sync(dev)
                profile(step, 4, acts, os.path.join(args.outdir, f"hf_{name}{suffix}.json.gz"), opt.get("one_step", False),
                        **opt.get("prof", {}))
                info = {"batch": batch, "seq": seq, **opt}
            elif kind == "generate":
                prompt, new = (32, 8) if args.smoke else shape
                model = model.to(torch.bfloat16).eval()
                x = torch.randint(0, vocab, (batch, prompt), device=dev)
                mask = torch.ones_like(x)

                # greedy unless the run's own generation options say otherwise (round 79)
                gen_opts = {"do_sample": False, **opt.get("gen", {})}

                @torch.no_grad()
                def step():
                    model.generate(
                        input_ids=x, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, pad_token_id=0,
                        **gen_opts,
                    )  # fmt: skip

                # a static cache's compiled decode (round 84) compiles, then records its CUDA graphs, in the first calls
                for _ in range(3 if gen_opts.get("cache_implementation") == "static" else 1):
                    step()
                sync(dev)
                profile(step, 4, acts, os.path.join(args.outdir, f"hf_{name}{suffix}.json.gz"), opt.get("one_step", False))
                info = {"batch": batch, "prompt": prompt, "new_tokens": new, "generate": True, **gen_opts}
            else:
                prompt, new = (32, 8) if args.smoke else shape
                model = model.to(torch.bfloat16).eval()
                x = torch.randint(0, vocab, (batch, prompt), device=dev)

                @torch.no_grad()
                def step():
                    out = model(input_ids=x, use_cache=True)
                    cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                    for _ in range(new):
                        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
                        cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
                    tok.cpu()

                step()
                sync(dev)
                profile(step, 4, acts, os.path.join(args.outdir, f"hf_{name}{suffix}.json.gz"), opt.get("one_step", False))
                info = {"batch": batch, "prompt": prompt, "new_tokens": new}
            meta["runs"][name] = {**info, "kind": kind, "model_config": cfg.to_dict()}
            log(f"{name}: {time.time() - a:.1f} s")
            del model
            torch._dynamo.reset()
        except Exception as e:  # noqa: BLE001
            log(f"ERROR {name}: {repr(e)[:400]}")
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if rank > 0:
        return
    with open(os.path.join(args.outdir, f"{round_label}_runs.json"), "w") as f:
        json.dump(meta, f, indent=1, default=str)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
