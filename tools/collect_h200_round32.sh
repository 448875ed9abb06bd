#!/usr/bin/env bash
# Round 32 (device tool, kind nvidia-h200): Hugging Face transformers traces, fitted: the host of Hugging Face layers
# (tools/bench_hf.py --set fit, by tools/collect_h200_hf.sh).
exec "$(dirname "$0")/collect_h200_hf.sh" 32 fit
