#include "runtime/queue_marker.h"

#include <chrono>
#include <deque>

#include "runtime/command_recorder.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace twgpu {

struct QueueMarker::State {
  WGPUFuture future{0};
  bool done = false;
  double done_ms = 0;
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

void poll_pending(Context& ctx) {
  while (!g_pending.empty()) {
    auto& front = g_pending.front();
    if (!front->done) {
      if (!future_done(ctx, front->future, 0)) break;
      front->done = true;
      front->done_ms = host_clock_ms();
    }
    g_pending.pop_front();
  }
  ctx.check_errors();
}

}  // namespace

double host_clock_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void QueueMarker::record(Context& ctx) {
  ctx.touch_gl();
  if (ctx.recorder().pending()) {
    ctx.recorder().flush();
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
  auto state = std::make_shared<State>();
  WGPUQueueWorkDoneCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  // Completion is read from the future, not the callback: this Dawn build passes the
  // callback one argument more than our header declares, and a callback that ignores
  // its arguments is safe with either.
  cb.callback = [](WGPUQueueWorkDoneStatus, void*, void*) {};
  state->future = wgpuQueueOnSubmittedWorkDone(ctx.queue(), cb);
  state_ = state;
  g_pending.push_back(std::move(state));
  poll_pending(ctx);  // an idle queue completes the marker at once: stamp it now
}

bool QueueMarker::query(Context& ctx) {
  if (!state_) return true;
  if (!state_->done) poll_pending(ctx);
  return state_->done;
}

void QueueMarker::synchronize(Context& ctx) {
  if (!state_ || state_->done) return;
  ctx.wait(state_->future);
  // Queue order: every marker recorded before this one is finished too.
  const double now = host_clock_ms();
  while (!g_pending.empty()) {
    std::shared_ptr<State> front = g_pending.front();
    g_pending.pop_front();
    if (!front->done) {
      front->done = true;
      front->done_ms = now;
    }
    if (front == state_) break;
  }
  state_->done = true;
  if (state_->done_ms == 0) state_->done_ms = now;
}

double QueueMarker::completed_ms() const { return state_ ? state_->done_ms : 0; }

}  // namespace twgpu
