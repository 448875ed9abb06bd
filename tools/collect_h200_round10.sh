#!/usr/bin/env bash
# Round 10 (device tool, kind nvidia-h200-x2): host time per layer of the distributed wrappers (DDP,
# FSDP2, TP=2) over the plain layer at width 1024 instead of 64: DDP's gradient buckets (25 MB) then
# fill every ~2 layers and FSDP2 / TP move real tensors. torchrun --nproc_per_node=2
# tools/bench_host.py --dist --dist-variants ddp,fsdp2,tp2 --hidden 1024; RUNS independent runs.
# Writes $OUT/host_dist_h1024.csv.gz (run 1), host_dist_h1024_run<k>.csv.gz, host_dist_h1024.log, env_round10.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round10}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
RUNS=${RUNS:-2}
HID=${HID:-1024}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE; nproc; $PY -c "import torch; print('torch', torch.__version__)"; } \
  > "$OUT/env_round10.txt" 2>&1
: > "$OUT/host_dist_h$HID.log"
for k in $(seq 1 "$RUNS"); do
  F="$OUT/host_dist_h$HID.csv"; [ "$k" -gt 1 ] && F="$OUT/host_dist_h${HID}_run$k.csv"
  echo "### run $k" >> "$OUT/host_dist_h$HID.log"
  timeout 150 $TORCHRUN --nproc_per_node=2 tools/bench_host.py --dist --dist-variants ddp,fsdp2,tp2 --hidden "$HID" \
      $SM --passes 2 --budget 100 --dist-timeout 60 --out "$F" >> "$OUT/host_dist_h$HID.log" 2>&1
  echo "run $k rc=$?"
  gzip -9 -f "$F"
done
grep -E "ERROR|Traceback|Error" "$OUT/host_dist_h$HID.log" | head
ls -la "$OUT"
