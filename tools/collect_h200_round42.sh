#!/usr/bin/env bash
# Round 42 (device tool, kind nvidia-h200): the host of eager prefill passes of tools/gpt.py models in
# CPU-speed units (round 25's recipe and inference points, plus two longer prompts; two passes each), for
# fit_host's profiled_infer_prefill_* (python -m simcore.calibration.host_trace --decode --prefill).
# Writes $OUT/round42.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round42}
mkdir -p "$OUT/r42"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 300 $PY tools/bench_host_steps.py --set r42 --passes 2 --budget 260 --outdir "$OUT/r42" > "$OUT/r42/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|done|MB in" "$OUT/r42/steps.log" | tail -14
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; } > "$OUT/r42/env_round42.txt" 2>&1
(cd "$OUT" && tar cf round42.tar -C r42 . && rm -rf r42)
ls -la "$OUT"
