#!/usr/bin/env bash
# Round 63 (device tool, kind nvidia-h200): six held-apart transformers traces after the review mends of stop 18, each
# one unannotated profiled step as users record it (tools/bench_hf.py --set r63). Writes $OUT/round63.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 63 r63
