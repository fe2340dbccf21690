#include "kernels/elementwise.h"

#include <cstring>

#include "kernels/elementwise_ops.h"
#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_prelude.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

constexpr uint32_t kWorkgroup = 256;

// Uniform words: [0] numel, [1] ndim, [2] row pitch (invocations per grid row),
// [3] output words (packed layout), [4..5] p0, [6..7] p1, [8..15] sizes, then per operand k at 16 + 12k:
// offset, scalar lo, scalar hi, (pad), strides[8].
constexpr uint32_t kWordNumel = 0, kWordNdim = 1, kWordPitch = 2, kWordPackedWords = 3,
                   kWordP0 = 4, kWordP1 = 6,
                   kWordSizes = 8, kWordOperands = 16, kOperandWords = 12;
constexpr uint32_t kUniformWords = kWordOperands + kOperandWords * kMaxElementwiseOperands;
static_assert(kUniformWords % 4 == 0, "uniform struct is an array of vec4<u32>");

uint32_t operand_word(int k, int field) { return kWordOperands + kOperandWords * k + field; }

struct BindingPlan {
  std::vector<WGPUBuffer> buffers;  // one per binding
  std::vector<bool> writable;
  std::vector<bool> atomic;
  int binding_of[kMaxElementwiseOperands] = {-1, -1, -1, -1, -1};
};

// How invocations map to elements.
enum class Layout {
  Strided,     // one element per invocation, N-d index math
  Contiguous,  // one element per invocation, every operand dense from its offset
  Packed,      // contiguous with a narrow output: one output word per invocation, so
               // stores need no atomics
};

BindingPlan plan_bindings(const ElementwiseLaunch& l, Layout layout) {
  BindingPlan plan;
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    if (op.is_scalar) continue;
    int found = -1;
    for (size_t b = 0; b < plan.buffers.size(); ++b)
      if (plan.buffers[b] == op.buffer) found = static_cast<int>(b);
    if (found < 0) {
      found = static_cast<int>(plan.buffers.size());
      plan.buffers.push_back(op.buffer);
      plan.writable.push_back(false);
      plan.atomic.push_back(false);
    }
    plan.binding_of[k] = found;
    if (k == 0) {
      plan.writable[found] = true;
      plan.atomic[found] = is_subword(op.dtype) && layout != Layout::Packed;
    }
  }
  return plan;
}

Layout choose_layout(const ElementwiseLaunch& l) {
  bool dense = l.ndim == 0;
  if (l.ndim == 1) {
    dense = true;
    for (const auto& op : l.operands)
      if (!op.is_scalar && op.strides[0] != 1) dense = false;
  }
  if (!dense) return Layout::Strided;
  return is_subword(l.operands[0].dtype) ? Layout::Packed : Layout::Contiguous;
}

std::string cache_key(const ElementwiseLaunch& l, const BindingPlan& plan, Layout layout) {
  std::string key = "ew:";
  key += l.op;
  key += ':';
  key += compute_name(l.compute);
  key += layout == Layout::Strided ? ":s" : layout == Layout::Contiguous ? ":c" : ":p";
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    key += '|';
    key += dtype_name(op.dtype);
    key += op.is_scalar ? 's' : static_cast<char>('0' + plan.binding_of[k]);
  }
  return key;
}

std::string word_ref(uint32_t w) { return "uw(" + std::to_string(w) + "u)"; }

// Elements per output word and bits per element, for the packed layout.
int lanes_of(DType t) { return 4 / element_size(t); }

std::string generate(const ElementwiseLaunch& l, const ElementwiseOpDef& def,
                     const BindingPlan& plan, Layout layout) {
  std::string src;
  src += "// elementwise " + l.op + " (" + compute_name(l.compute) + ")\n";
  src += "struct Uniforms { w: array<vec4<u32>, " + std::to_string(kUniformWords / 4) + "> }\n";
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    src += "@group(0) @binding(" + std::to_string(b) + ") var<storage, " +
           (plan.writable[b] ? "read_write" : "read") + "> buf" + std::to_string(b) + ": array<" +
           (plan.atomic[b] ? "atomic<u32>" : "u32") + ">;\n";
  }
  src += "@group(0) @binding(" + std::to_string(plan.buffers.size()) +
         ") var<uniform> U: Uniforms;\n";
  src += "fn uw(i: u32) -> u32 { return U.w[i >> 2u][i & 3u]; }\n";
  src += wgsl::kFloatPrelude;
  src += wgsl::kInt64Prelude;  // conversions use it whenever an int64 operand is present
  src += wgsl::kMathPrelude;

  const std::string ct = wgsl_type(l.compute);
  const char* names[] = {"a", "b", "c", "d"};
  // value(o1, o2, ...): the op's result from its inputs' element offsets.
  std::string params, body;
  for (size_t k = 1; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    std::string var = names[k - 1];
    if (op.is_scalar) {
      body += "  let " + var + " = " +
              wgsl_scalar(l.compute, word_ref(operand_word(k, 1)), word_ref(operand_word(k, 2))) +
              ";\n";
      continue;
    }
    int b = plan.binding_of[k];
    std::string ks = std::to_string(k);
    src += wgsl_load_function("load" + ks, "buf" + std::to_string(b), op.dtype, plan.atomic[b]);
    params += (params.empty() ? "" : ", ") + std::string("o") + ks + ": u32";
    body += "  let " + var + " = " +
            wgsl_convert(compute_type_for(op.dtype), l.compute, "load" + ks + "(o" + ks + ")") +
            ";\n";
  }
  src += "fn value(" + params + ") -> " + ct + " {\n";
  src += "  let p0 = " + wgsl_scalar(l.compute, word_ref(kWordP0), word_ref(kWordP0 + 1)) + ";\n";
  src += "  let p1 = " + wgsl_scalar(l.compute, word_ref(kWordP1), word_ref(kWordP1 + 1)) + ";\n";
  src += body;
  src += "  return " + std::string(def.expression(l.compute)) + ";\n}\n";

  // Arguments of value() for element `idx` of a dense launch.
  auto dense_args = [&](const std::string& idx) {
    std::string args;
    for (size_t k = 1; k < l.operands.size(); ++k) {
      if (l.operands[k].is_scalar) continue;
      args += (args.empty() ? "" : ", ") + word_ref(operand_word(k, 0)) + " + " + idx;
    }
    return args;
  };

  const std::string out_buf = "buf" + std::to_string(plan.binding_of[0]);
  const DType out_dtype = l.operands[0].dtype;
  if (layout == Layout::Packed) {
    src += wgsl_bits_function("bits0", out_dtype, l.compute);
  } else {
    src += wgsl_store_function("store0", out_buf, out_dtype, l.compute,
                               plan.atomic[plan.binding_of[0]]);
  }
  src += "@compute @workgroup_size(" + std::to_string(kWorkgroup) + ")\n";
  src += "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n";
  src += "  let idx = gid.x + gid.y * " + word_ref(kWordPitch) + ";\n";
  if (layout == Layout::Packed) {
    // One output word per invocation; words only partly inside the tensor keep their
    // other bytes (no other invocation of this dispatch touches them).
    int lanes = lanes_of(out_dtype);
    int bits = 32 / lanes;
    std::string lane_mask = bits == 16 ? "0xffffu" : "0xffu";
    src += "  if (idx >= " + word_ref(kWordPackedWords) + ") { return; }\n";
    src += "  let off = " + word_ref(operand_word(0, 0)) + ";\n";
    src += "  let numel = " + word_ref(kWordNumel) + ";\n";
    src += "  let word = off / " + std::to_string(lanes) + "u + idx;\n";
    src += "  var bits = 0u;\n  var mask = 0u;\n";
    src += "  for (var j = 0u; j < " + std::to_string(lanes) + "u; j = j + 1u) {\n";
    src += "    let o = word * " + std::to_string(lanes) + "u + j;\n";
    src += "    if (o < off || o - off >= numel) { continue; }\n";
    src += "    let e = o - off;\n";
    src += "    bits = bits | ((bits0(value(" + dense_args("e") + ")) & " + lane_mask + ") << (j * " +
           std::to_string(bits) + "u));\n";
    src += "    mask = mask | (" + lane_mask + " << (j * " + std::to_string(bits) + "u));\n";
    src += "  }\n";
    src += "  if (mask == 0xffffffffu) {\n    " + out_buf + "[word] = bits;\n  } else {\n    " +
           out_buf + "[word] = (" + out_buf + "[word] & ~mask) | bits;\n  }\n}\n";
    return src;
  }
  src += "  if (idx >= " + word_ref(kWordNumel) + ") { return; }\n";
  if (layout == Layout::Contiguous) {
    src += "  store0(" + word_ref(operand_word(0, 0)) + " + idx, value(" + dense_args("idx") + "));\n}\n";
    return src;
  }
  std::string args;
  for (size_t k = 0; k < l.operands.size(); ++k) {
    if (l.operands[k].is_scalar) continue;
    std::string o = "o" + std::to_string(k);
    src += "  var " + o + " = " + word_ref(operand_word(k, 0)) + ";\n";
    if (k > 0) args += (args.empty() ? "" : ", ") + o;
  }
  src += "  var rem = idx;\n";
  src += "  for (var d = 0u; d < " + word_ref(kWordNdim) + "; d = d + 1u) {\n";
  src += "    let size = uw(" + std::to_string(kWordSizes) + "u + d);\n";
  src += "    let coord = rem % size;\n";
  src += "    rem = rem / size;\n";
  for (size_t k = 0; k < l.operands.size(); ++k) {
    if (l.operands[k].is_scalar) continue;
    src += "    o" + std::to_string(k) + " = o" + std::to_string(k) + " + coord * uw(" +
           std::to_string(operand_word(k, 4)) + "u + d);\n";
  }
  src += "  }\n";
  src += "  store0(o0, value(" + args + "));\n}\n";
  return src;
}

}  // namespace

bool elementwise_supports(const std::string& op, Compute compute) {
  const ElementwiseOpDef* def = find_elementwise_op(op);
  return def && def->expression(compute) != nullptr;
}

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
  if (numel > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported, "torch_webgpu: elementwise ops on more than 2^32-1 elements");

  Layout layout = choose_layout(l);
  BindingPlan plan = plan_bindings(l, layout);
  std::string key = cache_key(l, plan, layout);
  const Pipeline& pipeline = ctx.pipelines().get(key, [&] {
    ProgramDesc desc;
    desc.label = key;
    desc.wgsl = generate(l, *def, plan, layout);
    for (size_t b = 0; b < plan.buffers.size(); ++b)
      desc.storage.push_back(plan.writable[b] ? Access::ReadWrite : Access::Read);
    desc.uniform_bytes = kUniformWords * 4;
    return desc;
  });

  uint32_t u[kUniformWords] = {};
  uint64_t invocations = numel;
  if (layout == Layout::Packed) {
    uint64_t lanes = lanes_of(l.operands[0].dtype);
    uint64_t first = l.operands[0].offset / lanes;
    uint64_t last = (l.operands[0].offset + numel - 1) / lanes;
    invocations = last - first + 1;
    u[kWordPackedWords] = static_cast<uint32_t>(invocations);
  }
  uint32_t groups = static_cast<uint32_t>((invocations + kWorkgroup - 1) / kWorkgroup);
  uint32_t max_x = ctx.caps().max_workgroups_per_dimension;
  uint32_t gx = groups < max_x ? groups : max_x;
  uint32_t gy = (groups + gx - 1) / gx;
  u[kWordNumel] = static_cast<uint32_t>(numel);
  u[kWordNdim] = static_cast<uint32_t>(l.ndim);
  u[kWordPitch] = gx * kWorkgroup;
  u[kWordP0] = l.params[0].lo;
  u[kWordP0 + 1] = l.params[0].hi;
  u[kWordP1] = l.params[1].lo;
  u[kWordP1 + 1] = l.params[1].hi;
  for (int d = 0; d < l.ndim; ++d) u[kWordSizes + d] = static_cast<uint32_t>(l.sizes[d]);
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    u[operand_word(k, 0)] = static_cast<uint32_t>(op.offset);
    u[operand_word(k, 1)] = op.scalar.lo;
    u[operand_word(k, 2)] = op.scalar.hi;
    for (int d = 0; d < l.ndim; ++d) u[operand_word(k, 4) + d] = static_cast<uint32_t>(op.strides[d]);
  }
  ctx.recorder().dispatch(pipeline, plan.buffers.data(), u, gx, gy);
}

}  // namespace twgpu
