#!/usr/bin/env bash
# One batch of H200 measurements for a session's changes (device time is scarce: one call).
#   OUT=... bash scripts/h200/measure_session.sh
# Writes logs and JSON under $OUT; each step has its own time limit so one slow step cannot
# eat the others. Steps: compiled HF decode (webgpu, then CUDA, in separate processes so a
# failure in one cannot hide the other's table), attention/GEMM/reduction ratios, the engine
# on MiniLM and EfficientNet-Lite0, graph replay of a Qwen2.5-sized decode step,
# HF generate against the bare decode forward (breakdown), the GEMVs' vec4 loads A/B, the
# decode kernels one by one (kernels, kernels_ab).
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/h200/build.sh || exit 1
export PYTHONPATH=$PWD/python PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1
step() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name: rc=$? in $((SECONDS - t0)) s"
  grep -v "^\s*$" "$OUT/$name.log" | grep -v "cudagraph_utils\|Warning\|warn(" | tail -${TAIL:-14}
}
MODELS=${MODELS:-qwen2.5}
want() { [ -z "${STEPS:-}" ] || [[ ",$STEPS," == *",$1,"* ]]; }
want tests && step tests 120 python3 -m pytest -q -n 8 -p no:cacheprovider ${TESTS:-tests/python/test_attention.py}
want ops && step ops 150 python3 benchmarks/run.py --cuda --only "${SECTIONS:-attention,gemm}" --json "$OUT/ops.json"
want eager && step eager 200 python3 scripts/e2e_models.py --models "$MODELS" --init-device cuda --tokens 32 --cuda \
  --json "$OUT/eager.json"
want compile_webgpu && step compile_webgpu 240 python3 scripts/e2e_models.py --models "$MODELS" \
  --compile reduce-overhead --init-device cuda --tokens 32 --json "$OUT/compile_webgpu.json"
want engine && step engine 150 python3 benchmarks/engine.py --reps 5
want replay && step replay 150 python3 benchmarks/graph_replay.py --cuda --tokens 16
want breakdown && step breakdown ${BREAKDOWN_S:-420} python3 benchmarks/decode_breakdown.py --model "${MODELS%%,*}" \
  --devices "${DEVICES:-webgpu,cuda}" --modes "${MODES:-eager,reduce-overhead}" --init-device cuda ${PROFILE:---profile} --json "$OUT/breakdown.json"
# A/B of the GEMVs' vec4 weight loads in one call: the gemv rows of the default run against
# element loads (gemv_scalar: K-contiguous weights and linear_group / linear_gated;
# gemv_cols_scalar: the addmm rows only, it also turns the K-contiguous GEMV off).
want gemv_ab && step gemv_ab 240 bash -c 'for v in ${GEMV_VARIANTS:-"" gemv_scalar gemv_cols_scalar}; do v=${v#-}; echo "== GEMM_VARIANT=$v";
  TORCH_WEBGPU_GEMM_VARIANT=$v python3 benchmarks/run.py --cuda --only gemv; done'
# Decode kernels inside replayed graphs against CUDA graphs, then A/B switches: AB_ENVS
# lists VAR=VALUE settings (one run each, over the cases in AB_ONLY; VAR=A+VAR2=B: together, so a value may hold commas).
want kernels && step kernels 150 python3 benchmarks/decode_kernels.py --cuda --json "$OUT/kernels.json"
want kernels_ab && step kernels_ab ${AB_S:-200} bash -c 'for e in $AB_ENVS; do echo "== $e";
  env ${e//+/ } python3 benchmarks/decode_kernels.py --only "$AB_ONLY" | grep -v "^case\|^ratio"; done'
want compile_cuda && step compile_cuda 200 python3 scripts/e2e_models.py --models "$MODELS" \
  --compile reduce-overhead --init-device cuda --tokens 32 --cuda --json "$OUT/compile_cuda.json"
exit 0
