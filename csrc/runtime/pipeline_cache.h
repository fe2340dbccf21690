// Compute pipelines built from a declaration (WGSL source + binding list), cached by a key
// the caller computes once per variant; and bind groups cached by the buffers they bind.
//
// Binding convention (every kernel follows it): group 0, storage buffers at bindings
// 0..n-1 in declaration order, then one uniform buffer at binding n with a dynamic offset
// (present when uniform_bytes > 0). Storage buffers are bound whole (offset 0), or as a
// window of a buffer larger than one binding: kernels receive element offsets through
// their uniforms, rebased to the window (kernels/binding_window.h).
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace twgpu {

class Context;

enum class Access : uint8_t { Read, ReadWrite };

// The bytes of a storage buffer one binding sees; size 0 binds the whole buffer.
struct BufferWindow {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const BufferWindow& o) const { return offset == o.offset && size == o.size; }
};

struct ProgramDesc {
  std::string label;             // names the kernel in errors and dumps
  std::string wgsl;              // full shader source, entry point `main`
  std::vector<Access> storage;   // one entry per storage binding
  uint32_t uniform_bytes = 0;    // size of the uniform struct (0: none)
};

struct Pipeline {
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  uint32_t num_storage = 0;
  uint32_t uniform_bytes = 0;
  std::string label;
};

class PipelineCache {
 public:
  explicit PipelineCache(Context& ctx) : ctx_(ctx) {}

  // Returns the cached pipeline for `key`, building it with make() on first use. Throws
  // Error(ShaderCompile) with the kernel's label and WGSL source when Dawn rejects it.
  const Pipeline& get(const std::string& key, const std::function<ProgramDesc()>& make);
  size_t size() const { return pipelines_.size(); }

  // Bind group for (pipeline layout, storage buffers, uniform arena). Cached. `windows`
  // (null: whole buffers) holds one window per storage buffer.
  WGPUBindGroup bind_group(const Pipeline& p, const WGPUBuffer* buffers, WGPUBuffer uniforms,
                           const BufferWindow* windows = nullptr);
  // A new bind group of the same shape, not cached: the caller owns (releases) it.
  WGPUBindGroup create_bind_group(const Pipeline& p, const WGPUBuffer* buffers,
                                  WGPUBuffer uniforms, const BufferWindow* windows = nullptr);
  // Drops cached bind groups that name `buffer` (before the buffer is released).
  void forget_buffer(WGPUBuffer buffer);
  void forget_all_bind_groups();
  // Bind groups made for bind_group() (cache misses), for dispatch_stats.
  uint64_t bind_groups_made() const { return bind_groups_made_; }

 private:
  Pipeline build(const ProgramDesc& desc);

  Context& ctx_;
  std::unordered_map<std::string, Pipeline> pipelines_;

  struct BindKey {
    const void* layout;
    WGPUBuffer uniforms;
    uint32_t uniform_bytes;
    std::vector<WGPUBuffer> buffers;
    std::vector<BufferWindow> windows;  // empty: whole buffers
    bool operator==(const BindKey& o) const {
      return layout == o.layout && uniforms == o.uniforms && uniform_bytes == o.uniform_bytes &&
             buffers == o.buffers && windows == o.windows;
    }
  };
  struct BindKeyHash {
    size_t operator()(const BindKey& k) const;
  };
  std::unordered_map<BindKey, WGPUBindGroup, BindKeyHash> bind_groups_;
  BindKey scratch_key_;
  uint64_t bind_groups_made_ = 0;
};

}  // namespace twgpu
