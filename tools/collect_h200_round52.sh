#!/usr/bin/env bash
# Round 52 (device tool, kind nvidia-h200): five held-apart transformers traces (tools/bench_hf.py --set r52:
# eager attention, Phi-3, seq 8192, batch-32 decode, GPT-2 at 16 x 512). Writes $OUT/round52.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 52 r52
