#!/usr/bin/env bash
# Round 50 (device tool, kind nvidia-h200): held-apart transformers Mixtral (MoE) training and inference traces
# (tools/bench_hf.py --set r50). Writes $OUT/round50.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 50 r50
