#!/usr/bin/env bash
# Round 46 (device tool, kind nvidia-h200): seven held-apart transformers traces of setups no earlier trace
# had (tools/bench_hf.py --set r46: foreach AdamW, SGD, fp16 + GradScaler, gradient checkpointing, Qwen2,
# a trace without shapes but with stacks and memory events). Writes $OUT/round46.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 46 r46
