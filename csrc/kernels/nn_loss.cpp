#include "kernels/nn_loss.h"

namespace twgpu::nn {

namespace {

const char* kind_name(PointLoss k) {
  switch (k) {
    case PointLoss::Mse: return "mse";
    case PointLoss::SmoothL1: return "smooth_l1";
    case PointLoss::Huber: return "huber";
    case PointLoss::Bce: return "bce";
  }
  return "?";
}

// `fn loss(i: u32) -> f32` with x = in0, t = in1, w = in2, the parameter u.loss_param.
// `fn rnd(v: f32) -> f32`: v rounded to the storage dtype (the CPU rounds MSE's
// difference and square to half types one operation at a time).
std::string round_fn(DType t) {
  if (t == DType::Float16) return "fn rnd(v: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(v)); }\n";
  if (t == DType::BFloat16) return "fn rnd(v: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }\n";
  return "fn rnd(v: f32) -> f32 { return v; }\n";
}

std::string loss_fn(PointLoss k, bool weighted, DType dtype) {
  std::string s = round_fn(dtype) +
                  "fn loss(i: u32) -> f32 {\n  let x = in0(i);\n  let t = in1(i);\n";
  switch (k) {
    case PointLoss::Mse: s += "  let d = rnd(x - t);\n  var l = rnd(d * d);\n"; break;
    case PointLoss::SmoothL1:
      s += "  let z = abs(x - t);\n  let b = u.loss_param;\n"
           "  var l = select(z - 0.5 * b, div_f32(0.5 * z * z, b), z < b);\n";
      break;
    case PointLoss::Huber:
      s += "  let z = abs(x - t);\n  let d = u.loss_param;\n"
           "  var l = select(d * (z - 0.5 * d), 0.5 * z * z, z < d);\n";
      break;
    case PointLoss::Bce:
      s += "  var l = (t - 1.0) * max(log1p_f32(-x), -100.0) - t * max(log(x), -100.0);\n";
      break;
  }
  if (weighted) s += "  l = l * in2(i);\n";
  return s + "  return l;\n}\n";
}

// `fn dloss(i: u32, g: f32) -> f32`: the gradient for upstream g; u.norm is the norm.
std::string dloss_fn(PointLoss k, bool weighted) {
  std::string s = "fn dloss(i: u32, g: f32) -> f32 {\n  let x = in1(i);\n  let t = in2(i);\n"
                  "  let nrm = u.norm;\n";
  switch (k) {
    case PointLoss::Mse: s += "  var v = nrm * (x - t) * g;\n"; break;
    case PointLoss::SmoothL1:
      s += "  let d = x - t;\n  let b = u.loss_param;\n  var v = div_f32(nrm * d * g, b);\n"
           "  if (d <= -b) { v = -nrm * g; }\n  if (d >= b) { v = nrm * g; }\n";
      break;
    case PointLoss::Huber:
      s += "  let d = x - t;\n  let dl = u.loss_param;\n  var v = nrm * d * g;\n"
           "  if (d <= -dl) { v = -nrm * g * dl; }\n  if (d >= dl) { v = nrm * g * dl; }\n";
      break;
    case PointLoss::Bce:
      s += "  var v = div_f32(g * (x - t), max((1.0 - x) * x, 1e-12));\n";
      break;
  }
  if (weighted) s += "  v = v * in3(i);\n";
  if (k == PointLoss::Bce) s += "  if (u.bce_div != 0u) { v = div_f32(v, f32(u.bce_div)); }\n";
  return s + "  return v;\n}\n";
}

}  // namespace

void point_loss(Context& ctx, PointLoss kind, const Operand& x, const Operand& t, const Operand& w,
                float param, uint64_t count, Reduce r, const Operand& out) {
  NnKernel k;
  k.key = std::string("loss_") + kind_name(kind) + (w.buffer ? "_w" : "") +
          (r == Reduce::None ? "_none" : "_red");
  k.inputs = {x, t, or_dummy(w, x)};
  k.outputs = {out};
  k.param_f32("loss_param", param).param("reduction", static_cast<uint32_t>(r)).param("count", static_cast<uint32_t>(count));
  std::string body = loss_fn(kind, w.buffer != nullptr, x.dtype);
  if (r == Reduce::None) {
    k.body = body + "fn run(i: u32) { out0(i, loss(i)); }\n";
    launch_map(ctx, k, count);
    return;
  }
  k.body = body +
           "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {"
           " return vec2<f32>(loss(k), 0.0); }\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) {\n"
           "  if (u.reduction == 1u) { out0(0u, div_f32(s0.x, f32(u.count))); } else { out0(0u, s0.x); }\n}\n";
  launch_rows(ctx, k, 1, static_cast<uint32_t>(count), 1);
}

void point_loss_backward(Context& ctx, PointLoss kind, const Operand& grad_out, const Operand& x,
                         const Operand& t, const Operand& w, float param, uint64_t count, Reduce r,
                         const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("loss_bwd_") + kind_name(kind) + (w.buffer ? "_w" : "") +
          (r == Reduce::None ? "_none" : "_red");
  k.inputs = {grad_out, x, t, or_dummy(w, x)};
  k.outputs = {grad_input};
  // The norm: mean divides by count (BCE divides last, as the CPU does).
  float norm = 1.0f;
  if (kind == PointLoss::Mse) norm = r == Reduce::Mean ? static_cast<float>(2.0 / count) : 2.0f;
  else if (kind != PointLoss::Bce && r == Reduce::Mean) norm = static_cast<float>(1.0 / count);
  const uint32_t bce_div = kind == PointLoss::Bce && r == Reduce::Mean ? static_cast<uint32_t>(count) : 0;
  k.param_f32("loss_param", param).param_f32("norm", norm).param("bce_div", bce_div);
  std::string g = r == Reduce::None ? "in0(i)" : "in0(0u)";
  k.body = dloss_fn(kind, w.buffer != nullptr) + "fn run(i: u32) { out0(i, dloss(i, " + g + ")); }\n";
  launch_map(ctx, k, count);
}

void count_outside_unit(Context& ctx, const Operand& x, uint64_t count, const Operand& out) {
  NnKernel k;
  k.key = "count_outside_unit";
  k.inputs = {x};
  k.outputs = {out};
  k.body = "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let v = in0(k);\n  return vec2<f32>(select(1.0, 0.0, v >= 0.0 && v <= 1.0), 0.0);\n}\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) { out0(0u, s0.x); }\n";
  launch_rows(ctx, k, 1, static_cast<uint32_t>(count), 1);
}

namespace {

// ignore_index is an i32; out of i32 range it never matches (ignore_valid 0). Element
// e = (n, s): target t = in1(e), input at (n * C + t) * inner + s.
void nll_params(NnKernel& k, const NllGeometry& g, Reduce r) {
  const bool fits = g.ignore_index >= INT32_MIN && g.ignore_index <= INT32_MAX;
  k.param("n", g.n).param("classes", g.classes).param("inner", g.inner);
  k.param_i32("ignore_index", static_cast<int32_t>(fits ? g.ignore_index : 0))
      .param("ignore_valid", fits ? 1u : 0u)
      .param("reduction", static_cast<uint32_t>(r));
}

const char* kNllCommon =
    "fn target_of(e: u32) -> vec2<u32> {\n"
    // (class, flag): flag 1 for a valid target, 0 ignored, 2 out of range.
    "  let t = in1_i64(e);\n"
    "  if (u.ignore_valid != 0u && i64_eq(t, i64_from_i32(u.ignore_index))) { return vec2<u32>(0u, 0u); }\n"
    "  if (i64_is_neg(t) || t.y != 0u || t.x >= u.classes) { return vec2<u32>(0u, 2u); }\n"
    "  return vec2<u32>(t.x, 1u);\n}\n"
    "fn input_at(e: u32, c: u32) -> u32 {\n"
    "  return ((e / u.inner) * u.classes + c) * u.inner + e % u.inner;\n}\n";

}  // namespace

void nll_forward(Context& ctx, const Operand& x, const Operand& target, const Operand& w,
                 const NllGeometry& g, Reduce r, const Operand& out, const Operand& total_weight,
                 const Operand& bad) {
  const uint64_t elems = uint64_t(g.n) * g.inner;
  std::string wv = w.buffer ? "in2(t.x)" : "1.0";
  // Sums (and the count of bad targets) for every reduction; None also writes each term.
  {
    NnKernel k;
    k.key = std::string("nll_sums") + (w.buffer ? "_w" : "");
    k.inputs = {x, target, or_dummy(w, x)};
    k.outputs = {out, total_weight, bad};
    nll_params(k, g, r);
    k.body = std::string(kNllCommon) +
             "fn terms(r: u32, e: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
             "  let t = target_of(e);\n"
             "  if (ph == 1u) { return vec2<f32>(select(0.0, 1.0, t.y == 2u), 0.0); }\n"
             "  if (t.y != 1u) { return vec2<f32>(0.0, 0.0); }\n"
             "  let wt = " + wv + ";\n"
             "  return vec2<f32>(-wt * in0(input_at(e, t.x)), wt);\n}\n"
             "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) {\n"
             "  out2(0u, s1.x);\n  out1(0u, select(0.0, s0.y, u.reduction != 0u));\n"
             "  if (u.reduction == 1u) { out0(0u, div_f32(s0.x, s0.y)); }\n"
             "  if (u.reduction == 2u) { out0(0u, s0.x); }\n}\n";
    if (r == Reduce::None) {
      // Per-element terms go to `out`; the sums kernel writes only the check and weight.
      k.key += "_check";
      k.body = std::string(kNllCommon) +
               "fn terms(r: u32, e: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
               "  let t = target_of(e);\n"
               "  return vec2<f32>(select(0.0, 1.0, t.y == 2u), 0.0);\n}\n"
               "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) { out2(0u, s0.x); out1(0u, 0.0); }\n";
      launch_rows(ctx, k, 1, static_cast<uint32_t>(elems), 1);
      NnKernel m;
      m.key = std::string("nll_terms") + (w.buffer ? "_w" : "");
      m.inputs = {x, target, or_dummy(w, x)};
      m.outputs = {out};
      nll_params(m, g, r);
      m.body = std::string(kNllCommon) +
               "fn run(e: u32) {\n  let t = target_of(e);\n"
               "  if (t.y != 1u) { out0(e, 0.0); return; }\n"
               "  out0(e, -" + wv + " * in0(input_at(e, t.x)));\n}\n";
      launch_map(ctx, m, elems);
      return;
    }
    launch_rows(ctx, k, 1, static_cast<uint32_t>(elems), 2);
  }
}

void nll_backward(Context& ctx, const Operand& grad_out, const Operand& target, const Operand& w,
                  const Operand& total_weight, const NllGeometry& g, Reduce r,
                  const Operand& grad_input) {
  NnKernel k;
  k.key = std::string("nll_bwd") + (w.buffer ? "_w" : "");
  // in0: grad_out, in1: target, in2: weight, in3: total_weight.
  k.inputs = {grad_out, target, or_dummy(w, grad_out), or_dummy(total_weight, grad_out)};
  k.outputs = {grad_input};
  nll_params(k, g, r);
  std::string wv = w.buffer ? "in2(t.x)" : "1.0";
  k.body = std::string(kNllCommon) +
           "fn run(e: u32) {\n  let t = target_of(e);\n  if (t.y != 1u) { return; }\n"
           "  var gv = 0.0;\n"
           "  if (u.reduction == 0u) { gv = in0(e); } else { gv = in0(0u); }\n"
           "  if (u.reduction == 1u) { gv = div_f32(gv, in3(0u)); }\n"
           "  out0(input_at(e, t.x), -" + wv + " * gv);\n}\n";
  launch_map(ctx, k, uint64_t(g.n) * g.inner);
}

}  // namespace twgpu::nn
