#!/usr/bin/env bash
# Round 68 (device tool, kind nvidia-h200-x2): held-apart DDP training traces of transformers models after round 65 (stop 19)
# over 2 H200s, both ranks (torchrun tools/bench_hf.py --set r68). Writes $OUT/round68.tar.
set -u
OUT=${OUT:-/tmp/simcore_out_round68}
mkdir -p "$OUT/r68"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
cd "$(dirname "$0")/.."
{ date -u; nvidia-smi; nvidia-smi topo -m; $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } \
    > "$OUT/r68/env_round68.txt" 2>&1
timeout 400 $TORCHRUN --standalone --nproc_per_node 2 tools/bench_hf.py --set r68 --budget 300 --outdir "$OUT/r68" > "$OUT/r68/hf.log" 2>&1
echo "rc=$?"; grep -E "ERROR|Traceback|Error|done|budget| s$" "$OUT/r68/hf.log" | tail -12
(cd "$OUT" && tar cf round68.tar -C r68 . && rm -rf r68)
ls -la "$OUT"
