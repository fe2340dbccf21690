// Elementary functions with the accuracy PyTorch's CPU kernels have (erf, log1p, expm1,
// tanh, pow with negative bases, sin/cos with full range reduction, fmod, floor division
// and Python-style modulo). Every kernel includes it.

// Shader compilers may rewrite (1 + x) - 1 as x (NIR does, on llvmpipe), so the classic
// compensated forms of log1p/expm1 are unreliable: near zero these use series instead.
fn log1p_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  // Subnormals: log1p(x) = x (and the series below would flush them to zero).
  if ((bitcast<u32>(x) & 0x7fffffffu) < 0x00800000u) { return x; }
  if (x < -1.0) { return f32_nan(); }
  if (x == -1.0) { return -f32_inf(); }
  if (is_inf(x)) { return x; }
  if (abs(x) < 0.5) {
    // log1p(x) = 2 atanh(s), s = x / (2 + x), |s| < 1/3: odd series to s^15.
    let s = x / (2.0 + x);
    let s2 = s * s;
    return 2.0 * s * (1.0 + s2 * (0.33333333333 + s2 * (0.2 + s2 * (0.14285714286 +
           s2 * (0.11111111111 + s2 * (0.09090909091 + s2 * (0.07692307692 +
           s2 * 0.06666666667)))))));
  }
  return log(1.0 + x);
}
fn expm1_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (abs(x) < 0.5) {
    // Taylor series to x^11 / 11!, in Horner form.
    return x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0 +
           x / 6.0 * (1.0 + x / 7.0 * (1.0 + x / 8.0 * (1.0 + x / 9.0 * (1.0 + x / 10.0 *
           (1.0 + x / 11.0))))))))));
  }
  if (x < -20.0) { return -1.0; }
  return exp(x) - 1.0;
}
fn tanh_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (abs(x) > 10.0) { return sign(x); }
  let e = expm1_f32(-2.0 * abs(x));
  let r = -e / (e + 2.0);
  return select(r, -r, x < 0.0);
}
fn sigmoid_f32(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
// erfc from the classic Chebyshev fit of exp(-z*z)*t*P(t) (fractional error below
// 1.2e-7 everywhere), so it keeps relative accuracy in the tail; erf uses its Taylor
// series near zero, where 1 - erfc would cancel.
fn erfc_f32(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r, 2.0 - r, x < 0.0);
}
fn erf_f32(x: f32) -> f32 {
  if (abs(x) < 0.5) {
    let x2 = x * x;
    return x * (1.1283791671 + x2 * (-0.3761263890 + x2 * (0.1128379167 + x2 * (-0.0268661706 +
           x2 * (0.0052239776 + x2 * (-0.0008548328 + x2 * 0.0001205221))))));
  }
  return 1.0 - erfc_f32(x);
}
fn is_odd_integer(y: f32) -> bool {
  return abs(y) < 16777216.0 && trunc(y) == y && (i32(abs(y)) & 1) == 1;
}
// pow with C's special cases (C99 Annex F): zeros, infinities, NaN, negative bases with
// integer exponents. Special operands are recognised by their bits first.
fn pow_f32(x: f32, y: f32) -> f32 {
  if (y == 0.0 || x == 1.0) { return 1.0; }
  if (is_nan(x) || is_nan(y)) { return f32_nan(); }
  let y_odd = is_odd_integer(y);
  if (x == 0.0) {
    if (y < 0.0) { return select(f32_inf(), -f32_inf(), y_odd && bitcast<u32>(x) == 0x80000000u); }
    return select(0.0, x, y_odd);
  }
  if (is_inf(y)) {
    let ax = abs(x);
    if (ax == 1.0) { return 1.0; }
    if ((ax < 1.0) == (y < 0.0)) { return f32_inf(); }
    return 0.0;
  }
  if (is_inf(x)) {
    if (x > 0.0) { return select(0.0, f32_inf(), y > 0.0); }
    if (y > 0.0) { return select(f32_inf(), -f32_inf(), y_odd); }
    return select(0.0, -0.0, y_odd);
  }
  let yint = trunc(y) == y;
  if (x < 0.0 && !yint) { return f32_nan(); }
  if (y == 1.0) { return x; }
  if (y == 2.0) { return x * x; }
  if (y == 0.5) { return sqrt(x); }
  if (y == -1.0) { return 1.0 / x; }
  if (yint && abs(y) <= 64.0) {
    // Exact square-and-multiply for small integer exponents (as CPU's powf rounds).
    var n = u32(abs(y));
    var b = x;
    var r = 1.0;
    loop {
      if (n == 0u) { break; }
      if ((n & 1u) == 1u) { r = r * b; }
      b = b * b;
      n = n >> 1u;
    }
    return select(r, 1.0 / r, y < 0.0);
  }
  let m = exp2(y * log2(abs(x)));
  return select(m, -m, x < 0.0 && y_odd);
}
// sin/cos: GPU builtins are accurate only near zero (WGSL promises nothing outside
// [-pi, pi]). Beyond 256, reduce by Payne-Hanek: |x| * 2/pi with 96 bits of 2/pi taken
// at x's exponent, in integer arithmetic, gives the quadrant and a fraction accurate to
// float32 for any finite x; the builtin then runs on |r| <= pi/4.
var<private> kTwoOverPi: array<u32, 7> = array<u32, 7>(0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u,
    0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu);
// Bits [pos, pos + 32) of the 128-bit little-endian integer p.
fn u128_bits(p: vec4<u32>, pos: u32) -> u32 {
  let w = pos >> 5u;
  let sh = pos & 31u;
  let lo = p[w];
  let hi = select(0u, p[min(w + 1u, 3u)], w < 3u);
  return select((lo >> sh) | (hi << (32u - sh)), lo, sh == 0u);
}
// Returns (r, q) with |x| = r + q * pi/2 (mod 2 pi), |r| <= pi/4, for finite |x| >= 1.
fn trig_reduce(ax: f32) -> vec2<f32> {
  let bits = bitcast<u32>(ax);
  let m = (bits & 0x7fffffu) | 0x800000u;
  let e = i32((bits >> 23u) & 0xffu) - 150;  // ax = m * 2^e
  // Bits of 2/pi worth more than 4 / 2^e cannot change x * 2/pi mod 4.
  let i0 = max(1, e - 1);
  let b = u32(i0 - 1);
  let k = b >> 5u;
  let sh = b & 31u;
  var w: array<u32, 3>;
  for (var j = 0u; j < 3u; j = j + 1u) {
    let a = kTwoOverPi[k + j];
    let c = kTwoOverPi[k + j + 1u];
    w[j] = select((a << sh) | (c >> (32u - sh)), a, sh == 0u);
  }
  // P = m * W, 120 bits; x * 2/pi = P * 2^-s.
  let t2 = u32_mul_wide(m, w[2]);
  let t1 = u32_mul_wide(m, w[1]);
  let t0 = u32_mul_wide(m, w[0]);
  let p1 = t2.y + t1.x;
  let c1 = select(0u, 1u, p1 < t2.y);
  let p2a = t1.y + t0.x;
  let c2a = select(0u, 1u, p2a < t1.y);
  let p2 = p2a + c1;
  let c2b = select(0u, 1u, p2 < p2a);
  let p = vec4<u32>(t2.x, p1, p2, t0.y + c2a + c2b);
  let s = u32(i0 + 95 - e);
  var q = u128_bits(p, s) & 3u;
  var frac = vec2<u32>(u128_bits(p, s - 64u), u128_bits(p, s - 32u));  // (lo, hi)
  var sgn = 1.0;
  if ((frac.y & 0x80000000u) != 0u) {
    // A fraction >= 1/2: take fraction - 1 in the next quadrant.
    frac = i64_neg(frac);
    sgn = -1.0;
    q = (q + 1u) & 3u;
  }
  let f = sgn * (f32(frac.y) * 2.3283064365386963e-10 + f32(frac.x) * 5.421010862427522e-20);
  return vec2<f32>(f * 1.5707963267948966, f32(q));
}
// sin and cos of |r| <= pi/4 by their Taylor series: truncation error below 2e-9, under
// f32 rounding. (Driver builtins are fast approximations: NVIDIA's is off by 5e-6.)
fn sin_poly(r: f32) -> f32 {
  let z = r * r;
  return r + r * z * (-1.6666666666666666e-1 + z * (8.3333333333333333e-3 +
         z * (-1.9841269841269841e-4 + z * (2.7557319223985891e-6 + z * -2.5052108385441719e-8))));
}
fn cos_poly(r: f32) -> f32 {
  let z = r * r;
  return 1.0 - 0.5 * z + z * z * (4.1666666666666667e-2 + z * (-1.3888888888888889e-3 +
         z * (2.4801587301587302e-5 + z * (-2.7557319223985891e-7 + z * 2.0876756987868099e-9))));
}
// (r, quadrant) with |x| = r + q * pi/2 for |x| <= 256: pi/2 split in three parts of 16,
// 16 and 24 bits, so k * part is exact for the 8-bit k.
fn trig_reduce_small(ax: f32) -> vec2<f32> {
  let k = round(ax * 0.63661977236758134);
  let r = ((ax - k * 1.570770263671875) - k * 2.6063062250614166e-05) - k * 6.07710062827671e-11;
  return vec2<f32>(r, k);
}
fn trig_reduce_any(ax: f32) -> vec2<f32> {
  if (ax <= 256.0) { return trig_reduce_small(ax); }
  return trig_reduce(ax);
}
fn sin_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return f32_nan(); }
  let ax = abs(x);
  if (ax <= 0.78539816) { return sin_poly(x); }
  let rq = trig_reduce_any(ax);
  let q = u32(rq.y) & 3u;
  var v = select(sin_poly(rq.x), cos_poly(rq.x), (q & 1u) == 1u);
  if (q >= 2u) { v = -v; }
  return select(v, -v, x < 0.0);
}
fn cos_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return f32_nan(); }
  let ax = abs(x);
  if (ax <= 0.78539816) { return cos_poly(ax); }
  let rq = trig_reduce_any(ax);
  let q = u32(rq.y) & 3u;
  var v = select(cos_poly(rq.x), sin_poly(rq.x), (q & 1u) == 1u);
  if (q == 1u || q == 2u) { v = -v; }
  return v;
}
// C's fmod, exact and without float arithmetic (so flushed subnormals cannot creep in):
// with |a| = ma * 2^(ea-150) and |b| = mb * 2^(eb-150) (integer mantissas; subnormals take
// exponent 1 without the implicit bit), fmod = (ma * 2^(ea-eb) mod mb) * 2^(eb-150),
// reduced one binade at a time. (a - b*trunc(a/b) is not exact: 2**40 % 1.5 gives 0.)
fn fmod_f32(a: f32, b: f32) -> f32 {
  let sign = bitcast<u32>(a) & 0x80000000u;
  let ua = bitcast<u32>(a) & 0x7fffffffu;
  let ub = bitcast<u32>(b) & 0x7fffffffu;
  if (ua >= 0x7f800000u || ub > 0x7f800000u || ub == 0u) { return f32_nan(); }
  if (ua < ub) { return a; }
  var ea = i32(ua >> 23u);
  var ma = ua & 0x7fffffu;
  if (ea == 0) { ea = 1; } else { ma = ma | 0x800000u; }
  var eb = i32(ub >> 23u);
  var mb = ub & 0x7fffffu;
  if (eb == 0) { eb = 1; } else { mb = mb | 0x800000u; }
  var r = ma % mb;
  for (var i = ea - eb; i > 0; i = i - 1) { r = (r << 1u) % mb; }
  if (r == 0u) { return bitcast<f32>(sign); }
  // r * 2^(eb-150) as bits: normal when the exponent field stays >= 1.
  let top = i32(31u - countLeadingZeros(r));
  let field = eb + top - 23;
  if (field >= 1) {
    return bitcast<f32>(sign | (u32(field) << 23u) | ((r << u32(23 - top)) & 0x7fffffu));
  }
  return bitcast<f32>(sign | (r << u32(eb - 1)));
}
// Correctly rounded division. WGSL allows 2.5 ulp for a / b and NVIDIA's Vulkan driver
// takes it (Vulkan may also leave fma unfused, so no residual trick): the driver's quotient
// is corrected by comparing the midpoints to its neighbours, times b, with a, exactly, in
// integer arithmetic.
// Positive finite x as (mantissa, exponent) with x = mantissa * 2^exponent.
fn f32_decompose(u: u32) -> vec2<i32> {
  let e = i32(u >> 23u);
  if (e == 0) { return vec2<i32>(i32(u & 0x7fffffu), -149); }
  return vec2<i32>(i32((u & 0x7fffffu) | 0x800000u), e - 150);
}
fn u64_top_bit(p: vec2<u32>) -> i32 {
  if (p.y != 0u) { return 63 - i32(countLeadingZeros(p.y)); }
  return 31 - i32(countLeadingZeros(p.x));
}
// Sign of (m * 2^me) * (mb * 2^eb) - ma * 2^ea, all mantissas nonzero, m < 2^26.
fn cmp_scaled(m: u32, me: i32, mb: u32, eb: i32, ma: u32, ea: i32) -> i32 {
  let p = u32_mul_wide(m, mb);
  let sp = me + eb;
  let tp = u64_top_bit(p) + sp;
  let ta = (31 - i32(countLeadingZeros(ma))) + ea;
  if (tp != ta) { return select(-1, 1, tp > ta); }
  // Same leading bit: aligning the exponents keeps both under 2^51.
  var x = p;
  var y = vec2<u32>(ma, 0u);
  let d = sp - ea;
  if (d >= 0) { x = i64_shl(p, vec2<u32>(u32(d), 0u)); } else { y = i64_shl(y, vec2<u32>(u32(-d), 0u)); }
  if (i64_eq(x, y)) { return 0; }
  return select(-1, 1, u64_lt(y, x));
}
// The correctly rounded a / b, from a quotient q0 within a few ulp (finite, nonzero).
fn div_correct(a: f32, b: f32, q0: f32) -> f32 {
  let sign = (bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u;
  let da = f32_decompose(bitcast<u32>(a) & 0x7fffffffu);
  let db = f32_decompose(bitcast<u32>(b) & 0x7fffffffu);
  let ma = u32(da.x);
  let mb = u32(db.x);
  var uq = bitcast<u32>(q0) & 0x7fffffffu;
  for (var step = 0; step < 6; step = step + 1) {
    if (uq == 0u || uq >= 0x7f800000u) { break; }
    let dq = f32_decompose(uq);
    let mq = u32(dq.x);
    let odd = (uq & 1u) == 1u;
    // Midpoint to the next float up: (2 mq + 1) * 2^(eq - 1). Ties go to the even one.
    let up = cmp_scaled(2u * mq + 1u, dq.y - 1, mb, db.y, ma, da.y);
    if (up < 0 || (up == 0 && odd)) { uq = uq + 1u; continue; }
    // Midpoint to the next float down; below a power of two the spacing halves.
    var down: i32;
    if ((uq & 0x7fffffu) == 0u && (uq >> 23u) > 1u) {
      down = cmp_scaled(4u * mq - 1u, dq.y - 2, mb, db.y, ma, da.y);
    } else {
      down = cmp_scaled(2u * mq - 1u, dq.y - 1, mb, db.y, ma, da.y);
    }
    if (down > 0 || (down == 0 && odd)) { uq = uq - 1u; continue; }
    break;
  }
  return bitcast<f32>(uq | sign);
}
// a / b correctly rounded. Fast path, for normal operands and quotient: with a = ma 2^ea,
// b = mb 2^eb, q = mq 2^eq, the residual r = ma 2^(ea-eq-eb) - mq mb (in units of
// 2^(eq+eb)) is exact in 32-bit wrapping arithmetic because the driver's quotient is within
// a few ulp (|r| <= 3 mb < 2^26); q is right when |2r| <= mb, and each ulp moves r by mb.
fn div_f32(a: f32, b: f32) -> f32 {
  // Drivers that divide as a * (1 / b) lose 1 / b to underflow when |b| >= 2^126 (the
  // reciprocal is subnormal, and flushed) or to overflow when |b| < 2^-125: scale both
  // operands by a power of two first, which leaves the quotient unchanged.
  let eb = bitcast<u32>(b) & 0x7f800000u;
  var q = a / b;
  if (eb >= 0x7e800000u && eb != 0x7f800000u) {
    q = (a * 0.25) / (b * 0.25);
  } else if (eb < 0x01000000u) {
    q = (a * 16777216.0) / (b * 16777216.0);
  }
  return div_rounded(a, b, q);
}
// The correctly rounded a / b from any quotient q within 2.5 ulp of it.
fn div_rounded(a: f32, b: f32, q: f32) -> f32 {
  let ua = bitcast<u32>(a) & 0x7fffffffu;
  let ub = bitcast<u32>(b) & 0x7fffffffu;
  let uq = bitcast<u32>(q) & 0x7fffffffu;
  if (!is_finite(q) || !is_finite(a) || !is_finite(b) || uq == 0u || ub == 0u || ua == 0u) {
    return q;
  }
  let ea = i32(ua >> 23u);
  let eb = i32(ub >> 23u);
  let eq = i32(uq >> 23u);
  let s = ea - eq - eb + 150;
  let fq = uq & 0x7fffffu;
  if (ea == 0 || eb == 0 || eq == 0 || s < 0 || s > 31 || fq < 4u || fq > 0x7ffffbu) {
    return div_correct(a, b, q);  // subnormals, or a quotient near a binade edge
  }
  let ma = (ua & 0x7fffffu) | 0x800000u;
  let mb = i32((ub & 0x7fffffu) | 0x800000u);
  let mq = fq | 0x800000u;
  var r = bitcast<i32>((ma << u32(s)) - mq * u32(mb));
  var n = uq;
  for (var step = 0; step < 3; step = step + 1) {
    let odd = (n & 1u) == 1u;
    if (2 * r > mb || (2 * r == mb && odd)) { r = r - mb; n = n + 1u; continue; }
    if (2 * r < -mb || (2 * r == -mb && odd)) { r = r + mb; n = n - 1u; continue; }
    break;
  }
  return bitcast<f32>(n | ((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u));
}
// Python-style floor division (torch.div(rounding_mode="floor")), as the CPU computes it.
fn div_floor_f32(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return a / b; }
  let m = fmod_f32(a, b);
  var d = div_f32(a - m, b);
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
  if (d == 0.0) { return select(0.0, -0.0, (a / b) < 0.0); }
  var f = floor(d);
  if (d - f > 0.5) { f = f + 1.0; }
  return f;
}
// torch.remainder: the result takes the sign of the divisor.
fn mod_floor_f32(a: f32, b: f32) -> f32 {
  var m = fmod_f32(a, b);
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { m = m + b; }
  return m;
}
fn div_floor_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return -1; }
  let q = a / b;
  let r = a - q * b;
  return select(q, q - 1, r != 0 && ((r < 0) != (b < 0)));
}
fn mod_floor_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let r = a - (a / b) * b;
  return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}
fn pow_i32(base: i32, e: i32) -> i32 {
  if (e < 0) {
    if (base == 1) { return 1; }
    if (base == -1) { return select(1, -1, (e & 1) == 1); }
    return 0;
  }
  var r = 1;
  var b = base;
  var n = u32(e);
  loop {
    if (n == 0u) { break; }
    if ((n & 1u) == 1u) { r = r * b; }
    b = b * b;
    n = n >> 1u;
  }
  return r;
}
fn shl_i32(a: i32, s: i32) -> i32 { return select(0, a << u32(s), s >= 0 && s < 32); }
fn shr_i32(a: i32, s: i32) -> i32 { return select(a >> 31u, a >> u32(s), s >= 0 && s < 32); }
// sign(nan) is 0, as PyTorch computes it: (0 < x) - (x < 0).
fn sign_f32(x: f32) -> f32 {
  if (is_nan(x)) { return 0.0; }
  return select(select(0.0, 1.0, x > 0.0), -1.0, x < 0.0);
}
// Comparisons may be compiled as ordered min/max, which drop NaN: test the bits instead.
fn relu_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  return select(x, 0.0, x < 0.0);
}
fn maximum_f32(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f32_nan(); } return max(a, b); }
fn minimum_f32(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f32_nan(); } return min(a, b); }
