#include "runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/config.h"
#include "runtime/context.h"
#include "runtime/error.h"

namespace twgpu {
namespace {

// WebGPU allows at most 4096 queries in one set: two per dispatch.
constexpr uint32_t kMaxQueryPairs = 2048;

thread_local std::vector<std::string> t_running_ops;

std::string current_op() { return t_running_ops.empty() ? std::string() : t_running_ops.back(); }

}  // namespace

DispatchProfiler& DispatchProfiler::get() {
  static DispatchProfiler profiler;
  return profiler;
}

uint64_t DispatchProfiler::now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void DispatchProfiler::push_op(const char* name) { t_running_ops.emplace_back(name ? name : ""); }

std::string DispatchProfiler::running_ops() {
  std::string out;
  for (const std::string& op : t_running_ops) out += (out.empty() ? "" : " > ") + op;
  return out;
}

void DispatchProfiler::pop_op() {
  if (!t_running_ops.empty()) t_running_ops.pop_back();
}

void DispatchProfiler::begin(Context& ctx, ProfilerTiming timing) {
  if (depth_ > 0) {
    // A nested session shares the outer one's timing: the recorder can encode one way.
    ++depth_;
    return;
  }
  if (timing == ProfilerTiming::Gpu && !ctx.caps().timestamp_query)
    fail(ErrorKind::Unsupported,
         "torch.webgpu.profiler: GPU timing needs the 'timestamp-query' feature, which the "
         "adapter '" + ctx.adapter().name + "' lacks; use timing='host' (or 'auto')");
  ctx_ = &ctx;
  timing_ = timing;
  records_.clear();
  submits_ = 0;
  pairs_used_ = 0;
  pending_count_ = 0;
  have_origin_ = false;
  gpu_to_host_ns_ = 0;
  if (timing_ == ProfilerTiming::Gpu) ensure_queries();
  depth_ = 1;
}

void DispatchProfiler::end() {
  if (depth_ > 0) --depth_;
}

void DispatchProfiler::ensure_queries() {
  if (queries_) return;
  query_pairs_ = std::min<uint32_t>(kMaxQueryPairs, std::max<uint32_t>(1, Config::get().max_batch));
  const uint64_t bytes = static_cast<uint64_t>(query_pairs_) * 2 * sizeof(uint64_t);
  WGPUQuerySetDescriptor qdesc = {};
  qdesc.label = WGPUStringView{"torch_webgpu profiler", WGPU_STRLEN};
  qdesc.type = WGPUQueryType_Timestamp;
  qdesc.count = query_pairs_ * 2;
  queries_ = wgpuDeviceCreateQuerySet(ctx_->device(), &qdesc);
  WGPUBufferDescriptor desc = {};
  desc.size = bytes;
  desc.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
  resolved_ = wgpuDeviceCreateBuffer(ctx_->device(), &desc);
  desc.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
  readback_ = wgpuDeviceCreateBuffer(ctx_->device(), &desc);
  ctx_->check_errors();
}

const dawn::PassTimestampWrites* DispatchProfiler::next_timestamp_writes(
    const std::string& kernel) {
  if (pairs_used_ >= query_pairs_) return nullptr;
  if (pairs_used_ == 0) first_pending_ = records_.size();
  DispatchRecord r;
  r.op = current_op();
  r.kernel = kernel;
  r.submit = submits_;
  records_.push_back(std::move(r));
  writes_.querySet = queries_;
  writes_.beginningOfPassWriteIndex = pairs_used_ * 2;
  writes_.endOfPassWriteIndex = pairs_used_ * 2 + 1;
  ++pairs_used_;
  return &writes_;
}

void DispatchProfiler::add_host_record(const std::string& kernel, uint64_t start_ns,
                                       uint64_t end_ns) {
  DispatchRecord r;
  r.op = current_op();
  r.kernel = kernel;
  r.start_ns = start_ns;
  r.end_ns = std::max(end_ns, start_ns + 1);  // a recorded dispatch never takes zero time
  r.submit = submits_++;
  records_.push_back(std::move(r));
}

void DispatchProfiler::resolve(WGPUCommandEncoder encoder) {
  if (pairs_used_ == 0) return;
  const uint64_t bytes = static_cast<uint64_t>(pairs_used_) * 2 * sizeof(uint64_t);
  wgpuCommandEncoderResolveQuerySet(encoder, queries_, 0, pairs_used_ * 2, resolved_, 0);
  wgpuCommandEncoderCopyBufferToBuffer(encoder, resolved_, 0, readback_, 0, bytes);
  pending_begin_ = first_pending_;
  pending_count_ = pairs_used_;
  pairs_used_ = 0;
}

void DispatchProfiler::collect(uint64_t submit_host_ns) {
  const uint32_t count = pending_count_;
  pending_count_ = 0;
  const uint64_t batch = submits_++;
  if (count == 0) return;
  const uint64_t bytes = static_cast<uint64_t>(count) * 2 * sizeof(uint64_t);
  struct Map { WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error; } map;
  WGPUBufferMapCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView, void* u1, void*) {
    static_cast<Map*>(u1)->status = status;
  };
  cb.userdata1 = &map;
  ctx_->wait(wgpuBufferMapAsync(readback_, WGPUMapMode_Read, 0, bytes, cb));
  if (map.status != WGPUMapAsyncStatus_Success)
    fail(ctx_->lost() ? ErrorKind::DeviceLost : ErrorKind::Internal,
         "torch.webgpu.profiler: reading the timestamp queries back failed");
  std::vector<uint64_t> ticks(count * 2);
  std::memcpy(ticks.data(), wgpuBufferGetConstMappedRange(readback_, 0, bytes), bytes);
  wgpuBufferUnmap(readback_);
  // Dawn resolves timestamps to nanoseconds. Place the batch on the host clock no earlier
  // than its submit, keeping the GPU clock's spacing between batches where it allows.
  const int64_t offset = static_cast<int64_t>(submit_host_ns) - static_cast<int64_t>(ticks[0]);
  if (!have_origin_ || offset > gpu_to_host_ns_) gpu_to_host_ns_ = offset;
  have_origin_ = true;
  for (uint32_t i = 0; i < count && pending_begin_ + i < records_.size(); ++i) {
    DispatchRecord& r = records_[pending_begin_ + i];
    const uint64_t begin = ticks[2 * i];
    const uint64_t end = std::max(ticks[2 * i + 1], begin);
    r.start_ns = static_cast<uint64_t>(static_cast<int64_t>(begin) + gpu_to_host_ns_);
    r.end_ns = static_cast<uint64_t>(static_cast<int64_t>(end) + gpu_to_host_ns_);
    r.submit = batch;
  }
}

}  // namespace twgpu
