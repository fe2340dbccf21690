// Device guard: one WebGPU device (index 0) whose one in-order queue runs all work.
//
// Streams are labels. Every stream submits to the same queue, so work on any stream is
// ordered after all work submitted before it, on whatever stream: waiting for another
// stream or an event is already satisfied by that order, and block() has nothing to do.
// The current stream is per thread, as in CUDA, so code that switches streams runs as is.
// An event is a QueueMarker (runtime/queue_marker.h): the queue position at record().
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>

#include "aten/webgpu_tensor.h"
#include "runtime/queue_marker.h"

namespace twgpu::aten {
namespace {

// Ids 1..kPoolSize are the pool's streams; getNewStream hands out ids above them.
constexpr c10::StreamId kPoolSize = 32;
thread_local c10::StreamId t_current_stream = 0;  // 0: the default stream
std::atomic<c10::StreamId> g_next_pool_stream{0};
std::atomic<c10::StreamId> g_next_new_stream{kPoolSize + 1};

struct WebGPUEvent {
  bool timing = false;  // created with enable_timing=True
  QueueMarker marker;
};

WebGPUEvent* as_event(void* event) { return static_cast<WebGPUEvent*>(event); }

class WebGPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kDeviceType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    check(d);
    return c10::Device(kDeviceType, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kDeviceType, 0); }
  void setDevice(c10::Device d) const override { check(d); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}

  c10::Stream getStream(c10::Device d) const override { return stream(t_current_stream); }
  c10::Stream getDefaultStream(c10::Device d) const override { return stream(0); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    check(d);
    return stream(1 + g_next_pool_stream.fetch_add(1) % kPoolSize);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    check(d);
    return stream(g_next_new_stream.fetch_add(1));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    check(s.device());
    c10::Stream previous = stream(t_current_stream);
    t_current_stream = s.id();
    return previous;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return Context::available() ? 1 : 0;
  }

  // ---- events -------------------------------------------------------------------------

  void record(void** event, const c10::Stream& s, const c10::DeviceIndex,
              const c10::EventFlag flag) const override {
    check(s.device());
    if (!*event) {
      auto* created = new WebGPUEvent();
      created->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = created;
    }
    TWGPU_TRY
    RuntimeLock lock;
    as_event(*event)->marker.record(lock.ctx(), as_event(*event)->timing);
    TWGPU_CATCH
  }

  // The queue already runs the stream's later work after the event's position.
  void block(void*, const c10::Stream& s) const override { check(s.device()); }

  bool queryEvent(void* event) const override {
    if (!event || !as_event(event)->marker.recorded()) return true;
    TWGPU_TRY
    RuntimeLock lock;
    return as_event(event)->marker.query(lock.ctx());
    TWGPU_CATCH
  }

  void synchronizeEvent(void* event) const override {
    if (!event || !as_event(event)->marker.recorded()) return;
    TWGPU_TRY
    RuntimeLock lock;
    as_event(event)->marker.synchronize(lock.ctx());
    TWGPU_CATCH
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete as_event(event);
  }

  // Milliseconds between the two positions: GPU timestamps where the adapter has them,
  // else the host times at which each was seen complete (QueueMarker::elapsed_ms). Waits
  // for both, where CUDA would raise "not ready".
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end && as_event(start)->marker.recorded() &&
                    as_event(end)->marker.recorded(),
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(as_event(start)->timing && as_event(end)->timing,
                "Both events must be created with argument 'enable_timing=True'.");
    TWGPU_TRY
    RuntimeLock lock;
    return QueueMarker::elapsed_ms(lock.ctx(), as_event(start)->marker, as_event(end)->marker);
    TWGPU_CATCH
  }

  // ---- streams (all one queue) --------------------------------------------------------

  bool queryStream(const c10::Stream& s) const override {
    check(s.device());
    if (!Context::initialized()) return true;
    TWGPU_TRY
    RuntimeLock lock;
    QueueMarker now;  // completes at once when the queue is known idle
    now.record(lock.ctx());
    return now.query(lock.ctx());
    TWGPU_CATCH
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check(s.device());
    synchronize();
  }
  void synchronizeDevice(const c10::DeviceIndex) const override { synchronize(); }

 private:
  static c10::Stream stream(c10::StreamId id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, 0), id);
  }
  static void check(c10::Device d) {
    TORCH_CHECK(d.type() == kDeviceType, "expected a webgpu device, got ", d);
    TORCH_CHECK(!d.has_index() || d.index() == 0, "torch_webgpu: invalid device index ",
                static_cast<int>(d.index()), " (there is 1 WebGPU device)");
  }
  static void synchronize() {
    if (!Context::initialized()) return;
    TWGPU_TRY
    RuntimeLock lock;
    lock.ctx().recorder().synchronize();
    TWGPU_CATCH
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, WebGPUGuardImpl);

}  // namespace
}  // namespace twgpu::aten
