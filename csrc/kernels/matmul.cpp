#include "kernels/matmul.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/elementwise_ops.h"
#include "kernels/gemm_autotune.h"
#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

uint32_t u32_or_fail(uint64_t v, const char* what) {
  if (v > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported, std::string("torch_webgpu: matmul ") + what +
                                     " does not fit the kernel's 32-bit indexing");
  return static_cast<uint32_t>(v);
}

// Arithmetic of one compute type as WGSL expressions.
struct Arith {
  Compute c;
  std::string type() const { return wgsl_type(c); }
  std::string zero() const {
    return c == Compute::F32 ? "0.0" : c == Compute::I32 ? "0" : "vec2<u32>(0u, 0u)";
  }
  std::string add(const std::string& x, const std::string& y) const {
    return c == Compute::I64 ? "i64_add(" + x + ", " + y + ")" : "(" + x + " + " + y + ")";
  }
  std::string mul(const std::string& x, const std::string& y) const {
    return c == Compute::I64 ? "i64_mul(" + x + ", " + y + ")" : "(" + x + " * " + y + ")";
  }
  std::string mac(const std::string& acc, const std::string& x, const std::string& y) const {
    return add(acc, mul(x, y));
  }
};

// Each operand's uniforms: its element offset and strides (batch_outer, batch_inner, rows,
// cols), read in WGSL as `u.<name>`.
enum Operand { kOpA, kOpB, kOpC, kOpOut };
constexpr const char* kOperandName[4] = {"a", "b", "c", "out"};
constexpr const char* kOperandFields[4][5] = {
    {"a_offset", "a_batch_outer", "a_batch_inner", "a_rows", "a_cols"},
    {"b_offset", "b_batch_outer", "b_batch_inner", "b_rows", "b_cols"},
    {"c_offset", "c_batch_outer", "c_batch_inner", "c_rows", "c_cols"},
    {"out_offset", "out_batch_outer", "out_batch_inner", "out_rows", "out_cols"}};

// A GEMM's uniforms: sizes, the grid's tiles, split-K's slices of K (1 and k without),
// alpha (and beta, with C) as a compute scalar's two words, the operands, and an implicit GEMM's gather (GemmDesc::conv): x's spatial
// sizes, the output tile's sizes, strides, paddings and its first output row along dims 0
// and 1. One layout per (C, gather), so a launch uploads and sets only what its kernel reads.
// The norm's uniforms (linear_group's and gemm_normed's): residual, weight, bias, h, eps.
const std::vector<UniformDecl> kRowNormFields = {{"r_offset"},  {"r_rows"},    {"r_cols"},  {"nw_offset"},
                                                 {"nw_stride"}, {"nb_offset"}, {"nb_stride"}, {"h_offset"},
                                                 {"h_rows"},    {"h_cols"},    {"eps", UniformType::F32}};

const UniformLayout& gemm_layout(bool has_c, bool conv, bool norm = false) {
  auto make = [](bool has_c, bool conv, bool norm) {
    std::vector<UniformDecl> d = {{"m"}, {"n"}, {"k"}, {"batch_inner"}, {"tiles_n"}, {"tiles_per_batch"},
                                  {"splits"}, {"k_slice"}, {"alpha_lo"}, {"alpha_hi"}};
    for (int op = kOpA; op <= kOpOut; ++op) {
      if (op == kOpC && !has_c) continue;
      if (op == kOpC) d.insert(d.end(), {{"beta_lo"}, {"beta_hi"}});
      for (const char* f : kOperandFields[op]) d.push_back({f});
    }
    if (conv)
      d.insert(d.end(), {{"x_size", UniformType::U32, 3}, {"y_size", UniformType::U32, 3},
                         {"stride", UniformType::U32, 3}, {"pad", UniformType::U32, 3},
                         {"y_first", UniformType::U32, 2}});
    if (norm) d.insert(d.end(), kRowNormFields.begin(), kRowNormFields.end());
    return UniformLayout(d);
  };
  static const UniformLayout layouts[8] = {make(false, false, false), make(false, true, false),
                                           make(true, false, false),  make(true, true, false),
                                           make(false, false, true),  make(false, true, true),
                                           make(true, false, true),   make(true, true, true)};
  return layouts[(norm ? 4 : 0) + (has_c ? 2 : 0) + (conv ? 1 : 0)];
}

// Returns the offset's word (for KernelBuffer::touches).
uint32_t set_operand(KernelLaunch& l, Operand op, const MatOperand& o) {
  const char* const* f = kOperandFields[op];
  const uint32_t offset_word = l.set_u32(f[0], u32_or_fail(o.offset, "offset")).word_of(f[0]);
  l.set_u32(f[1], u32_or_fail(o.batch_outer, "stride"))
      .set_u32(f[2], u32_or_fail(o.batch_inner, "stride"))
      .set_u32(f[3], u32_or_fail(o.rows, "stride"))
      .set_u32(f[4], u32_or_fail(o.cols, "stride"));
  return offset_word;
}

enum class Variant { Tiled, Block, PerOutput, Reduce, Gemv, GemvCols, GemvWalk };
// Split-K: the tiles' kernel writes each slice's float32 partial sums to scratch (see
// splitk_sum_body), partial (b, slice, r, c) at ((b * splits + slice) * m + r) * n + c.
enum class Split { None, Partials };
// How an implicit GEMM's B is gathered (GemmDesc::conv): not at all, B[r = tap, l =
// position] (forward), B[l, r] (weight gradient).
enum class GatherB { None, TapsAlongK, PositionsAlongK };

// `name`(i): element i of buffer b, stored as dt, converted to the compute type.
std::string typed_load(const std::string& name, const std::vector<KernelBuffer>& bufs, size_t b, DType dt,
                       Compute compute) {
  return kernel_load(name + "_raw", bufs, b, dt) + "fn " + name + "(i: u32) -> " + wgsl_type(compute) +
         " { return " + wgsl_convert(compute_type_for(dt), compute, name + "_raw(i)") + "; }\n";
}

// <op>_base(bo, bi): the first element of the operand's matrix (bo, bi).
std::string operand_base(Operand op) {
  const std::string o = kOperandName[op];
  return "fn " + o + "_base(bo: u32, bi: u32) -> u32 {\n"
         "  return u." + o + "_offset + bo * u." + o + "_batch_outer + bi * u." + o + "_batch_inner;\n}\n";
}

// The pointwise op table's name for `act` (whose f32 expression computes it over `a`).
const char* gate_act_name(GateAct act) {
  return act == GateAct::Silu       ? "silu"
         : act == GateAct::Gelu     ? "gelu"
         : act == GateAct::GeluTanh ? "gelu_tanh"
                                    : "relu";
}

// `fn out_act(a: f32) -> f32`: `act` (the identity for GateAct::None).
std::string out_act_fn(GateAct act) {
  const std::string body = act == GateAct::None ? "a" : find_elementwise_op(gate_act_name(act))->f32;
  return "fn out_act(a: f32) -> f32 { return " + body + "; }\n";
}

// The epilogue: finish(bo, bi, r, c, acc) applies alpha (and beta * C, C in buffer 2 or,
// without A and B bound, 1), then d.act, and stores one output element to the last buffer.
std::string gemm_epilogue(const GemmDesc& d, const std::vector<KernelBuffer>& bufs, bool has_c,
                          size_t c_buf = 2) {
  Arith ar{d.compute};
  std::string s;
  if (has_c) s += typed_load("load_c", bufs, c_buf, d.c.dtype, d.compute) + operand_base(kOpC);
  s += kernel_store("store_out", bufs, bufs.size() - 1, d.out.dtype, d.compute);
  s += operand_base(kOpOut);
  s += "fn finish(bo: u32, bi: u32, r: u32, c: u32, acc: " + ar.type() + ") {\n";
  s += "  var v = " + ar.mul(wgsl_scalar(d.compute, "u.alpha_lo", "u.alpha_hi"), "acc") + ";\n";
  if (has_c) {
    s += "  let ci = c_base(bo, bi) + r * u.c_rows + c * u.c_cols;\n";
    s += "  v = " + ar.add(ar.mul(wgsl_scalar(d.compute, "u.beta_lo", "u.beta_hi"), "load_c(ci)"), "v") + ";\n";
  }
  if (d.act != GateAct::None) s = out_act_fn(d.act) + s + "  v = out_act(v);\n";
  s += "  store_out(out_base(bo, bi) + r * u.out_rows + c * u.out_cols, v);\n}\n";
  return s;
}

// Shared WGSL: typed loads of A and B converted to the compute type, their batch bases,
// and the epilogue (or, under split-K, the store of a slice's partial sum).
std::string gemm_common(const GemmDesc& d, const std::vector<KernelBuffer>& bufs, bool has_c,
                        Split split = Split::None) {
  Arith ar{d.compute};
  const std::string T = ar.type();
  std::string s = typed_load("load_a", bufs, 0, d.a.dtype, d.compute) +
                  typed_load("load_b", bufs, 1, d.b.dtype, d.compute);
  if (d.conv) {
    // B of an implicit GEMM at one output position and one row (c, k...): the caller has
    // turned the position into ob (o * stride - pad per dim) and ooff (their offset within
    // an image's group, negative at the padding); the row's tap (tap_at) holds (c, k *
    // dil)'s offset and k * dil per dim. A position is inside when its unsigned value is
    // below the size (negative ones wrap past every size).
    const std::string taps = "buf" + std::to_string(has_c ? 3 : 2);
    s += "fn tap_at(r: u32) -> vec4<i32> {\n  let t = r * 4u;\n"
         "  return vec4<i32>(i32(" + taps + "[t]), i32(" + taps + "[t + 1u]), i32(" + taps + "[t + 2u]), i32(" +
         taps + "[t + 3u]));\n}\n";
    s += "fn gather_b(base: u32, ob: vec3<i32>, ooff: i32, tap: vec4<i32>) -> " + T + " {\n"
         "  let p = vec3<u32>(ob + tap.yzw);\n"
         "  if (any(p >= vec3<u32>(u_x_size(0u), u_x_size(1u), u_x_size(2u)))) { return " + ar.zero() + "; }\n"
         "  return load_b(base + u32(ooff + tap.x));\n}\n";
  }
  s += operand_base(kOpA) + operand_base(kOpB);
  if (split == Split::Partials) {
    // finish() stores the slice's partial sum (the tile kernel sets `slice`).
    s += "var<private> slice: u32;\n"
         "fn finish(bo: u32, bi: u32, r: u32, c: u32, acc: f32) {\n"
         "  let b = bo * u.batch_inner + bi;\n"
         "  buf" + std::to_string(bufs.size() - 1) + "[((b * u.splits + slice) * u.m + r) * u.n + c] = bitcast<u32>(acc);\n}\n";
    return s;
  }
  return s + gemm_epilogue(d, bufs, has_c);
}

// Shared-memory tiles: a workgroup of wx*wy invocations computes a tm x tn output tile;
// invocation (tx, ty) holds a (tm/wy) x (tn/wx) register block at rows ty + wy*i and
// columns tx + wx*j (so neighbours read neighbouring shared words). K advances bk at a
// time. Tile loads walk the operand's contiguous dimension (a_k_fast / b_k_fast: the K
// stride is the unit one) so neighbouring invocations read neighbouring addresses; shared
// rows are padded by 4 words so those transposing stores spread over banks.
struct TileShape {
  uint32_t tm, tn, bk, wx, wy;
  bool a_k_fast, b_k_fast;
  // tiled_vec4_body: the inner loop over bk written out. H100: the 128x128 tile's 8x8
  // blocks gain (34.3 -> 36.8 TFLOP/s at 4096^3), the 64x64 tile's 4x4 blocks lose 3-12%.
  bool unroll = false;
  uint32_t threads() const { return wx * wy; }
  std::string key() const {
    return std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(bk) +
           (a_k_fast ? "k" : "m") + (b_k_fast ? "k" : "n");
  }
};
constexpr TileShape kSmallTile{32, 32, 16, 8, 8, false, false};
constexpr TileShape kMediumTile{64, 64, 16, 16, 16, false, false};
constexpr TileShape kLargeTile{128, 128, 8, 16, 16, false, false, true};

// WGSL turning output position `l` (of the implicit GEMM's output tile) into `ob` and
// `ooff` (see gather_b), those names followed by `sfx`.
std::string decode_position(const std::string& in, const std::string& l, const std::string& sfx = "") {
  const std::string go = "go" + sfx + "_", ob = "ob" + sfx;
  return in + "let " + go + "2 = " + l + " % u_y_size(2u);\n" +
         in + "let " + go + "1 = (" + l + " / u_y_size(2u)) % u_y_size(1u);\n" +
         in + "let " + go + "0 = " + l + " / (u_y_size(2u) * u_y_size(1u));\n" +
         in + "let " + ob + " = vec3<i32>(vec3<u32>(" + go + "0 + u_y_first(0u), " + go + "1 + u_y_first(1u), " + go +
              "2) * vec3<u32>(u_stride(0u), u_stride(1u), u_stride(2u))) - vec3<i32>(vec3<u32>(u_pad(0u), u_pad(1u), u_pad(2u)));\n" +
         in + "let ooff" + sfx + " = (" + ob + ".x * i32(u_x_size(1u)) + " + ob + ".y) * i32(u_x_size(2u)) + " + ob + ".z;\n";
}

// WGSL: the tile index `g` of workgroup `g0` and the range [kb, ke) of K it sums. Under
// split-K neighbouring workgroups take the slices of K of one tile.
std::string split_range(Split split) {
  return split == Split::Partials
             // (kb from a let, not the private `slice`: barriers need uniform control flow.)
             ? "  let sl = g0 % u.splits;\n  slice = sl;\n  let g = g0 / u.splits;\n"
               "  let kb = sl * u.k_slice;\n  let ke = min(u.k, kb + u.k_slice);\n"
             : "  let g = g0;\n  let kb = 0u;\n  let ke = u.k;\n";
}

// WGSL of a GEMV workgroup `group`: its column group cg of u.tiles_n, row r and matrix
// b = (bo, bi) of the batch, M, N, K, and under split-K its slice [kb, ke) of K.
// With `rows` > 1 (gemv_rows_body) r is the first of the workgroup's rows, and the row
// blocks of a column group are neighbouring workgroups (a weight tile's second read, for
// more than `rows` rows, finds it in L2).
std::string gemv_group_decode(Split split, uint32_t rows = 1) {
  const std::string head = "  let valid = group < frame_count();\n"
                           "  let g0 = select(0u, group, valid);\n" + split_range(split) +
                           "  let M = u.m;\n  let N = u.n;\n  let K = u.k;\n";
  const std::string tail = "  let bo = b / u.batch_inner;\n  let bi = b % u.batch_inner;\n";
  if (rows > 1)
    return head + "  let tiles_m = u.tiles_per_batch / u.tiles_n;\n  let r = (g % tiles_m) * " +
           std::to_string(rows) + "u;\n  let rest = g / tiles_m;\n  let cg = rest % u.tiles_n;\n"
           "  let b = rest / u.tiles_n;\n" + tail;
  return head + "  let cg = g % u.tiles_n;\n  let rest = g / u.tiles_n;\n  let r = rest % M;\n  let b = rest / M;\n" +
         tail;
}

// WGSL opening a tile kernel: its entry point, the workgroup's tile (row0, col0) of matrix
// (bo, bi), the invocation's (tx, ty), M, N, the operands' bases and under split-K its
// slice [kb, ke) of K.
std::string tile_prologue(const TileShape& t, Split split) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  return kernel_main(Grid::Groups, t.threads()) +
         "  let valid = group < frame_count();\n"
         "  let g0 = select(0u, group, valid);\n" + split_range(split) +
         "  let b = g / u.tiles_per_batch;\n  let t = g % u.tiles_per_batch;\n"
         "  let row0 = (t / u.tiles_n) * " + n(t.tm) + ";\n  let col0 = (t % u.tiles_n) * " + n(t.tn) + ";\n"
         "  let bo = b / u.batch_inner;\n  let bi = b % u.batch_inner;\n"
         "  let tx = lid % " + n(t.wx) + ";\n  let ty = lid / " + n(t.wx) + ";\n"
         "  let M = u.m;\n  let N = u.n;\n"
         "  let abase = a_base(bo, bi);\n  let bbase = b_base(bo, bi);\n";
}

std::string tiled_body(const Arith& ar, const TileShape& t, GatherB gather, Split split) {
  const std::string T = ar.type(), Z = ar.zero();
  const uint32_t rm = t.tm / t.wy, rn = t.tn / t.wx, sa_row = t.tm + 4, sb_row = t.tn + 4;
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  std::string s;
  s += "var<workgroup> sa: array<" + T + ", " + std::to_string(t.bk * sa_row) + ">;\n";  // [k][m]
  s += "var<workgroup> sb: array<" + T + ", " + std::to_string(t.bk * sb_row) + ">;\n";  // [k][n]
  s += tile_prologue(t, split);
  // An implicit GEMM's B tile loads (threads is a multiple of tn and of bk): taps along K
  // walk N, so each invocation loads one output position throughout, decoded once here;
  // positions along K walk K, so each loads the same few taps throughout, read once here
  // (and its position is decoded once per step of K).
  const uint32_t b_loads = t.tn * t.bk / t.threads(), b_cols = t.threads() / t.bk;
  if (gather == GatherB::TapsAlongK) s += decode_position("  ", "(col0 + lid % " + n(t.tn) + ")");
  if (gather == GatherB::PositionsAlongK)
    for (uint32_t e = 0; e < b_loads; ++e)
      s += "  let tap" + std::to_string(e) + " = tap_at(min(col0 + lid / " + n(t.bk) + " + " + n(e * b_cols) +
           ", N - 1u));\n";
  // Register blocks as named scalars with unrolled loops: drivers keep dynamically
  // indexed private arrays in (slow) local memory.
  auto acc = [](uint32_t i, uint32_t j) { return "c" + std::to_string(i) + "_" + std::to_string(j); };
  for (uint32_t i = 0; i < rm; ++i)
    for (uint32_t j = 0; j < rn; ++j) s += "  var " + acc(i, j) + " = " + Z + ";\n";
  s += "  for (var k0 = kb; k0 < ke; k0 = k0 + " + n(t.bk) + ") {\n"
       "    for (var e = 0u; e < " + n(t.tm * t.bk / t.threads()) + "; e = e + 1u) {\n"
       "      let idx = lid + e * " + n(t.threads()) + ";\n";
  s += t.a_k_fast ? "      let ak = idx % " + n(t.bk) + ";\n      let am = idx / " + n(t.bk) + ";\n"
                  : "      let am = idx % " + n(t.tm) + ";\n      let ak = idx / " + n(t.tm) + ";\n";
  s += "      var av = " + Z + ";\n"
       "      if (valid && row0 + am < M && k0 + ak < ke) {\n"
       "        av = load_a(abase + (row0 + am) * u.a_rows + (k0 + ak) * u.a_cols);\n      }\n"
       "      sa[ak * " + n(sa_row) + " + am] = av;\n"
       "    }\n";
  if (gather == GatherB::PositionsAlongK) {
    s += "    {\n      let bk = lid % " + n(t.bk) + ";\n" + decode_position("      ", "(k0 + bk)");
    for (uint32_t e = 0; e < b_loads; ++e) {
      const std::string E = std::to_string(e), bn = "lid / " + n(t.bk) + " + " + n(e * b_cols);
      s += "      var bv" + E + " = " + Z + ";\n"
           "      if (valid && k0 + bk < ke && col0 + " + bn + " < N) { bv" + E +
           " = gather_b(bbase, ob, ooff, tap" + E + "); }\n"
           "      sb[bk * " + n(sb_row) + " + " + bn + "] = bv" + E + ";\n";
    }
    s += "    }\n";
  } else {
    s += "    for (var e = 0u; e < " + n(b_loads) + "; e = e + 1u) {\n"
         "      let idx = lid + e * " + n(t.threads()) + ";\n";
    s += t.b_k_fast ? "      let bk = idx % " + n(t.bk) + ";\n      let bn = idx / " + n(t.bk) + ";\n"
                    : "      let bn = idx % " + n(t.tn) + ";\n      let bk = idx / " + n(t.tn) + ";\n";
    s += "      var bv = " + Z + ";\n"
         "      if (valid && k0 + bk < ke && col0 + bn < N) {\n"
         "        bv = " + std::string(gather == GatherB::TapsAlongK ? "gather_b(bbase, ob, ooff, tap_at(k0 + bk))"
                                    : "load_b(bbase + (k0 + bk) * u.b_rows + (col0 + bn) * u.b_cols)") +
         ";\n      }\n"
         "      sb[bk * " + n(sb_row) + " + bn] = bv;\n"
         "    }\n";
  }
  s += "    workgroupBarrier();\n"
       // Shared entries past ke hold zeros in both operands, so every step runs all bk.
       "    for (var kk = 0u; kk < " + n(t.bk) + "; kk = kk + 1u) {\n";
  for (uint32_t i = 0; i < rm; ++i)
    s += "      let a" + std::to_string(i) + " = sa[kk * " + n(sa_row) + " + ty + " + n(t.wy * i) + "];\n";
  for (uint32_t j = 0; j < rn; ++j)
    s += "      let b" + std::to_string(j) + " = sb[kk * " + n(sb_row) + " + tx + " + n(t.wx * j) + "];\n";
  for (uint32_t i = 0; i < rm; ++i)
    for (uint32_t j = 0; j < rn; ++j)
      s += "      " + acc(i, j) + " = " + ar.mac(acc(i, j), "a" + std::to_string(i), "b" + std::to_string(j)) + ";\n";
  s += "    }\n"
       "    workgroupBarrier();\n"
       "  }\n"
       "  if (valid) {\n";
  for (uint32_t i = 0; i < rm; ++i)
    for (uint32_t j = 0; j < rn; ++j)
      s += "    if (row0 + ty + " + n(t.wy * i) + " < M && col0 + tx + " + n(t.wx * j) +
           " < N) { finish(bo, bi, row0 + ty + " + n(t.wy * i) + ", col0 + tx + " + n(t.wx * j) +
           ", " + acc(i, j) + "); }\n";
  s += "  }\n}\n";
  return s;
}

// Float32 tiles whose register blocks are runs of four neighbouring rows and columns: the
// shared tiles hold vec4 words (4 rows of A or 4 columns of B at one k), so each step of
// the inner loop reads rm/4 + rn/4 words for rm x rn multiply-adds (one scalar read per
// row and column in tiled_body: the inner loop was bound by workgroup-memory reads on
// GPUs). Invocation (tx, ty) holds rows 4 * (ty + wy * i) + 0..3 and columns
// 4 * (tx + wx * j) + 0..3. Every output still sums its products in k order, as
// tiled_body does. Loads of the next K step are issued before the current step's
// multiply-adds (registers, not a second shared buffer: the spec's default 16 KB holds
// one). Shared rows are padded by one word so that transposing vec4 stores spread over banks.
std::string tiled_vec4_body(const TileShape& t, GatherB gather, Split split) {
  const uint32_t rm = t.tm / t.wy, rn = t.tn / t.wx, gm = rm / 4, gn = rn / 4;
  const uint32_t sa_row = t.tm / 4 + 1, sb_row = t.tn / 4 + 1;
  const uint32_t a_words = t.tm * t.bk / 4 / t.threads(), b_words = t.tn * t.bk / 4 / t.threads();
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  auto S = [](uint32_t v) { return std::to_string(v); };
  std::string s;
  s += "var<workgroup> sa: array<vec4<f32>, " + S(t.bk * sa_row) + ">;\n";  // [k][m / 4]
  s += "var<workgroup> sb: array<vec4<f32>, " + S(t.bk * sb_row) + ">;\n";  // [k][n / 4]
  // Four neighbouring elements at `p` (stride `step`), those with index i + 0..3 < lim.
  for (const char* X : {"a", "b"}) {
    s += "fn load4_" + std::string(X) + "(p: u32, step: u32, i: u32, lim: u32) -> vec4<f32> {\n"
         "  var v = vec4<f32>(0.0);\n";
    for (uint32_t e = 0; e < 4; ++e)
      s += "  if (i + " + n(e) + " < lim) { v." + "xyzw"[e] + " = load_" + X + "(p + " + n(e) + " * step); }\n";
    s += "  return v;\n}\n";
  }
  s += tile_prologue(t, split);
  // Word w of an operand's tile: its k and its first row (column), walking the operand's
  // unit stride across neighbouring invocations.
  auto word = [&](const std::string& X, bool k_fast, uint32_t w, uint32_t across) {
    const std::string idx = "(lid + " + n(w * t.threads()) + ")";
    return k_fast ? "  let " + X + "k" + S(w) + " = " + idx + " % " + n(t.bk) + ";\n  let " + X + "r" + S(w) +
                        " = 4u * (" + idx + " / " + n(t.bk) + ");\n"
                  : "  let " + X + "r" + S(w) + " = 4u * (" + idx + " % " + n(across) + ");\n  let " + X + "k" +
                        S(w) + " = " + idx + " / " + n(across) + ";\n";
  };
  for (uint32_t w = 0; w < a_words; ++w) s += word("a", t.a_k_fast, w, t.tm / 4);
  for (uint32_t w = 0; w < b_words; ++w) s += word("b", t.b_k_fast, w, t.tn / 4);
  // An implicit GEMM's B words: each invocation's four columns stay the same along K, so
  // their four output positions (taps along K) or four taps (positions along K) are
  // decoded once here.
  for (uint32_t w = 0; w < b_words; ++w)
    for (uint32_t e = 0; e < 4; ++e) {
      const std::string col = "(col0 + br" + S(w) + " + " + n(e) + ")";
      if (gather == GatherB::TapsAlongK) s += decode_position("  ", col, S(w) + "_" + S(e));
      if (gather == GatherB::PositionsAlongK)
        s += "  let tap" + S(w) + "_" + S(e) + " = tap_at(min(" + col + ", N - 1u));\n";
    }
  auto fetch = [&](const std::string& in, const std::string& k0) {
    std::string f;
    for (uint32_t w = 0; w < a_words; ++w) {
      const std::string W = S(w), k = k0 + " + ak" + W;
      f += in + "pa" + W + " = load4_a(abase + (row0 + ar" + W + ") * u.a_rows + (" + k + ") * u.a_cols, u.a_rows, row0 + ar" +
           W + ", select(0u, M, valid && " + k + " < ke));\n";
    }
    for (uint32_t w = 0; w < b_words && gather != GatherB::None; ++w) {
      const std::string W = S(w), k = k0 + " + bk" + W;
      f += in + "pb" + W + " = vec4<f32>(0.0);\n" + in + "if (valid && " + k + " < ke) {\n";
      if (gather == GatherB::TapsAlongK) f += in + "  let tp = tap_at(" + k + ");\n";
      else f += decode_position(in + "  ", "(" + k + ")");
      for (uint32_t e = 0; e < 4; ++e) {
        const std::string E = S(e), p = gather == GatherB::TapsAlongK ? "ob" + W + "_" + E + ", ooff" + W + "_" + E + ", tp"
                                                                      : "ob, ooff, tap" + W + "_" + E;
        f += in + "  if (col0 + br" + W + " + " + n(e) + " < N) { pb" + W + "." + "xyzw"[e] + " = gather_b(bbase, " + p + "); }\n";
      }
      f += in + "}\n";
    }
    for (uint32_t w = 0; w < b_words && gather == GatherB::None; ++w) {
      const std::string W = S(w), k = k0 + " + bk" + W;
      f += in + "pb" + W + " = load4_b(bbase + (" + k + ") * u.b_rows + (col0 + br" + W + ") * u.b_cols, u.b_cols, col0 + br" +
           W + ", select(0u, N, valid && " + k + " < ke));\n";
    }
    return f;
  };
  for (uint32_t w = 0; w < a_words; ++w) s += "  var pa" + S(w) + ": vec4<f32>;\n";
  for (uint32_t w = 0; w < b_words; ++w) s += "  var pb" + S(w) + ": vec4<f32>;\n";
  s += fetch("  ", "kb");
  auto acc = [](uint32_t i, uint32_t j) { return "c" + std::to_string(i) + "_" + std::to_string(j); };
  for (uint32_t i = 0; i < rm; ++i)
    for (uint32_t j = 0; j < gn; ++j) s += "  var " + acc(i, j) + " = vec4<f32>(0.0);\n";
  s += "  for (var k0 = kb; k0 < ke; k0 = k0 + " + n(t.bk) + ") {\n";
  for (uint32_t w = 0; w < a_words; ++w)
    s += "    sa[ak" + S(w) + " * " + n(sa_row) + " + ar" + S(w) + " / 4u] = pa" + S(w) + ";\n";
  for (uint32_t w = 0; w < b_words; ++w)
    s += "    sb[bk" + S(w) + " * " + n(sb_row) + " + br" + S(w) + " / 4u] = pb" + S(w) + ";\n";
  s += "    workgroupBarrier();\n"
       "    if (k0 + " + n(t.bk) + " < ke) {\n" + fetch("      ", "k0 + " + n(t.bk)) + "    }\n"
       // Shared entries past ke hold zeros in both operands, so every step runs all bk.
       ;
  const char* lane = "xyzw";
  auto step = [&](const std::string& kk) {
    std::string st = "    {\n";
    for (uint32_t i = 0; i < gm; ++i)
      st += "      let a" + S(i) + " = sa[" + kk + " * " + n(sa_row) + " + ty + " + n(t.wy * i) + "];\n";
    for (uint32_t j = 0; j < gn; ++j)
      st += "      let b" + S(j) + " = sb[" + kk + " * " + n(sb_row) + " + tx + " + n(t.wx * j) + "];\n";
    for (uint32_t i = 0; i < rm; ++i)
      for (uint32_t j = 0; j < gn; ++j)
        st += "      " + acc(i, j) + " = " + acc(i, j) + " + a" + S(i / 4) + "." + lane[i % 4] + " * b" + S(j) + ";\n";
    return st + "    }\n";
  };
  if (t.unroll)
    for (uint32_t kk = 0; kk < t.bk; ++kk) s += step(n(kk));
  else
    s += "    for (var kk = 0u; kk < " + n(t.bk) + "; kk = kk + 1u) {\n" + step("kk") + "    }\n";
  s += "    workgroupBarrier();\n"
       "  }\n"
       "  if (valid) {\n";
  for (uint32_t i = 0; i < rm; ++i) {
    const std::string r = "4u * (ty + " + n(t.wy * (i / 4)) + ") + " + n(i % 4);
    for (uint32_t j = 0; j < gn; ++j)
      for (uint32_t e = 0; e < 4; ++e) {
        const std::string c = "4u * (tx + " + n(t.wx * j) + ") + " + n(e);
        s += "    if (row0 + " + r + " < M && col0 + " + c + " < N) { finish(bo, bi, row0 + " + r + ", col0 + " + c +
             ", " + acc(i, j) + "." + lane[e] + "); }\n";
      }
  }
  s += "  }\n}\n";
  return s;
}

// One invocation per 4x4 output block straight from the buffers, no shared memory (for
// CPU adapters, where caches do the tiles' work and barriers are expensive). Loads clamp
// to the last row/column so the inner loop has no branches; only valid outputs are stored.
std::string block_body(const Arith& ar) {
  std::string s = kernel_main(Grid::Invocations, 64);
  s += "  let M = u.m;\n  let N = u.n;\n  let K = u.k;\n"
       "  let bn = idx % u.tiles_n;\n  let rest = idx / u.tiles_n;\n"
       "  let tiles_m = u.tiles_per_batch / u.tiles_n;\n"
       "  let bm = rest % tiles_m;\n  let b = rest / tiles_m;\n"
       "  let bo = b / u.batch_inner;\n  let bi = b % u.batch_inner;\n"
       "  let r0 = bm * 4u;\n  let c0 = bn * 4u;\n"
       "  var ai: array<u32, 4>;\n  var bj: array<u32, 4>;\n"
       "  let abase = a_base(bo, bi);\n  let bbase = b_base(bo, bi);\n"
       "  for (var i = 0u; i < 4u; i = i + 1u) {\n"
       "    ai[i] = abase + min(r0 + i, M - 1u) * u.a_rows;\n"
       "    bj[i] = bbase + min(c0 + i, N - 1u) * u.b_cols;\n"
       "  }\n"
       "  var acc: array<" + ar.type() + ", 16>;\n"
       "  for (var i = 0u; i < 16u; i = i + 1u) { acc[i] = " + ar.zero() + "; }\n"
       "  for (var k = 0u; k < K; k = k + 1u) {\n"
       "    let ak = k * u.a_cols;\n    let bk = k * u.b_rows;\n"
       "    var ra: array<" + ar.type() + ", 4>;\n    var rb: array<" + ar.type() + ", 4>;\n"
       "    for (var i = 0u; i < 4u; i = i + 1u) { ra[i] = load_a(ai[i] + ak); rb[i] = load_b(bj[i] + bk); }\n"
       "    for (var i = 0u; i < 4u; i = i + 1u) {\n"
       "      for (var j = 0u; j < 4u; j = j + 1u) {\n"
       "        acc[i * 4u + j] = " + ar.mac("acc[i * 4u + j]", "ra[i]", "rb[j]") + ";\n"
       "      }\n    }\n  }\n"
       "  for (var i = 0u; i < 4u; i = i + 1u) {\n"
       "    for (var j = 0u; j < 4u; j = j + 1u) {\n"
       "      if (r0 + i < M && c0 + j < N) { finish(bo, bi, r0 + i, c0 + j, acc[i * 4u + j]); }\n"
       "    }\n  }\n}\n";
  return s;
}

// One invocation per two neighbouring output columns of a row, looping over K (skinny
// products).
std::string per_output_body(const Arith& ar) {
  std::string s = kernel_main(Grid::Invocations, 64);
  s += "  let M = u.m;\n  let N = u.n;\n  let K = u.k;\n"
       "  let pairs = (N + 1u) / 2u;\n"
       "  let c = 2u * (idx % pairs);\n  let rest = idx / pairs;\n  let r = rest % M;\n  let b = rest / M;\n"
       "  let bo = b / u.batch_inner;\n  let bi = b % u.batch_inner;\n"
       "  let ak = u.a_cols;\n  let bk = u.b_rows;\n"
       "  let second = c + 1u < N;\n"
       "  var ai = a_base(bo, bi) + r * u.a_rows;\n"
       "  var bj = b_base(bo, bi) + c * u.b_cols;\n"
       // Without a second column, its loads repeat the first's (never stored).
       "  var bj2 = select(bj, bj + u.b_cols, second);\n"
       // One running sum per column, in k order (the order every variant before it kept:
       // matrix_exp's squarings amplify any other rounding past OpInfo's tolerance).
       "  var s0 = " + ar.zero() + ";\n  var t0 = s0;\n"
       "  for (var k = 0u; k < K; k = k + 1u) {\n"
       "    let a0 = load_a(ai);\n"
       "    s0 = " + ar.mac("s0", "a0", "load_b(bj)") + ";\n"
       "    t0 = " + ar.mac("t0", "a0", "load_b(bj2)") + ";\n"
       "    ai = ai + ak;\n    bj = bj + bk;\n    bj2 = bj2 + bk;\n"
       "  }\n"
       "  finish(bo, bi, r, c, s0);\n"
       "  if (second) { finish(bo, bi, r, c + 1u, t0); }\n}\n";
  return s;
}

// WGSL: M, N and output element `i`'s column c, row r, matrix b = (bo, bi) of the batch.
std::string decode_output(const std::string& i) {
  return "  let M = u.m;\n  let N = u.n;\n"
         "  let c = " + i + " % N;\n  let rest = " + i + " / N;\n  let r = rest % M;\n  let b = rest / M;\n"
         "  let bo = b / u.batch_inner;\n  let bi = b % u.batch_inner;\n";
}

// One workgroup per output element: 64 partial sums over K, then a tree (long K, few
// outputs: dot products, matrix-vector products).
std::string reduce_body(const Arith& ar) {
  std::string s = "var<workgroup> part: array<" + ar.type() + ", 64>;\n";
  s += kernel_main(Grid::Groups, 64);
  s += "  let valid = group < frame_count();\n"
       "  let g = select(0u, group, valid);\n"
       "  let K = u.k;\n" + decode_output("g") +
       "  let ai = a_base(bo, bi) + r * u.a_rows;\n"
       "  let bj = b_base(bo, bi) + c * u.b_cols;\n"
       "  var acc = " + ar.zero() + ";\n"
       "  if (valid) {\n"
       "    for (var k = lid; k < K; k = k + 64u) {\n"
       "      acc = " + ar.mac("acc", "load_a(ai + k * u.a_cols)", "load_b(bj + k * u.b_rows)") + ";\n"
       "    }\n  }\n"
       "  part[lid] = acc;\n"
       "  workgroupBarrier();\n"
       "  for (var w = 32u; w > 0u; w = w >> 1u) {\n"
       "    if (lid < w) { part[lid] = " + ar.add("part[lid]", "part[lid + w]") + "; }\n"
       "    workgroupBarrier();\n"
       "  }\n"
       "  if (valid && lid == 0u) { finish(bo, bi, r, c, part[0]); }\n}\n";
  return s;
}

// Split-K's second pass: one invocation per output adds its slices' partial sums (buffer
// 0) in slice order, so the result does not depend on scheduling, and applies the epilogue.
std::string splitk_sum_body() {
  std::string s = kernel_main(Grid::Invocations, 64);
  s += decode_output("idx") +
       "  var p = (b * u.splits * M + r) * N + c;\n"
       "  var acc = 0.0;\n"
       "  for (var s = 0u; s < u.splits; s = s + 1u) {\n"
       "    acc = acc + bitcast<f32>(buf0[p]);\n    p = p + M * N;\n  }\n"
       "  finish(bo, bi, r, c, acc);\n}\n";
  return s;
}

// Matrix-vector products on software adapters (weight with K contiguous, float32): an
// invocation walks K for `cols` neighbouring columns of one row, one running sum per column
// in k order (as PerOutput). A workgroup owns one row, so A's address is the same for all
// its invocations: llvmpipe loads such a value once and broadcasts it, where a per-lane
// address costs a scalar load per lane. The weight is read through a second vec4 binding
// (buffer `wide`): llvmpipe's per-lane load loop then fetches 4 elements per lane per trip.
// Eight invocations (one SIMD row of 256-bit llvmpipe) of eight columns each: measured
// best of 1-64 invocations x 2-16 columns on llvmpipe (2.2x PerOutput's GB/s at decode).
constexpr uint32_t kGemvWalkThreads = 8, kGemvWalkCols = 8;

// Weight elements per vec4 word: four float32 or eight half-type values.
uint32_t gemv_walk_span(DType b_dtype) { return b_dtype == DType::Float32 ? 4 : 8; }

std::string gemv_walk_body(uint32_t threads, uint32_t cols, size_t wide, DType b_dtype) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string W = "buf" + std::to_string(wide);
  const uint32_t span = gemv_walk_span(b_dtype);
  std::string s;
  // A half-type word holds elements 2p (low half) and 2p + 1.
  if (span == 8)
    s += b_dtype == DType::Float16
             ? "fn half_pair(w: u32) -> vec2<f32> { return unpack2x16float(w); }\n"
             : "fn half_pair(w: u32) -> vec2<f32> { "
               "return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u)); }\n";
  s += kernel_main(Grid::Groups, threads);
  s += gemv_group_decode(Split::None) +
       "  let c = (cg * " + n(threads) + " + lid) * " + n(cols) + ";\n"
       "  let ai = a_base(bo, bi) + r * u.a_rows;\n  let ak = u.a_cols;\n"
       "  let bb = b_base(bo, bi);\n";
  // Columns past N repeat the last one (never stored): no branch around the loop, whose
  // control flow stays uniform.
  for (uint32_t j = 0; j < cols; ++j) {
    const std::string J = std::to_string(j);
    s += "  let w" + J + " = bb + min(c + " + n(j) + ", N - 1u) * u.b_cols;\n"
         "  var s" + J + " = 0.0;\n";
  }
  s += "  let words = K / " + n(span) + ";\n"
       "  for (var q = 0u; q < words; q = q + 1u) {\n"
       "    let k = " + n(span) + " * q;\n";
  for (uint32_t e = 0; e < span; ++e)
    s += "    let a" + std::to_string(e) + " = load_a(ai + (k + " + n(e) + ") * ak);\n";
  const char* comp[4] = {"x", "y", "z", "w"};
  for (uint32_t j = 0; j < cols; ++j) {
    const std::string J = std::to_string(j), v = "v" + J;
    s += "    let " + v + " = " + W + "[w" + J + " / " + n(span) + " + q];\n";
    for (uint32_t e = 0; e < span; ++e) {
      // Element e of the word, in k order.
      const std::string x = span == 4 ? "bitcast<f32>(" + v + "." + comp[e] + ")"
                                      : "half_pair(" + v + "." + comp[e / 2] + ")." + comp[e % 2];
      s += "    s" + J + " = s" + J + " + a" + std::to_string(e) + " * " + x + ";\n";
    }
  }
  s += "  }\n"
       "  for (var k = " + n(span) + " * words; k < K; k = k + 1u) {\n"
       "    let a0 = load_a(ai + k * ak);\n";
  for (uint32_t j = 0; j < cols; ++j) {
    const std::string J = std::to_string(j);
    s += "    s" + J + " = s" + J + " + a0 * load_b(w" + J + " + k);\n";
  }
  s += "  }\n  if (valid) {\n";
  for (uint32_t j = 0; j < cols; ++j) {
    const std::string J = std::to_string(j);
    s += "    if (c + " + n(j) + " < N) { finish(bo, bi, r, c + " + n(j) + ", s" + J + "); }\n";
  }
  s += "  }\n}\n";
  return s;
}

// Matrix-vector products whose weight has K contiguous (F.linear's [n, k] weight with one
// or a few rows of A: LLM decode). A workgroup owns threads / 32 output columns of one row;
// the 32 lanes of a column read neighbouring elements of its weight row (coalesced), each
// keeping 4 independent partial sums so that several loads are in flight, and a 32-wide
// tree adds the lanes. `pairs`: a half-type weight read a u32 word (two elements) at a time
// and unpacked in registers (rows start on even elements and K is even).
constexpr uint32_t kGemvLanes = 32;

// `weight_pair<i>(w)`: the two half-type elements of word w of buffer b as float32.
std::string gemv_weight_pair(const std::string& i, size_t b, DType dtype) {
  const std::string buf = "buf" + std::to_string(b);
  return dtype == DType::Float16
             ? "fn weight_pair" + i + "(w: u32) -> vec2<f32> { return unpack2x16float(" + buf + "[w]); }\n"
             : "fn weight_pair" + i + "(w: u32) -> vec2<f32> { let v = " + buf + "[w]; "
               "return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u)); }\n";
}

// One lane's four partial sums s0..s3 of a column: A's row from `ai` (stride `ak`) times
// the weight row from element `bj` (K contiguous), read by load_b<i> or, with `pairs`,
// weight_pair<i>.
std::string gemv_lane_sums(bool pairs, const std::string& i, const std::string& in) {
  if (pairs) {
    // Pair p holds elements 2p (low half) and 2p + 1.
    auto term = [&](const std::string& p) {
      return "dot(weight_pair" + i + "(wb + " + p + "), vec2<f32>(load_a(ai + 2u * (" + p + ") * ak), load_a(ai + (2u * (" +
             p + ") + 1u) * ak)))";
    };
    return in + "let wb = bj / 2u;\n" + in + "let P = K / 2u;\n" + in + "var p = lane;\n" +
           in + "for (; p + 96u < P; p = p + 128u) {\n" +
           in + "  s0 = s0 + " + term("p") + ";\n" + in + "  s1 = s1 + " + term("p + 32u") + ";\n" +
           in + "  s2 = s2 + " + term("p + 64u") + ";\n" + in + "  s3 = s3 + " + term("p + 96u") + ";\n" + in + "}\n" +
           in + "for (; p < P; p = p + 32u) { s0 = s0 + " + term("p") + "; }\n";
  }
  auto term = [&](const std::string& k) { return "load_a(ai + (" + k + ") * ak) * load_b" + i + "(bj + " + k + ")"; };
  return in + "var k = lane;\n" + in + "for (; k + 96u < K; k = k + 128u) {\n" +
         in + "  s0 = s0 + " + term("k") + ";\n" + in + "  s1 = s1 + " + term("k + 32u") + ";\n" +
         in + "  s2 = s2 + " + term("k + 64u") + ";\n" + in + "  s3 = s3 + " + term("k + 96u") + ";\n" + in + "}\n" +
         in + "for (; k < K; k = k + 32u) { s0 = s0 + " + term("k") + "; }\n";
}

// `lane_sum(v, lid)`: the sum over a column's `lanes` lanes (group_reduce.h: shuffles alone
// where a column's lanes share a subgroup, else a tree in workgroup memory).
std::string gemv_lane_sum_fn(uint32_t threads, uint32_t lanes, uint32_t subgroup) {
  return "fn lane_add(a: f32, b: f32) -> f32 { return a + b; }\n" +
         group_reduce_fn({"lane_sum", "f32", "", "lane_add", "0.0", threads, lanes, subgroup, true});
}

// Adds a column's lanes (lane_sum, declared by gemv_lane_sum_fn): part[lid] holds the
// column's sum on every lane of it.
std::string gemv_lane_tree() { return "  part[lid] = lane_sum((s0 + s1) + (s2 + s3), lid);\n"; }

// The four half-type elements of u32 words `a` and `b` as vec4<f32>: a word holds element
// 2c in its low half and 2c + 1 in its high; a bfloat16 is a float32's top half.
std::string gemv_half4(DType dtype, const std::string& a, const std::string& b) {
  if (dtype == DType::Float16) return "vec4<f32>(unpack2x16float(" + a + "), unpack2x16float(" + b + "))";
  return "bitcast<vec4<f32>>(vec4<u32>(" + a + " << 16u, " + a + " & 0xffff0000u, " + b + " << 16u, " + b +
         " & 0xffff0000u))";
}

// `wide_dot(w, k)`: word w of the vec4 binding `W` (weight elements k .. k + span) dotted
// with A's elements there (A's row from `ai`, stride `ak`, as in gemv_lane_sums).
std::string gemv_wide_dot(const std::string& W, DType b_dtype, const std::string& i = "") {
  std::string s = "fn wide_dot" + i + "(ai: u32, ak: u32, w: u32, k: u32) -> f32 {\n  let v = " + W + "[w];\n";
  auto a4 = [](uint32_t e) {
    std::string r = "vec4<f32>(";
    for (uint32_t i = 0; i < 4; ++i)
      r += std::string(i ? ", " : "") + "load_a(ai + (k + " + std::to_string(e + i) + "u) * ak)";
    return r + ")";
  };
  if (b_dtype == DType::Float32) return s + "  return dot(bitcast<vec4<f32>>(v), " + a4(0) + ");\n}\n";
  return s + "  return dot(" + gemv_half4(b_dtype, "v.x", "v.y") + ", " + a4(0) + ") + dot(" +
         gemv_half4(b_dtype, "v.z", "v.w") + ", " + a4(4) + ");\n}\n";
}

// gemv_lane_sums over 16-byte words of the weight (wide_dot) by `lanes` lanes per row: a
// lane keeps four words (64 bytes) in flight, four times the scalar loop's, for the same
// instructions; the K % span tail elements one at a time.
std::string gemv_wide_lane_sums(uint32_t span, const std::string& in, const std::string& i = "", bool tail = true,
                                uint32_t lanes = kGemvLanes) {
  const std::string S = std::to_string(span) + "u";
  auto n = [lanes](uint32_t times) { return std::to_string(lanes * times) + "u"; };
  auto term = [&](const std::string& q) {
    return "wide_dot" + i + "(ai, ak, wq + " + q + ", (" + q + ") * " + S + ")";
  };
  return in + "let wq = bj / " + S + ";\n" + in + "let Q = K / " + S + ";\n" + in + "var q = lane;\n" +
         in + "for (; q + " + n(3) + " < Q; q = q + " + n(4) + ") {\n" +
         in + "  s0 = s0 + " + term("q") + ";\n" + in + "  s1 = s1 + " + term("q + " + n(1)) + ";\n" +
         in + "  s2 = s2 + " + term("q + " + n(2)) + ";\n" + in + "  s3 = s3 + " + term("q + " + n(3)) + ";\n" + in + "}\n" +
         in + "for (; q < Q; q = q + " + n(1) + ") { s0 = s0 + " + term("q") + "; }\n" +
         (tail ? in + "for (var k = Q * " + S + " + lane; k < K; k = k + " + n(1) + ") { s1 = s1 + load_a(ai + k * ak) * load_b(bj + k); }\n"
               : "");
}

// Elements of A a staged GEMV workgroup holds at a time (8 KiB of float32: within the
// spec's 16 KiB of workgroup memory beside `part`; a multiple of every span).
constexpr uint32_t kGemvStageChunk = 2048;

// wide_dot<i> over A staged in workgroup memory `xa` (float32 vec4s, declared by the
// kernel): word w of the vec4 binding `W` dotted with xa from its element j (a multiple
// of the span); ai and ak unused (the signature is gemv_wide_dot's, so that
// gemv_wide_lane_sums reads either).
// The WGSL expression of weight word `v` (vec4<u32>) dotted with xa from vec4 `x` (and
// x + 1 for a word's eight half elements).
std::string gemv_staged_word_dot(DType b_dtype) {
  if (b_dtype == DType::Float32) return "dot(bitcast<vec4<f32>>(v), xa[x])";
  return "dot(" + gemv_half4(b_dtype, "v.x", "v.y") + ", xa[x]) + dot(" + gemv_half4(b_dtype, "v.z", "v.w") +
         ", xa[x + 1u])";
}

std::string gemv_staged_dot(const std::string& W, DType b_dtype, const std::string& i = "") {
  return "fn wide_dot" + i + "(ai: u32, ak: u32, w: u32, j: u32) -> f32 {\n  let v = " + W +
         "[w];\n  let x = j / 4u;\n  return " + gemv_staged_word_dot(b_dtype) + ";\n}\n";
}

// How a GEMV reads its weights: element by element, half-type pairs per u32 word, or vec4
// words (rows on 16 bytes; a group kernel binds them as vec4 only, so K must be a whole
// number of words there).
enum class WeightLoad { Elements, Pairs, Words };

// The weight-reading function of linear `i` whose weight is binding `b`, for gemv_sums
// (`staged`: Words against A in workgroup memory, gemv_staged_dot).
std::string gemv_weight_fn(WeightLoad load, const std::string& i, size_t b, DType dt,
                           const std::vector<KernelBuffer>& buffers, bool staged) {
  if (load == WeightLoad::Words)
    return staged ? gemv_staged_dot("buf" + std::to_string(b), dt, i) : gemv_wide_dot("buf" + std::to_string(b), dt, i);
  if (load == WeightLoad::Pairs) return gemv_weight_pair(i, b, dt);
  return typed_load("load_b" + i, buffers, b, dt, Compute::F32);
}

// One lane's partial sums s0..s3 of linear `i`'s column from `bj`, as `load` reads it
// (`lanes` per column: Words only; the others take kGemvLanes).
std::string gemv_sums(WeightLoad load, DType dt, const std::string& i, const std::string& in, uint32_t lanes) {
  return load == WeightLoad::Words ? gemv_wide_lane_sums(gemv_walk_span(dt), in, i, false, lanes)
                                   : gemv_lane_sums(load == WeightLoad::Pairs, i, in);
}

// Lanes sharing one weight row of `k` elements read as 16-byte words of `span`, for a
// dispatch of `columns` outputs (rows of A times weight rows). Few lanes per row leave each
// lane a longer walk (more loads in flight, less of the lane tree per word); many lanes give
// a small dispatch enough invocations to cover the memory's latency. So: from 8 lanes,
// double while the dispatch has under kGemvInvocations invocations and each lane would still
// read >= 8 words (K = 896 half is 112 words: 8 lanes). On an H100, 32 lanes for every row of
// >= 256 words read 1x2048 @ 2048x8192 at 1675 GB/s in fp32 and 1323 in fp16, 16 lanes at
// 1931 and 1824; small-N rows (o_proj, down_proj: 896 columns) keep 16-32 lanes.
// TORCH_WEBGPU_GEMM_VARIANT=gemv_lanes8|gemv_lanes16|gemv_lanes32 forces a count (A/B;
// gemv_lanes32_direct_a is the first kernel: 32 lanes, A read per word).
constexpr uint64_t kGemvInvocations = 1u << 17;
uint32_t gemv_row_lanes(uint64_t k, uint64_t columns, uint32_t span, const std::string& force) {
  for (const uint32_t lanes : {8u, 16u, 32u}) {
    const std::string name = "gemv_lanes" + std::to_string(lanes);
    if (force == name || force == name + "_direct_a") return lanes;
  }
  const uint64_t words = k / span;
  // Half-type words hold 8 elements each to unpack: rows of >= 512 words (K >= 4096) share
  // that among 32 lanes (H100, 1x4096 @ 4096x11008: fp16 0.83 of CUDA's GB/s against 0.76
  // with 16 lanes, bf16 0.82 against 0.73, same process).
  if (span == 8 && words >= 512) return 32;
  uint32_t lanes = 8;
  while (lanes < 32 && columns * lanes < kGemvInvocations && words >= 16 * lanes) lanes *= 2;
  return lanes;
}

// Whether TORCH_WEBGPU_GEMM_VARIANT forces the K-contiguous GEMV (gemv, gemv_scalar,
// gemv_direct_a, gemv_gated_serial, gemv_lanesN[_direct_a]).
bool gemv_forced(const std::string& force) {
  return force == "gemv" || force == "gemv_scalar" || force == "gemv_direct_a" || force == "gemv_gated_serial" ||
         force == "gemv_row_each" ||
         force.rfind("gemv_lanes", 0) == 0;
}

// Whether TORCH_WEBGPU_GEMM_VARIANT reads A per word rather than staged (gemv_direct_a,
// gemv_lanesN_direct_a).
bool gemv_direct_a(const std::string& force) {
  const std::string suffix = "direct_a";
  return force.size() >= suffix.size() && force.compare(force.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The chunk loop of the staged GEMVs, opened: between barriers the workgroup stages A's
// `rows` rows from r (one: the row at `ai`; rows past M repeat row M - 1) as runs of
// kGemvStageChunk / rows float32s in xa, zeros past K; then q, this lane's first weight
// word of the chunk (in words of `span`), and qe, the chunk's end.
std::string gemv_stage_head(uint32_t span, uint32_t threads, uint32_t rows) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const uint32_t chunk = kGemvStageChunk / rows, run = chunk / 4;
  const std::string S = n(span), CH = n(chunk);
  return "  for (var kc = 0u; kc < K; kc = kc + " + CH + ") {\n"
         "    workgroupBarrier();\n"
         "    for (var e = lid; e < " + n(rows * run) + "; e = e + " + n(threads) + ") {\n" +
         (rows == 1 ? "      let k0 = kc + e * 4u;\n"
                    : "      let ai = a_base(bo, bi) + min(r + e / " + n(run) + ", M - 1u) * u.a_rows;\n"
                      "      let k0 = kc + (e % " + n(run) + ") * 4u;\n") +
         "      var x = vec4<f32>(0.0);\n"
         "      for (var t = 0u; t < 4u; t = t + 1u) {\n"
         "        if (k0 + t < K) { x[t] = load_a(ai + (k0 + t) * ak); }\n"
         "      }\n"
         "      xa[e] = x;\n"
         "    }\n"
         "    workgroupBarrier();\n"
         "    let qe = min(Q, (kc + " + CH + ") / " + S + ");\n"
         "    var q = kc / " + S + " + lane;\n";
}

// The staged wide GEMV's sums: A's row is read once per workgroup into `xa` as float32,
// kGemvStageChunk elements at a time, so a weight word costs one global load and two vec4
// reads of `xa` where wide_dot did four or eight typed loads of A (each an index and, for
// half types, a word extract and unpack) for every column again. Every lane runs the
// chunk loop (its barriers need uniform control flow; idle lanes read column N - 1).
std::string gemv_staged_lane_sums(uint32_t span, uint32_t threads, uint32_t lanes) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string S = n(span);
  auto term = [&](const std::string& q) { return "wide_dot(ai, ak, wq + " + q + ", (" + q + ") * " + S + " - kc)"; };
  return
      "  let wq = bj / " + S + ";\n  let Q = K / " + S + ";\n" + gemv_stage_head(span, threads, 1) +
      "    for (; q + " + n(3 * lanes) + " < qe; q = q + " + n(4 * lanes) + ") {\n"
      "      s0 = s0 + " + term("q") + ";\n      s1 = s1 + " + term("q + " + n(lanes)) + ";\n"
      "      s2 = s2 + " + term("q + " + n(2 * lanes)) + ";\n      s3 = s3 + " + term("q + " + n(3 * lanes)) + ";\n"
      "    }\n"
      "    for (; q < qe; q = q + " + n(lanes) + ") { s0 = s0 + " + term("q") + "; }\n"
      "  }\n"
      "  for (var k = Q * " + S + " + lane; k < K; k = k + " + n(lanes) + ") { s1 = s1 + load_a(ai + k * ak) * load_b(bj + k); }\n";
}

// `wide`: the vec4 binding of B when every weight row starts on 16 bytes (gemv_walk_fit),
// else 0 (scalar or pair loads); `lanes` per column (gemv_row_lanes; wide only); `staged`:
// wide with A in workgroup memory (gemv_staged_lane_sums).
std::string gemv_body(uint32_t threads, bool pairs, DType b_dtype, size_t wide, uint32_t lanes, bool staged,
                      uint32_t subgroup) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string cols = n(threads / lanes);
  std::string s = "var<workgroup> part: array<f32, " + std::to_string(threads) + ">;\n" +
                  gemv_lane_sum_fn(threads, lanes, subgroup);
  if (staged)
    s += "var<workgroup> xa: array<vec4<f32>, " + std::to_string(kGemvStageChunk / 4) + ">;\n" +
         gemv_staged_dot("buf" + std::to_string(wide), b_dtype);
  else if (wide) s += gemv_wide_dot("buf" + std::to_string(wide), b_dtype);
  else if (pairs) s += gemv_weight_pair("", 1, b_dtype);
  s += kernel_main(Grid::Groups, threads);
  s += gemv_group_decode(Split::None) +
       "  let lane = lid % " + n(lanes) + ";\n"
       "  let c = cg * " + cols + " + lid / " + n(lanes) + ";\n"
       "  let live = valid && c < N;\n"
       "  let ai = a_base(bo, bi) + r * u.a_rows;\n"
       "  let ak = u.a_cols;\n"
       "  let bj = b_base(bo, bi) + min(c, N - 1u) * u.b_cols;\n"
       "  var s0 = 0.0;\n  var s1 = 0.0;\n  var s2 = 0.0;\n  var s3 = 0.0;\n";
  if (staged) s += gemv_staged_lane_sums(gemv_walk_span(b_dtype), threads, lanes);
  else
    s += "  if (live) {\n" + (wide ? gemv_wide_lane_sums(gemv_walk_span(b_dtype), "    ", "", true, lanes) : gemv_lane_sums(pairs, "", "    ")) +
         "  }\n";
  s += gemv_lane_tree() + "  if (live && lane == 0u) { finish(bo, bi, r, c, part[lid]); }\n}\n";
  return s;
}

// Rows of A per workgroup of the staged wide GEMV for an M-row product: 1, 2, 4 or 8 (rows
// past M repeat row M - 1 and store nothing). kGemvMaxRows rows take the GEMV on GPUs
// where its words fit (a short prompt's prefill, batched decode): each weight word loaded
// serves every row of the workgroup, so the weights are read once for 8 rows, where the
// split-K tiles that took 5-16 rows read them at a fraction of the bandwidth.
constexpr uint64_t kGemvMaxRows = 16;
uint32_t gemv_rows_per_group(uint64_t m) { return m <= 1 ? 1 : m == 2 ? 2 : m <= 4 ? 4 : 8; }

// The staged wide GEMV (gemv_body, `staged`) over `rows` rows of A at a time: A's rows
// staged as `rows` runs of kGemvStageChunk / rows float32s, each weight word dotted with
// every row's run (one sum per row and lane, four words in flight), then each row's lanes
// added and stored.
std::string gemv_rows_body(uint32_t threads, DType b_dtype, size_t wide, uint32_t lanes, uint32_t rows,
                           uint32_t subgroup) {
  auto n = [](uint64_t v) { return std::to_string(v) + "u"; };
  const uint32_t span = gemv_walk_span(b_dtype), run = kGemvStageChunk / rows / 4;
  const std::string S = n(span), L = n(lanes), W = "buf" + std::to_string(wide);
  std::string s = gemv_lane_sum_fn(threads, lanes, subgroup) + "var<workgroup> xa: array<vec4<f32>, " +
                  std::to_string(kGemvStageChunk / 4) + ">;\n";
  s += "fn row_dot(v: vec4<u32>, x: u32) -> f32 { return " + gemv_staged_word_dot(b_dtype) + "; }\n";
  s += kernel_main(Grid::Groups, threads) + gemv_group_decode(Split::None, rows) +
       "  let lane = lid % " + L + ";\n"
       "  let c = cg * " + n(threads / lanes) + " + lid / " + L + ";\n"
       "  let live = valid && c < N;\n"
       "  let ak = u.a_cols;\n"
       "  let bj = b_base(bo, bi) + min(c, N - 1u) * u.b_cols;\n"
       "  let wq = bj / " + S + ";\n  let Q = K / " + S + ";\n";
  std::string acc, one, four, tail;
  for (uint32_t i = 0; i < rows; ++i) {
    const std::string si = "s" + std::to_string(i), off = n(i * run);
    acc += "  var " + si + " = 0.0;\n";
    one += "      " + si + " = " + si + " + row_dot(v0, x0 + " + off + ");\n";
    four += "      " + si + " = " + si + " + ((row_dot(v0, x0 + " + off + ") + row_dot(v1, x1 + " + off +
            ")) + (row_dot(v2, x2 + " + off + ") + row_dot(v3, x3 + " + off + ")));\n";
    tail += "    " + si + " = " + si + " + load_a(a_base(bo, bi) + min(r + " + n(i) + ", M - 1u) * u.a_rows + k * ak) * b;\n";
  }
  // Element offset (q * span - kc) / 4 of word q in the chunk's runs.
  auto x = [&](const std::string& q) { return "(" + q + ") * " + n(span / 4) + " - kc / 4u"; };
  s += acc + gemv_stage_head(span, threads, rows) +
       "    for (; q + " + n(3 * lanes) + " < qe; q = q + " + n(4 * lanes) + ") {\n"
       "      let v0 = " + W + "[wq + q];\n      let v1 = " + W + "[wq + q + " + n(lanes) + "];\n"
       "      let v2 = " + W + "[wq + q + " + n(2 * lanes) + "];\n      let v3 = " + W + "[wq + q + " + n(3 * lanes) + "];\n"
       "      let x0 = " + x("q") + ";\n      let x1 = " + x("q + " + n(lanes)) + ";\n"
       "      let x2 = " + x("q + " + n(2 * lanes)) + ";\n      let x3 = " + x("q + " + n(3 * lanes)) + ";\n" +
       four +
       "    }\n"
       "    for (; q < qe; q = q + " + L + ") {\n"
       "      let v0 = " + W + "[wq + q];\n      let x0 = " + x("q") + ";\n" + one +
       "    }\n"
       "  }\n"
       "  for (var k = Q * " + S + " + lane; k < K; k = k + " + L + ") {\n    let b = load_b(bj + k);\n" + tail +
       "  }\n";
  for (uint32_t i = 0; i < rows; ++i) {
    const std::string t = "t" + std::to_string(i);
    s += "  let " + t + " = lane_sum(s" + std::to_string(i) + ", lid);\n"
         "  if (live && lane == 0u && r + " + n(i) + " < M) { finish(bo, bi, r + " + n(i) + ", c, " + t + "); }\n";
  }
  return s + "}\n";
}

// The norm's prologue (d.norm): A's row staged as h = a + residual (stored by the first
// column tile's workgroups), then scaled in place: RMSNorm by rsqrt(mean(h^2) + eps) *
// weight; LayerNorm (`layer`) first subtracts the row's mean and adds `bias` after (each
// invocation's sums go through the workgroup's tree; an invocation reads back only the
// words it staged, so no barrier before the second sum). Division and rsqrt as the
// generated norms and eager compute them.
std::string gemv_norm_prologue(uint32_t threads, uint32_t xa_vec4s, bool residual, bool layer, bool bias) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string each = "  for (var e = lid; e < " + n(xa_vec4s) + "; e = e + " + n(threads) + ") {\n";
  std::string s =
      "  var acc = 0.0;\n" + each +
      "    var h = vec4<f32>(0.0);\n"
      "    for (var t = 0u; t < 4u; t = t + 1u) {\n"
      "      let k = e * 4u + t;\n"
      "      h[t] = load_a(ai + k * ak)" + std::string(residual ? " + load_r(u.r_offset + r * u.r_rows + k * u.r_cols)" : "") + ";\n"
      "      if (valid && cg == 0u) { store_h(u.h_offset + r * u.h_rows + k * u.h_cols, h[t]); }\n"
      "    }\n"
      "    xa[e] = h;\n" +
      std::string(layer ? "    acc = acc + ((h.x + h.y) + (h.z + h.w));\n" : "    acc = acc + dot(h, h);\n") +
      "  }\n";
  if (layer)
    s += "  let mean = div_f32(row_sum(acc, lid), f32(K));\n"
         "  acc = 0.0;\n" + each +
         "    let dv = xa[e] - vec4<f32>(mean);\n    acc = acc + dot(dv, dv);\n  }\n";
  s += "  let scale = inverseSqrt(div_f32(row_sum(acc, lid), f32(K)) + u.eps);\n" + each +
       "    let k = u.nw_offset + e * 4u * u.nw_stride;\n"
       "    let wv = vec4<f32>(load_nw(k), load_nw(k + u.nw_stride), load_nw(k + 2u * u.nw_stride), load_nw(k + 3u * u.nw_stride));\n";
  if (!layer) return s + "    xa[e] = xa[e] * scale * wv;\n  }\n  workgroupBarrier();\n";
  s += "    xa[e] = (xa[e] - vec4<f32>(mean)) * scale * wv;\n";
  if (bias)
    s += "    let nbk = u.nb_offset + e * 4u * u.nb_stride;\n"
         "    xa[e] = xa[e] + vec4<f32>(load_nb(nbk), load_nb(nbk + u.nb_stride), load_nb(nbk + 2u * u.nb_stride), load_nb(nbk + 3u * u.nb_stride));\n";
  return s + "  }\n  workgroupBarrier();\n";
}

// The norm's WGSL helpers over its buffers from `first` on (residual where it has one,
// weight, bias where it has one, h): load_r, load_nw, load_nb, store_h, and row_sum (a
// float sum over the workgroup, for the row's mean and squares).
std::string row_norm_fns(const std::vector<KernelBuffer>& bufs, size_t first, bool residual, bool bias,
                         uint32_t threads, uint32_t subgroup) {
  const DType f32 = DType::Float32;
  std::string s = "fn row_add(a: f32, b: f32) -> f32 { return a + b; }\n" +
                  group_reduce_fn({"row_sum", "f32", "", "row_add", "0.0", threads, threads, subgroup, true});
  size_t i = first;
  if (residual) s += typed_load("load_r", bufs, i++, f32, Compute::F32);
  s += typed_load("load_nw", bufs, i++, f32, Compute::F32);
  if (bias) s += typed_load("load_nb", bufs, i++, f32, Compute::F32);
  return s + kernel_store("store_h", bufs, i, f32, Compute::F32);
}

// Matrix-vector products whose weight has N contiguous (x @ W with W [k, n]: GPT-2's
// Conv1D at decode). A workgroup owns `lanes` neighbouring columns of one row (lanes * 4
// where `wide`): runs of `lanes` invocations read neighbouring elements of a weight row
// (coalesced, where one invocation per output column would leave the GPU mostly idle and a
// tree per output would read one element per 32-byte sector), the threads / lanes runs take
// interleaved rows of its slice of K with 4 partial sums each, and the runs' sums are added:
// first by shuffles within a subgroup where the adapter has them, then by a tree in
// workgroup memory.
//
// `wide` (float32 weights whose rows start on 16 bytes, N a multiple of 4): the weight is
// bound again as vec4 words (binding `wide`) and a lane owns four neighbouring columns, so
// a run reads 16 * lanes contiguous bytes of a row per load and keeps four words in flight.
//
// With `norm` (gemm_normed: d.norm's prologue, xa_vec4s words of A's row) the workgroup
// first stages and normalizes its row of A in workgroup memory (gemv_norm_prologue), and
// the sums read it there.
std::string gemv_cols_body(uint32_t threads, uint32_t lanes, Split split, size_t wide, uint32_t subgroup,
                           const RowNorm* norm = nullptr, uint32_t xa_vec4s = 0) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string V = wide ? "vec4<f32>" : "f32", Z = wide ? "vec4<f32>(0.0)" : "0.0";
  const std::string W = "buf" + std::to_string(wide);
  // The weight term of row k: a word of four columns, or one element.
  auto b = [&](const std::string& k) {
    return wide ? "bitcast<vec4<f32>>(" + W + "[(bj + (" + k + ") * bk) / 4u])" : "load_b(bj + (" + k + ") * bk)";
  };
  // Subgroups of one size holding whole runs: a subgroup's runs merge by xor shuffles
  // (lane j of every run holds the same column), leaving one run per subgroup for the tree.
  const bool shuffles = subgroup >= lanes && subgroup <= threads && threads % subgroup == 0;
  const uint32_t slots = shuffles ? threads / subgroup * lanes : threads;
  std::string s = "var<workgroup> part: array<" + V + ", " + std::to_string(slots) + ">;\n";
  if (norm) s += "var<workgroup> xa: array<vec4<f32>, " + std::to_string(xa_vec4s) + ">;\n";
  // Element k of A's row.
  auto a = [&](const std::string& k) {
    return norm ? "xa[(" + k + ") >> 2u][(" + k + ") & 3u]" : "load_a(ai + (" + k + ") * ak)";
  };
  s += kernel_main(Grid::Groups, threads);
  s += gemv_group_decode(split) +
       "  let lane = lid % " + n(lanes) + ";\n  let run = lid / " + n(lanes) + ";\n" +
       (wide ? "  let c = (cg * " + n(lanes) + " + lane) * 4u;\n" : "  let c = cg * " + n(lanes) + " + lane;\n") +
       "  let live = valid && c < N;\n"
       "  let ai = a_base(bo, bi) + r * u.a_rows;\n  let ak = u.a_cols;\n"
       "  let bj = b_base(bo, bi) + min(c, N - 1u);\n  let bk = u.b_rows;\n";
  if (norm) s += gemv_norm_prologue(threads, xa_vec4s, norm->residual.buffer, norm->layer, norm->bias.buffer);
  s += "  var s0 = " + Z + ";\n  var s1 = " + Z + ";\n  var s2 = " + Z + ";\n  var s3 = " + Z + ";\n"
       "  if (live) {\n"
       "    let W = " + n(threads / lanes) + ";\n"
       "    var k = kb + run;\n"
       "    for (; k + 3u * W < ke; k = k + 4u * W) {\n"
       "      s0 = s0 + " + a("k") + " * " + b("k") + ";\n"
       "      s1 = s1 + " + a("k + W") + " * " + b("k + W") + ";\n"
       "      s2 = s2 + " + a("k + 2u * W") + " * " + b("k + 2u * W") + ";\n"
       "      s3 = s3 + " + a("k + 3u * W") + " * " + b("k + 3u * W") + ";\n"
       "    }\n"
       "    for (; k < ke; k = k + W) { s0 = s0 + " + a("k") + " * " + b("k") + "; }\n"
       "  }\n"
       "  var t = (s0 + s1) + (s2 + s3);\n";
  if (shuffles)
    s += "  for (var o = " + n(lanes) + "; o < " + n(subgroup) + "; o = o << 1u) { t = t + subgroupShuffleXor(t, o); }\n"
         "  if (lid % " + n(subgroup) + " < " + n(lanes) + ") { part[lid / " + n(subgroup) + " * " + n(lanes) +
         " + lane] = t; }\n";
  else
    s += "  part[lid] = t;\n";
  s += "  workgroupBarrier();\n";
  if (slots > lanes)
    s += "  for (var w = " + n(slots / 2) + "; w >= " + n(lanes) + "; w = w >> 1u) {\n"
         "    if (lid < w) { part[lid] = part[lid] + part[lid + w]; }\n"
         "    workgroupBarrier();\n"
         "  }\n";
  if (!wide) return s + "  if (live && run == 0u) { finish(bo, bi, r, c, part[lid]); }\n}\n";
  return s + "  if (live && run == 0u) {\n"
             "    let t = part[lid];\n"
             "    finish(bo, bi, r, c, t.x);\n    finish(bo, bi, r, c + 1u, t.y);\n"
             "    finish(bo, bi, r, c + 2u, t.z);\n    finish(bo, bi, r, c + 3u, t.w);\n"
             "  }\n}\n";
}

}  // namespace

namespace {

// Elements of `o` that rows [0, m) and columns [0, n) of every matrix of the batch touch.
ElementRange operand_range(const GemmDesc& d, const MatOperand& o, uint64_t m, uint64_t n) {
  const int64_t sizes[4] = {int64_t(d.batch_outer), int64_t(d.batch_inner), int64_t(m), int64_t(n)};
  const int64_t strides[4] = {int64_t(o.batch_outer), int64_t(o.batch_inner), int64_t(o.rows),
                              int64_t(o.cols)};
  return strided_range(o.offset, sizes, strides, 4);
}

// The elements of B that rows [0, k) and columns [0, n) touch: an implicit GEMM's are its
// images' groups, whole.
ElementRange b_range(const GemmDesc& d, uint64_t k, uint64_t n) {
  if (!d.conv) return operand_range(d, d.b, k, n);
  const uint64_t group = uint64_t(d.conv->cx) * d.conv->x_spatial();
  const uint64_t first = d.b.offset;
  return {first, first + (d.batch_outer - 1) * d.b.batch_outer + (d.batch_inner - 1) * d.b.batch_inner + group};
}

// Split-K for products whose small tiles are too few to fill a GPU (few rows, long K:
// a transformer's linears at small batch). WebGPU does not say how many compute units an
// adapter has, so GPU adapters assume kGpuTargetWorkgroups: about two 64-invocation
// workgroups per SM of a 132-SM H200 (smaller GPUs run a second wave). Slices hold at
// least kSplitKMinSlice values of K (fewer workgroups but less scratch traffic below that)
// and are whole tile steps. Software adapters keep one slice (their workgroups run on a
// few CPU cores, always full). TORCH_WEBGPU_GEMM_VARIANT=splitk forces at least 2 slices.
constexpr uint64_t kGpuTargetWorkgroups = 256;
constexpr uint64_t kSplitKMinSlice = 64;

// The length of split-K's slices of K; d.k: no split.
// `forcing`: the TORCH_WEBGPU_GEMM_VARIANT value that forces a split.
uint64_t splitk_slice(Context& ctx, const GemmDesc& d, uint64_t tiles, const std::string& force,
                      const char* forcing, uint64_t min_slice) {
  const bool forced = force == forcing;
  if (d.k < 2 || !(forced || (force.empty() && tiles < kGpuTargetWorkgroups && !software_adapter(ctx))))
    return d.k;
  uint64_t splits = std::min((kGpuTargetWorkgroups + tiles - 1) / tiles, d.k / min_slice);
  if (forced) splits = std::max<uint64_t>(splits, 2);
  // The partial sums must fit one storage binding.
  const uint64_t outputs = d.batch_outer * d.batch_inner * d.m * d.n;
  splits = std::min(splits, ctx.caps().max_storage_binding_size / (outputs * 4));
  if (splits < 2) return d.k;
  const uint64_t slice = (d.k + splits - 1) / splits;
  return slice > kSmallTile.bk ? (slice + kSmallTile.bk - 1) / kSmallTile.bk * kSmallTile.bk : slice;
}

// gemv_cols' lanes per column run: the most (up to a warp's 32) that still give about one
// workgroup per SM of a large GPU (kGpuTargetWorkgroups / 2 of `threads` invocations), as
// fewer lanes mean more column groups for the same N; at least one 32-byte memory sector per
// row segment (2 lanes of vec4 words, 8 of elements). Where even those are too few, K is
// split. TORCH_WEBGPU_GEMM_VARIANT=gemv_cols_lanesN forces N (2, 4, ..., 32).
uint32_t gemv_cols_lanes(uint64_t row_groups, uint64_t n, bool wide, const std::string& force) {
  for (uint32_t lanes = 2; lanes <= 32; lanes *= 2)
    if (force == "gemv_cols_lanes" + std::to_string(lanes)) return lanes;
  const uint32_t cols = wide ? 4 : 1, fewest = wide ? 2 : 8;
  uint32_t lanes = 32;
  while (lanes > fewest && row_groups * ((n + cols * lanes - 1) / (cols * lanes)) < kGpuTargetWorkgroups / 2) lanes /= 2;
  return lanes;
}

// GemvWalk's operands: a float32 or half-type B with K contiguous, every row of B
// starting on 16 bytes (its vec4 binding), bound whole.
bool gemv_walk_fit(Context& ctx, const GemmDesc& d) {
  const MatOperand& b = d.b;
  if (b.dtype != DType::Float32 && b.dtype != DType::Float16 && b.dtype != DType::BFloat16) return false;
  const uint32_t span = gemv_walk_span(b.dtype);
  auto aligned = [span](uint64_t extent, uint64_t stride) { return extent < 2 || stride % span == 0; };
  return d.compute == Compute::F32 && !d.conv && b.rows == 1 && d.k >= span && b.offset % span == 0 &&
         aligned(d.n, b.cols) && aligned(d.batch_outer, b.batch_outer) &&
         aligned(d.batch_inner, b.batch_inner) && !needs_window(ctx, b.buffer);
}

// TORCH_WEBGPU_GEMM_TILE=TMxTNxBK:WXxWY[:u|:r] replaces the float32 vec4 tiles' shape (tuning
// experiments on a GPU); a shape the kernel or the adapter's limits cannot hold raises.
void experimental_tile(Context& ctx, TileShape& t) {
  const char* e = std::getenv("TORCH_WEBGPU_GEMM_TILE");
  if (!e || !*e) return;
  TileShape x = t;
  char unroll = 0;
  const int fields = std::sscanf(e, "%ux%ux%u:%ux%u:%c", &x.tm, &x.tn, &x.bk, &x.wx, &x.wy, &unroll);
  // (":u" unrolls, ":r" keeps the loop; neither: unrolled for blocks of 64+ outputs.)
  const bool parsed = fields == 5 || (fields == 6 && (unroll == 'u' || unroll == 'r'));
  x.unroll = fields == 6 ? unroll == 'u' : x.tm / x.wy * (x.tn / x.wx) >= 64;
  const uint64_t shared = 16ull * x.bk * (x.tm / 4 + 1 + x.tn / 4 + 1);
  // (The pipeline key packs each of tm, tn, bk, wx and wy in 8 bits.)
  const bool fits_key = std::max({x.tm, x.tn, x.bk, x.wx, x.wy}) <= 255;
  if (!parsed || !fits_key || !x.wx || !x.wy || !x.bk || x.tm % (4 * x.wy) || x.tn % (4 * x.wx) ||
      x.threads() > ctx.caps().max_workgroup_invocations || x.tm * x.bk / 4 % x.threads() ||
      x.tn * x.bk / 4 % x.threads() || x.tm * x.bk / 4 < x.threads() || x.tn * x.bk / 4 < x.threads() ||
      shared > ctx.caps().max_workgroup_storage)
    fail(ErrorKind::InvalidArgument, std::string("torch_webgpu: TORCH_WEBGPU_GEMM_TILE=") + e +
                                         " is not a tile this kernel and adapter can run (TMxTNxBK:WXxWY, then :u to unroll)");
  t = x;
}

}  // namespace

// `force`: TORCH_WEBGPU_GEMM_VARIANT's value, or the autotuner's choice; "" for the
// heuristic's (gemm_piece).
// gemm_with_variant, which returns false (recording nothing) where d.norm is set and the
// product would not be one normalizing GEMV (gemm_normed's conditions).
static bool gemm_recorded(Context& ctx, const GemmDesc& d, std::string force);

void gemm_with_variant(Context& ctx, const GemmDesc& d, std::string force) {
  gemm_recorded(ctx, d, std::move(force));
}

static bool gemm_recorded(Context& ctx, const GemmDesc& d, std::string force) {
  const uint64_t batch = d.batch_outer * d.batch_inner;
  const uint64_t outputs = batch * d.m * d.n;
  if (outputs == 0) return d.norm == nullptr;
  const bool has_c = d.c.buffer != nullptr;

  // TORCH_WEBGPU_GEMM_VARIANT=tiled|tiled_medium|tiled_large|block overrides the choice for large
  // products, reduce|per_out the one for small ones, splitk takes split-K's small tiles for
  // any product (tests cover each).
  // A "_scalar" suffix on a tiled variant (tiled_scalar, tiled_large_scalar...) keeps the
  // scalar shared reads of tiled_body for float32 (A/B against tiled_vec4_body).
  const std::string scalar_suffix = "_scalar";
  const bool scalar_tiles = force.rfind("tiled", 0) == 0 && force.size() > scalar_suffix.size() &&
                            force.compare(force.size() - scalar_suffix.size(), std::string::npos, scalar_suffix) == 0;
  if (scalar_tiles) force.resize(force.size() - scalar_suffix.size());
  // "scalar_tiles": the default choice of tiles, with those scalar reads.
  const bool default_scalar_tiles = force == "scalar_tiles";
  if (default_scalar_tiles) force.clear();
  Variant v;
  // TORCH_WEBGPU_GEMM_VARIANT=gemv takes the GEMV kernel for any eligible product (tests),
  // no_gemv never. Software adapters skip it by default: barriers cost more there than
  // uncoalesced reads (which CPU caches absorb).
  const bool gemv_fits = d.compute == Compute::F32 && d.b.rows == 1 && d.b.cols != 1 && d.k >= 2;
  // Its twin for weights with N contiguous (gemv_cols; gemv_cols_split also splits K).
  const bool gemv_cols_fits = d.compute == Compute::F32 && d.b.cols == 1 && d.b.rows != 1 && !d.conv && d.k >= 2;
  if (gemv_fits && (gemv_forced(force) || (force.empty() && !software_adapter(ctx) && d.k >= 64 &&
                                            (d.m <= 4 || (d.m <= kGemvMaxRows && gemv_walk_fit(ctx, d))))))
    v = Variant::Gemv;
  else if (gemv_cols_fits && (force.rfind("gemv_cols", 0) == 0 ||
                              (force.empty() && !software_adapter(ctx) && d.m <= 4 && d.k >= 64)))
    v = Variant::GemvCols;
  // Their own GEMV on software adapters, for 1 to 3 rows (TORCH_WEBGPU_GEMM_VARIANT=gemv_walk
  // for any eligible product): float32 or half-type weights whose rows start on 16 bytes.
  else if (gemv_walk_fit(ctx, d) &&
           (force == "gemv_walk" || (force.empty() && software_adapter(ctx) && d.m < 4 && d.n >= 16)))
    v = Variant::GemvWalk;
  // Large products: shared-memory tiles, register blocks on software adapters (an implicit
  // GEMM has only the tiles).
  else if (d.conv)
    v = Variant::Tiled;
  // So do fewer rows over a wide N: from 4 on software adapters (register blocks beat both
  // GEMVs there, 1.1-2.8x), past the GEMV's 4 on GPUs (a short prompt's prefill: split-K
  // tiles fill the GPU where an invocation per output walked K alone, 304 us for
  // 8x896x4864 on an H200; tile rows past M idle).
  else if ((d.m >= 16 && d.n >= 16) || force == "splitk" ||
           (force.empty() && d.n >= 16 && (software_adapter(ctx) ? d.m >= 4 : d.m > 4 && d.k >= 16)))
    v = force == "block" || (force.empty() && software_adapter(ctx)) ? Variant::Block : Variant::Tiled;
  // Few outputs over a long K: a workgroup tree per output on GPUs. Software adapters run
  // a workgroup's invocations as SIMD lanes of one thread, where the tree's barriers and
  // lane-strided loads cost more than one invocation walking K (3x on llvmpipe at decode).
  else if (force == "reduce" || (force != "per_out" && d.k >= 256 && outputs <= 4096 &&
                                 !software_adapter(ctx)))
    v = Variant::Reduce;
  else
    v = Variant::PerOutput;

  // Larger tiles reuse each loaded element more, but a product needs enough of them to
  // fill the GPU (the thresholds suit a GPU of ~100 compute units; measured on an H200 and
  // an H100): 128x128 tiles from 256 workgroups (512x896 @ 896x4864 makes 152 of them:
  // 18.4 TFLOP/s against 22.1 with 64x64 tiles on an H100; 2048^2 outputs make 256: 33.8
  // against 25.3), else 64x64 from 128, else 32x32 (and only tiles the product fills:
  // 128x128 tiles on a 64-row product would idle half their invocations).
  TileShape shape = kSmallTile;
  auto count_tiles = [&](const TileShape& t) {
    return batch * ((d.m + t.tm - 1) / t.tm) * ((d.n + t.tn - 1) / t.tn);
  };
  if (v == Variant::Tiled && d.compute == Compute::F32) {
    if (force == "tiled_large" ||
        (force.empty() && d.m >= 128 && d.n >= 128 && count_tiles(kLargeTile) >= 256))
      shape = kLargeTile;
    else if (force == "tiled_medium" || (force.empty() && count_tiles(kMediumTile) >= 128))
      shape = kMediumTile;
  }
  // (Implicit GEMMs split too: the engine's convolutions run im2col and a plain GEMM of the
  // same shape, and must round as eager's gathers do.)
  const uint32_t gemv_threads = std::min<uint32_t>(256, ctx.caps().workgroup_1d());
  // GEMV over N-contiguous weights splits K when its column groups are too few (slices of
  // at least 32 rows per warp, so that the second pass stays small beside the first).
  // gemv_cols reads float32 weights as vec4 words of four columns where every row starts
  // on 16 bytes and N is a multiple of 4 (TORCH_WEBGPU_GEMM_VARIANT=gemv_cols_scalar: not).
  const bool cols_wide = v == Variant::GemvCols && force.find("scalar") == std::string::npos &&
                         d.b.dtype == DType::Float32 && d.n % 4 == 0 && d.b.offset % 4 == 0 && d.b.rows % 4 == 0 &&
                         (d.batch_outer < 2 || d.b.batch_outer % 4 == 0) &&
                         (d.batch_inner < 2 || d.b.batch_inner % 4 == 0) && !needs_window(ctx, d.b.buffer);
  const uint32_t cols_lanes = v == Variant::GemvCols ? gemv_cols_lanes(batch * d.m, d.n, cols_wide, force) : 0;
  const uint64_t cols_per_group = cols_wide ? 4 * cols_lanes : cols_lanes;
  const uint64_t k_slice =
      v == Variant::Tiled && d.compute == Compute::F32 && shape.tm == kSmallTile.tm
          ? splitk_slice(ctx, d, count_tiles(kSmallTile), force, "splitk", kSplitKMinSlice)
      : v == Variant::GemvCols
          ? splitk_slice(ctx, d, batch * d.m * ((d.n + cols_per_group - 1) / cols_per_group), force, "gemv_cols_split",
                         32 * (gemv_threads / cols_lanes))
          : d.k;
  const uint64_t splits = k_slice < d.k ? (d.k + k_slice - 1) / k_slice : 1;
  const Split split = splits > 1 ? Split::Partials : Split::None;
  // The norm's staged row (gemm_normed): one GEMV over N-contiguous weights, K unsplit.
  const uint32_t xa_vec4s = d.norm ? static_cast<uint32_t>(d.k / 4) : 0;
  if (d.act != GateAct::None && !d.norm) fail(ErrorKind::Unsupported, "torch_webgpu: gemm applies act only with a norm");
  // (Beside the row: `part`, a word or a float per invocation, and row_sum's tree.)
  if (d.norm && (v != Variant::GemvCols || split != Split::None || batch != 1 || d.k % 4 != 0 ||
                 d.k * 4 + ((cols_wide ? 16 : 4) + 4) * gemv_threads > ctx.caps().max_workgroup_storage))
    return false;
  shape.a_k_fast = d.a.cols == 1 && d.a.rows != 1;
  shape.b_k_fast = d.b.rows == 1 && d.b.cols != 1;
  const GatherB gather = !d.conv ? GatherB::None
                         : d.conv_positions_along_k ? GatherB::PositionsAlongK : GatherB::TapsAlongK;
  if (gather != GatherB::None) shape.b_k_fast = gather == GatherB::PositionsAlongK;
  const bool tiles_vec4 = v == Variant::Tiled && d.compute == Compute::F32 && !scalar_tiles && !default_scalar_tiles;
  if (tiles_vec4) experimental_tile(ctx, shape);

  // The GEMV reads 16-byte words of B where its rows start on 16 bytes (LLM weights do);
  // TORCH_WEBGPU_GEMM_VARIANT=gemv_scalar keeps the element loads (tests).
  const bool gemv_wide = v == Variant::Gemv && force != "gemv_scalar" && gemv_walk_fit(ctx, d);
  const bool gemv_pairs = v == Variant::Gemv && !gemv_wide &&
                          (d.b.dtype == DType::Float16 || d.b.dtype == DType::BFloat16) &&
                          d.k % 2 == 0 && d.b.offset % 2 == 0 && d.b.cols % 2 == 0 &&
                          d.b.batch_outer % 2 == 0 && d.b.batch_inner % 2 == 0;
  // The wide GEMV stages A in workgroup memory (TORCH_WEBGPU_GEMM_VARIANT=gemv_direct_a:
  // reads A per word instead, for A/B), several rows of it at a time for M > 1
  // (gemv_rows_body; TORCH_WEBGPU_GEMM_VARIANT=gemv_row_each: one row per workgroup).
  const bool gemv_staged = gemv_wide && !gemv_direct_a(force) &&
                           ctx.caps().max_workgroup_storage >= kGemvStageChunk * 4 + gemv_threads * 4;
  const uint32_t gemv_rows = gemv_staged && force != "gemv_row_each" ? gemv_rows_per_group(d.m) : 1;
  const uint32_t gemv_lanes =
      gemv_wide ? gemv_row_lanes(d.k, (d.m + gemv_rows - 1) / gemv_rows * d.n * batch, gemv_walk_span(d.b.dtype), force)
                : kGemvLanes;
  uint64_t tile_m = v == Variant::Block ? 4 : shape.tm, tile_n = v == Variant::Block ? 4 : shape.tn;
  if (v == Variant::Gemv) tile_m = gemv_rows, tile_n = gemv_threads / gemv_lanes;
  if (v == Variant::GemvCols) tile_m = 1, tile_n = cols_per_group;
  if (v == Variant::GemvWalk) tile_m = 1, tile_n = kGemvWalkThreads * kGemvWalkCols;
  const uint64_t tiles_m = (d.m + tile_m - 1) / tile_m, tiles_n = (d.n + tile_n - 1) / tile_n;
  KernelLaunch l;
  l.declare(gemm_layout(has_c, d.conv != nullptr, d.norm != nullptr))
      .set_u32("m", u32_or_fail(d.m, "size"))
      .set_u32("n", u32_or_fail(d.n, "size"))
      .set_u32("k", u32_or_fail(d.k, "size"))
      .set_u32("batch_inner", u32_or_fail(d.batch_inner, "batch"))
      .set_u32("tiles_n", u32_or_fail(tiles_n, "size"))
      .set_u32("tiles_per_batch", u32_or_fail(tiles_m * tiles_n, "size"))
      .set_u32("splits", static_cast<uint32_t>(splits))
      .set_u32("k_slice", u32_or_fail(k_slice, "size"))
      .set_u32("alpha_lo", d.alpha.lo)
      .set_u32("alpha_hi", d.alpha.hi);
  uint32_t offset_word[4] = {};
  offset_word[kOpA] = set_operand(l, kOpA, d.a);
  offset_word[kOpB] = set_operand(l, kOpB, d.b);
  if (has_c) {
    l.set_u32("beta_lo", d.beta.lo).set_u32("beta_hi", d.beta.hi);
    offset_word[kOpC] = set_operand(l, kOpC, d.c);
  }
  offset_word[kOpOut] = set_operand(l, kOpOut, d.out);
  if (d.conv) {
    const ConvGeometry& g = *d.conv;
    l.set_u32s("x_size", {g.xs[0], g.xs[1], g.xs[2]})
        .set_u32s("y_size", {g.ys[0], g.ys[1], g.ys[2]})
        .set_u32s("stride", {g.stride[0], g.stride[1], g.stride[2]})
        .set_u32s("pad", {g.pad[0], g.pad[1], g.pad[2]})
        .set_u32s("y_first", {g.y_first[0], g.y_first[1]});
  }

  // Split-K's second pass: the same uniforms, over the partial sums, C and out.
  KernelLaunch sum = l;
  auto bind = [&](KernelLaunch& to, const MatOperand& o, Operand op, Access access, bool atomic, uint64_t rows,
                  uint64_t cols) {
    to.buffers.push_back({o.buffer, access, atomic});
    ElementRange r = operand_range(d, o, rows, cols);
    to.buffers.back().touches(offset_word[op], o.dtype, r.first, r.end - r.first);
  };
  bind(l, d.a, kOpA, Access::Read, false, d.m, d.k);
  l.buffers.push_back({d.b.buffer, Access::Read, false});
  const ElementRange br = b_range(d, d.k, d.n);
  l.buffers.back().touches(offset_word[kOpB], d.b.dtype, br.first, br.end - br.first);
  // Bindings: A, B, [C], [taps], out; split-K's tile kernel A, B, [taps], partials.
  Allocation* partials = nullptr;
  KernelLaunch& epilogue = split == Split::Partials ? sum : l;
  if (split == Split::Partials) {
    if (d.conv) l.buffers.push_back({d.conv_taps, Access::Read, false});
    partials = ctx.pool().allocate(splits * outputs * 4);
    l.buffers.push_back({partials->buffer, Access::ReadWrite, false});
    sum.buffers.push_back({partials->buffer, Access::Read, false});
  }
  if (has_c) bind(epilogue, d.c, kOpC, Access::Read, false, d.m, d.n);
  if (d.conv && split == Split::None) l.buffers.push_back({d.conv_taps, Access::Read, false});
  // Narrow outputs share words between neighbouring elements written by different
  // invocations: their stores are atomic.
  bind(epilogue, d.out, kOpOut, Access::ReadWrite, is_subword(d.out.dtype), d.m, d.n);
  // GemvWalk and the wide GEMV read B again as vec4 words, bound last (the epilogue stores to the binding
  // before it).
  const size_t word_bindings = l.buffers.size();
  if (v == Variant::GemvWalk || gemv_wide || cols_wide) {
    l.buffers.push_back({d.b.buffer, Access::Read, false});
    l.buffers.back().vec4 = true;
  }
  // The norm's buffers last: residual, weight, bias (those it has), h.
  const size_t norm_first = l.buffers.size();
  if (d.norm) {
    const RowNorm& nm = *d.norm;
    auto bind_norm = [&](const MatOperand& o, Access access, const char* offset, const char* rows, const char* cols,
                         uint64_t count_rows) {
      l.buffers.push_back({o.buffer, access, false});
      l.set_u32(offset, u32_or_fail(o.offset, "offset"));
      if (rows) l.set_u32(rows, u32_or_fail(o.rows, "stride"));
      l.set_u32(cols, u32_or_fail(o.cols, "stride"));
      const int64_t sizes[2] = {int64_t(count_rows), int64_t(d.k)}, strides[2] = {int64_t(o.rows), int64_t(o.cols)};
      const ElementRange r = strided_range(o.offset, sizes, strides, 2);
      l.buffers.back().touches(l.word_of(offset), o.dtype, r.first, r.end - r.first);
    };
    for (const char* f : {"r_offset", "r_rows", "r_cols", "nb_offset", "nb_stride"}) l.set_u32(f, 0);
    l.set_f32("eps", nm.eps);
    if (nm.residual.buffer) bind_norm(nm.residual, Access::Read, "r_offset", "r_rows", "r_cols", d.m);
    bind_norm(nm.weight, Access::Read, "nw_offset", nullptr, "nw_stride", 1);
    if (nm.bias.buffer) bind_norm(nm.bias, Access::Read, "nb_offset", nullptr, "nb_stride", 1);
    bind_norm(nm.h, Access::ReadWrite, "h_offset", "h_rows", "h_cols", d.m);
  }
  // The key: the variant's family, the operands' dtypes (C's 0xff when absent), the compute
  // type, and the tile's shape (tiles: rows, K-fast operands, gather) or GEMV's pairing.
  auto dt = [](DType t) { return static_cast<uint32_t>(t); };
  const uint32_t dtypes = dt(d.a.dtype) | dt(d.b.dtype) << 8 | (has_c ? dt(d.c.dtype) : 0xffu) << 16 |
                          dt(d.out.dtype) << 24;
  const uint32_t subgroup = ctx.caps().subgroup_size;
  const uint32_t norm_bits = d.norm ? 1u | uint32_t(d.norm->residual.buffer != nullptr) << 1 |
                                          uint32_t(d.norm->layer) << 2 | uint32_t(d.norm->bias.buffer != nullptr) << 3
                                    : 0u;
  const uint32_t shape_word = v == Variant::Tiled      ? shape.tm | shape.tn << 8 | shape.bk << 16
                              : v == Variant::GemvWalk ? kGemvWalkThreads | kGemvWalkCols << 8
                              : v == Variant::Gemv     ? gemv_lanes | uint32_t(gemv_staged) << 8 | subgroup << 16 | gemv_rows << 24
                              : v == Variant::GemvCols ? cols_lanes | subgroup << 16 | norm_bits << 8
                                                       : 0;
  const uint32_t flags = (v == Variant::Tiled ? uint32_t(shape.a_k_fast) | uint32_t(shape.b_k_fast) << 1 |
                                                    static_cast<uint32_t>(gather) << 2
                                              : 0) |
                         uint32_t(gemv_pairs) << 4 | static_cast<uint32_t>(split) << 5 | uint32_t(gemv_wide || cols_wide) << 6 |
                         uint32_t(tiles_vec4) << 7 | (v == Variant::Tiled ? shape.wx << 8 | shape.wy << 16 : 0) |
                         xa_vec4s << 8 |
                         uint32_t(shape.unroll) << 24;
  // (An implicit GEMM's gather names its family: profiles tell the two apart.)
  const char* family = v == Variant::Tiled    ? gather == GatherB::TapsAlongK        ? "gemm:tiled:gather_taps"
                                                : gather == GatherB::PositionsAlongK ? "gemm:tiled:gather_positions"
                                                                                     : "gemm:tiled"
                       : v == Variant::Block  ? "gemm:block"
                       : v == Variant::Reduce ? "gemm:reduce"
                       : v == Variant::Gemv   ? "gemm:gemv"
                       : v == Variant::GemvCols ? "gemm:gemv_cols"
                       : v == Variant::GemvWalk ? "gemm:gemv_walk"
                                              : "gemm:per_out";
  l.typed = {family, {dtypes, static_cast<uint32_t>(d.compute) | static_cast<uint32_t>(d.act) << 8, shape_word, flags}};
  if (v == Variant::PerOutput || v == Variant::Block) {
    l.grid = Grid::Invocations;
    // Per output: an invocation owns two neighbouring columns of a row (llvmpipe runs
    // two independent rows of B per lane 1.25x faster than one with four partial sums).
    l.count = v == Variant::Block ? batch * tiles_m * tiles_n : batch * d.m * ((d.n + 1) / 2);
    l.workgroup = 64;
  } else {
    l.grid = Grid::Groups;
    const bool gemv = v == Variant::Gemv || v == Variant::GemvCols;
    l.count = v == Variant::Tiled || gemv || v == Variant::GemvWalk ? splits * batch * tiles_m * tiles_n : outputs;
    l.workgroup = v == Variant::Tiled      ? shape.threads()
                  : gemv                   ? gemv_threads
                  : v == Variant::GemvWalk ? kGemvWalkThreads
                                           : 64;
  }
  Arith ar{d.compute};
  const GemmDesc desc = d;
  l.body = [&, desc, has_c, v, ar, shape, tiles_vec4, gemv_threads, gemv_pairs, gemv_wide, gemv_lanes, gemv_staged, gemv_rows,
            cols_wide, cols_lanes, gather, split, word_bindings, norm_first, xa_vec4s] {
    const std::vector<KernelBuffer> words(l.buffers.begin(), l.buffers.begin() + word_bindings);
    std::string s = gemm_common(desc, words, has_c && split == Split::None, split);
    if (tiles_vec4) s += tiled_vec4_body(shape, gather, split);
    else if (v == Variant::Tiled) s += tiled_body(ar, shape, gather, split);
    else if (v == Variant::Gemv && gemv_rows > 1)
      s += gemv_rows_body(gemv_threads, desc.b.dtype, word_bindings, gemv_lanes, gemv_rows, subgroup);
    else if (v == Variant::Gemv) s += gemv_body(gemv_threads, gemv_pairs, desc.b.dtype, gemv_wide ? word_bindings : 0, gemv_lanes, gemv_staged, subgroup);
    else if (v == Variant::GemvCols) {
      if (desc.norm)
        s += row_norm_fns(l.buffers, norm_first, desc.norm->residual.buffer, desc.norm->bias.buffer, gemv_threads,
                          subgroup);
      s += gemv_cols_body(gemv_threads, cols_lanes, split, cols_wide ? word_bindings : 0, subgroup, desc.norm, xa_vec4s);
    }
    else if (v == Variant::GemvWalk) s += gemv_walk_body(kGemvWalkThreads, kGemvWalkCols, word_bindings, desc.b.dtype);
    else if (v == Variant::Block) s += block_body(ar);
    else if (v == Variant::Reduce) s += reduce_body(ar);
    else s += per_output_body(ar);
    return s;
  };
  launch_kernel(ctx, l);
  if (split == Split::None) return true;
  sum.typed = {"gemm:splitk_sum", {dtypes, static_cast<uint32_t>(d.compute) | static_cast<uint32_t>(d.act) << 8}};
  sum.grid = Grid::Invocations;
  sum.count = outputs;
  sum.workgroup = 64;
  sum.body = [&sum, desc, has_c] { return gemm_epilogue(desc, sum.buffers, has_c, 1) + splitk_sum_body(); };
  launch_kernel(ctx, sum);
  // (Released after recording: the pool hands it out again only to later work.)
  ctx.pool().release(partials);
  return true;
}

namespace {

void gemm_piece(Context& ctx, const GemmDesc& d) {
  std::string force;
  if (const char* f = std::getenv("TORCH_WEBGPU_GEMM_VARIANT")) force = f;
  if (force.empty() && gemm_autotune_enabled() && d.batch_outer * d.batch_inner * d.m * d.n > 0)
    force = gemm_tuned_variant(ctx, d);
  gemm_with_variant(ctx, d, std::move(force));
}

}  // namespace

bool gemm_normed(Context& ctx, const GemmDesc& d) {
  if (!d.norm || d.conv || d.c.buffer == d.out.buffer) return false;
  for (const MatOperand* o : {&d.a, &d.b, &d.out, &d.norm->residual, &d.norm->weight, &d.norm->bias, &d.norm->h})
    if (o->buffer && (o->dtype != DType::Float32 || needs_window(ctx, o->buffer))) return false;
  if ((d.c.buffer && (d.c.dtype != DType::Float32 || needs_window(ctx, d.c.buffer))) || d.k == 0) return false;
  const char* f = std::getenv("TORCH_WEBGPU_GEMM_VARIANT");
  return gemm_recorded(ctx, d, f ? f : "");
}

// Operands larger than one storage binding: blocks of the outer batch, of rows of M and
// (when B alone is too large) of columns of N, each binding windows of A, B, C and out.
void gemm(Context& ctx, const GemmDesc& d) {
  if (!ctx.pool().has_oversized() ||
      !(needs_window(ctx, d.a.buffer) || needs_window(ctx, d.b.buffer) ||
        needs_window(ctx, d.c.buffer) || needs_window(ctx, d.out.buffer)))
    return gemm_piece(ctx, d);
  if (d.batch_outer * d.batch_inner * d.m * d.n == 0) return;
  const uint64_t budget = window_budget(ctx);
  GemmDesc block = d;  // its batch_outer, m and n are the block's extents
  auto bytes = [&](const MatOperand& o, uint64_t rows, uint64_t cols) {
    if (!needs_window(ctx, o.buffer)) return uint64_t(0);
    ElementRange r = &o == &d.b ? b_range(block, rows, cols) : operand_range(block, o, rows, cols);
    return (r.end - r.first) * element_size(o.dtype);
  };
  for (;;) {
    const uint64_t out_bytes = std::max(bytes(d.c, block.m, block.n), bytes(d.out, block.m, block.n));
    const bool rows_fit = bytes(d.a, block.m, d.k) <= budget && out_bytes <= budget;
    const bool cols_fit = bytes(d.b, d.k, block.n) <= budget && out_bytes <= budget;
    if (rows_fit && cols_fit) break;
    if (block.batch_outer > 1) block.batch_outer = (block.batch_outer + 1) / 2;
    else if (!rows_fit && block.m > 1) block.m = (block.m + 1) / 2;
    else if (block.n > 1 && !d.conv) block.n = (block.n + 1) / 2;  // (a gather's columns are positions)
    else fail_too_large(ctx, "mm", std::max(bytes(d.a, 1, d.k), bytes(d.b, d.k, 1)));
  }
  for (uint64_t b0 = 0; b0 < d.batch_outer; b0 += block.batch_outer) {
    for (uint64_t m0 = 0; m0 < d.m; m0 += block.m) {
      for (uint64_t n0 = 0; n0 < d.n; n0 += block.n) {
        GemmDesc p = d;
        p.batch_outer = std::min(block.batch_outer, d.batch_outer - b0);
        p.m = std::min(block.m, d.m - m0);
        p.n = std::min(block.n, d.n - n0);
        p.a.offset += b0 * d.a.batch_outer + m0 * d.a.rows;
        p.b.offset += b0 * d.b.batch_outer + n0 * d.b.cols;
        if (p.c.buffer) p.c.offset += b0 * d.c.batch_outer + m0 * d.c.rows + n0 * d.c.cols;
        p.out.offset += b0 * d.out.batch_outer + m0 * d.out.rows + n0 * d.out.cols;
        gemm_piece(ctx, p);
      }
    }
  }
}

// ---- linears side by side (linear_group) ---------------------------------------------

namespace {

constexpr const char* kLinearFields[] = {"w_offset", "w_rows", "n", "tile", "col", "b_offset", "b_stride"};

// The group kernel's uniforms: A's offset and strides, the output's, the grid's column
// tiles, and per linear i `<field><i>` (kLinearFields): its weight's offset and row stride,
// its width, its first tile and output column, its bias's offset and stride (0 without).
// Scalars, not arrays: each offset is a binding's window word (KernelBuffer::touches).
const UniformLayout& linear_group_layout() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < kLinearGroupMax; ++i)
      for (const char* f : kLinearFields) v.push_back(f + std::to_string(i));
    return v;
  }();
  static const UniformLayout layout = [] {
    std::vector<UniformDecl> d = {{"m"}, {"k"}, {"tiles"}, {"a_offset"}, {"a_rows"}, {"a_cols"},
                                  {"out_offset"}, {"out_rows"}, {"out_cols"}};
    // linear_group_normed's norm (0 without)
    d.insert(d.end(), kRowNormFields.begin(), kRowNormFields.end());
    for (const std::string& name : names) d.push_back({name.c_str()});
    return UniformLayout(d);
  }();
  return layout;
}


// The gated kernel's main after linear_group_gemv's common prologue: gate's sums (weight
// 0), its tree, then up's (weight 1) over the same column, and one store of act(gate) * up.
std::string gated_gemv_tail(GateAct act, uint32_t tile_cols, uint32_t lanes, WeightLoad load, DType dt, bool bias0,
                            bool bias1, bool paired) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  std::string s = "  let c = cg * " + n(tile_cols) + " + lid / " + n(lanes) + ";\n  live = valid && c < u.n0;\n";
  const std::string act_store = "  if (live && lane == 0u) {\n    let a = gate;\n    let activated = " +
                                std::string(find_elementwise_op(gate_act_name(act))->f32) + ";\n" +
                                "    store_out(u.out_offset + r * u.out_rows + c * u.out_cols, activated * (part[lid] + bias));\n  }\n}\n";
  if (paired) {
    // Word loads of both weights in one loop (gate into s0..s3, up into t0..t3): eight
    // loads in flight per lane and one walk of K instead of two, then the two trees.
    const std::string S = n(gemv_walk_span(dt));
    auto term = [&](const std::string& w, const std::string& q) {
      return "wide_dot" + w + "(ai, ak, wq" + w + " + " + q + ", (" + q + ") * " + S + ")";
    };
    s += "  var t0 = 0.0;\n  var t1 = 0.0;\n  var t2 = 0.0;\n  var t3 = 0.0;\n  var bias_up = 0.0;\n"
         "  if (live) {\n"
         "    let wq0 = (u.w_offset0 + c * u.w_rows0) / " + S + ";\n"
         "    let wq1 = (u.w_offset1 + c * u.w_rows1) / " + S + ";\n"
         "    let Q = K / " + S + ";\n    var q = lane;\n"
         "    for (; q + " + n(3 * lanes) + " < Q; q = q + " + n(4 * lanes) + ") {\n";
    for (uint32_t i = 0; i < 4; ++i) {
      const std::string q = i ? "q + " + n(i * lanes) : "q", I = std::to_string(i);
      s += "      s" + I + " = s" + I + " + " + term("0", q) + ";\n      t" + I + " = t" + I + " + " + term("1", q) + ";\n";
    }
    s += "    }\n"
         "    for (; q < Q; q = q + " + n(lanes) + ") { s0 = s0 + " + term("0", "q") + "; t0 = t0 + " + term("1", "q") + "; }\n";
    if (bias0) s += "    bias = load_bias0(u.b_offset0 + c * u.b_stride0);\n";
    if (bias1) s += "    bias_up = load_bias1(u.b_offset1 + c * u.b_stride1);\n";
    s += "  }\n" + gemv_lane_tree() +
         "  let gate = part[lid] + bias;\n  bias = bias_up;\n"
         "  s0 = t0;\n  s1 = t1;\n  s2 = t2;\n  s3 = t3;\n" + gemv_lane_tree();
    return s + act_store;
  }
  for (const std::string J : {"0", "1"}) {
    if (J == "1") s += "  let gate = part[lid] + bias;\n  s0 = 0.0;\n  s1 = 0.0;\n  s2 = 0.0;\n  s3 = 0.0;\n  bias = 0.0;\n";
    s += "  if (live) {\n    let bj = u.w_offset" + J + " + c * u.w_rows" + J + ";\n" + gemv_sums(load, dt, J, "    ", lanes);
    if (J == "0" ? bias0 : bias1) s += "    bias = load_bias" + J + "(u.b_offset" + J + " + c * u.b_stride" + J + ");\n";
    s += "  }\n" + gemv_lane_tree();
  }
  return s + act_store;
}

// The GEMV kernel over linears [first, last) of d: one workgroup per (row of A, tile of
// threads / lanes columns of one linear, gemv_row_lanes), so a workgroup reads one weight throughout
// and the branch on which is uniform. `col`: each linear's first output column.
// With `act` (linear_gated: two linears of one width) a workgroup's tile is the same
// columns of both weights, summed one after the other, and lane 0 stores act(gate) * up.
// Invocations of a group kernel's workgroup.
uint32_t linear_group_threads(Context& ctx) { return std::min<uint32_t>(256, ctx.caps().workgroup_1d()); }

// How the group kernel over linears [first, last) of d reads its weights: as vec4 words
// when every row of every weight starts on 16 bytes and K is whole words (as gemv_body's
// wide loads; bound as vec4 only), else half-type weights two elements per word
// (gemv_body's pairs), else element by element.
WeightLoad linear_group_load(const LinearGroupDesc& d, size_t first, size_t last, const char* force) {
  const DType dt = d.a.dtype;
  const uint32_t span = gemv_walk_span(dt);
  bool words = (dt == DType::Float32 || dt == DType::Float16 || dt == DType::BFloat16) && d.k % span == 0 &&
               !(force && std::string(force) == "gemv_scalar");
  bool pairs = (dt == DType::Float16 || dt == DType::BFloat16) && d.k % 2 == 0;
  for (size_t i = first; i < last; ++i) {
    const LinearGroupDesc::Linear& L = d.linears[i];
    pairs = pairs && L.weight.offset % 2 == 0 && L.weight.rows % 2 == 0;
    words = words && L.weight.offset % span == 0 && (L.n < 2 || L.weight.rows % span == 0);
  }
  return words ? WeightLoad::Words : pairs ? WeightLoad::Pairs : WeightLoad::Elements;
}

// vec4s of A's row the group kernel stages in workgroup memory (0: it reads A per word).
// Word loads stage it, whole, once per workgroup, where the row fits beside `part`, the lane
// sums' scratch and the norm's (each at most a float per invocation: the trees' size)
// (TORCH_WEBGPU_GEMM_VARIANT=gemv_direct_a: per word, for A/B).
uint32_t linear_group_staged(Context& ctx, const LinearGroupDesc& d, WeightLoad load, const char* force) {
  const uint32_t threads = linear_group_threads(ctx);
  return load == WeightLoad::Words && !(force && gemv_direct_a(force)) &&
                 d.k * 4 + threads * 4 * (d.norm ? 3 : 2) <= ctx.caps().max_workgroup_storage
             ? static_cast<uint32_t>(d.k / 4)
             : 0;
}

void linear_group_gemv(Context& ctx, const LinearGroupDesc& d, size_t first, size_t last,
                       const std::vector<uint64_t>& col, GateAct act = GateAct::None,
                       GateAct out_act = GateAct::None) {
  const bool gated = act != GateAct::None;
  const DType dt = d.a.dtype;
  const uint32_t threads = linear_group_threads(ctx);
  const size_t count = last - first;
  const char* force = std::getenv("TORCH_WEBGPU_GEMM_VARIANT");
  const WeightLoad load = linear_group_load(d, first, last, force);
  const bool words = load == WeightLoad::Words;
  uint32_t bias_mask = 0;
  for (size_t i = first; i < last; ++i)
    if (d.linears[i].bias.buffer) bias_mask |= 1u << (i - first);
  const uint32_t span = gemv_walk_span(dt);
  // Outputs of the dispatch (a gated pair's columns once: a tile computes both weights').
  uint64_t columns = 0;
  for (size_t i = first; i < (gated ? first + 1 : last); ++i) columns += d.m * d.linears[i].n;
  const uint32_t lanes = words ? gemv_row_lanes(d.k, columns, span, force ? force : "") : kGemvLanes;
  const uint32_t xa_vec4s = linear_group_staged(ctx, d, load, force);
  // (linear_group_normed only sends a norm that stages.)
  const bool normed = d.norm.has_value(), residual = normed && d.norm->residual.buffer;
  const bool layer = normed && d.norm->layer, norm_bias = layer && d.norm->bias.buffer;
  const uint32_t tile_cols = threads / lanes;
  // linear_gated walks both weights in one loop where they are read as words
  // (TORCH_WEBGPU_GEMM_VARIANT=gemv_gated_serial: gate's walk, then up's, for A/B).
  const bool paired = gated && words && !(force && std::string(force) == "gemv_gated_serial");
  KernelLaunch l;
  l.declare(linear_group_layout())
      .set_u32("m", u32_or_fail(d.m, "size"))
      .set_u32("k", u32_or_fail(d.k, "size"))
      .set_u32("a_rows", u32_or_fail(d.a.rows, "stride"))
      .set_u32("a_cols", u32_or_fail(d.a.cols, "stride"))
      .set_u32("out_rows", u32_or_fail(d.out.rows, "stride"))
      .set_u32("out_cols", u32_or_fail(d.out.cols, "stride"));
  auto range2 = [](const MatOperand& o, uint64_t rows, uint64_t cols) {
    const int64_t sizes[2] = {int64_t(rows), int64_t(cols)}, strides[2] = {int64_t(o.rows), int64_t(o.cols)};
    return strided_range(o.offset, sizes, strides, 2);
  };
  auto bind = [&](const MatOperand& o, Access access, const char* offset_name, ElementRange r) {
    l.buffers.push_back({o.buffer, access, access == Access::ReadWrite && is_subword(o.dtype)});
    l.set_u32(offset_name, u32_or_fail(o.offset, "offset"));
    l.buffers.back().touches(l.word_of(offset_name), o.dtype, r.first, r.end - r.first);
  };
  bind(d.a, Access::Read, "a_offset", range2(d.a, d.m, d.k));
  // The norm's buffers follow A: residual, weight, bias, h (those it has).
  for (const char* f : {"r_offset", "r_rows", "r_cols", "nw_offset", "nw_stride", "nb_offset", "nb_stride", "h_offset",
                        "h_rows", "h_cols"})
    l.set_u32(f, 0);
  l.set_f32("eps", normed ? d.norm->eps : 0.0f);
  if (residual) {
    const MatOperand& R = d.norm->residual;
    l.set_u32("r_rows", u32_or_fail(R.rows, "stride")).set_u32("r_cols", u32_or_fail(R.cols, "stride"));
    bind(R, Access::Read, "r_offset", range2(R, d.m, d.k));
  }
  if (normed) {
    const MatOperand &W = d.norm->weight, &H = d.norm->h;
    l.set_u32("nw_stride", u32_or_fail(W.cols, "stride"));
    bind(W, Access::Read, "nw_offset", range2(W, 1, d.k));
    if (norm_bias) {
      const MatOperand& B = d.norm->bias;
      l.set_u32("nb_stride", u32_or_fail(B.cols, "stride"));
      bind(B, Access::Read, "nb_offset", range2(B, 1, d.k));
    }
    l.set_u32("h_rows", u32_or_fail(H.rows, "stride")).set_u32("h_cols", u32_or_fail(H.cols, "stride"));
    bind(H, Access::ReadWrite, "h_offset", range2(H, d.m, d.k));
  }
  const size_t first_weight = l.buffers.size();
  uint64_t tiles = 0;
  std::vector<size_t> bias_buffer(count, 0);
  for (size_t j = 0; j < kLinearGroupMax; ++j) {
    const std::string J = std::to_string(j);
    if (j >= count) {  // unused slots: no tiles
      for (const char* f : kLinearFields) l.set_u32(f + J, std::string(f) == "tile" ? 0xFFFFFFFFu : 0u);
      continue;
    }
    const LinearGroupDesc::Linear& L = d.linears[first + j];
    l.set_u32("w_rows" + J, u32_or_fail(L.weight.rows, "stride"))
        .set_u32("n" + J, u32_or_fail(L.n, "size"))
        .set_u32("tile" + J, u32_or_fail(tiles, "size"))
        .set_u32("col" + J, u32_or_fail(col[first + j], "size"))
        .set_u32("b_offset" + J, 0)
        .set_u32("b_stride" + J, L.bias.buffer ? u32_or_fail(L.bias.cols, "stride") : 0);
    bind(L.weight, Access::Read, ("w_offset" + J).c_str(),
         {L.weight.offset, L.weight.offset + (L.n - 1) * L.weight.rows + d.k});
    l.buffers.back().vec4 = words;
    if (!gated || j == 0) tiles += (L.n + tile_cols - 1) / tile_cols;
  }
  for (size_t j = 0; j < count; ++j) {
    const LinearGroupDesc::Linear& L = d.linears[first + j];
    if (!L.bias.buffer) continue;
    bias_buffer[j] = l.buffers.size();
    bind(L.bias, Access::Read, ("b_offset" + std::to_string(j)).c_str(), range2(L.bias, 1, L.n));
  }
  uint64_t width = 0;
  for (const LinearGroupDesc::Linear& L : d.linears) width += L.n;
  bind(d.out, Access::ReadWrite, "out_offset", range2(d.out, d.m, gated ? d.linears[0].n : width));
  l.set_u32("tiles", u32_or_fail(tiles, "size"));
  const uint32_t subgroup = ctx.caps().subgroup_size;
  l.typed = {gated ? "gemm:gemv_gated" : "gemm:gemv_group",
             {static_cast<uint32_t>(dt), static_cast<uint32_t>(count),
              bias_mask | static_cast<uint32_t>(act) << 8 | uint32_t(normed) << 12 | uint32_t(residual) << 13 |
                  uint32_t(layer) << 14 | uint32_t(norm_bias) << 15 | static_cast<uint32_t>(out_act) << 24 |
                  subgroup << 16,
              static_cast<uint32_t>(load) | uint32_t(paired) << 4 | lanes << 8 | xa_vec4s << 16}};
  l.grid = Grid::Groups;
  l.count = d.m * tiles;
  l.workgroup = threads;
  l.body = [&l, dt, threads, lanes, tile_cols, count, load, xa_vec4s, bias_buffer, act, gated, paired, normed,
            residual, layer, norm_bias, first_weight, subgroup, out_act] {
    auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
    std::string s = "var<workgroup> part: array<f32, " + std::to_string(threads) + ">;\n" +
                    gemv_lane_sum_fn(threads, lanes, subgroup);
    if (xa_vec4s) s += "var<workgroup> xa: array<vec4<f32>, " + std::to_string(xa_vec4s) + ">;\n";
    s += typed_load("load_a", l.buffers, 0, dt, Compute::F32);
    // (The norm's buffers follow A.)
    if (normed) s += row_norm_fns(l.buffers, 1, residual, norm_bias, threads, subgroup);
    for (size_t j = 0; j < count; ++j) {
      const std::string J = std::to_string(j);
      s += gemv_weight_fn(load, J, first_weight + j, dt, l.buffers, xa_vec4s != 0);
      if (bias_buffer[j]) s += typed_load("load_bias" + J, l.buffers, bias_buffer[j], dt, Compute::F32);
    }
    s += kernel_store("store_out", l.buffers, l.buffers.size() - 1, dt, Compute::F32) + out_act_fn(out_act);
    s += kernel_main(Grid::Groups, threads);
    s += "  let valid = group < frame_count();\n"
         "  let g = select(0u, group, valid);\n"
         "  let cg = g % u.tiles;\n  let r = g / u.tiles;\n  let K = u.k;\n"
         "  let lane = lid % " + n(lanes) + ";\n"
         "  let ai = u.a_offset + r * u.a_rows;\n  let ak = u.a_cols;\n"
         "  var s0 = 0.0;\n  var s1 = 0.0;\n  var s2 = 0.0;\n  var s3 = 0.0;\n"
         "  var live = false;\n  var col = 0u;\n  var bias = 0.0;\n";
    // (K is whole words here: xa holds exactly A's row.)
    if (normed)
      s += gemv_norm_prologue(threads, xa_vec4s, residual, layer, norm_bias);
    else if (xa_vec4s)
      s += "  for (var e = lid; e < " + n(xa_vec4s) + "; e = e + " + n(threads) + ") {\n"
           "    let k = ai + e * 4u * ak;\n"
           "    xa[e] = vec4<f32>(load_a(k), load_a(k + ak), load_a(k + 2u * ak), load_a(k + 3u * ak));\n"
           "  }\n  workgroupBarrier();\n";
    if (gated)
      return s + gated_gemv_tail(act, tile_cols, lanes, load, dt, bias_buffer[0] != 0, bias_buffer[1] != 0, paired);
    for (size_t j = 0; j < count; ++j) {
      const std::string J = std::to_string(j), next = std::to_string(j + 1);
      s += "  if (cg >= u.tile" + J + (j + 1 < count ? " && cg < u.tile" + next : "") + ") {\n"
           "    let c = (cg - u.tile" + J + ") * " + n(tile_cols) + " + lid / " + n(lanes) + ";\n"
           "    live = valid && c < u.n" + J + ";\n"
           "    col = u.col" + J + " + c;\n"
           "    let bj = u.w_offset" + J + " + min(c, u.n" + J + " - 1u) * u.w_rows" + J + ";\n"
           "    if (live) {\n" + gemv_sums(load, dt, J, "      ", lanes);
      if (bias_buffer[j]) s += "      bias = load_bias" + J + "(u.b_offset" + J + " + c * u.b_stride" + J + ");\n";
      s += "    }\n  }\n";
    }
    s += gemv_lane_tree() +
         "  if (live && lane == 0u) { store_out(u.out_offset + r * u.out_rows + col * u.out_cols, out_act(part[lid] + bias)); }\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

// How many linears from `first` on one dispatch binds: A, the weights, their biases, out
// and `extra` more buffers within the stage's storage-buffer limit, at most kLinearGroupMax.
size_t linear_group_chunk(Context& ctx, const LinearGroupDesc& d, size_t first, uint32_t extra = 0) {
  const uint32_t limit = ctx.caps().max_storage_buffers_per_stage;
  size_t last = first;
  uint32_t bindings = 2 + extra;
  while (last < d.linears.size() && last - first < kLinearGroupMax) {
    const uint32_t more = d.linears[last].bias.buffer ? 2 : 1;
    if (last > first && bindings + more > limit) break;
    bindings += more;
    ++last;
  }
  return last;
}

// Whether an operand of d exceeds one storage binding (the group kernel binds each whole;
// gemm takes such products in windows).
bool linear_group_windows(Context& ctx, const LinearGroupDesc& d) {
  if (!ctx.pool().has_oversized()) return false;
  bool windows = needs_window(ctx, d.a.buffer) || needs_window(ctx, d.out.buffer);
  for (const LinearGroupDesc::Linear& L : d.linears)
    windows = windows || needs_window(ctx, L.weight.buffer) || needs_window(ctx, L.bias.buffer);
  return windows;
}

// `all` with only its linears that have columns (the group kernel binds each weight whole:
// none for a width of 0), and where each one's columns start; returns the total width.
uint64_t linears_with_columns(const LinearGroupDesc& all, LinearGroupDesc& d, std::vector<uint64_t>& col) {
  d = all;
  d.linears.clear();
  uint64_t width = 0;
  for (const LinearGroupDesc::Linear& L : all.linears) {
    if (L.n == 0) continue;
    d.linears.push_back(L);
    col.push_back(width);
    width += L.n;
  }
  return width;
}

}  // namespace

bool linear_group_fuses(Context& ctx) {
  // TORCH_WEBGPU_GEMM_VARIANT=gemv takes the group kernel on any adapter (tests). Software
  // adapters default to gemm per linear (see gemm_piece's GEMV choice).
  const char* f = std::getenv("TORCH_WEBGPU_GEMM_VARIANT");
  const std::string force = f ? f : "";
  return gemv_forced(force) || (force.empty() && !software_adapter(ctx));
}

bool linear_gated(Context& ctx, const LinearGroupDesc& d, GateAct act) {
  const DType dt = d.a.dtype;
  if ((dt != DType::Float32 && dt != DType::Float16 && dt != DType::BFloat16) || act == GateAct::None ||
      d.linears.size() != 2 || d.linears[0].n != d.linears[1].n || d.k == 0 || d.m > kLinearGroupMaxRows ||
      !linear_group_fuses(ctx) || linear_group_chunk(ctx, d, 0) != 2 || linear_group_windows(ctx, d))
    return false;
  if (d.m * d.linears[0].n == 0) return true;
  linear_group_gemv(ctx, d, 0, 2, {0, 0}, act);
  return true;
}

bool linear_group_normed(Context& ctx, const LinearGroupDesc& all, GateAct act) {
  LinearGroupDesc d;
  std::vector<uint64_t> col;
  const uint64_t width = linears_with_columns(all, d, col);
  if (!d.norm || d.a.dtype != DType::Float32 || d.k == 0 || d.m > kLinearGroupMaxRows || d.linears.empty() ||
      !linear_group_fuses(ctx) || linear_group_windows(ctx, d))
    return false;
  if (!d.norm->layer) d.norm->bias = {};
  for (const MatOperand* o : {&d.norm->residual, &d.norm->weight, &d.norm->bias, &d.norm->h})
    if (o->buffer && (o->dtype != DType::Float32 || needs_window(ctx, o->buffer))) return false;
  // act over one linear's outputs, or gate/up's act(gate) * up.
  const bool single_act = act != GateAct::None && all.linears.size() == 1;
  const bool gated = act != GateAct::None && !single_act;
  if (gated && (d.linears.size() != 2 || d.linears[0].n != d.linears[1].n)) return false;
  // One dispatch: the norm's two to four buffers beside A, the linears and out.
  const uint32_t norm_bindings = 2 + (d.norm->residual.buffer ? 1 : 0) + (d.norm->bias.buffer ? 1 : 0);
  if (linear_group_chunk(ctx, d, 0, norm_bindings) != d.linears.size()) return false;
  const char* force = std::getenv("TORCH_WEBGPU_GEMM_VARIANT");
  if (!linear_group_staged(ctx, d, linear_group_load(d, 0, d.linears.size(), force), force)) return false;
  if (d.m * width == 0) return false;
  if (gated) col.assign(2, 0);  // both walk the same columns
  linear_group_gemv(ctx, d, 0, d.linears.size(), col, gated ? act : GateAct::None,
                    single_act ? act : GateAct::None);
  return true;
}

void linear_group(Context& ctx, const LinearGroupDesc& all) {
  const DType dt = all.a.dtype;
  if (dt != DType::Float32 && dt != DType::Float16 && dt != DType::BFloat16)
    fail(ErrorKind::Unsupported, "torch_webgpu: linear_group computes float32, float16 and bfloat16 only");
  if (all.k == 0) fail(ErrorKind::Unsupported, "torch_webgpu: linear_group needs k > 0");
  LinearGroupDesc d;
  std::vector<uint64_t> col;
  const uint64_t width = linears_with_columns(all, d, col);
  if (d.m * width == 0) return;
  if (linear_group_fuses(ctx) && d.m <= kLinearGroupMaxRows && !linear_group_windows(ctx, d)) {
    for (size_t first = 0; first < d.linears.size();) {
      const size_t last = linear_group_chunk(ctx, d, first);
      linear_group_gemv(ctx, d, first, last, col);
      first = last;
    }
    return;
  }
  for (size_t i = 0; i < d.linears.size(); ++i) {
    const LinearGroupDesc::Linear& L = d.linears[i];
    GemmDesc g;
    g.m = d.m, g.n = L.n, g.k = d.k;
    g.a = d.a;
    g.b = L.weight;  // B = weight^T: K along the weight's columns, N along its rows
    g.b.rows = L.weight.cols, g.b.cols = L.weight.rows;
    if (L.bias.buffer) {
      g.c = L.bias;  // broadcast over rows
      g.c.rows = 0;
      g.beta = ScalarBits::from_f32(1.0f);
    }
    g.out = d.out;
    g.out.offset += col[i] * d.out.cols;
    gemm(ctx, g);
  }
}

// ---- convolution gathers ------------------------------------------------------------

namespace {

// The uniforms of im2col, the tap table and col2im: the geometry (3 words per spatial
// dim), the column buffer's strides (ColLayout), x's element offset, and what one kernel
// alone reads (im2col's runs per row, col2im's bias), 0 for the others.
const UniformLayout& conv_layout() {
  static const UniformLayout layout(
      {{"batch"}, {"groups"}, {"channels"}, {"x_size", UniformType::U32, 3}, {"y_size", UniformType::U32, 3},
       {"kernel_size", UniformType::U32, 3}, {"stride", UniformType::U32, 3}, {"pad", UniformType::U32, 3},
       {"dilation", UniformType::U32, 3}, {"col_sn"}, {"col_sg"}, {"col_sr"}, {"col_sl"}, {"x_offset"},
       {"chunks"}, {"bias_offset"}, {"bias_stride"}, {"y_first", UniformType::U32, 2}});
  return layout;
}

// im2col: consecutive outputs along the last spatial dimension one invocation writes.
constexpr uint32_t kIm2colRun = 4;

// WGSL taking coordinates `name<d>`, d = from..0 (last fastest), off `rest`, with the
// sizes in uniform array `sizes`. Unrolled: drivers keep loop-indexed private arrays in
// local memory.
std::string peel_coords(const std::string& name, const std::string& sizes, int from) {
  std::string s;
  for (int d = from; d >= 0; --d) {
    const std::string size = "u_" + sizes + "(" + std::to_string(d) + "u)";
    s += "  let " + name + std::to_string(d) + " = rest % " + size + ";\n  rest = rest / " + size + ";\n";
  }
  return s;
}

// `u_<array>(d)` in WGSL.
std::string u_at(const char* array, int d) { return std::string("u_") + array + "(" + std::to_string(d) + "u)"; }

KernelLaunch& declare_conv(KernelLaunch& l, const ConvGeometry& g, const ColLayout& c, uint64_t x_off) {
  return l.declare(conv_layout())
      .set_u32("batch", g.batch)
      .set_u32("groups", g.groups)
      .set_u32("channels", g.cx)
      .set_u32s("x_size", {g.xs[0], g.xs[1], g.xs[2]})
      .set_u32s("y_size", {g.ys[0], g.ys[1], g.ys[2]})
      .set_u32s("kernel_size", {g.ks[0], g.ks[1], g.ks[2]})
      .set_u32s("stride", {g.stride[0], g.stride[1], g.stride[2]})
      .set_u32s("pad", {g.pad[0], g.pad[1], g.pad[2]})
      .set_u32s("dilation", {g.dil[0], g.dil[1], g.dil[2]})
      .set_u32("col_sn", u32_or_fail(c.sn, "column stride"))
      .set_u32("col_sg", u32_or_fail(c.sg, "column stride"))
      .set_u32("col_sr", u32_or_fail(c.sr, "column stride"))
      .set_u32("col_sl", u32_or_fail(c.sl, "column stride"))
      .set_u32("x_offset", u32_or_fail(x_off, "offset"))
      .set_u32("chunks", 0)
      .set_u32("bias_offset", 0)
      .set_u32("bias_stride", 0)
      .set_u32s("y_first", {g.y_first[0], g.y_first[1]});
}

}  // namespace

void conv_im2col(Context& ctx, const ConvGeometry& g, WGPUBuffer x, uint64_t x_offset,
                 DType x_dtype, WGPUBuffer col, const ColLayout& layout) {
  const uint64_t chunks = (uint64_t(g.ys[2]) + kIm2colRun - 1) / kIm2colRun;
  const uint64_t count = uint64_t(g.batch) * g.groups * g.rows() * g.ys[0] * g.ys[1] * chunks;
  if (count == 0) return;
  u32_or_fail(uint64_t(g.batch) * g.groups * g.cx * g.x_spatial(), "input");
  KernelLaunch l;
  l.typed = {"conv:im2col", {static_cast<uint32_t>(x_dtype)}};
  l.buffers = {{x, Access::Read, false}, {col, Access::ReadWrite, false}};
  declare_conv(l, g, layout, x_offset).set_u32("chunks", static_cast<uint32_t>(chunks));
  // The pass's images, for an input buffer larger than one binding.
  l.buffers[0].touches(l.word_of("x_offset"), x_dtype, x_offset, uint64_t(g.batch) * g.groups * g.cx * g.x_spatial());
  l.count = count;
  l.workgroup = 64;
  l.body = [&, x_dtype] {
    std::string s = kernel_load("load_x", l.buffers, 0, x_dtype);
    s += kernel_main(Grid::Invocations, 64);
    // idx -> (n, g, c, k0, k1, k2, o0, o1, chunk of kIm2colRun o2 values), last fastest:
    // the index arithmetic (integer division is slow on GPUs) is shared by the run.
    // Per-dimension code is unrolled: drivers keep loop-indexed private arrays in local
    // memory.
    s += "  var rest = idx;\n"
         "  let chunk = rest % u.chunks;\n  rest = rest / u.chunks;\n";
    s += peel_coords("o", "y_size", 1) + peel_coords("k", "kernel_size", 2);
    s += "  let kidx = (k0 * u_kernel_size(1u) + k1) * u_kernel_size(2u) + k2;\n"
         "  let c = rest % u.channels;\n  rest = rest / u.channels;\n"
         "  let g = rest % u.groups;\n  let n = rest / u.groups;\n"
         "  let r = c * (u_kernel_size(0u) * u_kernel_size(1u) * u_kernel_size(2u)) + kidx;\n"
         "  let ch = (n * u.groups + g) * u.channels + c;\n"
         "  let xbase = u.x_offset + ch * (u_x_size(0u) * u_x_size(1u) * u_x_size(2u));\n"
         "  let cbase = n * u.col_sn + g * u.col_sg + r * u.col_sr;\n";
    for (int d = 0; d < 2; ++d) {
      const std::string D = std::to_string(d);
      s += "  let p" + D + " = i32((o" + D + " + " + u_at("y_first", d) + ") * " + u_at("stride", d) + " + k" + D +
           " * " + u_at("dilation", d) + ") - i32(" + u_at("pad", d) + ");\n";
    }
    s += "  let rows_inside = p0 >= 0 && p0 < i32(u_x_size(0u)) && p1 >= 0 && p1 < i32(u_x_size(1u));\n"
         "  let xrow = xbase + (u32(max(p0, 0)) * u_x_size(1u) + u32(max(p1, 0))) * u_x_size(2u);\n"
         "  let lrow = (o0 * u_y_size(1u) + o1) * u_y_size(2u);\n";
    for (uint32_t j = 0; j < kIm2colRun; ++j) {
      s += "  {\n    let o2 = chunk * " + std::to_string(kIm2colRun) + "u + " + std::to_string(j) + "u;\n"
           "    if (o2 < u_y_size(2u)) {\n"
           "      let p2 = i32(o2 * u_stride(2u) + k2 * u_dilation(2u)) - i32(u_pad(2u));\n"
           "      var v = 0.0;\n"
           "      if (rows_inside && p2 >= 0 && p2 < i32(u_x_size(2u))) { v = load_x(xrow + u32(p2)); }\n"
           "      buf1[cbase + (lrow + o2) * u.col_sl] = bitcast<u32>(v);\n"
           "    }\n  }\n";
    }
    s += "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

bool gemm_uses_tiles(Context& ctx) {
  if (const char* f = std::getenv("TORCH_WEBGPU_GEMM_VARIANT"); f && *f)
    return std::string(f).rfind("tiled", 0) == 0;
  return !software_adapter(ctx);
}

void conv_gather_taps(Context& ctx, const ConvGeometry& g, WGPUBuffer taps) {
  const uint64_t count = g.rows();
  if (count == 0) return;
  u32_or_fail(uint64_t(g.cx) * g.x_spatial(), "input");
  KernelLaunch l;
  l.typed = {"conv:gather_taps", {}};
  l.buffers = {{taps, Access::ReadWrite, false}};
  declare_conv(l, g, ColLayout{}, 0);
  l.count = count;
  l.workgroup = 64;
  l.body = [] {
    std::string s = kernel_main(Grid::Invocations, 64);
    s += "  let taps = u_kernel_size(0u) * u_kernel_size(1u) * u_kernel_size(2u);\n"
         "  let c = idx / taps;\n  let t = idx % taps;\n"
         "  let d0 = (t / (u_kernel_size(1u) * u_kernel_size(2u))) * u_dilation(0u);\n"
         "  let d1 = ((t / u_kernel_size(2u)) % u_kernel_size(1u)) * u_dilation(1u);\n"
         "  let d2 = (t % u_kernel_size(2u)) * u_dilation(2u);\n"
         "  buf0[idx * 4u] = c * (u_x_size(0u) * u_x_size(1u) * u_x_size(2u)) + (d0 * u_x_size(1u) + d1) * u_x_size(2u) + d2;\n"
         "  buf0[idx * 4u + 1u] = d0;\n  buf0[idx * 4u + 2u] = d1;\n  buf0[idx * 4u + 3u] = d2;\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

void conv_col2im(Context& ctx, const ConvGeometry& g, WGPUBuffer col, const ColLayout& layout,
                 WGPUBuffer x, uint64_t x_offset, DType x_dtype, const MatOperand& bias,
                 bool accumulate) {
  const uint64_t count = uint64_t(g.batch) * g.groups * g.cx * g.x_spatial();
  if (count == 0) return;
  if (accumulate && (x_dtype != DType::Float32 || bias.buffer))
    fail(ErrorKind::Unsupported, "torch_webgpu: col2im accumulates into float32 only, without bias");
  KernelLaunch l;
  const bool has_bias = bias.buffer != nullptr;
  const bool unit_stride = g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  l.typed = {"conv:col2im", {static_cast<uint32_t>(x_dtype), has_bias, accumulate, unit_stride}};
  l.buffers = {{col, Access::Read, false}};
  if (has_bias) l.buffers.push_back({bias.buffer, Access::Read, false});
  l.buffers.push_back({x, Access::ReadWrite, is_subword(x_dtype)});
  declare_conv(l, g, layout, x_offset);
  if (has_bias)
    l.set_u32("bias_offset", u32_or_fail(bias.offset, "offset")).set_u32("bias_stride", u32_or_fail(bias.rows, "stride"));
  l.buffers.back().touches(l.word_of("x_offset"), x_dtype, x_offset, count);  // the pass's images
  l.count = count;
  l.workgroup = 64;
  const DType bias_dtype = bias.dtype;
  l.body = [&, x_dtype, has_bias, bias_dtype, accumulate, unit_stride] {
    std::string s = kernel_store("store_x", l.buffers, l.buffers.size() - 1, x_dtype, Compute::F32);
    if (has_bias) s += kernel_load("load_bias", l.buffers, 1, bias_dtype);
    if (accumulate) s += kernel_load("load_prev", l.buffers, l.buffers.size() - 1, x_dtype);
    // float16 outputs round every column value and partial sum to half, in the CPU's tap
    // order, as ATen's col2im does on a half buffer (the CPU's bfloat16 path accumulates
    // in float32, as we do).
    if (x_dtype == DType::Float16)
      s += "fn rnd(x: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(x)); }\n";
    else
      s += "fn rnd(x: f32) -> f32 { return x; }\n";
    s += kernel_main(Grid::Invocations, 64);
    // idx -> (n, g, c, i0, i1, i2); sum over kernel taps k with
    // o = (i + pad - k * dil) / stride integral and inside Y (a tile of Y: its rows from
    // y_first on). Dimensions unrolled (see im2col).
    s += "  var rest = idx;\n" + peel_coords("i", "x_size", 2);
    s += "  let c = rest % u.channels;\n  rest = rest / u.channels;\n"
         "  let g = rest % u.groups;\n  let n = rest / u.groups;\n"
         "  let base = n * u.col_sn + g * u.col_sg;\n"
         "  var acc = " + std::string(accumulate ? "load_prev(u.x_offset + idx)" : "0.0") + ";\n"
         "  let r = c * u_kernel_size(0u);\n";
    // One loop per dim, outer to inner (the CPU's tap order, which float16's rounding
    // follows), each tap's validity decided at its own level: o = (i + pad - k * dil) /
    // stride only decreases with k, so a negative one ends the loop. Unit strides (the
    // key says so) drop the divisibility test and the division.
    std::string row = "0u";
    for (int d = 0; d < 3; ++d) {
      const std::string D = std::to_string(d), in(2 * d + 2, ' ');
      const std::string first = d < 2 ? "i32(" + u_at("y_first", d) + ")" : "0";
      s += in + "for (var k" + D + " = 0u; k" + D + " < " + u_at("kernel_size", d) + "; k" + D + " = k" + D + " + 1u) {\n" +
           in + "  let q" + D + " = i32(i" + D + " + " + u_at("pad", d) + ") - i32(k" + D + " * " + u_at("dilation", d) + ");\n";
      if (unit_stride) {
        s += in + "  let o" + D + " = q" + D + " - " + first + ";\n";
      } else {
        s += in + "  let s" + D + " = i32(" + u_at("stride", d) + ");\n" +
             in + "  if (q" + D + " < 0) { break; }\n" +
             in + "  if (q" + D + " % s" + D + " != 0) { continue; }\n" +
             in + "  let o" + D + " = q" + D + " / s" + D + " - " + first + ";\n";
      }
      s += in + "  if (o" + D + " < 0) { break; }\n" +
           in + "  if (o" + D + " >= i32(" + u_at("y_size", d) + ")) { continue; }\n" +
           in + "  let l" + D + " = " + row + " * " + u_at("y_size", d) + " + u32(o" + D + ");\n";
      row = "l" + D;
    }
    s += "        let t = (r + k0) * u_kernel_size(1u) + k1;\n"
         "        acc = rnd(acc + rnd(bitcast<f32>(buf0[base + (t * u_kernel_size(2u) + k2) * u.col_sr + l2 * u.col_sl])));\n"
         "      }\n    }\n  }\n";
    s +=
         "  " + std::string(has_bias ? "acc = acc + load_bias(u.bias_offset + (g * u.channels + c) * u.bias_stride);\n" : "") +
         "  store_x(u.x_offset + idx, acc);\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu

namespace twgpu {

void addr(Context& ctx, const AddrDesc& d) {
  const uint64_t count = d.m * d.n;
  if (count == 0) return;
  const DType dt = d.out.dtype;
  const Compute c = compute_type_for(dt);
  const bool has_self = d.self.buffer != nullptr;
  KernelLaunch l;
  l.typed = {"addr", {static_cast<uint32_t>(dt), has_self}};
  l.buffers = {{d.vec1.buffer, Access::Read, false}, {d.vec2.buffer, Access::Read, false}};
  if (has_self) l.buffers.push_back({d.self.buffer, Access::Read, false});
  l.buffers.push_back({d.out.buffer, Access::ReadWrite, is_subword(dt)});
  // (self's uniforms stay 0 without it.)
  static const UniformLayout layout({{"n"}, {"v1_offset"}, {"v1_stride"}, {"v2_offset"}, {"v2_stride"},
                                     {"self_offset"}, {"self_row_stride"}, {"self_col_stride"},
                                     {"out_offset"}, {"alpha_lo"}, {"alpha_hi"}, {"beta_lo"}, {"beta_hi"}});
  l.declare(layout)
      .set_u32("n", u32_or_fail(d.n, "size"))
      .set_u32("v1_offset", u32_or_fail(d.vec1.offset, "offset"))
      .set_u32("v1_stride", u32_or_fail(d.vec1.rows, "stride"))
      .set_u32("v2_offset", u32_or_fail(d.vec2.offset, "offset"))
      .set_u32("v2_stride", u32_or_fail(d.vec2.cols, "stride"))
      .set_u32("self_offset", has_self ? u32_or_fail(d.self.offset, "offset") : 0)
      .set_u32("self_row_stride", has_self ? u32_or_fail(d.self.rows, "stride") : 0)
      .set_u32("self_col_stride", has_self ? u32_or_fail(d.self.cols, "stride") : 0)
      .set_u32("out_offset", u32_or_fail(d.out.offset, "offset"))
      .set_u32("alpha_lo", d.alpha.lo)
      .set_u32("alpha_hi", d.alpha.hi)
      .set_u32("beta_lo", d.beta.lo)
      .set_u32("beta_hi", d.beta.hi);
  l.count = count;
  l.workgroup = 64;
  l.body = [&, dt, c, has_self] {
    std::string s = kernel_load("load_v1", l.buffers, 0, dt) + kernel_load("load_v2", l.buffers, 1, dt);
    if (has_self) s += kernel_load("load_self", l.buffers, 2, dt);
    s += kernel_store("store_out", l.buffers, l.buffers.size() - 1, dt, c);
    if (dt == DType::Float16)
      s += "fn rnd(x: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(x)); }\n";
    else if (dt == DType::BFloat16)
      s += "fn rnd(x: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }\n";
    else
      s += "fn rnd(x: f32) -> f32 { return x; }\n";
    s += kernel_main(Grid::Invocations, 64);
    s += "  let j = idx % u.n;\n  let i = idx / u.n;\n"
         "  let v1 = load_v1(u.v1_offset + i * u.v1_stride);\n  let v2 = load_v2(u.v2_offset + j * u.v2_stride);\n";
    const std::string alpha = wgsl_scalar(c, "u.alpha_lo", "u.alpha_hi");
    const std::string beta = wgsl_scalar(c, "u.beta_lo", "u.beta_hi");
    std::string self = has_self ? "load_self(u.self_offset + i * u.self_row_stride + j * u.self_col_stride)" : "";
    if (dt == DType::Bool) {
      s += "  var r = " + alpha + " != 0 && v1 != 0 && v2 != 0;\n";
      if (has_self) s += "  r = r || (" + beta + " != 0 && " + self + " != 0);\n";
      s += "  store_out(u.out_offset + idx, select(0, 1, r));\n}\n";
    } else if (c == Compute::F32) {
      s += "  var r = rnd(rnd(rnd(" + alpha + ") * v1) * v2);\n";
      if (has_self) s += "  r = rnd(rnd(rnd(" + beta + ") * " + self + ") + r);\n";
      s += "  store_out(u.out_offset + idx, r);\n}\n";
    } else {
      Arith ar{c};
      s += "  var r = " + ar.mul(ar.mul(alpha, "v1"), "v2") + ";\n";
      if (has_self) s += "  r = " + ar.add(ar.mul(beta, self), "r") + ";\n";
      s += "  store_out(u.out_offset + idx, r);\n}\n";
    }
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
