#include "kernels/nn_fold.h"

namespace twgpu::nn {

namespace {

// Image size, blocks per row and column, kernel, dilation, padding and stride (H, W).
void set_params(NnKernel& k, const FoldGeometry& g) {
  k.param("H", g.H).param("W", g.W).param("oH", g.oH).param("oW", g.oW);
  k.param("kH", g.kH).param("kW", g.kW).param("dH", g.dH).param("dW", g.dW);
  k.param("pH", g.pH).param("pW", g.pW).param("sH", g.sH).param("sW", g.sW);
}

}  // namespace

void im2col(Context& ctx, const Operand& image, const FoldGeometry& g, const Operand& cols) {
  NnKernel k;
  k.key = "im2col";
  k.inputs = {image};
  k.outputs = {cols};
  set_params(k, g);
  k.body =
      "fn run(idx: u32) {\n"
      "  let ow = idx % u.oW;\n  var t = idx / u.oW;\n"
      "  let oh = t % u.oH;\n  t = t / u.oH;\n"
      "  let kw = t % u.kW;\n  t = t / u.kW;\n"
      "  let kh = t % u.kH;\n  let plane = t / u.kH;\n"
      "  let h = i32(oh * u.sH + kh * u.dH) - i32(u.pH);\n"
      "  let w = i32(ow * u.sW + kw * u.dW) - i32(u.pW);\n"
      "  var v = 0.0;\n"
      "  if (h >= 0 && h < i32(u.H) && w >= 0 && w < i32(u.W)) {\n"
      "    v = in0((plane * u.H + u32(h)) * u.W + u32(w));\n  }\n"
      "  out0(idx, v);\n}\n";
  launch_map(ctx, k, uint64_t(g.planes) * g.kH * g.kW * g.oH * g.oW);
}

void col2im(Context& ctx, const Operand& cols, const FoldGeometry& g, const Operand& image) {
  NnKernel k;
  k.key = "col2im";
  k.inputs = {cols};
  k.outputs = {image};
  set_params(k, g);
  k.body =
      "fn run(idx: u32) {\n"
      "  let w = i32(idx % u.W);\n  let h = i32((idx / u.W) % u.H);\n"
      "  let plane = idx / (u.H * u.W);\n"
      "  let L = u.oH * u.oW;\n  var s = 0.0;\n"
      "  for (var kh = 0u; kh < u.kH; kh = kh + 1u) {\n"
      "    let th = h + i32(u.pH) - i32(kh * u.dH);\n"
      "    if (th < 0 || th % i32(u.sH) != 0) { continue; }\n"
      "    let oh = u32(th / i32(u.sH));\n    if (oh >= u.oH) { continue; }\n"
      "    for (var kw = 0u; kw < u.kW; kw = kw + 1u) {\n"
      "      let tw = w + i32(u.pW) - i32(kw * u.dW);\n"
      "      if (tw < 0 || tw % i32(u.sW) != 0) { continue; }\n"
      "      let ow = u32(tw / i32(u.sW));\n      if (ow >= u.oW) { continue; }\n"
      "      s = s + in0(((plane * u.kH + kh) * u.kW + kw) * L + oh * u.oW + ow);\n"
      "    }\n  }\n  out0(idx, s);\n}\n";
  launch_map(ctx, k, uint64_t(g.planes) * g.H * g.W);
}

}  // namespace twgpu::nn
