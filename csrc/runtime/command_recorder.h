// Records dispatches into one open compute pass and submits them in batches.
// Uniforms for every dispatch of a batch live in one arena buffer, each at its own
// 256-byte-aligned dynamic offset; the arena is uploaded once, right before the submit.
// Nothing here waits on the GPU except read() and synchronize().
// While a graph captures (graph_capture.h), dispatch/copy/write go to it instead and
// read() raises.
#pragma once
#include <webgpu/webgpu.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace twgpu {

class Context;
struct Pipeline;
struct BufferWindow;

class CommandRecorder {
 public:
  explicit CommandRecorder(Context& ctx);
  ~CommandRecorder();

  // Records one dispatch. `buffers` holds pipeline.num_storage buffers in binding order;
  // `uniforms` holds pipeline.uniform_bytes bytes; `windows` (null: whole buffers) one
  // window per buffer.
  void dispatch(const Pipeline& pipeline, const WGPUBuffer* buffers, const void* uniforms,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1,
                const BufferWindow* windows = nullptr);
  // Records a buffer-to-buffer copy (offsets and size multiples of 4).
  void copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset,
            uint64_t size);
  // Uploads host bytes into a buffer after all recorded work (offset, size multiples of 4):
  // small ones through the uniform arena and a recorded copy, others by a queue write
  // after submitting what is recorded.
  void write(WGPUBuffer dst, uint64_t offset, const void* data, uint64_t size);
  // Reads bytes back after all recorded work completes (offset, size multiples of 4).
  void read(WGPUBuffer src, uint64_t offset, void* data, uint64_t size);
  // The same without waiting (copies to the host with non_blocking=True): the copy is
  // submitted into a staging buffer of its own, and `deliver` receives the bytes once
  // settle_reads() finds it done. Queue markers recorded after it, synchronize() and
  // read() settle it, so an event synchronized after the copy sees the bytes delivered.
  void read_async(WGPUBuffer src, uint64_t offset, uint64_t size, std::function<void(const void*)> deliver);
  // Delivers finished asynchronous reads in order: those submitted up to submit number
  // `wait_upto` after waiting for them, later ones only if already done.
  void settle_reads(uint64_t wait_upto);

  // Submits what was recorded. Cheap when nothing is pending.
  void flush();
  // The open encoder with what was recorded (null when nothing is), its uniforms uploaded,
  // for a caller that appends its own commands and submits them all at once (graph replay:
  // one submit instead of two; flush() submits it alone). Counts as a submit of this
  // recorder; the caller must submit it next.
  WGPUCommandEncoder adopt_encoder();
  // flush() and wait until the GPU has finished everything submitted.
  void synchronize();

  // Counts a submit made outside the recorder (a graph replay's) among submits().
  void note_submit() { ++submit_count_; }
  uint64_t dispatches_recorded() const { return dispatch_count_; }
  uint64_t submits() const { return submit_count_; }
  // Submits known finished on the GPU (a read-back or a completed queue marker saw them):
  // the queue is idle when this equals submits() and nothing is pending.
  uint64_t completed_submits() const { return completed_submits_; }
  void note_completed(uint64_t submits) {
    if (submits > completed_submits_) completed_submits_ = submits;
  }
  uint32_t pending() const { return pending_; }
  // Dispatches per submit from now on (TORCH_WEBGPU_MAX_BATCH / _EAGER_FIRST_BATCH's values;
  // first 0: no ramp): benchmarks alternate policies within one process. Submits first.
  // flush_us: TORCH_WEBGPU_EAGER_FLUSH_US's value (0: off).
  void set_batches(uint32_t max_batch, uint32_t first_batch, uint32_t flush_us);
  // Dispatches in a graph replay's first submit (TORCH_WEBGPU_REPLAY_FIRST_BATCH; later
  // submits double up to TORCH_WEBGPU_MAX_BATCH), switchable like set_batches.
  uint32_t replay_first_batch() const { return replay_first_batch_; }
  void set_replay_first_batch(uint32_t n) { replay_first_batch_ = std::max<uint32_t>(1, n); }

 private:
  // Notes when the open batch got its first command (TORCH_WEBGPU_EAGER_FLUSH_US's clock).
  void start_batch_clock();
  void ensure_encoder();
  void ensure_pass();
  void end_pass();

  Context& ctx_;
  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  const Pipeline* bound_pipeline_ = nullptr;
  uint32_t pending_ = 0;  // dispatches in the open batch
  uint32_t max_batch_;
  uint32_t first_batch_;  // the batch after a read-back (Config::eager_first_batch)
  uint32_t batch_limit_;  // this batch's: first_batch_ doubling up to max_batch_
  uint64_t flush_after_ns_ = 0;  // Config::eager_flush_us (0: off)
  uint32_t replay_first_batch_;
  uint64_t batch_start_ns_ = 0;  // when the open batch's first dispatch was recorded
  uint32_t align_;

  WGPUBuffer arena_ = nullptr;  // uniform arena on the device
  uint64_t arena_capacity_ = 0;
  std::vector<uint8_t> arena_host_;
  uint64_t arena_used_ = 0;

  WGPUBuffer staging_ = nullptr;  // MapRead buffer for read(), grown on demand
  uint64_t staging_capacity_ = 0;
  WGPUBuffer fence_ = nullptr;  // source of synchronize()'s read-back

  struct AsyncRead;
  std::deque<std::unique_ptr<AsyncRead>> async_reads_;  // in submit order
  // Unmapped staging buffers of finished asynchronous reads (capacity, buffer), reused.
  std::vector<std::pair<uint64_t, WGPUBuffer>> free_staging_;
  void keep_staging(AsyncRead& read);

  uint64_t dispatch_count_ = 0;
  uint64_t submit_count_ = 0;
  uint64_t completed_submits_ = 0;
};

}  // namespace twgpu
