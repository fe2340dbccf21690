#include "kernels/nn_pad.h"

namespace twgpu::nn {

namespace {

// Sizes (depth, height, width) in and out, and the padding before each (an i32 as u32).
void set_params(NnKernel& k, const PadGeometry& g) {
  k.param_u32s("in_size", {g.in[0], g.in[1], g.in[2]})
      .param_u32s("out_size", {g.out[0], g.out[1], g.out[2]})
      .param_u32s("before", {static_cast<uint32_t>(g.before[0]), static_cast<uint32_t>(g.before[1]),
                             static_cast<uint32_t>(g.before[2])});
}

std::string source_fns(bool reflect) {
  std::string s =
      "fn out_pos(idx: u32) -> vec4<u32> {\n"
      "  let W = u_out_size(2u);\n  let H = u_out_size(1u);\n  let D = u_out_size(0u);\n"
      "  let t = idx / W;\n  let u = t / H;\n"
      "  return vec4<u32>(u / D, u % D, t % H, idx % W);\n}\n"
      "fn src(j: u32, o: u32) -> i32 {\n"
      "  let I = i32(u_in_size(j));\n  var i = i32(o) - bitcast<i32>(u_before(j));\n";
  if (reflect) {
    s += "  if (i < 0) { i = -i; }\n  if (i >= I) { i = 2 * (I - 1) - i; }\n  return i;\n}\n";
  } else {
    s += "  return clamp(i, 0, I - 1);\n}\n";
  }
  s += "fn src_index(idx: u32) -> u32 {\n  let o = out_pos(idx);\n"
       "  let d = src(0u, o.y);\n  let h = src(1u, o.z);\n  let w = src(2u, o.w);\n"
       "  let I = vec3<u32>(u_in_size(0u), u_in_size(1u), u_in_size(2u));\n"
       "  return o.x * I.x * I.y * I.z + u32((d * i32(I.y) + h) * i32(I.z) + w);\n}\n";
  return s;
}

}  // namespace

void pad_forward(Context& ctx, const Operand& x, const PadGeometry& g, const Operand& y) {
  NnKernel k;
  k.key = std::string("pad_") + (g.reflect ? "reflect" : "replicate");
  k.inputs = {x};
  k.outputs = {y};
  set_params(k, g);
  k.body = source_fns(g.reflect) + "fn run(idx: u32) { out0(idx, in0(src_index(idx))); }\n";
  launch_map(ctx, k, g.out_count());
}

void pad_backward(Context& ctx, const Operand& grad_out, const PadGeometry& g,
                  const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("pad_bwd_") + (g.reflect ? "reflect" : "replicate");
  k.inputs = {grad_out};
  k.outputs = {grad_input};
  k.accumulate = true;
  set_params(k, g);
  k.body = source_fns(g.reflect) + "fn run(idx: u32) { acc0(src_index(idx), in0(idx)); }\n";
  launch_map(ctx, k, g.out_count());
}

}  // namespace twgpu::nn
