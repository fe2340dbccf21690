#!/usr/bin/env bash
# Builds the extension on the lent GPU machine (NVIDIA, Vulkan; no package registry there):
# unpacks the GL/Vulkan loader packages carried in .gl/, points Vulkan at NVIDIA's ICD and
# configures CMake directly (pip would try to fetch build dependencies). Source it:
#   source scripts/h200/build.sh && PYTHONPATH=python python3 ...
# BENCH=ON also builds build-gpu/dispatch_bench.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export PYTHONPATH=$PWD/python
mkdir -p build-gpu
(cd build-gpu && cmake -G Ninja .. -DPython3_EXECUTABLE="$(which python3)" -DCMAKE_BUILD_TYPE=Release \
   -DTWGPU_BUILD_TESTS=OFF -DTWGPU_BUILD_BENCHMARKS=${BENCH:-OFF} >/dev/null && ninja >/dev/null) \
  || { echo "BUILD FAILED"; return 1 2>/dev/null || exit 1; }
python3 -c "import torch, torch_webgpu; print('adapter:', torch.webgpu.get_device_name(), '| torch', torch.__version__)"
