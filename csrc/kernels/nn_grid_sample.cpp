#include "kernels/nn_grid_sample.h"

namespace twgpu::nn {

namespace {

// The sizes; the mode, padding, alignment and nd are baked into the source (and the key).
void grid_params(NnKernel& k, const GridGeometry& g) {
  k.param("channels", g.channels).param("points", g.points);
  k.param("in_w", g.w).param("in_h", g.h).param("in_d", g.d);
}

std::string grid_key(const char* what, const GridGeometry& g) {
  return std::string(what) + std::to_string(g.nd) + "d_m" + std::to_string(int(g.interp)) + "_p" +
         std::to_string(int(g.padding)) + (g.align_corners ? "_ac" : "");
}

// `R(v)`: v rounded to the storage dtype. The CPU computes half types one rounded
// operation at a time (coordinates, weights, sums); every step here rounds the same way
// (a no-op for float32).
std::string round_fn(DType t) {
  if (t == DType::Float16) return "fn R(v: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(v)); }\n";
  if (t == DType::BFloat16) return "fn R(v: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }\n";
  return "fn R(v: f32) -> f32 { return v; }\n";
}

// Coordinate helpers, as in ATen's GridSampler.h: `unnorm` maps [-1, 1] to pixel space,
// `source` applies the padding mode too; both return (coordinate, d coordinate / d grid
// value). `pad_coord` is the padding alone (bicubic taps). `inside` bounds-checks an
// integral coordinate, `at` is the input element of a (x, y, z) pixel of plane `base`.
std::string coordinate_helpers(const GridGeometry& g, DType dtype) {
  std::string s = round_fn(dtype);
  if (g.align_corners) {
    s += "fn unnorm(c: f32, size: u32) -> vec2<f32> {\n"
         "  let s1 = R(f32(size - 1u));\n"
         "  return vec2<f32>(R(R(R(c + 1.0) * 0.5) * s1), R(s1 * 0.5));\n}\n";
  } else if (g.nd == 2 && dtype == DType::Float32) {
    // The CPU's vectorized 2-d float kernel computes (c + 1) * (size / 2) - 0.5 with a
    // fused multiply-add (one rounding): the exact product as a sum of two floats
    // (Dekker), then one rounded sum. opaque_f32 keeps the compiler from fusing or
    // reassociating the steps.
    s += "fn split_f32(a: f32) -> vec2<f32> {\n"
         "  let t = opaque_f32(4097.0 * a);\n  let hi = opaque_f32(t - opaque_f32(t - a));\n"
         "  return vec2<f32>(hi, a - hi);\n}\n"
         "fn unnorm(c: f32, size: u32) -> vec2<f32> {\n"
         "  let a = c + 1.0;\n  let b = f32(size) * 0.5;\n"
         "  let p = opaque_f32(a * b);\n"
         "  if (!(abs(a) < 1e30)) { return vec2<f32>(p - 0.5, b); }\n"  // (the split would overflow)
         "  let sa = split_f32(a);\n  let sb = split_f32(b);\n"
         "  let err = ((opaque_f32(sa.x * sb.x) - p) + opaque_f32(sa.x * sb.y) + opaque_f32(sa.y * sb.x)) +"
         " opaque_f32(sa.y * sb.y);\n"
         // p - 0.5 exactly as s + e (TwoSum), then one rounding of s + (e + err).
         "  let s = opaque_f32(p - 0.5);\n"
         "  let bb = opaque_f32(s - p);\n"
         "  let e = opaque_f32(p - opaque_f32(s - bb)) + opaque_f32(-0.5 - bb);\n"
         "  return vec2<f32>(opaque_f32(s + opaque_f32(e + err)), b);\n}\n";
  } else {
    s += "fn unnorm(c: f32, size: u32) -> vec2<f32> {\n"
         "  let s0 = R(f32(size));\n"
         // (opaque: a fused multiply-add would round once where the CPU rounds twice)
         "  return vec2<f32>(R(R(opaque_f32(R(R(c + 1.0) * s0)) - 1.0) * 0.5), R(s0 * 0.5));\n}\n";
  }
  // Borders count as outside for the gradient (as on the CPU); NaN clips to 0 (as in the
  // CPU's vectorized kernel).
  s += "fn clip_g(x: f32, size: u32) -> vec2<f32> {\n"
       "  let hi = R(f32(size - 1u));\n"
       "  if (x <= 0.0 || is_nan(x)) { return vec2<f32>(0.0, 0.0); }\n"
       "  if (x >= hi) { return vec2<f32>(hi, 0.0); }\n"
       "  return vec2<f32>(x, 1.0);\n}\n";
  // Reflection about the borders (pixel centres when aligned, pixel edges otherwise).
  // The remainder is exact (the CPU's fmod); the flip count comes from the rounded
  // quotient, as on the CPU.
  s += "fn reflect_g(x: f32, size: u32) -> vec2<f32> {\n";
  if (g.align_corners) {
    s += "  if (size <= 1u) { return vec2<f32>(0.0, 0.0); }\n"
         "  let lo = 0.0;\n  let span = R(R(f32(2u * (size - 1u))) * 0.5);\n";
  } else {
    s += "  let lo = -0.5;\n  let span = R(R(f32(2u * size)) * 0.5);\n";
  }
  // opaque_f32 pins the order of the rounded steps (shader compilers reassociate).
  s += "  var v = opaque_f32(R(x - lo));\n  var sign = 1.0;\n"
       "  if (v < 0.0) { v = -v; sign = -1.0; }\n"
       "  let q = div_f32(v, span);\n"
       "  let flips = floor(R(q));\n"
       // The product rounded on its own, as the CPU's vector code does (opaque: a fused
       // multiply-add would skip that rounding on drivers that contract, NVIDIA's).
       "  var extra = opaque_f32(v - opaque_f32(floor(q) * span));\n"
       "  if (extra < 0.0) { extra = opaque_f32(extra + span); }\n"
       "  if (extra >= span) { extra = opaque_f32(extra - span); }\n"
       "  if (flips - 2.0 * floor(flips * 0.5) == 0.0) { return vec2<f32>(R(extra + lo), sign); }\n"
       "  return vec2<f32>(R(opaque_f32(R(span - extra)) + lo), -sign);\n}\n";
  s += "fn source(c: f32, size: u32) -> vec2<f32> {\n  let at = unnorm(c, size);\n";
  switch (g.padding) {
    case GridPadding::Zeros: s += "  return at;\n"; break;
    case GridPadding::Border:
      s += "  let k = clip_g(at.x, size);\n  return vec2<f32>(k.x, at.y * k.y);\n";
      break;
    case GridPadding::Reflection:
      s += "  let f = reflect_g(at.x, size);\n  let k = clip_g(f.x, size);\n"
           "  return vec2<f32>(k.x, at.y * f.y * k.y);\n";
      break;
  }
  s += "}\nfn pad_coord(x: f32, size: u32) -> f32 {\n";
  switch (g.padding) {
    case GridPadding::Zeros: s += "  return x;\n"; break;
    case GridPadding::Border: s += "  return clip_g(x, size).x;\n"; break;
    case GridPadding::Reflection: s += "  return clip_g(reflect_g(x, size).x, size).x;\n"; break;
  }
  s += "}\n"
       "fn inside(x: f32, size: u32) -> bool { return x >= 0.0 && x < f32(size); }\n"
       "fn at(base: u32, x: f32, y: f32, z: f32) -> u32 {\n"
       "  return base + (u32(z) * u.in_h + u32(y)) * u.in_w + u32(x);\n}\n";
  // Cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for fraction t, and
  // their derivatives as the CPU writes them (d weight / d distance: minus d / dt).
  s += "fn cubic1(x: f32) -> f32 { return R(R(R(R(R(1.25 * x) - 2.25) * x) * x) + 1.0); }\n"
       "fn cubic2(x: f32) -> f32 { return R(R(R(R(R(R(-0.75 * x) + 3.75) * x) - 6.0) * x) + 3.0); }\n"
       "fn cubic_coeffs(t: f32) -> vec4<f32> {\n"
       "  let t1 = R(1.0 - t);\n"
       "  return vec4<f32>(cubic2(R(t + 1.0)), cubic1(t), cubic1(t1), cubic2(R(t1 + 1.0)));\n}\n"
       "fn cubic_grads(t: f32) -> vec4<f32> {\n"
       "  let x0 = -1.0 - t;\n  let x1 = -t;\n  let x2 = 1.0 - t;\n  let x3 = 2.0 - t;\n"
       "  return vec4<f32>((2.25 * x0 + 7.5) * x0 + 6.0, (-3.75 * x1 - 4.5) * x1,\n"
       "                   (3.75 * x2 - 4.5) * x2, (-2.25 * x3 + 7.5) * x3 - 6.0);\n}\n"
       "fn tap_index(base: u32, x: f32, y: f32) -> u32 {\n"
       "  let px = trunc(pad_coord(R(x), u.in_w));\n  let py = trunc(pad_coord(R(y), u.in_h));\n"
       "  if (inside(px, u.in_w) && inside(py, u.in_h)) { return at(base, px, py, 0.0); }\n"
       "  return 0xffffffffu;\n}\n";
  return s;
}

// WGSL statements defining sx, sy, sz (source coordinates) and mx, my, mz (their
// derivatives) from the grid values at gb; bicubic uses the unpadded coordinates.
std::string source_coords(const GridGeometry& g, const std::string& grid_in) {
  const char* fn = g.interp == GridInterp::Bicubic ? "unnorm" : "source";
  std::string s;
  const char* axis[3] = {"x", "y", "z"};
  const char* size[3] = {"u.in_w", "u.in_h", "u.in_d"};
  for (int k = 0; k < 3; ++k) {
    if (k < g.nd) {
      s += std::string("  let r") + axis[k] + " = " + fn + "(" + grid_in + "(gb + " + std::to_string(k) +
           "u), " + size[k] + ");\n";
      s += std::string("  let s") + axis[k] + " = r" + axis[k] + ".x;\n  let m" + axis[k] + " = r" +
           axis[k] + ".y;\n";
    } else {
      s += std::string("  let s") + axis[k] + " = 0.0;\n  let m" + axis[k] + " = 0.0;\n";
    }
  }
  return s;
}

// The corner loop of (tri)linear interpolation: defines per corner k `ci` (the input
// element, 0xffffffff outside), `wx`, `wy`, `wz` (axis weights) and `sgx`, `sgy`, `sgz`
// (their derivatives' signs), then runs `per_corner`.
std::string linear_corners(const GridGeometry& g, const std::string& per_corner) {
  const bool three = g.nd == 3;
  std::string s =
      "  let x0 = floor(sx);\n  let y0 = floor(sy);\n  let z0 = floor(sz);\n"
      "  for (var k = 0u; k < " + std::string(three ? "8u" : "4u") + "; k = k + 1u) {\n"
      "    let hx = (k & 1u) != 0u;\n    let hy = (k & 2u) != 0u;\n    let hz = (k & 4u) != 0u;\n"
      "    let cx = select(x0, x0 + 1.0, hx);\n    let cy = select(y0, y0 + 1.0, hy);\n"
      "    let cz = select(z0, z0 + 1.0, hz);\n"
      "    let wx = select(R(R(x0 + 1.0) - sx), R(sx - x0), hx);\n"
      "    let wy = select(R(R(y0 + 1.0) - sy), R(sy - y0), hy);\n"
      "    let wz = select(R(R(z0 + 1.0) - sz), R(sz - z0), hz);\n"
      "    let sgx = select(-1.0, 1.0, hx);\n    let sgy = select(-1.0, 1.0, hy);\n"
      "    let sgz = select(-1.0, 1.0, hz);\n"
      "    var ci = 0xffffffffu;\n"
      "    if (inside(cx, u.in_w) && inside(cy, u.in_h)" +
      std::string(three ? " && inside(cz, u.in_d)" : "") +
      ") { ci = at(base, cx, cy, cz); }\n" + per_corner + "  }\n";
  return s;
}

}  // namespace

void grid_sample_forward(Context& ctx, const Operand& input, const Operand& grid,
                         const GridGeometry& g, const Operand& out) {
  NnKernel k;
  k.key = grid_key("grid_fwd", g);
  k.inputs = {input, grid};
  k.outputs = {out};
  grid_params(k, g);
  const bool three = g.nd == 3;
  std::string s = coordinate_helpers(g, input.dtype) +
                  "fn run(e: u32) {\n"
                  "  let P = u.points;\n  let p = e % P;\n  let nc = e / P;\n  let n = nc / u.channels;\n"
                  "  let gb = (n * P + p) * " + std::to_string(g.nd) + "u;\n"
                  "  let base = nc * (u.in_w * u.in_h * u.in_d);\n" +
                  source_coords(g, "in1");
  switch (g.interp) {
    case GridInterp::Bilinear:
      // Corners outside add 0 * weight (NaN for a NaN coordinate, as on the CPU).
      s += "  var v = 0.0;\n" +
           linear_corners(g, std::string("    var val = 0.0;\n"
                                         "    if (ci != 0xffffffffu) { val = in0(ci); }\n"
                                         "    v = R(v + R(val * ") +
                                 (three ? "R(R(wx * wy) * wz)" : "R(wx * wy)") + "));\n") +
           "  out0(e, v);\n";
      break;
    case GridInterp::Nearest:
      s += std::string("  let nx = round(sx);\n  let ny = round(sy);\n  let nz = round(sz);\n") +
           "  if (inside(nx, u.in_w) && inside(ny, u.in_h)" + (three ? " && inside(nz, u.in_d)" : "") +
           ") { out0(e, in0(at(base, nx, ny, nz))); } else { out0(e, 0.0); }\n";
      break;
    case GridInterp::Bicubic:
      s += "  let x0 = floor(sx);\n  let y0 = floor(sy);\n"
           "  let cx = cubic_coeffs(R(sx - x0));\n  let cy = cubic_coeffs(R(sy - y0));\n"
           "  var v = 0.0;\n"
           "  for (var j = 0u; j < 4u; j = j + 1u) {\n"
           "    var row = 0.0;\n"
           "    for (var i = 0u; i < 4u; i = i + 1u) {\n"
           "      let ti = tap_index(base, x0 - 1.0 + f32(i), y0 - 1.0 + f32(j));\n"
           "      var val = 0.0;\n"
           "      if (ti != 0xffffffffu) { val = in0(ti); }\n"
           "      row = R(row + R(val * cx[i]));\n"
           "    }\n"
           "    v = R(v + R(row * cy[j]));\n"
           "  }\n"
           "  out0(e, v);\n";
      break;
  }
  k.body = s + "}\n";
  launch_map(ctx, k, uint64_t(g.n) * g.channels * g.points);
}

void grid_sample_backward(Context& ctx, const Operand& grad_out, const Operand& input,
                          const Operand& grid, const GridGeometry& g, const Operand& grad_input,
                          const Operand& grad_grid) {
  NnKernel k;
  const bool with_input = grad_input.buffer != nullptr;
  k.key = grid_key("grid_bwd", g) + (with_input ? "_gi" : "");
  k.inputs = {grad_out, input, grid};
  k.outputs = with_input ? std::vector<Operand>{grad_input, grad_grid} : std::vector<Operand>{grad_grid};
  k.accumulate = true;
  grid_params(k, g);
  const bool three = g.nd == 3;
  std::string s = coordinate_helpers(g, input.dtype);
  s += with_input ? "fn add_in(i: u32, v: f32) { if (v != 0.0) { acc0(i, v); } }\n"
                    "fn add_grid(i: u32, v: f32) { acc1(i, v); }\n"
                  : "fn add_in(i: u32, v: f32) { }\n"
                    "fn add_grid(i: u32, v: f32) { acc0(i, v); }\n";
  // One invocation per grid point, over the channels.
  s += "fn run(q: u32) {\n"
       "  let P = u.points;\n  let n = q / P;\n  let p = q % P;\n"
       "  let gb = q * " + std::to_string(g.nd) + "u;\n"
       "  let plane = u.in_w * u.in_h * u.in_d;\n" +
       source_coords(g, "in2") +
       "  var gx = 0.0;\n  var gy = 0.0;\n  var gz = 0.0;\n";
  std::string per_channel;
  switch (g.interp) {
    case GridInterp::Bilinear:
      per_channel = linear_corners(
          g, std::string("    if (ci != 0xffffffffu) {\n"
                         "      add_in(ci, (wx * wy") + (three ? " * wz" : "") + ") * go);\n"
                         "      let val = in1(ci) * go;\n"
                         "      gx = gx + sgx * val * wy" + (three ? " * wz" : "") + ";\n"
                         "      gy = gy + sgy * val * wx" + (three ? " * wz" : "") + ";\n" +
                         (three ? "      gz = gz + sgz * val * wx * wy;\n" : "") + "    }\n");
      break;
    case GridInterp::Nearest:
      per_channel = std::string("    if (inside(round(sx), u.in_w) && inside(round(sy), u.in_h)") +
                    (three ? " && inside(round(sz), u.in_d)" : "") +
                    ") { add_in(at(base, round(sx), round(sy), round(sz)), go); }\n";
      break;
    case GridInterp::Bicubic:
      per_channel =
          "    for (var j = 0u; j < 4u; j = j + 1u) {\n"
          "      for (var i = 0u; i < 4u; i = i + 1u) {\n"
          "        let ti = tap_index(base, x0 - 1.0 + f32(i), y0 - 1.0 + f32(j));\n"
          "        if (ti != 0xffffffffu) {\n"
          "          add_in(ti, go * cx[i] * cy[j]);\n"
          "          let val = in1(ti);\n"
          "          gx = gx - val * dx[i] * cy[j] * go;\n"
          "          gy = gy - val * dy[j] * cx[i] * go;\n"
          "        }\n"
          "      }\n"
          "    }\n";
      s += "  let x0 = floor(sx);\n  let y0 = floor(sy);\n"
           "  let cx = cubic_coeffs(R(sx - x0));\n  let cy = cubic_coeffs(R(sy - y0));\n"
           "  let dx = cubic_grads(R(sx - x0));\n  let dy = cubic_grads(R(sy - y0));\n";
      break;
  }
  s += "  for (var c = 0u; c < u.channels; c = c + 1u) {\n"
       "    let nc = n * u.channels + c;\n"
       "    let base = nc * plane;\n"
       "    let go = in0(nc * P + p);\n" +
       per_channel + "  }\n";
  if (g.interp != GridInterp::Nearest) {
    s += "  add_grid(gb, mx * gx);\n  add_grid(gb + 1u, my * gy);\n";
    if (three) s += "  add_grid(gb + 2u, mz * gz);\n";
  }
  k.body = s + "}\n";
  launch_map(ctx, k, uint64_t(g.n) * g.points);
}

}  // namespace twgpu::nn
