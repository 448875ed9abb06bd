#!/usr/bin/env bash
# Round 3 of the H200 collection (device tool, kind nvidia-h200): inference host overheads.
# Writes to $OUT (<= 8 files):
#   env_round3.txt         versions, nvidia-smi, clocks
#   host_infer.csv.gz      tools/bench_host.py --infer (decode / prefill / CUDA-graph replay per layer,
#                          fixed part, kernels per layer), first run
#   host_infer.log         its log
#   host_infer_rep.csv.gz  the same again (run-to-run check), only if time is left
#   host_infer_rep.log     its log
#   host_infer_merged.csv.gz  both runs combined (--merge): min host time per point, derived rows recomputed;
#                          this is the file committed as traces/h200/host_infer.csv.gz
# Every step runs under `timeout` (whole script < 4 min). SMOKE=1 PY=... runs it on CPU.
set -u
OUT=${OUT:-/tmp/simcore_out_round3}
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
} > "$OUT/env_round3.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round3.txt"

timeout 130 $PY tools/bench_host.py --infer $SM --out "$OUT/host_infer.csv" --budget 110 \
    > "$OUT/host_infer.log" 2>&1
echo "bench_host --infer rc=$? ($(( $(date +%s) - T0 )) s)"
gzip -9 -f "$OUT/host_infer.csv"

LEFT=$(( 200 - ($(date +%s) - T0) ))
if [ "$LEFT" -gt 40 ]; then
  timeout "$LEFT" $PY tools/bench_host.py --infer $SM --out "$OUT/host_infer_rep.csv" --budget $(( LEFT - 15 )) \
      > "$OUT/host_infer_rep.log" 2>&1
  echo "repeat rc=$? ($(( $(date +%s) - T0 )) s)"
  gzip -9 -f "$OUT/host_infer_rep.csv"
fi
# combine the runs: per point the minimum host time over runs, derived rows recomputed (tools/bench_host.py --merge)
if [ -f "$OUT/host_infer_rep.csv.gz" ]; then
  $PY tools/bench_host.py --merge "$OUT/host_infer.csv.gz" "$OUT/host_infer_rep.csv.gz" \
      --out "$OUT/host_infer_merged.csv" > /dev/null 2>&1 && gzip -9 -f "$OUT/host_infer_merged.csv"
fi
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round3.txt" 2>&1
ls -la "$OUT"
echo "=== host_infer.log"; grep -vE "^(W|USDT|\[W)" "$OUT/host_infer.log" | cut -c10-130
