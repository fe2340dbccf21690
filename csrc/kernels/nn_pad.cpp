#include "kernels/nn_pad.h"

namespace twgpu::nn {

namespace {

// Params: 0 planes, 1..3 in, 4..6 out, 7..9 padding before.
std::vector<uint32_t> params(const PadGeometry& g) {
  std::vector<uint32_t> p = {g.planes};
  for (int j = 0; j < 3; ++j) p.push_back(g.in[j]);
  for (int j = 0; j < 3; ++j) p.push_back(g.out[j]);
  for (int j = 0; j < 3; ++j) p.push_back(static_cast<uint32_t>(g.before[j]));
  return p;
}

std::string source_fns(bool reflect) {
  std::string s =
      "fn out_pos(idx: u32) -> vec4<u32> {\n"
      "  let W = pu(6u);\n  let H = pu(5u);\n  let D = pu(4u);\n"
      "  let t = idx / W;\n  let u = t / H;\n"
      "  return vec4<u32>(u / D, u % D, t % H, idx % W);\n}\n"
      "fn src(j: u32, o: u32) -> i32 {\n"
      "  let I = i32(pu(1u + j));\n  var i = i32(o) - pi(7u + j);\n";
  if (reflect) {
    s += "  if (i < 0) { i = -i; }\n  if (i >= I) { i = 2 * (I - 1) - i; }\n  return i;\n}\n";
  } else {
    s += "  return clamp(i, 0, I - 1);\n}\n";
  }
  s += "fn src_index(idx: u32) -> u32 {\n  let o = out_pos(idx);\n"
       "  let d = src(0u, o.y);\n  let h = src(1u, o.z);\n  let w = src(2u, o.w);\n"
       "  return o.x * pu(1u) * pu(2u) * pu(3u) + u32((d * i32(pu(2u)) + h) * i32(pu(3u)) + w);\n}\n";
  return s;
}

}  // namespace

void pad_forward(Context& ctx, const Operand& x, const PadGeometry& g, const Operand& y) {
  NnKernel k;
  k.key = std::string("pad_") + (g.reflect ? "reflect" : "replicate");
  k.inputs = {x};
  k.outputs = {y};
  k.params = params(g);
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
  k.params = params(g);
  k.body = source_fns(g.reflect) + "fn run(idx: u32) { acc0(src_index(idx), in0(idx)); }\n";
  launch_map(ctx, k, g.out_count());
}

}  // namespace twgpu::nn
