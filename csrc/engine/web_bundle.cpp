#include "engine/web_bundle.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "engine/engine.h"
#include "runtime/buffer_pool.h"
#include "runtime/graph_capture.h"
#include "runtime/pipeline_source.h"
#include "runtime/runtime.h"

namespace twgpu::engine {

namespace {

using nlohmann::json;

uint64_t round4(uint64_t n) { return (n + 3) & ~uint64_t(3); }

// buffers.bin: pieces appended at 16-byte boundaries; returns {offset, size}.
json append(std::vector<uint8_t>& bin, const uint8_t* data, uint64_t size) {
  const uint64_t at = (bin.size() + 15) / 16 * 16;
  bin.resize(at + size, 0);
  if (size) std::copy(data, data + size, bin.begin() + at);
  return json{{"offset", at}, {"size", size}};
}

const char* binding_kind(Access a) { return a == Access::Read ? "read-only-storage" : "storage"; }

json tensor_entry(const DeviceTensor& t, uint64_t buffer_id) {
  return json{{"buffer", buffer_id},
              {"offset", t.offset * static_cast<uint64_t>(element_size(t.dtype))},
              {"dtype", dtype_name(t.dtype)},
              {"shape", t.shape},
              {"byteSize", t.nbytes()}};
}

}  // namespace

WebBundle make_web_bundle(Executable& exe) {
  RuntimeLock lock;
  twgpu::Context& gpu = lock.ctx();
  gpu.recorder().synchronize();

  // Buffers: the memory plan's pools first (ids = pool ids; no content: every run writes
  // them before reading), then the engine's other buffers (weights, constants and scratch
  // made at load: their content now), then buffers first named by the run itself.
  struct Buf {
    WGPUBuffer buffer;
    const char* role;
    uint64_t content_bytes;  // bytes of content to ship (from byte 0)
  };
  std::vector<Buf> bufs;
  std::unordered_map<WGPUBuffer, uint64_t> ids;
  for (WGPUBuffer b : exe.pool_buffers()) {
    ids.emplace(b, bufs.size());
    bufs.push_back({b, "activations", 0});
  }
  for (const auto& [b, requested] : exe.held_buffers()) {
    if (ids.count(b)) continue;
    ids.emplace(b, bufs.size());
    bufs.push_back({b, "constant", round4(requested)});
  }
  std::vector<uint8_t> bin;
  std::vector<json> contents(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (!bufs[i].content_bytes) continue;
    std::vector<uint8_t> bytes(bufs[i].content_bytes);
    gpu.recorder().read(bufs[i].buffer, 0, bytes.data(), bytes.size());
    contents[i] = append(bin, bytes.data(), bytes.size());
  }

  CapturedGraph graph(gpu);
  graph.begin(0);
  try {
    exe.record();
  } catch (...) {
    graph.abort();
    throw;
  }
  graph.end(/*bake=*/false);
  const std::vector<CapturedGraph::StepRecord> steps = graph.recorded_steps();

  auto id_of = [&](WGPUBuffer b) {
    auto it = ids.find(b);
    if (it != ids.end()) return it->second;
    ids.emplace(b, bufs.size());
    bufs.push_back({b, "transient", 0});
    contents.emplace_back();
    return static_cast<uint64_t>(bufs.size() - 1);
  };

  uint64_t max_storage = 0, max_binding = 0, max_groups = 0, max_uniform = 0;
  bool f16 = false, subgroups = false;
  std::map<const Pipeline*, uint64_t> shader_ids;
  json shaders = json::array(), out_steps = json::array();
  for (const CapturedGraph::StepRecord& s : steps) {
    if (!s.is_dispatch) {
      if (s.size == 0) continue;
      if (s.src) {
        out_steps.push_back({{"kind", "copy"}, {"src", id_of(s.src)}, {"srcOffset", s.src_offset},
                             {"dst", id_of(s.dst)}, {"dstOffset", s.dst_offset}, {"size", s.size}});
      } else {
        out_steps.push_back({{"kind", "write"}, {"dst", id_of(s.dst)}, {"dstOffset", s.dst_offset},
                             {"data", append(bin, s.data.data(), s.data.size())}});
      }
      continue;
    }
    const Pipeline& p = *s.pipeline;
    auto found = shader_ids.find(&p);
    if (found == shader_ids.end()) {
      const ProgramDesc* src = pipeline_source(p);
      if (!src)
        fail(ErrorKind::Internal, "web bundle: kernel '" + p.label + "' has no recorded WGSL source");
      json kinds = json::array();
      for (Access a : src->storage) kinds.push_back(binding_kind(a));
      if (p.uniform_bytes) kinds.push_back("uniform");
      found = shader_ids.emplace(&p, shaders.size()).first;
      shaders.push_back({{"label", p.label}, {"wgsl", src->wgsl}, {"entryPoint", "main"},
                         {"bindings", kinds}, {"uniformBytes", p.uniform_bytes}});
      f16 = f16 || src->wgsl.find("enable f16") != std::string::npos;
      subgroups = subgroups || src->wgsl.find("enable subgroups") != std::string::npos;
    }
    json bindings = json::array();
    for (size_t i = 0; i < s.buffers.size(); ++i) {
      const uint64_t whole = BufferPool::size_of(s.buffers[i]);
      const uint64_t size = s.windows[i].size ? s.windows[i].size : whole - s.windows[i].offset;
      bindings.push_back({{"buffer", id_of(s.buffers[i])}, {"offset", s.windows[i].offset},
                          {"size", size}});
      max_binding = std::max(max_binding, size);
    }
    max_storage = std::max<uint64_t>(max_storage, s.buffers.size());
    max_uniform = std::max<uint64_t>(max_uniform, s.uniforms.size());
    for (uint32_t g : s.groups) max_groups = std::max<uint64_t>(max_groups, g);
    json step = {{"kind", "dispatch"}, {"shader", found->second}, {"bindings", bindings},
                 {"workgroups", {s.groups[0], s.groups[1], s.groups[2]}}};
    if (!s.uniforms.empty()) step["uniforms"] = append(bin, s.uniforms.data(), s.uniforms.size());
    out_steps.push_back(std::move(step));
  }
  graph.reset();

  uint64_t max_buffer = 0;
  json buffers = json::array();
  for (size_t i = 0; i < bufs.size(); ++i) {
    const uint64_t size = BufferPool::size_of(bufs[i].buffer);
    max_buffer = std::max(max_buffer, size);
    json b = {{"id", i}, {"size", size}, {"role", bufs[i].role}};
    if (!contents[i].is_null()) b["content"] = contents[i];
    buffers.push_back(std::move(b));
  }
  json inputs = json::array(), outputs = json::array();
  for (size_t i = 0; i < exe.num_inputs(); ++i)
    inputs.push_back(tensor_entry(exe.input(i), id_of(exe.input(i).buffer)));
  for (size_t i = 0; i < exe.num_outputs(); ++i)
    outputs.push_back(tensor_entry(exe.output(i), id_of(exe.output(i).buffer)));
  // Buffers named only as inputs/outputs (a program that only copies) join the list too.
  for (size_t i = buffers.size(); i < bufs.size(); ++i)
    buffers.push_back({{"id", i}, {"size", BufferPool::size_of(bufs[i].buffer)}, {"role", bufs[i].role}});

  json features = json::array();
  if (f16) features.push_back("shader-f16");
  if (subgroups) features.push_back("subgroups");
  const DeviceCapabilities& caps = gpu.caps();
  json doc = {
      {"format", "torch-webgpu-web-bundle"},
      {"version", kWebBundleVersion},
      {"bin", {{"file", "buffers.bin"}, {"size", bin.size()}}},
      {"features", features},
      // What the steps need: a device with less cannot run them.
      {"limits",
       {{"maxStorageBuffersPerShaderStage", max_storage},
        {"maxStorageBufferBindingSize", max_binding},
        {"maxBufferSize", max_buffer},
        {"maxComputeWorkgroupsPerDimension", max_groups},
        {"maxUniformBufferBindingSize", max_uniform}}},
      // The engine's adapter had these; the WGSL may use up to them (workgroup sizes and
      // memory). A player asks for them where its adapter has them.
      {"preferredLimits",
       {{"maxComputeWorkgroupStorageSize", caps.max_workgroup_storage},
        {"maxComputeInvocationsPerWorkgroup", caps.max_workgroup_invocations},
        {"maxComputeWorkgroupSizeX", caps.max_workgroup_size_x}}},
      {"buffers", buffers},
      {"shaders", shaders},
      {"steps", out_steps},
      {"inputs", inputs},
      {"outputs", outputs}};
  return WebBundle{doc.dump(1), std::move(bin)};
}

void write_web_bundle(Executable& exe, const std::string& out_dir) {
  WebBundle b = make_web_bundle(exe);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) fail(ErrorKind::InvalidArgument, "cannot create " + out_dir + ": " + ec.message());
  auto write = [](const std::string& path, const void* data, size_t size) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) fail(ErrorKind::InvalidArgument, "cannot write " + path);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) fail(ErrorKind::InvalidArgument, "writing " + path + " failed");
  };
  write(out_dir + "/bundle.json", b.json.data(), b.json.size());
  write(out_dir + "/buffers.bin", b.bin.data(), b.bin.size());
}

}  // namespace twgpu::engine
