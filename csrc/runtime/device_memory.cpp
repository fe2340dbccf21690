#include "runtime/device_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "runtime/buffer_pool.h"
#include "runtime/context.h"
#include "runtime/dawn_extensions.h"

namespace twgpu {
namespace {

// Bytes in the adapter's device-local heaps (all heaps where none is marked device-local,
// as on unified-memory adapters); 0 when the adapter cannot tell.
uint64_t adapter_heap_bytes(Context& ctx) {
  WGPUAdapter adapter = ctx.adapter_handle();
  if (!wgpuAdapterHasFeature(adapter, dawn::kFeatureAdapterPropertiesMemoryHeaps)) return 0;
  ctx.touch_gl();
  dawn::AdapterInfo holder;
  dawn::AdapterPropertiesMemoryHeaps heaps = {};
  heaps.chain.sType = dawn::kSTypeAdapterPropertiesMemoryHeaps;
  holder.info.nextInChain = &heaps.chain;
  if (wgpuAdapterGetInfo(adapter, &holder.info) != WGPUStatus_Success) return 0;
  uint64_t device_local = 0, all = 0;
  for (size_t i = 0; i < heaps.heapCount; ++i) {
    all += heaps.heapInfo[i].size;
    if (heaps.heapInfo[i].properties & dawn::kHeapPropertyDeviceLocal)
      device_local += heaps.heapInfo[i].size;
  }
  holder.info.nextInChain = nullptr;
  wgpuAdapterInfoFreeMembers(holder.info);
  wgpuAdapterPropertiesMemoryHeapsFreeMembers(heaps);
  return device_local ? device_local : all;
}

uint64_t system_available_bytes() {
  // MemAvailable counts reclaimable page cache, which MemFree (sysconf) does not.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

}  // namespace

DeviceMemory device_memory(Context& ctx) {
  // The adapter's heaps do not change while the process runs: ask once.
  static const uint64_t heap_bytes = adapter_heap_bytes(ctx);
  DeviceMemory m;
  if (heap_bytes) {
    const uint64_t held = ctx.pool().stats().reserved;
    m.total = heap_bytes;
    m.free = held < heap_bytes ? heap_bytes - held : 0;
    m.source = "adapter";
  } else {
    m.total = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    m.free = system_available_bytes();
  }
  return m;
}

}  // namespace twgpu
