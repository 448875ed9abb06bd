#!/usr/bin/env bash
# Round 17 (device tool, kind nvidia-h200): kernels in their in-step form (tools/bench_insitu.py):
# GEMM time vs the share of the stream spent in GEMMs (the power-capped clock), SwiGLU parts on
# strided vs contiguous tensors, cold vs warm weight casts, norms forward/backward; with an
# nvidia-smi dmon sidecar. Writes to $OUT (committed under traces/h200/kernel_rates/): insitu.csv.gz, insitu.log, insitu.dmon.txt, env_round17.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round17}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; nvidia-smi -q -d CLOCK,POWER | head -60; } > "$OUT/env_round17.txt" 2>&1
nvidia-smi dmon -s pucm -d 1 > "$OUT/insitu.dmon.txt" 2>&1 &
DMON=$!
timeout 300 $PY tools/bench_insitu.py --out "$OUT/insitu.csv" > "$OUT/insitu.log" 2>&1
echo "rc=$?"
kill $DMON 2>/dev/null
gzip -9 -f "$OUT/insitu.csv"
grep -vE "^\s*$" "$OUT/insitu.log" | tail -45
