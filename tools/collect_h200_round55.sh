#!/usr/bin/env bash
# Round 55 (device tool, kind nvidia-h200): five held-apart transformers traces collected after every change of
# stop 17 and its review (tools/bench_hf.py --set r55). Writes $OUT/round55.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 55 r55
