// Margin loss kernels: the multi-class hinge loss (multi_margin_loss, p = 1 or 2, margin,
// optional class weights) and the multi-label hinge loss (multilabel_margin_loss), forward
// and backward, over rows of `dim` scores (input [nframe, dim], contiguous). Terms are
// computed in f32. Targets out of range are skipped (their row contributes nothing) and
// reported through the device error word by `check_targets` (runtime/device_checks.h).
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct MarginGeometry {
  uint32_t nframe = 0, dim = 0;
};

// Sets the device error word to `code` when an int64 element of `t` (`count` of them) is
// outside [lo, hi) with lo either 0 or -1.
void check_targets(Context& ctx, const Operand& t, uint64_t count, int32_t lo, uint32_t hi,
                   uint32_t code);
// Sets the device error word to `code` when a float element of `m` is outside [0, 1].
void check_unit_interval(Context& ctx, const Operand& m, uint64_t count, uint32_t code);

// rows[r] = loss of row r (sum over classes divided by dim). `w` may be absent.
void multi_margin_rows(Context& ctx, const Operand& x, const Operand& target, const Operand& w,
                       const MarginGeometry& g, int p, float margin, const Operand& rows);
// grad_input = d loss / d x times grad_out (per row when `per_row`, else grad_out[0]);
// `scale` is 1/dim (sum, none) or 1/(nframe*dim) (mean).
void multi_margin_backward(Context& ctx, const Operand& grad_out, const Operand& x,
                           const Operand& target, const Operand& w, const MarginGeometry& g, int p,
                           float margin, float scale, bool per_row, const Operand& grad_input);

// rows[r] = loss of row r (divided by dim); is_target (input shape) = 1 where a class is
// one of the row's targets (those before the first -1), else 0.
void multilabel_margin_rows(Context& ctx, const Operand& x, const Operand& target,
                            const MarginGeometry& g, const Operand& rows, const Operand& is_target);
void multilabel_margin_backward(Context& ctx, const Operand& grad_out, const Operand& x,
                                const Operand& target, const Operand& is_target,
                                const MarginGeometry& g, float scale, bool per_row,
                                const Operand& grad_input);

// out[0] = the sum of `n` f32 values (divided by n when `mean`).
void sum_values(Context& ctx, const Operand& values, uint32_t n, bool mean, const Operand& out);

}  // namespace twgpu::nn
