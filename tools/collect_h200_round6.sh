#!/usr/bin/env bash
# Round 6 of the H200 collection (device tool, kind nvidia-h200): inference host overheads, median of N runs.
# tools/bench_host.py --infer run N (default 7) times back to back, each in its own process (independent
# samples), then tools/merge_host_median.py: per run its own per-layer slopes (1->4, 1->8) and intercepts,
# committed value = median over runs, IQR in the notes.
# Writes to $OUT (<= 8 files):
#   env_round6.txt          versions, nvidia-smi, clocks before / after
#   host_infer_runs.tar.gz  the N raw CSVs (host_infer_run<k>.csv) and their logs
#   host_infer_r6.csv.gz    the median merge (committed as traces/h200/host_infer_r6.csv.gz), rewritten after
#                           every run so a stop at the limit still leaves the runs so far
#   merge_r6.txt            the merge's summary table
# Every step runs under `timeout`; runs stop being started once fewer than RUN_S s are left of TOTAL_S
# (defaults 215 s / 32 s). SMOKE=1 PY=... runs it on CPU.
set -u
OUT=${OUT:-/tmp/simcore_out_round6}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
N=${N:-7}
TOTAL_S=${TOTAL_S:-215}
RUN_S=${RUN_S:-32}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
T0=$(date +%s)
RAW=$(mktemp -d)

{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('devices', torch.cuda.device_count())"
  echo "### nproc"; nproc
  echo "### lscpu"; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz"
} > "$OUT/env_round6.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round6.txt"

for k in $(seq 1 "$N"); do
  LEFT=$(( TOTAL_S - ($(date +%s) - T0) ))
  if [ "$LEFT" -lt "$RUN_S" ]; then echo "stop before run $k: ${LEFT} s left"; break; fi
  LIM=$(( LEFT < 60 ? LEFT : 60 ))
  timeout "$LIM" $PY tools/bench_host.py --infer $SM --out "$RAW/host_infer_run$k.csv" --budget $(( LIM - 8 )) \
      > "$RAW/host_infer_run$k.log" 2>&1
  echo "run $k rc=$? ($(( $(date +%s) - T0 )) s)"
  $PY tools/merge_host_median.py "$RAW"/host_infer_run*.csv --out "$OUT/host_infer_r6.csv.gz" > "$OUT/merge_r6.txt" 2>&1
  tar -czf "$OUT/host_infer_runs.tar.gz" -C "$RAW" .
done
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round6.txt" 2>&1
ls -la "$OUT"
cat "$OUT/merge_r6.txt"
