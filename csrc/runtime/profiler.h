// Per-dispatch timing for torch.webgpu.profiler. While a session is active the command
// recorder asks it how to encode each dispatch:
//  - GPU timing (adapter has `timestamp-query`): every dispatch gets its own compute pass
//    whose timestampWrites mark its beginning and end; flush() resolves the query set,
//    and after the submit the times are read back (so each batch waits while profiling).
//  - Host timing (no timestamps, e.g. llvmpipe): every dispatch is submitted alone and
//    waited for; its time is the host's wall clock from submit to completion.
// Each record names the ATen op that issued it: the ATen layer keeps a per-thread stack of
// the ops running (push_op/pop_op) and the recorder reads its top.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <string>
#include <vector>

namespace twgpu {

class Context;

namespace dawn {
// Dawn's timestamp writes of a pass (WGPUPassTimestampWrites) begin with nextInChain,
// which the header's WGPUComputePassTimestampWrites lacks (this Dawn build validates the
// struct as extensible: dawn::native::ValidateAndUnpack<PassTimestampWrites>). Kept here
// rather than in dawn_extensions.h so adding it does not rebuild every file.
struct PassTimestampWrites {
  WGPUChainedStruct const* nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
};
}  // namespace dawn

struct DispatchRecord {
  std::string op;       // innermost ATen op running when the dispatch was recorded ("" if none)
  std::string kernel;   // pipeline label (the pipeline's cache key)
  uint64_t start_ns = 0;  // GPU: timestamp on the host clock (see below); host: submit time
  uint64_t end_ns = 0;
  uint64_t submit = 0;    // which submitted batch carried it (counts from 0 per session)
};

enum class ProfilerTiming { Host, Gpu };

class DispatchProfiler {
 public:
  // The process-wide profiler; sessions nest (begin/end pair up).
  static DispatchProfiler& get();

  // Starts a session, or joins the running one. Gpu timing needs `timestamp-query`
  // (fails with Error(Unsupported) otherwise). Call under the runtime lock.
  void begin(Context& ctx, ProfilerTiming timing);
  // Leaves a session; the outermost end() turns profiling off. Never throws. Call
  // under the runtime lock after the recorder has been synchronized.
  void end();
  bool active() const { return depth_ > 0; }
  ProfilerTiming timing() const { return timing_; }
  // Records completed in this session so far (timestamps of unsubmitted dispatches are
  // filled in by the next flush).
  const std::vector<DispatchRecord>& records() const { return records_; }

  // Per-thread stack of running ATen ops (names are copied).
  static void push_op(const char* name);
  static void pop_op();
  // The calling thread's running ops, outermost first ("aten::item > aten::_local_scalar_dense").
  static std::string running_ops();

  // ---- called by the CommandRecorder while active() ---------------------------------
  // GPU timing: a record for the dispatch about to be encoded, and the timestampWrites of
  // its own pass; nullptr when the query set is full (flush first, then ask again).
  const dawn::PassTimestampWrites* next_timestamp_writes(const std::string& kernel);
  // Host timing: a record for a dispatch submitted alone between start_ns and end_ns.
  void add_host_record(const std::string& kernel, uint64_t start_ns, uint64_t end_ns);
  // GPU timing: encodes the resolve of this batch's queries into `encoder` (before finish).
  void resolve(WGPUCommandEncoder encoder);
  // GPU timing: after the submit, reads this batch's timestamps back into the records.
  void collect(uint64_t submit_host_ns);
  // Host clock (steady, ns): the common time base of records and host op events.
  static uint64_t now_ns();

 private:
  DispatchProfiler() = default;
  void ensure_queries();

  Context* ctx_ = nullptr;
  int depth_ = 0;
  ProfilerTiming timing_ = ProfilerTiming::Host;
  std::vector<DispatchRecord> records_;
  uint64_t submits_ = 0;

  // GPU timing state: one query pair per dispatch of the open batch.
  WGPUQuerySet queries_ = nullptr;
  WGPUBuffer resolved_ = nullptr;  // QueryResolve | CopySrc
  WGPUBuffer readback_ = nullptr;  // MapRead | CopyDst
  uint32_t query_pairs_ = 0;       // capacity in dispatches
  uint32_t pairs_used_ = 0;        // dispatches in the open batch
  size_t first_pending_ = 0;       // index in records_ of the open batch's first dispatch
  size_t pending_begin_ = 0;       // records resolved by resolve(), read by collect()
  uint32_t pending_count_ = 0;
  dawn::PassTimestampWrites writes_ = {};
  // GPU ticks (ns) and the host clock differ in origin: the first batch's start is placed
  // at its submit time, and later batches keep the GPU clock's spacing.
  bool have_origin_ = false;
  int64_t gpu_to_host_ns_ = 0;
};

}  // namespace twgpu
