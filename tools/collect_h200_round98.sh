#!/usr/bin/env bash
# Round 98 (device tool, kind nvidia-h200, stop 26): tools/bench_hf.py --set r98, held apart (scenarios
# tests/data/pending_scenarios/h200_r98_*.yaml, committed before the call). Writes $OUT/round98.tar.part_*
# (cat round98.tar.part_* | tar xf - -C traces/h200/round98).
set -u
OUT=${OUT:-/tmp/simcore_out_round98}
mkdir -p "$OUT/r98"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"; nproc; } > "$OUT/r98/env_round98.txt" 2>&1
timeout 400 $PY tools/bench_hf.py --set r98 --budget 320 --outdir "$OUT/r98" > "$OUT/r98/hf.log" 2>&1
echo "r98 rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r98/hf.log" | tail -8
(cd "$OUT" && tar cf round98.tar -C r98 . && rm -rf r98 && split -b 15M round98.tar round98.tar.part_ && rm round98.tar)
ls -la "$OUT"
