#include "kernels/nn_norm.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/group_reduce.h"
#include "runtime/context.h"

namespace twgpu::nn {

namespace {

// Address of element k of row r under a RowLayout: the parameters and the WGSL.
void row_layout_params(NnKernel& k, const RowLayout& L) {
  k.param("inner", L.inner).param("outer_stride", L.outer_stride).param("row_stride", L.row_stride);
}
const char* kRowAddr =
    "fn addr(r: u32, k: u32) -> u32 {\n"
    "  return (k / u.inner) * u.outer_stride + r * u.row_stride + k % u.inner;\n}\n";

// Flat element i -> statistic row and affine channel.
void element_map_params(NnKernel& k, const ElementMap& m) {
  k.param("r_div", m.r_div).param("r_mod", m.r_mod).param("c_div", m.c_div).param("c_mod", m.c_mod);
}
const char* kElementMap =
    "fn stat_row(i: u32) -> u32 { return (i / u.r_div) % u.r_mod; }\n"
    "fn chan(i: u32) -> u32 { return (i / u.c_div) % u.c_mod; }\n";

// WGSL statement `let y = ...;` normalizing x with mean mu, rstd rs and affine parameters
// wv, bv (WGSL expressions) as the CPU does: the layer norm form with both parameters
// (x * rstd + (-rstd * mean)) * w + b, (x - mean) * rstd * w + b without, and the
// group/batch norm form x * s + (b - mean * s) with s = rstd * w.
std::string normalized(bool layer_norm_form, bool both, const std::string& wv,
                       const std::string& bv) {
  if (layer_norm_form && both) return "  let y = (x * rs + (-rs * mu)) * " + wv + " + " + bv + ";\n";
  if (layer_norm_form) return "  let y = (x - mu) * rs * " + wv + " + " + bv + ";\n";
  return "  let s = rs * " + wv + ";\n  let y = x * s + (" + bv + " - mu * s);\n";
}

}  // namespace

void norm_moments(Context& ctx, const Operand& x, const RowLayout& L, float eps,
                  const Operand& mean, const Operand& rstd, const Operand& m2) {
  NnKernel k;
  k.key = "norm_moments";
  k.inputs = {x};
  k.outputs = {mean, rstd, m2};
  row_layout_params(k, L);
  k.param_f32("eps", eps).param("len", L.len);
  k.body = std::string(kRowAddr) +
           "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let v = in0(addr(r, k));\n"
           "  if (ph == 0u) { return vec2<f32>(v, 0.0); }\n"
           "  let d = v - div_f32(prev.x, f32(u.len));\n"
           "  return vec2<f32>(d * d, 0.0);\n}\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) {\n"
           "  let n = f32(u.len);\n"
           "  let var_ = div_f32(s1.x, n);\n"
           "  out0(r, div_f32(s0.x, n));\n"
           "  out1(r, div_f32(1.0, sqrt(max(var_, 0.0) + u.eps)));\n"
           "  out2(r, s1.x);\n}\n";
  launch_rows(ctx, k, L.rows, L.len, 2);
}

void norm_apply(Context& ctx, const Operand& x, const Operand& mean, const Operand& rstd,
                const Operand& w, const Operand& b, const Operand& y, uint64_t count,
                const ElementMap& m, bool layer_norm_form) {
  NnKernel k;
  k.key = std::string("norm_apply") + (layer_norm_form ? "_ln" : "") + (w.buffer ? "_w" : "") +
          (b.buffer ? "_b" : "");
  k.inputs = {x, mean, rstd, or_dummy(w, x), or_dummy(b, x)};
  k.outputs = {y};
  element_map_params(k, m);
  std::string wv = w.buffer ? "in3(c)" : "1.0";
  std::string bv = b.buffer ? "in4(c)" : "0.0";
  std::string body = std::string(kElementMap) +
                     "fn run(i: u32) {\n  let r = stat_row(i);\n  let c = chan(i);\n"
                     "  let x = in0(i);\n  let mu = in1(r);\n  let rs = in2(r);\n";
  body += normalized(layer_norm_form, w.buffer && b.buffer, wv, bv) + "  out0(i, y);\n}\n";
  k.body = body;
  launch_map(ctx, k, count);
}

// `row_sum(v, lid)`: the sum of v over the `wg` invocations of a row (called by all of
// them: uniform control flow); through subgroups where the adapter has them (`subgroup`).
std::string row_sum_fn(uint32_t wg, uint32_t subgroup) {
  return group_reduce_fn({"row_sum", "f32", "", "sum_f32", "0.0", wg, wg, subgroup, true}) +
         "fn sum_f32(a: f32, b: f32) -> f32 { return a + b; }\n";
}

namespace {

// `row_moments(v, lid)`: the row's (count, mean, sum of squared deviations) from each
// invocation's own triple v, merged in one tree by Chan's formula (an empty side leaves the
// other as it is). Called by all invocations of the row.
std::string row_moments_fn(uint32_t wg, uint32_t subgroup) {
  return "fn moments_merge(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {\n"
         "  if (b.x == 0.0) { return a; }\n  if (a.x == 0.0) { return b; }\n"
         "  let n = a.x + b.x;\n  let d = b.y - a.y;\n  let f = div_f32(b.x, n);\n"
         "  return vec3<f32>(n, a.y + d * f, a.z + b.z + d * d * a.x * f);\n}\n" +
         group_reduce_fn({"row_moments", "vec3<f32>", "", "moments_merge", "vec3<f32>(0.0)", wg, wg, subgroup,
                          false, /*symmetric=*/false});
}

// Rows of up to kHeldPer elements per invocation of a group of up to 256 are read once into
// registers (named values x0, x1, ...: a loop-indexed array would live in local memory) and
// both the statistics and the output come from there; longer rows are swept from the cache.
constexpr uint32_t kHeldPer = 16;

// How a row kernel walks its row: `held` elements per invocation in registers (0: sweeps)
// over a group of `wg`.
struct RowPlan {
  uint32_t wg = kRowWorkgroup;
  uint32_t held = 0;
  bool moments = false;  // the body merges (count, mean, m2) triples: `row_moments`
};

// Software adapters keep groups of 64: their barriers cost per invocation, and a sweep
// re-reads from the CPU's caches.
RowPlan row_plan(Context& ctx, uint32_t len) {
  RowPlan p;
  const uint32_t cap = std::min<uint32_t>(software_adapter(ctx) ? kRowWorkgroup : 256, ctx.caps().workgroup_1d());
  if (len == 0 || len > cap * kHeldPer) return p;
  while (p.wg < cap && len > p.wg * kHeldPer) p.wg *= 2;
  p.held = (len + p.wg - 1) / p.wg;
  return p;
}

// One workgroup per contiguous row of `len` elements: `row_body` is the inside of
// run_group(r, lid) with `n` (the length), `base` (the row's first element), `row_sum`
// (and `row_moments` when plan.moments) and the parameter u.eps at hand. Its sweeps over the
// row re-read it from the cache, not from memory: one kernel reads x once from memory and
// writes y once.
void launch_norm_rows(Context& ctx, const std::string& key, std::vector<Operand> inputs,
                      std::vector<Operand> outputs, uint64_t rows, uint32_t len, float eps,
                      const RowPlan& plan, const std::string& row_body) {
  NnKernel k;
  k.key = key + (plan.held ? "|held" + std::to_string(plan.held) : "") + (plan.moments ? "|moments" : "");
  k.inputs = std::move(inputs);
  k.outputs = std::move(outputs);
  k.param("len", len).param_f32("eps", eps);
  const uint32_t sg = ctx.caps().subgroup_size;
  k.key += "|sg" + std::to_string(sg);
  k.body = row_sum_fn(plan.wg, sg) + (plan.moments ? row_moments_fn(plan.wg, sg) : std::string()) +
           "fn run_group(r: u32, lid: u32) {\n  let n = u.len;\n  let base = r * n;\n" +
           row_body + "}\n";
  // Rows of x and y, one statistic per row; the affine vectors (inputs 1 and up) whole.
  std::vector<uint64_t> per_row(k.inputs.size() + k.outputs.size(), 1);
  per_row[0] = per_row[k.inputs.size()] = len;
  for (size_t j = 1; j < k.inputs.size(); ++j) {
    per_row[j] = 0;
    k.inputs[j].count = len;
  }
  launch_in_pieces(ctx, k, rows, per_row,
                   [&](NnKernel& piece, uint64_t n) { launch_groups(ctx, piece, n, plan.wg); });
}

// A sweep over this invocation's elements of the row: x<i> is element k<i>, `each(i)` the
// statement for element i, run when k<i> < n. Held rows: the first sweep (`load`) reads
// x<i> (0 past the row's end) into registers, the later ones use them. Swept rows: four
// at a time from memory, so that four loads are in flight (loaded clamped into the row).
std::string row_sweep(const RowPlan& p, const std::function<std::string(const std::string&)>& each,
                      bool load = false) {
  if (p.held) {
    // All loads first: a load behind the previous element's branch would wait for it.
    std::string s;
    for (uint32_t q = 0; load && q < p.held; ++q) {
      const std::string i = std::to_string(q);
      s += "  let k" + i + " = lid + " + std::to_string(q * p.wg) + "u;\n"
           "  let x" + i + " = select(0.0, in0(base + min(k" + i + ", n - 1u)), k" + i + " < n);\n";
    }
    for (uint32_t q = 0; q < p.held; ++q) {
      const std::string i = std::to_string(q);
      s += "  if (k" + i + " < n) { " + each(i) + " }\n";
    }
    return s;
  }
  const uint32_t g = p.wg;
  std::string s = "  for (var k0 = lid; k0 < n; k0 = k0 + " + std::to_string(4 * g) + "u) {\n";
  for (uint32_t i = 1; i < 4; ++i)
    s += "    let k" + std::to_string(i) + " = k0 + " + std::to_string(i * g) + "u;\n";
  for (uint32_t i = 0; i < 4; ++i)
    s += "    let x" + std::to_string(i) + " = in0(base + min(k" + std::to_string(i) + ", n - 1u));\n";
  for (uint32_t i = 0; i < 4; ++i)
    s += "    if (k" + std::to_string(i) + " < n) { " + each(std::to_string(i)) + " }\n";
  return s + "  }\n";
}

}  // namespace

namespace {

// TORCH_WEBGPU_NORM_MOMENTS=1: layer norm rows merge (count, mean, m2) triples in one tree
// (half the barriers, but divisions and branches at every level) instead of sum trees.
bool moments_tree_requested() {
  const char* m = std::getenv("TORCH_WEBGPU_NORM_MOMENTS");
  return m && std::string(m) == "1";
}

// Float32 layer / RMS norm rows on GPUs whose length and operands' offsets are multiples
// of 4, up to 8 vec4s per invocation of a group of up to 256: x, w, b read and y written 16
// bytes at a time, the row held in registers; statistics from sum trees: RMS norm (no mean
// operand) one of the squares, layer norm the mean's, then the squared deviations'.
uint32_t norm_vec4_group(Context& ctx, std::initializer_list<const Operand*> rows,
                         std::initializer_list<const Operand*> stats, uint32_t len) {
  if (software_adapter(ctx) || len == 0 || len % 4 != 0) return 0;
  // TORCH_WEBGPU_NORM_VEC4=0 keeps the scalar kernel (held rows), to compare the two on a GPU.
  if (const char* e = std::getenv("TORCH_WEBGPU_NORM_VEC4"); e && std::string(e) == "0") return 0;
  for (const Operand* op : rows)
    if (op->buffer && (op->dtype != DType::Float32 || op->offset % 4 != 0 || needs_window(ctx, op->buffer)))
      return 0;
  for (const Operand* op : stats)
    if (op->buffer && (op->dtype != DType::Float32 || needs_window(ctx, op->buffer))) return 0;
  const uint32_t cap = std::min<uint32_t>(256, ctx.caps().workgroup_1d());
  uint32_t wg = 64;
  while (wg < cap && len / 4 > wg * 4) wg *= 2;
  return len / 4 <= wg * 8 ? wg : 0;
}

void norm_rows_vec4(Context& ctx, const Operand& x, const Operand& w, const Operand& b,
                    const Operand& y, const Operand& mean, const Operand& rstd, uint64_t rows,
                    uint32_t len, float eps, uint32_t wg) {
  const bool rms = !mean.buffer;
  // Plain f32 sum trees by default, as the scalar RMS kernel that ran at CUDA's speed on
  // the H200 (the moments tree version of this kernel ran at 0.57).
  const bool moments = !rms && moments_tree_requested();
  const uint32_t n4 = len / 4;
  uint32_t held = 1;
  while (n4 > wg * held) held *= 2;
  static const UniformLayout layout({{"x_offset"}, {"w_offset"}, {"b_offset"}, {"y_offset"},
                                     {"mean_offset"}, {"rstd_offset"}, {"len"},
                                     {"eps", UniformType::F32}});
  KernelLaunch l;
  // Absent affine parameters bind x in their place (never read); RMS norm binds no mean.
  l.buffers = {{x.buffer, Access::Read, false}, {w.buffer ? w.buffer : x.buffer, Access::Read, false},
               {b.buffer ? b.buffer : x.buffer, Access::Read, false}, {y.buffer, Access::ReadWrite, false},
               {rstd.buffer, Access::ReadWrite, false}};
  for (int i = 0; i < 4; ++i) l.buffers[i].vec4 = true;
  if (!rms) l.buffers.push_back({mean.buffer, Access::ReadWrite, false});
  const uint32_t words[] = {static_cast<uint32_t>(x.offset),    static_cast<uint32_t>(w.offset),
                            static_cast<uint32_t>(b.offset),    static_cast<uint32_t>(y.offset),
                            static_cast<uint32_t>(mean.offset), static_cast<uint32_t>(rstd.offset),
                            len,                                f32_bits(eps)};
  l.declare(layout).set_fields(0, words);  // in the layout's order
  l.grid = Grid::Groups;
  l.count = rows;
  l.workgroup = wg;
  const bool has_w = w.buffer != nullptr, has_b = b.buffer != nullptr;
  const uint32_t sg = ctx.caps().subgroup_size;
  l.typed = {"norm:vec4", {held, (has_w ? 1u : 0u) | (has_b ? 2u : 0u) | (rms ? 4u : 0u) |
                                       (moments ? 8u : 0u), sg}};
  l.body = [wg, held, has_w, has_b, rms, moments, sg] {
    const std::string G = std::to_string(wg) + "u";
    std::string s = (moments ? row_moments_fn(wg, sg) : row_sum_fn(wg, sg)) +
                    "fn ld(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf0[i]); }\n"
                    "fn wt(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf1[u.w_offset / 4u + i]); }\n"
                    "fn bs(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf2[u.b_offset / 4u + i]); }\n" +
                    kernel_main(Grid::Groups, wg) +
                    "  let live = group < frame_count();\n  let r = select(0u, group, live);\n"
                    "  let n4 = select(0u, u.len / 4u, live);\n"
                    "  let src = (u.x_offset + r * u.len) / 4u;\n  let dst = (u.y_offset + r * u.len) / 4u;\n"
                    "  var t = 0.0;\n  var c = 0.0;\n";
    auto each = [&](const std::function<std::string(const std::string&)>& f) {
      std::string out;
      for (uint32_t q = 0; q < held; ++q) out += f(std::to_string(q));
      return out;
    };
    // Every load is issued before any is used (as softmax's kernel does): a load behind
    // the previous vec4's branch would wait for it, one row's vec4s in flight instead of all.
    s += each([&](const std::string& q) {
      return "  let j" + q + " = lid + " + q + "u * " + G + ";\n  let in" + q + " = j" + q + " < n4;\n"
             "  let jc" + q + " = select(0u, j" + q + ", in" + q + ");\n  let x" + q + " = ld(src + jc" + q + ");\n";
    });
    s += each([](const std::string& q) {
      return "  if (in" + q + ") { t = t + ((x" + q + ".x + x" + q + ".y) + (x" + q + ".z + x" + q + ".w)); c = c + 4.0; }\n";
    });
    // The affine vectors' loads (cache hits) likewise all at once, issued before the tree's
    // barriers when the row is short enough that holding them costs few registers.
    const std::string affine = each([&](const std::string& q) {
      return (has_w ? "  let w" + q + " = wt(jc" + q + ");\n" : std::string()) +
             (has_b ? "  let b" + q + " = bs(jc" + q + ");\n" : std::string());
    });
    const bool early = held <= 4;
    const std::string squares = "  var q = 0.0;\n" + each([](const std::string& q) {
      return "  if (in" + q + ") { let d = x" + q + " - lm; q = q + dot(d, d); }\n";
    });
    auto with_m2 = [](const std::string& m2) {  // rstd from the row's sum of squares
      return "  let rs = div_f32(1.0, sqrt(max(div_f32(" + m2 + ", f32(u.len)), 0.0) + u.eps));\n";
    };
    if (moments)
      s += "  let lm = div_f32(t, max(c, 1.0));\n" + squares + (early ? affine : std::string()) +
           "  let st = row_moments(vec3<f32>(c, lm, q), lid);\n  let mu = st.y;\n" + with_m2("st.z");
    else if (rms)
      s += "  let lm = 0.0;\n" + squares + (early ? affine : std::string()) + with_m2("row_sum(q, lid)");
    else
      s += (early ? affine : std::string()) + "  let mu = div_f32(row_sum(t, lid), f32(u.len));\n  let lm = mu;\n" +
           squares + with_m2("row_sum(q, lid)");
    s += early ? std::string() : affine;
    s += each([&](const std::string& q) {
      const std::string wv = has_w ? "w" + q : "1.0";
      return "  if (in" + q + ") {\n    let x = x" + q + ";\n  " +
             (rms ? "  let y = (x * rs) * " + wv + ";\n"
                  : normalized(true, has_w && has_b, wv, has_b ? "b" + q : "0.0")) +
             "    buf3[dst + j" + q + "] = bitcast<vec4<u32>>(y);\n  }\n";
    });
    return s + "  if (live && lid == 0u) {\n    buf4[u.rstd_offset + r] = bitcast<u32>(rs);\n" +
           (rms ? "" : "    buf5[u.mean_offset + r] = bitcast<u32>(mu);\n") + "  }\n}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace

void layer_norm_rows(Context& ctx, const Operand& x, const Operand& w, const Operand& b,
                     const Operand& y, const Operand& mean, const Operand& rstd, uint64_t rows,
                     uint32_t len, float eps) {
  if (const uint32_t wg = norm_vec4_group(ctx, {&x, &w, &b, &y}, {&mean, &rstd}, len))
    return norm_rows_vec4(ctx, x, w, b, y, mean, rstd, rows, len, eps, wg);
  const bool both = w.buffer && b.buffer;
  RowPlan p = row_plan(ctx, len);
  // The mean, then the deviations from it: two sum trees. Held rows may instead merge
  // per-invocation (count, mean, m2) triples in one tree (TORCH_WEBGPU_NORM_MOMENTS=1: half
  // the barriers, but its divisions cost more than they save on llvmpipe, 20-30%, and the
  // vec4 kernel with it ran at 0.57 of CUDA on the H200).
  p.moments = p.held && moments_tree_requested();
  const std::string stats =
      p.moments ? "  var t = 0.0;\n  var c = 0.0;\n" +
                   row_sweep(p, [](const std::string& i) { return "t = t + x" + i + "; c = c + 1.0;"; }, true) +
                   "  let lm = div_f32(t, max(c, 1.0));\n  var q = 0.0;\n" +
                   row_sweep(p, [](const std::string& i) { return "let d = x" + i + " - lm; q = q + d * d;"; }) +
                   "  let st = row_moments(vec3<f32>(c, lm, q), lid);\n  let mu = st.y;\n"
                   "  let rs = div_f32(1.0, sqrt(max(div_f32(st.z, f32(n)), 0.0) + u.eps));\n"
             : "  var t = 0.0;\n" + row_sweep(p, [](const std::string& i) { return "t = t + x" + i + ";"; }, true) +
                   "  let mu = div_f32(row_sum(t, lid), f32(n));\n"
                   "  var q = 0.0;\n" +
                   row_sweep(p, [](const std::string& i) { return "let d = x" + i + " - mu; q = q + d * d;"; }) +
                   "  let rs = div_f32(1.0, sqrt(max(div_f32(row_sum(q, lid), f32(n)), 0.0) + u.eps));\n";
  const std::string body =
      stats +
      row_sweep(p, [&](const std::string& i) {
        return "let x = x" + i + ";\n" +
               normalized(true, both, w.buffer ? "in1(k" + i + ")" : "1.0",
                          b.buffer ? "in2(k" + i + ")" : "0.0") +
               "    out0(base + k" + i + ", y);";
      }) +
      "  if (lid == 0u) { out1(r, mu); out2(r, rs); }\n";
  launch_norm_rows(ctx, std::string("layer_norm_rows") + (w.buffer ? "_w" : "") + (b.buffer ? "_b" : ""),
                   {x, or_dummy(w, x), or_dummy(b, x)}, {y, mean, rstd}, rows, len, eps, p, body);
}

void rms_norm_rows(Context& ctx, const Operand& x, const Operand& w, const Operand& y,
                   const Operand& rstd, uint64_t rows, uint32_t len, float eps) {
  if (const uint32_t wg = norm_vec4_group(ctx, {&x, &w, &y}, {&rstd}, len))
    return norm_rows_vec4(ctx, x, w, Operand{}, y, Operand{}, rstd, rows, len, eps, wg);
  const RowPlan p = row_plan(ctx, len);
  const std::string body =
      "  var q = 0.0;\n" +
      row_sweep(p, [](const std::string& i) { return "q = q + x" + i + " * x" + i + ";"; }, true) +
      "  let rs = div_f32(1.0, sqrt(div_f32(row_sum(q, lid), f32(n)) + u.eps));\n" +
      row_sweep(p, [&](const std::string& i) {
        return "out0(base + k" + i + ", (x" + i + " * rs)" + (w.buffer ? " * in1(k" + i + ")" : "") + ");";
      }) +
      "  if (lid == 0u) { out1(r, rs); }\n";
  launch_norm_rows(ctx, std::string("rms_norm_rows") + (w.buffer ? "_w" : ""), {x, or_dummy(w, x)},
                   {y, rstd}, rows, len, eps, p, body);
}

void norm_invstd(Context& ctx, const Operand& var, float eps, const Operand& out, uint64_t n) {
  NnKernel k;
  k.key = "norm_invstd";
  k.inputs = {var};
  k.outputs = {out};
  k.param_f32("eps", eps);
  k.body = "fn run(i: u32) { out0(i, div_f32(1.0, sqrt(in0(i) + u.eps))); }\n";
  launch_map(ctx, k, n);
}

void norm_running_update(Context& ctx, const Operand& mean, const Operand& m2, const Operand& rm,
                         const Operand& rv, const Operand& rm_out, const Operand& rv_out,
                         uint64_t channels, float momentum, uint64_t count) {
  NnKernel k;
  k.key = std::string("norm_running") + (rm.buffer ? "_m" : "") + (rv.buffer ? "_v" : "");
  k.inputs = {mean, m2, or_dummy(rm, mean), or_dummy(rv, mean)};
  k.outputs = {or_dummy(rm_out, mean), or_dummy(rv_out, mean)};
  k.param_f32("momentum", momentum)
      .param_f32("keep", 1.0f - momentum)
      .param_f32("unbiased_n", static_cast<float>(count > 0 ? count - 1 : 0));
  std::string body = "fn run(i: u32) {\n";
  if (rm.buffer) body += "  out0(i, u.momentum * in0(i) + u.keep * in2(i));\n";
  if (rv.buffer) body += "  out1(i, u.momentum * div_f32(in1(i), u.unbiased_n) + u.keep * in3(i));\n";
  k.body = body + "}\n";
  launch_map(ctx, k, channels);
}

void norm_backward_coeffs(Context& ctx, const Operand& dy, const Operand& x, const Operand& mean,
                          const Operand& rstd, const Operand& w, uint64_t rows, uint32_t len,
                          uint32_t groups, uint32_t per_group, uint32_t c_div,
                          const Operand& cb, const Operand& cc) {
  NnKernel k;
  k.key = std::string("norm_bwd_coeffs") + (w.buffer ? "_w" : "");
  k.inputs = {dy, x, mean, rstd, or_dummy(w, x)};
  k.outputs = {cb, cc};
  k.param("len", len).param("groups", groups).param("per_group", per_group).param("c_div", c_div);
  std::string wv = w.buffer ? "in4((r % u.groups) * u.per_group + k / u.c_div)" : "1.0";
  k.body = "fn terms(r: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let e = r * u.len + k;\n  let g = in0(e) * " + wv + ";\n"
           "  return vec2<f32>(g * in1(e), g);\n}\n"
           "fn finish(r: u32, s0: vec2<f32>, s1: vec2<f32>) {\n"
           "  let mu = in2(r);\n  let rs = in3(r);\n  let inv_n = div_f32(1.0, f32(u.len));\n"
           "  let b = (s0.y * mu - s0.x) * rs * rs * rs * inv_n;\n"
           "  out0(r, b);\n  out1(r, -b * mu - s0.y * rs * inv_n);\n}\n";
  launch_rows(ctx, k, rows, len, 1);
}

void norm_backward_input(Context& ctx, const Operand& dy, const Operand& x, const Operand& rstd,
                         const Operand& w, const Operand& cb, const Operand& cc,
                         const Operand& dx, uint64_t count, const ElementMap& m) {
  NnKernel k;
  k.key = std::string("norm_bwd_input") + (w.buffer ? "_w" : "");
  k.inputs = {dy, x, rstd, or_dummy(w, x), cb, cc};
  k.outputs = {dx};
  element_map_params(k, m);
  std::string wv = w.buffer ? "in3(chan(i))" : "1.0";
  k.body = std::string(kElementMap) +
           "fn run(i: u32) {\n  let r = stat_row(i);\n"
           "  out0(i, in2(r) * " + wv + " * in0(i) + in4(r) * in1(i) + in5(r));\n}\n";
  launch_map(ctx, k, count);
}

void norm_affine_grads(Context& ctx, const Operand& dy, const Operand& x, const Operand& mean,
                       const Operand& rstd, const RowLayout& L, uint32_t s_div, uint32_t s_mul,
                       uint32_t s_cdiv, const Operand& dw, const Operand& db) {
  NnKernel k;
  k.key = "norm_affine_grads";
  k.inputs = {dy, x, mean, rstd};
  k.outputs = {dw, db};
  row_layout_params(k, L);
  k.param("s_div", s_div).param("s_mul", s_mul).param("s_cdiv", s_cdiv);
  k.body = std::string(kRowAddr) +
           "fn terms(c: u32, k: u32, ph: u32, prev: vec2<f32>) -> vec2<f32> {\n"
           "  let e = addr(c, k);\n  let s = (k / u.s_div) * u.s_mul + c / u.s_cdiv;\n"
           "  let g = in0(e);\n"
           "  return vec2<f32>(g * (in1(e) - in2(s)) * in3(s), g);\n}\n"
           "fn finish(c: u32, s0: vec2<f32>, s1: vec2<f32>) { out0(c, s0.x); out1(c, s0.y); }\n";
  launch_rows(ctx, k, L.rows, L.len, 1);
}

void batch_norm_backward_input(Context& ctx, const Operand& dy, const Operand& x,
                               const Operand& mean, const Operand& invstd, const Operand& w,
                               const Operand& sum_dy, const Operand& dw_unit, const Operand& dx,
                               uint64_t count, uint32_t inner, uint32_t channels, uint64_t n,
                               bool train) {
  NnKernel k;
  k.key = std::string("bn_bwd_input") + (w.buffer ? "_w" : "") + (train ? "_train" : "");
  k.inputs = {dy, x, mean, invstd, or_dummy(w, x), sum_dy, dw_unit};
  k.outputs = {dx};
  k.param("inner", inner).param("channels", channels).param_f32("n", static_cast<float>(n));
  std::string wv = w.buffer ? "in4(c)" : "1.0";
  std::string body = "fn run(i: u32) {\n  let c = (i / u.inner) % u.channels;\n"
                     "  let is = in3(c);\n";
  if (train) {
    body += "  let kk = div_f32(in6(c) * is, u.n);\n"
            "  let gm = div_f32(in5(c), u.n);\n"
            "  let d = (in1(i) - in2(c)) * kk;\n"
            "  out0(i, (in0(i) - gm - d) * is * " + wv + ");\n";
  } else {
    body += "  out0(i, in0(i) * is * " + wv + ");\n";
  }
  k.body = body + "}\n";
  launch_map(ctx, k, count);
}

}  // namespace twgpu::nn
