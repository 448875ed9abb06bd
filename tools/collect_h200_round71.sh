#!/usr/bin/env bash
# Round 71 (device tool, kind nvidia-h200): six held-apart transformers traces at full-size layer widths (stop 20;
# tools/bench_hf.py --set r71). Writes $OUT/round71.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 71 r71
