// Normalization kernels (layer, group, batch norm) forward and backward. Statistics are
// computed in f32, one workgroup per normalized row, in two passes (mean, then the sum of
// squared deviations). Scratch and statistics operands are f32 unless stated.
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

// Element k of row r sits at x[(k / inner) * outer_stride + r * row_stride + k % inner].
// Layer/group norm rows: inner = len, outer_stride = 0, row_stride = len.
// Batch norm channels of [N, C, S]: inner = S, outer_stride = C * S, row_stride = S.
struct RowLayout {
  uint64_t rows = 0;
  uint32_t len = 0, inner = 1, outer_stride = 0, row_stride = 0;
};

// mean[r], rstd[r] = 1 / sqrt(var + eps) and m2[r] = sum of squared deviations.
void norm_moments(Context& ctx, const Operand& x, const RowLayout& layout, float eps,
                  const Operand& mean, const Operand& rstd, const Operand& m2);

// Statistic row and affine channel of flat element i: r = (i / r_div) % r_mod,
// c = (i / c_div) % c_mod.
struct ElementMap {
  uint32_t r_div = 1, r_mod = 1, c_div = 1, c_mod = 1;
};

// y = x * s + (b[c] - mean * s) with s = rstd[r] * w[c] (group/batch norm, as the CPU);
// layer_norm_form: (x * rstd + (-rstd * mean)) * w + b with both affine parameters, else
// (x - mean) * rstd * w + b, as the CPU's layer norm.
// w/b may have a null buffer (absent). `stats` may be any float dtype.
void norm_apply(Context& ctx, const Operand& x, const Operand& mean, const Operand& rstd,
                const Operand& w, const Operand& b, const Operand& y, uint64_t count,
                const ElementMap& map, bool layer_norm_form);

// Layer norm forward of `rows` contiguous rows of `len` elements in one kernel (one
// workgroup per row): y as norm_apply's layer norm form, mean and rstd per row (any float
// dtype, computed in f32; the vec4 kernel needs them f32).
// The mean, then the squared deviations from it, in two sum trees (one tree of
// (count, mean, m2) triples with TORCH_WEBGPU_NORM_MOMENTS=1); on GPUs float32 rows whose
// length and offsets are multiples of 4 move as vec4 (TORCH_WEBGPU_NORM_VEC4=0: the
// scalar kernel, for comparisons).
void layer_norm_rows(Context& ctx, const Operand& x, const Operand& w, const Operand& b,
                     const Operand& y, const Operand& mean, const Operand& rstd, uint64_t rows,
                     uint32_t len, float eps);

// RMS norm forward of `rows` contiguous rows of `len` elements in one kernel:
// rstd = 1 / sqrt(mean(x^2) + eps) (f32) per row, y = (x * rstd) * w (w absent: 1); on
// GPUs layer_norm_rows' vec4 kernel where it fits.
void rms_norm_rows(Context& ctx, const Operand& x, const Operand& w, const Operand& y,
                   const Operand& rstd, uint64_t rows, uint32_t len, float eps);

// 1 / sqrt(var + eps) for n values (batch norm in evaluation).
void norm_invstd(Context& ctx, const Operand& var, float eps, const Operand& out, uint64_t n);

// Running statistics update: rm' = m * mean + (1 - m) * rm; rv' = m * m2 / (count - 1) +
// (1 - m) * rv.
void norm_running_update(Context& ctx, const Operand& mean, const Operand& m2,
                         const Operand& rm, const Operand& rv, const Operand& rm_out,
                         const Operand& rv_out, uint64_t channels, float momentum,
                         uint64_t count);

// Layer/group norm backward, per row r of `len` elements of x/dy (contiguous rows): with
// g = dy * w[c], ds = sum g * x and db = sum g over the row,
// cb[r] = (db * mean - ds) * rstd^3 / len and cc[r] = -cb * mean - db * rstd / len.
// The w channel of element k of row r is c = (r % groups) * per_group + k / c_div (layer
// norm: groups = 1, per_group = 0, c_div = 1: c = k).
void norm_backward_coeffs(Context& ctx, const Operand& dy, const Operand& x, const Operand& mean,
                          const Operand& rstd, const Operand& w, uint64_t rows, uint32_t len,
                          uint32_t groups, uint32_t per_group, uint32_t c_div,
                          const Operand& cb, const Operand& cc);

// dx = rstd[r] * w[c] * dy + cb[r] * x + cc[r] (element map as norm_apply).
void norm_backward_input(Context& ctx, const Operand& dy, const Operand& x, const Operand& rstd,
                         const Operand& w, const Operand& cb, const Operand& cc,
                         const Operand& dx, uint64_t count, const ElementMap& map);

// Per channel sums over a RowLayout of dy/x: dw[c] = sum dy * (x - mean[s]) * rstd[s],
// db[c] = sum dy, where the statistic row of element k is s = (k / s_div) * s_mul + c / s_cdiv
// (layer norm columns: s = k; group norm: s = n * G + c / D; batch norm: s = c).
void norm_affine_grads(Context& ctx, const Operand& dy, const Operand& x, const Operand& mean,
                       const Operand& rstd, const RowLayout& layout, uint32_t s_div,
                       uint32_t s_mul, uint32_t s_cdiv, const Operand& dw, const Operand& db);

// Batch norm training backward: with sum = db[c], dotp[c] computed by norm_affine_grads
// (dw = dotp * invstd), dx = (dy - sum / n - (x - mean) * dotp * invstd^2 / n) * invstd * w.
// Evaluation (train = false): dx = dy * invstd * w.
void batch_norm_backward_input(Context& ctx, const Operand& dy, const Operand& x,
                               const Operand& mean, const Operand& invstd, const Operand& w,
                               const Operand& sum_dy, const Operand& dotp, const Operand& dx,
                               uint64_t count, uint32_t inner, uint32_t channels, uint64_t n,
                               bool train);

}  // namespace twgpu::nn
