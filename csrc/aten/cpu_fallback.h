// The boxed CPU fallback for ops without a native kernel: copies the arguments to the
// CPU, runs the CPU kernel, and copies results back (in-place, out= and views handled by
// ATen's cpu_fallback). Warns once per op; TORCH_WEBGPU_FALLBACK_WARN=0 silences it and
// TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1 turns it into NotImplementedError.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>

namespace twgpu::aten {

void webgpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Calls the fallback for ATen op `Op` from an unboxed kernel (e.g. on float64 inputs).
template <class Op, class... Args>
decltype(auto) call_cpu_fallback(Args&&... args) {
  return at::native::call_fallback_fn<&webgpu_cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

// Names of the ops that went through the fallback in this process (for reports/tests).
std::vector<std::string> fallback_ops_seen();
void reset_fallback_ops_seen();

}  // namespace twgpu::aten
