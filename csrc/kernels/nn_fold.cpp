#include "kernels/nn_fold.h"

namespace twgpu::nn {

namespace {

// Params: 0 planes, 1 H, 2 W, 3 oH, 4 oW, 5 kH, 6 kW, 7 dH, 8 dW, 9 pH, 10 pW, 11 sH, 12 sW.
std::vector<uint32_t> params(const FoldGeometry& g) {
  return {g.planes, g.H, g.W, g.oH, g.oW, g.kH, g.kW, g.dH, g.dW, g.pH, g.pW, g.sH, g.sW};
}

}  // namespace

void im2col(Context& ctx, const Operand& image, const FoldGeometry& g, const Operand& cols) {
  NnKernel k;
  k.key = "im2col";
  k.inputs = {image};
  k.outputs = {cols};
  k.params = params(g);
  k.body =
      "fn run(idx: u32) {\n"
      "  let ow = idx % pu(4u);\n  var t = idx / pu(4u);\n"
      "  let oh = t % pu(3u);\n  t = t / pu(3u);\n"
      "  let kw = t % pu(6u);\n  t = t / pu(6u);\n"
      "  let kh = t % pu(5u);\n  let plane = t / pu(5u);\n"
      "  let h = i32(oh * pu(11u) + kh * pu(7u)) - pi(9u);\n"
      "  let w = i32(ow * pu(12u) + kw * pu(8u)) - pi(10u);\n"
      "  var v = 0.0;\n"
      "  if (h >= 0 && h < pi(1u) && w >= 0 && w < pi(2u)) {\n"
      "    v = in0((plane * pu(1u) + u32(h)) * pu(2u) + u32(w));\n  }\n"
      "  out0(idx, v);\n}\n";
  launch_map(ctx, k, uint64_t(g.planes) * g.kH * g.kW * g.oH * g.oW);
}

void col2im(Context& ctx, const Operand& cols, const FoldGeometry& g, const Operand& image) {
  NnKernel k;
  k.key = "col2im";
  k.inputs = {cols};
  k.outputs = {image};
  k.params = params(g);
  k.body =
      "fn run(idx: u32) {\n"
      "  let w = i32(idx % pu(2u));\n  let h = i32((idx / pu(2u)) % pu(1u));\n"
      "  let plane = idx / (pu(1u) * pu(2u));\n"
      "  let L = pu(3u) * pu(4u);\n  var s = 0.0;\n"
      "  for (var kh = 0u; kh < pu(5u); kh = kh + 1u) {\n"
      "    let th = h + pi(9u) - i32(kh * pu(7u));\n"
      "    if (th < 0 || th % pi(11u) != 0) { continue; }\n"
      "    let oh = u32(th / pi(11u));\n    if (oh >= pu(3u)) { continue; }\n"
      "    for (var kw = 0u; kw < pu(6u); kw = kw + 1u) {\n"
      "      let tw = w + pi(10u) - i32(kw * pu(8u));\n"
      "      if (tw < 0 || tw % pi(12u) != 0) { continue; }\n"
      "      let ow = u32(tw / pi(12u));\n      if (ow >= pu(4u)) { continue; }\n"
      "      s = s + in0(((plane * pu(5u) + kh) * pu(6u) + kw) * L + oh * pu(4u) + ow);\n"
      "    }\n  }\n  out0(idx, s);\n}\n";
  launch_map(ctx, k, uint64_t(g.planes) * g.H * g.W);
}

}  // namespace twgpu::nn
