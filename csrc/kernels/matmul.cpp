#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
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

// Uniform words (after the frame's four).
constexpr uint32_t kM = 4, kN = 5, kK = 6, kBatchInner = 7, kTilesN = 8, kTilesPerBatch = 9,
                   kAlpha = 10, kBeta = 12, kOperands = 16;  // 4 operands x 5 words
constexpr uint32_t kOpA = kOperands, kOpB = kOperands + 5, kOpC = kOperands + 10,
                   kOpOut = kOperands + 15;
// Implicit GEMM (GemmDesc::conv): x's spatial sizes, the output tile's sizes, strides,
// paddings (3 words each), the tile's first output row along dims 0 and 1.
constexpr uint32_t kGatherXs = kOperands + 20, kGatherYs = kGatherXs + 3, kGatherStride = kGatherXs + 6,
                   kGatherPad = kGatherXs + 9, kGatherFirst = kGatherXs + 12, kGatherEnd = kGatherXs + 14;

void push_operand(std::vector<uint32_t>& u, uint32_t base, const MatOperand& o) {
  u[base] = u32_or_fail(o.offset, "offset");
  u[base + 1] = u32_or_fail(o.batch_outer, "stride");
  u[base + 2] = u32_or_fail(o.batch_inner, "stride");
  u[base + 3] = u32_or_fail(o.rows, "stride");
  u[base + 4] = u32_or_fail(o.cols, "stride");
}

enum class Variant { Tiled, Block, PerOutput, Reduce, Gemv };
// How an implicit GEMM's B is gathered (GemmDesc::conv): not at all, B[r = tap, l =
// position] (forward), B[l, r] (weight gradient).
enum class GatherB { None, TapsAlongK, PositionsAlongK };

// Shared WGSL: typed loads converted to the compute type, the batch base of an operand,
// and the epilogue that applies alpha/beta and stores one output element.
std::string gemm_common(const GemmDesc& d, const std::vector<KernelBuffer>& bufs, bool has_c) {
  Arith ar{d.compute};
  const std::string T = ar.type();
  std::string s;
  auto typed_load = [&](const char* name, size_t b, DType dt) {
    std::string raw = std::string(name) + "_raw";
    s += kernel_load(raw, bufs, b, dt);
    s += "fn " + std::string(name) + "(i: u32) -> " + T + " { return " +
         wgsl_convert(compute_type_for(dt), d.compute, raw + "(i)") + "; }\n";
  };
  typed_load("load_a", 0, d.a.dtype);
  typed_load("load_b", 1, d.b.dtype);
  if (has_c) typed_load("load_c", 2, d.c.dtype);
  if (d.conv) {
    // B of an implicit GEMM at one output position and one row (c, k...): the caller has
    // turned the position into ob (o * stride - pad per dim) and ooff (their offset within
    // an image's group, negative at the padding); the row's tap (tap_at) holds (c, k *
    // dil)'s offset and k * dil per dim. A position is inside when its unsigned value is
    // below the size (negative ones wrap past every size).
    const std::string taps = "buf" + std::to_string(has_c ? 3 : 2);
    auto u = [](uint32_t w) { return "uw(" + std::to_string(w) + "u)"; };
    s += "fn tap_at(r: u32) -> vec4<i32> {\n  let t = r * 4u;\n"
         "  return vec4<i32>(i32(" + taps + "[t]), i32(" + taps + "[t + 1u]), i32(" + taps + "[t + 2u]), i32(" +
         taps + "[t + 3u]));\n}\n";
    s += "fn gather_b(base: u32, ob: vec3<i32>, ooff: i32, tap: vec4<i32>) -> " + T + " {\n"
         "  let p = vec3<u32>(ob + tap.yzw);\n"
         "  if (any(p >= vec3<u32>(" + u(kGatherXs) + ", " + u(kGatherXs + 1) + ", " + u(kGatherXs + 2) +
         "))) { return " + ar.zero() + "; }\n"
         "  return load_b(base + u32(ooff + tap.x));\n}\n";
  }
  s += kernel_store("store_out", bufs, bufs.size() - 1, d.out.dtype, d.compute);
  s += "fn batch_base(op: u32, bo: u32, bi: u32) -> u32 {\n"
       "  return uw(op) + bo * uw(op + 1u) + bi * uw(op + 2u);\n}\n";
  s += "fn finish(bo: u32, bi: u32, r: u32, c: u32, acc: " + T + ") {\n";
  s += "  var v = " + ar.mul(wgsl_scalar(d.compute, "uw(" + std::to_string(kAlpha) + "u)",
                                         "uw(" + std::to_string(kAlpha + 1) + "u)"),
                             "acc") + ";\n";
  if (has_c) {
    std::string cb = std::to_string(kOpC);
    s += "  let ci = batch_base(" + cb + "u, bo, bi) + r * uw(" + std::to_string(kOpC + 3) +
         "u) + c * uw(" + std::to_string(kOpC + 4) + "u);\n";
    s += "  v = " + ar.add(ar.mul(wgsl_scalar(d.compute, "uw(" + std::to_string(kBeta) + "u)",
                                              "uw(" + std::to_string(kBeta + 1) + "u)"),
                                  "load_c(ci)"),
                           "v") + ";\n";
  }
  s += "  store_out(batch_base(" + std::to_string(kOpOut) + "u, bo, bi) + r * uw(" +
       std::to_string(kOpOut + 3) + "u) + c * uw(" + std::to_string(kOpOut + 4) + "u), v);\n}\n";
  return s;
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
  uint32_t threads() const { return wx * wy; }
  std::string key() const {
    return std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(bk) +
           (a_k_fast ? "k" : "m") + (b_k_fast ? "k" : "n");
  }
};
constexpr TileShape kSmallTile{32, 32, 16, 8, 8, false, false};
constexpr TileShape kMediumTile{64, 64, 16, 16, 16, false, false};
constexpr TileShape kLargeTile{128, 128, 8, 16, 16, false, false};

// WGSL turning output position `l` (of the implicit GEMM's output tile) into `ob` and
// `ooff` (see gather_b).
std::string decode_position(const std::string& in, const std::string& l) {
  auto w = [](uint32_t v) { return "uw(" + std::to_string(v) + "u)"; };
  std::string s = in + "let go2 = " + l + " % " + w(kGatherYs + 2) + ";\n" +
                  in + "let go1 = (" + l + " / " + w(kGatherYs + 2) + ") % " + w(kGatherYs + 1) + ";\n" +
                  in + "let go0 = " + l + " / (" + w(kGatherYs + 2) + " * " + w(kGatherYs + 1) + ");\n" +
                  in + "let ob = vec3<i32>(vec3<u32>(go0 + " + w(kGatherFirst) + ", go1 + " + w(kGatherFirst + 1) +
                  ", go2) * vec3<u32>(" + w(kGatherStride) + ", " + w(kGatherStride + 1) + ", " + w(kGatherStride + 2) +
                  ")) - vec3<i32>(vec3<u32>(" + w(kGatherPad) + ", " + w(kGatherPad + 1) + ", " + w(kGatherPad + 2) + "));\n" +
                  in + "let ooff = (ob.x * i32(" + w(kGatherXs + 1) + ") + ob.y) * i32(" + w(kGatherXs + 2) + ") + ob.z;\n";
  return s;
}

std::string tiled_body(const Arith& ar, const TileShape& t, GatherB gather) {
  const std::string T = ar.type(), Z = ar.zero();
  const uint32_t rm = t.tm / t.wy, rn = t.tn / t.wx, sa_row = t.tm + 4, sb_row = t.tn + 4;
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  std::string s;
  s += "var<workgroup> sa: array<" + T + ", " + std::to_string(t.bk * sa_row) + ">;\n";  // [k][m]
  s += "var<workgroup> sb: array<" + T + ", " + std::to_string(t.bk * sb_row) + ">;\n";  // [k][n]
  s += kernel_main(Grid::Groups, t.threads());
  s += "  let valid = group < uw(0u);\n"
       "  let g = select(0u, group, valid);\n"
       "  let b = g / uw(9u);\n  let t = g % uw(9u);\n"
       "  let row0 = (t / uw(8u)) * " + n(t.tm) + ";\n  let col0 = (t % uw(8u)) * " + n(t.tn) + ";\n"
       "  let bo = b / uw(7u);\n  let bi = b % uw(7u);\n"
       "  let tx = lid % " + n(t.wx) + ";\n  let ty = lid / " + n(t.wx) + ";\n"
       "  let M = uw(4u);\n  let N = uw(5u);\n  let K = uw(6u);\n"
       "  let abase = batch_base(16u, bo, bi);\n  let bbase = batch_base(21u, bo, bi);\n";
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
  s += "  for (var k0 = 0u; k0 < K; k0 = k0 + " + n(t.bk) + ") {\n"
       "    for (var e = 0u; e < " + n(t.tm * t.bk / t.threads()) + "; e = e + 1u) {\n"
       "      let idx = lid + e * " + n(t.threads()) + ";\n";
  s += t.a_k_fast ? "      let ak = idx % " + n(t.bk) + ";\n      let am = idx / " + n(t.bk) + ";\n"
                  : "      let am = idx % " + n(t.tm) + ";\n      let ak = idx / " + n(t.tm) + ";\n";
  s += "      var av = " + Z + ";\n"
       "      if (valid && row0 + am < M && k0 + ak < K) {\n"
       "        av = load_a(abase + (row0 + am) * uw(19u) + (k0 + ak) * uw(20u));\n      }\n"
       "      sa[ak * " + n(sa_row) + " + am] = av;\n"
       "    }\n";
  if (gather == GatherB::PositionsAlongK) {
    s += "    {\n      let bk = lid % " + n(t.bk) + ";\n" + decode_position("      ", "(k0 + bk)");
    for (uint32_t e = 0; e < b_loads; ++e) {
      const std::string E = std::to_string(e), bn = "lid / " + n(t.bk) + " + " + n(e * b_cols);
      s += "      var bv" + E + " = " + Z + ";\n"
           "      if (valid && k0 + bk < K && col0 + " + bn + " < N) { bv" + E +
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
         "      if (valid && k0 + bk < K && col0 + bn < N) {\n"
         "        bv = " + std::string(gather == GatherB::TapsAlongK ? "gather_b(bbase, ob, ooff, tap_at(k0 + bk))"
                                    : "load_b(bbase + (k0 + bk) * uw(24u) + (col0 + bn) * uw(25u))") +
         ";\n      }\n"
         "      sb[bk * " + n(sb_row) + " + bn] = bv;\n"
         "    }\n";
  }
  s += "    workgroupBarrier();\n"
       // Shared entries past K hold zeros in both operands, so every step runs all bk.
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

// One invocation per 4x4 output block straight from the buffers, no shared memory (for
// CPU adapters, where caches do the tiles' work and barriers are expensive). Loads clamp
// to the last row/column so the inner loop has no branches; only valid outputs are stored.
std::string block_body(const Arith& ar) {
  std::string s = kernel_main(Grid::Invocations, 64);
  s += "  let M = uw(4u);\n  let N = uw(5u);\n  let K = uw(6u);\n"
       "  let bn = idx % uw(8u);\n  let rest = idx / uw(8u);\n"
       "  let tiles_m = uw(9u) / uw(8u);\n"
       "  let bm = rest % tiles_m;\n  let b = rest / tiles_m;\n"
       "  let bo = b / uw(7u);\n  let bi = b % uw(7u);\n"
       "  let r0 = bm * 4u;\n  let c0 = bn * 4u;\n"
       "  var ai: array<u32, 4>;\n  var bj: array<u32, 4>;\n"
       "  let abase = batch_base(16u, bo, bi);\n  let bbase = batch_base(21u, bo, bi);\n"
       "  for (var i = 0u; i < 4u; i = i + 1u) {\n"
       "    ai[i] = abase + min(r0 + i, M - 1u) * uw(19u);\n"
       "    bj[i] = bbase + min(c0 + i, N - 1u) * uw(25u);\n"
       "  }\n"
       "  var acc: array<" + ar.type() + ", 16>;\n"
       "  for (var i = 0u; i < 16u; i = i + 1u) { acc[i] = " + ar.zero() + "; }\n"
       "  for (var k = 0u; k < K; k = k + 1u) {\n"
       "    let ak = k * uw(20u);\n    let bk = k * uw(24u);\n"
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
  s += "  let M = uw(4u);\n  let N = uw(5u);\n  let K = uw(6u);\n"
       "  let pairs = (N + 1u) / 2u;\n"
       "  let c = 2u * (idx % pairs);\n  let rest = idx / pairs;\n  let r = rest % M;\n  let b = rest / M;\n"
       "  let bo = b / uw(7u);\n  let bi = b % uw(7u);\n"
       "  let ak = uw(20u);\n  let bk = uw(24u);\n"
       "  let second = c + 1u < N;\n"
       "  var ai = batch_base(16u, bo, bi) + r * uw(19u);\n"
       "  var bj = batch_base(21u, bo, bi) + c * uw(25u);\n"
       // Without a second column, its loads repeat the first's (never stored).
       "  var bj2 = select(bj, bj + uw(25u), second);\n"
       // Two partial sums (k even, k odd) for each of the two columns.
       "  var s0 = " + ar.zero() + ";\n  var s1 = s0;\n  var t0 = s0;\n  var t1 = s0;\n"
       "  var k = 0u;\n"
       "  for (; k + 2u <= K; k = k + 2u) {\n"
       "    let a0 = load_a(ai);\n    let a1 = load_a(ai + ak);\n"
       "    s0 = " + ar.mac("s0", "a0", "load_b(bj)") + ";\n"
       "    s1 = " + ar.mac("s1", "a1", "load_b(bj + bk)") + ";\n"
       "    t0 = " + ar.mac("t0", "a0", "load_b(bj2)") + ";\n"
       "    t1 = " + ar.mac("t1", "a1", "load_b(bj2 + bk)") + ";\n"
       "    ai = ai + 2u * ak;\n    bj = bj + 2u * bk;\n    bj2 = bj2 + 2u * bk;\n"
       "  }\n"
       "  if (k < K) {\n"
       "    let a0 = load_a(ai);\n"
       "    s0 = " + ar.mac("s0", "a0", "load_b(bj)") + ";\n"
       "    t0 = " + ar.mac("t0", "a0", "load_b(bj2)") + ";\n"
       "  }\n"
       "  finish(bo, bi, r, c, " + ar.add("s0", "s1") + ");\n"
       "  if (second) { finish(bo, bi, r, c + 1u, " + ar.add("t0", "t1") + "); }\n}\n";
  return s;
}

// One workgroup per output element: 64 partial sums over K, then a tree (long K, few
// outputs: dot products, matrix-vector products).
std::string reduce_body(const Arith& ar) {
  std::string s = "var<workgroup> part: array<" + ar.type() + ", 64>;\n";
  s += kernel_main(Grid::Groups, 64);
  s += "  let valid = group < uw(0u);\n"
       "  let g = select(0u, group, valid);\n"
       "  let M = uw(4u);\n  let N = uw(5u);\n  let K = uw(6u);\n"
       "  let c = g % N;\n  let rest = g / N;\n  let r = rest % M;\n  let b = rest / M;\n"
       "  let bo = b / uw(7u);\n  let bi = b % uw(7u);\n"
       "  let ai = batch_base(16u, bo, bi) + r * uw(19u);\n"
       "  let bj = batch_base(21u, bo, bi) + c * uw(25u);\n"
       "  var acc = " + ar.zero() + ";\n"
       "  if (valid) {\n"
       "    for (var k = lid; k < K; k = k + 64u) {\n"
       "      acc = " + ar.mac("acc", "load_a(ai + k * uw(20u))", "load_b(bj + k * uw(24u))") + ";\n"
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

// Matrix-vector products whose weight has K contiguous (F.linear's [n, k] weight with one
// or a few rows of A: LLM decode). A workgroup owns threads / 32 output columns of one row;
// the 32 lanes of a column read neighbouring elements of its weight row (coalesced), each
// keeping 4 independent partial sums so that several loads are in flight, and a 32-wide
// tree adds the lanes. `pairs`: a half-type weight read a u32 word (two elements) at a time
// and unpacked in registers (rows start on even elements and K is even).
constexpr uint32_t kGemvLanes = 32;

std::string gemv_body(uint32_t threads, bool pairs, DType b_dtype) {
  auto n = [](uint32_t v) { return std::to_string(v) + "u"; };
  const std::string cols = n(threads / kGemvLanes);
  std::string s = "var<workgroup> part: array<f32, " + std::to_string(threads) + ">;\n";
  if (pairs)
    s += b_dtype == DType::Float16
             ? "fn weight_pair(w: u32) -> vec2<f32> { return unpack2x16float(buf1[w]); }\n"
             : "fn weight_pair(w: u32) -> vec2<f32> { let v = buf1[w]; "
               "return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u)); }\n";
  s += kernel_main(Grid::Groups, threads);
  s += "  let valid = group < uw(0u);\n"
       "  let g = select(0u, group, valid);\n"
       "  let M = uw(4u);\n  let N = uw(5u);\n  let K = uw(6u);\n"
       "  let cg = g % uw(8u);\n  let rest = g / uw(8u);\n  let r = rest % M;\n  let b = rest / M;\n"
       "  let bo = b / uw(7u);\n  let bi = b % uw(7u);\n"
       "  let lane = lid % " + n(kGemvLanes) + ";\n"
       "  let c = cg * " + cols + " + lid / " + n(kGemvLanes) + ";\n"
       "  let live = valid && c < N;\n"
       "  let ai = batch_base(16u, bo, bi) + r * uw(19u);\n"
       "  let ak = uw(20u);\n"
       "  let bj = batch_base(21u, bo, bi) + min(c, N - 1u) * uw(25u);\n"
       "  var s0 = 0.0;\n  var s1 = 0.0;\n  var s2 = 0.0;\n  var s3 = 0.0;\n"
       "  if (live) {\n";
  if (pairs) {
    // Pair p holds elements 2p (low half) and 2p + 1.
    auto term = [](const std::string& p) {
      return "dot(weight_pair(wb + " + p + "), vec2<f32>(load_a(ai + 2u * (" + p + ") * ak), load_a(ai + (2u * (" + p +
             ") + 1u) * ak)))";
    };
    s += "    let wb = bj / 2u;\n    let P = K / 2u;\n    var p = lane;\n"
         "    for (; p + 96u < P; p = p + 128u) {\n"
         "      s0 = s0 + " + term("p") + ";\n      s1 = s1 + " + term("p + 32u") + ";\n"
         "      s2 = s2 + " + term("p + 64u") + ";\n      s3 = s3 + " + term("p + 96u") + ";\n    }\n"
         "    for (; p < P; p = p + 32u) { s0 = s0 + " + term("p") + "; }\n";
  } else {
    auto term = [](const std::string& k) {
      return "load_a(ai + (" + k + ") * ak) * load_b(bj + " + k + ")";
    };
    s += "    var k = lane;\n"
         "    for (; k + 96u < K; k = k + 128u) {\n"
         "      s0 = s0 + " + term("k") + ";\n      s1 = s1 + " + term("k + 32u") + ";\n"
         "      s2 = s2 + " + term("k + 64u") + ";\n      s3 = s3 + " + term("k + 96u") + ";\n    }\n"
         "    for (; k < K; k = k + 32u) { s0 = s0 + " + term("k") + "; }\n";
  }
  s += "  }\n"
       "  part[lid] = (s0 + s1) + (s2 + s3);\n"
       "  workgroupBarrier();\n"
       "  for (var w = " + n(kGemvLanes / 2) + "; w > 0u; w = w >> 1u) {\n"
       "    if (lane < w) { part[lid] = part[lid] + part[lid + w]; }\n"
       "    workgroupBarrier();\n"
       "  }\n"
       "  if (live && lane == 0u) { finish(bo, bi, r, c, part[lid]); }\n}\n";
  return s;
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

void gemm_piece(Context& ctx, const GemmDesc& d) {
  const uint64_t batch = d.batch_outer * d.batch_inner;
  const uint64_t outputs = batch * d.m * d.n;
  if (outputs == 0) return;
  const bool has_c = d.c.buffer != nullptr;

  // TORCH_WEBGPU_GEMM_VARIANT=tiled|tiled_medium|tiled_large|block overrides the choice for large
  // products, reduce|per_out the one for small ones (tests cover each).
  std::string force;
  if (const char* f = std::getenv("TORCH_WEBGPU_GEMM_VARIANT")) force = f;
  Variant v;
  // TORCH_WEBGPU_GEMM_VARIANT=gemv takes the GEMV kernel for any eligible product (tests),
  // no_gemv never. Software adapters skip it by default: barriers cost more there than
  // uncoalesced reads (which CPU caches absorb).
  const bool gemv_fits = d.compute == Compute::F32 && d.b.rows == 1 && d.b.cols != 1 && d.k >= 2;
  if (gemv_fits && (force == "gemv" || (force.empty() && !software_adapter(ctx) && d.m <= 4 && d.k >= 64)))
    v = Variant::Gemv;
  // Large products: shared-memory tiles, register blocks on software adapters (an implicit
  // GEMM has only the tiles).
  else if (d.conv)
    v = Variant::Tiled;
  else if (d.m >= 16 && d.n >= 16)
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
  // fill the GPU (the thresholds suit a GPU of ~100 compute units; measured on an H200):
  // the largest float32 tile that still gives at least 128 workgroups (and that the
  // product fills: 128x128 tiles on a 64-row product would idle half their invocations).
  TileShape shape = kSmallTile;
  auto count_tiles = [&](const TileShape& t) {
    return batch * ((d.m + t.tm - 1) / t.tm) * ((d.n + t.tn - 1) / t.tn);
  };
  if (v == Variant::Tiled && d.compute == Compute::F32) {
    if (force == "tiled_large" ||
        (force.empty() && d.m >= 128 && d.n >= 128 && count_tiles(kLargeTile) >= 128))
      shape = kLargeTile;
    else if (force == "tiled_medium" || (force.empty() && count_tiles(kMediumTile) >= 128))
      shape = kMediumTile;
  }
  shape.a_k_fast = d.a.cols == 1 && d.a.rows != 1;
  shape.b_k_fast = d.b.rows == 1 && d.b.cols != 1;
  const GatherB gather = !d.conv ? GatherB::None
                         : d.conv_positions_along_k ? GatherB::PositionsAlongK : GatherB::TapsAlongK;
  if (gather != GatherB::None) shape.b_k_fast = gather == GatherB::PositionsAlongK;

  const uint32_t gemv_threads = std::min<uint32_t>(256, ctx.caps().workgroup_1d());
  const bool gemv_pairs = v == Variant::Gemv &&
                          (d.b.dtype == DType::Float16 || d.b.dtype == DType::BFloat16) &&
                          d.k % 2 == 0 && d.b.offset % 2 == 0 && d.b.cols % 2 == 0 &&
                          d.b.batch_outer % 2 == 0 && d.b.batch_inner % 2 == 0;
  uint64_t tile_m = v == Variant::Block ? 4 : shape.tm, tile_n = v == Variant::Block ? 4 : shape.tn;
  if (v == Variant::Gemv) tile_m = 1, tile_n = gemv_threads / kGemvLanes;
  const uint64_t tiles_m = (d.m + tile_m - 1) / tile_m, tiles_n = (d.n + tile_n - 1) / tile_n;
  std::vector<uint32_t> u(d.conv ? kGatherEnd : kOperands + 20, 0);
  u[kM] = u32_or_fail(d.m, "size");
  u[kN] = u32_or_fail(d.n, "size");
  u[kK] = u32_or_fail(d.k, "size");
  u[kBatchInner] = u32_or_fail(d.batch_inner, "batch");
  u[kTilesN] = u32_or_fail(tiles_n, "size");
  u[kTilesPerBatch] = u32_or_fail(tiles_m * tiles_n, "size");
  u[kAlpha] = d.alpha.lo;
  u[kAlpha + 1] = d.alpha.hi;
  u[kBeta] = d.beta.lo;
  u[kBeta + 1] = d.beta.hi;
  push_operand(u, kOpA, d.a);
  push_operand(u, kOpB, d.b);
  if (has_c) push_operand(u, kOpC, d.c);
  push_operand(u, kOpOut, d.out);
  if (d.conv) {
    const ConvGeometry& g = *d.conv;
    for (int i = 0; i < 3; ++i) {
      u[kGatherXs + i] = g.xs[i];
      u[kGatherYs + i] = g.ys[i];
      u[kGatherStride + i] = g.stride[i];
      u[kGatherPad + i] = g.pad[i];
    }
    u[kGatherFirst] = g.y_first[0];
    u[kGatherFirst + 1] = g.y_first[1];
  }

  KernelLaunch l;
  auto bind = [&](const MatOperand& o, uint32_t word, Access access, bool atomic, uint64_t rows,
                  uint64_t cols) {
    l.buffers.push_back({o.buffer, access, atomic});
    ElementRange r = operand_range(d, o, rows, cols);
    l.buffers.back().touches(word, o.dtype, r.first, r.end - r.first);
  };
  bind(d.a, kOpA, Access::Read, false, d.m, d.k);
  l.buffers.push_back({d.b.buffer, Access::Read, false});
  const ElementRange br = b_range(d, d.k, d.n);
  l.buffers.back().touches(kOpB, d.b.dtype, br.first, br.end - br.first);
  if (has_c) bind(d.c, kOpC, Access::Read, false, d.m, d.n);
  if (d.conv) l.buffers.push_back({d.conv_taps, Access::Read, false});
  // Narrow outputs share words between neighbouring elements written by different
  // invocations: their stores are atomic.
  bind(d.out, kOpOut, Access::ReadWrite, is_subword(d.out.dtype), d.m, d.n);
  l.uniforms = u;
  const std::string vname = v == Variant::Tiled    ? "tiled" + shape.key() + (d.conv ? d.conv_positions_along_k ? "gp" : "gt" : "")
                            : v == Variant::Block  ? "block"
                            : v == Variant::Reduce ? "reduce"
                            : v == Variant::Gemv   ? "gemv" + std::to_string(gemv_threads) +
                                                         (gemv_pairs ? "p" : "")
                                                   : "per_out";
  l.key = std::string("gemm:") + vname + ":" + dtype_name(d.a.dtype) + "," +
          dtype_name(d.b.dtype) + "," + (has_c ? dtype_name(d.c.dtype) : "-") + "," +
          dtype_name(d.out.dtype) + ":" + compute_name(d.compute);
  if (v == Variant::PerOutput || v == Variant::Block) {
    l.grid = Grid::Invocations;
    // Per output: an invocation owns two neighbouring columns of a row (llvmpipe runs
    // two independent rows of B per lane 1.25x faster than one with four partial sums).
    l.count = v == Variant::Block ? batch * tiles_m * tiles_n : batch * d.m * ((d.n + 1) / 2);
    l.workgroup = 64;
  } else {
    l.grid = Grid::Groups;
    l.count = v == Variant::Tiled || v == Variant::Gemv ? batch * tiles_m * tiles_n : outputs;
    l.workgroup = v == Variant::Tiled ? shape.threads() : v == Variant::Gemv ? gemv_threads : 64;
  }
  Arith ar{d.compute};
  const GemmDesc desc = d;
  l.body = [&, desc, has_c, v, ar, shape, gemv_threads, gemv_pairs, gather] {
    std::string s = gemm_common(desc, l.buffers, has_c);
    if (v == Variant::Tiled) s += tiled_body(ar, shape, gather);
    else if (v == Variant::Gemv) s += gemv_body(gemv_threads, gemv_pairs, desc.b.dtype);
    else if (v == Variant::Block) s += block_body(ar);
    else if (v == Variant::Reduce) s += reduce_body(ar);
    else s += per_output_body(ar);
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace

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

// ---- convolution gathers ------------------------------------------------------------

namespace {

// Uniform words shared by im2col and col2im.
constexpr uint32_t kCvBatch = 4, kCvGroups = 5, kCvCx = 6, kCvXs = 8, kCvYs = 12, kCvKs = 16,
                   kCvStride = 20, kCvPad = 24, kCvDil = 28, kCvCol = 32, kCvXOff = 36;

// im2col: consecutive outputs along the last spatial dimension one invocation writes.
constexpr uint32_t kIm2colRun = 4;

std::string uw_word(uint32_t word) { return "uw(" + std::to_string(word) + "u)"; }

// WGSL taking coordinates `name<d>`, d = from..0 (last fastest), off `rest`, with the
// sizes in uniform words base + d. Unrolled: drivers keep loop-indexed private arrays in
// local memory.
std::string peel_coords(const std::string& name, uint32_t base, int from) {
  std::string s;
  for (int d = from; d >= 0; --d)
    s += "  let " + name + std::to_string(d) + " = rest % " + uw_word(base + d) +
         ";\n  rest = rest / " + uw_word(base + d) + ";\n";
  return s;
}

std::vector<uint32_t> conv_uniforms(const ConvGeometry& g, const ColLayout& c, uint64_t x_off) {
  std::vector<uint32_t> u(kCvXOff + 4, 0);
  u[kCvBatch] = g.batch;
  u[kCvGroups] = g.groups;
  u[kCvCx] = g.cx;
  for (int d = 0; d < 3; ++d) {
    u[kCvXs + d] = g.xs[d];
    u[kCvYs + d] = g.ys[d];
    u[kCvKs + d] = g.ks[d];
    u[kCvStride + d] = g.stride[d];
    u[kCvPad + d] = g.pad[d];
    u[kCvDil + d] = g.dil[d];
  }
  u[kCvCol] = u32_or_fail(c.sn, "column stride");
  u[kCvCol + 1] = u32_or_fail(c.sg, "column stride");
  u[kCvCol + 2] = u32_or_fail(c.sr, "column stride");
  u[kCvCol + 3] = u32_or_fail(c.sl, "column stride");
  u[kCvXOff] = u32_or_fail(x_off, "offset");
  return u;
}

}  // namespace

void conv_im2col(Context& ctx, const ConvGeometry& g, WGPUBuffer x, uint64_t x_offset,
                 DType x_dtype, WGPUBuffer col, const ColLayout& layout) {
  const uint64_t chunks = (uint64_t(g.ys[2]) + kIm2colRun - 1) / kIm2colRun;
  const uint64_t count = uint64_t(g.batch) * g.groups * g.rows() * g.ys[0] * g.ys[1] * chunks;
  if (count == 0) return;
  u32_or_fail(uint64_t(g.batch) * g.groups * g.cx * g.x_spatial(), "input");
  KernelLaunch l;
  l.key = std::string("conv:im2col:") + dtype_name(x_dtype);
  l.buffers = {{x, Access::Read, false}, {col, Access::ReadWrite, false}};
  l.uniforms = conv_uniforms(g, layout, x_offset);
  l.uniforms.resize(kCvXOff + 4, 0);
  l.uniforms[kCvXOff + 1] = static_cast<uint32_t>(chunks);
  l.uniforms[kCvXOff + 2] = g.y_first[0];
  l.uniforms[kCvXOff + 3] = g.y_first[1];
  // The pass's images, for an input buffer larger than one binding.
  l.buffers[0].touches(kCvXOff, x_dtype, x_offset, uint64_t(g.batch) * g.groups * g.cx * g.x_spatial());
  l.count = count;
  l.workgroup = 64;
  l.body = [&, x_dtype] {
    std::string s = kernel_load("load_x", l.buffers, 0, x_dtype);
    s += kernel_main(Grid::Invocations, 64);
    // idx -> (n, g, c, k0, k1, k2, o0, o1, chunk of kIm2colRun o2 values), last fastest:
    // the index arithmetic (integer division is slow on GPUs) is shared by the run.
    // Per-dimension code is unrolled: drivers keep loop-indexed private arrays in local
    // memory.
    const auto& w = uw_word;
    s += "  var rest = idx;\n"
         "  let chunk = rest % uw(37u);\n  rest = rest / uw(37u);\n";
    s += peel_coords("o", kCvYs, 1) + peel_coords("k", kCvKs, 2);
    s += "  let kidx = (k0 * uw(17u) + k1) * uw(18u) + k2;\n"
         "  let c = rest % uw(6u);\n  rest = rest / uw(6u);\n"
         "  let g = rest % uw(5u);\n  let n = rest / uw(5u);\n"
         "  let r = c * (uw(16u) * uw(17u) * uw(18u)) + kidx;\n"
         "  let ch = (n * uw(5u) + g) * uw(6u) + c;\n"
         "  let xbase = uw(36u) + ch * (uw(8u) * uw(9u) * uw(10u));\n"
         "  let cbase = n * uw(32u) + g * uw(33u) + r * uw(34u);\n";
    for (int d = 0; d < 2; ++d) {
      const std::string D = std::to_string(d);
      s += "  let p" + D + " = i32((o" + D + " + " + w(kCvXOff + 2 + d) + ") * " + w(kCvStride + d) + " + k" + D +
           " * " + w(kCvDil + d) + ") - i32(" + w(kCvPad + d) + ");\n";
    }
    s += "  let rows_inside = p0 >= 0 && p0 < i32(uw(8u)) && p1 >= 0 && p1 < i32(uw(9u));\n"
         "  let xrow = xbase + (u32(max(p0, 0)) * uw(9u) + u32(max(p1, 0))) * uw(10u);\n"
         "  let lrow = (o0 * uw(13u) + o1) * uw(14u);\n";
    for (uint32_t j = 0; j < kIm2colRun; ++j) {
      s += "  {\n    let o2 = chunk * " + std::to_string(kIm2colRun) + "u + " + std::to_string(j) + "u;\n"
           "    if (o2 < uw(14u)) {\n"
           "      let p2 = i32(o2 * uw(22u) + k2 * uw(30u)) - i32(uw(26u));\n"
           "      var v = 0.0;\n"
           "      if (rows_inside && p2 >= 0 && p2 < i32(uw(10u))) { v = load_x(xrow + u32(p2)); }\n"
           "      buf1[cbase + (lrow + o2) * uw(35u)] = bitcast<u32>(v);\n"
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
  l.key = "conv:gather_taps";
  l.buffers = {{taps, Access::ReadWrite, false}};
  l.uniforms = conv_uniforms(g, ColLayout{}, 0);
  l.count = count;
  l.workgroup = 64;
  l.body = [] {
    std::string s = kernel_main(Grid::Invocations, 64);
    s += "  let taps = uw(16u) * uw(17u) * uw(18u);\n"
         "  let c = idx / taps;\n  let t = idx % taps;\n"
         "  let d0 = (t / (uw(17u) * uw(18u))) * uw(28u);\n"
         "  let d1 = ((t / uw(18u)) % uw(17u)) * uw(29u);\n"
         "  let d2 = (t % uw(18u)) * uw(30u);\n"
         "  buf0[idx * 4u] = c * (uw(8u) * uw(9u) * uw(10u)) + (d0 * uw(9u) + d1) * uw(10u) + d2;\n"
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
  l.key = std::string("conv:col2im:") + dtype_name(x_dtype) + (has_bias ? ":bias" : "") +
          (accumulate ? ":acc" : "") + (unit_stride ? ":s1" : "");
  l.buffers = {{col, Access::Read, false}};
  if (has_bias) l.buffers.push_back({bias.buffer, Access::Read, false});
  l.buffers.push_back({x, Access::ReadWrite, is_subword(x_dtype)});
  l.uniforms = conv_uniforms(g, layout, x_offset);
  l.uniforms.resize(kCvXOff + 5, 0);
  if (has_bias) {
    l.uniforms[kCvXOff + 1] = u32_or_fail(bias.offset, "offset");
    l.uniforms[kCvXOff + 2] = u32_or_fail(bias.rows, "stride");
  }
  l.uniforms[kCvXOff + 3] = g.y_first[0];
  l.uniforms[kCvXOff + 4] = g.y_first[1];
  l.buffers.back().touches(kCvXOff, x_dtype, x_offset, count);  // the pass's images
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
    const auto& w = uw_word;
    s += "  var rest = idx;\n" + peel_coords("i", kCvXs, 2);
    s += "  let c = rest % uw(6u);\n  rest = rest / uw(6u);\n"
         "  let g = rest % uw(5u);\n  let n = rest / uw(5u);\n"
         "  let base = n * uw(32u) + g * uw(33u);\n"
         "  var acc = " + std::string(accumulate ? "load_prev(uw(36u) + idx)" : "0.0") + ";\n"
         "  let r = c * uw(16u);\n";
    // One loop per dim, outer to inner (the CPU's tap order, which float16's rounding
    // follows), each tap's validity decided at its own level: o = (i + pad - k * dil) /
    // stride only decreases with k, so a negative one ends the loop. Unit strides (the
    // key says so) drop the divisibility test and the division.
    std::string row = "0u";
    for (int d = 0; d < 3; ++d) {
      const std::string D = std::to_string(d), in(2 * d + 2, ' ');
      const std::string first = d < 2 ? "i32(" + w(kCvXOff + 3 + d) + ")" : "0";
      s += in + "for (var k" + D + " = 0u; k" + D + " < " + w(kCvKs + d) + "; k" + D + " = k" + D + " + 1u) {\n" +
           in + "  let q" + D + " = i32(i" + D + " + " + w(kCvPad + d) + ") - i32(k" + D + " * " + w(kCvDil + d) + ");\n";
      if (unit_stride) {
        s += in + "  let o" + D + " = q" + D + " - " + first + ";\n";
      } else {
        s += in + "  let s" + D + " = i32(" + w(kCvStride + d) + ");\n" +
             in + "  if (q" + D + " < 0) { break; }\n" +
             in + "  if (q" + D + " % s" + D + " != 0) { continue; }\n" +
             in + "  let o" + D + " = q" + D + " / s" + D + " - " + first + ";\n";
      }
      s += in + "  if (o" + D + " < 0) { break; }\n" +
           in + "  if (o" + D + " >= i32(" + w(kCvYs + d) + ")) { continue; }\n" +
           in + "  let l" + D + " = " + row + " * " + w(kCvYs + d) + " + u32(o" + D + ");\n";
      row = "l" + D;
    }
    s += "        let t = (r + k0) * uw(17u) + k1;\n"
         "        acc = rnd(acc + rnd(bitcast<f32>(buf0[base + (t * uw(18u) + k2) * uw(34u) + l2 * uw(35u)])));\n"
         "      }\n    }\n  }\n";
    s +=
         "  " + std::string(has_bias ? "acc = acc + load_bias(uw(37u) + (g * uw(6u) + c) * uw(38u));\n" : "") +
         "  store_x(uw(36u) + idx, acc);\n}\n";
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
  l.key = std::string("addr:") + dtype_name(dt) + (has_self ? ":self" : "");
  l.buffers = {{d.vec1.buffer, Access::Read, false}, {d.vec2.buffer, Access::Read, false}};
  if (has_self) l.buffers.push_back({d.self.buffer, Access::Read, false});
  l.buffers.push_back({d.out.buffer, Access::ReadWrite, is_subword(dt)});
  std::vector<uint32_t> u(20, 0);
  u[4] = u32_or_fail(d.n, "size");
  u[5] = u32_or_fail(d.vec1.offset, "offset");
  u[6] = u32_or_fail(d.vec1.rows, "stride");
  u[7] = u32_or_fail(d.vec2.offset, "offset");
  u[8] = u32_or_fail(d.vec2.cols, "stride");
  if (has_self) {
    u[9] = u32_or_fail(d.self.offset, "offset");
    u[10] = u32_or_fail(d.self.rows, "stride");
    u[11] = u32_or_fail(d.self.cols, "stride");
  }
  u[12] = u32_or_fail(d.out.offset, "offset");
  u[13] = d.alpha.lo;
  u[14] = d.alpha.hi;
  u[15] = d.beta.lo;
  u[16] = d.beta.hi;
  l.uniforms = u;
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
    s += "  let j = idx % uw(4u);\n  let i = idx / uw(4u);\n"
         "  let v1 = load_v1(uw(5u) + i * uw(6u));\n  let v2 = load_v2(uw(7u) + j * uw(8u));\n";
    const std::string alpha = wgsl_scalar(c, "uw(13u)", "uw(14u)");
    const std::string beta = wgsl_scalar(c, "uw(15u)", "uw(16u)");
    std::string self = has_self ? "load_self(uw(9u) + i * uw(10u) + j * uw(11u))" : "";
    if (dt == DType::Bool) {
      s += "  var r = " + alpha + " != 0 && v1 != 0 && v2 != 0;\n";
      if (has_self) s += "  r = r || (" + beta + " != 0 && " + self + " != 0);\n";
      s += "  store_out(uw(12u) + idx, select(0, 1, r));\n}\n";
    } else if (c == Compute::F32) {
      s += "  var r = rnd(rnd(rnd(" + alpha + ") * v1) * v2);\n";
      if (has_self) s += "  r = rnd(rnd(rnd(" + beta + ") * " + self + ") + r);\n";
      s += "  store_out(uw(12u) + idx, r);\n}\n";
    } else {
      Arith ar{c};
      s += "  var r = " + ar.mul(ar.mul(alpha, "v1"), "v2") + ";\n";
      if (has_self) s += "  r = " + ar.add(ar.mul(beta, self), "r") + ";\n";
      s += "  store_out(uw(12u) + idx, r);\n}\n";
    }
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
