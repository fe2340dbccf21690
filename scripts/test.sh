#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every test: the C++ runtime/kernel
# suite (GoogleTest under ctest), the Python suite (pytest) against the CPU, then
# PyTorch's OpInfo suite in float32 (both modes, forward and gradients; strict
# expected-failure list) and its gates. All nine dtypes: pytest tests/opinfo -n 2 (~20 min).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] C++ runtime and kernel tests (ctest)"
ctest --test-dir build --output-on-failure -j2
echo "[test] Python tests (pytest)"
python3 -m pytest tests/python -n 2 -q -p no:cacheprovider "$@"
echo "[test] OpInfo against the CPU, float32 (pytest tests/opinfo)"
python3 -m pytest tests/opinfo -n 2 -q -p no:cacheprovider --opinfo-dtypes=float32
python3 tests/opinfo/gates.py
