#!/usr/bin/env bash
# Round 70 (device tool, kind nvidia-h200): round 32's transformers training fit runs under torch.compile
# (tools/bench_hf.py --set compiled_fit). Writes $OUT/round70.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 70 compiled_fit
