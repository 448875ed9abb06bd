#!/usr/bin/env bash
# Rounds 31-35 (device tool, kind nvidia-h200): profiler traces of Hugging Face transformers models,
# tools/bench_hf.py --set SET (see its docstring). Writes $OUT/roundN.tar: the traces, rN_runs.json,
# hf.log, env_roundN.txt.   usage: tools/collect_h200_hf.sh ROUND SET
set -u
N=$1
SET=$2
OUT=${OUT:-/tmp/simcore_out_round$N}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round$N.txt" 2>&1
timeout 520 $PY tools/bench_hf.py --set "$SET" --budget 400 --outdir "$OUT/r$N" > "$OUT/hf.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/hf.log" | tail -20
(cd "$OUT" && mv "r$N"/* . && rmdir "r$N" && tar cf "round$N.tar" --remove-files $(ls | grep -v "round$N.tar"))
ls -la "$OUT"
