// Pairwise distances (cdist, pdist) and their gradients, float32. Each output element is
// one invocation that walks its vector pair in order, as the CPU does, so sums match it
// to rounding.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::dist {

// Which norm: the CPU specialises p = 0, 1, 2, inf; every other p uses pow. Backward
// splits "other" into p < 2 and p > 2 (different formulas).
enum class Norm : uint8_t { Zero, One, Two, Inf, General };
Norm norm_of(double p);

// x1 [batch, r1, m], x2 [batch, r2, m] contiguous -> out [batch, r1, r2].
void cdist_forward(Context& ctx, const nn::Operand& x1, const nn::Operand& x2, const nn::Operand& out,
                   uint32_t batch, uint32_t r1, uint32_t r2, uint32_t m, double p);
// grad_x1 [batch, r1, m] from grad and dist [batch, r1, r2] (contiguous).
void cdist_backward(Context& ctx, const nn::Operand& grad, const nn::Operand& x1, const nn::Operand& x2,
                    const nn::Operand& dist, const nn::Operand& grad_x1, uint32_t batch, uint32_t r1,
                    uint32_t r2, uint32_t m, double p);
// x [n, m] -> out [n (n - 1) / 2], pairs (i < j) in row-major order.
void pdist_forward(Context& ctx, const nn::Operand& x, const nn::Operand& out, uint32_t n, uint32_t m,
                   double p);
// grad_x [n, m] from grad and dist [n (n - 1) / 2].
void pdist_backward(Context& ctx, const nn::Operand& grad, const nn::Operand& x, const nn::Operand& dist,
                    const nn::Operand& grad_x, uint32_t n, uint32_t m, double p);

}  // namespace twgpu::dist
