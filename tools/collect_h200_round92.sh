#!/usr/bin/env bash
# Round 92 (device tool, kind nvidia-h200, stop 24): cuDNN attention at short sequences over many sequences and heads
# (tools/bench_attention.py --set short): a static cache's masked one-query decode (keys and values repeated to every
# head, or grouped) and short causal prompts, the shapes of round 91's large-batch generate() runs. Writes to $OUT:
# attention_short.csv.gz, attention_short.log, env_round92.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round92}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$OUT/env_round92.txt" 2>&1
timeout 60 $PY tools/bench_attention.py --set short --smoke --out /tmp/r92_smoke.csv > "$OUT/smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/smoke.log"
timeout 420 $PY tools/bench_attention.py --set short --budget 330 --out "$OUT/attention_short.csv" > "$OUT/attention_short.log" 2>&1
echo "rc=$?"
gzip -9 -f "$OUT/attention_short.csv"
grep -E "ERROR|Traceback|skip|budget" "$OUT/attention_short.log" | head -20
tail -5 "$OUT/attention_short.log"
ls -la "$OUT"
