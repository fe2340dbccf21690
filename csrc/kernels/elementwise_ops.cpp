#include "kernels/elementwise_ops.h"

#include "kernels/wgsl_library.h"

#include <unordered_map>

namespace twgpu {
namespace {

// Float comparisons and truthiness test bits: WGSL lets drivers assume no NaN, and some
// flush subnormals in compares (NVIDIA's Vulkan driver gives nan != 1 as false).
#define CMP_F32(fn) "select(0.0, 1.0, " fn "(a, b))"
#define CMP_I32(op) "select(0, 1, a " op " b)"
// Ops whose expression calls the elementary-function library (LIB) or the special
// functions (SPECIAL, which build on it).
const char* const kElementary[] = {wgsl::kElementaryLib, nullptr};
const char* const kSpecial[] = {wgsl::kElementaryLib, wgsl::kSpecialLib, nullptr};
#define LIB , true, kElementary
#define SPECIAL , true, kSpecial
#define SPECIAL_LONG_LOOPS , true, kSpecial, true

const ElementwiseOpDef kOps[] = {
    // name, arity, f32, i32, i64, raw[, accepts_bool]
    {"fill", 0, "p0", "p0", "p0", nullptr},
    {"copy", 1, "a", "a", "a", "a"},
    {"neg", 1, "-a", "-a", "i64_neg(a)", nullptr},
    {"abs", 1, "abs(a)", "abs(a)", "i64_abs(a)", nullptr, false},
    {"sign", 1, "sign_f32(a)", "sign(a)", "i64_sign(a)", nullptr},
    {"exp", 1, "exp_keep_nan(a)", nullptr, nullptr, nullptr},
    {"log", 1, "log(a)", nullptr, nullptr, nullptr},
    {"log1p", 1, "log1p_f32(a)", nullptr, nullptr, nullptr},
    {"expm1", 1, "expm1_f32(a)", nullptr, nullptr, nullptr},
    {"sqrt", 1, "sqrt(a)", nullptr, nullptr, nullptr},
    {"rsqrt", 1, "inverseSqrt(a)", nullptr, nullptr, nullptr},
    {"sin", 1, "sin_f32(a)", nullptr, nullptr, nullptr},
    {"cos", 1, "cos_f32(a)", nullptr, nullptr, nullptr},
    {"tanh", 1, "tanh_f32(a)", nullptr, nullptr, nullptr},
    {"sigmoid", 1, "sigmoid_f32(a)", nullptr, nullptr, nullptr},
    {"relu", 1, "relu_f32(a)", "max(a, 0)", "select(a, vec2<u32>(0u, 0u), i64_is_neg(a))", nullptr},
    {"gelu", 1, "0.5 * a * (1.0 + erf_f32(a * 0.70710678118654752))", nullptr, nullptr, nullptr},
    {"gelu_tanh", 1, "0.5 * a * (1.0 + tanh_f32(0.79788456080286536 * (a + 0.044715 * a * a * a)))", nullptr, nullptr, nullptr},
    {"silu", 1, "a * sigmoid_f32(a)", nullptr, nullptr, nullptr},
    {"logical_not", 1, "select(1.0, 0.0, f32_truthy(a))", "select(0, 1, a == 0)", "i64_from_bool(i64_is_zero(a))", nullptr},
    {"bitwise_not", 1, nullptr, "~a", "~a", nullptr},

    {"add", 2, "a + p0 * b", "a + p0 * b", "i64_add(a, i64_mul(p0, b))", nullptr},
    {"sub", 2, "a - p0 * b", "a - p0 * b", "i64_sub(a, i64_mul(p0, b))", nullptr},
    {"mul", 2, "a * b", "a * b", "i64_mul(a, b)", nullptr},
    {"div_true", 2, "div_f32(a, b)", nullptr, nullptr, nullptr},
    {"div_trunc", 2, "trunc(a / b)", "select(a / b, -1, b == 0)", "i64_div_trunc(a, b)", nullptr, false},
    {"div_floor", 2, "div_floor_f32(a, b)", "div_floor_i32(a, b)", "i64_div_floor(a, b)", nullptr, false},
    {"remainder", 2, "mod_floor_f32(a, b)", "mod_floor_i32(a, b)", "i64_mod_floor(a, b)", nullptr, false},
    {"fmod", 2, "fmod_f32(a, b)", "select(a - (a / b) * b, 0, b == 0)", "i64_rem_trunc(a, b)", nullptr, false},
    // pow(x, 0.5) and pow(x, -0.5) with a scalar exponent are sqrt and rsqrt on the CPU
    // (pow(-inf, 0.5) is nan there, not inf): b is the exponent, unused.
    {"pow_sqrt", 2, "sqrt(a)", nullptr, nullptr, nullptr},
    {"pow_rsqrt", 2, "inverseSqrt(a)", nullptr, nullptr, nullptr},
    // pow(x, 2.0) is x * x on the CPU; pow_f32's special-case branches cost 10x a multiply on
    // software adapters (RMSNorm's square at every layer).
    {"pow_square", 2, "a * a", nullptr, nullptr, nullptr},
    {"pow", 2, "pow_f32(a, b)", "pow_i32(a, b)", "i64_pow(a, b)", nullptr, false},
    {"maximum", 2, "maximum_f32(a, b)", "max(a, b)", "i64_max(a, b)", nullptr},
    {"minimum", 2, "minimum_f32(a, b)", "min(a, b)", "i64_min(a, b)", nullptr},
    {"eq", 2, CMP_F32("f32_eq"), CMP_I32("=="), "i64_from_bool(i64_eq(a, b))", nullptr},
    {"ne", 2, CMP_F32("f32_ne"), CMP_I32("!="), "i64_from_bool(!i64_eq(a, b))", nullptr},
    {"lt", 2, CMP_F32("f32_lt"), CMP_I32("<"), "i64_from_bool(i64_lt(a, b))", nullptr},
    {"le", 2, CMP_F32("f32_le"), CMP_I32("<="), "i64_from_bool(!i64_lt(b, a))", nullptr},
    {"gt", 2, CMP_F32("f32_gt"), CMP_I32(">"), "i64_from_bool(i64_lt(b, a))", nullptr},
    {"ge", 2, CMP_F32("f32_ge"), CMP_I32(">="), "i64_from_bool(!i64_lt(a, b))", nullptr},
    {"logical_and", 2, "select(0.0, 1.0, f32_truthy(a) && f32_truthy(b))", "select(0, 1, a != 0 && b != 0)",
     "i64_from_bool(!i64_is_zero(a) && !i64_is_zero(b))", nullptr},
    {"logical_or", 2, "select(0.0, 1.0, f32_truthy(a) || f32_truthy(b))", "select(0, 1, a != 0 || b != 0)",
     "i64_from_bool(!i64_is_zero(a) || !i64_is_zero(b))", nullptr},
    {"logical_xor", 2, "select(0.0, 1.0, f32_truthy(a) != f32_truthy(b))", "select(0, 1, (a != 0) != (b != 0))",
     "i64_from_bool(i64_is_zero(a) != i64_is_zero(b))", nullptr},
    {"bitwise_and", 2, nullptr, "a & b", "a & b", nullptr},
    {"bitwise_or", 2, nullptr, "a | b", "a | b", nullptr},
    {"bitwise_xor", 2, nullptr, "a ^ b", "a ^ b", nullptr},
    {"bitwise_left_shift", 2, nullptr, "shl_i32(a, b)", "i64_shl(a, b)", nullptr, false},
    {"bitwise_right_shift", 2, nullptr, "shr_i32(a, b)", "i64_shr(a, b)", nullptr, false},

    {"where", 3, "select(c, b, f32_truthy(a))", "select(c, b, a != 0)", "select(c, b, !i64_is_zero(a))", nullptr},

    // ---- more unary math (ops_unary_math.cpp) ----
    {"reciprocal", 1, "div_f32(1.0, a)", nullptr, nullptr, nullptr},
    {"floor", 1, "floor(a)", "a", "a", nullptr, false},
    {"ceil", 1, "ceil(a)", "a", "a", nullptr, false},
    {"trunc", 1, "trunc(a)", "a", "a", nullptr, false},
    {"round", 1, "round(a)", "a", "a", nullptr, false},  // WGSL round: half to even
    // round(x, decimals): p0 = 10^|decimals| (as the CPU computes it).
    {"round_decimals_pos", 1, "div_f32(round(a * p0), p0)", nullptr, nullptr, nullptr},
    {"round_decimals_neg", 1, "round(div_f32(a, p0)) * p0", nullptr, nullptr, nullptr},
    {"frac", 1, "a - trunc(a)", nullptr, nullptr, nullptr, false},
    {"exp2", 1, "exp2_f32(a)", nullptr, nullptr, nullptr LIB},
    {"log2", 1, "log2_f32(a)", nullptr, nullptr, nullptr LIB},
    {"log10", 1, "log10_f32(a)", nullptr, nullptr, nullptr LIB},
    {"tan", 1, "tan_f32(a)", nullptr, nullptr, nullptr LIB},
    {"asin", 1, "asin_f32(a)", nullptr, nullptr, nullptr LIB},
    {"acos", 1, "acos_f32(a)", nullptr, nullptr, nullptr LIB},
    {"atan", 1, "atan_f32(a)", nullptr, nullptr, nullptr LIB},
    {"sinh", 1, "sinh_f32(a)", nullptr, nullptr, nullptr LIB},
    {"cosh", 1, "cosh_f32(a)", nullptr, nullptr, nullptr LIB},
    {"asinh", 1, "asinh_f32(a)", nullptr, nullptr, nullptr LIB},
    {"acosh", 1, "acosh_f32(a)", nullptr, nullptr, nullptr LIB},
    {"atanh", 1, "atanh_f32(a)", nullptr, nullptr, nullptr LIB},
    {"erf", 1, "erf_f32(a)", nullptr, nullptr, nullptr},
    {"erfc", 1, "erfc_f32(a)", nullptr, nullptr, nullptr},
    {"erfinv", 1, "erfinv_f32(a)", nullptr, nullptr, nullptr LIB},
    {"sinc", 1, "sinc_f32(a)", nullptr, nullptr, nullptr LIB},
    {"logit", 1, "logit_f32(a)", nullptr, nullptr, nullptr LIB},
    {"logit_bwd", 2, "logit_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},  // a grad, b input
    {"logit_eps_bwd", 2, "logit_eps_bwd_f32(a, b, p0, p1)", nullptr, nullptr, nullptr LIB},
    {"logit_eps", 1, "logit_eps_f32(a, p0, p1)", nullptr, nullptr, nullptr LIB},
    {"angle", 1, "select(select(0.0, 3.14159265358979323846, a < 0.0), a, is_nan(a))", nullptr, nullptr, nullptr},
    // Bit tests: exact for -0.0, NaN signs and subnormals whatever the driver flushes.
    {"signbit", 1, "select(0.0, 1.0, (bitcast<u32>(a) & 0x80000000u) != 0u)", "select(0, 1, a < 0)",
     "i64_from_bool(i64_is_neg(a))", nullptr},
    {"isnan", 1, "select(0.0, 1.0, is_nan(a))", "0", "vec2<u32>(0u, 0u)", nullptr},
    {"isinf", 1, "select(0.0, 1.0, is_inf(a))", "0", "vec2<u32>(0u, 0u)", nullptr},
    {"isfinite", 1, "select(0.0, 1.0, is_finite(a))", "1", "vec2<u32>(1u, 0u)", nullptr},
    {"isposinf", 1, "select(0.0, 1.0, bitcast<u32>(a) == 0x7f800000u)", "0", "vec2<u32>(0u, 0u)", nullptr},
    {"isneginf", 1, "select(0.0, 1.0, bitcast<u32>(a) == 0xff800000u)", "0", "vec2<u32>(0u, 0u)", nullptr},
    // nan_to_num: p0 nan, p1 posinf, p2 neginf replacements, already in the dtype's range.
    {"nan_to_num", 1, "nan_to_num_f32(a, p0, p1, p2)", "a", "a", nullptr LIB},

    // ---- special functions (ops_unary_math.cpp) ----
    {"lgamma", 1, "lgamma_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"digamma", 1, "digamma_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    // p0 = n; p1 (zeta's p0) a runtime zero: the host leaves it at its default 0.
    {"polygamma", 1, "polygamma_f32(p0, a, p1)", nullptr, nullptr, nullptr SPECIAL_LONG_LOOPS},
    {"zeta", 2, "zeta_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL_LONG_LOOPS},
    {"i0", 1, "i0_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"i0e", 1, "i0e_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"i1", 1, "i1_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"i1e", 1, "i1e_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"erfcx", 1, "erfcx_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"ndtri", 1, "ndtri_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"log_ndtr", 1, "log_ndtr_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"entr", 1, "entr_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"spherical_j0", 1, "spherical_j0_f32(a)", nullptr, nullptr, nullptr SPECIAL},

    {"igamma", 2, "igamma_f32(a, b)", nullptr, nullptr, nullptr SPECIAL_LONG_LOOPS},
    {"igammac", 2, "igammac_f32(a, b)", nullptr, nullptr, nullptr SPECIAL_LONG_LOOPS},
    {"j0", 1, "j0_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"j1", 1, "j1_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"y0", 1, "y0_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"y1", 1, "y1_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"airy_ai", 1, "airy_ai_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"k0", 1, "k0_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"k1", 1, "k1_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"k0e", 1, "k0e_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    {"k1e", 1, "k1e_f32(a)", nullptr, nullptr, nullptr SPECIAL},
    // Orthogonal polynomials: a = x, b = n, p0 a runtime zero (the host leaves it at its
    // default 0) for mul_sub_fused.
    {"chebyshev_t", 2, "chebyshev_t_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"chebyshev_u", 2, "chebyshev_u_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"chebyshev_v", 2, "chebyshev_v_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"chebyshev_w", 2, "chebyshev_w_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"shifted_chebyshev_t", 2, "shifted_chebyshev_t_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"shifted_chebyshev_u", 2, "shifted_chebyshev_u_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"shifted_chebyshev_v", 2, "shifted_chebyshev_v_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"shifted_chebyshev_w", 2, "shifted_chebyshev_w_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"hermite_h", 2, "hermite_h_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"hermite_he", 2, "hermite_he_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"laguerre_l", 2, "laguerre_l_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},
    {"legendre_p", 2, "legendre_p_f32(a, b, p0)", nullptr, nullptr, nullptr SPECIAL},

    // ---- more binary / ternary pointwise ops (ops_pointwise_ternary.cpp) ----
    {"atan2", 2, "atan2_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"copysign", 2, "copysign_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"nextafter", 2, "nextafter_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"nextafter_f16", 2, "nextafter_16(a, b, true)", nullptr, nullptr, nullptr LIB},
    {"nextafter_bf16", 2, "nextafter_16(a, b, false)", nullptr, nullptr, nullptr LIB},
    {"hypot", 2, "hypot_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"logaddexp", 2, "logaddexp_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"logaddexp2", 2, "logaddexp2_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"xlogy", 2, "xlogy_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"xlog1py", 2, "xlog1py_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"fmax", 2, "fmax_f32(a, b)", "max(a, b)", "i64_max(a, b)", nullptr LIB},
    {"fmin", 2, "fmin_f32(a, b)", "min(a, b)", "i64_min(a, b)", nullptr LIB},
    {"heaviside", 2, "heaviside_f32(a, b)", "select(select(0, 1, a > 0), b, a == 0)",
     "select(i64_from_bool(!i64_is_neg(a)), b, i64_is_zero(a))", nullptr LIB},
    {"clamp", 3, "clamp_f32(a, b, c)", "min(max(a, b), c)", "i64_min(i64_max(a, b), c)", nullptr LIB},
    // Python-number bounds as parameters (already in the result dtype).
    {"clamp_s", 1, "clamp_f32(a, p0, p1)", "min(max(a, p0), p1)", "i64_min(i64_max(a, p0), p1)", nullptr LIB},
    {"clamp_min_s", 1, "clamp_min_f32(a, p0)", "max(a, p0)", "i64_max(a, p0)", nullptr LIB},
    {"clamp_max_s", 1, "clamp_max_f32(a, p0)", "min(a, p0)", "i64_min(a, p0)", nullptr LIB},
    {"clamp_min", 2, "clamp_min_f32(a, b)", "max(a, b)", "i64_max(a, b)", nullptr LIB},
    {"clamp_max", 2, "clamp_max_f32(a, b)", "min(a, b)", "i64_min(a, b)", nullptr LIB},
    {"lerp", 3, "lerp_f32(a, b, c)", nullptr, nullptr, nullptr LIB},
    {"lerp_scalar", 2, "lerp_f32(a, b, p0)", nullptr, nullptr, nullptr LIB},
    // addcmul / addcdiv: a + p0 * b * c, a + p0 * b / c (the CPU's association).
    {"addcmul", 3, "a + p0 * b * c", "a + p0 * b * c", "i64_add(a, i64_mul(i64_mul(p0, b), c))", nullptr, false},
    {"addcdiv", 3, "a + div_f32(p0 * b, c)", nullptr, nullptr, nullptr},

    // ---- activations and their backward (ops_activation.cpp); b is the input where the
    // first operand is a gradient ----
    {"elu", 1, "elu_f32(a, p0, p1, p2)", nullptr, nullptr, nullptr LIB},
    // elu_backward: a = grad, b = input (p0 negcoef, p1 poscoef, p2 input_scale) or the
    // forward result.
    {"elu_bwd_input", 2, "select(a * p1, a * p2 * p0 * exp_f32(b * p2), b <= 0.0)", nullptr, nullptr, nullptr LIB},
    {"elu_bwd_result", 2, "select(a * p1, a * p2 * (b + p0), b <= 0.0)", nullptr, nullptr, nullptr},
    {"leaky_relu", 1, "select(a * p0, a, a > 0.0)", nullptr, nullptr, nullptr},
    {"leaky_relu_bwd", 2, "select(b * p0, b, a > 0.0)", nullptr, nullptr, nullptr},  // a input, b grad
    {"hardtanh_bwd", 2, "select(a, 0.0, b <= p0 || b >= p1)", nullptr, nullptr, nullptr},  // a grad, b input
    {"hardsigmoid", 1, "hardsigmoid_f32(a)", nullptr, nullptr, nullptr LIB},
    {"hardsigmoid_bwd", 2, "select(0.0, a * 0.16666666666666667, b > -3.0 && b < 3.0)", nullptr, nullptr, nullptr},
    {"hardswish", 1, "hardswish_f32(a)", nullptr, nullptr, nullptr LIB},
    {"hardswish_bwd", 2, "hardswish_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"mish", 1, "mish_f32(a)", nullptr, nullptr, nullptr LIB},
    {"softplus", 1, "softplus_f32(a, p0, p1)", nullptr, nullptr, nullptr LIB},
    {"softplus_bwd", 2, "softplus_bwd_f32(a, b, p0, p1)", nullptr, nullptr, nullptr LIB},
    {"softshrink", 1, "select(select(select(0.0, a + p0, a < -p0), a - p0, a > p0), a, is_nan(a))", nullptr, nullptr, nullptr},
    {"hardshrink", 1, "select(a, 0.0, a >= -p0 && a <= p0 && !is_nan(a))", nullptr, nullptr, nullptr},
    {"shrink_bwd", 2, "select(a, 0.0, b >= -p0 && b <= p0 && !is_nan(b))", nullptr, nullptr, nullptr},  // a grad, b input
    // threshold: a <= p0 ? p1 : a; threshold_backward: a input, b grad.
    {"threshold", 1, "select(a, p1, f32_le(a, p0))", "select(a, p1, a <= p0)", "select(a, p1, !i64_lt(p0, a))", nullptr, false},
    {"threshold_bwd", 2, "select(b, 0.0, f32_le(a, p0))", "select(b, 0, a <= p0)",
     "select(b, vec2<u32>(0u, 0u), !i64_lt(p0, a))", nullptr, false},
    {"log_sigmoid", 1, "log_sigmoid_f32(a)", nullptr, nullptr, nullptr LIB},
    {"log_sigmoid_bwd", 2, "log_sigmoid_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"sigmoid_bwd", 2, "a * (1.0 - b) * b", nullptr, nullptr, nullptr},
    {"tanh_bwd", 2, "a * (1.0 - b * b)", nullptr, nullptr, nullptr},
    {"gelu_bwd", 2, "gelu_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"gelu_tanh_bwd", 2, "gelu_tanh_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"silu_bwd", 2, "silu_bwd_f32(a, b)", nullptr, nullptr, nullptr LIB},
    {"glu", 2, "a * sigmoid_f32(b)", nullptr, nullptr, nullptr},
    {"glu_bwd_first", 2, "a * sigmoid_f32(b)", nullptr, nullptr, nullptr},  // a grad, b second half
    {"glu_bwd_second", 3, "glu_bwd_second_f32(a, b, c)", nullptr, nullptr, nullptr LIB},
    // prelu: a input, b weight; backward: a grad, b input, c weight.
    {"prelu", 2, "select(b * a, a, a > 0.0)", nullptr, nullptr, nullptr},
    {"prelu_bwd_input", 3, "select(c * a, a, b > 0.0)", nullptr, nullptr, nullptr},
    {"prelu_bwd_weight", 2, "select(b * a, 0.0, b > 0.0)", nullptr, nullptr, nullptr},
};

#undef CMP_F32
#undef CMP_I32
#undef LIB
#undef SPECIAL

// complex64 expressions over vec2<f32> values (the generator adds kComplexLib). Ops with a
// real result (abs, angle, comparisons) put it in the real part: the store keeps that part.
struct ComplexOpDef {
  const char* name;
  int arity;
  const char* c64;
};
#define C64_BOOL(e) "c64_from_bool(" e ")"
const ComplexOpDef kComplexOps[] = {
    {"fill", 0, "p0"},
    {"copy", 1, "a"},
    {"neg", 1, "-a"},
    {"conj", 1, "c64_conj(a)"},
    {"abs", 1, "vec2<f32>(c64_abs(a), 0.0)"},
    {"angle", 1, "vec2<f32>(c64_arg(a), 0.0)"},
    {"sgn", 1, "c64_sgn(a)"},
    {"exp", 1, "c64_exp(a)"},
    {"log", 1, "c64_log(a)"},
    {"log1p", 1, "c64_log1p(a)"},
    {"expm1", 1, "c64_expm1(a)"},
    {"sqrt", 1, "c64_sqrt(a)"},
    {"rsqrt", 1, "c64_inv(c64_sqrt(a))"},
    {"reciprocal", 1, "c64_inv(a)"},
    {"sin", 1, "c64_sin(a)"},
    {"cos", 1, "c64_cos(a)"},
    {"tan", 1, "c64_tan(a)"},
    {"sinh", 1, "c64_sinh(a)"},
    {"cosh", 1, "c64_cosh(a)"},
    {"tanh", 1, "c64_tanh(a)"},
    {"sigmoid", 1, "c64_sigmoid(a)"},
    {"isnan", 1, C64_BOOL("c64_is_nan(a)")},
    {"isinf", 1, C64_BOOL("is_inf(a.x) || is_inf(a.y)")},
    {"isfinite", 1, C64_BOOL("is_finite(a.x) && is_finite(a.y)")},
    {"logical_not", 1, C64_BOOL("!c64_truthy(a)")},
    {"add", 2, "a + c64_mul(p0, b)"},
    {"sub", 2, "a - c64_mul(p0, b)"},
    {"mul", 2, "c64_mul(a, b)"},
    {"div_true", 2, "c64_div(a, b)"},
    {"pow", 2, "c64_pow(a, b)"},
    // Scalar exponents the CPU computes by multiplication or roots (b unused).
    {"pow_zero", 2, "vec2<f32>(1.0, 0.0)"},
    {"pow_one", 2, "a"},
    {"pow_sqrt", 2, "c64_sqrt(a)"},
    {"pow_rsqrt", 2, "c64_inv(c64_sqrt(a))"},
    {"pow_square", 2, "c64_mul(a, a)"},
    {"pow_cube", 2, "c64_mul(c64_mul(a, a), a)"},
    {"pow_reciprocal", 2, "c64_inv(a)"},
    {"pow_inverse_square", 2, "c64_inv(c64_mul(a, a))"},
    {"eq", 2, C64_BOOL("c64_eq(a, b)")},
    {"ne", 2, C64_BOOL("!c64_eq(a, b)")},
    {"logical_and", 2, C64_BOOL("c64_truthy(a) && c64_truthy(b)")},
    {"logical_or", 2, C64_BOOL("c64_truthy(a) || c64_truthy(b)")},
    {"logical_xor", 2, C64_BOOL("c64_truthy(a) != c64_truthy(b)")},
    {"where", 3, "select(c, b, c64_truthy(a))"},
    // addcmul / addcdiv: a + (p0 b) c, a + (p0 b) / c, the CPU's association.
    {"addcmul", 3, "a + c64_mul(c64_mul(p0, b), c)"},
    {"addcdiv", 3, "a + c64_div(c64_mul(p0, b), c)"},
    {"lerp", 3, "c64_lerp(a, b, c)"},
    {"lerp_scalar", 2, "c64_lerp(a, b, p0)"},
    // complex(re, im) and polar(abs, angle) of real inputs (a.x, b.x: their real parts).
    {"complex_cartesian", 2, "vec2<f32>(a.x, b.x)"},
    {"complex_polar", 2, "vec2<f32>(a.x * cos_f32(b.x), a.x * sin_f32(b.x))"},
};
#undef C64_BOOL

}  // namespace

const ElementwiseOpDef* find_elementwise_op(const std::string& name) {
  static const std::unordered_map<std::string, ElementwiseOpDef> table = [] {
    std::unordered_map<std::string, ElementwiseOpDef> t;
    for (const auto& op : kOps) t.emplace(op.name, op);
    for (const auto& op : kComplexOps) {
      ElementwiseOpDef only_complex{};  // an op with no real kernel (conj, sgn, ...)
      only_complex.name = op.name;
      only_complex.arity = op.arity;
      t.emplace(op.name, only_complex).first->second.c64 = op.c64;
    }
    return t;
  }();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace twgpu
