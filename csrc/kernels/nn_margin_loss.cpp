#include "kernels/nn_margin_loss.h"

#include "kernels/kernel_program.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::nn {

namespace {

// One invocation per element of buf0 (from `u.offset`); `test` is a WGSL expression of `v`
// (and `u.limit`, `u.allow_minus_one`) that is true for a bad element; buf1 is the error
// word, set to `u.code`.
void launch_check(Context& ctx, const char* family, const Operand& t, uint64_t count,
                  uint32_t code, uint32_t limit, bool allow_minus_one, const std::string& test) {
  if (count == 0) return;
  static const UniformLayout layout({{"offset"}, {"code"}, {"limit"}, {"allow_minus_one"}});
  KernelLaunch l;
  l.typed = {family, {static_cast<uint32_t>(t.dtype)}};
  l.buffers = {{t.buffer, Access::Read, false}, {ctx.checks().arm(), Access::ReadWrite, true}};
  l.declare(layout)
      .set_u32("offset", static_cast<uint32_t>(t.offset))
      .set_u32("code", code)
      .set_u32("limit", limit)
      .set_u32("allow_minus_one", allow_minus_one ? 1u : 0u);
  l.count = count;
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  std::vector<KernelBuffer> bufs = l.buffers;
  const DType dtype = t.dtype;
  l.body = [bufs, dtype, test, wg] {
    return kernel_load("load", bufs, 0, dtype) + kernel_main(Grid::Invocations, wg) +
           "  let v = load(idx + u.offset);\n"
           "  if (" + test + ") { atomicMax(&buf1[0], u.code); }\n}\n";
  };
  launch_kernel(ctx, l);
  if (DeviceChecks::synchronous()) ctx.recorder().synchronize();
}

// Parameters shared by the kernels; per_row: grad_out has one value per row. Target of row
// r: `target_of(r)`, dim (0xffffffff: invalid).
void set_params(NnKernel& k, const MarginGeometry& g, int p, float margin, float scale, bool per_row) {
  k.param("dim", g.dim).param_f32("margin", margin).param("p", static_cast<uint32_t>(p));
  k.param_f32("scale", scale).param("per_row", per_row ? 1u : 0u);
}

// x = in0, target = in1, weight = in2 (when `weighted`).
std::string multi_common(bool weighted) {
  return std::string(
             "fn target_of(r: u32) -> u32 {\n"
             "  let t = in1_i64(r);\n"
             "  if (t.y != 0u || t.x >= u.dim) { return 0xffffffffu; }\n"
             "  return t.x;\n}\n"
             // The hinge term of class d for row r with target t (0 for d == t).
             "fn hinge(r: u32, t: u32, d: u32) -> f32 {\n"
             "  if (d == t) { return 0.0; }\n"
             "  let z = (u.margin - in0(r * u.dim + t)) + in0(r * u.dim + d);\n"
             "  if (!(z > 0.0)) { return 0.0; }\n"
             "  var h = select(z * z, z, u.p == 1u);\n") +
         (weighted ? "  h = h * in2(t);\n" : "") +
         "  return h;\n}\n"
         // d hinge / d x_d times scale (the CPU's per-class gradient before grad_out).
         "fn dhinge(r: u32, t: u32, d: u32) -> f32 {\n"
         "  if (d == t) { return 0.0; }\n"
         "  let z = (u.margin - in0(r * u.dim + t)) + in0(r * u.dim + d);\n"
         "  if (!(z > 0.0)) { return 0.0; }\n"
         "  var h = select(2.0 * u.scale * z, u.scale, u.p == 1u);\n" +
         (weighted ? "  h = h * in2(t);\n" : "") + "  return h;\n}\n";
}

// Multilabel: x = in0, target = in1 (row r's targets at r * dim + j, ended by the first
// negative one). Targets out of range also end the list (the check reports them).
const char* kMultilabelCommon =
    "fn label(r: u32, j: u32) -> u32 {\n"
    "  let t = in1_i64(r * u.dim + j);\n"
    "  if (t.y != 0u || t.x >= u.dim) { return 0xffffffffu; }\n"
    "  return t.x;\n}\n"
    "fn label_count(r: u32) -> u32 {\n"
    "  var n = 0u;\n"
    "  loop { if (n >= u.dim || label(r, n) == 0xffffffffu) { break; } n = n + 1u; }\n"
    "  return n;\n}\n"
    "fn is_label(r: u32, d: u32, n: u32) -> bool {\n"
    "  for (var j = 0u; j < n; j = j + 1u) { if (label(r, j) == d) { return true; } }\n"
    "  return false;\n}\n";

}  // namespace

void check_targets(Context& ctx, const Operand& t, uint64_t count, int32_t lo, uint32_t hi,
                   uint32_t code) {
  // v = (lo, hi) words of an int64: -1 is (0xffffffff, 0xffffffff).
  launch_check(ctx, "margin_check:range", t, count, code, hi, lo < 0,
               "select(v.y != 0u || v.x >= u.limit, !(u.allow_minus_one == 1u && "
               "v.x == 0xffffffffu && v.y == 0xffffffffu), i64_is_neg(v))");
}

void check_unit_interval(Context& ctx, const Operand& m, uint64_t count, uint32_t code) {
  launch_check(ctx, "margin_check:unit", m, count, code, 0, false, "!(v >= 0.0 && v <= 1.0)");
}

void multi_margin_rows(Context& ctx, const Operand& x, const Operand& target, const Operand& w,
                       const MarginGeometry& g, int p, float margin, const Operand& rows) {
  NnKernel k;
  k.key = std::string("multi_margin_rows") + (w.buffer ? "_w" : "");
  k.inputs = {x, target, or_dummy(w, x)};
  k.outputs = {rows};
  set_params(k, g, p, margin, 0.0f, false);
  k.body = multi_common(w.buffer != nullptr) +
           "fn terms(r: u32, d: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let t = target_of(r);\n"
           "  if (t == 0xffffffffu) { return vec2<f32>(0.0, 0.0); }\n"
           "  return vec2<f32>(hinge(r, t, d), 0.0);\n}\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) { out0(r, div_f32(s0.x, f32(u.dim))); }\n";
  launch_rows(ctx, k, g.nframe, g.dim, 1);
}

void multi_margin_backward(Context& ctx, const Operand& grad_out, const Operand& x,
                           const Operand& target, const Operand& w, const MarginGeometry& g, int p,
                           float margin, float scale, bool per_row, const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("multi_margin_bwd") + (w.buffer ? "_w" : "");
  // in3: grad_out.
  k.inputs = {x, target, or_dummy(w, x), grad_out};
  k.outputs = {grad_input};
  set_params(k, g, p, margin, scale, per_row);
  k.body = multi_common(w.buffer != nullptr) +
           "fn run(e: u32) {\n"
           "  let r = e / u.dim;\n  let d = e % u.dim;\n"
           "  let t = target_of(r);\n"
           "  if (t == 0xffffffffu) { out0(e, 0.0); return; }\n"
           "  var v = 0.0;\n"
           "  if (d == t) {\n"
           "    for (var c = 0u; c < u.dim; c = c + 1u) { v = v - dhinge(r, t, c); }\n"
           "  } else { v = dhinge(r, t, d); }\n"
           "  let go = select(in3(0u), in3(r), u.per_row != 0u);\n"
           "  out0(e, v * go);\n}\n";
  launch_map(ctx, k, uint64_t(g.nframe) * g.dim);
}

void multilabel_margin_rows(Context& ctx, const Operand& x, const Operand& target,
                            const MarginGeometry& g, const Operand& rows, const Operand& is_target) {
  {
    NnKernel k;
    k.key = "multilabel_margin_rows";
    k.inputs = {x, target};
    k.outputs = {rows};
    set_params(k, g, 1, 1.0f, 0.0f, false);
    k.body = std::string(kMultilabelCommon) +
             // Class d (not a target) against every target of the row.
             "fn terms(r: u32, d: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
             "  let n = label_count(r);\n"
             "  if (is_label(r, d, n)) { return vec2<f32>(0.0, 0.0); }\n"
             "  let xd = in0(r * u.dim + d);\n"
             "  var s = 0.0;\n"
             "  for (var j = 0u; j < n; j = j + 1u) {\n"
             "    let z = (1.0 - in0(r * u.dim + label(r, j))) + xd;\n"
             "    if (z > 0.0) { s = s + z; }\n"
             "  }\n"
             "  return vec2<f32>(s, 0.0);\n}\n"
             "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) { out0(r, div_f32(s0.x, f32(u.dim))); }\n";
    launch_rows(ctx, k, g.nframe, g.dim, 1);
  }
  NnKernel m;
  m.key = "multilabel_is_target";
  m.inputs = {x, target};
  m.outputs = {is_target};
  set_params(m, g, 1, 1.0f, 0.0f, false);
  m.body = std::string(kMultilabelCommon) +
           "fn run(e: u32) {\n  let r = e / u.dim;\n"
           "  out0(e, select(0.0, 1.0, is_label(r, e % u.dim, label_count(r))));\n}\n";
  launch_map(ctx, m, uint64_t(g.nframe) * g.dim);
}

void multilabel_margin_backward(Context& ctx, const Operand& grad_out, const Operand& x,
                                const Operand& target, const Operand& is_target,
                                const MarginGeometry& g, float scale, bool per_row,
                                const Operand& grad_input) {
  NnKernel k;
  k.key = "multilabel_margin_bwd";
  // in2: is_target (given, as the CPU uses it), in3: grad_out.
  k.inputs = {x, target, is_target, grad_out};
  k.outputs = {grad_input};
  set_params(k, g, 1, 1.0f, scale, per_row);
  // Element d gains `scale` for each target t with d outside the targets and a positive
  // hinge 1 - x_t + x_d, and loses `scale` for each positive hinge of its own when it is
  // a target (once per time it is listed).
  k.body = std::string(kMultilabelCommon) +
           "fn run(e: u32) {\n"
           "  let r = e / u.dim;\n  let d = e % u.dim;\n  let row = r * u.dim;\n"
           "  let n = label_count(r);\n"
           "  let xd = in0(e);\n  let outside = in2(e) == 0.0;\n"
           "  var gain = 0.0;\n  var listed = 0.0;\n"
           "  for (var j = 0u; j < n; j = j + 1u) {\n"
           "    let t = label(r, j);\n"
           "    if (outside && (1.0 - in0(row + t)) + xd > 0.0) { gain = gain + 1.0; }\n"
           "    if (t == d) { listed = listed + 1.0; }\n"
           "  }\n"
           "  if (listed > 0.0) {\n"
           "    var loss = 0.0;\n"
           "    for (var c = 0u; c < u.dim; c = c + 1u) {\n"
           "      if (in2(row + c) == 0.0 && (1.0 - xd) + in0(row + c) > 0.0) { loss = loss + 1.0; }\n"
           "    }\n"
           "    gain = gain - listed * loss;\n"
           "  }\n"
           "  let go = select(in3(0u), in3(r), u.per_row != 0u);\n"
           "  out0(e, gain * u.scale * go);\n}\n";
  launch_map(ctx, k, uint64_t(g.nframe) * g.dim);
}

void sum_values(Context& ctx, const Operand& values, uint32_t n, bool mean, const Operand& out) {
  NnKernel k;
  k.key = "margin_sum_values";
  k.inputs = {values};
  k.outputs = {out};
  k.param("n", n).param("mean", mean ? 1u : 0u);
  k.body = "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> { return vec2<f32>(in0(k), 0.0); }\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) {\n"
           "  if (u.mean == 1u) { out0(0u, div_f32(s0.x, f32(u.n))); } else { out0(0u, s0.x); }\n}\n";
  launch_rows(ctx, k, 1, n, 1);
}

}  // namespace twgpu::nn
