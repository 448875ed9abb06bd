#!/usr/bin/env bash
# Round 56 (device tool, kind nvidia-h200): round 51's transformers Mixtral training fit runs with bf16 weights
# (tools/bench_hf.py --set moe_fit_bf16): the native grouped GEMM's MoE layer host. Writes $OUT/round56.tar.
exec "$(dirname "$0")/collect_h200_hf.sh" 56 moe_fit_bf16
