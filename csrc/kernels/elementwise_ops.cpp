#include "kernels/elementwise_ops.h"

#include <unordered_map>

namespace twgpu {
namespace {

// Float comparisons and truthiness test bits: WGSL lets drivers assume no NaN, and some
// flush subnormals in compares (NVIDIA's Vulkan driver gives nan != 1 as false).
#define CMP_F32(fn) "select(0.0, 1.0, " fn "(a, b))"
#define CMP_I32(op) "select(0, 1, a " op " b)"

const ElementwiseOpDef kOps[] = {
    // name, arity, f32, i32, i64, raw[, accepts_bool]
    {"fill", 0, "p0", "p0", "p0", nullptr},
    {"copy", 1, "a", "a", "a", "a"},
    {"neg", 1, "-a", "-a", "i64_neg(a)", nullptr},
    {"abs", 1, "abs(a)", "abs(a)", "i64_abs(a)", nullptr, false},
    {"sign", 1, "sign_f32(a)", "sign(a)", "i64_sign(a)", nullptr},
    {"exp", 1, "exp(a)", nullptr, nullptr, nullptr},
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
};

#undef CMP_F32
#undef CMP_I32

}  // namespace

const ElementwiseOpDef* find_elementwise_op(const std::string& name) {
  static const std::unordered_map<std::string, const ElementwiseOpDef*> table = [] {
    std::unordered_map<std::string, const ElementwiseOpDef*> t;
    for (const auto& op : kOps) t.emplace(op.name, &op);
    return t;
  }();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace twgpu
