#!/usr/bin/env bash
# Round 69 (device tool, kind nvidia-h200): six held-apart GEMM-heavy transformers traces after stop 19's changes
# (tools/bench_hf.py --set r69). Writes $OUT/round69.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 69 r69
