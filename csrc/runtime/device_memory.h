// How much memory the device has and how much is free, for torch.webgpu.mem_get_info and
// the per-process memory fraction.
#pragma once
#include <cstdint>

namespace twgpu {

class Context;

struct DeviceMemory {
  uint64_t free = 0;
  uint64_t total = 0;
  // "adapter": total is the adapter's device-local heaps (Dawn's memory-heaps query) and
  // free is total minus what this process holds (WebGPU cannot see other processes).
  // "system": the adapter cannot tell (software adapters, GL backends): its buffers live
  // in system memory, so total is the machine's RAM and free is what the OS calls
  // available.
  const char* source = "system";
};

DeviceMemory device_memory(Context& ctx);

}  // namespace twgpu
