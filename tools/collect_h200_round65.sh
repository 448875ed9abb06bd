#!/usr/bin/env bash
# Round 65 (device tool, kind nvidia-h200): norms, the loss's log-softmax and the embedding at training
# steps' shapes (tools/bench_norm_ops.py: fp32 and bf16 LayerNorm / RMSNorm over widths 768-8192 and
# 1k-32k rows, fp32 log-softmax over 32k-152k vocabularies, the embedding and its dense backward).
# Writes $OUT/round65.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round65}
mkdir -p "$OUT/r65"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 60 $PY tools/bench_norm_ops.py --smoke --out /tmp/norm_smoke.csv > "$OUT/r65/norm_smoke.log" 2>&1 || echo "norm smoke failed"
tail -3 "$OUT/r65/norm_smoke.log"
timeout 330 $PY tools/bench_norm_ops.py --budget 300 --out "$OUT/r65/norm_ops.csv" > "$OUT/r65/norm_ops.log" 2>&1
echo "norm rc=$?"; grep -c OOM "$OUT/r65/norm_ops.log"; tail -3 "$OUT/r65/norm_ops.log"
# the embedding's rows apart: its backward is not bound by bytes (a sort and segment sums), a diagnostic
# (columns renamed, so that `simcore calibrate traces/h200` does not take it for an op sweep)
( echo "op,dtype,tokens,hidden,vocab,backward,bytes,seconds,timing"
  awk -F, 'NR>1 && $14=="embedding" {print $14","$2","$3","$4","$5","$13","$15","$16","$18}' "$OUT/r65/norm_ops.csv" ) > "$OUT/r65/embedding_ops.csv"
awk -F, 'NR==1 || $14!="embedding"' "$OUT/r65/norm_ops.csv" > "$OUT/r65/n.csv" && mv "$OUT/r65/n.csv" "$OUT/r65/norm_ops.csv"
gzip -9n "$OUT"/r65/*.csv
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r65/env_round65.txt" 2>&1
(cd "$OUT" && tar cf round65.tar -C r65 . && rm -rf r65)
ls -la "$OUT"
