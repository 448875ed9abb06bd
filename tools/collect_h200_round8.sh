#!/usr/bin/env bash
# Round 8 of the H200 collection (device tool, kind nvidia-h200): decode-regime kernels with cold
# operands (tools/bench_cold.py): skinny bf16 GEMMs (F.linear, weights [n, k]) and flash decode
# attention, each timed hot (same operands every call) and cold (calls cycle through copies that
# together exceed 4 x L2), inside CUDA graphs; plus decode-sized memory-bound kernels.
# Writes to $OUT: env_round8.txt, cold.csv.gz (committed as traces/h200/cold.csv.gz), cold.log.
set -u
OUT=${OUT:-/tmp/simcore_out_round8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
BUDGET=${BUDGET:-300}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} > "$OUT/env_round8.txt" 2>&1
nvidia-smi dmon -s pucm -d 2 > "$OUT/dmon_round8.txt" 2>&1 &
DMON=$!
timeout $(( BUDGET + 60 )) $PY tools/bench_cold.py $SM --budget "$BUDGET" --out "$OUT/cold.csv" > "$OUT/cold.log" 2>&1
echo "bench_cold rc=$?"
kill $DMON 2>/dev/null
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round8.txt" 2>&1
gzip -9 -f "$OUT/cold.csv"
tail -5 "$OUT/cold.log"; grep -c . "$OUT/cold.log"; grep -E "ERROR|OOM" "$OUT/cold.log" | head
ls -la "$OUT"
