// Reflection and replication padding over 1 to 3 spatial dims of contiguous
// [planes, D, H, W] tensors (missing leading dims have size 1, pad 0). Backward scatters
// into a zeroed float32 gradient with atomic adds.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct PadGeometry {
  uint32_t planes = 0;
  uint32_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int32_t before[3] = {0, 0, 0};  // padding before each dim (may be negative)
  bool reflect = true;            // else replicate
  uint64_t out_count() const { return uint64_t(planes) * out[0] * out[1] * out[2]; }
};

void pad_forward(Context& ctx, const Operand& x, const PadGeometry& g, const Operand& y);
void pad_backward(Context& ctx, const Operand& grad_out, const PadGeometry& g,
                  const Operand& grad_input);

}  // namespace twgpu::nn
