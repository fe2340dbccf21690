// Loss scaling for mixed-precision training (torch.amp.GradScaler's two device ops):
//   unscale_grad:      g *= inv_scale in place (g unchanged when inv_scale is 1), and
//                      found_inf = 1 when any element of g is inf or NaN;
//   update_loss_scale: the scale backs off after a step with inf/NaN gradients and grows
//                      after `growth_interval` clean steps in a row.
// Both read their scalars (inv_scale, found_inf, scale, growth tracker) from device memory,
// so a training step never waits for the GPU.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

constexpr int kGradScalingMaxDims = 8;

// One element of a buffer (float32, or int32 for the growth tracker).
struct ScalarSlot {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
};

// A gradient: Float32, Float16 or BFloat16, any strides (at most kGradScalingMaxDims dims,
// outermost first; element strides >= 0).
struct StridedGrad {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
  DType dtype = DType::Float32;
  std::vector<uint64_t> sizes, strides;
};

// The gradient, inv_scale and found_inf must live in three different buffers (a buffer
// binds once per dispatch when one binding writes).
void unscale_grad(Context& ctx, const StridedGrad& grad, ScalarSlot inv_scale,
                  ScalarSlot found_inf);

struct LossScaleUpdate {
  ScalarSlot scale;           // float32, updated in place
  ScalarSlot growth_tracker;  // int32, updated in place
  ScalarSlot found_inf;       // float32, read
  double growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// The three slots must live in three different buffers.
void update_loss_scale(Context& ctx, const LossScaleUpdate& u);

}  // namespace twgpu
