#include "kernels/scan.h"

#include <algorithm>
#include <functional>
#include <string>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "runtime/buffer_pool.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

const char* op_name(ScanOp op) {
  switch (op) {
    case ScanOp::Sum: return "sum";
    case ScanOp::Prod: return "prod";
    case ScanOp::Max: return "max";
    case ScanOp::Min: return "min";
    case ScanOp::LogSumExp: return "logsumexp";
  }
  return "?";
}

// `fn combine(acc, x) -> T` for the integer and float ops without indices.
std::string combine_function(ScanOp op, Compute c) {
  const std::string T = c == Compute::F32 ? "f32" : c == Compute::I32 ? "i32" : "vec2<u32>";
  std::string body;
  if (op == ScanOp::Prod) {
    body = c == Compute::I64 ? "i64_mul(a, x)" : "a * x";
  } else if (op == ScanOp::Sum) {
    body = c == Compute::I64 ? "i64_add(a, x)" : "a + x";
  } else if (op == ScanOp::LogSumExp) {
    // The CPU's log-add-exp: NaN propagates, equal infinities stay as they are.
    return "fn combine(a: f32, x: f32) -> f32 {\n"
           "  if (is_nan(a) || is_nan(x)) { return f32_nan(); }\n"
           "  let lo = min(a, x);\n"
           "  let hi = max(a, x);\n"
           "  if (lo != hi || is_finite(lo)) { return hi + log1p_f32(exp(lo - hi)); }\n"
           "  return a;\n"
           "}\n";
  }
  return "fn combine(a: " + T + ", x: " + T + ") -> " + T + " { return " + body + "; }\n";
}

// True when x replaces the running extreme `a` (ties move to the later index; a NaN wins
// and stays, later NaNs take its place), as the CPU's cummax/cummin do.
std::string replaces_function(ScanOp op, Compute c) {
  const bool is_max = op == ScanOp::Max;
  if (c == Compute::F32)
    return std::string("fn replaces(a: f32, x: f32) -> bool { return is_nan(x) || (!is_nan(a) && ") +
           (is_max ? "x >= a" : "x <= a") + "); }\n";
  if (c == Compute::I32)
    return std::string("fn replaces(a: i32, x: i32) -> bool { return ") +
           (is_max ? "x >= a" : "x <= a") + "; }\n";
  return std::string("fn replaces(a: vec2<u32>, x: vec2<u32>) -> bool { return ") +
         (is_max ? "!i64_lt(x, a)" : "!i64_lt(a, x)") + "; }\n";
}

// The running state of a scan as WGSL functions over a type `St`, for the blocked scan of
// long rows: st_init (first element), st_add (one more element), st_merge (a block's
// aggregate after an earlier prefix), st_value / st_index (what is stored), and st_pack /
// st_unpack (four words in the aggregates buffer).
std::string state_functions(ScanOp op, Compute c) {
  const std::string T = c == Compute::F32 ? "f32" : c == Compute::I32 ? "i32" : "vec2<u32>";
  std::string pack_v, unpack_v;  // a T value to/from words (w.x, w.y)
  if (c == Compute::F32) {
    pack_v = "vec2<u32>(bitcast<u32>(V), 0u)";
    unpack_v = "bitcast<f32>(W.x)";
  } else if (c == Compute::I32) {
    pack_v = "vec2<u32>(bitcast<u32>(V), 0u)";
    unpack_v = "bitcast<i32>(W.x)";
  } else {
    pack_v = "V";
    unpack_v = "W.xy";
  }
  auto sub = [](std::string t, const std::string& from, const std::string& to) {
    for (size_t p = t.find(from); p != std::string::npos; p = t.find(from, p + to.size()))
      t.replace(p, from.size(), to);
    return t;
  };
  if (op == ScanOp::Max || op == ScanOp::Min) {
    return replaces_function(op, c) + "struct St { v: " + T + ", i: u32 }\n" +
           "fn st_init(x: " + T + ", i: u32) -> St { return St(x, i); }\n"
           "fn st_add(s: St, x: " + T + ", i: u32) -> St { if (replaces(s.v, x)) { return St(x, i); } return s; }\n"
           "fn st_merge(a: St, b: St) -> St { if (replaces(a.v, b.v)) { return b; } return a; }\n"
           "fn st_value(s: St) -> " + T + " { return s.v; }\n"
           "fn st_index(s: St) -> u32 { return s.i; }\n"
           "fn st_pack(s: St) -> vec4<u32> { return vec4<u32>(" + sub(pack_v, "V", "s.v") + ", s.i, 0u); }\n"
           "fn st_unpack(w: vec4<u32>) -> St { return St(" + sub(unpack_v, "W", "w") + ", w.z); }\n";
  }
  if (op == ScanOp::Sum && c == Compute::F32) {
    // (sum, compensation): Neumaier summation, as in the row kernel.
    return "struct St { s: f32, c: f32 }\n"
           "fn two_sum_err(a: f32, b: f32, t: f32) -> f32 {\n"
           "  if (!is_finite(t)) { return 0.0; }\n"
           "  if (abs(a) >= abs(b)) { return (a - t) + b; }\n"
           "  return (b - t) + a;\n"
           "}\n"
           "fn st_init(x: f32, i: u32) -> St { return St(x, 0.0); }\n"
           "fn st_add(s: St, x: f32, i: u32) -> St { let t = opaque_f32(s.s + x); return St(t, s.c + two_sum_err(s.s, x, t)); }\n"
           "fn st_merge(a: St, b: St) -> St { let t = opaque_f32(a.s + b.s); return St(t, a.c + b.c + two_sum_err(a.s, b.s, t)); }\n"
           "fn st_value(s: St) -> f32 { return select(s.s, s.s + s.c, is_finite(s.s)); }\n"
           "fn st_index(s: St) -> u32 { return 0u; }\n"
           "fn st_pack(s: St) -> vec4<u32> { return vec4<u32>(bitcast<u32>(s.s), bitcast<u32>(s.c), 0u, 0u); }\n"
           "fn st_unpack(w: vec4<u32>) -> St { return St(bitcast<f32>(w.x), bitcast<f32>(w.y)); }\n";
  }
  return combine_function(op, c) + "struct St { v: " + T + " }\n" +
         "fn st_init(x: " + T + ", i: u32) -> St { return St(x); }\n"
         "fn st_add(s: St, x: " + T + ", i: u32) -> St { return St(combine(s.v, x)); }\n"
         "fn st_merge(a: St, b: St) -> St { return St(combine(a.v, b.v)); }\n"
         "fn st_value(s: St) -> " + T + " { return s.v; }\n"
         "fn st_index(s: St) -> u32 { return 0u; }\n"
         "fn st_pack(s: St) -> vec4<u32> { return vec4<u32>(" + sub(pack_v, "V", "s.v") + ", 0u, 0u); }\n"
         "fn st_unpack(w: vec4<u32>) -> St { return St(" + sub(unpack_v, "W", "w") + "); }\n";
}

// Rows at least this long, unless there are enough rows to fill a GPU with one invocation
// each (or always when longer than one invocation may loop: Mesa's llvmpipe stops every
// loop of an invocation after 65535 iterations in all), scan in blocks of kBlock elements:
// block aggregates, a per-row scan of the aggregates, then each block again from its carry.
constexpr uint64_t kBlockedMinLength = 1024;
constexpr uint64_t kBlockedMaxRows = 16384;
constexpr uint64_t kBlock = 256;
constexpr uint64_t kMaxSerial = 32768;  // loop iterations one invocation may safely run

// Every scan kernel's uniforms: element offsets, the row length, and for blocked scans the
// blocks per row and the block length (1 and n for the one-pass scan).
KernelLaunch& declare_scan(KernelLaunch& l, const ScanArgs& a, uint64_t blocks, uint64_t block) {
  static const UniformLayout layout(
      {{"in_offset"}, {"out_offset"}, {"indices_offset"}, {"n"}, {"blocks"}, {"block"}});
  // The rows' elements of input and outputs, for buffers larger than one binding.
  for (KernelBuffer& b : l.buffers) {
    if (b.buffer == a.in) b.touches(layout.fields()[layout.find("in_offset")].word, a.dtype, a.in_offset, a.rows * a.n);
    else if (b.buffer == a.out) b.touches(layout.fields()[layout.find("out_offset")].word, a.dtype, a.out_offset, a.rows * a.n);
    else if (b.buffer == a.indices)
      b.touches(layout.fields()[layout.find("indices_offset")].word, DType::Int64, a.indices_offset, a.rows * a.n);
  }
  return l.declare(layout)
      .set_u32("in_offset", static_cast<uint32_t>(a.in_offset))
      .set_u32("out_offset", static_cast<uint32_t>(a.out_offset))
      .set_u32("indices_offset", static_cast<uint32_t>(a.indices_offset))
      .set_u32("n", static_cast<uint32_t>(a.n))
      .set_u32("blocks", static_cast<uint32_t>(blocks))
      .set_u32("block", static_cast<uint32_t>(block));
}

void scan_rows_blocked(Context& ctx, const ScanArgs& a) {
  const Compute c = compute_type_for(a.dtype);
  const bool with_indices = a.op == ScanOp::Max || a.op == ScanOp::Min;
  // Blocks long enough that no invocation loops more than kMaxSerial times.
  const uint64_t block = std::max<uint64_t>(kBlock, (a.n + kMaxSerial - 1) / kMaxSerial);
  const uint64_t blocks = (a.n + block - 1) / block;
  Allocation* aggregates = ctx.pool().allocate(a.rows * blocks * 16);
  const KernelKey::Variant variant = {static_cast<uint32_t>(a.op), static_cast<uint32_t>(a.dtype)};
  const ScanOp op = a.op;
  const DType dtype = a.dtype;
  // Phase 1: each block's aggregate.
  {
    KernelLaunch l;
    l.typed = {"scan:blocks", variant};
    l.buffers = {{a.in, Access::Read, false}, {aggregates->buffer, Access::ReadWrite, false}};
    declare_scan(l, a, blocks, block);
    l.count = a.rows * blocks;
    l.workgroup = 64;
    l.body = [&l, op, dtype, c] {
      return kernel_load("load_in", l.buffers, 0, dtype) + state_functions(op, c) +
             kernel_main(Grid::Invocations, 64) +
             "  let n = u.n;\n"
             "  let row = idx / u.blocks;\n"
             "  let first = (idx % u.blocks) * u.block;\n"
             "  let last = min(first + u.block, n);\n"
             "  let src = u.in_offset + row * n;\n"
             "  var s = st_init(load_in(src + first), first);\n"
             "  for (var i = first + 1u; i < last; i = i + 1u) { s = st_add(s, load_in(src + i), i); }\n"
             "  let w = st_pack(s);\n"
             "  buf1[4u * idx] = w.x; buf1[4u * idx + 1u] = w.y; buf1[4u * idx + 2u] = w.z; buf1[4u * idx + 3u] = w.w;\n"
             "}\n";
    };
    launch_kernel(ctx, l);
  }
  // Phase 2: inclusive scan of the aggregates along each row.
  {
    KernelLaunch l;
    l.typed = {"scan:carry", variant};
    l.buffers = {{aggregates->buffer, Access::ReadWrite, false}};
    declare_scan(l, a, blocks, block);
    l.count = a.rows;
    l.workgroup = 64;
    l.body = [op, c] {
      return state_functions(op, c) + kernel_main(Grid::Invocations, 64) +
             "  let base = idx * u.blocks;\n"
             "  var s = st_unpack(vec4<u32>(buf0[4u * base], buf0[4u * base + 1u], buf0[4u * base + 2u], buf0[4u * base + 3u]));\n"
             "  for (var b = base + 1u; b < base + u.blocks; b = b + 1u) {\n"
             "    s = st_merge(s, st_unpack(vec4<u32>(buf0[4u * b], buf0[4u * b + 1u], buf0[4u * b + 2u], buf0[4u * b + 3u])));\n"
             "    let w = st_pack(s);\n"
             "    buf0[4u * b] = w.x; buf0[4u * b + 1u] = w.y; buf0[4u * b + 2u] = w.z; buf0[4u * b + 3u] = w.w;\n"
             "  }\n"
             "}\n";
    };
    launch_kernel(ctx, l);
  }
  // Phase 3: every block again, from the previous block's inclusive aggregate.
  {
    KernelLaunch l;
    l.typed = {"scan:apply", variant};
    l.buffers = {{a.in, Access::Read, false},
                 {aggregates->buffer, Access::Read, false},
                 {a.out, Access::ReadWrite, is_subword(a.dtype)}};
    if (with_indices) l.buffers.push_back({a.indices, Access::ReadWrite, false});
    declare_scan(l, a, blocks, block);
    l.count = a.rows * blocks;
    l.workgroup = 64;
    l.body = [&l, op, dtype, c, with_indices] {
      std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                      kernel_store("store_out", l.buffers, 2, dtype, c) + state_functions(op, c);
      if (with_indices) s += kernel_store("store_index", l.buffers, 3, DType::Int64, Compute::I64);
      s += kernel_main(Grid::Invocations, 64) +
           "  let n = u.n;\n"
           "  let row = idx / u.blocks;\n"
           "  let first = (idx % u.blocks) * u.block;\n"
           "  let last = min(first + u.block, n);\n"
           "  let src = u.in_offset + row * n;\n"
           "  let dst = u.out_offset + row * n;\n"
           "  var s = st_init(load_in(src + first), first);\n"
           "  if (first > 0u) {\n"
           "    let p = idx - 1u;\n"
           "    let carry = st_unpack(vec4<u32>(buf1[4u * p], buf1[4u * p + 1u], buf1[4u * p + 2u], buf1[4u * p + 3u]));\n"
           "    s = st_add(carry, load_in(src + first), first);\n"
           "  }\n"
           "  for (var i = first; i < last; i = i + 1u) {\n"
           "    if (i > first) { s = st_add(s, load_in(src + i), i); }\n"
           "    store_out(dst + i, st_value(s));\n";
      if (with_indices) s += "    store_index(u.indices_offset + row * n + i, vec2<u32>(st_index(s), 0u));\n";
      return s + "  }\n}\n";
    };
    launch_kernel(ctx, l);
  }
  ctx.pool().release(aggregates);
}

// One workgroup of `group` per row: the bindings (input, output, indices of cummax/cummin;
// input and output as vec4 when `vec4`), the uniforms and the grid; `param` tells the
// family's variants apart.
void row_groups(KernelLaunch& l, const ScanArgs& a, const char* family, uint32_t param,
                uint32_t group, bool vec4) {
  l.typed = {family, {static_cast<uint32_t>(a.op), static_cast<uint32_t>(a.dtype), param}};
  l.buffers = {{a.in, Access::Read, false}, {a.out, Access::ReadWrite, !vec4 && is_subword(a.dtype)}};
  l.buffers[0].vec4 = l.buffers[1].vec4 = vec4;
  if (a.op == ScanOp::Max || a.op == ScanOp::Min) l.buffers.push_back({a.indices, Access::ReadWrite, false});
  declare_scan(l, a, 1, a.n);
  l.grid = Grid::Groups;
  l.count = a.rows;
  l.workgroup = group;
}

// Rows scanned by one workgroup each, in tiles of `group * per` elements: the tile is read
// into workgroup memory with neighbouring invocations on neighbouring elements, each
// invocation scans `per` consecutive elements of it, a workgroup scan of those runs'
// aggregates gives each run its prefix, the run is scanned again from it into workgroup
// memory, and the tile is written out the way it was read. The tile's aggregate carries
// into the next. Every element is read and written once, in whole rows of loads.
// GPUs only: on software adapters every barrier costs a switch between invocations, and
// the serial scan of a row per invocation is several times faster there.
constexpr uint64_t kTiledMinLength = 512;
constexpr uint64_t kTiledMinRows = 128;

void scan_rows_tiled(Context& ctx, const ScanArgs& a) {
  const Compute c = compute_type_for(a.dtype);
  const bool with_indices = a.op == ScanOp::Max || a.op == ScanOp::Min;
  const uint32_t group = std::min<uint32_t>(256, ctx.caps().workgroup_1d());
  // Elements per invocation: up to 8, within half the workgroup memory the spec's default
  // limits allow (16 KiB), the run aggregates (up to 16 bytes each) included.
  const uint32_t value_bytes = (c == Compute::I64 ? 8 : 4) + (with_indices ? 4 : 0);
  const uint32_t budget = std::min<uint32_t>(ctx.caps().max_workgroup_storage, 16384) - group * 16;
  uint32_t per = 8;
  while (per > 1 && group * per * value_bytes > budget) per /= 2;
  const uint32_t tile = group * per;
  KernelLaunch l;
  row_groups(l, a, "scan:tiles", per, group, false);
  const ScanOp op = a.op;
  const DType dtype = a.dtype;
  l.body = [&l, op, dtype, c, with_indices, group, per, tile] {
    const std::string T = c == Compute::F32 ? "f32" : c == Compute::I32 ? "i32" : "vec2<u32>";
    const std::string G = std::to_string(group) + "u", P = std::to_string(per) + "u",
                      N = std::to_string(tile) + "u";
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    kernel_store("store_out", l.buffers, 1, dtype, c) + state_functions(op, c);
    if (with_indices) s += kernel_store("store_index", l.buffers, 2, DType::Int64, Compute::I64);
    s += "var<workgroup> tile: array<" + T + ", " + N + ">;\n";
    if (with_indices) s += "var<workgroup> tile_index: array<u32, " + N + ">;\n";
    s += "var<workgroup> runs: array<St, " + G + ">;\n";
    s += kernel_main(Grid::Groups, group) +
         "  let live = group < frame_count();\n"
         "  let n = select(0u, u.n, live);\n"
         "  let row = select(0u, group, live);\n"
         "  let src = u.in_offset + row * u.n;\n"
         "  let dst = u.out_offset + row * u.n;\n"
         "  let first = lid * " + P + ";\n"
         "  var carry = st_init(load_in(src), 0u);\n"
         "  for (var t0 = 0u; t0 < n; t0 = t0 + " + N + ") {\n"
         "    let count = min(n - t0, " + N + ");\n"
         "    for (var i = 0u; i < " + P + "; i = i + 1u) {\n"
         "      let k = i * " + G + " + lid;\n"
         "      if (k < count) { tile[k] = load_in(src + t0 + k); }\n"
         "    }\n"
         "    workgroupBarrier();\n"
         // This invocation's run [first, first + per) of the tile, when it has one.
         "    let has_run = first < count;\n"
         "    if (has_run) {\n"
         "      var r = st_init(tile[first], t0 + first);\n"
         "      for (var i = 1u; i < " + P + "; i = i + 1u) {\n"
         "        if (first + i < count) { r = st_add(r, tile[first + i], t0 + first + i); }\n"
         "      }\n"
         "      runs[lid] = r;\n"
         "    }\n"
         "    workgroupBarrier();\n"
         // Inclusive scan of the runs (runs past the tile's end are never read by live ones).
         "    for (var d = 1u; d < " + G + "; d = d << 1u) {\n"
         "      var v = runs[lid];\n"
         "      if (has_run && lid >= d) { v = st_merge(runs[lid - d], v); }\n"
         "      workgroupBarrier();\n"
         "      runs[lid] = v;\n"
         "      workgroupBarrier();\n"
         "    }\n"
         "    if (has_run) {\n"
         "      var st = carry;\n"
         "      var started = t0 > 0u;\n"
         "      if (lid > 0u) {\n"
         "        if (started) { st = st_merge(carry, runs[lid - 1u]); } else { st = runs[lid - 1u]; }\n"
         "        started = true;\n"
         "      }\n"
         "      for (var i = 0u; i < " + P + "; i = i + 1u) {\n"
         "        let k = first + i;\n"
         "        if (k < count) {\n"
         "          if (started) { st = st_add(st, tile[k], t0 + k); } else { st = st_init(tile[k], t0 + k); }\n"
         "          started = true;\n"
         "          tile[k] = st_value(st);\n" +
         (with_indices ? "          tile_index[k] = st_index(st);\n" : "") +
         "        }\n"
         "      }\n"
         "    }\n"
         "    workgroupBarrier();\n"
         "    let whole = runs[(count - 1u) / " + P + "];\n"
         "    if (t0 > 0u) { carry = st_merge(carry, whole); } else { carry = whole; }\n"
         "    for (var i = 0u; i < " + P + "; i = i + 1u) {\n"
         "      let k = i * " + G + " + lid;\n"
         "      if (k < count) {\n"
         "        store_out(dst + t0 + k, tile[k]);\n" +
         (with_indices ? "        store_index(u.indices_offset + row * u.n + t0 + k, vec2<u32>(tile_index[k], 0u));\n" : "") +
         "      }\n"
         "    }\n"
         "    workgroupBarrier();\n"
         "  }\n"
         "}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

// Rows of 4-byte values (float32, int32) whose length and offsets are multiples of 4, up to
// 16 elements per invocation of one workgroup per row: a single read and a single write in
// 16-byte words, no tile in workgroup memory. Invocation lid holds the vec4s lid + q * G
// (q < C: coalesced loads and stores), scans each of them in registers, and one
// workgroup-wide scan over the C x G vec4 aggregates (all C at once, so the barriers do
// not grow with C) gives each its prefix; chunk q starts after the totals of chunks < q.
bool scan_vec4_fits(Context& ctx, const ScanArgs& a) {
  return (a.dtype == DType::Float32 || a.dtype == DType::Int32) && a.n >= 64 &&
         a.n <= 16ull * std::min<uint32_t>(256, ctx.caps().workgroup_1d()) && a.n % 4 == 0 &&
         a.in_offset % 4 == 0 && a.out_offset % 4 == 0 && a.rows >= kTiledMinRows &&
         !needs_window(ctx, a.in) && !needs_window(ctx, a.out) && !needs_window(ctx, a.indices);
}

void scan_rows_vec4(Context& ctx, const ScanArgs& a) {
  const Compute c = compute_type_for(a.dtype);
  const bool with_indices = a.op == ScanOp::Max || a.op == ScanOp::Min;
  const uint64_t n4 = a.n / 4;
  uint32_t group = 32;
  while (group < std::min<uint32_t>(256, ctx.caps().workgroup_1d()) && n4 > 4ull * group) group *= 2;
  uint32_t chunks = 1;
  while (n4 > uint64_t(chunks) * group) chunks *= 2;
  KernelLaunch l;
  row_groups(l, a, "scan:vec4", chunks, group, true);
  const ScanOp op = a.op;
  // Subgroups where they divide the workgroup (group_scan_fn); else a Hillis-Steele tree.
  const uint32_t sg = ctx.caps().subgroup_size;
  const uint32_t subgroup = sg && group % sg == 0 ? sg : 0;
  l.typed.variant[3] = subgroup;
  l.body = [&l, op, c, with_indices, group, chunks, subgroup] {
    const std::string T = c == Compute::F32 ? "f32" : "i32";
    const std::string G = std::to_string(group) + "u";
    std::string s = state_functions(op, c);
    if (subgroup)
      s += group_scan_fn({"chunk_scan", "St", wgsl_struct_fields(s, "St"), "st_merge", "", group, group, subgroup});
    if (with_indices) s += kernel_store("store_index", l.buffers, 2, DType::Int64, Compute::I64);
    s += "fn ld(i: u32) -> vec4<" + T + "> { return bitcast<vec4<" + T + ">>(buf0[i]); }\n"
         "fn st4(i: u32, v: vec4<" + T + ">) { buf1[i] = bitcast<vec4<u32>>(v); }\n"
         "var<workgroup> runs: array<St, " + std::to_string(chunks * group) + ">;\n";
    s += kernel_main(Grid::Groups, group) +
         "  let live = group < frame_count();\n"
         "  let row = select(0u, group, live);\n"
         "  let n4 = select(0u, u.n / 4u, live);\n"
         "  let src = (u.in_offset + row * u.n) / 4u;\n"
         "  let dst = (u.out_offset + row * u.n) / 4u;\n"
         "  let dst_index = u.indices_offset + row * u.n;\n";
    const char* lane = "xyzw";
    auto each = [&](const std::function<std::string(const std::string&, uint32_t)>& f) {
      std::string out;
      for (uint32_t q = 0; q < chunks; ++q) out += f(std::to_string(q), q);
      return out;
    };
    // Every vec4 is loaded before any is scanned: a load behind the previous vec4's branch
    // would wait for it (one vec4 in flight per invocation instead of all of them).
    s += each([&](const std::string& q, uint32_t) {
      return "  let w" + q + " = lid + " + q + "u * " + G + ";\n  let in" + q + " = w" + q +
             " < n4;\n  let a" + q + " = ld(src + select(0u, w" + q + ", in" + q + "));\n";
    });
    // Each vec4's own scan aggregate.
    s += each([&](const std::string& q, uint32_t) {
      std::string t = (subgroup ? "  var r" + q + ": St;\n" : "") + "  if (in" + q + ") {\n    var r = st_init(a" + q + ".x, 4u * w" + q + ");\n";
      for (int k = 1; k < 4; ++k)
        t += "    r = st_add(r, a" + q + "." + lane[k] + ", 4u * w" + q + " + " + std::to_string(k) + "u);\n";
      return t + (subgroup ? "    r" + q + " = r;\n  }\n" : "    runs[w" + q + "] = r;\n  }\n");
    });
    // Inclusive scans of the aggregates along each chunk (entries past the row's end are
    // never read by live ones: they come after them). With subgroups: shuffles within each
    // subgroup, then the earlier subgroups' totals (group_scan_fn), chunk by chunk.
    if (subgroup)
      s += each([&](const std::string& q, uint32_t) { return "  runs[w" + q + "] = chunk_scan(r" + q + ", lid);\n"; }) +
           "  workgroupBarrier();\n  var carry: St;\n";
    else
      s += "  workgroupBarrier();\n"
         "  for (var d = 1u; d < " + G + "; d = d << 1u) {\n" +
         each([&](const std::string& q, uint32_t) {
           return "    var v" + q + " = runs[w" + q + "];\n    if (in" + q + " && lid >= d) { v" + q +
                  " = st_merge(runs[w" + q + " - d], v" + q + "); }\n";
         }) +
         "    workgroupBarrier();\n" +
         each([&](const std::string& q, uint32_t) { return "    runs[w" + q + "] = v" + q + ";\n"; }) +
         "    workgroupBarrier();\n  }\n"
         "  var carry: St;\n";  // the inclusive aggregate of the chunks before this one
    s += each([&](const std::string& q, uint32_t qi) {
      std::string t = "  if (in" + q + ") {\n    var st = carry;\n    var started = " +
                      (qi > 0 ? "true" : "false") + ";\n"
                      "    if (lid > 0u) {\n"
                      "      if (started) { st = st_merge(carry, runs[w" + q + " - 1u]); } else { st = runs[w" + q + " - 1u]; }\n"
                      "      started = true;\n    }\n"
                      "    var o = vec4<" + T + ">();\n";
      for (int k = 0; k < 4; ++k) {
        const std::string K = std::to_string(k);
        const std::string x = "a" + q + "." + lane[k], at = "4u * w" + q + " + " + K + "u";
        t += k == 0 ? "    if (started) { st = st_add(st, " + x + ", " + at + "); } else { st = st_init(" + x +
                          ", " + at + "); }\n"
                    : "    st = st_add(st, " + x + ", " + at + ");\n";
        t += "    o." + std::string(1, lane[k]) + " = st_value(st);\n";
        if (with_indices)
          t += "    store_index(dst_index + " + at + ", vec2<u32>(st_index(st), 0u));\n";
      }
      t += "    st4(dst + w" + q + ", o);\n  }\n";
      if (qi + 1 < chunks)
        t += qi == 0 ? "  carry = runs[" + G + " - 1u];\n"
                     : "  carry = st_merge(carry, runs[" + q + "u * " + G + " + " + G + " - 1u]);\n";
      return t;
    });
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

void scan_piece(Context& ctx, const ScanArgs& a) {
  if (!software_adapter(ctx) && scan_vec4_fits(ctx, a)) return scan_rows_vec4(ctx, a);
  if (a.n >= kTiledMinLength && a.n <= kMaxSerial && a.rows >= kTiledMinRows &&
      !software_adapter(ctx))
    return scan_rows_tiled(ctx, a);
  if ((a.n >= kBlockedMinLength && a.rows < kBlockedMaxRows) || a.n > kMaxSerial)
    return scan_rows_blocked(ctx, a);
  const Compute c = compute_type_for(a.dtype);
  const bool with_indices = a.op == ScanOp::Max || a.op == ScanOp::Min;
  KernelLaunch l;
  l.typed = {"scan:rows", {static_cast<uint32_t>(a.op), static_cast<uint32_t>(a.dtype)}};
  l.buffers = {{a.in, Access::Read, false}, {a.out, Access::ReadWrite, is_subword(a.dtype)}};
  if (with_indices) l.buffers.push_back({a.indices, Access::ReadWrite, false});
  declare_scan(l, a, 1, a.n);
  l.count = a.rows;
  l.workgroup = 64;
  const ScanOp op = a.op;
  const DType dtype = a.dtype;
  l.body = [&l, op, dtype, c, with_indices] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    kernel_store("store_out", l.buffers, 1, dtype, c);
    if (with_indices) {
      s += kernel_store("store_index", l.buffers, 2, DType::Int64, Compute::I64) +
           replaces_function(op, c);
    } else if (!(op == ScanOp::Sum && c == Compute::F32)) {
      s += combine_function(op, c);
    }
    s += kernel_main(Grid::Invocations, 64) +
         "  let n = u.n;\n"
         "  let src = u.in_offset + idx * n;\n"
         "  let dst = u.out_offset + idx * n;\n"
         "  var acc = load_in(src);\n"
         "  store_out(dst, acc);\n";
    if (with_indices) {
      s += "  let dst_index = u.indices_offset + idx * n;\n"
           "  var at = 0u;\n"
           "  store_index(dst_index, vec2<u32>(0u));\n"
           "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    let x = load_in(src + i);\n"
           "    if (replaces(acc, x)) { acc = x; at = i; }\n"
           "    store_out(dst + i, acc);\n"
           "    store_index(dst_index + i, vec2<u32>(at, 0u));\n"
           "  }\n";
    } else if (op == ScanOp::Sum && c == Compute::F32) {
      // Compensated (Neumaier) summation: the CPU accumulates floats in double.
      s += "  var comp = 0.0;\n"
           "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    let x = load_in(src + i);\n"
           "    let t = opaque_f32(acc + x);\n"
           "    if (is_finite(t)) {\n"
           "      if (abs(acc) >= abs(x)) { comp = comp + ((acc - t) + x); }\n"
           "      else { comp = comp + ((x - t) + acc); }\n"
           "    }\n"
           "    acc = t;\n"
           "    store_out(dst + i, select(acc, acc + comp, is_finite(acc)));\n"
           "  }\n";
    } else {
      s += "  for (var i = 1u; i < n; i = i + 1u) {\n"
           "    acc = combine(acc, load_in(src + i));\n"
           "    store_out(dst + i, acc);\n"
           "  }\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace

void scan_rows(Context& ctx, const ScanArgs& a) {
  if (a.rows == 0 || a.n == 0) return;
  if (a.in_offset + a.rows * a.n >= (1ull << 32) || a.out_offset + a.rows * a.n >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: scan over too many elements");
  if (!needs_window(ctx, a.in) && !needs_window(ctx, a.out) && !needs_window(ctx, a.indices))
    return scan_piece(ctx, a);
  // Buffers larger than one binding: pieces of whole rows, each within one window.
  const uint64_t row_bytes = a.n * std::max<uint64_t>(element_size(a.dtype), a.indices ? 8 : 0);
  const uint64_t per = rows_per_window(ctx, a.rows, row_bytes, "scan");
  for (uint64_t lo = 0; lo < a.rows; lo += per) {
    ScanArgs p = a;
    p.rows = std::min(per, a.rows - lo);
    p.in_offset += lo * a.n;
    p.out_offset += lo * a.n;
    p.indices_offset += lo * a.n;
    scan_piece(ctx, p);
  }
}

}  // namespace twgpu
