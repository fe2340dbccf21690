// Upsampling kernels over 1 to 3 spatial dimensions of contiguous [planes, D, H, W]
// tensors (missing leading dims have size 1): nearest, nearest-exact, (bi/tri)linear and
// bicubic, with source indices and weights computed as the CPU computes them. Backward
// kernels scatter into a zeroed float32 gradient with atomic adds.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

enum class Interp : uint8_t { Nearest, NearestExact, Linear, Cubic };

struct UpsampleGeometry {
  uint32_t planes = 0;
  uint32_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  float scale[3] = {1, 1, 1};  // input/output ratio per dim, as the CPU computes it
  int nd = 2;                  // spatial dims the op has (the rest are padding)
  bool align_corners = false;
  Interp mode = Interp::Nearest;
  uint64_t out_count() const { return uint64_t(planes) * out[0] * out[1] * out[2]; }
};

void upsample_forward(Context& ctx, const Operand& x, const UpsampleGeometry& g, const Operand& y);
// grad_input: zeroed float32 [planes, in...].
void upsample_backward(Context& ctx, const Operand& grad_out, const UpsampleGeometry& g,
                       const Operand& grad_input);

}  // namespace twgpu::nn
