#!/usr/bin/env bash
# Round 78 (device tool, kind nvidia-h200): held-apart traces of other users' decode loops after runtime.layer_ops in inference
# (tools/bench_user_infer.py --set r78). Writes $OUT/round78.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round78}
mkdir -p "$OUT/r78"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; } > "$OUT/r78/env_round78.txt" 2>&1
timeout 120 $PY tools/bench_user_infer.py --set r78 --smoke --outdir /tmp/r78_smoke > "$OUT/r78/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r78/smoke.log"
timeout 420 $PY tools/bench_user_infer.py --set r78 --budget 240 --outdir "$OUT/r78" > "$OUT/r78/user.log" 2>&1
echo "rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r78/user.log" | tail -12
(cd "$OUT" && tar cf round78.tar -C r78 . && rm -rf r78)
ls -la "$OUT"
