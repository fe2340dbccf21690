// Native pointwise ops with two or more operands or scalar parameters: atan2, copysign,
// nextafter, hypot, logaddexp(2), xlogy, xlog1py, fmax/fmin, heaviside, the clamp family,
// lerp, addcmul, addcdiv and nan_to_num. All structured: `.out` only.
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/atan2_ops.h>
#include <ATen/ops/clamp_max_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/copysign_ops.h>
#include <ATen/ops/fmax_ops.h>
#include <ATen/ops/fmin_ops.h>
#include <ATen/ops/heaviside_ops.h>
#include <ATen/ops/hypot_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/logaddexp2_ops.h>
#include <ATen/ops/logaddexp_ops.h>
#include <ATen/ops/nan_to_num_ops.h>
#include <ATen/ops/nextafter_ops.h>
#include <ATen/ops/special_xlog1py_ops.h>
#include <ATen/ops/xlogy_ops.h>
#include <c10/util/TypeCast.h>
#include <torch/library.h>

#include <limits>

#include "aten/cpu_fallback.h"
#include "aten/pointwise_common.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::TensorIterator;


TWGPU_BINARY_OUT(atan2_out, atan2_out, binary_float_op, "atan2")
TWGPU_BINARY_OUT(copysign_out, copysign_out, binary_float_op, "copysign")
TWGPU_BINARY_OUT(hypot_out, hypot_out, binary_op, "hypot")
TWGPU_BINARY_OUT(logaddexp_out, logaddexp_out, binary_op, "logaddexp")
TWGPU_BINARY_OUT(logaddexp2_out, logaddexp2_out, binary_op, "logaddexp2")
TWGPU_BINARY_OUT(xlogy_out, xlogy_OutTensor, binary_float_op, "xlogy")
TWGPU_BINARY_OUT(xlog1py_out, special_xlog1py_out, binary_float_op, "xlog1py")

Tensor& fmax_fmin_out(const Tensor& a, const Tensor& b, Tensor& out, bool is_max) {
  TORCH_CHECK(!a.is_complex() && !b.is_complex(), is_max ? "fmax" : "fmin",
              " not implemented for complex tensors.");
  if (any_stored_only({&a, &b, &out}))
    return is_max ? call_cpu_fallback<at::_ops::fmax_out>(a, b, out)
                  : call_cpu_fallback<at::_ops::fmin_out>(a, b, out);
  auto iter = TensorIterator::binary_op(out, a, b);
  if (!native_iter(iter))
    return is_max ? call_cpu_fallback<at::_ops::fmax_out>(a, b, out)
                  : call_cpu_fallback<at::_ops::fmin_out>(a, b, out);
  launch_on_iterator(iter, is_max ? "fmax" : "fmin", common_compute(iter));
  return out;
}
Tensor& fmax_out(const Tensor& a, const Tensor& b, Tensor& out) { return fmax_fmin_out(a, b, out, true); }
Tensor& fmin_out(const Tensor& a, const Tensor& b, Tensor& out) { return fmax_fmin_out(a, b, out, false); }

Tensor& heaviside_out(const Tensor& a, const Tensor& values, Tensor& out) {
  TORCH_CHECK(!a.is_complex() && !values.is_complex() && (!out.defined() || !out.is_complex()),
              "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(a.dtype() == values.dtype() && (!out.defined() || out.dtype() == a.dtype()),
              "heaviside is not yet implemented for tensors with different dtypes.");
  if (any_stored_only({&a, &values, &out}))
    return call_cpu_fallback<at::_ops::heaviside_out>(a, values, out);
  auto iter = TensorIterator::binary_op(out, a, values);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::heaviside_out>(a, values, out);
  launch_on_iterator(iter, "heaviside", common_compute(iter));
  return out;
}

// nextafter steps one ulp of the common dtype: half types step on their own bits.
Tensor& nextafter_out(const Tensor& a, const Tensor& b, Tensor& out) {
  if (any_stored_only({&a, &b, &out})) return call_cpu_fallback<at::_ops::nextafter_out>(a, b, out);
  auto iter = TensorIterator::binary_op(out, a, b);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::nextafter_out>(a, b, out);
  c10::ScalarType t = iter.common_dtype();
  launch_on_iterator(iter, t == c10::kHalf       ? "nextafter_f16"
                           : t == c10::kBFloat16 ? "nextafter_bf16"
                                                 : "nextafter",
                     common_compute(iter));
  return out;
}

// ---- clamp ------------------------------------------------------------------------------

// clamp(self, min, max) with Python-number bounds: the bounds join type promotion as
// Python numbers do (an integer tensor clamped by 0.5 gives floats, as on the CPU), and
// in-place clamping refuses a promotion. The bounds become kernel parameters in the result
// dtype.
Tensor& clamp_scalar_impl(const Tensor& self, const std::optional<c10::Scalar>& min,
                          const std::optional<c10::Scalar>& max, Tensor& out) {
  TORCH_CHECK(min.has_value() || max.has_value(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK(!self.is_complex() && !(min && min->isComplex()) && !(max && max->isComplex()),
              "clamp is not supported for complex types");
  c10::ScalarType result = self.scalar_type();
  if (!c10::isFloatingType(result)) {
    at::native::ResultTypeState state = {};
    state = at::native::update_result_type_state(self, state);
    if (min) state = at::native::update_result_type_state(*min, state);
    if (max) state = at::native::update_result_type_state(*max, state);
    result = at::native::result_type(state);
    TORCH_CHECK(result == self.scalar_type() || !out.defined() || !out.is_same(self),
                "result type ", result, " can't be cast to the desired output type ",
                self.dtype());
  }
  if (any_stored_only({&self, &out}) || !is_native_compute(result))
    return call_cpu_fallback<at::_ops::clamp_out>(self, min, max, out);
  Tensor input = self.to(result);
  auto iter = TensorIterator::unary_op(out, input);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::clamp_out>(self, min, max, out);
  Compute c = common_compute(iter);
  if (min && max) {
    launch_on_iterator(iter, "clamp_s", c, param_as(*min, result), param_as(*max, result));
  } else {
    launch_on_iterator(iter, min ? "clamp_min_s" : "clamp_max_s", c,
                       param_as(min ? *min : *max, result));
  }
  return out;
}

Tensor& clamp_out(const Tensor& self, const std::optional<c10::Scalar>& min,
                  const std::optional<c10::Scalar>& max, Tensor& out) {
  return clamp_scalar_impl(self, min, max, out);
}
Tensor& clamp_min_out(const Tensor& self, const c10::Scalar& min, Tensor& out) {
  return clamp_scalar_impl(self, min, std::nullopt, out);
}
Tensor& clamp_max_out(const Tensor& self, const c10::Scalar& max, Tensor& out) {
  return clamp_scalar_impl(self, std::nullopt, max, out);
}

// Tensor bounds: promoted with self (no CPU scalars, as the CPU's config).
Tensor& clamp_tensor_out(const Tensor& self, const std::optional<Tensor>& min,
                         const std::optional<Tensor>& max, Tensor& out) {
  bool has_min = min.has_value() && min->defined();
  bool has_max = max.has_value() && max->defined();
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK(!self.is_complex(), "clamp is not supported for complex types");
  bool stored = any_stored_only({&self, &out}) || (has_min && any_stored_only({&*min})) ||
                (has_max && any_stored_only({&*max}));
  if (stored) return call_cpu_fallback<at::_ops::clamp_Tensor_out>(self, min, max, out);
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true)
                    .add_output(out)
                    .add_const_input(self)
                    .promote_inputs_to_common_dtype(true)
                    .cast_common_dtype_to_outputs(true)
                    .enforce_safe_casting_to_output(true);
  if (has_min) config.add_const_input(*min);
  if (has_max) config.add_const_input(*max);
  auto iter = config.build();
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::clamp_Tensor_out>(self, min, max, out);
  launch_on_iterator(iter, has_min && has_max ? "clamp" : has_min ? "clamp_min" : "clamp_max",
                     common_compute(iter));
  return out;
}

Tensor& clamp_min_tensor_out(const Tensor& self, const Tensor& min, Tensor& out) {
  if (any_stored_only({&self, &min, &out}))
    return call_cpu_fallback<at::_ops::clamp_min_Tensor_out>(self, min, out);
  auto iter = TensorIterator::binary_op(out, self, min);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::clamp_min_Tensor_out>(self, min, out);
  launch_on_iterator(iter, "clamp_min", common_compute(iter));
  return out;
}
Tensor& clamp_max_tensor_out(const Tensor& self, const Tensor& max, Tensor& out) {
  if (any_stored_only({&self, &max, &out}))
    return call_cpu_fallback<at::_ops::clamp_max_Tensor_out>(self, max, out);
  auto iter = TensorIterator::binary_op(out, self, max);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::clamp_max_Tensor_out>(self, max, out);
  launch_on_iterator(iter, "clamp_max", common_compute(iter));
  return out;
}

// ---- lerp, addcmul, addcdiv ---------------------------------------------------------------

Tensor& lerp_scalar_out(const Tensor& self, const Tensor& end, const c10::Scalar& weight,
                        Tensor& out) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", end.dtype());
  if (stored_only_for("lerp_scalar", {&self, &end, &out}) ||
      (weight.isComplex() && !self.is_complex()))
    return call_cpu_fallback<at::_ops::lerp_Scalar_out>(self, end, weight, out);
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(self).add_const_input(end).build();
  if (!native_iter(iter, "lerp_scalar"))
    return call_cpu_fallback<at::_ops::lerp_Scalar_out>(self, end, weight, out);
  // The weight stays in float (the CPU's opmath) even for half tensors.
  Compute c = common_compute(iter);
  bool has_weight = c == Compute::F32 || c == Compute::C64;
  launch_on_iterator(iter, "lerp_scalar", c, has_weight ? scalar_bits(weight, c) : ScalarBits{});
  return out;
}

Tensor& lerp_tensor_out(const Tensor& self, const Tensor& end, const Tensor& weight, Tensor& out) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", end.dtype());
  TORCH_CHECK(self.dtype() == weight.dtype(), "expected dtype ", self.dtype(),
              " for `weight` but got dtype ", weight.dtype());
  if (stored_only_for("lerp", {&self, &end, &weight, &out}))
    return call_cpu_fallback<at::_ops::lerp_Tensor_out>(self, end, weight, out);
  // A 0-dim CPU weight is accepted, as on CUDA.
  auto iter = at::TensorIteratorConfig()
                  .allow_cpu_scalars(true)
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(end)
                  .add_const_input(weight)
                  .build();
  if (!native_iter(iter, "lerp"))
    return call_cpu_fallback<at::_ops::lerp_Tensor_out>(self, end, weight, out);
  launch_on_iterator(iter, "lerp", common_compute(iter));
  return out;
}

at::TensorIterator ternary_iter(Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c) {
  return at::TensorIteratorConfig()
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .add_output(out)
      .add_const_input(a)
      .add_const_input(b)
      .add_const_input(c)
      .build();
}

// value in the common dtype as the CPU reads it: the opmath (float) for half types.
ScalarBits value_param(const c10::Scalar& value, c10::ScalarType common) {
  if (at::isReducedFloatingType(common)) return scalar_bits(value, Compute::F32);
  return param_as(value, common);
}

Tensor& addcmul_out(const Tensor& self, const Tensor& t1, const Tensor& t2,
                    const c10::Scalar& value, Tensor& out) {
  if (stored_only_for("addcmul", {&self, &t1, &t2, &out}))
    return call_cpu_fallback<at::_ops::addcmul_out>(self, t1, t2, value, out);
  auto iter = ternary_iter(out, self, t1, t2);
  if (!native_iter(iter, "addcmul") || (value.isComplex() && !c10::isComplexType(iter.common_dtype())))
    return call_cpu_fallback<at::_ops::addcmul_out>(self, t1, t2, value, out);
  launch_on_iterator(iter, "addcmul", common_compute(iter), value_param(value, iter.common_dtype()));
  return out;
}

Tensor& addcdiv_out(const Tensor& self, const Tensor& t1, const Tensor& t2,
                    const c10::Scalar& value, Tensor& out) {
  TORCH_CHECK(!(c10::isIntegralType(t1.scalar_type(), true) &&
                c10::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ",
              "for integer inputs and as ",
              "(input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
  if (stored_only_for("addcdiv", {&self, &t1, &t2, &out}))
    return call_cpu_fallback<at::_ops::addcdiv_out>(self, t1, t2, value, out);
  auto iter = ternary_iter(out, self, t1, t2);
  if (!native_iter(iter, "addcdiv") || (value.isComplex() && !c10::isComplexType(iter.common_dtype())))
    return call_cpu_fallback<at::_ops::addcdiv_out>(self, t1, t2, value, out);
  launch_on_iterator(iter, "addcdiv", common_compute(iter), value_param(value, iter.common_dtype()));
  return out;
}

// ---- nan_to_num ---------------------------------------------------------------------------

Tensor& nan_to_num_out(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "nan_to_num: dtype of out: ",
              out.scalar_type(), " should be same as input: ", self.scalar_type());
  if (any_stored_only({&self, &out}))
    return call_cpu_fallback<at::_ops::nan_to_num_out>(self, nan, posinf, neginf, out);
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    at::native::resize_output(out, self.sizes());
    out.copy_(self);
    return out;
  }
  auto iter = TensorIterator::unary_op(out, self);
  if (!native_iter(iter))
    return call_cpu_fallback<at::_ops::nan_to_num_out>(self, nan, posinf, neginf, out);
  // Replacements in the tensor's dtype (a half tensor's default +inf replacement is 65504).
  c10::ScalarType t = self.scalar_type();
  double big = 0;
  switch (t) {
    case c10::kHalf: big = static_cast<double>(std::numeric_limits<c10::Half>::max()); break;
    case c10::kBFloat16: big = static_cast<double>(std::numeric_limits<c10::BFloat16>::max()); break;
    default: big = std::numeric_limits<float>::max(); break;
  }
  launch_on_iterator(iter, "nan_to_num", common_compute(iter), param_as(nan.value_or(0.0), t),
                     param_as(posinf.value_or(big), t), param_as(neginf.value_or(-big), t));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("atan2.out", atan2_out);
  m.impl("copysign.out", copysign_out);
  m.impl("nextafter.out", nextafter_out);
  m.impl("hypot.out", hypot_out);
  m.impl("logaddexp.out", logaddexp_out);
  m.impl("logaddexp2.out", logaddexp2_out);
  m.impl("xlogy.OutTensor", xlogy_out);
  m.impl("special_xlog1py.out", xlog1py_out);
  m.impl("fmax.out", fmax_out);
  m.impl("fmin.out", fmin_out);
  m.impl("heaviside.out", heaviside_out);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("nan_to_num.out", nan_to_num_out);
}

}  // namespace twgpu::aten
