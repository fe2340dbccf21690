#include "kernels/shape_ops.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// The gather copy's uniforms: `dims` holds (size, stride, shift) per dim, outermost
// first. One layout per dim count (callers hold the runtime lock).
const UniformLayout& gather_layout(size_t ndim) {
  static std::map<size_t, std::unique_ptr<UniformLayout>> layouts;
  auto& layout = layouts[ndim];
  if (!layout)
    layout.reset(new UniformLayout({{"ndim"},
                                    {"src_offset", UniformType::I32},
                                    {"dst_word"},
                                    {"numel"},
                                    {"mask"},
                                    {"diagonal", UniformType::I32},
                                    {"dims", UniformType::U32,
                                     static_cast<uint32_t>(std::max<size_t>(3 * ndim, 1))}}));
  return *layout;
}

// The source element of output element e, or -1 where the triangle mask zeroes it.
const char* const kGatherSource = R"WGSL(
fn src_elem(e: u32) -> i32 {
  let nd = u.ndim;
  var rem = e;
  var off = u.src_offset;
  var col = 0u;
  var row = 0u;
  for (var k = 0u; k < nd; k = k + 1u) {
    let w = 3u * (nd - 1u - k);
    let n = u_dims(w);
    let c = rem % n;
    rem = rem / n;
    if (k == 0u) { col = c; }
    if (k == 1u) { row = c; }
    let sh = u_dims(w + 2u);
    let sc = select(c + n - sh, c - sh, c >= sh);
    off = off + i32(sc) * bitcast<i32>(u_dims(w + 1u));
  }
  let mode = u.mask;
  if (mode != 0u) {
    let diff = i32(col) - i32(row);
    let k = u.diagonal;
    if ((mode == 1u && diff > k) || (mode == 2u && diff < k)) { return -1; }
  }
  return off;
}
)WGSL";

std::string gather_main(int elem_size) {
  std::string s;
  if (elem_size >= 4) {
    const std::string words = std::to_string(elem_size / 4);
    s += "  let s = src_elem(idx);\n";
    s += "  for (var j = 0u; j < " + words + "u; j = j + 1u) {\n";
    s += "    var v = 0u;\n";
    s += "    if (s >= 0) { v = buf0[u32(s) * " + words + "u + j]; }\n";
    s += "    buf1[u.dst_word + idx * " + words + "u + j] = v;\n  }\n";
  } else {
    // One invocation per output word: its 2 (or 4) lanes gathered from source words.
    const bool half = elem_size == 2;
    const std::string lanes = half ? "2u" : "4u", bits = half ? "16u" : "8u",
                      mask = half ? "0xffffu" : "0xffu", per = half ? "1u" : "2u",
                      lane = half ? "(su & 1u)" : "(su & 3u)";
    s += "  var w = 0u;\n";
    s += "  for (var j = 0u; j < " + lanes + "; j = j + 1u) {\n";
    s += "    let e = idx * " + lanes + " + j;\n";
    s += "    if (e < u.numel) {\n";
    s += "      let s = src_elem(e);\n";
    s += "      if (s >= 0) {\n";
    s += "        let su = u32(s);\n";
    s += "        let b = (buf0[su >> " + per + "] >> (" + lane + " * " + bits + ")) & " + mask + ";\n";
    s += "        w = w | (b << (j * " + bits + "));\n";
    s += "      }\n    }\n  }\n";
    s += "  buf1[u.dst_word + idx] = w;\n";
  }
  return s + "}\n";
}

// Integer linspace as the CPU computes it: trunc(fl(base +- step * j)), where the CPU's
// compiler fuses the multiply-add (one rounding of the exact value). step = M * 2^-f with
// M < 2^53, so the exact product P = M * j has 85 bits: X = T +- P mod 2^f / 2^f with
// T = base +- (P >> f). fl(X) reaches the next integer away from zero exactly when X is
// within half an ulp of it, 2^(b - 54) with b the bit length of floor(|X|) (that integer
// always has an even mantissa: ties go to it). Those tests are bit-range tests on P.
const char* const kLinspaceInt = R"WGSL(
fn word_at(w: vec3<u32>, i: i32) -> u32 {
  if (i < 0 || i > 2) { return 0u; }
  return w[i];
}
// Bits [lo, lo + 32) of P (lo may be negative or past the top).
fn pbits(w: vec3<u32>, lo: i32) -> u32 {
  let wi = select(lo / 32, (lo - 31) / 32, lo < 0);
  let sh = u32(lo - wi * 32);
  let a = word_at(w, wi);
  if (sh == 0u) { return a; }
  return (a >> sh) | (word_at(w, wi + 1) << (32u - sh));
}
fn range_mask(i: u32, lo: u32, hi: u32) -> u32 {
  let a = max(lo, i * 32u);
  let b = min(hi, i * 32u + 32u);
  if (a >= b) { return 0u; }
  let n = b - a;
  return select((1u << n) - 1u, 0xffffffffu, n == 32u) << (a - i * 32u);
}
fn all_zero(w: vec3<u32>, lo: u32, hi: u32) -> bool {
  for (var i = 0u; i < 3u; i = i + 1u) {
    if ((w[i] & range_mask(i, lo, min(hi, 96u))) != 0u) { return false; }
  }
  return true;
}
fn all_ones(w: vec3<u32>, lo: u32, hi: u32) -> bool {
  if (hi > 96u && lo < hi) { return false; }
  for (var i = 0u; i < 3u; i = i + 1u) {
    let m = range_mask(i, lo, hi);
    if ((w[i] & m) != m) { return false; }
  }
  return true;
}
fn bitlen64(a: vec2<u32>) -> u32 {
  if (a.y != 0u) { return 64u - countLeadingZeros(a.y); }
  return 32u - countLeadingZeros(a.x);
}
fn lin_int(base: vec2<u32>, neg: bool, j: u32) -> vec2<u32> {
  let m0 = u_step_mantissa(0u);
  let m1 = u_step_mantissa(1u);
  if (j == 0u || (m0 | m1) == 0u) { return base; }
  let a = u32_mul_wide(m0, j);
  let b = u32_mul_wide(m1, j);
  let w1 = a.y + b.x;
  let p = vec3<u32>(a.x, w1, b.y + select(0u, 1u, w1 < a.y));
  let f = -u.step_exp;
  let pint = vec2<u32>(pbits(p, f), pbits(p, f + 32));
  let t = select(i64_add(base, pint), i64_sub(base, pint), neg);
  if (f <= 0 || all_zero(p, 0u, u32(f))) { return t; }
  let one = vec2<u32>(1u, 0u);
  // |X| = mag + psi, psi in (0, 1): psi = phi (the fraction of P) or 1 - phi.
  var mag = t;
  var psi_is_phi = true;
  var positive = true;
  if (!neg) {
    if (i64_is_neg(t)) { mag = i64_sub(i64_neg(t), one); psi_is_phi = false; positive = false; }
  } else {
    if (i64_lt(vec2<u32>(0u, 0u), t)) { mag = i64_sub(t, one); psi_is_phi = false; }
    else { mag = i64_neg(t); positive = false; }
  }
  // Round up iff 1 - psi <= 2^(c - f), c = f + b - 54.
  let c = f + i32(bitlen64(mag)) - 54;
  var up = c >= f;
  if (c >= 0 && c < f) {
    let uc = u32(c);
    let uf = u32(f);
    if (psi_is_phi) {
      up = all_ones(p, uc, uf);  // phi >= 1 - 2^(c - f)
    } else {                     // phi <= 2^(c - f)
      up = all_zero(p, uc + 1u, uf) && (all_zero(p, uc, uc + 1u) || all_zero(p, 0u, uc));
    }
  }
  if (up) { mag = i64_add(mag, one); }
  return select(i64_neg(mag), mag, positive);
}
)WGSL";

}  // namespace

namespace {

// Source elements [first, last] a gather reads.
std::pair<int64_t, int64_t> source_span(const GatherCopy& g) {
  int64_t lo = g.src_offset, hi = g.src_offset;
  for (const auto& d : g.dims) {
    int64_t span = static_cast<int64_t>(d.size - 1) * d.stride;
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi};
}

// One dispatch; `windowed`: source and destination bound through windows over its span.
void gather_piece(Context& ctx, const GatherCopy& g, bool windowed) {
  const int e = g.elem_size;
  KernelLaunch l;
  l.typed = {"shape:gather", {static_cast<uint32_t>(e)}};
  l.buffers = {{g.src, Access::Read, false}, {g.dst, Access::ReadWrite, false}};
  std::vector<uint32_t> dims;
  for (const auto& d : g.dims) {
    dims.push_back(d.size);
    dims.push_back(static_cast<uint32_t>(d.stride));
    dims.push_back(d.shift);
  }
  // Only the sign of (col - row - k) matters and |col - row| < 2**31: clamp k.
  int64_t k = std::max<int64_t>(std::min<int64_t>(g.diagonal, INT32_MAX), INT32_MIN + 1);
  const UniformLayout& layout = gather_layout(g.dims.size());
  l.count = e >= 4 ? g.numel : (g.numel * e + 3) / 4;
  if (windowed) {
    auto [lo, hi] = source_span(g);
    KernelBuffer& src = l.buffers[0];
    src.offset_word = layout.fields()[layout.find("src_offset")].word;
    src.element_bytes = static_cast<uint32_t>(e);
    src.touched = {static_cast<uint64_t>(lo), static_cast<uint64_t>(hi) + 1};
    KernelBuffer& dst = l.buffers[1];
    dst.offset_word = layout.fields()[layout.find("dst_word")].word;
    dst.element_bytes = 4;
    dst.touched = {g.dst_word, g.dst_word + (e >= 4 ? g.numel * e / 4 : l.count)};
  }
  l.declare(layout)
      .set_u32("ndim", static_cast<uint32_t>(g.dims.size()))
      .set_i32("src_offset", static_cast<int32_t>(g.src_offset))
      .set_u32("dst_word", static_cast<uint32_t>(g.dst_word))
      .set_u32("numel", static_cast<uint32_t>(g.numel))
      .set_u32("mask", static_cast<uint32_t>(g.mask))
      .set_i32("diagonal", static_cast<int32_t>(k))
      .set_u32s("dims", dims);
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  l.body = [&, wg] {
    return std::string(kGatherSource) + kernel_main(Grid::Invocations, wg) + gather_main(e);
  };
  launch_kernel(ctx, l);
}

}  // namespace

void launch_gather_copy(Context& ctx, const GatherCopy& g) {
  if (g.numel == 0) return;
  const int e = g.elem_size;
  if (e != 1 && e != 2 && e != 4 && e != 8 && e != 16)
    fail(ErrorKind::Internal, "torch_webgpu: gather copy of an element size it cannot move");
  for (const auto& d : g.dims)
    if (d.size == 0) return;
  // Source indices are i32 in the kernel.
  auto [lo, hi] = source_span(g);
  if (lo < 0 || hi >= (int64_t{1} << 31))
    fail(ErrorKind::Unsupported, "torch_webgpu: gather copy over more than 2**31 elements");
  if (!needs_window(ctx, g.src) && !needs_window(ctx, g.dst)) return gather_piece(ctx, g, false);
  // Buffers larger than one binding: pieces of the outermost dim (not a rolled one), each
  // reading and writing within one window.
  const GatherDim outer = g.dims.empty() ? GatherDim{} : g.dims[0];
  if (g.dims.empty()) return gather_piece(ctx, g, true);
  const uint64_t inner = g.numel / outer.size;
  if (outer.shift != 0 && g.mask == TriangleMask::None && (e >= 4 || inner * e % 4 == 0)) {
    // Rolled along the outermost dim: output rows [0, shift) come from the source's last
    // `shift` rows, the rest from its first rows; two unrolled copies.
    const uint64_t sh = outer.shift;
    GatherCopy head = g, tail = g;
    head.dims[0] = {static_cast<uint32_t>(sh), outer.stride, 0};
    head.src_offset = g.src_offset + static_cast<int64_t>(outer.size - sh) * outer.stride;
    head.numel = sh * inner;
    tail.dims[0] = {static_cast<uint32_t>(outer.size - sh), outer.stride, 0};
    tail.dst_word = g.dst_word + sh * inner * e / 4;
    tail.numel = (outer.size - sh) * inner;
    launch_gather_copy(ctx, head);
    launch_gather_copy(ctx, tail);
    return;
  }
  if (outer.shift != 0) return gather_piece(ctx, g, true);  // refused, naming it
  GatherCopy rest = g;
  rest.dims[0].size = 1;
  auto [rlo, rhi] = source_span(rest);
  const uint64_t budget = window_budget(ctx) / static_cast<uint64_t>(e);
  const uint64_t step = static_cast<uint64_t>(std::abs(static_cast<int64_t>(outer.stride)));
  const uint64_t inner_span = static_cast<uint64_t>(rhi - rlo) + 1;
  uint64_t rows = std::min<uint64_t>(outer.size, budget / std::max<uint64_t>(inner, 1));
  if (step > 0 && inner_span <= budget) rows = std::min<uint64_t>(rows, (budget - inner_span) / step + 1);
  // Narrow dtypes are written as whole words: pieces start on word boundaries.
  const uint64_t row_bytes = inner * static_cast<uint64_t>(e);
  uint64_t multiple = 1;
  while (e < 4 && (row_bytes * multiple) % 4 != 0) ++multiple;
  rows = rows / multiple * multiple;
  const int nd = static_cast<int>(g.dims.size());
  if ((rows == 0 || inner_span > budget) && nd > 1 && (e >= 4 || row_bytes % 4 == 0)) {
    // One row of the outermost dim does not fit: each row alone, split the same way.
    for (uint64_t a = 0; a < outer.size; ++a) {
      GatherCopy p = g;
      p.dims.erase(p.dims.begin());
      p.src_offset = g.src_offset + static_cast<int64_t>(a) * outer.stride;
      p.dst_word = g.dst_word + a * row_bytes / 4;
      p.numel = inner;
      if (nd == 2) p.diagonal = g.diagonal + static_cast<int64_t>(a);  // the row is fixed at a
      launch_gather_copy(ctx, p);
    }
    return;
  }
  if (rows == 0 || inner_span > budget) return gather_piece(ctx, g, true);  // refused, naming it
  for (uint64_t a = 0; a < outer.size; a += rows) {
    GatherCopy p = g;
    p.dims[0].size = static_cast<uint32_t>(std::min<uint64_t>(rows, outer.size - a));
    p.src_offset = g.src_offset + static_cast<int64_t>(a) * outer.stride;
    p.dst_word = g.dst_word + a * row_bytes / 4;
    p.numel = p.dims[0].size * inner;
    // The triangle mask compares column - row: the split dim is the row (2-d) or the column (1-d).
    if (nd == 2) p.diagonal = g.diagonal + static_cast<int64_t>(a);
    if (nd == 1) p.diagonal = g.diagonal - static_cast<int64_t>(a);
    gather_piece(ctx, p, true);
  }
}

void launch_range_fill(Context& ctx, const RangeFill& r) {
  if (r.numel == 0) return;
  const bool atomic = is_subword(r.dtype);
  // Scalars as two words (lo, hi): an int64 value, or an f32's bits in lo.
  static const UniformLayout layout({{"dst_offset"},
                                     {"first"},
                                     {"start", UniformType::U32, 2},
                                     {"step", UniformType::U32, 2},
                                     {"end", UniformType::U32, 2},
                                     {"halfway"},
                                     {"steps"},
                                     {"base", UniformType::F32},
                                     {"step_mantissa", UniformType::U32, 2},
                                     {"step_exp", UniformType::I32},
                                     {"step_negative"}});
  KernelLaunch l;
  l.typed = {"shape:range", {static_cast<uint32_t>(r.kind), static_cast<uint32_t>(r.dtype),
                             static_cast<uint32_t>(r.compute)}};
  l.buffers = {{r.dst, Access::ReadWrite, atomic}};
  l.declare(layout)
      .set_u32("dst_offset", static_cast<uint32_t>(r.dst_offset))
      .set_u32("first", 0)
      .set_u32s("start", {r.start.lo, r.start.hi})
      .set_u32s("step", {r.step.lo, r.step.hi})
      .set_u32s("end", {r.end.lo, r.end.hi})
      .set_u32("halfway", static_cast<uint32_t>(r.halfway))
      .set_u32("steps", static_cast<uint32_t>(r.steps))
      .set_f32("base", r.base)
      .set_u32s("step_mantissa", {static_cast<uint32_t>(r.step_mantissa),
                                  static_cast<uint32_t>(r.step_mantissa >> 32)})
      .set_i32("step_exp", static_cast<int32_t>(r.step_exp))
      .set_u32("step_negative", r.step_negative ? 1u : 0u);
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  l.body = [&, wg] {
    std::string s = kernel_store("store", l.buffers, 0, r.dtype, r.compute);
    s += kernel_main(Grid::Invocations, wg);
    // Element `i` of the whole fill; a piece's first element travels in u.first.
    s += "  let i = idx + u.first;\n"
         "  let start = vec2<u32>(u_start(0u), u_start(1u));\n"
         "  let step = vec2<u32>(u_step(0u), u_step(1u));\n"
         "  let end = vec2<u32>(u_end(0u), u_end(1u));\n";
    if (r.kind == RangeKind::LinspaceInt) {
      s = std::string(kLinspaceInt) + s;
      s += "  let sneg = u.step_negative != 0u;\n"
           "  var v = vec2<u32>(0u, 0u);\n"
           "  if (i < u.halfway) { v = lin_int(start, sneg, i); }\n"
           "  else { v = lin_int(end, !sneg, u.steps - 1u - i); }\n";
    } else if (r.compute == Compute::I64) {
      s += "  let v = i64_add(start, i64_mul(step, vec2<u32>(i, 0u)));\n";
    } else if (r.kind == RangeKind::Affine) {
      s += "  let v = bitcast<f32>(start.x) + bitcast<f32>(step.x) * f32(i);\n";
    } else {
      // The CPU's linspace steps in the output's type: half types round after every
      // operation (its logspace steps the exponent in double: no rounding there).
      std::string round = "fn rnd(x: f32) -> f32 { return x; }\n";
      const bool lin = r.kind == RangeKind::Linspace;
      if (lin && r.dtype == DType::Float16)
        round = "fn rnd(x: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(x)); }\n";
      if (lin && r.dtype == DType::BFloat16)
        round = "fn rnd(x: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }\n";
      s = round + s;
      s += "  let fstep = bitcast<f32>(step.x);\n"
           "  var x = 0.0;\n"
           "  if (i < u.halfway) { x = rnd(bitcast<f32>(start.x) + rnd(fstep * rnd(f32(i)))); }\n"
           "  else { x = rnd(bitcast<f32>(end.x) - rnd(fstep * rnd(f32(u.steps - 1u - i)))); }\n";
      s += r.kind == RangeKind::Logspace ? "  let v = pow_f32(u.base, x);\n"
                                         : "  let v = x;\n";
    }
    s += "  store(u.dst_offset + idx, v);\n}\n";
    return s;
  };
  // A fill larger than one binding goes in pieces that each fit a window (narrow types
  // are stored as whole words: pieces start on word boundaries).
  const uint64_t e = element_size(r.dtype);
  const uint64_t per_word = e < 4 ? 4 / e : 1;
  const uint64_t piece = std::max<uint64_t>(per_word, window_budget(ctx) / e / per_word * per_word);
  for (uint64_t first = 0; first < r.numel; first += piece) {
    const uint64_t count = std::min(piece, r.numel - first);
    l.set_u32("dst_offset", static_cast<uint32_t>(r.dst_offset + first))
        .set_u32("first", static_cast<uint32_t>(first));
    l.buffers[0].touches(l.word_of("dst_offset"), r.dtype, r.dst_offset + first, count);
    l.count = count;
    launch_kernel(ctx, l);
  }
}

namespace {

// Whether every input's rows, row stride and offset and the output's offset are whole
// vec4 words: the cat then moves 16 bytes per invocation.
bool cat_in_vec4s(const std::vector<CatInput>& inputs, uint64_t dst_word) {
  if (dst_word % 4) return false;
  for (const CatInput& in : inputs)
    if (in.word_offset % 4 || in.row_words % 4 || in.row_stride_words % 4) return false;
  return true;
}

}  // namespace

bool cat_words_fits(Context& ctx, const std::vector<CatInput>& inputs, uint64_t rows, uint64_t dst_word) {
  // For small outputs on GPUs, where a cat's host cost (a copy per input) is what counts:
  // software adapters pay for the per-word division and branches (llvmpipe: 0.75 against
  // the copies' 3.0 GB/s at 4x 1024x1024). Large cats take the kernel where it moves vec4
  // words (one dispatch instead of a copy per input, each after a barrier), else the
  // copies' vec4 rows. TORCH_WEBGPU_CAT_WORDS=0 keeps the copies, =1 takes the kernel on
  // any adapter (A/Bs).
  const char* e = std::getenv("TORCH_WEBGPU_CAT_WORDS");
  const std::string choice = e ? e : "";
  if (inputs.empty() || ctx.caps().max_storage_buffers_per_stage < 2 || choice == "0") return false;
  if (software_adapter(ctx) && choice != "1") return false;
  const uint64_t cap = cat_in_vec4s(inputs, dst_word) ? UINT64_MAX : kCatWordsMaxBytes;
  const uint64_t budget = std::min<uint64_t>(window_budget(ctx), cap) / 4;  // words
  uint64_t out_row = 0;
  for (const CatInput& in : inputs) {
    const uint64_t span = rows == 0 ? 0 : in.row_stride_words * (rows - 1) + in.row_words;
    if (span > budget || in.word_offset + span > UINT32_MAX || in.row_stride_words > UINT32_MAX) return false;
    out_row += in.row_words;
  }
  return out_row * rows <= budget && out_row * rows <= UINT32_MAX;
}

void launch_cat_words(Context& ctx, const std::vector<CatInput>& inputs, WGPUBuffer dst,
                      uint64_t dst_word, uint64_t rows) {
  // Uniforms: the output's row and word offset, the first column this dispatch writes,
  // and per input its word offset, row stride and the end of its columns within the
  // dispatch's.
  static const UniformLayout layout({{"out_row"}, {"out_offset"}, {"first_col"}, {"in0"}, {"in1"},
                                     {"in2"}, {"in3"}, {"in4"}, {"in5"}, {"in6"}, {"end0"}, {"end1"},
                                     {"end2"}, {"end3"}, {"end4"}, {"end5"}, {"end6"}, {"stride0"},
                                     {"stride1"}, {"stride2"}, {"stride3"}, {"stride4"}, {"stride5"},
                                     {"stride6"}});
  static const char* const kIn[] = {"in0", "in1", "in2", "in3", "in4", "in5", "in6"};
  static const char* const kEnd[] = {"end0", "end1", "end2", "end3", "end4", "end5", "end6"};
  static const char* const kStride[] = {"stride0", "stride1", "stride2", "stride3", "stride4", "stride5", "stride6"};
  uint64_t out_row = 0;
  for (const CatInput& in : inputs) out_row += in.row_words;
  if (rows == 0 || out_row == 0) return;
  const size_t per = std::min<size_t>(kCatInputsPerDispatch, ctx.caps().max_storage_buffers_per_stage - 1);
  const uint32_t wg = ctx.caps().workgroup_1d();
  // Word counts and offsets stay in u32 words; with vec4s the kernel divides them by 4.
  const bool vec4 = cat_in_vec4s(inputs, dst_word);
  const uint32_t per_item = vec4 ? 4u : 1u;
  uint64_t first_col = 0;
  for (size_t first = 0; first < inputs.size(); first += per) {
    const size_t n = std::min(per, inputs.size() - first);
    KernelLaunch l;
    l.typed = {"shape:cat_words", {static_cast<uint32_t>(n), per_item}};
    l.declare(layout).set_u32("out_row", static_cast<uint32_t>(out_row));
    l.set_u32("out_offset", static_cast<uint32_t>(dst_word)).set_u32("first_col", static_cast<uint32_t>(first_col));
    uint64_t width = 0;
    for (size_t i = 0; i < kCatInputsPerDispatch; ++i) {
      const CatInput* in = i < n ? &inputs[first + i] : nullptr;
      if (in) width += in->row_words;
      l.set_u32(kIn[i], in ? static_cast<uint32_t>(in->word_offset) : 0u);
      l.set_u32(kEnd[i], static_cast<uint32_t>(width));
      l.set_u32(kStride[i], in ? static_cast<uint32_t>(in->row_stride_words) : 0u);
    }
    for (size_t i = 0; i < n; ++i) {
      const CatInput& in = inputs[first + i];
      l.buffers.push_back({in.buffer, Access::Read, false});
      l.buffers.back().touches(l.word_of(kIn[i]), DType::Int32, in.word_offset,
                               in.row_stride_words * (rows - 1) + in.row_words);
      l.buffers.back().vec4 = vec4;
    }
    l.buffers.push_back({dst, Access::ReadWrite, false});
    l.buffers.back().touches(l.word_of("out_offset"), DType::Int32, dst_word, out_row * rows);
    l.buffers.back().vec4 = vec4;
    l.workgroup = wg;
    l.body = [n, wg, vec4] {
      // Item c (a word, or a vec4 of them) of row r of this dispatch's columns comes from
      // the input whose columns hold c; rows of input i are (end_i - end_{i-1}) words
      // long, stride_i apart.
      const std::string q = vec4 ? " / 4u" : "";
      std::string s = kernel_main(Grid::Invocations, wg);
      s += "  let width = u.end" + std::to_string(n - 1) + q + ";\n"
           "  let r = idx / width;\n  let c = idx - r * width;\n"
           "  var v = " + std::string(vec4 ? "vec4<u32>()" : "0u") + ";\n";
      for (size_t i = 0; i < n; ++i) {
        const std::string k = std::to_string(i);
        const std::string start = i ? "u.end" + std::to_string(i - 1) + q : "0u";
        s += std::string(i ? "  else " : "  ") + (i + 1 < n ? "if (c < u.end" + k + q + ") " : "") +
             "{ v = buf" + k + "[(u.in" + k + " + r * u.stride" + k + ")" + q + " + c - " + start + "]; }\n";
      }
      s += "  buf" + std::to_string(n) + "[(u.out_offset + r * u.out_row + u.first_col)" + q + " + c] = v;\n}\n";
      return s;
    };
    l.count = width * rows / per_item;
    launch_kernel(ctx, l);
    first_col += width;
  }
}

void launch_repeat_index(Context& ctx, WGPUBuffer ends, uint64_t ends_offset, uint32_t n,
                         WGPUBuffer dst, uint64_t total, DType dtype) {
  if (total == 0) return;
  const bool wide = dtype == DType::Int64;
  static const UniformLayout layout({{"n"}, {"ends_offset"}, {"dst_offset"}, {"first"}});
  KernelLaunch l;
  l.typed = {"shape:repeat_index", {static_cast<uint32_t>(dtype)}};
  l.buffers = {{ends, Access::Read, false}, {dst, Access::ReadWrite, false}};
  l.declare(layout).set_u32("n", n).set_u32("ends_offset", static_cast<uint32_t>(ends_offset));
  l.buffers[0].touches(l.word_of("ends_offset"), DType::Int64, ends_offset, n);
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  l.body = [wide, wg] {
    // Running sums (int64) are at most `total` (< 2**32): their low words order them.
    std::string s = "fn end_at(i: u32) -> u32 { return buf0[2u * (u.ends_offset + i)]; }\n";
    s += kernel_main(Grid::Invocations, wg);
    // Output element j of the whole index; a piece's first travels in u.first.
    s += "  let j = idx + u.first;\n"
         "  var lo = 0u;\n  var hi = u.n;\n"
         "  while (lo < hi) {\n"
         "    let mid = (lo + hi) / 2u;\n"
         "    if (end_at(mid) > j) { hi = mid; } else { lo = mid + 1u; }\n"
         "  }\n";
    s += wide ? "  buf1[2u * (u.dst_offset + idx)] = lo;\n  buf1[2u * (u.dst_offset + idx) + 1u] = 0u;\n}\n"
              : "  buf1[u.dst_offset + idx] = lo;\n}\n";
    return s;
  };
  // An output larger than one binding goes in pieces, each its own window.
  const uint64_t piece = std::max<uint64_t>(1, window_budget(ctx) / element_size(dtype));
  for (uint64_t first = 0; first < total; first += piece) {
    const uint64_t count = std::min(piece, total - first);
    l.set_u32("dst_offset", static_cast<uint32_t>(first)).set_u32("first", static_cast<uint32_t>(first));
    l.buffers[1].touches(l.word_of("dst_offset"), dtype, first, count);
    l.count = count;
    launch_kernel(ctx, l);
  }
}

void launch_triangle_indices(Context& ctx, WGPUBuffer ends, uint32_t n, WGPUBuffer dst,
                             uint64_t total, DType dtype, bool upper, int32_t offset,
                             uint32_t cols) {
  if (total == 0) return;
  const bool wide = dtype == DType::Int64;
  static const UniformLayout layout(
      {{"n"}, {"diagonal_offset", UniformType::I32}, {"cols"}, {"total"}});
  KernelLaunch l;
  l.typed = {"shape:triangle_indices", {static_cast<uint32_t>(dtype), upper ? 1u : 0u}};
  l.buffers = {{ends, Access::Read, false}, {dst, Access::ReadWrite, false}};
  l.declare(layout)
      .set_u32("n", n)
      .set_i32("diagonal_offset", offset)
      .set_u32("cols", cols)
      .set_u32("total", static_cast<uint32_t>(total));
  l.count = total;
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  l.body = [wide, upper, wg] {
    std::string s = "fn end_at(i: u32) -> u32 { return buf0[2u * i]; }\n";
    s += wide ? "fn put(i: u32, v: u32) { buf1[2u * i] = v; buf1[2u * i + 1u] = 0u; }\n"
              : "fn put(i: u32, v: u32) { buf1[i] = v; }\n";
    s += kernel_main(Grid::Invocations, wg);
    s += "  var lo = 0u;\n  var hi = u.n;\n"
         "  while (lo < hi) {\n"
         "    let mid = (lo + hi) / 2u;\n"
         "    if (end_at(mid) > idx) { hi = mid; } else { lo = mid + 1u; }\n"
         "  }\n"
         "  var start = 0u;\n"
         "  if (lo > 0u) { start = end_at(lo - 1u); }\n";
    s += upper ? "  let first = u32(clamp(i32(lo) + u.diagonal_offset, 0, i32(u.cols)));\n"
               : "  let first = 0u;\n";
    s += "  put(idx, lo);\n  put(u.total + idx, idx - start + first);\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
