#!/usr/bin/env bash
# Round 77 (device tool, kind nvidia-h200): a profiled prefill + decode of tools/gpt.py's GPT block (the calibrated
# code's decode ops, tools/bench_ref_decode.py). Writes $OUT/round77.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round77}
mkdir -p "$OUT/r77"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r77/env_round77.txt" 2>&1
timeout 120 $PY tools/bench_ref_decode.py --smoke --out /tmp/r77_smoke.json.gz > "$OUT/r77/smoke.log" 2>&1 || echo "smoke failed"
tail -2 "$OUT/r77/smoke.log"
timeout 200 $PY tools/bench_ref_decode.py --out "$OUT/r77/profile_infer_gpt_gelu_decode.json.gz" > "$OUT/r77/ref.log" 2>&1
echo "rc=$?"; tail -3 "$OUT/r77/ref.log"
(cd "$OUT" && tar cf round77.tar -C r77 . && rm -rf r77)
ls -la "$OUT"
