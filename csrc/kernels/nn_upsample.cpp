#include "kernels/nn_upsample.h"

namespace twgpu::nn {

namespace {

// Sizes in and out and the scales (f32 bits) per dim (D, H, W), and align_corners.
void set_params(NnKernel& k, const UpsampleGeometry& g) {
  k.param_u32s("in_size", {g.in[0], g.in[1], g.in[2]})
      .param_u32s("out_size", {g.out[0], g.out[1], g.out[2]})
      .param_u32s("scale", {f32_bits(g.scale[0]), f32_bits(g.scale[1]), f32_bits(g.scale[2])})
      .param("align_corners", g.align_corners ? 1u : 0u);
}

const char* kCommon =
    "fn in_size(j: u32) -> i32 { return i32(u_in_size(j)); }\n"
    "fn out_size(j: u32) -> i32 { return i32(u_out_size(j)); }\n"
    "fn scale(j: u32) -> f32 { return bitcast<f32>(u_scale(j)); }\n"
    "fn out_pos(idx: u32) -> vec4<u32> {\n"
    "  let W = u_out_size(2u);\n  let H = u_out_size(1u);\n  let D = u_out_size(0u);\n"
    "  let t = idx / W;\n  let u = t / H;\n"
    "  return vec4<u32>(u / D, u % D, t % H, idx % W);\n}\n"
    "fn in_index(plane: u32, d: i32, h: i32, w: i32) -> u32 {\n"
    "  return plane * u_in_size(0u) * u_in_size(1u) * u_in_size(2u) + u32((d * in_size(1) + h) * in_size(2) + w);\n}\n"
    "fn src_nearest(j: u32, o: i32) -> i32 {\n"
    "  let I = in_size(j);\n  let O = out_size(j);\n"
    "  if (O == I) { return o; }\n  if (O == 2 * I) { return o >> 1u; }\n"
    "  return min(i32(floor(f32(o) * scale(j))), I - 1);\n}\n"
    "fn src_exact(j: u32, o: i32) -> i32 {\n"
    "  return min(i32(floor((f32(o) + 0.5) * scale(j))), in_size(j) - 1);\n}\n"
    "fn src_real(j: u32, o: i32, cubic: bool) -> f32 {\n"
    "  let sc = scale(j);\n  if (u.align_corners != 0u) { return sc * f32(o); }\n"
    "  let r = sc * (f32(o) + 0.5) - 0.5;\n"
    "  if (!cubic && r < 0.0) { return 0.0; }\n  return r;\n}\n"
    "struct Taps { i0: i32, i1: i32, l0: f32, l1: f32 }\n"
    "fn lin(j: u32, o: i32) -> Taps {\n"
    "  let I = in_size(j);\n"
    "  if (I == out_size(j)) { return Taps(o, o, 1.0, 0.0); }\n"
    "  let r = src_real(j, o, false);\n"
    "  let i0 = min(i32(floor(r)), I - 1);\n"
    "  let l1 = min(max(r - f32(i0), 0.0), 1.0);\n"
    "  return Taps(i0, i0 + select(0, 1, i0 < I - 1), wr(1.0 - l1), wr(l1));\n}\n"
    "fn cc1(x: f32) -> f32 { let A = -0.75; return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0; }\n"
    "fn cc2(x: f32) -> f32 { let A = -0.75; return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A; }\n"
    // (first tap index, coefficients of taps first..first+3), taps clamped by the caller.
    "struct Cubic { i: i32, c: vec4<f32> }\n"
    "fn cub(j: u32, o: i32) -> Cubic {\n"
    "  let I = in_size(j);\n  let r = src_real(j, o, true);\n"
    "  let i0 = min(i32(floor(r)), I - 1);\n"
    "  let t = min(max(r - f32(i0), 0.0), 1.0);\n"
    "  return Cubic(i0 - 1, vec4<f32>(wr(cc2(t + 1.0)), wr(cc1(t)), wr(cc1(1.0 - t)), wr(cc2(2.0 - t))));\n}\n"
    "fn clampi(i: i32, j: u32) -> i32 { return clamp(i, 0, in_size(j) - 1); }\n";

// Linear: the weighted taps over the op's dims, as nested sums (inner dim first).
std::string linear_value(int nd) {
  auto X = [](const std::string& d, const std::string& h, const std::string& w) {
    return "in0(in_index(o.x, " + d + ", " + h + ", " + w + "))";
  };
  auto row = [&](const std::string& d, const std::string& h) {
    return "(c.l0 * " + X(d, h, "c.i0") + " + c.l1 * " + X(d, h, "c.i1") + ")";
  };
  if (nd == 1) return row("0", "0");
  auto plane = [&](const std::string& d) {
    return "(b.l0 * " + row(d, "b.i0") + " + b.l1 * " + row(d, "b.i1") + ")";
  };
  if (nd == 2) return plane("0");
  return "(a.l0 * " + plane("a.i0") + " + a.l1 * " + plane("a.i1") + ")";
}

std::string linear_scatter(int nd) {
  std::string s;
  const char* ds = nd == 3 ? "2" : "1";
  const char* hs = nd >= 2 ? "2" : "1";
  s += "  for (var p = 0; p < " + std::string(ds) + "; p = p + 1) {\n"
       "    let di = select(a.i0, a.i1, p == 1);\n    let dl = select(a.l0, a.l1, p == 1);\n"
       "    for (var q = 0; q < " + std::string(hs) + "; q = q + 1) {\n"
       "      let hi = select(b.i0, b.i1, q == 1);\n      let hl = select(b.l0, b.l1, q == 1);\n"
       "      acc0(in_index(o.x, di, hi, c.i0), g * dl * hl * c.l0);\n"
       "      acc0(in_index(o.x, di, hi, c.i1), g * dl * hl * c.l1);\n"
       "    }\n  }\n";
  return s;
}

std::string taps_header(Interp m) {
  std::string s = "  let o = out_pos(idx);\n";
  switch (m) {
    case Interp::Nearest:
      return s + "  let d = src_nearest(0u, i32(o.y));\n  let h = src_nearest(1u, i32(o.z));\n"
                 "  let w = src_nearest(2u, i32(o.w));\n";
    case Interp::NearestExact:
      return s + "  let d = src_exact(0u, i32(o.y));\n  let h = src_exact(1u, i32(o.z));\n"
                 "  let w = src_exact(2u, i32(o.w));\n";
    case Interp::Linear:
      return s + "  let a = lin(0u, i32(o.y));\n  let b = lin(1u, i32(o.z));\n"
                 "  let c = lin(2u, i32(o.w));\n";
    case Interp::Cubic:
      return s + "  let cy = cub(1u, i32(o.z));\n  let cx = cub(2u, i32(o.w));\n";
  }
  return s;
}

// `fn wr(w: f32) -> f32`: an interpolation weight as the CPU stores it, in the input's
// dtype: its generic upsampling kernels round the weights of half types (its bilinear 2-d
// kernel keeps them in float).
std::string weight_round(DType t, const UpsampleGeometry& g) {
  if (g.mode == Interp::Linear && g.nd == 2) return "fn wr(w: f32) -> f32 { return w; }\n";
  if (t == DType::Float16) return "fn wr(w: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(w)); }\n";
  if (t == DType::BFloat16) return "fn wr(w: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(w)); }\n";
  return "fn wr(w: f32) -> f32 { return w; }\n";
}

const char* mode_name(Interp m) {
  switch (m) {
    case Interp::Nearest: return "nearest";
    case Interp::NearestExact: return "nearest_exact";
    case Interp::Linear: return "linear";
    case Interp::Cubic: return "cubic";
  }
  return "?";
}

}  // namespace

void upsample_forward(Context& ctx, const Operand& x, const UpsampleGeometry& g, const Operand& y) {
  NnKernel k;
  k.key = std::string("upsample_") + mode_name(g.mode) + std::to_string(g.nd);
  k.inputs = {x};
  k.outputs = {y};
  set_params(k, g);
  std::string body = weight_round(x.dtype, g) + kCommon + std::string("fn run(idx: u32) {\n") +
                     taps_header(g.mode);
  switch (g.mode) {
    case Interp::Nearest:
    case Interp::NearestExact: body += "  out0(idx, in0(in_index(o.x, d, h, w)));\n"; break;
    case Interp::Linear: body += "  out0(idx, " + linear_value(g.nd) + ");\n"; break;
    case Interp::Cubic:
      body += "  var v = 0.0;\n"
              "  for (var j = 0; j < 4; j = j + 1) {\n"
              "    let h = clampi(cy.i + j, 1u);\n    var r = 0.0;\n"
              "    for (var i = 0; i < 4; i = i + 1) {\n"
              "      r = r + in0(in_index(o.x, 0, h, clampi(cx.i + i, 2u))) * cx.c[i];\n"
              "    }\n    v = v + r * cy.c[j];\n  }\n  out0(idx, v);\n";
      break;
  }
  k.body = body + "}\n";
  const uint64_t in_plane = uint64_t(g.in[0]) * g.in[1] * g.in[2], out_plane = g.out_count() / std::max<uint32_t>(g.planes, 1);
  launch_map_planes(ctx, k, g.planes, {in_plane, out_plane}, out_plane);
}

void upsample_backward(Context& ctx, const Operand& grad_out, const UpsampleGeometry& g,
                       const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("upsample_bwd_") + mode_name(g.mode) + std::to_string(g.nd);
  k.inputs = {grad_out};
  k.outputs = {grad_input};
  k.accumulate = true;
  set_params(k, g);
  std::string body = weight_round(grad_out.dtype, g) + kCommon +
                     std::string("fn run(idx: u32) {\n") + taps_header(g.mode) +
                     "  let g = in0(idx);\n";
  switch (g.mode) {
    case Interp::Nearest:
    case Interp::NearestExact: body += "  acc0(in_index(o.x, d, h, w), g);\n"; break;
    case Interp::Linear: body += linear_scatter(g.nd); break;
    case Interp::Cubic:
      body += "  for (var j = 0; j < 4; j = j + 1) {\n"
              "    let h = clampi(cy.i + j, 1u);\n"
              "    for (var i = 0; i < 4; i = i + 1) {\n"
              "      acc0(in_index(o.x, 0, h, clampi(cx.i + i, 2u)), g * cy.c[j] * cx.c[i]);\n"
              "    }\n  }\n";
      break;
  }
  k.body = body + "}\n";
  const uint64_t in_plane = uint64_t(g.in[0]) * g.in[1] * g.in[2], out_plane = g.out_count() / std::max<uint32_t>(g.planes, 1);
  launch_map_planes(ctx, k, g.planes, {out_plane, in_plane}, out_plane);
}

}  // namespace twgpu::nn
