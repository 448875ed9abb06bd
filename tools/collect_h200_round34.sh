#!/usr/bin/env bash
# Round 34 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models, held apart: model.generate() loops
# (tools/bench_hf.py; see its docstring). Writes $OUT/round34.tar: the traces, r34_runs.json, hf.log,
# env_round34.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round34}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round34.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --set generate --budget 400 --outdir "$OUT/r34" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv r34/* . && rmdir r34 && tar cf round34.tar --remove-files $(ls | grep -v round34.tar))
ls -la "$OUT"
