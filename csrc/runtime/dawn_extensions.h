// Where this Dawn build (npm bun-webgpu-linux-x64@0.1.7) differs from the webgpu.h we
// compile against (PyPI wgpu 0.31.0, the closest published revision). The layouts below
// follow the struct definitions of the same release's FFI (npm bun-webgpu@0.1.7,
// index.js); the feature number was verified by requesting it on Dawn's Null adapter and
// compiling a WGSL `enable subgroups;` against the device.
#pragma once
#include <webgpu/webgpu.h>

#include <cstring>

namespace twgpu::dawn {

// The header stops at DualSourceBlending (0x10); Dawn numbers `subgroups` next.
constexpr WGPUFeatureName kFeatureSubgroups = static_cast<WGPUFeatureName>(0x11);

// Dawn-only: every API call takes the device's lock, so two threads may call in at once
// (submit_worker.h). Dawn has numbered it 0x50004 across its releases; the device
// reports whether it took it (wgpuDeviceHasFeature).
constexpr WGPUFeatureName kFeatureImplicitDeviceSynchronization =
    static_cast<WGPUFeatureName>(0x50004);

// Dawn's WGPULimits may be longer than the header's (newer revisions append fields such as
// maxImmediateSize). Queries write through this padded holder so Dawn never writes past
// our struct, and a device requested with it gets Dawn's own values for the unknown tail.
struct PaddedLimits {
  WGPULimits limits;
  unsigned char tail[256];
  PaddedLimits() { std::memset(this, 0, sizeof(*this)); }
};

// Dawn's adapter info ends with subgroupMinSize/subgroupMaxSize, which the header lacks.
struct AdapterInfo {
  WGPUAdapterInfo info;
  uint32_t subgroup_min_size;
  uint32_t subgroup_max_size;
  unsigned char tail[64];
  AdapterInfo() { std::memset(this, 0, sizeof(*this)); }
};

// Dawn's entry has bindingArraySize after visibility (0: not an array).
struct BindGroupLayoutEntry {
  WGPUChainedStruct const* nextInChain;
  uint32_t binding;
  WGPUShaderStage visibility;
  uint32_t bindingArraySize;
  WGPUBufferBindingLayout buffer;
  WGPUSamplerBindingLayout sampler;
  WGPUTextureBindingLayout texture;
  WGPUStorageTextureBindingLayout storageTexture;
};

// Dawn's pipeline layout descriptor ends with immediateSize (bytes of push constants).
struct PipelineLayoutDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  size_t bindGroupLayoutCount;
  WGPUBindGroupLayout const* bindGroupLayouts;
  uint32_t immediateSize;
};

// Memory heaps of an adapter, chained to wgpuAdapterGetInfo where the adapter has the
// feature (Vulkan, D3D, Metal; not the GL backends). Both numbers are the ones this build
// names in its own validation messages ("FeatureName::AdapterPropertiesMemoryHeaps",
// "SType::AdapterPropertiesMemoryHeaps") when asked for them on llvmpipe.
constexpr WGPUFeatureName kFeatureAdapterPropertiesMemoryHeaps =
    static_cast<WGPUFeatureName>(0x50015);
constexpr WGPUSType kSTypeAdapterPropertiesMemoryHeaps = static_cast<WGPUSType>(0x50013);
constexpr uint64_t kHeapPropertyDeviceLocal = 0x1;

struct MemoryHeapInfo {
  uint64_t properties;  // kHeapProperty* flags
  uint64_t size;
};

struct AdapterPropertiesMemoryHeaps {
  WGPUChainedStructOut chain;
  size_t heapCount;
  MemoryHeapInfo const* heapInfo;
};

}  // namespace twgpu::dawn

extern "C" void wgpuAdapterPropertiesMemoryHeapsFreeMembers(
    twgpu::dawn::AdapterPropertiesMemoryHeaps value);
