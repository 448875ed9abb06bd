#!/usr/bin/env bash
# One round of transformers runs and users' decode loops on the device tool (kind nvidia-h200):
#   bash tools/collect_h200_hf_user.sh ROUND SET
# runs tools/bench_user_infer.py --set SET and tools/bench_hf.py --set SET (a smoke run of each first) and writes
# $OUT/roundROUND.tar.part_* (files come back from $OUT at most 16 MiB each: cat roundROUND.tar.part_* > x.tar).
# Rounds 80 (SET sample_fit: fit traces, each sampler beside greedy), 81 (r81: held-apart sampling after
# profile.EXTRA_LAUNCH_OPS) and 82 (r82: held apart after host_trace.PROBE_WINDOW) were collected by per-round copies
# of these lines (collect_h200_round8{0,1,2}.sh, in git history up to 831ee40), now this one script.
set -u
R=${1:?round number}; SET=${2:?set name}
OUT=${OUT:-/tmp/simcore_out_round$R}
mkdir -p "$OUT/r$R"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; nproc; } > "$OUT/r$R/env_round$R.txt" 2>&1
timeout 100 $PY tools/bench_user_infer.py --set "$SET" --smoke --outdir "/tmp/r${R}_smoke" > "$OUT/r$R/smoke_user.log" 2>&1 || echo "user smoke failed"
tail -2 "$OUT/r$R/smoke_user.log"
timeout 150 $PY tools/bench_hf.py --set "$SET" --smoke --outdir "/tmp/r${R}_smoke_hf" > "$OUT/r$R/smoke_hf.log" 2>&1 || echo "hf smoke failed"
grep -E "ERROR|done" "$OUT/r$R/smoke_hf.log" | tail -8
timeout 150 $PY tools/bench_user_infer.py --set "$SET" --budget 100 --outdir "$OUT/r$R" > "$OUT/r$R/user.log" 2>&1
echo "user rc=$?"; grep -E "Error|Traceback|params|done|budget" "$OUT/r$R/user.log" | tail -6
timeout 300 $PY tools/bench_hf.py --set "$SET" --budget 240 --outdir "$OUT/r$R" > "$OUT/r$R/hf.log" 2>&1
echo "hf rc=$?"; grep -E "ERROR|Traceback|: [0-9.]+ s|done|budget" "$OUT/r$R/hf.log" | tail -10
(cd "$OUT" && tar cf "round$R.tar" -C "r$R" . && rm -rf "r$R" && split -b 15M "round$R.tar" "round$R.tar.part_" && rm "round$R.tar")
ls -la "$OUT"
