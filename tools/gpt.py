"""A self-contained GPT decoder in plain PyTorch, shared by bench_steps.py and bench_parallel.py.

Architecture (documented in traces/README.md):
  token embedding -> N x [pre-norm block] -> final norm -> LM head (untied unless cfg.tied)
  block:  x = x + proj(SDPA(split(qkv(norm1(x)))))      (fused q,k,v Linear; SDPA, causal)
          x = x + mlp(norm2(x))
  mlp:    gelu:   fc2(gelu(fc1(x)))                      fc1: h -> ffn, fc2: ffn -> h
          swiglu: w2(silu(a) * b), [a, b] = w13(x)        (gate/up fused in one Linear when
                                                          swiglu_fused, else two Linears)
  all Linears bias=False; LayerNorm bias=False; RMSNorm via F.rms_norm (eps 1e-5).
  No positional encoding (no RoPE, no learned positions): keeps the kernel list to the GEMM /
  attention / norm / activation / embedding / loss kernels that simcore models.
  GQA: kv_heads < heads, SDPA(enable_gqa=True) when the torch version supports it with the flash
  backend, otherwise k,v are expanded with repeat_interleave (recorded in the configs JSON).

Tensor parallel (Megatron-style) when tp_group is given: qkv and fc1/w13 are column-parallel
(heads and ffn split), proj and fc2/w2 row-parallel followed by an all_reduce in forward
(identity in backward); the input of each column-parallel Linear goes through an identity whose
backward all_reduces. Embedding, norms and LM head are replicated.

KV cache (inference): per layer a preallocated pair (k, v), each [batch, kv_heads, max_ctx, head_dim].
forward(idx, kv_caches=..., pos=P) writes the new k,v at [P, P+T) and attends over [0, P+T)
(causal when T > 1, i.e. prefill from P=0; a single query attends to the whole prefix).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except Exception:  # pragma: no cover - very old torch
    SDPBackend = None
    sdpa_kernel = None

# Set by probe_sdpa(); "native" = enable_gqa flag, "repeat" = repeat_interleave expansion.
SDPA_STATE = {"gqa_mode": "native", "force_flash": True, "probed": False}


@dataclass
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: Optional[int] = None
    ffn_hidden: Optional[int] = None
    vocab: int = 50304
    seq_len: int = 2048
    activation: str = "gelu"  # gelu | swiglu
    norm: str = "layernorm"  # layernorm | rmsnorm
    tied: bool = False
    recompute: str = "none"  # none | full | selective
    swiglu_fused: bool = True

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            self.kv_heads = self.heads
        if self.ffn_hidden is None:
            if self.activation == "swiglu":
                f = int(8 * self.hidden / 3)
                self.ffn_hidden = 256 * ((f + 255) // 256)
            else:
                self.ffn_hidden = 4 * self.hidden
        assert self.hidden % self.heads == 0
        assert self.heads % self.kv_heads == 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def asdict(self) -> dict:
        return dataclasses.asdict(self)

    def param_count(self) -> int:
        h, d, f, V = self.hidden, self.head_dim, self.ffn_hidden, self.vocab
        norm_p = h  # bias-free norms: one weight vector
        attn = h * (self.heads * d + 2 * self.kv_heads * d) + self.heads * d * h
        mlp = (3 if self.activation == "swiglu" else 2) * h * f
        per_layer = attn + mlp + 2 * norm_p
        total = self.layers * per_layer + V * h + norm_p
        if not self.tied:
            total += V * h
        return total


def probe_sdpa(device: torch.device) -> dict:
    """Find out whether SDPA's flash backend accepts enable_gqa on this torch/device."""
    if SDPA_STATE["probed"]:
        return SDPA_STATE
    SDPA_STATE["probed"] = True
    # SIMCORE_SDPA=default leaves the backend to PyTorch (cuDNN on an H200 with torch 2.11; round 40)
    SDPA_STATE["force_flash"] = (
        device.type == "cuda" and sdpa_kernel is not None and os.environ.get("SIMCORE_SDPA") != "default"
    )
    dt = torch.bfloat16
    q = torch.randn(1, 4, 16, 64, device=device, dtype=dt)
    k = torch.randn(1, 2, 16, 64, device=device, dtype=dt)
    try:
        with sdpa_ctx():
            F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        SDPA_STATE["gqa_mode"] = "native"
    except Exception as e:  # noqa: BLE001
        SDPA_STATE["gqa_mode"] = "repeat"
        SDPA_STATE["gqa_error"] = repr(e)[:300]
    return SDPA_STATE


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def sdpa_ctx():
    if SDPA_STATE["force_flash"] and sdpa_kernel is not None:
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return _Null()


def sdpa(q, k, v, causal: bool):
    gqa = k.shape[1] != q.shape[1]
    with sdpa_ctx():
        if gqa and SDPA_STATE["gqa_mode"] == "native":
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        if gqa:
            rep = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# ---------------------------------------------------------------- tensor-parallel autograd helpers
class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, g):
        import torch.distributed as dist

        g = g.contiguous()
        dist.all_reduce(g, group=ctx.group)
        return g, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        import torch.distributed as dist

        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


def _norm(cfg: GPTConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.hidden)
    try:
        return nn.LayerNorm(cfg.hidden, bias=False)
    except TypeError:  # torch < 2.1
        return nn.LayerNorm(cfg.hidden)


class RMSNorm(nn.Module):
    def __init__(self, h: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig, tp: int = 1, tp_group=None):
        super().__init__()
        self.cfg = cfg
        self.tp_group = tp_group
        self.d = cfg.head_dim
        self.hl = cfg.heads // tp
        self.kvl = max(1, cfg.kv_heads // tp)
        self.qkv = nn.Linear(cfg.hidden, (self.hl + 2 * self.kvl) * self.d, bias=False)
        self.proj = nn.Linear(self.hl * self.d, cfg.hidden, bias=False)

    def forward(self, x, cache=None, pos: int = 0):
        B, T, _ = x.shape
        if self.tp_group is not None:
            x = _CopyToTP.apply(x, self.tp_group)
        qkv = self.qkv(x)
        q, k, v = qkv.split([self.hl * self.d, self.kvl * self.d, self.kvl * self.d], dim=-1)
        q = q.view(B, T, self.hl, self.d).transpose(1, 2)
        k = k.view(B, T, self.kvl, self.d).transpose(1, 2)
        v = v.view(B, T, self.kvl, self.d).transpose(1, 2)
        if cache is not None:
            kc, vc = cache
            kc[:, :, pos : pos + T] = k
            vc[:, :, pos : pos + T] = v
            if pos > 0:  # attend over the cached prefix (decode, or chunked prefill)
                k = kc[:, :, : pos + T]
                v = vc[:, :, : pos + T]
        causal = T > 1
        if self.cfg.recompute == "selective" and torch.is_grad_enabled() and self.training:
            y = checkpoint(sdpa, q, k, v, causal, use_reentrant=False)
        else:
            y = sdpa(q, k, v, causal)
        y = y.transpose(1, 2).reshape(B, T, self.hl * self.d)
        y = self.proj(y)
        if self.tp_group is not None:
            y = _ReduceFromTP.apply(y, self.tp_group)
        return y


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig, tp: int = 1, tp_group=None):
        super().__init__()
        self.cfg = cfg
        self.tp_group = tp_group
        f = cfg.ffn_hidden // tp
        self.f = f
        if cfg.activation == "swiglu":
            if cfg.swiglu_fused:
                self.w13 = nn.Linear(cfg.hidden, 2 * f, bias=False)
            else:
                self.w1 = nn.Linear(cfg.hidden, f, bias=False)
                self.w3 = nn.Linear(cfg.hidden, f, bias=False)
            self.w2 = nn.Linear(f, cfg.hidden, bias=False)
        else:
            self.fc1 = nn.Linear(cfg.hidden, f, bias=False)
            self.fc2 = nn.Linear(f, cfg.hidden, bias=False)

    def forward(self, x):
        if self.tp_group is not None:
            x = _CopyToTP.apply(x, self.tp_group)
        if self.cfg.activation == "swiglu":
            if self.cfg.swiglu_fused:
                a, b = self.w13(x).chunk(2, dim=-1)
            else:
                a, b = self.w1(x), self.w3(x)
            y = self.w2(F.silu(a) * b)
        else:
            y = self.fc2(F.gelu(self.fc1(x)))
        if self.tp_group is not None:
            y = _ReduceFromTP.apply(y, self.tp_group)
        return y


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, tp: int = 1, tp_group=None):
        super().__init__()
        self.norm1 = _norm(cfg)
        self.attn = Attention(cfg, tp, tp_group)
        self.norm2 = _norm(cfg)
        self.mlp = MLP(cfg, tp, tp_group)

    def forward(self, x, cache=None, pos: int = 0):
        x = x + self.attn(self.norm1(x), cache, pos)
        x = x + self.mlp(self.norm2(x))
        return x


class GPT(nn.Module):
    """pre=True: has the embedding; post=True: has final norm + head (+loss). For pipeline stages."""

    def __init__(self, cfg: GPTConfig, n_layers: Optional[int] = None, pre: bool = True,
                 post: bool = True, tp: int = 1, tp_group=None):
        super().__init__()
        self.cfg = cfg
        self.pre, self.post = pre, post
        n = cfg.layers if n_layers is None else n_layers
        if pre or (post and cfg.tied):
            self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.blocks = nn.ModuleList([Block(cfg, tp, tp_group) for _ in range(n)])
        if post:
            self.norm = _norm(cfg)
            if not cfg.tied:
                self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x, targets=None, kv_caches=None, pos: int = 0, last_only: bool = False):
        h = self.embed(x) if self.pre else x
        full = self.cfg.recompute == "full" and self.training and torch.is_grad_enabled()
        for i, blk in enumerate(self.blocks):
            if full:
                h = checkpoint(blk, h, use_reentrant=False)
            else:
                h = blk(h, None if kv_caches is None else kv_caches[i], pos)
        if not self.post:
            return h
        h = self.norm(h)
        if last_only:
            h = h[:, -1:, :]
        w = self.embed.weight if self.cfg.tied else self.head.weight
        logits = F.linear(h, w)
        if targets is None:
            return logits
        # fp32 logits for the loss (as Megatron / most recipes do)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def make_kv_caches(cfg: GPTConfig, batch: int, max_ctx: int, device, dtype=torch.bfloat16, n_layers=None):
    n = cfg.layers if n_layers is None else n_layers
    shape = (batch, cfg.kv_heads, max_ctx, cfg.head_dim)
    return [(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))
            for _ in range(n)]
