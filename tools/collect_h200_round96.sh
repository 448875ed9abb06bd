#!/usr/bin/env bash
# Rounds 96 and 97 (device tool, kind nvidia-h200, stop 25), one call:
#   round 96: tools/bench_attention.py --set kvlen (cuDNN's masked one-query decode at slot counts off multiples of
#             16: transformers' static cache holds max_length - 1 slots) and tools/bench_hf.py --set rec_fit (fit
#             traces: large-batch static-cache generate() whose calls re-record their decode graph);
#   round 97: tools/bench_hf.py --set r97 (held apart, scenarios tests/data/pending_scenarios/h200_r97_*.yaml).
# Writes $OUT/round96.tar.part_* and $OUT/round97.tar.part_* (cat roundN.tar.part_* | tar xf - -C DIR).
set -u
OUT=${OUT:-/tmp/simcore_out_round96}
mkdir -p "$OUT/r96" "$OUT/r97"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"; nproc; } > "$OUT/r96/env_round96.txt" 2>&1
cp "$OUT/r96/env_round96.txt" "$OUT/r97/env_round97.txt"
timeout 90 $PY tools/bench_attention.py --set kvlen --budget 60 --out "$OUT/r96/attention_kvlen.csv" > "$OUT/r96/attention_kvlen.log" 2>&1
echo "kvlen rc=$?"; gzip -9 -f "$OUT/r96/attention_kvlen.csv"; tail -2 "$OUT/r96/attention_kvlen.log"
timeout 230 $PY tools/bench_hf.py --set rec_fit --budget 150 --outdir "$OUT/r96" > "$OUT/r96/hf.log" 2>&1
echo "rec_fit rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r96/hf.log" | tail -6
timeout 230 $PY tools/bench_hf.py --set r97 --budget 150 --outdir "$OUT/r97" > "$OUT/r97/hf.log" 2>&1
echo "r97 rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r97/hf.log" | tail -6
for R in 96 97; do
  (cd "$OUT" && tar cf "round$R.tar" -C "r$R" . && rm -rf "r$R" && split -b 15M "round$R.tar" "round$R.tar.part_" && rm "round$R.tar")
done
ls -la "$OUT"
