// The WebGPU instance, adapter, device and queue, created once per process.
// Every other runtime piece hangs off the Context; all calls into it happen under mutex().
#pragma once
#include <webgpu/webgpu.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/dawn_extensions.h"
#include "runtime/submit_worker.h"

namespace twgpu {

class BufferPool;
class CommandRecorder;
class DeviceChecks;
class PipelineCache;

struct AdapterDescription {
  std::string name;          // e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;
  std::string architecture;
  std::string description;   // driver description
  std::string backend;       // "vulkan", "opengles", ...
  std::string adapter_type;  // "discrete GPU", "CPU", ...
  bool compatibility_mode = false;
  uint32_t subgroup_min_size = 0, subgroup_max_size = 0;  // Dawn's adapter info (0: unknown)
  // Whether the adapter runs workgroups on CPU cores (llvmpipe, lavapipe, SwiftShader).
  bool runs_on_cpu() const {
    if (adapter_type == "CPU") return true;
    for (const char* soft : {"llvmpipe", "lavapipe", "SwiftShader", "swiftshader"})
      if (name.find(soft) != std::string::npos) return true;
    return false;
  }
};

struct DeviceCapabilities {
  bool shader_f16 = false;
  bool subgroups = false;
  // The subgroup size kernels may assume (the `subgroups` feature on an adapter whose
  // subgroups all have one size, e.g. 32 on NVIDIA); 0: kernels use workgroup trees
  // (no feature, sizes that vary, TORCH_WEBGPU_SUBGROUPS=0).
  uint32_t subgroup_size = 0;
  bool timestamp_query = false;
  uint64_t max_buffer_size = 0;
  uint64_t max_storage_binding_size = 0;
  uint32_t max_storage_buffers_per_stage = 0;
  uint32_t max_workgroup_storage = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size_x = 0;
  // Invocations per workgroup for 1-D kernels: 256, or less where limits are lower
  // (compatibility mode and spec-default limits allow 128).
  uint32_t workgroup_1d() const {
    uint32_t n = 256;
    if (max_workgroup_size_x && max_workgroup_size_x < n) n = max_workgroup_size_x;
    if (max_workgroup_invocations && max_workgroup_invocations < n) n = max_workgroup_invocations;
    return n;
  }
  uint32_t max_workgroups_per_dimension = 0;
  uint32_t min_uniform_offset_alignment = 256;
  uint32_t min_storage_offset_alignment = 256;
  uint64_t max_uniform_binding_size = 0;
  // Iterations one loop statement may run in one invocation before the driver silently
  // leaves it (0: no limit). Mesa's llvmpipe stops loops after 65535 iterations, counted
  // over the whole invocation: kernels that loop serially over a whole problem (per-matrix
  // linear algebra, per-row sorts) check their bound against it and take another path.
  uint64_t max_loop_iterations = 0;
};

class Context {
 public:
  // The process-wide context; created on first use. Throws Error(NoAdapter) when no
  // adapter can be had (the message says what was tried).
  static Context& get();
  // True when a device exists or can be created; never throws.
  static bool available();
  // True once get() succeeded.
  static bool initialized();

  std::recursive_mutex& mutex() { return mutex_; }
  // Called by RuntimeLock on entry and exit of the outermost lock. Dawn's GL backends
  // make their EGL context current on whichever thread calls in, but never release it;
  // autograd calls from its own thread, so the context is released when a lock ends.
  void enter_thread();
  void leave_thread();
  // Marks that this lock scope called into Dawn in a way that may reach GL (device
  // objects, submits, waits); only such scopes pay for releasing the EGL context.
  void touch_gl() { gl_touched_ = true; }

  WGPUInstance instance() const { return instance_; }
  WGPUAdapter adapter_handle() const { return adapter_; }
  WGPUDevice device() const { return device_; }
  WGPUQueue queue() const { return queue_; }
  const AdapterDescription& adapter() const { return adapter_desc_; }
  const DeviceCapabilities& caps() const { return caps_; }

  BufferPool& pool() { return *pool_; }
  CommandRecorder& recorder() { return *recorder_; }
  PipelineCache& pipelines() { return *pipelines_; }
  DeviceChecks& checks() { return *checks_; }

  // True where a graph replay may encode and submit on the submit thread (not on Dawn's
  // GL backends, whose context belongs to one thread; opt-in: TORCH_WEBGPU_ASYNC_REPLAY=1).
  // submit_worker() exists only then.
  bool async_submits() const { return worker_ != nullptr; }
  SubmitWorker& submit_worker() { return *worker_; }
  // Waits for the submit thread's job: every queue operation (submit, buffer write, map,
  // work-done marker) and every change to objects a queued replay names calls it first.
  void queue_gate() {
    if (worker_) worker_->join();
  }

  // Blocks until `future` completes, processing callbacks; raises DeviceLost instead of
  // hanging when the device goes away while waiting.
  void wait(WGPUFuture future);
  // Waits so far and the time spent in them: how long the host waited on the GPU
  // (read-backs, synchronize), for dispatch_stats.
  uint64_t waits() const { return waits_; }
  uint64_t waited_ns() const { return waited_ns_; }
  // How long a wait polls before it blocks (TORCH_WEBGPU_SPIN_WAIT_US), and the benchmarks'
  // switch for it.
  uint64_t spin_wait_us() const { return spin_wait_ns_ / 1000; }
  void set_spin_wait_us(uint64_t us) { spin_wait_ns_ = us * 1000; }
  // Raises the pending uncaptured WebGPU error or a lost device, if any.
  void check_errors();
  bool lost() const { return lost_.load(); }
  // Test hook: destroys the device so later calls see a lost device.
  void simulate_device_loss();

  ~Context();

 private:
  Context();
  void create_instance();
  void create_adapter();
  void create_device();
  bool uses_gl() const;

  std::recursive_mutex mutex_;
  WGPUInstance instance_ = nullptr;
  WGPUAdapter adapter_ = nullptr;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterDescription adapter_desc_;
  DeviceCapabilities caps_;
  dawn::PaddedLimits limits_;

  std::atomic<bool> lost_{false};
  uint64_t waits_ = 0;
  uint64_t waited_ns_ = 0;
  uint64_t spin_wait_ns_ = 0;
  std::string lost_message_;
  std::mutex error_mutex_;
  std::string pending_error_;

  struct EglBinding;
  std::unique_ptr<EglBinding> egl_;  // set for the OpenGL/OpenGL ES backends
  int lock_depth_ = 0;
  bool gl_touched_ = false;

  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<CommandRecorder> recorder_;
  std::unique_ptr<PipelineCache> pipelines_;
  std::unique_ptr<DeviceChecks> checks_;  // device-side index checks (device_checks.h)
  std::unique_ptr<SubmitWorker> worker_;  // last: its job finishes before the rest goes
};

// Helpers shared by the runtime's files.
inline WGPUStringView to_view(const std::string& s) { return WGPUStringView{s.data(), s.size()}; }
inline std::string from_view(WGPUStringView v) {
  if (!v.data) return {};
  return v.length == WGPU_STRLEN ? std::string(v.data) : std::string(v.data, v.length);
}

}  // namespace twgpu
