#!/usr/bin/env bash
# Round 57 (device tool, kind nvidia-h200): five held-apart transformers traces collected after every change of
# stop 17 (tools/bench_hf.py --set r57). Writes $OUT/round57.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 57 r57
