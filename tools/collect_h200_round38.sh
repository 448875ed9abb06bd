#!/usr/bin/env bash
# Round 38 (device tool, kind nvidia-h200): five more held-apart transformers traces of common setups
# (tools/bench_hf.py --set r38). Writes $OUT/round38.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 38 r38
