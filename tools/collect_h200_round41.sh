#!/usr/bin/env bash
# Round 41 (device tool, kind nvidia-h200): held-apart profiler traces of full-size models of tools/gpt.py
# with PyTorch's default attention backend (cuDNN on the H200): GPT-350M and Llama-1B with selective
# recompute at seq 4096, eager and torch.compile, and Llama-1B prefill (4 x 2048) + 8 decode steps.
# Recipe of round 16/22 (tools/bench_steps.py profiles). Writes $OUT/round41.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round41}
mkdir -p "$OUT/r41"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
SIMCORE_SDPA=default timeout 400 $PY tools/bench_steps.py --compile --only profiles --budget 360 \
    --out "$OUT/r41/steps_unused.csv" --profile-names gpt-350m,llama-1b-sel --profile-infer llama-1b-infer:4:2048 \
    --profile-dir "$OUT/r41" --configs-json "$OUT/r41/profiles_configs.json" > "$OUT/r41/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|trace |done" "$OUT/r41/steps.log" | tail -10
rm -f "$OUT/r41/steps_unused.csv"
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$OUT/r41/env_round41.txt" 2>&1
(cd "$OUT" && tar cf round41.tar -C r41 . && rm -rf r41)
ls -la "$OUT"
