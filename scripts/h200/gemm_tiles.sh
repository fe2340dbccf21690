#!/usr/bin/env bash
# One device call on the float32 GEMM tiles (2026-12-06 night): tile shapes alternated in
# one process against CUDA (`benchmarks/gemm_shapes.py --configs`), then rows of
# `benchmarks/run.py --cuda` (SECTIONS) under each TORCH_WEBGPU_GEMM_VARIANT of RUN_VARIANTS
# ("default" leaves it unset; "scalar_tiles" is the default choice with scalar shared reads;
# a tile shape such as 64x128x16:16x16 sets TORCH_WEBGPU_GEMM_TILE instead).
# RUN_FLAGS go to run.py (--cudnn-fp32).
#   CONFIGS=default,scalar_tiles,128x128x16:16x16 SECTIONS=gemm,conv RUN_VARIANTS=default,scalar_tiles \
#     bash scripts/h200/gemm_tiles.sh
cd "$(dirname "$0")/../.."
RUN_VARIANTS=${RUN_VARIANTS:-default}
source scripts/h200/build.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -n "${CONFIGS=default,scalar_tiles,128x128x16:16x16,128x64x16:16x16,64x128x16:16x16}" ]; then
  echo "== gemm_shapes $CONFIGS"
  (cd benchmarks && timeout ${SHAPES_LIMIT:-200} python3 gemm_shapes.py --configs "$CONFIGS") 2>&1 | tee $OUT/gemm_shapes.log
fi
for variant in ${RUN_VARIANTS//,/ }; do
  [ -n "${SECTIONS=gemm,conv}" ] || break
  echo "== run.py --only $SECTIONS ($variant)"
  key=TORCH_WEBGPU_GEMM_VARIANT; [[ $variant == *:* ]] && key=TORCH_WEBGPU_GEMM_TILE
  env $([ "$variant" = default ] || echo $key=$variant) timeout ${RUN_LIMIT:-200} \
    python3 benchmarks/run.py --cuda --only "$SECTIONS" $RUN_FLAGS --json $OUT/run_$variant.json > $OUT/run_$variant.log 2>&1
  grep -E "^(gemm|conv) " $OUT/run_$variant.log || tail -20 $OUT/run_$variant.log
done
