// Pooling kernels over 1 to 3 spatial dimensions (a 2-d pool is a 3-d one with depth 1),
// on contiguous [planes, D, H, W] tensors. Each output element walks its window; backward
// kernels scatter into a zeroed float32 gradient with atomic adds.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct PoolGeometry {
  uint32_t planes = 0;
  uint32_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};  // D, H, W
  uint32_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  bool adaptive = false;  // windows [floor(o*I/O), ceil((o+1)*I/O)) instead of k/s/p/d
  uint64_t out_count() const { return uint64_t(planes) * out[0] * out[1] * out[2]; }
};

// Max over each window, NaN wins; `indices` (int64) is the flat D*H*W input position.
void pool_max_forward(Context& ctx, const Operand& x, const PoolGeometry& g, const Operand& y,
                      const Operand& indices);
// Fractional max pooling: windows of k taps starting at pseudo-random offsets drawn from
// `samples` ([planes, per_plane] floats in [0, 1)): sample index[j] moves dim j (D, H, W;
// -1 for none), its start arithmetic rounded to `round` (the samples' dtype) as the CPU.
struct FractionalSamples {
  uint32_t per_plane = 2;
  int32_t index[3] = {-1, 1, 0};
  DType round = DType::Float32;
};
void pool_max_fractional(Context& ctx, const Operand& x, const Operand& samples,
                         const PoolGeometry& g, const FractionalSamples& f, const Operand& y,
                         const Operand& indices);
// grad_input[plane, indices] += grad_out (grad_input: zeroed float32).
void pool_max_backward(Context& ctx, const Operand& grad_out, const Operand& indices,
                       const PoolGeometry& g, const Operand& grad_input);
// Average over each window: divisor_override when nonzero, else the padded window size
// (count_include_pad) or the number of input elements in it.
void pool_avg_forward(Context& ctx, const Operand& x, const PoolGeometry& g,
                      bool count_include_pad, int64_t divisor_override, const Operand& y);
void pool_avg_backward(Context& ctx, const Operand& grad_out, const PoolGeometry& g,
                       bool count_include_pad, int64_t divisor_override,
                       const Operand& grad_input);

}  // namespace twgpu::nn

namespace twgpu::nn {

// Max unpooling: out[plane, indices[plane, i]] = x[plane, i] for x of [planes, in_plane]
// and out (zeroed) of [planes, out_plane]; indices outside [0, out_plane) are skipped.
void max_unpool(Context& ctx, const Operand& x, const Operand& indices, uint32_t planes,
                uint32_t in_plane, uint32_t out_plane, const Operand& out);
// bad[0] (f32) = the number of indices outside [0, out_plane).
void count_bad_indices(Context& ctx, const Operand& indices, uint64_t count, uint32_t out_plane,
                       const Operand& bad);

}  // namespace twgpu::nn
