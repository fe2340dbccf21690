// int64 emulation on vec2<u32> (lo, hi): add, sub, mul, div/rem (trunc and floor), shifts,
// compares, pow, conversions to and from f32 with the CPU's rounding. Every kernel includes it.

fn i64_from_i32(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)); }
fn i64_to_i32(a: vec2<u32>) -> i32 { return bitcast<i32>(a.x); }
fn i64_is_neg(a: vec2<u32>) -> bool { return (a.y & 0x80000000u) != 0u; }
fn i64_is_zero(a: vec2<u32>) -> bool { return (a.x | a.y) == 0u; }
fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
  if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); }
  return a.x < b.x;
}
fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
  if (a.y != b.y) { return a.y < b.y; }
  return a.x < b.x;
}
fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn i64_neg(a: vec2<u32>) -> vec2<u32> { return i64_add(~a, vec2<u32>(1u, 0u)); }
fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return i64_add(a, i64_neg(b)); }
fn i64_abs(a: vec2<u32>) -> vec2<u32> { return select(a, i64_neg(a), i64_is_neg(a)); }
// Full 32x32 -> 64 bit product from 16-bit halves.
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let p = u32_mul_wide(a.x, b.x);
  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
fn u64_shl1(a: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x << 1u, (a.y << 1u) | (a.x >> 31u)); }
// Unsigned 64-bit division: returns (quotient.lo, quotient.hi, remainder.lo, remainder.hi).
fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
  if (n.y == 0u && d.y == 0u) {
    if (d.x == 0u) { return vec4<u32>(0xffffffffu, 0xffffffffu, n.x, 0u); }
    return vec4<u32>(n.x / d.x, 0u, n.x % d.x, 0u);
  }
  var q = vec2<u32>(0u, 0u);
  var r = vec2<u32>(0u, 0u);
  for (var i = 63i; i >= 0; i = i - 1) {
    let word = select(n.x, n.y, i >= 32);
    let bit = (word >> (u32(i) & 31u)) & 1u;
    r = u64_shl1(r);
    r.x = r.x | bit;
    q = u64_shl1(q);
    if (!u64_lt(r, d)) { r = i64_sub(r, d); q.x = q.x | 1u; }
  }
  return vec4<u32>(q, r);
}
fn i64_div_trunc(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let qr = u64_divmod(i64_abs(a), i64_abs(b));
  return select(qr.xy, i64_neg(qr.xy), i64_is_neg(a) != i64_is_neg(b));
}
fn i64_rem_trunc(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let qr = u64_divmod(i64_abs(a), i64_abs(b));
  return select(qr.zw, i64_neg(qr.zw), i64_is_neg(a));
}
fn i64_div_floor(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let q = i64_div_trunc(a, b);
  let r = i64_rem_trunc(a, b);
  if (!i64_is_zero(r) && (i64_is_neg(r) != i64_is_neg(b))) { return i64_sub(q, vec2<u32>(1u, 0u)); }
  return q;
}
fn i64_mod_floor(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let r = i64_rem_trunc(a, b);
  if (!i64_is_zero(r) && (i64_is_neg(r) != i64_is_neg(b))) { return i64_add(r, b); }
  return r;
}
// Shifts as the CPU does them: amounts outside [0, 64) give 0 (left) or the sign (right).
fn i64_shl(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
  if (s.y != 0u || s.x >= 64u) { return vec2<u32>(0u, 0u); }
  let n = s.x;
  if (n == 0u) { return a; }
  if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
  return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
fn i64_shr(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
  let fill = select(0u, 0xffffffffu, i64_is_neg(a));
  if (s.y != 0u || s.x >= 64u) { return vec2<u32>(fill, fill); }
  let n = s.x;
  if (n == 0u) { return a; }
  if (n >= 32u) { return vec2<u32>(bitcast<u32>(bitcast<i32>(a.y) >> (n - 32u)), fill); }
  return vec2<u32>((a.x >> n) | (a.y << (32u - n)), bitcast<u32>(bitcast<i32>(a.y) >> n));
}
// Logical (unsigned) right shift by n in [0, 64).
fn u64_shr(a: vec2<u32>, n: u32) -> vec2<u32> {
  if (n == 0u) { return a; }
  if (n >= 32u) { return vec2<u32>(a.y >> (n - 32u), 0u); }
  return vec2<u32>((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}
fn i64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, i64_lt(b, a)); }
fn i64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, i64_lt(a, b)); }
fn i64_sign(a: vec2<u32>) -> vec2<u32> {
  if (i64_is_zero(a)) { return vec2<u32>(0u, 0u); }
  return select(vec2<u32>(1u, 0u), vec2<u32>(0xffffffffu, 0xffffffffu), i64_is_neg(a));
}
fn i64_from_bool(b: bool) -> vec2<u32> { return vec2<u32>(select(0u, 1u, b), 0u); }
// Round-to-nearest-even conversion, as the CPU's int64 -> float cast.
fn u64_to_f32(m: vec2<u32>) -> f32 {
  if (m.y == 0u && m.x < 0x1000000u) { return f32(m.x); }
  let top = select(31u - countLeadingZeros(m.x), 63u - countLeadingZeros(m.y), m.y != 0u);
  var shift = top - 23u;
  // mantissa = m >> shift (24 bits), rest = the bits shifted out. The shift is logical:
  // m is unsigned (|INT64_MIN| has the top bit set).
  let s = vec2<u32>(shift, 0u);
  var mant = u64_shr(m, shift).x;
  let back = i64_shl(vec2<u32>(mant, 0u), s);
  let rest = i64_sub(m, back);
  let half = i64_shl(vec2<u32>(1u, 0u), vec2<u32>(shift - 1u, 0u));
  if (u64_lt(half, rest) || (i64_eq(rest, half) && (mant & 1u) == 1u)) {
    mant = mant + 1u;
    if (mant == 0x1000000u) { mant = mant >> 1u; shift = shift + 1u; }
  }
  return ldexp(f32(mant), i32(shift));
}
fn i64_to_f32(a: vec2<u32>) -> f32 {
  let m = u64_to_f32(i64_abs(a));
  return select(m, -m, i64_is_neg(a));
}
// Truncating conversion; NaN and out-of-range values give INT64_MIN, as x86 does.
fn i64_from_f32(x: f32) -> vec2<u32> {
  if (!(abs(x) < 9223372036854775808.0)) { return vec2<u32>(0u, 0x80000000u); }
  let t = trunc(abs(x));
  let hi = floor(t / 4294967296.0);
  let lo = t - hi * 4294967296.0;
  let m = vec2<u32>(u32(lo), u32(hi));
  return select(m, i64_neg(m), x < 0.0);
}
fn i64_pow(base: vec2<u32>, e: vec2<u32>) -> vec2<u32> {
  let one = vec2<u32>(1u, 0u);
  if (i64_is_neg(e)) {
    if (i64_eq(base, one)) { return one; }
    if (i64_eq(base, vec2<u32>(0xffffffffu, 0xffffffffu))) {
      return select(one, base, (e.x & 1u) == 1u);
    }
    return vec2<u32>(0u, 0u);
  }
  var result = one;
  var b = base;
  var x = e;
  loop {
    if (i64_is_zero(x)) { break; }
    if ((x.x & 1u) == 1u) { result = i64_mul(result, b); }
    b = i64_mul(b, b);
    x = vec2<u32>((x.x >> 1u) | (x.y << 31u), x.y >> 1u);
  }
  return result;
}
