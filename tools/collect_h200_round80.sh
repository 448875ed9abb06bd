#!/usr/bin/env bash
# Round 80 (device tool, kind nvidia-h200): fit traces, not held apart: transformers' generate() and users' decode
# loops with each sampling step alone and together beside greedy (tools/bench_hf.py --set sample_fit,
# tools/bench_user_infer.py --set sample_fit): the host of a sampling pass's extra kernel launches. Writes $OUT/round80.tar.part_*.
set -u
OUT=${OUT:-/tmp/simcore_out_round80}
mkdir -p "$OUT/r80"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; } > "$OUT/r80/env_round80.txt" 2>&1
timeout 100 $PY tools/bench_user_infer.py --set sample_fit --smoke --outdir /tmp/r80_smoke > "$OUT/r80/smoke_user.log" 2>&1 || echo "user smoke failed"
tail -2 "$OUT/r80/smoke_user.log"
timeout 150 $PY tools/bench_hf.py --set sample_fit --smoke --outdir /tmp/r80_smoke_hf > "$OUT/r80/smoke_hf.log" 2>&1 || echo "hf smoke failed"
grep -E "ERROR|done" "$OUT/r80/smoke_hf.log" | tail -8
timeout 150 $PY tools/bench_user_infer.py --set sample_fit --budget 100 --outdir "$OUT/r80" > "$OUT/r80/user.log" 2>&1
echo "user rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r80/user.log" | tail -6
timeout 300 $PY tools/bench_hf.py --set sample_fit --budget 240 --outdir "$OUT/r80" > "$OUT/r80/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r80/hf.log" | tail -10
# files come back from $OUT at most 16 MiB each: the tar in parts (cat round80.tar.part_* > round80.tar)
(cd "$OUT" && tar cf round80.tar -C r80 . && rm -rf r80 && split -b 15M round80.tar round80.tar.part_ && rm round80.tar)
ls -la "$OUT"
