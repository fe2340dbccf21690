#include "kernels/segment_reduce.h"

#include <string>

#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

const UniformLayout& segment_layout() {
  static const UniformLayout layout({{"data_offset"},
                                     {"offsets_offset"},
                                     {"out_offset"},
                                     {"segments"},
                                     {"axis"},
                                     {"inner"},
                                     {"initial", UniformType::F32},
                                     {"has_initial"}});
  return layout;
}

// The CPU's start value and step per reduction (std::max / std::min keep a NaN
// accumulator; a NaN element replaces it).
const char* start_value(SegmentReduction r) {
  switch (r) {
    case SegmentReduction::Max: return "-f32_inf()";
    case SegmentReduction::Min: return "f32_inf()";
    case SegmentReduction::Prod: return "1.0";
    default: return "0.0";
  }
}
const char* step(SegmentReduction r) {
  switch (r) {
    case SegmentReduction::Max: return "select(select(acc, v, f32_lt(acc, v)), v, is_nan(v))";
    case SegmentReduction::Min: return "select(select(acc, v, f32_lt(v, acc)), v, is_nan(v))";
    case SegmentReduction::Prod: return "acc * v";
    default: return "acc + v";
  }
}

}  // namespace

void segment_reduce(Context& ctx, const SegmentReduceDesc& d) {
  const uint64_t count = d.outer * d.segments * d.inner;
  if (count == 0) return;
  if (d.data_offset + d.outer * d.axis * d.inner >= (1ull << 32) || count >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: segment_reduce over too many elements");
  KernelLaunch l;
  l.typed = {"segment_reduce",
             {static_cast<uint32_t>(d.reduction), static_cast<uint32_t>(d.dtype)}};
  l.buffers = {{d.data, Access::Read, false},
               {d.offsets, Access::Read, false},
               {d.out, Access::ReadWrite, is_subword(d.dtype)}};
  l.declare(segment_layout())
      .set_u32("data_offset", static_cast<uint32_t>(d.data_offset))
      .set_u32("offsets_offset", static_cast<uint32_t>(d.offsets_offset))
      .set_u32("out_offset", static_cast<uint32_t>(d.out_offset))
      .set_u32("segments", static_cast<uint32_t>(d.segments))
      .set_u32("axis", static_cast<uint32_t>(d.axis))
      .set_u32("inner", static_cast<uint32_t>(d.inner))
      .set_f32("initial", d.initial)
      .set_u32("has_initial", d.has_initial ? 1u : 0u);
  l.count = count;
  l.workgroup = 64;
  const SegmentReduction r = d.reduction;
  const DType dt = d.dtype;
  l.body = [&l, r, dt] {
    std::string s = kernel_load("load_data", l.buffers, 0, dt) +
                    kernel_load("load_offset", l.buffers, 1, DType::Int64) +
                    kernel_store("store_out", l.buffers, 2, dt, Compute::F32);
    // Half types accumulate in their own precision on the CPU: round after every step.
    if (dt == DType::Float16)
      s += "fn rnd(v: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(v)); }\n";
    else if (dt == DType::BFloat16)
      s += "fn rnd(v: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }\n";
    else
      s += "fn rnd(v: f32) -> f32 { return v; }\n";
    s += kernel_main(Grid::Invocations, 64);
    s += std::string("  let inner = u.inner;\n  let segs = u.segments;\n"
         "  let i = idx % inner;\n  let rest = idx / inner;\n"
         "  let seg = rest % segs;\n  let o = rest / segs;\n"
         "  let ob = u.offsets_offset + o * (segs + 1u) + seg;\n"
         // Offsets past the row (invalid input) are clamped: no read leaves it.
         "  let end = min(load_offset(ob + 1u).x, u.axis);\n"
         "  let first = min(load_offset(ob).x, end);\n"
         "  let has_initial = u.has_initial != 0u;\n"
         "  var acc = select(") + start_value(r) + ", u.initial, has_initial);\n"
         "  let row = u.data_offset + o * u.axis * inner + i;\n"
         "  for (var j = first; j < end; j = j + 1u) {\n"
         "    let v = load_data(row + j * inner);\n"
         "    acc = rnd(" + step(r) + ");\n"
         "  }\n";
    if (r == SegmentReduction::Mean) {
      // An empty segment's mean is NaN unless an initial value is given.
      s += "  let n = end - first;\n"
           "  if (n == 0u && !has_initial) { acc = f32_nan(); }\n"
           "  else if (n > 0u && !is_nan(acc)) { acc = rnd(div_f32(acc, f32(n))); }\n";
    }
    s += "  store_out(u.out_offset + idx, acc);\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
