#include "kernels/kernel_program.h"

#include "kernels/wgsl_dtype.h"
#include "kernels/wgsl_library.h"
#include "runtime/runtime.h"

namespace twgpu {

std::string kernel_header(const std::vector<KernelBuffer>& buffers, size_t uniform_words) {
  size_t vec4s = (uniform_words + 3) / 4;
  std::string s = "struct Uniforms { w: array<vec4<u32>, " + std::to_string(vec4s) + "> }\n";
  for (size_t b = 0; b < buffers.size(); ++b) {
    s += "@group(0) @binding(" + std::to_string(b) + ") var<storage, " +
         (buffers[b].access == Access::ReadWrite ? "read_write" : "read") + "> buf" +
         std::to_string(b) + ": array<" + (buffers[b].atomic ? "atomic<u32>" : "u32") + ">;\n";
  }
  s += "@group(0) @binding(" + std::to_string(buffers.size()) + ") var<uniform> U: Uniforms;\n";
  s += "fn uw(i: u32) -> u32 { return U.w[i >> 2u][i & 3u]; }\n";
  s += "fn opaque_f32(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ uw(3u)); }\n";
  s += wgsl::kFloatPrelude;
  s += wgsl::kInt64Prelude;
  s += wgsl::kMathPrelude;
  return s;
}

std::string kernel_main(Grid grid, uint32_t workgroup) {
  std::string s = "@compute @workgroup_size(" + std::to_string(workgroup) + ")\n";
  s += "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
       "        @builtin(local_invocation_id) lid3: vec3<u32>,\n"
       "        @builtin(workgroup_id) wid: vec3<u32>) {\n";
  if (grid == Grid::Invocations) {
    s += "  let idx = gid.x + gid.y * uw(1u);\n  if (idx >= uw(0u)) { return; }\n";
  } else {
    // Uniform control flow: every invocation of a group sees the same `group`; kernels
    // must not return before their barriers, so the bound check is theirs to make.
    s += "  let group = wid.x + wid.y * uw(2u);\n  let lid = lid3.x;\n";
  }
  return s;
}

std::string kernel_load(const std::string& name, const std::vector<KernelBuffer>& buffers,
                        size_t b, DType dtype) {
  return wgsl_load_function(name, "buf" + std::to_string(b), dtype, buffers[b].atomic);
}

std::string kernel_store(const std::string& name, const std::vector<KernelBuffer>& buffers,
                         size_t b, DType dtype, Compute compute) {
  return wgsl_store_function(name, "buf" + std::to_string(b), dtype, compute, buffers[b].atomic);
}

namespace {

// Windows of the buffers larger than one binding (empty when none is), with their
// tensors' offsets rebased in `uniforms`; refuses undeclared ones.
std::vector<BufferWindow> plan_windows(Context& ctx, const KernelLaunch& l,
                                       std::vector<uint32_t>& uniforms) {
  std::vector<BufferWindow> windows(l.buffers.size());
  bool any = false;
  for (size_t i = 0; i < l.buffers.size(); ++i) {
    const KernelBuffer& b = l.buffers[i];
    if (!needs_window(ctx, b.buffer)) continue;
    if (b.element_bytes == 0) fail_too_large(ctx, l.key, BufferPool::size_of(b.buffer));
    windows[i] = window_over(ctx, b.buffer, b.touched.first * b.element_bytes,
                             b.touched.end * b.element_bytes, l.key);
    uniforms[b.offset_word] -= static_cast<uint32_t>(windows[i].offset / b.element_bytes);
    any = true;
  }
  if (!any) windows.clear();
  return windows;
}

}  // namespace

void launch_kernel(Context& ctx, KernelLaunch& l) {
  if (l.count == 0) return;
  const uint32_t workgroup = l.workgroup ? l.workgroup : ctx.caps().workgroup_1d();
  if (l.uniforms.size() < kFirstUserWord) l.uniforms.resize(kFirstUserWord, 0);
  l.uniforms.resize((l.uniforms.size() + 3) / 4 * 4, 0);
  const size_t words = l.uniforms.size();

  uint64_t groups = l.grid == Grid::Invocations ? (l.count + workgroup - 1) / workgroup : l.count;
  const uint64_t max_x = ctx.caps().max_workgroups_per_dimension;
  uint64_t gy = (groups + max_x - 1) / max_x;
  if (gy > max_x || l.count > 0xFFFFFFFFull)
    fail(ErrorKind::Unsupported, "torch_webgpu: kernel '" + l.key + "' over too many elements");
  uint64_t gx = (groups + gy - 1) / gy;
  l.uniforms[kWordCount] = static_cast<uint32_t>(l.count);
  l.uniforms[kWordPitch] = static_cast<uint32_t>(gx * workgroup);
  l.uniforms[kWordGroupsX] = static_cast<uint32_t>(gx);
  l.uniforms[kWordZero] = 0;

  std::string key = l.key + "|wg" + std::to_string(workgroup) + "|u" + std::to_string(words);
  for (const auto& b : l.buffers)
    key += b.access == Access::ReadWrite ? (b.atomic ? 'A' : 'W') : 'R';
  const Pipeline& pipeline = ctx.pipelines().get(key, [&] {
    ProgramDesc desc;
    desc.label = key;
    desc.wgsl = kernel_header(l.buffers, words) + l.body();
    // The grid assumes the body's workgroup size: a mismatch would silently skip or
    // repeat invocations.
    if (desc.wgsl.find("@workgroup_size(" + std::to_string(workgroup) + ")") == std::string::npos)
      fail(ErrorKind::Internal, "torch_webgpu: kernel '" + l.key +
                                    "' declares another workgroup size than it launches with (" +
                                    std::to_string(workgroup) + ")");
    for (const auto& b : l.buffers) desc.storage.push_back(b.access);
    desc.uniform_bytes = static_cast<uint32_t>(words * 4);
    return desc;
  });
  std::vector<WGPUBuffer> bufs;
  for (const auto& b : l.buffers) bufs.push_back(b.buffer);
  // In Groups mode a grid with more than one row has idle groups past `count` in its last
  // row: kernels check `group < uw(0u)`.
  if (!ctx.pool().has_oversized()) {
    ctx.recorder().dispatch(pipeline, bufs.data(), l.uniforms.data(), static_cast<uint32_t>(gx),
                            static_cast<uint32_t>(gy));
    return;
  }
  std::vector<uint32_t> uniforms = l.uniforms;  // the caller may launch `l` again
  std::vector<BufferWindow> windows = plan_windows(ctx, l, uniforms);
  ctx.recorder().dispatch(pipeline, bufs.data(), uniforms.data(), static_cast<uint32_t>(gx),
                          static_cast<uint32_t>(gy), 1, windows.empty() ? nullptr : windows.data());
}

}  // namespace twgpu
