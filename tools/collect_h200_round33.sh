#!/usr/bin/env bash
# Round 33 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models, diagnostic: decode host vs batch and context
# (tools/bench_hf.py; see its docstring). Writes $OUT/round33.tar: the traces, r33_runs.json, hf.log,
# env_round33.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round33}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round33.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --set decode --budget 400 --outdir "$OUT/r33" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv r33/* . && rmdir r33 && tar cf round33.tar --remove-files $(ls | grep -v round33.tar))
ls -la "$OUT"
