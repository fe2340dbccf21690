#include "kernels/elementwise.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "kernels/binding_window.h"
#include "kernels/elementwise_ops.h"
#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_library.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {


// Uniform words: [0] numel, [1] ndim, [2] row pitch (invocations per grid row),
// [3] output words (packed layout), [4..11] p0..p3 (two words each), [12..19] sizes, then
// per operand k at 20 + 12k: offset, scalar lo, scalar hi, (pad), strides[8].
constexpr uint32_t kWordNumel = 0, kWordNdim = 1, kWordPitch = 2, kWordPackedWords = 3,
                   kWordParams = 4, kParamCount = 4,
                   kWordSizes = 12, kWordOperands = 20, kOperandWords = 12;
constexpr uint32_t kUniformWords = kWordOperands + kOperandWords * kMaxElementwiseOperands;
static_assert(kUniformWords % 4 == 0, "uniform struct is an array of vec4<u32>");

uint32_t operand_word(int k, int field) { return kWordOperands + kOperandWords * k + field; }

// The same words by name in WGSL, `u.numel` ... `u.operands[k].strides`: the struct has the
// layout above (scalars 4 bytes each; the arrays of vec4 start on 16 bytes).
static_assert(kWordParams == 4 && kWordSizes == kWordParams + 2 * kParamCount &&
                  (kWordOperands - kWordSizes) % 4 == 0 && kOperandWords % 4 == 0,
              "the WGSL Uniforms struct below mirrors these words");
std::string uniforms_struct() {
  std::string s = "struct EwOperand { offset: u32, scalar_lo: u32, scalar_hi: u32, unused: u32, "
                  "strides: array<vec4<u32>, " + std::to_string((kOperandWords - 4) / 4) + "> }\n";
  s += "struct Uniforms {\n  numel: u32, ndim: u32, pitch: u32, packed_words: u32,\n ";
  for (uint32_t i = 0; i < kParamCount; ++i)
    s += " p" + std::to_string(i) + "_lo: u32, p" + std::to_string(i) + "_hi: u32,";
  s += "\n  sizes: array<vec4<u32>, " + std::to_string((kWordOperands - kWordSizes) / 4) + ">,\n";
  s += "  operands: array<EwOperand, " + std::to_string(kMaxElementwiseOperands) + ">,\n}\n";
  return s;
}

// Operand k's uniform `field` (offset, scalar_lo, scalar_hi) in WGSL.
std::string operand_uniform(size_t k, const char* field) {
  return "u.operands[" + std::to_string(k) + "]." + field;
}

// Fixed arrays, not vectors: planned on every launch, so it allocates nothing.
struct BindingPlan {
  size_t count = 0;  // bindings
  WGPUBuffer buffers[kMaxElementwiseOperands] = {};  // one per binding
  bool writable[kMaxElementwiseOperands] = {};
  bool atomic[kMaxElementwiseOperands] = {};
  int binding_of[kMaxElementwiseOperands] = {-1, -1, -1, -1, -1};
};

// How invocations map to elements.
enum class Layout {
  Strided,     // one element per invocation, N-d index math
  Contiguous,  // one element per invocation, every operand dense from its offset
  Vector4,     // dense and 16-byte aligned, inputs at least as wide as the output: one vec4
               // of output words per invocation, vec4<u32> loads and stores throughout
               // (what reaches full memory bandwidth)
  Packed,      // dense with a narrow output: one output word per invocation, so stores
               // need no atomics
  Rows4,       // two dims, the fast one contiguous in every operand and a whole number of
               // vec4s, rows on 16 bytes: Vector4 within each row (cat's slices of an
               // output, a row-broadcast bias, copies of narrowed rows)
};

const char* layout_tag(Layout layout) {
  switch (layout) {
    case Layout::Strided: return ":s";
    case Layout::Contiguous: return ":c";
    case Layout::Vector4: return ":v";
    case Layout::Packed: return ":p";
    case Layout::Rows4: return ":r";
  }
  return ":?";
}

BindingPlan plan_bindings(const ElementwiseLaunch& l, Layout layout) {
  BindingPlan plan;
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    if (op.is_scalar) continue;
    int found = -1;
    for (size_t b = 0; b < plan.count; ++b)
      if (plan.buffers[b] == op.buffer) found = static_cast<int>(b);
    if (found < 0) {
      found = static_cast<int>(plan.count++);
      plan.buffers[found] = op.buffer;
    }
    plan.binding_of[k] = found;
    if (k == 0) {
      plan.writable[found] = true;
      // Packed and Vector4 write whole words; the others store narrow elements one by one.
      plan.atomic[found] = is_subword(op.dtype) &&
                           (layout == Layout::Strided || layout == Layout::Contiguous);
    }
  }
  return plan;
}

// Elements per output word, for the packed layout.
int lanes_of(DType t) { return 4 / element_size(t); }
// Elements one invocation of the Vector4 layout produces: one vec4 of output words.
int vector4_elements(DType out) { return 4 * lanes_of(out); }

// Whether every operand can be read and written in vec4 words of the output's width from
// `offset` and, with `rows`, from each row start (stride 1 within rows of `row_elements`).
bool vec4_words_fit(const ElementwiseLaunch& l, uint64_t row_elements, bool rows) {
  const DType out = l.operands[0].dtype;
  if (element_size(out) > 4 || row_elements % vector4_elements(out) != 0) return false;
  for (const auto& op : l.operands) {
    if (op.is_scalar) continue;
    const int size = element_size(op.dtype);
    if (size > 4 || size < element_size(out) || (op.offset * size) % 16 != 0) return false;
    if (rows && (op.strides[0] != 1 || (op.strides[1] * size) % 16 != 0)) return false;
  }
  return true;
}

Layout choose_layout(const ElementwiseLaunch& l, uint64_t numel) {
  bool dense = l.ndim == 0;
  if (l.ndim == 1) {
    dense = true;
    for (const auto& op : l.operands)
      if (!op.is_scalar && op.strides[0] != 1) dense = false;
  }
  if (!dense) {
    const bool rows = l.ndim == 2 && l.sizes[1] > 1 && vec4_words_fit(l, static_cast<uint64_t>(l.sizes[0]), true);
    return rows ? Layout::Rows4 : Layout::Strided;
  }
  const DType out = l.operands[0].dtype;
  if (vec4_words_fit(l, numel, false)) return Layout::Vector4;
  return is_subword(out) ? Layout::Packed : Layout::Contiguous;
}

std::string cache_key(const ElementwiseLaunch& l, const BindingPlan& plan, Layout layout) {
  std::string key;
  key.reserve(64);  // one allocation for the whole key
  key += "ew:";
  key += l.op;
  key += ':';
  key += compute_name(l.compute);
  key += layout_tag(layout);
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    key += '|';
    key += dtype_name(op.dtype);
    key += op.is_scalar ? 's' : static_cast<char>('0' + plan.binding_of[k]);
  }
  return key;
}



// The generated shader, in pieces: bindings and helpers, the op as a pure function of
// its inputs (`fn op(a, b, ...)`), then a main() for the chosen layout.
class ElementwiseSource {
 public:
  ElementwiseSource(const ElementwiseLaunch& l, const ElementwiseOpDef& def,
                    const BindingPlan& plan, Layout layout, uint32_t workgroup)
      : l_(l), def_(def), plan_(plan), layout_(layout), workgroup_(workgroup),
        ct_(wgsl_type(l.compute)) {}

  std::string build() {
    header();
    op_function();
    switch (layout_) {
      case Layout::Strided: main_strided(); break;
      case Layout::Contiguous: main_contiguous(); break;
      case Layout::Vector4:
      case Layout::Rows4: main_vector4(); break;
      case Layout::Packed: main_packed(); break;
    }
    return src_;
  }

 private:
  std::string buf(size_t k) const { return "buf" + std::to_string(plan_.binding_of[k]); }
  bool scalar(size_t k) const { return l_.operands[k].is_scalar; }
  size_t inputs() const { return l_.operands.size() - 1; }

  void header() {
    src_ += "// elementwise " + l_.op + " (" + compute_name(l_.compute) + layout_tag(layout_) + ")\n";
    src_ += uniforms_struct();
    const char* word = layout_ == Layout::Vector4 || layout_ == Layout::Rows4 ? "vec4<u32>" : "u32";
    for (size_t b = 0; b < plan_.count; ++b) {
      src_ += "@group(0) @binding(" + std::to_string(b) + ") var<storage, " +
              (plan_.writable[b] ? "read_write" : "read") + "> buf" + std::to_string(b) +
              ": array<" + (plan_.atomic[b] ? "atomic<u32>" : word) + ">;\n";
    }
    src_ += "@group(0) @binding(" + std::to_string(plan_.count) +
            ") var<uniform> u: Uniforms;\n";
    src_ += wgsl::kFloatPrelude;
    src_ += wgsl::kInt64Prelude;  // conversions use it whenever an int64 operand is present
    src_ += wgsl::kMathPrelude;
    // The op's own helpers (special functions); complex64 math builds on the elementary
    // library. Each library once.
    std::vector<const char*> libs;
    for (const char* const* lib = def_.library; lib && *lib; ++lib) libs.push_back(*lib);
    if (l_.compute == Compute::C64) {
      if (std::find(libs.begin(), libs.end(), wgsl::kElementaryLib) == libs.end())
        libs.push_back(wgsl::kElementaryLib);
      libs.push_back(wgsl::kComplexLib);
    }
    for (const char* lib : libs) src_ += lib;
  }

  void op_function() {
    static const char* names[] = {"a", "b", "c", "d"};
    std::string params;
    for (size_t k = 1; k <= inputs(); ++k)
      params += std::string(k > 1 ? ", " : "") + names[k - 1] + ": " + ct_;
    src_ += "fn op(" + params + ") -> " + ct_ + " {\n";
    // Only the parameters the expression names are declared (WGSL rejects nothing
    // unused, but this keeps the generated source short).
    const std::string expr = def_.expression(l_.compute);
    for (uint32_t i = 0; i < kParamCount; ++i) {
      std::string name = "p" + std::to_string(i);
      if (expr.find(name) == std::string::npos) continue;
      src_ += "  let " + name + " = " + wgsl_scalar(l_.compute, "u." + name + "_lo", "u." + name + "_hi") + ";\n";
    }
    src_ += "  return " + std::string(def_.expression(l_.compute)) + ";\n}\n";
  }

  // Input k's value in the compute type, for element offset expression `offset`.
  std::string input(size_t k, const std::string& offset) {
    if (scalar(k))
      return wgsl_scalar(l_.compute, operand_uniform(k, "scalar_lo"), operand_uniform(k, "scalar_hi"));
    std::string name = "load" + std::to_string(k);
    if (loads_.insert(k).second)
      src_ += wgsl_load_function(name, buf(k), l_.operands[k].dtype,
                                 plan_.atomic[plan_.binding_of[k]]);
    return wgsl_convert(compute_type_for(l_.operands[k].dtype), l_.compute, name + "(" + offset + ")");
  }

  std::string call_op(const std::function<std::string(size_t)>& offset_of) {
    std::string args;
    for (size_t k = 1; k <= inputs(); ++k) args += (k > 1 ? ", " : "") + input(k, offset_of(k));
    return "op(" + args + ")";
  }

  // `count`: the uniform that bounds the invocations.
  void begin_main(const char* count) {
    src_ += "@compute @workgroup_size(" + std::to_string(workgroup_) + ")\n";
    src_ += "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n";
    src_ += "  let idx = gid.x + gid.y * u.pitch;\n";
    src_ += "  if (idx >= u." + std::string(count) + ") { return; }\n";
  }

  void store_function() {
    src_ += wgsl_store_function("store0", buf(0), l_.operands[0].dtype, l_.compute,
                                plan_.atomic[plan_.binding_of[0]]);
  }

  void main_contiguous() {
    std::string value = call_op([&](size_t k) { return operand_uniform(k, "offset") + " + idx"; });
    store_function();
    begin_main("numel");
    src_ += "  store0(" + operand_uniform(0, "offset") + " + idx, " + value + ");\n}\n";
  }

  void main_strided() {
    std::string value = call_op([&](size_t k) { return "o" + std::to_string(k); });
    store_function();
    begin_main("numel");
    for (size_t k = 0; k < l_.operands.size(); ++k)
      if (!scalar(k))
        src_ += "  var o" + std::to_string(k) + " = " + operand_uniform(k, "offset") + ";\n";
    src_ += "  var rem = idx;\n";
    src_ += "  for (var d = 0u; d < u.ndim; d = d + 1u) {\n";
    src_ += "    let size = u.sizes[d >> 2u][d & 3u];\n";
    src_ += "    let coord = rem % size;\n";
    src_ += "    rem = rem / size;\n";
    for (size_t k = 0; k < l_.operands.size(); ++k)
      if (!scalar(k))
        src_ += "    o" + std::to_string(k) + " = o" + std::to_string(k) + " + coord * " +
                operand_uniform(k, "strides") + "[d >> 2u][d & 3u];\n";
    src_ += "  }\n";
    src_ += "  store0(o0, " + value + ");\n}\n";
  }

  void main_vector4() {
    // Each invocation produces one vec4 of output words: E = 4 * lanes elements. Every
    // operand is at least as wide as the output, so its E elements are whole vec4s.
    const DType out = l_.operands[0].dtype;
    const int elems = vector4_elements(out);
    src_ += wgsl_bits_function("bits0", out, l_.compute);
    begin_main("numel");  // numel / E here
    // Operand k's first element of this invocation: idx * E past its offset, or (Rows4)
    // v * E into row `row` (dims: 0 within rows, 1 across).
    const bool rows = layout_ == Layout::Rows4;
    if (rows)
      src_ += "  let per_row = u.sizes[0][0] / " + std::to_string(elems) + "u;\n"
              "  let row = idx / per_row;\n  let v = idx % per_row;\n";
    auto first = [&](size_t k) {
      return rows ? "(" + operand_uniform(k, "offset") + " + row * " + operand_uniform(k, "strides") + "[0][1] + v * " +
                        std::to_string(elems) + "u)"
                  : "(" + operand_uniform(k, "offset") + " + idx * " + std::to_string(elems) + "u)";
    };
    for (size_t k = 1; k <= inputs(); ++k) {
      if (scalar(k)) continue;
      int size = element_size(l_.operands[k].dtype);
      int vecs = elems * size / 16;
      for (int v = 0; v < vecs; ++v)
        src_ += "  let w" + std::to_string(k) + "_" + std::to_string(v) + " = " + buf(k) + "[" + first(k) +
                " / " + std::to_string(16 / size) + "u + " + std::to_string(v) + "u];\n";
    }
    const int lanes = lanes_of(out);
    const std::string lane_bits = std::to_string(32 / lanes);
    src_ += "  var r = vec4<u32>(0u, 0u, 0u, 0u);\n";
    for (int e = 0; e < elems; ++e) {
      std::string args;
      for (size_t k = 1; k <= inputs(); ++k) {
        std::string v;
        if (scalar(k)) {
          v = wgsl_scalar(l_.compute, operand_uniform(k, "scalar_lo"), operand_uniform(k, "scalar_hi"));
        } else {
          DType t = l_.operands[k].dtype;
          int size = element_size(t);
          int per_vec = 16 / size, per_word = 4 / size;
          std::string word = "w" + std::to_string(k) + "_" + std::to_string(e / per_vec) + "[" +
                             std::to_string((e % per_vec) / per_word) + "]";
          if (per_word > 1)
            word = "((" + word + " >> " + std::to_string((e % per_word) * 8 * size) + "u) & " +
                   (size == 2 ? "0xffffu" : "0xffu") + ")";
          v = wgsl_convert(compute_type_for(t), l_.compute, wgsl_from_bits(t, word));
        }
        args += (k > 1 ? ", " : "") + v;
      }
      std::string bits = "bits0(op(" + args + "))";
      if (lanes > 1)
        bits = "((" + bits + " & " + (lanes == 2 ? "0xffffu" : "0xffu") + ") << " +
               std::to_string((e % lanes) * (32 / lanes)) + "u)";
      src_ += "  r[" + std::to_string(e / lanes) + "] = r[" + std::to_string(e / lanes) + "] | " +
              bits + ";\n";
    }
    src_ += "  " + buf(0) + "[" + first(0) + " / " + std::to_string(elems) + "u] = r;\n}\n";
  }

  void main_packed() {
    // One output word per invocation; words only partly inside the tensor keep their
    // other bytes (no other invocation of this dispatch touches them).
    const DType out = l_.operands[0].dtype;
    const std::string lanes = std::to_string(lanes_of(out));
    const std::string bits = std::to_string(32 / lanes_of(out));
    const std::string mask = element_size(out) == 2 ? "0xffffu" : "0xffu";
    std::string value = call_op([&](size_t k) { return operand_uniform(k, "offset") + " + e"; });
    src_ += wgsl_bits_function("bits0", out, l_.compute);
    begin_main("packed_words");
    src_ += "  let off = " + operand_uniform(0, "offset") + ";\n";
    src_ += "  let numel = u.numel;\n";
    src_ += "  let word = off / " + lanes + "u + idx;\n";
    src_ += "  var bits = 0u;\n  var mask = 0u;\n";
    src_ += "  for (var j = 0u; j < " + lanes + "u; j = j + 1u) {\n";
    src_ += "    let o = word * " + lanes + "u + j;\n";
    src_ += "    if (o < off || o - off >= numel) { continue; }\n";
    src_ += "    let e = o - off;\n";
    src_ += "    bits = bits | ((bits0(" + value + ") & " + mask + ") << (j * " + bits + "u));\n";
    src_ += "    mask = mask | (" + mask + " << (j * " + bits + "u));\n";
    src_ += "  }\n";
    src_ += "  if (mask == 0xffffffffu) {\n    " + buf(0) + "[word] = bits;\n  } else {\n    " +
            buf(0) + "[word] = (" + buf(0) + "[word] & ~mask) | bits;\n  }\n}\n";
  }

  const ElementwiseLaunch& l_;
  const ElementwiseOpDef& def_;
  const BindingPlan& plan_;
  Layout layout_;
  uint32_t workgroup_;
  std::string ct_;
  std::string src_;
  std::set<size_t> loads_;
};

}  // namespace

bool elementwise_supports(const std::string& op, Compute compute) {
  const ElementwiseOpDef* def = find_elementwise_op(op);
  return def && def->expression(compute) != nullptr;
}

bool elementwise_accepts_bool(const std::string& op) {
  const ElementwiseOpDef* def = find_elementwise_op(op);
  return def && def->accepts_bool;
}

namespace {

struct BufferWindowOf {
  WGPUBuffer buffer;
  BufferWindow window;
};

// One dispatch over `l`; `windows` names the bound window of each buffer larger than one
// binding (operand offsets already rebased to it).
void record_elementwise(Context& ctx, const ElementwiseOpDef& def, const ElementwiseLaunch& l,
                        uint64_t numel, const std::vector<BufferWindowOf>& windows) {
  if (numel > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported, "torch_webgpu: elementwise ops on more than 2^32-1 elements");
  Layout layout = choose_layout(l, numel);
  if (layout == Layout::Vector4 && def.long_loops && ctx.caps().max_loop_iterations != 0)
    layout = Layout::Contiguous;
  if (layout == Layout::Rows4 && def.long_loops && ctx.caps().max_loop_iterations != 0)
    layout = Layout::Strided;
  const uint32_t workgroup = ctx.caps().workgroup_1d();
  BindingPlan plan = plan_bindings(l, layout);
  std::string key = cache_key(l, plan, layout);
  const Pipeline& pipeline = ctx.pipelines().get(key, [&] {
    ProgramDesc desc;
    desc.label = key;
    desc.wgsl = ElementwiseSource(l, def, plan, layout, workgroup).build();
    for (size_t b = 0; b < plan.count; ++b)
      desc.storage.push_back(plan.writable[b] ? Access::ReadWrite : Access::Read);
    desc.uniform_bytes = kUniformWords * 4;
    return desc;
  });

  uint32_t u[kUniformWords] = {};
  uint64_t invocations = numel;
  if (layout == Layout::Vector4 || layout == Layout::Rows4) {
    invocations = numel / vector4_elements(l.operands[0].dtype);
    u[kWordNumel] = static_cast<uint32_t>(invocations);
  }
  if (layout == Layout::Packed) {
    uint64_t lanes = lanes_of(l.operands[0].dtype);
    uint64_t first = l.operands[0].offset / lanes;
    uint64_t last = (l.operands[0].offset + numel - 1) / lanes;
    invocations = last - first + 1;
    u[kWordPackedWords] = static_cast<uint32_t>(invocations);
  }
  uint32_t groups = static_cast<uint32_t>((invocations + workgroup - 1) / workgroup);
  uint32_t max_x = ctx.caps().max_workgroups_per_dimension;
  // As few rows as the per-dimension limit allows, then as few columns as cover the groups:
  // a full second row of idle workgroups costs real time on a GPU.
  uint32_t gy = (groups + max_x - 1) / max_x;
  uint32_t gx = (groups + gy - 1) / gy;
  if (layout != Layout::Vector4 && layout != Layout::Rows4) u[kWordNumel] = static_cast<uint32_t>(numel);
  u[kWordNdim] = static_cast<uint32_t>(l.ndim);
  u[kWordPitch] = gx * workgroup;
  for (uint32_t i = 0; i < kParamCount; ++i) {
    u[kWordParams + 2 * i] = l.params[i].lo;
    u[kWordParams + 2 * i + 1] = l.params[i].hi;
  }
  for (int d = 0; d < l.ndim; ++d) u[kWordSizes + d] = static_cast<uint32_t>(l.sizes[d]);
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    u[operand_word(k, 0)] = static_cast<uint32_t>(op.offset);
    u[operand_word(k, 1)] = op.scalar.lo;
    u[operand_word(k, 2)] = op.scalar.hi;
    for (int d = 0; d < l.ndim; ++d) u[operand_word(k, 4) + d] = static_cast<uint32_t>(op.strides[d]);
  }
  if (windows.empty()) {
    ctx.recorder().dispatch(pipeline, plan.buffers, u, gx, gy);
    return;
  }
  std::vector<BufferWindow> bound(plan.count);
  for (size_t b = 0; b < plan.count; ++b)
    for (const auto& w : windows)
      if (w.buffer == plan.buffers[b]) bound[b] = w.window;
  ctx.recorder().dispatch(pipeline, plan.buffers, u, gx, gy, 1, bound.data());
}

// Splits the iteration space into blocks (fastest dims kept whole as far as possible)
// in which every operand living in a buffer larger than one binding touches at most one
// window's bytes, and records one dispatch per block.
void launch_in_blocks(Context& ctx, const ElementwiseOpDef& def, const ElementwiseLaunch& l) {
  const int nd = l.ndim;
  std::vector<bool> windowed(l.operands.size());
  std::vector<BlockOperand> planned;
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    windowed[k] = !op.is_scalar && needs_window(ctx, op.buffer);
    if (windowed[k]) planned.push_back({op.offset, op.strides, element_size(op.dtype)});
  }
  const std::vector<int64_t> block = plan_blocks(ctx, l.sizes, nd, planned, 0, l.op);
  ElementwiseLaunch piece = l;
  for_each_block(l.sizes, nd, block, [&](const int64_t* origin, const int64_t* extent) {
    uint64_t numel = 1;
    for (int d = 0; d < nd; ++d) {
      piece.sizes[d] = extent[d];
      numel *= static_cast<uint64_t>(extent[d]);
    }
    for (size_t k = 0; k < l.operands.size(); ++k) {
      auto& op = piece.operands[k];
      if (op.is_scalar) continue;
      int64_t offset = static_cast<int64_t>(l.operands[k].offset);
      for (int d = 0; d < nd; ++d) offset += origin[d] * op.strides[d];
      op.offset = static_cast<uint64_t>(offset);
    }
    // One window per buffer, over the union of its operands' ranges.
    std::vector<BufferWindowOf> windows;
    for (size_t k = 0; k < l.operands.size(); ++k) {
      if (!windowed[k]) continue;
      bool seen = false;
      for (const auto& w : windows) seen |= w.buffer == l.operands[k].buffer;
      if (seen) continue;
      uint64_t first = UINT64_MAX, end = 0;
      for (size_t j = k; j < l.operands.size(); ++j) {
        const auto& op = piece.operands[j];
        if (op.is_scalar || op.buffer != l.operands[k].buffer) continue;
        ElementRange r = strided_range(op.offset, piece.sizes, op.strides, nd);
        first = std::min(first, r.first * element_size(op.dtype));
        end = std::max(end, r.end * element_size(op.dtype));
      }
      windows.push_back({l.operands[k].buffer, window_over(ctx, l.operands[k].buffer, first, end, l.op)});
    }
    for (auto& op : piece.operands)
      for (const auto& w : windows)
        if (!op.is_scalar && op.buffer == w.buffer) op.offset -= w.window.offset / element_size(op.dtype);
    record_elementwise(ctx, def, piece, numel, windows);
  });
}

}  // namespace

void launch_elementwise(Context& ctx, const ElementwiseLaunch& l) {
  const ElementwiseOpDef* def = find_elementwise_op(l.op);
  if (!def) fail(ErrorKind::Internal, "torch_webgpu: unknown elementwise op '" + l.op + "'");
  if (!def->expression(l.compute))
    fail(ErrorKind::Unsupported, "torch_webgpu: '" + l.op + "' has no kernel computing in " +
                                     compute_name(l.compute));
  if (static_cast<int>(l.operands.size()) != def->arity + 1)
    fail(ErrorKind::Internal, "torch_webgpu: '" + l.op + "' expects " +
                                  std::to_string(def->arity) + " inputs");
  if (l.ndim > kMaxElementwiseDims)
    fail(ErrorKind::Internal, "torch_webgpu: elementwise launch with too many dims");

  uint64_t numel = 1;
  for (int d = 0; d < l.ndim; ++d) numel *= static_cast<uint64_t>(l.sizes[d]);
  if (numel == 0) return;
  if (ctx.pool().has_oversized()) {
    for (const auto& op : l.operands)
      if (needs_window(ctx, op.buffer)) return launch_in_blocks(ctx, *def, l);
  }
  record_elementwise(ctx, *def, l, numel, {});
}

}  // namespace twgpu
