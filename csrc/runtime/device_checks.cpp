#include "runtime/device_checks.h"

#include <cstdlib>
#include <cstring>

#include "runtime/command_recorder.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace twgpu {

DeviceChecks::~DeviceChecks() {
  if (buffer_) wgpuBufferRelease(buffer_);
}

uint32_t DeviceChecks::code_for(const std::string& message) {
  for (size_t i = 0; i < messages_.size(); ++i)
    if (messages_[i] == message) return static_cast<uint32_t>(i + 1);
  messages_.push_back(message);
  return static_cast<uint32_t>(messages_.size());
}

WGPUBuffer DeviceChecks::arm() {
  if (!buffer_) {
    ctx_.touch_gl();
    WGPUBufferDescriptor desc = {};
    desc.size = 16;  // WebGPU zero-initializes buffers
    desc.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    buffer_ = wgpuDeviceCreateBuffer(ctx_.device(), &desc);
  }
  armed_ = true;
  return buffer_;
}

void DeviceChecks::settle(uint32_t word) {
  armed_ = false;
  if (word == 0) return;
  const uint32_t zero[4] = {0, 0, 0, 0};
  ctx_.recorder().write(buffer_, 0, zero, sizeof(zero));
  std::string what = word <= messages_.size() ? messages_[word - 1] : "unknown device-side check";
  fail(ErrorKind::DeviceCheck,
       "torch_webgpu: device-side check failed: " + what +
           " (reported at this synchronization; results of that op are undefined: the "
           "offending elements were skipped. Set TORCH_WEBGPU_SYNC_CHECKS=1 to raise in the op "
           "itself)");
}

bool DeviceChecks::synchronous() {
  const char* v = std::getenv("TORCH_WEBGPU_SYNC_CHECKS");
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace twgpu
