#!/usr/bin/env bash
# Round 73 (device tool, kind nvidia-h200): six held-apart transformers traces after stop 20's changes
# (tools/bench_hf.py --set r73). Writes $OUT/round73.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 73 r73
