#!/usr/bin/env bash
# Round 37 (device tool, kind nvidia-h200): the host of transformers layers against the tokens per step
# (tools/bench_hf.py --set tokens). Writes $OUT/round37.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 37 tokens
