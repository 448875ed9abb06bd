#!/usr/bin/env bash
# Round 74 (device tool, kind nvidia-h200): profiler traces of training written as users write it (tools/bench_user_models.py:
# a nanoGPT-style GPT, eager and compiled, and a causal LM on nn.TransformerEncoder). Writes $OUT/round74.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round74}
mkdir -p "$OUT/r74"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; } > "$OUT/r74/env_round74.txt" 2>&1
timeout 120 $PY tools/bench_user_models.py --smoke --outdir /tmp/r74_smoke > "$OUT/r74/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r74/smoke.log"
timeout 420 $PY tools/bench_user_models.py --budget 300 --outdir "$OUT/r74" > "$OUT/r74/user.log" 2>&1
echo "rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r74/user.log" | tail -12
(cd "$OUT" && tar cf round74.tar -C r74 . && rm -rf r74)
ls -la "$OUT"
