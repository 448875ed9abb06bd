#!/usr/bin/env bash
# Round 119 (PLANNED, not run in stop 34: device loans were paused after round 118). Device tool, kind
# nvidia-h100-x1. What the H100 still lacks beside the H200:
#  (1) tools/bench_gemm_kernels.py: the non-fp8 GEMM rows of round 117's op sweep timed by their kernels' durations
#      (round 19's H200 run), for an `h100-kernels` profile like `h200-kernels`
#      (`simcore calibrate <cross_device.CALIBRATION_INPUTS["h100"]> h100/round119/gemm_kernels.csv.gz --device h100
#      --base h200-kernels --no-comm`);
#  (2) tools/bench_mem_power.py, memory-bound and GEMM dtypes (rounds 20 and 67): the board power each family draws;
#  (3) tools/bench_steps.py --compile --only train: round 13's torch.compile steps beside their eager twins.
# The GEMM shapes come from traces/h100/round117/ops.csv.gz: with traces/ out of the index for the call (the 64 MiB
# limit), name that file in the call's carry.
# Writes $OUT/round119.tar.part_*:  mkdir -p traces/h100/round119 && cat round119.tar.part_* | tar xf - -C traces/h100/round119
set -u
OUT=${OUT:-/tmp/simcore_out_round119}
W=/tmp/r119
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER; nproc; } > "$W/env.txt" 2>&1
nvidia-smi dmon -s pucm -d 1 -o T > "$W/gemm_kernels.dmon.log" 2>&1 &
DMON=$!
timeout 260 $PY tools/bench_gemm_kernels.py --ops traces/h100/round117/ops.csv.gz --out "$W/gemm_kernels.csv" \
    --budget 220 > "$W/gemm_kernels.log" 2>&1
echo "gemm_kernels rc=$?"; tail -2 "$W/gemm_kernels.log"
kill $DMON 2>/dev/null
nvidia-smi dmon -s pucm -d 1 -o T > "$W/power.dmon.txt" 2>&1 &
DMON=$!
timeout 90 $PY tools/bench_mem_power.py --seconds 6 > "$W/mem_power.log" 2>&1; echo "mem_power rc=$?"
timeout 90 $PY tools/bench_mem_power.py --set gemm_dtypes --seconds 6 > "$W/gemm_power.log" 2>&1; echo "gemm_power rc=$?"
kill $DMON 2>/dev/null
# round 13's configurations (its NAMES), compiled beside eager in one process
NAMES=${NAMES:-gpt-125m,gpt-125m-swiglu-rms,gpt-350m,llama-1b,gpt-1.3b,llama-1b-sel,gpt-350m-full,gpt-760m}
timeout 200 $PY tools/bench_steps.py $SM --compile --only train --names "$NAMES" --budget 170 \
    --out "$W/compiled_steps.csv" --configs-json "$W/steps_configs.json" > "$W/compiled_steps.log" 2>&1
echo "compiled_steps rc=$?"; grep -E "ERROR|OOM|done" "$W/compiled_steps.log" | tail -3
for f in "$W"/*.csv; do gzip -9 -f "$f"; done
(cd "$W" && tar cf "$OUT/round119.tar" . ) && (cd "$OUT" && split -b 15M round119.tar round119.tar.part_ && rm round119.tar)
ls -la "$OUT"
