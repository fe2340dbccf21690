// Native losses: MSE, smooth L1, Huber and binary cross-entropy (with their reductions in
// one kernel), negative log-likelihood (1-d/2-d, class weights, ignore_index) and their
// backward kernels. cross_entropy reaches nll_loss through PyTorch's composite. Checks
// that need the data (targets out of range, BCE inputs outside [0, 1]) count offenders on
// the device; when there are any, the call reruns on the CPU fallback to raise the CPU's
// error.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/binary_cross_entropy_backward_ops.h>
#include <ATen/ops/binary_cross_entropy_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/huber_loss_backward_ops.h>
#include <ATen/ops/huber_loss_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/smooth_l1_loss_backward_ops.h>
#include <ATen/ops/smooth_l1_loss_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_loss.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using nn::PointLoss;
using nn::Reduce;
using OptT = std::optional<Tensor>;

bool valid_reduction(int64_t r) { return r >= 0 && r <= 2; }

// Writes `result` (a fresh contiguous tensor) into `out`, resizing it.
void deliver(const Tensor& result, Tensor& out) {
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
}

// The number of bad inputs the check kernels counted, one count per piece (one read-back;
// a sum kernel only when the work was split).
float bad_count(const Tensor& bad) { return (bad.numel() > 1 ? bad.sum() : bad).item<float>(); }

// Pointwise loss forward; false when not native. `w` must already match x's numel.
bool point_forward(PointLoss kind, const Tensor& self, const Tensor& target, const Tensor& weight,
                   int64_t reduction, double param, Tensor& out) {
  if (!valid_reduction(reduction) || !nn_float(self) || target.scalar_type() != self.scalar_type() ||
      out.scalar_type() != self.scalar_type() ||
      (weight.defined() && weight.scalar_type() != self.scalar_type()))
    return false;
  Tensor x = self, t = target;
  if (self.sizes() != target.sizes()) {
    if (kind == PointLoss::Bce || !at::is_expandable_to(self.sizes(), at::infer_size(self.sizes(), target.sizes())))
      return false;
    auto shape = at::infer_size(self.sizes(), target.sizes());
    x = self.expand(shape);
    t = target.expand(shape);
  }
  x = x.contiguous();
  t = t.contiguous();
  Tensor w;
  if (weight.defined()) {
    if (!at::is_expandable_to(weight.sizes(), x.sizes())) return false;
    w = weight.expand(x.sizes()).contiguous();
  }
  const auto r = static_cast<Reduce>(reduction);
  Tensor result = r == Reduce::None ? at::empty(x.sizes(), x.options()) : at::empty({}, x.options());
  // Inputs larger than one storage binding: pieces of dim 0, their float32 sums added.
  const int64_t step = x.dim() > 0 ? rows_per_binding(x) : 1;
  const int64_t pieces = x.dim() > 0 && x.numel() > 0 ? (x.size(0) + step - 1) / step : 1;
  const bool split = pieces > 1;
  Tensor sums = split && r != Reduce::None ? at::empty({pieces}, x.options().dtype(at::kFloat)) : Tensor();
  TWGPU_TRY
  RuntimeLock lock;
  if (kind == PointLoss::Bce && x.numel() > 0) {
    Tensor bad = at::empty({pieces}, x.options().dtype(at::kFloat));
    for (int64_t p = 0; p < pieces; ++p) {
      const Tensor xs = split ? x.narrow(0, p * step, std::min(step, x.size(0) - p * step)) : x;
      nn::count_outside_unit(lock.ctx(), operand(xs), static_cast<uint64_t>(xs.numel()),
                             operand(bad.narrow(0, p, 1)));
    }
    if (bad_count(bad) > 0) return false;  // the CPU raises its error
  }
  if (x.numel() == 0) {
    if (r == Reduce::Mean) result.fill_(std::numeric_limits<double>::quiet_NaN());
    if (r == Reduce::Sum) result.zero_();
  } else if (!split) {
    nn::point_loss(lock.ctx(), kind, operand(x), operand(t), operand(w), static_cast<float>(param),
                   static_cast<uint64_t>(x.numel()), r, operand(result));
  } else {
    for (int64_t p = 0; p < pieces; ++p) {
      const int64_t lo = p * step, n = std::min(step, x.size(0) - lo);
      const Tensor xs = x.narrow(0, lo, n), ts = t.narrow(0, lo, n);
      const Tensor ws = w.defined() ? w.narrow(0, lo, n) : w;
      const Tensor os = r == Reduce::None ? result.narrow(0, lo, n) : sums.narrow(0, p, 1);
      nn::point_loss(lock.ctx(), kind, operand(xs), operand(ts), operand(ws), static_cast<float>(param),
                     static_cast<uint64_t>(xs.numel()), r == Reduce::None ? r : Reduce::Sum, operand(os));
    }
  }
  TWGPU_CATCH
  if (split && r != Reduce::None) {
    Tensor total = sums.sum();
    if (r == Reduce::Mean) total = at::div(total, static_cast<double>(x.numel()));
    result = total.to(x.scalar_type());
  }
  deliver(result, out);
  return true;
}

bool point_backward(PointLoss kind, const Tensor& grad_out, const Tensor& self,
                    const Tensor& target, const Tensor& weight, int64_t reduction, double param,
                    Tensor& grad_input) {
  if (!valid_reduction(reduction) || !nn_float(self) || target.scalar_type() != self.scalar_type() ||
      grad_out.scalar_type() != self.scalar_type() ||
      grad_input.scalar_type() != self.scalar_type() || target.sizes() != self.sizes() ||
      (weight.defined() && weight.scalar_type() != self.scalar_type()))
    return false;
  const auto r = static_cast<Reduce>(reduction);
  if (r == Reduce::None ? grad_out.sizes() != self.sizes() : grad_out.numel() != 1) return false;
  Tensor x = self.contiguous(), t = target.contiguous(), go = grad_out.contiguous();
  Tensor w;
  if (weight.defined()) {
    if (!at::is_expandable_to(weight.sizes(), x.sizes())) return false;
    w = weight.expand(x.sizes()).contiguous();
  }
  Tensor result = at::empty(x.sizes(), x.options());
  // Pieces of dim 0 for inputs larger than one binding; a mean's gradient is the sum's
  // scaled by 1 / numel (each piece would otherwise divide by its own count).
  const int64_t step = x.dim() > 0 ? rows_per_binding(x) : 1;
  const bool split = x.dim() > 0 && step < x.size(0);
  const Tensor go_piece = split && r == Reduce::Mean ? at::div(go, static_cast<double>(x.numel())) : go;
  TWGPU_TRY
  RuntimeLock lock;
  for (int64_t lo = 0; lo < (split ? x.size(0) : 1); lo += step) {
    const int64_t n = split ? std::min(step, x.size(0) - lo) : 0;
    auto piece = [&](const Tensor& a) { return split && a.defined() ? a.narrow(0, lo, n) : a; };
    const Tensor xs = piece(x), gs = r == Reduce::None ? piece(go) : go_piece;
    nn::point_loss_backward(lock.ctx(), kind, operand(gs), operand(xs), operand(piece(t)),
                            operand(piece(w)), static_cast<float>(param),
                            static_cast<uint64_t>(xs.numel()),
                            split && r == Reduce::Mean ? Reduce::Sum : r, operand(piece(result)));
  }
  TWGPU_CATCH
  deliver(result, grad_input);
  return true;
}

// ---- mse / smooth L1 / huber / BCE ----------------------------------------------------------

Tensor& mse_out(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out) {
  if (!point_forward(PointLoss::Mse, self, target, Tensor(), reduction, 0, out))
    return call_cpu_fallback<at::_ops::mse_loss_out>(self, target, reduction, out);
  return out;
}

Tensor& mse_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                         int64_t reduction, Tensor& gi) {
  if (!point_backward(PointLoss::Mse, go, self, target, Tensor(), reduction, 0, gi))
    return call_cpu_fallback<at::_ops::mse_loss_backward_grad_input>(go, self, target, reduction, gi);
  return gi;
}
Tensor mse_backward(const Tensor& go, const Tensor& self, const Tensor& target, int64_t reduction) {
  Tensor gi = at::empty({0}, self.options());
  if (!point_backward(PointLoss::Mse, go, self, target, Tensor(), reduction, 0, gi))
    return call_cpu_fallback<at::_ops::mse_loss_backward>(go, self, target, reduction);
  return gi;
}

Tensor& smooth_l1_out(const Tensor& self, const Tensor& target, int64_t reduction, double beta,
                      Tensor& out) {
  if (beta < 0 || !point_forward(PointLoss::SmoothL1, self, target, Tensor(), reduction, beta, out))
    return call_cpu_fallback<at::_ops::smooth_l1_loss_out>(self, target, reduction, beta, out);
  return out;
}
Tensor& smooth_l1_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                               int64_t reduction, double beta, Tensor& gi) {
  if (beta < 0 || !point_backward(PointLoss::SmoothL1, go, self, target, Tensor(), reduction, beta, gi))
    return call_cpu_fallback<at::_ops::smooth_l1_loss_backward_grad_input>(go, self, target,
                                                                          reduction, beta, gi);
  return gi;
}

Tensor& huber_out(const Tensor& self, const Tensor& target, int64_t reduction, double delta,
                  Tensor& out) {
  if (delta <= 0 || !point_forward(PointLoss::Huber, self, target, Tensor(), reduction, delta, out))
    return call_cpu_fallback<at::_ops::huber_loss_out>(self, target, reduction, delta, out);
  return out;
}
Tensor huber(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  Tensor out = at::empty({0}, self.options());
  if (delta <= 0 || !point_forward(PointLoss::Huber, self, target, Tensor(), reduction, delta, out))
    return call_cpu_fallback<at::_ops::huber_loss>(self, target, reduction, delta);
  return out;
}
Tensor& huber_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                           int64_t reduction, double delta, Tensor& gi) {
  if (delta <= 0 || !point_backward(PointLoss::Huber, go, self, target, Tensor(), reduction, delta, gi))
    return call_cpu_fallback<at::_ops::huber_loss_backward_out>(go, self, target, reduction, delta, gi);
  return gi;
}

Tensor& bce_out(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction,
                Tensor& out) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!point_forward(PointLoss::Bce, self, target, w, reduction, 0, out))
    return call_cpu_fallback<at::_ops::binary_cross_entropy_out>(self, target, weight, reduction, out);
  return out;
}
Tensor bce(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor out = at::empty({0}, self.options());
  if (!point_forward(PointLoss::Bce, self, target, w, reduction, 0, out))
    return call_cpu_fallback<at::_ops::binary_cross_entropy>(self, target, weight, reduction);
  return out;
}
Tensor& bce_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                         const OptT& weight, int64_t reduction, Tensor& gi) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!point_backward(PointLoss::Bce, go, self, target, w, reduction, 0, gi))
    return call_cpu_fallback<at::_ops::binary_cross_entropy_backward_grad_input>(go, self, target,
                                                                               weight, reduction, gi);
  return gi;
}
Tensor bce_backward(const Tensor& go, const Tensor& self, const Tensor& target, const OptT& weight,
                    int64_t reduction) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor gi = at::empty({0}, self.options());
  if (!point_backward(PointLoss::Bce, go, self, target, w, reduction, 0, gi))
    return call_cpu_fallback<at::_ops::binary_cross_entropy_backward>(go, self, target, weight,
                                                                      reduction);
  return gi;
}

// ---- nll -------------------------------------------------------------------------------------

// Geometry for input [C], [N, C] (inner 1) or [N, C, H, W] (two_d) with a matching target.
std::optional<nn::NllGeometry> nll_geometry(const Tensor& self, const Tensor& target,
                                            const Tensor& weight, int64_t reduction,
                                            int64_t ignore_index, bool two_d) {
  if (!valid_reduction(reduction) || !nn_float(self) || target.scalar_type() != at::kLong ||
      (weight.defined() && (weight.scalar_type() != self.scalar_type() || weight.dim() != 1)))
    return std::nullopt;
  nn::NllGeometry g;
  g.ignore_index = ignore_index;
  if (two_d) {
    if (self.dim() != 4 || target.dim() != 3 || target.size(0) != self.size(0) ||
        target.size(1) != self.size(2) || target.size(2) != self.size(3))
      return std::nullopt;
    g.n = u32(self.size(0));
    g.classes = u32(self.size(1));
    g.inner = u32(self.size(2) * self.size(3));
  } else {
    if (self.dim() < 1 || self.dim() > 2 || target.dim() > 1) return std::nullopt;
    const bool batched = self.dim() == 2;
    if (batched ? (target.dim() != 1 || target.size(0) != self.size(0)) : target.dim() != 0)
      return std::nullopt;
    g.n = batched ? u32(self.size(0)) : 1u;
    g.classes = u32(self.size(-1));
  }
  if (weight.defined() && weight.numel() != g.classes) return std::nullopt;
  if (g.classes == 0) return std::nullopt;
  return g;
}

// Returns false when not native or when a target is out of range (the CPU raises).
bool nll_forward_impl(const Tensor& self, const Tensor& target, const Tensor& weight,
                      int64_t reduction, int64_t ignore_index, bool two_d, Tensor& output,
                      Tensor& total_weight) {
  auto g = nll_geometry(self, target, weight, reduction, ignore_index, two_d);
  if (!g || output.scalar_type() != self.scalar_type() ||
      total_weight.scalar_type() != self.scalar_type())
    return false;
  const auto r = static_cast<Reduce>(reduction);
  std::vector<int64_t> none_shape(target.sizes().begin(), target.sizes().end());
  Tensor x = self.contiguous(), t = target.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor out = r == Reduce::None ? at::empty(none_shape, x.options()) : at::empty({}, x.options());
  Tensor tw = at::empty({}, x.options());
  const uint64_t elems = uint64_t(g->n) * g->inner;
  if (elems == 0) {
    tw.zero_();
    if (r == Reduce::Sum) out.zero_();
    if (r == Reduce::Mean) out.fill_(std::numeric_limits<double>::quiet_NaN());
  } else {
    // Inputs larger than one storage binding: pieces of the batch, their sums added.
    const int64_t step = rows_per_binding(x);
    const int64_t pieces = (x.size(0) + step - 1) / step;
    const bool split = x.dim() > 1 && pieces > 1;
    const Reduce piece_r = split && r == Reduce::Mean ? Reduce::Sum : r;
    Tensor bad = at::empty({split ? pieces : 1}, x.options().dtype(at::kFloat));
    Tensor sums = split ? at::empty({pieces}, x.options()) : out;
    Tensor weights = split ? at::empty({pieces}, x.options()) : tw;
    TWGPU_TRY
    RuntimeLock lock;
    for (int64_t p = 0; p < (split ? pieces : 1); ++p) {
      nn::NllGeometry pg = *g;
      Tensor xs = x, ts = t, os = r == Reduce::None ? out : sums, ws = weights, bs = bad;
      if (split) {
        const int64_t lo = p * step, n = std::min(step, x.size(0) - lo);
        pg.n = u32(n);
        xs = x.narrow(0, lo, n);
        ts = t.narrow(0, lo, n);
        os = r == Reduce::None ? out.narrow(0, lo, n) : sums.narrow(0, p, 1);
        ws = weights.narrow(0, p, 1);
        bs = bad.narrow(0, p, 1);
      }
      nn::nll_forward(lock.ctx(), operand(xs), operand(ts), operand(w), pg, piece_r, operand(os),
                      operand(ws), operand(bs));
    }
    TWGPU_CATCH
    if (bad_count(bad) > 0) return false;
    if (split) {
      tw = weights.sum();
      if (r == Reduce::Sum) out = sums.sum();
      if (r == Reduce::Mean) out = at::div(sums.sum(), tw);
    }
  }
  deliver(out, output);
  deliver(tw, total_weight);
  return true;
}

bool nll_backward_impl(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                       const Tensor& weight, int64_t reduction, int64_t ignore_index,
                       const Tensor& total_weight, bool two_d, Tensor& grad_input) {
  auto g = nll_geometry(self, target, weight, reduction, ignore_index, two_d);
  if (!g || grad_out.scalar_type() != self.scalar_type() ||
      grad_input.scalar_type() != self.scalar_type() || !nn_float(total_weight) ||
      total_weight.numel() != 1)
    return false;
  const auto r = static_cast<Reduce>(reduction);
  if (r == Reduce::None ? grad_out.sizes() != target.sizes() : grad_out.numel() != 1) return false;
  Tensor go = grad_out.contiguous(), t = target.contiguous(), tw = total_weight.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor result = at::zeros(self.sizes(), self.options());
  if (result.numel() > 0) {
    const int64_t step = result.dim() > 1 ? rows_per_binding(result) : result.size(0);
    TWGPU_TRY
    RuntimeLock lock;
    for (int64_t lo = 0; lo < std::max<int64_t>(g->n, 1); lo += step) {  // pieces of the batch
      const int64_t n = std::min<int64_t>(step, std::max<int64_t>(g->n, 1) - lo);
      const bool whole = n == std::max<int64_t>(g->n, 1);
      nn::NllGeometry pg = *g;
      pg.n = whole ? g->n : u32(n);
      Tensor ts = whole ? t : t.narrow(0, lo, n), rs = whole ? result : result.narrow(0, lo, n);
      Tensor gs = r == Reduce::None && !whole ? go.narrow(0, lo, n) : go;
      nn::nll_backward(lock.ctx(), operand(gs), operand(ts), operand(w), operand(tw), pg, r,
                       operand(rs));
    }
    TWGPU_CATCH
  }
  deliver(result, grad_input);
  return true;
}

std::tuple<Tensor&, Tensor&> nll_forward_out(const Tensor& self, const Tensor& target,
                                             const OptT& weight, int64_t reduction,
                                             int64_t ignore_index, Tensor& output,
                                             Tensor& total_weight) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!nll_forward_impl(self, target, w, reduction, ignore_index, false, output, total_weight))
    return call_cpu_fallback<at::_ops::nll_loss_forward_output>(self, target, weight, reduction,
                                                                ignore_index, output, total_weight);
  return {output, total_weight};
}

Tensor& nll_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                         const OptT& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight, Tensor& gi) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!nll_backward_impl(go, self, target, w, reduction, ignore_index, total_weight, false, gi))
    return call_cpu_fallback<at::_ops::nll_loss_backward_grad_input>(go, self, target, weight,
                                                                     reduction, ignore_index,
                                                                     total_weight, gi);
  return gi;
}

std::tuple<Tensor&, Tensor&> nll2d_forward_out(const Tensor& self, const Tensor& target,
                                               const OptT& weight, int64_t reduction,
                                               int64_t ignore_index, Tensor& output,
                                               Tensor& total_weight) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!nll_forward_impl(self, target, w, reduction, ignore_index, true, output, total_weight))
    return call_cpu_fallback<at::_ops::nll_loss2d_forward_output>(self, target, weight, reduction,
                                                                  ignore_index, output, total_weight);
  return {output, total_weight};
}

std::tuple<Tensor, Tensor> nll2d_forward(const Tensor& self, const Tensor& target,
                                         const OptT& weight, int64_t reduction,
                                         int64_t ignore_index) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor output = at::empty({0}, self.options()), tw = at::empty({0}, self.options());
  if (!nll_forward_impl(self, target, w, reduction, ignore_index, true, output, tw))
    return call_cpu_fallback<at::_ops::nll_loss2d_forward>(self, target, weight, reduction,
                                                           ignore_index);
  return {output, tw};
}

Tensor& nll2d_backward_out(const Tensor& go, const Tensor& self, const Tensor& target,
                           const OptT& weight, int64_t reduction, int64_t ignore_index,
                           const Tensor& total_weight, Tensor& gi) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!nll_backward_impl(go, self, target, w, reduction, ignore_index, total_weight, true, gi))
    return call_cpu_fallback<at::_ops::nll_loss2d_backward_grad_input>(go, self, target, weight,
                                                                       reduction, ignore_index,
                                                                       total_weight, gi);
  return gi;
}

Tensor nll2d_backward(const Tensor& go, const Tensor& self, const Tensor& target,
                      const OptT& weight, int64_t reduction, int64_t ignore_index,
                      const Tensor& total_weight) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor gi = at::empty({0}, self.options());
  if (!nll_backward_impl(go, self, target, w, reduction, ignore_index, total_weight, true, gi))
    return call_cpu_fallback<at::_ops::nll_loss2d_backward>(go, self, target, weight, reduction,
                                                            ignore_index, total_weight);
  return gi;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss.out", TORCH_FN(mse_out));
  m.impl("mse_loss_backward", TORCH_FN(mse_backward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(mse_backward_out));
  m.impl("smooth_l1_loss.out", TORCH_FN(smooth_l1_out));
  m.impl("smooth_l1_loss_backward.grad_input", TORCH_FN(smooth_l1_backward_out));
  m.impl("huber_loss", TORCH_FN(huber));
  m.impl("huber_loss.out", TORCH_FN(huber_out));
  m.impl("huber_loss_backward.out", TORCH_FN(huber_backward_out));
  m.impl("binary_cross_entropy", TORCH_FN(bce));
  m.impl("binary_cross_entropy.out", TORCH_FN(bce_out));
  m.impl("binary_cross_entropy_backward", TORCH_FN(bce_backward));
  m.impl("binary_cross_entropy_backward.grad_input", TORCH_FN(bce_backward_out));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_forward_out));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_backward_out));
  m.impl("nll_loss2d_forward", TORCH_FN(nll2d_forward));
  m.impl("nll_loss2d_forward.output", TORCH_FN(nll2d_forward_out));
  m.impl("nll_loss2d_backward", TORCH_FN(nll2d_backward));
  m.impl("nll_loss2d_backward.grad_input", TORCH_FN(nll2d_backward_out));
}

}  // namespace twgpu::aten
