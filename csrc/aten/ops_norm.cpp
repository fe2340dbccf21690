// Native layer, RMS, group and batch normalization, forward and backward. Statistics are
// computed in f32 by the kernels of nn_norm; outputs take the dtypes the CPU gives
// (statistics in the input dtype, or float32 when half inputs come with float32
// parameters). Other dtype mixes and float64 go to the CPU fallback, which also raises
// the CPU's errors for them.
#include <ATen/native/layer_norm.h>
#include <ATen/ops/_fused_rms_norm_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/_batch_norm_with_update_ops.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/batch_norm_backward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_group_norm_backward_ops.h>
#include <ATen/ops/native_group_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_norm.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

Tensor opt(const OptT& t) { return t.has_value() ? *t : Tensor(); }

// Parameters must all share the input's dtype, or all be float32 with a half input (the
// CPU's mixed mode, statistics then in float32). nullopt: not native (fallback).
std::optional<at::ScalarType> stats_dtype(const Tensor& input,
                                          std::initializer_list<const Tensor*> params) {
  if (!nn_float(input)) return std::nullopt;
  bool all_same = true, all_float = true, any = false;
  for (const Tensor* p : params) {
    if (!p->defined()) continue;
    if (p->device() != input.device()) return std::nullopt;
    any = true;
    if (p->scalar_type() != input.scalar_type()) all_same = false;
    if (p->scalar_type() != at::kFloat) all_float = false;
  }
  if (all_same) return input.scalar_type();
  if (any && all_float && input.scalar_type() != at::kFloat) return at::kFloat;
  return std::nullopt;
}

Tensor f32_empty(const Tensor& like, int64_t n) {
  return at::empty({n}, like.options().dtype(at::kFloat));
}

// ---- layer norm -------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& input, at::IntArrayRef shape,
                                              const OptT& weight_opt, const OptT& bias_opt,
                                              double eps) {
  Tensor weight = opt(weight_opt), bias = opt(bias_opt);
  auto MN = at::native::_check_layer_norm_inputs(input, shape, weight, bias);
  const int64_t M = MN.first, N = MN.second;
  auto sdt = stats_dtype(input, {&weight, &bias});
  if (!sdt || (N == 0 && M > 0))
    return call_cpu_fallback<at::_ops::native_layer_norm>(input, shape, weight_opt, bias_opt, eps);
  const int axis = input.dim() - static_cast<int>(shape.size());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  for (size_t i = 0; i < shape.size(); ++i) stat_shape.push_back(1);
  Tensor x = input.contiguous();
  Tensor y = at::empty(input.sizes(), x.options());
  if (M == 0)
    return {y, at::empty(stat_shape, x.options().dtype(*sdt)),
            at::empty(stat_shape, x.options().dtype(*sdt))};
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  // The statistics are stored in their result dtype by the kernel itself (computed in f32):
  // half inputs need no cast dispatches after it.
  Tensor mean = at::empty({M}, x.options().dtype(*sdt)), rstd = at::empty({M}, x.options().dtype(*sdt));
  TWGPU_TRY
  RuntimeLock lock;
  nn::layer_norm_rows(lock.ctx(), operand(x), operand(w), operand(b), operand(y), operand(mean),
                      operand(rstd), static_cast<uint64_t>(M), u32(N), static_cast<float>(eps));
  TWGPU_CATCH
  return {y, mean.view(stat_shape), rstd.view(stat_shape)};
}

// ---- RMS norm ---------------------------------------------------------------------------
// torch's rms_norm calls _fused_rms_norm on every device; its autograd formula calls
// _fused_rms_norm_backward. Results as torch's decomposition: computed in float32, y in the
// input's dtype, rstd float32 shaped [outer dims, 1...].

std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, at::IntArrayRef shape,
                                          const OptT& weight_opt, std::optional<double> eps) {
  Tensor weight = opt(weight_opt);
  at::native::_check_rms_norm_inputs_symint(input, c10::fromIntArrayRefSlow(shape), weight);
  const int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
  const int64_t M = c10::multiply_integers(input.sizes().begin(), input.sizes().begin() + axis);
  const int64_t N = c10::multiply_integers(shape);
  const bool weight_ok = !weight.defined() || (nn_float(weight) && weight.device() == input.device());
  if (!nn_float(input) || !weight_ok || (N == 0 && M > 0))
    return call_cpu_fallback<at::_ops::_fused_rms_norm>(input, shape, weight_opt, eps);
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  Tensor x = input.contiguous();
  Tensor y = at::empty(input.sizes(), x.options());
  Tensor rstd = at::empty(stat_shape, x.options().dtype(at::kFloat));
  if (M == 0) return {y, rstd};
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  const float eps_value = eps ? static_cast<float>(*eps) : std::numeric_limits<float>::epsilon();
  TWGPU_TRY
  RuntimeLock lock;
  nn::rms_norm_rows(lock.ctx(), operand(x), operand(w), operand(y), operand(rstd),
                    static_cast<uint64_t>(M), u32(N), eps_value);
  TWGPU_CATCH
  return {y, rstd};
}

// With g = grad * w and x_hat = x * rstd: dx = (g - x_hat / N * sum(x_hat * g)) * rstd over
// each row, dw = sum over rows of grad * x_hat (native ops, in float32).
std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                   at::IntArrayRef shape, const Tensor& rstd,
                                                   const OptT& weight_opt,
                                                   std::array<bool, 2> mask) {
  Tensor weight = opt(weight_opt);
  const int64_t axis = input.dim() - static_cast<int64_t>(shape.size());
  const int64_t N = c10::multiply_integers(shape);
  std::vector<int64_t> inner, outer;
  for (int64_t d = 0; d < input.dim(); ++d) (d >= axis ? inner : outer).push_back(d);
  if (input.numel() == 0)
    return {mask[0] ? at::zeros(input.sizes(), input.options()) : Tensor(),
            mask[1] ? at::zeros(input.sizes().slice(axis), input.options()) : Tensor()};
  Tensor g32 = grad_out.to(at::kFloat).contiguous(), x32 = input.to(at::kFloat).contiguous();
  Tensor w32 = weight.defined() ? weight.to(at::kFloat) : Tensor();
  Tensor r = rstd.to(at::kFloat);
  Tensor x_hat = at::mul(x32, r);
  Tensor dx, dw;
  if (mask[0]) {
    Tensor g = w32.defined() ? at::mul(g32, w32) : g32;
    Tensor dot = at::sum(at::mul(x_hat, g), inner, /*keepdim=*/true);
    Tensor along = at::mul(x_hat, at::mul(dot, 1.0 / static_cast<double>(N)));
    dx = at::mul(at::sub(g, along), r).to(input.scalar_type());
  }
  if (mask[1] && weight.defined()) {
    Tensor full = at::mul(g32, x_hat);
    dw = (outer.empty() ? full : at::sum(full, outer)).to(weight.scalar_type());
  }
  return {dx, dw};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       at::IntArrayRef shape, const Tensor& mean,
                                                       const Tensor& rstd, const OptT& weight_opt,
                                                       const OptT& bias_opt,
                                                       std::array<bool, 3> mask) {
  Tensor weight = opt(weight_opt), bias = opt(bias_opt);
  auto MN = at::native::_check_layer_norm_inputs(input, shape, weight, bias);
  const int64_t M = MN.first, N = MN.second;
  auto sdt = stats_dtype(input, {&weight, &bias});
  if (!sdt || grad_out.scalar_type() != input.scalar_type() || !nn_float(mean) ||
      !nn_float(rstd) || (N == 0 && M > 0))
    return call_cpu_fallback<at::_ops::native_layer_norm_backward>(
        grad_out, input, shape, mean, rstd, weight_opt, bias_opt, mask);
  Tensor x = input.contiguous(), dy = grad_out.contiguous();
  Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(input.sizes(), x.options());
  Tensor dw32, db32;
  if ((mask[1] && weight.defined()) || (mask[2] && bias.defined())) {
    dw32 = f32_empty(x, N);
    db32 = f32_empty(x, N);
  }
  if (M > 0) {
    // Pieces of rows when x is larger than one storage binding; the affine gradients of
    // later pieces are added to the first's.
    const Tensor x2 = x.view({M, N}), dy2 = dy.view({M, N}), mu1 = mu.view({M}), rs1 = rs.view({M});
    const int64_t step = rows_per_binding(x2);
    Tensor dx2 = mask[0] ? dx.view({M, N}) : dx;
    Tensor dw_part, db_part;
    if (dw32.defined() && step < M) {
      dw_part = f32_empty(x, N);
      db_part = f32_empty(x, N);
    }
    TWGPU_TRY
    RuntimeLock lock;
    for (int64_t lo = 0; lo < M; lo += step) {
      const int64_t n = std::min(step, M - lo);
      const Tensor xs = x2.narrow(0, lo, n), dys = dy2.narrow(0, lo, n);
      const Tensor mus = mu1.narrow(0, lo, n), rss = rs1.narrow(0, lo, n);
      if (mask[0]) {
        Tensor cb = f32_empty(x, n), cc = f32_empty(x, n);
        nn::norm_backward_coeffs(lock.ctx(), operand(dys), operand(xs), operand(mus), operand(rss),
                                 operand(w), u32(n), u32(N), 1, 0, 1, operand(cb), operand(cc));
        nn::ElementMap em{u32(N), u32(n), 1, u32(N)};
        nn::norm_backward_input(lock.ctx(), operand(dys), operand(xs), operand(rss), operand(w),
                                operand(cb), operand(cc), operand(dx2.narrow(0, lo, n)),
                                static_cast<uint64_t>(n * N), em);
      }
      if (dw32.defined()) {
        // Columns: element k of column c is x[k * N + c]; its statistic row is k.
        nn::RowLayout L{static_cast<uint64_t>(N), u32(n), 1, u32(N), 1};
        const bool first = lo == 0;
        nn::norm_affine_grads(lock.ctx(), operand(dys), operand(xs), operand(mus), operand(rss), L, 1,
                              1, 0xffffffffu, operand(first ? dw32 : dw_part), operand(first ? db32 : db_part));
        if (!first) {
          dw32.add_(dw_part);
          db32.add_(db_part);
        }
      }
    }
    TWGPU_CATCH
  } else if (dw32.defined()) {
    dw32.zero_();
    db32.zero_();
  }
  if (mask[1] && weight.defined()) dw = dw32.to(weight.scalar_type()).view(weight.sizes());
  if (mask[2] && bias.defined()) db = db32.to(bias.scalar_type()).view(bias.sizes());
  return {dx, dw, db};
}

// ---- group norm ---------------------------------------------------------------------------

void check_group_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t N,
                      int64_t C, int64_t HxW, int64_t group) {
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "Expected input to have ", N * C * HxW, " elements");
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == C),
              "Expected weight to be a vector of size equal to the number of channels in input, "
              "but got weight of shape ", weight.sizes(), " and input of shape ", input.sizes());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.numel() == C),
              "Expected bias to be a vector of size equal to the number of channels in input, "
              "but got bias of shape ", bias.sizes(), " and input of shape ", input.sizes());
}

std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& input, const OptT& weight_opt,
                                              const OptT& bias_opt, int64_t N, int64_t C,
                                              int64_t HxW, int64_t group, double eps) {
  Tensor weight = opt(weight_opt), bias = opt(bias_opt);
  auto sdt = stats_dtype(input, {&weight, &bias});
  if (!sdt || group <= 0 || C % group != 0 || input.numel() != N * C * HxW)
    return call_cpu_fallback<at::_ops::native_group_norm>(input, weight_opt, bias_opt, N, C, HxW,
                                                          group, eps);
  check_group_norm(input, weight, bias, N, C, HxW, group);
  const int64_t D = C / group, len = D * HxW, rows = N * group;
  if (len == 0 && rows > 0)
    return call_cpu_fallback<at::_ops::native_group_norm>(input, weight_opt, bias_opt, N, C, HxW,
                                                          group, eps);
  Tensor x = input.contiguous();
  Tensor y = at::empty(input.sizes(), x.options());
  Tensor mean = f32_empty(x, rows), rstd = f32_empty(x, rows), m2 = f32_empty(x, rows);
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  if (rows > 0) {
    // Pieces of whole images (all of them at once unless x is larger than one binding).
    const int64_t step = x.dim() > 0 && x.size(0) == N ? rows_per_binding(x) : N;
    TWGPU_TRY
    RuntimeLock lock;
    for (int64_t lo = 0; lo < N; lo += step) {
      const int64_t n = std::min(step, N - lo), r0 = lo * group, nr = n * group;
      const Tensor xs = x.narrow(0, lo, n), ys = y.narrow(0, lo, n);
      const Tensor ms = mean.narrow(0, r0, nr), rs = rstd.narrow(0, r0, nr), m2s = m2.narrow(0, r0, nr);
      nn::RowLayout L{static_cast<uint64_t>(nr), u32(len), u32(len), 0, u32(len)};
      nn::norm_moments(lock.ctx(), operand(xs), L, static_cast<float>(eps), operand(ms),
                       operand(rs), operand(m2s));
      nn::ElementMap em{u32(len), u32(nr), u32(std::max<int64_t>(HxW, 1)), u32(C)};
      nn::norm_apply(lock.ctx(), operand(xs), operand(ms), operand(rs), operand(w), operand(b),
                     operand(ys), static_cast<uint64_t>(nr * len), em, false);
    }
    TWGPU_CATCH
  }
  return {y, mean.to(*sdt).view({N, group}), rstd.to(*sdt).view({N, group})};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       const OptT& weight_opt, int64_t N, int64_t C,
                                                       int64_t HxW, int64_t group,
                                                       std::array<bool, 3> mask) {
  Tensor weight = opt(weight_opt);
  auto sdt = stats_dtype(input, {&weight});
  const int64_t D = group > 0 ? C / group : 0, len = D * HxW, rows = N * group;
  if (!sdt || grad_out.scalar_type() != input.scalar_type() || group <= 0 || C % group != 0 ||
      input.numel() != N * C * HxW || !nn_float(mean) || !nn_float(rstd) ||
      mean.numel() != rows || rstd.numel() != rows || (weight.defined() && weight.numel() != C) ||
      (len == 0 && rows > 0) || HxW == 0)
    return call_cpu_fallback<at::_ops::native_group_norm_backward>(grad_out, input, mean, rstd,
                                                                   weight_opt, N, C, HxW, group,
                                                                   mask);
  Tensor x = input.contiguous(), dy = grad_out.contiguous();
  Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(input.sizes(), x.options());
  Tensor dw32, db32;
  if (mask[1] || mask[2]) {
    dw32 = f32_empty(x, C);
    db32 = f32_empty(x, C);
  }
  if (rows > 0) {
    // Pieces of whole images when x is larger than one storage binding; the affine
    // gradients of later pieces are added to the first's.
    const Tensor x3 = x.view({N, C * HxW}), dy3 = dy.view({N, C * HxW});
    const Tensor mu1 = mu.view({rows}), rs1 = rs.view({rows});
    const int64_t step = rows_per_binding(x3);
    Tensor dw_part, db_part;
    if (dw32.defined() && step < N) {
      dw_part = f32_empty(x, C);
      db_part = f32_empty(x, C);
    }
    TWGPU_TRY
    RuntimeLock lock;
    for (int64_t lo = 0; lo < N; lo += step) {
      const int64_t n = std::min(step, N - lo), nr = n * group;
      const Tensor xs = x3.narrow(0, lo, n), dys = dy3.narrow(0, lo, n);
      const Tensor mus = mu1.narrow(0, lo * group, nr), rss = rs1.narrow(0, lo * group, nr);
      if (mask[0]) {
        Tensor cb = f32_empty(x, nr), cc = f32_empty(x, nr);
        nn::norm_backward_coeffs(lock.ctx(), operand(dys), operand(xs), operand(mus), operand(rss),
                                 operand(w), u32(nr), u32(len), u32(group), u32(D), u32(HxW),
                                 operand(cb), operand(cc));
        nn::ElementMap em{u32(len), u32(nr), u32(HxW), u32(C)};
        nn::norm_backward_input(lock.ctx(), operand(dys), operand(xs), operand(rss), operand(w),
                                operand(cb), operand(cc), operand(dx.view({N, C * HxW}).narrow(0, lo, n)),
                                static_cast<uint64_t>(nr * len), em);
      }
      if (dw32.defined()) {
        // Channel c over [n, HxW]: element k at (k / HxW) * C * HxW + c * HxW + k % HxW; its
        // statistic row is n * G + c / D.
        nn::RowLayout L{static_cast<uint64_t>(C), u32(n * HxW), u32(HxW), u32(C * HxW), u32(HxW)};
        const bool first = lo == 0;
        nn::norm_affine_grads(lock.ctx(), operand(dys), operand(xs), operand(mus), operand(rss), L,
                              u32(HxW), u32(group), u32(D), operand(first ? dw32 : dw_part),
                              operand(first ? db32 : db_part));
        if (!first) {
          dw32.add_(dw_part);
          db32.add_(db_part);
        }
      }
    }
    TWGPU_CATCH
  } else if (dw32.defined()) {
    dw32.zero_();
    db32.zero_();
  }
  at::ScalarType pdt = weight.defined() ? weight.scalar_type() : input.scalar_type();
  if (mask[1]) dw = dw32.to(pdt);
  if (mask[2]) db = db32.to(pdt);
  return {dx, dw, db};
}

// ---- batch norm -----------------------------------------------------------------------------

struct BatchGeometry {
  int64_t N, C, S;
};
BatchGeometry batch_geometry(const Tensor& x) {
  TORCH_CHECK(x.dim() >= 2, "batch_norm: expected input with at least 2 dimensions, got ",
              x.dim());
  BatchGeometry g{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) g.S *= x.size(d);
  return g;
}

bool batch_native(const Tensor& input, const Tensor& w, const Tensor& b, const Tensor& rm,
                  const Tensor& rv, bool training = false) {
  if (!stats_dtype(input, {&w, &b, &rm, &rv}) || input.dim() < 2) return false;
  if (training && input.numel() == 0) return false;  // the CPU raises
  const int64_t C = input.size(1);
  for (const Tensor* p : {&w, &b, &rm, &rv})
    if (p->defined() && p->numel() != C) return false;
  return true;
}

// Forward with optional in-place running statistics update; returns (y, save_mean,
// save_invstd) as the CPU does (evaluation: empty statistics).
std::tuple<Tensor, Tensor, Tensor> batch_norm_impl(const Tensor& input, const Tensor& weight,
                                                   const Tensor& bias, Tensor running_mean,
                                                   Tensor running_var, bool training,
                                                   double momentum, double eps) {
  auto sdt = *stats_dtype(input, {&weight, &bias, &running_mean, &running_var});
  auto g = batch_geometry(input);
  Tensor x = input.contiguous();
  Tensor y = at::empty(input.sizes(), x.options());
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor b = bias.defined() ? bias.contiguous() : bias;
  const uint64_t count = static_cast<uint64_t>(x.numel());
  const int64_t n = g.N * g.S;
  nn::ElementMap em{u32(g.S), u32(g.C), u32(g.S), u32(g.C)};
  if (!training) {
    TORCH_CHECK(running_mean.defined() && running_var.defined(),
                "running_mean and running_var must be defined in evaluation mode");
    Tensor rm = running_mean.contiguous(), rv = running_var.contiguous();
    Tensor invstd = f32_empty(x, g.C);
    TWGPU_TRY
    RuntimeLock lock;
    nn::norm_invstd(lock.ctx(), operand(rv), static_cast<float>(eps), operand(invstd),
                    static_cast<uint64_t>(g.C));
    // Pieces of whole images when x is larger than one binding (channels restart at each).
    const int64_t step = rows_per_binding(x);
    for (int64_t lo = 0; lo < x.size(0); lo += step) {
      const int64_t n = std::min(step, x.size(0) - lo);
      const Tensor xs = x.narrow(0, lo, n), ys = y.narrow(0, lo, n);
      nn::norm_apply(lock.ctx(), operand(xs), operand(rm), operand(invstd), operand(w), operand(b),
                     operand(ys), static_cast<uint64_t>(xs.numel()), em, false);
    }
    TWGPU_CATCH
    return {y, at::empty({0}, x.options().dtype(sdt)), at::empty({0}, x.options().dtype(sdt))};
  }
  Tensor mean = f32_empty(x, g.C), invstd = f32_empty(x, g.C), m2 = f32_empty(x, g.C);
  // x larger than one storage binding: moments of pieces of whole images, combined as
  // parallel variance does (mean of the means by count; m2 plus each piece's count times
  // its mean's squared distance), then the normalization piece by piece.
  const int64_t step = rows_per_binding(x);
  const int64_t pieces = (g.N + step - 1) / std::max<int64_t>(step, 1);
  TWGPU_TRY
  RuntimeLock lock;
  if (pieces <= 1) {
    nn::RowLayout L{static_cast<uint64_t>(g.C), u32(n), u32(g.S), u32(g.C * g.S), u32(g.S)};
    nn::norm_moments(lock.ctx(), operand(x), L, static_cast<float>(eps), operand(mean),
                     operand(invstd), operand(m2));
    nn::norm_apply(lock.ctx(), operand(x), operand(mean), operand(invstd), operand(w), operand(b),
                   operand(y), count, em, false);
  } else {
    Tensor pm = at::empty({pieces, g.C}, x.options().dtype(at::kFloat));
    Tensor pr = at::empty_like(pm), pm2 = at::empty_like(pm);
    std::vector<double> counts;
    for (int64_t p = 0; p < pieces; ++p) {
      const int64_t lo = p * step, k = std::min(step, g.N - lo);
      nn::RowLayout L{static_cast<uint64_t>(g.C), u32(k * g.S), u32(g.S), u32(g.C * g.S), u32(g.S)};
      nn::norm_moments(lock.ctx(), operand(x.narrow(0, lo, k)), L, static_cast<float>(eps),
                       operand(pm.select(0, p)), operand(pr.select(0, p)), operand(pm2.select(0, p)));
      counts.push_back(static_cast<double>(k * g.S));
    }
    Tensor c = at::tensor(counts, at::TensorOptions().dtype(at::kFloat)).to(x.device()).view({pieces, 1});
    mean.copy_(pm.mul(c).sum(0).div(static_cast<double>(n)));
    m2.copy_(pm2.add(pm.sub(mean).pow(2).mul(c)).sum(0));
    invstd.copy_(m2.div(static_cast<double>(n)).clamp_min(0).add(eps).rsqrt());
    for (int64_t lo = 0; lo < g.N; lo += step) {
      const int64_t k = std::min(step, g.N - lo);
      const Tensor xs = x.narrow(0, lo, k), ys = y.narrow(0, lo, k);
      nn::norm_apply(lock.ctx(), operand(xs), operand(mean), operand(invstd), operand(w), operand(b),
                     operand(ys), static_cast<uint64_t>(xs.numel()), em, false);
    }
  }
  if (running_mean.defined() || running_var.defined()) {
    Tensor rm = running_mean.defined() ? running_mean.contiguous() : running_mean;
    Tensor rv = running_var.defined() ? running_var.contiguous() : running_var;
    Tensor rm_new = rm.defined() ? at::empty_like(rm) : rm;
    Tensor rv_new = rv.defined() ? at::empty_like(rv) : rv;
    nn::norm_running_update(lock.ctx(), operand(mean), operand(m2), operand(rm), operand(rv),
                            operand(rm_new), operand(rv_new), static_cast<uint64_t>(g.C),
                            static_cast<float>(momentum), static_cast<uint64_t>(n));
    if (rm.defined()) running_mean.copy_(rm_new);
    if (rv.defined()) running_var.copy_(rv_new);
  }
  TWGPU_CATCH
  return {y, mean.to(sdt), invstd.to(sdt)};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const OptT& weight,
                                                     const OptT& bias, const OptT& running_mean,
                                                     const OptT& running_var, bool training,
                                                     double momentum, double eps) {
  Tensor w = opt(weight), b = opt(bias), rm = opt(running_mean), rv = opt(running_var);
  if (!batch_native(input, w, b, rm, rv, training) || (!training && (!rm.defined() || !rv.defined())))
    return call_cpu_fallback<at::_ops::native_batch_norm>(input, weight, bias, running_mean,
                                                          running_var, training, momentum, eps);
  return batch_norm_impl(input, w, b, rm, rv, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit(const Tensor& input, const OptT& weight,
                                                    const OptT& bias, Tensor& running_mean,
                                                    Tensor& running_var, bool training,
                                                    double momentum, double eps) {
  Tensor w = opt(weight), b = opt(bias);
  if (!batch_native(input, w, b, running_mean, running_var, training))
    return call_cpu_fallback<at::_ops::_native_batch_norm_legit>(
        input, weight, bias, running_mean, running_var, training, momentum, eps);
  return batch_norm_impl(input, w, b, running_mean, running_var, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_no_stats(const Tensor& input,
                                                             const OptT& weight, const OptT& bias,
                                                             bool training, double momentum,
                                                             double eps) {
  Tensor w = opt(weight), b = opt(bias), none;
  if (!batch_native(input, w, b, none, none, true) || !training)
    return call_cpu_fallback<at::_ops::_native_batch_norm_legit_no_stats>(input, weight, bias,
                                                                          training, momentum, eps);
  return batch_norm_impl(input, w, b, none, none, true, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(const Tensor& input,
                                                                  const OptT& weight,
                                                                  const OptT& bias,
                                                                  Tensor& running_mean,
                                                                  Tensor& running_var,
                                                                  double momentum, double eps) {
  Tensor w = opt(weight), b = opt(bias);
  if (!batch_native(input, w, b, running_mean, running_var, true))
    return call_cpu_fallback<at::_ops::_batch_norm_with_update>(input, weight, bias, running_mean,
                                                                running_var, momentum, eps);
  auto r = batch_norm_impl(input, w, b, running_mean, running_var, true, momentum, eps);
  Tensor reserve = at::empty({0}, input.options().dtype(at::kByte));
  return {std::get<0>(r), std::get<1>(r), std::get<2>(r), reserve};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_impl(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& running_mean,
    const Tensor& running_var, const Tensor& save_mean, const Tensor& save_invstd, bool train,
    double eps, std::array<bool, 3> mask) {
  auto g = batch_geometry(input);
  const int64_t n = g.N * g.S;
  Tensor x = input.contiguous(), dy = grad_out.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor mean, invstd;
  TWGPU_TRY
  RuntimeLock lock;
  if (train) {
    mean = save_mean.contiguous();
    invstd = save_invstd.contiguous();
  } else {
    mean = running_mean.contiguous();
    invstd = f32_empty(x, g.C);
    nn::norm_invstd(lock.ctx(), operand(running_var.contiguous()), static_cast<float>(eps),
                    operand(invstd), static_cast<uint64_t>(g.C));
  }
  Tensor dw_unit = f32_empty(x, g.C), sum_dy = f32_empty(x, g.C);
  // Pieces of whole images when x is larger than one binding: channel sums add up.
  const int64_t step = n > 0 ? rows_per_binding(x) : 1;
  Tensor dw_part, dy_part;
  if (n > 0) {
    for (int64_t lo = 0; lo < g.N; lo += step) {
      const int64_t k = std::min(step, g.N - lo);
      const bool first = lo == 0;
      if (!first && !dw_part.defined()) {
        dw_part = f32_empty(x, g.C);
        dy_part = f32_empty(x, g.C);
      }
      nn::RowLayout L{static_cast<uint64_t>(g.C), u32(k * g.S), u32(g.S), u32(g.C * g.S), u32(g.S)};
      nn::norm_affine_grads(lock.ctx(), operand(dy.narrow(0, lo, k)), operand(x.narrow(0, lo, k)),
                            operand(mean), operand(invstd), L, 0xffffffffu, 0, 1,
                            operand(first ? dw_unit : dw_part), operand(first ? sum_dy : dy_part));
      if (!first) {
        dw_unit.add_(dw_part);
        sum_dy.add_(dy_part);
      }
    }
  } else {
    dw_unit.zero_();
    sum_dy.zero_();
  }
  Tensor dx, dw, db;
  if (mask[0]) {
    dx = at::empty(input.sizes(), x.options());
    for (int64_t lo = 0; lo < std::max<int64_t>(g.N, 1); lo += step) {
      const int64_t k = std::min(step, std::max<int64_t>(g.N, 1) - lo);
      const bool whole = k == g.N || g.N == 0;
      const Tensor dys = whole ? dy : dy.narrow(0, lo, k), xs = whole ? x : x.narrow(0, lo, k);
      const Tensor dxs = whole ? dx : dx.narrow(0, lo, k);
      nn::batch_norm_backward_input(lock.ctx(), operand(dys), operand(xs), operand(mean),
                                    operand(invstd), operand(w), operand(sum_dy), operand(dw_unit),
                                    operand(dxs), static_cast<uint64_t>(xs.numel()), u32(g.S),
                                    u32(g.C), static_cast<uint64_t>(n), train);
    }
  }
  at::ScalarType pdt = weight.defined() ? weight.scalar_type() : input.scalar_type();
  if (mask[1]) dw = dw_unit.to(pdt);
  if (mask[2]) db = sum_dy.to(pdt);
  return {dx, dw, db};
  TWGPU_CATCH
}

bool batch_backward_native(const Tensor& grad_out, const Tensor& input, const Tensor& w,
                           const Tensor& rm, const Tensor& rv, const Tensor& sm, const Tensor& si,
                           bool train) {
  if (!batch_native(input, w, Tensor(), rm, rv) || grad_out.scalar_type() != input.scalar_type() ||
      grad_out.sizes() != input.sizes())
    return false;
  const int64_t C = input.size(1);
  if (train) {
    return sm.defined() && si.defined() && nn_float(sm) && nn_float(si) && sm.numel() == C &&
           si.numel() == C;
  }
  return rm.defined() && rv.defined();
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const OptT& weight, const OptT& running_mean,
    const OptT& running_var, const OptT& save_mean, const OptT& save_invstd, bool train,
    double eps, std::array<bool, 3> mask) {
  Tensor w = opt(weight), rm = opt(running_mean), rv = opt(running_var), sm = opt(save_mean),
         si = opt(save_invstd);
  if (!batch_backward_native(grad_out, input, w, rm, rv, sm, si, train))
    return call_cpu_fallback<at::_ops::native_batch_norm_backward>(
        grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
        mask);
  return batch_norm_backward_impl(grad_out, input, w, rm, rv, sm, si, train, eps, mask);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const OptT& running_mean,
    const OptT& running_var, const OptT& save_mean, const OptT& save_var, bool update, double eps,
    std::array<bool, 3> mask, const Tensor& reserve) {
  Tensor rm = opt(running_mean), rv = opt(running_var), sm = opt(save_mean), si = opt(save_var);
  if (!batch_backward_native(grad_out, input, weight, rm, rv, sm, si, update))
    return call_cpu_fallback<at::_ops::batch_norm_backward>(grad_out, input, weight, running_mean,
                                                            running_var, save_mean, save_var,
                                                            update, eps, mask, reserve);
  return batch_norm_backward_impl(grad_out, input, weight, rm, rv, sm, si, update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
  m.impl("_fused_rms_norm", TORCH_FN(fused_rms_norm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(fused_rms_norm_backward));
  m.impl("native_group_norm", TORCH_FN(group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(group_norm_backward));
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("_native_batch_norm_legit", TORCH_FN(batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(batch_norm_legit_no_stats));
  m.impl("_batch_norm_with_update", TORCH_FN(batch_norm_with_update));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward));
}

}  // namespace twgpu::aten
