#include "runtime/queue_marker.h"

#include <chrono>
#include <deque>
#include <vector>

#include "runtime/command_recorder.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/profiler.h"

namespace twgpu {

namespace {

// Timestamp slots of timing events: one query set, resolved slot by slot into a buffer
// at 256-byte steps (resolveQuerySet's offset alignment). A slot is free again when its
// event is re-recorded or destroyed; with all slots taken, events time on the host.
constexpr uint32_t kTimestampSlots = 1024;
constexpr uint64_t kResolveStride = 256;
struct TimestampSlots {
  WGPUQuerySet queries = nullptr;
  WGPUBuffer resolved = nullptr;  // QueryResolve | CopySrc
  std::vector<uint32_t> free;
};
TimestampSlots g_slots;

int acquire_slot(Context& ctx) {
  if (!ctx.caps().timestamp_query) return -1;
  if (!g_slots.queries) {
    WGPUQuerySetDescriptor qdesc = {};
    qdesc.label = WGPUStringView{"torch_webgpu events", WGPU_STRLEN};
    qdesc.type = WGPUQueryType_Timestamp;
    qdesc.count = kTimestampSlots;
    g_slots.queries = wgpuDeviceCreateQuerySet(ctx.device(), &qdesc);
    WGPUBufferDescriptor desc = {};
    desc.size = kTimestampSlots * kResolveStride;
    desc.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
    g_slots.resolved = wgpuDeviceCreateBuffer(ctx.device(), &desc);
    ctx.check_errors();
    for (uint32_t i = kTimestampSlots; i > 0; --i) g_slots.free.push_back(i - 1);
  }
  if (g_slots.free.empty()) return -1;
  const uint32_t slot = g_slots.free.back();
  g_slots.free.pop_back();
  return static_cast<int>(slot);
}

}  // namespace

struct QueueMarker::State {
  WGPUFuture future{0};
  bool done = false;
  double done_ms = 0;
  uint64_t submits = 0;  // the recorder's submit count when recorded
  int slot = -1;         // timestamp slot, or -1 (host timing)
  ~State() {
    if (slot >= 0) g_slots.free.push_back(static_cast<uint32_t>(slot));
  }
};

namespace {

// Markers not yet seen complete, in queue order. The queue completes in order, so polling
// stops at the first unfinished one; each poll stamps every newly finished marker, which
// keeps completion times of successive markers close to when their work really ended.
std::deque<std::shared_ptr<QueueMarker::State>> g_pending;

bool future_done(Context& ctx, WGPUFuture future, uint64_t timeout_ns) {
  ctx.touch_gl();
  WGPUFutureWaitInfo info = {future, 0};
  WGPUWaitStatus status = wgpuInstanceWaitAny(ctx.instance(), 1, &info, timeout_ns);
  if (status != WGPUWaitStatus_Success && status != WGPUWaitStatus_TimedOut)
    fail(ErrorKind::Internal, "torch_webgpu: wgpuInstanceWaitAny failed (status " +
                                  std::to_string(static_cast<int>(status)) + ")");
  return status == WGPUWaitStatus_Success && info.completed;
}

void mark_done(Context& ctx, QueueMarker::State& state, double now_ms) {
  if (state.done) return;
  state.done = true;
  state.done_ms = now_ms;
  ctx.recorder().note_completed(state.submits);
  // Non-blocking copies to the host before the marker have their bytes once it is done.
  ctx.recorder().settle_reads(state.submits);
}

void poll_pending(Context& ctx) {
  const uint64_t completed = ctx.recorder().completed_submits();
  while (!g_pending.empty()) {
    auto& front = g_pending.front();
    // A read-back since the marker waited for its work: no need to ask Dawn.
    if (!front->done && front->submits > completed && !future_done(ctx, front->future, 0))
      break;
    mark_done(ctx, *front, host_clock_ms());
    g_pending.pop_front();
  }
  ctx.check_errors();
}

// Submits an empty compute pass whose end writes a GPU timestamp into `slot` (it ends
// after all earlier work), resolved at once into the slot's place in the buffer.
void submit_timestamp(Context& ctx, uint32_t slot) {
  WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
  dawn::PassTimestampWrites writes = {nullptr, g_slots.queries, WGPU_QUERY_SET_INDEX_UNDEFINED,
                                      slot};
  WGPUComputePassDescriptor desc = {};
  desc.timestampWrites = reinterpret_cast<const WGPUComputePassTimestampWrites*>(&writes);
  WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(encoder, &desc);
  wgpuComputePassEncoderEnd(pass);
  wgpuComputePassEncoderRelease(pass);
  wgpuCommandEncoderResolveQuerySet(encoder, g_slots.queries, slot, 1, g_slots.resolved,
                                    slot * kResolveStride);
  WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder, nullptr);
  wgpuQueueSubmit(ctx.queue(), 1, &commands);
  wgpuCommandBufferRelease(commands);
  wgpuCommandEncoderRelease(encoder);
}

uint64_t read_timestamp(Context& ctx, int slot) {
  uint64_t ns = 0;
  ctx.recorder().read(g_slots.resolved, static_cast<uint64_t>(slot) * kResolveStride, &ns,
                      sizeof(ns));
  return ns;
}

}  // namespace

double host_clock_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void QueueMarker::record(Context& ctx, bool timing) {
  ctx.touch_gl();
  ctx.queue_gate();
  auto state = std::make_shared<State>();
  state_ = state;
  if (timing) state->slot = acquire_slot(ctx);
  CommandRecorder& recorder = ctx.recorder();
  if (recorder.pending()) recorder.flush();
  state->submits = recorder.submits();
  if (state->slot >= 0) {
    submit_timestamp(ctx, static_cast<uint32_t>(state->slot));
  } else if (recorder.completed_submits() == recorder.submits()) {
    // Everything submitted is known finished (a read-back saw it): complete at once.
    mark_done(ctx, *state, host_clock_ms());
    return;
  } else {
    // Submit an empty command buffer: Dawn's GL backend makes its EGL context current in
    // a submit but not in OnSubmittedWorkDone, whose fence then fails (EGL_BAD_MATCH) in a
    // lock scope that has not submitted yet.
    WGPUCommandEncoder encoder = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
    WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder, nullptr);
    wgpuQueueSubmit(ctx.queue(), 1, &commands);
    wgpuCommandBufferRelease(commands);
    wgpuCommandEncoderRelease(encoder);
  }
  WGPUQueueWorkDoneCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  // Completion is read from the future, not the callback: this Dawn build passes the
  // callback one argument more than our header declares, and a callback that ignores
  // its arguments is safe with either.
  cb.callback = [](WGPUQueueWorkDoneStatus, void*, void*) {};
  state->future = wgpuQueueOnSubmittedWorkDone(ctx.queue(), cb);
  g_pending.push_back(std::move(state));
  poll_pending(ctx);  // an idle queue completes the marker at once: stamp it now
}

bool QueueMarker::query(Context& ctx) {
  if (!state_) return true;
  if (!state_->done) poll_pending(ctx);
  return state_->done;
}

double QueueMarker::elapsed_ms(Context& ctx, QueueMarker& start, QueueMarker& end) {
  start.synchronize(ctx);
  end.synchronize(ctx);
  if (start.state_->slot >= 0 && end.state_->slot >= 0) {
    const auto t0 = static_cast<int64_t>(read_timestamp(ctx, start.state_->slot));
    const auto t1 = static_cast<int64_t>(read_timestamp(ctx, end.state_->slot));
    return static_cast<double>(t1 - t0) / 1e6;
  }
  return end.completed_ms() - start.completed_ms();
}

void QueueMarker::synchronize(Context& ctx) {
  if (!state_ || state_->done) return;
  ctx.wait(state_->future);
  // Queue order: every marker recorded before this one is finished too.
  const double now = host_clock_ms();
  while (!g_pending.empty()) {
    std::shared_ptr<State> front = g_pending.front();
    g_pending.pop_front();
    mark_done(ctx, *front, now);
    if (front == state_) break;
  }
  mark_done(ctx, *state_, now);
}

double QueueMarker::completed_ms() const { return state_ ? state_->done_ms : 0; }

}  // namespace twgpu
