#!/usr/bin/env bash
# Round 2 of the H200 collection (device tool, kind nvidia-h200-x2). Writes everything to $OUT (<= 8 files):
#   env_round2.txt    versions, nvidia-smi, clocks before / after
#   host.csv.gz       tools/bench_host.py on GPU 0: host (CPU dispatch) overhead per call of eager constructs
#   host.log          its log
#   profile.log       the log of the profiling run
#   profile_{tp,fsdp,pp}_rank0.json.gz   tools/bench_parallel.py --profile-strategies (2 GPUs, rank 0 trace)
#   dmon_round2.txt   nvidia-smi dmon during the run
# Every step runs under `timeout`. SMOKE=1 PY=... runs it on CPU (tiny sizes, gloo) to test the driver.
set -u
OUT=${OUT:-/tmp/simcore_out_round2}
W=/tmp/simcore_work_round2
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (KINDS.md): keep / re-assert the workplace's settings.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."

{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('devices', torch.cuda.device_count())"
  echo "### env"; env | grep -E '^(NCCL|TORCH|NVSHMEM|CUDA)' | sort
  echo "### nproc"; nproc
} > "$OUT/env_round2.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round2.txt"

nvidia-smi dmon -s pucm -d 2 -o T > "$OUT/dmon_round2.txt" 2>&1 &
DMON=$!

CUDA_VISIBLE_DEVICES=0 timeout 150 $PY tools/bench_host.py $SM --out "$OUT/host.csv" --budget 120 \
    > "$OUT/host.log" 2>&1
echo "bench_host rc=$?"
gzip -9 -f "$OUT/host.csv"

timeout 190 $TORCHRUN --nproc_per_node=2 tools/bench_parallel.py $SM --out "$W/unused.csv" --only "" \
    --profile-dir "$OUT" --profile-strategies tp,fsdp,pp > "$OUT/profile.log" 2>&1
echo "bench_parallel profiles rc=$?"

kill "$DMON" 2>/dev/null
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round2.txt" 2>&1
ls -la "$OUT"
echo "=== profile.log"; grep -vE "^(W|USDT|\[W)" "$OUT/profile.log" | tail -15
echo "=== host.log"; grep -vE "^(W|USDT)" "$OUT/host.log" | cut -c10-110 | tail -120
