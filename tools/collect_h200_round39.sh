#!/usr/bin/env bash
# Round 39 (device tool, kind nvidia-h200-x2): held-apart DDP training traces of transformers models
# over 2 H200s, both ranks (torchrun tools/bench_hf.py --set r39). Writes $OUT/round39.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round39}
mkdir -p "$OUT/r39"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; nvidia-smi topo -m; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } \
    > "$OUT/r39/env_round39.txt" 2>&1
timeout 400 $TORCHRUN --standalone --nproc_per_node 2 tools/bench_hf.py --set r39 --budget 300 --outdir "$OUT/r39" > "$OUT/r39/hf.log" 2>&1
echo "rc=$?"; grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/r39/hf.log" | tail -12
(cd "$OUT" && tar cf round39.tar -C r39 . && rm -rf r39)
ls -la "$OUT"
