#!/usr/bin/env bash
# Round 72 (device tool, kind nvidia-h200): torch.optim.AdamW on bf16 parameters, fused and foreach, beside
# fp32 references (tools/bench_optimizer.py), and the embedding's dense backward kernel by kernel under the
# profiler (tools/bench_embedding_bwd.py). Writes $OUT/round72.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round72}
mkdir -p "$OUT/r72"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 60 $PY tools/bench_optimizer.py --smoke --out /tmp/opt_smoke.csv > "$OUT/r72/optimizer_smoke.log" 2>&1 || echo "optimizer smoke failed"
tail -2 "$OUT/r72/optimizer_smoke.log"
timeout 200 $PY tools/bench_optimizer.py --budget 150 --out "$OUT/r72/optimizer_bf16.csv" > "$OUT/r72/optimizer.log" 2>&1
echo "optimizer rc=$?"; tail -4 "$OUT/r72/optimizer.log"
# the fp32 reference rows apart, column kind renamed op (round 1's sweep is the fp32 input, not these)
O="$OUT/r72/optimizer_bf16.csv"
( head -1 "$O" | sed 's/^kind,/op,/'; awk -F, 'NR>1 && $14 ~ /_ref$/' "$O" ) > "$OUT/r72/optimizer_fp32_ref.csv"
awk -F, 'NR==1 || $14 !~ /_ref$/' "$O" > "$O.tmp" && mv "$O.tmp" "$O"
timeout 200 $PY tools/bench_embedding_bwd.py --budget 150 --out "$OUT/r72/embedding_bwd.csv" > "$OUT/r72/embedding_bwd.log" 2>&1
echo "embedding rc=$?"; tail -3 "$OUT/r72/embedding_bwd.log"
gzip -9n "$OUT"/r72/*.csv
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r72/env_round72.txt" 2>&1
(cd "$OUT" && tar cf round72.tar -C r72 . && rm -rf r72)
ls -la "$OUT"
