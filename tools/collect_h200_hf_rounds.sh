#!/usr/bin/env bash
# Rounds of transformers runs on the device tool (kind nvidia-h200), one tools/bench_hf.py set each, in one call:
#   bash tools/collect_h200_hf_rounds.sh ROUND:SET[:BUDGET_S] ...
# e.g. rounds 100 (SET static_fit2: fit) and 101 (r101: held apart, scenarios in tests/data/pending_scenarios committed
# before the call): bash tools/collect_h200_hf_rounds.sh 100:static_fit2:200 101:r101:160
# A smoke run of the first set goes first. Writes $OUT/roundROUND.tar.part_* for each round (files come back from $OUT
# at most 16 MiB each): cat roundROUND.tar.part_* | tar xf - -C traces/h200/roundROUND. Rounds up to 99 were
# collected by per-round copies of these lines (tools/collect_h200_round*.sh, collect_h200_hf_user.sh).
set -u
OUT=${OUT:-/tmp/simcore_out_hf_rounds}
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
first=${1%%:*}; rest=${1#*:}; firstset=${rest%%:*}
# SMOKE=0 leaves the smoke run out (a set of compiled runs, whose CPU smoke compiles each model, needs the time)
if [ "${SMOKE:-1}" = 1 ]; then
  timeout 150 $PY tools/bench_hf.py --set "$firstset" --smoke --outdir "/tmp/r${first}_smoke_hf" > "/tmp/r${first}_smoke_hf.log" 2>&1 || echo "hf smoke failed"
else
  echo "smoke run left out (SMOKE=0)" > "/tmp/r${first}_smoke_hf.log"
fi
grep -E "ERROR|done" "/tmp/r${first}_smoke_hf.log" | tail -4
for spec in "$@"; do
  R=${spec%%:*}; rest=${spec#*:}; SET=${rest%%:*}; B=${rest#*:}; [ "$B" = "$rest" ] && B=200
  mkdir -p "$OUT/r$R"
  cp "/tmp/r${first}_smoke_hf.log" "$OUT/r$R/smoke_hf.log"
  { date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"; nproc; } > "$OUT/r$R/env_round$R.txt" 2>&1
  timeout $((B + 90)) $PY tools/bench_hf.py --set "$SET" --budget "$B" --outdir "$OUT/r$R" > "$OUT/r$R/hf.log" 2>&1
  echo "r$R ($SET) rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r$R/hf.log" | tail -10
  (cd "$OUT" && tar cf "round$R.tar" -C "r$R" . && rm -rf "r$R" && split -b 15M "round$R.tar" "round$R.tar.part_" && rm "round$R.tar")
done
ls -la "$OUT"
