#!/usr/bin/env bash
# Round 76 (device tool, kind nvidia-h200): held-apart traces of inference written by users (KV cache by torch.cat)
# (tools/bench_user_infer.py). Writes $OUT/round76.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round76}
mkdir -p "$OUT/r76"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; } > "$OUT/r76/env_round76.txt" 2>&1
timeout 120 $PY tools/bench_user_infer.py --smoke --outdir /tmp/r76_smoke > "$OUT/r76/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r76/smoke.log"
timeout 420 $PY tools/bench_user_infer.py --budget 240 --outdir "$OUT/r76" > "$OUT/r76/user.log" 2>&1
echo "rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r76/user.log" | tail -12
(cd "$OUT" && tar cf round76.tar -C r76 . && rm -rf r76)
ls -la "$OUT"
