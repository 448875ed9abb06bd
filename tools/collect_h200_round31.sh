#!/usr/bin/env bash
# Round 31 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models, held apart
# (tools/bench_hf.py; see its docstring). Writes $OUT/round31.tar: the traces, r31_runs.json, hf.log,
# env_round31.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round31}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round31.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --budget 400 --outdir "$OUT/r31" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv r31/* . && rmdir r31 && tar cf round31.tar --remove-files $(ls | grep -v round31.tar))
ls -la "$OUT"
