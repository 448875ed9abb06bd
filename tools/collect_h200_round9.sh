#!/usr/bin/env bash
# Round 9 (device tool, kind nvidia-h200): eager host time per layer vs layer width, in one process,
# interleaved (tools/bench_host_size.py); RUNS independent processes, the last two pinned to one CPU
# each with taskset. Writes $OUT/host_size.csv.gz (all runs), host_size.log, env_round9.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round9}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
RUNS=${RUNS:-5}
BUDGET=${BUDGET:-40}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ echo "### date"; date -u; nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE; nproc; lscpu | grep -E "Model name|^CPU\(s\)|MHz"
  $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/env_round9.txt" 2>&1
: > "$OUT/host_size.log"
for k in $(seq 1 "$RUNS"); do
  PIN=""
  if [ "$k" -eq $((RUNS - 1)) ]; then PIN=3; fi
  if [ "$k" -eq "$RUNS" ]; then PIN=11; fi
  echo "### run $k pinned=${PIN:-none}" >> "$OUT/host_size.log"
  if [ -n "$PIN" ]; then
    timeout $((BUDGET + 60)) taskset -c "$PIN" $PY tools/bench_host_size.py $SM --run "$k" --pinned "$PIN" \
        --budget "$BUDGET" --out "$OUT/host_size_run$k.csv" >> "$OUT/host_size.log" 2>&1
  else
    timeout $((BUDGET + 60)) $PY tools/bench_host_size.py $SM --run "$k" --budget "$BUDGET" \
        --out "$OUT/host_size_run$k.csv" >> "$OUT/host_size.log" 2>&1
  fi
  echo "run $k rc=$?"
done
{ head -1 "$OUT/host_size_run1.csv"; for f in "$OUT"/host_size_run*.csv; do tail -n +2 "$f"; done; } > "$OUT/host_size.csv"
rm -f "$OUT"/host_size_run*.csv
gzip -9 -f "$OUT/host_size.csv"
grep -E "ERROR|Traceback|Error" "$OUT/host_size.log" | head
tail -3 "$OUT/host_size.log"; ls -la "$OUT"
