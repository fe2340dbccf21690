#include "kernels/sort.h"

#include <algorithm>
#include <functional>
#include <string>

#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// `fn sort_key(v) -> vec2<u32>`: unsigned (hi, lo) words ordered like the values.
std::string key_function(DType dtype) {
  switch (compute_type_for(dtype)) {
    case Compute::F32:
      // One NaN (positive, above +inf) and one zero, then the usual sign-flip mapping.
      return "fn sort_key(v: f32) -> vec2<u32> {\n"
             "  var b = bitcast<u32>(v);\n"
             "  if (is_nan(v)) { b = 0x7fc00000u; }\n"
             "  if ((b & 0x7fffffffu) == 0u) { b = 0u; }\n"
             "  return vec2<u32>(select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u), 0u);\n"
             "}\n";
    case Compute::I32:
      return "fn sort_key(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v) ^ 0x80000000u, 0u); }\n";
    case Compute::I64:
      return "fn sort_key(v: vec2<u32>) -> vec2<u32> { return vec2<u32>(v.y ^ 0x80000000u, v.x); }\n";
    default:
      fail(ErrorKind::Unsupported, std::string("torch_webgpu: sort of ") + dtype_name(dtype));
  }
}

// The key of a float NaN, where ascending rows keep their NaNs (at the end).
constexpr const char* kNanKey = "0xffc00000u";

// Helpers over the scratch buffer `buf<b>`: entry e is (key hi, key lo, index) at 3e.
std::string entry_functions(size_t b) {
  std::string s = "buf" + std::to_string(b);
  return "fn get_entry(e: u32) -> vec3<u32> { return vec3<u32>(" + s + "[3u * e], " + s +
         "[3u * e + 1u], " + s + "[3u * e + 2u]); }\n"
         "fn entry_less(a: vec3<u32>, b: vec3<u32>) -> bool {\n"
         "  if (a.x != b.x) { return a.x < b.x; }\n"
         "  if (a.y != b.y) { return a.y < b.y; }\n"
         "  return a.z < b.z;\n"
         "}\n";
}
std::string set_entry_function(size_t b) {
  std::string s = "buf" + std::to_string(b);
  return "fn set_entry(e: u32, v: vec3<u32>) { " + s + "[3u * e] = v.x; " + s +
         "[3u * e + 1u] = v.y; " + s + "[3u * e + 2u] = v.z; }\n";
}

uint32_t u32_of(uint64_t v) { return static_cast<uint32_t>(v); }

// The bindings of a kernel that reads rows (and scratch entries) and writes values in the
// input's dtype and int64 indices: buf0 input, buf1 scratch, buf2 values, buf3 indices.
std::vector<KernelBuffer> result_buffers(const SortInput& in, WGPUBuffer scratch, Access scratch_access,
                                         WGPUBuffer values, WGPUBuffer indices) {
  return {{in.buffer, Access::Read, false},
          {scratch, scratch_access, false},
          {values, Access::ReadWrite, is_subword(in.dtype)},
          {indices, Access::ReadWrite, false}};
}

// Entries one workgroup sorts in its memory (12 bytes each, within the spec's default
// 16 KiB). Larger chunks where the device's workgroup storage allows were tried: on the
// H200, 4096-entry chunks (one pass for 4096-long rows, but a quarter of the workgroups
// and 78 barrier steps each) sorted 256x4096 at 29 GB/s against 71 with 1024-entry chunks
// and global steps.
uint64_t chunk_max(Context&) { return 1024; }

// Where a sort's first `take` entries per row go: values (the input's dtype) and int64
// indices, `take` per row.
struct RowResult {
  uint64_t take = 0;
  WGPUBuffer values = nullptr;
  uint64_t values_offset = 0;
  WGPUBuffer indices = nullptr;
  uint64_t indices_offset = 0;
};

// WGSL stores of a row kernel's results (bindings 2 and 3 of result_buffers): values in
// the input's dtype, int64 indices.
std::string result_stores(const std::vector<KernelBuffer>& buffers, DType dtype) {
  return kernel_store("store_value", buffers, 2, dtype, compute_type_for(dtype)) +
         kernel_store("store_index", buffers, 3, DType::Int64, Compute::I64);
}

// One local pass: every workgroup orders `chunk` entries of one segment of a row in
// workgroup memory and writes the first `keep` of them.
//  - source: the input (sort keys of row r's elements `pos`, index pos; positions past
//    `m` pad with entries that sort last) or scratch entries from `src_base` (row r's
//    `m` entries at src_base + r * m);
//  - sort (sort_rows): the bitonic network, every stage up to `chunk` (full) or, for a
//    stage k above it, the steps j < chunk, in the directions the whole row's network
//    gives the chunk (`keep` = chunk);
//  - select (topk_rows): only the first `keep` (<= chunk / 2) in ascending order: runs of
//    `keep` sorted alternately up and down, then rounds that halve the runs (the
//    elementwise minimum of an ascending and a descending run holds the smaller half of
//    both, in bitonic order, which `keep`'s merge steps sort);
//  - output: row r's segment s at dst_base + (r * segs + s) * keep; or, when the pass
//    holds whole rows (segs 1) and `result` is set, the first `take` entries as values
//    (read back from the input) and int64 indices, with no scratch round trip.
struct LocalPass {
  const RowResult* result = nullptr;
  bool select = false;
  bool from_input = false;
  bool full = false;
  bool descending = false;
  uint64_t chunk = 0, m = 0, segs = 0, keep = 0, k = 0;
  uint64_t src_base = 0, dst_base = 0;
};

// WGSL of the steps j, j / 2, ..., 1 of a stage (`j` a var; `ascending`: WGSL of whether
// the pair at `lo` sorts up). Once a step's pairs lie inside the span of chunk / W entries
// each invocation owns, that invocation runs the remaining steps over its span alone,
// with no barrier between them (about half the steps of a 4096-entry sort).
std::string stage_steps(const std::string& W, const std::string& ascending) {
  return "    loop {\n"
         "      if (j == 0u) { break; }\n"
         "      if (2u * j <= span) {\n"
         "        for (; j > 0u; j = j / 2u) {\n"
         "          for (var t = 0u; t < span / 2u; t = t + 1u) {\n"
         "            let lo = own + 2u * j * (t / j) + (t % j);\n"
         "            exchange(lo, lo + j, " + ascending + ");\n"
         "          }\n"
         "        }\n"
         "        workgroupBarrier();\n"
         "        break;\n"
         "      }\n"
         "      for (var t = lid; t < chunk / 2u; t = t + " + W + ") {\n"
         "        let lo = 2u * j * (t / j) + (t % j);\n"
         "        exchange(lo, lo + j, " + ascending + ");\n"
         "      }\n"
         "      workgroupBarrier();\n"
         "      j = j / 2u;\n"
         "    }\n";
}

// WGSL of the sort mode's network (after the entries are in sh_key / sh_idx).
std::string sort_network(const std::string& W) {
  return "  let full = u.full != 0u;\n"
         "  var k = select(u.stage_k, 2u, full);\n"
         "  loop {\n"
         "    var j = select(chunk / 2u, k / 2u, full);\n" +
         stage_steps(W, "((start + lo) & k) == 0u") +
         "    if (!full || k >= chunk) { break; }\n"
         "    k = k * 2u;\n"
         "  }\n";
}

// WGSL of the select mode's runs and halving rounds.
std::string select_network(const std::string& W) {
  return "  let keep = u.keep;\n"
         "  for (var k = 2u; k <= keep; k = k * 2u) {\n"
         "    var j = k / 2u;\n" +
         stage_steps(W, "(lo & k) == 0u") +
         "  }\n"
         // Live runs lie `stride` apart; run 2q (ascending) takes the minimum with run
         // 2q + 1 (descending), then sorts in q's direction.
         "  var stride = keep;\n"
         "  var runs = chunk / keep;\n"
         "  loop {\n"
         "    if (runs == 1u) { break; }\n"
         "    let pairs = runs / 2u;\n"
         "    for (var t = lid; t < pairs * keep; t = t + " + W + ") {\n"
         "      let a = 2u * (t / keep) * stride + (t % keep);\n"
         "      let b = a + stride;\n"
         "      if (entry_less(vec3<u32>(sh_key[b], sh_idx[b]), vec3<u32>(sh_key[a], sh_idx[a]))) {\n"
         "        sh_key[a] = sh_key[b]; sh_idx[a] = sh_idx[b];\n"
         "      }\n"
         "    }\n"
         "    workgroupBarrier();\n"
         "    let half = keep / 2u;\n"
         "    for (var j = half; j > 0u; j = j / 2u) {\n"
         "      for (var t = lid; t < pairs * half; t = t + " + W + ") {\n"
         "        let q = t / half;\n"
         "        let r = t % half;\n"
         "        let lo = 2u * q * stride + 2u * j * (r / j) + (r % j);\n"
         "        exchange(lo, lo + j, (q & 1u) == 0u);\n"
         "      }\n"
         "      workgroupBarrier();\n"
         "    }\n"
         "    stride = stride * 2u;\n"
         "    runs = pairs;\n"
         "  }\n";
}

void local_pass(Context& ctx, const SortInput& in, WGPUBuffer scratch, const LocalPass& p) {
  static const UniformLayout layout({{"in_offset"}, {"n"}, {"chunk"}, {"m"}, {"segs"}, {"keep"},
                                     {"stage_k"}, {"src_base"}, {"dst_base"}, {"descending"},
                                     {"full"}, {"from_input"}, {"take"}, {"values_offset"},
                                     {"indices_offset"}});
  const uint64_t capacity = chunk_max(ctx);
  const uint32_t wg = static_cast<uint32_t>(std::min<uint64_t>(256, std::max<uint64_t>(1, p.chunk / 2)));
  const RowResult none;
  const RowResult& out = p.result ? *p.result : none;
  const bool direct = p.result != nullptr;
  if (direct && p.segs != 1)
    fail(ErrorKind::Internal, "torch_webgpu: sort's local pass writes results of whole rows only");
  KernelLaunch l;
  l.typed = {"sort:local", {static_cast<uint32_t>(in.dtype), u32_of(capacity), p.select ? 1u : 0u,
                            direct ? 1u : 0u}};
  if (direct) l.buffers = result_buffers(in, scratch, Access::ReadWrite, out.values, out.indices);
  else l.buffers = {{in.buffer, Access::Read, false}, {scratch, Access::ReadWrite, false}};
  l.declare(layout)
      .set_u32("n", u32_of(in.n))
      .set_u32("take", u32_of(out.take))
      .set_u32("values_offset", u32_of(out.values_offset))
      .set_u32("indices_offset", u32_of(out.indices_offset))
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("chunk", u32_of(p.chunk))
      .set_u32("m", u32_of(p.m))
      .set_u32("segs", u32_of(p.segs))
      .set_u32("keep", u32_of(p.keep))
      .set_u32("stage_k", u32_of(p.k))
      .set_u32("src_base", u32_of(p.src_base))
      .set_u32("dst_base", u32_of(p.dst_base))
      .set_u32("descending", p.descending ? 1u : 0u)
      .set_u32("full", p.full ? 1u : 0u)
      .set_u32("from_input", p.from_input ? 1u : 0u);
  l.grid = Grid::Groups;
  l.count = in.rows * p.segs;
  l.workgroup = wg;
  const DType dtype = in.dtype;
  const bool select = p.select;
  l.body = [&l, dtype, wg, capacity, select, direct] {
    const std::string W = std::to_string(wg) + "u";
    const std::string C = std::to_string(capacity);
    const std::string store =
        direct ? "  if (valid) {\n"
                 "    let dst = group * u.take;\n"
                 "    for (var t = lid; t < u.take; t = t + " + W + ") {\n"
                 "      let i = sh_idx[t];\n"
                 "      store_value(u.values_offset + dst + t, load_in(u.in_offset + row * u.n + i));\n"
                 "      store_index(u.indices_offset + dst + t, vec2<u32>(i, 0u));\n"
                 "    }\n"
                 "  }\n"
               : "  if (valid) {\n"
                 "    let dst = u.dst_base + group * u.keep;\n"
                 "    for (var t = lid; t < u.keep; t = t + " + W + ") {\n"
                 "      set_entry(dst + t, vec3<u32>(sh_key[t], sh_idx[t]));\n"
                 "    }\n"
                 "  }\n";
    std::string stores;
    if (direct)
      stores = result_stores(l.buffers, dtype);
    return kernel_load("load_in", l.buffers, 0, dtype) + key_function(dtype) + stores +
           entry_functions(1) + set_entry_function(1) +
           "var<workgroup> sh_key: array<vec2<u32>, " + C + ">;\n"
           "var<workgroup> sh_idx: array<u32, " + C + ">;\n"
           // Orders entries lo < hi of the workgroup's chunk.
           "fn exchange(lo: u32, hi: u32, ascending: bool) {\n"
           "  let a = vec3<u32>(sh_key[lo], sh_idx[lo]);\n"
           "  let b = vec3<u32>(sh_key[hi], sh_idx[hi]);\n"
           "  if (entry_less(b, a) == ascending) {\n"
           "    sh_key[lo] = b.xy; sh_idx[lo] = b.z;\n"
           "    sh_key[hi] = a.xy; sh_idx[hi] = a.z;\n"
           "  }\n"
           "}\n" +
           kernel_main(Grid::Groups, wg) +
           "  let chunk = u.chunk;\n"
           "  let span = chunk / " + W + ";\n"
           "  let own = lid * span;\n"
           "  let valid = group < frame_count();\n"
           "  let row = group / u.segs;\n"
           "  let start = (group % u.segs) * chunk;\n"
           "  let flip = select(vec2<u32>(0u), vec2<u32>(0xffffffffu), u.descending != 0u);\n"
           "  for (var t = lid; t < chunk; t = t + " + W + ") {\n"
           "    var e = vec3<u32>(0xffffffffu);\n"
           "    let pos = start + t;\n"
           "    if (valid && pos < u.m) {\n"
           "      if (u.from_input != 0u) {\n"
           "        e = vec3<u32>(sort_key(load_in(u.in_offset + row * u.m + pos)) ^ flip, pos);\n"
           "      } else {\n"
           "        e = get_entry(u.src_base + row * u.m + pos);\n"
           "      }\n"
           "    }\n"
           "    sh_key[t] = e.xy;\n"
           "    sh_idx[t] = e.z;\n"
           "  }\n"
           "  workgroupBarrier();\n" +
           (select ? select_network(W) : sort_network(W)) + store + "}\n";
  };
  launch_kernel(ctx, l);
}

// One compare-exchange step (k, j) of the network over the whole scratch buffer.
void global_step(Context& ctx, const SortInput& in, WGPUBuffer scratch, uint64_t k, uint64_t j) {
  static const UniformLayout layout({{"padded"}, {"stage_k"}, {"stage_j"}});
  const uint64_t padded = sort_padded_length(in.n);
  KernelLaunch l;
  l.typed = {"sort:global"};
  l.buffers = {{scratch, Access::ReadWrite, false}};
  l.declare(layout)
      .set_u32("padded", u32_of(padded))
      .set_u32("stage_k", u32_of(k))
      .set_u32("stage_j", u32_of(j));
  l.count = in.rows * padded / 2;
  l.body = [] {
    return entry_functions(0) + set_entry_function(0) + kernel_main(Grid::Invocations, 256) +
           "  let j = u.stage_j;\n"
           "  let k = u.stage_k;\n"
           "  let lo = 2u * j * (idx / j) + (idx % j);\n"
           "  let hi = lo + j;\n"
           "  let ascending = ((lo & (u.padded - 1u)) & k) == 0u;\n"
           "  let a = get_entry(lo);\n"
           "  let b = get_entry(hi);\n"
           "  if (entry_less(b, a) == ascending) { set_entry(lo, b); set_entry(hi, a); }\n"
           "}\n";
  };
  l.workgroup = 256;
  launch_kernel(ctx, l);
}

void check_sizes(const SortInput& in) {
  const uint64_t padded = sort_padded_length(in.n);
  if (in.n >= (1ull << 31) || in.rows * padded >= (1ull << 32) / 3 ||
      in.offset + in.rows * in.n >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: sort over too many elements");
}

// values[r * k + i] = input[r, idx], indices[r * k + i] = idx for the first k entries of
// each row, row r's entries starting at base + r * stride.
void take_entries(Context& ctx, const SortInput& in, WGPUBuffer scratch, uint64_t base,
                  uint64_t stride, uint64_t k, WGPUBuffer values, uint64_t values_offset,
                  WGPUBuffer indices, uint64_t indices_offset) {
  if (in.rows == 0 || k == 0) return;
  static const UniformLayout layout({{"in_offset"}, {"n"}, {"base"}, {"stride"}, {"take"},
                                     {"values_offset"}, {"indices_offset"}});
  KernelLaunch l;
  l.typed = {"sort:take", {static_cast<uint32_t>(in.dtype)}};
  l.buffers = result_buffers(in, scratch, Access::Read, values, indices);
  l.declare(layout)
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("n", u32_of(in.n))
      .set_u32("base", u32_of(base))
      .set_u32("stride", u32_of(stride))
      .set_u32("take", u32_of(k))
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("indices_offset", u32_of(indices_offset));
  l.count = in.rows * k;
  const DType dtype = in.dtype;
  l.body = [&l, dtype] {
    return kernel_load("load_in", l.buffers, 0, dtype) + entry_functions(1) +
           result_stores(l.buffers, dtype) +
           kernel_main(Grid::Invocations, 256) +
           "  let row = idx / u.take;\n"
           "  let pos = idx % u.take;\n"
           "  let i = get_entry(u.base + row * u.stride + pos).z;\n"
           "  store_value(u.values_offset + idx, load_in(u.in_offset + row * u.n + i));\n"
           "  store_index(u.indices_offset + idx, vec2<u32>(i, 0u));\n"
           "}\n";
  };
  l.workgroup = 256;
  launch_kernel(ctx, l);
}

}  // namespace

uint64_t sort_padded_length(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p *= 2;
  return std::max<uint64_t>(p, 2);
}

uint64_t sort_scratch_words(uint64_t rows, uint64_t n) { return rows * sort_padded_length(n) * 3; }

namespace {

// sort_rows, and with `result` the first result->take entries of each row written out:
// by the local pass itself when one chunk holds a row, else by a take after the sort.
void sort_rows_into(Context& ctx, const SortInput& in, bool descending, WGPUBuffer scratch,
                    const RowResult* result) {
  if (in.rows == 0 || in.n == 0) return;
  check_sizes(in);
  const uint64_t padded = sort_padded_length(in.n);
  const uint64_t chunk = std::min(padded, chunk_max(ctx));
  LocalPass p;
  p.descending = descending;
  p.chunk = p.keep = chunk;
  p.segs = padded / chunk;
  p.from_input = p.full = true;
  p.m = in.n;
  if (p.segs == 1) {
    p.result = result;
    return local_pass(ctx, in, scratch, p);
  }
  local_pass(ctx, in, scratch, p);
  p.from_input = p.full = false;
  p.m = padded;
  for (uint64_t k = chunk * 2; k <= padded; k *= 2) {
    for (uint64_t j = k / 2; j >= chunk; j /= 2) global_step(ctx, in, scratch, k, j);
    p.k = k;
    local_pass(ctx, in, scratch, p);
  }
  if (result)
    take_entries(ctx, in, scratch, 0, padded, result->take, result->values,
                 result->values_offset, result->indices, result->indices_offset);
}

}  // namespace

void sort_rows(Context& ctx, const SortInput& in, bool descending, WGPUBuffer scratch) {
  sort_rows_into(ctx, in, descending, scratch, nullptr);
}

void sort_take(Context& ctx, const SortInput& in, bool descending, WGPUBuffer scratch,
               uint64_t k, WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
               uint64_t indices_offset) {
  if (k == 0) return;
  const RowResult result{k, values, values_offset, indices, indices_offset};
  sort_rows_into(ctx, in, descending, scratch, &result);
}

void topk_rows(Context& ctx, const SortInput& in, uint64_t k, bool largest, WGPUBuffer scratch,
               WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
               uint64_t indices_offset) {
  if (in.rows == 0 || in.n == 0 || k == 0) return;
  check_sizes(in);
  const uint64_t chunk = chunk_max(ctx);
  uint64_t keep = 2;
  while (keep < k) keep *= 2;
  if (in.n <= chunk || 2 * keep > chunk)
    return sort_take(ctx, in, largest, scratch, k, values, values_offset, indices, indices_offset);
  const RowResult result{k, values, values_offset, indices, indices_offset};
  // The first k of a row (in the strict order of key, then index) are among the first
  // k of whichever segment holds them: each level keeps the best `keep` of every chunk,
  // cutting a row to segs * keep entries, until one chunk holds the row. The result is
  // the full sort's first k, ties and NaNs included. Levels alternate between two regions
  // of the scratch (the second starts after the first level's output).
  LocalPass p;
  p.descending = largest;
  p.select = p.from_input = true;
  p.chunk = chunk;
  p.keep = keep;
  p.m = in.n;
  p.segs = (in.n + chunk - 1) / chunk;
  const uint64_t second = in.rows * p.segs * keep;
  for (;;) {
    local_pass(ctx, in, scratch, p);
    if (p.segs == 1) return;  // the last level wrote the values and indices
    const uint64_t m = p.segs * keep;
    p.from_input = false;
    p.src_base = p.dst_base;
    p.dst_base = p.dst_base == 0 ? second : 0;
    p.m = m;
    p.segs = (m + chunk - 1) / chunk;
    if (p.segs == 1) {
      // The last level sorts only what is left, and writes the result.
      p.chunk = std::max(2 * keep, sort_padded_length(m));
      p.result = &result;
    }
  }
}

void sorted_pick(Context& ctx, const SortInput& in, WGPUBuffer scratch, SortedPick pick,
                 uint64_t position, WGPUBuffer values, uint64_t values_offset,
                 WGPUBuffer indices, uint64_t indices_offset) {
  if (in.rows == 0 || in.n == 0) return;
  static const UniformLayout layout({{"in_offset"}, {"n"}, {"padded"}, {"pick"}, {"position"},
                                     {"is_float"}, {"values_offset"}, {"indices_offset"}});
  KernelLaunch l;
  l.typed = {"sort:pick", {static_cast<uint32_t>(in.dtype)}};
  l.buffers = result_buffers(in, scratch, Access::Read, values, indices);
  l.declare(layout)
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("n", u32_of(in.n))
      .set_u32("padded", u32_of(sort_padded_length(in.n)))
      .set_u32("pick", static_cast<uint32_t>(pick))
      .set_u32("position", u32_of(position))
      .set_u32("is_float", is_floating(in.dtype) ? 1u : 0u)
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("indices_offset", u32_of(indices_offset));
  l.count = in.rows;
  const DType dtype = in.dtype;
  l.body = [&l, dtype] {
    return kernel_load("load_in", l.buffers, 0, dtype) + entry_functions(1) +
           result_stores(l.buffers, dtype) +
           kernel_main(Grid::Invocations, 256) +
           "  let n = u.n;\n"
           "  let base = idx * u.padded;\n"
           "  let pick = u.pick;\n"
           "  var pos = u.position;\n"
           "  if (pick == 1u || pick == 2u) {\n"
           "    // First NaN of the row (n when none): NaNs sort last.\n"
           "    var first_nan = n;\n"
           "    if (u.is_float != 0u && get_entry(base + n - 1u).x == " + kNanKey + ") {\n"
           "      var lo = 0u;\n"
           "      var hi = n - 1u;\n"
           "      while (lo < hi) {\n"
           "        let mid = (lo + hi) / 2u;\n"
           "        if (get_entry(base + mid).x == " + kNanKey + ") { hi = mid; } else { lo = mid + 1u; }\n"
           "      }\n"
           "      first_nan = lo;\n"
           "    }\n"
           "    if (pick == 1u) {\n"
           "      pos = select((n - 1u) / 2u, first_nan, first_nan < n);\n"
           "    } else {\n"
           "      pos = select((first_nan - 1u) / 2u, 0u, first_nan == 0u);\n"
           "    }\n"
           "  }\n"
           "  if (pick == 3u) {\n"
           "    var best = 0u;\n"
           "    var run = 0u;\n"
           "    var prev = vec2<u32>(0u);\n"
           "    for (var i = 0u; i < n; i = i + 1u) {\n"
           "      let key = get_entry(base + i).xy;\n"
           "      if (i > 0u && all(key == prev)) { run = run + 1u; } else { run = 1u; }\n"
           "      prev = key;\n"
           "      if (run > best) { best = run; pos = i; }\n"
           "    }\n"
           "  }\n"
           "  let i = get_entry(base + pos).z;\n"
           "  store_value(u.values_offset + idx, load_in(u.in_offset + idx * n + i));\n"
           "  store_index(u.indices_offset + idx, vec2<u32>(i, 0u));\n"
           "}\n";
  };
  l.workgroup = 256;
  launch_kernel(ctx, l);
}

namespace {

// Comparisons in a compute type, the way the CPU's operators behave (NaN: false).
std::string compare_functions(DType dtype) {
  switch (compute_type_for(dtype)) {
    case Compute::F32:
      return "fn c_ge(a: f32, b: f32) -> bool { return f32_ge(a, b); }\n"
             "fn c_gt(a: f32, b: f32) -> bool { return f32_gt(a, b); }\n"
             "fn c_eq(a: f32, b: f32) -> bool { return f32_eq(a, b); }\n"
             "fn c_nan(a: f32) -> bool { return is_nan(a); }\n";
    case Compute::I32:
      return "fn c_ge(a: i32, b: i32) -> bool { return a >= b; }\n"
             "fn c_gt(a: i32, b: i32) -> bool { return a > b; }\n"
             "fn c_eq(a: i32, b: i32) -> bool { return a == b; }\n"
             "fn c_nan(a: i32) -> bool { return false; }\n";
    case Compute::I64:
      return "fn c_ge(a: vec2<u32>, b: vec2<u32>) -> bool { return !i64_lt(a, b); }\n"
             "fn c_gt(a: vec2<u32>, b: vec2<u32>) -> bool { return i64_lt(b, a); }\n"
             "fn c_eq(a: vec2<u32>, b: vec2<u32>) -> bool { return i64_eq(a, b); }\n"
             "fn c_nan(a: vec2<u32>) -> bool { return false; }\n";
    default:
      fail(ErrorKind::Unsupported, std::string("torch_webgpu: search in ") + dtype_name(dtype));
  }
}

}  // namespace

void search_sorted(Context& ctx, const SearchArgs& a) {
  if (a.count == 0 || a.m == 0) return;
  if (a.count >= (1ull << 32) || a.boundaries_offset + a.m * ((a.count - 1) / a.per_row + 1) >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: search over too many elements");
  const bool with_sorter = a.sorter != nullptr;
  static const UniformLayout layout({{"boundaries_offset"}, {"values_offset"}, {"out_offset"},
                                     {"sorter_offset"}, {"m"}, {"per_row"}, {"right"},
                                     {"invert"}});
  KernelLaunch l;
  l.typed = {"sort:search", {static_cast<uint32_t>(a.dtype), static_cast<uint32_t>(a.out_dtype),
                             with_sorter ? 1u : 0u, a.membership ? 1u : 0u}};
  l.buffers = {{a.boundaries, Access::Read, false}, {a.values, Access::Read, false},
               {a.out, Access::ReadWrite, is_subword(a.out_dtype)}};
  if (with_sorter) l.buffers.push_back({a.sorter, Access::Read, false});
  l.declare(layout)
      .set_u32("boundaries_offset", u32_of(a.boundaries_offset))
      .set_u32("values_offset", u32_of(a.values_offset))
      .set_u32("out_offset", u32_of(a.out_offset))
      .set_u32("sorter_offset", u32_of(a.sorter_offset))
      .set_u32("m", u32_of(a.m))
      .set_u32("per_row", u32_of(a.per_row))
      .set_u32("right", a.right ? 1u : 0u)
      .set_u32("invert", a.invert ? 1u : 0u);
  l.count = a.count;
  l.workgroup = 256;
  const SearchArgs args = a;
  l.body = [&l, args, with_sorter] {
    const Compute oc = args.membership ? Compute::I32 : compute_type_for(args.out_dtype);
    std::string s = kernel_load("load_bd", l.buffers, 0, args.dtype) +
                    kernel_load("load_val", l.buffers, 1, args.dtype) +
                    kernel_store("store_out", l.buffers, 2, args.out_dtype, oc) +
                    compare_functions(args.dtype);
    if (with_sorter) {
      s += "fn entry(row_start: u32, j: u32) -> " +
           std::string(wgsl_type(compute_type_for(args.dtype))) +
           " { return load_bd(u.boundaries_offset + row_start + buf3[2u * (u.sorter_offset + row_start + j)]); }\n";
    } else {
      s += "fn entry(row_start: u32, j: u32) -> " +
           std::string(wgsl_type(compute_type_for(args.dtype))) +
           " { return load_bd(u.boundaries_offset + row_start + j); }\n";
    }
    s += kernel_main(Grid::Invocations, 256) +
         "  let m = u.m;\n"
         "  let row_start = (idx / u.per_row) * m;\n"
         "  let v = load_val(u.values_offset + idx);\n"
         "  var lo = 0u;\n"
         "  var hi = m;\n"
         "  while (lo < hi) {\n"
         "    let mid = lo + ((hi - lo) >> 1u);\n"
         "    let e = entry(row_start, mid);\n";
    if (args.membership) {
      // Rows sorted with NaNs last: NaN counts as above every value.
      s += "    if (!(c_nan(e) || c_ge(e, v))) { lo = mid + 1u; } else { hi = mid; }\n"
           "  }\n"
           "  let found = lo < m && c_eq(entry(row_start, lo), v);\n"
           "  store_out(u.out_offset + idx, select(0, 1, found != (u.invert != 0u)));\n";
    } else {
      s += "    let go_right = select(!c_ge(e, v), !c_gt(e, v), u.right != 0u);\n"
           "    if (go_right) { lo = mid + 1u; } else { hi = mid; }\n"
           "  }\n";
      s += oc == Compute::I64 ? "  store_out(u.out_offset + idx, vec2<u32>(lo, 0u));\n"
                              : "  store_out(u.out_offset + idx, i32(lo));\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

void unique_flags(Context& ctx, const SortInput& in, WGPUBuffer scratch, WGPUBuffer first) {
  if (in.n == 0) return;
  const bool sorted = scratch != nullptr;
  static const UniformLayout layout({{"in_offset"}});
  KernelLaunch l;
  l.typed = {"unique:flags", {static_cast<uint32_t>(in.dtype), sorted ? 1u : 0u}};
  l.buffers = {{in.buffer, Access::Read, false}, {first, Access::ReadWrite, false}};
  if (sorted) l.buffers.push_back({scratch, Access::Read, false});
  l.declare(layout).set_u32("in_offset", u32_of(in.offset));
  l.count = in.n;
  l.workgroup = 256;
  const DType dtype = in.dtype;
  l.body = [&l, dtype, sorted] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) + compare_functions(dtype);
    if (sorted) s += entry_functions(2) + "fn at(i: u32) -> u32 { return get_entry(i).z; }\n";
    else s += "fn at(i: u32) -> u32 { return i; }\n";
    return s + kernel_main(Grid::Invocations, 256) +
           "  var start = idx == 0u;\n"
           "  if (!start) { start = !c_eq(load_in(u.in_offset + at(idx)), load_in(u.in_offset + at(idx - 1u))); }\n"
           "  buf1[idx] = select(0u, 1u, start);\n"
           "}\n";
  };
  launch_kernel(ctx, l);
}

void unique_scatter(Context& ctx, const SortInput& in, WGPUBuffer scratch, WGPUBuffer first,
                    WGPUBuffer group, WGPUBuffer values, uint64_t values_offset,
                    WGPUBuffer inverse, uint64_t inverse_offset, WGPUBuffer start) {
  if (in.n == 0) return;
  const bool sorted = scratch != nullptr;
  static const UniformLayout layout({{"in_offset"}, {"values_offset"}, {"inverse_offset"}});
  KernelLaunch l;
  l.typed = {"unique:scatter", {static_cast<uint32_t>(in.dtype), sorted ? 1u : 0u,
                                inverse ? 1u : 0u, start ? 1u : 0u}};
  l.buffers = {{in.buffer, Access::Read, false},
               {first, Access::Read, false},
               {group, Access::Read, false},
               {values, Access::ReadWrite, is_subword(in.dtype)}};
  const size_t b_scratch = sorted ? l.buffers.size() : 0;
  if (sorted) l.buffers.push_back({scratch, Access::Read, false});
  const size_t b_inverse = inverse ? l.buffers.size() : 0;
  if (inverse) l.buffers.push_back({inverse, Access::ReadWrite, false});
  const size_t b_start = start ? l.buffers.size() : 0;
  if (start) l.buffers.push_back({start, Access::ReadWrite, false});
  l.declare(layout)
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("inverse_offset", u32_of(inverse_offset));
  l.count = in.n;
  l.workgroup = 256;
  const DType dtype = in.dtype;
  l.body = [&l, dtype, sorted, b_scratch, b_inverse, b_start] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    kernel_store("store_value", l.buffers, 3, dtype, compute_type_for(dtype));
    if (sorted) s += entry_functions(b_scratch) + "fn at(i: u32) -> u32 { return get_entry(i).z; }\n";
    else s += "fn at(i: u32) -> u32 { return i; }\n";
    if (b_inverse) s += kernel_store("store_inverse", l.buffers, b_inverse, DType::Int64, Compute::I64);
    s += kernel_main(Grid::Invocations, 256) +
         "  let g = buf2[idx] - 1u;\n"
         "  let orig = at(idx);\n";
    if (b_inverse) s += "  store_inverse(u.inverse_offset + orig, vec2<u32>(g, 0u));\n";
    s += "  if (buf1[idx] != 0u) {\n"
         "    store_value(u.values_offset + g, load_in(u.in_offset + orig));\n";
    if (b_start) s += "    buf" + std::to_string(b_start) + "[g] = idx;\n";
    return s + "  }\n}\n";
  };
  launch_kernel(ctx, l);
}

void unique_counts(Context& ctx, WGPUBuffer start, uint64_t groups, uint64_t n,
                   WGPUBuffer counts, uint64_t counts_offset) {
  static const UniformLayout layout({{"n"}, {"counts_offset"}});
  KernelLaunch l;
  l.typed = {"unique:counts"};
  l.buffers = {{start, Access::Read, false}, {counts, Access::ReadWrite, false}};
  l.declare(layout).set_u32("n", u32_of(n)).set_u32("counts_offset", u32_of(counts_offset));
  l.count = groups;
  l.workgroup = 256;
  l.body = [&l] {
    return kernel_store("store_count", l.buffers, 1, DType::Int64, Compute::I64) +
           kernel_main(Grid::Invocations, 256) +
           "  let end = select(u.n, buf0[idx + 1u], idx + 1u < frame_count());\n"
           "  store_count(u.counts_offset + idx, vec2<u32>(end - buf0[idx], 0u));\n"
           "}\n";
  };
  launch_kernel(ctx, l);
}

namespace {

// Calls fn(first, count) over chunks of n elements read at up to `element_bytes` each:
// once over all of them unless one of `buffers` is larger than a binding, then in chunks
// that each fit one window.
void over_chunks(Context& ctx, uint64_t n, uint64_t element_bytes, std::initializer_list<WGPUBuffer> buffers,
                 const std::function<void(uint64_t, uint64_t)>& fn) {
  bool windowed = false;
  for (WGPUBuffer b : buffers) windowed = windowed || needs_window(ctx, b);
  const uint64_t chunk = windowed ? std::max<uint64_t>(1, window_budget(ctx) / element_bytes) : n;
  for (uint64_t lo = 0; lo < n; lo += chunk) fn(lo, std::min(chunk, n - lo));
}

void value_range_launch(Context& ctx, const SortInput& in, WGPUBuffer range);
void histogram_launch(Context& ctx, const HistogramArgs& a);

}  // namespace

void value_range(Context& ctx, const SortInput& in, WGPUBuffer range) {
  if (in.n == 0) return;
  if (needs_window(ctx, in.buffer)) {
    // Min and max are atomics into `range`: chunks of the input add up.
    return over_chunks(ctx, in.n, element_size(in.dtype), {in.buffer}, [&](uint64_t lo, uint64_t n) {
      SortInput piece = in;
      piece.offset += lo;
      piece.n = n;
      piece.rows = 1;
      value_range_launch(ctx, piece, range);
    });
  }
  value_range_launch(ctx, in, range);
}

namespace {

void value_range_launch(Context& ctx, const SortInput& in, WGPUBuffer range) {
  static const UniformLayout layout({{"in_offset"}});
  KernelLaunch l;
  l.typed = {"sort:range", {static_cast<uint32_t>(in.dtype)}};
  l.buffers = {{in.buffer, Access::Read, false}, {range, Access::ReadWrite, true}};
  l.declare(layout).set_u32("in_offset", u32_of(in.offset));
  l.buffers[0].touches(l.word_of("in_offset"), in.dtype, in.offset, in.n);
  l.count = in.n;
  l.workgroup = 256;
  const DType dtype = in.dtype;
  l.body = [&l, dtype] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) + key_function(dtype) +
                    kernel_main(Grid::Invocations, 256) +
                    "  let key = sort_key(load_in(u.in_offset + idx));\n"
                    "  atomicMin(&buf1[0], key.x);\n"
                    "  atomicMax(&buf1[1], key.x);\n";
    if (compute_type_for(dtype) == Compute::I64)
      s += "  if (key.x == 0x80000000u) { atomicMax(&buf1[2], key.y); }\n";
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace

void histogram(Context& ctx, const HistogramArgs& a) {
  if (a.in.n == 0) return;
  if (needs_window(ctx, a.in.buffer) || needs_window(ctx, a.weights)) {
    // Counts are atomic adds: chunks of the input (and weights) add up.
    const uint64_t bytes = std::max<uint64_t>(element_size(a.in.dtype), a.weights ? element_size(a.weights_dtype) : 0);
    return over_chunks(ctx, a.in.n, bytes, {a.in.buffer, a.weights}, [&](uint64_t lo, uint64_t n) {
      HistogramArgs piece = a;
      piece.in.offset += lo;
      piece.in.n = n;
      piece.weights_offset += lo;
      histogram_launch(ctx, piece);
    });
  }
  histogram_launch(ctx, a);
}

namespace {

void histogram_launch(Context& ctx, const HistogramArgs& a) {
  const bool weighted = a.weights != nullptr;
  const Compute c = compute_type_for(a.in.dtype);
  static const UniformLayout layout({{"in_offset"}, {"counts_offset"}, {"weights_offset"},
                                     {"bins"}, {"lo", UniformType::F32}, {"hi", UniformType::F32}});
  KernelLaunch l;
  l.typed = {"sort:histogram", {static_cast<uint32_t>(a.in.dtype), weighted ? 1u : 0u,
                                weighted ? static_cast<uint32_t>(a.weights_dtype) : 0u}};
  const bool int_weights = weighted && !is_floating(a.weights_dtype);
  const DType weights_dtype = a.weights_dtype;
  l.buffers = {{a.in.buffer, Access::Read, false}, {a.counts, Access::ReadWrite, true}};
  if (weighted) l.buffers.push_back({a.weights, Access::Read, false});
  l.declare(layout)
      .set_u32("in_offset", u32_of(a.in.offset))
      .set_u32("counts_offset", u32_of(a.counts_offset))
      .set_u32("weights_offset", u32_of(a.weights_offset))
      .set_u32("bins", a.bins)
      .set_f32("lo", a.lo)
      .set_f32("hi", a.hi);
  l.buffers[0].touches(l.word_of("in_offset"), a.in.dtype, a.in.offset, a.in.n);
  if (weighted) l.buffers[2].touches(l.word_of("weights_offset"), a.weights_dtype, a.weights_offset, a.in.n);
  l.count = a.in.n;
  l.workgroup = 256;
  const DType dtype = a.in.dtype;
  l.body = [&l, dtype, c, weighted, int_weights, weights_dtype] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    (weighted ? kernel_load("load_weight", l.buffers, 2, weights_dtype) : "") +
                    kernel_main(Grid::Invocations, 256) +
                    "  let x = load_in(u.in_offset + idx);\n";
    if (c == Compute::F32) {
      // The CPU's linear binning: (x - lo) * bins / (hi - lo), the top edge closed.
      // Half types compute each step in float and round to their own type, as the CPU does.
      std::string rnd = "fn rnd(v: f32) -> f32 { return v; }\n";
      if (dtype == DType::Float16) rnd = "fn rnd(v: f32) -> f32 { return f16_bits_to_f32(f32_to_f16_bits(v)); }\n";
      if (dtype == DType::BFloat16) rnd = "fn rnd(v: f32) -> f32 { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }\n";
      s = rnd + s;
      s += "  let lo = u.lo;\n"
           "  let hi = u.hi;\n"
           "  if (!(f32_ge(x, lo) && f32_le(x, hi))) { return; }\n"
           "  let bins = u.bins;\n"
           "  let scaled = rnd(rnd(x - lo) * rnd(f32(bins)));\n"
           "  let bin = min(u32(rnd(div_f32(scaled, rnd(hi - lo)))), bins - 1u);\n";
    } else if (c == Compute::I64) {
      s += "  let bin = x.x;\n";
    } else {
      s += "  let bin = u32(x);\n";
    }
    if (int_weights) {
      s += "  let w = " + wgsl_convert(compute_type_for(weights_dtype), Compute::I64, "load_weight(u.weights_offset + idx)") + ";\n"
           "  let at = 2u * (u.counts_offset + bin);\n"
           "  let old = atomicAdd(&buf1[at], w.x);\n"
           "  let carry = select(0u, 1u, old + w.x < old);\n"
           "  atomicAdd(&buf1[at + 1u], w.y + carry);\n";
    } else if (weighted) {
      s += "  let w = load_weight(u.weights_offset + idx);\n"
           "  let at = u.counts_offset + bin;\n"
           "  var old = atomicLoad(&buf1[at]);\n"
           "  loop {\n"
           "    let r = atomicCompareExchangeWeak(&buf1[at], old, bitcast<u32>(bitcast<f32>(old) + w));\n"
           "    if (r.exchanged) { break; }\n"
           "    old = r.old_value;\n"
           "  }\n";
    } else {
      s += "  atomicAdd(&buf1[u.counts_offset + bin], 1u);\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace

namespace {

// `fn slice_less(a, b) -> bool`: slices a and b in sort-key order, then by number.
std::string slice_compare(DType dtype) {
  return key_function(dtype) +
         "fn slice_less(a: u32, b: u32) -> bool {\n"
         "  if (a == 0xffffffffu || b == 0xffffffffu) { return a < b; }\n"
         "  let r = u.n;\n"
         "  for (var c = 0u; c < r; c = c + 1u) {\n"
         "    let ka = sort_key(load_in(u.in_offset + a * r + c));\n"
         "    let kb = sort_key(load_in(u.in_offset + b * r + c));\n"
         "    if (ka.x != kb.x) { return ka.x < kb.x; }\n"
         "    if (ka.y != kb.y) { return ka.y < kb.y; }\n"
         "  }\n"
         "  return a < b;\n"
         "}\n";
}

// Sets the input's element offset and the slice length, which every slice kernel's
// layout declares (after them, its own).
KernelLaunch& declare_slices(KernelLaunch& l, const UniformLayout& layout, const SortInput& in) {
  return l.declare(layout).set_u32("in_offset", u32_of(in.offset)).set_u32("n", u32_of(in.n));
}

void check_slices(const SortInput& in) {
  if (in.offset + in.rows * in.n >= (1ull << 32) || in.rows >= (1ull << 31))
    fail(ErrorKind::Unsupported, "torch_webgpu: unique over too many elements");
}

}  // namespace

void sort_slices(Context& ctx, const SortInput& in, WGPUBuffer order) {
  if (in.rows == 0) return;
  check_slices(in);
  const uint64_t padded = sort_padded_length(in.rows);
  {
    static const UniformLayout layout({{"rows"}});
    KernelLaunch l;
    l.typed = {"slices:init"};
    l.buffers = {{order, Access::ReadWrite, false}};
    l.declare(layout).set_u32("rows", u32_of(in.rows));
    l.count = padded;
    l.workgroup = 256;
    l.body = [] {
      return kernel_main(Grid::Invocations, 256) +
             "  buf0[idx] = select(0xffffffffu, idx, idx < u.rows);\n}\n";
    };
    launch_kernel(ctx, l);
  }
  for (uint64_t k = 2; k <= padded; k *= 2) {
    for (uint64_t j = k / 2; j >= 1; j /= 2) {
      static const UniformLayout layout({{"in_offset"}, {"n"}, {"stage_k"}, {"stage_j"}});
      KernelLaunch l;
      l.typed = {"slices:step", {static_cast<uint32_t>(in.dtype)}};
      l.buffers = {{in.buffer, Access::Read, false}, {order, Access::ReadWrite, false}};
      declare_slices(l, layout, in).set_u32("stage_k", u32_of(k)).set_u32("stage_j", u32_of(j));
      l.count = padded / 2;
      l.workgroup = 64;
      const DType dtype = in.dtype;
      l.body = [&l, dtype] {
        return kernel_load("load_in", l.buffers, 0, dtype) + slice_compare(dtype) +
               kernel_main(Grid::Invocations, 64) +
               "  let j = u.stage_j;\n"
               "  let k = u.stage_k;\n"
               "  let lo = 2u * j * (idx / j) + (idx % j);\n"
               "  let hi = lo + j;\n"
               "  let ascending = (lo & k) == 0u;\n"
               "  let a = buf1[lo];\n"
               "  let b = buf1[hi];\n"
               "  if (slice_less(b, a) == ascending) { buf1[lo] = b; buf1[hi] = a; }\n"
               "}\n";
      };
      launch_kernel(ctx, l);
    }
  }
}

void slice_flags(Context& ctx, const SortInput& in, WGPUBuffer order, WGPUBuffer first) {
  if (in.rows == 0) return;
  check_slices(in);
  const bool sorted = order != nullptr;
  static const UniformLayout layout({{"in_offset"}, {"n"}});
  KernelLaunch l;
  l.typed = {"slices:flags", {static_cast<uint32_t>(in.dtype), sorted ? 1u : 0u}};
  l.buffers = {{in.buffer, Access::Read, false}, {first, Access::ReadWrite, false}};
  if (sorted) l.buffers.push_back({order, Access::Read, false});
  declare_slices(l, layout, in);
  l.count = in.rows;
  l.workgroup = 256;
  const DType dtype = in.dtype;
  l.body = [&l, dtype, sorted] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) + compare_functions(dtype);
    s += sorted ? "fn at(i: u32) -> u32 { return buf2[i]; }\n" : "fn at(i: u32) -> u32 { return i; }\n";
    return s + kernel_main(Grid::Invocations, 256) +
           "  var start = idx == 0u;\n"
           "  if (!start) {\n"
           "    let r = u.n;\n"
           "    let a = at(idx) * r + u.in_offset;\n"
           "    let b = at(idx - 1u) * r + u.in_offset;\n"
           "    for (var c = 0u; c < r; c = c + 1u) {\n"
           "      if (!c_eq(load_in(a + c), load_in(b + c))) { start = true; break; }\n"
           "    }\n"
           "  }\n"
           "  buf1[idx] = select(0u, 1u, start);\n"
           "}\n";
  };
  launch_kernel(ctx, l);
}

void slice_scatter(Context& ctx, const SortInput& in, WGPUBuffer order, WGPUBuffer first,
                   WGPUBuffer group, WGPUBuffer values, uint64_t values_offset,
                   WGPUBuffer inverse, uint64_t inverse_offset, WGPUBuffer start) {
  if (in.rows == 0) return;
  check_slices(in);
  const bool sorted = order != nullptr;
  static const UniformLayout layout({{"in_offset"}, {"n"}, {"values_offset"}, {"inverse_offset"}});
  KernelLaunch l;
  l.typed = {"slices:scatter", {static_cast<uint32_t>(in.dtype), sorted ? 1u : 0u}};
  l.buffers = {{in.buffer, Access::Read, false},
               {first, Access::Read, false},
               {group, Access::Read, false},
               {values, Access::ReadWrite, is_subword(in.dtype)},
               {inverse, Access::ReadWrite, false},
               {start, Access::ReadWrite, false}};
  if (sorted) l.buffers.push_back({order, Access::Read, false});
  declare_slices(l, layout, in)
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("inverse_offset", u32_of(inverse_offset));
  l.count = in.rows;
  l.workgroup = 256;
  const DType dtype = in.dtype;
  l.body = [&l, dtype, sorted] {
    std::string s = kernel_load("load_in", l.buffers, 0, dtype) +
                    kernel_store("store_value", l.buffers, 3, dtype, compute_type_for(dtype)) +
                    kernel_store("store_inverse", l.buffers, 4, DType::Int64, Compute::I64);
    s += sorted ? "fn at(i: u32) -> u32 { return buf6[i]; }\n" : "fn at(i: u32) -> u32 { return i; }\n";
    return s + kernel_main(Grid::Invocations, 256) +
           "  let g = buf2[idx] - 1u;\n"
           "  let orig = at(idx);\n"
           "  store_inverse(u.inverse_offset + orig, vec2<u32>(g, 0u));\n"
           "  if (buf1[idx] != 0u) {\n"
           "    let r = u.n;\n"
           "    for (var c = 0u; c < r; c = c + 1u) {\n"
           "      store_value(u.values_offset + g * r + c, load_in(u.in_offset + orig * r + c));\n"
           "    }\n"
           "    buf5[g] = idx;\n"
           "  }\n"
           "}\n";
  };
  launch_kernel(ctx, l);
}


void quickselect_rows(Context& ctx, const SortInput& in, uint64_t k, WGPUBuffer scratch,
                      WGPUBuffer values, uint64_t values_offset, WGPUBuffer indices,
                      uint64_t indices_offset) {
  if (in.rows == 0 || in.n == 0) return;
  if (in.offset + in.rows * in.n >= (1ull << 32) || in.rows * in.n * 3 >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: kthvalue over too many elements");
  static const UniformLayout layout(
      {{"in_offset"}, {"n"}, {"position"}, {"values_offset"}, {"indices_offset"}});
  KernelLaunch l;
  l.typed = {"sort:quickselect", {static_cast<uint32_t>(in.dtype)}};
  l.buffers = result_buffers(in, scratch, Access::ReadWrite, values, indices);
  l.declare(layout)
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("n", u32_of(in.n))
      .set_u32("position", u32_of(k))
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("indices_offset", u32_of(indices_offset));
  l.count = in.rows;
  l.workgroup = 64;
  const DType dtype = in.dtype;
  l.body = [&l, dtype] {
    return kernel_load("load_in", l.buffers, 0, dtype) + key_function(dtype) +
           entry_functions(1) + set_entry_function(1) +
           kernel_main(Grid::Invocations, 64) +
           "  let n = u.n;\n"
           "  let k = u.position;\n"
           "  let base = idx * n;\n"
           "  let src = u.in_offset + idx * n;\n"
           "  for (var i = 0u; i < n; i = i + 1u) { set_entry(base + i, vec3<u32>(sort_key(load_in(src + i)), i)); }\n"
           "  // Positions are signed: the scan from the right may step below L.\n"
           "  var L = 0;\n"
           "  var R = i32(n) - 1;\n"
           "  let kk = i32(k);\n"
           "  loop {\n"
           "    if (R <= L) { break; }\n"
           "    if (R == L + 1) {\n"
           "      if (key_gt(base, L, R)) { swap_entries(base, L, R); }\n"
           "      break;\n"
           "    }\n"
           "    let P = (L + R) >> 1u;\n"
           "    swap_entries(base, P, L + 1);\n"
           "    if (key_gt(base, L + 1, R)) { swap_entries(base, L + 1, R); }\n"
           "    if (key_gt(base, L, R)) { swap_entries(base, L, R); }\n"
           "    if (key_gt(base, L + 1, L)) { swap_entries(base, L + 1, L); }\n"
           "    var i = L + 1;\n"
           "    var j = R;\n"
           "    let piv = get_entry(base + u32(L)).xy;\n"
           "    loop {\n"
           "      i = i + 1;\n"
           "      while (greater(piv, get_entry(base + u32(i)).xy)) { i = i + 1; }\n"
           "      j = j - 1;\n"
           "      while (greater(get_entry(base + u32(j)).xy, piv)) { j = j - 1; }\n"
           "      if (j < i) { break; }\n"
           "      swap_entries(base, i, j);\n"
           "    }\n"
           "    swap_entries(base, L, j);\n"
           "    if (j <= kk) { L = i; }\n"
           "    if (j >= kk) { R = j - 1; }\n"
           "  }\n"
           "  let at = get_entry(base + k).z;\n"
           "  store_value(u.values_offset + idx, load_in(src + at));\n"
           "  store_index(u.indices_offset + idx, vec2<u32>(at, 0u));\n"
           "}\n";
  };
  // Helpers the body uses (declared before main by prepending).
  auto body = l.body;
  l.body = [body, &l, dtype] {
    std::string b = body();
    const std::string helpers =
        result_stores(l.buffers, dtype) +
        "fn greater(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x > b.x || (a.x == b.x && a.y > b.y); }\n"
        "fn key_gt(base: u32, a: i32, b: i32) -> bool { return greater(get_entry(base + u32(a)).xy, get_entry(base + u32(b)).xy); }\n"
        "fn swap_entries(base: u32, a: i32, b: i32) {\n"
        "  let ea = get_entry(base + u32(a));\n"
        "  set_entry(base + u32(a), get_entry(base + u32(b)));\n"
        "  set_entry(base + u32(b), ea);\n"
        "}\n";
    const size_t at = b.find("@compute");
    return b.substr(0, at) + helpers + b.substr(at);
  };
  launch_kernel(ctx, l);
}

namespace {

// The standard-library sorting steps over entries of one row (E/S read and write entry i
// of the row at `base`; lt_e is the comparison), as WGSL.
const char* kSerialSortFunctions = R"(
fn E(base: u32, i: i32) -> vec3<u32> { return get_entry(base + u32(i)); }
fn S(base: u32, i: i32, v: vec3<u32>) { set_entry(base + u32(i), v); }
fn swap_at(base: u32, a: i32, b: i32) { let t = E(base, a); S(base, a, E(base, b)); S(base, b, t); }
fn adjust_heap(base: u32, first: i32, top: i32, len: i32, value: vec3<u32>) {
  var hole = top;
  var second = top;
  while (second < (len - 1) / 2) {
    second = 2 * (second + 1);
    if (lt_e(E(base, first + second), E(base, first + second - 1))) { second = second - 1; }
    S(base, first + hole, E(base, first + second));
    hole = second;
  }
  if ((len & 1) == 0 && second == (len - 2) / 2) {
    second = 2 * (second + 1);
    S(base, first + hole, E(base, first + second - 1));
    hole = second - 1;
  }
  var parent = (hole - 1) / 2;
  while (hole > top && lt_e(E(base, first + parent), value)) {
    S(base, first + hole, E(base, first + parent));
    hole = parent;
    parent = (hole - 1) / 2;
  }
  S(base, first + hole, value);
}
fn make_heap(base: u32, first: i32, last: i32) {
  let len = last - first;
  if (len < 2) { return; }
  var parent = (len - 2) / 2;
  loop {
    adjust_heap(base, first, parent, len, E(base, first + parent));
    if (parent == 0) { return; }
    parent = parent - 1;
  }
}
fn pop_heap(base: u32, first: i32, last: i32, result: i32) {
  let v = E(base, result);
  S(base, result, E(base, first));
  adjust_heap(base, first, 0, last - first, v);
}
fn heap_select(base: u32, first: i32, middle: i32, last: i32) {
  make_heap(base, first, middle);
  for (var i = middle; i < last; i = i + 1) {
    if (lt_e(E(base, i), E(base, first))) { pop_heap(base, first, middle, i); }
  }
}
fn sort_heap(base: u32, first: i32, last0: i32) {
  var last = last0;
  while (last - first > 1) {
    last = last - 1;
    pop_heap(base, first, last, last);
  }
}
fn partition_pivot(base: u32, first: i32, last0: i32) -> i32 {
  let x = first + 1;
  let y = first + (last0 - first) / 2;
  let z = last0 - 1;
  var s = y;
  if (lt_e(E(base, x), E(base, y))) {
    if (lt_e(E(base, y), E(base, z))) { s = y; } else if (lt_e(E(base, x), E(base, z))) { s = z; } else { s = x; }
  } else if (lt_e(E(base, x), E(base, z))) { s = x; } else if (lt_e(E(base, y), E(base, z))) { s = z; } else { s = y; }
  swap_at(base, first, s);
  var lo = first + 1;
  var hi = last0;
  loop {
    while (lt_e(E(base, lo), E(base, first))) { lo = lo + 1; }
    hi = hi - 1;
    while (lt_e(E(base, first), E(base, hi))) { hi = hi - 1; }
    if (!(lo < hi)) { return lo; }
    swap_at(base, lo, hi);
    lo = lo + 1;
  }
}
fn linear_insert(base: u32, at: i32) {
  let v = E(base, at);
  var i = at;
  var prev = at - 1;
  while (lt_e(v, E(base, prev))) { S(base, i, E(base, prev)); i = prev; prev = prev - 1; }
  S(base, i, v);
}
fn insertion_sort(base: u32, first: i32, last: i32) {
  for (var i = first + 1; i < last; i = i + 1) {
    let v = E(base, i);
    if (lt_e(v, E(base, first))) {
      for (var j = i; j > first; j = j - 1) { S(base, j, E(base, j - 1)); }
      S(base, first, v);
    } else {
      linear_insert(base, i);
    }
  }
}
fn floor_log2(n: i32) -> i32 { return i32(firstLeadingBit(u32(n))); }
fn std_sort(base: u32, first0: i32, last0: i32) {
  if (last0 - first0 <= 1) { return; }
  var stack: array<vec3<i32>, 40>;
  var top = 1;
  stack[0] = vec3<i32>(first0, last0, 2 * floor_log2(last0 - first0));
  while (top > 0) {
    top = top - 1;
    let r = stack[top];
    var first = r.x;
    var last = r.y;
    var depth = r.z;
    loop {
      if (last - first <= 16) { break; }
      if (depth == 0) { heap_select(base, first, last, last); sort_heap(base, first, last); break; }
      depth = depth - 1;
      let cut = partition_pivot(base, first, last);
      // Both sides continue at this depth on disjoint ranges: stack the larger.
      if (cut - first < last - cut) {
        stack[top] = vec3<i32>(cut, last, depth);
        last = cut;
      } else {
        stack[top] = vec3<i32>(first, cut, depth);
        first = cut;
      }
      top = top + 1;
    }
  }
  if (last0 - first0 > 16) {
    insertion_sort(base, first0, first0 + 16);
    for (var i = first0 + 16; i < last0; i = i + 1) { linear_insert(base, i); }
  } else {
    insertion_sort(base, first0, last0);
  }
}
fn nth_element(base: u32, first0: i32, nth: i32, last0: i32) {
  if (first0 == last0 || nth == last0) { return; }
  var first = first0;
  var last = last0;
  var depth = 2 * floor_log2(last - first);
  while (last - first > 3) {
    if (depth == 0) {
      heap_select(base, first, nth + 1, last);
      swap_at(base, first, nth);
      return;
    }
    depth = depth - 1;
    let cut = partition_pivot(base, first, last);
    if (cut <= nth) { first = cut; } else { last = cut; }
  }
  insertion_sort(base, first, last);
}
)";

}  // namespace

void topk_small_rows(Context& ctx, const SortInput& in, uint64_t k, bool largest, bool sorted,
                     WGPUBuffer scratch, WGPUBuffer values, uint64_t values_offset,
                     WGPUBuffer indices, uint64_t indices_offset) {
  if (in.rows == 0 || in.n == 0 || k == 0) return;
  if (in.n > kTopkSerialMaxLength || in.offset + in.rows * in.n >= (1ull << 32) ||
      in.rows * in.n * 3 >= (1ull << 32))
    fail(ErrorKind::Unsupported, "torch_webgpu: topk rows too long for the serial kernel");
  static const UniformLayout layout({{"in_offset"}, {"n"}, {"take"}, {"largest"}, {"sorted"},
                                     {"values_offset"}, {"indices_offset"}});
  KernelLaunch l;
  l.typed = {"sort:topk_small", {static_cast<uint32_t>(in.dtype)}};
  l.buffers = result_buffers(in, scratch, Access::ReadWrite, values, indices);
  l.declare(layout)
      .set_u32("in_offset", u32_of(in.offset))
      .set_u32("n", u32_of(in.n))
      .set_u32("take", u32_of(k))
      .set_u32("largest", largest ? 1u : 0u)
      .set_u32("sorted", sorted ? 1u : 0u)
      .set_u32("values_offset", u32_of(values_offset))
      .set_u32("indices_offset", u32_of(indices_offset));
  l.count = in.rows;
  l.workgroup = 64;
  const DType dtype = in.dtype;
  l.body = [&l, dtype] {
    return kernel_load("load_in", l.buffers, 0, dtype) + key_function(dtype) +
           entry_functions(1) + set_entry_function(1) +
           result_stores(l.buffers, dtype) +
           // Keys order NaN above everything, as both of the CPU's comparisons do.
           "fn lt_e(a: vec3<u32>, b: vec3<u32>) -> bool {\n"
           "  if (u.largest != 0u) { return a.x > b.x || (a.x == b.x && a.y > b.y); }\n"
           "  return a.x < b.x || (a.x == b.x && a.y < b.y);\n"
           "}\n" + kSerialSortFunctions +
           kernel_main(Grid::Invocations, 64) +
           "  let n = i32(u.n);\n"
           "  let k = i32(u.take);\n"
           "  let base = idx * u.n;\n"
           "  let src = u.in_offset + base;\n"
           "  for (var i = 0; i < n; i = i + 1) { S(base, i, vec3<u32>(sort_key(load_in(src + u32(i))), u32(i))); }\n"
           "  if (k * 64 <= n) {\n"
           "    heap_select(base, 0, k, n);\n"
           "    sort_heap(base, 0, k);\n"
           "  } else {\n"
           "    nth_element(base, 0, k - 1, n);\n"
           "    if (u.sorted != 0u) { std_sort(base, 0, k - 1); }\n"
           "  }\n"
           "  for (var i = 0; i < k; i = i + 1) {\n"
           "    let at = E(base, i).z;\n"
           "    store_value(u.values_offset + idx * u32(k) + u32(i), load_in(src + at));\n"
           "    store_index(u.indices_offset + idx * u32(k) + u32(i), vec2<u32>(at, 0u));\n"
           "  }\n"
           "}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu
