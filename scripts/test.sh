#!/usr/bin/env bash
# Sets up a fresh machine (scripts/setup.sh) and runs every test: the C++ runtime/kernel
# suite (GoogleTest under ctest), the Python suite (pytest) against the CPU, then
# PyTorch's OpInfo suite (nine dtypes x fallback/native x forward/gradients, strict
# expected-failure list; about 14 minutes on 2 cores) and its gates (enforced).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] C++ runtime and kernel tests (ctest)"
ctest --test-dir build --output-on-failure -j2
echo "[test] Python tests (pytest)"
python3 -m pytest tests/python -n 2 -q -p no:cacheprovider "$@"
echo "[test] OpInfo against the CPU (pytest tests/opinfo)"
python3 -m pytest tests/opinfo -n 2 -q -p no:cacheprovider
python3 tests/opinfo/gates.py --enforce  # a gate below its target fails the run
