#include "runtime/context.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "runtime/buffer_pool.h"
#include "runtime/command_recorder.h"
#include "runtime/config.h"
#include "runtime/device_checks.h"
#include "runtime/error.h"
#include "runtime/pipeline_cache.h"

namespace twgpu {
namespace {

// How long a wait on a hardware adapter polls before it blocks (TORCH_WEBGPU_SPIN_WAIT_US).
constexpr uint64_t kHardwareSpinWaitUs = 1000;

struct BackendChoice {
  const char* name;
  WGPUBackendType type;
  bool needs_compat;  // Dawn's GL backends only offer the compatibility feature level
};

const BackendChoice kBackends[] = {
    {"vulkan", WGPUBackendType_Vulkan, false},   {"opengles", WGPUBackendType_OpenGLES, true},
    {"opengl", WGPUBackendType_OpenGL, true},    {"metal", WGPUBackendType_Metal, false},
    {"d3d12", WGPUBackendType_D3D12, false},     {"d3d11", WGPUBackendType_D3D11, false},
};

const char* backend_name(WGPUBackendType t) {
  for (const auto& b : kBackends)
    if (b.type == t) return b.name;
  return t == WGPUBackendType_Null ? "null" : "unknown";
}

const char* adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
  }
}

// Silences stderr for a scope. Probing Vulkan on a machine without a GPU makes Mesa's
// lavapipe and Dawn print warnings that mean only "no GPU here"; the reason still reaches
// the exception message if no adapter is found at all.
class QuietStderr {
 public:
  explicit QuietStderr(bool active) {
    if (!active) return;
    std::fflush(stderr);
    saved_ = dup(2);
    int null_fd = open("/dev/null", O_WRONLY);
    if (saved_ >= 0 && null_fd >= 0) dup2(null_fd, 2);
    if (null_fd >= 0) close(null_fd);
  }
  ~QuietStderr() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
  }

 private:
  int saved_ = -1;
};

// Dawn's toggles descriptor (chained on the device descriptor). Its sType number follows
// Dawn's SType enum of this release: chaining 0x50009 and 0x5000B on a device descriptor
// makes this build name them (BufferDescriptorErrorInfoFromWireClient, ShaderModule-
// SPIRVOptionsDescriptor), and 0x5000A between them is accepted. Used to turn
// off timestamp quantization: Dawn rounds timestamps down to 65.536 us by default (a
// browser's guard against timing attacks), which would zero most per-dispatch times.
// This belongs with the other Dawn-only structs in dawn_extensions.h; it lives here so
// that adding it does not rebuild every file that includes context.h.
constexpr WGPUSType kSTypeDawnTogglesDescriptor = static_cast<WGPUSType>(0x0005000A);
struct DawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabled_count;
  const char* const* enabled;
  size_t disabled_count;
  const char* const* disabled;
};

// Toggle names and the descriptor that points at them, kept alive together.
struct Toggles {
  std::vector<const char*> enabled, disabled;
  DawnTogglesDescriptor desc = {};
  // TORCH_WEBGPU_DAWN_TOGGLES's names (with `off`, also those it turns off).
  explicit Toggles(bool off, std::vector<const char*> off_first = {}) : disabled(std::move(off_first)) {
    const Config& cfg = Config::get();
    for (const auto& t : cfg.dawn_toggles_on) enabled.push_back(t.c_str());
    for (const auto& t : cfg.dawn_toggles_off)
      if (off) disabled.push_back(t.c_str());
  }
  // The chain to hang on a descriptor (null when there is nothing to toggle).
  WGPUChainedStruct* chain() {
    if (enabled.empty() && disabled.empty()) return nullptr;
    desc.chain.sType = kSTypeDawnTogglesDescriptor;
    desc.enabled_count = enabled.size();
    desc.enabled = enabled.data();
    desc.disabled_count = disabled.size();
    desc.disabled = disabled.data();
    return &desc.chain;
  }
};

Context* g_context = nullptr;
std::once_flag g_once;
std::string g_init_error;

}  // namespace

Context& Context::get() {
  std::call_once(g_once, [] {
    try {
      // Leaked on purpose: tearing Dawn down during interpreter exit races torch's own
      // static destructors, and the OS reclaims everything anyway.
      g_context = new Context();
    } catch (const Error& e) {
      g_init_error = e.what();
    }
  });
  if (!g_context) fail(ErrorKind::NoAdapter, g_init_error);
  return *g_context;
}

bool Context::available() {
  try {
    get();
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool Context::initialized() { return g_context != nullptr; }

// The EGL context of Dawn's GL backend. Dawn makes it current on the calling thread
// before its GL calls but never releases it, and a context current on one thread cannot
// be made current on another: so it is released when a runtime lock ends. EGL is loaded
// at run time: the Vulkan path must not need it.
struct Context::EglBinding {
  using Display = void*;
  using Surface = void*;
  using GlContext = void*;
  unsigned (*make_current)(Display, Surface, Surface, GlContext) = nullptr;
  GlContext (*current)() = nullptr;
  Display display = nullptr;
  Surface draw = nullptr;
  Surface read = nullptr;
  GlContext context = nullptr;

  static std::unique_ptr<EglBinding> capture() {
    void* lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libEGL.so.1", RTLD_NOW);
    if (!lib) return nullptr;
    auto b = std::make_unique<EglBinding>();
    b->make_current = reinterpret_cast<unsigned (*)(Display, Surface, Surface, GlContext)>(
        dlsym(lib, "eglMakeCurrent"));
    auto get_display = reinterpret_cast<Display (*)()>(dlsym(lib, "eglGetCurrentDisplay"));
    auto get_context = reinterpret_cast<GlContext (*)()>(dlsym(lib, "eglGetCurrentContext"));
    auto get_surface = reinterpret_cast<Surface (*)(int)>(dlsym(lib, "eglGetCurrentSurface"));
    if (!b->make_current || !get_display || !get_context || !get_surface) return nullptr;
    b->current = get_context;
    b->display = get_display();
    b->context = get_context();
    b->draw = get_surface(0x3059 /* EGL_DRAW */);
    b->read = get_surface(0x305A /* EGL_READ */);
    if (!b->context) return nullptr;
    return b;
  }
  void unbind() const { make_current(display, nullptr, nullptr, nullptr); }
};

void Context::enter_thread() {
  if (egl_) ++lock_depth_;
}

void Context::leave_thread() {
  if (!egl_ || --lock_depth_ != 0 || !gl_touched_) return;
  gl_touched_ = false;
  if (egl_->current() == egl_->context) egl_->unbind();
}

Context::Context() {
  // Mesa's EGL needs no display server with the surfaceless platform (CPU-only machines).
  setenv("EGL_PLATFORM", "surfaceless", 0);
  create_instance();
  create_adapter();
  create_device();
  pool_ = std::make_unique<BufferPool>(*this);
  pool_->set_growth(Config::get().alloc_growth_percent / 100.0);
  pipelines_ = std::make_unique<PipelineCache>(*this);
  recorder_ = std::make_unique<CommandRecorder>(*this);
  checks_ = std::make_unique<DeviceChecks>(*this);
  if (uses_gl()) {
    // Release the context from the creating thread; RuntimeLock binds it where needed.
    egl_ = EglBinding::capture();
    if (egl_) egl_->unbind();
  }
  if (!uses_gl() && wgpuDeviceHasFeature(device_, dawn::kFeatureImplicitDeviceSynchronization))
    worker_ = std::make_unique<SubmitWorker>();
  // Hardware adapters poll before blocking: a blocked fence wait wakes up late (an
  // interrupt and a reschedule), which every read-back and synchronize pays. CPU adapters
  // never spin: their own threads run the work being waited for.
  const Config& cfg = Config::get();
  set_spin_wait_us(cfg.spin_wait_us >= 0 ? static_cast<uint64_t>(cfg.spin_wait_us)
                                         : (adapter_desc_.runs_on_cpu() ? 0 : kHardwareSpinWaitUs));
}

bool Context::uses_gl() const {
  return adapter_desc_.backend == "opengl" || adapter_desc_.backend == "opengles";
}

Context::~Context() = default;

void Context::create_instance() {
  WGPUInstanceDescriptor desc = {};
  desc.features.timedWaitAnyEnable = 1;  // lets wait() block with a timeout
  desc.features.timedWaitAnyMaxCount = 1;
  // Instance toggles reach every adapter it finds (allow_unsafe_apis decides what an
  // adapter offers, e.g. maxImmediateSize): TORCH_WEBGPU_DAWN_TOGGLES's enabled names.
  Toggles toggles(false);
  desc.nextInChain = toggles.chain();
  instance_ = wgpuCreateInstance(&desc);
  if (!instance_) fail(ErrorKind::NoAdapter, "torch_webgpu: wgpuCreateInstance failed");
}

void Context::create_adapter() {
  const Config& cfg = Config::get();
  std::vector<BackendChoice> order;
  if (!cfg.backend.empty()) {
    for (const auto& b : kBackends)
      if (cfg.backend == b.name) order.push_back(b);
    if (order.empty())
      fail(ErrorKind::NoAdapter, "torch_webgpu: unknown TORCH_WEBGPU_BACKEND='" + cfg.backend +
                                     "' (expected vulkan, opengl, opengles, metal, d3d12 or d3d11)");
  } else {
    // Best hardware first; the GL backends reach Mesa's software rasterizer on machines
    // without a GPU (Dawn refuses lavapipe).
    order = {kBackends[0], kBackends[1], kBackends[2]};
  }
  std::string tried;
  for (const auto& choice : order) {
    WGPURequestAdapterOptions opts = {};
    bool compat = cfg.compat || choice.needs_compat;
    opts.featureLevel = compat ? WGPUFeatureLevel_Compatibility : WGPUFeatureLevel_Core;
    opts.powerPreference = WGPUPowerPreference_HighPerformance;
    opts.forceFallbackAdapter = cfg.force_fallback ? 1 : 0;
    opts.backendType = choice.type;
    // Adapter toggles (allow_unsafe_apis among them) decide what the adapter offers, e.g.
    // its limits: TORCH_WEBGPU_DAWN_TOGGLES's enabled names go to the adapter request too.
    Toggles adapter_toggles(false);
    opts.nextInChain = adapter_toggles.chain();
    struct Result { WGPUAdapter adapter = nullptr; std::string message; } result;
    WGPURequestAdapterCallbackInfo cb = {};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message,
                     void* u1, void*) {
      auto* r = static_cast<Result*>(u1);
      if (status == WGPURequestAdapterStatus_Success) r->adapter = adapter;
      r->message = from_view(message);
    };
    cb.userdata1 = &result;
    {
      QuietStderr quiet(cfg.backend.empty() && !cfg.debug && choice.type == WGPUBackendType_Vulkan);
      WGPUFutureWaitInfo wait_info = {wgpuInstanceRequestAdapter(instance_, &opts, cb), 0};
      wgpuInstanceWaitAny(instance_, 1, &wait_info, UINT64_MAX);
    }
    dawn::AdapterInfo holder;
    WGPUAdapterInfo& info = holder.info;
    if (result.adapter && wgpuAdapterGetInfo(result.adapter, &info) == WGPUStatus_Success &&
        info.backendType != WGPUBackendType_Null) {
      adapter_ = result.adapter;
      adapter_desc_.name = from_view(info.device);
      adapter_desc_.vendor = from_view(info.vendor);
      adapter_desc_.architecture = from_view(info.architecture);
      adapter_desc_.description = from_view(info.description);
      adapter_desc_.backend = backend_name(info.backendType);
      adapter_desc_.adapter_type = adapter_type_name(info.adapterType);
      adapter_desc_.compatibility_mode = compat;
      adapter_desc_.subgroup_min_size = holder.subgroup_min_size;
      adapter_desc_.subgroup_max_size = holder.subgroup_max_size;
      wgpuAdapterInfoFreeMembers(info);
      return;
    }
    if (result.adapter) {
      wgpuAdapterInfoFreeMembers(info);
      wgpuAdapterRelease(result.adapter);
    }
    tried += std::string(tried.empty() ? "" : "; ") + choice.name + ": " +
             (result.message.empty() ? "no adapter" : result.message);
  }
  std::string hint = cfg.force_fallback
                         ? " TORCH_WEBGPU_FORCE_FALLBACK_ADAPTER=1 is set: this Dawn build has no "
                           "fallback adapter; unset it to use the software GL path."
                         : " On a machine without a GPU install Mesa's EGL/GLES drivers "
                           "(scripts/setup.sh).";
  fail(ErrorKind::NoAdapter, "torch_webgpu: no usable WebGPU adapter (" + tried + ")." + hint);
}

namespace {

// TORCH_WEBGPU_LIMITS=default: the core spec's default limits for everything a compute
// kernel can reach, also on a compatibility-level device whose own defaults are lower
// (128 invocations, 4 storage buffers): what every core WebGPU implementation grants, so
// what a portable kernel may count on.
void clamp_to_core_defaults(WGPULimits& l) {
  auto cap = [](auto& field, uint64_t v) {
    using T = std::remove_reference_t<decltype(field)>;
    field = static_cast<T>(std::min<uint64_t>(field, v));
  };
  cap(l.maxBindGroups, 4);
  cap(l.maxBindingsPerBindGroup, 1000);
  cap(l.maxDynamicUniformBuffersPerPipelineLayout, 8);
  cap(l.maxDynamicStorageBuffersPerPipelineLayout, 4);
  cap(l.maxStorageBuffersPerShaderStage, 8);
  cap(l.maxUniformBuffersPerShaderStage, 12);
  cap(l.maxUniformBufferBindingSize, 64ull << 10);
  cap(l.maxStorageBufferBindingSize, 128ull << 20);
  cap(l.maxBufferSize, 256ull << 20);
  cap(l.maxComputeWorkgroupStorageSize, 16384);
  cap(l.maxComputeInvocationsPerWorkgroup, 256);
  cap(l.maxComputeWorkgroupSizeX, 256);
  cap(l.maxComputeWorkgroupSizeY, 256);
  cap(l.maxComputeWorkgroupSizeZ, 64);
  cap(l.maxComputeWorkgroupsPerDimension, 65535);
  l.minUniformBufferOffsetAlignment = std::max(l.minUniformBufferOffsetAlignment, 256u);
  l.minStorageBufferOffsetAlignment = std::max(l.minStorageBufferOffsetAlignment, 256u);
}

}  // namespace

void Context::create_device() {
  const Config& cfg = Config::get();
  std::vector<WGPUFeatureName> features;
  auto want = [&](WGPUFeatureName f) {
    if (wgpuAdapterHasFeature(adapter_, f)) features.push_back(f);
  };
  want(WGPUFeatureName_ShaderF16);
  want(dawn::kFeatureSubgroups);
  want(WGPUFeatureName_TimestampQuery);
  if (cfg.async_replay && !uses_gl()) want(dawn::kFeatureImplicitDeviceSynchronization);

  wgpuAdapterGetLimits(adapter_, &limits_.limits);
  WGPUDeviceDescriptor desc = {};
  desc.label = WGPUStringView{"torch_webgpu", WGPU_STRLEN};
  desc.requiredFeatureCount = features.size();
  desc.requiredFeatures = features.data();
  if (cfg.default_limits) clamp_to_core_defaults(limits_.limits);
  desc.requiredLimits = &limits_.limits;
  desc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  desc.deviceLostCallbackInfo.callback = [](WGPUDevice const*, WGPUDeviceLostReason reason,
                                            WGPUStringView message, void* u1, void*) {
    auto* self = static_cast<Context*>(u1);
    // A refused request (the retry below) is no loss of the device we end up with.
    if (reason == WGPUDeviceLostReason_InstanceDropped ||
        reason == WGPUDeviceLostReason_FailedCreation)
      return;
    std::lock_guard<std::mutex> lock(self->error_mutex_);
    self->lost_message_ = from_view(message);
    self->lost_.store(true);
  };
  desc.deviceLostCallbackInfo.userdata1 = this;
  desc.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType type,
                                                 WGPUStringView message, void* u1, void*) {
    auto* self = static_cast<Context*>(u1);
    std::lock_guard<std::mutex> lock(self->error_mutex_);
    if (self->pending_error_.empty())
      self->pending_error_ = "WebGPU error (type " + std::to_string(static_cast<int>(type)) +
                             "): " + from_view(message);
  };
  desc.uncapturedErrorCallbackInfo.userdata1 = this;

  struct Result { WGPUDevice device = nullptr; std::string message; } result;
  WGPURequestDeviceCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message,
                   void* u1, void*) {
    auto* r = static_cast<Result*>(u1);
    if (status == WGPURequestDeviceStatus_Success) r->device = device;
    r->message = from_view(message);
  };
  cb.userdata1 = &result;
  auto request = [&] {
    WGPUFutureWaitInfo wait_info = {wgpuAdapterRequestDevice(adapter_, &desc, cb), 0};
    wgpuInstanceWaitAny(instance_, 1, &wait_info, UINT64_MAX);
  };
  // Full-resolution timestamps for torch.webgpu.profiler; should Dawn refuse the toggles
  // descriptor, the device is requested again without it (timestamps stay quantized).
  // TORCH_WEBGPU_DAWN_TOGGLES adds its own (Dawn warns about names it does not know).
  Toggles toggles(true, {"timestamp_quantization"});
  desc.nextInChain = toggles.chain();
  request();
  if (!result.device) {
    if (cfg.debug || !cfg.dawn_toggles_on.empty() || !cfg.dawn_toggles_off.empty())
      std::fprintf(stderr, "[torch_webgpu] device request with Dawn toggles failed (%s); "
                   "retrying without\n", result.message.c_str());
    desc.nextInChain = nullptr;
    request();
  }
  if (!result.device)
    fail(ErrorKind::NoAdapter, "torch_webgpu: requesting a device from '" + adapter_desc_.name +
                                   "' failed: " + result.message);
  device_ = result.device;
  queue_ = wgpuDeviceGetQueue(device_);

  dawn::PaddedLimits got;
  wgpuDeviceGetLimits(device_, &got.limits);
  const WGPULimits& l = got.limits;
  caps_.shader_f16 = wgpuDeviceHasFeature(device_, WGPUFeatureName_ShaderF16);
  caps_.subgroups = wgpuDeviceHasFeature(device_, dawn::kFeatureSubgroups);
  {
    const uint32_t lo = adapter_desc_.subgroup_min_size, hi = adapter_desc_.subgroup_max_size;
    const bool one_size = lo == hi && lo >= 4 && lo <= 128 && (lo & (lo - 1)) == 0;
    if (caps_.subgroups && one_size && cfg.subgroups) caps_.subgroup_size = lo;
  }
  caps_.timestamp_query = wgpuDeviceHasFeature(device_, WGPUFeatureName_TimestampQuery);
  caps_.max_buffer_size = l.maxBufferSize;
  caps_.max_storage_binding_size = l.maxStorageBufferBindingSize;
  if (cfg.max_binding_bytes && cfg.max_binding_bytes < caps_.max_storage_binding_size)
    caps_.max_storage_binding_size = cfg.max_binding_bytes;
  caps_.max_storage_buffers_per_stage = l.maxStorageBuffersPerShaderStage;
  caps_.max_workgroup_storage = l.maxComputeWorkgroupStorageSize;
  caps_.max_workgroup_invocations = l.maxComputeInvocationsPerWorkgroup;
  caps_.max_workgroup_size_x = l.maxComputeWorkgroupSizeX;
  caps_.max_workgroups_per_dimension = l.maxComputeWorkgroupsPerDimension;
  caps_.min_uniform_offset_alignment = l.minUniformBufferOffsetAlignment;
  caps_.min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
  caps_.max_uniform_binding_size = l.maxUniformBufferBindingSize;
  if (adapter_desc_.name.find("llvmpipe") != std::string::npos) caps_.max_loop_iterations = 65535;

  if (cfg.debug) {
    WGPUSupportedFeatures supported = {};
    wgpuAdapterGetFeatures(adapter_, &supported);
    std::string list;
    for (size_t i = 0; i < supported.featureCount; ++i) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "%s0x%x", i ? " " : "", supported.features[i]);
      list += hex;
    }
    wgpuSupportedFeaturesFreeMembers(supported);
    std::fprintf(stderr, "[torch_webgpu] adapter features (Dawn numbering): %s\n", list.c_str());
    std::fprintf(stderr,
                 "[torch_webgpu] adapter: %s (%s, %s backend%s) vendor=%s arch=%s driver=%s\n"
                 "[torch_webgpu] device: shader-f16=%d subgroups=%d (sizes %u-%u, kernels %u) timestamp-query=%d "
                 "maxBufferSize=%llu maxStorageBufferBindingSize=%llu workgroupStorage=%u\n",
                 adapter_desc_.name.c_str(), adapter_desc_.adapter_type.c_str(),
                 adapter_desc_.backend.c_str(), adapter_desc_.compatibility_mode ? ", compat" : "",
                 adapter_desc_.vendor.c_str(), adapter_desc_.architecture.c_str(),
                 adapter_desc_.description.c_str(), caps_.shader_f16, caps_.subgroups,
                 adapter_desc_.subgroup_min_size, adapter_desc_.subgroup_max_size, caps_.subgroup_size,
                 caps_.timestamp_query, (unsigned long long)caps_.max_buffer_size,
                 (unsigned long long)caps_.max_storage_binding_size, caps_.max_workgroup_storage);
  }
}

void Context::wait(WGPUFuture future) {
  touch_gl();
  WGPUFutureWaitInfo info = {future, 0};
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_ns = [&] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  };
  ++waits_;
  for (;;) {
    // Polls (a zero timeout checks the queue's fences and returns) for spin_wait_ns_, then
    // blocks in slices that notice a lost device.
    const bool spin = spin_wait_ns_ && elapsed_ns() < spin_wait_ns_;
    WGPUWaitStatus status = wgpuInstanceWaitAny(instance_, 1, &info, spin ? 0 : 100 * 1000 * 1000ull);
    if (status == WGPUWaitStatus_Success && info.completed) {
      waited_ns_ += elapsed_ns();
      return;
    }
    if (lost_.load()) break;
    if (status != WGPUWaitStatus_Success && status != WGPUWaitStatus_TimedOut)
      fail(ErrorKind::Internal, "torch_webgpu: wgpuInstanceWaitAny failed (status " +
                                    std::to_string(static_cast<int>(status)) + ")");
  }
  check_errors();
}

void Context::check_errors() {
  if (lost_.load()) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    fail(ErrorKind::DeviceLost, "torch_webgpu: the WebGPU device was lost (" + lost_message_ +
                                    "); restart the process to use the device again");
  }
  std::string message;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    message.swap(pending_error_);
  }
  if (!message.empty()) fail(ErrorKind::Internal, "torch_webgpu: " + message);
}

void Context::simulate_device_loss() {
  touch_gl();
  queue_gate();
  wgpuDeviceDestroy(device_);
  // Destroy reports the loss asynchronously; make it visible now.
  wgpuInstanceProcessEvents(instance_);
  if (!lost_.load()) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    lost_message_ = "device destroyed";
    lost_.store(true);
  }
}

}  // namespace twgpu
