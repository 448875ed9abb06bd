#!/usr/bin/env bash
# Round 33 (device tool, kind nvidia-h200): Hugging Face transformers traces, diagnostic: decode host vs batch and context
# (tools/bench_hf.py --set decode, by tools/collect_h200_hf.sh).
exec "$(dirname "$0")/collect_h200_hf.sh" 33 decode
