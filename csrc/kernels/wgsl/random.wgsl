// Counter-based random numbers: Philox-4x32-10 (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC11) and the conversions of its words to draws. Eager fills
// (random.cpp, which adds its counter range from uniforms) and torch.compile's generated
// kernels (rng_rand, rng_randn, rng_randint: one draw per element offset) include it.

// (hi, lo) words of the 64-bit product a * b (a: a round constant), from 16-bit halves,
// schoolbook by columns: no partial sum overflows 32 bits, so no carry tests. (WGSL has no
// mulhi; this emulation is most of a fill's arithmetic.)
fn rng_mulhilo(a: u32, b: u32) -> vec2<u32> {
  let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
  let low = al * bl;
  let mid = ah * bl + (low >> 16u);
  let mid2 = al * bh + (mid & 0xffffu);
  return vec2<u32>(ah * bh + (mid >> 16u) + (mid2 >> 16u), a * b);
}
fn philox4x32_10(ctr_in: vec4<u32>, key_in: vec2<u32>) -> vec4<u32> {
  var c = ctr_in;
  var k = key_in;
  for (var round = 0u; round < 10u; round = round + 1u) {
    if (round > 0u) { k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u); }
    let p0 = rng_mulhilo(0xD2511F53u, c.x);
    let p1 = rng_mulhilo(0xCD9E8D57u, c.z);
    c = vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
  }
  return c;
}
// 24 random bits as floats: [0, 1), (0, 1], (0, 1).
fn rng_u01(x: u32) -> f32 { return f32(x >> 8u) * 5.9604644775390625e-8; }
fn rng_u01_open_closed(x: u32) -> f32 { return (f32(x >> 8u) + 1.0) * 5.9604644775390625e-8; }
fn rng_u01_open(x: u32) -> f32 { return (f32(x >> 8u) + 0.5) * 5.9604644775390625e-8; }
// Box-Muller on two words of the block.
fn rng_normal(r: vec4<u32>) -> f32 {
  let u1 = rng_u01_open_closed(r.x);
  let u2 = rng_u01(r.y);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307 * u2);
}
// Both Box-Muller values of two words (independent normals).
fn rng_box_muller(a: u32, b: u32) -> vec2<f32> {
  let radius = sqrt(-2.0 * log(rng_u01_open_closed(a)));
  let angle = 6.283185307 * rng_u01(b);
  return radius * vec2<f32>(cos(angle), sin(angle));
}
fn rng_u64_ge(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y > b.y || (a.y == b.y && a.x >= b.x); }
fn rng_u64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
// x mod m for unsigned 64-bit values (m > 0), bit by bit; the carry out of the shift
// keeps it exact for m >= 2^63.
fn rng_u64_mod(x: vec2<u32>, m: vec2<u32>) -> vec2<u32> {
  var r = vec2<u32>(0u, 0u);
  for (var i = 63i; i >= 0; i = i - 1) {
    let word = select(x.x, x.y, i >= 32);
    let bit = (word >> (u32(i) & 31u)) & 1u;
    let carry = r.y >> 31u;
    r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
    if (carry != 0u || rng_u64_ge(r, m)) { r = rng_u64_sub(r, m); }
  }
  return r;
}

// torch.compile's draws (Inductor's rand / randn / randint64 ops): the block at counter
// (offset, 0, 0, 0) under the 64-bit key `seed` (one of the graph's seeds, drawn by the
// eager generator), one draw per element offset.
fn rng_block_at(seed: vec2<u32>, offset: i32) -> vec4<u32> {
  return philox4x32_10(vec4<u32>(bitcast<u32>(offset), 0u, 0u, 0u), seed);
}
fn rng_rand(seed: vec2<u32>, offset: i32) -> f32 { return rng_u01(rng_block_at(seed, offset).x); }
fn rng_randn(seed: vec2<u32>, offset: i32) -> f32 { return rng_normal(rng_block_at(seed, offset)); }
// Uniform in [low, high) (high > low, both 32-bit: generated kernels compute int64 in
// i32): 64 random bits modulo the range, as Inductor's other backends draw it.
fn rng_randint(seed: vec2<u32>, offset: i32, low: i32, high: i32) -> i32 {
  let r = rng_block_at(seed, offset);
  let range = bitcast<u32>(high) - bitcast<u32>(low);
  return bitcast<i32>(bitcast<u32>(low) + rng_u64_mod(r.xy, vec2<u32>(range, 0u)).x);
}
