#include "kernels/nn_pool.h"

namespace twgpu::nn {

namespace {

// The geometry per dim (D, H, W): sizes in and out, kernel, stride, padding, dilation;
// for averaging, whether padding counts and the divisor override (0: none).
void pool_params(NnKernel& k, const PoolGeometry& g, bool cip = false, int64_t div = 0) {
  auto dims = [&k](const char* name, const uint32_t* v) { k.param_u32s(name, {v[0], v[1], v[2]}); };
  dims("in_size", g.in);
  dims("out_size", g.out);
  dims("kernel", g.k);
  dims("stride", g.s);
  dims("padding", g.p);
  dims("dilation", g.d);
  k.param("count_include_pad", cip ? 1u : 0u).param_i32("divisor", static_cast<int32_t>(div));
}

// WGSL: the window of output o along dim j: vec4(first, step, taps, padded size), and the
// decomposition of a flat output index.
std::string window_fns(bool adaptive) {
  std::string s =
      "fn in_size(j: u32) -> i32 { return i32(u_in_size(j)); }\n"
      "fn out_size(j: u32) -> i32 { return i32(u_out_size(j)); }\n";
  if (adaptive) {
    s += "fn window(j: u32, o: i32) -> vec4<i32> {\n"
         "  let I = in_size(j);\n  let O = out_size(j);\n"
         "  let a = (o * I) / O;\n  let b = ((o + 1) * I + O - 1) / O;\n"
         "  return vec4<i32>(a, 1, b - a, b - a);\n}\n";
  } else {
    s += "fn window(j: u32, o: i32) -> vec4<i32> {\n"
         "  let k = i32(u_kernel(j));\n  let st = i32(u_stride(j));\n  let pd = i32(u_padding(j));\n"
         "  let dl = i32(u_dilation(j));\n  let a = o * st - pd;\n"
         "  return vec4<i32>(a, dl, k, min(a + k, in_size(j) + pd) - a);\n}\n";
  }
  s += "fn out_pos(idx: u32) -> vec4<u32> {\n"
       "  let W = u_out_size(2u);\n  let H = u_out_size(1u);\n  let D = u_out_size(0u);\n"
       "  let t = idx / W;\n  let u = t / H;\n"
       "  return vec4<u32>(u / D, u % D, t % H, idx % W);\n}\n"
       "fn plane_size() -> u32 { return u_in_size(0u) * u_in_size(1u) * u_in_size(2u); }\n"
       // Clamped [first, end) of a window for averaging (unit step).
       "fn clamp_window(w: vec4<i32>, j: u32) -> vec2<i32> {\n"
       "  return vec2<i32>(max(w.x, 0), min(w.x + w.z, in_size(j)));\n}\n"
       "fn avg_divisor(wd: vec4<i32>, wh: vec4<i32>, ww: vec4<i32>) -> f32 {\n"
       "  if (u.divisor != 0) { return f32(u.divisor); }\n"
       "  if (u.count_include_pad != 0u) { return f32(wd.w * wh.w * ww.w); }\n"
       "  let cd = clamp_window(wd, 0u);\n  let ch = clamp_window(wh, 1u);\n"
       "  let cw = clamp_window(ww, 2u);\n"
       "  return f32((cd.y - cd.x) * (ch.y - ch.x) * (cw.y - cw.x));\n}\n";
  return s;
}

const char* kWindows =
    "  let o = out_pos(idx);\n"
    "  let wd = window(0u, i32(o.y));\n  let wh = window(1u, i32(o.z));\n"
    "  let ww = window(2u, i32(o.w));\n"
    "  let ID = in_size(0);\n  let IH = in_size(1);\n  let IW = in_size(2);\n"
    "  let base = o.x * plane_size();\n";

// Max over the window (wd, wh, ww) of output idx; NaN wins (the last one); out0 gets the
// value, out1 the flat D*H*W position.
const char* kMaxOverWindow =
    "  var m = -f32_inf();\n  var mi = -1;\n"
    "  for (var a = 0; a < wd.z; a = a + 1) {\n"
    "    let id = wd.x + a * wd.y;\n    if (id < 0 || id >= ID) { continue; }\n"
    "    for (var b = 0; b < wh.z; b = b + 1) {\n"
    "      let ih = wh.x + b * wh.y;\n      if (ih < 0 || ih >= IH) { continue; }\n"
    "      for (var c = 0; c < ww.z; c = c + 1) {\n"
    "        let iw = ww.x + c * ww.y;\n        if (iw < 0 || iw >= IW) { continue; }\n"
    "        let pos = (id * IH + ih) * IW + iw;\n"
    "        let v = in0(base + u32(pos));\n"
    "        if (mi < 0) { mi = pos; }\n"
    "        if (v > m || is_nan(v)) { m = v; mi = pos; }\n"
    "      }\n    }\n  }\n"
    "  out0(idx, m);\n  out1(idx, max(mi, 0));\n}\n";

// Plane sizes of a pooling geometry, for launch_map_planes.
uint64_t in_plane(const PoolGeometry& g) { return uint64_t(g.in[0]) * g.in[1] * g.in[2]; }
uint64_t out_plane(const PoolGeometry& g) { return uint64_t(g.out[0]) * g.out[1] * g.out[2]; }

}  // namespace

void pool_max_forward(Context& ctx, const Operand& x, const PoolGeometry& g, const Operand& y,
                      const Operand& indices) {
  NnKernel k;
  k.key = std::string("pool_max") + (g.adaptive ? "_adaptive" : "");
  k.inputs = {x};
  k.outputs = {y, indices};
  pool_params(k, g);
  k.body = window_fns(g.adaptive) + "fn run(idx: u32) {\n" + kWindows + kMaxOverWindow;
  launch_map_planes(ctx, k, g.planes, {in_plane(g), out_plane(g), out_plane(g)}, out_plane(g));
}

void pool_max_fractional(Context& ctx, const Operand& x, const Operand& samples,
                         const PoolGeometry& g, const FractionalSamples& f, const Operand& y,
                         const Operand& indices) {
  NnKernel k;
  k.key = std::string("pool_max_fractional") + (f.round == DType::Float16    ? "h"
                                                : f.round == DType::BFloat16 ? "b"
                                                                             : "");
  k.inputs = {x, samples};
  k.outputs = {y, indices};
  pool_params(k, g);
  k.param("samples_per_plane", f.per_plane)
      .param_u32s("sample_index", {static_cast<uint32_t>(f.index[0]), static_cast<uint32_t>(f.index[1]),
                                   static_cast<uint32_t>(f.index[2])});
  // The CPU computes the window starts in the samples' dtype: half types round after
  // every operation.
  std::string round = "fn rnd(v: f32) -> f32 { return v; }\n";
  if (f.round == DType::Float16)
    round = "fn rnd(v: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(v)); }\n";
  if (f.round == DType::BFloat16)
    round = "fn rnd(v: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }\n";
  // Window o along dim j: start int((o + us) * alpha) - int(us * alpha) with
  // alpha = (I - k) / (O - 1), the last window flush with the end; k taps of step 1.
  k.body = round + window_fns(false) +
           "var<private> plane: u32 = 0u;\n"
           "fn window_frac(j: u32, o: i32) -> vec4<i32> {\n"
           "  let k = i32(u_kernel(j));\n  let I = in_size(j);\n  let O = out_size(j);\n"
           "  var a = I - k;\n"
           "  if (o < O - 1) {\n"
           "    let us = in1(plane * u.samples_per_plane + u_sample_index(j));\n"
           "    let alpha = rnd(div_f32(rnd(f32(I - k)), rnd(f32(O - 1))));\n"
           "    a = i32(rnd(rnd(f32(o) + us) * alpha)) - i32(rnd(us * alpha));\n"
           "  }\n"
           "  return vec4<i32>(a, 1, k, k);\n}\n"
           "fn run(idx: u32) {\n"
           "  let o = out_pos(idx);\n  plane = o.x;\n"
           "  let wd = window_frac(0u, i32(o.y));\n  let wh = window_frac(1u, i32(o.z));\n"
           "  let ww = window_frac(2u, i32(o.w));\n"
           "  let ID = in_size(0);\n  let IH = in_size(1);\n  let IW = in_size(2);\n"
           "  let base = o.x * plane_size();\n" + kMaxOverWindow;
  launch_map(ctx, k, g.out_count());
}

void pool_max_backward(Context& ctx, const Operand& grad_out, const Operand& indices,
                       const PoolGeometry& g, const Operand& grad_input) {
  NnKernel k;
  k.key = "pool_max_bwd";
  k.inputs = {grad_out, indices};
  k.outputs = {grad_input};
  k.accumulate = true;
  pool_params(k, g);
  k.body = window_fns(false) +
           "fn run(idx: u32) {\n  let o = out_pos(idx);\n"
           "  acc0(o.x * plane_size() + u32(in1(idx)), in0(idx));\n}\n";
  launch_map_planes(ctx, k, g.planes, {out_plane(g), out_plane(g), in_plane(g)}, out_plane(g));
}

void pool_avg_forward(Context& ctx, const Operand& x, const PoolGeometry& g,
                      bool count_include_pad, int64_t divisor_override, const Operand& y) {
  NnKernel k;
  k.key = std::string("pool_avg") + (g.adaptive ? "_adaptive" : "");
  k.inputs = {x};
  k.outputs = {y};
  pool_params(k, g, count_include_pad, divisor_override);
  k.body = window_fns(g.adaptive) + "fn run(idx: u32) {\n" + kWindows +
           "  let cd = clamp_window(wd, 0u);\n  let ch = clamp_window(wh, 1u);\n"
           "  let cw = clamp_window(ww, 2u);\n  var s = 0.0;\n"
           "  for (var id = cd.x; id < cd.y; id = id + 1) {\n"
           "    for (var ih = ch.x; ih < ch.y; ih = ih + 1) {\n"
           "      for (var iw = cw.x; iw < cw.y; iw = iw + 1) {\n"
           "        s = s + in0(base + u32((id * IH + ih) * IW + iw));\n"
           "      }\n    }\n  }\n"
           "  out0(idx, div_f32(s, avg_divisor(wd, wh, ww)));\n}\n";
  launch_map_planes(ctx, k, g.planes, {in_plane(g), out_plane(g)}, out_plane(g));
}

void pool_avg_backward(Context& ctx, const Operand& grad_out, const PoolGeometry& g,
                       bool count_include_pad, int64_t divisor_override,
                       const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("pool_avg_bwd") + (g.adaptive ? "_adaptive" : "");
  k.inputs = {grad_out};
  k.outputs = {grad_input};
  k.accumulate = true;
  pool_params(k, g, count_include_pad, divisor_override);
  k.body = window_fns(g.adaptive) + "fn run(idx: u32) {\n" + kWindows +
           "  let cd = clamp_window(wd, 0u);\n  let ch = clamp_window(wh, 1u);\n"
           "  let cw = clamp_window(ww, 2u);\n"
           "  let gv = div_f32(in0(idx), avg_divisor(wd, wh, ww));\n"
           "  for (var id = cd.x; id < cd.y; id = id + 1) {\n"
           "    for (var ih = ch.x; ih < ch.y; ih = ih + 1) {\n"
           "      for (var iw = cw.x; iw < cw.y; iw = iw + 1) {\n"
           "        acc0(base + u32((id * IH + ih) * IW + iw), gv);\n"
           "      }\n    }\n  }\n}\n";
  launch_map_planes(ctx, k, g.planes, {out_plane(g), in_plane(g)}, out_plane(g));
}

}  // namespace twgpu::nn

namespace twgpu::nn {

void max_unpool(Context& ctx, const Operand& x, const Operand& indices, uint32_t planes,
                uint32_t in_plane, uint32_t out_plane, const Operand& out) {
  NnKernel k;
  k.key = "max_unpool";
  k.inputs = {x, indices};
  k.outputs = {out};
  k.param("in_plane", in_plane).param("out_plane", out_plane);
  k.body = "fn run(i: u32) {\n  let t = in1_i64(i);\n"
           "  if (i64_is_neg(t) || t.y != 0u || t.x >= u.out_plane) { return; }\n"
           "  out0((i / u.in_plane) * u.out_plane + t.x, in0(i));\n}\n";
  launch_map(ctx, k, uint64_t(planes) * in_plane);
}

void count_bad_indices(Context& ctx, const Operand& indices, uint64_t count, uint32_t out_plane,
                       const Operand& bad) {
  NnKernel k;
  k.key = "count_bad_indices";
  k.inputs = {indices};
  k.outputs = {bad};
  k.param("out_plane", out_plane);
  k.body = "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let t = in0_i64(k);\n"
           "  return vec2<f32>(select(0.0, 1.0, i64_is_neg(t) || t.y != 0u || t.x >= u.out_plane), 0.0);\n}\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) { out0(0u, s0.x); }\n";
  launch_rows(ctx, k, 1, static_cast<uint32_t>(count), 1);
}

}  // namespace twgpu::nn
