#!/usr/bin/env bash
# Driver for the H200 collection runs (device tool, kind nvidia-h200-x2). Writes everything to $OUT.
#   bash tools/collect_h200.sh phase1   # bench_ops on GPU0 || bench_steps on GPU1, + environment
#   bash tools/collect_h200.sh phase2   # bench_comm (2 GPUs, NCCL) then bench_parallel (2 GPUs)
# Every step runs under `timeout`, CSVs are written row by row, so a slow step still leaves data.
# Files in $OUT (<= 8): env_<phase>.txt, *.csv.gz, *.log, extra_<phase>.tar.gz (json, traces, dmon).
set -u
PHASE=${1:-phase1}
OUT=${OUT:-/tmp/simcore_out}
W=/tmp/simcore_work_$PHASE
mkdir -p "$OUT" "$W/prof"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (KINDS.md): keep / re-assert the workplace's settings.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}   # SMOKE=1: tiny CPU run to test the driver
cd "$(dirname "$0")/.."

envinfo() {
  echo "### date"; date -u
  echo "### uname"; uname -a
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK"; nvidia-smi -q -d CLOCK
  echo "### nvidia-smi -q -d PERFORMANCE,POWER"; nvidia-smi -q -d PERFORMANCE,POWER
  echo "### nvidia-smi topo -m"; nvidia-smi topo -m
  echo "### nvidia-smi nvlink -s"; timeout 20 nvidia-smi nvlink -s
  echo "### python / torch"
  $PY - <<'EOF'
import sys, torch
print("python", sys.version)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
try:
    print("nccl", torch.cuda.nccl.version())
except Exception as e:
    print("nccl ?", e)
print("devices", torch.cuda.device_count())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(i, p.name, p.total_memory, "SMs", p.multi_processor_count, "L2", getattr(p, "L2_cache_size", "?"))
try:
    import triton; print("triton", triton.__version__)
except Exception as e:
    print("triton ?", e)
EOF
  echo "### env NCCL/TORCH"; env | grep -E '^(NCCL|TORCH|NVSHMEM|CUDA)' | sort
  echo "### nproc / mem"; nproc; free -g
  echo "### nccl-tests present?"; ls /usr/local/bin/*_perf /opt/nccl-tests/build/*_perf /usr/bin/*_perf 2>/dev/null; command -v all_reduce_perf
}

envinfo > "$OUT/env_$PHASE.txt" 2>&1
echo "env written"; grep -E "Driver Version|NVIDIA H200|^torch|^nccl" "$OUT/env_$PHASE.txt" | head -8

nvidia-smi dmon -s pucm -d 2 -o T > "$W/dmon_$PHASE.txt" 2>&1 &
DMON=$!

if [ "$PHASE" = phase1 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 430 $PY tools/bench_ops.py $SM --out "$OUT/ops.csv" --budget 380 \
      --env-json "$W/ops_env.json" > "$OUT/ops.log" 2>&1 &
  P1=$!
  CUDA_VISIBLE_DEVICES=1 timeout 430 $PY tools/bench_steps.py $SM --out "$OUT/steps.csv" --budget 390 \
      --configs-json "$W/steps_configs.json" --profile-dir "$W/prof" > "$OUT/steps.log" 2>&1 &
  P2=$!
  wait $P1; echo "bench_ops rc=$?"
  wait $P2; echo "bench_steps rc=$?"
else
  timeout 260 torchrun --nproc_per_node=2 tools/bench_comm.py $SM --out "$OUT/nccl.csv" --budget 200 \
      > "$OUT/comm.log" 2>&1
  echo "bench_comm rc=$?"
  NT=$(command -v all_reduce_perf || ls /opt/nccl-tests/build/all_reduce_perf 2>/dev/null | head -1)
  if [ -n "$NT" ]; then
    D=$(dirname "$NT")
    for t in all_reduce all_gather reduce_scatter; do
      timeout 40 "$D/${t}_perf" -b 1K -e 4G -f 4 -g 2 >> "$W/nccl_tests.txt" 2>&1
    done
  else
    echo "no nccl-tests binaries on this machine" > "$W/nccl_tests.txt"
  fi
  timeout 230 torchrun --nproc_per_node=2 tools/bench_parallel.py $SM --out "$OUT/parallel.csv" --budget 170 \
      --profile-dir "$W/prof" > "$OUT/parallel.log" 2>&1
  echo "bench_parallel rc=$?"
fi

kill "$DMON" 2>/dev/null
{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_$PHASE.txt" 2>&1
for f in "$OUT"/*.csv; do [ -f "$f" ] && gzip -9 -f "$f"; done
tar czf "$OUT/extra_$PHASE.tar.gz" -C "$W" .
ls -la "$OUT" "$W/prof"
echo "=== log tails"
for f in "$OUT"/*.log; do echo "--- $f"; grep -vE "^(W|USDT)" "$f" | tail -25; done
for f in "$OUT"/*.csv.gz; do echo "$f rows: $(zcat "$f" | wc -l)"; done
