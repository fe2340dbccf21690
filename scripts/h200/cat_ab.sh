#!/usr/bin/env bash
# The Qwen2.5-sized decode step (benchmarks/graph_replay.py) with rotary embeddings' cat in
# one kernel (default) and as two copies (TORCH_WEBGPU_CAT_WORDS=0, the kernels before),
# eager and replayed, beside CUDA eager and CUDA graphs; then the half-type GEMM rows.
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
cd benchmarks
timeout 200 python3 graph_replay.py --cuda --tokens 16 --dtype float32 2>&1 | grep "^\[\|adapter"
TORCH_WEBGPU_CAT_WORDS=0 timeout 120 python3 graph_replay.py --tokens 16 --dtype float32 2>&1 | grep "decode\|chain"
timeout 120 python3 graph_replay.py --tokens 16 --dtype float32 2>&1 | grep "decode"
cd ..
timeout 100 python3 benchmarks/run.py --cuda --only gemm --match "mm fp32,mm float16,mm bfloat16" 2>&1 | grep "4096x4096"
