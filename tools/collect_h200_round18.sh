#!/usr/bin/env bash
# Round 18 (device tool, kind nvidia-h200): the GEMMs of the round-16 profiler traces re-timed alone
# (tools/bench_trace_gemms.py): back to back, at ~50 % GEMM duty, beside their in-trace kernel time.
# Writes to $OUT (committed under traces/h200/round18/): trace_gemms.csv.gz, trace_gemms.log, trace_gemms.dmon.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round18}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
nvidia-smi dmon -s pucm -d 1 > "$OUT/trace_gemms.dmon.txt" 2>&1 &
DMON=$!
timeout 300 $PY tools/bench_trace_gemms.py --top 8 --out "$OUT/trace_gemms.csv" \
    traces/h200/profile_train_llama-1b_s2048_b4_eager.json.gz traces/h200/profile_train_gpt-125m_s1024_b8_eager.json.gz \
    traces/h200/profile_infer_llama-1b-infer_b8_p1024.json.gz traces/h200/profile_train_gpt_gelu_ln.json.gz \
    > "$OUT/trace_gemms.log" 2>&1
echo "rc=$?"
kill $DMON 2>/dev/null
gzip -9 -f "$OUT/trace_gemms.csv"
tail -40 "$OUT/trace_gemms.log"
