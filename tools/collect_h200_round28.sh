#!/usr/bin/env bash
# Round 28 (device tool, kind nvidia-h200-x2): whole profiled training steps under DDP / FSDP2 / TP=2 and
# plain replicas, on both ranks (tools/bench_dist_steps.py; see its docstring). Writes $OUT/round28.tar:
# the traces, r28_points.json, dist_steps.log, env_round28.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round28}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round28.txt" 2>&1
timeout 200 $TORCHRUN --nproc_per_node=2 tools/bench_dist_steps.py --budget 150 --outdir "$OUT/r28" \
    > "$OUT/dist_steps.log" 2>&1
echo "rc=$?"
# heavier steps: width 1536, 4 x 2048 tokens per micro-batch
timeout 240 $TORCHRUN --nproc_per_node=2 tools/bench_dist_steps.py --budget 180 --hidden 1536 --seq 2048 --mb 4 \
    --tag _s2048_b4 --outdir "$OUT/r28" > "$OUT/dist_steps_big.log" 2>&1
echo "rc=$?"
grep -E "rank0|ERROR|Traceback" "$OUT/dist_steps.log" "$OUT/dist_steps_big.log" | tail -40
(cd "$OUT" && mv r28/* . && rmdir r28 && tar cf round28.tar --remove-files $(ls | grep -v round28.tar))
ls -la "$OUT"
