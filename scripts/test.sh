#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every test: the C++ runtime/kernel
# suite (GoogleTest under ctest), then the Python suite (pytest) against the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] C++ runtime and kernel tests (ctest)"
ctest --test-dir build --output-on-failure -j2
echo "[test] Python tests (pytest)"
python3 -m pytest tests/python -n 2 -q -p no:cacheprovider "$@"
