#!/usr/bin/env bash
# Round 26 (device tool, kind nvidia-h200): CUDA-graph decode loops, the cost of a synchronize every R
# replays and the device idle between a replay's kernels (tools/bench_graph_sync.py; see its docstring).
# Writes $OUT/round26.tar: graph_sync.csv.gz, graph_*.json.gz, graph_sync.log, env_round26.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round26}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__)"; nproc; lscpu | grep -E "Model name|MHz" || true; } \
    > "$OUT/env_round26.txt" 2>&1
timeout 60 $PY tools/bench_graph_sync.py --smoke --outdir /tmp/r26_smoke > "$OUT/smoke.log" 2>&1
echo "smoke rc=$?"; tail -3 "$OUT/smoke.log"
timeout 400 $PY tools/bench_graph_sync.py --outdir "$OUT/r26" > "$OUT/graph_sync.log" 2>&1
echo "rc=$?"
grep -E "ERROR|Traceback|Error|done|bb" "$OUT/graph_sync.log" | tail -20
(cd "$OUT" && mv r26/* . && rmdir r26 && gzip -9 -f graph_sync.csv && tar cf round26.tar --remove-files $(ls | grep -v round26.tar))
ls -la "$OUT"
