#!/usr/bin/env bash
# The Qwen2.5-sized decode step (benchmarks/graph_replay.py), eager and replayed, with
# rotary embeddings' cat in one kernel (default) and as two copies (TORCH_WEBGPU_CAT_WORDS=0,
# the kernels before), alternated: default, copies, default.
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
cd benchmarks
for e in BASELINE=1 TORCH_WEBGPU_CAT_WORDS=0 BASELINE=2; do
  echo "== $e"
  env $e timeout 100 python3 graph_replay.py --tokens 16 --dtype float32 2>&1 | grep "decode"
done
