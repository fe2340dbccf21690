#include "kernels/random.h"

#include <algorithm>

#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_library.h"
#include "runtime/graph_capture.h"
#include "runtime/runtime.h"

namespace twgpu::rng {
namespace {

// Every kernel that draws numbers declares these first: the Philox key (the seed) and the
// counter of its first block, read by rng_block().
#define TWGPU_PHILOX_UNIFORMS {"key_lo"}, {"key_hi"}, {"ctr_lo"}, {"ctr_hi"}

KernelLaunch& set_philox(KernelLaunch& l, const PhiloxInput& in) {
  return l.set_u32("key_lo", static_cast<uint32_t>(in.seed))
      .set_u32("key_hi", static_cast<uint32_t>(in.seed >> 32))
      .set_u32("ctr_lo", static_cast<uint32_t>(in.offset))
      .set_u32("ctr_hi", static_cast<uint32_t>(in.offset >> 32));
}

// launch_kernel for a kernel that draws with `in` (set_philox): a graph capturing it
// learns where its Philox words are, so that each replay draws anew (graph_capture.h).
void launch_drawing(Context& ctx, KernelLaunch& l, const PhiloxInput& in) {
  if (CapturedGraph* graph = CapturedGraph::active(); graph && l.count > 0)
    graph->mark_philox_dispatch(l.word_of("key_lo"), in.seed, in.offset);
  launch_kernel(ctx, l);
}

void check_u32(uint64_t n, const char* what) {
  if (n > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported, std::string("torch_webgpu: ") + what + " over too many elements");
}

// WGSL computing `v` (f32 for the continuous distributions and Bernoulli, vec2<u32> int64
// for the integer ranges) for element `gi`, the `e`-th this invocation writes from its
// block `r`: word e of it, its pair e (64-bit values), or Box-Muller value e (bm0, bm1).
std::string dist_wgsl(Dist d, DType out_dtype, uint32_t e) {
  static const char* comp[4] = {"x", "y", "z", "w"};
  const std::string w = std::string("r.") + comp[e];
  const std::string pair = e == 0 ? "vec2<u32>(r.x, r.y)" : "vec2<u32>(r.z, r.w)";
  const std::string normal = "bm" + std::to_string(e / 2) + "." + comp[e % 2];
  switch (d) {
    case Dist::Uniform:
      // Rounding to a narrow dtype can reach `b`; such values become `a` (as CUDA does),
      // so every result lies in [a, b).
      return "  var v = rng_u01(" + w + ") * (pb - pa) + pa;\n"
             "  if (" + wgsl_from_bits(out_dtype, "to_bits(v)") + " >= pb) { v = pa; }\n";
    case Dist::Normal: return "  let v = pa + pb * " + normal + ";\n";
    case Dist::LogNormal: return "  let v = exp(pa + pb * " + normal + ");\n";
    case Dist::Cauchy:
      return "  let v = pa + pb * tan(3.14159265 * (rng_u01_open(" + w + ") - 0.5));\n";
    case Dist::Exponential:
      // u in (0, 1]; log(1) = 0 would give 0, which the distribution excludes.
      return "  let x01 = rng_u01_open_closed(" + w + ");\n"
             "  let lg = select(log(x01), -pb, x01 >= 1.0 - pb);\n"
             "  let v = -lg / pa;\n";
    case Dist::Geometric: return "  let v = ceil(log(rng_u01_open(" + w + ")) / pa);\n";
    case Dist::Bernoulli: return "  let v = select(0.0, 1.0, rng_u01(" + w + ") < pa);\n";
    case Dist::BernoulliTensor:
      return "  let p = f32(load_p(u.p_offset + gi));\n"
             "  if (is_nan(p) || p < 0.0 || p > 1.0) { atomicMax(&buf2[0], u.check_code); }\n"
             "  let v = select(0.0, 1.0, rng_u01(" + w + ") < p);\n";
    case Dist::RandomRange:
      return "  let range = vec2<u32>(u.range_lo, u.range_hi);\n"
             "  let words = " + pair + ";\n"
             "  var raw = vec2<u32>(0u, 0u);\n"
             "  if (range.y == 0u) { raw.x = words.x % range.x; }\n"
             "  else { raw = rng_u64_mod(words, range); }\n"
             "  let v = i64_add(vec2<u32>(u.base_lo, u.base_hi), raw);\n";
    case Dist::RandomFull64: return "  let v = " + pair + ";\n";
  }
  return "";
}

bool integer_valued(Dist d) { return d == Dist::RandomRange || d == Dist::RandomFull64; }

// Elements one Philox block gives a fill: its four words, or two 64-bit values. (One
// block per element left three quarters of Philox's arithmetic, the fill's whole cost on a
// GPU, unused.)
uint64_t per_block(Dist d) { return integer_valued(d) ? 2 : 4; }

}  // namespace

uint64_t fill_blocks(Dist d, uint64_t numel) { return (numel + per_block(d) - 1) / per_block(d); }

std::string philox_wgsl() {
  return std::string(wgsl::kRandomLib) + R"(
// Block i of this kernel's counter range.
fn rng_block(i: u32) -> vec4<u32> {
  let lo = u.ctr_lo + i;
  let hi = u.ctr_hi + select(0u, 1u, lo < i);
  return philox4x32_10(vec4<u32>(lo, hi, 0u, 0u), vec2<u32>(u.key_lo, u.key_hi));
}
)";
}

namespace {

// True when a fill may write each block's four results with whole-word stores: they are
// at most 4 bytes each, the output starts on a boundary of 4 elements and is bound whole
// (no window). 4-byte results go as one 16-byte store (four scalar stores 16 bytes apart
// across a warp move a quarter of each line per instruction); narrower ones as one or two
// words, without the per-element atomics a shared word needs otherwise.
bool packed_fill(const BufferRef& out, const FillParams& p, bool windowed) {
  return !windowed && element_size(out.dtype) <= 4 && per_block(p.dist) == 4 &&
         p.dist != Dist::BernoulliTensor && out.offset % 4 == 0;
}

// WGSL storing `block` (four results' bits, low end) at element `first` (a multiple of 4)
// of binding `buf`, elements of `size` bytes: whole words, where the block is whole; the
// last block stores its first elements up to u.n, read-modify-write in the words it
// shares with what follows the output (no other invocation writes them).
std::string packed_store(uint32_t size, const std::string& buf, const std::string& block,
                         const std::string& first) {
  if (size == 4)
    return "  if (idx * 4u + 3u < u.n) { " + buf + "[(" + first + ") >> 2u] = " + block + "; } else {\n"
           "    for (var e = 0u; idx * 4u + e < u.n; e = e + 1u) { " + buf + "[(" + first + ") >> 2u][e] = " +
           block + "[e]; }\n  }\n";
  const std::string per_word = std::to_string(4 / size), bits = std::to_string(8 * size);
  const std::string mask = size == 2 ? "0xffffu" : "0xffu";
  std::string s = "  if (idx * 4u + 3u < u.n) {\n";
  for (uint32_t w = 0; w < size; ++w) {
    s += "    " + buf + "[(" + first + ") / " + per_word + "u + " + std::to_string(w) + "u] = ";
    for (uint32_t j = 0; j < 4 / size; ++j)
      s += std::string(j ? " | " : "") + "((" + block + "[" + std::to_string(w * 4 / size + j) + "] & " + mask +
           ") << " + std::to_string(j * 8 * size) + "u)";
    s += ";\n";
  }
  return s + "  } else {\n"
             "    for (var e = 0u; idx * 4u + e < u.n; e = e + 1u) {\n"
             "      let w = (" + first + " + e) / " + per_word + "u;\n"
             "      let sh = ((" + first + " + e) % " + per_word + "u) * " + bits + "u;\n"
             "      " + buf + "[w] = (" + buf + "[w] & ~(" + mask + " << sh)) | ((" + block + "[e] & " + mask +
             ") << sh);\n    }\n  }\n";
}

void fill_random_piece(Context& ctx, const BufferRef& out, uint64_t numel, const FillParams& p,
                       const PhiloxInput& philox, bool windowed) {
  check_u32(numel, "random fill");
  const bool packed = packed_fill(out, p, windowed);
  const uint32_t size = static_cast<uint32_t>(element_size(out.dtype));
  const Compute c = compute_type_for(out.dtype);
  // a, b: the distribution's float parameters; range, base: the integer range's size and
  // start (64-bit); p_offset: Bernoulli probabilities (a tensor).
  static const UniformLayout layout({TWGPU_PHILOX_UNIFORMS, {"out_offset"}, {"n"},
                                     {"a", UniformType::F32}, {"b", UniformType::F32},
                                     {"range_lo"}, {"range_hi"}, {"base_lo"}, {"base_hi"},
                                     {"p_offset"}, {"check_code"}});
  KernelLaunch l;
  const bool with_p = p.dist == Dist::BernoulliTensor;
  l.typed = {"rng:fill", {static_cast<uint32_t>(p.dist), static_cast<uint32_t>(out.dtype),
                          with_p ? static_cast<uint32_t>(p.p.dtype) : 0u, packed ? 1u : 0u}};
  set_philox(l.declare(layout), philox)
      .set_u32("out_offset", static_cast<uint32_t>(out.offset))
      .set_u32("n", static_cast<uint32_t>(numel))
      .set_f32("a", p.a)
      .set_f32("b", p.b)
      .set_u32("range_lo", static_cast<uint32_t>(p.range))
      .set_u32("range_hi", static_cast<uint32_t>(p.range >> 32))
      .set_u32("base_lo", static_cast<uint32_t>(static_cast<uint64_t>(p.base)))
      .set_u32("base_hi", static_cast<uint32_t>(static_cast<uint64_t>(p.base) >> 32))
      .set_u32("p_offset", static_cast<uint32_t>(p.p.offset))
      .set_u32("check_code", p.check_code);
  l.buffers = {{out.buffer, Access::ReadWrite, is_subword(out.dtype) && !packed}};
  l.buffers[0].touches(l.word_of("out_offset"), out.dtype, out.offset, numel);
  l.buffers[0].vec4 = packed && size == 4;
  if (with_p) {
    l.buffers.push_back({p.p.buffer, Access::Read, false});
    l.buffers.back().touches(l.word_of("p_offset"), p.p.dtype, p.p.offset, numel);
    l.buffers.push_back({ctx.checks().arm(), Access::ReadWrite, true});
  }
  // An invocation per block, writing its per_block elements (the last block's up to n).
  l.count = fill_blocks(p.dist, numel);
  l.workgroup = ctx.caps().workgroup_1d();
  const uint32_t wg = l.workgroup;
  const Dist dist = p.dist;
  const DType dtype = out.dtype;
  const DType p_dtype = p.p.dtype;
  l.body = [&l, dist, dtype, p_dtype, c, wg, packed, size] {
    std::string s = philox_wgsl();
    if (packed)
      s += wgsl_bits_function("out_bits", dtype, c);
    else
      s += kernel_store("store", l.buffers, 0, dtype, c);
    if (dist == Dist::BernoulliTensor) s += kernel_load("load_p", l.buffers, 1, p_dtype);
    if (dist == Dist::Uniform) s += wgsl_bits_function("to_bits", dtype, Compute::F32);
    s += kernel_main(Grid::Invocations, wg);
    s += "  let r = rng_block(idx);\n"
         "  let pa = u.a;\n"
         "  let pb = u.b;\n";
    if (dist == Dist::Normal || dist == Dist::LogNormal)
      s += "  let bm0 = rng_box_muller(r.x, r.y);\n  let bm1 = rng_box_muller(r.z, r.w);\n";
    const Compute from = integer_valued(dist) ? Compute::I64 : Compute::F32;
    const uint32_t per = static_cast<uint32_t>(per_block(dist));
    if (packed) {
      s += "  var block = vec4<u32>();\n";
      for (uint32_t e = 0; e < 4; ++e)
        s += "  {\n" + dist_wgsl(dist, dtype, e) + "  block[" + std::to_string(e) + "] = out_bits(" +
             wgsl_convert(from, c, "v") + ");\n  }\n";
      return s + packed_store(size, "buf0", "block", "u.out_offset + idx * 4u") + "}\n";
    }
    for (uint32_t e = 0; e < per; ++e)
      s += "  {\n  let gi = idx * " + std::to_string(per) + "u + " + std::to_string(e) + "u;\n"
           "  if (gi < u.n) {\n" + dist_wgsl(dist, dtype, e) +
           "  store(u.out_offset + gi, " + wgsl_convert(from, c, "v") + ");\n  }\n  }\n";
    return s + "}\n";
  };
  launch_drawing(ctx, l, philox);
}

}  // namespace

// Tensors larger than one storage binding: pieces of the output, each with the Philox
// counter advanced by its first element's block, so the draws equal those of one launch.
uint64_t fill_random(Context& ctx, const BufferRef& out, uint64_t numel, const FillParams& p,
                     const PhiloxInput& philox) {
  if (numel == 0) return 0;
  check_u32(numel, "random fill");
  const bool windowed = ctx.pool().has_oversized() &&
                        (needs_window(ctx, out.buffer) ||
                         (p.dist == Dist::BernoulliTensor && needs_window(ctx, p.p.buffer)));
  // TORCH_WEBGPU_SYNC_CHECKS=1: a bad probability raises in this op.
  const bool sync_check = p.dist == Dist::BernoulliTensor && DeviceChecks::synchronous();
  if (!windowed) {
    fill_random_piece(ctx, out, numel, p, philox, false);
    if (sync_check) ctx.recorder().synchronize();
    return fill_blocks(p.dist, numel);
  }
  const uint64_t widest = std::max(element_size(out.dtype),
                                   p.dist == Dist::BernoulliTensor ? element_size(p.p.dtype) : 1);
  const uint64_t step =
      std::max<uint64_t>(64, rows_per_window(ctx, numel, widest, "random fill") / 64 * 64);
  for (uint64_t e = 0; e < numel; e += step) {
    BufferRef o = out;
    o.offset += e;
    FillParams q = p;
    q.p.offset += e;
    PhiloxInput counter = philox;
    counter.offset += e / per_block(p.dist);  // (step is a multiple of 64)
    fill_random_piece(ctx, o, std::min(step, numel - e), q, counter, true);
  }
  if (sync_check) ctx.recorder().synchronize();
  return fill_blocks(p.dist, numel);
}

// Entries per workgroup in the bitonic sort's local passes (two per invocation).
constexpr uint32_t kSortBlock = 512;

uint64_t permutation_scratch_words(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return 3 * p;
}

uint64_t random_permutation(Context& ctx, const BufferRef& out, uint64_t n, WGPUBuffer scratch,
                            const PhiloxInput& philox) {
  if (n == 0) return 0;
  check_u32(n, "randperm");
  uint64_t pow2 = 1;
  while (pow2 < n) pow2 <<= 1;
  check_u32(pow2, "randperm");
  const uint32_t wg = ctx.caps().workgroup_1d();

  // Entries (key.hi, key.lo, index); the padding sorts after every real entry.
  static const UniformLayout init_layout({TWGPU_PHILOX_UNIFORMS, {"n"}});
  KernelLaunch init;
  init.typed = {"rng:perm_init"};
  init.buffers = {{scratch, Access::ReadWrite, false}};
  set_philox(init.declare(init_layout), philox).set_u32("n", static_cast<uint32_t>(n));
  init.count = pow2;
  init.workgroup = wg;
  init.body = [wg] {
    return philox_wgsl() + kernel_main(Grid::Invocations, wg) +
           "  var key = vec2<u32>(0xffffffffu, 0xffffffffu);\n"
           "  if (idx < u.n) { let r = rng_block(idx); key = vec2<u32>(r.x, r.y); }\n"
           "  buf0[3u * idx] = key.x;\n  buf0[3u * idx + 1u] = key.y;\n  buf0[3u * idx + 2u] = idx;\n}\n";
  };
  launch_drawing(ctx, init, philox);

  // Stage k of the network, compare distance j.
  static const UniformLayout step_layout({{"j"}, {"k"}});
  KernelLaunch step;
  step.typed = {"rng:perm_bitonic_step"};
  step.buffers = {{scratch, Access::ReadWrite, false}};
  step.count = pow2 / 2;
  step.workgroup = wg;
  step.body = [wg] {
    return kernel_main(Grid::Invocations, wg) +
           "  let j = u.j;\n  let k = u.k;\n"
           "  let i = ((idx & ~(j - 1u)) << 1u) | (idx & (j - 1u));\n"
           "  let q = i + j;\n"
           "  let a = vec3<u32>(buf0[3u * i], buf0[3u * i + 1u], buf0[3u * i + 2u]);\n"
           "  let b = vec3<u32>(buf0[3u * q], buf0[3u * q + 1u], buf0[3u * q + 2u]);\n"
           "  let a_gt_b = a.x > b.x || (a.x == b.x && (a.y > b.y || (a.y == b.y && a.z > b.z)));\n"
           "  let ascending = (i & k) == 0u;\n"
           "  if (a_gt_b == ascending) {\n"
           "    buf0[3u * i] = b.x; buf0[3u * i + 1u] = b.y; buf0[3u * i + 2u] = b.z;\n"
           "    buf0[3u * q] = a.x; buf0[3u * q + 1u] = a.y; buf0[3u * q + 2u] = a.z;\n"
           "  }\n}\n";
  };
  auto global_step = [&](uint64_t j, uint64_t k) {
    step.declare(step_layout)
        .set_u32("j", static_cast<uint32_t>(j))
        .set_u32("k", static_cast<uint32_t>(k));  // k <= pow2 < 2^32
    launch_kernel(ctx, step);
  };
  if (pow2 < kSortBlock) {
    for (uint64_t k = 2; k <= pow2; k <<= 1)
      for (uint64_t j = k >> 1; j > 0; j >>= 1) global_step(j, k);
  } else {
    // Steps whose partners lie in the same block of kSortBlock entries run in workgroup
    // memory, many per dispatch; only the longer strides go through global memory.
    // k == 0: sort each block; otherwise the short-stride steps of stage k.
    static const UniformLayout local_layout({{"k"}});
    KernelLaunch local;
    local.typed = {"rng:perm_bitonic_local"};
    local.buffers = {{scratch, Access::ReadWrite, false}};
    local.grid = Grid::Groups;
    local.count = pow2 / kSortBlock;
    local.workgroup = kSortBlock / 2;
    local.body = [] {
      const std::string half = std::to_string(kSortBlock / 2);
      const std::string full = std::to_string(kSortBlock);
      return "var<workgroup> sh: array<vec3<u32>, " + full + ">;\n" +
             kernel_main(Grid::Groups, kSortBlock / 2) +
             "  let base = group * " + full + "u;\n"
             "  let valid = group < frame_count();\n"
             "  if (valid) {\n"
             "    for (var e = lid; e < " + full + "u; e = e + " + half + "u) {\n"
             "      let g = 3u * (base + e);\n"
             "      sh[e] = vec3<u32>(buf0[g], buf0[g + 1u], buf0[g + 2u]);\n"
             "    }\n"
             "  }\n"
             "  workgroupBarrier();\n"
             // u.k == 0: sort each block (every k up to the block size); otherwise the
             // short-stride steps of the merge for k = u.k.
             "  let kk = u.k;\n"
             "  var k = select(kk, 2u, kk == 0u);\n"
             "  let k_end = select(kk, " + full + "u, kk == 0u);\n"
             "  loop {\n"
             "    if (k > k_end) { break; }\n"
             "    var j = select(k >> 1u, " + half + "u, kk != 0u);\n"
             "    loop {\n"
             "      if (j == 0u) { break; }\n"
             "      let i = ((lid & ~(j - 1u)) << 1u) | (lid & (j - 1u));\n"
             "      let q = i + j;\n"
             "      let a = sh[i];\n      let b = sh[q];\n"
             "      let a_gt_b = a.x > b.x || (a.x == b.x && (a.y > b.y || (a.y == b.y && a.z > b.z)));\n"
             "      if (a_gt_b == (((base + i) & k) == 0u)) { sh[i] = b; sh[q] = a; }\n"
             "      workgroupBarrier();\n"
             "      j = j >> 1u;\n"
             "    }\n"
             "    k = k << 1u;\n"
             "  }\n"
             "  if (valid) {\n"
             "    for (var e = lid; e < " + full + "u; e = e + " + half + "u) {\n"
             "      let g = 3u * (base + e);\n"
             "      let v = sh[e];\n"
             "      buf0[g] = v.x; buf0[g + 1u] = v.y; buf0[g + 2u] = v.z;\n"
             "    }\n"
             "  }\n}\n";
    };
    auto local_pass = [&](uint64_t k) {
      local.declare(local_layout).set_u32("k", static_cast<uint32_t>(k));
      launch_kernel(ctx, local);
    };
    local_pass(0);
    for (uint64_t k = 2 * kSortBlock; k <= pow2; k <<= 1) {
      for (uint64_t j = k >> 1; j >= kSortBlock; j >>= 1) global_step(j, k);
      local_pass(k);
    }
  }

  const Compute c = compute_type_for(out.dtype);
  static const UniformLayout write_layout({{"out_offset"}});
  KernelLaunch write;
  write.typed = {"rng:perm_write", {static_cast<uint32_t>(out.dtype)}};
  write.buffers = {{scratch, Access::Read, false},
                   {out.buffer, Access::ReadWrite, is_subword(out.dtype)}};
  write.declare(write_layout).set_u32("out_offset", static_cast<uint32_t>(out.offset));
  write.count = n;
  write.workgroup = wg;
  const DType dtype = out.dtype;
  write.body = [&write, dtype, c, wg] {
    return kernel_store("store", write.buffers, 1, dtype, c) + kernel_main(Grid::Invocations, wg) +
           "  store(u.out_offset + idx, " + wgsl_convert(Compute::I32, c, "i32(buf0[3u * idx + 2u])") +
           ");\n}\n";
  };
  launch_kernel(ctx, write);
  return n;
}

void multinomial_prepare(Context& ctx, const BufferRef& probs, uint64_t rows, uint64_t cats,
                         WGPUBuffer stats, WGPUBuffer cdf) {
  if (rows == 0) return;
  check_u32(rows * cats, "multinomial");
  constexpr uint32_t wg = 64;
  const bool with_cdf = cdf != nullptr;
  static const UniformLayout layout({{"probs_offset"}, {"cats"}});
  KernelLaunch l;
  l.typed = {"rng:multinomial_prepare", {static_cast<uint32_t>(probs.dtype), with_cdf ? 1u : 0u}};
  l.buffers = {{probs.buffer, Access::Read, false}, {stats, Access::ReadWrite, false}};
  if (with_cdf) l.buffers.push_back({cdf, Access::ReadWrite, false});
  l.declare(layout)
      .set_u32("probs_offset", static_cast<uint32_t>(probs.offset))
      .set_u32("cats", static_cast<uint32_t>(cats));
  l.grid = Grid::Groups;
  l.count = rows;
  l.workgroup = wg;
  const DType dtype = probs.dtype;
  l.body = [&l, dtype, with_cdf] {
    std::string s = kernel_load("load_p", l.buffers, 0, dtype) +
                    "var<workgroup> part: array<f32, 64>;\n"
                    "var<workgroup> bad: array<u32, 64>;\n" +
                    kernel_main(Grid::Groups, 64) +
                    "  let C = u.cats;\n"
                    "  let chunk = (C + 63u) / 64u;\n"
                    "  let start = min(lid * chunk, C);\n"
                    "  let end = min(start + chunk, C);\n"
                    "  let valid = group < frame_count();\n"
                    "  let row = u.probs_offset + group * C;\n"
                    "  var s = 0.0;\n  var fl = 0u;\n"
                    "  if (valid) {\n"
                    "    for (var c = start; c < end; c = c + 1u) {\n"
                    "      let p = f32(load_p(row + c));\n"
                    "      if (is_nan(p) || p < 0.0) { fl = fl | 1u; } else if (is_inf(p)) { fl = fl | 2u; }\n"
                    "      s = s + p;\n"
                    "    }\n"
                    "  }\n"
                    "  part[lid] = s;\n  bad[lid] = fl;\n"
                    "  workgroupBarrier();\n"
                    "  if (lid == 0u) {\n"
                    "    var run = 0.0;\n    var all = 0u;\n"
                    "    for (var t = 0u; t < 64u; t = t + 1u) {\n"
                    "      let x = part[t];\n      part[t] = run;\n      run = run + x;\n      all = all | bad[t];\n"
                    "    }\n"
                    "    if (valid) {\n"
                    "      if (!(run > 0.0)) { all = all | 4u; }\n"
                    "      buf1[2u * group] = bitcast<u32>(run);\n      buf1[2u * group + 1u] = all;\n"
                    "    }\n"
                    "  }\n"
                    "  workgroupBarrier();\n";
    if (with_cdf) {
      s += "  if (valid) {\n"
           "    var run = part[lid];\n"
           "    for (var c = start; c < end; c = c + 1u) {\n"
           "      run = run + f32(load_p(row + c));\n"
           "      buf2[group * C + c] = bitcast<u32>(run);\n"
           "    }\n"
           "  }\n";
    }
    return s + "}\n";
  };
  launch_kernel(ctx, l);
}

uint64_t multinomial_with_replacement(Context& ctx, const BufferRef& probs, WGPUBuffer cdf,
                                      uint64_t rows, uint64_t cats, uint64_t samples,
                                      const BufferRef& out, const PhiloxInput& philox) {
  (void)probs;
  const uint64_t n = rows * samples;
  if (n == 0) return 0;
  check_u32(n, "multinomial");
  const uint32_t wg = ctx.caps().workgroup_1d();
  static const UniformLayout layout({TWGPU_PHILOX_UNIFORMS, {"cats"}, {"samples"}, {"out_offset"}});
  KernelLaunch l;
  l.typed = {"rng:multinomial_replacement"};
  l.buffers = {{cdf, Access::Read, false}, {out.buffer, Access::ReadWrite, false}};
  set_philox(l.declare(layout), philox)
      .set_u32("cats", static_cast<uint32_t>(cats))
      .set_u32("samples", static_cast<uint32_t>(samples))
      .set_u32("out_offset", static_cast<uint32_t>(out.offset));
  l.count = n;
  l.workgroup = wg;
  l.body = [&l, wg] {
    return philox_wgsl() + kernel_store("store", l.buffers, 1, DType::Int64, Compute::I64) +
           "fn cdf_at(i: u32) -> f32 { return bitcast<f32>(buf0[i]); }\n" +
           kernel_main(Grid::Invocations, wg) +
           "  let C = u.cats;\n"
           "  let base = (idx / u.samples) * C;\n"
           "  let total = cdf_at(base + C - 1u);\n"
           "  let goal = rng_u01(rng_block(idx).x) * total;\n"
           // The first category whose running sum exceeds the target (zero-probability
           // categories have empty intervals and are never chosen).
           "  var lo = 0u;\n  var hi = C;\n"
           "  while (lo < hi) {\n"
           "    let mid = (lo + hi) / 2u;\n"
           "    if (cdf_at(base + mid) > goal) { hi = mid; } else { lo = mid + 1u; }\n"
           "  }\n"
           // Rounding put the target at the total: take the last category with mass.
           "  if (lo >= C) {\n"
           "    lo = 0u; hi = C;\n"
           "    while (lo < hi) {\n"
           "      let mid = (lo + hi) / 2u;\n"
           "      if (cdf_at(base + mid) >= total) { hi = mid; } else { lo = mid + 1u; }\n"
           "    }\n"
           "  }\n"
           "  store(u.out_offset + idx, vec2<u32>(lo, 0u));\n}\n";
  };
  launch_drawing(ctx, l, philox);
  return n;
}

uint64_t multinomial_without_replacement(Context& ctx, const BufferRef& probs, WGPUBuffer keys,
                                         uint64_t rows, uint64_t cats, uint64_t samples,
                                         const BufferRef& out, const PhiloxInput& philox) {
  if (rows == 0) return 0;
  check_u32(rows * cats, "multinomial");
  static const UniformLayout layout(
      {TWGPU_PHILOX_UNIFORMS, {"probs_offset"}, {"cats"}, {"samples"}, {"out_offset"}});
  KernelLaunch l;
  l.typed = {"rng:multinomial_no_replacement", {static_cast<uint32_t>(probs.dtype)}};
  l.buffers = {{probs.buffer, Access::Read, false},
               {keys, Access::ReadWrite, false},
               {out.buffer, Access::ReadWrite, false}};
  set_philox(l.declare(layout), philox)
      .set_u32("probs_offset", static_cast<uint32_t>(probs.offset))
      .set_u32("cats", static_cast<uint32_t>(cats))
      .set_u32("samples", static_cast<uint32_t>(samples))
      .set_u32("out_offset", static_cast<uint32_t>(out.offset));
  l.grid = Grid::Groups;
  l.count = rows;
  l.workgroup = 64;
  const DType dtype = probs.dtype;
  l.body = [&l, dtype] {
    return philox_wgsl() + kernel_load("load_p", l.buffers, 0, dtype) +
           kernel_store("store", l.buffers, 2, DType::Int64, Compute::I64) +
           "var<workgroup> best_key: array<f32, 64>;\n"
           "var<workgroup> best_idx: array<u32, 64>;\n" +
           kernel_main(Grid::Groups, 64) +
           "  let C = u.cats;\n  let S = u.samples;\n"
           "  let valid = group < frame_count();\n"
           "  let row = group * C;\n"
           // Exponential race: p / Exp(1) keys; the largest keys form a sample without
           // replacement with the right probabilities.
           "  if (valid) {\n"
           "    for (var c = lid; c < C; c = c + 64u) {\n"
           "      let e = -log(rng_u01_open(rng_block(row + c).x));\n"
           "      buf1[row + c] = bitcast<u32>(f32(load_p(u.probs_offset + row + c)) / e);\n"
           "    }\n"
           "  }\n"
           "  storageBarrier();\n  workgroupBarrier();\n"
           "  for (var s = 0u; s < S; s = s + 1u) {\n"
           "    var bk = -1.0;\n    var bi = 0xffffffffu;\n"
           "    if (valid) {\n"
           "      for (var c = lid; c < C; c = c + 64u) {\n"
           "        let k = bitcast<f32>(buf1[row + c]);\n"
           "        if (k > bk) { bk = k; bi = c; }\n"
           "      }\n"
           "    }\n"
           "    best_key[lid] = bk;\n    best_idx[lid] = bi;\n"
           "    workgroupBarrier();\n"
           "    for (var w = 32u; w > 0u; w = w >> 1u) {\n"
           "      if (lid < w) {\n"
           "        let ok = best_key[lid + w];\n        let oi = best_idx[lid + w];\n"
           "        if (ok > best_key[lid] || (ok == best_key[lid] && oi < best_idx[lid])) {\n"
           "          best_key[lid] = ok;\n          best_idx[lid] = oi;\n"
           "        }\n"
           "      }\n"
           "      workgroupBarrier();\n"
           "    }\n"
           "    if (lid == 0u && valid) {\n"
           "      let c = best_idx[0];\n"
           "      store(u.out_offset + group * S + s, vec2<u32>(c, 0u));\n"
           "      buf1[row + c] = bitcast<u32>(-2.0);\n"
           "    }\n"
           "    storageBarrier();\n    workgroupBarrier();\n"
           "  }\n}\n";
  };
  launch_drawing(ctx, l, philox);
  return rows * cats;
}

uint64_t dropout_forward(Context& ctx, const BufferRef& in, const BufferRef& out,
                         const BufferRef& mask, uint64_t numel, float keep, float scale,
                         const PhiloxInput& philox) {
  if (numel == 0) return 0;
  check_u32(numel, "dropout");
  const uint32_t wg = ctx.caps().workgroup_1d();
  static const UniformLayout layout({TWGPU_PHILOX_UNIFORMS, {"in_offset"}, {"out_offset"},
                                     {"mask_offset"}, {"n"}, {"keep", UniformType::F32},
                                     {"scale", UniformType::F32}});
  // Outputs on a 4-element boundary take whole-word stores, as packed fills do.
  const bool packed = element_size(out.dtype) <= 4 && out.offset % 4 == 0 && mask.offset % 4 == 0;
  const uint32_t size = static_cast<uint32_t>(element_size(out.dtype));
  KernelLaunch l;
  l.typed = {"rng:dropout", {static_cast<uint32_t>(in.dtype), packed ? 1u : 0u}};
  l.buffers = {{in.buffer, Access::Read, false},
               {out.buffer, Access::ReadWrite, is_subword(out.dtype) && !packed},
               {mask.buffer, Access::ReadWrite, !packed}};
  l.buffers[1].vec4 = packed && size == 4;
  set_philox(l.declare(layout), philox)
      .set_u32("in_offset", static_cast<uint32_t>(in.offset))
      .set_u32("out_offset", static_cast<uint32_t>(out.offset))
      .set_u32("mask_offset", static_cast<uint32_t>(mask.offset))
      .set_u32("n", static_cast<uint32_t>(numel))
      .set_f32("keep", keep)
      .set_f32("scale", scale);
  // As fills: an invocation per block, one element per word of it.
  l.count = fill_blocks(Dist::Bernoulli, numel);
  l.workgroup = wg;
  const DType dtype = in.dtype;
  l.body = [&l, dtype, wg, packed, size] {
    std::string s = philox_wgsl() + kernel_load("load_x", l.buffers, 0, dtype);
    if (!packed)
      return s + kernel_store("store_out", l.buffers, 1, dtype, Compute::F32) +
             kernel_store("store_mask", l.buffers, 2, DType::Bool, Compute::I32) +
             kernel_main(Grid::Invocations, wg) +
             "  let r = rng_block(idx);\n"
             "  for (var e = 0u; e < 4u; e = e + 1u) {\n"
             "    let gi = idx * 4u + e;\n"
             "    if (gi >= u.n) { break; }\n"
             "    let kept = rng_u01(r[e]) < u.keep;\n"
             "    let x = f32(load_x(u.in_offset + gi));\n"
             "    store_out(u.out_offset + gi, (x * select(0.0, 1.0, kept)) * u.scale);\n"
             "    store_mask(u.mask_offset + gi, select(0, 1, kept));\n"
             "  }\n}\n";
    return s + wgsl_bits_function("out_bits", dtype, Compute::F32) + kernel_main(Grid::Invocations, wg) +
           "  let r = rng_block(idx);\n"
           "  var outs = vec4<u32>();\n  var kept = vec4<u32>();\n"
           "  for (var e = 0u; e < 4u; e = e + 1u) {\n"
           "    let gi = idx * 4u + e;\n"
           "    if (gi >= u.n) { break; }\n"
           "    let keep = rng_u01(r[e]) < u.keep;\n"
           "    outs[e] = out_bits((f32(load_x(u.in_offset + gi)) * select(0.0, 1.0, keep)) * u.scale);\n"
           "    kept[e] = select(0u, 1u, keep);\n"
           "  }\n" +
           packed_store(size, "buf1", "outs", "u.out_offset + idx * 4u") +
           packed_store(1, "buf2", "kept", "u.mask_offset + idx * 4u") + "}\n";
  };
  launch_drawing(ctx, l, philox);
  return fill_blocks(Dist::Bernoulli, numel);
}

void flag_negative_or_nan(Context& ctx, const BufferRef& x, uint64_t numel, WGPUBuffer flag) {
  if (numel == 0) return;
  check_u32(numel, "normal");
  const uint32_t wg = ctx.caps().workgroup_1d();
  static const UniformLayout layout({{"x_offset"}});
  KernelLaunch l;
  l.typed = {"rng:flag_negative", {static_cast<uint32_t>(x.dtype)}};
  l.buffers = {{x.buffer, Access::Read, false}, {flag, Access::ReadWrite, true}};
  l.declare(layout).set_u32("x_offset", static_cast<uint32_t>(x.offset));
  l.count = numel;
  l.workgroup = wg;
  const DType dtype = x.dtype;
  l.body = [&l, dtype, wg] {
    return kernel_load("load_x", l.buffers, 0, dtype) + kernel_main(Grid::Invocations, wg) +
           "  let v = f32(load_x(u.x_offset + idx));\n"
           "  if (is_nan(v) || v < 0.0) { atomicOr(&buf1[0], 1u); }\n}\n";
  };
  launch_kernel(ctx, l);
}

}  // namespace twgpu::rng
