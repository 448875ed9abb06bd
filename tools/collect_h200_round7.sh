#!/usr/bin/env bash
# Round 7 of the H200 collection (device tool, kind nvidia-h200-x2): host time of PyTorch DDP per layer.
# torchrun --nproc_per_node=2 tools/bench_host.py --dist --dist-variants ddp: per-layer host time (1-vs-4-layer
# slope, fwd and fwd+bwd, autocast bf16, fp32 params, hidden 64, seq 8) of the plain model and of the same model
# wrapped in torch.nn.parallel.DistributedDataParallel with its defaults (25 MB buckets,
# gradient_as_bucket_view=False; as bench_parallel.py's ddp). Two passes per run, min kept (as round 5).
# Run 1 is the committed file; further independent runs (own processes) follow while time is left, for the
# process-to-process spread (round 6 showed 2-3x between processes).
# Writes to $OUT (<= 8 files):
#   env_round7.txt          versions, nvidia-smi, clocks before / after
#   host_ddp.csv.gz         run 1, rank 0's rows (committed as traces/h200x2/host_ddp.csv.gz)
#   host_ddp_run<k>.csv.gz  runs k >= 2 (same content, independent processes)
#   host_ddp.log            the runs' logs (both ranks)
# Every step runs under `timeout`; runs stop being started once fewer than RUN_S s are left of TOTAL_S
# (defaults 150 s / 45 s). SMOKE=1 PY=... TORCHRUN=... runs it on CPU (gloo).
set -u
OUT=${OUT:-/tmp/simcore_out_round7}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off (KINDS.md): keep / re-assert the workplace's settings.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
N=${N:-3}
TOTAL_S=${TOTAL_S:-150}
RUN_S=${RUN_S:-45}
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
} > "$OUT/env_round7.txt" 2>&1
grep -E "^torch|Driver Version" "$OUT/env_round7.txt"

: > "$OUT/host_ddp.log"
for k in $(seq 1 "$N"); do
  LEFT=$(( TOTAL_S - ($(date +%s) - T0) ))
  if [ "$LEFT" -lt "$RUN_S" ]; then echo "stop before run $k: ${LEFT} s left"; break; fi
  LIM=$(( LEFT < 70 ? LEFT : 70 ))
  F="$OUT/host_ddp.csv"; [ "$k" -gt 1 ] && F="$OUT/host_ddp_run$k.csv"
  echo "### run $k" >> "$OUT/host_ddp.log"
  # rank 0 writes the CSV row by row (a killed run keeps what it measured: the *_run<k> rows)
  timeout "$LIM" $TORCHRUN --nproc_per_node=2 tools/bench_host.py --dist --dist-variants ddp $SM --passes 2 \
      --budget $(( LIM - 25 )) --dist-timeout 40 --out "$F" >> "$OUT/host_ddp.log" 2>&1
  echo "run $k rc=$? ($(( $(date +%s) - T0 )) s)"
  gzip -9 -f "$F"
done

{ echo "### after: nvidia-smi -q -d CLOCK,PERFORMANCE"; nvidia-smi -q -d CLOCK,PERFORMANCE; } >> "$OUT/env_round7.txt" 2>&1
ls -la "$OUT"
echo "=== errors"; grep -E "ERROR|Traceback|Error" "$OUT/host_ddp.log" | head -20
echo "=== per layer (us): file, then plain / ddp2 for fwd, fwd_bwd, bwd"
$PY - "$OUT"/host_ddp*.csv.gz <<'PYEOF'
import csv, gzip, sys
for f in sys.argv[1:]:
    r = {x["name"]: x for x in csv.DictReader(gzip.open(f, "rt"))}
    def v(n):
        x = r.get(n, {}).get("host_s_per_call")
        return f"{float(x) * 1e6:8.1f}" if x else "     n/a"
    print(f.rsplit("/", 1)[-1])
    for ph in ("fwd", "fwd_bwd", "bwd"):
        print(f"  {ph:8s} plain {v(f'per_layer_gpt_ln_gelu_rc_none_{ph}')}  ddp2 {v(f'per_layer_ddp2_gpt_ln_gelu_rc_none_{ph}')}"
              f"  extra {v(f'ddp2_extra_per_layer_gpt_ln_gelu_rc_none_{ph}')}")
    for ph in ("fwd", "fwd_bwd"):
        print(f"  fixed {ph:8s} plain {v(f'train_fixed_gpt_ln_gelu_rc_none_{ph}')}  ddp2 {v(f'train_fixed_ddp2_gpt_ln_gelu_rc_none_{ph}')}")
PYEOF
