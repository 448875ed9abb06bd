"""GEMMs on a real model's tensors vs random ones (round 18c).

Builds the Llama-1B-shaped model of bench_steps (tools/gpt.py), runs one training forward under
autocast, captures the input of layer 0's fused gate/up projection (w13) and its bf16 weight, and
times that GEMM back to back (CUDA events over 30 calls after 0.3 s of warm-up) on: the captured
tensors; random normal tensors of the same shapes and strides; the captured activation with a
random weight; and the same after 5 AdamW steps (lr 1e-4). Separates data-dependent power from
everything else.

  python tools/bench_gemm_real.py --out gemm_real.csv
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import CsvOut, log, measure, run_for  # noqa: E402
from gpt import GPT, GPTConfig  # noqa: E402


def timed(a, b, dev):
    """Seconds per back-to-back GEMM over 30 calls, after 0.3 s of the same GEMM."""
    run_for(lambda: torch.mm(a, b), 0.3, dev)
    return measure(lambda: torch.mm(a, b), 30, dev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = CsvOut(args.out, ["variant", "m", "n", "k", "time_s", "a_std", "b_std", "a_zero_frac"])
    cfg = GPTConfig(layers=2, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, vocab=32000,
                    activation="swiglu", norm="rmsnorm")
    cfg.seq_len = 2048
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, cfg.vocab, (4, 2048), device=dev)
    ac = torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    captured = {}
    lin = model.blocks[0].mlp.w13 if hasattr(model, "blocks") else None
    if lin is None:
        for mod in model.modules():
            if hasattr(mod, "w13"):
                lin = mod.w13
                break

    def hook(mod, inp):
        captured["x"] = inp[0].detach().reshape(-1, inp[0].shape[-1]).to(torch.bfloat16).contiguous()

    h = lin.register_forward_pre_hook(hook)
    for step in range(6):
        with ac:
            loss = model(x, x)
        if step in (0, 5):
            a = captured["x"]
            w = lin.weight.detach().to(torch.bfloat16)  # [2f, h]
            b = w.t()  # strides (1, h), as in the trace
            ra = torch.randn_like(a)
            rb = torch.randn(w.shape, device=dev, dtype=torch.bfloat16).t()
            for name, aa, bb in ((f"real_step{step}", a, b), ("randn", ra, rb), (f"real_x_randn_w_step{step}", a, rb),
                                 (f"randn_x_real_w_step{step}", ra, b)):
                t = timed(aa, bb, dev)
                out.row(variant=name, m=aa.shape[0], n=bb.shape[1], k=aa.shape[1], time_s=t,
                        a_std=float(aa.float().std()), b_std=float(bb.float().std()),
                        a_zero_frac=float((aa == 0).float().mean()))
                log(f"{name}: {t * 1e6:.1f} us (a std {float(aa.float().std()):.3g}, b std {float(bb.float().std()):.3g})")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    h.remove()
    out.close()


if __name__ == "__main__":
    main()
