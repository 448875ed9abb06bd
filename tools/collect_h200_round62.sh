#!/usr/bin/env bash
# Round 62 (device tool, kind nvidia-h200): six held-apart transformers traces after every change of stop 18, three
# of them one unannotated profiled step as users record it (tools/bench_hf.py --set r62). Writes $OUT/round62.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 62 r62
