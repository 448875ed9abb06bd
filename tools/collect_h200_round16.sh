#!/usr/bin/env bash
# Round 16 (device tool, kind nvidia-h200): (1) host time per layer of compiled and eager training
# layers at three widths (tools/bench_compiled_host.py --widths; GPU-trivial width 64 as in round 14,
# and h 768 / 1536 whose host calls are timed with the device synchronized between steps);
# (2) held-apart profiler traces of full-size single-GPU steps (tools/bench_steps.py --profile-names):
# gpt-125m and llama-1b training, eager and torch.compile, and a llama-1b-shaped prefill + 8 decode
# steps at batch 8. Nothing here is fitted to the traces; they are for simcore validate.
# Writes to $OUT: env_round16.txt, host_compiled_widths.csv.gz (+ .log), profile_*.json.gz, profiles.log.
set -u
OUT=${OUT:-/tmp/simcore_out_round16}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### versions"
  $PY -c "import sys, torch, triton; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  nproc; lscpu | grep -E "Model name|MHz" || true
} > "$OUT/env_round16.txt" 2>&1
timeout 280 $PY tools/bench_compiled_host.py $SM --passes 6 --budget 200 --widths 64:64:1,768:512:4,1536:1024:2 \
    --out "$OUT/host_compiled_widths.csv" > "$OUT/host_compiled_widths.log" 2>&1
echo "compiled_host rc=$?"
gzip -9 -f "$OUT/host_compiled_widths.csv"
grep -E "ready|kernels|ERROR|Traceback|done" "$OUT/host_compiled_widths.log" | tail -30
timeout 250 $PY tools/bench_steps.py $SM --compile --only profiles --budget 210 --out "$OUT/profiles_unused.csv" \
    --profile-names gpt-125m,llama-1b --profile-infer llama-1b-infer:8:1024 --profile-dir "$OUT" \
    --configs-json "$OUT/profiles_configs.json" > "$OUT/profiles.log" 2>&1
echo "profiles rc=$?"
rm -f "$OUT/profiles_unused.csv"
grep -E "trace |ERROR|OOM|Traceback" "$OUT/profiles.log" | head -20
ls -la "$OUT"
