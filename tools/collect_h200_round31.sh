#!/usr/bin/env bash
# Round 31 (device tool, kind nvidia-h200): Hugging Face transformers traces, held apart: GPT-2 and Llama training, compiled and KV-cache decode
# (tools/bench_hf.py --set r31, by tools/collect_h200_hf.sh).
exec "$(dirname "$0")/collect_h200_hf.sh" 31 r31
