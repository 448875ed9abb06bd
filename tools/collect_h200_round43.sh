#!/usr/bin/env bash
# Round 43 (device tool, kind nvidia-h200): round 32's and 35's Hugging Face inference fit runs again
# (tools/bench_hf.py --set fit --kinds infer, --set generate_fit), whose traces now give the aten::linear /
# aten::addmm probe beside aten::t (python -m simcore.calibration.host_trace --decode --prefill, run here
# after collection). Writes $OUT/round43.tar (the traces, a few MB).
set -u
OUT=${OUT:-/tmp/simcore_out_round43}
mkdir -p "$OUT/r43"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 200 $PY tools/bench_hf.py --set fit --kinds infer --label r43 --budget 170 --outdir "$OUT/r43" > "$OUT/r43/hf_fit.log" 2>&1
echo "fit rc=$?"; grep -E "ERROR|done|budget" "$OUT/r43/hf_fit.log" | tail -4
timeout 200 $PY tools/bench_hf.py --set generate_fit --label r43 --budget 170 --outdir "$OUT/r43" > "$OUT/r43/hf_gen.log" 2>&1
echo "gen rc=$?"; grep -E "ERROR|done|budget" "$OUT/r43/hf_gen.log" | tail -4
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/r43/env_round43.txt" 2>&1
(cd "$OUT" && tar cf round43.tar -C r43 . && rm -rf r43)
ls -la "$OUT"
