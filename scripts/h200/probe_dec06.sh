#!/usr/bin/env bash
# One device call (2026-12-06, late): half-type GEMM tile loads, eager issue/drain phases
# of the movement and GEMV rows with and without an early first submit, and where a
# replayed decode step's GPU time goes against CUDA graphs.
#   STEPS="tests gemm phases replay" bash scripts/h200/probe_dec06.sh
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
steps=" ${STEPS:-tests gemm gemv phases policy replay} "
has() { [[ $steps == *" $1 "* ]]; }
if has tests; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider -x tests/python/test_matmul.py \
    -k "half_type or vec4_tiles or tiled" 2>&1 | tail -2
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/test_gemv.py -k "prefetch or row_lanes" tests/python/test_shape_ops.py -k "cat or prefetch or row_lanes" 2>&1 | tail -2
fi
if has gemm; then
  echo "== gemm"
  timeout 150 python3 benchmarks/run.py --cuda --only gemm --match "mm fp32,mm float16,mm bfloat16" 2>&1 | grep "^gemm"
fi
if has gemv; then
  for e in BASELINE=1; do
    echo "== gemv: $e"
    env $e timeout 120 python3 benchmarks/run.py --cuda --only gemv --match "linear fp32,linear fp16,linear bf16" 2>&1 | grep "^gemv"
  done
fi
if has replay; then
  echo "== replay profile"
  timeout 240 python3 scripts/h200/replay_profile.py --layers 24 --tokens 16 ${SPY:+--spy .tools/py-spy --out $OUT} 2>&1
  if [ -n "$SPY" ] && [ -f $OUT/replay_spy.txt ]; then
    python3 scripts/h200/stacks.py $OUT/replay_spy.txt --match replay --top 30 \
      --frames encode_and_submit,APISubmit,SubmitImpl,vkQueueSubmit,RecordComputePass,TransitionAndClear,AddDispatchSyncScope,APIDispatchWorkgroups,APISetBindGroup,Tick,libnvidia,vkCmd,malloc,free
  fi
fi
if has phases; then
  for e in ${PHASE_ENVS:-BASELINE=1 TORCH_WEBGPU_EAGER_FLUSH_US=30}; do
    echo "== phases: $e"
    env $e timeout 200 python3 benchmarks/run.py --cuda --phases --only ${PHASE_SECTIONS:-movement,gemv} \
      --match "${PHASE_MATCH:-cat,index_select,gather,embedding,uniform,linear fp32}" 2>&1 | grep "^movement\|^gemv"
  done
fi
# Eager decode under submit policies alternated in one process (max:first[:flush us]).
if has policy; then
  for mc in ${POLICY_RUNS:-gpt2:dynamic}; do
    echo "== policies in one process: $mc"
    timeout 150 python3 benchmarks/decode_breakdown.py --model ${mc%%:*} --cache ${mc##*:} --init-device cuda \
      --repeat ${REPEAT:-3} --batch-policies ${POLICIES:-256:0,256:0:100,256:0:500,256:32} 2>&1 | grep "^|"
  done
fi
