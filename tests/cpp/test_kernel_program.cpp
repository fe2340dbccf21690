// The shared kernel frame: a per-invocation kernel over more invocations than one grid row
// holds, and a per-workgroup kernel with shared memory and barriers, against host results.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

using namespace twgpu;

TEST(KernelProgram, InvocationGridCoversEveryIndexOnce) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t n = 70001;
  Allocation* out = ctx.pool().allocate(n * 4);
  KernelLaunch l;
  l.key = "test:iota";
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  static const UniformLayout layout({{"addend"}});
  l.declare(layout).set_u32("addend", 7u);
  l.count = n;
  l.workgroup = 256;
  l.body = [&] {
    return kernel_store("store", l.buffers, 0, DType::Int32, Compute::I32) +
           kernel_main(Grid::Invocations, 256) + "  store(idx, i32(idx + u.addend));\n}\n";
  };
  launch_kernel(ctx, l);
  std::vector<int32_t> host(n);
  ctx.recorder().read(out->buffer, 0, host.data(), n * 4);
  ctx.pool().release(out);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(host[i], static_cast<int32_t>(i + 7)) << i;
}

TEST(KernelProgram, GroupGridReducesWithSharedMemory) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t rows = 300, cols = 1000;
  std::vector<int32_t> x(rows * cols);
  std::iota(x.begin(), x.end(), -5000);
  Allocation* in = ctx.pool().allocate(x.size() * 4);
  Allocation* out = ctx.pool().allocate(rows * 4);
  ctx.recorder().write(in->buffer, 0, x.data(), x.size() * 4);
  KernelLaunch l;
  l.key = "test:rowsum";
  l.buffers = {{in->buffer, Access::Read, false}, {out->buffer, Access::ReadWrite, false}};
  static const UniformLayout layout({{"cols"}});
  l.declare(layout).set_u32("cols", cols);
  l.grid = Grid::Groups;
  l.count = rows;
  l.workgroup = 64;
  l.body = [&] {
    return kernel_load("load", l.buffers, 0, DType::Int32) +
           kernel_store("store", l.buffers, 1, DType::Int32, Compute::I32) +
           "var<workgroup> part: array<i32, 64>;\n" + kernel_main(Grid::Groups, 64) +
           "  var s = 0;\n"
           "  if (group < frame_count()) {\n"
           "    for (var c = lid; c < u.cols; c = c + 64u) { s = s + load(group * u.cols + c); }\n"
           "  }\n"
           "  part[lid] = s;\n"
           "  workgroupBarrier();\n"
           "  for (var w = 32u; w > 0u; w = w >> 1u) {\n"
           "    if (lid < w) { part[lid] = part[lid] + part[lid + w]; }\n"
           "    workgroupBarrier();\n"
           "  }\n"
           "  if (lid == 0u && group < frame_count()) { store(group, part[0]); }\n}\n";
  };
  launch_kernel(ctx, l);
  std::vector<int32_t> host(rows);
  ctx.recorder().read(out->buffer, 0, host.data(), rows * 4);
  ctx.pool().release(in);
  ctx.pool().release(out);
  for (uint32_t r = 0; r < rows; ++r) {
    int64_t want = 0;
    for (uint32_t c = 0; c < cols; ++c) want += x[r * cols + c];
    ASSERT_EQ(host[r], static_cast<int32_t>(want)) << r;
  }
}

TEST(KernelProgram, RefusesABodyOfAnotherWorkgroupSize) {
  // The grid is computed from the launch's workgroup size: a body declaring another one
  // would silently skip or repeat invocations, so the frame refuses it.
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  KernelLaunch l;
  l.key = "test:workgroup_mismatch";
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = 64;
  l.workgroup = 128;
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = idx;\n}\n"; };
  EXPECT_THROW(launch_kernel(ctx, l), Error);
  ctx.pool().release(out);
}
