// f32 helpers: NaN/Inf tests by bits (drivers may fold x != x away), f16/bf16 packing
// with round-to-nearest-even and correct overflow to infinity. Every kernel includes it.

// Private variables keep NaN/Inf out of constant evaluation, which rejects them.
var<private> kNanBits: u32 = 0x7fc00000u;
var<private> kInfBits: u32 = 0x7f800000u;
fn f32_nan() -> f32 { return bitcast<f32>(kNanBits); }
fn f32_inf() -> f32 { return bitcast<f32>(kInfBits); }
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn is_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
// bool(x): any bit but the sign set (nan and subnormals are true).
fn f32_truthy(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }
// IEEE comparisons that hold where drivers assume no NaN: ordered ones are false with a
// NaN operand, != is true.
fn f32_eq(a: f32, b: f32) -> bool { return !is_nan(a) && !is_nan(b) && a == b; }
fn f32_ne(a: f32, b: f32) -> bool { return is_nan(a) || is_nan(b) || a != b; }
fn f32_lt(a: f32, b: f32) -> bool { return !is_nan(a) && !is_nan(b) && a < b; }
fn f32_le(a: f32, b: f32) -> bool { return !is_nan(a) && !is_nan(b) && a <= b; }
fn f32_gt(a: f32, b: f32) -> bool { return !is_nan(a) && !is_nan(b) && a > b; }
fn f32_ge(a: f32, b: f32) -> bool { return !is_nan(a) && !is_nan(b) && a >= b; }
fn f16_bits_to_f32(h: u32) -> f32 { return unpack2x16float(h & 0xffffu).x; }
fn f32_to_f16_bits(x: f32) -> u32 {
  let s = (bitcast<u32>(x) >> 16u) & 0x8000u;
  if (is_nan(x)) { return s | 0x7e00u; }
  // 65520 and up round to infinity; pack2x16float leaves out-of-range values undefined.
  if (abs(x) >= 65520.0) { return s | 0x7c00u; }
  return pack2x16float(vec2<f32>(x, 0.0)) & 0xffffu;
}
fn bf16_bits_to_f32(h: u32) -> f32 { return bitcast<f32>((h & 0xffffu) << 16u); }
fn f32_to_bf16_bits(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if (is_nan(x)) { return ((u >> 16u) & 0x8000u) | 0x7fc0u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
// exp and log keeping NaN (and log(0) = -inf): WGSL leaves these to the driver, and
// SwiftShader's Vulkan gives exp(NaN) = +inf and log(0) = -88.
fn exp_keep_nan(x: f32) -> f32 { return select(exp(x), x, is_nan(x)); }
fn exp4_keep_nan(v: vec4<f32>) -> vec4<f32> {
  return select(exp(v), v, (bitcast<vec4<u32>>(v) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u));
}
fn log_keep_special(x: f32) -> f32 { return select(select(log(x), -f32_inf(), x == 0.0), x, is_nan(x)); }
