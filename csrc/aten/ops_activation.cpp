// Native activations and their backward kernels: elu, leaky_relu, hardtanh,
// hardsigmoid, hardswish, mish, softplus, softshrink, hardshrink, threshold (relu's
// backward is threshold_backward), log_sigmoid, the sigmoid/tanh/gelu/silu backward
// kernels, glu and prelu.
//
// Most are structured (`.out` / `.grad_input` only); hardtanh, hardswish, log_sigmoid and
// _prelu_kernel are not, so each of their overloads is registered. Operand order follows
// the CPU's iterators (noted per op where the kernel reads (grad, input) or (input, grad)).
#include <ATen/Dispatch.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/glu_backward_ops.h>
#include <ATen/ops/_prelu_kernel_backward_ops.h>
#include <ATen/ops/_prelu_kernel_ops.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/elu_backward_ops.h>
#include <ATen/ops/elu_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/glu_ops.h>
#include <ATen/ops/hardshrink_backward_ops.h>
#include <ATen/ops/hardshrink_ops.h>
#include <ATen/ops/hardsigmoid_backward_ops.h>
#include <ATen/ops/hardsigmoid_ops.h>
#include <ATen/ops/hardswish_backward_ops.h>
#include <ATen/ops/hardswish_ops.h>
#include <ATen/ops/hardtanh_backward_ops.h>
#include <ATen/ops/hardtanh_ops.h>
#include <ATen/ops/leaky_relu_backward_ops.h>
#include <ATen/ops/leaky_relu_ops.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>
#include <ATen/ops/mish_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/softplus_backward_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/softshrink_backward_ops.h>
#include <ATen/ops/softshrink_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/pointwise_common.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::TensorIterator;

ScalarBits f32_param(const c10::Scalar& s) { return scalar_bits(s, Compute::F32); }
ScalarBits f32_param(double v) { return ScalarBits::from_f32(static_cast<float>(v)); }

// Runs `kernel` on a unary iterator (out, a) with float parameters.
#define TWGPU_UNARY_ACT(OP, ...)                                                           \
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::OP>(__VA_ARGS__);    \
  auto iter = TensorIterator::unary_op(out, a);                                            \
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::OP>(__VA_ARGS__);

// Binary iterator (out, x, y) for backward kernels.
#define TWGPU_BINARY_ACT(OP, X, Y, ...)                                                       \
  if (any_stored_only({&X, &Y, &out})) return call_cpu_fallback<at::_ops::OP>(__VA_ARGS__);   \
  auto iter = TensorIterator::binary_op(out, X, Y);                                           \
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::OP>(__VA_ARGS__);

Tensor& elu_out(const Tensor& a, const c10::Scalar& alpha, const c10::Scalar& scale,
                const c10::Scalar& input_scale, Tensor& out) {
  TWGPU_UNARY_ACT(elu_out, a, alpha, scale, input_scale, out)
  launch_on_iterator(iter, "elu", common_compute(iter), f32_param(alpha.toDouble() * scale.toDouble()),
                     f32_param(scale), f32_param(input_scale));
  return out;
}

Tensor& elu_backward_out(const Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                         const c10::Scalar& input_scale, bool is_result, const Tensor& x,
                         Tensor& out) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is "
              "not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead.");
  TWGPU_BINARY_ACT(elu_backward_grad_input, grad, x, grad, alpha, scale, input_scale, is_result, x, out)
  launch_on_iterator(iter, is_result ? "elu_bwd_result" : "elu_bwd_input", common_compute(iter),
                     f32_param(alpha.toDouble() * scale.toDouble()), f32_param(scale),
                     f32_param(input_scale));
  return out;
}

Tensor& leaky_relu_out(const Tensor& a, const c10::Scalar& slope, Tensor& out) {
  TWGPU_UNARY_ACT(leaky_relu_out, a, slope, out)
  launch_on_iterator(iter, "leaky_relu", common_compute(iter), f32_param(slope));
  return out;
}

// (input, grad)
Tensor& leaky_relu_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& slope,
                                bool self_is_result, Tensor& out) {
  TORCH_CHECK(!self_is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope "
              "which is not supported. This is caused by calling in-place forward function "
              "with a negative slope, please call out-of-place version instead. File an "
              "issue at https://github.com/pytorch/pytorch if you do require supporting "
              "in-place leakRelu backward calculation with negative slope");
  TWGPU_BINARY_ACT(leaky_relu_backward_grad_input, x, grad, grad, x, slope, self_is_result, out)
  launch_on_iterator(iter, "leaky_relu_bwd", common_compute(iter), f32_param(slope));
  return out;
}

// hardtanh is clamp (native), refusing bool as the CPU does; integer tensors take
// integer bounds (no promotion, the CPU's legacy behaviour).
std::pair<c10::Scalar, c10::Scalar> hardtanh_bounds(const Tensor& a, const c10::Scalar& min,
                                                    const c10::Scalar& max) {
  TORCH_CHECK(a.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  if (!c10::isIntegralType(a.scalar_type(), /*includeBool=*/false)) return {min, max};
  int64_t lo = min.toLong(), hi = max.toLong();
  TORCH_CHECK(a.scalar_type() != at::kByte || (lo >= 0 && hi >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  return {c10::Scalar(lo), c10::Scalar(hi)};
}
Tensor& hardtanh_out(const Tensor& a, const c10::Scalar& min, const c10::Scalar& max, Tensor& out) {
  auto [lo, hi] = hardtanh_bounds(a, min, max);
  return at::clamp_out(out, a, lo, hi);
}
Tensor hardtanh(const Tensor& a, const c10::Scalar& min, const c10::Scalar& max) {
  auto [lo, hi] = hardtanh_bounds(a, min, max);
  return at::clamp(a, lo, hi);
}
Tensor& hardtanh_(Tensor& a, const c10::Scalar& min, const c10::Scalar& max) {
  return ::twgpu::aten::hardtanh_out(a, min, max, a);
}

// (grad, input)
Tensor& hardtanh_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& min,
                              const c10::Scalar& max, Tensor& out) {
  TWGPU_BINARY_ACT(hardtanh_backward_grad_input, grad, x, grad, x, min, max, out)
  launch_on_iterator(iter, "hardtanh_bwd", common_compute(iter), f32_param(min), f32_param(max));
  return out;
}
Tensor hardtanh_backward(const Tensor& grad, const Tensor& x, const c10::Scalar& min,
                         const c10::Scalar& max) {
  if (any_stored_only({&grad, &x}))
    return call_cpu_fallback<at::_ops::hardtanh_backward>(grad, x, min, max);
  Tensor out;
  auto iter = TensorIterator::binary_op(out, grad, x);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::hardtanh_backward>(grad, x, min, max);
  launch_on_iterator(iter, "hardtanh_bwd", common_compute(iter), f32_param(min), f32_param(max));
  return iter.output();
}

Tensor& hardsigmoid_out(const Tensor& a, Tensor& out) {
  TWGPU_UNARY_ACT(hardsigmoid_out, a, out)
  launch_on_iterator(iter, "hardsigmoid", common_compute(iter));
  return out;
}
Tensor& hardsigmoid_backward_out(const Tensor& grad, const Tensor& x, Tensor& out) {
  TWGPU_BINARY_ACT(hardsigmoid_backward_grad_input, grad, x, grad, x, out)
  launch_on_iterator(iter, "hardsigmoid_bwd", common_compute(iter));
  return out;
}

Tensor& hardswish_out(const Tensor& a, Tensor& out) {
  TWGPU_UNARY_ACT(hardswish_out, a, out)
  launch_on_iterator(iter, "hardswish", common_compute(iter));
  return out;
}
Tensor hardswish(const Tensor& a) {
  if (any_stored_only({&a})) return call_cpu_fallback<at::_ops::hardswish>(a);
  Tensor out;
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::hardswish>(a);
  launch_on_iterator(iter, "hardswish", common_compute(iter));
  return iter.output();
}
Tensor& hardswish_(Tensor& a) { return ::twgpu::aten::hardswish_out(a, a); }
Tensor hardswish_backward(const Tensor& grad, const Tensor& x) {
  if (any_stored_only({&grad, &x})) return call_cpu_fallback<at::_ops::hardswish_backward>(grad, x);
  Tensor out;
  auto iter = TensorIterator::binary_op(out, grad, x);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::hardswish_backward>(grad, x);
  launch_on_iterator(iter, "hardswish_bwd", common_compute(iter));
  return iter.output();
}

Tensor& mish_out(const Tensor& a, Tensor& out) {
  TWGPU_UNARY_ACT(mish_out, a, out)
  launch_on_iterator(iter, "mish", common_compute(iter));
  return out;
}

Tensor& softplus_out(const Tensor& a, const c10::Scalar& beta, const c10::Scalar& threshold,
                     Tensor& out) {
  TWGPU_UNARY_ACT(softplus_out, a, beta, threshold, out)
  launch_on_iterator(iter, "softplus", common_compute(iter), f32_param(beta), f32_param(threshold));
  return out;
}
Tensor& softplus_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& beta,
                              const c10::Scalar& threshold, Tensor& out) {
  TWGPU_BINARY_ACT(softplus_backward_grad_input, grad, x, grad, x, beta, threshold, out)
  launch_on_iterator(iter, "softplus_bwd", common_compute(iter), f32_param(beta), f32_param(threshold));
  return out;
}

Tensor& softshrink_out(const Tensor& a, const c10::Scalar& lambd, Tensor& out) {
  TORCH_CHECK(lambd.to<double>() >= 0, "lambda must be greater or equal to 0, but found to be ",
              lambd.to<double>(), ".");
  TWGPU_UNARY_ACT(softshrink_out, a, lambd, out)
  launch_on_iterator(iter, "softshrink", common_compute(iter), f32_param(lambd));
  return out;
}
Tensor& softshrink_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& lambd,
                                Tensor& out) {
  TWGPU_BINARY_ACT(softshrink_backward_grad_input, grad, x, grad, x, lambd, out)
  launch_on_iterator(iter, "shrink_bwd", common_compute(iter), f32_param(lambd));
  return out;
}
Tensor& hardshrink_out(const Tensor& a, const c10::Scalar& lambd, Tensor& out) {
  TWGPU_UNARY_ACT(hardshrink_out, a, lambd, out)
  launch_on_iterator(iter, "hardshrink", common_compute(iter), f32_param(lambd));
  return out;
}
Tensor& hardshrink_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& lambd,
                                Tensor& out) {
  TWGPU_BINARY_ACT(hardshrink_backward_grad_input, grad, x, grad, x, lambd, out)
  launch_on_iterator(iter, "shrink_bwd", common_compute(iter), f32_param(lambd));
  return out;
}

// threshold(x, th, value) = x <= th ? value : x; the CPU reads th and value in x's dtype.
Tensor& threshold_out(const Tensor& a, const c10::Scalar& threshold, const c10::Scalar& value,
                      Tensor& out) {
  TWGPU_UNARY_ACT(threshold_out, a, threshold, value, out)
  c10::ScalarType t = iter.common_dtype();
  if (t != at::kBool) {
    // The CPU converts both with overflow checks (-2 for uint8 raises).
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, t, "threshold_webgpu", [&] {
      (void)threshold.to<scalar_t>();
      (void)value.to<scalar_t>();
    });
  }
  launch_on_iterator(iter, "threshold", common_compute(iter), param_as(threshold, t), param_as(value, t));
  return out;
}
// (input, grad): relu's backward.
Tensor& threshold_backward_out(const Tensor& grad, const Tensor& x, const c10::Scalar& threshold,
                               Tensor& out) {
  TWGPU_BINARY_ACT(threshold_backward_grad_input, x, grad, grad, x, threshold, out)
  launch_on_iterator(iter, "threshold_bwd", common_compute(iter), param_as(threshold, iter.common_dtype()));
  return out;
}

// log_sigmoid: the buffer the CPU fills is not needed here (the backward recomputes, as
// CUDA does), so it is returned empty.
std::tuple<Tensor&, Tensor&> log_sigmoid_forward_out(const Tensor& a, Tensor& out, Tensor& buffer) {
  if (any_stored_only({&a, &out}))
    return call_cpu_fallback<at::_ops::log_sigmoid_forward_output>(a, out, buffer);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter))
    return call_cpu_fallback<at::_ops::log_sigmoid_forward_output>(a, out, buffer);
  launch_on_iterator(iter, "log_sigmoid", common_compute(iter));
  return std::forward_as_tuple(out, buffer);
}
std::tuple<Tensor, Tensor> log_sigmoid_forward(const Tensor& a) {
  if (any_stored_only({&a})) return call_cpu_fallback<at::_ops::log_sigmoid_forward>(a);
  Tensor out;
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::log_sigmoid_forward>(a);
  launch_on_iterator(iter, "log_sigmoid", common_compute(iter));
  return {iter.output(), at::empty({0}, a.options())};
}
// (grad, input)
Tensor& log_sigmoid_backward_out(const Tensor& grad, const Tensor& x, const Tensor& buffer,
                                 Tensor& out) {
  TWGPU_BINARY_ACT(log_sigmoid_backward_grad_input, grad, x, grad, x, buffer, out)
  launch_on_iterator(iter, "log_sigmoid_bwd", common_compute(iter));
  return out;
}
Tensor log_sigmoid_backward(const Tensor& grad, const Tensor& x, const Tensor& buffer) {
  if (any_stored_only({&grad, &x}))
    return call_cpu_fallback<at::_ops::log_sigmoid_backward>(grad, x, buffer);
  Tensor out;
  auto iter = TensorIterator::binary_op(out, grad, x);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::log_sigmoid_backward>(grad, x, buffer);
  launch_on_iterator(iter, "log_sigmoid_bwd", common_compute(iter));
  return iter.output();
}

// (grad, forward output)
Tensor& sigmoid_backward_out(const Tensor& grad, const Tensor& y, Tensor& out) {
  TWGPU_BINARY_ACT(sigmoid_backward_grad_input, grad, y, grad, y, out)
  launch_on_iterator(iter, "sigmoid_bwd", common_compute(iter));
  return out;
}
Tensor& tanh_backward_out(const Tensor& grad, const Tensor& y, Tensor& out) {
  TWGPU_BINARY_ACT(tanh_backward_grad_input, grad, y, grad, y, out)
  launch_on_iterator(iter, "tanh_bwd", common_compute(iter));
  return out;
}
// (grad, input)
Tensor& gelu_backward_out(const Tensor& grad, const Tensor& x, c10::string_view approximate,
                          Tensor& out) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  TWGPU_BINARY_ACT(gelu_backward_grad_input, grad, x, grad, x, approximate, out)
  launch_on_iterator(iter, approximate == "tanh" ? "gelu_tanh_bwd" : "gelu_bwd", common_compute(iter));
  return out;
}
Tensor& silu_backward_out(const Tensor& grad, const Tensor& x, Tensor& out) {
  TWGPU_BINARY_ACT(silu_backward_grad_input, grad, x, grad, x, out)
  launch_on_iterator(iter, "silu_bwd", common_compute(iter));
  return out;
}

// glu(x, dim) = first half * sigmoid(second half).
Tensor& glu_out(const Tensor& self, int64_t dim, Tensor& out) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t wrap_dim = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(wrap_dim);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", wrap_dim, " is size ", n);
  if (any_stored_only({&self, &out})) return call_cpu_fallback<at::_ops::glu_out>(self, dim, out);
  Tensor first = self.narrow(wrap_dim, 0, n / 2);
  Tensor second = self.narrow(wrap_dim, n / 2, n / 2);
  auto iter = TensorIterator::binary_op(out, first, second);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::glu_out>(self, dim, out);
  launch_on_iterator(iter, "glu", common_compute(iter));
  return out;
}

// glu_backward: the gradient of each half written into its half of grad_input.
Tensor& glu_backward_out(const Tensor& grad, const Tensor& self, int64_t dim, Tensor& out) {
  TORCH_CHECK(self.dim() > 0, "glu does not support 0-dimensional tensors");
  const int64_t wrap_dim = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(wrap_dim);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", wrap_dim, " is size ", n);
  if (any_stored_only({&grad, &self, &out}) || !is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::glu_backward_grad_input>(grad, self, dim, out);
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  Tensor first = self.narrow(wrap_dim, 0, n / 2);
  Tensor second = self.narrow(wrap_dim, n / 2, n / 2);
  Tensor out_first = out.narrow(wrap_dim, 0, n / 2);
  Tensor out_second = out.narrow(wrap_dim, n / 2, n / 2);
  auto it1 = TensorIterator::binary_op(out_first, grad, second);
  launch_on_iterator(it1, "glu_bwd_first", common_compute(it1));
  auto it2 = at::TensorIteratorConfig()
                 .add_output(out_second)
                 .add_const_input(grad)
                 .add_const_input(first)
                 .add_const_input(second)
                 .build();
  launch_on_iterator(it2, "glu_bwd_second", common_compute(it2));
  return out;
}
Tensor glu_backward(const Tensor& grad, const Tensor& self, int64_t dim) {
  Tensor out = at::empty({0}, self.options());
  return ::twgpu::aten::glu_backward_out(grad, self, dim, out);
}

// prelu's kernels (weight already broadcastable to the input).
Tensor prelu_kernel(const Tensor& self, const Tensor& weight) {
  if (any_stored_only({&self, &weight})) return call_cpu_fallback<at::_ops::_prelu_kernel>(self, weight);
  Tensor out;
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).add_const_input(weight).build();
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::_prelu_kernel>(self, weight);
  launch_on_iterator(iter, "prelu", common_compute(iter));
  return iter.output();
}
std::tuple<Tensor, Tensor> prelu_kernel_backward(const Tensor& grad, const Tensor& self,
                                                 const Tensor& weight) {
  if (any_stored_only({&grad, &self, &weight}))
    return call_cpu_fallback<at::_ops::_prelu_kernel_backward>(grad, self, weight);
  Tensor grad_input, grad_weight;
  auto gi = at::TensorIteratorConfig()
                .add_output(grad_input)
                .add_const_input(grad)
                .add_const_input(self)
                .add_const_input(weight)
                .build();
  if (!native_iter(gi)) return call_cpu_fallback<at::_ops::_prelu_kernel_backward>(grad, self, weight);
  launch_on_iterator(gi, "prelu_bwd_input", common_compute(gi));
  // grad_weight has the broadcast shape; autograd reduces it to the weight's shape.
  auto gw = at::TensorIteratorConfig()
                .add_output(grad_weight)
                .add_const_input(grad)
                .add_const_input(self)
                .build();
  launch_on_iterator(gw, "prelu_bwd_weight", common_compute(gw));
  return {gi.output(), gw.output()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("elu.out", elu_out);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("hardsigmoid.out", hardsigmoid_out);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("hardswish", hardswish);
  m.impl("hardswish.out", hardswish_out);
  m.impl("hardswish_", hardswish_);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("mish.out", mish_out);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("softshrink.out", softshrink_out);
  m.impl("softshrink_backward.grad_input", softshrink_backward_out);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("hardshrink_backward.grad_input", hardshrink_backward_out);
  m.impl("threshold.out", threshold_out);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", glu_backward);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
}

}  // namespace twgpu::aten
