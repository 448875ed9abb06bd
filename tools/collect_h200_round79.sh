#!/usr/bin/env bash
# Round 79 (device tool, kind nvidia-h200): held-apart traces of decode loops after runtime.pass_ops: transformers'
# generate() with sampling / a repetition penalty / with and without an end-of-sequence id (tools/bench_hf.py --set
# r79) and users' sampling loops (tools/bench_user_infer.py --set r79). Writes $OUT/round79.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round79}
mkdir -p "$OUT/r79"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; } > "$OUT/r79/env_round79.txt" 2>&1
timeout 100 $PY tools/bench_user_infer.py --set r79 --smoke --outdir /tmp/r79_smoke > "$OUT/r79/smoke_user.log" 2>&1 || echo "user smoke failed"
tail -2 "$OUT/r79/smoke_user.log"
timeout 150 $PY tools/bench_hf.py --set r79 --smoke --outdir /tmp/r79_smoke_hf > "$OUT/r79/smoke_hf.log" 2>&1 || echo "hf smoke failed"
grep -E "ERROR|done" "$OUT/r79/smoke_hf.log" | tail -8
timeout 150 $PY tools/bench_user_infer.py --set r79 --budget 100 --outdir "$OUT/r79" > "$OUT/r79/user.log" 2>&1
echo "user rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r79/user.log" | tail -6
timeout 300 $PY tools/bench_hf.py --set r79 --budget 240 --outdir "$OUT/r79" > "$OUT/r79/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r79/hf.log" | tail -10
# files come back from $OUT at most 16 MiB each: the tar in parts (cat round79.tar.part_* > round79.tar)
(cd "$OUT" && tar cf round79.tar -C r79 . && rm -rf r79 && split -b 15M round79.tar round79.tar.part_ && rm round79.tar)
ls -la "$OUT"
