#!/usr/bin/env bash
# Round 32 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models, fitted (the host per layer of Hugging Face layers)
# (tools/bench_hf.py; see its docstring). Writes $OUT/round32.tar: the traces, r32_runs.json, hf.log,
# env_round32.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round32}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round32.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --set fit --budget 400 --outdir "$OUT/r32" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv r32/* . && rmdir r32 && tar cf round32.tar --remove-files $(ls | grep -v round32.tar))
ls -la "$OUT"
