#!/usr/bin/env bash
# Round 118 (device tool, kind nvidia-h100-x1): the H200 profile's calibration inputs measured again on an H100 SXM
# (the sweeps of rounds 8, 36, 40, 49, 59-60, 72, 92 and 96, same scripts and options), so that
# `simcore calibrate` fits an H100 profile the way the shipped H200 one was fitted; and the three transformers twins
# round 117's budget left out (tools/bench_hf.py --set h100_twins_rest; scenarios written before round 117).
# `nvidia-smi dmon` runs throughout. Writes $OUT/round118.tar.part_*:
#   mkdir -p traces/h100/round118 && cat round118.tar.part_* | tar xf - -C traces/h100/round118
# (the hf_*.json.gz traces and r117b_runs.json then move to traces/h100/round117/, where their scenarios point)
set -u
OUT=${OUT:-/tmp/simcore_out_round118}
W=/tmp/r118
mkdir -p "$OUT" "$W/hf"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -q -d CLOCK,PERFORMANCE,POWER"; nvidia-smi -q -d CLOCK,PERFORMANCE,POWER
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  nproc; lscpu | grep -E "Model name|MHz" || true
} > "$W/env.txt" 2>&1
nvidia-smi dmon -s pucm -d 2 -o T > "$W/dmon.txt" 2>&1 &
DMON=$!
t0=$(date +%s)
step() {  # name timeout command...
  local n=$1 to=$2; shift 2
  timeout "$to" "$@" > "$W/$n.log" 2>&1
  echo "$n rc=$? at +$(( $(date +%s) - t0 ))s: $(tail -1 "$W/$n.log" | cut -c1-120)"
}
step cold 150 $PY tools/bench_cold.py $SM --budget 100 --out "$W/cold.csv"
step elementwise 120 $PY tools/bench_elementwise.py $SM --out "$W/elementwise.csv" --ref "$W/elementwise_plain.csv"
step attention 110 $PY tools/bench_attention.py $SM --budget 70 --out "$W/attention.csv" --choice "$W/sdpa_choice.csv"
step gemm_align 90 $PY tools/bench_gemm_align.py $SM --out "$W/gemm_align.csv"
step eager_ops 100 $PY tools/bench_eager_ops.py $SM --budget 70 --out "$W/eager_ops.csv"
step attention_efficient 80 $PY tools/bench_attention.py $SM --set efficient --budget 50 --out "$W/attention_efficient.csv"
step optimizer 70 $PY tools/bench_optimizer.py $SM --budget 40 --out "$W/optimizer_bf16.csv"
step embedding_bwd 70 $PY tools/bench_embedding_bwd.py $SM --budget 40 --out "$W/embedding_bwd.csv"
step attention_short 80 $PY tools/bench_attention.py $SM --set short --budget 50 --out "$W/attention_short.csv"
step attention_kvlen 80 $PY tools/bench_attention.py $SM --set kvlen --budget 50 --out "$W/attention_kvlen.csv"
for f in "$W"/*.csv; do gzip -9 -f "$f"; done
left=$(( 560 - ($(date +%s) - t0) ))
[ $left -gt 220 ] && left=220
if [ $left -gt 60 ]; then
  timeout $((left + 20)) $PY tools/bench_hf.py $SM --set h100_twins_rest --label r117b --budget "$((left - 40))" \
      --outdir "$W/hf" > "$W/hf/hf.log" 2>&1
  echo "hf rc=$? at +$(( $(date +%s) - t0 ))s"; grep -E "ERROR|Traceback|: [0-9.]+ s|budget" "$W/hf/hf.log" | tail -6
fi
kill $DMON 2>/dev/null
(cd "$W" && tar cf "$OUT/round118.tar" . ) && (cd "$OUT" && split -b 15M round118.tar round118.tar.part_ && rm round118.tar)
ls -la "$OUT"
