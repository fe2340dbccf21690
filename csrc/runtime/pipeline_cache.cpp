#include "runtime/pipeline_cache.h"

#include "runtime/pipeline_source.h"

#include <fstream>

#include "runtime/config.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace twgpu {
namespace {
constexpr size_t kMaxBindGroups = 8192;  // past this the cache starts afresh

// Guarded by the runtime lock, as the caches are. Pipelines live as long as the process's
// context, so entries are never dropped.
std::unordered_map<WGPUComputePipeline, ProgramDesc>& pipeline_sources() {
  static auto* sources = new std::unordered_map<WGPUComputePipeline, ProgramDesc>();
  return *sources;
}
}  // namespace

const ProgramDesc* pipeline_source(const Pipeline& p) {
  auto it = pipeline_sources().find(p.pipeline);
  return it == pipeline_sources().end() ? nullptr : &it->second;
}

size_t PipelineCache::BindKeyHash::operator()(const BindKey& k) const {
  size_t h = std::hash<const void*>()(k.layout) ^ (std::hash<const void*>()(k.uniforms) << 1);
  h ^= k.uniform_bytes * 0x9E3779B97F4A7C15ull;
  for (WGPUBuffer b : k.buffers) h = h * 1000003u ^ std::hash<const void*>()(b);
  for (const BufferWindow& w : k.windows) h = h * 1000003u ^ (w.offset + w.size * 31);
  return h;
}

const Pipeline& PipelineCache::get(const std::string& key, const std::function<ProgramDesc()>& make) {
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  Pipeline p = build(make());
  return pipelines_.emplace(key, std::move(p)).first->second;
}

Pipeline PipelineCache::build(const ProgramDesc& desc) {
  ctx_.touch_gl();
  const Config& cfg = Config::get();
  if (!cfg.dump_shaders_dir.empty()) {
    std::string name = desc.label;
    for (char& c : name)
      if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
    std::ofstream(cfg.dump_shaders_dir + "/" + name + "_" + std::to_string(pipelines_.size()) +
                  ".wgsl")
        << desc.wgsl;
  }
  WGPUDevice device = ctx_.device();
  std::vector<dawn::BindGroupLayoutEntry> entries;
  for (size_t i = 0; i < desc.storage.size(); ++i) {
    dawn::BindGroupLayoutEntry e = {};
    e.binding = static_cast<uint32_t>(i);
    e.visibility = WGPUShaderStage_Compute;
    e.buffer.type = desc.storage[i] == Access::Read ? WGPUBufferBindingType_ReadOnlyStorage
                                                    : WGPUBufferBindingType_Storage;
    entries.push_back(e);
  }
  if (desc.uniform_bytes > 0) {
    dawn::BindGroupLayoutEntry e = {};
    e.binding = static_cast<uint32_t>(desc.storage.size());
    e.visibility = WGPUShaderStage_Compute;
    e.buffer.type = WGPUBufferBindingType_Uniform;
    e.buffer.hasDynamicOffset = 1;
    e.buffer.minBindingSize = desc.uniform_bytes;
    entries.push_back(e);
  }

  wgpuDevicePushErrorScope(device, WGPUErrorFilter_Validation);
  WGPUBindGroupLayoutDescriptor bgl_desc = {};
  bgl_desc.entryCount = entries.size();
  bgl_desc.entries = reinterpret_cast<const WGPUBindGroupLayoutEntry*>(entries.data());
  WGPUBindGroupLayout layout = wgpuDeviceCreateBindGroupLayout(device, &bgl_desc);
  dawn::PipelineLayoutDescriptor pl_desc = {};
  pl_desc.bindGroupLayoutCount = 1;
  pl_desc.bindGroupLayouts = &layout;
  WGPUPipelineLayout pipeline_layout = wgpuDeviceCreatePipelineLayout(
      device, reinterpret_cast<const WGPUPipelineLayoutDescriptor*>(&pl_desc));

  WGPUShaderSourceWGSL source = {};
  source.chain.sType = WGPUSType_ShaderSourceWGSL;
  source.code = to_view(desc.wgsl);
  WGPUShaderModuleDescriptor sm_desc = {};
  sm_desc.nextInChain = &source.chain;
  sm_desc.label = to_view(desc.label);
  WGPUShaderModule module = wgpuDeviceCreateShaderModule(device, &sm_desc);

  WGPUComputePipelineDescriptor cp_desc = {};
  cp_desc.label = to_view(desc.label);
  cp_desc.layout = pipeline_layout;
  cp_desc.compute.module = module;
  cp_desc.compute.entryPoint = WGPUStringView{"main", WGPU_STRLEN};
  WGPUComputePipeline pipeline = wgpuDeviceCreateComputePipeline(device, &cp_desc);

  struct Scope { bool error = false; std::string message; } scope;
  WGPUPopErrorScopeCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUPopErrorScopeStatus, WGPUErrorType type, WGPUStringView message, void* u1,
                   void*) {
    auto* s = static_cast<Scope*>(u1);
    s->error = type != WGPUErrorType_NoError;
    s->message = from_view(message);
  };
  cb.userdata1 = &scope;
  ctx_.wait(wgpuDevicePopErrorScope(device, cb));
  wgpuShaderModuleRelease(module);
  wgpuPipelineLayoutRelease(pipeline_layout);
  if (scope.error) {
    if (pipeline) wgpuComputePipelineRelease(pipeline);
    if (layout) wgpuBindGroupLayoutRelease(layout);
    fail(ErrorKind::ShaderCompile, "torch_webgpu: building kernel '" + desc.label +
                                       "' failed:\n" + scope.message + "\nWGSL source:\n" +
                                       desc.wgsl);
  }
  Pipeline p;
  p.pipeline = pipeline;
  p.layout = layout;
  p.num_storage = static_cast<uint32_t>(desc.storage.size());
  p.uniform_bytes = desc.uniform_bytes;
  p.label = desc.label;
  pipeline_sources()[pipeline] = desc;
  return p;
}

WGPUBindGroup PipelineCache::bind_group(const Pipeline& p, const WGPUBuffer* buffers,
                                        WGPUBuffer uniforms, const BufferWindow* windows) {
  scratch_key_.layout = p.layout;
  scratch_key_.uniforms = p.uniform_bytes ? uniforms : nullptr;
  scratch_key_.uniform_bytes = p.uniform_bytes;
  scratch_key_.buffers.assign(buffers, buffers + p.num_storage);
  if (windows)
    scratch_key_.windows.assign(windows, windows + p.num_storage);
  else
    scratch_key_.windows.clear();
  auto it = bind_groups_.find(scratch_key_);
  if (it != bind_groups_.end()) return it->second;
  ctx_.touch_gl();
  if (bind_groups_.size() >= kMaxBindGroups) forget_all_bind_groups();
  WGPUBindGroup group = create_bind_group(p, buffers, uniforms, windows);
  ++bind_groups_made_;
  bind_groups_.emplace(scratch_key_, group);
  return group;
}

WGPUBindGroup PipelineCache::create_bind_group(const Pipeline& p, const WGPUBuffer* buffers,
                                               WGPUBuffer uniforms,
                                               const BufferWindow* windows) {
  ctx_.touch_gl();
  WGPUBindGroupEntry entries[16];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p.num_storage; ++i) {
    WGPUBindGroupEntry e = {};
    e.binding = i;
    e.buffer = buffers[i];
    e.offset = windows ? windows[i].offset : 0;
    e.size = windows && windows[i].size ? windows[i].size : WGPU_WHOLE_SIZE;
    // Launches window buffers larger than a binding (kernels/binding_window.h); this
    // catches one that does not, also below the adapter's limit when
    // TORCH_WEBGPU_MAX_BINDING_BYTES lowers it for tests.
    const uint64_t bound = e.size == WGPU_WHOLE_SIZE ? wgpuBufferGetSize(e.buffer) : e.size;
    if (bound > ctx_.caps().max_storage_binding_size)
      fail(ErrorKind::Internal, "torch_webgpu: kernel '" + p.label + "' binds " +
                                    std::to_string(bound) + " bytes at binding " +
                                    std::to_string(i) + ", more than one storage binding holds (" +
                                    std::to_string(ctx_.caps().max_storage_binding_size) + ")");
    entries[n++] = e;
  }
  if (p.uniform_bytes) {
    WGPUBindGroupEntry e = {};
    e.binding = p.num_storage;
    e.buffer = uniforms;
    e.offset = 0;
    e.size = p.uniform_bytes;
    entries[n++] = e;
  }
  WGPUBindGroupDescriptor desc = {};
  desc.layout = p.layout;
  desc.entryCount = n;
  desc.entries = entries;
  return wgpuDeviceCreateBindGroup(ctx_.device(), &desc);
}

void PipelineCache::forget_buffer(WGPUBuffer buffer) {
  ctx_.touch_gl();
  for (auto it = bind_groups_.begin(); it != bind_groups_.end();) {
    bool uses = false;
    for (WGPUBuffer b : it->first.buffers) uses |= b == buffer;
    if (uses) {
      wgpuBindGroupRelease(it->second);
      it = bind_groups_.erase(it);
    } else {
      ++it;
    }
  }
}

void PipelineCache::forget_all_bind_groups() {
  ctx_.touch_gl();
  for (auto& entry : bind_groups_) wgpuBindGroupRelease(entry.second);
  bind_groups_.clear();
}

}  // namespace twgpu
