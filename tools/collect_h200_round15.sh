#!/usr/bin/env bash
# Round 15 (device tool, kind nvidia-h200): one MoE layer, Megatron-style (router, top-k, optional
# device-to-host sync of the expert counts, permutation, grouped GEMMs, un-permutation), forward and
# forward+backward at 1k-32k tokens (tools/bench_moe.py). Writes to $OUT: moe.csv.gz, moe.log,
# moe.dmon.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round15}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
nvidia-smi dmon -s pucm -d 2 > "$OUT/moe.dmon.txt" 2>&1 &
DMON=$!
timeout 420 $PY tools/bench_moe.py --budget 330 --out "$OUT/moe.csv" > "$OUT/moe.log" 2>&1
echo "rc=$?"
kill $DMON 2>/dev/null
gzip -9 -f "$OUT/moe.csv"
grep -E "ERROR|Traceback|done|budget" "$OUT/moe.log" | head -20
tail -40 "$OUT/moe.log"
# profiled layers (round 15b): python3 tools/bench_moe.py --out /dev/null --profile-dir "$OUT" --profile-tokens 8192
