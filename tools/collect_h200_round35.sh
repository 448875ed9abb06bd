#!/usr/bin/env bash
# Round 35 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models, fitted: model.generate() per-token host
# (tools/bench_hf.py; see its docstring). Writes $OUT/round35.tar: the traces, r35_runs.json, hf.log,
# env_round35.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round35}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round35.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --set generate_fit --budget 400 --outdir "$OUT/r35" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv r35/* . && rmdir r35 && tar cf round35.tar --remove-files $(ls | grep -v round35.tar))
ls -la "$OUT"
