"""Round 74: profiler traces of transformer training written the way users write it, in neither of the code
bases simcore's host and lowering were measured on (``tools/gpt.py``, ``transformers``).

* ``nanogpt``: a nanoGPT-style GPT (one ``c_attn`` Linear for q, k, v, ``F.scaled_dot_product_attention``
  with ``is_causal=True``, ``nn.LayerNorm`` with bias, ``nn.GELU()`` (exact), weight tying, no dropout),
  ``loss = F.cross_entropy(logits.view(-1, V), y.view(-1))``, fused AdamW, bf16 autocast over fp32
  weights; eager or ``torch.compile``;
* ``encoder``: a causal LM on ``nn.TransformerEncoder`` (``nn.TransformerEncoderLayer(norm_first=True,
  activation="gelu", batch_first=True)`` with a float causal mask from
  ``nn.Transformer.generate_square_subsequent_mask``), an embedding and an untied head, the same loss and
  optimizer.

Each run: random token batches on the GPU, ``loss.backward()``, ``opt.step()``, ``opt.zero_grad()``, no host
wait in the loop; ``torch.profiler`` with ``record_shapes=True`` over ``schedule(wait=1, warmup=1, active=2)``
(``ProfilerStep`` annotations). Traces ``user_<name>.json.gz`` and ``r74_runs.json`` (configs, step times
measured apart with CUDA events, unprofiled).

Round 75 (``--set r75``, held apart after stop 20's ``runtime.layer_ops``): other users' code: a Llama written by hand
(``F.rms_norm``, rotate-half RoPE, GQA through SDPA, separate gate / up) at 8 x 2048 and 16 x 1024, nanoGPT with
separate bias-free q / k / v and dropout 0.1, a post-norm ``nn.TransformerEncoder`` LM.

  python tools/bench_user_models.py --outdir DIR [--set r74|r75] [--smoke] [--budget S]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import env_info, log, profile  # noqa: E402


class Block(nn.Module):
    def __init__(self, h: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, 4 * h)
        self.gelu = nn.GELU()
        self.mlp_proj = nn.Linear(4 * h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q, k, v = (z.view(b, t, self.heads, h // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, h))
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    def __init__(self, layers: int, h: int, heads: int, vocab: int, seq: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class EncoderLM(nn.Module):
    def __init__(self, layers: int, h: int, heads: int, vocab: int, seq: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, h)
        layer = nn.TransformerEncoderLayer(
            h, heads, 4 * h, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.enc(self.emb(idx), mask=self.mask[:t, :t].to(self.emb.weight.device), is_causal=True)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class NanoGPTQKV(NanoGPT):
    """nanoGPT with separate q, k, v projections without biases and dropout 0.1 (the residual branches'
    ``nn.Dropout`` and the attention's ``dropout_p``)."""

    def __init__(self, layers: int, h: int, heads: int, vocab: int, seq: int) -> None:
        super().__init__(layers, h, heads, vocab, seq)
        self.blocks = nn.ModuleList(BlockQKV(h, heads) for _ in range(layers))


class BlockQKV(nn.Module):
    def __init__(self, h: int, heads: int, p: float = 0.1) -> None:
        super().__init__()
        self.heads, self.p = heads, p
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.q, self.k, self.v = (nn.Linear(h, h, bias=False) for _ in range(3))
        self.o = nn.Linear(h, h, bias=False)
        self.fc, self.proj = nn.Linear(h, 4 * h, bias=False), nn.Linear(4 * h, h, bias=False)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        y = self.ln_1(x)
        q, k, v = (m(y).view(b, t, self.heads, h // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, h)))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln_2(x)))))


class UserLlama(nn.Module):
    """A Llama written by hand: ``F.rms_norm``, rotary embeddings from precomputed cos / sin (rotate-half),
    GQA through ``F.scaled_dot_product_attention(enable_gqa=True)``, SwiGLU with separate gate and up
    projections, no biases, an untied head."""

    def __init__(self, layers: int, h: int, heads: int, vocab: int, seq: int, kv: int = 4, ffn: int = 0) -> None:
        super().__init__()
        self.h, self.heads, self.kv, self.d = h, heads, kv, h // heads
        ffn = ffn or int(2.75 * h)
        self.emb = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {
                    "q": nn.Linear(h, h, bias=False), "k": nn.Linear(h, kv * self.d, bias=False),
                    "v": nn.Linear(h, kv * self.d, bias=False), "o": nn.Linear(h, h, bias=False),
                    "gate": nn.Linear(h, ffn, bias=False), "up": nn.Linear(h, ffn, bias=False),
                    "down": nn.Linear(ffn, h, bias=False),
                }
            )
            for _ in range(layers)
        )  # fmt: skip
        self.norms = nn.ParameterList(nn.Parameter(torch.ones(h)) for _ in range(2 * layers + 1))
        self.head = nn.Linear(h, vocab, bias=False)
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2).float() / self.d))
        ang = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[2]
        x1, x2 = x.chunk(2, dim=-1)
        return x * self.cos[:t] + torch.cat([-x2, x1], dim=-1) * self.sin[:t]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        x = self.emb(idx)
        for i, L in enumerate(self.layers):
            y = F.rms_norm(x, (self.h,), self.norms[2 * i])
            q = self.rope(L["q"](y).view(b, t, self.heads, self.d).transpose(1, 2))
            k = self.rope(L["k"](y).view(b, t, self.kv, self.d).transpose(1, 2))
            v = L["v"](y).view(b, t, self.kv, self.d).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + L["o"](a.transpose(1, 2).reshape(b, t, self.h))
            y = F.rms_norm(x, (self.h,), self.norms[2 * i + 1])
            x = x + L["down"](F.silu(L["gate"](y)) * L["up"](y))
        logits = self.head(F.rms_norm(x, (self.h,), self.norms[-1]))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class EncoderPostNorm(EncoderLM):
    """:class:`EncoderLM` with post-norm layers (``nn.TransformerEncoderLayer``'s default ``norm_first=False``)."""

    def __init__(self, layers: int, h: int, heads: int, vocab: int, seq: int) -> None:
        super().__init__(layers, h, heads, vocab, seq)
        layer = nn.TransformerEncoderLayer(h, heads, 4 * h, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


# (name, model class, layers, hidden, heads, vocab, seq, micro-batch, compile)
RUNS = [
    ("nanogpt_L12_h768_b8", NanoGPT, 12, 768, 12, 50304, 1024, 8, False),
    ("nanogpt_L24_h1024_b4", NanoGPT, 24, 1024, 16, 50304, 1024, 4, False),
    ("nanogpt_L12_h1536_b4_compiled", NanoGPT, 12, 1536, 12, 50304, 1024, 4, True),
    ("encoder_L12_h1024_b4", EncoderLM, 12, 1024, 16, 32000, 1024, 4, False),
    ("encoder_L8_h2048_b2", EncoderLM, 8, 2048, 16, 32000, 2048, 2, False),
]

# round 75 (--set r75): held apart after stop 20's runtime.layer_ops, other users' code
RUNS_R75 = [
    ("llama_L8_h2048_b2_s2048", lambda L, h, nh, v, s: UserLlama(L, h, nh, v, s, kv=4, ffn=5632), 8, 2048, 16, 32000,
     2048, 2, False),
    ("llama_L16_h1024_b4", lambda L, h, nh, v, s: UserLlama(L, h, nh, v, s, kv=4, ffn=2816), 16, 1024, 16, 32000, 1024,
     4, False),
    ("nanogpt_qkv_drop_L12_h1024_b4", NanoGPTQKV, 12, 1024, 16, 50304, 1024, 4, False),
    ("encoder_post_L6_h1536_b4", EncoderPostNorm, 6, 1536, 12, 32000, 1024, 4, False),
]  # fmt: skip
SETS = {"r74": RUNS, "r75": RUNS_R75}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--set", choices=list(SETS), default="r74")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    os.makedirs(args.outdir, exist_ok=True)
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    meta: dict = {"env": env_info(dev), "runs": {}}
    t0 = time.time()
    for name, cls, layers, h, heads, vocab, seq, mb, comp in SETS[args.set]:
        if time.time() - t0 > args.budget:
            log("budget reached")
            break
        if args.smoke:
            layers, h, heads, vocab, seq, mb = 2, 64, 4, 512, 64, 2
        torch.manual_seed(0)
        model = cls(layers, h, heads, vocab, seq).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=dev.type == "cuda")
        fwd = torch.compile(model) if comp and not args.smoke else model
        x = torch.randint(0, vocab, (mb, seq), device=dev)
        y = torch.randint(0, vocab, (mb, seq), device=dev)
        ac = torch.autocast(dev.type, dtype=torch.bfloat16)

        def step(fwd=fwd, opt=opt, x=x, y=y, ac=ac) -> None:
            with ac:
                loss = fwd(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        t1 = time.time()
        for _ in range(3 if not comp else 5):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ev[0].record()
            for _ in range(5):
                step()
            ev[1].record()
            ev[1].synchronize()
            step_s = ev[0].elapsed_time(ev[1]) / 5e3
        else:
            step_s = math.nan
        path = os.path.join(args.outdir, f"user_{name}.json.gz")
        profile(step, 4, acts, path)
        n_params = sum(q.numel() for q in model.parameters())
        meta["runs"][name] = {
            "model": type(model).__name__, "layers": layers, "hidden": h, "heads": heads, "vocab": vocab, "seq": seq,
            "micro_batch": mb, "compiled": comp, "params": n_params, "unprofiled_step_s": step_s,
            "peak_mem_bytes": torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0,
        }  # fmt: skip
        log(f"{name}: {n_params / 1e6:.0f}M params, {step_s * 1e3:.2f} ms a step unprofiled ({time.time() - t1:.1f} s)")
        del model, opt, fwd, step, x, y
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    with open(os.path.join(args.outdir, f"{args.set}_runs.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
