#!/usr/bin/env bash
# Round 30 (device tool, kind nvidia-h200): profiled torch.compile training steps beside the same models'
# eager steps (tools/bench_compiled_steps.py; see its docstring). Writes $OUT/round30.tar: the traces,
# r30_models.json, compiled_steps.log, env_round30.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round30}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round30.txt" 2>&1
timeout 500 $PY tools/bench_compiled_steps.py --set r30 --budget 420 --outdir "$OUT/r30" > "$OUT/compiled_steps.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/compiled_steps.log" | tail -20
(cd "$OUT" && mv r30/* . && rmdir r30 && tar cf round30.tar --remove-files $(ls | grep -v round30.tar))
ls -la "$OUT"
