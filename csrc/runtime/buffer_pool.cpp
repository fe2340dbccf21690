#include "runtime/buffer_pool.h"

#include <algorithm>

#include "runtime/command_recorder.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/pipeline_cache.h"

namespace twgpu {

std::vector<BufferPool::Segment> BufferPool::segments() const {
  std::vector<Segment> out;
  out.reserve(by_address_.size());
  for (const auto& [address, a] : by_address_)
    out.push_back({address, a->capacity, a->live ? a->requested : 0, a->live});
  return out;
}

// Growth headroom applies up to this size: past it, the headroom would be real memory.
constexpr uint64_t kGrowthMax = 64ull << 20;

uint64_t BufferPool::bucket_size(uint64_t nbytes) {
  // Blocks of 512 bytes, as CUDA's caching allocator rounds; past that, steps that grow
  // with the size so a tensor that grows a little (a KV cache per token) still finds its
  // freed predecessor's bucket: 8 per octave below 1 MiB (at most 12.5% slack, under
  // 128 KiB) and 32 above, where the weights live (at most 3.1%: odd widths such as
  // Qwen2.5's 896 x 151936 embedding took up to 25% under four steps per octave).
  const uint64_t kBlock = 512, kFinely = 1ull << 20;
  if (nbytes <= kBlock) return kBlock;
  const uint64_t octave = 1ull << (63 - __builtin_clzll(nbytes));
  const uint64_t step = std::max(kBlock, octave / (octave < kFinely ? 8 : 32));
  return (nbytes + step - 1) / step * step;
}

BufferPool::~BufferPool() = default;

uint64_t BufferPool::size_of(WGPUBuffer buffer) { return wgpuBufferGetSize(buffer); }

WGPUBuffer BufferPool::create_buffer(uint64_t size) {
  ctx_.touch_gl();
  WGPUBufferDescriptor desc = {};
  desc.size = size;
  desc.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
  wgpuDevicePushErrorScope(ctx_.device(), WGPUErrorFilter_OutOfMemory);
  WGPUBuffer buffer = wgpuDeviceCreateBuffer(ctx_.device(), &desc);
  struct Scope { bool oom = false, done = false; } scope;
  WGPUPopErrorScopeCallbackInfo cb = {};
  // Dawn knows a creation's errors when the scope is popped and may answer at once; a
  // wait (an event-loop turn) only where it has not.
  cb.mode = WGPUCallbackMode_AllowSpontaneous;
  cb.callback = [](WGPUPopErrorScopeStatus, WGPUErrorType type, WGPUStringView, void* u1, void*) {
    static_cast<Scope*>(u1)->oom = type == WGPUErrorType_OutOfMemory;
    static_cast<Scope*>(u1)->done = true;
  };
  cb.userdata1 = &scope;
  WGPUFuture popped = wgpuDevicePopErrorScope(ctx_.device(), cb);
  if (!scope.done) ctx_.wait(popped);
  if (scope.oom) {
    if (buffer) wgpuBufferRelease(buffer);
    return nullptr;
  }
  return buffer;
}

Allocation* BufferPool::allocate(uint64_t nbytes) {
  ctx_.check_errors();
  // Kernels bind windows of at most one storage binding (kernels/binding_window.h), so
  // only maxBufferSize bounds a buffer.
  const uint64_t limit = ctx_.caps().max_buffer_size / 4 * 4;
  if (nbytes > limit) {
    stats_.num_ooms++;
    fail(ErrorKind::OutOfMemory,
         "WebGPU out of memory: tried to allocate " + std::to_string(nbytes) +
             " bytes, more than one buffer may hold on this device (maxBufferSize: " +
             std::to_string(limit) + " bytes). Allocated: " + std::to_string(stats_.allocated) +
             " bytes; reserved: " + std::to_string(stats_.reserved) + " bytes.");
  }
  uint64_t size = std::min(bucket_size(nbytes), limit);
  // A request that fits one storage binding gets a buffer that does too: kernels that do
  // not split their work bind such buffers whole (a bucket may round past the binding).
  const uint64_t binding = ctx_.caps().max_storage_binding_size / 4 * 4;
  if (nbytes <= binding && size > binding) size = binding;
  Allocation* a = nullptr;
  bool grown = false;
  // A capture takes only its own pool's blocks: a global free block may still be named
  // by another graph, which would then overwrite it on replay.
  auto& free_lists = capture_pool_ ? capture_pool_->free : free_;
  // Its own bucket, else the smallest cached buffer at most an eighth larger: buckets are
  // fine, so shapes that vary a little would otherwise each keep a buffer of their own.
  const uint64_t widest = nbytes <= binding ? std::min(size + size / 8, binding) : size + size / 8;
  a = take_free(free_lists, size, widest);
  if (!a && !capture_pool_ && growth_ > 0 && size <= kGrowthMax && outgrew_cached(free_lists, size)) {
    // Likely a tensor that grows each step: room for the next few steps, so that a cache
    // concatenated per token makes a buffer (and its bind groups) every few tokens instead
    // of every bucket step. Buffers are never split, so this is the pool's only way to
    // serve growth without the driver, as CUDA's segments do.
    uint64_t roomy = bucket_size(size + static_cast<uint64_t>(double(size) * growth_));
    if (nbytes <= binding) roomy = std::min(roomy, binding);
    roomy = std::max(size, std::min(roomy, limit));
    // Never the reason a set_per_process_memory_fraction limit is reached.
    if (!reserve_limit_ || stats_.reserved + roomy <= reserve_limit_) {
      size = roomy;
      grown = true;
    }
  }
  if (!a) {
    check_reserve_limit(nbytes, size);
    WGPUBuffer buffer = create_buffer(size);
    if (!buffer) {
      // Give the cached buffers back and try once more, as CUDA's caching allocator does.
      stats_.num_alloc_retries++;
      empty_cache();
      buffer = create_buffer(size);
    }
    if (!buffer) {
      stats_.num_ooms++;
      fail(ErrorKind::OutOfMemory,
           "WebGPU out of memory: tried to allocate " + std::to_string(nbytes) +
               " bytes. Allocated: " + std::to_string(stats_.allocated) +
               " bytes; reserved: " + std::to_string(stats_.reserved) + " bytes.");
    }
    a = new Allocation();
    a->buffer = buffer;
    a->capacity = size;
    a->grown = grown;
    a->address = next_address_;
    by_address_[a->address] = a;
    by_buffer_[buffer] = a;
    if (capture_pool_) {
      a->owner = capture_pool_;
      capture_pool_->owned.push_back(a);
    }
    // Leave a gap after each allocation so no pointer into one can alias the next.
    next_address_ += (size + (1ull << 20) + 0xFFFFF) & ~0xFFFFFull;
    stats_.reserved += size;
    stats_.reserved_total += size;
    if (size > ctx_.caps().max_storage_binding_size) oversized_++;
    stats_.num_device_allocs++;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  a->requested = nbytes;
  a->generation++;
  a->live = true;
  stats_.allocated += a->capacity;
  stats_.allocated_total += a->capacity;
  stats_.requested += nbytes;
  stats_.num_allocs++;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return a;
}

Allocation* BufferPool::take_free(std::map<uint64_t, std::vector<Allocation*>>& lists, uint64_t size,
                                  uint64_t widest) {
  for (auto it = lists.lower_bound(size); it != lists.end() && it->first <= widest; ++it) {
    if (it->second.empty()) continue;
    Allocation* a = it->second.back();
    it->second.pop_back();
    return a;
  }
  if (growth_ <= 0) return nullptr;
  // A buffer made with headroom also serves requests up to its headroom smaller (the next
  // steps of the tensor it grew for).
  const uint64_t roomiest = widest + static_cast<uint64_t>(double(size) * growth_);
  for (auto it = lists.upper_bound(widest); it != lists.end() && it->first <= roomiest; ++it) {
    auto& list = it->second;
    for (auto a = list.rbegin(); a != list.rend(); ++a)
      if ((*a)->grown) {
        Allocation* found = *a;
        list.erase(std::next(a).base());
        return found;
      }
  }
  return nullptr;
}

bool BufferPool::outgrew_cached(const std::map<uint64_t, std::vector<Allocation*>>& lists,
                                uint64_t size) const {
  for (auto it = lists.lower_bound(size - size / 4); it != lists.end() && it->first < size; ++it)
    if (!it->second.empty()) return true;
  return false;
}

void BufferPool::check_reserve_limit(uint64_t nbytes, uint64_t size) {
  if (!reserve_limit_ || stats_.reserved + size <= reserve_limit_) return;
  stats_.num_alloc_retries++;
  empty_cache();  // cached buffers count against the limit: give them back first
  if (stats_.reserved + size <= reserve_limit_) return;
  stats_.num_ooms++;
  fail(ErrorKind::OutOfMemory,
       "WebGPU out of memory: tried to allocate " + std::to_string(nbytes) + " bytes (a " +
           std::to_string(size) + "-byte buffer), which would take this process past its "
           "limit of " + std::to_string(reserve_limit_) + " bytes set by "
           "torch.webgpu.set_per_process_memory_fraction(). Allocated: " +
           std::to_string(stats_.allocated) + " bytes; reserved: " +
           std::to_string(stats_.reserved) + " bytes. Free tensors, or raise the fraction.");
}

void BufferPool::release(Allocation* a) {
  if (!a) return;
  stats_.allocated -= a->capacity;
  stats_.freed_total += a->capacity;
  stats_.requested -= a->requested;
  stats_.num_frees++;
  a->live = false;
  // Reuse is safe without waiting: all work runs in queue order on one queue.
  keep_free((a->owner ? a->owner->free : free_)[a->capacity], a);
}

void BufferPool::keep_free(std::vector<Allocation*>& list, Allocation* a) {
  // Highest address first, so pop_back() hands out the lowest: which free buffer an
  // allocation gets depends on which are free, not on the order they were freed in. A
  // decode step then gets the same buffers each token, and the bind groups its kernels
  // made last token are found again instead of made anew.
  list.insert(std::upper_bound(list.begin(), list.end(), a,
                               [](const Allocation* x, const Allocation* y) { return x->address > y->address; }),
              a);
}

void BufferPool::release_private(PrivatePool* pool) {
  if (capture_pool_ == pool) capture_pool_ = nullptr;
  for (Allocation* a : pool->owned) a->owner = nullptr;
  for (auto& entry : pool->free)
    for (Allocation* a : entry.second) keep_free(free_[a->capacity], a);
  pool->free.clear();
  pool->owned.clear();
}

Allocation* BufferPool::find_buffer(WGPUBuffer buffer) const {
  auto it = by_buffer_.find(buffer);
  return it == by_buffer_.end() ? nullptr : it->second;
}

Allocation* BufferPool::find(uint64_t address) const {
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin()) return nullptr;
  Allocation* a = std::prev(it)->second;
  return address < a->address + a->capacity ? a : nullptr;
}

void BufferPool::empty_cache() {
  bool any = false;
  for (auto& entry : free_) any |= !entry.second.empty();
  if (!any) return;
  // Recorded-but-unsubmitted work may still name these buffers.
  ctx_.touch_gl();
  ctx_.recorder().flush();
  for (auto& entry : free_) {
    std::vector<Allocation*> pinned;  // named by a captured graph: kept until it resets
    for (Allocation* a : entry.second) {
      if (a->pins) {
        pinned.push_back(a);
        continue;
      }
      ctx_.pipelines().forget_buffer(a->buffer);
      wgpuBufferRelease(a->buffer);
      stats_.reserved -= a->capacity;
      stats_.released_total += a->capacity;
      if (a->capacity > ctx_.caps().max_storage_binding_size) oversized_--;
      stats_.num_device_frees++;
      by_address_.erase(a->address);
      by_buffer_.erase(a->buffer);
      delete a;
    }
    entry.second.swap(pinned);
  }
}

}  // namespace twgpu
