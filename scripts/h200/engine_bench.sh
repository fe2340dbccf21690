#!/usr/bin/env bash
# H200: benchmarks/engine.py -- the AOT engine vs eager webgpu vs CUDA eager, MiniLM and
# EfficientNet-Lite0 at batch 1 and 32 (issue 11, item 8). Builds with scripts/h200/build.sh
# (the engine needs nlohmann-json3-dev's headers: carry its .deb in .gl/). Without the
# weight packages there (no registry), both models run with seeded random weights: the same
# work and times. Writes $OUT/engine_bench.md (the table) and prints it.
#   bash scripts/h200/engine_bench.sh                      # ~2-4 minutes
#   ARGS="--batches 1 --reps 10" bash scripts/h200/engine_bench.sh
#   ARGS="--models minilm --decomposed-attention" bash scripts/h200/engine_bench.sh  # SDPA fused vs not
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/h200/build.sh || exit 1
export PYTHONPATH=$PWD/python HF_HUB_OFFLINE=1
python3 -c "import torch_webgpu; from torch_webgpu import _C; assert hasattr(_C, '_engine'), \
'built without the engine: carry nlohmann-json3-dev in .gl/'" || exit 1
# shellcheck disable=SC2086
python3 benchmarks/engine.py ${ARGS:-} | tee "$OUT/engine_bench.md"
exit "${PIPESTATUS[0]}"
