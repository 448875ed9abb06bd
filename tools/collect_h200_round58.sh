#!/usr/bin/env bash
# Round 58 (device tool, kind nvidia-h200): round 32's transformers training fit runs with bf16 weights and no
# autocast (tools/bench_hf.py --set fit_bf16). Writes $OUT/round58.tar (traces, log, runs).
exec "$(dirname "$0")/collect_h200_hf.sh" 58 fit_bf16
