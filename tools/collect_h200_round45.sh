#!/usr/bin/env bash
# Round 45 (device tool, kind nvidia-h200): the training fit runs of rounds 25 and 32 again (tools/bench_host_steps.py
# --set r25, tools/bench_hf.py --set fit --kinds train), whose steps now give candidate CPU probes beside aten::t
# (the main thread's GEMM op, the backward thread's aten::mm: host_trace --steps columns linear_main_s, mm_bwd_s).
# Writes $OUT/round45.tar (the traces).
set -u
OUT=${OUT:-/tmp/simcore_out_round45}
mkdir -p "$OUT/r45"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 260 $PY tools/bench_host_steps.py --set r25 --passes 2 --budget 220 --outdir "$OUT/r45" > "$OUT/r45/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|done" "$OUT/r45/steps.log" | tail -3
timeout 200 $PY tools/bench_hf.py --set fit --kinds train --label r45 --budget 170 --outdir "$OUT/r45" > "$OUT/r45/hf_fit.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|done|budget" "$OUT/r45/hf_fit.log" | tail -3
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r45/env_round45.txt" 2>&1
(cd "$OUT" && tar cf round45.tar -C r45 . && rm -rf r45)
ls -la "$OUT"
