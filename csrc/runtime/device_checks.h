// Device-side argument checks (CUDA's device-side assert, made recoverable). Kernels that
// read indices bind one small "error word" buffer and atomicMax a code into it when an
// index is out of range (they skip that element, so nothing outside a buffer is touched).
// Codes name the op; the host keeps the table. The recorder reads the word back together
// with the data of every read-back (no extra round trip) while a checking kernel ran since
// the last one, and raises Error(DeviceCheck) naming the op; the word is then reset so the
// process keeps working.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <string>
#include <vector>

namespace twgpu {

class Context;

class DeviceChecks {
 public:
  explicit DeviceChecks(Context& ctx) : ctx_(ctx) {}
  ~DeviceChecks();

  // A stable nonzero code for a failure message (e.g. "index out of bounds in aten::gather").
  uint32_t code_for(const std::string& message);
  // The error word for a kernel about to be recorded; the next read-back looks at it.
  WGPUBuffer arm();
  bool armed() const { return armed_; }
  WGPUBuffer buffer() const { return buffer_; }
  // Called by the recorder with the word it read back (all armed work has completed):
  // disarms, and when the word is set, resets it and raises Error(DeviceCheck).
  void settle(uint32_t word);
  // TORCH_WEBGPU_SYNC_CHECKS=1: kernels that arm the word are waited for right away, so
  // a failed check raises in the op that caused it. Read on every call (cheap).
  static bool synchronous();

 private:
  Context& ctx_;
  WGPUBuffer buffer_ = nullptr;
  bool armed_ = false;
  std::vector<std::string> messages_;
};

}  // namespace twgpu
