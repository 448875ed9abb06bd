#!/usr/bin/env bash
# Round 29 (device tool, kind nvidia-h200-x2): round 28 again with rank 0 profiled only (as
# bench_parallel.py --profile-model records its traces), to see whether profiling one rank changes its host.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/o29}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 200 torchrun --nproc_per_node=2 tools/bench_dist_steps.py --budget 150 --rank0-only --strategies tp,fsdp,ddp,single --tag _r0only --outdir "$OUT/r" > "$OUT/r0only.log" 2>&1
echo rc=$?
grep -E "rank0|ERROR" "$OUT/r0only.log" | tail -20
(cd "$OUT" && mv r/* . && rmdir r && tar cf r29.tar --remove-files $(ls | grep -v r29.tar))
