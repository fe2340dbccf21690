#include "kernels/reduce.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// Workgroup sizes (powers of two for the tree). Softmax: up to 256 where the limits allow,
// so that rows of up to 4096 elements stay in registers. Reductions: 256 on GPUs (more loads
// in flight per output), 64 on software adapters (fewer barrier levels; measured faster).
uint32_t softmax_group_cap(Context& ctx) { return std::min<uint32_t>(256, ctx.caps().workgroup_1d()); }
uint32_t reduce_group(Context& ctx) {
  return std::min<uint32_t>(software_adapter(ctx) ? 64 : 256, ctx.caps().workgroup_1d());
}

// Accumulates elements j = first, first + stride, ... < end into `st` with `ways`
// independent states (merged at the end), so that `ways` loads are in flight instead of one.
std::string accumulate(const std::string& first, const std::string& end, const std::string& stride,
                       uint32_t ways) {
  std::string s = "    var j = " + first + ";\n";
  for (uint32_t w = 1; w < ways; ++w) s += "    var st" + std::to_string(w) + " = s_init();\n";
  s += "    for (; j + " + std::to_string(ways - 1) + "u * " + stride + " < " + end + "; j = j + " +
       std::to_string(ways) + "u * " + stride + ") {\n"
       "      st = s_add(st, load(base + j * step), j);\n";
  for (uint32_t w = 1; w < ways; ++w) {
    const std::string i = std::to_string(w);
    s += "      let j" + i + " = j + " + i + "u * " + stride + ";\n"
         "      st" + i + " = s_add(st" + i + ", load(base + j" + i + " * step), j" + i + ");\n";
  }
  s += "    }\n"
       "    for (; j < " + end + "; j = j + " + stride + ") { st = s_add(st, load(base + j * step), j); }\n";
  // Merged in order (ArgMax breaks ties by the index, not by the merge order).
  for (uint32_t w = 1; w < ways; ++w) s += "    st = s_merge(st, st" + std::to_string(w) + ");\n";
  return s;
}

// The same over the elements [lo, hi) of buffer `words4` (array<vec4<u32>>, the input's
// words four at a time) for `lanes` invocations: the aligned body in 16-byte loads, `ways`
// of them in flight, the up to three elements before and after it one at a time. Element
// i is j = i - base of the run; `word(w)` turns a u32 word into the value type.
std::string accumulate4(const std::string& words4, const std::string& lanes, uint32_t ways) {
  std::string s =
      "    let a = min((lo + 3u) & ~3u, hi);\n"
      "    let e = max(hi & ~3u, a);\n"
      "    if (lo + lane < a) { st = s_add(st, load(lo + lane), lo + lane - base); }\n"
      "    if (e + lane < hi) { st = s_add(st, load(e + lane), e + lane - base); }\n"
      "    let e4 = e / 4u;\n"
      "    var w = a / 4u + lane;\n";
  auto add4 = [&](const std::string& state, const std::string& v, const std::string& at) {
    std::string t;
    const char* c = "xyzw";
    for (int k = 0; k < 4; ++k)
      t += "      " + state + " = s_add(" + state + ", word(" + v + "." + c[k] + "), " + at + " + " +
           std::to_string(k) + "u);\n";
    return t;
  };
  for (uint32_t q = 1; q < ways; ++q) s += "    var st" + std::to_string(q) + " = s_init();\n";
  s += "    for (; w + " + std::to_string(ways - 1) + "u * " + lanes + " < e4; w = w + " +
       std::to_string(ways) + "u * " + lanes + ") {\n";
  for (uint32_t q = 0; q < ways; ++q) {
    const std::string i = std::to_string(q);
    s += "      let v" + i + " = " + words4 + "[w + " + i + "u * " + lanes + "];\n";
  }
  for (uint32_t q = 0; q < ways; ++q) {
    const std::string i = std::to_string(q);
    s += add4(q == 0 ? "st" : "st" + i, "v" + i, "4u * (w + " + i + "u * " + lanes + ") - base");
  }
  s += "    }\n"
       "    for (; w < e4; w = w + " + lanes + ") {\n"
       "      let v0 = " + words4 + "[w];\n" + add4("st", "v0", "4u * w - base") + "    }\n";
  for (uint32_t q = 1; q < ways; ++q) s += "    st = s_merge(st, st" + std::to_string(q) + ");\n";
  return s;
}

// Output q = (o * chunks + c) * inner + i reduces j in [c * chunk, min(reduce, (c + 1) * chunk))
// of outer row o, column i.
const char* kAddressing =
    "fn in_base(q: u32) -> u32 { return u.in_offset + (q / (u.chunks * u.inner)) * u.reduce * u.inner + q % u.inner; }\n"
    "fn j_begin(q: u32) -> u32 { return ((q / u.inner) % u.chunks) * u.chunk; }\n"
    "fn j_end(q: u32) -> u32 { return min(u.reduce, j_begin(q) + u.chunk); }\n";

std::string zero_of(Compute c) {
  switch (c) {
    case Compute::F32: return "0.0";
    case Compute::I32: return "0";
    default: return "vec2<u32>(0u, 0u)";
  }
}
std::string one_of(Compute c) {
  switch (c) {
    case Compute::F32: return "1.0";
    case Compute::I32: return "1";
    default: return "vec2<u32>(1u, 0u)";
  }
}
std::string add_of(Compute c, const std::string& a, const std::string& b) {
  return c == Compute::I64 ? "i64_add(" + a + ", " + b + ")" : "(" + a + " + " + b + ")";
}
std::string mul_of(Compute c, const std::string& a, const std::string& b) {
  return c == Compute::I64 ? "i64_mul(" + a + ", " + b + ")" : "(" + a + " * " + b + ")";
}
// Lowest / highest value of a compute type (identities of max / min).
std::string lowest_of(Compute c) {
  switch (c) {
    case Compute::F32: return "(-f32_inf())";
    case Compute::I32: return "(-2147483647 - 1)";
    default: return "vec2<u32>(0u, 0x80000000u)";
  }
}
std::string highest_of(Compute c) {
  switch (c) {
    case Compute::F32: return "f32_inf()";
    case Compute::I32: return "2147483647";
    default: return "vec2<u32>(0xffffffffu, 0x7fffffffu)";
  }
}

// Comparison helpers for the value type T: r_lt (ordered, for non-NaN values), r_nan.
std::string compare_helpers(Compute c) {
  std::string t = wgsl_type(c);
  std::string lt = c == Compute::I64 ? "i64_lt(a, b)" : "a < b";
  std::string nan = c == Compute::F32 ? "is_nan(a)" : "false";
  return "fn r_lt(a: " + t + ", b: " + t + ") -> bool { return " + lt + "; }\n" +
         "fn r_nan(a: " + t + ") -> bool { return " + nan + "; }\n" +
         // NaN-propagating max / min (the first NaN wins).
         "fn r_max(a: " + t + ", b: " + t + ") -> " + t +
         " { if (r_nan(a)) { return a; } if (r_nan(b)) { return b; } if (r_lt(a, b)) { return b; } return a; }\n"
         "fn r_min(a: " + t + ", b: " + t + ") -> " + t +
         " { if (r_nan(a)) { return a; } if (r_nan(b)) { return b; } if (r_lt(b, a)) { return b; } return a; }\n";
}

std::string truthy_of(Compute c, const std::string& v) {
  switch (c) {
    case Compute::F32: return "f32_truthy(" + v + ")";
    case Compute::I32: return "(" + v + " != 0)";
    default: return "(!i64_is_zero(" + v + "))";
  }
}

struct StateCode {
  std::string decl;        // struct S and helpers
  bool needs_mean = false; // a first pass computes the mean into `pre_value`
  bool needs_max = false;  // a first pass computes the NaN-propagating max into `pre_value`
};

// The accumulator of one kind: struct S, s_init, s_add(s, v, j), s_merge(a, b), s_store.
StateCode state_code(const ReduceSpec& s) {
  const Compute tc = compute_type_for(s.in);
  const std::string T = wgsl_type(tc);
  const Compute ac = s.acc;
  const std::string A = wgsl_type(ac);
  // The value in the accumulator type; an input first cast to a half type is rounded to it.
  std::string cv = wgsl_convert(tc, ac, "v");
  if (s.round_input == DType::Float16 && ac == Compute::F32)
    cv = "f16_bits_to_f32(f32_to_f16_bits(" + cv + "))";
  if (s.round_input == DType::BFloat16 && ac == Compute::F32)
    cv = "bf16_bits_to_f32(f32_to_bf16_bits(" + cv + "))";
  StateCode r;
  std::string& d = r.decl;
  auto simple = [&](const std::string& init, const std::string& add, const std::string& merge,
                    const std::string& store) {
    d += "struct S { a: " + A + " }\n";
    d += "fn s_init() -> S { return S(" + init + "); }\n";
    d += "fn s_add(s: S, v: " + T + ", j: u32) -> S { return S(" + add + "); }\n";
    d += "fn s_merge(x: S, y: S) -> S { return S(" + merge + "); }\n";
    d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, " + store + "); }\n";
  };
  switch (s.kind) {
    case ReduceKind::Sum:
      simple(zero_of(ac), add_of(ac, "s.a", cv), add_of(ac, "x.a", "y.a"), "s.a");
      break;
    case ReduceKind::NanSum:
      d += "fn skip_nan(v: " + T + ") -> bool { return " +
           (tc == Compute::F32 ? "is_nan(v)" : "false") + "; }\n";
      simple(zero_of(ac), "select(" + add_of(ac, "s.a", cv) + ", s.a, skip_nan(v))",
             add_of(ac, "x.a", "y.a"), "s.a");
      break;
    case ReduceKind::Prod:
      simple(one_of(ac), mul_of(ac, "s.a", cv), mul_of(ac, "x.a", "y.a"), "s.a");
      break;
    case ReduceKind::Mean:
      simple("0.0", "s.a + " + wgsl_convert(tc, Compute::F32, "v"), "x.a + y.a",
             "div_f32(s.a, u.param)");
      break;
    case ReduceKind::Max:
    case ReduceKind::Min: {
      const bool mx = s.kind == ReduceKind::Max;
      // Floats: branch-free and NaN-sticky, v replaces a when it is better or a NaN, and a
      // NaN held is never replaced by a number (comparisons with it are false). Integers
      // have no NaN: WGSL's max / min, or the int64 comparison.
      std::string pick;
      if (tc == Compute::F32) {
        pick = std::string("select(a, v, ") + (mx ? "v > a" : "v < a") + " || is_nan(v))";
      } else if (tc == Compute::I32) {
        pick = mx ? "max(a, v)" : "min(a, v)";
      } else {
        d += compare_helpers(tc);
        pick = mx ? "r_max(a, v)" : "r_min(a, v)";
      }
      d += "struct S { a: " + T + " }\n";
      d += "fn s_init() -> S { return S(" + (mx ? lowest_of(tc) : highest_of(tc)) + "); }\n";
      d += "fn s_pick(a: " + T + ", v: " + T + ") -> " + T + " { return " + pick + "; }\n";
      d += "fn s_add(s: S, v: " + T + ", j: u32) -> S { return S(s_pick(s.a, v)); }\n";
      d += "fn s_merge(x: S, y: S) -> S { return S(s_pick(x.a, y.a)); }\n";
      d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, s.a); }\n";
      break;
    }
    case ReduceKind::MinMax:
      d += compare_helpers(tc);
      d += "struct S { lo: " + T + ", hi: " + T + " }\n";
      d += "fn s_init() -> S { return S(" + highest_of(tc) + ", " + lowest_of(tc) + "); }\n";
      d += "fn s_add(s: S, v: " + T + ", j: u32) -> S { return S(r_min(s.lo, v), r_max(s.hi, v)); }\n";
      d += "fn s_merge(x: S, y: S) -> S { return S(r_min(x.lo, y.lo), r_max(x.hi, y.hi)); }\n";
      d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, s.lo); store1(u.out2_offset + o, s.hi); }\n";
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: {
      // The winner is the better value; among equal values (and among NaNs, which beat
      // everything) the smaller index, as the CPU reports the first occurrence.
      d += compare_helpers(tc);
      const bool mx = s.kind == ReduceKind::ArgMax;
      d += "struct S { v: " + T + ", i: u32 }\n";
      d += "fn s_init() -> S { return S(" + (mx ? lowest_of(tc) : highest_of(tc)) +
           ", 0xffffffffu); }\n";
      d += "fn s_merge(x: S, y: S) -> S {\n"
           "  if (y.i == 0xffffffffu) { return x; }\n"
           "  if (x.i == 0xffffffffu) { return y; }\n"
           "  let xn = r_nan(x.v); let yn = r_nan(y.v);\n"
           "  if (xn || yn) { if (xn && yn) { if (y.i < x.i) { return y; } return x; } if (xn) { return x; } return y; }\n";
      d += mx ? "  if (r_lt(y.v, x.v)) { return x; } if (r_lt(x.v, y.v)) { return y; }\n"
              : "  if (r_lt(x.v, y.v)) { return x; } if (r_lt(y.v, x.v)) { return y; }\n";
      d += "  if (y.i < x.i) { return y; } return x;\n}\n";
      d += "fn s_add(s: S, v: " + T + ", j: u32) -> S { return s_merge(s, S(v, j)); }\n";
      std::string idx = "i32(select(s.i, 0u, s.i == 0xffffffffu))";
      if (s.values && s.indices)
        d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, s.v); store1(u.out2_offset + o, " + idx + "); }\n";
      else if (s.values)
        d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, s.v); }\n";
      else
        d += "fn s_store(o: u32, s: S) { store0(u.out_offset + o, " + idx + "); }\n";
      break;
    }
    case ReduceKind::All:
      simple("1", "s.a & select(0, 1, " + truthy_of(tc, "v") + ")", "x.a & y.a", "s.a");
      break;
    case ReduceKind::Any:
      simple("0", "s.a | select(0, 1, " + truthy_of(tc, "v") + ")", "x.a | y.a", "s.a");
      break;
    case ReduceKind::CountNonzero:
      simple("0", "s.a + select(0, 1, " + truthy_of(tc, "v") + ")", "x.a + y.a", "s.a");
      break;
    case ReduceKind::Var: {
      // Second pass over deviations from the mean: sum of squares and the plain sum
      // (which corrects the rounding of the mean).
      r.needs_mean = true;
      std::string fv = wgsl_convert(tc, Compute::F32, "v");
      d += "struct S { q: f32, c: f32 }\n";
      d += "fn s_init() -> S { return S(0.0, 0.0); }\n";
      d += "fn s_add(s: S, v: " + T + ", j: u32) -> S { let e = " + fv +
           " - pre_value; return S(s.q + e * e, s.c + e); }\n";
      d += "fn s_merge(x: S, y: S) -> S { return S(x.q + y.q, x.c + y.c); }\n";
      d += "fn s_store(o: u32, s: S) {\n"
           "  let n = f32(u.reduce);\n"
           "  let m2 = max(s.q - div_f32(s.c * s.c, n), 0.0);\n"
           "  let var_ = div_f32(select(m2, 0.0, u.reduce == 0u), max(n - u.param, 0.0));\n";
      d += s.take_sqrt ? "  store0(u.out_offset + o, sqrt(var_));\n" : "  store0(u.out_offset + o, var_);\n";
      if (s.second) d += "  store1(u.out2_offset + o, pre_value + div_f32(s.c, n));\n";
      d += "}\n";
      break;
    }
    case ReduceKind::LogSumExp: {
      // Shifted by the max (0 when it is infinite, so that inf stays inf), as the CPU does.
      r.needs_max = true;
      std::string fv = wgsl_convert(tc, Compute::F32, "v");
      d += "fn shift() -> f32 { return select(pre_value, 0.0, is_inf(pre_value)); }\n";
      simple("0.0", "s.a + exp_keep_nan(" + fv + " - shift())", "x.a + y.a", "log_keep_special(s.a) + shift()");
      break;
    }
    case ReduceKind::Norm2:
    case ReduceKind::Norm1:
    case ReduceKind::Norm0:
    case ReduceKind::NormP: {
      std::string a = "abs(" + wgsl_convert(tc, Compute::F32, "v") + ")";
      std::string term, fin = "s.a";
      if (s.kind == ReduceKind::Norm2) { term = "x * x"; fin = "sqrt(s.a)"; }
      if (s.kind == ReduceKind::Norm1) term = "x";
      if (s.kind == ReduceKind::Norm0) term = "select(0.0, 1.0, x != 0.0 || is_nan(x))";
      if (s.kind == ReduceKind::NormP) {
        term = "pow_f32(x, u.param)";
        fin = "pow_f32(s.a, div_f32(1.0, u.param))";
      }
      if (s.partial_in) { term = "x"; a = wgsl_convert(tc, Compute::F32, "v"); }
      if (s.partial_out) fin = "s.a";
      d += "fn term(x: f32) -> f32 { return " + term + "; }\n";
      simple("0.0", "s.a + term(" + a + ")", "x.a + y.a", fin);
      break;
    }
    case ReduceKind::NormInf:
    case ReduceKind::NormNegInf: {
      const bool mx = s.kind == ReduceKind::NormInf;
      d += compare_helpers(Compute::F32);
      std::string f = mx ? "r_max" : "r_min";
      std::string a = "abs(" + wgsl_convert(tc, Compute::F32, "v") + ")";
      simple(mx ? "0.0" : "f32_inf()", f + "(s.a, " + a + ")", f + "(x.a, y.a)", "s.a");
      break;
    }
  }
  return r;
}

Compute store_compute(const ReduceSpec& s, int which) {
  const Compute tc = compute_type_for(s.in);
  switch (s.kind) {
    case ReduceKind::Sum: case ReduceKind::NanSum: case ReduceKind::Prod: return s.acc;
    case ReduceKind::Max: case ReduceKind::Min: case ReduceKind::MinMax: return tc;
    case ReduceKind::ArgMax: case ReduceKind::ArgMin:
      return (which == 0 && s.values) ? tc : Compute::I32;
    case ReduceKind::All: case ReduceKind::Any: case ReduceKind::CountNonzero: return Compute::I32;
    default: return Compute::F32;
  }
}

// Invocations that share one output in the workgroup kernel: a power of two from 32 (one
// coalesced row of loads) up to the workgroup, about 64 elements each, so that short runs
// put several outputs in a workgroup and pay fewer tree levels per element.
uint32_t lanes_per_output(uint64_t chunk, uint32_t wg) {
  uint32_t lanes = 32;
  while (lanes < wg && uint64_t(lanes) * 64 < chunk) lanes *= 2;
  return std::min(lanes, wg);
}

const UniformLayout& reduce_layout() {
  static const UniformLayout layout({{"in_offset"}, {"reduce"}, {"inner"}, {"out_offset"},
                                     {"out2_offset"}, {"param", UniformType::F32}, {"chunk"},
                                     {"chunks"}, {"outputs"}});
  return layout;
}

// One dispatch; `chunk` is the length of a chunk of the reduced run (ceil(reduce / chunks)
// unless a split launch passes its parent's).
void reduce_piece(Context& ctx, const ReduceSpec& requested, const ReduceShape& shape,
                  uint64_t chunk, const ReduceBuffers& b, float param) {
  ReduceSpec spec = requested;
  switch (spec.kind) {
    case ReduceKind::All: case ReduceKind::Any: case ReduceKind::CountNonzero:
      spec.acc = Compute::I32;
      break;
    case ReduceKind::Sum: case ReduceKind::NanSum: case ReduceKind::Prod:
    case ReduceKind::Max: case ReduceKind::Min: case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: case ReduceKind::MinMax:
      break;
    default:
      spec.acc = Compute::F32;
  }
  const uint64_t chunks = std::max<uint64_t>(shape.chunks, 1);
  const uint64_t outputs = shape.outer * shape.inner * chunks;
  if (outputs == 0) return;
  const uint64_t in_elems = shape.outer * shape.inner * shape.reduce;
  if (shape.reduce > 0x7fffffffull || b.in_offset + in_elems > 0xffffffffull ||
      std::max(b.out_offset, b.out2_offset) + outputs > 0xffffffffull)
    fail(ErrorKind::Unsupported, "torch_webgpu: reduction over too many elements");
  const bool two_outputs = b.out2 != nullptr;
  // Workgroups share outputs when each output reads many elements and outputs are few
  // enough that the groups do not starve a wide grid.
  // Many outputs side by side in memory (inner > 1) read best one invocation each:
  // neighbouring invocations then read neighbouring elements.
  // A handful of outputs (a decode step's mask or stop-flag reductions over a length that
  // grows by one per token) keep one invocation each up to 256 elements: switching kernels
  // at 32 compiled a pipeline early in most generations (40-60 ms on an H100).
  const bool wide_inner = shape.inner >= 64 && outputs >= 2048;
  const bool groups = !wide_inner && (chunk >= 256 || (chunk >= 32 && outputs < 4096 && outputs > 64));
  const uint32_t wg = groups ? reduce_group(ctx) : ctx.caps().workgroup_1d();
  const uint32_t lanes = groups ? lanes_per_output(chunk, wg) : 1;
  const uint32_t per_group = wg / lanes;  // outputs per workgroup
  // Loads in flight per invocation: 8 on GPUs (a full group of 256 reading 4 bytes each
  // otherwise holds too few bytes in flight to cover memory latency), 4 on software adapters.
  const uint32_t ways = software_adapter(ctx) ? 4 : 8;
  // Contiguous runs of 4-byte values that fit one binding also read the input through a
  // second binding as vec4<u32>: four elements per load.
  const bool wide_loads = groups && shape.inner == 1 && !needs_window(ctx, b.in) &&
                          (spec.in == DType::Float32 || spec.in == DType::Int32);

  KernelLaunch l;
  l.buffers = {{b.in, Access::Read, false},
               {b.out, Access::ReadWrite, is_subword(spec.out)}};
  if (two_outputs) l.buffers.push_back({b.out2, Access::ReadWrite, is_subword(spec.out2)});
  l.declare(reduce_layout())
      .set_u32("in_offset", static_cast<uint32_t>(b.in_offset))
      .set_u32("reduce", static_cast<uint32_t>(shape.reduce))
      .set_u32("inner", static_cast<uint32_t>(shape.inner))
      .set_u32("out_offset", static_cast<uint32_t>(b.out_offset))
      .set_u32("out2_offset", static_cast<uint32_t>(b.out2_offset))
      .set_f32("param", param)
      .set_u32("chunk", static_cast<uint32_t>(chunk))
      .set_u32("chunks", static_cast<uint32_t>(chunks))
      .set_u32("outputs", static_cast<uint32_t>(outputs));
  l.buffers[0].touches(l.word_of("in_offset"), spec.in, b.in_offset, in_elems);
  l.buffers[1].touches(l.word_of("out_offset"), spec.out, b.out_offset, outputs);
  if (two_outputs) l.buffers[2].touches(l.word_of("out2_offset"), spec.out2, b.out2_offset, outputs);
  const size_t words4 = l.buffers.size();
  if (wide_loads) {
    l.buffers.push_back({b.in, Access::Read, false});
    l.buffers.back().vec4 = true;
  }
  l.grid = groups ? Grid::Groups : Grid::Invocations;
  l.count = groups ? (outputs + per_group - 1) / per_group : outputs;
  l.workgroup = wg;
  auto u8 = [](auto v) { return static_cast<uint32_t>(v) & 0xffu; };
  const uint32_t flags = (spec.values ? 1u : 0u) | (spec.indices ? 2u : 0u) |
                         (spec.take_sqrt ? 4u : 0u) | (spec.second ? 8u : 0u) |
                         (spec.partial_in ? 16u : 0u) | (spec.partial_out ? 32u : 0u) |
                         (two_outputs ? 64u : 0u) | (groups ? 128u : 0u) | (wide_loads ? 256u : 0u);
  l.typed = {"reduce",
             {u8(spec.kind) | u8(spec.acc) << 8 | flags << 16,
              u8(spec.in) | u8(spec.out) << 8 | u8(spec.out2) << 16 | u8(spec.round_input) << 24,
              lanes | ctx.caps().subgroup_size << 16, ways}};
  l.body = [&]() {
    std::string s = kernel_load("load", l.buffers, 0, spec.in);
    s += kernel_store("store0", l.buffers, 1, spec.out, store_compute(spec, 0));
    if (two_outputs) s += kernel_store("store1", l.buffers, 2, spec.out2, store_compute(spec, 1));
    s += kAddressing;
    s += "var<private> pre_value: f32 = 0.0;\n";
    s += "fn pre_max(m: f32, v: f32) -> f32 { if (is_nan(m)) { return m; } if (is_nan(v) || v > m) { return v; } return m; }\n";
    StateCode st = state_code(spec);
    s += st.decl;
    if (wide_loads) {
      const std::string T = wgsl_type(compute_type_for(spec.in));
      s += "fn word(w: u32) -> " + T + " { return bitcast<" + T + ">(w); }\n";
    }
    const std::string fload = wgsl_convert(compute_type_for(spec.in), Compute::F32, "load(base + j * step)");
    if (!groups) {
      s += kernel_main(Grid::Invocations, l.workgroup);
      s += "  let base = in_base(idx);\n  let step = u.inner;\n";
      if (st.needs_mean) {
        s += "  var ps = 0.0;\n"
             "  for (var j = 0u; j < u.reduce; j = j + 1u) { ps = ps + " + fload + "; }\n"
             "  pre_value = div_f32(ps, f32(u.reduce));\n";
      }
      if (st.needs_max) {
        s += "  var pm = -f32_inf();\n"
             "  for (var j = 0u; j < u.reduce; j = j + 1u) { pm = pre_max(pm, " + fload + "); }\n"
             "  pre_value = pm;\n";
      }
      s += "  var st = s_init();\n  {\n    let end = j_end(idx);\n" +
           accumulate("j_begin(idx)", "end", "1u", ways) + "  }\n  s_store(idx, st);\n}\n";
      return s;
    }
    // `lanes` invocations per output: output q = group * per_group + lid / lanes, merged
    // over each run of `lanes` invocations (group_reduce.h: subgroups or a tree).
    const std::string L = std::to_string(lanes);
    const uint32_t sg = ctx.caps().subgroup_size;
    s += group_reduce_fn({"merge_lanes", "S", wgsl_struct_fields(st.decl, "S"), "s_merge", "s_init()", wg, lanes, sg});
    if (st.needs_mean)
      s += "fn f_add(a: f32, b: f32) -> f32 { return a + b; }\n" +
           group_reduce_fn({"sum_lanes", "f32", "", "f_add", "0.0", wg, lanes, sg, true});
    if (st.needs_max) s += group_reduce_fn({"max_lanes", "f32", "", "pre_max", "-f32_inf()", wg, lanes, sg});
    s += kernel_main(Grid::Groups, wg);
    s += "  let lane = lid % " + L + "u;\n"
         "  let q = group * " + std::to_string(per_group) + "u + lid / " + L + "u;\n"
         "  let live = q < u.outputs;\n"
         "  let base = in_base(select(0u, q, live));\n  let step = u.inner;\n";
    if (st.needs_mean) {
      s += "  var ps = 0.0;\n"
           "  if (live) { for (var j = lane; j < u.reduce; j = j + " + L + "u) { ps = ps + " + fload + "; } }\n"
           "  pre_value = div_f32(sum_lanes(ps, lid), f32(u.reduce));\n";
    }
    if (st.needs_max) {
      s += "  var pm = -f32_inf();\n"
           "  if (live) { for (var j = lane; j < u.reduce; j = j + " + L + "u) { pm = pre_max(pm, " + fload + "); } }\n"
           "  pre_value = max_lanes(pm, lid);\n";
    }
    std::string run = "    let end = j_end(q);\n" + accumulate("j_begin(q) + lane", "end", L + "u", ways);
    if (wide_loads) {
      run = "    let lo = base + j_begin(q);\n    let hi = base + j_end(q);\n" +
            accumulate4("buf" + std::to_string(words4), L + "u", std::max<uint32_t>(ways / 2, 1));
    }
    s += "  var st = s_init();\n"
         "  if (live) {\n" + run + "  }\n"
         "  let total = merge_lanes(st, lid);\n"
         "  if (live && lane == 0u) { s_store(q, total); }\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

// NaN-sticky max: a NaN seen stays (comparisons with it are false).
const char* kNanMax =
    "fn nan_max(m: f32, v: f32) -> f32 { if (is_nan(v) || v > m) { return v; } return m; }\n";

// wg_pair(v, lid): the row's (max, sum of exp(x - max)) from the own pairs of its `lanes`
// invocations (runs of `lanes` in a group of `wg`) in one tree: a sum taken at a smaller
// max is rescaled to the larger (empty sums stay 0, so that an invocation that saw only
// -inf adds nothing). All invocations call it.
std::string softmax_pair_tree(uint32_t wg, uint32_t lanes) {
  const std::string L = std::to_string(lanes) + "u";
  return "var<workgroup> red2: array<vec2<f32>, " + std::to_string(wg) + ">;\n"
         "fn pair_merge(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {\n"
         "  let m = nan_max(x.x, y.x);\n"
         "  return vec2<f32>(m, select(x.y * exp_keep_nan(x.x - m), 0.0, x.y == 0.0) + select(y.y * exp_keep_nan(y.x - m), 0.0, y.y == 0.0));\n}\n"
         "fn wg_pair(v: vec2<f32>, lid: u32) -> vec2<f32> {\n  workgroupBarrier();\n  red2[lid] = v;\n  workgroupBarrier();\n"
         "  let lane = lid % " + L + ";\n"
         "  for (var w = " + std::to_string(lanes / 2) + "u; w > 0u; w = w >> 1u) {\n"
         "    if (lane < w) { red2[lid] = pair_merge(red2[lid], red2[lid + w]); }\n    workgroupBarrier();\n  }\n"
         "  return red2[lid - lane];\n}\n";
}

// Float32 softmax / log_softmax over contiguous rows whose length and offsets are multiples
// of 4: `lanes` invocations per row read it 16 bytes at a time, each folds its vec4s into
// an online (max, sum) pair (rescaling the sum when the max grows), one tree merges the
// pairs, and the row is written 16 bytes at a time. Rows of up to 8 vec4s per invocation
// stay in registers (one read, one write); longer ones are read twice. On GPUs rows of up to
// 128 elements share a workgroup (8 lanes each); software adapters keep at least 64
// invocations per row and the scalar kernel below 128 elements (unmeasured there).
bool softmax_vec4_fits(Context& ctx, const SoftmaxSpec& spec, const ReduceShape& shape,
                       const SoftmaxBuffers& b) {
  return (spec.kind == SoftmaxKind::Softmax || spec.kind == SoftmaxKind::LogSoftmax) &&
         spec.in == DType::Float32 && spec.out == DType::Float32 && shape.inner == 1 &&
         shape.reduce >= (software_adapter(ctx) ? 128u : 4u) && shape.reduce % 4 == 0 &&
         b.in_offset % 4 == 0 && b.out_offset % 4 == 0 && !needs_window(ctx, b.in) &&
         !needs_window(ctx, b.out);
}

void softmax_rows_vec4(Context& ctx, const SoftmaxSpec& spec, const ReduceShape& shape,
                       const SoftmaxBuffers& b) {
  const uint64_t n4 = shape.reduce / 4;
  // Lanes per row in three classes that hold the row in registers at 4 vec4s each: 8 lanes
  // up to 128 elements (GPUs), 64 up to 1024, the cap (8 vec4s each there, or read twice)
  // beyond. Few classes on purpose: a decode's attention rows grow by one element per
  // token, and a pipeline per doubling cost a compile each time the length crossed one
  // (40-190 ms on an H100 against 10 ms per GPT-Neo token).
  const uint32_t cap = softmax_group_cap(ctx);
  const uint32_t lanes = std::min<uint32_t>(cap, !software_adapter(ctx) && n4 <= 32 ? 8 : n4 <= 256 ? 64 : cap);
  const uint32_t wg = std::max<uint32_t>(lanes, 64);
  const uint32_t per_group = wg / lanes;  // rows per workgroup
  const uint32_t cached = n4 <= uint64_t(lanes) * 4 ? 4 : n4 <= uint64_t(lanes) * 8 ? 8 : 0;
  static const UniformLayout layout({{"in_offset"}, {"reduce"}, {"out_offset"}, {"rows"}});
  KernelLaunch l;
  l.buffers = {{b.in, Access::Read, false}, {b.out, Access::ReadWrite, false}};
  l.buffers[0].vec4 = l.buffers[1].vec4 = true;
  l.declare(layout)
      .set_u32("in_offset", static_cast<uint32_t>(b.in_offset))
      .set_u32("reduce", static_cast<uint32_t>(shape.reduce))
      .set_u32("out_offset", static_cast<uint32_t>(b.out_offset))
      .set_u32("rows", static_cast<uint32_t>(shape.outer));
  l.grid = Grid::Groups;
  l.count = (shape.outer + per_group - 1) / per_group;
  l.workgroup = wg;
  const bool log = spec.kind == SoftmaxKind::LogSoftmax;
  l.typed = {"softmax:vec4", {log ? 1u : 0u, cached, lanes}};
  l.body = [wg, lanes, per_group, cached, log] {
    const std::string G = std::to_string(lanes) + "u";
    std::string s = kNanMax + softmax_pair_tree(wg, lanes);
    s += "fn ld(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf0[i]); }\n"
         "fn st4(i: u32, v: vec4<f32>) { buf1[i] = bitcast<vec4<u32>>(v); }\n"
         // Folds four more elements into the pair (max, sum of exp(x - shift)).
         "fn pair_add4(p: vec2<f32>, v: vec4<f32>) -> vec2<f32> {\n"
         "  let m = nan_max(p.x, nan_max(nan_max(v.x, v.y), nan_max(v.z, v.w)));\n"
         "  let e = exp4_keep_nan(v - select(m, 0.0, m == -f32_inf()));\n"
         "  return vec2<f32>(m, select(p.y * exp_keep_nan(p.x - m), 0.0, p.y == 0.0) + ((e.x + e.y) + (e.z + e.w)));\n}\n";
    s += kernel_main(Grid::Groups, wg);
    s += "  let lane = lid % " + G + ";\n"
         "  let row = group * " + std::to_string(per_group) + "u + lid / " + G + ";\n"
         "  let live = group < frame_count() && row < u.rows;\n  let r = select(0u, row, live);\n"
         "  let n4 = select(0u, u.reduce / 4u, live);\n"
         "  let src = (u.in_offset + r * u.reduce) / 4u;\n"
         "  let dst = (u.out_offset + r * u.reduce) / 4u;\n"
         "  var p = vec2<f32>(-f32_inf(), 0.0);\n";
    auto out = [log](const std::string& a) {
      return log ? "(" + a + " - m) - lt" : "exp4_keep_nan(" + a + " - m) * inv";
    };
    std::string finish = "  let mt = wg_pair(p, lid);\n  let m = mt.x;\n" +
                         std::string(log ? "  let lt = log_keep_special(mt.y);\n" : "  let inv = div_f32(1.0, mt.y);\n");
    if (!cached) {
      s += "  for (var j = lane; j < n4; j = j + " + G + ") { p = pair_add4(p, ld(src + j)); }\n" + finish +
           "  for (var j = lane; j < n4; j = j + " + G + ") { st4(dst + j, " + out("ld(src + j)") + "); }\n}\n";
      return s;
    }
    // vec4 q of this invocation: j = lane + q * lanes, held in a<q> (named: loop-indexed
    // arrays would live in local memory).
    for (uint32_t q = 0; q < cached; ++q) {
      const std::string Q = std::to_string(q);
      s += "  let j" + Q + " = lane + " + Q + "u * " + G + ";\n  let in" + Q + " = j" + Q + " < n4;\n"
           "  let a" + Q + " = ld(src + select(0u, j" + Q + ", in" + Q + "));\n";
    }
    for (uint32_t q = 0; q < cached; ++q) {
      const std::string Q = std::to_string(q);
      s += "  if (in" + Q + ") { p = pair_add4(p, a" + Q + "); }\n";
    }
    s += finish;
    for (uint32_t q = 0; q < cached; ++q) {
      const std::string Q = std::to_string(q);
      s += "  if (in" + Q + ") { st4(dst + j" + Q + ", " + out("a" + Q) + "); }\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

void softmax_piece(Context& ctx, const SoftmaxSpec& spec, const ReduceShape& shape,
                   const SoftmaxBuffers& b) {
  const uint64_t rows = shape.outer * shape.inner;
  if (rows == 0 || shape.reduce == 0) return;
  if (rows * shape.reduce > 0xffffffffull ||
      std::max(b.in_offset, b.in2_offset) + rows * shape.reduce > 0xffffffffull)
    fail(ErrorKind::Unsupported, "torch_webgpu: softmax over too many elements");
  // Every adapter: llvmpipe runs it faster than the scalar kernel too (0.30-0.34 -> 0.40 GB/s
  // at 1024x4096, benchmarks/run.py --quick).
  if (softmax_vec4_fits(ctx, spec, shape, b))
    return softmax_rows_vec4(ctx, spec, shape, b);
  const bool backward = spec.kind == SoftmaxKind::SoftmaxBackward ||
                        spec.kind == SoftmaxKind::LogSoftmaxBackward;
  const bool groups = shape.reduce >= 128;
  // The smallest group that holds the row in registers (16 elements per invocation).
  uint32_t wg = groups ? 64 : ctx.caps().workgroup_1d();
  while (groups && wg < softmax_group_cap(ctx) && shape.reduce > uint64_t(wg) * 16) wg *= 2;

  const uint64_t elems = rows * shape.reduce;
  static const UniformLayout layout(
      {{"in_offset"}, {"reduce"}, {"inner"}, {"out_offset"}, {"in2_offset"}});
  KernelLaunch l;
  l.buffers = {{b.in, Access::Read, false}};
  l.buffers[0].touches(layout.fields()[0].word, spec.in, b.in_offset, elems);
  if (backward) {
    l.buffers.push_back({b.in2, Access::Read, false});
    l.buffers[1].touches(layout.fields()[4].word, spec.in2, b.in2_offset, elems);
  }
  const size_t ob = l.buffers.size();
  // Invocations of one row write elements `inner` apart: narrow outputs need atomics.
  l.buffers.push_back({b.out, Access::ReadWrite, is_subword(spec.out)});
  l.buffers[ob].touches(layout.fields()[3].word, spec.out, b.out_offset, elems);
  l.declare(layout)
      .set_u32("in_offset", static_cast<uint32_t>(b.in_offset))
      .set_u32("reduce", static_cast<uint32_t>(shape.reduce))
      .set_u32("inner", static_cast<uint32_t>(shape.inner))
      .set_u32("out_offset", static_cast<uint32_t>(b.out_offset))
      .set_u32("in2_offset", static_cast<uint32_t>(b.in2_offset));
  l.grid = groups ? Grid::Groups : Grid::Invocations;
  l.count = rows;
  l.workgroup = wg;
  // Rows of at most 16 elements per invocation are read once into registers (named
  // values: loop-indexed arrays would live in local memory), not once per pass. Always 16
  // slots (masked past the row): one pipeline per group size, not one per doubling of a
  // row that grows by one element per decoded token.
  const uint32_t cached = groups && shape.reduce <= uint64_t(wg) * 16 ? 16 : 0;
  l.typed = {"softmax", {static_cast<uint32_t>(spec.kind), static_cast<uint32_t>(spec.in) |
                         static_cast<uint32_t>(spec.in2) << 8 | static_cast<uint32_t>(spec.out) << 16,
                         groups ? 1u : 0u, cached}};
  l.body = [&]() {
    std::string s = kernel_load("load_a", l.buffers, 0, spec.in);
    if (backward) s += kernel_load("load_b", l.buffers, 1, spec.in2);
    s += kernel_store("store", l.buffers, ob, spec.out, Compute::F32);
    const Compute ca = compute_type_for(spec.in);
    const Compute cb = compute_type_for(spec.in2);
    s += "fn xa(k: u32) -> f32 { return " + wgsl_convert(ca, Compute::F32, "load_a(u.in_offset + k)") + "; }\n";
    if (backward)
      s += "fn xb(k: u32) -> f32 { return " + wgsl_convert(cb, Compute::F32, "load_b(u.in2_offset + k)") + "; }\n";
    s += "fn put(k: u32, v: f32) { store(u.out_offset + k, v); }\n";
    s += kNanMax;
    const std::string G = std::to_string(wg);
    // Row loops: `first`, `stride` differ between the two grids.
    std::string row, first, stride;
    if (groups) {
      s += "var<workgroup> red: array<f32, " + G + ">;\n";
      // Shared-memory reductions (all invocations call them: uniform control flow).
      s += "fn wg_sum(v: f32, lid: u32) -> f32 {\n  workgroupBarrier();\n  red[lid] = v;\n  workgroupBarrier();\n"
           "  for (var w = " + std::to_string(wg / 2) + "u; w > 0u; w = w >> 1u) {\n"
           "    if (lid < w) { red[lid] = red[lid] + red[lid + w]; }\n    workgroupBarrier();\n  }\n"
           "  return red[0];\n}\n";
      s += softmax_pair_tree(wg, wg);
      s += kernel_main(Grid::Groups, wg);
      s += "  let live = group < frame_count();\n  let r = select(0u, group, live);\n"
           "  let n = select(0u, u.reduce, live);\n";
      first = "lid";
      stride = G + "u";
    } else {
      s += kernel_main(Grid::Invocations, wg);
      s += "  let r = idx;\n  let n = u.reduce;\n";
      first = "0u";
      stride = "1u";
    }
    s += "  let base = (r / u.inner) * u.reduce * u.inner + r % u.inner;\n  let step = u.inner;\n";
    auto loop = [&](const std::string& body) {
      return "  for (var j = " + first + "; j < n; j = j + " + stride + ") { let k = base + j * step; " +
             body + " }\n";
    };
    auto total = [&](const std::string& var) {
      if (!groups) return std::string();
      return "  " + var + " = wg_sum(" + var + ", lid);\n";
    };
    // After each invocation's max m and sum t of exp(x - m) (shifted by 0 when m is -inf,
    // so that -inf elements add 0), the row's m and t.
    const std::string shift = "  let sh = select(m, 0.0, m == -f32_inf());\n  var t = 0.0;\n";
    const std::string row_pair = groups ? "  let mt = wg_pair(vec2<f32>(m, t), lid);\n  m = mt.x;\n  t = mt.y;\n" : "";
    if (cached) {
      // Element q of this invocation: j = lid + q * wg, held in a<q> (and b<q>).
      auto each = [&](const std::function<std::string(const std::string&)>& stmt) {
        std::string out;
        for (uint32_t q = 0; q < cached; ++q) out += stmt(std::to_string(q));
        return out;
      };
      s += each([&](const std::string& q) {
        std::string t = "  let j" + q + " = lid + " + q + "u * " + G + "u;\n  let in" + q + " = j" + q +
                        " < n;\n  let k" + q + " = base + select(0u, j" + q + ", in" + q + ") * step;\n"
                        "  let a" + q + " = select(0.0, xa(k" + q + "), in" + q + ");\n";
        if (backward) t += "  let b" + q + " = select(0.0, xb(k" + q + "), in" + q + ");\n";
        return t;
      });
      auto put_all = [&](const std::string& value_of_q) {
        return each([&](const std::string& q) {
          std::string v = value_of_q;
          for (size_t p = v.find('#'); p != std::string::npos; p = v.find('#', p + q.size())) v.replace(p, 1, q);
          return "  if (in" + q + ") { put(k" + q + ", " + v + "); }\n";
        });
      };
      switch (spec.kind) {
        case SoftmaxKind::Softmax:
        case SoftmaxKind::LogSoftmax:
          s += "  var m = -f32_inf();\n" +
               each([](const std::string& q) { return "  if (in" + q + ") { m = nan_max(m, a" + q + "); }\n"; }) +
               shift +
               each([](const std::string& q) { return "  if (in" + q + ") { t = t + exp_keep_nan(a" + q + " - sh); }\n"; }) +
               row_pair;
          if (spec.kind == SoftmaxKind::Softmax)
            s += "  let inv = div_f32(1.0, t);\n" + put_all("exp_keep_nan(a# - m) * inv");
          else
            s += "  let lt = log_keep_special(t);\n" + put_all("(a# - m) - lt");
          break;
        case SoftmaxKind::SoftmaxBackward:
          s += "  var t = 0.0;\n" +
               each([](const std::string& q) { return "  t = t + a" + q + " * b" + q + ";\n"; }) + total("t");
          s += put_all("b# * (a# - t)");
          break;
        case SoftmaxKind::LogSoftmaxBackward:
          s += "  var t = 0.0;\n" +
               each([](const std::string& q) { return "  t = t + a" + q + ";\n"; }) + total("t");
          s += put_all("a# - exp_keep_nan(b#) * t");
          break;
      }
      s += "}\n";
      return s;
    }
    switch (spec.kind) {
      case SoftmaxKind::Softmax:
      case SoftmaxKind::LogSoftmax:
        s += "  var m = -f32_inf();\n" + loop("m = nan_max(m, xa(k));") + shift +
             loop("t = t + exp_keep_nan(xa(k) - sh);") + row_pair;
        if (spec.kind == SoftmaxKind::Softmax)
          s += "  let inv = div_f32(1.0, t);\n" + loop("put(k, exp_keep_nan(xa(k) - m) * inv);");
        else
          s += "  let lt = log_keep_special(t);\n" + loop("put(k, (xa(k) - m) - lt);");
        break;
      case SoftmaxKind::SoftmaxBackward:
        s += "  var t = 0.0;\n" + loop("t = t + xa(k) * xb(k);") + total("t");
        s += loop("put(k, xb(k) * (xa(k) - t));");
        break;
      case SoftmaxKind::LogSoftmaxBackward:
        s += "  var t = 0.0;\n" + loop("t = t + xa(k);") + total("t");
        s += loop("put(k, xa(k) - exp_keep_nan(xb(k)) * t);");
        break;
    }
    s += "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

bool any_window(Context& ctx, std::initializer_list<WGPUBuffer> buffers) {
  if (!ctx.pool().has_oversized()) return false;
  for (WGPUBuffer b : buffers)
    if (needs_window(ctx, b)) return true;
  return false;
}

}  // namespace

// Tensors larger than one binding: blocks of outer rows, or, when one row's reduced run is
// larger than a binding, blocks of its chunks (the first stage of a two-stage reduction).
void launch_reduce(Context& ctx, const ReduceSpec& spec, const ReduceShape& shape,
                   const ReduceBuffers& b, float param) {
  const uint64_t chunks = std::max<uint64_t>(shape.chunks, 1);
  const uint64_t chunk = (shape.reduce + chunks - 1) / chunks;
  if (!any_window(ctx, {b.in, b.out, b.out2}))
    return reduce_piece(ctx, spec, shape, chunk, b, param);
  const uint64_t in_row = shape.reduce * shape.inner;   // elements per outer row
  const uint64_t out_row = chunks * shape.inner;
  const uint64_t out_bytes = std::max(element_size(spec.out), element_size(spec.out2));
  auto at_row = [&](uint64_t o, uint64_t c) {
    ReduceBuffers p = b;
    p.in_offset += o * in_row + c * chunk * shape.inner;
    p.out_offset += o * out_row + c * shape.inner;
    p.out2_offset += o * out_row + c * shape.inner;
    return p;
  };
  if (in_row * element_size(spec.in) <= window_budget(ctx)) {
    const uint64_t step =
        std::min(rows_per_window(ctx, shape.outer, in_row * element_size(spec.in), "reduce"),
                 rows_per_window(ctx, shape.outer, out_row * out_bytes, "reduce"));
    for (uint64_t o = 0; o < shape.outer; o += step) {
      ReduceShape piece = shape;
      piece.outer = std::min(step, shape.outer - o);
      reduce_piece(ctx, spec, piece, chunk, at_row(o, 0), param);
    }
    return;
  }
  if (chunks == 1)
    fail_too_large(ctx, "reduction (" + std::to_string(static_cast<int>(spec.kind)) + ")",
                   in_row * element_size(spec.in));
  const uint64_t step =
      rows_per_window(ctx, chunks, chunk * shape.inner * element_size(spec.in), "reduce");
  for (uint64_t o = 0; o < shape.outer; ++o) {
    for (uint64_t c = 0; c < chunks; c += step) {
      const uint64_t n = std::min(step, chunks - c);
      ReduceShape piece{1, std::min(shape.reduce, (c + n) * chunk) - c * chunk, shape.inner, n};
      reduce_piece(ctx, spec, piece, chunk, at_row(o, c), param);
    }
  }
}

// Tensors larger than one binding: blocks of outer rows.
void launch_softmax(Context& ctx, const SoftmaxSpec& spec, const ReduceShape& shape,
                    const SoftmaxBuffers& b) {
  if (!any_window(ctx, {b.in, b.in2, b.out})) return softmax_piece(ctx, spec, shape, b);
  const uint64_t row = shape.reduce * shape.inner;
  const uint64_t widest = std::max({element_size(spec.in), element_size(spec.in2),
                                    element_size(spec.out)});
  const uint64_t step = rows_per_window(ctx, shape.outer, row * widest, "softmax");
  for (uint64_t o = 0; o < shape.outer; o += step) {
    ReduceShape piece = shape;
    piece.outer = std::min(step, shape.outer - o);
    SoftmaxBuffers p = b;
    p.in_offset += o * row;
    p.in2_offset += o * row;
    p.out_offset += o * row;
    softmax_piece(ctx, spec, piece, p);
  }
}

}  // namespace twgpu
