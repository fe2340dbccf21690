#!/usr/bin/env bash
# H200 check of the eager speed work (issue 12, first slice): builds, runs the correctness
# tests of the changed kernels (GEMV, reductions, softmax, layer norm, matmul), also under
# the spec's default limits (128-invocation groups), then benchmarks/run.py --cuda (ours vs
# CUDA, one table), and the GEMV section again with the old path (no_gemv) for comparison.
#   bash scripts/h200/speed.sh            # everything (~5 minutes)
#   QUICK=1 bash scripts/h200/speed.sh    # tests + the reductions/gemv sections only
# Prints PASS/FAIL lines and the tables; writes $OUT/speed.json and $OUT/speed_no_gemv.json.
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source scripts/h200/build.sh || exit 1
export PYTHONPATH=$PWD/python
status=0

run_tests() {  # name, env..., -- files...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if ! python3 -c "import pytest" 2>/dev/null; then
    echo "FAIL $name: pytest is not installed here"; status=1; return
  fi
  local log="$OUT/tests_$name.log"
  if env "${envs[@]}" python3 -m pytest "$@" -q -p no:cacheprovider >"$log" 2>&1; then
    echo "PASS $name: $(tail -1 "$log")"
  else
    echo "FAIL $name: $(tail -1 "$log")"; grep -E "^(FAILED|ERROR)" "$log" | head -20
    status=1
  fi
}

T=tests/python
run_tests gemv -- $T/test_gemv.py
run_tests kernels -- $T/test_matmul.py $T/test_reduce.py $T/test_reduce_paths.py $T/test_norm.py $T/test_amp.py
run_tests limits_default TORCH_WEBGPU_LIMITS=default -- $T/test_gemv.py $T/test_reduce.py $T/test_reduce_paths.py $T/test_norm.py
# The default GPU path of linear at decode (no variant forced) against the CPU, with figures.
python3 - <<'EOF' || status=1
import time
import torch, torch.nn.functional as F
import torch_webgpu  # noqa: F401
for dt, tol in ((torch.float32, 1e-4), (torch.float16, 3e-3), (torch.bfloat16, 3e-2)):
    for k, n in ((896, 4864), (4096, 11008), (896, 151936)):
        x = torch.randn(1, k, dtype=dt)
        w = torch.randn(n, k, dtype=dt) * 0.05
        ref = F.linear(x.float(), w.float())
        xd, wd = x.to("webgpu"), w.to("webgpu")
        got = F.linear(xd, wd).cpu().float()
        err = ((got - ref).abs() / (1 + ref.abs())).max().item()
        for _ in range(20):
            F.linear(xd, wd)
        torch.webgpu.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            F.linear(xd, wd)
        torch.webgpu.synchronize()
        gbs = w.numel() * w.element_size() / ((time.perf_counter() - t) / 50) / 1e9
        print(f"{'PASS' if err < tol else 'FAIL'} linear 1x{k} @ {k}x{n} {dt}: rel err {err:.2e}, {gbs:.0f} GB/s")
EOF

if [ -n "${QUICK:-}" ]; then
  python3 benchmarks/run.py --cuda --only reductions,gemv --json "$OUT/speed.json" || status=1
else
  python3 benchmarks/run.py --cuda --json "$OUT/speed.json" || status=1
fi
echo "--- GEMV with the previous kernels (TORCH_WEBGPU_GEMM_VARIANT=no_gemv) ---"
TORCH_WEBGPU_GEMM_VARIANT=no_gemv python3 benchmarks/run.py --cuda --only gemv \
  --json "$OUT/speed_no_gemv.json" || status=1
echo "speed.sh: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
