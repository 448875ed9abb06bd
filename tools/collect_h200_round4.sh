#!/usr/bin/env bash
# Round 4 of the H200 collection (device tool, kind nvidia-h200): per-layer host time with the profiler recording.
# Writes to $OUT (<= 8 files):
#   env_round4.txt           versions, nvidia-smi, clocks
#   host_profiled_run1.csv.gz  tools/bench_host.py --profiled (each point unprofiled, then profiled), first run
#   host_profiled_run1.log   its log
#   host_profiled_run2.csv.gz  the same again, only if time is left
#   host_profiled_run2.log   its log
#   host_profiled.csv.gz     both runs combined (--profiled --merge): min host time per point, derived rows
#                            recomputed; this is the file committed as traces/h200/host_profiled.csv.gz
# Every step runs under `timeout` (whole script < 4 min). SMOKE=1 PY=... runs it on CPU.
set -u
OUT=${OUT:-/tmp/simcore_out_round4}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
T0=$(date +%s)

{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('devices', torch.cuda.device_count())"
  echo "### nproc"; nproc
  echo "### lscpu"; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz"
} > "$OUT/env_round4.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round4.txt"

timeout 110 $PY tools/bench_host.py --profiled $SM --out "$OUT/host_profiled_run1.csv" --budget 95 \
    > "$OUT/host_profiled_run1.log" 2>&1
echo "bench_host --profiled run1 rc=$? ($(( $(date +%s) - T0 )) s)"
gzip -9 -f "$OUT/host_profiled_run1.csv"

LEFT=$(( 215 - ($(date +%s) - T0) ))
if [ "$LEFT" -gt 40 ]; then
  timeout "$LEFT" $PY tools/bench_host.py --profiled $SM --out "$OUT/host_profiled_run2.csv" \
      --budget $(( LEFT - 15 )) > "$OUT/host_profiled_run2.log" 2>&1
  echo "bench_host --profiled run2 rc=$? ($(( $(date +%s) - T0 )) s)"
  gzip -9 -f "$OUT/host_profiled_run2.csv"
fi
# combine the runs: per point the minimum host time over runs, derived rows recomputed
RUNS=$(ls "$OUT"/host_profiled_run[12].csv.gz 2>/dev/null)
timeout 30 $PY tools/bench_host.py --profiled --merge $RUNS --out "$OUT/host_profiled.csv" > /dev/null 2>&1 \
    && gzip -9 -f "$OUT/host_profiled.csv"
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round4.txt" 2>&1
ls -la "$OUT"
echo "=== merged (us)"
$PY - "$OUT/host_profiled.csv.gz" <<'PYEOF'
import csv, gzip, sys
rows = {r["name"]: r for r in csv.DictReader(gzip.open(sys.argv[1], "rt"))}
for n, r in rows.items():
    if r["framework"] == "derived" and not n.startswith("profiler_extra") and not n.startswith("profiled_"):
        p = rows.get("profiled_" + n)
        a, b = float(r["host_s_per_call"]) * 1e6, float(p["host_s_per_call"]) * 1e6 if p else float("nan")
        print(f"{n:52s} {a:9.1f} {b:9.1f}  x{b / a:.2f}")
PYEOF
