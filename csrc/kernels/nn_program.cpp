#include "kernels/nn_program.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>
#include <memory>

#include "kernels/binding_window.h"
#include "kernels/kernel_program.h"
#include "kernels/wgsl_dtype.h"
#include "runtime/runtime.h"

namespace twgpu::nn {

uint32_t f32_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// One allocation each for a typical kernel's parameters.
void NnKernel::reserve() {
  params.reserve(16);
  words.reserve(32);
}

NnKernel& NnKernel::param(const char* name, uint32_t v) {
  if (params.empty()) reserve();
  params.push_back({name, UniformType::U32, 0});
  words.push_back(v);
  return *this;
}

NnKernel& NnKernel::param_i32(const char* name, int32_t v) {
  if (params.empty()) reserve();
  params.push_back({name, UniformType::I32, 0});
  words.push_back(static_cast<uint32_t>(v));
  return *this;
}

NnKernel& NnKernel::param_f32(const char* name, float v) {
  if (params.empty()) reserve();
  params.push_back({name, UniformType::F32, 0});
  words.push_back(f32_bits(v));
  return *this;
}

NnKernel& NnKernel::param_u32s(const char* name, std::initializer_list<uint32_t> values) {
  if (params.empty()) reserve();
  params.push_back({name, UniformType::U32, static_cast<uint32_t>(values.size())});
  words.insert(words.end(), values.begin(), values.end());
  return *this;
}

namespace {

bool is_float(DType t) { return is_floating(t); }

// The frame's uniforms: each operand's element offset, a row kernel's row length, then the
// kernel's parameters. One layout per operand count, row-ness and parameter declaration,
// looked up by a hash of them (callers hold the runtime lock).
const UniformLayout& nn_layout(const NnKernel& k, bool rows) {
  const size_t operands = k.inputs.size() + k.outputs.size();
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(operands);
  mix(rows);
  for (const UniformDecl& d : k.params) {
    for (const char* c = d.name; *c; ++c) mix(static_cast<unsigned char>(*c));
    mix(static_cast<uint64_t>(d.type) << 32 | d.length);
  }
  static std::unordered_map<uint64_t, std::unique_ptr<UniformLayout>> layouts;
  auto& layout = layouts[h];
  if (!layout) {
    std::vector<UniformDecl> decls = {{"offsets", UniformType::U32, static_cast<uint32_t>(std::max<size_t>(operands, 1))}};
    if (rows) decls.push_back({"row_len", UniformType::U32, 0});
    decls.insert(decls.end(), k.params.begin(), k.params.end());
    layout.reset(new UniformLayout(decls));
  }
  if (layout->fields().size() != 1 + rows + k.params.size())
    fail(ErrorKind::Internal, "torch_webgpu: nn kernel '" + k.key + "': uniform layout hash collision");
  return *layout;
}

// How a kernel is launched, part of its key (the body's main() differs).
enum class Shape : uint32_t { Map, Rows1, Rows2, Groups };

// Bindings, uniforms, typed accessors and the typed key: the family is the kernel's key
// (alive through the launch); the variant packs the operands' dtypes (4 bits each), their
// counts, accumulate and the launch shape, and marks the family as the nn frame's.
void prepare(NnKernel& k, KernelLaunch& l, const uint32_t* row_len, Shape shape) {
  if (k.inputs.size() > 8 || k.outputs.size() > 8)
    fail(ErrorKind::Internal, "torch_webgpu: nn kernel '" + k.key + "' has more than 8 inputs or outputs");
  KernelKey::Variant variant{0, 0,
                             static_cast<uint32_t>(k.inputs.size() | k.outputs.size() << 8 |
                                                   (k.accumulate ? 1u : 0u) << 16 |
                                                   static_cast<uint32_t>(shape) << 24),
                             0x6e6e3a00u};  // "nn:"
  static_assert(static_cast<int>(DType::Complex128) < 16, "a dtype takes 4 bits of the key");
  std::vector<uint32_t> offsets;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const Operand& op = k.inputs[i];
    l.buffers.push_back({op.buffer, Access::Read, false});
    offsets.push_back(static_cast<uint32_t>(op.offset));
    variant[0] |= static_cast<uint32_t>(op.dtype) << (4 * i);
  }
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const Operand& op = k.outputs[o];
    l.buffers.push_back({op.buffer, Access::ReadWrite, k.accumulate || is_subword(op.dtype)});
    offsets.push_back(static_cast<uint32_t>(op.offset));
    variant[1] |= static_cast<uint32_t>(op.dtype) << (4 * o);
  }
  l.typed = {k.key.c_str(), variant};
  const UniformLayout& layout = nn_layout(k, row_len != nullptr);
  // Operands that say how far they reach may live in buffers larger than one binding.
  for (size_t i = 0; i < l.buffers.size(); ++i) {
    const Operand& op = i < k.inputs.size() ? k.inputs[i] : k.outputs[i - k.inputs.size()];
    if (op.count > 0)
      l.buffers[i].touches(layout.fields()[layout.find("offsets")].word + static_cast<uint32_t>(i), op.dtype, op.offset, op.count);
  }
  l.declare(layout).set_u32s("offsets", offsets);
  if (row_len) l.set_u32("row_len", *row_len);
  // The layout ends with the kernel's declaration, in its order.
  l.set_fields(layout.fields().size() - k.params.size(), k.words.data());
  // Called only while building the pipeline, within the launch: no copies per launch.
  l.body = [&k, &l] {
    const std::vector<KernelBuffer>& bufs = l.buffers;
    const std::vector<Operand>& ins = k.inputs;
    const std::vector<Operand>& outs = k.outputs;
    const bool accumulate = k.accumulate;
    std::string s;
    for (size_t i = 0; i < ins.size(); ++i) {
      std::string n = std::to_string(i), off = "u_offsets(" + std::to_string(i) + "u)";
      s += kernel_load("raw_in" + n, bufs, i, ins[i].dtype);
      if (is_float(ins[i].dtype)) {
        s += "fn in" + n + "(i: u32) -> f32 { return raw_in" + n + "(i + " + off + "); }\n";
      } else if (ins[i].dtype == DType::Int64) {
        s += "fn in" + n + "(i: u32) -> i32 { return i64_to_i32(raw_in" + n + "(i + " + off + ")); }\n";
        s += "fn in" + n + "_i64(i: u32) -> vec2<u32> { return raw_in" + n + "(i + " + off + "); }\n";
      } else {
        s += "fn in" + n + "(i: u32) -> i32 { return raw_in" + n + "(i + " + off + "); }\n";
      }
    }
    for (size_t o = 0; o < outs.size() && accumulate; ++o) {
      std::string n = std::to_string(o), b = "buf" + std::to_string(ins.size() + o);
      std::string off = "u_offsets(" + std::to_string(ins.size() + o) + "u)";
      s += "fn acc" + n + "(i: u32, v: f32) {\n  let j = i + " + off + ";\n"
           "  var old = atomicLoad(&" + b + "[j]);\n  loop {\n"
           "    let r = atomicCompareExchangeWeak(&" + b + "[j], old, bitcast<u32>(bitcast<f32>(old) + v));\n"
           "    if (r.exchanged) { break; }\n    old = r.old_value;\n  }\n}\n";
    }
    for (size_t o = 0; o < outs.size() && !accumulate; ++o) {
      size_t b = ins.size() + o;
      std::string n = std::to_string(o), off = "u_offsets(" + std::to_string(b) + "u)";
      if (is_float(outs[o].dtype)) {
        s += kernel_store("raw_out" + n, bufs, b, outs[o].dtype, Compute::F32);
        s += "fn out" + n + "(i: u32, v: f32) { raw_out" + n + "(i + " + off + ", v); }\n";
        // Reads back what this kernel stored (recurrences over earlier steps).
        s += kernel_load("raw_get" + n, bufs, b, outs[o].dtype);
        s += "fn get" + n + "(i: u32) -> f32 { return raw_get" + n + "(i + " + off + "); }\n";
      } else {
        s += kernel_store("raw_out" + n, bufs, b, outs[o].dtype, Compute::I32);
        s += "fn out" + n + "(i: u32, v: i32) { raw_out" + n + "(i + " + off + ", v); }\n";
      }
    }
    return s + k.body;
  };
}

}  // namespace

void launch_map(Context& ctx, NnKernel& k, uint64_t count) {
  if (count == 0) return;
  KernelLaunch l;
  prepare(k, l, nullptr, Shape::Map);
  l.grid = Grid::Invocations;
  l.count = count;
  const uint32_t wg = ctx.caps().workgroup_1d();
  l.workgroup = wg;
  auto inner = l.body;
  l.body = [inner, wg] {
    return inner() + kernel_main(Grid::Invocations, wg) + "  run(idx);\n}\n";
  };
  launch_kernel(ctx, l);
}

void launch_rows(Context& ctx, NnKernel& k, uint64_t rows, uint32_t len, int passes) {
  if (rows == 0) return;
  KernelLaunch l;
  prepare(k, l, &len, passes == 2 ? Shape::Rows2 : Shape::Rows1);
  l.grid = Grid::Groups;
  l.count = rows;
  l.workgroup = kRowWorkgroup;
  auto inner = l.body;
  l.body = [inner, passes] {
    const std::string wg = std::to_string(kRowWorkgroup);
    std::string s = inner();
    s += "var<workgroup> part: array<vec2<f32>, " + wg + ">;\n";
    s += "fn tree(v: vec2<f32>, lid: u32) -> vec2<f32> {\n"
         "  part[lid] = v;\n  workgroupBarrier();\n"
         "  for (var w = " + std::to_string(kRowWorkgroup / 2) + "u; w > 0u; w = w >> 1u) {\n"
         "    if (lid < w) { part[lid] = part[lid] + part[lid + w]; }\n"
         "    workgroupBarrier();\n  }\n"
         "  let r = part[0];\n  workgroupBarrier();\n  return r;\n}\n";
    s += kernel_main(Grid::Groups, kRowWorkgroup);
    s += "  let live = group < frame_count();\n  let len = u.row_len;\n"
         "  var acc = vec2<f32>(0.0, 0.0);\n"
         "  if (live) { for (var k = lid; k < len; k = k + " + wg + "u) {"
         " acc = acc + terms(group, k, 0u, vec2<f32>(0.0, 0.0)); } }\n"
         "  let s0 = tree(acc, lid);\n  var s1 = vec2<f32>(0.0, 0.0);\n";
    if (passes == 2) {
      s += "  acc = vec2<f32>(0.0, 0.0);\n"
           "  if (live) { for (var k = lid; k < len; k = k + " + wg + "u) {"
           " acc = acc + terms(group, k, 1u, s0); } }\n"
           "  s1 = tree(acc, lid);\n";
    }
    s += "  if (live && lid == 0u) { finish(group, s0, s1); }\n}\n";
    return s;
  };
  launch_kernel(ctx, l);
}

void launch_groups(Context& ctx, NnKernel& k, uint64_t groups, uint32_t workgroup) {
  if (groups == 0) return;
  KernelLaunch l;
  prepare(k, l, nullptr, Shape::Groups);
  l.grid = Grid::Groups;
  l.count = groups;
  l.workgroup = workgroup;
  auto inner = l.body;
  l.body = [inner, workgroup] {
    return inner() + kernel_main(Grid::Groups, workgroup) +
           "  if (group < frame_count()) { run_group(group, lid); }\n}\n";
  };
  launch_kernel(ctx, l);
}

void launch_in_pieces(Context& ctx, const NnKernel& k, uint64_t units,
                      const std::vector<uint64_t>& per_unit,
                      const std::function<void(NnKernel&, uint64_t)>& launch) {
  if (units == 0) return;
  std::vector<const Operand*> ops;
  for (const auto& op : k.inputs) ops.push_back(&op);
  for (const auto& op : k.outputs) ops.push_back(&op);
  uint64_t per_piece = units;
  bool oversized = false;
  for (size_t j = 0; j < ops.size(); ++j) {
    if (!needs_window(ctx, ops[j]->buffer)) continue;
    oversized = true;
    const uint64_t step = j < per_unit.size() ? per_unit[j] : 0;
    if (step > 0)
      per_piece = std::min(per_piece, rows_per_window(ctx, units, step * element_size(ops[j]->dtype), "nn:" + k.key));
  }
  if (!oversized) {
    NnKernel whole = k;
    launch(whole, units);
    return;
  }
  for (uint64_t lo = 0; lo < units; lo += per_piece) {
    const uint64_t n = std::min(per_piece, units - lo);
    NnKernel piece = k;
    for (size_t j = 0; j < ops.size(); ++j) {
      Operand& op = j < k.inputs.size() ? piece.inputs[j] : piece.outputs[j - k.inputs.size()];
      const uint64_t step = j < per_unit.size() ? per_unit[j] : 0;
      op.offset += lo * step;
      if (step > 0) op.count = n * step;
    }
    launch(piece, n);
  }
}

void launch_map_planes(Context& ctx, const NnKernel& k, uint64_t planes,
                       const std::vector<uint64_t>& per_plane, uint64_t per_plane_invocations) {
  launch_in_pieces(ctx, k, planes, per_plane,
                   [&](NnKernel& piece, uint64_t n) { launch_map(ctx, piece, n * per_plane_invocations); });
}

}  // namespace twgpu::nn
