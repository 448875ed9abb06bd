#!/usr/bin/env bash
# Round 35 (device tool, kind nvidia-h200): Hugging Face transformers traces, fitted: model.generate() per-token host
# (tools/bench_hf.py --set generate_fit, by tools/collect_h200_hf.sh).
exec "$(dirname "$0")/collect_h200_hf.sh" 35 generate_fit
