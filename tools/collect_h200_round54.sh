#!/usr/bin/env bash
# Round 54 (device tool, kind nvidia-h200): round 32's transformers training fit runs under the profiler's other
# option sets (tools/bench_hf.py --set prof_fit). Writes $OUT/round54.tar (traces, log, runs).
exec "$(dirname "$0")/collect_h200_hf.sh" 54 prof_fit
