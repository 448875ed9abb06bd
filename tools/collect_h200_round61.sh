#!/usr/bin/env bash
# Round 61 (device tool, kind nvidia-h200): round 32's transformers fit runs with eager attention, twice
# (tools/bench_hf.py --set eager_fit): the host of eager-attention layers. Writes $OUT/round61.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 61 eager_fit
