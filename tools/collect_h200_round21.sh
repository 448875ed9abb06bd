#!/usr/bin/env bash
# Round 21 (device tool, kind nvidia-h200-x2): compute kernels beside NCCL all-reduces on another
# stream (tools/bench_overlap.py). Writes to $OUT: overlap.csv.gz, overlap.log.
set -u
OUT=${OUT:-/tmp/simcore_out_round21}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/.."
timeout 150 torchrun --nproc_per_node=2 tools/bench_overlap.py --out "$OUT/overlap.csv" > "$OUT/overlap.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/overlap.csv"
grep -vE "^\s*$|Warning|warn" "$OUT/overlap.log" | tail -20
