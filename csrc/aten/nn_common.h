// Helpers shared by the nn op files (norm, pool, upsample, padding, loss): operands for
// the nn kernels and the dtype gate for native calls.
#pragma once
#include <ATen/core/Tensor.h>

#include "aten/webgpu_tensor.h"
#include "kernels/nn_program.h"

namespace twgpu::aten {

// A kernel operand for a webgpu tensor (undefined tensor: null buffer). The tensor must
// be contiguous for the kernels that index it flat.
inline nn::Operand operand(const at::Tensor& t) {
  nn::Operand op;
  if (!t.defined()) return op;
  DeviceRef r = device_ref(t);
  op.buffer = r.buffer;
  op.offset = r.offset;
  op.dtype = r.dtype;
  return op;
}

// True for float32, float16 and bfloat16: the dtypes the nn kernels compute on.
inline bool nn_float(const at::Tensor& t) {
  auto s = t.scalar_type();
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16;
}

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace twgpu::aten
