// Helpers shared by the nn op files (norm, pool, upsample, padding, loss): operands for
// the nn kernels and the dtype gate for native calls.
#pragma once
#include <ATen/core/Tensor.h>

#include <algorithm>

#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/nn_program.h"
#include "runtime/runtime.h"

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
  // The elements its view spans: kernels index within it, so a buffer larger than one
  // storage binding is bound through the window over them.
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) > 0) span += (t.size(d) - 1) * t.stride(d);
  op.count = static_cast<uint64_t>(t.numel() > 0 ? span : 1);
  return op;
}

// Pieces of dim 0 of `t` so that each spans at most one storage binding's bytes: the
// whole dim when `t` fits. Ops whose rows are independent run once per piece.
inline int64_t rows_per_binding(const at::Tensor& t) {
  const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
  const uint64_t budget = window_budget(Context::get());  // reads only the fixed limits
  if (rows <= 1 || t.nbytes() <= budget) return std::max<int64_t>(rows, 1);
  const uint64_t row = t.nbytes() / static_cast<uint64_t>(rows);
  return std::max<int64_t>(1, static_cast<int64_t>(budget / std::max<uint64_t>(row, 1)));
}

// True for float32, float16 and bfloat16: the dtypes the nn kernels compute on.
inline bool nn_float(const at::Tensor& t) {
  auto s = t.scalar_type();
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16;
}

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace twgpu::aten
