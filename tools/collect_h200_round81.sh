#!/usr/bin/env bash
# Round 81 (device tool, kind nvidia-h200): held-apart traces after profile.EXTRA_LAUNCH_OPS (stop 22): transformers'
# generate() and users' decode loops sampling at other models, widths and batches than round 80's fit
# (tools/bench_hf.py --set r81, tools/bench_user_infer.py --set r81). Writes $OUT/round81.tar.part_*.
set -u
OUT=${OUT:-/tmp/simcore_out_round81}
mkdir -p "$OUT/r81"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; } > "$OUT/r81/env_round81.txt" 2>&1
timeout 100 $PY tools/bench_user_infer.py --set r81 --smoke --outdir /tmp/r81_smoke > "$OUT/r81/smoke_user.log" 2>&1 || echo "user smoke failed"
tail -2 "$OUT/r81/smoke_user.log"
timeout 150 $PY tools/bench_hf.py --set r81 --smoke --outdir /tmp/r81_smoke_hf > "$OUT/r81/smoke_hf.log" 2>&1 || echo "hf smoke failed"
grep -E "ERROR|done" "$OUT/r81/smoke_hf.log" | tail -8
timeout 150 $PY tools/bench_user_infer.py --set r81 --budget 100 --outdir "$OUT/r81" > "$OUT/r81/user.log" 2>&1
echo "user rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r81/user.log" | tail -6
timeout 300 $PY tools/bench_hf.py --set r81 --budget 240 --outdir "$OUT/r81" > "$OUT/r81/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r81/hf.log" | tail -10
# files come back from $OUT at most 16 MiB each: the tar in parts (cat round81.tar.part_* > round81.tar)
(cd "$OUT" && tar cf round81.tar -C r81 . && rm -rf r81 && split -b 15M round81.tar round81.tar.part_ && rm round81.tar)
ls -la "$OUT"
