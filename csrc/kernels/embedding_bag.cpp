#include "kernels/embedding_bag.h"

#include "kernels/kernel_program.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::nn {

namespace {

// Parameters: the counts of weight rows, entries per row, indices, offsets and bags, the
// padding index (-1: none) and offsets_end (include_last_offset). Bag b covers [start(b), end): `sum_end` is the next offset (the
// end of the list for the last offset), `bag_end` the CPU's offset2bag end, the next
// offset only below `bags`. They differ only when include_last_offset is given a last
// offset short of the list's end.
void bag_params(NnKernel& k, const BagGeometry& g) {
  const int64_t pad = g.padding_idx >= 0 && g.padding_idx < g.num_weights ? g.padding_idx : -1;
  k.param("num_weights", g.num_weights).param("dim", g.dim).param("num_indices", g.indices);
  k.param("num_offsets", g.offsets).param("bags", g.bags).param_i32("padding_idx", static_cast<int32_t>(pad));
  k.param("offsets_end", g.offsets_end ? 1u : 0u);
}

// Offsets = in2, indices = in1.
const char* kBagCommon =
    "fn offset_at(b: u32) -> u32 {\n"
    "  let v = in2(b);\n"
    "  if (v < 0) { return 0u; }\n"
    "  return min(u32(v), u.num_indices);\n}\n"
    "fn sum_end(b: u32) -> u32 { if (b + 1u < u.num_offsets) { return max(offset_at(b + 1u), offset_at(b)); } return u.num_indices; }\n"
    "fn bag_end(b: u32) -> u32 { if (b + 1u < u.bags) { return max(offset_at(b + 1u), offset_at(b)); } return u.num_indices; }\n"
    // The weight row of entry i: 0xffffffff when out of range or the padding row.
    "fn row_of(i: u32) -> u32 {\n"
    "  let v = in1(i);\n"
    "  if (v < 0 || u32(v) >= u.num_weights || v == u.padding_idx) { return 0xffffffffu; }\n"
    "  return u32(v);\n}\n";

}  // namespace

void embedding_bag_check(Context& ctx, const Operand& indices, const Operand& offsets,
                         const BagGeometry& g, uint32_t index_code, uint32_t offset_code) {
  const uint64_t count = uint64_t(g.indices) + g.offsets;
  if (count == 0) return;
  // index_code/offset_code: what the check buffer records for a bad index or offset.
  static const UniformLayout layout({{"indices_offset"},
                                     {"offsets_offset"},
                                     {"indices"},
                                     {"num_weights"},
                                     {"index_code"},
                                     {"offset_code"}});
  KernelLaunch l;
  l.typed = {"embedding_bag_check",
             {static_cast<uint32_t>(indices.dtype), static_cast<uint32_t>(offsets.dtype)}};
  l.buffers = {{indices.buffer, Access::Read, false},
               {offsets.buffer, Access::Read, false},
               {ctx.checks().arm(), Access::ReadWrite, true}};
  l.declare(layout)
      .set_u32("indices_offset", static_cast<uint32_t>(indices.offset))
      .set_u32("offsets_offset", static_cast<uint32_t>(offsets.offset))
      .set_u32("indices", g.indices)
      .set_u32("num_weights", g.num_weights)
      .set_u32("index_code", index_code)
      .set_u32("offset_code", offset_code);
  l.count = count;
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  std::vector<KernelBuffer> bufs = l.buffers;
  const DType it = indices.dtype, ot = offsets.dtype;
  auto widen = [](const std::string& name, DType t) {
    return "fn " + name + "(i: u32) -> vec2<u32> { return " +
           (t == DType::Int64 ? "raw_" + name + "(i)" : "i64_from_i32(raw_" + name + "(i))") + "; }\n";
  };
  l.body = [bufs, it, ot, wg, widen] {
    return kernel_load("raw_ix", bufs, 0, it) + kernel_load("raw_off", bufs, 1, ot) + widen("ix", it) +
           widen("off", ot) +
           "fn bad_u32(v: vec2<u32>, limit: u32) -> bool { return i64_is_neg(v) || v.y != 0u || v.x > limit; }\n" +
           kernel_main(Grid::Invocations, wg) +
           "  if (idx < u.indices) {\n"
           "    let v = ix(idx + u.indices_offset);\n"
           "    if (i64_is_neg(v) || v.y != 0u || v.x >= u.num_weights) {"
           " atomicMax(&buf2[0], u.index_code); }\n"
           "    return;\n  }\n"
           "  let b = idx - u.indices;\n"
           "  let v = off(b + u.offsets_offset);\n"
           "  var bad = bad_u32(v, u.indices);\n"
           "  if (b == 0u && !i64_is_zero(v)) { bad = true; }\n"
           "  if (b > 0u && i64_lt(v, off(b - 1u + u.offsets_offset))) { bad = true; }\n"
           "  if (bad) { atomicMax(&buf2[0], u.offset_code); }\n}\n";
  };
  launch_kernel(ctx, l);
  if (DeviceChecks::synchronous()) ctx.recorder().synchronize();
}

void embedding_bag_forward(Context& ctx, const Operand& weight, const Operand& indices,
                           const Operand& offsets, const Operand& psw, const BagGeometry& g,
                           const Operand& output, const Operand& max_indices) {
  NnKernel k;
  const bool weighted = psw.buffer != nullptr;
  k.key = std::string("embedding_bag_m") + std::to_string(int(g.mode)) + (weighted ? "_psw" : "");
  k.inputs = {weight, indices, offsets, weighted ? psw : or_dummy(Operand{}, weight)};
  k.outputs = {output};
  if (g.mode == BagMode::Max) k.outputs.push_back(max_indices);
  bag_params(k, g);
  std::string s = std::string(kBagCommon) +
                  "fn run(e: u32) {\n"
                  "  let b = e / u.dim;\n  let d = e % u.dim;\n  let start = offset_at(b);\n";
  if (g.mode == BagMode::Max) {
    // The first largest value (NaN wins, as on the CPU); empty bags give 0 and index 0.
    s += "  var best = 0.0;\n  var arg = -1;\n"
         "  for (var i = start; i < bag_end(b); i = i + 1u) {\n"
         "    let r = row_of(i);\n"
         "    if (r == 0xffffffffu) { continue; }\n"
         "    let v = in0(r * u.dim + d);\n"
         "    if (arg < 0 || (!is_nan(best) && (is_nan(v) || v > best))) { best = v; arg = i32(r); }\n"
         "  }\n"
         "  out0(e, best);\n  out1(e, max(arg, 0));\n}\n";
  } else {
    s += "  var acc = 0.0;\n"
         "  let stop = select(bag_end(b), sum_end(b), u.offsets_end != 0u);\n"
         "  for (var i = start; i < stop; i = i + 1u) {\n"
         "    let r = row_of(i);\n"
         "    if (r == 0xffffffffu) { continue; }\n"
         "    acc = acc + in0(r * u.dim + d)" + std::string(weighted ? " * in3(i)" : "") + ";\n"
         "  }\n";
    if (g.mode == BagMode::Mean) {
      // Divided by the bag's non-padding entries (0 for an empty bag).
      s += "  var n = 0u;\n"
           "  for (var i = start; i < bag_end(b); i = i + 1u) {\n"
           "    let v = in1(i);\n"
           "    if (v != u.padding_idx || u.padding_idx < 0) { n = n + 1u; }\n"
           "  }\n"
           "  if (n > 0u) { acc = div_f32(acc, f32(n)); } else { acc = 0.0; }\n";
    }
    s += "  out0(e, acc);\n}\n";
  }
  k.body = s;
  launch_map(ctx, k, uint64_t(g.bags) * g.dim);
}

void embedding_bag_aux(Context& ctx, const Operand& indices, const Operand& offsets,
                       const BagGeometry& g, const Operand& offset2bag, const Operand& bag_size) {
  // Elements [0, indices): offset2bag, the number of offsets 1..bags-1 at or before i
  // (binary search: the offsets are sorted, the check reports them otherwise); then
  // [indices, indices + bags): bag sizes.
  const bool with_o2b = offset2bag.buffer != nullptr, with_sizes = bag_size.buffer != nullptr;
  if (!with_o2b && !with_sizes) return;
  NnKernel k;
  k.key = std::string("embedding_bag_aux") + (with_o2b ? "_o2b" : "") + (with_sizes ? "_sizes" : "");
  k.inputs = {indices, indices, offsets};
  if (with_o2b) k.outputs.push_back(offset2bag);
  if (with_sizes) k.outputs.push_back(bag_size);
  bag_params(k, g);
  const std::string o2b = with_o2b ? "out0" : "", sizes = with_o2b ? "out1" : "out0";
  std::string s = std::string(kBagCommon) + "fn run(e: u32) {\n  let first = " +
                  (with_o2b ? "u.num_indices" : "0u") + ";\n";
  if (with_o2b) {
    s += "  if (e < first) {\n"
         "    var lo = 1u;\n    var hi = max(u.bags, 1u);\n"
         "    loop {\n"
         "      if (lo >= hi) { break; }\n"
         "      let mid = (lo + hi) / 2u;\n"
         "      if (offset_at(mid) <= e) { lo = mid + 1u; } else { hi = mid; }\n"
         "    }\n"
         "    " + o2b + "(e, i32(lo - 1u));\n    return;\n  }\n";
  }
  if (with_sizes) {
    s += "  let b = e - first;\n  var n = 0;\n"
         "  for (var i = offset_at(b); i < bag_end(b); i = i + 1u) {\n"
         "    let v = in1(i);\n"
         "    if (v != u.padding_idx || u.padding_idx < 0) { n = n + 1; }\n"
         "  }\n"
         "  " + sizes + "(b, n);\n";
  }
  k.body = s + "}\n";
  launch_map(ctx, k, (with_o2b ? uint64_t(g.indices) : 0) + (with_sizes ? g.bags : 0));
}

// Backward kernels: in0 grad, in1 indices (row_of), in2 offset2bag, ...
static const char* kBagOf =
    "fn bag_of(j: u32) -> u32 {\n"
    "  let b = in2(j);\n"
    "  if (b < 0 || u32(b) >= u.bags) { return 0xffffffffu; }\n"
    "  return u32(b);\n}\n";

void embedding_bag_backward_sum(Context& ctx, const Operand& grad, const Operand& indices,
                                const Operand& offset2bag, const Operand& bag_size,
                                const Operand& psw, const BagGeometry& g,
                                const Operand& grad_weight) {
  NnKernel k;
  const bool weighted = psw.buffer != nullptr, mean = g.mode == BagMode::Mean;
  k.key = std::string("embedding_bag_bwd_sum") + (mean ? "_mean" : "") + (weighted ? "_psw" : "");
  k.inputs = {grad, indices, offset2bag, mean ? bag_size : offset2bag, weighted ? psw : grad};
  k.outputs = {grad_weight};
  k.accumulate = true;
  bag_params(k, g);
  std::string s = std::string(kBagCommon) + kBagOf +
                  "fn run(e: u32) {\n"
                  "  let j = e / u.dim;\n  let d = e % u.dim;\n"
                  "  let r = row_of(j);\n  let b = bag_of(j);\n"
                  "  if (r == 0xffffffffu || b == 0xffffffffu) { return; }\n"
                  "  var v = in0(b * u.dim + d);\n";
  if (weighted) s += "  v = v * in4(j);\n";
  // The CPU scales by the rounded reciprocal of the bag size.
  if (mean) s += "  let n = in3(b);\n  if (n != 0) { v = v * div_f32(1.0, f32(n)); }\n";
  k.body = s + "  acc0(r * u.dim + d, v);\n}\n";
  launch_map(ctx, k, uint64_t(g.indices) * g.dim);
}

void embedding_bag_backward_max(Context& ctx, const Operand& grad, const Operand& bag_size,
                                const Operand& max_indices, const BagGeometry& g,
                                const Operand& grad_weight) {
  NnKernel k;
  k.key = "embedding_bag_bwd_max";
  k.inputs = {grad, bag_size, max_indices};
  k.outputs = {grad_weight};
  k.accumulate = true;
  bag_params(k, g);
  k.body = "fn run(e: u32) {\n"
           "  let b = e / u.dim;\n"
           "  if (in1(b) == 0) { return; }\n"
           "  let r = in2(e);\n"
           "  if (r < 0 || u32(r) >= u.num_weights) { return; }\n"
           "  acc0(u32(r) * u.dim + e % u.dim, in0(e));\n}\n";
  launch_map(ctx, k, uint64_t(g.bags) * g.dim);
}

void embedding_bag_psw_backward(Context& ctx, const Operand& grad, const Operand& weight,
                                const Operand& indices, const Operand& offset2bag,
                                const BagGeometry& g, const Operand& out) {
  NnKernel k;
  k.key = "embedding_bag_psw_bwd";
  k.inputs = {grad, indices, offset2bag, weight};
  k.outputs = {out};
  bag_params(k, g);
  k.body = std::string(kBagCommon) + kBagOf +
           "fn run(j: u32) {\n"
           "  let r = row_of(j);\n  let b = bag_of(j);\n"
           "  if (r == 0xffffffffu || b == 0xffffffffu) { out0(j, 0.0); return; }\n"
           "  var s = 0.0;\n"
           "  for (var d = 0u; d < u.dim; d = d + 1u) { s = s + in0(b * u.dim + d) * in3(r * u.dim + d); }\n"
           "  out0(j, s);\n}\n";
  launch_map(ctx, k, g.indices);
}

}  // namespace twgpu::nn
