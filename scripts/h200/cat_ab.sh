#!/usr/bin/env bash
# Last call of 2026-12-06: dispatch_bench on NVIDIA (graph replay against raw Dawn's batched
# encode, issue 9's 1.2x target), then the Qwen2.5-sized decode step (graph_replay.py,
# webgpu) with rotary embeddings' cat in one kernel and as two copies
# (TORCH_WEBGPU_CAT_WORDS=0, the kernels before).
cd "$(dirname "$0")/../.."
BENCH=ON source scripts/h200/build.sh || exit 1
timeout 60 ./build-gpu/dispatch_bench --bytes 268435456 --dispatches 2000 --reps 5 2>&1 | tail -11
cd benchmarks
for e in BASELINE=1 TORCH_WEBGPU_CAT_WORDS=0; do
  echo "== $e"
  env $e timeout 60 python3 graph_replay.py --tokens 16 --dtype float32 2>&1 | grep "decode"
done
