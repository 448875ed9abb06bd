#!/usr/bin/env bash
# Round 20 (device tool, kind nvidia-h200): board power of HBM-streaming memory-bound kernels
# (tools/bench_mem_power.py) with a timestamped dmon. Writes to $OUT (committed under traces/h200/kernel_rates/): mem_power.log, mem_power.dmon.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round20}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
nvidia-smi dmon -o T -s pucm -d 1 > "$OUT/mem_power.dmon.txt" 2>&1 &
DMON=$!
sleep 2
timeout 200 $PY tools/bench_mem_power.py --seconds 6 > "$OUT/mem_power.log" 2>&1
echo "rc=$?"
sleep 1
kill $DMON 2>/dev/null
grep -E "START|END" "$OUT/mem_power.log"
