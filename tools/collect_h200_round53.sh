#!/usr/bin/env bash
# Round 53 (device tool, kind nvidia-h200): five held-apart transformers traces collected after every change of
# stop 17 (tools/bench_hf.py --set r53). Writes $OUT/round53.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 53 r53
