#!/usr/bin/env bash
# Round 75 (device tool, kind nvidia-h200): held-apart traces of other users' training code after stop 20's runtime.layer_ops
# (tools/bench_user_models.py --set r75). Writes $OUT/round75.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round75}
mkdir -p "$OUT/r75"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; } > "$OUT/r75/env_round75.txt" 2>&1
timeout 120 $PY tools/bench_user_models.py --set r75 --smoke --outdir /tmp/r75_smoke > "$OUT/r75/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r75/smoke.log"
timeout 420 $PY tools/bench_user_models.py --set r75 --budget 300 --outdir "$OUT/r75" > "$OUT/r75/user.log" 2>&1
echo "rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r75/user.log" | tail -12
(cd "$OUT" && tar cf round75.tar -C r75 . && rm -rf r75)
ls -la "$OUT"
