#include "kernels/distance.h"

#include <cmath>
#include <string>

namespace twgpu::dist {

Norm norm_of(double p) {
  if (p == 0.0) return Norm::Zero;
  if (p == 1.0) return Norm::One;
  if (p == 2.0) return Norm::Two;
  if (std::isinf(p)) return Norm::Inf;
  return Norm::General;
}

namespace {

const char* norm_name(Norm n) {
  switch (n) {
    case Norm::Zero: return "p0";
    case Norm::One: return "p1";
    case Norm::Two: return "p2";
    case Norm::Inf: return "pinf";
    case Norm::General: return "pgen";
  }
  return "?";
}

// The CPU computes with p as a float; its final root uses 1.0 / p in double.
// `root`: also 1/p, for the forward's final root.
nn::NnKernel& set_p(nn::NnKernel& k, double p, bool root) {
  const float pf = static_cast<float>(p);
  k.param_f32("p", pf);
  if (root) k.param_f32("inv_p", static_cast<float>(1.0 / static_cast<double>(pf)));
  return k;
}

// `dmap(d)` of |a - b|, `dred(acc, v)` and `dfinish(acc)`, with p = u.p, 1/p = u.inv_p.
// `nan_max`: the inf norm's max propagates NaN (pdist's vector maximum) or, as cdist's
// scalar std::max(acc, v), keeps acc unless acc < v.
std::string forward_fns(Norm n, bool nan_max) {
  std::string s;
  switch (n) {
    case Norm::Zero:
      s += "fn dmap(d: f32) -> f32 { return select(min(ceil(d), 1.0), d, is_nan(d)); }\n";
      break;
    case Norm::One: case Norm::Inf: s += "fn dmap(d: f32) -> f32 { return d; }\n"; break;
    case Norm::Two: s += "fn dmap(d: f32) -> f32 { return d * d; }\n"; break;
    case Norm::General: s += "fn dmap(d: f32) -> f32 { return pow_f32(d, u.p); }\n"; break;
  }
  if (n == Norm::Inf) {
    s += nan_max ? "fn dred(acc: f32, v: f32) -> f32 { return maximum_f32(acc, v); }\n"
                 : "fn dred(acc: f32, v: f32) -> f32 { return select(acc, v, f32_lt(acc, v)); }\n";
  } else {
    s += "fn dred(acc: f32, v: f32) -> f32 { return acc + v; }\n";
  }
  switch (n) {
    case Norm::Two: s += "fn dfinish(acc: f32) -> f32 { return sqrt(acc); }\n"; break;
    case Norm::General: s += "fn dfinish(acc: f32) -> f32 { return pow_f32(acc, u.inv_p); }\n"; break;
    default: s += "fn dfinish(acc: f32) -> f32 { return acc; }\n"; break;
  }
  return s;
}

// `dgrad(diff, g, dist)`: the contribution of one pair to the gradient of its first vector
// (odd in diff, so the second vector's is its negation). p = u.p.
std::string backward_fn(Norm n, double p) {
  // sign as the CPU forms it from ceil/floor: 0 at 0, NaN stays NaN.
  std::string s = "fn dsign(x: f32) -> f32 { if (is_nan(x)) { return x; } return sign(x); }\n";
  s += "fn dgrad(diff: f32, g: f32, dist: f32) -> f32 {\n";
  switch (n) {
    case Norm::Zero: s += "  return 0.0;\n"; break;
    case Norm::One: s += "  return g * dsign(diff);\n"; break;
    case Norm::Two: s += "  if (dist == 0.0) { return 0.0; }\n  return div_f32(g * diff, dist);\n"; break;
    case Norm::Inf:
      s += "  return g * dsign(diff) * (1.0 - min(1.0, ceil(abs(abs(diff) - dist))));\n";
      break;
    case Norm::General:
      if (p < 2.0) {
        s += "  let p = u.p;\n"
             "  if (dist == 0.0 || (diff == 0.0 && p < 1.0)) { return 0.0; }\n"
             "  return div_f32(dsign(diff) * pow_f32(abs(diff), p - 1.0) * g, pow_f32(dist, p - 1.0));\n";
      } else {
        s += "  let p = u.p;\n"
             "  if (dist == 0.0) { return 0.0; }\n"
             "  return div_f32(diff * pow_f32(abs(diff), p - 2.0) * g, pow_f32(dist, p - 1.0));\n";
      }
      break;
  }
  return s + "}\n";
}

// Index of pair (a, b), a < b, among the n (n - 1) / 2 pairs in row-major order.
const char kPairFns[] =
    "fn pair_start(a: u32, n: u32) -> u32 { return a * n - (a * (a + 1u)) / 2u; }\n"
    "fn pair_index(a: u32, b: u32, n: u32) -> u32 { return pair_start(a, n) + (b - a - 1u); }\n";

}  // namespace

void cdist_forward(Context& ctx, const nn::Operand& x1, const nn::Operand& x2, const nn::Operand& out,
                   uint32_t batch, uint32_t r1, uint32_t r2, uint32_t m, double p) {
  Norm n = norm_of(p);
  nn::NnKernel k;
  k.key = std::string("cdist_fwd_") + norm_name(n);
  k.inputs = {x1, x2};
  k.outputs = {out};
  set_p(k, p, true).param("r1", r1).param("r2", r2).param("m", m);
  k.body = forward_fns(n, false) +
           "fn run(idx: u32) {\n"
           "  let r1 = u.r1;\n  let r2 = u.r2;\n  let m = u.m;\n"
           "  let b = idx / (r1 * r2);\n  let rest = idx % (r1 * r2);\n"
           "  let a0 = (b * r1 + rest / r2) * m;\n  let b0 = (b * r2 + rest % r2) * m;\n"
           "  var acc = 0.0;\n"
           "  for (var c = 0u; c < m; c = c + 1u) { acc = dred(acc, dmap(abs(in0(a0 + c) - in1(b0 + c)))); }\n"
           "  out0(idx, dfinish(acc));\n}\n";
  nn::launch_map(ctx, k, static_cast<uint64_t>(batch) * r1 * r2);
}

void cdist_backward(Context& ctx, const nn::Operand& grad, const nn::Operand& x1, const nn::Operand& x2,
                    const nn::Operand& dist, const nn::Operand& grad_x1, uint32_t batch, uint32_t r1,
                    uint32_t r2, uint32_t m, double p) {
  Norm n = norm_of(p);
  nn::NnKernel k;
  k.key = std::string("cdist_bwd_") + norm_name(n) + (n == Norm::General && p < 2.0 ? "_lt2" : "");
  k.inputs = {grad, x1, x2, dist};
  k.outputs = {grad_x1};
  set_p(k, p, false).param("r1", r1).param("r2", r2).param("m", m);
  k.body = backward_fn(n, p) +
           "fn run(idx: u32) {\n"
           "  let r1 = u.r1;\n  let r2 = u.r2;\n  let m = u.m;\n"
           "  let c = idx % m;\n  let row = idx / m;\n  let b = row / r1;\n"
           "  let xi = in1(idx);\n"
           "  var acc = 0.0;\n"
           "  for (var j = 0u; j < r2; j = j + 1u) {\n"
           "    let g = row * r2 + j;\n"
           "    acc = acc + dgrad(xi - in2((b * r2 + j) * m + c), in0(g), in3(g));\n"
           "  }\n"
           "  out0(idx, acc);\n}\n";
  nn::launch_map(ctx, k, static_cast<uint64_t>(batch) * r1 * m);
}

void pdist_forward(Context& ctx, const nn::Operand& x, const nn::Operand& out, uint32_t n, uint32_t m,
                   double p) {
  Norm nm = norm_of(p);
  nn::NnKernel k;
  k.key = std::string("pdist_fwd_") + norm_name(nm);
  k.inputs = {x};
  k.outputs = {out};
  set_p(k, p, true).param("n", n).param("m", m);
  k.body = forward_fns(nm, true) + kPairFns +
           "fn run(idx: u32) {\n"
           "  let n = u.n;\n  let m = u.m;\n"
           // First vector a: the float root estimate, then exact integer correction.
           "  let n2 = f32(n) - 0.5;\n"
           "  var a = u32(max(n2 - sqrt(max(n2 * n2 - 2.0 * f32(idx) - 1.0, 0.0)), 0.0));\n"
           "  a = min(a, n - 2u);\n"
           "  loop { if (a > 0u && pair_start(a, n) > idx) { a = a - 1u; } else { break; } }\n"
           "  loop { if (a + 2u < n && pair_start(a + 1u, n) <= idx) { a = a + 1u; } else { break; } }\n"
           "  let b = idx - pair_start(a, n) + a + 1u;\n"
           "  var acc = 0.0;\n"
           "  for (var c = 0u; c < m; c = c + 1u) { acc = dred(acc, dmap(abs(in0(a * m + c) - in0(b * m + c)))); }\n"
           "  out0(idx, dfinish(acc));\n}\n";
  nn::launch_map(ctx, k, static_cast<uint64_t>(n) * (n - 1) / 2);
}

void pdist_backward(Context& ctx, const nn::Operand& grad, const nn::Operand& x, const nn::Operand& dist,
                    const nn::Operand& grad_x, uint32_t n, uint32_t m, double p) {
  Norm nm = norm_of(p);
  nn::NnKernel k;
  k.key = std::string("pdist_bwd_") + norm_name(nm) + (nm == Norm::General && p < 2.0 ? "_lt2" : "");
  k.inputs = {grad, x, dist};
  k.outputs = {grad_x};
  set_p(k, p, false).param("n", n).param("m", m);
  // Row i gathers its pairs in the CPU's order: (j, i) for j < i, then (i, j) for j > i.
  k.body = backward_fn(nm, p) + kPairFns +
           "fn run(idx: u32) {\n"
           "  let n = u.n;\n  let m = u.m;\n"
           "  let i = idx / m;\n  let c = idx % m;\n"
           "  let xi = in1(idx);\n"
           "  var acc = 0.0;\n"
           "  for (var j = 0u; j < n; j = j + 1u) {\n"
           "    if (j == i) { continue; }\n"
           "    let q = select(pair_index(i, j, n), pair_index(j, i, n), j < i);\n"
           "    let d = dgrad(select(xi - in1(j * m + c), in1(j * m + c) - xi, j < i), in0(q), in2(q));\n"
           "    acc = select(acc + d, acc - d, j < i);\n"
           "  }\n"
           "  out0(idx, acc);\n}\n";
  nn::launch_map(ctx, k, static_cast<uint64_t>(n) * m);
}

}  // namespace twgpu::dist
