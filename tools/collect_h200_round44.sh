#!/usr/bin/env bash
# Round 44 (device tool, kind nvidia-h200-x2): held-apart DDP / FSDP2 / TP profiler traces of tools/gpt.py models
# on 2 H200s with PyTorch's default attention backend (cuDNN), both ranks (round 22's recipe). Writes
# $OUT/round44.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round44}
mkdir -p "$OUT/r44"
export PYTHONUNBUFFERED=1 SIMCORE_SDPA=default
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
cd "$(dirname "$0")/.."
GPT350=layers=24,hidden=1024,heads=16,seq=1024,mb=4
LLAMA8=layers=8,hidden=2048,heads=32,kv_heads=8,ffn_hidden=8192,vocab=32000,activation=swiglu,norm=rmsnorm,seq=2048,mb=2
par() {  # strategy model tag
  timeout 150 $TORCHRUN --nproc_per_node=2 tools/bench_parallel.py --out "$OUT/r44/unused.csv" --only "" \
      --profile-dir "$OUT/r44" --profile-strategies "$1" --profile-model "$2" --profile-tag "$3" --profile-all-ranks \
      --profile-max-mb 4 >> "$OUT/r44/parallel.log" 2>&1
  echo "parallel $1$3 rc=$?"
}
par ddp "$GPT350" _gpt350m
par fsdp "$LLAMA8" _llama8l
par tp "$LLAMA8" _llama8l
rm -f "$OUT/r44/unused.csv"
grep -E "trace |ERROR|Traceback" "$OUT/r44/parallel.log" | head -20
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r44/env_round44.txt" 2>&1
(cd "$OUT" && tar cf round44.tar -C r44 . && rm -rf r44)
ls -la "$OUT"
