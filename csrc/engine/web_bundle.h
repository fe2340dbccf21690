// The web bundle: a loaded program written out as the device work of one run, for a
// WebGPU page to replay with no engine (web/player.js). One run of the Executable is
// recorded while a captured graph (runtime/graph_capture.h) takes every dispatch, copy and
// write; the bundle lists those steps in order (WGSL, binding kinds, each binding's buffer
// window, uniform bytes, grid), the buffers (with their content where it was made at load:
// weights, constants) and the inputs and outputs. Format: docs/ENGINE.md, "Web bundle".
//
// The WGSL is what this adapter's engine would run (workgroup sizes, binding windows and
// loop limits follow its limits), so the bundle is made for adapters like it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace twgpu::engine {

constexpr int kWebBundleVersion = 1;

struct WebBundle {
  std::string json;          // bundle.json
  std::vector<uint8_t> bin;  // buffers.bin
};

// Records one run of `exe` (nothing is submitted; its inputs are not needed) and writes it
// out. Raises when another graph is capturing.
WebBundle make_web_bundle(Executable& exe);
// make_web_bundle, written to OUT_DIR/bundle.json and OUT_DIR/buffers.bin (the directory
// is created when missing).
void write_web_bundle(Executable& exe, const std::string& out_dir);

// Replays a bundle on this device, as web/player.js does in a browser: buffers and
// contents, then per run the inputs written, every step recorded, the outputs read. On the
// adapter that made the bundle its outputs equal the engine's bit for bit; it is how the
// tests check that a bundle holds everything a run does. Raises Error(InvalidArgument)
// naming a malformed field, id or range.
std::vector<HostTensor> run_web_bundle(const std::string& dir, const std::vector<HostTensor>& inputs);

}  // namespace twgpu::engine
