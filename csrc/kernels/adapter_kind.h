// Which kind of adapter runs the kernels, for families whose best variant differs between
// GPUs and software adapters (llvmpipe, lavapipe, SwiftShader run workgroups on CPU cores:
// shared memory buys nothing there and every barrier costs).
#pragma once
#include <string>

#include "runtime/context.h"

namespace twgpu {

inline bool software_adapter(Context& ctx) {
  const AdapterDescription& a = ctx.adapter();
  if (a.adapter_type == "CPU") return true;
  for (const char* soft : {"llvmpipe", "lavapipe", "SwiftShader", "swiftshader"})
    if (a.name.find(soft) != std::string::npos) return true;
  return false;
}

}  // namespace twgpu
