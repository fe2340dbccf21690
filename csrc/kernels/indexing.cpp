#include "kernels/indexing.h"

#include <array>
#include <functional>
#include <algorithm>
#include <string>

#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// The gather/scatter kernels' uniforms: the iteration space (nd dims of `sizes`), each
// operand's element offset and strides, the bounds check's code and wrapping, a split
// target's segment, the scalar value's 4 words, and per index tensor t its bound, the
// target stride it multiplies, its offset and its strides (at index_strides[8t + d]).
const UniformLayout& indexed_layout() {
  static const UniformLayout layout(
      {{"nd"}, {"code"}, {"wrap"}, {"target_offset"}, {"values_offset"}, {"mask_offset"},
       {"segment_lo"}, {"segment_hi"}, {"scalar", UniformType::U32, 4},
       {"sizes", UniformType::U32, kIndexMaxDims}, {"target_strides", UniformType::U32, kIndexMaxDims},
       {"value_strides", UniformType::U32, kIndexMaxDims}, {"mask_strides", UniformType::U32, kIndexMaxDims},
       {"index_bound", UniformType::U32, kIndexMaxTensors},
       {"index_target_stride", UniformType::U32, kIndexMaxTensors},
       {"index_offset", UniformType::U32, kIndexMaxTensors},
       {"index_strides", UniformType::U32, kIndexMaxDims * kIndexMaxTensors}});
  return layout;
}

// The word of element i of a uniform array (KernelBuffer::touches of an index offset).
uint32_t array_word(const UniformLayout& layout, const char* name, size_t i) {
  return layout.fields()[layout.find(name)].word + static_cast<uint32_t>(i);
}

uint32_t u32_of(int64_t v, const char* what) {
  if (v < 0 || v > 0xFFFFFFFFll)
    fail(ErrorKind::Unsupported, std::string("torch_webgpu: indexing ") + what + " beyond 32 bits");
  return static_cast<uint32_t>(v);
}

// The words of a shape or strides array as u32 uniforms.
std::vector<uint32_t> words_of(const std::vector<int64_t>& v, const char* what) {
  std::vector<uint32_t> out;
  for (int64_t x : v) out.push_back(u32_of(x, what));
  return out;
}

// `fn NAME(e: u32) -> vec2<u32>`: element e of an Int64/Int32 index buffer as (lo, hi).
std::string index_load(const std::string& name, const std::string& buf, DType dtype) {
  if (dtype == DType::Int64)
    return "fn " + name + "(e: u32) -> vec2<u32> { return vec2<u32>(" + buf + "[2u * e], " + buf +
           "[2u * e + 1u]); }\n";
  return "fn " + name + "(e: u32) -> vec2<u32> { let v = " + buf +
         "[e]; return vec2<u32>(v, select(0u, 0xffffffffu, (v & 0x80000000u) != 0u)); }\n";
}

// The word-shift/mask description of element e in a buffer of `dtype`.
std::string subword_parts(DType dtype) {
  if (element_size(dtype) == 2) return "  let wi = e >> 1u;\n  let sh = (e & 1u) * 16u;\n  let m = 0xffffu << sh;\n";
  if (element_size(dtype) == 1) return "  let wi = e >> 2u;\n  let sh = (e & 3u) * 8u;\n  let m = 0xffu << sh;\n";
  return "  let wi = e;\n  let sh = 0u;\n  let m = 0xffffffffu;\n";
}

// `fn NAME(e: u32) -> bool`: element e of a flags buffer is nonzero (any dtype <= 8 bytes;
// floats: -0.0 counts as zero).
std::string flag_load(const std::string& name, const std::string& buf, DType dtype) {
  std::string s = "fn " + name + "(e: u32) -> bool {\n";
  switch (dtype) {
    case DType::Float32: return s + "  return (" + buf + "[e] & 0x7fffffffu) != 0u;\n}\n";
    case DType::Float16: case DType::BFloat16:
      return s + subword_parts(dtype) + "  return ((" + buf + "[wi] >> sh) & 0x7fffu) != 0u;\n}\n";
    case DType::Float64: return s + "  return (" + buf + "[2u * e] | (" + buf + "[2u * e + 1u] & 0x7fffffffu)) != 0u;\n}\n";
    case DType::Int64: return s + "  return (" + buf + "[2u * e] | " + buf + "[2u * e + 1u]) != 0u;\n}\n";
    case DType::Complex64: return s + "  return ((" + buf + "[2u * e] | " + buf + "[2u * e + 1u]) & 0x7fffffffu) != 0u;\n}\n";
    default: return s + subword_parts(dtype) + "  return (" + buf + "[wi] & m) != 0u;\n}\n";
  }
}

// Coordinate walk over u_sizes: accumulates offsets of the listed operands (variable,
// WGSL of its stride along dim `du`). With `nd` known (>= 0, part of the pipeline's key) the
// walk is written out per dim: constant uniform indices, and no division for dim 0 (idx
// is below the element count, so what remains is its coordinate).
std::string coordinate_walk(const std::vector<std::pair<std::string, std::string>>& ops, int nd = -1) {
  std::string s = "  var rem = idx;\n";
  if (nd >= 0) {
    for (int d = nd - 1; d >= 0; --d) {
      s += "  {\n    let du = " + std::to_string(d) + "u;\n";
      s += d ? "    let sz = u_sizes(du);\n    let c = rem % sz;\n    rem = rem / sz;\n" : "    let c = rem;\n";
      for (const auto& [name, stride] : ops) s += "    " + name + " = " + name + " + c * " + stride + ";\n";
      s += "  }\n";
    }
    return s;
  }
  s += "  for (var d = i32(u.nd) - 1; d >= 0; d = d - 1) {\n";
  s += "    let du = u32(d);\n    let sz = u_sizes(du);\n";
  s += "    let c = rem % sz;\n    rem = rem / sz;\n";
  for (const auto& [name, stride] : ops) s += "    " + name + " = " + name + " + c * " + stride + ";\n";
  s += "  }\n";
  return s;
}

const char* kResolve = R"WGSL(
// Position selected by a 64-bit index value, or 0xffffffff when out of range.
fn resolve_index(v: vec2<u32>, bound: u32, wrap: u32) -> u32 {
  if (v.y == 0u && v.x < bound) { return v.x; }
  if (wrap != 0u && bound != 0u && v.y == 0xffffffffu && v.x >= 0u - bound) { return v.x + bound; }
  return 0xffffffffu;
}
)WGSL";

// Fills uniforms and bindings shared by gather and scatter. Binding order: target,
// values (unless scalar), indices, mask, error word.
struct Common {
  KernelLaunch launch;  // buffers and uniforms (indexed_layout)
  // What the shared WGSL depends on: target dtype, scalar value, mask and its dtype;
  // number of index tensors and which are int64.
  uint32_t operands = 0, index_kinds = 0;
  size_t err_binding = 0, first_index_binding = 0, mask_binding = 0, values_binding = 0;
  std::string body_prefix;  // index/mask loaders + walk + resolution, inside main
  std::string helpers;
};

// Elements a strided argument touches over `shape`, plus `extra` past its last one.
ElementRange touched(const StridedArg& a, const std::vector<int64_t>& shape, uint64_t extra) {
  ElementRange r = strided_range(a.offset, shape.data(), a.strides.data(), static_cast<int>(shape.size()));
  if (r.end > r.first) r.end += extra;
  return r;
}

// The target's elements: its strided part plus the reach of every index.
ElementRange target_touched(const IndexedLaunch& l, uint64_t extra) {
  ElementRange r = touched(l.target, l.shape, extra);
  for (const IndexArg& ix : l.indices)
    if (ix.bound > 0) r.end += static_cast<uint64_t>(ix.bound - 1) * ix.target_stride;
  return r;
}

void declare(KernelBuffer& b, uint32_t word, DType dtype, ElementRange r) {
  b.touches(word, dtype, r.first, r.end - r.first);
}

// `run`: elements each invocation moves from its target and values offsets on.
Common build_common(Context& ctx, const IndexedLaunch& l, Access target_access, bool target_atomic,
                    Access values_access, bool values_atomic, uint64_t run = 1) {
  if (l.shape.size() > static_cast<size_t>(kIndexMaxDims) ||
      l.indices.size() > static_cast<size_t>(kIndexMaxTensors))
    fail(ErrorKind::Unsupported, "torch_webgpu: indexing kernel beyond its dims/index limits");
  Common c;
  const UniformLayout& layout = indexed_layout();
  KernelLaunch& k = c.launch;
  std::vector<KernelBuffer>& buffers = k.buffers;
  k.declare(layout)
      .set_u32("nd", static_cast<uint32_t>(l.shape.size()))
      .set_u32("code", l.check_code)
      .set_u32("wrap", l.wrap_negative ? 1u : 0u)
      .set_u32("target_offset", u32_of(static_cast<int64_t>(l.target.offset), "offset"))
      .set_u32("values_offset", l.use_scalar ? 0u : u32_of(static_cast<int64_t>(l.values.offset), "offset"))
      .set_u32("mask_offset", l.has_mask ? u32_of(static_cast<int64_t>(l.mask.offset), "offset") : 0u)
      .set_u32("segment_lo", 0)
      .set_u32("segment_hi", 0)
      .set_u32s("scalar", l.use_scalar ? std::vector<uint32_t>(l.scalar_words, l.scalar_words + 4)
                                       : std::vector<uint32_t>{})
      .set_u32s("sizes", words_of(l.shape, "size"))
      .set_u32s("target_strides", words_of(l.target.strides, "stride"))
      .set_u32s("value_strides", l.use_scalar ? std::vector<uint32_t>{} : words_of(l.values.strides, "stride"))
      .set_u32s("mask_strides", l.has_mask ? words_of(l.mask.strides, "stride") : std::vector<uint32_t>{});
  buffers.push_back({l.target.buffer, target_access, target_atomic});
  declare(buffers.back(), k.word_of("target_offset"), l.target.dtype, target_touched(l, run - 1));
  c.operands = static_cast<uint32_t>(l.target.dtype) | (l.use_scalar ? 1u << 8 : 0u) |
               (l.has_mask ? (1u << 9) | (static_cast<uint32_t>(l.mask.dtype) << 16) : 0u) |
               static_cast<uint32_t>(l.shape.size()) << 24;  // the walk's dims are written out
  c.index_kinds = static_cast<uint32_t>(l.indices.size());
  if (!l.use_scalar) {
    c.values_binding = buffers.size();
    buffers.push_back({l.values.buffer, values_access, values_atomic});
    declare(buffers.back(), k.word_of("values_offset"), l.values.dtype, touched(l.values, l.shape, run - 1));
  }
  std::vector<std::pair<std::string, std::string>> walk = {{"to", "u_target_strides(du)"}};
  if (!l.use_scalar) walk.push_back({"vo", "u_value_strides(du)"});
  std::string init = "  var to = u.target_offset;\n  var vo = u.values_offset;\n";
  c.first_index_binding = buffers.size();
  std::vector<uint32_t> bounds, target_strides, offsets, strides;
  for (size_t t = 0; t < l.indices.size(); ++t) {
    const IndexArg& ix = l.indices[t];
    std::vector<uint32_t> s = words_of(ix.index.strides, "stride");
    s.resize(kIndexMaxDims, 0);
    strides.insert(strides.end(), s.begin(), s.end());
    bounds.push_back(u32_of(ix.bound, "bound"));
    target_strides.push_back(u32_of(ix.target_stride, "stride"));
    offsets.push_back(u32_of(static_cast<int64_t>(ix.index.offset), "offset"));
    const std::string ts = std::to_string(t);
    c.helpers += index_load("load_index" + ts, "buf" + std::to_string(buffers.size()), ix.index.dtype);
    buffers.push_back({ix.index.buffer, Access::Read, false});
    declare(buffers.back(), array_word(layout, "index_offset", t), ix.index.dtype, touched(ix.index, l.shape, 0));
    if (ix.index.dtype == DType::Int64) c.index_kinds |= 1u << (8 + t);
    init += "  var io" + ts + " = u_index_offset(" + ts + "u);\n";
    walk.push_back({"io" + ts, "u_index_strides(" + std::to_string(kIndexMaxDims * t) + "u + du)"});
  }
  k.set_u32s("index_bound", bounds)
      .set_u32s("index_target_stride", target_strides)
      .set_u32s("index_offset", offsets)
      .set_u32s("index_strides", strides);
  if (l.has_mask) {
    c.mask_binding = buffers.size();
    c.helpers += flag_load("load_mask", "buf" + std::to_string(buffers.size()), l.mask.dtype);
    buffers.push_back({l.mask.buffer, Access::Read, false});
    declare(buffers.back(), k.word_of("mask_offset"), l.mask.dtype, touched(l.mask, l.shape, 0));
    init += "  var mo = u.mask_offset;\n";
    walk.push_back({"mo", "u_mask_strides(du)"});
  }
  c.err_binding = buffers.size();
  buffers.push_back({ctx.checks().arm(), Access::ReadWrite, true});
  if (buffers.size() > ctx.caps().max_storage_buffers_per_stage)
    fail(ErrorKind::Unsupported, "torch_webgpu: indexing kernel needs more storage bindings than the adapter has");
  c.helpers += kResolve;
  std::string err = "buf" + std::to_string(c.err_binding);
  std::string s = init + coordinate_walk(walk, static_cast<int>(l.shape.size()));
  if (l.has_mask) s += "  if (!load_mask(mo)) { return; }\n";
  for (size_t t = 0; t < l.indices.size(); ++t) {
    const std::string ts = std::to_string(t);
    s += "  let p" + ts + " = resolve_index(load_index" + ts + "(io" + ts + "), u_index_bound(" + ts +
         "u), u.wrap);\n";
    s += "  if (p" + ts + " == 0xffffffffu) { atomicMax(&" + err + "[0], u.code); return; }\n";
    s += "  to = to + p" + ts + " * u_index_target_stride(" + ts + "u);\n";
  }
  c.body_prefix = s;
  return c;
}

// Launches the kernel of `family` (a string literal): the common part, then `helpers` and
// `tail`, which depend on the family and `variant` (up to two words).
void finish(Context& ctx, Common& c, const IndexedLaunch& l, const char* family,
            std::array<uint32_t, 2> variant, const std::string& helpers, const std::string& tail) {
  KernelLaunch& k = c.launch;
  k.typed = {family, {c.operands, c.index_kinds, variant[0], variant[1]}};
  k.grid = Grid::Invocations;
  uint64_t n = 1;
  for (int64_t s : l.shape) n *= static_cast<uint64_t>(s);
  k.count = n;
  const uint32_t wg = ctx.caps().workgroup_1d();
  std::string body = c.helpers + helpers + kernel_main(Grid::Invocations, wg) + c.body_prefix + tail + "}\n";
  k.workgroup = wg;
  k.body = [&] { return body; };
  launch_kernel(ctx, k);
  if (n && DeviceChecks::synchronous()) ctx.recorder().synchronize();
}

// Statements moving element `src_e` of buffer `src` (plain) to element `dst_e` of `dst`
// (atomic binding when `dst_atomic`), for any dtype (bit moves).
std::string move_bits(DType dtype, const std::string& src, const std::string& src_e,
                      const std::string& dst, const std::string& dst_e, bool dst_atomic) {
  int size = element_size(dtype);
  std::string s;
  auto put = [&](const std::string& at, const std::string& v) {
    return dst_atomic ? "  atomicStore(&" + dst + "[" + at + "], " + v + ");\n"
                      : "  " + dst + "[" + at + "] = " + v + ";\n";
  };
  if (size >= 4) {
    int words = size / 4;
    for (int i = 0; i < words; ++i) {
      std::string o = " + " + std::to_string(i) + "u";
      s += put(std::to_string(words) + "u * (" + dst_e + ")" + o, src + "[" + std::to_string(words) + "u * (" + src_e + ")" + o + "]");
    }
    return s;
  }
  std::string shift = size == 2 ? "1u" : "2u", lane = size == 2 ? "16u" : "8u", lanes = size == 2 ? "1u" : "3u";
  std::string mask = size == 2 ? "0xffffu" : "0xffu";
  s += "  let sb = (" + src + "[(" + src_e + ") >> " + shift + "] >> (((" + src_e + ") & " + lanes + ") * " + lane + ")) & " + mask + ";\n";
  s += "  let dsh = ((" + dst_e + ") & " + lanes + ") * " + lane + ";\n";
  s += "  atomicAnd(&" + dst + "[(" + dst_e + ") >> " + shift + "], ~(" + mask + " << dsh));\n";
  s += "  atomicOr(&" + dst + "[(" + dst_e + ") >> " + shift + "], sb << dsh);\n";
  return s;
}

// Elements of 4 or 8 bytes one gather invocation moves when the innermost dim is a
// unit-stride run in target and values that no index varies along (rows gathered whole,
// as in index_select or embedding lookups): 16 bytes, one index resolution for all.
int gather_run(const IndexedLaunch& l) {
  if (l.has_mask || l.use_scalar || l.shape.empty()) return 1;
  const int size = element_size(l.values.dtype);
  if (size != 4 && size != 8) return 1;
  const int run = 16 / size;
  const size_t last = l.shape.size() - 1;
  if (l.shape[last] % run != 0 || l.target.strides[last] != 1 || l.values.strides[last] != 1)
    return 1;
  for (const IndexArg& ix : l.indices)
    if (ix.index.strides[last] != 0) return 1;
  return run;
}

}  // namespace

namespace {

// One pass of a target larger than one binding: binds the window over `segment` (elements
// after the target's offset) and returns the statement that skips elements outside it.
std::string limit_to_segment(Common& c, const IndexedLaunch& l, const ElementRange& segment, int run) {
  c.launch.set_u32("segment_lo", static_cast<uint32_t>(segment.first))
      .set_u32("segment_hi", static_cast<uint32_t>(segment.end));
  declare(c.launch.buffers[0], c.launch.word_of("target_offset"), l.target.dtype,
          {l.target.offset + segment.first, l.target.offset + segment.end + run});
  return "  let rel = to - u.target_offset;\n"
         "  if (rel < u.segment_lo || rel >= u.segment_hi) { return; }\n";
}

bool any_window(Context& ctx, const IndexedLaunch& l) {
  if (!ctx.pool().has_oversized()) return false;
  bool any = needs_window(ctx, l.target.buffer) || needs_window(ctx, l.values.buffer) ||
             (l.has_mask && needs_window(ctx, l.mask.buffer));
  for (const IndexArg& ix : l.indices) any = any || needs_window(ctx, ix.index.buffer);
  return any;
}

// True when every target and values offset a run-gather (`l`: its shape already in runs)
// computes is a multiple of `run`: the run then moves as one 16-byte load and store, not
// `run` scalar ones 16 bytes apart across the invocations.
bool aligned_runs(const IndexedLaunch& l, int run) {
  auto multiple = [run](int64_t v) { return v % run == 0; };
  bool ok = run > 1 && multiple(static_cast<int64_t>(l.target.offset)) &&
            multiple(static_cast<int64_t>(l.values.offset));
  for (int64_t s : l.target.strides) ok = ok && multiple(s);
  for (int64_t s : l.values.strides) ok = ok && multiple(s);
  for (const IndexArg& ix : l.indices) ok = ok && multiple(ix.target_stride);
  return ok;
}

// Elements one invocation of a per-element gather (gather along the innermost dim: an
// index per element, contiguous along it in index and values) resolves: 4 consecutive
// ones share the coordinate walk's divisions and write the values side as one vec4.
constexpr int kGatherLanes = 4;
bool gather_lanes(Context& ctx, const IndexedLaunch& l) {
  if (l.has_mask || l.use_scalar || l.shape.empty() || l.indices.size() != 1 ||
      element_size(l.values.dtype) != 4 || any_window(ctx, l))
    return false;
  const size_t last = l.shape.size() - 1;
  return l.shape[last] % kGatherLanes == 0 && l.values.strides[last] == 1 &&
         l.indices[0].index.strides[last] == 1 && l.target.strides[last] == 0;
}

// The per-element gather, kGatherLanes elements per invocation: lane 0 resolves through
// the common walk, the others from the index's next elements. Rows of 2 or 4k lane groups
// split in 2 or 4 parts, an invocation taking group j of each (as row gathers do).
void gather_lanes_piece(Context& ctx, const IndexedLaunch& launch) {
  IndexedLaunch l = launch;
  const size_t last = l.shape.size() - 1;
  l.shape[last] /= kGatherLanes;
  l.values.strides[last] = kGatherLanes;
  l.indices[0].index.strides[last] = kGatherLanes;
  bool vec4 = l.values.offset % kGatherLanes == 0;
  for (int64_t st : l.values.strides) vec4 = vec4 && st % kGatherLanes == 0;
  const int parts = l.shape[last] % 4 == 0 ? 4 : l.shape[last] % 2 == 0 ? 2 : 1;
  l.shape[last] /= parts;
  Common c = build_common(ctx, l, Access::Read, false, Access::ReadWrite, false, kGatherLanes);
  const std::string values = "buf" + std::to_string(c.values_binding);
  const std::string err = "buf" + std::to_string(c.err_binding);
  // `part`: elements from one part to the next.
  std::string tail = "  let base = to - p0 * u_index_target_stride(0u);\n"
                     "  let part = u_sizes(u.nd - 1u) * " + std::to_string(kGatherLanes) + "u;\n";
  for (int k = 0; k < parts; ++k) {
    const std::string at = k ? " + " + std::to_string(k) + "u * part" : "";
    tail += "  {\n  var moved = vec4<u32>();\n";
    for (int e = 0; e < kGatherLanes; ++e) {
      if (k == 0 && e == 0) {
        tail += "  moved[0] = buf0[to];\n";
        continue;
      }
      const std::string es = std::to_string(e);
      tail += "  {\n  let p = resolve_index(load_index0(io0" + at + " + " + es + "u), u_index_bound(0u), u.wrap);\n"
              "  if (p == 0xffffffffu) { atomicMax(&" + err + "[0], u.code); return; }\n"
              "  moved[" + es + "] = buf0[base + p * u_index_target_stride(0u)];\n  }\n";
    }
    if (vec4)
      tail += "  " + values + "[(vo" + at + ") / 4u] = moved;\n  }\n";
    else
      tail += "  for (var e = 0u; e < 4u; e = e + 1u) { " + values + "[vo" + at + " + e] = moved[e]; }\n  }\n";
  }
  if (vec4) c.launch.buffers[c.values_binding].vec4 = true;
  finish(ctx, c, l, "index:gather_lanes", {vec4 ? 1u : 0u, static_cast<uint32_t>(parts)}, "", tail);
}

// One gather dispatch; with `segment`, only the elements whose target lies in that range
// of elements after the target offset (one pass of a target larger than one binding).
void gather_piece(Context& ctx, const IndexedLaunch& launch, const ElementRange* segment) {
  if (!segment && gather_lanes(ctx, launch)) return gather_lanes_piece(ctx, launch);
  const bool sub = is_subword(launch.values.dtype);
  const int run = gather_run(launch);
  IndexedLaunch l = launch;
  if (run > 1) {
    const size_t last = l.shape.size() - 1;
    l.shape[last] /= run;
    l.target.strides[last] = run;
    l.values.strides[last] = run;
  }
  // vec4 bindings may not take windows.
  const bool vec4 = !segment && !any_window(ctx, l) && aligned_runs(l, run);
  // Rows of vec4 words split in `parts` equal parts: an invocation moves word j of each,
  // dividing the coordinate walk (its divisions) per byte by `parts`; each load and store
  // instruction still covers consecutive words.
  const int parts = !vec4 ? 1 : l.shape.back() % 4 == 0 ? 4 : l.shape.back() % 2 == 0 ? 2 : 1;
  if (parts > 1) l.shape.back() /= parts;
  Common c = build_common(ctx, l, Access::Read, false, Access::ReadWrite, sub, run);
  std::string tail;
  if (segment) tail += limit_to_segment(c, l, *segment, run);
  const std::string values = "buf" + std::to_string(c.values_binding);
  if (vec4) {
    c.launch.buffers[0].vec4 = true;
    c.launch.buffers[c.values_binding].vec4 = true;
    const std::string r = std::to_string(run) + "u";
    tail += "  " + values + "[vo / " + r + "] = buf0[to / " + r + "];\n";
    if (parts > 1) tail += "  let part = u_sizes(u.nd - 1u);\n";
    for (int k = 1; k < parts; ++k) {
      const std::string at = " + " + std::to_string(k) + "u * part]";
      tail += "  " + values + "[vo / " + r + at + " = buf0[to / " + r + at + ";\n";
    }
  }
  for (int e = 0; e < run && !vec4; ++e) {
    const std::string off = e ? " + " + std::to_string(e) + "u" : "";
    tail += "  {\n" + move_bits(l.values.dtype, "buf0", "to" + off, values, "vo" + off, sub) + "  }\n";
  }
  finish(ctx, c, l, "index:gather", {static_cast<uint32_t>(run) | (vec4 ? 1u << 8 : 0u) | (static_cast<uint32_t>(parts) << 9), segment ? 1u : 0u},
         "", tail);
}

// Buffers larger than one binding: blocks of the iteration space in which values, indices
// and mask fit one window each; a target whose reachable range does not is reached in
// segments, one pass each, every pass touching only the elements its segment holds.
// Calls run(piece, segment or null) for each dispatch.
void for_each_piece(Context& ctx, const IndexedLaunch& launch, const char* what,
                    const std::function<void(const IndexedLaunch&, const ElementRange*)>& run) {
  if (!any_window(ctx, launch)) return run(launch, nullptr);
  const int nd = static_cast<int>(launch.shape.size());
  std::vector<BlockOperand> planned;
  auto plan = [&](const StridedArg& a) {
    if (needs_window(ctx, a.buffer)) planned.push_back({a.offset, a.strides.data(), element_size(a.dtype)});
  };
  plan(launch.values);
  plan(launch.target);
  for (const IndexArg& ix : launch.indices) plan(ix.index);
  if (launch.has_mask) plan(launch.mask);
  const std::vector<int64_t> block =
      plan_blocks(ctx, launch.shape.data(), nd, planned, nd - 1, what);
  const uint64_t target_bytes = element_size(launch.target.dtype);
  const uint64_t segment = window_budget(ctx) / target_bytes - 16;
  for_each_block(launch.shape.data(), nd, block, [&](const int64_t* origin, const int64_t* extent) {
    IndexedLaunch piece = launch;
    piece.shape.assign(extent, extent + nd);
    auto shift = [&](StridedArg& a) {
      int64_t offset = static_cast<int64_t>(a.offset);
      for (int d = 0; d < nd; ++d) offset += origin[d] * a.strides[d];
      a.offset = static_cast<uint64_t>(offset);
    };
    shift(piece.target);
    shift(piece.values);
    for (IndexArg& ix : piece.indices) shift(ix.index);
    if (piece.has_mask) shift(piece.mask);
    const ElementRange t = target_touched(piece, 0);
    if (!needs_window(ctx, piece.target.buffer) || (t.end - t.first) * target_bytes <= window_budget(ctx))
      return run(piece, nullptr);
    const uint64_t reach = t.end - piece.target.offset;
    for (uint64_t lo = 0; lo < reach; lo += segment) {
      const ElementRange seg{lo, std::min(reach, lo + segment)};
      run(piece, &seg);
    }
  });
}

}  // namespace

void indexed_gather(Context& ctx, const IndexedLaunch& launch) {
  for_each_piece(ctx, launch, "index gather",
                 [&](const IndexedLaunch& piece, const ElementRange* seg) { gather_piece(ctx, piece, seg); });
}

bool indexed_scatter_supports(DType dtype, IndexCombine combine) {
  if (combine == IndexCombine::Assign) return true;
  if (dtype == DType::Int64) return combine != IndexCombine::Mul;  // Max/Min: indexed_scatter_extreme_i64
  return is_computable(dtype) && element_size(dtype) <= 4;
}

namespace {

// One scatter dispatch; with `segment`, only the elements whose target lies in it.
void scatter_piece(Context& ctx, const IndexedLaunch& l, IndexCombine combine, const ElementRange* segment) {
  const DType dt = l.target.dtype;
  Common c = build_common(ctx, l, Access::ReadWrite, true, Access::Read, false);
  const std::string vb = "buf" + std::to_string(c.values_binding);
  const int size = element_size(dt);
  std::string helpers, tail;
  if (segment) tail += limit_to_segment(c, l, *segment, 1);
  // The value's storage bits (all words) for element vo, or the scalar's.
  auto value_word = [&](int i) {
    if (l.use_scalar) return "u_scalar(" + std::to_string(i) + "u)";
    return vb + "[" + std::to_string(size / 4) + "u * vo + " + std::to_string(i) + "u]";
  };
  if (combine == IndexCombine::Assign && size >= 4) {
    for (int i = 0; i < size / 4; ++i)
      tail += "  atomicStore(&buf0[" + std::to_string(size / 4) + "u * to + " + std::to_string(i) + "u], " +
              value_word(i) + ");\n";
  } else if (dt == DType::Int64) {
    // 64-bit add from two 32-bit atomics: the low word's carry goes into the high word.
    tail += "  let v = vec2<u32>(" + value_word(0) + ", " + value_word(1) + ");\n";
    tail += "  let old = atomicAdd(&buf0[2u * to], v.x);\n";
    tail += "  let carry = select(0u, 1u, old + v.x < old);\n";
    tail += "  atomicAdd(&buf0[2u * to + 1u], v.y + carry);\n";
  } else {
    Compute cp = compute_type_for(dt);
    std::string T = wgsl_type(cp);
    // The value in compute type.
    std::string vbits;
    if (l.use_scalar) {
      vbits = "u_scalar(0u)";
    } else if (size == 4) {
      vbits = vb + "[vo]";
    } else {
      std::string shift = size == 2 ? "1u" : "2u", lanes = size == 2 ? "1u" : "3u", lane = size == 2 ? "16u" : "8u";
      std::string mask = size == 2 ? "0xffffu" : "0xffu";
      vbits = "((" + vb + "[vo >> " + shift + "] >> ((vo & " + lanes + ") * " + lane + ")) & " + mask + ")";
    }
    if (size < 4 && l.use_scalar) vbits = "(" + vbits + " & " + (size == 2 ? "0xffffu" : "0xffu") + ")";
    std::string op;
    switch (combine) {
      case IndexCombine::Assign: op = "b"; break;
      case IndexCombine::Add: op = "a + b"; break;
      case IndexCombine::Mul: op = "a * b"; break;
      case IndexCombine::Max:
        op = cp == Compute::F32 ? "select(max(a, b), a + b, is_nan(a) || is_nan(b))" : "max(a, b)";
        break;
      case IndexCombine::Min:
        op = cp == Compute::F32 ? "select(min(a, b), a + b, is_nan(a) || is_nan(b))" : "min(a, b)";
        break;
    }
    helpers += "fn combine(a: " + T + ", b: " + T + ") -> " + T + " { return " + op + "; }\n";
    helpers += wgsl_bits_function("to_bits", dt, cp);
    helpers += "fn from_bits(x: u32) -> " + T + " { return " + wgsl_from_bits(dt, "x") + "; }\n";
    helpers += "fn rmw(e: u32, v: " + T + ") {\n" + subword_parts(dt) +
               // A failed exchange returns the word it found: retry from it, no reload.
               "  var old = atomicLoad(&buf0[wi]);\n"
               "  loop {\n"
               "    let cur = from_bits((old >> sh) & (m >> sh));\n"
               "    let nw = (old & ~m) | ((to_bits(combine(cur, v)) << sh) & m);\n"
               "    let r = atomicCompareExchangeWeak(&buf0[wi], old, nw);\n"
               "    if (r.exchanged) { break; }\n"
               "    old = r.old_value;\n"
               "  }\n}\n";
    tail += "  rmw(to, from_bits(" + vbits + "));\n";
  }
  finish(ctx, c, l, "index:scatter", {static_cast<uint32_t>(combine), segment ? 1u : 0u}, helpers,
         tail);
}

}  // namespace

void indexed_scatter(Context& ctx, const IndexedLaunch& l, IndexCombine combine) {
  const DType dt = l.target.dtype;
  if (!indexed_scatter_supports(dt, combine) ||
      (dt == DType::Int64 && combine != IndexCombine::Add && combine != IndexCombine::Assign))
    fail(ErrorKind::Unsupported, std::string("torch_webgpu: scatter reduction on ") + dtype_name(dt));
  for_each_piece(ctx, l, "index scatter", [&](const IndexedLaunch& piece, const ElementRange* seg) {
    scatter_piece(ctx, piece, combine, seg);
  });
}

void indexed_scatter_extreme_i64(Context& ctx, const IndexedLaunch& l, bool is_max, uint64_t numel) {
  if (numel == 0) return;
  // scratch[2e] = ordered key of the high word (sign bit flipped), scratch[2e + 1] = low word.
  Allocation* scratch = ctx.pool().allocate(numel * 8);
  const std::string atomic_op = is_max ? "atomicMax" : "atomicMin";
  const std::string lo_none = is_max ? "0u" : "0xffffffffu";
  const uint32_t toff = u32_of(static_cast<int64_t>(l.target.offset), "offset");
  static const UniformLayout layout({{"target_offset"}});
  auto per_element = [&](const char* family, Access target_access, const std::string& stmt) {
    KernelLaunch k;
    k.typed = {family, {is_max ? 1u : 0u}};
    k.buffers = {{l.target.buffer, target_access, false}, {scratch->buffer, Access::ReadWrite, false}};
    k.declare(layout).set_u32("target_offset", toff);
    k.count = numel;
    std::string body = kernel_main(Grid::Invocations, ctx.caps().workgroup_1d()) +
                       "  let t = idx + u.target_offset;\n" + stmt + "}\n";
    k.body = [&] { return body; };
    launch_kernel(ctx, k);
  };
  per_element("index:extreme_i64_init_hi", Access::Read, "  buf1[2u * idx] = buf0[2u * t + 1u] ^ 0x80000000u;\n");
  // The contributions, with the scratch as their target (element offsets from 0).
  IndexedLaunch s = l;
  s.target = StridedArg{scratch->buffer, 0, DType::Int64, l.target.strides};
  auto contributions = [&](const char* family, const std::string& stmt) {
    Common c = build_common(ctx, s, Access::ReadWrite, true, Access::Read, false);
    std::string vb = "buf" + std::to_string(c.values_binding);
    std::string v = s.use_scalar ? "vec2<u32>(u_scalar(0u), u_scalar(1u))"
                                 : "vec2<u32>(" + vb + "[2u * vo], " + vb + "[2u * vo + 1u])";
    finish(ctx, c, s, family, {is_max ? 1u : 0u, 0u}, "",
           "  let v = " + v + ";\n  let key = v.y ^ 0x80000000u;\n" + stmt);
  };
  contributions("index:extreme_i64_hi", "  " + atomic_op + "(&buf0[2u * to], key);\n");
  per_element("index:extreme_i64_init_lo", Access::Read,
              "  let key = buf0[2u * t + 1u] ^ 0x80000000u;\n"
              "  buf1[2u * idx + 1u] = select(" + lo_none + ", buf0[2u * t], key == buf1[2u * idx]);\n");
  contributions("index:extreme_i64_lo", "  if (key == atomicLoad(&buf0[2u * to])) { " + atomic_op + "(&buf0[2u * to + 1u], v.x); }\n");
  per_element("index:extreme_i64_store", Access::ReadWrite,
              "  buf0[2u * t] = buf1[2u * idx + 1u];\n  buf0[2u * t + 1u] = buf1[2u * idx] ^ 0x80000000u;\n");
  ctx.pool().release(scratch);
}

// ---------------------------------------------------------------------------------------
// Compaction (nonzero, masked_select, masked_scatter): flags -> exclusive positions.

namespace {

constexpr uint32_t kScanBlock = 256;  // elements per workgroup of the scan's first pass

// The compaction kernels' uniforms: the flags' walk (nd dims of `sizes`, the flags'
// offset and strides), then what each kernel adds (zero where it adds nothing): n and
// blocks for the scan, max_rows for nonzero, values' offset and strides and the output
// offset for masked_select / masked_scatter.
KernelLaunch& declare_flags(KernelLaunch& k, const std::vector<int64_t>& shape, const StridedArg& flags) {
  static const UniformLayout layout(
      {{"nd"}, {"mask_offset"}, {"n"}, {"blocks"}, {"max_rows"}, {"values_offset"},
       {"out_offset"}, {"sizes", UniformType::U32, kIndexMaxDims},
       {"mask_strides", UniformType::U32, kIndexMaxDims},
       {"value_strides", UniformType::U32, kIndexMaxDims}});
  if (shape.size() > static_cast<size_t>(kIndexMaxDims))
    fail(ErrorKind::Unsupported, "torch_webgpu: compaction beyond its dims limit");
  return k.declare(layout)
      .set_u32("nd", static_cast<uint32_t>(shape.size()))
      .set_u32("mask_offset", u32_of(static_cast<int64_t>(flags.offset), "offset"))
      .set_u32s("sizes", words_of(shape, "size"))
      .set_u32s("mask_strides", words_of(flags.strides, "stride"))
      .set_u32("n", 0)
      .set_u32("blocks", 0)
      .set_u32("max_rows", 0)
      .set_u32("values_offset", 0)
      .set_u32("out_offset", 0)
      .set_u32s("value_strides", {});
}

uint64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

// WGSL: `flag_at(idx)`: the flag of row-major element idx.
std::string flag_at(DType dtype) {
  return flag_load("load_flag", "buf0", dtype) + "fn flag_at(idx: u32) -> bool {\n  var mo = u.mask_offset;\n" +
         coordinate_walk({{"mo", "u_mask_strides(du)"}}) + "  return load_flag(mo);\n}\n";
}

}  // namespace

void exclusive_scan_nonzero(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                            WGPUBuffer positions) {
  const uint64_t n = numel_of(shape);
  const uint64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  // Per-block totals (and the grand total at [blocks]) in a scratch buffer.
  Allocation* sums = ctx.pool().allocate((blocks + 1) * 4);
  auto declare_scan = [&](KernelLaunch& k) {
    declare_flags(k, shape, flags)
        .set_u32("n", static_cast<uint32_t>(n))
        .set_u32("blocks", static_cast<uint32_t>(blocks));
  };
  const std::string wn = "u.n", wb = "u.blocks";
  // Pass 1: per block, the local exclusive scan into positions and the total into sums.
  KernelLaunch a;
  a.typed = {"index:scan_nonzero_local", {static_cast<uint32_t>(flags.dtype)}};
  a.buffers = {{flags.buffer, Access::Read, false}, {positions, Access::ReadWrite, false},
               {sums->buffer, Access::ReadWrite, false}};
  declare_scan(a);
  a.grid = Grid::Groups;
  a.count = blocks;
  a.workgroup = kScanBlock;
  std::string body_a = flag_at(flags.dtype) + "var<workgroup> part: array<u32, " + std::to_string(kScanBlock) + ">;\n" +
                       kernel_main(Grid::Groups, kScanBlock) +
                       "  let i = group * " + std::to_string(kScanBlock) + "u + lid;\n"
                       "  var f = 0u;\n"
                       "  if (group < frame_count() && i < " + wn + " && flag_at(i)) { f = 1u; }\n"
                       "  part[lid] = f;\n"
                       "  workgroupBarrier();\n"
                       // Hillis-Steele inclusive scan over the block.
                       "  for (var off = 1u; off < " + std::to_string(kScanBlock) + "u; off = off << 1u) {\n"
                       "    var add = 0u;\n"
                       "    if (lid >= off) { add = part[lid - off]; }\n"
                       "    workgroupBarrier();\n"
                       "    part[lid] = part[lid] + add;\n"
                       "    workgroupBarrier();\n"
                       "  }\n"
                       "  if (group < frame_count()) {\n"
                       "    if (i < " + wn + ") { buf1[i] = part[lid] - f; }\n"
                       "    if (lid == " + std::to_string(kScanBlock - 1) + "u) { buf2[group] = part[lid]; }\n"
                       "  }\n}\n";
  a.body = [&] { return body_a; };
  launch_kernel(ctx, a);
  // Pass 2: one workgroup scans the block totals in chunks (exclusive), total at [blocks].
  KernelLaunch b;
  b.typed = {"index:scan_nonzero_blocks"};
  b.buffers = {{sums->buffer, Access::ReadWrite, false}};
  declare_scan(b);
  b.grid = Grid::Groups;
  b.count = 1;
  b.workgroup = kScanBlock;
  std::string body_b = "var<workgroup> part: array<u32, " + std::to_string(kScanBlock) + ">;\nvar<workgroup> carry_in: u32;\n" +
                       kernel_main(Grid::Groups, kScanBlock) +
                       "  if (lid == 0u) { carry_in = 0u; }\n"
                       "  workgroupBarrier();\n"
                       "  let nb = " + wb + ";\n"
                       "  let chunks = (nb + " + std::to_string(kScanBlock - 1) + "u) / " + std::to_string(kScanBlock) + "u;\n"
                       "  for (var ch = 0u; ch < chunks; ch = ch + 1u) {\n"
                       "    let i = ch * " + std::to_string(kScanBlock) + "u + lid;\n"
                       "    var v = 0u;\n"
                       "    if (i < nb) { v = buf0[i]; }\n"
                       "    part[lid] = v;\n"
                       "    workgroupBarrier();\n"
                       "    for (var off = 1u; off < " + std::to_string(kScanBlock) + "u; off = off << 1u) {\n"
                       "      var add = 0u;\n"
                       "      if (lid >= off) { add = part[lid - off]; }\n"
                       "      workgroupBarrier();\n"
                       "      part[lid] = part[lid] + add;\n"
                       "      workgroupBarrier();\n"
                       "    }\n"
                       "    let base = carry_in;\n"
                       "    if (i < nb) { buf0[i] = base + part[lid] - v; }\n"
                       "    workgroupBarrier();\n"
                       "    if (lid == " + std::to_string(kScanBlock - 1) + "u) { carry_in = base + part[lid]; }\n"
                       "    workgroupBarrier();\n"
                       "  }\n"
                       "  if (lid == 0u) { buf0[nb] = carry_in; }\n}\n";
  b.body = [&] { return body_b; };
  launch_kernel(ctx, b);
  // Pass 3: add each block's offset; positions[n] = total.
  KernelLaunch c3;
  c3.typed = {"index:scan_nonzero_add"};
  c3.buffers = {{sums->buffer, Access::Read, false}, {positions, Access::ReadWrite, false}};
  declare_scan(c3);
  c3.count = n + 1;
  std::string body_c = kernel_main(Grid::Invocations, ctx.caps().workgroup_1d()) +
                       "  if (idx == " + wn + ") { buf1[idx] = buf0[" + wb + "]; return; }\n"
                       "  buf1[idx] = buf1[idx] + buf0[idx / " + std::to_string(kScanBlock) + "u];\n}\n";
  c3.body = [&] { return body_c; };
  launch_kernel(ctx, c3);
  ctx.pool().release(sums);
}

void nonzero_coordinates(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                         WGPUBuffer positions, WGPUBuffer out, uint32_t max_rows) {
  KernelLaunch k;
  k.typed = {"index:nonzero_coords", {static_cast<uint32_t>(flags.dtype)}};
  k.buffers = {{flags.buffer, Access::Read, false}, {positions, Access::Read, false}, {out, Access::ReadWrite, false}};
  declare_flags(k, shape, flags).set_u32("max_rows", max_rows);
  k.count = numel_of(shape);
  std::string body = flag_at(flags.dtype) + kernel_main(Grid::Invocations, ctx.caps().workgroup_1d()) +
                     "  if (!flag_at(idx) || buf1[idx] >= u.max_rows) { return; }\n"
                     "  let nd = u.nd;\n"
                     "  let row = buf1[idx] * nd;\n"
                     "  var rem = idx;\n"
                     "  for (var d = i32(nd) - 1; d >= 0; d = d - 1) {\n"
                     "    let du = u32(d);\n"
                     "    let sz = u_sizes(du);\n"
                     "    buf2[2u * (row + du)] = rem % sz;\n"
                     "    buf2[2u * (row + du) + 1u] = 0u;\n"
                     "    rem = rem / sz;\n"
                     "  }\n}\n";
  k.body = [&] { return body; };
  launch_kernel(ctx, k);
}

void compact_values(Context& ctx, const std::vector<int64_t>& shape, const StridedArg& flags,
                    WGPUBuffer positions, const StridedArg& values, WGPUBuffer out, uint64_t out_offset,
                    bool expand) {
  const DType dt = values.dtype;
  const bool sub = is_subword(dt);
  KernelLaunch k;
  k.typed = {expand ? "index:masked_expand" : "index:masked_compact",
             {static_cast<uint32_t>(flags.dtype), static_cast<uint32_t>(dt)}};
  if (expand)
    k.buffers = {{flags.buffer, Access::Read, false}, {positions, Access::Read, false},
                 {values.buffer, Access::ReadWrite, sub}, {out, Access::Read, false}};
  else
    k.buffers = {{flags.buffer, Access::Read, false}, {positions, Access::Read, false},
                 {values.buffer, Access::Read, false}, {out, Access::ReadWrite, sub}};
  declare_flags(k, shape, flags)
      .set_u32("values_offset", u32_of(static_cast<int64_t>(values.offset), "offset"))
      .set_u32("out_offset", u32_of(static_cast<int64_t>(out_offset), "offset"))
      .set_u32s("value_strides", words_of(values.strides, "stride"));
  k.count = numel_of(shape);
  std::string body = flag_at(flags.dtype) + kernel_main(Grid::Invocations, ctx.caps().workgroup_1d()) +
                     "  if (!flag_at(idx)) { return; }\n  var vo = u.values_offset;\n" +
                     coordinate_walk({{"vo", "u_value_strides(du)"}}) + "  let po = buf1[idx] + u.out_offset;\n" +
                     (expand ? move_bits(dt, "buf3", "po", "buf2", "vo", sub) : move_bits(dt, "buf2", "vo", "buf3", "po", sub)) +
                     "}\n";
  k.body = [&] { return body; };
  launch_kernel(ctx, k);
}

}  // namespace twgpu
