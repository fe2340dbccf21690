// A caching pool of storage buffers. One WGPUBuffer per allocation (up to maxBufferSize;
// kernels bind windows of larger ones), sized to a bucket (bucket_size: 512-byte blocks,
// then 8 steps per power of two below 1 MiB and 32 above); freed buffers wait in a free
// list for the next allocation of their bucket or one up to an eighth smaller. Unlike
// CUDA's segments, a buffer is never split between tensors: kernels bind whole buffers,
// and WebGPU rejects a dispatch that binds one buffer twice when either is writable.
// Every allocation also gets a synthetic device address so data_ptr() arithmetic on
// views works as it does on CUDA.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace twgpu {

class Context;

struct Allocation {
  WGPUBuffer buffer = nullptr;
  uint64_t capacity = 0;   // bytes in the buffer (the bucket size)
  uint64_t requested = 0;  // bytes the caller asked for
  uint64_t address = 0;    // synthetic device address of byte 0
  uint64_t generation = 0; // bumped each time the allocation is handed out
  bool live = false;       // handed out and not yet released
  bool grown = false;      // made with growth headroom (BufferPool::set_growth)
  uint32_t pins = 0;       // captured graphs naming its buffer: empty_cache keeps it
  struct PrivatePool* owner = nullptr;  // the graph pool it belongs to (null: global)
};

// Memory of captured graphs (graph_capture.h): allocations made while a graph captures
// come from here, and blocks freed into it are reused only by later allocations of
// captures into the same pool, never by eager code, so a replay cannot overwrite them.
struct PrivatePool {
  std::map<uint64_t, std::vector<Allocation*>> free;  // bucket size -> released blocks
  std::vector<Allocation*> owned;                     // every block it ever made
};

struct PoolStats {
  uint64_t allocated = 0;       // bytes of live allocations (bucket sizes, like CUDA's blocks)
  uint64_t reserved = 0;        // bytes held in buffers, live or cached
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  uint64_t requested = 0;       // bytes requested by live allocations
  uint64_t num_allocs = 0;      // allocations served since start
  uint64_t num_frees = 0;
  uint64_t num_device_allocs = 0;  // buffers created
  uint64_t num_device_frees = 0;   // buffers released to the driver
  uint64_t num_alloc_retries = 0;  // failed creations that emptied the cache and tried again
  uint64_t num_ooms = 0;           // allocations refused (out of memory or over the limit)
  uint64_t allocated_total = 0;    // bytes handed out since start (bucket sizes)
  uint64_t freed_total = 0;        // bytes given back since start
  uint64_t reserved_total = 0;     // bytes of buffers created since start
  uint64_t released_total = 0;     // bytes of buffers released to the driver since start
};

class BufferPool {
 public:
  explicit BufferPool(Context& ctx) : ctx_(ctx) {}
  ~BufferPool();

  // Throws Error(OutOfMemory) past maxBufferSize or when the driver refuses.
  Allocation* allocate(uint64_t nbytes);
  void release(Allocation* a);
  // Releases cached (free) buffers to the driver.
  void empty_cache();

  const PoolStats& stats() const { return stats_; }
  void reset_peak() {
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }
  void reset_accumulated() {
    stats_.num_allocs = stats_.num_frees = stats_.num_device_allocs = stats_.num_device_frees = 0;
    stats_.num_alloc_retries = stats_.num_ooms = 0;
    stats_.allocated_total = stats_.freed_total = 0;
    stats_.reserved_total = stats_.released_total = 0;
  }
  // Caps the bytes held in buffers (reserved, live or cached); 0: no cap. An allocation
  // that would pass it empties the cache first, then raises Error(OutOfMemory).
  void set_reserve_limit(uint64_t bytes) { reserve_limit_ = bytes; }
  uint64_t reserve_limit() const { return reserve_limit_; }

  // Headroom for tensors that grow step by step (a KV cache concatenated per token): a
  // request that finds no cached buffer but one just below its size (at least 3/4 of it)
  // gets a buffer `fraction` larger, and such buffers serve requests up to that much
  // smaller. 0: off (every request gets its bucket).
  void set_growth(double fraction) { growth_ = fraction; }
  double growth() const { return growth_; }

  // The allocation whose synthetic address range holds `address` (live or cached), or null:
  // for storages that PyTorch made from a raw device pointer (at::from_blob).
  Allocation* find(uint64_t address) const;

  // Every buffer held, by address: its allocation and whether it is live (else cached).
  // For torch.webgpu.memory_snapshot().
  struct Segment {
    uint64_t address, capacity, requested;
    bool active;
  };
  std::vector<Segment> segments() const;
  // While set, allocate() serves from `pool` (its free blocks, else new buffers) and
  // marks what it hands out as the pool's.
  void set_capture_pool(PrivatePool* pool) { capture_pool_ = pool; }
  // Gives a private pool's blocks back: free ones to the global free lists, live ones
  // return there when their tensors die.
  void release_private(PrivatePool* pool);
  // The pool allocation behind `buffer`, or null (buffers the pool did not make).
  Allocation* find_buffer(WGPUBuffer buffer) const;

  // The buffer size for a request of `nbytes`: what "allocated" counts for it.
  static uint64_t bucket_size(uint64_t nbytes);
  static uint64_t size_of(WGPUBuffer buffer);
  // True while some buffer exceeds one storage binding: only then do kernel launches
  // need binding windows (kernels/binding_window.h).
  bool has_oversized() const { return oversized_ != 0; }

 private:
  WGPUBuffer create_buffer(uint64_t size);
  void check_reserve_limit(uint64_t nbytes, uint64_t size);
  // Files a freed block in its free list, which is kept in descending address order.
  static void keep_free(std::vector<Allocation*>& list, Allocation* a);
  // A cached block for a request of bucket `size`; null when none fits.
  Allocation* take_free(std::map<uint64_t, std::vector<Allocation*>>& lists, uint64_t size,
                        uint64_t widest);
  // True when a cached block lies just below `size`: the request outgrew its predecessor.
  bool outgrew_cached(const std::map<uint64_t, std::vector<Allocation*>>& lists, uint64_t size) const;

  Context& ctx_;
  std::map<uint64_t, std::vector<Allocation*>> free_;  // bucket size -> cached allocations
  std::map<uint64_t, Allocation*> by_address_;  // every buffer held, by its first address
  std::unordered_map<WGPUBuffer, Allocation*> by_buffer_;
  PrivatePool* capture_pool_ = nullptr;
  PoolStats stats_;
  uint64_t reserve_limit_ = 0;
  double growth_ = 0.0;
  uint64_t next_address_ = 1ull << 44;
  uint64_t oversized_ = 0;  // buffers larger than caps().max_storage_binding_size
};

}  // namespace twgpu
