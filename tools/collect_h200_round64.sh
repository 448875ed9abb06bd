#!/usr/bin/env bash
# Round 64 (device tool, kind nvidia-h200): round 32's Llama training fit runs at hidden 1024, 1536 and 2048, twice
# (tools/bench_hf.py --set width_fit): a transformers layer's host against the model's width. Writes $OUT/round64.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 64 width_fit
