#!/usr/bin/env bash
# Round 40 (device tool, kind nvidia-h200): cuDNN attention beside FlashAttention-2 (tools/bench_attention.py,
# with which backend an unforced call picks) and four held-apart traces of simcore's own models with
# PyTorch's default attention backend (tools/bench_host_steps.py --set r40). Writes $OUT/round40.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round40}
mkdir -p "$OUT/r40"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
cd "$(dirname "$0")/.."
timeout 60 $PY tools/bench_attention.py --smoke --out /tmp/attn_smoke.csv > "$OUT/r40/attention_smoke.log" 2>&1 || echo "smoke failed"
tail -3 "$OUT/r40/attention_smoke.log"
timeout 270 $PY tools/bench_attention.py --budget 230 --out "$OUT/r40/attention.csv" --choice "$OUT/r40/sdpa_choice.csv" > "$OUT/r40/attention.log" 2>&1
echo "attention rc=$?"; grep -c skip "$OUT/r40/attention.log"; tail -3 "$OUT/r40/attention.log"
gzip -9 "$OUT"/r40/*.csv
SIMCORE_SDPA=default timeout 220 $PY tools/bench_host_steps.py --set r40 --passes 1 --budget 180 --outdir "$OUT/r40" > "$OUT/r40/steps.log" 2>&1
echo "steps rc=$?"; grep -E "ERROR|done|MB in" "$OUT/r40/steps.log" | tail -8
{ date -u; nvidia-smi; $PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$OUT/r40/env_round40.txt" 2>&1
(cd "$OUT" && tar cf round40.tar -C r40 . && rm -rf r40)
ls -la "$OUT"
