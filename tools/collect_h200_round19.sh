#!/usr/bin/env bash
# Round 19 (device tool, kind nvidia-h200): the non-fp8 GEMM rows of ops.csv.gz re-timed by their
# kernels' durations under the PyTorch profiler (tools/bench_gemm_kernels.py), with a dmon sidecar.
# Writes to $OUT: gemm_kernels.csv.gz, gemm_kernels.log, gemm_kernels.dmon.txt (committed under
# traces/h200/kernel_rates/, the dmon file as gemm_kernels.dmon.log so that no fit reads it as a clock sidecar).
set -u
OUT=${OUT:-/tmp/simcore_out_round19}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
nvidia-smi dmon -s pucm -d 1 > "$OUT/gemm_kernels.dmon.txt" 2>&1 &
DMON=$!
timeout 500 $PY tools/bench_gemm_kernels.py --ops traces/h200/ops.csv.gz --out "$OUT/gemm_kernels.csv" \
    --budget 420 > "$OUT/gemm_kernels.log" 2>&1
echo "rc=$?"
kill $DMON 2>/dev/null
gzip -9 -f "$OUT/gemm_kernels.csv"
grep -E "ERROR|OOM|done|GEMM shapes|budget" "$OUT/gemm_kernels.log" | head -20; tail -5 "$OUT/gemm_kernels.log"
