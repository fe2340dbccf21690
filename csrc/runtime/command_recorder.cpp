#include "runtime/command_recorder.h"

#include <algorithm>
#include <cstring>

#include "runtime/config.h"
#include "runtime/context.h"
#include "runtime/device_checks.h"
#include "runtime/graph_capture.h"
#include "runtime/error.h"
#include "runtime/pipeline_cache.h"
#include "runtime/profiler.h"

namespace twgpu {
namespace {
constexpr uint64_t kMaxUniformSlot = 1024;  // largest uniform struct a kernel may declare
constexpr uint64_t kInlineWriteBytes = 4096;  // uploads recorded through the arena, at most
}

CommandRecorder::CommandRecorder(Context& ctx) : ctx_(ctx) {
  ctx.touch_gl();
  max_batch_ = Config::get().max_batch;
  const uint32_t first = Config::get().eager_first_batch;
  first_batch_ = first ? std::min(first, max_batch_) : max_batch_;
  batch_limit_ = max_batch_;
  flush_after_ns_ = static_cast<uint64_t>(Config::get().eager_flush_us) * 1000;
  replay_first_batch_ = Config::get().replay_first_batch;
  align_ = ctx.caps().min_uniform_offset_alignment;
  arena_capacity_ = static_cast<uint64_t>(max_batch_) * 256 + kMaxUniformSlot;
  WGPUBufferDescriptor desc = {};
  desc.size = arena_capacity_;
  // CopySrc: small uploads ride in the arena too (write()).
  desc.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst | WGPUBufferUsage_CopySrc;
  arena_ = wgpuDeviceCreateBuffer(ctx.device(), &desc);
  arena_host_.resize(arena_capacity_);
}

void CommandRecorder::set_batches(uint32_t max_batch, uint32_t first_batch, uint32_t flush_us) {
  flush();
  max_batch_ = std::max<uint32_t>(1, max_batch);
  first_batch_ = first_batch ? std::min(first_batch, max_batch_) : max_batch_;
  flush_after_ns_ = static_cast<uint64_t>(flush_us) * 1000;
  batch_limit_ = max_batch_;  // (a full arena still submits early: its size stays)
}

void CommandRecorder::start_batch_clock() {
  if (pending_ == 0 && flush_after_ns_) batch_start_ns_ = DispatchProfiler::now_ns();
}

void CommandRecorder::ensure_encoder() {
  if (!encoder_) encoder_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
}

void CommandRecorder::ensure_pass() {
  ensure_encoder();
  if (!pass_) {
    pass_ = wgpuCommandEncoderBeginComputePass(encoder_, nullptr);
    bound_pipeline_ = nullptr;
  }
}

void CommandRecorder::end_pass() {
  if (pass_) {
    wgpuComputePassEncoderEnd(pass_);
    wgpuComputePassEncoderRelease(pass_);
    pass_ = nullptr;
  }
}

void CommandRecorder::dispatch(const Pipeline& p, const WGPUBuffer* buffers, const void* uniforms,
                               uint32_t gx, uint32_t gy, uint32_t gz,
                               const BufferWindow* windows) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  if (CapturedGraph* graph = CapturedGraph::active()) {
    graph->record_dispatch(p, buffers, uniforms, gx, gy, gz, windows);
    return;  // not counted: dispatches_recorded() counts eager launches only
  }
  uint64_t slot = (p.uniform_bytes + align_ - 1) / align_ * align_;
  // After a read-back the GPU is idle: with TORCH_WEBGPU_EAGER_FIRST_BATCH the first batch
  // goes out small so that the GPU works while the host records the rest, later ones
  // double towards max_batch (a submit costs the host tens of microseconds).
  if (pending_ == 0 && completed_submits_ == submit_count_) batch_limit_ = first_batch_;
  // With TORCH_WEBGPU_EAGER_FLUSH_US, a batch open for longer than that goes out now (the
  // GPU works on it while the host records what follows).
  const uint64_t now = flush_after_ns_ ? DispatchProfiler::now_ns() : 0;
  const bool overdue = flush_after_ns_ && pending_ && now - batch_start_ns_ > flush_after_ns_;
  if (pending_ >= batch_limit_ || arena_used_ + slot > arena_capacity_ || overdue) {
    flush();
    batch_limit_ = std::min(batch_limit_ * 2, max_batch_);
  }
  start_batch_clock();
  DispatchProfiler& profiler = DispatchProfiler::get();
  const bool profiled = profiler.active();
  if (profiled) {
    // While profiling, every dispatch runs in a pass of its own (profiler.h).
    end_pass();
    if (profiler.timing() == ProfilerTiming::Host) {
      flush();  // earlier work must not count towards this dispatch's time
    } else {
      const dawn::PassTimestampWrites* writes = profiler.next_timestamp_writes(p.label);
      if (!writes) {  // the query set is full: its batch goes first
        flush();
        writes = profiler.next_timestamp_writes(p.label);
      }
      ensure_encoder();
      WGPUComputePassDescriptor desc = {};
      desc.timestampWrites = reinterpret_cast<const WGPUComputePassTimestampWrites*>(writes);
      pass_ = wgpuCommandEncoderBeginComputePass(encoder_, &desc);
      bound_pipeline_ = nullptr;
    }
  }
  ensure_pass();
  if (bound_pipeline_ != &p) {
    wgpuComputePassEncoderSetPipeline(pass_, p.pipeline);
    bound_pipeline_ = &p;
  }
  WGPUBindGroup group = ctx_.pipelines().bind_group(p, buffers, arena_, windows);
  if (p.uniform_bytes) {
    std::memcpy(arena_host_.data() + arena_used_, uniforms, p.uniform_bytes);
    uint32_t offset = static_cast<uint32_t>(arena_used_);
    wgpuComputePassEncoderSetBindGroup(pass_, 0, group, 1, &offset);
    arena_used_ += slot;
  } else {
    wgpuComputePassEncoderSetBindGroup(pass_, 0, group, 0, nullptr);
  }
  wgpuComputePassEncoderDispatchWorkgroups(pass_, gx, gy, gz);
  ++pending_;
  ++dispatch_count_;
  if (profiled) {
    end_pass();
    if (profiler.timing() == ProfilerTiming::Host) {
      const uint64_t start = DispatchProfiler::now_ns();
      synchronize();
      profiler.add_host_record(p.label, start, DispatchProfiler::now_ns());
    }
  }
}

void CommandRecorder::copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst,
                           uint64_t dst_offset, uint64_t size) {
  if (size == 0) return;
  if (CapturedGraph* graph = CapturedGraph::active()) {
    graph->record_copy(src, src_offset, dst, dst_offset, size);
    return;
  }
  end_pass();
  ensure_encoder();
  start_batch_clock();
  wgpuCommandEncoderCopyBufferToBuffer(encoder_, src, src_offset, dst, dst_offset, size);
  ++pending_;
}

void CommandRecorder::flush() {
  WGPUCommandEncoder encoder = adopt_encoder();
  if (!encoder) return;
  DispatchProfiler& profiler = DispatchProfiler::get();
  const bool timestamps = profiler.active() && profiler.timing() == ProfilerTiming::Gpu;
  if (timestamps) profiler.resolve(encoder);
  WGPUCommandBuffer commands = wgpuCommandEncoderFinish(encoder, nullptr);
  wgpuCommandEncoderRelease(encoder);
  const uint64_t submit_ns = timestamps ? DispatchProfiler::now_ns() : 0;
  wgpuQueueSubmit(ctx_.queue(), 1, &commands);
  wgpuCommandBufferRelease(commands);
  ctx_.check_errors();
  if (timestamps) profiler.collect(submit_ns);
}

WGPUCommandEncoder CommandRecorder::adopt_encoder() {
  ctx_.queue_gate();  // a replay still being submitted goes first (submit_worker.h)
  if (!encoder_) return nullptr;
  ctx_.touch_gl();
  end_pass();
  // Queue order puts this upload after the previous batch and before the submit that
  // carries this one, so the arena can be reused from offset 0 every batch.
  if (arena_used_) wgpuQueueWriteBuffer(ctx_.queue(), arena_, 0, arena_host_.data(), arena_used_);
  WGPUCommandEncoder encoder = encoder_;
  encoder_ = nullptr;
  arena_used_ = 0;
  pending_ = 0;
  bound_pipeline_ = nullptr;
  ++submit_count_;
  return encoder;
}

void CommandRecorder::write(WGPUBuffer dst, uint64_t offset, const void* data, uint64_t size) {
  if (size == 0) return;
  if (CapturedGraph* graph = CapturedGraph::active()) {
    graph->record_write(dst, offset, data, size);
    return;
  }
  ctx_.touch_gl();
  // With work recorded and not yet submitted, a small upload goes into the uniform arena
  // and a copy out of it is recorded in program order: no submit (a scalar made with
  // torch.tensor(..., device=) inside a layer cost one per layer). The arena reaches the
  // GPU right before the batch's submit (adopt_encoder).
  const uint64_t slot = (size + align_ - 1) / align_ * align_;
  if (encoder_ && size <= kInlineWriteBytes && arena_used_ + slot <= arena_capacity_) {
    std::memcpy(arena_host_.data() + arena_used_, data, size);
    end_pass();
    start_batch_clock();
    wgpuCommandEncoderCopyBufferToBuffer(encoder_, arena_, arena_used_, dst, offset, size);
    arena_used_ += slot;
    ++pending_;
    return;
  }
  flush();  // queue writes run before anything submitted later: keep program order
  wgpuQueueWriteBuffer(ctx_.queue(), dst, offset, data, size);
}

void CommandRecorder::read(WGPUBuffer src, uint64_t offset, void* data, uint64_t size) {
  if (size == 0) return;
  if (CapturedGraph* graph = CapturedGraph::active())
    fail(ErrorKind::Internal, graph->host_read_message());
  ctx_.touch_gl();
  // While a checking kernel ran since the last read-back, its error word rides along
  // behind the data (device_checks.h).
  DeviceChecks& checks = ctx_.checks();
  const bool check = checks.armed();
  const uint64_t total = size + (check ? 4 : 0);
  if (total > staging_capacity_) {
    if (staging_) wgpuBufferRelease(staging_);
    uint64_t cap = staging_capacity_ ? staging_capacity_ : 1 << 16;
    while (cap < total) cap *= 2;
    cap = std::max(total, std::min(cap, ctx_.caps().max_buffer_size / 4 * 4));
    WGPUBufferDescriptor desc = {};
    desc.size = cap;
    desc.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    staging_ = wgpuDeviceCreateBuffer(ctx_.device(), &desc);
    staging_capacity_ = cap;
  }
  copy(src, offset, staging_, 0, size);
  if (check) copy(checks.buffer(), 0, staging_, size, 4);
  flush();
  struct Map { WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error; std::string message; } map;
  WGPUBufferMapCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* u1, void*) {
    auto* m = static_cast<Map*>(u1);
    m->status = status;
    m->message = from_view(message);
  };
  cb.userdata1 = &map;
  ctx_.wait(wgpuBufferMapAsync(staging_, WGPUMapMode_Read, 0, total, cb));
  if (map.status != WGPUMapAsyncStatus_Success)
    fail(ctx_.lost() ? ErrorKind::DeviceLost : ErrorKind::Internal,
         "torch_webgpu: reading back from the device failed: " + map.message);
  note_completed(submit_count_);  // the copy ran after everything submitted before it
  const void* mapped = wgpuBufferGetConstMappedRange(staging_, 0, total);
  std::memcpy(data, mapped, size);
  uint32_t error_word = 0;
  if (check) std::memcpy(&error_word, static_cast<const uint8_t*>(mapped) + size, 4);
  wgpuBufferUnmap(staging_);
  if (check) checks.settle(error_word);
  settle_reads(submit_count_);  // (finished with everything before this read)
}

struct CommandRecorder::AsyncRead {
  WGPUBuffer staging = nullptr;
  uint64_t capacity = 0;
  uint64_t size = 0;
  uint64_t submit = 0;  // the submit that carries its copy
  WGPUFuture future{0};
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;
  std::function<void(const void*)> deliver;
  ~AsyncRead() {
    if (staging) wgpuBufferRelease(staging);
  }
};

CommandRecorder::~CommandRecorder() {
  for (auto& kept : free_staging_) wgpuBufferRelease(kept.second);
}

void CommandRecorder::read_async(WGPUBuffer src, uint64_t offset, uint64_t size,
                                 std::function<void(const void*)> deliver) {
  if (CapturedGraph* graph = CapturedGraph::active())
    fail(ErrorKind::Internal, graph->host_read_message());
  ctx_.touch_gl();
  auto read = std::make_unique<AsyncRead>();
  const uint64_t mapped = std::max<uint64_t>(size, 4);
  // A staging buffer from earlier reads where one fits: making and destroying one per read
  // costs the driver a memory allocation and a free (a per-token stop flag in generate
  // spent more host time there than in its work).
  // The smallest that fits, so that a small read does not take a large read's buffer.
  auto fits = free_staging_.end();
  for (auto it = free_staging_.begin(); it != free_staging_.end(); ++it)
    if (it->first >= mapped && (fits == free_staging_.end() || it->first < fits->first)) fits = it;
  if (fits != free_staging_.end()) {
    read->capacity = fits->first;
    read->staging = fits->second;
    free_staging_.erase(fits);
  } else {
    WGPUBufferDescriptor desc = {};
    desc.size = std::max<uint64_t>(256, uint64_t(1) << (64 - __builtin_clzll(mapped - 1)));
    desc.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    read->staging = wgpuDeviceCreateBuffer(ctx_.device(), &desc);
    read->capacity = desc.size;
  }
  read->size = size;
  read->deliver = std::move(deliver);
  if (size) copy(src, offset, read->staging, 0, size);
  flush();
  read->submit = submit_count_;
  WGPUBufferMapCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView, void* u1, void*) {
    static_cast<AsyncRead*>(u1)->status = status;
  };
  cb.userdata1 = read.get();
  read->future = wgpuBufferMapAsync(read->staging, WGPUMapMode_Read, 0, mapped, cb);
  async_reads_.push_back(std::move(read));
}

void CommandRecorder::settle_reads(uint64_t wait_upto) {
  while (!async_reads_.empty()) {
    AsyncRead& read = *async_reads_.front();
    WGPUFutureWaitInfo info = {read.future, 0};
    if (read.submit <= wait_upto) {
      ctx_.wait(read.future);
    } else {
      ctx_.touch_gl();
      if (wgpuInstanceWaitAny(ctx_.instance(), 1, &info, 0) != WGPUWaitStatus_Success || !info.completed) return;
    }
    // Taken off the queue first: a failed map must not be met again.
    std::unique_ptr<AsyncRead> done = std::move(async_reads_.front());
    async_reads_.pop_front();
    if (done->status != WGPUMapAsyncStatus_Success)
      fail(ctx_.lost() ? ErrorKind::DeviceLost : ErrorKind::Internal,
           "torch_webgpu: a non-blocking copy to the host failed");
    note_completed(done->submit);
    done->deliver(wgpuBufferGetConstMappedRange(done->staging, 0, std::max<uint64_t>(done->size, 4)));
    wgpuBufferUnmap(done->staging);
    keep_staging(*done);
  }
}

void CommandRecorder::keep_staging(AsyncRead& read) {
  // Small buffers only, a few of them: a large read-back's staging memory is given back.
  constexpr uint64_t kMaxKept = 1 << 20;
  constexpr size_t kMaxCount = 16;
  if (read.capacity > kMaxKept) return;
  if (free_staging_.size() >= kMaxCount) {
    wgpuBufferRelease(free_staging_.front().second);
    free_staging_.erase(free_staging_.begin());
  }
  free_staging_.emplace_back(read.capacity, read.staging);
  read.staging = nullptr;
}

void CommandRecorder::synchronize() {
  // A read-back of a tiny buffer waits for everything submitted before it. (This Dawn
  // build and our header disagree on onSubmittedWorkDone's callback signature.)
  if (!fence_) {
    WGPUBufferDescriptor desc = {};
    desc.size = 256;
    desc.usage = WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    fence_ = wgpuDeviceCreateBuffer(ctx_.device(), &desc);
  }
  uint32_t word = 0;
  read(fence_, 0, &word, sizeof(word));  // (settles every asynchronous read)
}

}  // namespace twgpu
