// torch.ops.webgpu.create_buffer / write_buffer: raw device buffers as torch operators, for
// code that manages bytes itself (weights loaders, the engine's tools). A buffer is a uint8
// tensor on the device, so everything else (views, copies, freeing) is ordinary PyTorch.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

at::Tensor create_buffer(c10::SymInt size) {
  const int64_t bytes = size.expect_int();
  TORCH_CHECK_VALUE(bytes >= 0, "webgpu::create_buffer: size must be non-negative, got ", bytes);
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(kDeviceType, 0));
}

void write_buffer(const at::Tensor& buffer, const at::Tensor& data) {
  TORCH_CHECK(buffer.device().type() == kDeviceType,
              "webgpu::write_buffer: the buffer must be a webgpu tensor, got ", buffer.device());
  TORCH_CHECK(data.device().is_cpu(), "webgpu::write_buffer: data must be a CPU tensor, got ",
              data.device());
  TORCH_CHECK(buffer.is_contiguous(), "webgpu::write_buffer: the buffer must be contiguous");
  TORCH_CHECK(data.nbytes() == buffer.nbytes(), "webgpu::write_buffer: data has ",
              data.nbytes(), " bytes but the buffer has ", buffer.nbytes());
  if (buffer.nbytes() == 0) return;
  // Reinterpret the bytes in the buffer's dtype and shape, then copy host to device.
  at::Tensor bytes = data.contiguous().reshape({-1}).view(at::kByte);
  buffer.copy_(bytes.view(buffer.scalar_type()).view(buffer.sizes()));
}

}  // namespace

TORCH_LIBRARY(webgpu, m) {
  m.def("create_buffer(SymInt size) -> Tensor");
  m.def("write_buffer(Tensor(a!) buffer, Tensor data) -> ()");
}

TORCH_LIBRARY_IMPL(webgpu, CompositeExplicitAutograd, m) {
  m.impl("create_buffer", &create_buffer);
}

TORCH_LIBRARY_IMPL(webgpu, PrivateUse1, m) {
  m.impl("write_buffer", &write_buffer);
}

}  // namespace twgpu::aten
