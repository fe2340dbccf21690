// Queue markers (the events of torch.webgpu), the pool's reserve limit (the per-process
// memory fraction) and device memory info, with no torch.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/device_memory.h"
#include "runtime/queue_marker.h"
#include "runtime/runtime.h"

using namespace twgpu;

TEST(QueueMarker, UnrecordedIsComplete) {
  RuntimeLock lock;
  QueueMarker m;
  EXPECT_FALSE(m.recorded());
  EXPECT_TRUE(m.query(lock.ctx()));
  m.synchronize(lock.ctx());  // nothing to wait for
}

TEST(QueueMarker, CompletesInQueueOrderWithOrderedTimes) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  // Work between the markers: a large upload and copies through the queue.
  const uint64_t bytes = 8u << 20;
  Allocation* a = ctx.pool().allocate(bytes);
  Allocation* b = ctx.pool().allocate(bytes);
  std::vector<uint32_t> data(bytes / 4, 7u);
  QueueMarker first, second;
  first.record(ctx);
  ctx.recorder().write(a->buffer, 0, data.data(), bytes);
  for (int i = 0; i < 8; ++i) ctx.recorder().copy(a->buffer, 0, b->buffer, 0, bytes);
  second.record(ctx);
  second.synchronize(ctx);
  EXPECT_TRUE(second.query(ctx));
  EXPECT_TRUE(first.query(ctx));  // queue order: the earlier marker is done too
  EXPECT_GT(first.completed_ms(), 0.0);
  EXPECT_GE(second.completed_ms(), first.completed_ms());
  EXPECT_LE(second.completed_ms(), host_clock_ms());
  uint32_t word = 0;
  ctx.recorder().read(b->buffer, bytes - 4, &word, 4);
  EXPECT_EQ(word, 7u);
  ctx.pool().release(a);
  ctx.pool().release(b);
}

TEST(BufferPool, ReserveLimitEmptiesCacheThenRefuses) {
  RuntimeLock lock;
  BufferPool& pool = lock.ctx().pool();
  pool.empty_cache();
  const uint64_t base = pool.stats().reserved;
  pool.set_reserve_limit(base + (3u << 20));
  Allocation* two = pool.allocate(2u << 20);
  pool.release(two);  // cached: still reserved
  EXPECT_EQ(pool.stats().reserved, base + (2u << 20));
  // 2.5 MiB fits only once the cached 2 MiB buffer is given back.
  Allocation* fits = pool.allocate((5u << 20) / 2);
  EXPECT_EQ(pool.stats().reserved, base + (5u << 20) / 2);
  const uint64_t ooms = pool.stats().num_ooms;
  try {
    pool.allocate(1u << 20);
    FAIL() << "expected the reserve limit to refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("set_per_process_memory_fraction"), std::string::npos);
  }
  EXPECT_EQ(pool.stats().num_ooms, ooms + 1);
  pool.set_reserve_limit(0);
  Allocation* after = pool.allocate(1u << 20);  // no limit: works again
  pool.release(after);
  pool.release(fits);
}

TEST(DeviceMemory, FreeWithinTotal) {
  RuntimeLock lock;
  DeviceMemory m = device_memory(lock.ctx());
  EXPECT_GT(m.total, 0u);
  EXPECT_LE(m.free, m.total);
  EXPECT_TRUE(std::string(m.source) == "adapter" || std::string(m.source) == "system");
}
