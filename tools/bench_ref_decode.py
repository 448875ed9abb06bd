"""Round 77: one profiled prefill + decode trace of ``tools/gpt.py``'s GPT block (LayerNorm, GELU), the code
the eager decode host entries of GPT blocks were measured on (round 25's fit traces are not committed): the ops
its decode layers issue (``host_trace.decode_layer_op_count``), beside the Llama block's in
``traces/h200/profile_infer_prefill_decode.json.gz``. 4 layers of h 768, bf16 weights, batch 4, prompt 512,
8 decode steps per profiled step, ``schedule(wait=1, warmup=1, active=2)``.

  python tools/bench_ref_decode.py --out profile_infer_gpt_gelu_decode.json.gz [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import log, save_trace  # noqa: E402
from gpt import GPT, GPTConfig, make_kv_caches  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    h = 64 if args.smoke else 768
    cfg = GPTConfig(layers=4, hidden=h, heads=4 if args.smoke else 12, vocab=512 if args.smoke else 50304,
                    activation="gelu", norm="layernorm", tied=True)  # fmt: skip
    b, P, D = (2, 32, 4) if args.smoke else (4, 512, 8)
    torch.manual_seed(0)
    with torch.device(dev):
        model = GPT(cfg)
    model.to(torch.bfloat16).eval()
    caches = make_kv_caches(cfg, b, P + D, dev)
    x = torch.randint(0, cfg.vocab, (b, P), device=dev)
    with torch.no_grad(), profile(activities=acts, record_shapes=True,
                                  schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:  # fmt: skip
        for _ in range(4):
            tok = model(x, kv_caches=caches, pos=0, last_only=True).argmax(-1)
            for i in range(D):
                tok = model(tok, kv_caches=caches, pos=P + i, last_only=True).argmax(-1)
            prof.step()
    save_trace(prof, args.out)
    log("wrote", args.out)


if __name__ == "__main__":
    main()
