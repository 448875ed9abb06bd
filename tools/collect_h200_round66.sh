#!/usr/bin/env bash
# Round 66 (device tool, kind nvidia-h200): six held-apart transformers traces after round 65's norms (stop 19), shapes no
# earlier run had (tools/bench_hf.py --set r66). Writes $OUT/round66.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 66 r66
