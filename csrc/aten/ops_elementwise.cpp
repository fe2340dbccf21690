// Native pointwise ops (the first kernel family), end to end through TensorIterator:
// broadcasting, type promotion, CPU scalars, strides, offsets, in-place and out=.
//
// Structured ops register only their `.out` kernel: PyTorch's generated
// CompositeExplicitAutogradNonFunctional kernels build functional and in-place variants on
// top of it. Operands ATen cannot compute here (float64, complex) go to the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_left_shift_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/bitwise_right_shift_ops.h>
#include <ATen/ops/bitwise_xor_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/floor_divide_ops.h>
#include <ATen/ops/fmod_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/logical_and_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/logical_or_ops.h>
#include <ATen/ops/logical_xor_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/remainder_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/lshift_ops.h>
#include <ATen/ops/rshift_ops.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/remainder.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/iterator_launch.h"
#include "aten/pointwise_common.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::TensorIterator;

// ---- binary ----------------------------------------------------------------------------


#define TWGPU_COMPARISON_OUT(NAME, KERNEL)                                                    \
  TWGPU_BINARY_OUT(NAME##_tensor_out, NAME##_Tensor_out, comparison_op, KERNEL)               \
  Tensor& NAME##_scalar_out(const Tensor& a, const c10::Scalar& b, Tensor& out) {             \
    if (stored_only_for(KERNEL, {&a, &out}))                                                  \
      return call_cpu_fallback<at::_ops::NAME##_Scalar_out>(a, b, out);                       \
    Tensor w = wrapped(b);                                                                    \
    auto iter = TensorIterator::comparison_op(out, a, w);                                     \
    if (!native_iter(iter, KERNEL)) return call_cpu_fallback<at::_ops::NAME##_Scalar_out>(a, b, out); \
    launch_on_iterator(iter, KERNEL, common_compute(iter));                                   \
    return out;                                                                               \
  }

TWGPU_BINARY_OUT(mul_out, mul_out, binary_op, "mul")
TWGPU_BINARY_OUT(div_out, div_out, binary_float_op, "div_true")
TWGPU_BINARY_OUT(remainder_out, remainder_Tensor_out, binary_op, "remainder")
TWGPU_BINARY_OUT(fmod_out, fmod_Tensor_out, binary_op, "fmod")
TWGPU_BINARY_OUT(pow_out, pow_Tensor_Tensor_out, binary_op, "pow")
TWGPU_BINARY_OUT(maximum_out, maximum_out, binary_op, "maximum")
TWGPU_BINARY_OUT(minimum_out, minimum_out, binary_op, "minimum")
TWGPU_BINARY_OUT(floor_divide_out, floor_divide_out, binary_op, "div_floor")
TWGPU_BINARY_OUT(logical_and_out, logical_and_out, comparison_op, "logical_and")
TWGPU_BINARY_OUT(logical_or_out, logical_or_out, comparison_op, "logical_or")
TWGPU_BINARY_OUT(logical_xor_out, logical_xor_out, comparison_op, "logical_xor")
TWGPU_BINARY_OUT(bitwise_and_out, bitwise_and_Tensor_out, binary_op, "bitwise_and")
TWGPU_BINARY_OUT(bitwise_or_out, bitwise_or_Tensor_out, binary_op, "bitwise_or")
TWGPU_BINARY_OUT(bitwise_xor_out, bitwise_xor_Tensor_out, binary_op, "bitwise_xor")
TWGPU_BINARY_OUT(lshift_out, bitwise_left_shift_Tensor_out, binary_op, "bitwise_left_shift")
TWGPU_BINARY_OUT(rshift_out, bitwise_right_shift_Tensor_out, binary_op, "bitwise_right_shift")
TWGPU_COMPARISON_OUT(eq, "eq")
TWGPU_COMPARISON_OUT(ne, "ne")
TWGPU_COMPARISON_OUT(lt, "lt")
TWGPU_COMPARISON_OUT(le, "le")
TWGPU_COMPARISON_OUT(gt, "gt")
TWGPU_COMPARISON_OUT(ge, "ge")

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  if (any_stored_only({&a, &b})) return call_cpu_fallback<at::_ops::floor_divide>(a, b);
  Tensor out;
  auto iter = TensorIterator::binary_op(out, a, b);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::floor_divide>(a, b);
  launch_on_iterator(iter, "div_floor", common_compute(iter));
  return iter.output();
}

Tensor& floor_divide_(Tensor& self, const Tensor& other) {
  return ::twgpu::aten::floor_divide_out(self, other, self);
}

// add/sub: out = a ± alpha * b
Tensor& add_sub_out(const char* kernel, const Tensor& a_in, const Tensor& b_in,
                    const c10::Scalar& alpha, Tensor& out, bool is_sub) {
  if (is_sub) at::native::sub_check(a_in, b_in);
  auto fallback = [&]() -> Tensor& {
    return is_sub ? call_cpu_fallback<at::_ops::sub_out>(a_in, b_in, alpha, out)
                  : call_cpu_fallback<at::_ops::add_out>(a_in, b_in, alpha, out);
  };
  auto a = host_scalar_if_stored(a_in), b = host_scalar_if_stored(b_in);
  if (stored_only_for(kernel, {&*a, &*b, &out})) return fallback();
  auto iter = TensorIterator::binary_op(out, *a, *b);
  at::native::alpha_check(iter.common_dtype(), alpha);  // complex alpha: complex tensors only
  if (!native_iter(iter, kernel)) return fallback();
  Compute c = common_compute(iter);
  launch_on_iterator(iter, kernel, c, scalar_bits(alpha, c));
  return out;
}
Tensor& add_out(const Tensor& a, const Tensor& b, const c10::Scalar& alpha, Tensor& out) {
  return add_sub_out("add", a, b, alpha, out, false);
}
Tensor& sub_out(const Tensor& a, const Tensor& b, const c10::Scalar& alpha, Tensor& out) {
  return add_sub_out("sub", a, b, alpha, out, true);
}

Tensor& div_mode_out(const Tensor& a, const Tensor& b, std::optional<c10::string_view> mode,
                     Tensor& out) {
  if (!mode.has_value()) return ::twgpu::aten::div_out(a, b, out);
  const char* kernel = nullptr;
  if (*mode == "trunc") kernel = "div_trunc";
  else if (*mode == "floor") kernel = "div_floor";
  TORCH_CHECK(kernel, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
  if (any_stored_only({&a, &b, &out}))
    return call_cpu_fallback<at::_ops::div_out_mode>(a, b, mode, out);
  auto iter = TensorIterator::binary_op(out, a, b);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::div_out_mode>(a, b, mode, out);
  launch_on_iterator(iter, kernel, common_compute(iter));
  return out;
}

// The CPU computes a complex power with these real exponents by copies, products, roots or
// a reciprocal, not exp(b log a): so do the same (their results differ in the last bits,
// and at zeros and infinities).
const char* complex_pow_kernel(const c10::Scalar& exp) {
  if (exp.equal(0.0)) return "pow_zero";
  if (exp.equal(1.0)) return "pow_one";
  if (exp.equal(0.5)) return "pow_sqrt";
  if (exp.equal(-0.5)) return "pow_rsqrt";
  if (exp.equal(-1.0)) return "pow_reciprocal";
  if (exp.equal(2.0)) return "pow_square";
  if (exp.equal(3.0)) return "pow_cube";
  if (exp.equal(-2.0)) return "pow_inverse_square";
  return "pow";
}

Tensor& pow_tensor_scalar_out(const Tensor& base, const c10::Scalar& exp, Tensor& out) {
  TORCH_CHECK(!(c10::isIntegralType(base.scalar_type(), true) && exp.isIntegral(true) &&
                exp.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  if (stored_only_for("pow", {&base, &out}))
    return call_cpu_fallback<at::_ops::pow_Tensor_Scalar_out>(base, exp, out);
  Tensor w = wrapped(exp);
  auto iter = TensorIterator::binary_op(out, base, w);
  if (!native_iter(iter, "pow")) return call_cpu_fallback<at::_ops::pow_Tensor_Scalar_out>(base, exp, out);
  const char* kernel = "pow";
  if (c10::isFloatingType(iter.common_dtype()) && !exp.isComplex()) {
    // The CPU computes these exponents with sqrt / rsqrt (different at -inf) and x * x.
    if (exp.toDouble() == 0.5) kernel = "pow_sqrt";
    if (exp.toDouble() == -0.5) kernel = "pow_rsqrt";
    if (exp.toDouble() == 2.0) kernel = "pow_square";
  }
  if (iter.common_dtype() == c10::kComplexFloat) kernel = complex_pow_kernel(exp);
  launch_on_iterator(iter, kernel, common_compute(iter));
  return out;
}

Tensor& pow_scalar_out(const c10::Scalar& base, const Tensor& exp, Tensor& out) {
  if (stored_only_for("pow", {&exp, &out}))
    return call_cpu_fallback<at::_ops::pow_Scalar_out>(base, exp, out);
  Tensor w = wrapped(base);
  auto iter = TensorIterator::binary_op(out, w, exp);
  if (!native_iter(iter, "pow")) return call_cpu_fallback<at::_ops::pow_Scalar_out>(base, exp, out);
  launch_on_iterator(iter, "pow", common_compute(iter));
  return out;
}

// Python's operators: x << y, x >> y (and <<=, >>=) are their own ATen ops.
Tensor shift(const Tensor& a, const Tensor& b, const char* kernel) {
  Tensor out;
  auto iter = TensorIterator::binary_op(out, a, b);
  if (!native_iter(iter)) {
    return std::string(kernel) == "bitwise_left_shift"
               ? call_cpu_fallback<at::_ops::__lshift___Tensor>(a, b)
               : call_cpu_fallback<at::_ops::__rshift___Tensor>(a, b);
  }
  launch_on_iterator(iter, kernel, common_compute(iter));
  return iter.output();
}
Tensor& shift_(Tensor& self, const Tensor& b, const char* kernel) {
  auto iter = TensorIterator::binary_op(self, self, b);
  if (!native_iter(iter)) {
    return std::string(kernel) == "bitwise_left_shift"
               ? call_cpu_fallback<at::_ops::__ilshift___Tensor>(self, b)
               : call_cpu_fallback<at::_ops::__irshift___Tensor>(self, b);
  }
  launch_on_iterator(iter, kernel, common_compute(iter));
  return self;
}
Tensor lshift_tensor(const Tensor& a, const Tensor& b) { return shift(a, b, "bitwise_left_shift"); }
Tensor rshift_tensor(const Tensor& a, const Tensor& b) { return shift(a, b, "bitwise_right_shift"); }
Tensor lshift_scalar(const Tensor& a, const c10::Scalar& b) {
  return shift(a, wrapped(b), "bitwise_left_shift");
}
Tensor rshift_scalar(const Tensor& a, const c10::Scalar& b) {
  return shift(a, wrapped(b), "bitwise_right_shift");
}
Tensor& ilshift_tensor(Tensor& a, const Tensor& b) { return shift_(a, b, "bitwise_left_shift"); }
Tensor& irshift_tensor(Tensor& a, const Tensor& b) { return shift_(a, b, "bitwise_right_shift"); }
Tensor& ilshift_scalar(Tensor& a, const c10::Scalar& b) {
  return shift_(a, wrapped(b), "bitwise_left_shift");
}
Tensor& irshift_scalar(Tensor& a, const c10::Scalar& b) {
  return shift_(a, wrapped(b), "bitwise_right_shift");
}

// rsub(self, other, alpha) = other - alpha * self; `2 - x` lands here.
Tensor rsub(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

// 2 % x
Tensor remainder_scalar_tensor(const c10::Scalar& self, const Tensor& other) {
  return at::remainder(wrapped(self), other);
}

// ---- unary -----------------------------------------------------------------------------


// abs of complex64: a real result (or a complex one with imaginary part 0, when out is
// complex), one kernel either way.
Tensor& abs_out(const Tensor& a, Tensor& out) {
  if (a.scalar_type() == c10::kComplexFloat && complex_to_real_out(a, out, "abs")) return out;
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::abs_out>(a, out);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::abs_out>(a, out);
  launch_on_iterator(iter, "abs", common_compute(iter));
  return out;
}
TWGPU_UNARY_OUT(sign_out, sign_out, unary_op, "sign")
TWGPU_UNARY_OUT(exp_out, exp_out, unary_float_op, "exp")
TWGPU_UNARY_OUT(log_out, log_out, unary_float_op, "log")
TWGPU_UNARY_OUT(log1p_out, log1p_out, unary_float_op, "log1p")
TWGPU_UNARY_OUT(expm1_out, expm1_out, unary_float_op, "expm1")
TWGPU_UNARY_OUT(sqrt_out, sqrt_out, unary_float_op, "sqrt")
TWGPU_UNARY_OUT(rsqrt_out, rsqrt_out, unary_float_op, "rsqrt")
TWGPU_UNARY_OUT(sin_out, sin_out, unary_float_op, "sin")
TWGPU_UNARY_OUT(cos_out, cos_out, unary_float_op, "cos")
TWGPU_UNARY_OUT(tanh_out, tanh_out, unary_float_op, "tanh")
TWGPU_UNARY_OUT(sigmoid_out, sigmoid_out, unary_float_op, "sigmoid")
TWGPU_UNARY_OUT(silu_out, silu_out, unary_op, "silu")

Tensor& neg_out(const Tensor& a, Tensor& out) {
  TORCH_CHECK(a.scalar_type() != c10::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  if (stored_only_for("neg", {&a, &out})) return call_cpu_fallback<at::_ops::neg_out>(a, out);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter, "neg")) return call_cpu_fallback<at::_ops::neg_out>(a, out);
  launch_on_iterator(iter, "neg", common_compute(iter));
  return out;
}

Tensor& bitwise_not_out(const Tensor& a, Tensor& out) {
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::bitwise_not_out>(a, out);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::bitwise_not_out>(a, out);
  // On bool, ~ is logical negation.
  launch_on_iterator(iter, a.scalar_type() == c10::kBool ? "logical_not" : "bitwise_not",
                     common_compute(iter));
  return out;
}

Tensor& logical_not_out(const Tensor& a, Tensor& out) {
  if (stored_only_for("logical_not", {&a, &out}))
    return call_cpu_fallback<at::_ops::logical_not_out>(a, out);
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(a)
                  .build();
  if (!native_iter(iter, "logical_not")) return call_cpu_fallback<at::_ops::logical_not_out>(a, out);
  launch_on_iterator(iter, "logical_not", compute_type_of(a.scalar_type()));
  return out;
}

Tensor& gelu_out(const Tensor& a, c10::string_view approximate, Tensor& out) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  if (any_stored_only({&a, &out}))
    return call_cpu_fallback<at::_ops::gelu_out>(a, approximate, out);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::gelu_out>(a, approximate, out);
  launch_on_iterator(iter, approximate == "tanh" ? "gelu_tanh" : "gelu", common_compute(iter));
  return out;
}

Tensor relu(const Tensor& a) {
  TORCH_CHECK(a.scalar_type() != c10::kBool, "Boolean inputs not supported for relu");
  if (any_stored_only({&a})) return call_cpu_fallback<at::_ops::relu>(a);
  Tensor out;
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::relu>(a);
  launch_on_iterator(iter, "relu", common_compute(iter));
  return iter.output();
}

Tensor& relu_(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != c10::kBool, "Boolean inputs not supported for relu");
  if (any_stored_only({&self})) return call_cpu_fallback<at::_ops::relu_>(self);
  auto iter = TensorIterator::unary_op(self, self);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::relu_>(self);
  launch_on_iterator(iter, "relu", common_compute(iter));
  return self;
}

// ---- where ----------------------------------------------------------------------------

// where's iterator keeps each operand's dtype (its common dtype is cond's bool), so a 0-dim
// value on the CPU, or in a dtype the device only stores, becomes a device 0-dim tensor of
// the result dtype: the value the CPU would cast it to.
Tensor where_value(const Tensor& t, c10::ScalarType result, const Tensor& out) {
  bool host = t.dim() == 0 && t.device().is_cpu();
  bool stored = t.dim() == 0 && t.device().type() == kDeviceType &&
                !is_native_compute(t.scalar_type()) && !c10::isComplexType(t.scalar_type());
  if ((host || stored) && native_dtype_for(result, "where") && out.device().type() == kDeviceType)
    return at::scalar_tensor(t.item(), out.options().dtype(result));
  return t;
}

Tensor& where_out(const Tensor& cond, const Tensor& a_in, const Tensor& b_in, Tensor& out) {
  if (cond.scalar_type() == c10::kByte) {
    // Accepted with a deprecation warning, as on the CPU (the kernel tests cond != 0).
    TORCH_WARN_ONCE(
        "where received a uint8 condition tensor. This behavior is deprecated and will be "
        "removed in a future version of PyTorch. Use a boolean condition instead.");
  } else {
    TORCH_CHECK(cond.scalar_type() == c10::kBool,
                "where expected condition to be a boolean tensor, but got a tensor with dtype ",
                cond.scalar_type());
  }
  c10::ScalarType result = at::result_type(a_in, b_in);
  TORCH_CHECK(out.scalar_type() == result, "Expected out type to be ", result, " but got ",
              out.scalar_type());
  Tensor a = where_value(a_in, result, out), b = where_value(b_in, result, out);
  if (stored_only_for("where", {&a, &b, &out}))
    return call_cpu_fallback<at::_ops::where_self_out>(cond, a_in, b_in, out);
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .allow_cpu_scalars(true)
                  .add_output(out)
                  .add_const_input(cond)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build();
  if (!native_iter(iter, "where"))
    return call_cpu_fallback<at::_ops::where_self_out>(cond, a_in, b_in, out);
  launch_on_iterator(iter, "where", compute_type_of(result));
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  auto shape = at::infer_size_dimvector(cond.sizes(), at::infer_size_dimvector(a.sizes(), b.sizes()));
  // The output lives on the webgpu operand's device (the others may be CPU scalars).
  c10::Device device = a.device().type() == kDeviceType   ? a.device()
                       : b.device().type() == kDeviceType ? b.device()
                                                          : cond.device();
  Tensor out = at::empty(shape, a.options().dtype(at::result_type(a, b)).device(device));
  return ::twgpu::aten::where_out(cond, a, b, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.out", add_out);
  m.impl("sub.out", sub_out);
  m.impl("mul.out", mul_out);
  m.impl("div.out", div_out);
  m.impl("div.out_mode", div_mode_out);
  m.impl("remainder.Tensor_out", remainder_out);
  m.impl("fmod.Tensor_out", fmod_out);
  m.impl("pow.Tensor_Tensor_out", pow_out);
  m.impl("pow.Tensor_Scalar_out", pow_tensor_scalar_out);
  m.impl("pow.Scalar_out", pow_scalar_out);
  m.impl("maximum.out", maximum_out);
  m.impl("minimum.out", minimum_out);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide_.Tensor", floor_divide_);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("eq.Tensor_out", eq_tensor_out);
  m.impl("eq.Scalar_out", eq_scalar_out);
  m.impl("ne.Tensor_out", ne_tensor_out);
  m.impl("ne.Scalar_out", ne_scalar_out);
  m.impl("lt.Tensor_out", lt_tensor_out);
  m.impl("lt.Scalar_out", lt_scalar_out);
  m.impl("le.Tensor_out", le_tensor_out);
  m.impl("le.Scalar_out", le_scalar_out);
  m.impl("gt.Tensor_out", gt_tensor_out);
  m.impl("gt.Scalar_out", gt_scalar_out);
  m.impl("ge.Tensor_out", ge_tensor_out);
  m.impl("ge.Scalar_out", ge_scalar_out);
  m.impl("logical_and.out", logical_and_out);
  m.impl("logical_or.out", logical_or_out);
  m.impl("logical_xor.out", logical_xor_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("bitwise_and.Tensor_out", bitwise_and_out);
  m.impl("bitwise_or.Tensor_out", bitwise_or_out);
  m.impl("bitwise_xor.Tensor_out", bitwise_xor_out);
  m.impl("bitwise_left_shift.Tensor_out", lshift_out);
  m.impl("bitwise_right_shift.Tensor_out", rshift_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("neg.out", neg_out);
  m.impl("abs.out", abs_out);
  m.impl("sign.out", sign_out);
  m.impl("exp.out", exp_out);
  m.impl("log.out", log_out);
  m.impl("log1p.out", log1p_out);
  m.impl("expm1.out", expm1_out);
  m.impl("sqrt.out", sqrt_out);
  m.impl("rsqrt.out", rsqrt_out);
  m.impl("sin.out", sin_out);
  m.impl("cos.out", cos_out);
  m.impl("tanh.out", tanh_out);
  m.impl("sigmoid.out", sigmoid_out);
  m.impl("silu.out", silu_out);
  m.impl("gelu.out", gelu_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("__lshift__.Tensor", lshift_tensor);
  m.impl("__lshift__.Scalar", lshift_scalar);
  m.impl("__rshift__.Tensor", rshift_tensor);
  m.impl("__rshift__.Scalar", rshift_scalar);
  m.impl("__ilshift__.Tensor", ilshift_tensor);
  m.impl("__ilshift__.Scalar", ilshift_scalar);
  m.impl("__irshift__.Tensor", irshift_tensor);
  m.impl("__irshift__.Scalar", irshift_scalar);
  m.impl("rsub.Tensor", rsub);
  m.impl("remainder.Scalar_Tensor", remainder_scalar_tensor);
  m.impl("where.self", where);
  m.impl("where.self_out", where_out);
}

}  // namespace twgpu::aten
