#!/usr/bin/env bash
# bench/pretrain_value.py on one GPU at the gpu preset's recipe (BERT L4/H256, DAPT on the training
# reviews, block 128 x batch 128, lr 1e-3; fine-tune mean pooling, 128 tokens, 2 epochs, lr 5e-4),
# every arm in its own process so the GPU is shared: the random-init arm (3 seeds) runs while MLM
# pretrains; then each checkpoint x seed fine-tunes side by side; then the report. In the background,
# notebooks 01-03 run at gpu scale (NOTEBOOKS="" to skip). Results: $OUT/pv_report.txt, $OUT/pv_gpu.tgz.
#   on the device:  TOKENIZER=.devbundle/pv_tokenizer bench/gpu_session/pretrain_value.sh
#   CPU smoke test: PY=.venv/bin/python NO_BUNDLE=1 SAVE=4,8 PV_EXTRA="--model tiny --ft-epochs 0.05" \
#                   NOTEBOOKS= bench/gpu_session/pretrain_value.sh
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/runs/pv_gpu_out}; mkdir -p "$OUT"
TOTAL_S=${TOTAL_S:-235}
PRETRAIN_S=${PRETRAIN_S:-120}
W=${WORK:-/tmp/pv_gpu}; rm -rf "$W"; mkdir -p "$W"
. bench/gpu_session/common.sh
TOK=${TOKENIZER:-$W/tokenizer}
PV="$PY bench/pretrain_value.py --device ${DEVICE:-auto} --tokenizer $TOK --out $W/pv --scale gpu --positions 128
    --corpus reviews ${PV_EXTRA:-}"   # the gpu recipes (nbkit.recipes): flags left out keep the preset's values
NOTEBOOKS=${NOTEBOOKS-01 02 03}
if [ -n "$NOTEBOOKS" ]; then
  stage "notebooks $NOTEBOOKS at gpu scale (background)"
  (NBKIT_RUNS_DIR="$W/runs" timeout $(( TOTAL_S - 20 )) $PY -m nbkit.cli.main run-notebooks --scale gpu \
      --only $NOTEBOOKS > "$W/notebooks.log" 2>&1; echo "rc=$?" >> "$W/notebooks.log") &
fi
if [ ! -f "$TOK/tokenizer.json" ]; then stage "tokenizer"
  $PY -c "import sys; sys.argv=['x']; sys.path.insert(0,'bench'); import pretrain_value as p, pathlib; \
p.get_tokenizer(pathlib.Path('$TOK'), 8000, 128)"; fi
stage "random-init arm, seeds 0 1 2 (background)"
for s in 0 1 2; do timeout $(( TOTAL_S - 30 )) $PV finetune --init random --seeds $s > "$W/ft_random_$s.log" 2>&1 & done
stage "MLM pretraining (<= $PRETRAIN_S s)"
timeout "$PRETRAIN_S" $PV pretrain --save-steps "${SAVE:-750,1500,3000,6000}" > "$W/pretrain.log" 2>&1
stage "fine-tune from each checkpoint x seeds 0 1 2"
for d in "$W"/pv/checkpoints/step-*; do
  [ -f "$d/config.json" ] || continue
  for s in 0 1 2; do
    timeout $(( $(left) - 30 )) $PV finetune --init "$d" --seeds $s > "$W/ft_$(basename "$d")_$s.log" 2>&1 &
  done
done
wait
stage "report"
timeout $(( $(left) > 10 ? $(left) : 10 )) $PV report > "$W/report.txt" 2>&1
cp "$W/report.txt" "$OUT/pv_report.txt"; cp "$W/pv/stats.json" "$OUT/pv_stats.json" 2>/dev/null
cp "$W/pretrain.log" "$OUT/" 2>/dev/null; cp "$W/notebooks.log" "$OUT/" 2>/dev/null
tar czf "$OUT/pv_gpu.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='*.arrow' \
    --exclude='*.pkl' --exclude='*.pickle' .
stage "done"
cat "$W/stages.txt"; cat "$W/pretrain.log" | tail -15; cat "$W/report.txt"; tail -12 "$W/notebooks.log" 2>/dev/null
