// Special functions (needs elementary.wgsl): lgamma, digamma, polygamma, Hurwitz zeta,
// modified Bessel functions I0/I1 (and scaled), erfcx, ndtri, log_ndtr, entr, spherical
// j0, orthogonal polynomials; from their series, asymptotic expansions and recurrences,
// evaluated where each converges fast in float32.

// lgamma(1 + e), |e| <= 1/4: -gamma e + sum_{k>=2} (-1)^k zeta(k) / k e^k, to k = 15.
fn lgamma1p_series(e: f32) -> f32 {
  var p = -0.06666870588242046;
  p = 0.07143294629536133 + e * p;
  p = -0.0769325164113522 + e * p;
  p = 0.083353840546109 + e * p;
  p = -0.09095401714582904 + e * p;
  p = 0.1000994575127818 + e * p;
  p = -0.11133426586956469 + e * p;
  p = 0.12550966952474304 + e * p;
  p = -0.1440498967688461 + e * p;
  p = 0.1695571769974082 + e * p;
  p = -0.20738555102867398 + e * p;
  p = 0.27058080842778454 + e * p;
  p = -0.40068563438653143 + e * p;
  p = 0.8224670334241132 + e * p;
  return select(e * (-0.5772156649015329 + e * p), 0.0, e == 0.0);  // +0 at the zeros
}
// lgamma for x >= 1/4 (finite): the series near the zeros at 1 and 2, else Stirling's
// series after shifting x up to 8.
fn lgamma_pos(x: f32) -> f32 {
  if (abs(x - 1.0) <= 0.25) { return lgamma1p_series(x - 1.0); }
  if (abs(x - 2.0) <= 0.25) { return lgamma1p_series(x - 2.0) + log_f32(x - 1.0); }
  var z = x;
  var shift = 1.0;
  while (z < 8.0) { shift = shift * z; z = z + 1.0; }
  let iz = div_f32(1.0, z);
  let iz2 = iz * iz;
  let series = iz * (0.083333333333333333 + iz2 * (-0.0027777777777777778 +
               iz2 * (0.00079365079365079365 + iz2 * (-0.00059523809523809524 +
               iz2 * 0.00084175084175084175))));
  return (z - 0.5) * log_f32(z) - z + (0.91893853320467274 + series - log_f32(shift));
}
fn lgamma_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return f32_inf(); }
  if (x > 0.0) {
    if (x < 0.25) { return lgamma1p_series(x) - log_f32(x); }
    return lgamma_pos(x);
  }
  // Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x); r = x - round(x) is exact.
  let r = x - round(x);
  if (r == 0.0) { return f32_inf(); }
  let s = abs(sin_f32(r * 3.14159265358979323846));
  return log_f32(div_f32(3.14159265358979323846, s)) - lgamma_pos(1.0 - x);
}
fn digamma_f32(xin: f32) -> f32 {
  var x = xin;
  if (is_nan(x)) { return x; }
  if (x == 0.0) { return select(-f32_inf(), f32_inf(), sign_bit(x)); }
  if (is_inf(x)) { return select(f32_nan(), x, x > 0.0); }
  var result = 0.0;
  if (x < 0.0) {
    if (x == trunc(x)) { return f32_nan(); }
    // Reflection; tan(pi r) with r = x - round(x) (exact, |r| <= 1/2) keeps pi x from
    // losing digits near the poles.
    let r = x - round(x);
    result = -div_f32(3.14159265358979323846, tan_f32(r * 3.14159265358979323846));
    x = 1.0 - x;
  }
  while (x < 10.0) { result = result - div_f32(1.0, x); x = x + 1.0; }
  if (x == 10.0) { return result + 2.251752589066721; }
  // psi(x) = log x - 1/(2x) - sum B_2k / (2k x^2k)
  let z = div_f32(1.0, x * x);
  let y = z * (0.083333333333333333 + z * (-0.0083333333333333333 + z * (0.0039682539682539683 +
          z * (-0.0041666666666666667 + z * (0.0075757575757575758 + z * (-0.021092796092796093 +
          z * 0.083333333333333333))))));
  return result + log_f32(x) - div_f32(0.5, x) - y;
}
fn trigamma_f32(xin: f32) -> f32 {
  var x = xin;
  if (is_nan(x)) { return x; }
  var sgn = 1.0;
  var result = 0.0;
  if (x < 0.5) {
    // psi1(x) + psi1(1 - x) = pi^2 / sin^2(pi x), with sin(pi x) formed as the CPU does
    // (so negative integers give its large finite values rather than inf).
    sgn = -1.0;
    let s = sin_f32(x * 3.14159265358979323846);
    result = -div_f32(9.8696044010893586, s * s);
    x = 1.0 - x;
  }
  for (var i = 0; i < 6; i = i + 1) { result = result + div_f32(1.0, x * x); x = x + 1.0; }
  let ixx = div_f32(1.0, x * x);
  result = result + div_f32(1.0 + div_f32(0.5, x) + ixx * (0.16666666666666667 - ixx *
           (0.033333333333333333 - ixx * 0.023809523809523810)), x);
  return sgn * result;
}
// Double-float helpers (value = hi + lo) for sums the CPU forms in double.
// x^n, integer 1 <= n <= 64, with every product's rounding error kept (exact residuals).
fn pow_int_dd(x: f32, n: u32) -> vec2<f32> {
  var hi = x;
  var lo = 0.0;
  for (var k = 1u; k < n; k = k + 1u) {
    let p = hi * x;
    lo = mul_residual(hi, x, p) + lo * x;
    hi = p;
  }
  return vec2<f32>(hi, lo);
}
// a * b rounded, through the runtime zero `zero`: compilers that contract a product and a
// following sum into a fused multiply-add (NVIDIA's) cannot fuse this one, whose rounded
// value the error-free transformations below rely on.
fn rounded_mul(a: f32, b: f32, zero: f32) -> f32 {
  return bitcast<f32>(bitcast<u32>(a * b) ^ bitcast<u32>(zero));
}
// x through the runtime zero: compilers that reassociate float math (NVIDIA's) cannot
// fold the error terms of two-sums built from hidden steps.
fn hide(x: f32, zero: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ bitcast<u32>(zero)); }
// 1 / (hi + lo): the correctly rounded 1/hi, corrected by its exact residual.
fn recip_dd(d: vec2<f32>, zero: f32) -> vec2<f32> {
  let r0 = div_f32(1.0, d.x);
  if (!is_finite(r0) || r0 == 0.0 || !is_finite(d.x)) { return vec2<f32>(r0, 0.0); }
  let p = rounded_mul(d.x, r0, zero);
  let e = (p - 1.0) + mul_residual(d.x, r0, p) + d.y * r0;
  return vec2<f32>(r0, -r0 * e);
}
// (s.hi + s.lo) + (t.hi + t.lo), the high parts added exactly (two-sum; `zero` is a runtime
// 0 that keeps reassociating compilers from folding the error term).
fn add_dd(s: vec2<f32>, t: vec2<f32>, zero: f32) -> vec2<f32> {
  let h = hide(s.x + t.x, zero);
  if (!is_finite(h)) { return vec2<f32>(h, 0.0); }
  let bb = hide(h - s.x, zero);
  let err = hide(s.x - hide(h - bb, zero), zero) + hide(t.x - bb, zero);
  return vec2<f32>(h, s.y + t.y + err);
}
// (w + w_lo)^-s: for integer s (polygamma's case) to double-float accuracy, w_lo entering
// to first order (it is below an ulp of w), else pow_f32.
fn zeta_term(w: f32, w_lo: f32, s: f32, int_s: bool, zero: f32) -> vec2<f32> {
  if (int_s) {
    let r = recip_dd(pow_int_dd(w, u32(s)), zero);
    return vec2<f32>(r.x, r.y - s * r.x * div_f32(w_lo, w));
  }
  return vec2<f32>(pow_f32(w, -s), 0.0);
}
// Hurwitz zeta(s, q) by the CPU's scheme (which runs in double for float): terms (q + k)^-s
// summed until k >= 9 and q + k > 9 (here in double-float, so sums that cancel, q near a
// negative half-integer, keep their digits), then the Euler-Maclaurin tail
// w^(1-s)/(s-1) - w^-s/2 + sum_j s(s+1)...(s+2j-2) w^(-s-2j+1) / A_j, with
// A_j = (2j)! / B_2j; its running product (rising factorial times w power) is kept as one
// number so neither part overflows.
fn zeta_f32(s: f32, q: f32, zero: f32) -> f32 {
  // The CPU's special cases in its order (zeta(NaN, -inf) is inf there).
  if (s == 1.0) { return f32_inf(); }
  if (s < 1.0) { return f32_nan(); }
  if (q <= 0.0) {
    if (q == floor(q)) { return f32_inf(); }
    if (s != floor(s)) { return f32_nan(); }
  }
  if (is_nan(s) || is_nan(q)) { return f32_nan(); }
  if (is_inf(q)) { return f32_nan(); }
  let int_s = s == floor(s) && s <= 64.0;
  // The CPU takes the first term from a float pow (rounded to float), the rest in double.
  let first = zeta_term(q, 0.0, s, int_s, zero);
  var sum = vec2<f32>(first.x + first.y, 0.0);
  var a = q;
  var b = vec2<f32>(0.0, 0.0);
  var i = 0;
  loop {
    if (!(i < 9 || a <= 9.0) || i > 100000) { break; }
    i = i + 1;
    // a = q + i exactly, as (a, a_lo) (the CPU's double holds it exactly).
    let fi = f32(i);
    a = hide(q + fi, zero);
    let bb = hide(a - q, zero);
    let a_lo = hide(q - hide(a - bb, zero), zero) + hide(fi - bb, zero);
    b = zeta_term(a, a_lo, s, int_s, zero);
    sum = add_dd(sum, b, zero);
    if (abs(b.x) < 1.1102230246251565e-16 * abs(sum.x)) { return sum.x + sum.y; }
  }
  let w = a;
  var t0 = div_f32(b.x * w, s - 1.0) - 0.5 * b.x;
  var tail = t0;
  var c = b.x;  // s(s+1)...(s+2j-2) w^(-s-2j+1) / w^0 as one running product
  var k = 0.0;
  var acoef = array<f32, 12>(12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
      -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
      1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
      -7.1661652561756670113e18);
  let base = sum.x + sum.y;
  for (var j = 0; j < 12; j = j + 1) {
    c = c * div_f32(s + k, w);
    let t = div_f32(c, acoef[j]);
    tail = tail + t;
    if (t == 0.0 || abs(t) < 1.1102230246251565e-16 * abs(base + tail)) { break; }
    k = k + 1.0;
    c = c * div_f32(s + k, w);
    k = k + 1.0;
  }
  return (sum.x + (sum.y + tail));
}
// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 2.
fn polygamma_f32(n: f32, x: f32, zero: f32) -> f32 {
  if (n == 0.0) { return digamma_f32(x); }
  if (n == 1.0) { return trigamma_f32(x); }
  var fact = 1.0;
  for (var k = 2.0; k <= n; k = k + 1.0) { fact = fact * k; }
  let r = fact * zeta_f32(n + 1.0, x, zero);
  return select(-r, r, (i32(n) & 1) == 1);
}
// I_nu(x) / (x/2)^nu for nu = 0, 1 by its power series sum (x^2/4)^k / (k! (k + nu)!).
fn bessel_i_series(x: f32, nu: f32) -> f32 {
  let y = 0.25 * x * x;
  var term = 1.0;
  var sum = 1.0;
  for (var k = 1.0; k < 200.0; k = k + 1.0) {
    term = term * div_f32(y, k * (k + nu));
    sum = sum + term;
    if (term < sum * 1e-9) { break; }
  }
  return sum;
}
// sqrt(2 pi x) e^-x I_nu(x) by the asymptotic series (x >= 20: terms fall below 1e-9 fast).
fn bessel_i_asym(x: f32, nu: f32) -> f32 {
  let mu = 4.0 * nu * nu;
  var term = 1.0;
  var sum = 1.0;
  for (var k = 1.0; k < 30.0; k = k + 1.0) {
    let odd = 2.0 * k - 1.0;
    term = -term * div_f32(mu - odd * odd, 8.0 * k * x);
    sum = sum + term;
    if (abs(term) < 1e-9 * abs(sum)) { break; }
  }
  return sum;
}
// e^-|x| I_nu(|x|) (nu = 0, 1).
fn bessel_ie(ax: f32, nu: f32) -> f32 {
  if (ax <= 20.0) {
    let s = bessel_i_series(ax, nu) * exp_f32(-ax);
    return select(s, 0.5 * ax * s, nu == 1.0);
  }
  return div_f32(bessel_i_asym(ax, nu), 2.5066282746310002 * sqrt(ax));
}
fn bessel_i(ax: f32, nu: f32) -> f32 {
  if (ax <= 20.0) {
    let s = bessel_i_series(ax, nu);
    return select(s, 0.5 * ax * s, nu == 1.0);
  }
  // e^ax in two halves so the product overflows only when the result does.
  let h = exp_f32(0.5 * ax);
  return (h * div_f32(bessel_i_asym(ax, nu), 2.5066282746310002 * sqrt(ax))) * h;
}
fn i0_f32(x: f32) -> f32 { if (is_nan(x)) { return x; } return bessel_i(abs(x), 0.0); }
fn i0e_f32(x: f32) -> f32 { if (is_nan(x)) { return x; } return bessel_ie(abs(x), 0.0); }
fn i1_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let r = bessel_i(abs(x), 1.0);
  return select(r, -r, x < 0.0);
}
fn i1e_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let r = bessel_ie(abs(x), 1.0);
  return select(r, -r, x < 0.0);
}
// exp(z^2) erfc(z) for z >= 0: the erfc fit of the prelude without its exp(-z^2) factor.
fn erfcx_pos(z: f32) -> f32 {
  let t = div_f32(1.0, 1.0 + 0.5 * z);
  return t * exp_f32(-1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
         t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
         t * (-0.82215223 + t * 0.17087277)))))))));
}
fn erfcx_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x >= 0.0) { return erfcx_pos(x); }
  if (x < -9.5) { return f32_inf(); }
  return 2.0 * exp_f32(x * x) - erfcx_pos(-x);
}
fn log_ndtr_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let t = x * 0.70710678118654752;
  if (x < -1.0) { return log_f32(0.5 * erfcx_pos(-t)) - t * t; }
  return log1p_f32(-0.5 * erfc_f32(t));
}
// The inverse normal CDF: sqrt(2) erfinv(2p - 1), with 1 - |2p - 1| = 2q formed exactly
// (q = min(p, 1 - p)); deep in the tail, Newton steps on log_ndtr refine it.
fn ndtri_f32(p: f32) -> f32 {
  if (is_nan(p) || p < 0.0 || p > 1.0) { return f32_nan(); }
  if (p == 0.0) { return -f32_inf(); }
  if (p == 1.0) { return f32_inf(); }
  if (p == 0.5) { return 0.0; }
  let q = select(p, 1.0 - p, p > 0.5);
  let w = -log_f32((2.0 * q) * (2.0 - 2.0 * q));
  var x = -1.4142135623730951 * erfinv_poly(w) * (1.0 - 2.0 * q);  // the lower-tail quantile
  if (w > 16.0) {
    // Beyond the fit's range: x ~ -sqrt(L - log(L) - log(2 pi)), L = -2 log q.
    let l = -2.0 * log_f32(q);
    x = -sqrt(l - log_f32(l) - 1.8378770664093453);
  }
  if (q < 1e-3) {
    let lq = log_f32(q);
    for (var i = 0; i < 3; i = i + 1) {
      // d/dx log ndtr(x) = sqrt(2/pi) / erfcx(-x / sqrt(2))
      let f = log_ndtr_f32(x) - lq;
      x = x - f * erfcx_pos(-x * 0.70710678118654752) * 1.2533141373155003;
    }
  }
  return select(x, -x, p > 0.5);
}
fn entr_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (x > 0.0) { return -x * log_f32(x); }
  if (x == 0.0) { return 0.0; }
  return -f32_inf();
}
fn spherical_j0_f32(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  if (is_inf(x)) { return 0.0; }
  if (abs(x) < 0.5) {
    let z = x * x;
    return 1.0 - z / 6.0 * (1.0 - z / 20.0 * (1.0 - z / 42.0 * (1.0 - z / 72.0 * (1.0 - z / 110.0))));
  }
  return div_f32(sin_f32(x), x);
}
// a * b - h exactly, for h = a * b rounded (finite): the product of the 24-bit mantissas
// is formed in 64-bit integers, so no fused multiply-add is needed from the driver.
fn mul_residual(a: f32, b: f32, h: f32) -> f32 {
  if (!is_finite(h) || h == 0.0) { return 0.0; }
  let da = f32_decompose(bitcast<u32>(a) & 0x7fffffffu);
  let db = f32_decompose(bitcast<u32>(b) & 0x7fffffffu);
  let dh = f32_decompose(bitcast<u32>(h) & 0x7fffffffu);
  let s = da.y + db.y;
  let d = dh.y - s;
  // d <= 0: h holds the product exactly; d > 30: the residual is below h's subnormal ulp.
  if (d <= 0 || d > 30) { return 0.0; }
  let prod = u32_mul_wide(u32(da.x), u32(db.x));
  let diff = i64_sub(prod, i64_shl(vec2<u32>(u32(dh.x), 0u), vec2<u32>(u32(d), 0u)));
  let r = ldexp_wide(f32(bitcast<i32>(diff.x)), s);
  return select(r, -r, sign_bit(h));
}
// fma(a, b, -c) as the CPU's contracted `a * b - c` gives it: a * b = h + e exactly, then
// h - c = t + err exactly (Knuth's two-sum), and one final rounding of t + (err + e).
// `zero` is a runtime 0 (a kernel parameter): t passes through it as bits, so compilers
// that reassociate float math cannot fold err to 0.
fn mul_sub_fused_finite(a: f32, b: f32, c: f32, zero: f32) -> f32 {
  let h = rounded_mul(a, b, zero);
  let e = mul_residual(a, b, h);
  let t = hide(h - c, zero);
  let bb = hide(t - h, zero);
  let err = hide(h - hide(t - bb, zero), zero) + hide(-c - bb, zero);
  return t + hide(err + e, zero);
}
fn mul_sub_fused(a: f32, b: f32, c: f32, zero: f32) -> f32 {
  let h = a * b;
  if (!is_finite(a) || !is_finite(b)) { return h - c; }
  if (!is_finite(c)) { return -c; }  // the exact product of finite a, b is finite
  // A product past the float range may still leave a finite a * b - c: scaled down by 2^64
  // (exact for both terms that matter), fused, scaled back.
  if (!is_finite(h)) { return ldexp(mul_sub_fused_finite(ldexp(a, -64), b, ldexp(c, -64), zero), 64); }
  return mul_sub_fused_finite(a, b, c, zero);
}
// ---- orthogonal polynomials of integer degree n (given as a float; the CPU truncates it
// to int64): the CPU's recurrences, with its trigonometric forms for large n inside
// [-1, 1]. The CPU build contracts each step's first product and subtraction into a fused
// multiply-add (mul_sub_fused reproduces it; `zero` is its runtime zero) and runs on past an
// overflow, where inf - inf soon gives NaN: loops stop only at NaN.
fn poly_degree(n: f32) -> f32 {
  // Truncated toward zero first, as the int64 conversion does (-0.5 is degree 0). NaN and
  // values from 2^63 up convert to INT64_MIN on the CPU (x86), a negative degree.
  if (is_nan(n) || trunc(n) < 0.0 || n >= 9.2233720368547758e18) { return -1.0; }
  return min(trunc(n), 1000000.0);
}
fn is_even_f(n: f32) -> bool { return (u32(n) & 1u) == 0u; }
// The three-term recurrence r = (c * x2) q - p, from p0, q0 (degrees 0 and 1).
fn chebyshev_recur(x2: f32, q0: f32, n: f32, zero: f32) -> f32 {
  var p = 1.0;
  var q = q0;
  var r = q0;
  for (var k = 2.0; k <= n; k = k + 1.0) {
    r = mul_sub_fused(x2, q, p, zero);
    p = q;
    q = r;
    if (is_nan(r)) { break; }
  }
  return r;
}
fn chebyshev_t_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || is_even_f(n)); }
  if (n > 6.0 && abs(x) < 1.0) { return cos_f32(n * acos_f32(x)); }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x; }
  return chebyshev_recur(x + x, x, n, zero);
}
fn chebyshev_u_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 1.0) { return select(-(n + 1.0), n + 1.0, x > 0.0 || is_even_f(n)); }
  if (n > 8.0 && abs(x) < 1.0) {
    let t = acos_f32(x);
    let st = sin_f32(t);
    if (st != 0.0) { return div_f32(sin_f32((n + 1.0) * t), st); }
    return div_f32((n + 1.0) * cos_f32((n + 1.0) * t), x);
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x + x; }
  return chebyshev_recur(x + x, x + x, n, zero);
}
fn chebyshev_v_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 1.0) {
    if (x > 0.0) { return 1.0; }
    return select(-(n + n + 1.0), n + n + 1.0, is_even_f(n));
  }
  if (n > 8.0 && abs(x) < 1.0) {
    let t = acos_f32(x);
    if (sin_f32(t * 0.5) != 1.0) { return div_f32(cos_f32((n + 0.5) * t), cos_f32(t * 0.5)); }
    return select(-(n + n + 1.0), n + n + 1.0, is_even_f(n));
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x + x - 1.0; }
  return chebyshev_recur(x + x, x + x - 1.0, n, zero);
}
fn chebyshev_w_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 1.0) {
    if (x > 0.0) { return n + n + 1.0; }
    return select(-1.0, 1.0, is_even_f(n));
  }
  if (n > 8.0 && abs(x) < 1.0) {
    let t = acos_f32(x);
    if (cos_f32(t * 0.5) != 1.0) { return div_f32(sin_f32((n + 0.5) * t), sin_f32(t * 0.5)); }
    if (x > 0.0) { return n + n + 1.0; }
    return select(-1.0, 1.0, is_even_f(n));
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x + x + 1.0; }
  return chebyshev_recur(x + x, x + x + 1.0, n, zero);
}
// Shifted polynomials: the same in y = 2x - 1, with the CPU's special cases at x = 0, 1.
fn shifted_chebyshev_t_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (x == 1.0) { return 1.0; }
  if (x == 0.0) { return select(-1.0, 1.0, is_even_f(n)); }
  let y = x + x - 1.0;
  if (n > 6.0 && abs(y) < 1.0) { return cos_f32(n * acos_f32(y)); }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return y; }
  return chebyshev_recur(y + y, y, n, zero);
}
fn shifted_chebyshev_u_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (x == 1.0) { return n + 1.0; }
  if (x == 0.0) { return select(-(n + 1.0), n + 1.0, is_even_f(n)); }
  let y = x + x - 1.0;
  if (n > 6.0 && abs(y) < 1.0) {
    let t = acos_f32(y);
    let st = sin_f32(t);
    if (st != 0.0) { return div_f32(sin_f32((n + 1.0) * t), st); }
    return div_f32((n + 1.0) * cos_f32((n + 1.0) * t), y);
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return y + y; }
  return chebyshev_recur(y + y, y + y, n, zero);
}
fn shifted_chebyshev_v_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (x == 1.0) { return 1.0; }
  if (x == 0.0) { return select(-(n + n + 1.0), n + n + 1.0, is_even_f(n)); }
  let y = x + x - 1.0;
  if (n > 6.0 && abs(y) < 1.0) {
    let t = acos_f32(y);
    if (sin_f32(t * 0.5) != 1.0) { return div_f32(cos_f32((n + 0.5) * t), cos_f32(t * 0.5)); }
    return select(-(n + n + 1.0), n + n + 1.0, is_even_f(n));
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return y + y - 1.0; }
  return chebyshev_recur(y + y, y + y - 1.0, n, zero);
}
fn shifted_chebyshev_w_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (x == 1.0) { return n + n + 1.0; }
  if (x == 0.0) { return select(-1.0, 1.0, is_even_f(n)); }
  let y = x + x - 1.0;
  if (n > 4.0 && abs(y) < 1.0) {
    let t = acos_f32(y);
    if (cos_f32(t * 0.5) != 1.0) { return div_f32(sin_f32((n + 0.5) * t), sin_f32(t * 0.5)); }
    return select(-1.0, 1.0, is_even_f(n));
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return y + y + 1.0; }
  return chebyshev_recur(y + y, y + y + 1.0, n, zero);
}
// Physicists' Hermite: H_{k+1} = 2x H_k - 2k H_{k-1}.
fn hermite_h_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x + x; }
  var p = 1.0;
  var q = x + x;
  var r = q;
  for (var k = 2.0; k < n + n; k = k + 2.0) {
    r = mul_sub_fused(x + x, q, k * p, zero);
    p = q;
    q = r;
    if (is_nan(r)) { break; }
  }
  return r;
}
// Probabilists' Hermite: He_{k+1} = x He_k - k He_{k-1}, with the CPU build's contraction
// of x He_k - (k He_{k-1}) into one fused multiply-add (zero: see mul_sub_fused).
fn hermite_he_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x; }
  var p = 1.0;
  var q = x;
  var r = q;
  for (var k = 1.0; k < n; k = k + 1.0) {
    r = mul_sub_fused(x, q, k * p, zero);
    p = q;
    q = r;
    // The CPU runs on past an overflow, where inf - inf soon gives NaN: stop only there.
    if (is_nan(r)) { break; }
  }
  return r;
}
// Laguerre: (k + 1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1}.
fn laguerre_l_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 0.0) { return 1.0; }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return 1.0 - x; }
  var p = 1.0;
  var q = 1.0 - x;
  var r = q;
  for (var k = 1.0; k < n; k = k + 1.0) {
    r = div_f32(mul_sub_fused((k + k) + (1.0 - x), q, k * p, zero), k + 1.0);
    p = q;
    q = r;
    if (is_nan(r)) { break; }
  }
  return r;
}
// Legendre: (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}.
fn legendre_p_f32(x: f32, nf: f32, zero: f32) -> f32 {
  let n = poly_degree(nf);
  if (n < 0.0) { return 0.0; }
  if (abs(x) == 1.0) {
    if (x > 0.0) { return 1.0; }
    return select(-1.0, 1.0, is_even_f(n));
  }
  if (n == 0.0) { return 1.0; }
  if (n == 1.0) { return x; }
  var p = 1.0;
  var q = x;
  var r = q;
  for (var k = 1.0; k < n; k = k + 1.0) {
    r = div_f32(mul_sub_fused((k + k + 1.0) * x, q, k * p, zero), k + 1.0);
    p = q;
    q = r;
    if (is_nan(r)) { break; }
  }
  return r;
}
// ---- Bessel functions J0, J1 and K0, K1 ----
// e^x K_nu(x) = int_0^inf e^(-x (cosh t - 1)) cosh(nu t) dt, x > 0 (nu = 0, 1, 1/3): the
// integrand is even, analytic and falls double-exponentially, so the trapezoid rule
// converges geometrically; the step shrinks as 1/sqrt(x) with the integrand's width.
// (cosh t - 1 = 2 sinh^2(t/2) avoids cancellation.)
fn bessel_k_scaled(x: f32, nu: f32) -> f32 {
  // Tiny x (subnormals may be flushed in the products below): the leading terms,
  // K0 = -log(x/2) - gamma, K1 = 1/x, exact in float32 here.
  if (x < 1e-30) {
    if (nu == 0.0) { return -log_f32(x) + (0.6931471805599453 - 0.5772156649015329); }
    return div_f32(1.0, x);
  }
  let h = min(0.25, div_f32(0.5, sqrt(x)));
  let tmax = acosh_f32(1.0 + div_f32(104.0, x));
  var sum = 0.5;
  for (var t = h; t <= tmax; t = t + h) {
    let s = sinh_f32(0.5 * t);
    let e = exp_f32(-2.0 * x * s * s);
    sum = sum + select(e, e * cosh_f32(nu * t), nu != 0.0);
    if (e == 0.0) { break; }
  }
  return sum * h;
}
fn bessel_k_special(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) { return f32_nan(); }
  if (x == 0.0) { return f32_inf(); }
  return 0.0;  // +inf
}
fn k0e_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_inf(x)) { return bessel_k_special(x); }
  return bessel_k_scaled(x, 0.0);
}
fn k1e_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_inf(x)) { return bessel_k_special(x); }
  return bessel_k_scaled(x, 1.0);
}
fn k0_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_inf(x)) { return bessel_k_special(x); }
  return bessel_k_scaled(x, 0.0) * exp_f32(-x);
}
fn k1_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_inf(x)) { return bessel_k_special(x); }
  return bessel_k_scaled(x, 1.0) * exp_f32(-x);
}
// J_n(x) for |x| <= 25 from J_n(x) = 1/(2 pi) int_0^(2 pi) cos(n t - x sin t) dt: a periodic
// integrand, so the 64-point trapezoid rule is exact up to J_64(x)-sized aliasing terms.
fn bessel_j_trapezoid(x: f32, n: f32) -> f32 {
  var sum = 0.0;
  for (var k = 0; k < 64; k = k + 1) {
    let t = f32(k) * 0.09817477042468103;
    sum = sum + cos_f32(n * t - x * sin_f32(t));
  }
  return sum * 0.015625;
}
// Hankel's expansion for x > 25: J_n = sqrt(2 / (pi x)) (P cos chi - Q sin chi) with
// chi = x - (n/2 + 1/4) pi.
// Hankel's asymptotic series (P, Q) of order n at x: at most `terms` terms, until one
// falls below `tol` (shared by J and Y).
fn hankel_pq(x: f32, n: f32, terms: i32, tol: f32) -> vec2<f32> {
  let mu = 4.0 * n * n;
  var t = 1.0;
  var p = 1.0;
  var q = 0.0;
  for (var k = 1; k < terms; k = k + 1) {
    let kf = f32(k);
    let odd = 2.0 * kf - 1.0;
    t = t * div_f32(mu - odd * odd, 8.0 * kf * x);
    let sgn = select(-1.0, 1.0, ((k / 2) & 1) == 0);
    if ((k & 1) == 1) { q = q + sgn * t; } else { p = p + sgn * t; }
    if (abs(t) < tol) { break; }
  }
  return vec2<f32>(p, q);
}
fn bessel_j_hankel(x: f32, n: f32) -> f32 {
  let pq = hankel_pq(x, n, 16, 1e-9);
  let p = pq.x;
  let q = pq.y;
  // chi rounded as the CPU rounds it (x minus the phase constant in float): far out that
  // rounding, half an ulp of x, is what the CPU's value follows.
  let chi = x - select(0.785398185253143310546875, 2.35619449615478515625, n == 1.0);
  return (p * cos_f32(chi) - q * sin_f32(chi)) * div_f32(0.79788456080286536, sqrt(x));
}
// Power series of J0, J1 / (x/2) for |x| < 1/2 (to the x^10 term).
fn bessel_j_series(x: f32, nu: f32) -> f32 {
  let y = -0.25 * x * x;
  var term = 1.0;
  var sum = 1.0;
  for (var k = 1.0; k < 6.0; k = k + 1.0) {
    term = term * div_f32(y, k * (k + nu));
    sum = sum + term;
  }
  return sum;
}
fn j0_f32(x: f32) -> f32 {
  if (is_nan(x) || is_inf(x)) { return f32_nan(); }  // the CPU's value at infinity
  let ax = abs(x);
  if (ax < 0.5) { return bessel_j_series(ax, 0.0); }
  if (ax <= 25.0) { return bessel_j_trapezoid(ax, 0.0); }
  return bessel_j_hankel(ax, 0.0);
}
fn j1_f32(x: f32) -> f32 {
  if (is_nan(x) || is_inf(x)) { return f32_nan(); }
  let ax = abs(x);
  if (ax < 0.5) { return 0.5 * x * bessel_j_series(ax, 1.0); }
  var r: f32;
  if (ax <= 25.0) { r = bessel_j_trapezoid(ax, 1.0); } else { r = bessel_j_hankel(ax, 1.0); }
  return select(r, -r, x < 0.0);
}
// ---- Bessel functions of the second kind Y0, Y1 ----
// For 0 < x < 10, Neumann's expansions over Bessel functions of the first kind,
//   Y0 = (2/pi) (log(x/2) + gamma) J0 - (4/pi) sum_k>=1 (-1)^k J_2k / k,
//   Y1 = (2/pi) (log(x/2) + gamma) J1 - (2/pi) J0 / x + (2/pi) sum_k>=1 (-1)^k (J_2k-1 - J_2k+1) / k,
// (the second is minus the derivative of the first), whose terms stay below 1 in size, so
// nothing cancels badly. Every J_n comes from one 64-node trapezoid rule of
// J_n = 1/(2 pi) int_0^2pi cos(n t - x sin t) dt, exact up to J_(64-n)(x)-sized aliasing:
// per node, sum_k (-1)^k e^(i (2k t - x sin t)) / k is accumulated by rotating e^(-i x sin t)
// by e^(2it); its real part gives the J_2k sum and, as J_2k-1 - J_2k+1 picks
// 2 sin t sin(2k t - x sin t), its imaginary part the Y1 sum. J_n(x) < 1e-10 past n = 33
// here, so 16 terms do. Returns (Y0, Y1).
fn bessel_y_neumann(x: f32) -> vec2<f32> {
  var j0 = 0.0;
  var j1 = 0.0;
  var a = 0.0;
  var b = 0.0;
  for (var p = 0; p < 64; p = p + 1) {
    let t = f32(p) * 0.09817477042468103;
    let st = sin_f32(t);
    let ct = cos_f32(t);
    let phi = x * st;
    let c = cos_f32(phi);
    let s = sin_f32(phi);
    j0 = j0 + c;
    j1 = j1 + (ct * c + st * s);
    let wr = ct * ct - st * st;
    let wi = 2.0 * st * ct;
    var zr = c;
    var zi = -s;
    var sr = 0.0;
    var si = 0.0;
    for (var k = 1; k <= 16; k = k + 1) {
      let nr = zr * wr - zi * wi;
      zi = zr * wi + zi * wr;
      zr = nr;
      let wk = select(1.0, -1.0, (k & 1) == 1) / f32(k);
      sr = sr + wk * zr;
      si = si + wk * zi;
    }
    a = a + sr;
    b = b + st * si;
  }
  j0 = j0 * 0.015625;
  j1 = j1 * 0.015625;
  // (2/pi) (log(x/2) + gamma)
  let l = (log_f32(x) + (0.5772156649015329 - 0.6931471805599453)) * 0.6366197723675814;
  let y0 = l * j0 - 1.2732395447351628 * (a * 0.015625);
  let y1 = l * j1 - div_f32(0.6366197723675814 * j0, x) + 1.2732395447351628 * (b * 0.015625);
  return vec2<f32>(y0, y1);
}
// Hankel's expansion for x >= 10 (terms fall to e^(-2x), below 1e-8 here):
// Y_n = sqrt(2 / (pi x)) (P sin chi + Q cos chi), chi = x - (n/2 + 1/4) pi. chi is rounded
// as the CPU rounds it, x minus (n/2 + 1/4) pi in float: far out that rounding (half an ulp
// of x) is what the CPU's value follows.
fn bessel_y_hankel(x: f32, n: f32) -> f32 {
  let pq = hankel_pq(x, n, 28, 1e-10);
  let p = pq.x;
  let q = pq.y;
  let chi = x - select(0.785398185253143310546875, 2.35619449615478515625, n == 1.0);
  return (p * sin_f32(chi) + q * cos_f32(chi)) * div_f32(0.79788456080286536, sqrt(x));
}
// The CPU's values off the positive axis: -inf at +-0, NaN below 0 and at +inf.
fn bessel_y_special(x: f32) -> f32 {
  if (x == 0.0) { return -f32_inf(); }
  return f32_nan();
}
fn y0_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_nan(x) || is_inf(x)) { return bessel_y_special(x); }
  if (x < 10.0) { return bessel_y_neumann(x).x; }
  return bessel_y_hankel(x, 0.0);
}
fn y1_f32(x: f32) -> f32 {
  if (!(x > 0.0) || is_nan(x) || is_inf(x)) { return bessel_y_special(x); }
  if (x < 10.0) { return bessel_y_neumann(x).y; }
  return bessel_y_hankel(x, 1.0);
}
// ---- Airy function Ai ----
// -6.5 <= x <= 2.5: Taylor series about the nearest integer c in [-6, 2] (|h| <= 1/2),
// from Ai(c), Ai'(c) and Ai'' = x Ai, i.e. (k + 2)(k + 1) a_(k+2) = c a_k + a_(k-1).
fn airy_taylor(x: f32) -> f32 {
  let c = clamp(round(x), -6.0, 2.0);
  let h = x - c;
  let i = i32(c) + 6;
  var ai = array<f32, 9>(-0.3291451736298231, 0.3507610090241142, -0.07026553294928964,
      -0.37881429367765806, 0.22740742820168564, 0.5355608832923522, 0.3550280538878172,
      0.13529241631288147, 0.03492413042327436);
  var dai = array<f32, 9>(0.3459354872813428, 0.3271928185544436, -0.7906285753685814,
      0.314583769216599, 0.618259020741691, -0.010160567116645175, -0.2588194037928068,
      -0.15914744129679328, -0.05309038443365388);
  var prev = 0.0;     // a_(k-1)
  var cur = ai[i];    // a_k
  var next = dai[i];  // a_(k+1)
  var sum = cur + next * h;
  var hk = h;
  for (var k = 0; k < 26; k = k + 1) {
    let kf = f32(k);
    let a2 = (c * cur + prev) / ((kf + 2.0) * (kf + 1.0));
    prev = cur;
    cur = next;
    next = a2;
    hk = hk * h;
    sum = sum + a2 * hk;
  }
  return sum;
}
// The phase zeta + pi/4 rounded as the CPU rounds it (its error, up to half an ulp of a
// phase in the hundreds, dominates the CPU's result far out): zeta = (2z) sqrt(z) / 3 in
// float steps, then zeta + pi/4 formed in double and rounded once to float. The sum is
// rounded to the float grid U of its binade exactly: zeta / U and the integer part of
// (pi/4) / U are exact, the remaining fractions decide the last unit.
fn airy_phase(z: f32) -> f32 {
  let a = div_f32((2.0 * z) * sqrt(z), 3.0);
  let c_hi = 0.785398185253143310546875;  // pi/4 rounded to float
  let c_lo = -2.1855695031547384e-08;     // pi/4 - c_hi
  let e = f32_decompose(bitcast<u32>(a + c_hi)).y;  // U = 2^e
  let q = ldexp(a, -e);
  let r = ldexp(c_hi, -e);
  let whole = floor(q) + floor(r);
  let frac = (q - floor(q)) + (r - floor(r)) + ldexp(c_lo, -e);
  return ldexp(whole + round(frac), e);
}
fn airy_ai_f32(x: f32) -> f32 {
  if (is_nan(x) || is_inf(x)) { return f32_nan(); }  // the CPU's values at +-inf
  if (x > 25.77) { return 0.0; }                        // the CPU's cutoff (Ai < 2e-39)
  if (x > 2.5) {
    // Ai(x) = sqrt(x / 3) / pi K_1/3(zeta), zeta = 2/3 x^(3/2).
    let zeta = 0.6666666666666667 * x * sqrt(x);
    return sqrt(x * 0.3333333333333333) * 0.3183098861837907 *
           (bessel_k_scaled(zeta, 0.3333333333333333) * exp_f32(-zeta));
  }
  if (x >= -6.5) { return airy_taylor(x); }
  // x < -6.5: Ai(-z) = (sin theta P - cos theta Q) / (sqrt(pi) z^(1/4)), theta = zeta + pi/4,
  // zeta = 2/3 z^(3/2), P and Q the asymptotic series in 1/zeta with
  // u_k = u_(k-1) (6k-5)(6k-3)(6k-1) / (216 k (2k-1)).
  let z = -x;
  let iz = div_f32(1.5, z * sqrt(z));
  var u = 1.0;
  var p = 1.0;
  var q = 0.0;
  for (var k = 1; k < 20; k = k + 1) {
    let kf = f32(k);
    u = u * iz * div_f32((6.0 * kf - 5.0) * (6.0 * kf - 3.0) * (6.0 * kf - 1.0),
                         216.0 * kf * (2.0 * kf - 1.0));
    let sgn = select(-1.0, 1.0, ((k / 2) & 1) == 0);
    if ((k & 1) == 1) { q = q + sgn * u; } else { p = p + sgn * u; }
    if (u < 1e-10) { break; }
  }
  let theta = airy_phase(z);
  return (sin_f32(theta) * p - cos_f32(theta) * q) * div_f32(0.56418958354775629, sqrt(sqrt(z)));
}
// ---- regularized incomplete gamma functions P(a, x) (igamma) and Q(a, x) (igammac):
// the power series where x < a + 1, else the continued fraction (modified Lentz), both
// times the prefactor x^a e^-x / Gamma(a). Accuracy falls off for very large a.
fn igamma_prefactor(a: f32, x: f32) -> f32 {
  return exp_f32(a * log_f32(x) - x - lgamma_f32(a));
}
fn igamma_series(a: f32, x: f32) -> f32 {
  var ap = a;
  var del = div_f32(1.0, a);
  var sum = del;
  for (var i = 0; i < 2000; i = i + 1) {
    ap = ap + 1.0;
    del = del * div_f32(x, ap);
    sum = sum + del;
    if (abs(del) < abs(sum) * 1e-8) { break; }
  }
  return sum * igamma_prefactor(a, x);
}
fn igammac_fraction(a: f32, x: f32) -> f32 {
  let tiny = 1e-30;
  var b = x + 1.0 - a;
  var c = 1.0 / tiny;
  var d = div_f32(1.0, b);
  var h = d;
  for (var i = 1.0; i < 2000.0; i = i + 1.0) {
    let an = -i * (i - a);
    b = b + 2.0;
    d = an * d + b;
    if (abs(d) < tiny) { d = tiny; }
    c = b + div_f32(an, c);
    if (abs(c) < tiny) { c = tiny; }
    d = div_f32(1.0, d);
    let del = d * c;
    h = h * del;
    if (abs(del - 1.0) < 1e-8) { break; }
  }
  return igamma_prefactor(a, x) * h;
}
// The special cases in the CPU's order: a NaN operand is caught by the others' tests first
// (igamma(NaN, inf) = 1, igamma(inf, NaN) = 0).
fn igamma_f32(a: f32, x: f32) -> f32 {
  if (a < 0.0 || x < 0.0) { return f32_nan(); }
  if (a == 0.0) { return select(f32_nan(), 1.0, x > 0.0); }
  if (x == 0.0) { return 0.0; }
  if (is_inf(a)) { return select(0.0, f32_nan(), is_inf(x)); }
  if (is_inf(x)) { return 1.0; }
  if (is_nan(a) || is_nan(x)) { return f32_nan(); }
  if (x < a + 1.0) { return igamma_series(a, x); }
  return 1.0 - igammac_fraction(a, x);
}
fn igammac_f32(a: f32, x: f32) -> f32 {
  if (a < 0.0 || x < 0.0) { return f32_nan(); }
  if (a == 0.0) { return select(f32_nan(), 0.0, x > 0.0); }
  if (x == 0.0) { return 1.0; }
  if (is_inf(a)) { return select(1.0, f32_nan(), is_inf(x)); }
  if (is_inf(x)) { return 0.0; }
  if (is_nan(a) || is_nan(x)) { return f32_nan(); }
  if (x < a + 1.0) { return 1.0 - igamma_series(a, x); }
  return igammac_fraction(a, x);
}
