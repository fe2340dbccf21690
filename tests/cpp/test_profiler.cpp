// The runtime's dispatch profiler without torch: records name the running op and the
// kernel, their times are ordered and positive, results equal unprofiled ones, and GPU
// timing is refused (as an Unsupported error) on adapters without timestamp-query.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/elementwise.h"
#include "runtime/profiler.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

// y += 2 * x over n float32 values (in place), as one elementwise dispatch.
void accumulate(Context& ctx, Allocation* y, Allocation* x, int n) {
  ElementwiseLaunch l;
  l.op = "add";
  l.compute = Compute::F32;
  l.ndim = 1;
  l.sizes[0] = n;
  for (Allocation* a : {y, y, x}) {
    ElementwiseOperand op;
    op.buffer = a->buffer;
    op.dtype = DType::Float32;
    op.strides[0] = 1;
    l.operands.push_back(op);
  }
  l.params[0] = ScalarBits::from_f32(2.0f);
  launch_elementwise(ctx, l);
}

std::vector<float> run(Context& ctx, int repeats) {
  const int n = 64;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = 0.5f * i, y[i] = 1.0f - i;
  Allocation *ax = ctx.pool().allocate(n * 4), *ay = ctx.pool().allocate(n * 4);
  ctx.recorder().write(ax->buffer, 0, x.data(), n * 4);
  ctx.recorder().write(ay->buffer, 0, y.data(), n * 4);
  for (int r = 0; r < repeats; ++r) accumulate(ctx, ay, ax, n);
  std::vector<float> out(n);
  ctx.recorder().read(ay->buffer, 0, out.data(), n * 4);
  ctx.pool().release(ax);
  ctx.pool().release(ay);
  return out;
}

}  // namespace

TEST(Profiler, RecordsEachDispatchWithItsOpAndKernel) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const std::vector<float> expected = run(ctx, 3);
  DispatchProfiler& profiler = DispatchProfiler::get();
  for (ProfilerTiming timing : {ProfilerTiming::Host, ProfilerTiming::Gpu}) {
    if (timing == ProfilerTiming::Gpu && !ctx.caps().timestamp_query) continue;
    profiler.begin(ctx, timing);
    DispatchProfiler::push_op("outer");
    DispatchProfiler::push_op("my::op");
    const std::vector<float> got = run(ctx, 3);
    DispatchProfiler::pop_op();
    DispatchProfiler::pop_op();
    ctx.recorder().synchronize();
    const std::vector<DispatchRecord> records = profiler.records();
    profiler.end();
    EXPECT_FALSE(profiler.active());
    EXPECT_EQ(got, expected);
    ASSERT_EQ(records.size(), 3u);
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i].op, "my::op");
      EXPECT_EQ(records[i].kernel.rfind("ew:add", 0), 0u) << records[i].kernel;
      EXPECT_GT(records[i].end_ns, records[i].start_ns);
      if (i) EXPECT_GE(records[i].start_ns, records[i - 1].end_ns);
    }
  }
}

TEST(Profiler, NestedSessionsAndGpuTimingRefusal) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  DispatchProfiler& profiler = DispatchProfiler::get();
  profiler.begin(ctx, ProfilerTiming::Host);
  profiler.begin(ctx, ProfilerTiming::Gpu);  // joins: keeps the outer session's timing
  EXPECT_EQ(profiler.timing(), ProfilerTiming::Host);
  profiler.end();
  EXPECT_TRUE(profiler.active());
  profiler.end();
  EXPECT_FALSE(profiler.active());
  if (!ctx.caps().timestamp_query) {
    try {
      profiler.begin(ctx, ProfilerTiming::Gpu);
      FAIL() << "GPU timing began without timestamp-query";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find("timestamp-query"), std::string::npos);
    }
    EXPECT_FALSE(profiler.active());
  }
}
