#!/usr/bin/env bash
# Round 23 (device tool, kind nvidia-h200): what sets the host time per layer of a real profiled
# training step (tools/bench_host_pace.py: GPT-2-small shape at micro-batch 1 / 2 / 8, vocab 50304 or
# 512, synchronize before backward or not, with or without the optimizer; profiled and unprofiled).
# Writes $OUT/round23.tar: host_pace.csv.gz, host_pace.log, env_round23.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round23}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round23.txt" 2>&1
timeout 300 $PY tools/bench_host_pace.py $SM --passes 3 --budget 240 --out "$OUT/host_pace.csv" > "$OUT/host_pace.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/host_pace.csv"
grep -E "pass|ERROR|Traceback|Error|done" "$OUT/host_pace.log" | tail -40
(cd "$OUT" && tar cf round23.tar --remove-files $(ls | grep -v round23.tar))
