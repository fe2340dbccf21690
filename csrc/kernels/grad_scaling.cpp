#include "kernels/grad_scaling.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

uint32_t f32_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

uint32_t narrow_offset(uint64_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max())
    fail(ErrorKind::Unsupported, std::string("torch_webgpu: grad scaling: ") + what +
                                     " beyond 2^32 elements of its buffer");
  return static_cast<uint32_t>(v);
}

// unscale_grad's uniforms: element offsets, then sizes and strides (innermost first, so
// the index loop peels dims from the fastest one).
const UniformLayout& unscale_layout() {
  static const UniformLayout layout({{"grad_offset"},
                                     {"inv_scale_offset"},
                                     {"found_inf_offset"},
                                     {"rank"},
                                     {"sizes", UniformType::U32, kGradScalingMaxDims},
                                     {"strides", UniformType::U32, kGradScalingMaxDims}});
  return layout;
}

// update_loss_scale's uniforms. The CPU multiplies the float scale by a double factor and
// rounds the double product to float; the kernel does the same in integers, so each factor
// is sent as its 53-bit significand (two words), its exponent and its sign, plus the
// float32 product path for zero and non-finite factors (4 words each, see FactorWords).
const UniformLayout& update_layout() {
  static const UniformLayout layout({{"scale_offset"},
                                     {"tracker_offset"},
                                     {"found_inf_offset"},
                                     {"interval"},
                                     {"can_grow"},
                                     {"growth_factor", UniformType::U32, 4},
                                     {"backoff_factor", UniformType::U32, 4}});
  return layout;
}

struct FactorWords {
  uint32_t significand_lo = 0, significand_hi = 0, exponent = 0, flags = 0;
};
constexpr uint32_t kFactorNegative = 1, kFactorSpecial = 2;

// f = significand * 2^exponent with significand in [2^52, 2^53).
FactorWords factor_words(double f) {
  FactorWords words;
  if (f == 0.0 || !std::isfinite(f)) {
    words.flags = kFactorSpecial;
    words.significand_lo = f32_bits(static_cast<float>(f));  // the special path's float factor
    return words;
  }
  int e = 0;
  const double m = std::frexp(std::fabs(f), &e);
  const uint64_t sig = static_cast<uint64_t>(std::ldexp(m, 53));
  words.significand_lo = static_cast<uint32_t>(sig);
  words.significand_hi = static_cast<uint32_t>(sig >> 32);
  words.exponent = static_cast<uint32_t>(static_cast<int32_t>(e - 53));
  words.flags = f < 0 ? kFactorNegative : 0;
  return words;
}

// scale_by(s, fw): the float nearest the double nearest s * factor, ties to even at both
// steps, as the CPU's float(double(s) * factor). Zeros, infinities and NaN take the float
// product (exact for them).
const char* const kScaleByWgsl = R"WGSL(
// x / 2^k rounded to nearest, ties to even, for k in [0, 64).
fn u64_shr_rne(x: vec2<u32>, k: u32) -> vec2<u32> {
  if (k == 0u) { return x; }
  let q = u64_shr(x, k);
  var rem = vec2<u32>(x.x & ((1u << k) - 1u), 0u);
  var half = vec2<u32>(1u << (k - 1u), 0u);
  if (k >= 32u) {
    rem = vec2<u32>(x.x, x.y & ((1u << (k - 32u)) - 1u));
    half = select(vec2<u32>(0u, 1u << (k - 33u)), vec2<u32>(0x80000000u, 0u), k == 32u);
  }
  let up = u64_lt(half, rem) || (all(rem == half) && (q.x & 1u) == 1u);
  return select(q, i64_add(q, vec2<u32>(1u, 0u)), up);
}
fn scale_by(s: f32, fw: vec4<u32>) -> f32 {
  let flags = fw.w;
  let sb = bitcast<u32>(s);
  let field = (sb >> 23u) & 0xffu;
  if ((flags & kFactorSpecial) != 0u || field == 255u || (sb & 0x7fffffffu) == 0u) {
    return s * bitcast<f32>(fw.x);
  }
  // s = ms * 2^es with ms in [2^23, 2^24) (subnormals normalized).
  var ms = (sb & 0x7fffffu) | select(0x800000u, 0u, field == 0u);
  var es = select(i32(field) - 150, -149, field == 0u);
  let norm = countLeadingZeros(ms) - 8u;
  ms = ms << norm;
  es = es - i32(norm);
  // M = ms * significand, 75 or 76 bits, in three words.
  let a = u32_mul_wide(ms, fw.x);
  let b = u32_mul_wide(ms, fw.y);
  let w1 = a.y + b.x;
  let w2 = b.y + select(0u, 1u, w1 < a.y);
  // M >> 16 with the dropped bits kept as a sticky bit: both roundings below drop at
  // least 7 more bits, so the sticky bit decides ties exactly as the full value would.
  let m = vec2<u32>((a.x >> 16u) | (w1 << 16u) | select(0u, 1u, (a.x & 0xffffu) != 0u),
                    (w1 >> 16u) | (w2 << 16u));
  let k1 = select(7u, 8u, (m.y >> 28u) != 0u);
  // To double: 53 bits, the unit 2^x.
  let d = u64_shr_rne(m, k1);
  let x = es + bitcast<i32>(fw.z) + 16 + i32(k1);
  let n = select(53, 54, (d.y >> 21u) != 0u);
  // To float: 24 bits, or fewer where the result is subnormal (unit 2^-149).
  var k2 = n - 24;
  if (x + n - 1 < -126) { k2 = -149 - x; }
  let sign = (sb ^ select(0u, 0x80000000u, (flags & kFactorNegative) != 0u)) & 0x80000000u;
  if (k2 > 63) { return bitcast<f32>(sign); }
  var f = u64_shr_rne(d, u32(k2)).x;
  var e = x + k2;
  if (f == 0x1000000u) { f = 0x800000u; e = e + 1; }
  if (f == 0u) { return bitcast<f32>(sign); }
  if (e + 23 > 127) { return bitcast<f32>(sign | 0x7f800000u); }
  return bitcast<f32>(sign | ((u32(e + 149) << 23u) + f));
}
)WGSL";

}  // namespace

void unscale_grad(Context& ctx, const StridedGrad& g, ScalarSlot inv_scale, ScalarSlot found_inf) {
  if (!is_floating(g.dtype))
    fail(ErrorKind::Unsupported,
         std::string("torch_webgpu: unscale_grad: unsupported dtype ") + dtype_name(g.dtype));
  const size_t rank = g.sizes.size();
  if (rank > static_cast<size_t>(kGradScalingMaxDims) || g.strides.size() != rank)
    fail(ErrorKind::Internal, "torch_webgpu: unscale_grad: bad rank");
  uint64_t count = 1, last = g.offset;
  for (size_t d = 0; d < rank; ++d) {
    count *= g.sizes[d];
    if (g.sizes[d] > 0) last += (g.sizes[d] - 1) * g.strides[d];
  }
  if (count == 0) return;
  narrow_offset(last, "gradient");

  KernelLaunch l;
  l.typed = {"unscale_grad", {static_cast<uint32_t>(g.dtype)}};
  l.buffers = {{g.buffer, Access::ReadWrite, is_subword(g.dtype)},
               {inv_scale.buffer, Access::Read, false},
               {found_inf.buffer, Access::ReadWrite, true}};
  std::vector<uint32_t> sizes(rank), strides(rank);
  for (size_t d = 0; d < rank; ++d) {
    sizes[d] = static_cast<uint32_t>(g.sizes[rank - 1 - d]);
    strides[d] = static_cast<uint32_t>(g.strides[rank - 1 - d]);
  }
  l.declare(unscale_layout())
      .set_u32("grad_offset", static_cast<uint32_t>(g.offset))
      .set_u32("inv_scale_offset", narrow_offset(inv_scale.offset, "inv_scale"))
      .set_u32("found_inf_offset", narrow_offset(found_inf.offset, "found_inf"))
      .set_u32("rank", static_cast<uint32_t>(rank))
      .set_u32s("sizes", sizes)
      .set_u32s("strides", strides);
  l.count = count;
  l.workgroup = 64;
  const DType dt = g.dtype;
  l.body = [&l, dt] {
    std::string s = kernel_load("load_grad", l.buffers, 0, dt) +
                    kernel_store("store_grad", l.buffers, 0, dt, Compute::F32) +
                    kernel_load("load_inv_scale", l.buffers, 1, DType::Float32);
    s += kernel_main(Grid::Invocations, 64);
    s += "  var rest = idx;\n"
         "  var at = u.grad_offset;\n"
         "  for (var d = 0u; d < u.rank; d = d + 1u) {\n"
         "    let n = u_sizes(d);\n"
         "    at = at + (rest % n) * u_strides(d);\n"
         "    rest = rest / n;\n"
         "  }\n"
         "  let v = load_grad(at);\n"
         // Any one invocation that sees inf/NaN marks the step; nothing ever clears it.
         "  if (!is_finite(v)) { atomicStore(&buf2[u.found_inf_offset], 0x3f800000u); }\n"
         "  let inv = load_inv_scale(u.inv_scale_offset);\n"
         // As the CPU and CUDA: an inverse scale of exactly 1 leaves the bits alone.
         "  if (inv != 1.0) { store_grad(at, v * inv); }\n"
         "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

void update_loss_scale(Context& ctx, const LossScaleUpdate& u) {
  KernelLaunch l;
  l.typed = {"update_loss_scale", {}};
  l.buffers = {{u.scale.buffer, Access::ReadWrite, false},
               {u.growth_tracker.buffer, Access::ReadWrite, false},
               {u.found_inf.buffer, Access::Read, false}};
  l.declare(update_layout())
      .set_u32("scale_offset", narrow_offset(u.scale.offset, "scale"))
      .set_u32("tracker_offset", narrow_offset(u.growth_tracker.offset, "growth_tracker"))
      .set_u32("found_inf_offset", narrow_offset(u.found_inf.offset, "found_inf"));
  for (auto [name, factor] : {std::pair{"growth_factor", u.growth_factor},
                              std::pair{"backoff_factor", u.backoff_factor}}) {
    const FactorWords f = factor_words(factor);
    l.set_u32s(name, {f.significand_lo, f.significand_hi, f.exponent, f.flags});
  }
  // The tracker is int32: an interval outside [1, 2^31) is never reached, as on the CPU.
  const bool can_grow =
      u.growth_interval >= 1 && u.growth_interval <= std::numeric_limits<int32_t>::max();
  l.set_u32("interval", can_grow ? static_cast<uint32_t>(u.growth_interval) : 0u);
  l.set_u32("can_grow", can_grow ? 1u : 0u);
  l.count = 1;
  l.workgroup = 1;
  l.body = [] {
    std::string s = "const kFactorNegative = " + std::to_string(kFactorNegative) +
                    "u;\nconst kFactorSpecial = " + std::to_string(kFactorSpecial) + "u;\n" +
                    kScaleByWgsl +
                    "fn factor(grow: bool) -> vec4<u32> {\n"
                    "  if (grow) { return vec4<u32>(u_growth_factor(0u), u_growth_factor(1u), "
                    "u_growth_factor(2u), u_growth_factor(3u)); }\n"
                    "  return vec4<u32>(u_backoff_factor(0u), u_backoff_factor(1u), "
                    "u_backoff_factor(2u), u_backoff_factor(3u));\n}\n";
    s += kernel_main(Grid::Invocations, 1);
    s += "  let si = u.scale_offset;\n"
         "  let ti = u.tracker_offset;\n"
         "  let scale = bitcast<f32>(buf0[si]);\n"
         "  if (f32_truthy(bitcast<f32>(buf2[u.found_inf_offset]))) {\n"
         "    buf0[si] = bitcast<u32>(scale_by(scale, factor(false)));\n"
         "    buf1[ti] = 0u;\n"
         "    return;\n"
         "  }\n"
         "  let successful = bitcast<i32>(buf1[ti]) + 1;\n"
         "  if (u.can_grow != 0u && successful == bitcast<i32>(u.interval)) {\n"
         "    let grown = scale_by(scale, factor(true));\n"
         // A scale that would overflow stays where it is.
         "    if (is_finite(grown)) { buf0[si] = bitcast<u32>(grown); }\n"
         "    buf1[ti] = 0u;\n"
         "  } else {\n"
         "    buf1[ti] = bitcast<u32>(successful);\n"
         "  }\n"
         "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
