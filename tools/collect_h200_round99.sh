#!/usr/bin/env bash
# Round 99 (device tool, kind nvidia-h200, stop 27): tools/bench_hf.py --set r99, held apart (scenarios
# tests/data/pending_scenarios/h200_r99_*.yaml, committed before the call). Writes $OUT/round99.tar.part_*
# (cat round99.tar.part_* | tar xf - -C traces/h200/round99).
set -u
OUT=${OUT:-/tmp/simcore_out_round99}
mkdir -p "$OUT/r99"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"; nproc; } > "$OUT/r99/env_round99.txt" 2>&1
timeout 420 $PY tools/bench_hf.py --set r99 --budget 320 --outdir "$OUT/r99" > "$OUT/r99/hf.log" 2>&1
echo "r99 rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r99/hf.log" | tail -8
(cd "$OUT" && tar cf round99.tar -C r99 . && rm -rf r99 && split -b 15M round99.tar round99.tar.part_ && rm round99.tar)
ls -la "$OUT"
