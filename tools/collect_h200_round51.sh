#!/usr/bin/env bash
# Round 51 (device tool, kind nvidia-h200): transformers Mixtral layers at round 32's fit configs, twice
# (tools/bench_hf.py --set moe_fit): the host of an MoE layer. Writes $OUT/round51.tar (traces, log, runs).
exec "$(dirname "$0")/collect_h200_hf.sh" 51 moe_fit
