#!/usr/bin/env bash
# Round 95 (device tool, kind nvidia-h200, stop 25): what a large-batch compiled static-cache generate() does
# (tools/bench_generate_insitu.py): the CUDA graphs each call captures at batches 8-1024, and round 91's decode
# attention in situ (its captured inputs alone, between GEMMs, with SM clock and power sampled). Writes to $OUT:
# rerecord.jsonl, rerecord.log (with TORCH_LOGS=cudagraphs), sdpa_insitu.csv.gz, sdpa_inputs.json, sdpa.log,
# env_round95.txt.
set -u
OUT=${OUT:-/tmp/simcore_out_round95}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)"; } > "$OUT/env_round95.txt" 2>&1
timeout 90 $PY tools/bench_generate_insitu.py --part sdpa --smoke --outdir /tmp/r95_smoke > "$OUT/smoke.log" 2>&1 || echo "smoke failed"
tail -4 "$OUT/smoke.log"
timeout 200 $PY tools/bench_generate_insitu.py --part sdpa --outdir "$OUT" > "$OUT/sdpa.log" 2>&1
echo "sdpa rc=$?"
gzip -9 -f "$OUT/sdpa_insitu.csv"
grep -vE "^\s*$" "$OUT/sdpa.log" | grep -E "us over|captured|skip|Error|Traceback" | cut -c1-400
TORCH_LOGS=cudagraphs timeout 300 $PY tools/bench_generate_insitu.py --part rerecord --outdir "$OUT" > "$OUT/rerecord_full.log" 2>&1
echo "rerecord rc=$?"
grep -E "captures|skip|Error" "$OUT/rerecord_full.log" | cut -c1-300
head -c 400000 "$OUT/rerecord_full.log" > "$OUT/rerecord.log"; rm -f "$OUT/rerecord_full.log"
grep -iE "record|reason" "$OUT/rerecord.log" | sort | uniq -c | sort -rn | head -20 | cut -c1-300
ls -la "$OUT"
