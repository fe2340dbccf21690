// complex64 arithmetic: values are vec2<f32> (real, imaginary); needs elementary.wgsl.
// c64_mul/div, abs, arg, exp, log, log1p, expm1, sqrt, pow, trig and hyperbolic functions,
// sigmoid, sgn, comparisons. The formulas follow the CPU's complex<float> (C99 Annex G
// where it is cheap): Smith's scaled division, |z| through hypot and log through |z| so
// neither overflows before the result does, and real arguments keep exactly real results
// where inf * 0 would give NaN.

fn c64_from_bool(b: bool) -> vec2<f32> { return vec2<f32>(select(0.0, 1.0, b), 0.0); }
fn c64_truthy(a: vec2<f32>) -> bool { return f32_truthy(a.x) || f32_truthy(a.y); }
fn c64_eq(a: vec2<f32>, b: vec2<f32>) -> bool { return f32_eq(a.x, b.x) && f32_eq(a.y, b.y); }
fn c64_is_nan(a: vec2<f32>) -> bool { return is_nan(a.x) || is_nan(a.y); }
fn c64_conj(a: vec2<f32>) -> vec2<f32> { return vec2<f32>(a.x, -a.y); }
// The textbook product, as the CPU computes it.
fn c64_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// Smith's algorithm: divide through by the larger part of b, so |b|^2 never overflows.
fn c64_div(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let bx = abs(b.x);
  let by = abs(b.y);
  if (bx >= by) {
    if (bx == 0.0) {  // b == 0: a complex infinity or NaN, part by part (both by |b.x|:
      // a real operand's b.y is a constant 0 the compiler may fold into the division)
      return vec2<f32>(div_f32(a.x, bx), div_f32(a.y, bx));
    }
    let r = div_f32(b.y, b.x);
    let d = b.x + b.y * r;
    return vec2<f32>(div_f32(a.x + a.y * r, d), div_f32(a.y - a.x * r, d));
  }
  let r = div_f32(b.x, b.y);
  let d = b.y + b.x * r;
  return vec2<f32>(div_f32(a.x * r + a.y, d), div_f32(a.y * r - a.x, d));
}
fn c64_inv(a: vec2<f32>) -> vec2<f32> { return c64_div(vec2<f32>(1.0, 0.0), a); }
fn c64_abs(a: vec2<f32>) -> f32 { return hypot_f32(a.x, a.y); }
fn c64_arg(a: vec2<f32>) -> f32 { return atan2_f32(a.y, a.x); }
fn c64_sgn(a: vec2<f32>) -> vec2<f32> {
  let r = c64_abs(a);
  if (r == 0.0) { return vec2<f32>(0.0, 0.0); }
  return vec2<f32>(div_f32(a.x, r), div_f32(a.y, r));
}
fn c64_exp(a: vec2<f32>) -> vec2<f32> {
  if (a.y == 0.0) { return vec2<f32>(exp_f32(a.x), a.y); }
  let e = exp_f32(a.x);
  return vec2<f32>(e * cos_f32(a.y), e * sin_f32(a.y));
}
// log|z| = log(m) + log1p((n / m)^2) / 2 with m, n the larger and smaller magnitudes:
// finite for every finite z (|z| itself overflows near f32's maximum).
fn c64_log(a: vec2<f32>) -> vec2<f32> {
  let theta = c64_arg(a);
  if (is_inf(a.x) || is_inf(a.y)) { return vec2<f32>(f32_inf(), theta); }
  if (c64_is_nan(a)) { return vec2<f32>(f32_nan(), theta); }
  let m = max(abs(a.x), abs(a.y));
  if (m == 0.0) { return vec2<f32>(-f32_inf(), theta); }
  let r = div_f32(min(abs(a.x), abs(a.y)), m);
  return vec2<f32>(log_f32(m) + 0.5 * log1p_f32(r * r), theta);
}
// log(1 + z): near z = 0, log|1 + z| = log1p(x (2 + x) + y^2) / 2 keeps the small terms.
fn c64_log1p(a: vec2<f32>) -> vec2<f32> {
  let x = a.x;
  let y = a.y;
  let theta = atan2_f32(y, x + 1.0);
  if (c64_abs(a) < 0.5) {
    let r = x * (2.0 + x) + y * y;
    if (r == 0.0) { return vec2<f32>(x, theta); }
    return vec2<f32>(0.5 * log1p_f32(r), theta);
  }
  return vec2<f32>(log_f32(hypot_f32(x + 1.0, y)), theta);
}
// exp(z) - 1 = (expm1(x) cos y - 2 sin^2(y / 2)) + i e^x sin y: no cancellation near 0.
fn c64_expm1(a: vec2<f32>) -> vec2<f32> {
  if (a.y == 0.0) { return vec2<f32>(expm1_f32(a.x), a.y); }
  let s = sin_f32(0.5 * a.y);
  return vec2<f32>(expm1_f32(a.x) * cos_f32(a.y) - 2.0 * s * s, exp_f32(a.x) * sin_f32(a.y));
}
// Principal root: w = sqrt((|x| + |z|) / 2), the other part y / 2w; inputs are scaled by
// 2^-64 or 2^64 first when |z|^2 would leave f32's range.
fn c64_sqrt(a: vec2<f32>) -> vec2<f32> {
  if (a.x == 0.0 && a.y == 0.0) { return vec2<f32>(0.0, a.y); }
  if (is_inf(a.y)) { return vec2<f32>(f32_inf(), a.y); }
  let m = max(abs(a.x), abs(a.y));
  var z = a;
  var s = 1.0;
  if (m > 1.0e30) { z = a * 5.421010862427522e-20; s = 4294967296.0; }
  else if (m < 1.0e-30) { z = a * 18446744073709551616.0; s = 2.3283064365386963e-10; }
  let w = sqrt(0.5 * (abs(z.x) + c64_abs(z)));
  if (!(z.x < 0.0)) { return vec2<f32>(w, div_f32(z.y, 2.0 * w)) * s; }
  return vec2<f32>(div_f32(abs(z.y), 2.0 * w), copysign_f32(w, z.y)) * s;
}
// a^b = exp(b log a); a zero base gives 0 for Re b > 0 (its log is -inf), NaN otherwise,
// as the CPU's cpow.
fn c64_pow(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  if (a.x == 0.0 && a.y == 0.0 && b.x > 0.0) { return vec2<f32>(0.0, 0.0); }
  return c64_exp(c64_mul(b, c64_log(a)));
}
fn c64_sinh(a: vec2<f32>) -> vec2<f32> {
  if (a.y == 0.0) { return vec2<f32>(sinh_f32(a.x), a.y); }
  return vec2<f32>(sinh_f32(a.x) * cos_f32(a.y), cosh_f32(a.x) * sin_f32(a.y));
}
fn c64_cosh(a: vec2<f32>) -> vec2<f32> {
  if (a.y == 0.0) { return vec2<f32>(cosh_f32(a.x), a.y * sign(a.x)); }
  return vec2<f32>(cosh_f32(a.x) * cos_f32(a.y), sinh_f32(a.x) * sin_f32(a.y));
}
// sin z = -i sinh(iz), cos z = cosh(iz).
fn c64_sin(a: vec2<f32>) -> vec2<f32> {
  let s = c64_sinh(vec2<f32>(-a.y, a.x));
  return vec2<f32>(s.y, -s.x);
}
fn c64_cos(a: vec2<f32>) -> vec2<f32> { return c64_cosh(vec2<f32>(-a.y, a.x)); }
// Kahan's form: with t = tan y, b = 1 + t^2, s = sinh x, rho = cosh x,
// tanh z = (b rho s + i t) / (1 + b s^2); beyond |x| = 22 tanh x is +-1 in f32.
fn c64_tanh(a: vec2<f32>) -> vec2<f32> {
  if (abs(a.x) > 22.0) {
    let e = exp_f32(-2.0 * abs(a.x));
    return vec2<f32>(copysign_f32(1.0, a.x), 4.0 * sin_f32(a.y) * cos_f32(a.y) * e);
  }
  let t = tan_f32(a.y);
  let b = 1.0 + t * t;
  let s = sinh_f32(a.x);
  let rho = sqrt(1.0 + s * s);
  let d = 1.0 + b * s * s;
  return vec2<f32>(div_f32(b * rho * s, d), div_f32(t, d));
}
// tan z = -i tanh(iz).
fn c64_tan(a: vec2<f32>) -> vec2<f32> {
  let t = c64_tanh(vec2<f32>(-a.y, a.x));
  return vec2<f32>(t.y, -t.x);
}
// The CPU's lerp: from the nearer end, chosen by |w| < 1/2.
fn c64_lerp(a: vec2<f32>, b: vec2<f32>, w: vec2<f32>) -> vec2<f32> {
  if (c64_abs(w) < 0.5) { return a + c64_mul(w, b - a); }
  return b - c64_mul(b - a, vec2<f32>(1.0, 0.0) - w);
}
fn c64_sigmoid(a: vec2<f32>) -> vec2<f32> {
  return c64_inv(vec2<f32>(1.0, 0.0) + c64_exp(-a));
}
