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

// Builds bundle.json's parts and buffers.bin from an engine's buffers and a capture.
class BundleWriter {
 public:
  explicit BundleWriter(twgpu::Context& gpu) : gpu_(gpu) {}

  // The memory plan's pools first (ids = pool ids), then the engine's others. Content
  // ships only where a run relies on it: the weights (uploaded at load). Pools and scratch
  // are written by every run before they are read (op factories write nothing at load; one
  // that uploaded a table into scratch would have to ship it).
  void add_engine_buffers(const Executable& exe) {
    // A buffer's size in the bundle is the pool's bucket for what the engine asked, not the
    // buffer it got (a cached one may be up to an eighth larger): the same program writes
    // the same bundle whatever the process allocated before.
    std::map<WGPUBuffer, uint64_t> requested;
    for (const auto& [b, bytes] : exe.held_buffers()) requested.emplace(b, bytes);
    auto size_of = [&](WGPUBuffer b) {
      auto it = requested.find(b);
      return it != requested.end() ? BufferPool::bucket_size(std::max<uint64_t>(round4(it->second), 4))
                                   : BufferPool::size_of(b);
    };
    for (WGPUBuffer b : exe.pool_buffers()) add(b, "activations", 0, size_of(b));
    for (const auto& [b, bytes] : exe.held_buffers()) {
      if (ids_.count(b)) continue;
      const bool weights = b == exe.weight_buffer();
      add(b, weights ? "weights" : "scratch", weights ? round4(bytes) : 0, size_of(b));
    }
  }

  // A buffer's id. One the engine does not hold (a kernel's own) ships with its content as
  // it was before the run (nothing ran during the capture).
  uint64_t id_of(WGPUBuffer b) {
    auto it = ids_.find(b);
    if (it != ids_.end()) return it->second;
    return add(b, "external", round4(BufferPool::size_of(b)), BufferPool::size_of(b));
  }

  void add_step(const CapturedGraph::StepRecord& s) {
    if (!s.is_dispatch) {
      if (s.size == 0) return;
      if (s.src)
        steps_.push_back({{"kind", "copy"}, {"src", id_of(s.src)}, {"srcOffset", s.src_offset},
                          {"dst", id_of(s.dst)}, {"dstOffset", s.dst_offset}, {"size", s.size}});
      else
        steps_.push_back({{"kind", "write"}, {"dst", id_of(s.dst)}, {"dstOffset", s.dst_offset},
                          {"data", append(bin_, s.data.data(), s.data.size())}});
      return;
    }
    json bindings = json::array();
    for (size_t i = 0; i < s.buffers.size(); ++i) {
      const BufferWindow& w = s.windows[i];
      const uint64_t id = id_of(s.buffers[i]);
      const uint64_t size = w.size ? w.size : bufs_[id].size - w.offset;
      bindings.push_back({{"buffer", id}, {"offset", w.offset}, {"size", size}});
      max_binding_ = std::max(max_binding_, size);
    }
    max_storage_ = std::max<uint64_t>(max_storage_, s.buffers.size());
    max_uniform_ = std::max<uint64_t>(max_uniform_, s.uniforms.size());
    for (uint32_t g : s.groups) max_groups_ = std::max<uint64_t>(max_groups_, g);
    json step = {{"kind", "dispatch"}, {"shader", shader_id(*s.pipeline)}, {"bindings", bindings},
                 {"workgroups", {s.groups[0], s.groups[1], s.groups[2]}}};
    if (!s.uniforms.empty()) step["uniforms"] = append(bin_, s.uniforms.data(), s.uniforms.size());
    steps_.push_back(std::move(step));
  }

  WebBundle finish(json inputs, json outputs) {
    uint64_t max_buffer = 0;
    json buffers = json::array();
    for (size_t i = 0; i < bufs_.size(); ++i) {
      const uint64_t size = bufs_[i].size;
      max_buffer = std::max(max_buffer, size);
      json b = {{"id", i}, {"size", size}, {"role", bufs_[i].role}};
      if (!bufs_[i].content.is_null()) b["content"] = bufs_[i].content;
      buffers.push_back(std::move(b));
    }
    json features = json::array();
    if (f16_) features.push_back("shader-f16");
    if (subgroups_) features.push_back("subgroups");
    const DeviceCapabilities& caps = gpu_.caps();
    json doc = {
        {"format", "torch-webgpu-web-bundle"},
        {"version", kWebBundleVersion},
        {"bin", {{"file", "buffers.bin"}, {"size", bin_.size()}}},
        {"features", features},
        // What the steps need: a device with less cannot run them.
        {"limits",
         {{"maxStorageBuffersPerShaderStage", max_storage_},
          {"maxStorageBufferBindingSize", max_binding_},
          {"maxBufferSize", max_buffer},
          {"maxComputeWorkgroupsPerDimension", max_groups_},
          {"maxUniformBufferBindingSize", max_uniform_}}},
        // The engine's adapter had these; the WGSL may use up to them (workgroup sizes and
        // memory). A player asks for them where its adapter has them.
        {"preferredLimits",
         {{"maxComputeWorkgroupStorageSize", caps.max_workgroup_storage},
          {"maxComputeInvocationsPerWorkgroup", caps.max_workgroup_invocations},
          {"maxComputeWorkgroupSizeX", caps.max_workgroup_size_x}}},
        {"buffers", buffers},
        {"shaders", shaders_},
        {"steps", steps_},
        {"inputs", std::move(inputs)},
        {"outputs", std::move(outputs)}};
    return WebBundle{doc.dump(1), std::move(bin_)};
  }

 private:
  struct Buf {
    WGPUBuffer buffer;
    const char* role;
    json content;  // {offset, size} in buffers.bin, or null
    uint64_t size;  // bytes the page allocates
  };

  uint64_t add(WGPUBuffer b, const char* role, uint64_t content_bytes, uint64_t size) {
    const uint64_t id = bufs_.size();
    ids_.emplace(b, id);
    json content;
    if (content_bytes) {
      std::vector<uint8_t> bytes(content_bytes);
      gpu_.recorder().read(b, 0, bytes.data(), bytes.size());
      content = append(bin_, bytes.data(), bytes.size());
    }
    bufs_.push_back({b, role, std::move(content), size});
    return id;
  }

  uint64_t shader_id(const Pipeline& p) {
    auto found = shader_ids_.find(&p);
    if (found != shader_ids_.end()) return found->second;
    const ProgramDesc* src = pipeline_source(p);
    if (!src) fail(ErrorKind::Internal, "web bundle: kernel '" + p.label + "' has no recorded WGSL source");
    json kinds = json::array();
    for (Access a : src->storage) kinds.push_back(binding_kind(a));
    if (p.uniform_bytes) kinds.push_back("uniform");
    shaders_.push_back({{"label", p.label}, {"wgsl", src->wgsl}, {"entryPoint", "main"},
                        {"bindings", kinds}, {"uniformBytes", p.uniform_bytes}});
    f16_ = f16_ || src->wgsl.find("enable f16") != std::string::npos;
    subgroups_ = subgroups_ || src->wgsl.find("enable subgroups") != std::string::npos;
    return shader_ids_[&p] = shaders_.size() - 1;
  }

  twgpu::Context& gpu_;
  std::vector<Buf> bufs_;
  std::unordered_map<WGPUBuffer, uint64_t> ids_;
  std::map<const Pipeline*, uint64_t> shader_ids_;
  json shaders_ = json::array(), steps_ = json::array();
  std::vector<uint8_t> bin_;
  uint64_t max_storage_ = 0, max_binding_ = 0, max_groups_ = 0, max_uniform_ = 0;
  bool f16_ = false, subgroups_ = false;
};

}  // namespace

WebBundle make_web_bundle(Executable& exe) {
  // A bundle's pools start with any bytes; state tensors would need theirs (not done yet).
  for (const Value& v : exe.program().values)
    if (v.kind == ValueKind::Tensor && v.tensor.is_state)
      fail(ErrorKind::InvalidArgument, "web bundles of programs with state tensors (mutated buffers) are not supported yet");
  RuntimeLock lock;
  twgpu::Context& gpu = lock.ctx();
  gpu.recorder().synchronize();
  BundleWriter writer(gpu);
  writer.add_engine_buffers(exe);

  CapturedGraph graph(gpu);
  graph.begin(0);
  try {
    exe.record();
  } catch (...) {
    graph.abort();
    throw;
  }
  graph.end(/*bake=*/false);
  // The graph holds a reference to every buffer it names until reset().
  for (const CapturedGraph::StepRecord& s : graph.recorded_steps()) writer.add_step(s);
  json inputs = json::array(), outputs = json::array();
  for (size_t i = 0; i < exe.num_inputs(); ++i)
    inputs.push_back(tensor_entry(exe.input(i), writer.id_of(exe.input(i).buffer)));
  for (size_t i = 0; i < exe.num_outputs(); ++i)
    outputs.push_back(tensor_entry(exe.output(i), writer.id_of(exe.output(i).buffer)));
  graph.reset();
  return writer.finish(std::move(inputs), std::move(outputs));
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

namespace {

[[noreturn]] void bad_bundle(const std::string& msg) {
  fail(ErrorKind::InvalidArgument, "web bundle: " + msg);
}

// A {offset, size} range of buffers.bin, checked.
const uint8_t* bin_range(const json& r, const std::vector<uint8_t>& bin, uint64_t& size,
                         const std::string& what) {
  const uint64_t offset = r.at("offset").get<uint64_t>();
  size = r.at("size").get<uint64_t>();
  if (offset > bin.size() || size > bin.size() - offset)
    bad_bundle(what + ": bytes outside buffers.bin (" + std::to_string(bin.size()) + " bytes)");
  return bin.data() + offset;
}

}  // namespace

std::vector<HostTensor> run_web_bundle(const std::string& dir,
                                       const std::vector<HostTensor>& inputs) {
  const std::vector<uint8_t> text = read_file(dir + "/bundle.json");
  const json m = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded()) bad_bundle(dir + "/bundle.json is not valid JSON");
  try {
    if (m.value("format", std::string()) != "torch-webgpu-web-bundle")
      bad_bundle("not a torch-webgpu web bundle");
    if (m.at("version").get<int>() != kWebBundleVersion)
      bad_bundle("version " + m.at("version").dump() + " is not supported (reads " +
                 std::to_string(kWebBundleVersion) + ")");
    const std::vector<uint8_t> bin = read_file(dir + "/" + m.at("bin").at("file").get<std::string>());
    if (bin.size() != m.at("bin").at("size").get<uint64_t>())
      bad_bundle("buffers.bin has " + std::to_string(bin.size()) + " bytes, bundle.json expects " +
                 m.at("bin").at("size").dump());

    RuntimeLock lock;
    twgpu::Context& gpu = lock.ctx();
    BufferSet set(gpu);
    std::vector<WGPUBuffer> buffers;
    std::vector<uint64_t> sizes;
    for (const json& b : m.at("buffers")) {
      const uint64_t size = b.at("size").get<uint64_t>();
      if (size == 0 || size % 4) bad_bundle("buffer " + b.at("id").dump() + ": bad size");
      buffers.push_back(set.allocate(size));
      sizes.push_back(size);
      if (b.contains("content")) {
        uint64_t n = 0;
        const uint8_t* p = bin_range(b.at("content"), bin, n, "buffer content");
        if (n > size || n % 4) bad_bundle("buffer " + b.at("id").dump() + ": content does not fit");
        if (n) gpu.recorder().write(buffers.back(), 0, p, n);
      }
    }
    auto check = [&](uint64_t id, uint64_t offset, uint64_t size, const std::string& what) {
      if (id >= buffers.size()) bad_bundle(what + ": buffer " + std::to_string(id) + " does not exist");
      if (offset > sizes[id] || size > sizes[id] - offset || offset % 4)
        bad_bundle(what + ": bytes outside buffer " + std::to_string(id));
      return buffers[id];
    };
    const json& ins = m.at("inputs");
    if (inputs.size() != ins.size())
      bad_bundle("the program takes " + std::to_string(ins.size()) + " inputs, got " +
                 std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const json& t = ins[i];
      const uint64_t n = t.at("byteSize").get<uint64_t>(), offset = t.at("offset").get<uint64_t>();
      if (inputs[i].data.size() != n)
        bad_bundle("input " + std::to_string(i) + " needs " + std::to_string(n) + " bytes, got " +
                   std::to_string(inputs[i].data.size()));
      WGPUBuffer b = check(t.at("buffer").get<uint64_t>(), offset, round4(n), "input");
      std::vector<uint8_t> padded(inputs[i].data);
      padded.resize(round4(n), 0);
      if (n) gpu.recorder().write(b, offset, padded.data(), padded.size());
    }
    const json& shaders = m.at("shaders");
    std::vector<const Pipeline*> pipelines;
    for (const json& sh : shaders) {
      ProgramDesc desc;
      desc.label = sh.at("label").get<std::string>();
      desc.wgsl = sh.at("wgsl").get<std::string>();
      desc.uniform_bytes = sh.at("uniformBytes").get<uint32_t>();
      for (const json& k : sh.at("bindings"))
        if (k != "uniform") desc.storage.push_back(k == "read-only-storage" ? Access::Read : Access::ReadWrite);
      const std::string key = "web-bundle:" + sh.at("bindings").dump() + desc.wgsl;
      pipelines.push_back(&gpu.pipelines().get(key, [&] { return desc; }));
    }
    for (const json& s : m.at("steps")) {
      const std::string kind = s.at("kind").get<std::string>();
      if (kind == "copy") {
        const uint64_t n = s.at("size").get<uint64_t>();
        WGPUBuffer src = check(s.at("src").get<uint64_t>(), s.at("srcOffset").get<uint64_t>(), n, "copy");
        WGPUBuffer dst = check(s.at("dst").get<uint64_t>(), s.at("dstOffset").get<uint64_t>(), n, "copy");
        gpu.recorder().copy(src, s.at("srcOffset").get<uint64_t>(), dst, s.at("dstOffset").get<uint64_t>(), n);
      } else if (kind == "write") {
        uint64_t n = 0;
        const uint8_t* p = bin_range(s.at("data"), bin, n, "write");
        WGPUBuffer dst = check(s.at("dst").get<uint64_t>(), s.at("dstOffset").get<uint64_t>(), n, "write");
        gpu.recorder().write(dst, s.at("dstOffset").get<uint64_t>(), p, n);
      } else if (kind == "dispatch") {
        const uint64_t shader = s.at("shader").get<uint64_t>();
        if (shader >= pipelines.size()) bad_bundle("dispatch: shader " + std::to_string(shader) + " does not exist");
        const Pipeline& p = *pipelines[shader];
        const json& bindings = s.at("bindings");
        if (bindings.size() != p.num_storage) bad_bundle("dispatch: binding count differs from its shader's");
        std::vector<WGPUBuffer> bufs;
        std::vector<BufferWindow> windows;
        for (const json& b : bindings) {
          const uint64_t offset = b.at("offset").get<uint64_t>(), size = b.at("size").get<uint64_t>();
          bufs.push_back(check(b.at("buffer").get<uint64_t>(), offset, size, "dispatch"));
          windows.push_back(BufferWindow{offset, size});
        }
        std::vector<uint8_t> uniforms;
        if (p.uniform_bytes) {
          uint64_t n = 0;
          const uint8_t* u = bin_range(s.at("uniforms"), bin, n, "uniforms");
          if (n != p.uniform_bytes) bad_bundle("dispatch: uniform size differs from its shader's");
          uniforms.assign(u, u + n);
        }
        const json& g = s.at("workgroups");
        gpu.recorder().dispatch(p, bufs.data(), uniforms.data(), g.at(0).get<uint32_t>(),
                                g.at(1).get<uint32_t>(), g.at(2).get<uint32_t>(), windows.data());
      } else {
        bad_bundle("unknown step kind " + kind);
      }
    }
    std::vector<HostTensor> out;
    for (const json& t : m.at("outputs")) {
      DeviceTensor d;
      d.dtype = parse_dtype(t.at("dtype").get<std::string>());
      d.shape = t.at("shape").get<std::vector<int64_t>>();
      d.strides = contiguous_strides(d.shape);
      const uint64_t offset = t.at("offset").get<uint64_t>();
      d.buffer = check(t.at("buffer").get<uint64_t>(), offset & ~uint64_t(3), round4(d.nbytes() + (offset & 3)), "output");
      d.offset = offset / static_cast<uint64_t>(element_size(d.dtype));
      out.push_back(download(gpu, d));
    }
    return out;
  } catch (const json::exception& e) {
    bad_bundle(std::string("malformed bundle.json: ") + e.what());
  }
}

}  // namespace twgpu::engine
