#!/usr/bin/env bash
# Round 59 (device tool, kind nvidia-h200): the elementwise kernels of written-out attention and norms
# (tools/bench_eager_ops.py: broadcast and scalar operands, softmax / log-softmax over widths 128-152064) and
# PyTorch's memory-efficient attention in fp32 and bf16 (tools/bench_attention.py --set efficient).
# Writes $OUT/round59.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round59}
mkdir -p "$OUT/r59"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 60 $PY tools/bench_eager_ops.py --smoke --out /tmp/eager_smoke.csv > "$OUT/r59/eager_smoke.log" 2>&1 || echo "eager smoke failed"
tail -3 "$OUT/r59/eager_smoke.log"
timeout 60 $PY tools/bench_attention.py --set efficient --smoke --out /tmp/attn_smoke.csv > "$OUT/r59/attention_smoke.log" 2>&1 || echo "attention smoke failed"
tail -3 "$OUT/r59/attention_smoke.log"
timeout 200 $PY tools/bench_eager_ops.py --budget 170 --out "$OUT/r59/eager_ops.csv" > "$OUT/r59/eager_ops.log" 2>&1
echo "eager rc=$?"; grep -c OOM "$OUT/r59/eager_ops.log"; tail -3 "$OUT/r59/eager_ops.log"
timeout 230 $PY tools/bench_attention.py --set efficient --budget 190 --out "$OUT/r59/attention_efficient.csv" > "$OUT/r59/attention.log" 2>&1
echo "attention rc=$?"; grep -c skip "$OUT/r59/attention.log"; tail -3 "$OUT/r59/attention.log"
gzip -9 "$OUT"/r59/*.csv
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r59/env_round59.txt" 2>&1
(cd "$OUT" && tar cf round59.tar -C r59 . && rm -rf r59)
ls -la "$OUT"
