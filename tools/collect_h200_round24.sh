#!/usr/bin/env bash
# Round 24 (device tool, kind nvidia-h200-x2): host time per layer of real profiled training steps under
# the distributed wrappers (plain / DDP / FSDP2 / TP=2; GPT and Llama-like blocks) in units of the CPU's
# per-op speed (tools/bench_host_pace_dist.py). Writes $OUT/round24.tar: host_pace_dist_rank{0,1}.csv.gz,
# host_pace_dist.log, env_round24.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round24}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round24.txt" 2>&1
timeout 330 $TORCHRUN --nproc_per_node=2 tools/bench_host_pace_dist.py $SM --passes 3 --budget 240 \
    --out "$OUT/host_pace_dist.csv" > "$OUT/host_pace_dist.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT"/host_pace_dist_rank*.csv
grep -E "rank0 pass|ERROR|Traceback|done" "$OUT/host_pace_dist.log" | tail -40
(cd "$OUT" && tar cf round24.tar --remove-files $(ls | grep -v round24.tar))
