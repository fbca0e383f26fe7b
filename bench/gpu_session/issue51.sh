#!/usr/bin/env bash
# Issue 51 in one device call: every GPU measurement it names, each stage under its own time limit, the results
# packed into $OUT/issue51.tgz plus $OUT/summary.txt before TOTAL_S runs out.
#   1. the loop's own train_step MFU, BERT-base MLM, seq 128, bf16 (bench/gpu_check.py bert_eager/bert_compiled/
#      phases), and nbkit's loop beside transformers.Trainer on the same model and batch
#      (bench/continued_pretraining.py --size base)
#   2. GPT-2 small: nbkit's loop beside Trainer, tokens/s and MFU (bench/causal_vs_trainer.py); the fused loss's
#      chunk sizes beside Liger-Kernel's fused linear cross-entropy (bench/fused_loss_chunks.py)
#   3. SFT: nbkit, TRL's SFTTrainer and nbkit with LoRA, tokens/s and peak GPU memory (bench/sft_vs_trl.py); LoRA
#      against full fine-tuning for a BERT classifier and GPT-2 (bench/lora.py)
#   4. the store feeding the GPU: the reader's blocks/s with the recipe's 4 workers beside the blocks/s stage 1's
#      nbkit arm consumed (bench/store_read.py --demand-json)
# Here, first:   BUNDLE=bench bench/gpu_session/build_bundle.sh
# On the device: run(command="bash bench/gpu_session/issue51.sh", carry=[".devbundle"], timeout_s=...)
# A CPU rehearsal (tiny sizes, minutes): PY=.venv/bin/python NO_BUNDLE=1 QUICK=1 bench/gpu_session/issue51.sh
# Then here: python bench/gpu_session/record51.py <files_at>  (the records into bench/results/, named by machine)
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/runs/issue51_out}
mkdir -p "$OUT"
TOTAL_S=${TOTAL_S:-450}
W=${WORK:-/tmp/issue51}
rm -rf "$W" && mkdir -p "$W/results"
. bench/gpu_session/common.sh
export NBKIT_RUNS_DIR="$W/runs"                     # one tokenizer for the causal and SFT benches
DAY=$(date +%Y-%m-%d)
R="$W/results"
DEV=cuda
if [ -n "${QUICK:-}" ]; then                        # CPU rehearsal: the same stages at tiny sizes
  DEV=cpu
  MLM="--size tiny --batch 4 --steps 3 --warmup 2"
  GPT="--model gpt2-tiny --batch 4 --steps 3 --warmup 2"
  FUSED="--rows 512 --dim 32 --vocab 2000 --chunks 128 256 --rounds 1 --calls 1"
  SFT="--model gpt2-tiny --batch 4 --steps 3 --warmup 2 --per-task 20 --ner-lines 400"
  LORA="--bert tiny --gpt gpt2-tiny --batch 4 --steps 3 --warmup 2"
  STORE="--lines 2000 --batches 4 --batch-size 16"
  CHECK="--quick --sections bert_eager phases"
  SLOW=${SLOW:-6}                                   # a 2-core CPU: every stage's limit x SLOW
else
  MLM="--size base --batch 64 --steps 30 --warmup 5"
  GPT="--model gpt2-small --batch 32 --steps 30 --warmup 5"
  FUSED="--dtype bf16 --rows 8192 --dim 768 --vocab 21128 --chunks 256 512 1024 2048 4096 --rounds 3 --calls 3"
  SFT="--model gpt2-small --batch 32 --steps 30 --warmup 5 --per-task 300"
  LORA="--bert base --gpt gpt2-small --batch 32 --steps 20 --warmup 3"
  STORE="--batches 40 --batch-size 128"
  CHECK="--sections bert_eager bert_compiled phases ablation_batch_size ablation_num_workers profile diagnosis"
fi
GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)
MACHINE="${MACHINE:-1 x ${GPU_NAME:-no GPU}, $(nproc) CPUs}"
# run NAME LIMIT_S CMD...: one stage, its log in $W/NAME.log, its exit code in $W/stages.txt; skipped when
# fewer than 20 s of the session are left, cut at LIMIT_S or at what is left
run() {
  local name=$1 limit=$(( $2 * ${SLOW:-1} )); shift 2
  local l; l=$(( $(left) - 20 ))
  if [ "$l" -lt 20 ]; then stage "$name: skipped, $(left) s left"; return; fi
  [ "$limit" -gt "$l" ] && limit=$l
  stage "$name (limit $limit s)"
  timeout "$limit" "$@" > "$W/$name.log" 2>&1
  echo "   rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$W/stages.txt"
}

stage "environment"
{ nvidia-smi || true; $PY -c "import torch, transformers, sys; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.is_available()); print('transformers', transformers.__version__)"
  $PY -c "import trl, peft, datasets; print('trl', trl.__version__, 'peft', peft.__version__)" || true
  $PY -c "import liger_kernel; print('liger-kernel imports')" || true; nproc; free -g; } > "$W/env.txt" 2>&1

run loop_mfu 210 $PY bench/gpu_check.py --out "$W/check" --budget-s $(( 200 * ${SLOW:-1} )) --no-pytest $CHECK
run mlm_vs_trainer 75 $PY bench/continued_pretraining.py --device $DEV --rounds 1 $MLM --work "$W/continued" \
    --machine "$MACHINE" --out "$R/continued_pretraining_${DEV}_$DAY.json"
run causal_vs_trainer 90 $PY bench/causal_vs_trainer.py --device $DEV --rounds 1 $GPT --work "$W/causal" \
    --machine "$MACHINE" --out "$R/causal_vs_trainer_${DEV}_$DAY.json"
run fused_loss 40 $PY bench/fused_loss_chunks.py --device $DEV $FUSED --machine "$MACHINE" \
    --out "$R/fused_loss_chunks_${DEV}_$DAY.json"
run sft_vs_trl 90 $PY bench/sft_vs_trl.py --device $DEV --rounds 1 $SFT --work "$W" --machine "$MACHINE" \
    --out "$R/sft_vs_trl_${DEV}_$DAY.json"
DEMAND=$(ls "$R"/continued_pretraining_*.json "$R"/causal_vs_trainer_*.json 2>/dev/null)   # what stages 1-2 consumed
run store_read 40 $PY bench/store_read.py --workers 4 $STORE ${DEMAND:+--demand-json $DEMAND} \
    --out "$R/store_read_${DEV}_$DAY.json"
run lora 60 $PY bench/lora.py --device $DEV --rounds 1 $LORA --machine "$MACHINE" --out "$R/lora_${DEV}_$DAY.json"

stage "pack"
cp "$W/check/results.json" "$R/gpu_check_${DEV}_$DAY.json" 2>/dev/null
{ echo "machine: $MACHINE"; cat "$W/stages.txt"; echo
  cat "$W/check/summary.txt" 2>/dev/null
  for f in mlm_vs_trainer causal_vs_trainer fused_loss sft_vs_trl store_read lora; do
    echo; echo "== $f"; tail -14 "$W/$f.log" 2>/dev/null; done; } > "$OUT/summary.txt"
tar czf "$OUT/issue51.tgz" -C "$W" results env.txt stages.txt $(cd "$W" && ls *.log) check/summary.txt 2>/dev/null
ls -la "$OUT"
cat "$OUT/summary.txt"
