#!/usr/bin/env bash
# Round 67 (device tool, kind nvidia-h200): board power and clock of GEMM streams of each dtype (bf16, fp16, fp32 FFMA,
# tf32; tools/bench_mem_power.py --set gemm_dtypes) with a timestamped dmon, as round 20 did for memory-bound kernels.
# Writes to $OUT: gemm_power.log, gemm_power.dmon.txt (committed under traces/h200/kernel_rates/).
set -u
OUT=${OUT:-/tmp/simcore_out_round67}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
nvidia-smi dmon -o T -s pucm -d 1 > "$OUT/gemm_power.dmon.txt" 2>&1 &
DMON=$!
sleep 2
timeout 200 $PY tools/bench_mem_power.py --set gemm_dtypes --seconds 6 > "$OUT/gemm_power.log" 2>&1
echo "rc=$?"
sleep 1
kill $DMON 2>/dev/null
grep -E "START|END" "$OUT/gemm_power.log"
