#!/usr/bin/env bash
# One device call runs the GPU tests, NVML, gpu_check and the notebooks at gpu scale, and packs the results into $OUT/gpu_session.tgz
# (plus the headline files beside it). Stages run in order, each under its own time limit, so the
# packing at the end always happens inside TOTAL_S:
#   1. pytest -m gpu on the files that hold GPU tests
#   2. bench/bench_nvml.py: one NVML sample vs one nvidia-smi call; training with the 1 s monitor vs without
#   3. bench/gpu_check.py: matmul/SDPA/H2D, BERT-base MLM tokens/s and MFU (eager, compiled), ablations, profile
#   4. the notebooks at gpu scale, headless (nbkit run-notebooks --scale gpu)
# Usage on the device:  bench/gpu_session/run.sh      (after bench/gpu_session/build_bundle.sh here)
# On a CPU machine:     PY=.venv/bin/python QUICK=1 SCALE=smoke bench/gpu_session/run.sh
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/runs/gpu_session_out}
mkdir -p "$OUT"
TOTAL_S=${TOTAL_S:-560}
SCALE=${SCALE:-gpu}
W=${WORK:-/tmp/gpu_session}
rm -rf "$W" && mkdir -p "$W"

. bench/gpu_session/common.sh
stage "environment"
{ nvidia-smi || true; $PY -c "import torch, transformers, tokenizers, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available()); print('transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"; nproc; free -g; } > "$W/env.txt" 2>&1
$PY -m nbkit.cli.main doctor > "$W/doctor.txt" 2>&1

stage "pytest -m gpu"
GPU_FILES=$(grep -l "pytest.mark.gpu" tests/test_*.py | tr '\n' ' ')
timeout $(( $(left) < 150 ? $(left) : 150 )) $PY -m pytest -m gpu $GPU_FILES -q -rA -p no:cacheprovider \
    -o addopts="" > "$W/pytest_gpu.txt" 2>&1; echo "rc=$?" >> "$W/pytest_gpu.txt"

stage "bench_nvml"
timeout 70 $PY bench/bench_nvml.py --runs 3 --seconds ${NVML_SECONDS:-4} > "$W/bench_nvml.txt" 2>&1

stage "gpu_check"
CHECK_S=${CHECK_S:-200}
timeout $(( CHECK_S + 40 )) $PY bench/gpu_check.py --out "$W/check" --budget-s "$CHECK_S" --no-pytest \
    ${QUICK:+--quick} > "$W/gpu_check.log" 2>&1

stage "notebooks at $SCALE scale ($(left) s left)"
NB_S=$(( $(left) - 25 ))
if [ "$NB_S" -gt 30 ]; then
  NBKIT_RUNS_DIR="$W/runs" timeout "$NB_S" $PY -m nbkit.cli.main run-notebooks --scale "$SCALE" \
      --only ${NOTEBOOKS:-00 01 02 03 04} > "$W/notebooks.log" 2>&1
  echo "rc=$?" >> "$W/notebooks.log"
fi

stage "pack"
cp "$W"/check/summary.txt "$OUT/gpu_check_summary.txt" 2>/dev/null
cp "$W/pytest_gpu.txt" "$W/bench_nvml.txt" "$W/notebooks.log" "$OUT/" 2>/dev/null
tar czf "$OUT/gpu_session.tgz" -C "$W" --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' \
    --exclude='*.arrow' --exclude='*.pkl' --exclude='trace*.json*' .
ls -la "$OUT"
cat "$W/stages.txt"
tail -5 "$W/pytest_gpu.txt"; cat "$OUT/gpu_check_summary.txt" 2>/dev/null; tail -25 "$W/notebooks.log" 2>/dev/null
