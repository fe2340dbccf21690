#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every test: the C++ runtime/kernel
# suite (GoogleTest under ctest), the Python suite (pytest) against the CPU, then
# PyTorch's OpInfo suite (nine dtypes x fallback/native x forward/gradients, strict
# expected-failure list; about 26 minutes on 2 cores) and its gates (enforced), then a
# representative subset of OpInfo through torch.compile (tests/opinfo/compile_ci_ops.txt)
# and a smaller one of its gradients (compile_ci_backward_ops.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] C++ runtime and kernel tests (ctest)"
ctest --test-dir build --output-on-failure -j2
echo "[test] Python tests (pytest)"
python3 -m pytest tests/python -n 2 -q -p no:cacheprovider "$@"
echo "[test] Portability subsets: the spec's default limits, and Dawn's desktop OpenGL backend"
# Representative families (the ones that size workgroups and bindings from the limits);
# the whole suite runs the same way with the variable set (README, Environment variables).
TORCH_WEBGPU_LIMITS=default python3 -m pytest tests/python/test_sort.py tests/python/test_reduce.py \
  tests/python/test_norm.py tests/python/test_scan.py tests/python/test_matmul.py \
  tests/python/test_convolution.py tests/python/test_attention.py -n 2 -q -p no:cacheprovider
TORCH_WEBGPU_BACKEND=opengl python3 -m pytest tests/python/test_training.py \
  tests/python/test_reduce.py tests/python/test_norm.py -n 2 -q -p no:cacheprovider
echo "[test] Portability subset: Dawn's Vulkan backend on SwiftShader (subgroups)"
# Dawn's Vulkan backend on SwiftShader (Chromium's software Vulkan, installed above for the
# browser test): the full feature level, and subgroups (of 4), which reach the subgroup
# reductions (kernels/group_reduce.h) that GPUs take; GPU kernel paths forced.
swiftshader=(env VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json TORCH_WEBGPU_BACKEND=vulkan
             XDG_RUNTIME_DIR=/tmp TORCH_WEBGPU_ADAPTER_KIND=gpu)
"${swiftshader[@]}" ./build/twgpu_tests --gtest_filter='GroupReduce.*'
"${swiftshader[@]}" python3 -m pytest tests/python/test_norm.py tests/python/test_row_kernels.py \
  tests/python/test_gemv.py tests/python/test_gemv_cols.py tests/python/test_linear_group.py \
  tests/python/test_compile_rms_linear.py tests/python/test_layer_norm_linear.py -n 2 -q -p no:cacheprovider
# Graph replays on the submit thread (opt-in there; runtime/submit_worker.h).
"${swiftshader[@]}" TORCH_WEBGPU_ASYNC_REPLAY=1 python3 -m pytest tests/python/test_submit_thread.py \
  tests/python/test_graphs.py tests/python/test_compile_graphs.py tests/python/test_async_copy.py \
  tests/python/test_streams.py -n 2 -q -p no:cacheprovider
echo "[test] OpInfo against the CPU (pytest tests/opinfo); ${SECONDS}s so far"
python3 -m pytest tests/opinfo -n 2 -q -p no:cacheprovider --durations=15
echo "[test] OpInfo through torch.compile, a representative subset (tests/opinfo --opinfo-modes=compile)"
python3 -m pytest tests/opinfo/test_opinfo.py -n 2 -q -p no:cacheprovider --opinfo-modes=compile \
  --opinfo-dtypes=float32 --opinfo-checks=forward --opinfo-ops="$(grep -v "^#" tests/opinfo/compile_ci_ops.txt | paste -sd,)" \
  -k "not test_expected_failures_file_is_valid"
echo "[test] Gradients through torch.compile, a smaller subset (tests/opinfo/compile_ci_backward_ops.txt)"
python3 -m pytest tests/opinfo/test_opinfo.py -n 2 -q -p no:cacheprovider --opinfo-modes=compile \
  --opinfo-dtypes=float32 --opinfo-checks=backward \
  --opinfo-ops="$(grep -v "^#" tests/opinfo/compile_ci_backward_ops.txt | paste -sd,)" \
  -k "not test_expected_failures_file_is_valid"
python3 tests/opinfo/gates.py --enforce  # a gate below its target fails the run
echo "[test] done in ${SECONDS}s"
