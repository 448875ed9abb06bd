#!/usr/bin/env bash
# Round 5 of the H200 collection (device tool, kind nvidia-h200-x2): host time of the distributed wrappers.
# torchrun --nproc_per_node=2 tools/bench_host.py --dist: per-layer host time (1-vs-4-layer slope, fwd and
# fwd+bwd, autocast bf16, fp32 params, hidden 64, seq 8) of the plain model, FSDP2 (fully_shard per Block + root),
# FSDP2 without mixed-precision policy, and tensor parallel (gpt.py tp_group, 2 ranks); AdamW (fused / foreach)
# step and zero_grad(set_to_none=True) over FSDP2 DTensor parameters vs plain tensors. Two passes, min kept.
# Writes to $OUT (<= 8 files):
#   env_round5.txt     versions, nvidia-smi, clocks before / after
#   host_dist.csv.gz   rank 0's rows (committed as traces/h200x2/host_dist.csv.gz)
#   host_dist.log      the run's log (both ranks)
# Every step runs under `timeout` (whole script < 4 min). SMOKE=1 PY=... TORCHRUN=... runs it on CPU (gloo).
set -u
OUT=${OUT:-/tmp/simcore_out_round5}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (KINDS.md): keep / re-assert the workplace's settings.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
T0=$(date +%s)

{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('devices', torch.cuda.device_count())"
  echo "### env"; env | grep -E '^(NCCL|TORCH|NVSHMEM|CUDA)' | sort
  echo "### nproc"; nproc
  echo "### lscpu"; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|MHz"
} > "$OUT/env_round5.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round5.txt"

# rank 0 writes the CSV row by row (a killed run keeps what it measured: the *_run<k> rows)
timeout 200 $TORCHRUN --nproc_per_node=2 tools/bench_host.py --dist $SM --passes 2 --budget 150 \
    --dist-timeout 60 --out "$OUT/host_dist.csv" > "$OUT/host_dist.log" 2>&1
echo "bench_host --dist rc=$? ($(( $(date +%s) - T0 )) s)"
gzip -9 -f "$OUT/host_dist.csv"

{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round5.txt" 2>&1
ls -la "$OUT"
echo "=== errors"; grep -E "ERROR|Traceback|Error" "$OUT/host_dist.log" | head -20
echo "=== derived (us)"
$PY - "$OUT/host_dist.csv.gz" <<'PYEOF'
import csv, gzip, sys
for r in csv.DictReader(gzip.open(sys.argv[1], "rt")):
    if r["framework"] == "derived" or (r["framework"] == "eager" and "_run" not in r["name"]):
        v = r["host_s_per_call"]
        print(f"{r['name']:58s} {float(v) * 1e6:10.1f}" if v else f"{r['name']:58s} {r['notes'][:80]}")
PYEOF
