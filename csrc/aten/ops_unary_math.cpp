// Native unary math: rounding, reciprocal, exp2/log2/log10, trig and hyperbolic
// functions and their inverses, erf family, sinc, logit, angle, and the float
// classification ops (signbit, isnan, isinf, isposinf, isneginf, isfinite).
//
// Structured ops register `.out` only (PyTorch derives the functional and in-place
// variants); logit, angle and the functional-only classification ops register each
// overload. float64 and complex operands go to the CPU fallback.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/acos_ops.h>
#include <ATen/ops/acosh_ops.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/asin_ops.h>
#include <ATen/ops/asinh_ops.h>
#include <ATen/ops/atan_ops.h>
#include <ATen/ops/atanh_ops.h>
#include <ATen/ops/ceil_ops.h>
#include <ATen/ops/cosh_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/erfc_ops.h>
#include <ATen/ops/erfinv_ops.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/digamma_ops.h>
#include <ATen/ops/i0_ops.h>
#include <ATen/ops/igamma_ops.h>
#include <ATen/ops/igammac_ops.h>
#include <ATen/ops/lgamma_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <ATen/ops/special_entr_ops.h>
#include <ATen/ops/special_erfcx_ops.h>
#include <ATen/ops/special_i0e_ops.h>
#include <ATen/ops/special_i1_ops.h>
#include <ATen/ops/special_i1e_ops.h>
#include <ATen/ops/special_log_ndtr_ops.h>
#include <ATen/ops/special_modified_bessel_i0_ops.h>
#include <ATen/ops/special_modified_bessel_i1_ops.h>
#include <ATen/ops/special_ndtri_ops.h>
#include <ATen/ops/special_spherical_bessel_j0_ops.h>
#include <ATen/ops/special_zeta_ops.h>
#include <ATen/ops/special_bessel_j0_ops.h>
#include <ATen/ops/special_bessel_j1_ops.h>
#include <ATen/ops/special_bessel_y0_ops.h>
#include <ATen/ops/special_bessel_y1_ops.h>
#include <ATen/ops/special_airy_ai_ops.h>
#include <ATen/ops/special_modified_bessel_k0_ops.h>
#include <ATen/ops/special_modified_bessel_k1_ops.h>
#include <ATen/ops/special_scaled_modified_bessel_k0_ops.h>
#include <ATen/ops/special_scaled_modified_bessel_k1_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_t_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_u_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_v_ops.h>
#include <ATen/ops/special_shifted_chebyshev_polynomial_w_ops.h>
#include <ATen/ops/special_hermite_polynomial_h_ops.h>
#include <ATen/ops/special_hermite_polynomial_he_ops.h>
#include <ATen/ops/special_laguerre_polynomial_l_ops.h>
#include <ATen/ops/special_legendre_polynomial_p_ops.h>
#include <ATen/ops/frac_ops.h>
#include <ATen/ops/frexp_ops.h>
#include <ATen/ops/isfinite_ops.h>
#include <ATen/ops/isinf_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/isneginf_ops.h>
#include <ATen/ops/isposinf_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/logit_backward_ops.h>
#include <ATen/ops/logit_ops.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/signbit_ops.h>
#include <ATen/ops/sinc_ops.h>
#include <ATen/ops/sinh_ops.h>
#include <ATen/ops/tan_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <torch/library.h>

#include <cmath>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "aten/pointwise_common.h"
#include "kernels/float_decompose.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::TensorIterator;


TWGPU_UNARY_OUT(reciprocal_kernel_out, reciprocal_out, unary_float_op, "reciprocal")

// GradScaler.unscale_ forms 1 / scale in float64 (scale.double().reciprocal().float()): a
// 0-dim float64 operand is computed on the host, as such operands of binary ops are
// (host_scalar_if_stored), so that training step stays native.
Tensor& reciprocal_out(const Tensor& a, Tensor& out) {
  if (a.dim() == 0 && out.dim() == 0 && a.scalar_type() == c10::kDouble &&
      out.scalar_type() == c10::kDouble && a.device().type() == kDeviceType &&
      out.device().type() == kDeviceType) {
    out.copy_(at::reciprocal(a.cpu()));
    return out;
  }
  return reciprocal_kernel_out(a, out);
}
TWGPU_UNARY_OUT(floor_out, floor_out, unary_op, "floor")
TWGPU_UNARY_OUT(ceil_out, ceil_out, unary_op, "ceil")
TWGPU_UNARY_OUT(trunc_out, trunc_out, unary_op, "trunc")
TWGPU_UNARY_OUT(round_out, round_out, unary_op, "round")
TWGPU_UNARY_OUT(frac_out, frac_out, unary_op, "frac")
TWGPU_UNARY_OUT(exp2_out, exp2_out, unary_float_op, "exp2")
TWGPU_UNARY_OUT(log2_out, log2_out, unary_float_op, "log2")
TWGPU_UNARY_OUT(log10_out, log10_out, unary_float_op, "log10")
TWGPU_UNARY_OUT(tan_out, tan_out, unary_float_op, "tan")
TWGPU_UNARY_OUT(asin_out, asin_out, unary_float_op, "asin")
TWGPU_UNARY_OUT(acos_out, acos_out, unary_float_op, "acos")
TWGPU_UNARY_OUT(atan_out, atan_out, unary_float_op, "atan")
TWGPU_UNARY_OUT(sinh_out, sinh_out, unary_float_op, "sinh")
TWGPU_UNARY_OUT(cosh_out, cosh_out, unary_float_op, "cosh")
TWGPU_UNARY_OUT(asinh_out, asinh_out, unary_float_op, "asinh")
TWGPU_UNARY_OUT(acosh_out, acosh_out, unary_float_op, "acosh")
TWGPU_UNARY_OUT(atanh_out, atanh_out, unary_float_op, "atanh")
TWGPU_UNARY_OUT(erf_out, erf_out, unary_float_op, "erf")
TWGPU_UNARY_OUT(erfc_out, erfc_out, unary_float_op, "erfc")
TWGPU_UNARY_OUT(erfinv_out, erfinv_out, unary_float_op, "erfinv")
TWGPU_UNARY_OUT(sinc_out, sinc_out, unary_float_op, "sinc")
// Ops the CPU computes for float32 (and float64) only: half types raise as there.
#define TWGPU_UNARY_FLOAT_ONLY_OUT(FN, OP, KERNEL)                                      \
  Tensor& FN(const Tensor& a, Tensor& out) {                                            \
    if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::OP>(a, out);    \
    auto iter = TensorIterator::unary_float_op(out, a);                                 \
    TORCH_CHECK_NOT_IMPLEMENTED(!at::isReducedFloatingType(iter.common_dtype()), "\"", \
                                KERNEL, "_webgpu\" not implemented for '",              \
                                c10::toString(iter.common_dtype()), "'");               \
    if (!native_iter(iter)) return call_cpu_fallback<at::_ops::OP>(a, out);             \
    launch_on_iterator(iter, KERNEL, common_compute(iter));                             \
    return out;                                                                         \
  }

TWGPU_UNARY_OUT(lgamma_out, lgamma_out, unary_float_op, "lgamma")
TWGPU_UNARY_OUT(digamma_out, digamma_out, unary_float_op, "digamma")
TWGPU_UNARY_OUT(i0_out, i0_out, unary_float_op, "i0")
TWGPU_UNARY_OUT(i0e_out, special_i0e_out, unary_float_op, "i0e")
TWGPU_UNARY_OUT(i1_out, special_i1_out, unary_float_op, "i1")
TWGPU_UNARY_OUT(i1e_out, special_i1e_out, unary_float_op, "i1e")
TWGPU_UNARY_FLOAT_ONLY_OUT(modified_i0_out, special_modified_bessel_i0_out, "i0")
TWGPU_UNARY_FLOAT_ONLY_OUT(modified_i1_out, special_modified_bessel_i1_out, "i1")
TWGPU_UNARY_FLOAT_ONLY_OUT(erfcx_out, special_erfcx_out, "erfcx")
TWGPU_UNARY_FLOAT_ONLY_OUT(ndtri_out, special_ndtri_out, "ndtri")
TWGPU_UNARY_FLOAT_ONLY_OUT(log_ndtr_out, special_log_ndtr_out, "log_ndtr")
TWGPU_UNARY_OUT(entr_out, special_entr_out, unary_float_op, "entr")
TWGPU_UNARY_FLOAT_ONLY_OUT(spherical_j0_out, special_spherical_bessel_j0_out, "spherical_j0")
TWGPU_UNARY_FLOAT_ONLY_OUT(j0_out, special_bessel_j0_out, "j0")
TWGPU_UNARY_FLOAT_ONLY_OUT(j1_out, special_bessel_j1_out, "j1")
TWGPU_UNARY_FLOAT_ONLY_OUT(y0_out, special_bessel_y0_out, "y0")
TWGPU_UNARY_FLOAT_ONLY_OUT(y1_out, special_bessel_y1_out, "y1")
TWGPU_UNARY_FLOAT_ONLY_OUT(airy_ai_out, special_airy_ai_out, "airy_ai")
TWGPU_UNARY_FLOAT_ONLY_OUT(k0_out, special_modified_bessel_k0_out, "k0")
TWGPU_UNARY_FLOAT_ONLY_OUT(k1_out, special_modified_bessel_k1_out, "k1")
TWGPU_UNARY_FLOAT_ONLY_OUT(k0e_out, special_scaled_modified_bessel_k0_out, "k0e")
TWGPU_UNARY_FLOAT_ONLY_OUT(k1e_out, special_scaled_modified_bessel_k1_out, "k1e")

Tensor& polygamma_out(int64_t n, const Tensor& a, Tensor& out) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::polygamma_out>(n, a, out);
  auto iter = TensorIterator::unary_float_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::polygamma_out>(n, a, out);
  launch_on_iterator(iter, "polygamma", common_compute(iter),
                     ScalarBits::from_f32(static_cast<float>(n)));
  return out;
}

// Regularized incomplete gamma functions.
Tensor& igamma_impl(const Tensor& a, const Tensor& x, Tensor& out, bool upper) {
  if (any_stored_only({&a, &x, &out}))
    return upper ? call_cpu_fallback<at::_ops::igammac_out>(a, x, out)
                 : call_cpu_fallback<at::_ops::igamma_out>(a, x, out);
  auto iter = TensorIterator::binary_float_op(out, a, x);
  if (!native_iter(iter))
    return upper ? call_cpu_fallback<at::_ops::igammac_out>(a, x, out)
                 : call_cpu_fallback<at::_ops::igamma_out>(a, x, out);
  launch_on_iterator(iter, upper ? "igammac" : "igamma", common_compute(iter));
  return out;
}
Tensor& igamma_out(const Tensor& a, const Tensor& x, Tensor& out) { return igamma_impl(a, x, out, false); }
Tensor& igammac_out(const Tensor& a, const Tensor& x, Tensor& out) { return igamma_impl(a, x, out, true); }

Tensor& zeta_out(const Tensor& s, const Tensor& q, Tensor& out) {
  if (any_stored_only({&s, &q, &out})) return call_cpu_fallback<at::_ops::special_zeta_out>(s, q, out);
  auto iter = TensorIterator::binary_float_op(out, s, q);
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isReducedFloatingType(iter.common_dtype()),
                              "\"zeta_webgpu\" not implemented for '",
                              c10::toString(iter.common_dtype()), "'");
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::special_zeta_out>(s, q, out);
  launch_on_iterator(iter, "zeta", common_compute(iter));
  return out;
}

// Orthogonal polynomials P_n(x) with a tensor of degrees n (float32 only, as the CPU).
#define TWGPU_POLY_OUT(FN, OP, KERNEL)                                                     \
  Tensor& FN(const Tensor& x, const Tensor& n, Tensor& out) {                              \
    if (any_stored_only({&x, &n, &out})) return call_cpu_fallback<at::_ops::OP>(x, n, out); \
    auto iter = TensorIterator::binary_float_op(out, x, n);                                    \
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(iter.common_dtype()) &&                \
                                    !at::isReducedFloatingType(iter.common_dtype()),       \
                                "\"", KERNEL, "_webgpu\" not implemented for '",          \
                                c10::toString(iter.common_dtype()), "'");                  \
    if (!native_iter(iter)) return call_cpu_fallback<at::_ops::OP>(x, n, out);             \
    launch_on_iterator(iter, KERNEL, common_compute(iter));                                \
    return out;                                                                            \
  }
TWGPU_POLY_OUT(chebyshev_t_out, special_chebyshev_polynomial_t_out, "chebyshev_t")
TWGPU_POLY_OUT(chebyshev_u_out, special_chebyshev_polynomial_u_out, "chebyshev_u")
TWGPU_POLY_OUT(chebyshev_v_out, special_chebyshev_polynomial_v_out, "chebyshev_v")
TWGPU_POLY_OUT(chebyshev_w_out, special_chebyshev_polynomial_w_out, "chebyshev_w")
TWGPU_POLY_OUT(shifted_chebyshev_t_out, special_shifted_chebyshev_polynomial_t_out, "shifted_chebyshev_t")
TWGPU_POLY_OUT(shifted_chebyshev_u_out, special_shifted_chebyshev_polynomial_u_out, "shifted_chebyshev_u")
TWGPU_POLY_OUT(shifted_chebyshev_v_out, special_shifted_chebyshev_polynomial_v_out, "shifted_chebyshev_v")
TWGPU_POLY_OUT(shifted_chebyshev_w_out, special_shifted_chebyshev_polynomial_w_out, "shifted_chebyshev_w")
TWGPU_POLY_OUT(hermite_h_out, special_hermite_polynomial_h_out, "hermite_h")
TWGPU_POLY_OUT(hermite_he_out, special_hermite_polynomial_he_out, "hermite_he")
TWGPU_POLY_OUT(laguerre_l_out, special_laguerre_polynomial_l_out, "laguerre_l")
TWGPU_POLY_OUT(legendre_p_out, special_legendre_polynomial_p_out, "legendre_p")

// sgn of a real tensor is sign; of a complex one z / |z| (0 at 0).
TWGPU_UNARY_OUT(sign_as_sgn_out, sgn_out, unary_op, "sign")
TWGPU_UNARY_OUT(complex_sgn_out, sgn_out, unary_op, "sgn")
Tensor& sgn_out(const Tensor& a, Tensor& out) {
  return a.is_complex() ? complex_sgn_out(a, out) : sign_as_sgn_out(a, out);
}

Tensor& round_decimals_out(const Tensor& a, int64_t decimals, Tensor& out) {
  if (any_stored_only({&a, &out}))
    return call_cpu_fallback<at::_ops::round_decimals_out>(a, decimals, out);
  auto iter = TensorIterator::unary_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::round_decimals_out>(a, decimals, out);
  // The CPU scales by 10^|decimals| in float: multiply then divide, or the reverse.
  float ten_pow = static_cast<float>(std::pow(10.0, static_cast<double>(std::abs(decimals))));
  launch_on_iterator(iter, decimals >= 0 ? "round_decimals_pos" : "round_decimals_neg",
                     common_compute(iter), ScalarBits::from_f32(ten_pow));
  return out;
}

// Boolean results of a float classification.
#define TWGPU_BOOL_UNARY_OUT(FN, OP, KERNEL)                                          \
  Tensor& FN(const Tensor& a, Tensor& out) {                                          \
    if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::OP>(a, out);  \
    at::TensorIterator iter;                                                          \
    iter.build_borrowing_unary_force_boolean_op(out, a);                              \
    if (!native_iter(iter)) return call_cpu_fallback<at::_ops::OP>(a, out);           \
    launch_on_iterator(iter, KERNEL, compute_type_of(a.scalar_type()));               \
    return out;                                                                       \
  }

TWGPU_BOOL_UNARY_OUT(signbit_out, signbit_out, "signbit")
TWGPU_BOOL_UNARY_OUT(isposinf_out, isposinf_out, "isposinf")
TWGPU_BOOL_UNARY_OUT(isneginf_out, isneginf_out, "isneginf")

// Functional-only classification ops: isnan (CPU kernel), isinf and isfinite (composites
// elsewhere, one kernel here instead of two or three).
#define TWGPU_BOOL_UNARY(FN, OP, KERNEL)                                              \
  Tensor FN(const Tensor& a) {                                                        \
    if (stored_only_for(KERNEL, {&a})) return call_cpu_fallback<at::_ops::OP>(a);     \
    Tensor out = at::empty(a.sizes(), a.options().dtype(c10::kBool));                 \
    at::TensorIterator iter;                                                          \
    iter.build_borrowing_unary_force_boolean_op(out, a);                              \
    if (!native_iter(iter, KERNEL)) return call_cpu_fallback<at::_ops::OP>(a);               \
    launch_on_iterator(iter, KERNEL, compute_type_of(a.scalar_type()));               \
    return out;                                                                       \
  }

TWGPU_BOOL_UNARY(isnan, isnan, "isnan")
TWGPU_BOOL_UNARY(isinf, isinf, "isinf")
TWGPU_BOOL_UNARY(isfinite, isfinite, "isfinite")

// logit is not structured: functional, out= and in-place each land here.
void launch_logit(const at::TensorIteratorBase& iter, std::optional<double> eps) {
  if (eps && *eps >= 0.0) {
    // The CPU clamps to [eps, 1 - eps] in the tensor's type.
    c10::ScalarType t = iter.common_dtype();
    launch_on_iterator(iter, "logit_eps", common_compute(iter), param_as(*eps, t),
                       param_as(1.0 - *eps, t));
  } else {
    launch_on_iterator(iter, "logit", common_compute(iter));
  }
}
Tensor& logit_out(const Tensor& a, std::optional<double> eps, Tensor& out) {
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::logit_out>(a, eps, out);
  auto iter = TensorIterator::unary_float_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::logit_out>(a, eps, out);
  launch_logit(iter, eps);
  return out;
}
Tensor logit(const Tensor& a, std::optional<double> eps) {
  if (any_stored_only({&a})) return call_cpu_fallback<at::_ops::logit>(a, eps);
  Tensor out;
  auto iter = TensorIterator::unary_float_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::logit>(a, eps);
  launch_logit(iter, eps);
  return iter.output();
}
Tensor& logit_(Tensor& a, std::optional<double> eps) { return ::twgpu::aten::logit_out(a, eps, a); }

// (grad, input); the CPU reads eps in the tensor's type.
Tensor& logit_backward_out(const Tensor& grad, const Tensor& x, std::optional<double> eps,
                           Tensor& out) {
  if (any_stored_only({&grad, &x, &out}))
    return call_cpu_fallback<at::_ops::logit_backward_grad_input>(grad, x, eps, out);
  auto iter = TensorIterator::binary_op(out, grad, x);
  if (!native_iter(iter))
    return call_cpu_fallback<at::_ops::logit_backward_grad_input>(grad, x, eps, out);
  if (eps && *eps >= 0.0) {
    c10::ScalarType t = iter.common_dtype();
    launch_on_iterator(iter, "logit_eps_bwd", common_compute(iter), param_as(*eps, t),
                       param_as(1.0 - *eps, t));
  } else {
    launch_on_iterator(iter, "logit_bwd", common_compute(iter));
  }
  return out;
}

// frexp (mantissa, int32 exponent) with the CPU's checks; the functional form is a
// composite over this one. The kernel writes fresh contiguous tensors, then the outputs
// are resized and filled (they may be non-contiguous or overlap nothing we read).
std::tuple<Tensor&, Tensor&> frexp_out(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.dtype() == self.dtype(), "torch.frexp() expects mantissa to have dtype ",
              self.dtype(), " but got ", mantissa.dtype());
  TORCH_CHECK(exponent.dtype() == at::kInt,
              "torch.frexp() expects exponent to have int dtype but got ", exponent.dtype());
  if (any_stored_only({&self, &mantissa, &exponent}))
    return call_cpu_fallback<at::_ops::frexp_Tensor_out>(self, mantissa, exponent);
  TWGPU_TRY
  Tensor x = self.contiguous();
  Tensor m = at::empty(self.sizes(), self.options().memory_format(c10::MemoryFormat::Contiguous));
  Tensor e = at::empty(self.sizes(), self.options().dtype(at::kInt).memory_format(c10::MemoryFormat::Contiguous));
  if (x.numel() > 0) {
    RuntimeLock lock;
    frexp_kernel(lock.ctx(), operand(x), operand(m), operand(e), static_cast<uint64_t>(x.numel()));
  }
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  // The CPU's iterator refuses outputs that partly overlap the input (a full overlap,
  // frexp into self, is fine: the kernel reads before anything is copied back).
  at::assert_no_internal_overlap(mantissa);
  at::assert_no_internal_overlap(exponent);
  at::assert_no_partial_overlap(mantissa, self);
  at::assert_no_partial_overlap(exponent, self);
  mantissa.copy_(m);
  exponent.copy_(e);
  TWGPU_CATCH
  return std::forward_as_tuple(mantissa, exponent);
}

// angle of a real tensor: pi for negatives, 0 otherwise, NaN kept; of a complex one its
// argument, a real result.
Tensor& angle_out(const Tensor& a, Tensor& out) {
  if (a.scalar_type() == c10::kComplexFloat && complex_to_real_out(a, out, "angle")) return out;
  if (any_stored_only({&a, &out})) return call_cpu_fallback<at::_ops::angle_out>(a, out);
  auto iter = TensorIterator::unary_float_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::angle_out>(a, out);
  launch_on_iterator(iter, "angle", common_compute(iter));
  return out;
}
Tensor angle(const Tensor& a) {
  if (a.scalar_type() == c10::kComplexFloat && a.device().type() == kDeviceType) {
    Tensor out = at::empty(a.sizes(), a.options().dtype(c10::kFloat));
    return angle_out(a, out);
  }
  if (any_stored_only({&a})) return call_cpu_fallback<at::_ops::angle>(a);
  Tensor out;
  auto iter = TensorIterator::unary_float_op(out, a);
  if (!native_iter(iter)) return call_cpu_fallback<at::_ops::angle>(a);
  launch_on_iterator(iter, "angle", common_compute(iter));
  return iter.output();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("reciprocal.out", reciprocal_out);
  m.impl("floor.out", floor_out);
  m.impl("ceil.out", ceil_out);
  m.impl("trunc.out", trunc_out);
  m.impl("round.out", round_out);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("frac.out", frac_out);
  m.impl("exp2.out", exp2_out);
  m.impl("log2.out", log2_out);
  m.impl("log10.out", log10_out);
  m.impl("tan.out", tan_out);
  m.impl("asin.out", asin_out);
  m.impl("acos.out", acos_out);
  m.impl("atan.out", atan_out);
  m.impl("sinh.out", sinh_out);
  m.impl("cosh.out", cosh_out);
  m.impl("asinh.out", asinh_out);
  m.impl("acosh.out", acosh_out);
  m.impl("atanh.out", atanh_out);
  m.impl("erf.out", erf_out);
  m.impl("erfc.out", erfc_out);
  m.impl("erfinv.out", erfinv_out);
  m.impl("sinc.out", sinc_out);
  m.impl("sgn.out", sgn_out);
  m.impl("lgamma.out", lgamma_out);
  m.impl("digamma.out", digamma_out);
  m.impl("polygamma.out", polygamma_out);
  m.impl("special_zeta.out", zeta_out);
  m.impl("igamma.out", igamma_out);
  m.impl("igammac.out", igammac_out);
  m.impl("i0.out", i0_out);
  m.impl("special_i0e.out", i0e_out);
  m.impl("special_i1.out", i1_out);
  m.impl("special_i1e.out", i1e_out);
  m.impl("special_modified_bessel_i0.out", modified_i0_out);
  m.impl("special_modified_bessel_i1.out", modified_i1_out);
  m.impl("special_erfcx.out", erfcx_out);
  m.impl("special_ndtri.out", ndtri_out);
  m.impl("special_log_ndtr.out", log_ndtr_out);
  m.impl("special_entr.out", entr_out);
  m.impl("special_spherical_bessel_j0.out", spherical_j0_out);
  m.impl("special_bessel_j0.out", j0_out);
  m.impl("special_bessel_j1.out", j1_out);
  m.impl("special_bessel_y0.out", y0_out);
  m.impl("special_bessel_y1.out", y1_out);
  m.impl("special_airy_ai.out", airy_ai_out);
  m.impl("special_modified_bessel_k0.out", k0_out);
  m.impl("special_modified_bessel_k1.out", k1_out);
  m.impl("special_scaled_modified_bessel_k0.out", k0e_out);
  m.impl("special_scaled_modified_bessel_k1.out", k1e_out);
  m.impl("special_chebyshev_polynomial_t.out", chebyshev_t_out);
  m.impl("special_chebyshev_polynomial_u.out", chebyshev_u_out);
  m.impl("special_chebyshev_polynomial_v.out", chebyshev_v_out);
  m.impl("special_chebyshev_polynomial_w.out", chebyshev_w_out);
  m.impl("special_shifted_chebyshev_polynomial_t.out", shifted_chebyshev_t_out);
  m.impl("special_shifted_chebyshev_polynomial_u.out", shifted_chebyshev_u_out);
  m.impl("special_shifted_chebyshev_polynomial_v.out", shifted_chebyshev_v_out);
  m.impl("special_shifted_chebyshev_polynomial_w.out", shifted_chebyshev_w_out);
  m.impl("special_hermite_polynomial_h.out", hermite_h_out);
  m.impl("special_hermite_polynomial_he.out", hermite_he_out);
  m.impl("special_laguerre_polynomial_l.out", laguerre_l_out);
  m.impl("special_legendre_polynomial_p.out", legendre_p_out);
  m.impl("signbit.out", signbit_out);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("isnan", isnan);
  m.impl("isinf", isinf);
  m.impl("isfinite", isfinite);
  m.impl("logit", logit);
  m.impl("logit.out", logit_out);
  m.impl("logit_", logit_);
  m.impl("logit_backward.grad_input", logit_backward_out);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
  m.impl("frexp.Tensor_out", frexp_out);
}

}  // namespace twgpu::aten
