// Which kind of adapter runs the kernels, for families whose best variant differs between
// GPUs and software adapters (llvmpipe, lavapipe, SwiftShader run workgroups on CPU cores:
// shared memory buys nothing there and every barrier costs).
//
// TORCH_WEBGPU_ADAPTER_KIND=gpu|software overrides the answer, so that the tests run the
// GPU variants on llvmpipe (and the software ones on a GPU).
#pragma once
#include <cstdlib>
#include <string>

#include "runtime/context.h"

namespace twgpu {

inline bool software_adapter(Context& ctx) {
  if (const char* kind = std::getenv("TORCH_WEBGPU_ADAPTER_KIND")) {
    if (std::string(kind) == "gpu") return false;
    if (std::string(kind) == "software") return true;
  }
  return ctx.adapter().runs_on_cpu();
}

}  // namespace twgpu
