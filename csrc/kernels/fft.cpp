#include "kernels/fft.h"

#include <string>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// Element offsets, sizes along the axis, the pass's span and radix, the twiddles' sign
// (+1 or -1) and the output scale.
const UniformLayout& fft_layout() {
  static const UniformLayout layout({{"in_offset"},
                                     {"twiddle_offset"},
                                     {"out_offset"},
                                     {"inner"},
                                     {"n"},
                                     {"in_len"},
                                     {"out_len"},
                                     {"span"},
                                     {"sign", UniformType::F32},
                                     {"scale", UniformType::F32},
                                     {"rows"},
                                     {"radix"}});
  return layout;
}

uint32_t u32_checked(uint64_t v) {
  if (v >= (1ull << 32)) fail(ErrorKind::Unsupported, "torch_webgpu: FFT over too many elements");
  return static_cast<uint32_t>(v);
}

// WGSL helpers shared by both kernels: ld(o, t, i) reads logical element t of row (o, i)
// of the input, st(o, t, i, v) writes output element t (dropped past out_len), tw(t) the
// twiddle exp(sign * 2 pi i t / n), cmul the complex product.
std::string helpers(FftInput in, FftOutput out) {
  std::string s =
      "fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {\n"
      "  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);\n}\n"
      "fn opaque2(v: vec2<f32>) -> vec2<f32> { return vec2<f32>(opaque_f32(v.x), opaque_f32(v.y)); }\n"
      "fn tw(t: u32) -> vec2<f32> {\n"
      "  let b = u.twiddle_offset + 2u * t;\n"
      "  return vec2<f32>(bitcast<f32>(buf1[b]), u.sign * bitcast<f32>(buf1[b + 1u]));\n}\n"
      "fn ld_at(o: u32, t: u32, i: u32) -> vec2<f32> {\n"
      "  let e = u.in_offset + (o * u.in_len + t) * u.inner + i;\n";
  if (in == FftInput::Real)
    s += "  return vec2<f32>(bitcast<f32>(buf0[e]), 0.0);\n}\n";
  else
    s += "  return vec2<f32>(bitcast<f32>(buf0[2u * e]), bitcast<f32>(buf0[2u * e + 1u]));\n}\n";
  s += "fn ld(o: u32, t: u32, i: u32) -> vec2<f32> {\n";
  if (in == FftInput::Hermitian) {
    s += "  let n = u.n;\n"
         "  if (2u * t > n) { let v = ld_at(o, n - t, i); return vec2<f32>(v.x, -v.y); }\n"
         "  let v = ld_at(o, t, i);\n"
         "  if (t == 0u || 2u * t == n) { return vec2<f32>(v.x, 0.0); }\n"
         "  return v;\n}\n";
  } else {
    s += "  return ld_at(o, t, i);\n}\n";
  }
  s += "fn st(o: u32, t: u32, i: u32, v: vec2<f32>) {\n"
       "  if (t >= u.out_len) { return; }\n"
       "  let e = u.out_offset + (o * u.out_len + t) * u.inner + i;\n"
       "  let s = v * u.scale;\n";
  if (out == FftOutput::Real)
    s += "  buf2[e] = bitcast<u32>(s.x);\n}\n";
  else
    s += "  buf2[2u * e] = bitcast<u32>(s.x);\n  buf2[2u * e + 1u] = bitcast<u32>(s.y);\n}\n";
  // idx -> (o, t, i) for `rows` positions along the axis.
  s += "fn split(idx: u32) -> vec3<u32> {\n"
       "  let inner = u.inner;\n"
       "  let r = idx / inner;\n"
       "  return vec3<u32>(r / u.rows, r % u.rows, idx % inner);\n}\n";
  return s;
}

KernelLaunch make_launch(Context& ctx, const FftPass& p, const char* kind, uint64_t rows,
                         uint64_t span, uint64_t radix) {
  const uint64_t in_words = (p.in_offset + p.outer * p.in_len * p.inner) *
                            (p.input == FftInput::Real ? 1 : 2);
  const uint64_t out_words = (p.out_offset + p.outer * p.out_len * p.inner) *
                             (p.output == FftOutput::Real ? 1 : 2);
  u32_checked(in_words);
  u32_checked(out_words);
  u32_checked(p.twiddle_offset + 2 * p.n);
  KernelLaunch l;
  l.typed = {kind, {static_cast<uint32_t>(p.input), static_cast<uint32_t>(p.output)}};
  l.buffers = {{p.in, Access::Read, false},
               {p.twiddles, Access::Read, false},
               {p.out, Access::ReadWrite, false}};
  l.declare(fft_layout())
      .set_u32("in_offset", u32_checked(p.in_offset))
      .set_u32("twiddle_offset", u32_checked(p.twiddle_offset))
      .set_u32("out_offset", u32_checked(p.out_offset))
      .set_u32("inner", u32_checked(p.inner))
      .set_u32("n", u32_checked(p.n))
      .set_u32("in_len", u32_checked(p.in_len))
      .set_u32("out_len", u32_checked(p.out_len))
      .set_u32("span", u32_checked(span))
      .set_f32("sign", p.positive_exponent ? 1.0f : -1.0f)
      .set_f32("scale", p.scale)
      .set_u32("rows", u32_checked(rows))
      .set_u32("radix", u32_checked(radix));
  l.count = u32_checked(p.outer * rows * p.inner);
  l.workgroup = ctx.caps().workgroup_1d();
  return l;
}

}  // namespace

void fft_pass(Context& ctx, const FftPass& p, uint64_t span, uint64_t radix) {
  if (p.outer * p.out_len * p.inner == 0) return;
  if (radix == 0 || p.n % (span * radix) != 0)
    fail(ErrorKind::Internal, "torch_webgpu: FFT pass radix does not divide the length");
  KernelLaunch l = make_launch(ctx, p, "fft_pass", p.out_len, span, radix);
  const std::string body = helpers(p.input, p.output) + kernel_main(Grid::Invocations, l.workgroup) +
      "  let c = split(idx);\n"
      "  let n = u.n;\n"
      "  let ns = u.span;\n"
      "  let radix = u.radix;\n"
      "  let len = ns * radix;\n"
      "  let d = c.y;\n"
      "  let k = d % ns;\n"
      "  let m = k + ((d / ns) % radix) * ns;\n"  // k + r Ns < Ns R
      "  let first = (d / len) * ns + k;\n"
      "  let stride = n / radix;\n"
      "  let step = n / len;\n"
      "  var acc = vec2<f32>(0.0, 0.0);\n"
      "  var err = vec2<f32>(0.0, 0.0);\n"
      "  var t = 0u;\n"  // (s * m) mod (Ns R), advanced by m each step
      "  for (var s = 0u; s < radix; s = s + 1u) {\n"
      // Compensated (two-sum) accumulation: long direct DFTs (large prime factors) stay
      // near one rounding instead of growing with the radix.
      "    let x = cmul(ld(c.x, first + s * stride, c.z), tw(t * step));\n"
      "    let sum = opaque2(acc + x);\n"
      "    let bb = opaque2(sum - acc);\n"
      "    err = err + ((acc - (sum - bb)) + (x - bb));\n"
      "    acc = sum;\n"
      "    t = t + m;\n"
      "    if (t >= len) { t = t - len; }\n"
      "  }\n"
      "  st(c.x, d, c.z, acc + err);\n}\n";
  l.body = [&body] { return body; };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
