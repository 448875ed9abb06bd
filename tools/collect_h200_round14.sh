#!/usr/bin/env bash
# Round 14 (device tool, kind nvidia-h200): host time per layer of training steps under torch.compile
# beside eager, with and without the profiler (tools/bench_compiled_host.py; GPU-trivial width 64).
# Writes to $OUT: compiled_host.csv.gz, compiled_host.log.
set -u
OUT=${OUT:-/tmp/simcore_out_round14}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 420 $PY tools/bench_compiled_host.py --passes 5 --budget 300 --out "$OUT/compiled_host.csv" \
    > "$OUT/compiled_host.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/compiled_host.csv"
grep -E "ready|kernels|ERROR|Traceback|done" "$OUT/compiled_host.log" | head -30
