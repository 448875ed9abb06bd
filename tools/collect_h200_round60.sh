#!/usr/bin/env bash
# Round 60 (device tool, kind nvidia-h200): six held-apart transformers traces of fp32 training and eager attention
# (tools/bench_hf.py --set r60), and round 59's memory-efficient attention rerun with dropout rows
# (tools/bench_attention.py --set efficient). Writes $OUT/round60.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round60}
mkdir -p "$OUT/r60"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 120 $PY tools/bench_attention.py --set efficient --budget 100 --out "$OUT/r60/attention_efficient.csv" > "$OUT/r60/attention.log" 2>&1
echo "attention rc=$?"; grep -c skip "$OUT/r60/attention.log"; tail -2 "$OUT/r60/attention.log"
gzip -9 "$OUT"/r60/*.csv
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/r60/env_round60.txt" 2>&1
timeout 420 $PY tools/bench_hf.py --set r60 --budget 330 --outdir "$OUT/r60" > "$OUT/r60/hf.log" 2>&1
echo "hf rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/r60/hf.log" | tail -12
(cd "$OUT" && tar cf round60.tar -C r60 . && rm -rf r60)
ls -la "$OUT"
