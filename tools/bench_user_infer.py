"""Round 76: profiler traces of inference written the way users write it (a KV cache grown with ``torch.cat``,
a hand-written greedy loop), in neither code base simcore's decode host was measured on.

* ``nanogpt``: the nanoGPT-style GPT of ``tools/bench_user_models.py`` with a per-layer KV cache; the prefill
  computes the last position's logits only (nanoGPT's ``lm_head(x[:, [-1], :])``);
* ``llama``: the hand-written Llama of ``tools/bench_user_models.py`` with a KV cache and rotary positions
  offset by the cache length; the prefill computes every position's logits (``lm_head(x)``, then ``[:, -1]``).

bf16 weights, ``torch.no_grad()``, a profiled step = one prefill of ``batch x prompt`` tokens and 8 greedy decode
steps (``argmax`` of the last logits fed back on the GPU, no host wait inside), ``torch.profiler`` with
``record_shapes=True`` over ``schedule(wait=1, warmup=1, active=2)``. Traces ``user_infer_<name>.json.gz`` and
``r76_runs.json``.

Round 78 (``--set r78``, held apart after ``runtime.layer_ops`` in inference): the hand-written Llama at 12 x 1536
and batch 16, nanoGPT at batch 32, the Llama with a preallocated cache (slice assignment) and with RMSNorm written
out of elementwise ops.

Round 79 (``--set r79``, held apart after ``runtime.pass_ops``): users' sampling loops instead of argmax, nanoGPT's
``generate()`` (temperature, top-k, ``torch.multinomial``) and the Llama reference's top-p sampling.

Round 80 (``--set sample_fit``, fitted, not held apart): the same loops greedy, with temperature sampling only
(``torch.multinomial``), nanoGPT's top-k and the Llama reference's top-p: the host of a sampling pass's extra
kernel launches, fitted beside ``tools/bench_hf.py --set sample_fit``.

Round 81 (``--set r81``, held apart after ``profile.EXTRA_LAUNCH_OPS``): the samplers on other models, widths and
batches: nanoGPT at h 1024 with the Llama reference's top-p at batch 16, the hand-written Llama with nanoGPT's
top-k at batch 8, a 12-layer Llama with temperature sampling alone over a 512-token prompt.

Round 82 (``--set r82``, held apart after ``host_trace.PROBE_WINDOW``): nanoGPT of 8 layers with temperature
sampling after 8 x 512, a 16-layer hand-written Llama of h 1024 with top-p after 4 x 256.

Round 83 (``--set r83``, held apart after ``PROBE_WINDOW`` was kept to inference traces): a 6-layer nanoGPT of
h 512 greedy after 4 x 256, a 12-layer hand-written Llama of h 1536 with top-k after 2 x 512.

Round 84 (``--set r84``, held apart, stop 23, before any change of that stop): nanoGPT of 12 layers at h 768 greedy
at batch 32 after 128 tokens, an 8-layer hand-written Llama of h 2048 with top-p at batch 4 after 256.

  python tools/bench_user_infer.py --outdir DIR [--set r76|r78|r79|sample_fit|r81|r82|r83|r84] [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_user_models import NanoGPT, UserLlama  # noqa: E402
from benchutil import env_info, log, profile  # noqa: E402


def nanogpt_forward(m: NanoGPT, idx: torch.Tensor, cache: list, pos0: int) -> torch.Tensor:
    """Logits of the last position; ``cache`` holds each layer's (k, v), grown with ``torch.cat``."""
    b, t = idx.shape
    pos = torch.arange(pos0, pos0 + t, device=idx.device)
    x = m.wte(idx) + m.wpe(pos)
    for i, blk in enumerate(m.blocks):
        h = x.shape[-1]
        q, k, v = blk.c_attn(blk.ln_1(x)).split(h, dim=2)
        q, k, v = (z.view(b, t, blk.heads, h // blk.heads).transpose(1, 2) for z in (q, k, v))
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + blk.c_proj(y.transpose(1, 2).contiguous().view(b, t, h))
        x = x + blk.mlp_proj(blk.gelu(blk.c_fc(blk.ln_2(x))))
    return m.lm_head(m.ln_f(x[:, [-1], :]))


def _fused_rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w)


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm written out of elementwise ops (in fp32), as many users (and ``transformers``) write it."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * w


def llama_forward(
    m: UserLlama, idx: torch.Tensor, cache: list, pos0: int, norm=_fused_rms, prealloc: bool = False,
    all_logits: bool = True,
) -> torch.Tensor:  # fmt: skip
    """The hand-written Llama's pass, rotary positions offset by ``pos0``: ``norm`` the RMSNorm
    (``F.rms_norm``, or :func:`_rms` written out), a KV cache grown with ``torch.cat`` or, with
    ``prealloc``, preallocated (slice assignment into ``[b, kv, max, d]`` tensors made on the first call,
    attention over ``[:pos0 + t]``); the logits of every position (``lm_head(x)``) or of the last."""
    b, t = idx.shape
    x = m.emb(idx)
    cos, sin = m.cos[pos0 : pos0 + t], m.sin[pos0 : pos0 + t]

    def rope(z: torch.Tensor) -> torch.Tensor:
        z1, z2 = z.chunk(2, dim=-1)
        return z * cos + torch.cat([-z2, z1], dim=-1) * sin

    for i, L in enumerate(m.layers):
        if prealloc and cache[i] is None:
            shape = (b, m.kv, m.cos.shape[0], m.d)
            cache[i] = (x.new_zeros(shape), x.new_zeros(shape))
        y = norm(x, m.norms[2 * i])
        q = rope(L["q"](y).view(b, t, m.heads, m.d).transpose(1, 2))
        k = rope(L["k"](y).view(b, t, m.kv, m.d).transpose(1, 2))
        if prealloc:
            cache[i][0][:, :, pos0 : pos0 + t] = k
        v = L["v"](y).view(b, t, m.kv, m.d).transpose(1, 2)
        if prealloc:
            ck, cv = cache[i]
            cv[:, :, pos0 : pos0 + t] = v
            k, v = ck[:, :, : pos0 + t], cv[:, :, : pos0 + t]
        else:
            if cache[i] is not None:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, enable_gqa=True)
        x = x + L["o"](a.transpose(1, 2).reshape(b, t, m.h))
        y = norm(x, m.norms[2 * i + 1])
        x = x + L["down"](F.silu(L["gate"](y)) * L["up"](y))
    return m.head(norm(x if all_logits else x[:, -1:], m.norms[-1]))


def nanogpt(layers: int, h: int, heads: int) -> Callable[[bool], NanoGPT]:
    """A builder(smoke) of a nanoGPT (vocab 50304, 1024 positions); a smoke run's: 2 layers of h 64, 4 heads,
    vocab 512."""
    return lambda s: NanoGPT(2 if s else layers, 64 if s else h, 4 if s else heads, 512 if s else 50304, 1024)


def user_llama(layers: int, h: int, heads: int, ffn: int) -> Callable[[bool], UserLlama]:
    """A builder(smoke) of the hand-written Llama (vocab 32000, 2048 positions, 4 kv heads); a smoke run's:
    2 layers of h 64, 4 heads, SwiGLU 128, vocab 512."""
    return lambda s: UserLlama(2 if s else layers, 64 if s else h, 4 if s else heads, 512 if s else 32000, 2048, kv=4,
                               ffn=128 if s else ffn)  # fmt: skip


# (name, builder(smoke) -> model, forward, batch, prompt)
RUNS = [
    ("nanogpt_L12_h768_b8_p512", nanogpt(12, 768, 12), nanogpt_forward, 8, 512),
    ("nanogpt_L24_h1024_b1_p256", nanogpt(24, 1024, 16), nanogpt_forward, 1, 256),
    ("llama_L8_h2048_b4_p1024", user_llama(8, 2048, 16, 5632), llama_forward, 4, 1024),
    ("llama_L16_h1024_b1_p512", user_llama(16, 1024, 16, 2816), llama_forward, 1, 512),
]  # fmt: skip

# round 78 (--set r78): held apart after runtime.layer_ops in inference: other users' decode loops
RUNS_R78 = [
    ("llama_L12_h1536_b16_p256", user_llama(12, 1536, 12, 4096), llama_forward, 16, 256),
    ("nanogpt_L12_h1024_b32_p128", nanogpt(12, 1024, 16), nanogpt_forward, 32, 128),
    ("llama_prealloc_L8_h2048_b4_p512", user_llama(8, 2048, 16, 5632), partial(llama_forward, prealloc=True, all_logits=False),
     4, 512),
    ("llama_manualnorm_L8_h2048_b2_p512", user_llama(8, 2048, 16, 5632), partial(llama_forward, norm=_rms, all_logits=False),
     2, 512),
]  # fmt: skip


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The next token of each sequence: the last position's argmax."""
    return logits[:, -1:].argmax(-1)


def sample_top_k(logits: torch.Tensor, temperature: float = 0.8, top_k: int = 200) -> torch.Tensor:
    """nanoGPT's ``generate()``: temperature, top-k masking, softmax, ``torch.multinomial``."""
    logits = logits[:, -1, :].float() / temperature
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("inf")
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)


def sample_top_p(logits: torch.Tensor, temperature: float = 0.6, top_p: float = 0.9) -> torch.Tensor:
    """Meta's Llama reference ``sample_top_p``: sorted probabilities, their cumulative sum, a mask, renormalise,
    ``torch.multinomial``, gather back."""
    probs = torch.softmax(logits[:, -1, :].float() / temperature, dim=-1)
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    probs_sort[probs_sum - probs_sort > top_p] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    return torch.gather(probs_idx, -1, torch.multinomial(probs_sort, num_samples=1))


# round 79 (--set r79): held apart after runtime.pass_ops: users' sampling loops (nanoGPT's top-k, the Llama
# reference's top-p) instead of argmax
RUNS_R79 = [
    ("nanogpt_topk_L12_h768_b8_p256", nanogpt(12, 768, 12), nanogpt_forward, 8, 256, sample_top_k),
    ("llama_topp_L8_h2048_b4_p512", user_llama(8, 2048, 16, 5632), partial(llama_forward, all_logits=False), 4, 512,
     sample_top_p),
]  # fmt: skip

def sample_temperature(logits: torch.Tensor, temperature: float = 0.9) -> torch.Tensor:
    """Temperature sampling alone: softmax of the scaled last logits, ``torch.multinomial``."""
    return torch.multinomial(F.softmax(logits[:, -1, :].float() / temperature, dim=-1), num_samples=1)


_nanogpt_l12 = nanogpt(12, 768, 12)
_llama_l8 = user_llama(8, 2048, 16, 5632)


# round 80 (--set sample_fit): fitted, not held apart: each sampler beside greedy on the same two models
_LLAMA_LAST = partial(llama_forward, all_logits=False)
RUNS_SAMPLE_FIT = [
    ("nanogpt_greedy_L12_h768_b4_p256", _nanogpt_l12, nanogpt_forward, 4, 256, greedy),
    ("nanogpt_temp_L12_h768_b4_p256", _nanogpt_l12, nanogpt_forward, 4, 256, sample_temperature),
    ("nanogpt_topk_L12_h768_b4_p256", _nanogpt_l12, nanogpt_forward, 4, 256, sample_top_k),
    ("nanogpt_topp_L12_h768_b4_p256", _nanogpt_l12, nanogpt_forward, 4, 256, sample_top_p),
    ("llama_greedy_L8_h2048_b2_p256", _llama_l8, _LLAMA_LAST, 2, 256, greedy),
    ("llama_temp_L8_h2048_b2_p256", _llama_l8, _LLAMA_LAST, 2, 256, sample_temperature),
    ("llama_topk_L8_h2048_b2_p256", _llama_l8, _LLAMA_LAST, 2, 256, sample_top_k),
    ("llama_topp_L8_h2048_b2_p256", _llama_l8, _LLAMA_LAST, 2, 256, sample_top_p),
]  # fmt: skip
# round 81 (--set r81): held apart after EXTRA_LAUNCH_OPS: the samplers on other models, widths and batches
RUNS_R81 = [
    ("nanogpt_topp_L12_h1024_b16_p128", nanogpt(12, 1024, 16), nanogpt_forward, 16, 128, sample_top_p),
    ("llama_topk_L8_h2048_b8_p256", _llama_l8, _LLAMA_LAST, 8, 256, sample_top_k),
    ("llama_temp_L12_h2048_b4_p512", user_llama(12, 2048, 16, 5632), _LLAMA_LAST, 4, 512, sample_temperature),
]  # fmt: skip
# round 82 (--set r82): held apart after host_trace.PROBE_WINDOW: two more loops at other depths and widths
RUNS_R82 = [
    ("nanogpt_temp_L8_h768_b8_p512", nanogpt(8, 768, 12), nanogpt_forward, 8, 512, sample_temperature),
    ("llama_topp_L16_h1024_b4_p256", user_llama(16, 1024, 16, 2816), _LLAMA_LAST, 4, 256, sample_top_p),
]  # fmt: skip
# round 83 (--set r83): held apart after PROBE_WINDOW was kept to inference traces
RUNS_R83 = [
    ("nanogpt_greedy_L6_h512_b4_p256", nanogpt(6, 512, 8), nanogpt_forward, 4, 256, greedy),
    ("llama_topk_L12_h1536_b2_p512", user_llama(12, 1536, 12, 4096), _LLAMA_LAST, 2, 512, sample_top_k),
]  # fmt: skip
# round 84 (--set r84): held apart, stop 23
RUNS_R84 = [
    ("nanogpt_greedy_L12_h768_b32_p128", _nanogpt_l12, nanogpt_forward, 32, 128, greedy),
    ("llama_topp_L8_h2048_b4_p256", _llama_l8, _LLAMA_LAST, 4, 256, sample_top_p),
]  # fmt: skip
SETS = {"r76": RUNS, "r78": RUNS_R78, "r79": RUNS_R79, "sample_fit": RUNS_SAMPLE_FIT, "r81": RUNS_R81, "r82": RUNS_R82,
        "r83": RUNS_R83, "r84": RUNS_R84}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--set", choices=list(SETS), default="r76")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    os.makedirs(args.outdir, exist_ok=True)
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    meta: dict = {"env": env_info(dev), "runs": {}}
    t0 = time.time()
    for name, build, fwd, batch, prompt, *how in SETS[args.set]:
        pick = how[0] if how else greedy  # the next token: argmax, or the run's own sampler (round 79)
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        if args.smoke:
            batch, prompt = 2, 16
        torch.manual_seed(0)
        model = build(args.smoke).to(dev).to(torch.bfloat16).eval()
        vocab = model.lm_head.weight.shape[0] if isinstance(model, NanoGPT) else model.head.weight.shape[0]
        x = torch.randint(0, vocab, (batch, prompt), device=dev)

        def step(model=model, fwd=fwd, x=x, prompt=prompt, pick=pick) -> None:
            with torch.no_grad():
                cache: list = [None] * len(model.blocks if isinstance(model, NanoGPT) else model.layers)
                tok = pick(fwd(model, x, cache, 0))
                for i in range(8):
                    tok = pick(fwd(model, tok, cache, prompt + i))

        t1 = time.time()
        for _ in range(3):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        path = os.path.join(args.outdir, f"user_infer_{name}.json.gz")
        profile(step, 4, acts, path)
        n_params = sum(q.numel() for q in model.parameters())
        meta["runs"][name] = {"model": type(model).__name__, "batch": batch, "prompt": prompt, "decode_steps": 8,
                              "params": n_params, "next_token": pick.__name__}  # fmt: skip
        log(f"{name}: {n_params / 1e6:.0f}M params ({time.time() - t1:.1f} s)")
        del model, step, x
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    # beside tools/bench_hf.py's r<N>_runs.json of the same round (round 79's was overwritten by it)
    label = f"{'r80' if args.set == 'sample_fit' else args.set}_user"
    with open(os.path.join(args.outdir, f"{label}_runs.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
