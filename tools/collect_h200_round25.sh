#!/usr/bin/env bash
# Round 25 (device tool, kind nvidia-h200): whole profiled training and inference steps for the host
# time outside the layers and for unsynchronized steps (tools/bench_host_steps.py; see its docstring).
# Writes $OUT/round25.tar: the traces (r25_*.json.gz), r25_points.json, host_steps.log, env_round25.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round25}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round25.txt" 2>&1
timeout 60 $PY tools/bench_host_steps.py --smoke --passes 1 --outdir /tmp/r25_smoke > "$OUT/smoke.log" 2>&1
echo "smoke rc=$?"; tail -3 "$OUT/smoke.log"
timeout 420 $PY tools/bench_host_steps.py --passes 2 --budget 380 --outdir "$OUT/r25" > "$OUT/host_steps.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget" "$OUT/host_steps.log" | tail -20
(cd "$OUT" && mv r25/* . && rmdir r25 && tar cf round25.tar --remove-files $(ls | grep -v round25.tar))
ls -la "$OUT"
