#!/usr/bin/env bash
# Round 27 (device tool, kind nvidia-h200): profiled torch.compile training steps beside the same models'
# eager steps (tools/bench_compiled_steps.py; see its docstring). Writes $OUT/round27.tar: the traces,
# r27_models.json, compiled_steps.log, env_round27.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round27}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round27.txt" 2>&1
timeout 500 $PY tools/bench_compiled_steps.py --budget 420 --outdir "$OUT/r27" > "$OUT/compiled_steps.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/compiled_steps.log" | tail -20
(cd "$OUT" && mv r27/* . && rmdir r27 && tar cf round27.tar --remove-files $(ls | grep -v round27.tar))
ls -la "$OUT"
