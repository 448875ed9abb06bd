#!/usr/bin/env bash
# Round 13 (device tool, kind nvidia-h200): training steps under torch.compile (default mode, inductor)
# next to the same steps in eager PyTorch, in one process (tools/bench_steps.py --compile), and two
# profiled compiled training steps of the 4-layer models of the committed eager traces.
# Writes to $OUT: env_round13.txt, compiled_steps.csv.gz, compiled_steps.log, compiled_steps.dmon.txt,
# profile_train_*_compiled.json.gz.
set -u
OUT=${OUT:-/tmp/simcore_out_round13}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
BUDGET=${BUDGET:-470}
NAMES=${NAMES:-gpt-125m,gpt-125m-swiglu-rms,gpt-350m,llama-1b,gpt-1.3b,llama-1b-sel,gpt-350m-full,gpt-760m}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### versions"
  $PY -c "import sys, torch, triton; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  nproc
} > "$OUT/env_round13.txt" 2>&1
nvidia-smi dmon -s pucm -d 2 > "$OUT/compiled_steps.dmon.txt" 2>&1 &
DMON=$!
timeout $(( BUDGET + 60 )) $PY tools/bench_steps.py $SM --compile --only profiles,train --names "$NAMES" \
    --budget "$BUDGET" --out "$OUT/compiled_steps.csv" --profile-dir "$OUT" > "$OUT/compiled_steps.log" 2>&1
echo "bench_steps rc=$?"
kill $DMON 2>/dev/null
gzip -9 -f "$OUT/compiled_steps.csv"
grep -E "train |compiled |trace |ERROR|OOM" "$OUT/compiled_steps.log" | head -40
ls -la "$OUT"
