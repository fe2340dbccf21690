#!/usr/bin/env bash
# One device call on the float32 GEMM tiles (2026-12-06 night): tile shapes alternated in
# one process against CUDA (`benchmarks/gemm_shapes.py --configs`), then the GEMM and
# convolution rows of `benchmarks/run.py --cuda` with the default choice.
#   CONFIGS=default,scalar_tiles,128x128x16:16x16 SECTIONS=gemm,conv bash scripts/h200/gemm_tiles.sh
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== gemm_shapes ${CONFIGS:=default,scalar_tiles,128x128x16:16x16,128x64x16:16x16,64x128x16:16x16}"
(cd benchmarks && timeout ${SHAPES_LIMIT:-200} python3 gemm_shapes.py --configs "$CONFIGS") 2>&1 | tee $OUT/gemm_shapes.log
if [ -n "${SECTIONS=gemm,conv}" ]; then
  echo "== run.py --only $SECTIONS"
  timeout ${RUN_LIMIT:-200} python3 benchmarks/run.py --cuda --only "$SECTIONS" --json $OUT/run.json > $OUT/run.log 2>&1
  grep -E "^(gemm|conv) " $OUT/run.log || tail -20 $OUT/run.log
fi
