#!/usr/bin/env bash
# Round 12 (device tool, kind nvidia-h200-x2): host time per layer of the distributed wrappers
# (FSDP2, TP=2, DDP) with and without the PyTorch profiler recording, in one run
# (torchrun --nproc_per_node=2 tools/bench_host.py --dist --dist-variants fsdp2,tp2,ddp --dist-profiled;
# width 64 as rounds 5 and 7). Writes $OUT/dist_profiled.csv.gz, dist_profiled.log, env_round12.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round12}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/env_round12.txt" 2>&1
timeout 200 $TORCHRUN --nproc_per_node=2 tools/bench_host.py --dist --dist-variants fsdp2,tp2,ddp --dist-profiled \
    $SM --passes 2 --budget 150 --dist-timeout 60 --out "$OUT/dist_profiled.csv" > "$OUT/dist_profiled.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/dist_profiled.csv"
grep -E "ERROR|Traceback" "$OUT/dist_profiled.log" | head
zcat "$OUT/dist_profiled.csv.gz" | grep -E "^(profiled_)?per_layer" | cut -d, -f1,4
