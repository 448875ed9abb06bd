#!/usr/bin/env bash
# Round 49 (device tool, kind nvidia-h200): misaligned GEMMs beside their aligned twins in fp32, tf32, bf16 and
# fp16 (tools/bench_gemm_align.py). Writes $OUT/round49.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round49}
mkdir -p "$OUT/r49"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 200 $PY tools/bench_gemm_align.py --out "$OUT/r49/gemm_align.csv" > "$OUT/r49/gemm_align.log" 2>&1
echo "align rc=$?"; tail -70 "$OUT/r49/gemm_align.log"
gzip -9 "$OUT/r49/gemm_align.csv"
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r49/env_round49.txt" 2>&1
(cd "$OUT" && tar cf round49.tar -C r49 . && rm -rf r49)
