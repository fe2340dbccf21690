// torch.webgpu.set_sync_debug_mode, as torch.cuda's: warn about (1) or refuse (2) ops that
// make the host wait for the device to read data back (.item(), .cpu(), printing, nonzero,
// data-dependent checks). Explicit waits (synchronize, events) and non_blocking copies
// are not reported, as on CUDA.
#include "aten/sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace twgpu::aten {
namespace {
std::atomic<int> g_mode{0};
}  // namespace

int sync_debug_mode() { return g_mode.load(std::memory_order_relaxed); }

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected 0 (default), 1 (warn) or 2 (error), got ",
              mode);
  g_mode.store(mode, std::memory_order_relaxed);
}

void warn_or_error_on_sync() {
  const int mode = sync_debug_mode();
  if (mode == 1) TORCH_WARN("called a synchronizing WebGPU operation");
  TORCH_CHECK(mode != 2, "called a synchronizing WebGPU operation");
}

}  // namespace twgpu::aten
