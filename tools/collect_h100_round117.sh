#!/usr/bin/env bash
# Round 117 (device tool, kind nvidia-h100-x1): the first runs on an H100 SXM, every one the twin of an
# H200 run already committed, none fitted: simcore's H200 calibration transferred to the H100 (efficiencies
# kept, the H100's peaks, bandwidth and power used) is judged on them, and `simcore replay` of each H200 twin
# onto the H100 is compared with the H100's own trace.
#  (1) tools/bench_ops.py: the op sweep of round 1 (GEMM, attention, memory-bound, optimizer, launch);
#  (2) tools/bench_steps.py: round 1's 22 training steps, 18 prefills, 44 decode steps and its three
#      4-layer profiler traces;
#  (3) tools/bench_steps.py --only profiles: round 16's full-size profiled steps (GPT-2 small 8 x 1024 and
#      Llama-1B-like 4 x 2048 eager, Llama-1B-like prefill 8 x 1024 + 8 decode steps);
#  (4) tools/bench_hf.py --set h100_twins: transformers runs of earlier held-apart rounds (scenarios written
#      before the call: tests/data/pending_scenarios/h100_r117_*.yaml).
# `nvidia-smi dmon` runs throughout (SM clock and power during each section).
# Writes $OUT/round117.tar.part_* (files from $OUT are at most 16 MiB):
#   mkdir -p traces/h100/round117 && cat round117.tar.part_* | tar xf - -C traces/h100/round117
# bash tools/collect_h100_round117.sh [PARTS]   PARTS: comma list of ops,steps,profiles,hf (default all)
set -u
OUT=${OUT:-/tmp/simcore_out_round117}
W=/tmp/r117
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
PARTS=${1:-ops,steps,profiles,hf}
has() { [[ ",$PARTS," == *",$1,"* ]]; }
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK"; nvidia-smi -q -d CLOCK
  echo "### nvidia-smi -q -d PERFORMANCE,POWER"; nvidia-smi -q -d PERFORMANCE,POWER
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  $PY -c "import transformers; print('transformers', transformers.__version__)"
  nproc; lscpu | grep -E "Model name|MHz" || true
} > "$W/env.txt" 2>&1
grep -E "H100|Power Limit|^torch" "$W/env.txt" | head -6
nvidia-smi dmon -s pucm -d 2 -o T > "$W/dmon.txt" 2>&1 &
DMON=$!
t0=$(date +%s)
if has ops; then
  timeout 200 $PY tools/bench_ops.py $SM --out "$W/ops.csv" --budget 150 --env-json "$W/ops_env.json" > "$W/ops.log" 2>&1
  echo "ops rc=$? at +$(( $(date +%s) - t0 ))s"; tail -2 "$W/ops.log"
  gzip -9 -f "$W/ops.csv"
fi
if has steps; then
  timeout 230 $PY tools/bench_steps.py $SM --out "$W/steps.csv" --budget 190 --configs-json "$W/steps_configs.json" \
      --profile-dir "$W" > "$W/steps.log" 2>&1
  echo "steps rc=$? at +$(( $(date +%s) - t0 ))s"; grep -E "ERROR|OOM|done" "$W/steps.log" | tail -4
  gzip -9 -f "$W/steps.csv"
fi
if has profiles; then
  timeout 120 $PY tools/bench_steps.py $SM --only profiles --budget 90 --out "$W/profiles_unused.csv" \
      --profile-names gpt-125m,llama-1b --profile-infer llama-1b-infer:8:1024 --profile-dir "$W" \
      --configs-json "$W/profiles_configs.json" > "$W/profiles.log" 2>&1
  echo "profiles rc=$? at +$(( $(date +%s) - t0 ))s"; grep -E "trace |ERROR|OOM" "$W/profiles.log" | tail -8
  rm -f "$W/profiles_unused.csv"
fi
if has hf; then
  left=$(( 540 - ($(date +%s) - t0) ))
  [ $left -gt 200 ] && left=200
  timeout $((left + 40)) $PY tools/bench_hf.py --set h100_twins --budget "$left" --outdir "$W" \
      $SM > "$W/hf.log" 2>&1
  echo "hf rc=$? at +$(( $(date +%s) - t0 ))s"; grep -E "ERROR|Traceback|: [0-9.]+ s|budget" "$W/hf.log" | tail -12
fi
kill $DMON 2>/dev/null
(cd "$W" && tar cf "$OUT/round117.tar" . ) && (cd "$OUT" && split -b 15M round117.tar round117.tar.part_ && rm round117.tar)
ls -la "$OUT"
