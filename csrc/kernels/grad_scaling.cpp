#include "kernels/grad_scaling.h"

#include <cstring>
#include <limits>
#include <string>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

std::string w(uint32_t word) { return "uw(" + std::to_string(word) + "u)"; }

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

// unscale_grad's uniform words: offsets, then sizes and strides (innermost first, so
// the index loop peels dims from the fastest one).
constexpr uint32_t kGradOff = 4, kInvScaleOff = 5, kFoundInfOff = 6, kRank = 7, kSizes = 8,
                   kStrides = kSizes + kGradScalingMaxDims;

// update_loss_scale's words. Each factor is sent as float32 hi + lo parts (factor ~ hi + lo)
// so that scale * factor can be formed as the CPU does: in double, rounded to float once.
constexpr uint32_t kScaleOff = 4, kTrackerOff = 5, kFoundOff = 6, kGrowHi = 7, kGrowLo = 8,
                   kBackHi = 9, kBackLo = 10, kInterval = 11, kCanGrow = 12;

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
  l.key = std::string("unscale_grad:") + dtype_name(g.dtype);
  l.buffers = {{g.buffer, Access::ReadWrite, is_subword(g.dtype)},
               {inv_scale.buffer, Access::Read, false},
               {found_inf.buffer, Access::ReadWrite, true}};
  l.uniforms.assign(kStrides + kGradScalingMaxDims, 0);
  l.uniforms[kGradOff] = static_cast<uint32_t>(g.offset);
  l.uniforms[kInvScaleOff] = narrow_offset(inv_scale.offset, "inv_scale");
  l.uniforms[kFoundInfOff] = narrow_offset(found_inf.offset, "found_inf");
  l.uniforms[kRank] = static_cast<uint32_t>(rank);
  for (size_t d = 0; d < rank; ++d) {
    l.uniforms[kSizes + d] = static_cast<uint32_t>(g.sizes[rank - 1 - d]);
    l.uniforms[kStrides + d] = static_cast<uint32_t>(g.strides[rank - 1 - d]);
  }
  l.count = count;
  l.workgroup = 64;
  const DType dt = g.dtype;
  l.body = [&l, dt] {
    std::string s = kernel_load("load_grad", l.buffers, 0, dt) +
                    kernel_store("store_grad", l.buffers, 0, dt, Compute::F32) +
                    kernel_load("load_inv_scale", l.buffers, 1, DType::Float32);
    s += kernel_main(Grid::Invocations, 64);
    s += "  var rest = idx;\n"
         "  var at = " + w(kGradOff) + ";\n"
         "  for (var d = 0u; d < " + w(kRank) + "; d = d + 1u) {\n"
         "    let n = uw(" + std::to_string(kSizes) + "u + d);\n"
         "    at = at + (rest % n) * uw(" + std::to_string(kStrides) + "u + d);\n"
         "    rest = rest / n;\n"
         "  }\n"
         "  let v = load_grad(at);\n"
         // Any one invocation that sees inf/NaN marks the step; nothing ever clears it.
         "  if (!is_finite(v)) { atomicStore(&buf2[" + w(kFoundInfOff) + "], 0x3f800000u); }\n"
         "  let inv = load_inv_scale(" + w(kInvScaleOff) + ");\n"
         // As the CPU and CUDA: an inverse scale of exactly 1 leaves the bits alone.
         "  if (inv != 1.0) { store_grad(at, v * inv); }\n"
         "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

void update_loss_scale(Context& ctx, const LossScaleUpdate& u) {
  auto split = [](double f, uint32_t& hi_bits, uint32_t& lo_bits) {
    const float hi = static_cast<float>(f);
    const float lo = static_cast<float>(f - static_cast<double>(hi));
    hi_bits = f32_bits(hi);
    lo_bits = f32_bits(lo);
  };
  KernelLaunch l;
  l.key = "update_loss_scale";
  l.buffers = {{u.scale.buffer, Access::ReadWrite, false},
               {u.growth_tracker.buffer, Access::ReadWrite, false},
               {u.found_inf.buffer, Access::Read, false}};
  l.uniforms.assign(kCanGrow + 1, 0);
  l.uniforms[kScaleOff] = narrow_offset(u.scale.offset, "scale");
  l.uniforms[kTrackerOff] = narrow_offset(u.growth_tracker.offset, "growth_tracker");
  l.uniforms[kFoundOff] = narrow_offset(u.found_inf.offset, "found_inf");
  split(u.growth_factor, l.uniforms[kGrowHi], l.uniforms[kGrowLo]);
  split(u.backoff_factor, l.uniforms[kBackHi], l.uniforms[kBackLo]);
  // The tracker is int32: an interval outside [1, 2^31) is never reached, as on the CPU.
  const bool can_grow =
      u.growth_interval >= 1 && u.growth_interval <= std::numeric_limits<int32_t>::max();
  l.uniforms[kInterval] = can_grow ? static_cast<uint32_t>(u.growth_interval) : 0u;
  l.uniforms[kCanGrow] = can_grow ? 1u : 0u;
  l.count = 1;
  l.workgroup = 1;
  l.body = [] {
    std::string s =
        // Halves of a float with at most 12 significant bits each (Veltkamp), so that
        // their products below are exact; opaque_f32 keeps c - (c - a) from folding to a.
        "fn split12(a: f32) -> vec2<f32> {\n"
        "  let c = opaque_f32(4097.0 * a);\n"
        "  let h = opaque_f32(c - opaque_f32(c - a));\n"
        "  return vec2<f32>(h, a - h);\n"
        "}\n"
        // s * (hi + lo) rounded once: s * hi is exact as p + err (Dekker), lo adds below
        // the last bit of p. A factor exact in float32 (lo = 0) is a plain product, which
        // is then the CPU's double product rounded to float exactly.
        "fn scaled(s: f32, hi: f32, lo: f32) -> f32 {\n"
        "  let p = s * hi;\n"
        "  if (lo == 0.0 || !is_finite(p)) { return p; }\n"
        // Work on s times a power of two (exact) so that 4097 * s cannot overflow and the
        // error terms stay normal; the result is scaled back exactly.
        "  var k = vec2<f32>(1.0, 1.0);\n"
        "  if (abs(s) > 1.0e30) { k = vec2<f32>(0x1p-64f, 0x1p64f); }\n"
        "  else if (abs(s) < 1.0e-20) { k = vec2<f32>(0x1p64f, 0x1p-64f); }\n"
        "  let t = s * k.x;\n"
        "  let q = t * hi;\n"
        "  let a = split12(t);\n"
        "  let b = split12(hi);\n"
        "  let err = ((a.x * b.x - q) + a.x * b.y + a.y * b.x) + a.y * b.y;\n"
        "  return (q + (err + t * lo)) * k.y;\n"
        "}\n";
    s += kernel_main(Grid::Invocations, 1);
    s += "  let si = " + w(kScaleOff) + ";\n"
         "  let ti = " + w(kTrackerOff) + ";\n"
         "  let scale = bitcast<f32>(buf0[si]);\n"
         "  if (f32_truthy(bitcast<f32>(buf2[" + w(kFoundOff) + "]))) {\n"
         "    buf0[si] = bitcast<u32>(scaled(scale, bitcast<f32>(" + w(kBackHi) +
         "), bitcast<f32>(" + w(kBackLo) + ")));\n"
         "    buf1[ti] = 0u;\n"
         "    return;\n"
         "  }\n"
         "  let successful = bitcast<i32>(buf1[ti]) + 1;\n"
         "  if (" + w(kCanGrow) + " != 0u && successful == bitcast<i32>(" + w(kInterval) + ")) {\n"
         "    let grown = scaled(scale, bitcast<f32>(" + w(kGrowHi) + "), bitcast<f32>(" +
         w(kGrowLo) + "));\n"
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
