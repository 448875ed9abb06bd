#!/usr/bin/env bash
# Round 36 (device tool, kind nvidia-h200): PyTorch's mixed-dtype and strided elementwise kernels
# (tools/bench_elementwise.py, with the plain ops of the same run) and four more held-apart Hugging
# Face traces (tools/bench_hf.py --set r36). Writes $OUT/round36.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round36}
mkdir -p "$OUT/r36"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
$PY tools/bench_elementwise.py --smoke --out /tmp/ew_smoke.csv > "$OUT/r36/elementwise_smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r36/elementwise_smoke.log"
timeout 200 $PY tools/bench_elementwise.py --out "$OUT/r36/elementwise.csv" --ref "$OUT/r36/elementwise_ref.csv" > "$OUT/r36/elementwise.log" 2>&1
echo "elementwise rc=$?"; tail -3 "$OUT/r36/elementwise.log"
gzip -9 "$OUT"/r36/*.csv
export OUT
timeout 330 $PY tools/bench_hf.py --set r36 --budget 260 --outdir "$OUT/r36" > "$OUT/r36/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|done|budget| s$" "$OUT/r36/hf.log" | tail -10
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/r36/env_round36.txt" 2>&1
(cd "$OUT" && tar cf round36.tar -C r36 . && rm -rf r36)
ls -la "$OUT"
