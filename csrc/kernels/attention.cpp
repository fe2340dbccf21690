#include "kernels/attention.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>

#include "kernels/adapter_kind.h"
#include "kernels/binding_window.h"
#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu::attn {
namespace {

// How one launch spreads the work: a workgroup of `wg` invocations takes `rows` query
// rows (rows * keys == wg) and walks its key range in chunks of `keys`, one key per
// invocation for the scores; for p v an invocation owns `per_lane` units of its row's
// output (a vec4 of 4 columns, or with `pv4` off one column), and, when a row has fewer
// units than a chunk has keys, `slices` invocations split the chunk's keys for one unit
// (summed at the end).
struct Plan {
  // Lanes variant: one query row per invocation, walking every key itself (no barriers;
  // the key and value rows it reads are the same for the whole workgroup).
  bool lanes = false;
  // Tiles variant (GPU prefill): `rows` query rows per workgroup, `kTileLanes` invocations
  // per row; each chunk of `keys` keys and values is staged in workgroup memory once for
  // all rows, and each invocation of a row keeps its own online softmax over every
  // kTileLanes-th key of a chunk (merged across the row's invocations at the end).
  bool tiles = false;
  // Blocks variant (GPU prefill where workgroup storage holds it): a workgroup takes `rows`
  // query rows staged once, each chunk of `keys` keys and values staged; invocation
  // (tx, ty) of a bx x (wg / bx) grid computes the scores of rows ty * kBlockRows + 0..3
  // against keys tx + bx * 0..3 from those tiles (a GEMM's register block: each staged
  // word read serves four rows or keys), and p v for the same rows over value columns
  // tx + bx * w (vec4 units). The rows' softmax state is the same in every invocation
  // of a row (the chunk's max merged by subgroup shuffles or through workgroup memory).
  bool blocks = false;
  uint32_t bx = 8;
  bool shared_kv = false;  // blocks: V staged where K was, after the scores (large head dims)
  uint32_t wg = 64, rows = 1, keys = 64, per_lane = 1, lane_dims = 1, slices = 1;
  uint32_t q_words = 4;       // workgroup floats per query row (D rounded up to 4)
  // Key (and, lanes variant, value) rows read 16 bytes at a time through a vec4 binding
  // (rows contiguous and 16-byte aligned, the buffer bound whole), after the mask's.
  bool k_vec4 = false, v_vec4 = false;
  uint32_t splits = 1;        // key ranges per row, each its own workgroup (flash decoding)
  uint32_t split_keys = 0;    // keys per range (a multiple of `keys`)
  // Rows variant (decode): p v in units of 4 value columns, so a row takes a quarter of
  // the invocations and a chunk's keys split into 4x the slices: the per-invocation key
  // loop (dependent loads) is that much shorter. Off: a column per invocation (prefill's
  // blocks of rows; TORCH_WEBGPU_ATTENTION_PV=scalar, for A/B measurements).
  bool pv4 = false;
  // Rows variant (decode on GPUs): q . k over four of K's 16-byte words a step, their loads
  // in flight together (llvmpipe ran half types 15% slower so: a word a step there).
  bool k_words4 = false;
  uint32_t subgroup = 0;      // rows variant: a chunk's max through subgroups (group_reduce.h)
};

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

uint64_t workgroup_bytes(const Plan& p) {
  return 4ull * (p.rows * p.q_words + 2 * p.wg + p.wg * p.per_lane * (p.pv4 ? 4 : 1));
}

// True when rows of `cols` elements of view `v` can be read as vec4<u32> words.
bool vec4_rows(Context& ctx, const View& v, uint32_t cols, DType dtype) {
  const uint32_t per = 16 / element_size(dtype);
  return v.buffer && cols > 0 && cols % per == 0 && v.strides[3] == 1 && v.offset % per == 0 &&
         v.strides[0] % per == 0 && v.strides[1] % per == 0 && v.strides[2] % per == 0 &&
         !needs_window(ctx, v.buffer);
}

// One key range per row block, or several, each its own workgroup (merged by a second
// pass that rescales their partial softmax states), when fewer than half of `target`
// workgroups would run; each range at least `chunks` chunks of p.keys.
void split_keys(const AttentionArgs& a, uint64_t target, uint32_t chunks, Plan& p) {
  p.split_keys = std::max<uint32_t>(a.kv_len, 1);
  const uint64_t groups = uint64_t(a.batch) * a.heads * ceil_div(a.q_len, p.rows);
  if (groups * 2 > target || a.kv_len < 2 * chunks * p.keys) return;
  const uint32_t want = std::min(ceil_div(target, groups), ceil_div(a.kv_len, chunks * p.keys));
  p.split_keys = ceil_div(ceil_div(a.kv_len, want), p.keys) * p.keys;
  p.splits = ceil_div(a.kv_len, p.split_keys);
}

constexpr uint32_t kTileLanes = 4;

// Vec4 words of a staged key or value row: the head dim rounded up to 4 plus one word of
// padding, so the kTileLanes keys a row's invocations read at once fall in distinct banks.
uint32_t tile_row_words(uint32_t dim) { return (dim + 3) / 4 + 1; }

// The tiles variant's chunk: the largest of 32 (64 for small head dims) down to kTileLanes
// keys whose staged K and V fit the adapter's workgroup storage, and whose K tile holds a
// vec4 per invocation for the final merge. False when none fits.
bool plan_tiles(Context& ctx, const AttentionArgs& a, bool software, Plan& p) {
  p.wg = std::min<uint32_t>(128, ctx.caps().workgroup_1d());
  if (p.wg < kTileLanes || a.dim == 0 || a.v_dim == 0) return false;
  const uint64_t limit = ctx.caps().max_workgroup_storage ? ctx.caps().max_workgroup_storage : 16384;
  const uint32_t kw = tile_row_words(a.dim), vw = tile_row_words(a.v_dim);
  p.keys = 0;
  for (uint32_t tk : {32u, 64u, 16u, 8u, 4u}) {
    const uint64_t bytes = 16ull * tk * (kw + vw) + 8ull * p.wg;
    if (tk >= kTileLanes && bytes <= limit && tk * kw >= p.wg) {
      p.keys = tk;
      break;
    }
  }
  if (p.keys == 0) return false;
  p.tiles = true;
  p.rows = p.wg / kTileLanes;
  p.k_vec4 = a.kv_len > 0 && vec4_rows(ctx, a.k, a.dim, a.dtype);
  p.v_vec4 = a.kv_len > 0 && vec4_rows(ctx, a.v, a.v_dim, a.dtype);
  // Few row blocks (a few heads, a short prompt) leave most of a GPU idle.
  split_keys(a, software ? 0 : 512, 4, p);
  return true;
}

// Rows (of scores and outputs) and keys in a blocks invocation's register block.
constexpr uint32_t kBlockRows = 4, kBlockKeys = 4;
static_assert(kBlockRows == 4 && kBlockKeys == 4, "blocks_body packs a block's rows and keys in vec4s");
// Value units (vec4 columns) an invocation of the blocks variant keeps at most per row.
constexpr uint32_t kBlockValueUnits = 4;

// Workgroup bytes of the blocks variant: the query rows, K and V chunks (vec4 rows padded
// by a word; `shared_kv`: one array for both, in turn), p (a vec4 of rows per key) and the
// rows' chunk maxima.
uint64_t blocks_bytes(const AttentionArgs& a, uint32_t tq, uint32_t tk, uint32_t bx, bool shared_kv) {
  const uint64_t qw = tile_row_words(a.dim), vw = tile_row_words(a.v_dim), pw = tq / 4 + 1;
  const uint64_t kv = shared_kv ? std::max(qw, vw) : qw + vw;
  return 16ull * (tq * qw + tk * kv + tk * pw) + 4ull * tq * bx;
}

// The blocks variant's shape: the largest block (64 rows x 32 keys, then 32 x 32) whose
// tiles fit the adapter's workgroup storage, K and V each in their own array or else in
// one (head dim 128 in 48 KiB); head dims up to 4 * bx * kBlockValueUnits (128). False
// when none fits (the spec's default 16 KiB: the tiles variant runs).
bool plan_blocks(Context& ctx, const AttentionArgs& a, bool software, Plan& p) {
  if (a.dim == 0 || a.v_dim == 0) return false;
  const uint64_t limit = ctx.caps().max_workgroup_storage ? ctx.caps().max_workgroup_storage : 16384;
  for (const auto [tq, tk, shared_kv] : {std::tuple{64u, 32u, false}, std::tuple{32u, 32u, false},
                                         std::tuple{64u, 32u, true}, std::tuple{32u, 32u, true}}) {
    const uint32_t bx = tk / kBlockKeys, wg = bx * (tq / kBlockRows);
    const uint32_t units = std::max((a.dim + 3) / 4, (a.v_dim + 3) / 4);
    if (wg > ctx.caps().workgroup_1d() || units > bx * kBlockValueUnits ||
        blocks_bytes(a, tq, tk, bx, shared_kv) > limit)
      continue;
    p.blocks = true;
    p.shared_kv = shared_kv;
    p.wg = wg;
    p.bx = bx;
    p.rows = tq;
    p.keys = tk;
    p.k_vec4 = a.kv_len > 0 && vec4_rows(ctx, a.k, a.dim, a.dtype);
    p.v_vec4 = a.kv_len > 0 && vec4_rows(ctx, a.v, a.v_dim, a.dtype);
    split_keys(a, software ? 0 : 512, 4, p);
    return true;
  }
  return false;
}

Plan plan_for(Context& ctx, const AttentionArgs& a) {
  const bool software = software_adapter(ctx);
  // A fresh plan per variant tried; every variant may merge through subgroups.
  const Plan fresh = [&ctx] {
    Plan f;
    f.subgroup = ctx.caps().subgroup_size;
    return f;
  }();
  Plan p = fresh;
  // TORCH_WEBGPU_ATTENTION_VARIANT=rows|lanes|tiles|blocks overrides the choice (tests,
  // measurements; blocks falls back to tiles where it does not fit).
  std::string force;
  if (const char* f = std::getenv("TORCH_WEBGPU_ATTENTION_VARIANT")) force = f;
  // GPUs' prefill: staged query rows, K and V in register blocks, or (where workgroup
  // storage is too small for them) staged K/V tiles shared by a block of query rows.
  if ((force == "blocks" || (force.empty() && !software && a.q_len >= 16)) && plan_blocks(ctx, a, software, p))
    return p;
  p = fresh;
  if ((force == "tiles" || force == "blocks" || (force.empty() && !software && a.q_len >= 16)) &&
      plan_tiles(ctx, a, software, p))
    return p;
  p = fresh;
  const bool lanes_fit = a.dim % 4 == 0 && a.v_dim % 4 == 0 && a.dim > 0 && a.v_dim > 0;
  // Software adapters run a workgroup's invocations as SIMD lanes: for prefill, a query
  // row per lane reads each key row once for all lanes, with no barrier per chunk.
  if (lanes_fit && (force == "lanes" || (force.empty() && software && a.q_len >= 16))) {
    p.lanes = true;
    p.wg = std::min<uint32_t>(16, ctx.caps().workgroup_1d());
    p.rows = p.wg;
    p.split_keys = std::max<uint32_t>(a.kv_len, 1);
    p.k_vec4 = a.dtype == DType::Float32 && a.kv_len > 0 && vec4_rows(ctx, a.k, a.dim, a.dtype);
    p.v_vec4 = a.dtype == DType::Float32 && a.kv_len > 0 && vec4_rows(ctx, a.v, a.v_dim, a.dtype);
    return p;
  }
  // Software adapters run a workgroup on one core (barriers cost, shared memory buys
  // nothing): small groups. GPUs: 128 invocations keep a chunk's loads in flight.
  p.wg = std::min<uint32_t>(software ? 64 : 128, ctx.caps().workgroup_1d());
  p.q_words = std::max<uint32_t>(4, (a.dim + 3) / 4 * 4);
  p.k_vec4 = a.kv_len > 0 && vec4_rows(ctx, a.k, a.dim, a.dtype);
  // Vec4 p v units for decode only: prefill's blocks of rows already spread a row's
  // columns over every invocation of their small chunks (there, on llvmpipe, 4-column
  // units were up to 12% slower: fewer invocations share a row's columns).
  const char* pv = std::getenv("TORCH_WEBGPU_ATTENTION_PV");
  p.pv4 = a.q_len < 16 && !(pv && std::string(pv) == "scalar");
  p.k_words4 = p.pv4 && !software;
  p.v_vec4 = p.pv4 && a.kv_len > 0 && vec4_rows(ctx, a.v, a.v_dim, a.dtype);
  const uint32_t units = p.pv4 ? (a.v_dim + 3) / 4 : a.v_dim;  // of a row's p v output
  // Prefill: several query rows per workgroup share each chunk's barriers. Decode (a few
  // rows): one row per workgroup, every invocation on its keys.
  p.rows = a.q_len >= 16 ? 4 : 1;
  const uint64_t limit = std::min<uint64_t>(ctx.caps().max_workgroup_storage, 16384);
  for (;;) {
    p.keys = p.wg / p.rows;
    p.lane_dims = std::max<uint32_t>(1, std::min(units, p.keys));
    p.per_lane = units > p.keys ? ceil_div(units, p.keys) : 1;
    p.slices = p.keys / p.lane_dims;
    if (p.rows == 1 || workgroup_bytes(p) <= limit) break;
    p.rows /= 2;
  }
  // Few rows over a long cache leave most of a GPU idle.
  split_keys(a, software ? 0 : 256, 2, p);
  return p;
}

KernelBuffer view_buffer(const View& v, Access access, DType dtype, uint32_t word,
                         const std::array<uint32_t, 4>& sizes, bool atomic = false) {
  KernelBuffer kb{v.buffer, access, atomic};
  uint64_t last = v.offset;
  for (int i = 0; i < 4; ++i) last += uint64_t(sizes[i] - 1) * v.strides[i];
  kb.touches(word, dtype, v.offset, last + 1 - v.offset);
  return kb;
}

const UniformLayout& rows_layout() {
  static const UniformLayout layout(
      {{"hq"}, {"lq"}, {"lk"}, {"d"}, {"dv"}, {"grp"}, {"blocks"}, {"splits"}, {"split_keys"},
       {"slices"}, {"dvk"}, {"causal"}, {"scale", UniformType::F32},
       {"q_off"}, {"q_sb"}, {"q_sh"}, {"q_sl"}, {"q_sd"},
       {"k_off"}, {"k_sb"}, {"k_sh"}, {"k_sl"}, {"k_sd"},
       {"v_off"}, {"v_sb"}, {"v_sh"}, {"v_sl"}, {"v_sd"},
       {"m_off"}, {"m_sb"}, {"m_sh"}, {"m_sl"}, {"m_sk"},
       {"o_off"}, {"o_sb"}, {"o_sh"}, {"o_sl"}, {"o_sd"}, {"lse_off"}});
  return layout;
}

void set_view(KernelLaunch& l, const char* name, const View& v) {
  const std::string n(name);
  const char* s[4] = {"_sb", "_sh", "_sl", "_sd"};
  l.set_u32(n + "_off", static_cast<uint32_t>(v.offset));
  for (int i = 0; i < 4; ++i) {
    // The mask's last dim is the keys.
    std::string field = n + s[i];
    if (n == "m" && i == 3) field = "m_sk";
    l.set_u32(field, static_cast<uint32_t>(v.strides[i]));
  }
}

// `fn NAME(i: u32) -> f32`: element i of binding `b` as f32.
std::string load_f32(const std::string& name, const std::vector<KernelBuffer>& bufs, size_t b,
                     DType dt) {
  return kernel_load(name + "_raw", bufs, b, dt) + "fn " + name + "(i: u32) -> f32 { return " +
         wgsl_convert(compute_type_for(dt), Compute::F32, name + "_raw(i)") + "; }\n";
}

// A max that keeps NaN (WGSL's max may drop it): a NaN score makes its row NaN, as in
// the math path's softmax.
const char kNanMax[] = "fn nan_max(m: f32, v: f32) -> f32 { if (is_nan(v) || v > m) { return v; } return m; }\n";

// Two bfloat16 of a u32 word as f32.
const char kBf2[] = "fn bf2(x: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(x << 16u), bitcast<f32>(x & 0xffff0000u)); }\n";

// The rows and tiles variants' workgroup: split, query-row block, batch and head of
// `group` (the workgroups past the grid's end run too, as dead ones, for the barriers).
const char kBlockOfRows[] = R"(  let live = group < frame_count();
  let gi = select(0u, group, live);
  let split = gi % u.splits;
  let blk = (gi / u.splits) % u.blocks;
  let bh = (gi / u.splits) / u.blocks;
  let h = bh % u.hq;
  let b = bh / u.hq;
  let hk = h / u.grp;
)";

std::string block_main(uint32_t wg) { return kernel_main(Grid::Groups, wg) + kBlockOfRows; }

// Their key range [kb, ke) (`split`'s keys; causal: none past the block's last row, so
// later chunks are skipped) and where the operands' rows of the head start.
const char kKeyRange[] = R"(  let kb = split * u.split_keys;
  var ke = min(u.lk, kb + u.split_keys);
  if (u.causal != 0u) { ke = min(ke, min(u.lq, blk * TQ + TQ)); }
  if (!live) { ke = kb; }
  let kbase = u.k_off + b * u.k_sb + hk * u.k_sh;
  let vbase = u.v_off + b * u.v_sb + hk * u.v_sh;
  let mrow = u.m_off + b * u.m_sb + h * u.m_sh + i * u.m_sl;
)";

std::string N(uint64_t v) { return std::to_string(v) + "u"; }  // a WGSL u32 literal

// q, k, v as f32 (`fq`, `fk`, `fv` of an element index) and `add_mask(s, at)`: the score
// plus mask element `at` (float mask), -inf where it is false (bool mask), or s.
std::string operand_fns(const AttentionArgs& a, const std::vector<KernelBuffer>& bufs, DType mask_dtype) {
  std::string s = load_f32("fq", bufs, 0, a.dtype) + load_f32("fk", bufs, 1, a.dtype) +
                  load_f32("fv", bufs, 2, a.dtype) + kNanMax;
  if (a.mask_kind == MaskKind::Float)
    return s + load_f32("fm", bufs, 3, mask_dtype) +
           "fn add_mask(s: f32, at: u32) -> f32 { return s + fm(at); }\n";
  if (a.mask_kind == MaskKind::Bool)
    return s + kernel_load("bm", bufs, 3, DType::Bool) +
           "fn add_mask(s: f32, at: u32) -> f32 { return select(-f32_inf(), s, bm(at) != 0); }\n";
  return s + "fn add_mask(s: f32, at: u32) -> f32 { return s; }\n";
}

// `put(i, x)` into the last bindings: the output (q's dtype) and `put_lse` the logsumexp,
// or, for key ranges merged later, the float32 scratch of partial states.
std::string output_fns(const AttentionArgs& a, const std::vector<KernelBuffer>& bufs, bool partial) {
  if (partial) return kernel_store("put", bufs, bufs.size() - 1, DType::Float32, Compute::F32);
  return kernel_store("put", bufs, bufs.size() - 2, a.dtype, Compute::F32) +
         kernel_store("put_lse", bufs, bufs.size() - 1, DType::Float32, Compute::F32);
}

// The rows variant's p v over an invocation's keys (jj, jj + slices, ...) one at a time
// (prefill's column per invocation; decode's before the vec4 units, PV=scalar).
const char kOneKeyAStep[] = R"(      for (; jj < nk; jj = jj + u.slices) {
        let pj = ps[r * KC + jj];
        l_run = l_run + pj;
        let vr = vbase + (c0 + jj) * u.v_sl;
        for (var q = 0u; q < R; q = q + 1u) {
          let c = CW * (d0 + q * u.dvk);
          if (c < u.dv) { acc[q] = acc[q] + pj * vrow(vr, c); }
        }
      }
)";

// The rows variant's p v over an invocation's keys (jj, jj + slices, ...) four at a time:
// their value loads do not wait on each other. Past the chunk's last key a step reads
// that key's row and drops it (p 0 and a zero row: an infinite value must not make NaN).
const char kFourKeysAStep[] = R"(      for (; jj < nk; jj = jj + 4u * u.slices) {
        let j1 = jj + u.slices;
        let j2 = j1 + u.slices;
        let j3 = j2 + u.slices;
        let p0 = ps[r * KC + jj];
        let p1 = select(0.0, ps[r * KC + min(j1, nk - 1u)], j1 < nk);
        let p2 = select(0.0, ps[r * KC + min(j2, nk - 1u)], j2 < nk);
        let p3 = select(0.0, ps[r * KC + min(j3, nk - 1u)], j3 < nk);
        l_run = l_run + ((p0 + p1) + (p2 + p3));
        let vr0 = vbase + (c0 + jj) * u.v_sl;
        let vr1 = vbase + (c0 + min(j1, nk - 1u)) * u.v_sl;
        let vr2 = vbase + (c0 + min(j2, nk - 1u)) * u.v_sl;
        let vr3 = vbase + (c0 + min(j3, nk - 1u)) * u.v_sl;
        for (var q = 0u; q < R; q = q + 1u) {
          let c = CW * (d0 + q * u.dvk);
          if (c < u.dv) {
            let v0 = vrow(vr0, c);
            let v1 = select(vec4<f32>(0.0), vrow(vr1, c), j1 < nk);
            let v2 = select(vec4<f32>(0.0), vrow(vr2, c), j2 < nk);
            let v3 = select(vec4<f32>(0.0), vrow(vr3, c), j3 < nk);
            acc[q] = acc[q] + ((p0 * v0 + p1 * v1) + (p2 * v2 + p3 * v3));
          }
        }
      }
)";

// The rows variant's p v unit of value row `vr` from column c (< dv): `vrow(vr, c)`, and
// `col(o, e)` column c + e of a unit's sum. pv4: 4 columns (zeros past dv), one 16-byte
// load's worth through V's vec4 binding (aligned contiguous rows; half types: half a
// load); otherwise one column.
std::string value_unit_fns(const AttentionArgs& a, const Plan& p) {
  if (!p.pv4)
    return "fn vrow(vr: u32, c: u32) -> f32 { return fv(vr + c * u.v_sd); }\n"
           "fn col(o: f32, e: u32) -> f32 { return o; }\n";
  std::string s = "fn col(o: vec4<f32>, e: u32) -> f32 { return o[e]; }\n";
  if (!p.v_vec4)
    return s + "fn vrow(vr: u32, c: u32) -> vec4<f32> {\n"
               "  var x = vec4<f32>(fv(vr + c * u.v_sd), 0.0, 0.0, 0.0);\n"
               "  if (c + 1u < u.dv) { x.y = fv(vr + (c + 1u) * u.v_sd); }\n"
               "  if (c + 2u < u.dv) { x.z = fv(vr + (c + 2u) * u.v_sd); }\n"
               "  if (c + 3u < u.dv) { x.w = fv(vr + (c + 3u) * u.v_sd); }\n"
               "  return x;\n}\n";
  const std::string V4 = "buf" + std::to_string((a.mask_kind == MaskKind::None ? 3 : 4) + (p.k_vec4 ? 1 : 0));
  if (a.dtype == DType::Float32)
    return s + "fn vrow(vr: u32, c: u32) -> vec4<f32> { return bitcast<vec4<f32>>(" + V4 + "[(vr + c) / 4u]); }\n";
  const std::string unpack = a.dtype == DType::Float16 ? "unpack2x16float" : "bf2";
  return s + "fn vrow(vr: u32, c: u32) -> vec4<f32> {\n"
             "  let w = " + V4 + "[(vr + c) / 8u];\n"
             "  let h = select(w.xy, w.zw, ((vr + c) & 4u) != 0u);\n"
             "  return vec4<f32>(" + unpack + "(h.x), " + unpack + "(h.y));\n}\n";
}

std::string rows_body(const AttentionArgs& a, const Plan& p, const std::vector<KernelBuffer>& bufs,
                      DType mask_dtype, bool partial) {
  std::string s = operand_fns(a, bufs, mask_dtype);
  // q . k of key row `kr` into `qk`.
  std::string key_dot =
      "      var qk = 0.0;\n"
      "      for (var dd = 0u; dd < u.d; dd = dd + 1u) { qk = qk + qs[r * DQ + dd] * fk(kr + dd * u.k_sd); }\n";
  if (p.k_vec4) {
    const std::string K4 = "buf" + std::to_string(a.mask_kind == MaskKind::None ? 3 : 4);
    const uint32_t per_vec4 = 16 / element_size(a.dtype);
    s += "fn qs4(i: u32) -> vec4<f32> { return vec4<f32>(qs[i], qs[i + 1u], qs[i + 2u], qs[i + 3u]); }\n";
    // `kword(w, qo)`: K's 16-byte word w dotted with the query floats from qs[qo].
    std::string word;
    switch (a.dtype) {
      case DType::Float32: word = "dot(qs4(qo), bitcast<vec4<f32>>(w))"; break;
      case DType::Float16:
        word = "dot(qs4(qo), vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y))) + "
               "dot(qs4(qo + 4u), vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)))";
        break;
      default:
        word = "dot(qs4(qo), vec4<f32>(bf2(w.x), bf2(w.y))) + dot(qs4(qo + 4u), vec4<f32>(bf2(w.z), bf2(w.w)))";
        break;
    }
    s += "fn kword(w: vec4<u32>, qo: u32) -> f32 { return " + word + "; }\n"
         "fn kw(i: u32) -> vec4<u32> { return " + K4 + "[i]; }\nconst KP = " + N(per_vec4) + ";\n";
    // DQ == d here (whole 16-byte words a row): a constant trip count (PV=scalar keeps
    // the uniform bound for A/B).
    const std::string end = p.pv4 ? "DQ" : "u.d";
    if (p.k_words4)
      key_dot = R"(      var qk = 0.0;
      var dd = 0u;
      for (; dd + 4u * KP <= DQ; dd = dd + 4u * KP) {
        let wi = (kr + dd) / KP;
        let qo = r * DQ + dd;
        qk = qk + ((kword(kw(wi), qo) + kword(kw(wi + 1u), qo + KP)) +
                   (kword(kw(wi + 2u), qo + 2u * KP) + kword(kw(wi + 3u), qo + 3u * KP)));
      }
      for (; dd < DQ; dd = dd + KP) { qk = qk + kword(kw((kr + dd) / KP), r * DQ + dd); }
)";
    else
      key_dot = "      var qk = 0.0;\n"
                "      for (var dd = 0u; dd < " + end + "; dd = dd + KP) { qk = qk + kword(kw((kr + dd) / KP), r * DQ + dd); }\n";
  }
  if (a.dtype == DType::BFloat16 && (p.k_vec4 || p.v_vec4))
    s += kBf2;
  s += value_unit_fns(a, p);
  // An invocation's p v sums: a vec4 of columns (pv4) or one column.
  const std::string T = p.pv4 ? "vec4<f32>" : "f32";
  s += output_fns(a, bufs, partial);
  s += "const WG = " + N(p.wg) + ";\nconst TQ = " + N(p.rows) + ";\nconst KC = " + N(p.keys) +
       ";\nconst R = " + N(p.per_lane) + ";\nconst DQ = " + N(p.q_words) + ";\nconst CW = " +
       N(p.pv4 ? 4 : 1) + ";\n";
  s += "var<workgroup> qs: array<f32, " + N(p.rows * p.q_words) + ">;\n"
       "var<workgroup> ps: array<f32, WG>;\n"
       "var<workgroup> red: array<f32, WG>;\n"
       "var<workgroup> fin: array<" + T + ", " + N(p.wg * p.per_lane) + ">;\n";
  // The max of a row's scores over a chunk's KC keys (the row's KC invocations).
  s += group_reduce_fn({"chunk_max", "f32", "", "nan_max", "-f32_inf()", p.wg, p.keys, p.subgroup});
  s += block_main(p.wg);
  s += R"(  let r = lid / KC;
  let t = lid % KC;
  let i = blk * TQ + r;
  let row_ok = live && i < u.lq;
  // The block's query rows, pre-scaled, in workgroup memory: every key reads them.
  for (var x = lid; x < TQ * u.d; x = x + WG) {
    let rr = x / u.d;
    let ii = blk * TQ + rr;
    var val = 0.0;
    if (live && ii < u.lq) {
      val = fq(u.q_off + b * u.q_sb + h * u.q_sh + ii * u.q_sl + (x % u.d) * u.q_sd) * u.scale;
    }
    qs[rr * DQ + x % u.d] = val;
  }
)" + std::string(kKeyRange) + R"(  let slice = t / u.dvk;
  let d0 = t % u.dvk;
  let pv_on = row_ok && slice < u.slices;
  var m_run = -f32_inf();
  var l_run = 0.0;
  var acc: array<)" + T + R"(, R>;
  workgroupBarrier();
  for (var c0 = kb; c0 < ke; c0 = c0 + KC) {
    let j = c0 + t;
    var s = -f32_inf();
    if (row_ok && j < ke && (u.causal == 0u || j <= i)) {
      let kr = kbase + j * u.k_sl;
)" + key_dot + R"(      s = add_mask(qk, mrow + j * u.m_sk);
    }
    // Online softmax: rescale what was summed at the old max to the new one.
    let m_new = nan_max(m_run, chunk_max(s, lid));
    let dead = m_new == -f32_inf();
    let alpha = select(exp_keep_nan(m_run - m_new), 1.0, dead);
    ps[lid] = select(exp_keep_nan(s - m_new), 0.0, dead);
    workgroupBarrier();
    l_run = l_run * alpha;
    for (var q = 0u; q < R; q = q + 1u) { acc[q] = acc[q] * alpha; }
    if (pv_on) {
      let nk = min(KC, ke - c0);
      var jj = slice;
)" + std::string(p.pv4 ? kFourKeysAStep : kOneKeyAStep) + R"(    }
    m_run = m_new;
    workgroupBarrier();
  }
  // Sum the slices' partial sums (each slice saw every slices-th key of each chunk).
  red[lid] = l_run;
  for (var q = 0u; q < R; q = q + 1u) { fin[lid * R + q] = acc[q]; }
  workgroupBarrier();
  if (pv_on && slice == 0u) {
    var lt = 0.0;
    for (var sl = 0u; sl < u.slices; sl = sl + 1u) { lt = lt + red[r * KC + sl * u.dvk + d0]; }
    let row = (b * u.hq + h) * u.lq + i;
    for (var q = 0u; q < R; q = q + 1u) {
      let c = CW * (d0 + q * u.dvk);
      if (c < u.dv) {
        var o = )" + T + R"((0.0);
        for (var sl = 0u; sl < u.slices; sl = sl + 1u) { o = o + fin[(r * KC + sl * u.dvk + d0) * R + q]; }
        for (var e = 0u; e < CW && c + e < u.dv; e = e + 1u) {
          let d = c + e;
)";
  if (partial) {
    s += R"(          put((row * u.splits + split) * (u.dv + 2u) + d, col(o, e));
        }
      }
    }
    if (d0 == 0u) {
      let rec = (row * u.splits + split) * (u.dv + 2u) + u.dv;
      put(rec, m_run);
      put(rec + 1u, lt);
    }
  }
}
)";
  } else {
    s += R"(          put(u.o_off + b * u.o_sb + h * u.o_sh + i * u.o_sl + d * u.o_sd, select(col(o, e) / lt, 0.0, lt == 0.0));
        }
      }
    }
    if (d0 == 0u) { put_lse(u.lse_off + row, select(m_run + log(lt), -f32_inf(), lt == 0.0)); }
  }
}
)";
  }
  return s;
}

std::string lanes_body(const AttentionArgs& a, const Plan& p, const std::vector<KernelBuffer>& bufs,
                       DType mask_dtype) {
  std::string s = operand_fns(a, bufs, mask_dtype);
  s += "fn q4(i: u32) -> vec4<f32> { return vec4<f32>(fq(i), fq(i + u.q_sd), fq(i + 2u * u.q_sd), fq(i + 3u * u.q_sd)); }\n"
       "fn k4(i: u32) -> vec4<f32> { return vec4<f32>(fk(i), fk(i + u.k_sd), fk(i + 2u * u.k_sd), fk(i + 3u * u.k_sd)); }\n"
       "fn v4(i: u32) -> vec4<f32> { return vec4<f32>(fv(i), fv(i + u.v_sd), fv(i + 2u * u.v_sd), fv(i + 3u * u.v_sd)); }\n";
  // float32 rows through the vec4 bindings (element i starts a row's 16-byte word).
  size_t b4 = a.mask_kind == MaskKind::None ? 3 : 4;
  if (p.k_vec4)
    s += "fn k4w(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf" + std::to_string(b4++) + "[i / 4u]); }\n";
  if (p.v_vec4)
    s += "fn v4w(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(buf" + std::to_string(b4) + "[i / 4u]); }\n";
  const std::string kload = p.k_vec4 ? "k4w" : "k4", vload = p.v_vec4 ? "v4w" : "v4";
  s += output_fns(a, bufs, false);
  s += "const WG = " + N(p.wg) + ";\nconst D4 = " + N(a.dim / 4) + ";\nconst V4 = " + N(a.v_dim / 4) + ";\n";
  s += kernel_main(Grid::Groups, p.wg);
  s += R"(  let live = group < frame_count();
  let g = select(0u, group, live);
  let blk = g % u.blocks;
  let bh = g / u.blocks;
  let h = bh % u.hq;
  let b = bh / u.hq;
  let hk = h / u.grp;
  let i = blk * WG + lid;
  let row_ok = live && i < u.lq;
  var q: array<vec4<f32>, D4>;
  if (row_ok) {
    let qr = u.q_off + b * u.q_sb + h * u.q_sh + i * u.q_sl;
    for (var x = 0u; x < D4; x = x + 1u) { q[x] = q4(qr + 4u * x * u.q_sd) * u.scale; }
  }
  // The workgroup's key range (causal: up to its last row) is the same for every lane.
  var ke = u.lk;
  if (u.causal != 0u) { ke = min(ke, min(u.lq, blk * WG + WG)); }
  if (!live) { ke = 0u; }
  let kbase = u.k_off + b * u.k_sb + hk * u.k_sh;
  let vbase = u.v_off + b * u.v_sb + hk * u.v_sh;
  let mrow = u.m_off + b * u.m_sb + h * u.m_sh + i * u.m_sl;
  var m = -f32_inf();
  var l = 0.0;
  var acc: array<vec4<f32>, V4>;
  for (var j = 0u; j < ke; j = j + 1u) {
    let kr = kbase + j * u.k_sl;
    var dot4 = vec4<f32>(0.0);
    for (var x = 0u; x < D4; x = x + 1u) { dot4 = dot4 + q[x] * )" + kload + R"((kr + 4u * x * u.k_sd); }
    var s = add_mask((dot4.x + dot4.y) + (dot4.z + dot4.w), mrow + j * u.m_sk);
    if (!row_ok || (u.causal != 0u && j > i)) { s = -f32_inf(); }
    // is_nan: NVIDIA's compiler may take `!=` as ordered, which would skip a NaN score.
    if (is_nan(s) || s != -f32_inf()) {
      // Online softmax per key: a new max rescales what was summed so far.
      if (s > m) {
        let c = exp_keep_nan(m - s);
        l = l * c;
        for (var y = 0u; y < V4; y = y + 1u) { acc[y] = acc[y] * c; }
        m = s;
      }
      let pj = exp_keep_nan(s - m);
      l = l + pj;
      let vr = vbase + j * u.v_sl;
      for (var y = 0u; y < V4; y = y + 1u) { acc[y] = acc[y] + pj * )" + vload + R"((vr + 4u * y * u.v_sd); }
    }
  }
  if (row_ok) {
    let ob = u.o_off + b * u.o_sb + h * u.o_sh + i * u.o_sl;
    let inv = select(1.0 / l, 0.0, l == 0.0);
    for (var y = 0u; y < V4; y = y + 1u) {
      let o = acc[y] * inv;
      put(ob + (4u * y) * u.o_sd, o.x);
      put(ob + (4u * y + 1u) * u.o_sd, o.y);
      put(ob + (4u * y + 2u) * u.o_sd, o.z);
      put(ob + (4u * y + 3u) * u.o_sd, o.w);
    }
    put_lse(u.lse_off + (b * u.hq + h) * u.lq + i, select(m + log(l), -f32_inf(), l == 0.0));
  }
}
)";
  return s;
}

// `fn NAME_tile(base, c0, ke, lid)`: stages rows c0.. of operand `op` (k or v: element
// `base + j * u.<op>_sl + c * u.<op>_sd`, `cols` columns) in workgroup array `dst` as
// vec4<f32> rows of `row_words`; rows at or past `ke` and columns past `cols` read as zero.
// `vec4_buf`: the operand's vec4 binding (aligned contiguous rows, 16 bytes a load), or -1.
std::string tile_loader(const std::string& op, const std::string& dst, uint32_t cols,
                        uint32_t row_words, DType dtype, int vec4_buf) {
  const std::string f = "f" + op, R = N(row_words);
  std::string s = "fn " + op + "_tile(base: u32, c0: u32, ke: u32, lid: u32) {\n";
  if (vec4_buf < 0) {
    const std::string W = N((cols + 3) / 4), C = N(cols), sd = "u." + op + "_sd";
    return s + "  for (var x = lid; x < TK * " + W + "; x = x + WG) {\n"
           "    let jl = x / " + W + ";\n    let c = 4u * (x % " + W + ");\n"
           "    var val = vec4<f32>(0.0);\n"
           "    if (c0 + jl < ke) {\n"
           "      let e = base + (c0 + jl) * u." + op + "_sl + c * " + sd + ";\n"
           "      val.x = " + f + "(e);\n"
           "      if (c + 1u < " + C + ") { val.y = " + f + "(e + " + sd + "); }\n"
           "      if (c + 2u < " + C + ") { val.z = " + f + "(e + 2u * " + sd + "); }\n"
           "      if (c + 3u < " + C + ") { val.w = " + f + "(e + 3u * " + sd + "); }\n"
           "    }\n    " + dst + "[jl * " + R + " + x % " + W + "] = val;\n  }\n}\n";
  }
  // Whole 16-byte words: 4 float32 or 8 half elements each.
  const uint32_t per = 16 / element_size(dtype);
  const std::string W = N(cols / per), P = N(per), buf = "buf" + std::to_string(vec4_buf);
  s += "  for (var x = lid; x < TK * " + W + "; x = x + WG) {\n"
       "    let jl = x / " + W + ";\n    let w = x % " + W + ";\n"
       "    var raw = vec4<u32>(0u);\n"
       "    if (c0 + jl < ke) { raw = " + buf + "[(base + (c0 + jl) * u." + op + "_sl) / " + P + " + w]; }\n";
  switch (dtype) {
    case DType::Float32: s += "    " + dst + "[jl * " + R + " + w] = bitcast<vec4<f32>>(raw);\n"; break;
    case DType::Float16:
      s += "    " + dst + "[jl * " + R + " + 2u * w] = vec4<f32>(unpack2x16float(raw.x), unpack2x16float(raw.y));\n"
           "    " + dst + "[jl * " + R + " + 2u * w + 1u] = vec4<f32>(unpack2x16float(raw.z), unpack2x16float(raw.w));\n";
      break;
    default:
      s += "    " + dst + "[jl * " + R + " + 2u * w] = vec4<f32>(bf2(raw.x), bf2(raw.y));\n"
           "    " + dst + "[jl * " + R + " + 2u * w + 1u] = vec4<f32>(bf2(raw.z), bf2(raw.w));\n";
      break;
  }
  return s + "  }\n}\n";
}

std::string tiles_body(const AttentionArgs& a, const Plan& p, const std::vector<KernelBuffer>& bufs,
                       DType mask_dtype, bool partial) {
  const uint32_t d4 = (a.dim + 3) / 4, v4 = (a.v_dim + 3) / 4;
  const uint32_t kw = tile_row_words(a.dim), vw = tile_row_words(a.v_dim);
  // Vec4 words per invocation in one pass of the final merge (through the K tile).
  const uint32_t merge_words = std::max<uint32_t>(1, std::min(v4, p.keys * kw / p.wg));
  std::string s = operand_fns(a, bufs, mask_dtype);
  if (a.dtype == DType::BFloat16)
    s += kBf2;
  int b4 = a.mask_kind == MaskKind::None ? 3 : 4;
  const int k4 = p.k_vec4 ? b4++ : -1, v4b = p.v_vec4 ? b4 : -1;
  s += "const WG = " + N(p.wg) + ";\nconst G = " + N(kTileLanes) + ";\nconst TQ = " + N(p.rows) +
       ";\nconst TK = " + N(p.keys) + ";\nconst KPL = " + N(p.keys / kTileLanes) + ";\nconst D = " +
       N(a.dim) + ";\nconst D4 = " + N(d4) + ";\nconst DV = " + N(a.v_dim) + ";\nconst V4 = " + N(v4) +
       ";\nconst KW = " + N(kw) + ";\nconst VW = " + N(vw) + ";\nconst MW = " + N(merge_words) + ";\n";
  s += "var<workgroup> ks: array<vec4<f32>, " + N(p.keys * kw) + ">;\n"
       "var<workgroup> vs: array<vec4<f32>, " + N(p.keys * vw) + ">;\n"
       "var<workgroup> st: array<f32, " + N(2 * p.wg) + ">;\n";
  s += tile_loader("k", "ks", a.dim, kw, a.dtype, k4) + tile_loader("v", "vs", a.v_dim, vw, a.dtype, v4b);
  s += "fn qel(e: u32, c: u32) -> f32 { if (c < D) { return fq(e + c * u.q_sd); } return 0.0; }\n";
  s += output_fns(a, bufs, partial);
  s += block_main(p.wg);
  s += R"(  let r = lid / G;
  let g = lid % G;
  let i = blk * TQ + r;
  let row_ok = live && i < u.lq;
  var q: array<vec4<f32>, D4>;
  if (row_ok) {
    let qr = u.q_off + b * u.q_sb + h * u.q_sh + i * u.q_sl;
    for (var x = 0u; x < D4; x = x + 1u) {
      q[x] = vec4<f32>(qel(qr, 4u * x), qel(qr, 4u * x + 1u), qel(qr, 4u * x + 2u), qel(qr, 4u * x + 3u)) * u.scale;
    }
  }
)" + std::string(kKeyRange) + R"(  var m = -f32_inf();
  var l = 0.0;
  var acc: array<vec4<f32>, V4>;
  var sc: array<f32, KPL>;
  for (var c0 = kb; c0 < ke; c0 = c0 + TK) {
    workgroupBarrier();
    k_tile(kbase, c0, ke, lid);
    v_tile(vbase, c0, ke, lid);
    workgroupBarrier();
    // This invocation's keys of the chunk: g, g + G, ...
    var mt = m;
    for (var kk = 0u; kk < KPL; kk = kk + 1u) {
      let jl = g + G * kk;
      let j = c0 + jl;
      var s = -f32_inf();
      if (row_ok && j < ke && (u.causal == 0u || j <= i)) {
        var d4 = vec4<f32>(0.0);
        for (var x = 0u; x < D4; x = x + 1u) { d4 = d4 + q[x] * ks[jl * KW + x]; }
        s = add_mask((d4.x + d4.y) + (d4.z + d4.w), mrow + j * u.m_sk);
      }
      sc[kk] = s;
      mt = nan_max(mt, s);
    }
    // Online softmax once per chunk: a new max rescales what was summed so far (is_nan:
    // NVIDIA's compiler may take comparisons as ordered).
    if (is_nan(mt) || mt > m) {
      let c = exp_keep_nan(m - mt);
      l = l * c;
      for (var y = 0u; y < V4; y = y + 1u) { acc[y] = acc[y] * c; }
      m = mt;
    }
    for (var kk = 0u; kk < KPL; kk = kk + 1u) {
      let p = select(exp_keep_nan(sc[kk] - m), 0.0, sc[kk] == -f32_inf());
      l = l + p;
      let vr = (g + G * kk) * VW;
      for (var y = 0u; y < V4; y = y + 1u) { acc[y] = acc[y] + p * vs[vr + y]; }
    }
  }
  // Merge the row's G states: rescale each to the row's max.
  workgroupBarrier();
  st[2u * lid] = m;
  st[2u * lid + 1u] = l;
  workgroupBarrier();
  var mx = -f32_inf();
  for (var gg = 0u; gg < G; gg = gg + 1u) { mx = nan_max(mx, st[2u * (r * G + gg)]); }
  var lt = 0.0;
  for (var gg = 0u; gg < G; gg = gg + 1u) {
    let mg = st[2u * (r * G + gg)];
    lt = lt + select(st[2u * (r * G + gg) + 1u] * exp_keep_nan(mg - mx), 0.0, mg == -f32_inf());
  }
  let f = select(exp_keep_nan(m - mx), 0.0, m == -f32_inf());
  let row = (b * u.hq + h) * u.lq + i;
  // The value columns MW vec4 words at a time through the K tile: each invocation's
  // scaled sums, then the row's G of them added by one invocation per word.
  for (var w0 = 0u; w0 < V4; w0 = w0 + MW) {
    for (var x = 0u; x < MW; x = x + 1u) {
      if (w0 + x < V4) { ks[lid * MW + x] = acc[w0 + x] * f; }
    }
    workgroupBarrier();
    if (row_ok) {
      for (var x = g; x < MW && w0 + x < V4; x = x + G) {
        var o = vec4<f32>(0.0);
        for (var gg = 0u; gg < G; gg = gg + 1u) { o = o + ks[(r * G + gg) * MW + x]; }
        let col = 4u * (w0 + x);
)";
  if (partial) {
    s += R"(        let rec = (row * u.splits + split) * (DV + 2u);
        for (var c = 0u; c < 4u; c = c + 1u) { if (col + c < DV) { put(rec + col + c, o[c]); } }
      }
    }
    workgroupBarrier();
  }
  if (row_ok && g == 0u) {
    let rec = (row * u.splits + split) * (DV + 2u) + DV;
    put(rec, mx);
    put(rec + 1u, lt);
  }
}
)";
  } else {
    s += R"(        let inv = select(1.0 / lt, 0.0, lt == 0.0);
        let ob = u.o_off + b * u.o_sb + h * u.o_sh + i * u.o_sl;
        for (var c = 0u; c < 4u; c = c + 1u) { if (col + c < DV) { put(ob + (col + c) * u.o_sd, o[c] * inv); } }
      }
    }
    workgroupBarrier();
  }
  if (row_ok && g == 0u) { put_lse(u.lse_off + row, select(mx + log(lt), -f32_inf(), lt == 0.0)); }
}
)";
  }
  return s;
}

std::string blocks_body(const AttentionArgs& a, const Plan& p, const std::vector<KernelBuffer>& bufs,
                        DType mask_dtype, bool partial) {
  const uint32_t d4 = (a.dim + 3) / 4, v4 = (a.v_dim + 3) / 4, vpl = (v4 + p.bx - 1) / p.bx;
  const uint32_t qw = tile_row_words(a.dim), pw = p.rows / 4 + 1;
  // Staged rows of K and of V (the same array, in turn, when shared_kv).
  const uint32_t kw = p.shared_kv ? std::max(qw, tile_row_words(a.v_dim)) : qw;
  const uint32_t vw = p.shared_kv ? kw : tile_row_words(a.v_dim);
  auto S = [](uint32_t v) { return std::to_string(v); };
  std::string s = operand_fns(a, bufs, mask_dtype);
  if (a.dtype == DType::BFloat16) s += kBf2;
  int b4 = a.mask_kind == MaskKind::None ? 3 : 4;
  const int k4 = p.k_vec4 ? b4++ : -1, v4b = p.v_vec4 ? b4 : -1;
  s += "const WG = " + N(p.wg) + ";\nconst BX = " + N(p.bx) + ";\nconst TQ = " + N(p.rows) + ";\nconst TK = " +
       N(p.keys) + ";\nconst D4 = " + N(d4) + ";\nconst D = " + N(a.dim) + ";\nconst V4 = " + N(v4) +
       ";\nconst DV = " + N(a.v_dim) + ";\nconst QW = " + N(qw) + ";\nconst KW = " + N(kw) + ";\nconst VW = " +
       N(vw) + ";\nconst PW = " + N(pw) + ";\n";
  s += "var<workgroup> qs: array<vec4<f32>, " + N(p.rows * qw) + ">;\n"
       "var<workgroup> ks: array<vec4<f32>, " + N(p.keys * kw) + ">;\n" +
       (p.shared_kv ? "" : "var<workgroup> vs: array<vec4<f32>, " + N(p.keys * vw) + ">;\n") +
       "var<workgroup> ps: array<vec4<f32>, " + N(p.keys * pw) + ">;\n"
       "var<workgroup> red: array<f32, " + N(p.rows * p.bx) + ">;\n";
  const std::string vs = p.shared_kv ? "ks" : "vs";
  s += tile_loader("k", "ks", a.dim, kw, a.dtype, k4) + tile_loader("v", vs, a.v_dim, vw, a.dtype, v4b);
  s += "fn qel(e: u32, c: u32) -> f32 { if (c < D) { return fq(e + c * u.q_sd); } return 0.0; }\n";
  s += output_fns(a, bufs, partial);
  // A row's chunk maximum over its BX neighbouring invocations: subgroup shuffles where the
  // adapter has subgroups (the BX lanes of a row lie in one), else workgroup memory.
  const bool shuffles = p.subgroup >= p.bx && p.subgroup % p.bx == 0 && p.wg % p.subgroup == 0;
  if (shuffles)
    s += "fn nan_max4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {\n"
         "  return vec4<f32>(nan_max(a.x, b.x), nan_max(a.y, b.y), nan_max(a.z, b.z), nan_max(a.w, b.w));\n}\n" +
         group_reduce_fn({"row_max", "vec4<f32>", "", "nan_max4", "vec4<f32>(-f32_inf())", p.wg, p.bx, p.subgroup,
                          false, false});
  s += block_main(p.wg);
  // i: this invocation's first row (kKeyRange's mask row is row i's).
  s += "  let tx = lid % BX;\n  let ty = lid / BX;\n  let i = blk * TQ + ty * 4u;\n";
  s += kKeyRange;
  // The block's query rows, scaled, staged once.
  s += R"(  let qbase = u.q_off + b * u.q_sb + h * u.q_sh;
  for (var x = lid; x < TQ * D4; x = x + WG) {
    let row = blk * TQ + x / D4;
    let c = 4u * (x % D4);
    var val = vec4<f32>(0.0);
    if (live && row < u.lq) {
      let e = qbase + row * u.q_sl;
      val = vec4<f32>(qel(e, c), qel(e, c + 1u), qel(e, c + 2u), qel(e, c + 3u)) * u.scale;
    }
    qs[(x / D4) * QW + x % D4] = val;
  }
)";
  const char* lane = "xyzw";
  for (uint32_t r = 0; r < kBlockRows; ++r) {
    const std::string R = S(r);
    s += "  let ok" + R + " = live && i + " + N(r) + " < u.lq;\n  var m" + R + " = -f32_inf();\n  var l" + R + " = 0.0;\n";
    for (uint32_t w = 0; w < vpl; ++w) s += "  var o" + R + "_" + S(w) + " = vec4<f32>(0.0);\n";
  }
  s += "  for (var c0 = kb; c0 < ke; c0 = c0 + TK) {\n"
       "    workgroupBarrier();\n    k_tile(kbase, c0, ke, lid);\n" +
       std::string(p.shared_kv ? "" : "    v_tile(vbase, c0, ke, lid);\n") + "    workgroupBarrier();\n";
  // Scores: sr.<key j> of row r against key tx + BX * j.
  for (uint32_t r = 0; r < kBlockRows; ++r) s += "    var s" + S(r) + " = vec4<f32>(0.0);\n";
  s += "    for (var x = 0u; x < D4; x = x + 1u) {\n";
  for (uint32_t r = 0; r < kBlockRows; ++r) s += "      let q" + S(r) + " = qs[(ty * 4u + " + N(r) + ") * QW + x];\n";
  for (uint32_t j = 0; j < kBlockKeys; ++j)
    s += "      let k" + S(j) + " = ks[(tx + " + N(j * p.bx) + ") * KW + x];\n";
  for (uint32_t r = 0; r < kBlockRows; ++r)
    s += "      s" + S(r) + " = s" + S(r) + " + vec4<f32>(dot(q" + S(r) + ", k0), dot(q" + S(r) + ", k1), dot(q" + S(r) +
         ", k2), dot(q" + S(r) + ", k3));\n";
  s += "    }\n";
  // Mask, causal and range; each row's chunk max over its BX invocations.
  for (uint32_t r = 0; r < kBlockRows; ++r) {
    const std::string R = S(r), row = "(i + " + N(r) + ")";
    s += "    var mx" + R + " = m" + R + ";\n";
    for (uint32_t j = 0; j < kBlockKeys; ++j) {
      const std::string key = "(c0 + tx + " + N(j * p.bx) + ")", sc = "s" + R + "." + lane[j];
      s += "    if (ok" + R + " && " + key + " < ke && (u.causal == 0u || " + key + " <= " + row + ")) { " + sc +
           " = add_mask(" + sc + ", mrow + " + N(r) + " * u.m_sl + " + key + " * u.m_sk); } else { " + sc +
           " = -f32_inf(); }\n    mx" + R + " = nan_max(mx" + R + ", " + sc + ");\n";
    }
    if (!shuffles) s += "    red[(ty * 4u + " + N(r) + ") * BX + tx] = mx" + R + ";\n";
  }
  s += shuffles ? "    let mxs = row_max(vec4<f32>(mx0, mx1, mx2, mx3), lid);\n" : "    workgroupBarrier();\n";
  // Online softmax: a new max rescales what was summed so far (is_nan: NVIDIA's compiler
  // may take comparisons as ordered).
  for (uint32_t r = 0; r < kBlockRows; ++r) {
    const std::string R = S(r);
    s += "    {\n      var mt = m" + R + ";\n" +
         (shuffles ? "      mt = mxs." + std::string(1, lane[r]) + ";\n"
                   : "      for (var t = 0u; t < BX; t = t + 1u) { mt = nan_max(mt, red[(ty * 4u + " + N(r) + ") * BX + t]); }\n") +
         "      if (is_nan(mt) || mt > m" + R + ") {\n        let c = exp_keep_nan(m" + R + " - mt);\n        l" + R +
         " = l" + R + " * c;\n";
    for (uint32_t w = 0; w < vpl; ++w) s += "        o" + R + "_" + S(w) + " = o" + R + "_" + S(w) + " * c;\n";
    s += "        m" + R + " = mt;\n      }\n    }\n";
    for (uint32_t j = 0; j < kBlockKeys; ++j) {
      const std::string sc = "s" + R + "." + lane[j];
      s += "    " + sc + " = select(exp_keep_nan(" + sc + " - m" + R + "), 0.0, " + sc + " == -f32_inf());\n";
    }
    s += "    l" + R + " = l" + R + " + ((s" + R + ".x + s" + R + ".y) + (s" + R + ".z + s" + R + ".w));\n";
  }
  for (uint32_t j = 0; j < kBlockKeys; ++j)
    s += "    ps[(tx + " + N(j * p.bx) + ") * PW + ty] = vec4<f32>(s0." + lane[j] + ", s1." + lane[j] + ", s2." + lane[j] +
         ", s3." + lane[j] + ");\n";
  s += "    workgroupBarrier();\n";
  if (p.shared_kv) s += "    v_tile(vbase, c0, ke, lid);\n    workgroupBarrier();\n";
  s += "    let nk = min(TK, ke - c0);\n"
       "    for (var kk = 0u; kk < nk; kk = kk + 1u) {\n      let pk = ps[kk * PW + ty];\n";
  for (uint32_t w = 0; w < vpl; ++w) {
    const std::string W = S(w);
    s += "      let v" + W + " = " + vs + "[kk * VW + min(tx + " + N(w * p.bx) + ", V4 - 1u)];\n";
    for (uint32_t r = 0; r < kBlockRows; ++r)
      s += "      o" + S(r) + "_" + W + " = o" + S(r) + "_" + W + " + pk." + lane[r] + " * v" + W + ";\n";
  }
  s += "    }\n  }\n";
  // The rows' sums over their BX invocations, then each invocation's columns.
  s += "  workgroupBarrier();\n";
  for (uint32_t r = 0; r < kBlockRows; ++r) s += "  red[(ty * 4u + " + N(r) + ") * BX + tx] = l" + S(r) + ";\n";
  s += "  workgroupBarrier();\n";
  for (uint32_t r = 0; r < kBlockRows; ++r) {
    const std::string R = S(r);
    s += "  if (ok" + R + ") {\n    var lt = 0.0;\n"
         "    for (var t = 0u; t < BX; t = t + 1u) { lt = lt + red[(ty * 4u + " + N(r) + ") * BX + t]; }\n"
         "    let row = (b * u.hq + h) * u.lq + i + " + N(r) + ";\n";
    if (partial)
      s += "    let rec = (row * u.splits + split) * (DV + 2u);\n"
           "    if (tx == 0u) { put(rec + DV, m" + R + "); put(rec + DV + 1u, lt); }\n";
    else
      s += "    let inv = select(1.0 / lt, 0.0, lt == 0.0);\n"
           "    let ob = u.o_off + b * u.o_sb + h * u.o_sh + (i + " + N(r) + ") * u.o_sl;\n"
           "    if (tx == 0u) { put_lse(u.lse_off + row, select(m" + R + " + log(lt), -f32_inf(), lt == 0.0)); }\n";
    for (uint32_t w = 0; w < vpl; ++w) {
      const std::string col = "4u * (tx + " + N(w * p.bx) + ")";
      s += "    for (var c = 0u; c < 4u; c = c + 1u) {\n      let col = " + col + " + c;\n      if (col < DV) { " +
           (partial ? "put(rec + col, o" + R + "_" + S(w) + "[c]);" : "put(ob + col * u.o_sd, o" + R + "_" + S(w) + "[c] * inv);") +
           " }\n    }\n";
    }
    s += "  }\n";
  }
  return s + "}\n";
}

// Merges the key ranges' partial states of each row: rescale each to the largest max.
void launch_merge(Context& ctx, const AttentionArgs& a, const Plan& p, WGPUBuffer scratch) {
  static const UniformLayout layout({{"hq"}, {"lq"}, {"dv"}, {"dvp"}, {"splits"}, {"o_off"},
                                     {"o_sb"}, {"o_sh"}, {"o_sl"}, {"o_sd"}, {"lse_off"}});
  const uint32_t dvp = std::max<uint32_t>(a.v_dim, 1);
  KernelLaunch l;
  l.typed = {"attention:merge", {static_cast<uint32_t>(a.dtype)}};
  l.declare(layout)
      .set_u32("hq", a.heads).set_u32("lq", a.q_len).set_u32("dv", a.v_dim).set_u32("dvp", dvp)
      .set_u32("splits", p.splits);
  set_view(l, "o", a.out);
  l.set_u32("lse_off", static_cast<uint32_t>(a.lse_offset));
  l.buffers = {{scratch, Access::Read, false},
               view_buffer(a.out, Access::ReadWrite, a.dtype, l.word_of("o_off"),
                           {a.batch, a.heads, a.q_len, dvp}, is_subword(a.dtype)),
               {a.lse, Access::ReadWrite, false}};
  const uint64_t rows = uint64_t(a.batch) * a.heads * a.q_len;
  l.buffers[2].touches(l.word_of("lse_off"), DType::Float32, a.lse_offset, rows);
  l.count = rows * dvp;
  l.workgroup = ctx.caps().workgroup_1d();
  l.body = [&]() {
    std::string s = load_f32("part", l.buffers, 0, DType::Float32) + kNanMax +
                    kernel_store("put", l.buffers, 1, a.dtype, Compute::F32) +
                    kernel_store("put_lse", l.buffers, 2, DType::Float32, Compute::F32);
    s += kernel_main(Grid::Invocations, l.workgroup);
    s += R"(  let row = idx / u.dvp;
  let d = idx % u.dvp;
  let i = row % u.lq;
  let h = (row / u.lq) % u.hq;
  let b = (row / u.lq) / u.hq;
  let w = u.dv + 2u;
  var m = -f32_inf();
  for (var s = 0u; s < u.splits; s = s + 1u) { m = nan_max(m, part((row * u.splits + s) * w + u.dv)); }
  var l = 0.0;
  var o = 0.0;
  // (is_nan: NVIDIA's compiler and SwiftShader may take the comparison as ordered, and a
  // NaN row must stay NaN.)
  if (is_nan(m) || m > -f32_inf()) {
    for (var s = 0u; s < u.splits; s = s + 1u) {
      let rec = (row * u.splits + s) * w;
      let f = exp_keep_nan(part(rec + u.dv) - m);
      l = l + part(rec + u.dv + 1u) * f;
      if (d < u.dv) { o = o + part(rec + d) * f; }
    }
  }
  if (d < u.dv) { put(u.o_off + b * u.o_sb + h * u.o_sh + i * u.o_sl + d * u.o_sd, select(o / l, 0.0, l == 0.0)); }
  if (d == 0u) { put_lse(u.lse_off + row, select(m + log(l), -f32_inf(), l == 0.0)); }
}
)";
    return s;
  };
  launch_kernel(ctx, l);
}

}  // namespace

void scaled_dot_product_attention(Context& ctx, const AttentionArgs& a) {
  const uint64_t rows = uint64_t(a.batch) * a.heads * a.q_len;
  if (rows == 0) return;
  if (a.dim > kMaxHeadDim || a.v_dim > kMaxHeadDim || a.kv_heads == 0 || a.heads % a.kv_heads != 0)
    fail(ErrorKind::Unsupported, "torch_webgpu: scaled_dot_product_attention: unsupported head sizes");
  const Plan p = plan_for(ctx, a);
  const bool partial = p.splits > 1;
  const DType mask_dtype = a.mask_kind == MaskKind::Bool ? DType::Bool : a.dtype;

  KernelLaunch l;
  l.declare(rows_layout());
  l.set_u32("hq", a.heads).set_u32("lq", a.q_len).set_u32("lk", a.kv_len).set_u32("d", a.dim)
      .set_u32("dv", a.v_dim).set_u32("grp", a.heads / a.kv_heads)
      .set_u32("blocks", ceil_div(a.q_len, p.rows)).set_u32("splits", p.splits)
      .set_u32("split_keys", p.split_keys).set_u32("slices", p.slices).set_u32("dvk", p.lane_dims)
      .set_u32("causal", a.causal ? 1u : 0u).set_f32("scale", a.scale);
  set_view(l, "q", a.q);
  set_view(l, "k", a.k);
  set_view(l, "v", a.v);
  set_view(l, "m", a.mask_kind == MaskKind::None ? View{} : a.mask);
  set_view(l, "o", a.out);
  l.set_u32("lse_off", static_cast<uint32_t>(a.lse_offset));

  // Sizes of the spans each operand touches (an empty key range still binds one element).
  const uint32_t lk = std::max<uint32_t>(a.kv_len, 1), d = std::max<uint32_t>(a.dim, 1),
                 dv = std::max<uint32_t>(a.v_dim, 1);
  l.buffers = {view_buffer(a.q, Access::Read, a.dtype, l.word_of("q_off"), {a.batch, a.heads, a.q_len, d}),
               view_buffer(a.k, Access::Read, a.dtype, l.word_of("k_off"), {a.batch, a.kv_heads, lk, d}),
               view_buffer(a.v, Access::Read, a.dtype, l.word_of("v_off"), {a.batch, a.kv_heads, lk, dv})};
  if (a.mask_kind != MaskKind::None)
    l.buffers.push_back(view_buffer(a.mask, Access::Read, mask_dtype, l.word_of("m_off"),
                                    {a.batch, a.heads, a.q_len, lk}));
  for (const auto& [on, view] : {std::pair{p.k_vec4, &a.k}, std::pair{p.v_vec4, &a.v}}) {
    if (!on) continue;
    l.buffers.push_back({view->buffer, Access::Read, false});
    l.buffers.back().vec4 = true;
  }
  Allocation* scratch = nullptr;
  if (partial) {
    scratch = ctx.pool().allocate(rows * p.splits * (a.v_dim + 2) * 4);
    l.buffers.push_back({scratch->buffer, Access::ReadWrite, false});
  } else {
    l.buffers.push_back(view_buffer(a.out, Access::ReadWrite, a.dtype, l.word_of("o_off"),
                                    {a.batch, a.heads, a.q_len, dv}, is_subword(a.dtype)));
    l.buffers.push_back({a.lse, Access::ReadWrite, false});
    l.buffers.back().touches(l.word_of("lse_off"), DType::Float32, a.lse_offset, rows);
  }
  const uint32_t flags = static_cast<uint32_t>(a.dtype) | static_cast<uint32_t>(a.mask_kind) << 8 |
                        (partial ? 1u : 0u) << 16;
  if (p.blocks)
    l.typed = {"attention:blocks", {flags | (p.k_vec4 ? 1u : 0u) << 24 | (p.v_vec4 ? 1u : 0u) << 25,
                                    a.dim | a.v_dim << 16,
                                    p.rows | p.keys << 16 | p.bx << 24 | (p.shared_kv ? 1u : 0u) << 31,
                                    p.subgroup}};
  else if (p.tiles)
    l.typed = {"attention:tiles", {flags | (p.k_vec4 ? 1u : 0u) << 24 | (p.v_vec4 ? 1u : 0u) << 25,
                                   a.dim | a.v_dim << 16, p.rows | p.keys << 16}};
  else if (p.lanes)
    l.typed = {"attention:lanes", {flags | (p.k_vec4 ? 1u : 0u) << 24 | (p.v_vec4 ? 1u : 0u) << 25,
                                   a.dim | a.v_dim << 16}};
  else
    l.typed = {"attention:rows", {flags | (p.k_vec4 ? 1u : 0u) << 24 | (p.v_vec4 ? 1u : 0u) << 25 |
                                      (p.pv4 ? 1u : 0u) << 26 | (p.k_words4 ? 1u : 0u) << 27,
                                  p.rows | p.per_lane << 8 | p.q_words << 16, p.keys | p.subgroup << 16}};
  l.grid = Grid::Groups;
  l.count = rows / a.q_len * ceil_div(a.q_len, p.rows) * p.splits;
  l.workgroup = p.wg;
  l.body = [&]() {
    if (p.blocks) return blocks_body(a, p, l.buffers, mask_dtype, partial);
    if (p.tiles) return tiles_body(a, p, l.buffers, mask_dtype, partial);
    return p.lanes ? lanes_body(a, p, l.buffers, mask_dtype) : rows_body(a, p, l.buffers, mask_dtype, partial);
  };
  launch_kernel(ctx, l);
  if (partial) {
    launch_merge(ctx, a, p, scratch->buffer);
    ctx.pool().release(scratch);
  }
}

}  // namespace twgpu::attn
