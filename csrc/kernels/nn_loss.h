// Loss kernels: pointwise losses (MSE, smooth L1, Huber, binary cross-entropy) with
// their reductions done in the same kernel (one workgroup sums every term), and the
// negative log-likelihood loss over [N, C, S] inputs with class weights and an ignored
// index. Terms are computed in f32.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

enum class PointLoss : uint8_t { Mse, SmoothL1, Huber, Bce };
enum class Reduce : uint8_t { None = 0, Mean = 1, Sum = 2 };  // ATen's Reduction values

// out: `count` elements (None) or one. `w` (BCE weight, same numel) may be absent.
void point_loss(Context& ctx, PointLoss kind, const Operand& x, const Operand& t, const Operand& w,
                float param, uint64_t count, Reduce r, const Operand& out);
// grad_input from grad_out (one element unless None).
void point_loss_backward(Context& ctx, PointLoss kind, const Operand& grad_out, const Operand& x,
                         const Operand& t, const Operand& w, float param, uint64_t count, Reduce r,
                         const Operand& grad_input);
// out[0] (f32) = the number of x outside [0, 1] (BCE's input check).
void count_outside_unit(Context& ctx, const Operand& x, uint64_t count, const Operand& out);

struct NllGeometry {
  uint32_t n = 0, classes = 0, inner = 1;  // input [n, classes, inner], target [n, inner]
  int64_t ignore_index = -100;
};
// Reductions: out[0] = loss sum (or mean), total_weight[0] = summed weights, bad[0] (f32) =
// number of targets outside [0, classes) that are not ignored. None: out[n * inner].
void nll_forward(Context& ctx, const Operand& x, const Operand& target, const Operand& w,
                 const NllGeometry& g, Reduce r, const Operand& out, const Operand& total_weight,
                 const Operand& bad);
// grad_input (zeroed, input shape): -w[t] * grad (divided by total_weight for the mean).
void nll_backward(Context& ctx, const Operand& grad_out, const Operand& target, const Operand& w,
                  const Operand& total_weight, const NllGeometry& g, Reduce r,
                  const Operand& grad_input);

}  // namespace twgpu::nn
