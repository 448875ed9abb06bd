#!/usr/bin/env bash
# Round 22 (device tool, kind nvidia-h200-x2): held-apart profiler traces of full-size distributed and
# single-GPU steps, for simcore validate (nothing is fitted to them):
#  (1) DDP over 2 H200s, GPT-2-small shape (12 x 768, seq 1024, micro-batch 8 per rank), both ranks;
#  (2) FSDP2 and (3) tensor parallel 2 of a Llama-3.2-1B-like model cut to 8 layers (h 2048, 32 heads,
#      8 KV heads, SwiGLU 8192, RMSNorm, vocab 32000; seq 2048, micro-batch 2), rank 0;
#  (4) the 4-layer DDP step of round 2 again, both ranks (is round 2's host-bound backward typical?);
#  (5) single GPU: Llama-1B-like training with full recompute (eager and torch.compile) and a
#      Llama-3.2-3B-shaped prefill (1 x 2048) + 8 decode steps at batch 1.
# Same recipe as earlier rounds (tools/bench_parallel.py, tools/bench_steps.py: fp32 params + autocast bf16,
# fused AdamW; profiler CPU+CUDA, record_shapes=True; ProfilerStep#2 and #3 active).
# Writes $OUT/round22.tar: env_round22.txt, profile_*.json.gz, parallel.log, steps.log.
set -u
OUT=${OUT:-/tmp/simcore_out_round22}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
SM=${SMOKE:+--smoke}
cd "$(dirname "$0")/.."
{
  echo "### date"; date -u
  echo "### nvidia-smi"; nvidia-smi
  echo "### versions"
  $PY -c "import sys, torch; print('python', sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nproc; lscpu | grep -E "Model name|MHz" || true
} > "$OUT/env_round22.txt" 2>&1
GPT125=layers=12,hidden=768,heads=12,seq=1024,mb=8
LLAMA8=layers=8,hidden=2048,heads=32,kv_heads=8,ffn_hidden=8192,vocab=32000,activation=swiglu,norm=rmsnorm,seq=2048,mb=2
par() {  # strategy model tag extra-args...
  local s=$1 m=$2 tag=$3; shift 3
  timeout 110 $TORCHRUN --nproc_per_node=2 tools/bench_parallel.py $SM --out "$OUT/unused.csv" --only "" \
      --profile-dir "$OUT" --profile-strategies "$s" --profile-model "$m" --profile-tag "$tag" "$@" \
      >> "$OUT/parallel.log" 2>&1
  echo "parallel $s$tag rc=$?"
}
PARTS=${PARTS:-ddp,fsdp,tp,ddp4,steps}  # a subset reruns only those parts
has() { [[ ",$PARTS," == *",$1,"* ]]; }
has ddp && par ddp "$GPT125" _gpt125m --profile-all-ranks
has fsdp && par fsdp "$LLAMA8" _llama8l
has tp && par tp "$LLAMA8" _llama8l
has ddp4 && par ddp layers=4,hidden=1024,heads=16,seq=1024,mb=4 _4l --profile-all-ranks
rm -f "$OUT/unused.csv"
grep -E "trace |ERROR|Traceback" "$OUT/parallel.log" | head -20
has steps && timeout 160 $PY tools/bench_steps.py $SM --compile --only profiles --budget 130 --out "$OUT/steps_unused.csv" \
    --profile-names llama-1b-full --profile-infer llama-3b-infer:1:2048 --profile-dir "$OUT" \
    --configs-json "$OUT/profiles_configs.json" > "$OUT/steps.log" 2>&1
echo "steps rc=$?"
rm -f "$OUT/steps_unused.csv"
grep -E "trace |ERROR|OOM|Traceback" "$OUT/steps.log" | head -20
ls -la "$OUT"
# the device tool brings back a few files per call: one tar holds them all
(cd "$OUT" && tar cf round22.tar --remove-files $(ls | grep -v round22.tar))
