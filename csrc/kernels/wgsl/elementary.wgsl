// exp/log families, inverse trig, hyperbolic functions, erfinv, hypot, nextafter,
// logaddexp, logit, sinc and the activation helpers (gelu/silu backward, ...).
// Included by the pointwise ops that name it in elementwise_ops.cpp.
//
// Everything here is written for accuracy on drivers whose builtins are loose (Vulkan
// allows exp 3 + 2|x| ulp, atan 4096 ulp): each function reduces its argument itself and
// evaluates a series it can bound, so results stay within a few ulp of the CPU's libm.

fn sign_bit(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }
fn copysign_f32(m: f32, s: f32) -> f32 {
  return bitcast<f32>((bitcast<u32>(m) & 0x7fffffffu) | (bitcast<u32>(s) & 0x80000000u));
}
fn with_sign_of(r: f32, x: f32) -> f32 { return select(r, -r, sign_bit(x)); }
// x * 2^n for n in [-300, 300], in two steps so neither exponent leaves ldexp's range.
fn ldexp_wide(x: f32, n: i32) -> f32 {
  let h = n / 2;
  return ldexp(ldexp(x, h), n - h);
}
// e^r for |r| <= ln2 / 2 by Taylor to r^9 (the omitted terms are below 1e-10).
fn exp_poly(r: f32) -> f32 {
  return 1.0 + r * (1.0 + r * (0.5 + r * (1.6666666666666666e-1 + r * (4.1666666666666664e-2 +
         r * (8.3333333333333332e-3 + r * (1.3888888888888889e-3 + r * (1.9841269841269841e-4 +
         r * (2.4801587301587302e-5 + r * 2.7557319223985893e-6))))))));
}
// e^x with x = n ln2 + r (ln2 split so that n * hi is exact).
fn exp_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x > 88.72284) { return f32_inf(); }
  if (x < -104.0) { return 0.0; }
  let n = round(x * 1.4426950408889634);
  let r = (x - n * 0.693145751953125) - n * 1.4286068202862268e-06;
  return ldexp_wide(exp_poly(r), i32(n));
}
fn exp2_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x >= 128.0) { return f32_inf(); }
  if (x < -151.0) { return 0.0; }
  let n = round(x);
  return ldexp_wide(exp_poly((x - n) * 0.6931471805599453), i32(n));
}
// x = m 2^e with m in [sqrt(1/2), sqrt(2)): returns (e, log(m)); m - 1 is exact and
// within log1p_f32's series range.
fn log_reduce(x: f32) -> vec2<f32> {
  // Subnormals are scaled into the normal range first (frexp may flush them).
  var u = bitcast<u32>(x);
  var e = 0.0;
  if (u < 0x00800000u) {
    let m = f32(u);  // the subnormal's integer mantissa: x = u * 2^-149
    u = bitcast<u32>(m);
    e = -149.0;
  }
  let fr = frexp(bitcast<f32>(u));
  var m = fr.fract;
  e = e + f32(fr.exp);
  if (m < 0.70710678118654752) { m = m * 2.0; e = e - 1.0; }
  return vec2<f32>(e, log1p_f32(m - 1.0));
}
// NaN for x < 0 or NaN, -inf at 0, +inf at +inf; 0 means "no special case".
fn log_special(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) { return f32_nan(); }
  if (x == 0.0) { return -f32_inf(); }
  return f32_inf();
}
fn log_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_nan(x) || is_inf(x)) { return log_special(x); }
  let p = log_reduce(x);
  return p.x * 0.693145751953125 + (p.x * 1.4286068202862268e-06 + p.y);
}
fn log2_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_nan(x) || is_inf(x)) { return log_special(x); }
  let p = log_reduce(x);
  return p.x + p.y * 1.4426950408889634;
}
fn log10_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_nan(x) || is_inf(x)) { return log_special(x); }
  let p = log_reduce(x);
  return p.x * 0.3010299956639812 + p.y * 0.43429448190325176;
}
fn tan_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return f32_nan(); }
  let ax = abs(x);
  var r = ax;
  var odd = false;
  if (ax > 0.78539816) {
    let rq = trig_reduce_any(ax);
    r = rq.x;
    odd = (u32(rq.y) & 1u) == 1u;
  }
  let s = sin_poly(r);
  let c = cos_poly(r);
  return with_sign_of(select(div_f32(s, c), -div_f32(c, s), odd), x);
}
// atan(t) for |t| <= tan(pi/8) by its alternating Taylor series to t^21 (error < 7e-11).
fn atan_series(t: f32) -> f32 {
  let z = t * t;
  return t + t * z * (-0.33333333333333333 + z * (0.2 + z * (-0.14285714285714286 +
         z * (0.11111111111111111 + z * (-0.090909090909090909 + z * (0.076923076923076923 +
         z * (-0.066666666666666667 + z * (0.058823529411764706 + z * (-0.052631578947368421 +
         z * 0.047619047619047619)))))))));
}
fn atan_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  var t = abs(x);
  var base = 0.0;
  if (t > 2.414213562373095) {
    base = 1.5707963267948966;  // atan(t) = pi/2 - atan(1/t)
    t = -div_f32(1.0, t);
  } else if (t > 0.41421356237309503) {
    base = 0.78539816339744831;  // atan(t) = pi/4 + atan((t - 1) / (t + 1))
    t = div_f32(t - 1.0, t + 1.0);
  }
  return with_sign_of(base + atan_series(t), x);
}
// C99 atan2 (Annex F) including signed zeros and infinities.
fn atan2_f32(y: f32, x: f32) -> f32 {
  if (is_nan(x) || is_nan(y)) { return f32_nan(); }
  let pi = 3.14159265358979323846;
  if (y == 0.0) {
    if (sign_bit(x)) { return copysign_f32(pi, y); }
    return y;
  }
  if (x == 0.0) { return copysign_f32(1.5707963267948966, y); }
  if (is_inf(x)) {
    if (is_inf(y)) { return copysign_f32(select(0.78539816339744831, 2.35619449019234492, x < 0.0), y); }
    return copysign_f32(select(0.0, pi, x < 0.0), y);
  }
  if (is_inf(y)) { return copysign_f32(1.5707963267948966, y); }
  let ay = abs(y);
  let ax = abs(x);
  var r: f32;
  // Keep the quotient finite and normal: atan saturates beyond 2^30, and below 2^-30 it is
  // the quotient itself.
  if (ay > ax * 1073741824.0) { r = 1.5707963267948966 - div_f32(ax, ay); }
  else { r = atan_f32(div_f32(ay, ax)); }
  if (x < 0.0) { r = pi - r; }
  return copysign_f32(r, y);
}
fn asin_f32(x: f32) -> f32 {
  let ax = abs(x);
  if (is_nan(x) || ax > 1.0) { return f32_nan(); }
  // (1 - ax) is exact where it matters (ax >= 1/2).
  return with_sign_of(atan_f32(div_f32(ax, sqrt((1.0 - ax) * (1.0 + ax)))), x);
}
fn acos_f32(x: f32) -> f32 {
  if (is_nan(x) || abs(x) > 1.0) { return f32_nan(); }
  return 2.0 * atan_f32(sqrt(div_f32(1.0 - x, 1.0 + x)));
}
fn sinh_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let ax = abs(x);
  var r: f32;
  if (ax < 1.0) {
    let e = expm1_f32(ax);
    r = 0.5 * (e + div_f32(e, e + 1.0));
  } else if (ax < 88.0) {
    let e = exp_f32(ax);
    r = 0.5 * e - div_f32(0.5, e);
  } else {
    let e = exp_f32(0.5 * ax);
    r = (0.5 * e) * e;
  }
  return with_sign_of(r, x);
}
fn cosh_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let ax = abs(x);
  if (ax < 88.0) {
    let e = exp_f32(ax);
    return 0.5 * e + div_f32(0.5, e);
  }
  let e = exp_f32(0.5 * ax);
  return (0.5 * e) * e;
}
fn asinh_f32(x: f32) -> f32 {
  if (is_nan(x) || is_inf(x)) { return x; }
  let ax = abs(x);
  var r: f32;
  if (ax > 1e18) {
    r = log_f32(ax) + 0.6931471805599453;
  } else if (ax < 0.5) {
    let x2 = ax * ax;
    r = log1p_f32(ax + div_f32(x2, 1.0 + sqrt(1.0 + x2)));
  } else {
    r = log_f32(ax + sqrt(ax * ax + 1.0));
  }
  return with_sign_of(r, x);
}
fn acosh_f32(x: f32) -> f32 {
  if (is_nan(x) || x < 1.0) { return f32_nan(); }
  if (is_inf(x)) { return x; }
  if (x > 1e18) { return log_f32(x) + 0.6931471805599453; }
  let t = x - 1.0;
  if (t < 0.5) { return log1p_f32(t + sqrt(2.0 * t + t * t)); }
  return log_f32(x + sqrt(x * x - 1.0));
}
fn atanh_f32(x: f32) -> f32 {
  let ax = abs(x);
  if (is_nan(x) || ax > 1.0) { return f32_nan(); }
  if (ax == 1.0) { return with_sign_of(f32_inf(), x); }
  return with_sign_of(0.5 * log1p_f32(div_f32(2.0 * ax, 1.0 - ax)), x);
}
// erfinv from M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011):
// single-precision polynomials in w = -log(1 - x^2).
// Giles' erfinv polynomial in w = -log(1 - x^2) without the factor x; erfinv
// and ndtri share it.
fn erfinv_poly(w0: f32) -> f32 {
  var w = w0;
  var p: f32;
  if (w < 5.0) {
    w = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p;
}
fn erfinv_f32(x: f32) -> f32 {
  let ax = abs(x);
  if (is_nan(x) || ax > 1.0) { return f32_nan(); }
  if (ax == 1.0) { return with_sign_of(f32_inf(), x); }
  return erfinv_poly(-log_f32((1.0 - ax) * (1.0 + ax))) * x;
}
// hypot scaled by the larger magnitude; an infinity wins over NaN, as in C.
fn hypot_f32(a: f32, b: f32) -> f32 {
  if (is_inf(a) || is_inf(b)) { return f32_inf(); }
  if (is_nan(a) || is_nan(b)) { return f32_nan(); }
  let m = max(abs(a), abs(b));
  let n = min(abs(a), abs(b));
  if (m == 0.0) { return 0.0; }
  let r = div_f32(n, m);
  return m * sqrt(1.0 + r * r);
}
// Floats ordered as integers (sign-magnitude to two's complement).
fn f32_order_key(u: u32) -> i32 {
  return select(bitcast<i32>(u), -bitcast<i32>(u & 0x7fffffffu), (u & 0x80000000u) != 0u);
}
// Pure bit arithmetic, so subnormal results survive drivers that flush them.
fn nextafter_f32(a: f32, b: f32) -> f32 {
  if (is_nan(a) || is_nan(b)) { return f32_nan(); }
  let ua = bitcast<u32>(a);
  let ub = bitcast<u32>(b);
  let ka = f32_order_key(ua);
  let kb = f32_order_key(ub);
  if (ka == kb) { return b; }
  if ((ua & 0x7fffffffu) == 0u) { return bitcast<f32>((ub & 0x80000000u) | 1u); }
  let away = (kb > ka) == ((ua & 0x80000000u) == 0u);
  return bitcast<f32>(select(ua - 1u, ua + 1u, away));
}
// nextafter in a 16-bit format (half = true: float16, else bfloat16): a and b hold
// values of that format exactly, so the step happens on its bits.
fn nextafter_16(a: f32, b: f32, half: bool) -> f32 {
  if (is_nan(a) || is_nan(b)) { return f32_nan(); }
  var ua: u32;
  var ub: u32;
  if (half) { ua = f32_to_f16_bits(a); ub = f32_to_f16_bits(b); }
  else { ua = f32_to_bf16_bits(a); ub = f32_to_bf16_bits(b); }
  let ka = select(i32(ua), -i32(ua & 0x7fffu), (ua & 0x8000u) != 0u);
  let kb = select(i32(ub), -i32(ub & 0x7fffu), (ub & 0x8000u) != 0u);
  if (ka == kb) { return b; }
  var r: u32;
  if ((ua & 0x7fffu) == 0u) { r = (ub & 0x8000u) | 1u; }
  else { r = select(ua - 1u, ua + 1u, (kb > ka) == ((ua & 0x8000u) == 0u)); }
  if (half) { return f16_bits_to_f32(r); }
  return bf16_bits_to_f32(r);
}
fn logaddexp_f32(a: f32, b: f32) -> f32 {
  if (is_nan(a) || is_nan(b)) { return f32_nan(); }
  if (is_inf(a) && a == b) { return a; }
  return max(a, b) + log1p_f32(exp_f32(-abs(a - b)));
}
fn logaddexp2_f32(a: f32, b: f32) -> f32 {
  if (is_nan(a) || is_nan(b)) { return f32_nan(); }
  if (is_inf(a) && a == b) { return a; }
  return max(a, b) + log1p_f32(exp2_f32(-abs(a - b))) * 1.4426950408889634;
}
fn xlogy_f32(x: f32, y: f32) -> f32 {
  if (is_nan(y)) { return y; }
  if (x == 0.0 && !is_nan(x)) { return 0.0; }
  return x * log_f32(y);
}
fn xlog1py_f32(x: f32, y: f32) -> f32 {
  if (is_nan(y)) { return y; }
  if (x == 0.0 && !is_nan(x)) { return 0.0; }
  return x * log1p_f32(y);
}
// On ties (+0 and -0) the first operand wins, as the CPU's fmax/fmin. (Compilers turn a
// compare-and-select into their max, which orders zeros its own way: test bits first.)
fn both_zero(a: f32, b: f32) -> bool { return ((bitcast<u32>(a) | bitcast<u32>(b)) & 0x7fffffffu) == 0u; }
fn fmax_f32(a: f32, b: f32) -> f32 {
  if (is_nan(a) || both_zero(a, b)) { return select(b, a, both_zero(a, b)); }
  if (is_nan(b)) { return a; }
  return max(a, b);
}
fn fmin_f32(a: f32, b: f32) -> f32 {
  if (is_nan(a) || both_zero(a, b)) { return select(b, a, both_zero(a, b)); }
  if (is_nan(b)) { return a; }
  return min(a, b);
}
fn logit_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x == 1.0) { return f32_inf(); }
  return log_f32(div_f32(x, 1.0 - x));
}
fn logit_eps_f32(x: f32, lo: f32, hi: f32) -> f32 {
  if (is_nan(x)) { return x; }
  var v = x;
  if (v < lo) { v = lo; } else if (v > hi) { v = hi; }
  return logit_f32(v);
}
fn logit_bwd_f32(dy: f32, x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x < 0.0 || x > 1.0) { return f32_nan(); }
  if (x == 0.0 || x == 1.0) { return dy * f32_inf(); }
  return div_f32(dy, x * (1.0 - x));
}
fn logit_eps_bwd_f32(dy: f32, x: f32, lo: f32, hi: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x < lo || x > hi) { return 0.0; }
  return div_f32(dy, x * (1.0 - x));
}
fn sinc_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  // Below 1e-5, 1 - (pi x)^2 / 6 rounds to 1 (and subnormal products may be flushed).
  if (abs(x) < 1e-5 || (bitcast<u32>(x) & 0x7fffffffu) < 0x00800000u) { return 1.0; }
  let p = x * 3.14159265358979323846;
  return div_f32(sin_f32(p), p);
}
fn clamp_f32(x: f32, lo: f32, hi: f32) -> f32 {
  if (is_nan(x) || is_nan(lo) || is_nan(hi)) { return f32_nan(); }
  return min(max(x, lo), hi);
}
fn clamp_min_f32(x: f32, lo: f32) -> f32 {
  if (is_nan(x) || is_nan(lo)) { return f32_nan(); }
  // std::max(x, lo): x unless x < lo (drivers' max() may pick either zero of -0 and +0).
  return select(x, lo, x < lo);
}
fn clamp_max_f32(x: f32, hi: f32) -> f32 {
  if (is_nan(x) || is_nan(hi)) { return f32_nan(); }
  return select(x, hi, hi < x);
}
fn lerp_f32(a: f32, b: f32, w: f32) -> f32 {
  if (abs(w) < 0.5) { return a + w * (b - a); }
  return b - (b - a) * (1.0 - w);
}
fn nan_to_num_f32(x: f32, nan: f32, posinf: f32, neginf: f32) -> f32 {
  if (is_nan(x)) { return nan; }
  if (bitcast<u32>(x) == 0x7f800000u) { return posinf; }
  if (bitcast<u32>(x) == 0xff800000u) { return neginf; }
  return x;
}
fn heaviside_f32(x: f32, v: f32) -> f32 {
  if (is_nan(x)) { return 0.0; }
  if (x == 0.0) { return v; }
  return select(0.0, 1.0, x > 0.0);
}
// ---- activations and their gradients (the CPU's formulas) ----
fn elu_f32(x: f32, negcoef: f32, poscoef: f32, inscale: f32) -> f32 {
  if (x <= 0.0) { return expm1_f32(x * inscale) * negcoef; }
  return x * poscoef;
}
fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
  if (x * beta > threshold) { return x; }
  return div_f32(log1p_f32(exp_f32(x * beta)), beta);
}
fn softplus_bwd_f32(g: f32, x: f32, beta: f32, threshold: f32) -> f32 {
  if (x * beta > threshold) { return g; }
  let z = exp_f32(x * beta);
  return div_f32(g * z, z + 1.0);
}
fn mish_f32(x: f32) -> f32 { return x * tanh_f32(log1p_f32(exp_f32(x))); }
fn hardsigmoid_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  return div_f32(min(max(x + 3.0, 0.0), 6.0), 6.0);
}
fn hardswish_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  return div_f32(x * min(max(x + 3.0, 0.0), 6.0), 6.0);
}
fn hardswish_bwd_f32(g: f32, x: f32) -> f32 {
  if (x <= -3.0) { return 0.0; }
  if (x < 3.0) { return g * (div_f32(x, 3.0) + 0.5); }
  return g;
}
fn log_sigmoid_f32(x: f32) -> f32 { return min(x, 0.0) - log1p_f32(exp_f32(-abs(x))); }
fn log_sigmoid_bwd_f32(g: f32, x: f32) -> f32 {
  let neg = x < 0.0;
  let z = exp_f32(-abs(x));
  let q = div_f32(z, 1.0 + z);
  return g * select(q, 1.0 - q, neg);
}
fn gelu_bwd_f32(g: f32, x: f32) -> f32 {
  let cdf = 0.5 * (1.0 + erf_f32(x * 0.70710678118654752));
  let pdf = exp_f32(-0.5 * x * x) * 0.39894228040143268;
  return g * (cdf + x * pdf);
}
fn gelu_tanh_bwd_f32(g: f32, x: f32) -> f32 {
  let beta = 0.79788456080286536;
  let kappa = 0.044715;
  let x2 = x * x;
  let t = tanh_f32(beta * (x + kappa * x2 * x));
  let left = 0.5 * x;
  let right_d = left * (1.0 - t * t) * (beta * (1.0 + 3.0 * kappa * x2));
  return g * (0.5 * (1.0 + t) + right_d);
}
// glu backward: the gradient of the second half, g * a * s * (1 - s) with s = sigmoid(b).
fn glu_bwd_second_f32(g: f32, a: f32, b: f32) -> f32 {
  let s = sigmoid_f32(b);
  return g * a * s * (1.0 - s);
}
fn silu_bwd_f32(g: f32, x: f32) -> f32 {
  let s = sigmoid_f32(x);
  return g * s * (1.0 + x * (1.0 - s));
}
