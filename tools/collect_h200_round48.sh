#!/usr/bin/env bash
# Round 48 (device tool, kind nvidia-h200): five held-apart transformers traces (tools/bench_hf.py --set r48:
# gradient clipping, fp32 without autocast, Holistic Trace Analysis' profiler options) and round 25's fit points
# under each profiler option set (tools/bench_host_steps.py --set r48 --passes 1). Writes $OUT/round48.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round48}
mkdir -p "$OUT/r48"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 200 $PY tools/bench_hf.py --set r48 --budget 150 --outdir "$OUT/r48" > "$OUT/r48/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|done|budget| s$" "$OUT/r48/hf.log" | tail -10
timeout 200 $PY tools/bench_host_steps.py --set r48 --passes 1 --budget 150 --outdir "$OUT/r48/fit" > "$OUT/r48/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|done" "$OUT/r48/steps.log" | tail -5
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/r48/env_round48.txt" 2>&1
(cd "$OUT" && tar cf round48.tar -C r48 . && rm -rf r48)
ls -la "$OUT"
