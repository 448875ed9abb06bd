#!/usr/bin/env bash
# Round 47 (device tool, kind nvidia-h200): round 25's fit points with torch.optim's default optimizers (foreach
# AdamW, SGD) and under other profiler options (tools/bench_host_steps.py --set r47; host_trace --steps reads
# them). Writes $OUT/round47.tar (the traces).
set -u
OUT=${OUT:-/tmp/simcore_out_round47}
mkdir -p "$OUT/r47"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 300 $PY tools/bench_host_steps.py --set r47 --passes 2 --budget 260 --outdir "$OUT/r47" > "$OUT/r47/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|done|MB in" "$OUT/r47/steps.log" | tail -30
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r47/env_round47.txt" 2>&1
(cd "$OUT" && tar cf round47.tar -C r47 . && rm -rf r47)
ls -la "$OUT"
