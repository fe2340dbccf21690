// Runtime errors carry a kind so the ATen layer can raise the matching Python exception
// (torch.OutOfMemoryError, NotImplementedError, RuntimeError, ...).
#pragma once
#include <stdexcept>
#include <string>

namespace twgpu {

enum class ErrorKind {
  Internal,        // a bug of ours or a WebGPU validation error: RuntimeError
  OutOfMemory,     // allocation beyond the device's memory or maxBufferSize
  DeviceLost,      // the device is gone; every later call fails the same way
  ShaderCompile,   // WGSL rejected: message names the kernel and holds the source
  Unsupported,     // dtype or feature this adapter cannot do: NotImplementedError
  InvalidArgument, // bad shapes or arguments: ValueError/RuntimeError
  NoAdapter,       // no usable WebGPU adapter on this machine
  DeviceCheck,     // a kernel found a bad argument (index out of range): RuntimeError
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}

}  // namespace twgpu
