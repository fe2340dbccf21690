#!/usr/bin/env bash
# 2026-12-07 session probes on the lent GPU (see docs/PERFORMANCE.md for the figures).
#   STEPS="base pools" bash scripts/h200/probe_dec07.sh
# base: tests of the changed families on the GPU, then run.py --cuda over the attention,
# pool, sort and movement sections; pools: the pooling rows with the written-out windows
# and with the loops (TORCH_WEBGPU_POOL_TAPS=loop), each in its own process; attn: the
# attention rows with the blocks kernel (default) and the tiles kernel, alternated.
STEPS=${STEPS:-"base pools"}
OUT=${OUT:-/tmp/probe}
mkdir -p "$OUT"
source scripts/h200/build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
tail -1 "$OUT/build.log"
nvidia-smi --query-gpu=name --format=csv,noheader
for step in $STEPS; do
  case $step in
    tests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider tests/python/test_attention.py tests/python/test_pool.py \
        tests/python/test_reduce.py tests/python/test_reduce_paths.py > "$OUT/tests.log" 2>&1
      tail -3 "$OUT/tests.log" ;;
    base)
      timeout 200 python3 benchmarks/run.py --cuda --only attention,pool,sort,movement --json "$OUT/base.json" > "$OUT/base.txt" 2>&1
      grep -E '^(attention|pool|sort|movement)' "$OUT/base.txt" | cut -c1-110 ;;
    pools)
      for taps in default loop default loop; do
        if [ $taps = loop ]; then export TORCH_WEBGPU_POOL_TAPS=loop; else unset TORCH_WEBGPU_POOL_TAPS; fi
        timeout 100 python3 benchmarks/run.py --cuda --only pool > "$OUT/pool_$taps.txt" 2>&1
        echo "taps=$taps"; grep -E '^pool' "$OUT/pool_$taps.txt" | cut -c1-110
      done
      unset TORCH_WEBGPU_POOL_TAPS ;;
    attn)
      for v in default tiles default tiles; do
        if [ $v = tiles ]; then export TORCH_WEBGPU_ATTENTION_VARIANT=tiles; else unset TORCH_WEBGPU_ATTENTION_VARIANT; fi
        timeout 100 python3 benchmarks/run.py --cuda --only attention --match prefill > "$OUT/attn_$v.txt" 2>&1
        echo "attention=$v"; grep -E '^attention' "$OUT/attn_$v.txt" | cut -c1-110
      done
      unset TORCH_WEBGPU_ATTENTION_VARIANT ;;
  esac
done
