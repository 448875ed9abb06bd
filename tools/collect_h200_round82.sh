#!/usr/bin/env bash
# Round 82 (device tool, kind nvidia-h200): held-apart traces after host_trace.PROBE_WINDOW (stop 22): transformers'
# generate(), a decode loop and eager training steps, users' decode loops
# (tools/bench_hf.py --set r82, tools/bench_user_infer.py --set r82). Writes $OUT/round82.tar.part_*.
set -u
OUT=${OUT:-/tmp/simcore_out_round82}
mkdir -p "$OUT/r82"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; } > "$OUT/r82/env_round82.txt" 2>&1
timeout 100 $PY tools/bench_user_infer.py --set r82 --smoke --outdir /tmp/r82_smoke > "$OUT/r82/smoke_user.log" 2>&1 || echo "user smoke failed"
tail -2 "$OUT/r82/smoke_user.log"
timeout 150 $PY tools/bench_hf.py --set r82 --smoke --outdir /tmp/r82_smoke_hf > "$OUT/r82/smoke_hf.log" 2>&1 || echo "hf smoke failed"
grep -E "ERROR|done" "$OUT/r82/smoke_hf.log" | tail -8
timeout 150 $PY tools/bench_user_infer.py --set r82 --budget 100 --outdir "$OUT/r82" > "$OUT/r82/user.log" 2>&1
echo "user rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r82/user.log" | tail -6
timeout 300 $PY tools/bench_hf.py --set r82 --budget 240 --outdir "$OUT/r82" > "$OUT/r82/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r82/hf.log" | tail -10
# files come back from $OUT at most 16 MiB each: the tar in parts (cat round82.tar.part_* > round82.tar)
(cd "$OUT" && tar cf round82.tar -C r82 . && rm -rf r82 && split -b 15M round82.tar round82.tar.part_ && rm round82.tar)
ls -la "$OUT"
