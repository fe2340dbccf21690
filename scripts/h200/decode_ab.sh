#!/usr/bin/env bash
# One device call for compiled decode A/Bs (device time is scarce): builds, then Qwen2.5's
# compiled generate and bare forward (decode_breakdown.py, reduce-overhead) with
# transformers' deferred stop check on and off and with the rms_linear pass off, then the
# decode kernels under A/B switches (decode_kernels.py). Each step has its own time limit.
#   bash scripts/h200/decode_ab.sh
#   REPEAT=5 STEPS="defer plain" bash scripts/h200/decode_ab.sh   (a subset of: plain rms defer hostprof defer_ab cuda kernels subgroups eager dyn)
#   STEPS=subgroups: the eager reductions, norms and GEMVs (run.py --cuda) and the compiled
#   forward with subgroup reductions (default) against workgroup trees (TORCH_WEBGPU_SUBGROUPS=0)
#   PIN=0-7 ...: every step pinned to those CPUs (taskset)
#   STEPS=dyn: eager decode, dynamic cache, host counters and a cProfile (GPT-2 against GPT-Neo)
#   STEPS="topo gemv_cols both pinned": the machine's CPU/GPU topology and profilers; GPT-2's
#   N-contiguous GEMVs (run.py --cuda); generate on webgpu and cuda compiled in one process;
#   webgpu's generate again pinned to PIN_AB (default 2-3) to test the host's placement
cd "$(dirname "$0")/../.."
source scripts/h200/build.sh || exit 1
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1
T0=$SECONDS
run() {  # label, seconds, command...
  local label=$1 limit=$2; shift 2
  echo "== $label (at $((SECONDS - T0)) s)"
  # (Each step's log under $OUT too: a call cut off at its limit still returns them. Do not
  # pipe this script through tail: a cut-off call then returns nothing.)
  # (Named by model and start time: several invocations in one call keep their logs apart.)
  local log="${OUT:-/tmp}/step_${MODEL:-qwen2.5}_$(date +%H%M%S)_$((SECONDS - T0)).log"
  # PIN=cpus (e.g. the GPU's NUMA node from `nvidia-smi topo -m`): each step runs on them.
  timeout -s ABRT "$limit" ${PIN:+taskset -c $PIN} "$@" > "$log" 2>&1
  grep -v "Warning\|warn(\|^\s*$\|cudagraph_utils" "$log" | tail -${TAIL:-4}
}
steps=" ${STEPS:-plain rms defer cuda kernels} "
has() { [[ $steps == *" $1 "* ]]; }
B="python3 benchmarks/decode_breakdown.py --model ${MODEL:-qwen2.5} --modes reduce-overhead --init-device cuda ${REPEAT:+--repeat $REPEAT}"
has plain && run "generate, transformers' stop check (webgpu)" 240 $B --devices webgpu
has rms && run "rms_linear off" 120 env TORCH_WEBGPU_COMPILE_RMS=0 $B --devices webgpu
has defer && run "generate, stop check deferred (webgpu)" 240 $B --devices webgpu --defer-stop
has hostprof && TAIL=60 run "deferred, host profile (cProfile of one generate)" 250 $B --devices webgpu --defer-stop --host-profile
has defer_ab && for e in ${DEFER_ENVS:-TORCH_WEBGPU_DAWN_TOGGLES=skip_validation,disable_robustness TORCH_WEBGPU_MAX_BATCH=4096}; do
  run "deferred: $e" 100 env ${e//+/ } $B --devices webgpu --defer-stop
done
has topo && TAIL=40 run "topology" 30 bash -c "nvidia-smi topo -m; lscpu | grep -i -E 'numa|model name|^cpu\(s\)'; \
  which perf gdb py-spy; cat /proc/sys/kernel/perf_event_paranoid"
has gemv_cols && TAIL=30 run "GEMV: addmm and linear fp32 against CUDA" 150 python3 benchmarks/run.py --cuda --only gemv \
  --match "${GEMV_MATCH:-addmm,linear fp32}"
has both && TAIL=8 run "generate compiled, webgpu and cuda, stop check deferred" 300 $B --devices webgpu,cuda --defer-stop
has pinned && TAIL=6 run "webgpu generate pinned to ${PIN_AB:-2-3}" 200 taskset -c ${PIN_AB:-2-3} $B --devices webgpu --defer-stop
has cuda && run "cuda eager, deferred and not" 100 bash -c "$B --devices cuda --modes eager --defer-stop | tail -2; $B --devices cuda --modes eager | tail -1"
has kernels && for e in ${AB_ENVS:-BASELINE=1 TORCH_WEBGPU_SUBGROUPS=0 TORCH_WEBGPU_COMPILE_REDUCTION_THREADS=64 \
    TORCH_WEBGPU_GEMM_VARIANT=gemv_gated_serial TORCH_WEBGPU_DAWN_TOGGLES=skip_validation,disable_robustness}; do
  TAIL=8 run "kernels: $e" 40 env ${e//+/ } python3 benchmarks/decode_kernels.py --only "${AB_ONLY:-rmsnorm,attention1024,gated,down}"
done
# STEPS=eager: eager decode's host-side changes of 2026-12-06 on a GPU: the one-kernel cat
# against the copies (TORCH_WEBGPU_CAT_WORDS=0), then HF eager decode of the small models
# against CUDA eager (dynamic cache; e2e_models.py) and with a static cache (decode_breakdown).
has eager && for e in BASELINE=1 TORCH_WEBGPU_CAT_WORDS=0; do
  TAIL=12 run "cat: $e" 120 env $e python3 benchmarks/run.py --cuda --only host,movement --match cat
done
has eager && TAIL=8 run "HF eager decode, small models (dynamic cache)" 240 python3 scripts/e2e_models.py \
  --dtype float32 --tokens 32 --cuda --init-device cuda --models ${EAGER_MODELS:-gpt2,gpt-neo,opt,pythia}
# STEPS=dyn: eager decode with HF's dynamic cache, per token (submits, host waits, bind groups,
# pipelines) and a cProfile of one generate, for DYN_MODELS (default gpt2 and gpt-neo).
has dyn && for m in ${DYN_MODELS:-gpt2 gpt-neo}; do
  TAIL=${DYN_TAIL:-50} run "eager decode, dynamic cache: $m" 200 python3 benchmarks/decode_breakdown.py --model $m \
    --modes eager --cache dynamic --devices webgpu,cuda --init-device cuda --host-profile
done
has eager && TAIL=4 run "HF eager decode, GPT-2 (static cache)" 150 python3 benchmarks/decode_breakdown.py --model gpt2 \
  --modes eager --devices webgpu,cuda --init-device cuda --repeat 3
has subgroups && for e in BASELINE=1 TORCH_WEBGPU_SUBGROUPS=0 TORCH_WEBGPU_NORM_VEC4=0; do
  TAIL=40 run "eager reductions and GEMV: $e" 150 env $e python3 benchmarks/run.py --cuda --only reductions,gemv \
    --match "${SG_MATCH:-sum rows,amax rows,sum all,softmax rows,layer_norm,rms_norm,1x896,1x4096}"
done
has subgroups && for e in BASELINE=1 TORCH_WEBGPU_SUBGROUPS=0; do
  run "compiled forward: $e" 240 env $e $B --devices webgpu
done
