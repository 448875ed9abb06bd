#!/usr/bin/env bash
# Round 93 (device tool, kind nvidia-h200, stop 24): a static-cache decode layer's attention eager and compiled
# (tools/bench_attention_compiled.py): the cuDNN kernel torch.compile's CUDA graphs run for round 91's shapes and a grid
# around them. Writes to $OUT: attention_compiled.csv.gz, attention_compiled.log, env_round93.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round93}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$OUT/env_round93.txt" 2>&1
timeout 60 $PY tools/bench_attention_compiled.py --smoke --out /tmp/r93_smoke.csv > "$OUT/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/smoke.log"
timeout 420 $PY tools/bench_attention_compiled.py --budget 300 --out "$OUT/attention_compiled.csv" > "$OUT/attention_compiled.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/attention_compiled.csv"
grep -E "ERROR|Traceback|skip|budget" "$OUT/attention_compiled.log" | head -20
grep -E "eager|compiled" "$OUT/attention_compiled.log" | cut -c1-160
ls -la "$OUT"
