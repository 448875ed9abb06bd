#!/usr/bin/env bash
# Round 34 (device tool, kind nvidia-h200): Hugging Face transformers traces, held apart: model.generate() loops
# (tools/bench_hf.py --set generate, by tools/collect_h200_hf.sh).
exec "$(dirname "$0")/collect_h200_hf.sh" 34 generate
