// Program tensors as the nn kernel family's operands (kernels/nn_program.h).
#pragma once
#include "engine/device_tensor.h"
#include "kernels/nn_program.h"

namespace twgpu::engine {

inline nn::Operand nn_operand(const DeviceTensor* t) {
  nn::Operand o;
  if (!t) return o;  // absent (null buffer)
  o.buffer = t->buffer;
  o.offset = t->offset;
  o.dtype = t->dtype;
  return o;
}

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

}  // namespace twgpu::engine
