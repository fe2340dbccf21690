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
// [4..5] p0, [6..7] p1, [8..15] sizes, then per operand k at 16 + 12k:
// offset, scalar lo, scalar hi, (pad), strides[8].
constexpr uint32_t kWordNumel = 0, kWordNdim = 1, kWordPitch = 2, kWordP0 = 4, kWordP1 = 6,
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

BindingPlan plan_bindings(const ElementwiseLaunch& l) {
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
      plan.atomic[found] = is_subword(op.dtype);
    }
  }
  return plan;
}

bool is_contiguous_launch(const ElementwiseLaunch& l) {
  if (l.ndim == 0) return true;
  if (l.ndim > 1) return false;
  for (const auto& op : l.operands)
    if (!op.is_scalar && op.strides[0] != 1) return false;
  return true;
}

std::string cache_key(const ElementwiseLaunch& l, const BindingPlan& plan, bool contiguous) {
  std::string key = "ew:";
  key += l.op;
  key += ':';
  key += compute_name(l.compute);
  key += contiguous ? ":c" : ":s";
  for (size_t k = 0; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    key += '|';
    key += dtype_name(op.dtype);
    key += op.is_scalar ? 's' : static_cast<char>('0' + plan.binding_of[k]);
  }
  return key;
}

std::string generate(const ElementwiseLaunch& l, const ElementwiseOpDef& def,
                     const BindingPlan& plan, bool contiguous) {
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
  if (l.compute == Compute::I64 || l.compute == Compute::F32 || l.compute == Compute::I32)
    src += wgsl::kInt64Prelude;  // conversions touch it whenever an int64 operand is present
  src += wgsl::kMathPrelude;

  // Loads, one function per input operand.
  const char* names[] = {"a", "b", "c", "d"};
  std::string body;
  for (size_t k = 1; k < l.operands.size(); ++k) {
    const auto& op = l.operands[k];
    std::string var = names[k - 1];
    if (op.is_scalar) {
      body += "  let " + var + " = " +
              wgsl_scalar(l.compute, "uw(" + std::to_string(operand_word(k, 1)) + "u)",
                          "uw(" + std::to_string(operand_word(k, 2)) + "u)") +
              ";\n";
      continue;
    }
    int b = plan.binding_of[k];
    src += wgsl_load_function("load" + std::to_string(k), "buf" + std::to_string(b), op.dtype,
                              plan.atomic[b]);
    body += "  let " + var + " = " +
            wgsl_convert(compute_type_for(op.dtype), l.compute,
                         "load" + std::to_string(k) + "(o" + std::to_string(k) + ")") +
            ";\n";
  }
  src += wgsl_store_function("store0", "buf" + std::to_string(plan.binding_of[0]),
                             l.operands[0].dtype, l.compute, plan.atomic[plan.binding_of[0]]);

  src += "@compute @workgroup_size(" + std::to_string(kWorkgroup) + ")\n";
  src += "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n";
  src += "  let idx = gid.x + gid.y * uw(" + std::to_string(kWordPitch) + "u);\n";
  src += "  if (idx >= uw(" + std::to_string(kWordNumel) + "u)) { return; }\n";
  src += "  let p0 = " + wgsl_scalar(l.compute, "uw(4u)", "uw(5u)") + ";\n";
  src += "  let p1 = " + wgsl_scalar(l.compute, "uw(6u)", "uw(7u)") + ";\n";
  for (size_t k = 0; k < l.operands.size(); ++k) {
    if (l.operands[k].is_scalar) continue;
    std::string o = "o" + std::to_string(k);
    std::string off = "uw(" + std::to_string(operand_word(k, 0)) + "u)";
    if (contiguous) {
      src += "  let " + o + " = " + off + " + idx;\n";
    } else {
      src += "  var " + o + " = " + off + ";\n";
    }
  }
  if (!contiguous) {
    src += "  var rem = idx;\n";
    src += "  for (var d = 0u; d < uw(" + std::to_string(kWordNdim) + "u); d = d + 1u) {\n";
    src += "    let size = uw(" + std::to_string(kWordSizes) + "u + d);\n";
    src += "    let coord = rem % size;\n";
    src += "    rem = rem / size;\n";
    for (size_t k = 0; k < l.operands.size(); ++k) {
      if (l.operands[k].is_scalar) continue;
      src += "    o" + std::to_string(k) + " = o" + std::to_string(k) + " + coord * uw(" +
             std::to_string(operand_word(k, 4)) + "u + d);\n";
    }
    src += "  }\n";
  }
  src += body;
  src += "  store0(o0, " + std::string(def.expression(l.compute)) + ");\n";
  src += "}\n";
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

  BindingPlan plan = plan_bindings(l);
  bool contiguous = is_contiguous_launch(l);
  std::string key = cache_key(l, plan, contiguous);
  const Pipeline& pipeline = ctx.pipelines().get(key, [&] {
    ProgramDesc desc;
    desc.label = key;
    desc.wgsl = generate(l, *def, plan, contiguous);
    for (size_t b = 0; b < plan.buffers.size(); ++b)
      desc.storage.push_back(plan.writable[b] ? Access::ReadWrite : Access::Read);
    desc.uniform_bytes = kUniformWords * 4;
    return desc;
  });

  uint32_t u[kUniformWords] = {};
  uint32_t groups = static_cast<uint32_t>((numel + kWorkgroup - 1) / kWorkgroup);
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
