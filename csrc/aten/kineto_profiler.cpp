// torch.profiler shows our kernels: a Kineto activity profiler for the PrivateUse1 device
// (torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])).
// A Kineto session is a torch.webgpu.profiler session (profiler_session.h); its dispatch
// records become kernel activities on a "webgpu" device row of the trace. Built where the
// torch wheel ships Kineto's headers and PyTorch's PrivateUse1 profiler registry
// (CMakeLists.txt sets TWGPU_KINETO_PLUGIN then).
#include "aten/profiler_session.h"

#ifdef TWGPU_KINETO_PLUGIN
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <libkineto.h>
#include <output_base.h>

#include <chrono>
#include <set>

namespace twgpu::aten {
namespace {

constexpr int64_t kDeviceRow = 0x7767;  // "wg": the trace's process id for the device
constexpr int64_t kKernelTrack = 0;

class WebGPUActivitySession : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    try {
      session_ = begin_session("auto");
      started_ = true;
      status_ = libkineto::TraceStatus::RECORDING;
    } catch (const std::exception& e) {
      errors_.push_back(e.what());
      status_ = libkineto::TraceStatus::ERROR;
    }
  }

  void stop() override {
    if (!started_) return;
    started_ = false;
    // Kineto's times are ns since the Unix epoch; ours are on the steady clock.
    steady_to_unix_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::system_clock::now().time_since_epoch()).count() -
        static_cast<int64_t>(DispatchProfiler::now_ns());
    std::vector<HostOpEvent> host;
    try {
      end_session(session_, &records_, &host);
      status_ = libkineto::TraceStatus::PROCESSING;
    } catch (const std::exception& e) {
      errors_.push_back(e.what());
      status_ = libkineto::TraceStatus::ERROR;
    }
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    // Activities keep a pointer to their span, and Kineto's in-memory logger keeps copies
    // of the activities beyond this session: the span lives as long as the process.
    static const libkineto::TraceSpan span(0, 0, "webgpu");
    const char* timing = session_.timing == ProfilerTiming::Gpu ? "gpu (timestamp queries)"
                                                                 : "host (submit to completion)";
    for (const DispatchRecord& r : records_) {
      if (r.end_ns == 0) continue;  // its batch never completed
      libkineto::GenericTraceActivity a(span, libkineto::ActivityType::CONCURRENT_KERNEL,
                                        r.kernel);
      a.startTime = static_cast<int64_t>(r.start_ns) + steady_to_unix_ns_;
      a.endTime = static_cast<int64_t>(r.end_ns) + steady_to_unix_ns_;
      a.device = static_cast<int32_t>(kDeviceRow);
      a.resource = static_cast<int32_t>(kKernelTrack);
      a.addMetadataQuoted("aten_op", r.op);
      a.addMetadataQuoted("timing", timing);
      a.addMetadata("batch", std::to_string(r.submit));
      logger.handleGenericActivity(a);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{kDeviceRow, kDeviceRow, "webgpu", "WebGPU device"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    return {libkineto::ResourceInfo{kKernelTrack, kKernelTrack, kDeviceRow, "kernels"}};
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  SessionStart session_;
  bool started_ = false;
  int64_t steady_to_unix_ns_ = 0;
  std::vector<DispatchRecord> records_;
  std::vector<std::string> errors_;
};

class WebGPUActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config&) override {
    // Only for ProfilerActivity.PrivateUse1 (PyTorch asks for these two then): a CUDA
    // profile also names CONCURRENT_KERNEL and must not start the WebGPU device.
    using libkineto::ActivityType;
    if (!activity_types.count(ActivityType::PRIVATEUSE1_RUNTIME) &&
        !activity_types.count(ActivityType::PRIVATEUSE1_DRIVER))
      return nullptr;
    return std::make_unique<WebGPUActivitySession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"webgpu"};
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::CONCURRENT_KERNEL, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
      libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(WebGPUActivityProfiler);

}  // namespace

bool kineto_plugin_built() { return true; }

}  // namespace twgpu::aten
#else
namespace twgpu::aten {
bool kineto_plugin_built() { return false; }
}  // namespace twgpu::aten
#endif  // TWGPU_KINETO_PLUGIN
