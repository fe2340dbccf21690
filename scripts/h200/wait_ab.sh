#!/usr/bin/env bash
# One device call: waits on the GPU that poll before blocking (TORCH_WEBGPU_SPIN_WAIT_US)
# against waits that block at once, ours against CUDA in the same runs.
#   STEPS="roundtrip phases decode" MODELS="gpt2 qwen2.5" bash scripts/h200/wait_ab.sh
# roundtrip: dispatch_bench (its submit + wait round trip, and graph replay against raw
#            Dawn's batched encode), spin off then on;
# phases:    run.py --phases, small movement/GEMV rows and the host section, spin off then on;
# decode:    HF decode, eager and compiled, with the spin and the replay's first batch
#            switched in one process.
cd "$(dirname "$0")/../.."
BENCH=ON source scripts/h200/build.sh || exit 1
steps=" ${STEPS:-roundtrip phases decode} "
has() { [[ $steps == *" $1 "* ]]; }
spins="0 ${SPIN_US:-1000}"
if has roundtrip; then
  for s in $spins; do
    echo "== dispatch_bench, spin $s us"
    TORCH_WEBGPU_SPIN_WAIT_US=$s timeout 120 ./build-gpu/dispatch_bench --bytes 16777216 --dispatches 2000 --reps 5 \
      2>&1 | grep "^|"
  done
fi
if has phases; then
  for s in $spins; do
    echo "== phases, spin $s us"
    timeout 200 python3 benchmarks/run.py --cuda --phases --spin-wait-us $s --only movement,gemv,host \
      --match "${PHASE_MATCH:-index_select,gather,embedding,uniform,linear fp32 1x896,tiny,decode}" 2>&1 \
      | grep "^movement\|^gemv\|^host"
  done
fi
# HF decode (static cache), the settings alternated in one process: "replay first batch:spin
# us" (eager runs ignore the first); first with the stop flag read every token (a wait per
# token), then with the stop check deferred (no waits: the replay's submits alone).
if has decode; then
  for model in ${MODELS:-gpt2 qwen2.5}; do
    echo "== decode, settings alternated in one process: $model"
    timeout 280 python3 benchmarks/decode_breakdown.py --model $model --init-device cuda --repeat ${REPEAT:-3} \
      --modes eager,reduce-overhead --wait-settings 16:0,16:${SPIN_US:-1000},4096:0,4096:${SPIN_US:-1000} 2>&1 | grep "^|"
    timeout 200 python3 benchmarks/decode_breakdown.py --model $model --init-device cuda --repeat ${REPEAT:-3} \
      --modes reduce-overhead --defer-stop --wait-settings 16:${SPIN_US:-1000},4096:${SPIN_US:-1000} 2>&1 | grep "^|"
  done
fi
