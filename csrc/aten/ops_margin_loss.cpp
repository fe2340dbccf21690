// Native margin losses: multi_margin_loss (p 1 or 2, margin, class weights) and
// multilabel_margin_loss, forward and backward, for 0-d/1-d/2-d float32, float16 and
// bfloat16 inputs with int64 targets. Target values are checked on the device (the
// kernels skip bad rows and set the device error word, which raises at the next
// synchronization; runtime/device_checks.h). Shapes, dtypes and arguments the CPU rejects
// go to the CPU fallback, which raises the CPU's own error.
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/multi_margin_loss_backward_ops.h>
#include <ATen/ops/multi_margin_loss_ops.h>
#include <ATen/ops/multilabel_margin_loss_backward_ops.h>
#include <ATen/ops/multilabel_margin_loss_forward_ops.h>
#include <torch/library.h>

#include <limits>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_margin_loss.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

void deliver(const Tensor& result, Tensor& out) {
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
}

// (nframe, dim) of a 0-d, 1-d or 2-d input the CPU accepts; nullopt otherwise.
std::optional<nn::MarginGeometry> rows_of(const Tensor& input) {
  const int64_t nd = input.dim();
  if (nd > 2 || (nd >= 1 && input.size(-1) == 0)) return std::nullopt;
  const int64_t nframe = nd == 2 ? input.size(0) : 1, dim = nd == 0 ? 1 : input.size(-1);
  if (nframe > INT32_MAX || dim > INT32_MAX || nframe * dim > INT32_MAX) return std::nullopt;
  return nn::MarginGeometry{u32(nframe), u32(dim)};
}

bool same_device(const Tensor& a, const Tensor& b) { return !b.defined() || a.device() == b.device(); }

// The dtype and device gate shared by every entry: float input, int64 target.
bool native_types(const Tensor& self, const Tensor& target, const Tensor& weight) {
  return nn_float(self) && target.scalar_type() == at::kLong && same_device(self, target) &&
         (!weight.defined() ||
          (weight.scalar_type() == self.scalar_type() && same_device(self, weight)));
}

uint32_t check_code(Context& ctx, const char* op) {
  return ctx.checks().code_for(std::string("target out of range in aten::") + op);
}

// ---- multi_margin_loss -----------------------------------------------------------------

// Geometry when the call is native; p must already be 1 or 2.
std::optional<nn::MarginGeometry> multi_geometry(const Tensor& self, const Tensor& target,
                                                 const Tensor& weight, int64_t reduction) {
  if (reduction < 0 || reduction > 2 || !native_types(self, target, weight)) return std::nullopt;
  auto g = rows_of(self);
  if (!g || target.dim() > 1 || target.numel() != g->nframe) return std::nullopt;
  if (weight.defined() && (weight.dim() != 1 || weight.numel() != g->dim)) return std::nullopt;
  return g;
}

bool multi_margin_forward(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                          const c10::Scalar& margin, const Tensor& weight, int64_t reduction,
                          Tensor& output) {
  const int64_t pv = p.toLong();
  TORCH_CHECK(pv == 1 || pv == 2, "only p == 1 and p == 2 supported");
  auto g = multi_geometry(self, target, weight, reduction);
  if (!g || output.scalar_type() != self.scalar_type()) return false;
  const bool none = reduction == at::Reduction::None;
  Tensor out = none && target.dim() > 0 ? at::empty({int64_t(g->nframe)}, self.options())
                                        : at::empty({}, self.options());
  if (self.numel() == 0) {
    // No rows: the mean is 0/0.
    if (!none) out.fill_(reduction == at::Reduction::Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    deliver(out, output);
    return true;
  }
  Tensor x = self.contiguous(), t = target.contiguous();
  Tensor w = weight.defined() ? weight.contiguous() : weight;
  Tensor rows = none ? out : at::empty({int64_t(g->nframe)}, self.options().dtype(at::kFloat));
  TWGPU_TRY
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  nn::check_targets(ctx, operand(t), g->nframe, 0, g->dim, check_code(ctx, "multi_margin_loss"));
  nn::multi_margin_rows(ctx, operand(x), operand(t), operand(w), *g, static_cast<int>(pv),
                        static_cast<float>(margin.toDouble()), operand(rows));
  if (!none)
    nn::sum_values(ctx, operand(rows), g->nframe, reduction == at::Reduction::Mean, operand(out));
  TWGPU_CATCH
  deliver(out, output);
  return true;
}

bool multi_margin_backward_impl(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                                const c10::Scalar& p, const c10::Scalar& margin,
                                const Tensor& weight, int64_t reduction, Tensor& grad_input) {
  const int64_t pv = p.toLong();
  TORCH_CHECK(pv == 1 || pv == 2, "only p == 1 and p == 2 supported");
  auto g = multi_geometry(self, target, weight, reduction);
  if (!g || grad_out.scalar_type() != self.scalar_type() || !same_device(self, grad_out) ||
      grad_input.scalar_type() != self.scalar_type())
    return false;
  const bool per_row = reduction == at::Reduction::None && grad_out.dim() > 0;
  if (per_row ? grad_out.numel() != g->nframe : grad_out.numel() != 1) return false;
  Tensor result = at::empty(self.sizes(), self.options());
  if (self.numel() > 0) {
    Tensor x = self.contiguous(), t = target.contiguous(), go = grad_out.contiguous();
    Tensor w = weight.defined() ? weight.contiguous() : weight;
    const double scale = reduction == at::Reduction::Mean ? 1.0 / (double(g->nframe) * g->dim)
                                                          : 1.0 / g->dim;
    TWGPU_TRY
    RuntimeLock lock;
    Context& ctx = lock.ctx();
    nn::check_targets(ctx, operand(t), g->nframe, 0, g->dim,
                      check_code(ctx, "multi_margin_loss_backward"));
    nn::multi_margin_backward(ctx, operand(go), operand(x), operand(t), operand(w), *g,
                              static_cast<int>(pv), static_cast<float>(margin.toDouble()),
                              static_cast<float>(scale), per_row, operand(result));
    TWGPU_CATCH
  }
  deliver(result, grad_input);
  return true;
}

Tensor& multi_margin_out(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                         const c10::Scalar& margin, const OptT& weight, int64_t reduction,
                         Tensor& out) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!multi_margin_forward(self, target, p, margin, w, reduction, out))
    return call_cpu_fallback<at::_ops::multi_margin_loss_out>(self, target, p, margin, weight,
                                                              reduction, out);
  return out;
}

Tensor multi_margin(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                    const c10::Scalar& margin, const OptT& weight, int64_t reduction) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor out = at::empty({0}, self.options());
  if (!multi_margin_forward(self, target, p, margin, w, reduction, out))
    return call_cpu_fallback<at::_ops::multi_margin_loss>(self, target, p, margin, weight, reduction);
  return out;
}

Tensor& multi_margin_backward_out(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                                  const c10::Scalar& p, const c10::Scalar& margin,
                                  const OptT& weight, int64_t reduction, Tensor& grad_input) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  if (!multi_margin_backward_impl(grad_out, self, target, p, margin, w, reduction, grad_input))
    return call_cpu_fallback<at::_ops::multi_margin_loss_backward_grad_input>(
        grad_out, self, target, p, margin, weight, reduction, grad_input);
  return grad_input;
}

Tensor multi_margin_backward(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                             const c10::Scalar& p, const c10::Scalar& margin, const OptT& weight,
                             int64_t reduction) {
  Tensor w = weight.has_value() ? *weight : Tensor();
  Tensor gi = at::empty({0}, self.options());
  if (!multi_margin_backward_impl(grad_out, self, target, p, margin, w, reduction, gi))
    return call_cpu_fallback<at::_ops::multi_margin_loss_backward>(grad_out, self, target, p,
                                                                   margin, weight, reduction);
  return gi;
}

// ---- multilabel_margin_loss ------------------------------------------------------------

std::optional<nn::MarginGeometry> multilabel_geometry(const Tensor& self, const Tensor& target,
                                                      int64_t reduction) {
  if (reduction < 0 || reduction > 2 || !native_types(self, target, Tensor())) return std::nullopt;
  auto g = rows_of(self);
  if (!g) return std::nullopt;
  const bool ok = self.dim() <= 1
                      ? target.dim() <= 1 && target.numel() == g->dim
                      : target.dim() == 2 && target.size(0) == g->nframe && target.size(1) == g->dim;
  return ok ? g : std::nullopt;
}

bool multilabel_forward_impl(const Tensor& self, const Tensor& target, int64_t reduction,
                             Tensor& output, Tensor& is_target) {
  auto g = multilabel_geometry(self, target, reduction);
  if (!g || output.scalar_type() != self.scalar_type() ||
      is_target.scalar_type() != self.scalar_type())
    return false;
  const bool none = reduction == at::Reduction::None;
  Tensor out = none && target.dim() > 1 ? at::empty({int64_t(g->nframe)}, self.options())
                                        : at::empty({}, self.options());
  Tensor mask = at::empty(target.sizes(), self.options());
  if (self.numel() == 0) {
    if (!none) out.fill_(reduction == at::Reduction::Mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
  } else {
    Tensor x = self.contiguous(), t = target.contiguous();
    Tensor rows = none ? out : at::empty({int64_t(g->nframe)}, self.options().dtype(at::kFloat));
    TWGPU_TRY
    RuntimeLock lock;
    Context& ctx = lock.ctx();
    nn::check_targets(ctx, operand(t), uint64_t(g->nframe) * g->dim, -1, g->dim,
                      check_code(ctx, "multilabel_margin_loss"));
    nn::multilabel_margin_rows(ctx, operand(x), operand(t), *g, operand(rows), operand(mask));
    if (!none)
      nn::sum_values(ctx, operand(rows), g->nframe, reduction == at::Reduction::Mean, operand(out));
    TWGPU_CATCH
  }
  deliver(out, output);
  deliver(mask, is_target);
  return true;
}

bool multilabel_backward_impl(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                              int64_t reduction, const Tensor& is_target, Tensor& grad_input) {
  auto g = multilabel_geometry(self, target, reduction);
  if (!g || grad_out.scalar_type() != self.scalar_type() || !same_device(self, grad_out) ||
      is_target.scalar_type() != self.scalar_type() || !same_device(self, is_target) ||
      is_target.sizes() != target.sizes() || grad_input.scalar_type() != self.scalar_type())
    return false;
  const bool per_row = reduction == at::Reduction::None && grad_out.dim() > 0;
  if (per_row ? grad_out.numel() != g->nframe : grad_out.numel() != 1) return false;
  Tensor result = at::empty(self.sizes(), self.options());
  if (self.numel() > 0) {
    Tensor x = self.contiguous(), t = target.contiguous(), go = grad_out.contiguous();
    Tensor mask = is_target.contiguous();
    const double scale = reduction == at::Reduction::Mean ? 1.0 / (double(g->nframe) * g->dim)
                                                          : 1.0 / g->dim;
    TWGPU_TRY
    RuntimeLock lock;
    Context& ctx = lock.ctx();
    const uint64_t count = uint64_t(g->nframe) * g->dim;
    nn::check_targets(ctx, operand(t), count, -1, g->dim,
                      check_code(ctx, "multilabel_margin_loss_backward"));
    nn::check_unit_interval(ctx, operand(mask), count,
                            ctx.checks().code_for("is_target out of range in aten::multilabel_margin_loss_backward"));
    nn::multilabel_margin_backward(ctx, operand(go), operand(x), operand(t), operand(mask), *g,
                                   static_cast<float>(scale), per_row, operand(result));
    TWGPU_CATCH
  }
  deliver(result, grad_input);
  return true;
}

std::tuple<Tensor&, Tensor&> multilabel_forward_out(const Tensor& self, const Tensor& target,
                                                    int64_t reduction, Tensor& output,
                                                    Tensor& is_target) {
  if (!multilabel_forward_impl(self, target, reduction, output, is_target))
    return call_cpu_fallback<at::_ops::multilabel_margin_loss_forward_output>(self, target, reduction,
                                                                             output, is_target);
  return {output, is_target};
}

std::tuple<Tensor, Tensor> multilabel_forward(const Tensor& self, const Tensor& target,
                                              int64_t reduction) {
  Tensor output = at::empty({0}, self.options()), is_target = at::empty({0}, self.options());
  if (!multilabel_forward_impl(self, target, reduction, output, is_target))
    return call_cpu_fallback<at::_ops::multilabel_margin_loss_forward>(self, target, reduction);
  return {output, is_target};
}

Tensor& multilabel_backward_out(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                                int64_t reduction, const Tensor& is_target, Tensor& grad_input) {
  if (!multilabel_backward_impl(grad_out, self, target, reduction, is_target, grad_input))
    return call_cpu_fallback<at::_ops::multilabel_margin_loss_backward_grad_input>(
        grad_out, self, target, reduction, is_target, grad_input);
  return grad_input;
}

Tensor multilabel_backward(const Tensor& grad_out, const Tensor& self, const Tensor& target,
                           int64_t reduction, const Tensor& is_target) {
  Tensor gi = at::empty({0}, self.options());
  if (!multilabel_backward_impl(grad_out, self, target, reduction, is_target, gi))
    return call_cpu_fallback<at::_ops::multilabel_margin_loss_backward>(grad_out, self, target,
                                                                        reduction, is_target);
  return gi;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multi_margin_loss", TORCH_FN(multi_margin));
  m.impl("multi_margin_loss.out", TORCH_FN(multi_margin_out));
  m.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_backward));
  m.impl("multi_margin_loss_backward.grad_input", TORCH_FN(multi_margin_backward_out));
  m.impl("multilabel_margin_loss_forward", TORCH_FN(multilabel_forward));
  m.impl("multilabel_margin_loss_forward.output", TORCH_FN(multilabel_forward_out));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(multilabel_backward));
  m.impl("multilabel_margin_loss_backward.grad_input", TORCH_FN(multilabel_backward_out));
}

}  // namespace twgpu::aten
